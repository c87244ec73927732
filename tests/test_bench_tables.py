"""Derived benchmark table: ratios of per-step time to allreduce_sgd's."""

import pandas as pd
import pytest

from distrepro_wf.bench import step_time_vs_allreduce


def test_ratio_to_allreduce_per_setting():
    rows = []
    for seed, (ar, sgp, ad) in enumerate([(0.010, 0.008, 0.004), (0.012, 0.010, 0.006)]):
        for m, a, t, s in (("allreduce_sgd", "allreduce_sgd", ar, "none"), ("sgp_1peer", "sgp", sgp, "none"),
                           ("allreduce_sgd", "allreduce_sgd", 2 * ar, "slow1x4"), ("adpsgd", "adpsgd", ad, "slow1x4")):
            rows.append({"experiment": "e", "nodes": 4, "straggler": s, "method": m, "algorithm": a,
                         "seed": seed, "time_per_step_s": t})
    t = step_time_vs_allreduce(pd.DataFrame(rows)).set_index("method")
    assert t.loc["sgp_1peer", "ratio"] == pytest.approx(0.009 / 0.011, abs=1e-4)
    assert t.loc["sgp_1peer", "target"] == "<= 1.0" and t.loc["sgp_1peer", "seeds"] == 2
    assert t.loc["adpsgd", "ratio"] == pytest.approx(0.005 / 0.022, abs=1e-4)
    assert t.loc["adpsgd", "target"] == "< 0.5"
    assert "allreduce_sgd" not in t.index


def test_empty_input():
    assert step_time_vs_allreduce(pd.DataFrame()).empty
