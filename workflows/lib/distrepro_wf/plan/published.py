"""Each plan method's accuracy cost as published (never measured by a plan).

The numbers live in ``config/published/numbers.csv`` (the published-numbers registry); this
module only says which row is which method's, on one recipe, so that a cost is the difference of
two rows of the same table: SlowMo (Wang et al. 2020) Table 1, ResNet-50 / ImageNet, 90 epochs,
batch 8192, 32 nodes x 8 V100 on 10 GbE, best validation top-1 (SGP -0.85 and OSGP -1.04 points
below AR-SGD's 76.00).  A method with no row here shows "no published number".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..claims.published import PUBLISHED_DIR

#: the baseline row every cost is taken against
BASELINE_ROW = "slowmo_t1_ar_top1"
#: (algorithm name, {hyperparameter: value the method must have}) -> its row on the baseline's table
ROWS = [
    ("allreduce_sgd", {}, "slowmo_t1_ar_top1"),
    ("sgp", {"peers": 1}, "slowmo_t1_sgp_top1"),  # SlowMo's SGP baseline: 1-peer exponential graph
    ("osgp", {"peers": 1}, "slowmo_t1_osgp_top1"),
]


def _peers(algo: dict[str, Any]) -> int | None:
    topo = algo.get("topology", {"name": "exponential", "peers": 1})
    if isinstance(topo, str):
        topo = {"name": topo}
    return int(topo.get("peers", 1)) if topo.get("name", "exponential") == "exponential" else None


def row_of(algo: dict[str, Any]) -> str | None:
    """The published row of an algorithm spec ``{name, ...}``, or None."""
    for name, need, row in ROWS:
        if algo.get("name") == name and all(_peers(algo) == v for k, v in need.items() if k == "peers"):
            return row
    return None


def accuracy_costs(methods: dict[str, dict[str, Any]], numbers: str | Path = PUBLISHED_DIR / "numbers.csv"
                   ) -> pd.DataFrame:
    """One row per plan method: ``method, cost_pp`` (its row's value minus the baseline's, top-1
    points; NaN without a row), ``value``, ``baseline``, ``source`` (rows' ids, paper, location,
    workload, setting)."""
    nums = pd.read_csv(numbers, dtype=str).set_index("id")
    base = nums.loc[BASELINE_ROW]
    out = []
    for m, spec in methods.items():
        row = row_of(spec["algorithm"])
        if row is None or row not in nums.index:
            out.append({"method": m, "cost_pp": float("nan"), "value": float("nan"),
                        "baseline": float(base["value"]), "source": "no published number for this method here"})
            continue
        r = nums.loc[row]
        out.append({"method": m, "cost_pp": round(float(r["value"]) - float(base["value"]), 2),
                    "value": float(r["value"]), "baseline": float(base["value"]),
                    "source": f"{r['paper']}, {r['location']}: {r['workload']}, {r['nodes']} nodes "
                              f"({r['gpus']}), {r['setting']}, {r['metric']} {r['value']} {r['unit']} vs "
                              f"AR-SGD {base['value']} (rows {row}, {BASELINE_ROW})"})
    return pd.DataFrame(out)
