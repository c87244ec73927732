"""Katyusha X benchmark (rule ``bench_katyusha_x``, ``results/bench/katyusha_x.csv``), from one
pipeline run's ``katyusha_x`` experiment (``config/katyusha_x.yaml``), pure pandas.

One row per (method, nodes): the seeds that reached the target, and the means over them of
the component gradients (all workers), the rounds (steps) and the simulated time to the
target (``runs.csv``'s to-target columns, interpolated between evaluation points); then, as
geometric means of per-seed ratios with a 95 % t interval on the logs:

* ``vs_svrg``: the method's gradients to the target / SVRG's at the same nodes and seed
  (Katyusha X's acceleration: < 1);
* ``vs_1_worker``: its gradients to the target / its own at 1 worker, same seed (the
  mini-batch parallel claim: about 1), and ``rounds_speedup`` / ``time_speedup``: rounds
  (simulated time) at 1 worker / at ``nodes`` (linear speed-up: about ``nodes``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

COLUMNS = ["method", "nodes", "seeds", "reached", "grad_evals_to_target", "rounds_to_target",
           "sim_time_to_target_s", "vs_svrg", "vs_svrg_low", "vs_svrg_high", "vs_1_worker", "vs_1_worker_low",
           "vs_1_worker_high", "rounds_speedup", "time_speedup"]


def _geo(ratios: pd.Series) -> tuple[float, float, float]:
    r = ratios.dropna()
    r = r[r > 0]
    if not len(r):
        return np.nan, np.nan, np.nan
    lr = np.log(r.to_numpy(float))
    if len(lr) < 2:
        return float(np.exp(lr.mean())), np.nan, np.nan
    h = stats.t.ppf(0.975, len(lr) - 1) * lr.std(ddof=1) / np.sqrt(len(lr))
    return float(np.exp(lr.mean())), float(np.exp(lr.mean() - h)), float(np.exp(lr.mean() + h))


def katyusha_x_table(runs: pd.DataFrame, baseline: str = "svrg") -> pd.DataFrame:
    if runs.empty:
        return pd.DataFrame(columns=COLUMNS)
    r = runs.set_index(["method", "nodes", "seed"]).sort_index()
    cols = {"g": "grad_evals_to_target", "s": "steps_to_target", "t": "time_to_target_s"}
    rows = []
    for (method, nodes), g in runs.groupby(["method", "nodes"]):
        g = g.set_index("seed")
        ok = g[g["reached_target"].astype(bool)]
        row = {"method": method, "nodes": int(nodes), "seeds": len(g), "reached": len(ok),
               "grad_evals_to_target": ok[cols["g"]].mean(), "rounds_to_target": ok[cols["s"]].mean(),
               "sim_time_to_target_s": ok[cols["t"]].mean()}

        def other(m, n, c):
            try:
                return r.loc[(m, n)][c].reindex(g.index)
            except KeyError:
                return pd.Series(np.nan, index=g.index)

        row["vs_svrg"], row["vs_svrg_low"], row["vs_svrg_high"] = _geo(g[cols["g"]] / other(baseline, nodes, cols["g"]))
        row["vs_1_worker"], row["vs_1_worker_low"], row["vs_1_worker_high"] = _geo(
            g[cols["g"]] / other(method, 1, cols["g"]))
        row["rounds_speedup"] = _geo(other(method, 1, cols["s"]) / g[cols["s"]])[0]
        row["time_speedup"] = _geo(other(method, 1, cols["t"]) / g[cols["t"]])[0]
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["method", "nodes"]).round(4).reset_index(drop=True)
