"""The tables behind the report's figures, pinned on hand-made runs (issue 34): a figure can
look plausible while its table ignores a column, so each number is checked here."""

from __future__ import annotations

import pandas as pd
import pytest

from distrepro_wf.report import plots


def _runs(rows):
    base = {"straggler": "none", "method": "allreduce_sgd", "seed": 0}
    return pd.DataFrame([base | r for r in rows])


def test_scaling_speedup_counts_the_workers_an_epoch_is_shared_by():
    """Weak scaling with a fixed per-worker batch: twice the workers take half the steps per
    epoch.  2 nodes x 10 steps in 1.0 s = 20 samples/s (per batch); 4 nodes x 5 steps in 0.6 s
    = 33.3: speed-up 1.667 against the ideal 2 (efficiency 0.833).  A table that ignored the
    node count would say 10 / 8.33 = 0.833, a slow-down."""
    t = plots.scaling_table(_runs([{"nodes": 2, "steps_per_epoch": 10, "time_per_epoch_s": 1.0},
                                   {"nodes": 4, "steps_per_epoch": 5, "time_per_epoch_s": 0.6}]))
    t = t.set_index("nodes")
    assert t.loc[2, "speedup"] == pytest.approx(1.0) and t.loc[2, "ideal"] == pytest.approx(1.0)
    assert t.loc[4, "speedup"] == pytest.approx(1 / 0.6 * 1.0)  # 1.667
    assert t.loc[4, "ideal"] == pytest.approx(2.0)
    assert t.loc[4, "efficiency"] == pytest.approx(1 / 0.6 / 2)  # 0.833


def test_scaling_speedup_with_an_uneven_split_and_without_steps_per_epoch():
    """A remainder batch (4 nodes x 6 steps for 2 x 10) counts its extra samples; without the
    steps column the throughput is 1 / time per epoch (an epoch is a fixed amount of data)."""
    t = plots.scaling_table(_runs([{"nodes": 2, "steps_per_epoch": 10, "time_per_epoch_s": 1.0},
                                   {"nodes": 4, "steps_per_epoch": 6, "time_per_epoch_s": 0.6}])).set_index("nodes")
    assert t.loc[4, "speedup"] == pytest.approx((6 * 4 / 0.6) / (10 * 2 / 1.0))  # 2.0
    t = plots.scaling_table(_runs([{"nodes": 2, "time_per_epoch_s": 1.0},
                                   {"nodes": 8, "time_per_epoch_s": 0.5}])).set_index("nodes")
    assert t.loc[8, "speedup"] == pytest.approx(2.0) and t.loc[8, "ideal"] == pytest.approx(4.0)
    assert t.loc[8, "efficiency"] == pytest.approx(0.5)


def test_scaling_averages_seeds_and_keeps_methods_and_stragglers_apart():
    """Per (straggler, method): the mean throughput over seeds at each node count, against that
    method's own smallest node count."""
    rows = [{"nodes": 2, "steps_per_epoch": 10, "time_per_epoch_s": 1.0, "seed": 0},
            {"nodes": 2, "steps_per_epoch": 10, "time_per_epoch_s": 0.5, "seed": 1},  # mean 30 samples/s
            {"nodes": 4, "steps_per_epoch": 5, "time_per_epoch_s": 0.5, "seed": 0},   # 40
            {"nodes": 4, "steps_per_epoch": 5, "time_per_epoch_s": 0.5, "seed": 1},
            {"nodes": 4, "steps_per_epoch": 5, "time_per_epoch_s": 1.0, "method": "sgp"},  # sgp's smallest: 4
            {"nodes": 8, "steps_per_epoch": 3, "time_per_epoch_s": 1.0, "method": "sgp"},
            {"nodes": 2, "steps_per_epoch": 10, "time_per_epoch_s": 2.0, "straggler": "slow"},
            {"nodes": 4, "steps_per_epoch": 5, "time_per_epoch_s": 2.0, "straggler": "slow"}]
    t = plots.scaling_table(_runs(rows)).set_index(["straggler", "method", "nodes"])
    assert t.loc[("none", "allreduce_sgd", 4), "speedup"] == pytest.approx(40 / 30)
    assert t.loc[("none", "sgp", 4), "speedup"] == pytest.approx(1.0)
    assert t.loc[("none", "sgp", 8), "speedup"] == pytest.approx(24 / 20)
    assert t.loc[("none", "sgp", 8), "ideal"] == pytest.approx(2.0)
    assert t.loc[("slow", "allreduce_sgd", 4), "speedup"] == pytest.approx(1.0)
