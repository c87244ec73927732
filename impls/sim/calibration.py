"""The ``measured`` profile's calibration: this machine's per-sample compute time of the
stand-in (:func:`measure_sample_s`, the ``workload_throughput`` benchmark's code) and its
op costs, cached per workload and machine in a calibration file (:func:`build_profile`,
:func:`read_calibration`).

Apart from :mod:`impls.sim.profiles` (the profiles' configs and their timing model, which a
run config's validation reads) because measuring runs the training runtime
(:mod:`impls.runtime.throughput`): kept there, validating a config would import the runtime,
which imports the backends that validate it (an import cycle).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import platform as _platform
import sys
import time
from pathlib import Path
from typing import Any, Mapping

import torch

from ..config.dataclass_config import from_dict
from .profiles import Profile, ProfileConfig


def measure_sample_s(raw: Mapping[str, Any], steps: int = 20, warmup: int = 3) -> float:
    """The stand-in's forward/backward time per sample on this machine, one thread: the
    fastest of ``steps`` timed steps of :func:`impls.runtime.throughput.time_steps` (the
    code of the ``workload_throughput`` benchmark), without the optimizer's update, under the
    workload's precision."""
    from ..runtime.throughput import time_steps
    from ..config.workload import WorkloadConfig

    wl = from_dict(WorkloadConfig, dict(raw["workload"]), "workload")  # resolve(raw)'s (a run checked before)
    row = time_steps(wl, threads=1, steps=steps, warmup=warmup, optimizer=False)
    return row["fwd_bwd_ms_min"] / 1e3 / row["rows"]  # the uncontended time: other load only ever adds


def build_profile(cfg: ProfileConfig, raw: Mapping[str, Any], calibration: str | os.PathLike | None) -> Profile:
    """The run's profile; ``measured`` reads (or, once, measures and writes) the cache."""
    from .opcost import FREE, OpCost, given_opcost, measure_opcost

    if cfg.name != "measured":
        return Profile(cfg)
    if cfg.sample_us is not None:
        return Profile(cfg, cfg.sample_us / 1e6, {"given": True}, given_opcost(vars(cfg), FREE))
    key = json.dumps({"workload": raw.get("workload"), "torch": torch.__version__, "host": _platform.node()},
                     sort_keys=True)
    if calibration is None:
        return Profile(cfg, measure_sample_s(raw), {"cached": False}, given_opcost(vars(cfg), measure_opcost()))
    path = Path(calibration)
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = None
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel runs of one pipeline calibrate once, and agree
        table, aside = read_calibration(path)
        if key not in table or "opcost" not in table[key]:
            entry = table.get(key) or {"sample_s": measure_sample_s(raw),
                                       "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            table[key] = {**entry, "opcost": measure_opcost().describe()}  # the op-cost micro-benchmarks
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(table, indent=1, sort_keys=True))
            os.replace(tmp, path)
    entry = table[key]
    return Profile(cfg, entry["sample_s"], {"file": str(path), "measured_at": entry["measured_at"],
                                            **({"damaged_kept_as": aside.name} if aside else {})},
                   given_opcost(vars(cfg), OpCost(**entry["opcost"])))


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
