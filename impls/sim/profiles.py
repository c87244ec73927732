"""Timing profiles: how much simulated compute a worker's step costs, and how much its
messages weigh.

The simulated platform runs the stand-in workload's real math; the profile decides
what that math *costs* (``profile: {name: ...}``):

* ``measured`` - this machine: the stand-in's uncontended single-rank forward/backward
  time per sample (one thread, fastest of 20 steps after 3 warm-up steps: other load on
  the machine only ever adds time; under the workload's ``precision``;
  :func:`impls.runtime.throughput.time_steps`), calibrated
  once per workload and machine and cached (``--calibration`` file), so every run of a
  pipeline charges the same number; it is recorded in each run's provenance.  A damaged
  cache is set aside (``<file>.unreadable-<time>``, with a warning) and measured again.  A step
  costs ``sample_us x batch rows``; messages weigh their real bytes.
* ``fixed`` - a given compute time per step (``step_ms``) and, optionally, a model size
  (``model_mb``) the messages are scaled to.  For what-if studies and tests, and for your
  own hardware: ``python -m impls.sim.calibrate`` times a real model's step here and prints
  the entry (:mod:`impls.sim.calibrate`; every row of ``results/bench/
  workload_throughput.csv`` carries it too).
* ``resnet50_v100x8`` - ResNet-50 on one 8-V100 node (the SGP / SlowMo clusters, 256
  images per node and step).  Model: 25,557,032 fp32 parameters (torchvision's
  model card) = 102.228 MB.  Compute: **from one published row only**, SlowMo
  (Wang et al. 2020) Table 2a AR-SGD at 32 nodes on 10 GbE, 420 ms per iteration,
  minus the ring all-reduce of the model among 32 hosts of the ``ethernet_10g`` preset
  as this simulator times it (174.6 ms; the alpha-beta formula
  ``2 x 31 x (50 us + 102.228 MB / (32 x 1.155 GB/s))`` gives 174.6 ms too):
  ``step_ms`` = 245.4.  The same table's SGP (304 ms) and OSGP (271 ms) rows are then
  predictions of the network model (``bench/slowmo_table2a``).  Not given by the
  papers, and chosen here: the node's 8 GPUs are one simulated host (intra-node
  all-reduce over NVLink is folded into the compute time), and gradients travel in
  fp32.
* ``resnet50_v100x1`` - ResNet-50 on one single-V100 machine (the signSGD-MV cluster:
  Bernstein et al., ICLR 2019, 15 AWS p3.2xlarge machines, one V100 16 GB each, network
  "up to 10 Gbit/s": use ``ethernet_10g``).  Batch 128 per worker (the paper's code,
  github.com/jiaweizzhao/signSGD-with-Majority-Vote README: ``-a resnet50 -b 128``).
  Compute from NVIDIA's published single-GPU throughput, not fitted to any row of the
  paper: ResNet-50 v1.5 FP32 training on 1x V100 16 GB, 367 img/s (NVIDIA
  DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5 README, "DGX-1 16GB"
  table), so ``step_ms`` = 128 / 367 s = 348.8.  Model as ``resnet50_v100x8``.  Not given:
  the paper's fp32 or fp16 arithmetic and its data loading (the throughput is NVIDIA's
  DALI pipeline); ResNet-50 v1 is ~5 % faster than the v1.5 the table is for.
* ``transformer_wmt16_v100x8`` - the big Transformer on WMT'16 En-De, one 8-V100 node.
  Model: about 210 M fp32 parameters (Ott et al. 2018, "Scaling Neural Machine
  Translation": the big model with a shared 32 K vocabulary) = 840 MB.  Compute from
  SlowMo Table 2b's AR-Adam row only (1648 ms at 8 nodes on 10 GbE) minus the ring
  all-reduce among 8 hosts of ``ethernet_10g`` as simulated (1273.7 ms):
  ``step_ms`` = 374.3.  SGP (1225 ms) is then a prediction.

``jitter`` (any profile, default 0): the coefficient of variation of one step's compute
time.  Each rank draws a factor per step from a lognormal of mean 1 with that spread,
from its own generator seeded by (run seed, rank), so the same seed gives the same times
and another seed other ones.  Real clusters vary from step to step (clocks, kernels, data
loading); a synchronous method waits for the slowest of n draws, so jitter costs it more
as n grows, which a jitter-free simulation cannot show, and without it the simulated time
of a synchronous method is the same at every seed (intervals over seeds are points).  No
paper gives the number; 0.02-0.05 is typical of dedicated GPU nodes.  It is not in the
calibration of the paper profiles (their ``step_ms`` is a mean).

Under a paper profile every message of the algorithm is scaled by (profile model
bytes / stand-in model bytes), so a compression ratio or a topology keeps its meaning:
the stand-in's 19 KB model travels as ResNet-50's 102 MB.  The runtime's own control
traffic (agreement flags, consensus measurement) is not scaled.  Every simulated
result says so in its provenance (``time``).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import platform as _platform
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from ..dataclass_config import from_dict
from ..errors import ConfigError

PAPER = {
    "resnet50_v100x8": {"step_ms": 245.4, "model_mb": 102.228128,
                        "source": "SlowMo Table 2a AR-SGD (420 ms, 32 nodes, 10 GbE) minus the ring all-reduce"},
    "resnet50_v100x1": {"step_ms": 348.8, "model_mb": 102.228128,
                        "source": "NVIDIA DeepLearningExamples ResNet-50 v1.5, 1x V100 16 GB FP32: 367 img/s; "
                                  "batch 128 (signSGD-MV's code)"},
    "transformer_wmt16_v100x8": {"step_ms": 374.3, "model_mb": 840.0,
                                 "source": "SlowMo Table 2b AR-Adam (1648 ms, 8 nodes, 10 GbE) minus the ring "
                                           "all-reduce"},
}
KINDS = ("measured", "fixed", *PAPER)


@dataclass
class ProfileConfig:
    name: str = field(default="measured", metadata={"choices": KINDS})
    step_ms: float | None = field(default=None, metadata={"gt": 0})  # fixed / paper: compute per step
    model_mb: float | None = field(default=None, metadata={"gt": 0})  # messages scaled to this model size
    sample_us: float | None = field(default=None, metadata={"gt": 0})  # measured: skip the calibration
    jitter: float = field(default=0.0, metadata={"min": 0, "lt": 1})  # coefficient of variation of a step

    def validate(self, key: str) -> None:
        if self.name == "fixed" and self.step_ms is None:
            raise ConfigError(f"{key}.step_ms", "profile 'fixed' needs step_ms (compute per step, ms)")
        if self.name == "measured" and (self.step_ms is not None or self.model_mb is not None):
            bad = "step_ms" if self.step_ms is not None else "model_mb"
            raise ConfigError(f"{key}.{bad}", "profile 'measured' takes its time from this machine; "
                                              "use profile 'fixed' to give one")
        if self.name != "measured" and self.sample_us is not None:
            raise ConfigError(f"{key}.sample_us", f"only profile 'measured' has sample_us, not {self.name!r}")
        if self.name in PAPER:
            for k in ("step_ms", "model_mb"):
                if getattr(self, k) is None:
                    setattr(self, k, PAPER[self.name][k])


def profile_config(spec: Any, key: str = "profile") -> ProfileConfig:
    if isinstance(spec, str):
        spec = {"name": spec}
    return from_dict(ProfileConfig, spec, key)


def _rows(batch: Any) -> int:
    if isinstance(batch, (tuple, list)) and batch and hasattr(batch[0], "shape"):
        return int(batch[0].shape[0])
    return 1


@dataclass
class Profile:
    cfg: ProfileConfig
    sample_s: float | None = None  # measured
    calibration: dict[str, Any] | None = None

    def step_s(self, batch: Any) -> float:
        if self.cfg.name == "measured":
            return self.sample_s * _rows(batch)
        return self.cfg.step_ms / 1e3

    def step_time(self, seed: int, rank: int) -> Callable[[Any], float]:
        """This rank's compute time of a step (``step_s`` times its lognormal jitter factor)."""
        if not self.cfg.jitter:
            return self.step_s
        rng = random.Random(f"jitter:{seed}:{rank}")
        sigma = math.sqrt(math.log1p(self.cfg.jitter ** 2))
        return lambda batch: self.step_s(batch) * math.exp(rng.gauss(-sigma * sigma / 2, sigma))

    def wire_scale(self, model_bytes: int) -> float:
        return 1.0 if self.cfg.model_mb is None else self.cfg.model_mb * 1e6 / model_bytes

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": "simulated (SimGrid)", "profile": self.cfg.name, "jitter": self.cfg.jitter}
        if self.cfg.name == "measured":
            d.update(sample_us=self.sample_s * 1e6, calibration=self.calibration)
        else:
            d.update(step_ms=self.cfg.step_ms, model_mb=self.cfg.model_mb,
                     source=PAPER.get(self.cfg.name, {}).get("source", "given"))
        return d


def measure_sample_s(raw: Mapping[str, Any], steps: int = 20, warmup: int = 3) -> float:
    """The stand-in's forward/backward time per sample on this machine, one thread: the
    fastest of ``steps`` timed steps of :func:`impls.runtime.throughput.time_steps` (the
    code of the ``workload_throughput`` benchmark), without the optimizer's update, under the
    workload's precision."""
    from ..runconfig import resolve
    from ..runtime.throughput import time_steps

    row = time_steps(resolve(raw).workload, threads=1, steps=steps, warmup=warmup, optimizer=False)
    return row["fwd_bwd_ms_min"] / 1e3 / row["rows"]  # the uncontended time: other load only ever adds


def build_profile(cfg: ProfileConfig, raw: Mapping[str, Any], calibration: str | os.PathLike | None) -> Profile:
    """The run's profile; ``measured`` reads (or, once, measures and writes) the cache."""
    if cfg.name != "measured":
        return Profile(cfg)
    if cfg.sample_us is not None:
        return Profile(cfg, cfg.sample_us / 1e6, {"given": True})
    key = json.dumps({"workload": raw.get("workload"), "torch": torch.__version__, "host": _platform.node()},
                     sort_keys=True)
    if calibration is None:
        return Profile(cfg, measure_sample_s(raw), {"cached": False})
    path = Path(calibration)
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = None
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel runs of one pipeline calibrate once, and agree
        table, aside = read_calibration(path)
        if key not in table:
            table[key] = {"sample_s": measure_sample_s(raw), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(table, indent=1, sort_keys=True))
            os.replace(tmp, path)
    entry = table[key]
    return Profile(cfg, entry["sample_s"], {"file": str(path), "measured_at": entry["measured_at"],
                                            **({"damaged_kept_as": aside.name} if aside else {})})


def read_calibration(path: Path) -> tuple[dict[str, Any], Path | None]:
    """The calibration cache at ``path`` ({} if there is none) and, if it was damaged, where
    it was set aside.

    A damaged cache (truncated, not JSON, an entry without a positive ``sample_s``) is not
    trusted and not fatal: it is renamed ``<name>.unreadable-<time>`` (as an unreadable
    checkpoint is), a warning says so, and the caller measures again.  Left in place it
    would fail every ``measured`` run, on every invocation, until deleted by hand.
    """
    if not path.exists():
        return {}, None
    try:
        table = json.loads(path.read_text())
        if not isinstance(table, dict):
            raise ValueError(f"a JSON {type(table).__name__}, not a mapping")
        for k, e in table.items():
            s = e.get("sample_s") if isinstance(e, dict) else None
            if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s <= 0 \
                    or not isinstance(e.get("measured_at"), str):
                raise ValueError(f"entry {k[:80]!r} has no positive sample_s and measured_at")
    except (OSError, UnicodeDecodeError, ValueError) as e:  # json.JSONDecodeError is a ValueError
        aside = path.with_name(f"{path.name}.unreadable-{time.strftime('%Y%m%dT%H%M%S')}")
        i = 1
        while aside.exists():
            aside, i = aside.with_name(f"{path.name}.unreadable-{time.strftime('%Y%m%dT%H%M%S')}.{i}"), i + 1
        path.rename(aside)
        print(f"WARNING: calibration {path} unreadable ({type(e).__name__}: {str(e)[:200]}); kept as "
              f"{aside.name}, measuring this machine again", file=sys.stderr, flush=True)
        return {}, aside
    return table, None
