"""Parameter-server benchmarks (rule ``bench_ps``, ``results/bench/ps_*.csv``).

* :func:`server_throughput`: gradients an asynchronous server (``ps_async``) applies per
  second on real ranks of this machine, against the number of workers (and server
  ranks): one real torchrun launch per setting, timed from the server's own ``push``
  records (first to last applied push), so process start and rendezvous are excluded.
* :func:`tta_vs_sync`: each parameter-server mode's time to the target relative to
  ``ps_sync`` under one 4x-slow worker, per seed and as a mean with a 95 % t interval,
  from one pipeline run's ``ps_modes`` table (the modes ran side by side there).
"""

from __future__ import annotations

import json
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ..pipeline.launch import run_command
from .simbench import run_config

DEFAULTS = {"workers": [1, 2, 4], "servers": [1, 2], "steps": 60, "workload": "digits_mlp"}


def _pushes(out: Path, first_server: int) -> list[float]:
    recs = [json.loads(x) for x in (out / "metrics" / f"rank{first_server}.jsonl").read_text().splitlines() if x]
    return [r["time/wall_s"] for r in recs if r["kind"] == "push"]


def server_throughput(spec: dict[str, Any], workloads: dict[str, Any], log) -> pd.DataFrame:
    s = {**DEFAULTS, **spec}
    wl = {**workloads[s["workload"]], "epochs": 1, "batch_size": 8, "evals_per_epoch": 1, "eval_ranks": "zero"}
    wl.pop("target", None)
    rows = []
    for servers in s["servers"]:
        for w in s["workers"]:
            wl["max_steps_per_epoch"] = max(1, int(s["steps"]) // w)
            cfg = run_config({"name": "ps_async", "servers": servers}, w, wl)
            with tempfile.TemporaryDirectory() as d:
                Path(d, "cfg.json").write_text(json.dumps(cfg))
                cmd = run_command(w + servers, f"{d}/cfg.json", f"{d}/out")
                rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=1200).returncode
                t = _pushes(Path(d, "out"), w) if rc == 0 else []
            rate = (len(t) - 1) / (t[-1] - t[0]) if len(t) > 2 and t[-1] > t[0] else float("nan")
            rows.append({"workers": w, "servers": servers, "ok": rc == 0, "pushes": len(t),
                         "grads_per_s": round(rate, 1), "host": socket.gethostname()})
    df = pd.DataFrame(rows)
    one = df[df["workers"] == df["workers"].min()].set_index("servers")["grads_per_s"]
    df["vs_fewest_workers"] = (df["grads_per_s"] / df["servers"].map(one)).round(3)
    return df


#: the study's synchronous baseline: a method key of config/ps_studies.yaml (the runs table's ``method``)
BASELINE_METHOD = "ps_sync"


def tta_vs_sync(runs: pd.DataFrame, straggler: str = "slow1x4", metric: str = "time_to_target_s",
                baseline: str = BASELINE_METHOD) -> pd.DataFrame:
    """Per mode: mean of ``metric(mode) / metric(baseline)`` (the synchronous mode, ``ps_sync``) over
    the seeds both have, with a 95 % t interval on the log ratios (``nan`` where a side never
    reached the target)."""
    r = runs[runs["straggler"] == straggler]
    base = r[r["method"] == baseline].set_index(["nodes", "seed"])[metric]
    rows = []
    for (m, n), g in r.groupby(["method", "nodes"]):
        ratio = (g.set_index(["nodes", "seed"])[metric] / base).dropna()
        ratio = ratio[ratio > 0]
        row = {"method": m, "nodes": n, "straggler": straggler, "metric": metric, "seeds": len(ratio),
               "ratio_vs_ps_sync": np.nan, "low": np.nan, "high": np.nan}
        if len(ratio):
            lr = np.log(ratio.to_numpy())
            row["ratio_vs_ps_sync"] = float(np.exp(lr.mean()))
            if len(lr) > 1:
                h = stats.t.ppf(0.975, len(lr) - 1) * lr.std(ddof=1) / np.sqrt(len(lr))
                row["low"], row["high"] = float(np.exp(lr.mean() - h)), float(np.exp(lr.mean() + h))
        rows.append(row)
    return pd.DataFrame(rows).round(4)
