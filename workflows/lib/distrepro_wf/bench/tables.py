"""Derived benchmark tables (pure pandas, tested)."""

from __future__ import annotations

import copy
from typing import Any, Mapping

import pandas as pd

from impls.errors import ConfigError

STEP_TIME_KEY = "benchmarks.step_time_vs_allreduce"


def step_time_targets(given: Mapping[str, Any] | None) -> dict[tuple[str, str], str]:
    """``benchmarks.step_time_vs_allreduce.targets`` of the config (``{"<algorithm>/<straggler>":
    "<op> <ratio>"}``, e.g. ``sgp/none: "<= 1.0"``) as ``{(algorithm, straggler): target}``."""
    spec = merge_spec({"targets": {}}, given, STEP_TIME_KEY)
    out = {}
    for k, v in (spec["targets"] or {}).items():
        a, _, s = str(k).partition("/")
        if not (a and s) or not isinstance(v, str) or v.split()[:1] not in (["<"], ["<="], [">"], [">="]):
            raise ConfigError(f"{STEP_TIME_KEY}.targets.{k}", f"expected '<algorithm>/<straggler>': '<op> <ratio>' "
                                                             f"(op one of <, <=, >, >=), got {k!r}: {v!r}")
        out[(a, s)] = v
    return out


def step_time_vs_allreduce(runs: pd.DataFrame, baseline: str = "allreduce_sgd",
                           targets: Mapping[tuple[str, str], str] | None = None) -> pd.DataFrame:
    """Mean time per step of every method over seeds, and its ratio to ``baseline``'s (the
    config's ``report.baseline``; its columns keep the name ``allreduce_ms``); ``targets``:
    :func:`step_time_targets` of the config, by (algorithm, straggler)."""
    targets = targets or {}
    if runs.empty or "time_per_step_s" not in runs:
        return pd.DataFrame(columns=["experiment", "nodes", "straggler", "method", "algorithm", "seeds",
                                     "time_per_step_ms", "allreduce_ms", "ratio", "target"])
    keys = ["experiment", "nodes", "straggler", "method", "algorithm"]
    g = runs.groupby(keys, as_index=False).agg(seeds=("seed", "nunique"), t=("time_per_step_s", "mean"))
    ar = g[g["method"] == baseline][["experiment", "nodes", "straggler", "t"]].rename(columns={"t": "ar"})
    out = g.merge(ar, on=["experiment", "nodes", "straggler"], how="inner")
    out = out[out["method"] != baseline].copy()
    out["time_per_step_ms"] = (out.pop("t") * 1e3).round(4)
    out["allreduce_ms"] = (out.pop("ar") * 1e3).round(4)
    out["ratio"] = (out["time_per_step_ms"] / out["allreduce_ms"]).round(4)
    out["target"] = [targets.get((a, s), "") for a, s in zip(out["algorithm"], out["straggler"])]
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
