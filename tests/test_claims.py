"""Claims: validation at pipeline start, evaluation (statuses, statistics, bootstrap CI over seeds)
and the rule that missing results are never "reproduced"."""

from __future__ import annotations

import copy
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import report_fixture as rf
from distrepro_wf import claims as wfclaims
from distrepro_wf.collect import summarize
from impls.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PUB = ROOT / "config" / "published"


def _published_with(tmp_path: Path, claims: list[dict], papers: dict | None = None) -> Path:
    d = tmp_path / "published"
    shutil.copytree(PUB, d)
    doc = yaml.safe_load((d / "claims.yaml").read_text())
    doc["claims"] = claims
    if papers is not None:
        doc["papers"] = papers
    (d / "claims.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return d


def claim(**over):
    c = {"id": "c1", "paper": "sgp", "statement": "s", "experiment": "sgp", "metric": "time_per_epoch_s",
         "compare": "ratio", "a": {"method": "sgp_1peer"}, "b": {"method": "allreduce_sgd"},
         "expect": {"op": "<", "value": 1.0, "tolerance": 0.0}, "sources": ["slowmo_t2a_sgp_tpi"]}
    c.update(over)
    return c


def runs_table(rows: list[tuple]) -> pd.DataFrame:
    """rows of (method, nodes, straggler, seed, time_per_epoch_s, final_acc)."""
    return pd.DataFrame(rows, columns=["method", "nodes", "straggler", "seed", "time_per_epoch_s", "final_acc"])


def evaluate(tmp_path, claims, runs, failed=None, config=None):
    config = config or rf.CONFIG
    pub = wfclaims.load(config, _published_with(tmp_path, claims))
    return wfclaims.evaluate(pub, config, {"sgp": runs}, {"sgp": failed} if failed is not None else {})


# ------------------------------------------------------------------ validation


def test_shipped_claims_name_known_metrics_and_sources():
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    pub = wfclaims.load(cfg)
    assert {c["metric"] for c in pub.claims} <= set(wfclaims.METRICS)
    # the example claims are there, each with published source rows
    ids = {c["id"] for c in pub.claims}
    assert {"sgp_epoch_faster_than_ar", "sgp_top1_within_1p2_of_ar", "adpsgd_epoch_4to8x_faster",
            "signum_mv_32x_fewer_bytes", "signum_mv_byzantine_3of7", "efsgdm_top1_like_full_precision",
            "d2_beats_dpsgd_labels"} <= ids
    # experiments not configured yet are "not comparable", not errors
    assert pub.not_configured["signum_mv_32x_fewer_bytes"] == "experiment 'signsgd' not in config"
    assert "d2_beats_dpsgd_labels" not in pub.not_configured  # configured: evaluated


def test_unknown_metric_is_an_error_even_for_unconfigured_experiments(tmp_path):
    d = _published_with(tmp_path, [claim(experiment="not_there_yet", metric="top1")])
    with pytest.raises(ConfigError) as e:
        wfclaims.load(rf.CONFIG, d)
    assert "claims[0] (c1).metric" in str(e.value) and "unknown metric 'top1'" in str(e.value)
    assert "final_acc" in str(e.value)  # lists the known ones


def test_unknown_method_of_a_configured_experiment_is_an_error(tmp_path):
    d = _published_with(tmp_path, [claim(a={"method": "sgp_1per"})])
    with pytest.raises(ConfigError) as e:
        wfclaims.load(rf.CONFIG, d)
    msg = str(e.value)
    assert "claims[0] (c1).a.method" in msg and "unknown method 'sgp_1per'" in msg and "sgp_1peer" in msg


def test_registered_but_unconfigured_method_is_not_comparable(tmp_path):
    cfg = copy.deepcopy(rf.CONFIG)
    del cfg["experiments"]["sgp"]["methods"]["allreduce_sgd"]
    pub = wfclaims.load(cfg, _published_with(tmp_path, [claim()]))
    res = wfclaims.evaluate(pub, cfg, {}, {})
    assert res["status"].tolist() == ["not comparable"]
    assert "method 'allreduce_sgd' not configured in experiment 'sgp'" in res["reason"].iloc[0]


def test_unconfigured_experiment_methods_are_not_checked(tmp_path):
    pub = wfclaims.load(rf.CONFIG, _published_with(tmp_path, [claim(experiment="signsgd",
                                                                     a={"method": "not_written_yet"})]))
    res = wfclaims.evaluate(pub, rf.CONFIG, {}, {})
    assert res[["status", "reason"]].values.tolist() == [["not comparable", "experiment 'signsgd' not in config"]]


@pytest.mark.parametrize("over, key, words", [
    ({"paper": "nopaper"}, "paper", "unknown paper 'nopaper'"),
    ({"sources": ["no_such_row"]}, "sources", "'no_such_row' is no id of numbers.csv"),
    ({"where": {"stragglers": ["slow9x"]}}, "where.stragglers", "unknown straggler setting 'slow9x'"),
    ({"compare": "ratio", "b": None}, "b", "None is not of type 'object'"),
    ({"compare": "absolute"}, "b", "has one side (a)"),
    ({"compare": "value", "b": {"method": "dpsgd"}, "requires": {"workload": "w"}}, "b", "has one side"),
    ({"compare": "value", "requires": {"workload": "w"}, "b": None}, "b", "not of type 'object'"),
    ({"expect": {"op": "between", "value": 2.0, "tolerance": 0}}, "expect.value", "needs [low, high]"),
    ({"expect": {"op": "<", "value": [1, 2], "tolerance": 0}}, "expect.value", "needs a number"),
    ({"expect": {"op": "<", "value": 1, "tolerance": -1}}, "expect.tolerance", "less than the minimum of 0"),
    ({"compare": "quotient"}, "compare", "allowed values: ratio, difference, value, absolute"),
    ({"a": {"method": "sgp_1peer", "seeds": 3}}, "a", "unknown key(s) ['seeds']; allowed keys: method, nodes"),
])
def test_malformed_claim_is_a_clear_error(tmp_path, over, key, words):
    d = _published_with(tmp_path, [claim(**over)])
    with pytest.raises(ConfigError) as e:
        wfclaims.load(rf.CONFIG, d)
    assert f"claims[0]" in str(e.value) and f".{key}:" in str(e.value), str(e.value)
    assert words in str(e.value), str(e.value)


def test_absolute_claim_needs_its_setting(tmp_path):
    ab = claim(compare="absolute", published={"value": 1.0, "note": "n"})
    del ab["b"]
    with pytest.raises(ConfigError, match=r"claims\[0\] \(c1\)\.requires: compare 'absolute' needs requires"):
        wfclaims.load(rf.CONFIG, _published_with(tmp_path, [ab]))


def test_duplicate_claim_id(tmp_path):
    with pytest.raises(ConfigError, match=r"claims\[1\] \(c1\)\.id: duplicate claim id"):
        wfclaims.load(rf.CONFIG, _published_with(tmp_path, [claim(), claim()]))


def test_pipeline_start_rejects_a_claim_with_an_unknown_metric(tmp_path):
    """`snakemake -n` on a copy of the workflow fails before any job, naming the claim and key."""
    for name in ("Snakefile", "config", "workflows"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    doc = yaml.safe_load((tmp_path / "config/published/claims.yaml").read_text())
    doc["claims"][0]["metric"] = "top5_acc"
    (tmp_path / "config/published/claims.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}/workflows/lib:{ROOT}")
    snakemake = Path(sys.executable).parent / "snakemake"
    p = subprocess.run([str(snakemake), "-n", "--cores", "1"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "invalid published numbers or claims" in out and "unknown metric 'top5_acc'" in out, out[-2000:]


# ------------------------------------------------------------------ evaluation


def test_ratio_statuses_and_statistics(tmp_path):
    runs = runs_table([("sgp_1peer", 4, "none", s, t, 0.9) for s, t in ((1, 0.30), (2, 0.32), (3, 0.34))]
                      + [("allreduce_sgd", 4, "none", s, t, 0.9) for s, t in ((1, 0.50), (2, 0.52), (3, 0.54))])
    res = evaluate(tmp_path, [claim(published={"value": 0.724, "note": "n"}),
                              claim(id="c2", a={"method": "allreduce_sgd"}, b={"method": "sgp_1peer"})], runs)
    r1, r2 = res.iloc[0], res.iloc[1]
    assert r1["status"] == "reproduced" and r2["status"] == "not reproduced"
    assert r1["measured"] == pytest.approx(0.32 / 0.52, abs=1e-12)
    assert r1["gap"] == pytest.approx(0.32 / 0.52 - 0.724, abs=1e-12)
    assert (r1["nodes"], r1["straggler"], r1["seeds_a"], r1["seeds_b"]) == (4, "none", 3, 3)
    assert r1["ci_low"] <= r1["measured"] <= r1["ci_high"] and r1["robust"] == "yes"
    assert r2["measured"] == pytest.approx(0.52 / 0.32, abs=1e-12)


def test_difference_in_display_units_and_tolerance(tmp_path):
    runs = runs_table([("sgp_1peer", 4, "none", s, 0.3, a) for s, a in ((1, 0.940), (2, 0.942))]
                      + [("allreduce_sgd", 4, "none", s, 0.5, a) for s, a in ((1, 0.952), (2, 0.954))])
    base = {"metric": "final_acc", "compare": "difference"}
    res = evaluate(tmp_path, [
        claim(**base, expect={"op": ">=", "value": -1.2, "tolerance": 0.0}),
        claim(id="c2", **base, expect={"op": ">=", "value": -1.0, "tolerance": 0.0}),
        claim(id="c3", **base, expect={"op": ">=", "value": -1.0, "tolerance": 0.25}),
        claim(id="c4", **base, expect={"op": "within", "value": 0.0, "tolerance": 1.2}),
        claim(id="c5", **base, expect={"op": "between", "value": [-1.3, -1.1], "tolerance": 0.0}),
    ], runs)
    assert res["measured"].iloc[0] == pytest.approx(-1.2, abs=1e-9)  # points, not fractions
    assert res["unit"].iloc[0] == "pt"
    assert res["status"].tolist() == ["reproduced", "not reproduced", "reproduced", "reproduced", "reproduced"]


def test_missing_results_are_never_reproduced(tmp_path):
    runs = runs_table([("allreduce_sgd", 4, "none", 1, 0.5, 0.9)])
    failed = pd.DataFrame([{"method": "sgp_1peer", "nodes": 4, "straggler": "none", "seed": 1}])
    res = evaluate(tmp_path, [claim(), claim(id="c2", where={"nodes": {"min": 8}})], runs, failed)
    assert res["status"].tolist() == ["not comparable", "not comparable"]
    assert res["reason"].iloc[0] == "no completed run of sgp_1peer at n=4, none (1 failed)"
    assert "setting not run: the claim needs nodes >= 8" in res["reason"].iloc[1]
    assert "nodes [4]" in res["reason"].iloc[1]
    # no results at all (empty table)
    res = evaluate(tmp_path / "x", [claim()], pd.DataFrame())
    assert res["status"].tolist() == ["not comparable"]


def test_metric_never_reached_is_not_comparable(tmp_path):
    runs = runs_table([("sgp_1peer", 4, "none", 1, 0.3, 0.9), ("allreduce_sgd", 4, "none", 1, 0.5, 0.9)])
    runs["time_to_target_s"] = [np.nan, 1.0]
    res = evaluate(tmp_path, [claim(metric="time_to_target_s")], runs)
    assert res["status"].iloc[0] == "not comparable"
    assert "time_to_target_s missing for sgp_1peer" in res["reason"].iloc[0]


def test_absolute_numbers_only_at_the_published_setting(tmp_path):
    ab = claim(metric="best_acc", compare="absolute", b=None, a={"method": "allreduce_sgd"},
               requires={"workload": "resnet50_imagenet", "nodes": [32]},
               expect={"op": "within", "value": 76.0, "tolerance": 0.5},
               published={"value": 76.0, "note": "SlowMo"}, sources=["slowmo_t1_ar_top1"])
    del ab["b"]
    runs = runs_table([("allreduce_sgd", 32, "none", 1, 100.0, 0.9)])
    runs["best_acc"] = [0.7580]
    res = evaluate(tmp_path, [ab], runs)
    assert res["status"].iloc[0] == "not comparable"
    assert res["reason"].iloc[0].startswith("reduced scale: experiment 'sgp' runs workload 'digits_mlp'")
    cfg = copy.deepcopy(rf.CONFIG)
    cfg["workloads"]["resnet50_imagenet"] = rf.WORKLOAD
    cfg["experiments"]["sgp"]["workload"] = "resnet50_imagenet"
    res = evaluate(tmp_path / "b", [ab], runs, config=cfg)
    assert res["status"].iloc[0] == "not comparable" and "setting not run" in res["reason"].iloc[0]
    cfg["experiments"]["sgp"]["nodes"] = [32]
    res = evaluate(tmp_path / "c", [ab], runs, config=cfg)
    assert res["status"].iloc[0] == "reproduced"
    assert res["measured"].iloc[0] == pytest.approx(75.80) and res["gap"].iloc[0] == pytest.approx(-0.20)


def test_selectors_fix_a_sides_setting(tmp_path):
    """b = the same method without a straggler: each straggler setting is compared with 'none'."""
    cfg = copy.deepcopy(rf.CONFIG)
    cfg["experiments"]["sgp"]["stragglers"] = ["none", "slow1x4"]
    runs = runs_table([("allreduce_sgd", 4, "none", 1, 0.5, 0.9), ("allreduce_sgd", 4, "slow1x4", 1, 1.5, 0.9)])
    c = claim(a={"method": "allreduce_sgd"}, b={"method": "allreduce_sgd", "straggler": "none"},
              where={"stragglers": ["slow1x4"]}, expect={"op": ">=", "value": 2.0, "tolerance": 0.0})
    res = evaluate(tmp_path, [c], runs, config=cfg)
    assert res[["straggler", "status"]].values.tolist() == [["slow1x4", "reproduced"]]
    assert res["measured"].iloc[0] == pytest.approx(3.0)
    assert math.isnan(res["ci_low"].iloc[0])  # one seed: no interval


def test_bootstrap_ci_paired_deterministic_and_degenerate():
    a = pd.Series([1.0, 2.0, 3.0, 4.0], index=[1, 2, 3, 4])
    b = a + 10.0
    lo, hi = wfclaims.bootstrap_ci("difference", a, b)
    assert (lo, hi) == (-10.0, -10.0)  # paired by seed: the per-seed difference is constant
    lo2, hi2 = wfclaims.bootstrap_ci("difference", a, b.set_axis([5, 6, 7, 8]))
    assert lo2 < -10.0 < hi2  # unpaired: the seeds' spread shows
    assert wfclaims.bootstrap_ci("value", a, None) == wfclaims.bootstrap_ci("value", a, None)
    lo3, hi3 = wfclaims.bootstrap_ci("value", a, None)
    assert 1.0 <= lo3 < 2.5 < hi3 <= 4.0
    assert all(math.isnan(x) for x in wfclaims.bootstrap_ci("value", a.iloc[:1], None))


def test_summary_status_per_claim():
    res = pd.DataFrame({"claim": ["x", "x", "y", "y", "z"], "paper": "p", "experiment": "e", "statement": "s",
                        "status": ["reproduced", "not comparable", "reproduced", "not reproduced", "not comparable"],
                        "reason": ["", "no run", "", "", "experiment 'e' not in config"]})
    s = wfclaims.summarize(res).set_index("claim")
    assert s["status"].to_dict() == {"x": "reproduced", "y": "not reproduced", "z": "not comparable"}
    assert s.loc["x", "reason"] == "no run"


def test_every_metric_is_a_column_of_the_collected_runs_table():
    ep = rf._epochs(("sgp", "sgp_1peer", 4, "none"), 1)
    info = {"experiment": "sgp", "method": "sgp_1peer", "nodes": 4, "straggler": "none", "seed": 1,
            "target_acc": 0.5, "steps_per_epoch": 10}
    row = summarize(info, ep)
    for name, m in wfclaims.METRICS.items():
        assert m.column in row and not pd.isna(row[m.column]), name
    assert row["bytes_per_step"] == pytest.approx(row["bytes_sent_per_epoch"] / 10)
