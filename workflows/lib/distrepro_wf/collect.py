"""Metrics JSONL -> tidy pandas tables.  Only runs whose outcome is ``ok`` enter them.

* ``epochs``: one row per (run, epoch), aggregated over ranks as the metric catalogue
  says (:data:`distrepro_wf.catalogue.EPOCH`: losses, accuracy and bytes are means over
  ranks; times are the maximum over ranks, since a synchronous epoch lasts as long as its
  slowest rank).
* ``runs``: one row per run: every column of :data:`distrepro_wf.catalogue.METRICS`
  (final / best accuracy or suboptimality, time per epoch and per step, bytes per epoch
  and per step with steps per epoch from ``run/runinfo.json``, time / epochs / bytes to
  the workload's target, which names its metric), with provenance.
* ``failed``: one row per run that failed, with its ``kind`` (config, diverged, crashed,
  timeout, not_started, damaged; see :mod:`distrepro_wf.runs`) and reason.  An ``ok``
  outcome is not trusted: a run whose files are missing or unreadable is ``damaged``.

One damaged run never fails the collection of the others, and the tables are written
atomically (a crash never leaves a half-written table).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from impls.metrics import read_jsonl

from . import runs
from .catalogue import EPOCH, EPOCH_DERIVED, METRICS, better_direction

KEYS = ["experiment", "method", "nodes", "straggler", "seed"]
FAILED_COLS = KEYS + ["kind", "reason", "returncode", "log", "attempt_dir"]


def _ident(run_dir: Path) -> dict:
    """The run's identity, from its ``run.json`` (the config rule train wrote); only a run
    whose run.json is unreadable is named from its directory, to list it as damaged."""
    try:
        cfg = runs.read_json(Path(run_dir) / "run.json")
        return {"experiment": cfg["experiment"], "method": cfg["method"], "nodes": int(cfg["nodes"]),
                "straggler": cfg["straggler_name"], "seed": int(cfg["seed"])}
    except (OSError, ValueError, KeyError, TypeError):
        p = Path(run_dir).parts  # .../runs/<experiment>/<method>/n<N>/<straggler>/seed<S>/
        return {"experiment": p[-5], "method": p[-4], "nodes": int(p[-3][1:]), "straggler": p[-2],
                "seed": int(p[-1][4:])}


def _read_metrics(run_dir: Path, nodes: int) -> list[dict]:
    recs = []
    for r in range(nodes):
        p = run_dir / "metrics" / f"rank{r}.jsonl"
        try:
            recs.extend(read_jsonl([p]))
        except (OSError, ValueError) as e:
            raise ValueError(f"metrics of rank {r} unreadable ({e})") from None
    return recs


def _server_epochs(run_dir: Path, workers: int) -> pd.DataFrame | None:
    """Per epoch, the server ranks' bytes (summed over servers) as ``server/bytes_sent|recv``."""
    files = [p for p in (run_dir / "metrics").glob("rank*.jsonl") if int(p.stem[4:]) >= workers]
    if not files:
        return None
    ep = pd.DataFrame([r for r in read_jsonl(sorted(files)) if r["kind"] == "epoch"])
    cols = {"comm/bytes_sent": "server/bytes_sent", "comm/bytes_recv": "server/bytes_recv"}
    return ep.groupby("epoch", as_index=False)[list(cols)].sum().rename(columns=cols)


def load_run(outcome_path: Path) -> tuple[dict, pd.DataFrame | None]:
    """(run info, per-epoch table over ranks) of an ok run; (failure row, None) otherwise.

    An ok run is verified from its files (:func:`distrepro_wf.runs.verify_run`, plus
    ``run.json``) rather than trusted from ``outcome.json``; whatever is missing or
    unreadable makes it a ``damaged`` failure naming the file, never an exception.
    """
    run_dir = Path(outcome_path).parent
    ident = _ident(run_dir)
    outcome = runs.read_outcome(run_dir)
    if outcome.get("status") != "ok":
        # outcomes written before kinds existed were crashes (deterministic ones said "invalid")
        kind = outcome.get("kind") if outcome.get("kind") in runs.KINDS else "crashed"
        return {**ident, **outcome, "kind": kind}, None
    run = run_dir / outcome.get("run_dir", "run")
    problem = runs.verify_run(run)
    if problem is None:
        try:
            runs.read_json(run_dir / "run.json")
            return _load_ok(ident, run)
        except Exception as e:  # noqa: BLE001  one damaged run must never crash the collection
            problem = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
    return {**ident, "status": "failed", "kind": "damaged", "reason": f"damaged: {problem}",
            "log": outcome.get("log"), "returncode": outcome.get("returncode"), "damaged_run": str(run)}, None


def _load_ok(ident: dict, run_dir: Path) -> tuple[dict, pd.DataFrame]:
    cfg = runs.read_json(run_dir / "config.json")
    runinfo = runs.read_json(run_dir / "runinfo.json")
    prov = runs.read_json(run_dir / "provenance.json")
    ep = pd.DataFrame([r for r in _read_metrics(run_dir, int(cfg["nodes"])) if r["kind"] == "epoch"])
    agg = {k: m.across for k, m in EPOCH.items() if k in ep and not k.startswith("server/")}
    for derived, (key, how) in EPOCH_DERIVED.items():
        if key in ep:
            ep[derived] = ep[key]
            agg[derived] = how
    table = ep.groupby("epoch", as_index=False).agg(agg)
    table["step"] = ep.groupby("epoch")["step"].max().values
    servers = _server_epochs(run_dir, int(cfg["nodes"]))
    if servers is not None:  # an algorithm's server ranks (roles): their traffic apart from the workers'
        table = table.merge(servers, on="epoch", how="left")
    where = backend_columns(cfg)
    for k, v in {**ident, **where}.items():
        table[k] = v
    info = {**ident, **where, "status": "ok", "algorithm": cfg["algorithm"]["name"],
            "target_metric": (cfg["workload"].get("target") or {}).get("metric"),
            "target_value": (cfg["workload"].get("target") or {}).get("value"), "epochs": cfg["workload"]["epochs"],
            "config_hash": prov["config_hash"], "git_commit": prov["git_commit"], "host": prov["host"],
            "torch": prov["versions"].get("torch"), "python": prov["versions"].get("python"),
            "started_at": prov["started_at"], "steps_per_epoch": runinfo.get("steps_per_epoch"),
            "params": runinfo.get("params"), "cpu_count": prov.get("cpu_count"), "platform": prov.get("platform"),
            "device": prov.get("device")}
    return info, table


def backend_columns(cfg: dict) -> dict:
    """Where the run ran and what its times are: ``backend`` ``torch`` (real ranks, wall
    clock on this machine) or ``simgrid`` (simulated time on ``sim_platform`` with the
    ``sim_profile`` timing profile)."""
    sim = cfg.get("backend") == "simgrid"

    def name(spec):
        return spec if isinstance(spec, str) or spec is None else spec.get("name")

    return {"backend": "simgrid" if sim else "torch", "time_kind": "simulated" if sim else "wall clock",
            "sim_platform": name(cfg.get("platform") or "ethernet_10g") if sim else None,
            "sim_profile": name(cfg.get("profile") or "measured") if sim else None}


_REDUCE = {"last": lambda s: s.iloc[-1], "max": pd.Series.max, "min": pd.Series.min, "mean": pd.Series.mean}


def summarize(info: dict, t: pd.DataFrame) -> dict:
    """The run's row of runs.csv from its epoch table ``t``: every catalogue metric with a
    source (NaN where the run has no such key: e.g. accuracy for a finite-sum task), then
    the per-step and to-target columns."""
    row = dict(info)
    for m in METRICS.values():
        if m.source is not None:
            key, how = m.source
            row[m.column] = float(_REDUCE[how](t[key])) if key in t else np.nan
    steps = info.get("steps_per_epoch")
    row["bytes_per_step"] = row["bytes_sent_per_epoch"] / steps if steps else np.nan
    row["time_per_step_s"] = row["time_per_epoch_s"] / steps if steps else np.nan
    metric, target = info.get("target_metric"), info.get("target_value")
    if target is not None and metric in t:
        hit = t[t[metric] >= target] if better_direction(metric) else t[t[metric] <= target]
    else:
        hit = t.iloc[0:0]
    row["time_to_target_s"] = float(hit["time/wall_s"].iloc[0]) if len(hit) else np.nan
    row["epochs_to_target"] = int(hit["epoch"].iloc[0]) + 1 if len(hit) else np.nan
    row["bytes_to_target"] = float(t["comm/bytes_sent"].iloc[: row["epochs_to_target"]].sum()) if len(hit) else np.nan
    return row


def outcome_paths(launch_paths: Iterable[Path]) -> list[Path]:
    """outcome.json of every member of the given launch groups (results/launches/...json)."""
    return [Path(m["run"]) / "outcome.json" for lp in launch_paths for m in json.loads(Path(lp).read_text())["members"]]


def collect(launch_paths: Iterable[Path]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(epochs, runs, failed) tables of every member of the given launch groups.

    A run found damaged here is marked (:func:`distrepro_wf.runs.mark_damaged`) so that
    the next invocation recomputes it; its files stay where they are.
    """
    epochs, rows, failed = [], [], []
    for lp in map(Path, launch_paths):
        for p in outcome_paths([lp]):
            info, table = load_run(p)
            if table is None:
                if info.get("damaged_run") or info.get("corrupt_outcome"):
                    runs.mark_damaged(p.parent, info["reason"], lp)
                failed.append({k: info.get(k) for k in FAILED_COLS})
                continue
            epochs.append(table)
            rows.append(summarize(info, table))
    ep = pd.concat(epochs, ignore_index=True) if epochs else pd.DataFrame(columns=KEYS + ["epoch"])
    ep = ep[KEYS + [c for c in ep.columns if c not in KEYS]]
    rn = pd.DataFrame(rows, columns=None if rows else KEYS)
    fl = pd.DataFrame(failed, columns=FAILED_COLS)
    return ep, rn, fl


def failure_summary(tables_dir: Path, experiments: Iterable[str]) -> str:
    """Console summary of the failed runs in ``<tables_dir>/<experiment>/failed.csv`` ('' if none)."""
    lines = []
    for e in experiments:
        try:
            f = pd.read_csv(Path(tables_dir) / e / "failed.csv")
        except (OSError, ValueError):
            continue
        for r in f.itertuples():
            kind = r.kind if isinstance(getattr(r, "kind", None), str) else "crashed"
            again = "not retried until its config changes" if kind in runs.DETERMINISTIC else "retried next time"
            lines.append(f"  {r.experiment}/{r.method}/n{r.nodes}/{r.straggler}/seed{r.seed}  [{kind}, {again}]  "
                         f"{r.reason}  (log: {r.log})")
    if not lines:
        return ""
    return f"{len(lines)} run(s) failed (results/tables/<experiment>/failed.csv):\n" + "\n".join(lines)


def echo_failures(tables_dir: Path, experiments: Iterable[str]) -> None:
    """Print :func:`failure_summary` to stderr if any run failed (end of a Snakemake invocation)."""
    text = failure_summary(tables_dir, experiments)
    if text:
        print(text, file=sys.stderr)


def write_atomic(df: pd.DataFrame, path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    df.to_csv(tmp, index=False)
    tmp.replace(path)
