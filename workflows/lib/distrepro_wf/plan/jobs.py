"""A plan's simulation jobs: its points split into launch groups, run as the pipeline runs
simulated experiments.

Rule ``plan_points`` (``workflows/rules/plan.smk``) makes one job per (node count, part): the
points at that node count are dealt round-robin into :data:`PARTS` parts, so two cores share
even the largest node count.  Each job writes its points' run configs under
``results/plan/<name>/runs/<point>/`` and hands them to
:func:`distrepro_wf.pipeline.runs.execute_group`, the train rule's launcher: one fork server
(``python -m impls.sim --serve``) runs them one after another, a run already finished with the
same config is reused, and a failed one gets its ``outcome.json`` with the reason.  The job then
reads every run into rows (:func:`distrepro_wf.plan.table.point_row`): ``results/plan/<name>/
n<nodes>.p<part>.csv``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from . import config as pconfig
from .table import POINT_COLUMNS, point_row

PARTS = 2


def root(name: str) -> Path:
    return Path("results/plan") / name


def group(config: dict[str, Any], nodes: int, part: int, parts: int = PARTS) -> dict[str, dict[str, Any]]:
    """``{run directory: run config}`` of job (``nodes``, ``part``)."""
    pts = [p for p in pconfig.points(config) if p.nodes == int(nodes)]
    base = root(config["plan"]["name"]) / "runs"
    return {str(base / p.path): pconfig.run_config(config, p) for p in pts[int(part)::parts]}


def run_group(members: dict[str, dict[str, Any]], out_csv: Path, launch: Path, log: Path,
              timeout_s: float = 600) -> pd.DataFrame:
    """Run the members (module docstring) and write their rows to ``out_csv``."""
    from ..pipeline.runs import run_members

    outcomes = run_members(members, launch, log, timeout_s)
    rows = []
    for d, cfg in members.items():
        key = {"method": cfg["method"], "nodes": cfg["nodes"], "nic_gbps": cfg["platform"]["nic_gbps"],
               "compute_ms": cfg["profile"]["step_ms"], "straggler": cfg["straggler_name"]}
        out = outcomes[d]
        rows.append(point_row(Path(d) / "run", key) if out["status"] == "ok"
                    else {**key, "status": "failed", "reason": out["reason"]})
    frame = pd.DataFrame(rows).reindex(columns=POINT_COLUMNS)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out_csv, index=False)
    return frame
