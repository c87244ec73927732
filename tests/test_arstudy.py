"""distrepro_wf.bench.arstudy: the all-reduce study's tables, claims and checks (pure; the timings
themselves are tests/test_allreduce_algorithms.py's)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from distrepro_wf.bench import arstudy
from impls.comm.allreduce import ALGORITHMS, DUPLEX
from impls.comm.costmodel import allreduce_cost, alpha_beta_seconds
from impls.errors import ConfigError
from impls.sim.platforms import alpha_beta, platform_config

ROOT = Path(__file__).resolve().parents[1]
SIZES = [1e3, 1e5, 1e8]


def sim_rows(platform="ethernet_10g", nodes=(4, 8, 256), slow=None):
    """Rows as the simulation gives them on a star: the alpha-beta times (``slow``: {algo: factor})."""
    cfg = platform_config(platform)
    a, b = alpha_beta(cfg)
    one = alpha_beta(cfg, duplex=False)[1]
    return [{"backend": "simgrid", "platform": platform, "n": n, "algorithm": algo, "bytes": s,
             "seconds": alpha_beta_seconds(allreduce_cost(algo, s, n), a, b if DUPLEX[algo] else one)
             * (slow or {}).get(algo, 1.0)}
            for n in nodes for algo in ALGORITHMS for s in SIZES]


def test_study_table_alpha_beta_bus_bandwidth_and_rank():
    t = arstudy.study_table(sim_rows())
    assert (t["ratio"] == 1.0).all()
    assert list(t.columns) == arstudy.COLUMNS
    r = t[(t["n"] == 4) & (t["algorithm"] == "ring") & (t["bytes"] == 1e8)].iloc[0]
    assert r["bus_gbps"] == pytest.approx(1.5 * 1e8 / r["seconds"] / 1e9, rel=1e-5)
    assert r["rank"] in (1, 2)  # the ring or Rabenseifner is fastest at 100 MB


def test_real_rows_get_a_fitted_model():
    alpha, beta = 30e-6, 2e9
    rows = [{"backend": "gloo", "platform": "loopback", "n": 4, "algorithm": algo, "bytes": s,
             "seconds": alpha_beta_seconds(allreduce_cost(algo, s, 4), alpha, beta)} for algo in ALGORITHMS for s in SIZES]
    rows.append({"backend": "gloo", "platform": "loopback", "n": 4, "algorithm": "gloo", "bytes": 1e3, "seconds": 1e-4})
    assert arstudy.fit_alpha_beta(pd.DataFrame(rows[:-1])) == pytest.approx((alpha, beta), rel=1e-6)
    t = arstudy.study_table(rows)
    ours = t[t["algorithm"] != "gloo"]
    assert ours["ratio"].to_numpy() == pytest.approx(1.0, abs=1e-5)
    assert t[t["algorithm"] == "gloo"]["alpha_beta_s"].isna().all() and "fitted" in t["model"].iloc[0]


def test_winners_follow_the_model():
    w = arstudy.winners(arstudy.study_table(sim_rows()))
    small = w[(w["n"] == 256) & (w["bytes"] == 1e3)].iloc[0]
    assert small["winner"] == "recursive_doubling" and small["model_agrees"]
    assert set(w[w["bytes"] == 1e8]["winner"]) <= {"ring", "rabenseifner"}
    grid = arstudy.winners_grid(w)
    assert list(grid.columns) == ["platform", "n", "1 KB", "100 KB", "100 MB"]
    assert grid.set_index("n").loc[256, "1 KB"] == "recursive_doubling"


CLAIMS = [
    {"id": "ring_large", "statement": "s", "sources": ["x"], "a": {"algorithm": "ring"}, "b": ["tree", "ps"],
     "where": {"sizes": {"min": 1e7}, "nodes": {"min": 4}}, "expect": {"op": "<", "value": 1.0}},
    {"id": "ps_grows", "statement": "s", "sources": ["x"], "a": {"algorithm": "ps", "n": 256},
     "b": {"algorithm": "ps", "n": 8}, "where": {"sizes": {"min": 1e5}}, "expect": {"op": ">", "value": 10.0}},
    {"id": "none", "statement": "s", "sources": ["x"], "a": {"algorithm": "ring"}, "b": ["tree"],
     "where": {"platforms": ["fat_tree"]}, "expect": {"op": "<", "value": 1.0}},
]


def test_claims_statuses():
    t = arstudy.study_table(sim_rows())
    s = arstudy.evaluate_claims(t, CLAIMS, {"x": "UNVERIFIED"})
    ring = s[s["claim"] == "ring_large"]
    assert len(ring) == 3 * 2 and ring["passes"].all() and ring["sources"].iloc[0] == "x (UNVERIFIED)"
    ps = s[s["claim"] == "ps_grows"]
    assert list(ps["a"]) == ["ps@256"] * 2 and list(ps["b"]) == ["ps@8"] * 2 and ps["passes"].all()
    summ = arstudy.claims_summary(s, CLAIMS).set_index("claim")["status"].to_dict()
    assert summ == {"ring_large": "reproduced", "ps_grows": "reproduced", "none": "not comparable"}
    # a ring 3x slower than its model fails at some settings only
    slow = arstudy.study_table(sim_rows(slow={"ring": 3.0}))
    out = arstudy.claims_summary(arstudy.evaluate_claims(slow, CLAIMS[:1]), CLAIMS[:1]).iloc[0]
    assert out["status"] == "partly reproduced" and "fail" in out["note"]


def test_spec_errors_name_the_key():
    spec = yaml.safe_load((ROOT / "config" / "allreduce_study.yaml").read_text())
    arstudy.load_spec(spec)
    with pytest.raises(ConfigError, match="platforms.*unknown platform 'gige'"):
        arstudy.load_spec({**spec, "platforms": ["gige"]})
    with pytest.raises(ConfigError, match="algorithms.*allowed: ring, tree"):
        arstudy.load_spec({**spec, "algorithms": ["butterfly"]})
    with pytest.raises(ConfigError, match="unknown key"):
        arstudy.load_spec({**spec, "node": [2]})
    with pytest.raises(ConfigError, match=r"claims\[0\].expect.op"):
        arstudy.load_spec({**spec, "claims": [{**spec["claims"][0], "expect": {"op": "==", "value": 1}}]})


def test_shipped_claims_cite_published_rows():
    spec = arstudy.load_spec(yaml.safe_load((ROOT / "config" / "allreduce_study.yaml").read_text()))
    numbers = pd.read_csv(ROOT / "config" / "published" / "numbers.csv", dtype=str).set_index("id")
    for c in spec["claims"]:
        for s in c["sources"]:
            assert numbers.loc[s, "page"] == "hitchhiker", (c["id"], s)


def test_figure(tmp_path):
    arstudy.figure(arstudy.study_table(sim_rows(nodes=(4,))), tmp_path / "f.png", nodes=(4,))
    assert (tmp_path / "f.png").stat().st_size > 5_000
