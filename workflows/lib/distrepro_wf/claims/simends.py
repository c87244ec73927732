"""Simulated range ends: a verdict's sensitivity from the simulator itself, where the closed form
does not model the setting.

:mod:`distrepro_wf.claims.sensitivity` re-evaluates each simulated speed verdict over the
declared ranges.  Its default model of the change is the closed form
(:mod:`distrepro_wf.claims.closedform`), proven against the simulator by
``tests/test_closedform_vs_sim_claims.py`` and the ``sensitivity_sweep`` benchmark.  Where the
closed form says it does not model a setting (:func:`distrepro_wf.claims.closedform.unmodelled`:
other jobs' bursts crossing a rack's uplinks, ``shared_hpc``; there it was 10-78 % off the
simulator at the range ends), the sensitivity comes from the model that made the verdict:

1. :func:`rows`: the simulated speed claim rows of the config the closed form does not model;
2. :func:`groups`: every distinct short run those rows need (each side's run config as the
   pipeline builds it, seed 1, :data:`distrepro_wf.claims.sweep.EPOCHS` epochs of
   :data:`~distrepro_wf.claims.sweep.STEPS` steps, at the nominal point and at both ends of every
   range: :func:`distrepro_wf.claims.sweep.row_points`), in launch groups of one node count, each
   dealt into :data:`PARTS` parts so that two cores share the largest; rule
   ``sensitivity_points`` (``workflows/rules/compare.smk``) runs one group a job through the train
   rule's launcher (one fork server), ``results/sensitivity/n<nodes>.p<part>.csv``;
3. :func:`ends`: a row's statistic at each range end over its statistic at the nominal point
   (``a/b``, over the control's for ``ratio_vs_control``), what
   :func:`distrepro_wf.claims.sensitivity.analyse` scales the measured value by there; between
   the nominal value and an end it follows the closed form's shape corrected to meet the
   simulation at the end (:func:`distrepro_wf.claims.sensitivity.analyse`).

A run that failed is no number: the row's sensitivity names it and is "not evaluated" for that
range.  Cost: the default config's ``adpsgd_sim`` rows, 72 short simulations of 16 nodes in two
jobs, 68 s of job time in a default reproduction (a short AR-SGD run 1.6 s, AD-PSGD 0.4 s).
Gate shares (:func:`distrepro_wf.claims.sensitivity.gates`) are still scaled by the closed form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from . import closedform as cf
from . import sensitivity, sweep

#: parts each node count's short runs are dealt into (jobs that two cores run side by side)
PARTS = 2
ROOT = Path("results/sensitivity")
COLUMNS = ["config", "status", "time_per_epoch_s", "reason"]


def rows(claims: Iterable[dict[str, Any]], config: dict[str, Any]) -> list[tuple[dict[str, Any], int, str]]:
    """(claim, nodes, straggler) of every simulated per-epoch speed claim row the closed form does
    not model (a time-to-target row is not scaled: :data:`distrepro_wf.claims.sweep.TTA_NOT_SWEPT`)."""
    return [(c, n, st) for c, n, st in sweep.simulated_speed_rows(claims, config)
            if c["metric"] != "time_to_target_s" and sweep.unmodelled(c, config, n, st)]


def plan(claims: Iterable[dict[str, Any]], config: dict[str, Any]) -> tuple[dict[tuple, list], dict[str, dict]]:
    """({(claim id, nodes, straggler): its points, each with ``keys``}, {config key: config})."""
    points, configs = {}, {}
    for c, n, st in rows(claims, config):
        pts = sweep.row_points(c, config, n, st)
        for p in pts:
            cfgs = p.pop("cfgs")
            p["keys"] = None if cfgs is None else [sweep.key(x) for x in cfgs]
            configs.update({k: x for k, x in zip(p["keys"] or [], cfgs or [])})
        points[(c["id"], int(n), str(st))] = pts
    return points, configs


def groups(claims: Iterable[dict[str, Any]], config: dict[str, Any],
           parts: int = PARTS) -> dict[str, dict[str, dict[str, Any]]]:
    """{"n<nodes>.p<part>": {run directory: run config}}: the jobs of rule ``sensitivity_points``."""
    _, configs = plan(claims, config)
    return {f"n{n}.p{i}": {str(ROOT / "runs" / sweep.config_id(k)): cfg for k, cfg in g.items()}
            for n, i, g in sweep.split(configs, parts)}


def run_group(members: dict[str, dict[str, Any]], out_csv: Path, launch: Path, log: Path,
              timeout_s: float = 600) -> pd.DataFrame:
    """Simulate a job's members (:func:`distrepro_wf.claims.sweep.run_members`) and write one row
    each to ``out_csv``: the config's id, ``ok`` with its time per epoch, or ``failed`` and why."""
    res = sweep.run_members(members, launch, log, timeout_s)
    frame = pd.DataFrame([{"config": Path(d).name, **r} for d, r in res.items()]).reindex(columns=COLUMNS)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out_csv, index=False)
    return frame


def all_ends(claims: Iterable[dict[str, Any]], config: dict[str, Any],
             times: dict[str, float | str] | None) -> dict[tuple[str, int, str], Ends]:
    """{(claim id, nodes, straggler): :func:`ends`} of every row the closed form does not model
    (what rule ``compare`` hands :func:`distrepro_wf.claims.evaluate.evaluate`)."""
    out = {}
    for c, n, st in rows(claims, config):
        e = ends(c, config, n, st, times)
        if e is not None:
            out[(c["id"], int(n), str(st))] = e
    return out


def read_times(paths: Iterable[str | Path]) -> dict[str, float | str]:
    """{config id: simulated time per epoch, or the reason its run failed (a str)} from the jobs'
    tables."""
    out: dict[str, float | str] = {}
    for p in paths:
        for _, r in pd.read_csv(p).iterrows():
            out[str(r["config"])] = (float(r["time_per_epoch_s"]) if r["status"] == "ok"
                                     else str(r.get("reason", "failed")))
    return out


@dataclass
class Ends:
    """A row's simulated range ends (:func:`ends`)."""

    why: str  # why the closed form does not model the row (so these are simulated)
    nominal: float  # the short runs' statistic at the nominal point
    factor: dict[tuple[str, str], float] = field(default_factory=dict)  # (range, "low"/"high") -> stat / nominal
    missing: dict[tuple[str, str], str] = field(default_factory=dict)  # (range, end) -> why there is no number


def ends(c: dict[str, Any], config: dict[str, Any], nodes: int, straggler: str,
         times: dict[str, float | str] | None) -> Ends | None:
    """The row's simulated statistic at each range end over the nominal one, or None where the
    closed form models the row (or no simulated times were given)."""
    if times is None or c["metric"] == "time_to_target_s":
        return None
    why = sweep.unmodelled(c, config, nodes, straggler)
    if not why:
        return None

    def stat(keys: list[str]) -> float | str:
        vals = [times.get(sweep.config_id(k), "not simulated (rule sensitivity_points did not run it)")
                for k in keys]
        bad = [v for v in vals if isinstance(v, str)]
        return bad[0] if bad else sweep.statistic([float(v) for v in vals])

    pts = sweep.row_points(c, config, nodes, straggler)
    keyed = [(p, [sweep.key(x) for x in p["cfgs"]] if p["cfgs"] else None) for p in pts]
    s0 = stat(keyed[0][1])
    out = Ends(why, s0 if isinstance(s0, float) else math.nan)
    for p, keys in keyed[1:]:
        k = (p["parameter"], p["end"])
        if keys is None:
            out.missing[k] = p["note"]
            continue
        s = stat(keys)
        if isinstance(s, str) or isinstance(s0, str) or not s0 > 0:
            out.missing[k] = f"simulation failed: {s if isinstance(s, str) else s0}"
        else:
            out.factor[k] = s / s0
    return out
