"""A plan's tables: each point's simulated run read into one row, then ranked.

:func:`point_row` reads a finished short run (``metrics/rank*.jsonl``, ``provenance.json``,
``runinfo.json``):

* ``step_s``: the steady time per step, as throughput: each worker's mean step time after its
  first ``warmup`` steps, combined as ``n / sum(1 / mean_r)`` (the steps the workers take per
  second together, per worker).  For a synchronous method every worker's mean is the same; an
  asynchronous one's (AD-PSGD) fast workers keep stepping while a straggler is slow, and its
  epoch ends on the workers' total steps, so the slowest worker's own mean would misstate it;
* ``bytes_per_step``: what a worker sends per step, the described model's bytes (the stand-in's
  counted bytes times the run's ``wire_scale``: :func:`distrepro_wf.pipeline.collect.model_size`);
* ``comm_share``: ``1 - compute / step`` (compute: the mean worker's profile compute per step):
  the share of a step spent on exposed communication, waiting for other workers and the
  update, everything but the forward/backward.

:func:`ranking` adds the epoch (``steps_per_epoch`` = samples per epoch / (nodes x batch),
rounded up), the time to target where ``plan.epochs_to_target`` gives epochs, and the rank
within each (nodes, bandwidth, straggler) cell (1: fastest per epoch).  :func:`crossover`
picks the fastest method at each cell of the crossover grid, and :func:`swaps` reads from it
which parameter, at what value, swaps the first two of the user's ranking.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

KEYS = ["method", "nodes", "nic_gbps", "compute_ms", "straggler"]
POINT_COLUMNS = [*KEYS, "step_s", "compute_s", "bytes_per_step", "comm_share", "steps_measured", "status",
                 "reason"]
RANK_COLUMNS = ["nodes", "nic_gbps", "straggler", "rank", "method", "step_ms", "epoch_s", "steps_per_epoch",
                "bytes_per_step_mb", "comm_share", "time_to_target_s", "epochs_to_target", "compute_ms"]
WARMUP = 1  # steps each worker takes before its times count (buffers, first overlap)


def _records(run: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(Path(run, "metrics").glob("rank*.jsonl")):
        out += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return out


def point_row(run: Path, point: dict[str, Any], warmup: int = WARMUP) -> dict[str, Any]:
    """One point's row from its finished run directory (module docstring)."""
    from ..pipeline.collect import model_size

    prov = json.loads(Path(run, "provenance.json").read_text())
    runinfo = json.loads(Path(run, "runinfo.json").read_text())
    scale = model_size(prov, runinfo)["wire_scale"]
    steps = pd.DataFrame([r for r in _records(run) if r["kind"] == "step" and "time/compute_s" in r])
    steps = steps[steps.groupby("rank").cumcount() >= warmup]
    if steps.empty:
        return {**point, "status": "failed", "reason": f"no step after the first {warmup}"}
    per_rank = steps.groupby("rank")["time/step_s"].mean()
    step_s = len(per_rank) / float((1.0 / per_rank).sum())
    compute_s = float(steps["time/compute_s"].mean())
    return {**point, "step_s": step_s, "compute_s": compute_s,
            "bytes_per_step": float(steps["comm/bytes_sent"].mean()) * scale,
            "comm_share": max(0.0, 1.0 - compute_s / step_s), "steps_measured": int(len(steps)),
            "status": "ok", "reason": ""}


def steps_per_epoch(epoch_samples: int, nodes: int, batch: int) -> int:
    return int(math.ceil(epoch_samples / (nodes * batch)))


def ranking(points: pd.DataFrame, epoch_samples: int, batch: int, step_ms: float,
            epochs_to_target: dict[str, float] | None = None, nic_gbps: Iterable[float] | None = None
            ) -> pd.DataFrame:
    """The ranking table (:data:`RANK_COLUMNS`): the points at the model's compute per step (and,
    given ``nic_gbps``, at the plan's NIC rates only: a crossover cell at the model's compute is no
    cell of the ranking), each (nodes, nic_gbps, straggler) cell ranked by time per epoch (ties
    share the best rank)."""
    ok = points[(points["status"] == "ok") & np.isclose(points["compute_ms"], step_ms)].copy()
    if nic_gbps is not None:
        ok = ok[ok["nic_gbps"].isin([float(g) for g in nic_gbps])]
    ok["steps_per_epoch"] = [steps_per_epoch(epoch_samples, int(n), batch) for n in ok["nodes"]]
    ok["step_ms"] = ok["step_s"] * 1e3
    ok["epoch_s"] = ok["step_s"] * ok["steps_per_epoch"]
    ok["bytes_per_step_mb"] = ok["bytes_per_step"] / 1e6
    ept = {k: float(v) for k, v in (epochs_to_target or {}).items()}
    ok["epochs_to_target"] = [ept.get(m, np.nan) for m in ok["method"]]
    ok["time_to_target_s"] = ok["epoch_s"] * ok["epochs_to_target"]
    ok["rank"] = ok.groupby(["nodes", "nic_gbps", "straggler"])["epoch_s"].rank(method="min").astype(int)
    return ok.sort_values(["nodes", "nic_gbps", "straggler", "rank", "method"])[RANK_COLUMNS].reset_index(drop=True)


def crossover(points: pd.DataFrame, nodes: Iterable[int], compute: Iterable[float], gbps: Iterable[float],
              straggler: str = "none") -> pd.DataFrame:
    """The fastest method per cell of the crossover grid: ``nodes, compute_ms, nic_gbps,
    fastest, step_ms, second, margin`` (second-fastest's step time over the fastest's, minus 1)."""
    rows = []
    ok = points[(points["status"] == "ok") & (points["straggler"] == straggler)]
    for n in nodes:
        for c in compute:
            for g in gbps:
                cell = ok[(ok["nodes"] == n) & np.isclose(ok["compute_ms"], c) & np.isclose(ok["nic_gbps"], g)]
                cell = cell.sort_values(["step_s", "method"])
                if cell.empty:
                    continue
                first = cell.iloc[0]
                second = cell.iloc[1] if len(cell) > 1 else None
                rows.append({"nodes": int(n), "compute_ms": float(c), "nic_gbps": float(g),
                             "fastest": first["method"], "step_ms": first["step_s"] * 1e3,
                             "second": None if second is None else second["method"],
                             "margin": np.nan if second is None else second["step_s"] / first["step_s"] - 1})
    return pd.DataFrame(rows, columns=["nodes", "compute_ms", "nic_gbps", "fastest", "step_ms", "second", "margin"])


def swaps(rank: pd.DataFrame, grid: pd.DataFrame, step_ms: float) -> pd.DataFrame:
    """Sensitivity from the crossover grid: for each ranking cell without a straggler, the user's
    first two methods, and along each axis of the grid (compute per step at the cell's NIC rate,
    NIC rate at the model's compute) the nearest grid value where another method is fastest
    (``at``: that value; none: the order holds over the grid's range)."""
    rows = []
    for (n, g), cell in rank[rank["straggler"] == "none"].groupby(["nodes", "nic_gbps"]):
        cell = cell.sort_values("rank")
        if len(cell) < 2:
            continue
        first, second = cell.iloc[0]["method"], cell.iloc[1]["method"]
        sub = grid[grid["nodes"] == n]
        for axis, fixed, here in (("compute_ms", "nic_gbps", float(step_ms)), ("nic_gbps", "compute_ms", None)):
            line = sub[np.isclose(sub[fixed], g if fixed == "nic_gbps" else step_ms)]
            here = float(g) if here is None else here
            if line.empty:  # no grid line through this cell (another node count, NIC or compute)
                continue
            other = line[line["fastest"] != first]
            at = None
            if not other.empty:
                nearest = other.iloc[(other[axis] - here).abs().argsort().iloc[0]]
                at = (float(nearest[axis]), nearest["fastest"])
            rows.append({"nodes": int(n), "nic_gbps": float(g), "first": first, "second": second,
                         "parameter": axis, "user_value": here,
                         "swaps_at": np.nan if at is None else at[0], "then_fastest": None if at is None else at[1],
                         "grid": ", ".join(f"{v:g}" for v in sorted(line[axis].unique()))})
    return pd.DataFrame(rows, columns=["nodes", "nic_gbps", "first", "second", "parameter", "user_value",
                                       "swaps_at", "then_fastest", "grid"])
