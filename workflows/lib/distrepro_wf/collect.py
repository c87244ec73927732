"""Metrics JSONL -> tidy pandas tables.  Only runs whose outcome is ``ok`` enter them.

* ``epochs``: one row per (run, epoch), aggregated over ranks: losses, accuracy and
  bytes are means over ranks; times are the maximum over ranks (a synchronous epoch
  lasts as long as its slowest rank).
* ``runs``: one row per run: final / best validation accuracy, time per epoch and per
  step, time to the workload's target accuracy, bytes per epoch and per step (steps per
  epoch from ``run/runinfo.json``), final consensus distance, with provenance.
* ``failed``: one row per run whose outcome is ``failed`` (never in the others).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from impls.metrics import read_jsonl

KEYS = ["experiment", "method", "nodes", "straggler", "seed"]
MEAN_COLS = ["loss/train", "loss/val", "acc/val", "comm/bytes_sent", "comm/bytes_recv", "consensus/distance"]
MAX_COLS = ["time/epoch_s", "time/wall_s", "time/compute_s", "time/comm_s", "time/straggler_delay_s",
            "time/net_delay_s"]


def _ident(outcome_path: Path) -> dict:
    # .../runs/<experiment>/<method>/n<N>/<straggler>/seed<S>/outcome.json
    p = outcome_path.parts
    return {"experiment": p[-6], "method": p[-5], "nodes": int(p[-4][1:]), "straggler": p[-3], "seed": int(p[-2][4:])}


def load_run(outcome_path: Path) -> tuple[dict, pd.DataFrame | None]:
    outcome_path = Path(outcome_path)
    outcome = json.loads(outcome_path.read_text())
    ident = _ident(outcome_path)
    if outcome.get("status") != "ok":
        return {**ident, **outcome}, None
    run_dir = outcome_path.parent / outcome["run_dir"]
    recs = read_jsonl(sorted((run_dir / "metrics").glob("rank*.jsonl")))
    ep = pd.DataFrame([r for r in recs if r["kind"] == "epoch"])
    cfg = json.loads((run_dir / "config.json").read_text())
    runinfo = json.loads((run_dir / "runinfo.json").read_text()) if (run_dir / "runinfo.json").exists() else {}
    prov = json.loads((run_dir / "provenance.json").read_text())
    agg = {c: "mean" for c in MEAN_COLS if c in ep} | {c: "max" for c in MAX_COLS if c in ep}
    if "acc/val" in ep:
        ep["acc/val_min"] = ep["acc/val"]
        agg["acc/val_min"] = "min"
    table = ep.groupby("epoch", as_index=False).agg(agg)
    table["step"] = ep.groupby("epoch")["step"].max().values
    for k, v in ident.items():
        table[k] = v
    info = {**ident, "status": "ok", "algorithm": cfg["algorithm"]["name"],
            "target_acc": cfg["workload"].get("target_acc"), "epochs": cfg["workload"]["epochs"],
            "config_hash": prov["config_hash"], "git_commit": prov["git_commit"], "host": prov["host"],
            "torch": prov["versions"].get("torch"), "python": prov["versions"].get("python"),
            "started_at": prov["started_at"], "steps_per_epoch": runinfo.get("steps_per_epoch"),
            "params": runinfo.get("params"), "cpu_count": prov.get("cpu_count"), "platform": prov.get("platform"),
            "device": prov.get("device")}
    return info, table


def summarize(info: dict, t: pd.DataFrame) -> dict:
    row = dict(info)
    row["final_acc"] = float(t["acc/val"].iloc[-1]) if "acc/val" in t else np.nan
    row["best_acc"] = float(t["acc/val"].max()) if "acc/val" in t else np.nan
    row["final_train_loss"] = float(t["loss/train"].iloc[-1])
    # loss of the (mean over ranks of the) local models on all classes: with label-partitioned
    # data each rank's training loss covers only its own classes, this is the global objective
    row["final_val_loss"] = float(t["loss/val"].iloc[-1]) if "loss/val" in t else np.nan
    row["time_per_epoch_s"] = float(t["time/epoch_s"].mean())
    row["wall_s"] = float(t["time/wall_s"].iloc[-1])
    row["bytes_sent_per_epoch"] = float(t["comm/bytes_sent"].mean())
    steps = info.get("steps_per_epoch")
    row["bytes_per_step"] = row["bytes_sent_per_epoch"] / steps if steps else np.nan
    row["time_per_step_s"] = row["time_per_epoch_s"] / steps if steps else np.nan
    row["final_consensus_distance"] = (float(t["consensus/distance"].iloc[-1]) if "consensus/distance" in t
                                       else np.nan)
    row["comm_s_per_epoch"] = float(t["time/comm_s"].mean())
    row["straggler_delay_s_per_epoch"] = float(t["time/straggler_delay_s"].mean())
    target = info.get("target_acc")
    hit = t[t["acc/val"] >= target] if target is not None and "acc/val" in t else t.iloc[0:0]
    row["time_to_target_s"] = float(hit["time/wall_s"].iloc[0]) if len(hit) else np.nan
    row["epochs_to_target"] = int(hit["epoch"].iloc[0]) + 1 if len(hit) else np.nan
    row["bytes_to_target"] = float(t["comm/bytes_sent"].iloc[: row["epochs_to_target"]].sum()) if len(hit) else np.nan
    return row


def outcome_paths(launch_paths: Iterable[Path]) -> list[Path]:
    """outcome.json of every member of the given launch groups (results/launches/...json)."""
    out = []
    for lp in launch_paths:
        for m in json.loads(Path(lp).read_text())["members"]:
            out.append(Path(m["run"]) / "outcome.json")
    return out


def collect(outcome_paths: Iterable[Path]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    epochs, runs, failed = [], [], []
    for p in outcome_paths:
        info, table = load_run(Path(p))
        if table is None:
            failed.append({k: info.get(k) for k in KEYS + ["reason", "returncode", "log", "attempt_dir"]})
            continue
        epochs.append(table)
        runs.append(summarize(info, table))
    ep = pd.concat(epochs, ignore_index=True) if epochs else pd.DataFrame(columns=KEYS + ["epoch"])
    ep = ep[KEYS + [c for c in ep.columns if c not in KEYS]]
    rn = pd.DataFrame(runs, columns=None if runs else KEYS)
    fl = pd.DataFrame(failed, columns=KEYS + ["reason", "returncode", "log", "attempt_dir"])
    return ep, rn, fl


def write_atomic(df: pd.DataFrame, path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    df.to_csv(tmp, index=False)
    tmp.replace(path)
