"""Derived benchmark tables (pure pandas, tested)."""

from __future__ import annotations

import copy
from typing import Any, Mapping

import pandas as pd

from impls.errors import ConfigError

# Issue targets: gossip no slower than all-reduce without stragglers; AD-PSGD at most
# half of all-reduce's step time with one 4x straggler.
TARGETS = {("sgp", "none"): "<= 1.0", ("osgp", "none"): "<= 1.0", ("dpsgd", "none"): "<= 1.0",
           ("adpsgd", "slow1x4"): "< 0.5"}


def step_time_vs_allreduce(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean time per step of every method over seeds, and its ratio to allreduce_sgd's."""
    if runs.empty or "time_per_step_s" not in runs:
        return pd.DataFrame(columns=["experiment", "nodes", "straggler", "method", "algorithm", "seeds",
                                     "time_per_step_ms", "allreduce_ms", "ratio", "target"])
    keys = ["experiment", "nodes", "straggler", "method", "algorithm"]
    g = runs.groupby(keys, as_index=False).agg(seeds=("seed", "nunique"), t=("time_per_step_s", "mean"))
    ar = g[g["method"] == "allreduce_sgd"][["experiment", "nodes", "straggler", "t"]].rename(columns={"t": "ar"})
    out = g.merge(ar, on=["experiment", "nodes", "straggler"], how="inner")
    out = out[out["method"] != "allreduce_sgd"].copy()
    out["time_per_step_ms"] = (out.pop("t") * 1e3).round(4)
    out["allreduce_ms"] = (out.pop("ar") * 1e3).round(4)
    out["ratio"] = (out["time_per_step_ms"] / out["allreduce_ms"]).round(4)
    out["target"] = [TARGETS.get((a, s), "") for a, s in zip(out["algorithm"], out["straggler"])]
    return out.sort_values(keys).reset_index(drop=True)


def merge_spec(defaults: Mapping[str, Any], given: Mapping[str, Any] | None, key: str) -> dict[str, Any]:
    """A benchmark's settings: ``defaults`` with the config's keys (under ``key``) replacing
    them; an unknown key is an error naming ``key`` and the allowed keys."""
    spec = copy.deepcopy(dict(defaults))
    unknown = sorted(set(given or {}) - set(spec))
    if unknown:
        raise ConfigError(key, f"unknown key(s) {unknown}; allowed keys: {', '.join(sorted(spec))}")
    spec.update(copy.deepcopy(dict(given or {})))
    return spec
