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
  model card) = 102.228 MB.  Compute **from the device's published training
  throughput**, not from any row it is compared with: NVIDIA DeepLearningExamples,
  PyTorch ResNet-50 v1.5 README, "Training performance: NVIDIA DGX-1 16GB (8x V100
  16GB)", 8 GPUs, FP32: 2855 images/s (torchvision's ResNet-50 is v1.5; the 8-GPU
  figure includes the intra-node all-reduce over NVLink) -> ``step_ms`` = 256 / 2855 s
  = 89.67 ms.  FP32 is ASSUMED (neither SGP nor SlowMo states mixed precision; that
  table's mixed-precision figure, 8322 images/s, would give 30.8 ms).  What a
  published AR-SGD row has beyond compute + ring is explained by named platform
  parameters fitted on it (``platform.allreduce_efficiency``; the overlap of the
  all-reduce with the backward pass), shown with the rows they were fitted on by
  ``bench/sim_paper_rows``.  Chosen here: the node's 8 GPUs are one simulated host and
  gradients travel in fp32.  The
  published AR rows were taken with DDP, which overlaps the all-reduce with the backward
  pass, as ``allreduce_sgd``'s default (``overlap_backward``) does too: a simulated AR-SGD
  hides the part of its all-reduce that fits behind the backward share of the step
  (``backward_fraction``); ``bench/sim_paper_rows`` fits ``allreduce_efficiency`` by
  simulation with the all-reduce as each row's code ran it (overlapped for SlowMo's DDP,
  after the step for the SGP v1 code).
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
  NVIDIA DeepLearningExamples, PyTorch Transformer (fairseq, Ott et al.'s model)
  README, "Training performance: NVIDIA DGX-1 (8x V100 16GB)", 8 GPUs, mixed precision:
  214,656 tokens/s at 5120 tokens per GPU; a node's step of 8 x 5120 = 40,960 tokens
  (ASSUMED: SlowMo's tokens per step were not retrieved; fairseq's recipes train in
  fp16, ASSUMED for SlowMo too) -> ``step_ms`` = 190.82 ms.

Every profile also has an **op-cost model** (:mod:`impls.sim.opcost`): the local
arithmetic, optimizer update, copies, host staging, compression and per-message
overhead that a real node pays besides its forward/backward, charged where each
operation happens.  Paper profiles: V100 / PCIe 3.0 / TCP figures (sourced or marked
assumed there); ``measured``: micro-benchmarks of this machine, cached with the
calibration; ``fixed``: free unless given (``mem_gbps``, ``copy_gbps``, ``stage_gbps``,
``compress_gbps``, ``msg_us``), so its step is its closed form.

``jitter`` (any profile, default 0): the coefficient of variation of one step's compute
time.  Each rank draws a factor per step from a lognormal of mean 1 with that spread,
from its own generator seeded by (run seed, rank), so the same seed gives the same times
and another seed other ones.  Real clusters vary from step to step (clocks, kernels, data
loading); a synchronous method waits for the slowest of n draws, so jitter costs it more
as n grows, which a jitter-free simulation cannot show, and without it the simulated time
of a synchronous method is the same at every seed (intervals over seeds are points).  No
paper gives the number; 0.02-0.05 is typical of dedicated GPU nodes.  It is not in the
calibration of the paper profiles (their ``step_ms`` is a mean).

``backward_fraction`` (any profile, default 2/3): the share of a step's compute that is the
backward pass (backward costs about twice the forward pass's FLOPs: Kaplan et al. 2020, Sec.
2.1).  A method that starts communicating during backward (``allreduce_sgd`` with
``overlap_backward``) starts bucket ``i`` once the backward pass has computed the share of the
parameters in buckets ``0..i`` (:meth:`impls.backends.sim.SimClock.backward_point`): with a
step of ``T`` and fraction ``b``, at ``T (1 - b) + T b x share``.  A real backward pass is not
uniform per parameter (a convolution's weight gradient costs more per parameter than a
classifier's), so this is the first-order model; the last bucket is complete at ``T`` either
way.  The papers do not give it for their models (the default is the FLOP ratio).

``model_layout`` (default: the paper profile's model; ``fixed`` profiles may name one with a
``model_mb``; ``none``: off): the paper model whose **parameter sizes in backward order** time an
overlapped method's buckets.  The stand-in MLP keeps about 85 % of its bytes in its first layer,
the last one backward reaches, so its buckets would put almost the whole all-reduce after
backward; ResNet-50's (``resnet50``: torchvision's definition, built on the meta device, no
weights; 161 tensors) are cut by DDP's rule (a 1 MiB first bucket, then ``bucket_mb``) into
buckets whose all-reduces start during backward at ``T (1 - b) + T b x`` (their share of the
paper model's parameters), each weighing its bytes of the paper model.  The real math still runs
on the stand-in's tensors: its one flat gradient is cut in the same proportions
(:class:`impls.comm.flat.WireLayout`; ``allreduce_sgd``'s ``overlap_backward``).  The Transformer
profile has no layout yet (its stand-in's own).

Under a paper profile every message of the algorithm is scaled by (profile model
bytes / stand-in model bytes), so a compression ratio or a topology keeps its meaning:
the stand-in's 19 KB model travels as ResNet-50's 102 MB.  The runtime's own control
traffic (agreement flags, consensus measurement) is not scaled.  Every simulated
result says so in its provenance (``time``).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable


from ..config.dataclass_config import from_dict
from ..errors import ConfigError

#: each paper profile's compute: ``per_step`` units (images, tokens) per node step at the
#: device's published ``throughput`` (units/s) -> ``step_ms`` (module docstring for sources)
DEVICE = {
    "resnet50_v100x8": {"per_step": 256, "throughput": 2855.0, "unit": "images",
                        "source": "NVIDIA DeepLearningExamples PyTorch ResNet-50 v1.5 README: DGX-1 8x V100 16GB, "
                                  "FP32, 2855 images/s; 256 images per node step (SGP/SlowMo)"},
    "transformer_wmt16_v100x8": {"per_step": 40960, "throughput": 214656.0, "unit": "tokens",
                                 "source": "NVIDIA DeepLearningExamples PyTorch Transformer README: DGX-1 8x V100 "
                                           "16GB, mixed precision, 214,656 tokens/s; 8 x 5120 tokens per node step "
                                           "(assumed)"},
    "resnet50_v100x1": {"per_step": 128, "throughput": 367.0, "unit": "images",
                        "source": "NVIDIA DeepLearningExamples PyTorch ResNet-50 v1.5 README: 1x V100 16GB, FP32, "
                                  "367 images/s; batch 128 per machine (signSGD-MV's code)"},
}
PAPER = {
    "resnet50_v100x8": {"step_ms": round(1e3 * 256 / 2855.0, 4), "model_mb": 102.228128, "layout": "resnet50",
                        "source": DEVICE["resnet50_v100x8"]["source"]},
    "transformer_wmt16_v100x8": {"step_ms": round(1e3 * 40960 / 214656.0, 4), "model_mb": 840.0, "layout": None,
                                 "source": DEVICE["transformer_wmt16_v100x8"]["source"]},
    "resnet50_v100x1": {"step_ms": round(1e3 * 128 / 367.0, 4), "model_mb": 102.228128, "layout": "resnet50",
                        "source": DEVICE["resnet50_v100x1"]["source"]},
}


def _torchvision_layout(name: str) -> tuple[int, ...]:
    """The parameter sizes (bytes, fp32) of torchvision's ``name`` in backward order (the
    reverse of the definition order, as DDP buckets them), from the model's definition built
    on the meta device: no weights, no download, no memory."""
    import torch
    import torchvision

    with torch.device("meta"):
        model = getattr(torchvision.models, name)()
    return tuple(p.numel() * 4 for p in reversed(list(model.parameters())))


#: a paper model's parameter layout, by name (``profile.model_layout``): its parameter sizes in
#: bytes in backward order.  ResNet-50: torchvision's (25,557,032 parameters, 161 tensors)
LAYOUTS: dict[str, Callable[[], tuple[int, ...]]] = {"resnet50": lambda: _torchvision_layout("resnet50")}
_LAYOUT_CACHE: dict[str, tuple[int, ...]] = {}


def model_layout(name: str) -> tuple[int, ...]:
    """:data:`LAYOUTS`' ``name``, built once per process."""
    if name not in _LAYOUT_CACHE:
        _LAYOUT_CACHE[name] = LAYOUTS[name]()
    return _LAYOUT_CACHE[name]


def preload(spec: Any) -> None:
    """Build in this process what every run of profile ``spec`` builds on first use: its paper
    model's layout (:func:`model_layout`).  ResNet-50's comes from torchvision's definition, and
    importing torchvision (with the ``torch._dynamo`` it imports) costs about 3.5 CPU-seconds,
    more than a 16-node simulation of ResNet-50 itself.  The fork server (``python -m impls.sim
    --serve``) calls this before forking each run, so the runs of one server find it built.  A
    spec that does not parse is left to the run to report."""
    try:
        cfg = profile_config(spec)
    except (ConfigError, TypeError, ValueError):
        return
    if cfg.model_layout not in (None, "none"):
        model_layout(cfg.model_layout)
KINDS = ("measured", "fixed", *PAPER)
#: the backward pass's share of a step's compute: backward costs about twice the forward pass's
#: FLOPs (a gradient with respect to both the inputs and the weights of every layer; Kaplan et
#: al. 2020, "Scaling Laws for Neural Language Models", Sec. 2.1: 2N forward, 4N backward per token)
BACKWARD_FRACTION = 2 / 3


@dataclass
class ProfileConfig:
    name: str = field(default="measured", metadata={"choices": KINDS})
    step_ms: float | None = field(default=None, metadata={"gt": 0})  # fixed / paper: compute per step
    model_mb: float | None = field(default=None, metadata={"gt": 0})  # messages scaled to this model size
    sample_us: float | None = field(default=None, metadata={"gt": 0})  # measured: skip the calibration
    jitter: float = field(default=0.0, metadata={"min": 0, "lt": 1})  # coefficient of variation of a step
    # op-cost model overrides (impls.sim.opcost; GB/s, us per message): fixed profiles charge
    # only what is given here; paper and measured profiles take their own unless overridden
    mem_gbps: float | None = field(default=None, metadata={"gt": 0})
    copy_gbps: float | None = field(default=None, metadata={"gt": 0})
    stage_gbps: float | None = field(default=None, metadata={"gt": 0})
    compress_gbps: float | None = field(default=None, metadata={"gt": 0})
    msg_us: float | None = field(default=None, metadata={"min": 0})
    backward_fraction: float = field(default=BACKWARD_FRACTION, metadata={"gt": 0, "max": 1})  # of a step's compute
    # the paper model whose parameter sizes time the overlapped buckets (a paper profile's own
    # by default; "none": the stand-in's own layout)
    model_layout: str | None = field(default=None, metadata={"choices": (*LAYOUTS, "none")})

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
            if self.model_layout is None:
                self.model_layout = PAPER[self.name]["layout"] or "none"
        if self.model_layout not in (None, "none") and self.model_mb is None:
            raise ConfigError(f"{key}.model_layout", "a model layout times the messages of a model of model_mb "
                                                     "megabytes: give model_mb too")


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
    opcost: Any = None  # impls.sim.opcost.OpCost (None: from the profile's kind)

    def __post_init__(self) -> None:
        from .opcost import FREE, given_opcost, paper_opcost

        if self.opcost is None:
            self.opcost = given_opcost(vars(self.cfg), paper_opcost() if self.cfg.name in PAPER else FREE)

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

    def gradient_layout(self) -> tuple[int, ...] | None:
        """The paper model's parameter sizes (bytes) in backward order, or None (the stand-in's
        own layout times the buckets): module docstring, ``model_layout``."""
        name = self.cfg.model_layout
        return None if name in (None, "none") else model_layout(name)

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": "simulated (SimGrid)", "profile": self.cfg.name, "jitter": self.cfg.jitter,
                             "backward_fraction": self.cfg.backward_fraction,
                             "model_layout": self.cfg.model_layout or "none"}
        if self.cfg.name == "measured":
            d.update(sample_us=self.sample_s * 1e6, calibration=self.calibration)
        else:
            d.update(step_ms=self.cfg.step_ms, model_mb=self.cfg.model_mb,
                     source=PAPER.get(self.cfg.name, {}).get("source", "given"))
        d["opcost"] = self.opcost.describe()
        return d
