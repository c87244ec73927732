"""Claims: validation at pipeline start, evaluation (statuses, t intervals over seeds, P(A beats B))
and the rule that missing results are never "reproduced"."""

from __future__ import annotations

import copy
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats as scipy_stats

import report_fixture as rf
from distrepro_wf.claims import evaluate as wfclaims
from distrepro_wf.claims import published as wfpublished
from distrepro_wf.claims import stats as wfstats
from distrepro_wf.pipeline import catalogue as wfcatalogue
from distrepro_wf.pipeline.collect import summarize
from distrepro_wf.report.build import build
from impls.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PUB = ROOT / "config" / "published"


def _published_with(tmp_path: Path, claims: list[dict], papers: dict | None = None) -> Path:
    d = tmp_path / "published"
    shutil.copytree(PUB, d, dirs_exist_ok=True)
    doc = yaml.safe_load((d / "claims.yaml").read_text())
    doc["claims"] = claims
    if papers is not None:
        doc["papers"] = papers
    (d / "claims.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return d


def claim(**over):
    c = {"id": "c1", "paper": "sgp", "statement": "s", "experiment": "sgp", "metric": "time_per_epoch_s",
         "compare": "ratio", "a": {"method": "sgp_1peer"}, "b": {"method": "allreduce_sgd"},
         "expect": {"op": "<", "value": 1.0, "tolerance": 0.0}, "sources": ["slowmo_t2a_sgp_tpi"],
         "mechanism": {"text": "t"}}
    c.update(over)
    return c


def runs_table(rows: list[tuple]) -> pd.DataFrame:
    """rows of (method, nodes, straggler, seed, time_per_epoch_s, final_acc)."""
    return pd.DataFrame(rows, columns=["method", "nodes", "straggler", "seed", "time_per_epoch_s", "final_acc"])


def evaluate(tmp_path, claims, runs, failed=None, config=None):
    config = config or rf.CONFIG
    pub = wfpublished.load(config, _published_with(tmp_path, claims))
    return wfclaims.evaluate(pub, config, {"sgp": runs}, {"sgp": failed} if failed is not None else {})


# ------------------------------------------------------------------ validation


def test_shipped_claims_name_known_metrics_and_sources():
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    pub = wfpublished.load(cfg)
    assert {c["metric"] for c in pub.claims} <= set(wfcatalogue.METRICS)
    # the issue's example claims are there, each with published source rows
    ids = {c["id"] for c in pub.claims}
    assert {"sgp_epoch_faster_than_ar", "sgp_top1_within_1p2_of_ar", "adpsgd_epoch_4to8x_faster",
            "signum_mv_32x_fewer_bytes", "signum_mv_byzantine_3of7", "efsgdm_top1_like_full_precision",
            "d2_beats_dpsgd_labels"} <= ids
    # experiments of another config file are "not comparable", not errors; the reason names the file and
    # the command that produces the claim's rows (issue 24)
    assert pub.not_configured["katyusha_x_lower_loss_than_svrg"] == (
        "experiment 'katyusha_x' is not in this run's config; it is defined in config/katyusha_x.yaml: "
        "run `snakemake --cores 2 --configfile config/katyusha_x.yaml`")
    assert "d2_beats_dpsgd_labels" not in pub.not_configured  # configured: evaluated


def test_every_claim_bearing_setting_runs_five_seeds_by_default():
    """The shipped grid gives every relational claim at least one setting, and every side of every
    such setting >= 5 seeds (a claim judged on fewer than 3 is provisional); trimming the grid for
    time must drop settings, not seeds."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    pub = wfpublished.load(cfg)
    checked = 0
    for c in pub.claims:
        if c["id"] in pub.not_configured or c["compare"] == "absolute":
            continue
        grid = wfclaims._grid(cfg, c["experiment"])
        settings = wfclaims._settings(c, grid)
        assert settings, f"{c['id']}: no configured setting"
        for nodes, straggler in settings:
            for side in ("a", "b"):
                if side in c:
                    seeds = set(wfclaims._select(grid, c[side], nodes, straggler)["seed"])
                    assert len(seeds) >= 5, (c["id"], side, nodes, straggler, sorted(seeds))
                    checked += 1
    assert checked >= 20


def test_unknown_metric_is_an_error_even_for_unconfigured_experiments(tmp_path):
    d = _published_with(tmp_path, [claim(experiment="not_there_yet", metric="top1")])
    with pytest.raises(ConfigError) as e:
        wfpublished.load(rf.CONFIG, d)
    assert "claims[0] (c1).metric" in str(e.value) and "unknown metric 'top1'" in str(e.value)
    assert "final_acc" in str(e.value)  # lists the known ones


def test_unknown_method_of_a_configured_experiment_is_an_error(tmp_path):
    d = _published_with(tmp_path, [claim(a={"method": "sgp_1per"})])
    with pytest.raises(ConfigError) as e:
        wfpublished.load(rf.CONFIG, d)
    msg = str(e.value)
    assert "claims[0] (c1).a.method" in msg and "unknown method 'sgp_1per'" in msg and "sgp_1peer" in msg


def test_registered_but_unconfigured_method_is_not_comparable(tmp_path):
    cfg = copy.deepcopy(rf.CONFIG)
    del cfg["experiments"]["sgp"]["methods"]["allreduce_sgd"]
    pub = wfpublished.load(cfg, _published_with(tmp_path, [claim()]))
    res = wfclaims.evaluate(pub, cfg, {}, {})
    assert res[["status", "reason"]].values.tolist() == [[
        "not comparable", "method 'allreduce_sgd' not in this config (experiment 'sgp' runs dpsgd, sgp_1peer, "
                          "sgp_2peer, osgp)"]]


def test_a_user_grid_without_a_claimed_method_or_straggler_makes_those_claims_not_comparable():
    """A user's grid may leave out method keys and straggler settings of the shipped config
    (sgp_1peer is a method key there, no registered algorithm): every shipped claim still loads,
    those naming what the grid lacks are "not comparable", the others are evaluated."""
    cfg = copy.deepcopy(rf.CONFIG)
    cfg["experiments"]["sgp_sim"]["methods"] = {"allreduce_sgd": {}, "dpsgd": {}}
    cfg["experiments"]["baseline"]["stragglers"] = ["none"]
    cfg["experiments"]["adpsgd_sim"] = copy.deepcopy(cfg["experiments"]["sgp_sim"]) | {
        "methods": {"allreduce_sgd": {}, "adpsgd": {}, "dpsgd": {}}}
    del cfg["stragglers"]["slow1x4"]
    pub = wfpublished.load(cfg)  # the shipped claims.yaml
    assert pub.not_configured["sgp_epoch_faster_than_ar"] == (
        "method 'sgp_1peer' not in this config (experiment 'sgp_sim' runs allreduce_sgd, dpsgd)")
    assert pub.not_configured["ar_slowed_by_straggler"] == (
        "straggler setting 'slow1x4' not in this config (it has none)")
    assert "ar_matches_serial_top1" not in pub.not_configured  # baseline's methods are all there
    res = wfclaims.evaluate(pub, cfg, {}, {}).set_index("claim")
    assert res.loc["sgp_epoch_faster_than_ar", "reason"].startswith("method 'sgp_1peer' not in this config")
    assert (res.loc[list(pub.not_configured), "status"] == "not comparable").all()


def test_unconfigured_experiment_methods_are_not_checked(tmp_path):
    pub = wfpublished.load(rf.CONFIG, _published_with(tmp_path, [claim(experiment="signsgd",
                                                                     a={"method": "not_written_yet"})]))
    res = wfclaims.evaluate(pub, rf.CONFIG, {}, {})
    assert res[["status", "reason"]].values.tolist() == [["not comparable", (
        "experiment 'signsgd' is not in this run's config; it is defined in config/config.yaml: "
        "run `snakemake --cores 2 --configfile config/config.yaml`")]]


@pytest.mark.parametrize("over, key, words", [
    ({"paper": "nopaper"}, "paper", "unknown paper 'nopaper'"),
    ({"sources": ["no_such_row"]}, "sources", "'no_such_row' is no id of numbers.csv"),
    ({"where": {"stragglers": ["slow9x"]}}, "where.stragglers", "unknown straggler setting 'slow9x'"),
    # a typo is an error even beside a method that only makes the claim "not comparable"
    ({"b": {"method": "serial_sgd", "straggler": "slow9x"}}, "b.straggler", "unknown straggler setting 'slow9x'"),
    ({"compare": "ratio", "b": None}, "b", "None is not of type 'object'"),
    ({"compare": "absolute"}, "b", "has one side (a)"),
    ({"compare": "value", "b": {"method": "dpsgd"}, "requires": {"workload": "w"}}, "b", "has one side"),
    ({"compare": "value", "requires": {"workload": "w"}, "b": None}, "b", "not of type 'object'"),
    ({"expect": {"op": "between", "value": 2.0, "tolerance": 0}}, "expect.value", "needs [low, high]"),
    ({"expect": {"op": "<", "value": [1, 2], "tolerance": 0}}, "expect.value", "needs a number"),
    ({"expect": {"op": "<", "value": 1, "tolerance": -1}}, "expect.tolerance", "less than the minimum of 0"),
    ({"compare": "quotient"}, "compare", "allowed values: ratio, ratio_vs_control, difference, value, absolute"),
    ({"a": {"method": "sgp_1peer", "seeds": 3}}, "a", "unknown key(s) ['seeds']; allowed keys: method, nodes"),
])
def test_malformed_claim_is_a_clear_error(tmp_path, over, key, words):
    d = _published_with(tmp_path, [claim(**over)])
    with pytest.raises(ConfigError) as e:
        wfpublished.load(rf.CONFIG, d)
    assert "claims[0]" in str(e.value) and f".{key}:" in str(e.value), str(e.value)
    assert words in str(e.value), str(e.value)


def test_absolute_claim_needs_its_setting(tmp_path):
    ab = claim(compare="absolute", published={"value": 1.0, "note": "n"})
    del ab["b"]
    with pytest.raises(ConfigError, match=r"claims\[0\] \(c1\)\.requires: compare 'absolute' needs requires"):
        wfpublished.load(rf.CONFIG, _published_with(tmp_path, [ab]))


def test_duplicate_claim_id(tmp_path):
    with pytest.raises(ConfigError, match=r"claims\[1\] \(c1\)\.id: duplicate claim id"):
        wfpublished.load(rf.CONFIG, _published_with(tmp_path, [claim(), claim()]))


# ------------------------------------------------------------------ evaluation

# Student t quantiles t_{0.975, df} in closed form (not from scipy) for the hand computations below:
# df 2: t = (2p - 1) sqrt(2 / a); df 4: t = 2 sqrt(cos(arccos(sqrt(a)) / 3) / sqrt(a) - 1), a = 4p(1 - p)
_A = 4 * 0.975 * 0.025
T975 = {2: 0.95 * math.sqrt(2 / _A), 4: 2 * math.sqrt(math.cos(math.acos(math.sqrt(_A)) / 3) / math.sqrt(_A) - 1)}


def _seeds(*values: float, start: int = 1) -> pd.Series:
    return pd.Series(values, index=range(start, start + len(values)), dtype=float)


def _cfg_seeds(seeds: list[int]) -> dict:
    cfg = copy.deepcopy(rf.CONFIG)
    cfg["experiments"]["sgp"]["seeds"] = seeds
    return cfg


def test_ratio_statuses_and_statistics(tmp_path):
    """3 seeds paired by seed: the estimate is the geometric mean of the per-seed ratios, the
    interval a paired t on the log-ratios; a ratio and its inverse get mirrored intervals."""
    runs = runs_table([("sgp_1peer", 4, "none", s, t, 0.9) for s, t in ((1, 0.30), (2, 0.32), (3, 0.34))]
                      + [("allreduce_sgd", 4, "none", s, t, 0.9) for s, t in ((1, 0.50), (2, 0.52), (3, 0.54))])
    res = evaluate(tmp_path, [claim(published={"value": 0.724, "note": "n"}),
                              claim(id="c2", a={"method": "allreduce_sgd"}, b={"method": "sgp_1peer"})], runs)
    r1, r2 = res.iloc[0], res.iloc[1]
    assert r1["status"] == "reproduced" and r2["status"] == "not reproduced"
    gm = math.exp(np.mean(np.log([0.30 / 0.50, 0.32 / 0.52, 0.34 / 0.54])))
    assert r1["measured"] == pytest.approx(gm, abs=1e-12)
    assert r1["gap"] == pytest.approx(gm - 0.724, abs=1e-12)
    assert (r1["nodes"], r1["straggler"], r1["seeds_a"], r1["seeds_b"]) == (4, "none", 3, 3)
    assert (r1["interval"], r1["df"], r1["provisional"], r1["wins"]) == ("paired t (log ratio)", 2.0, "", "3/3")
    assert r1["ci_low"] < r1["measured"] < r1["ci_high"] < 1
    assert r2["measured"] == pytest.approx(1 / gm, abs=1e-12)
    assert (r2["ci_low"], r2["ci_high"]) == pytest.approx((1 / r1["ci_high"], 1 / r1["ci_low"]), rel=1e-12)
    # a beats b: sgp_1peer's time is lower at every seed; b's beating a is the complement
    assert r1["p_a_beats_b"] > 0.99 and r2["p_a_beats_b"] == pytest.approx(1 - r1["p_a_beats_b"], abs=1e-12)
    assert r1["p_pass"] == pytest.approx(r1["p_a_beats_b"], abs=1e-12)  # pass region a/b < 1: the same event


def test_paired_t_interval_equals_a_hand_computation():
    """Differences 1..5 over 5 seeds: mean 3, sd sqrt(2.5), se sqrt(0.5), df 4, half-width
    t_{0.975,4} * sqrt(0.5); a ratio: the same on the log-ratios, exponentiated back."""
    b = _seeds(10.0, 20.0, 30.0, 40.0, 50.0)
    a = b + _seeds(1.0, 2.0, 3.0, 4.0, 5.0)
    half = T975[4] * math.sqrt(0.5)
    iv = wfstats.interval("difference", a, b, higher_is_better=True)
    assert (iv.method, iv.n, iv.df) == ("paired t", 5, 4.0)
    assert (iv.estimate, iv.low, iv.high) == pytest.approx((3.0, 3.0 - half, 3.0 + half), abs=1e-12)
    assert (iv.low, iv.high) == pytest.approx((1.036757, 4.963243), abs=1e-6)  # 3 -+ 2.776445 * 0.707107
    # ratio: log(a_s / b_s) = d_s / 10
    ra = b * np.exp(_seeds(1.0, 2.0, 3.0, 4.0, 5.0) / 10)
    iv = wfstats.interval("ratio", ra, b, higher_is_better=False)
    assert iv.method == "paired t (log ratio)"
    assert (iv.estimate, iv.low, iv.high) == pytest.approx(
        (math.exp(0.3), math.exp(0.3 - half / 10), math.exp(0.3 + half / 10)), rel=1e-12)
    # the same as scipy's paired test (an independent implementation)
    ci = scipy_stats.ttest_rel(np.log(ra), np.log(b)).confidence_interval(0.95)
    assert (math.log(iv.low), math.log(iv.high)) == pytest.approx((ci.low, ci.high), abs=1e-12)
    # one sample (a value claim): 90, 92, 94 -> 92 +- t_{0.975,2} * 2 / sqrt(3)
    iv = wfstats.interval("value", _seeds(90.0, 92.0, 94.0))
    h = T975[2] * 2 / math.sqrt(3)
    assert (iv.method, iv.estimate, iv.low, iv.high) == ("one-sample t", 92.0, pytest.approx(92 - h, abs=1e-12),
                                                         pytest.approx(92 + h, abs=1e-12))


def test_welch_interval_where_the_seeds_differ():
    """Different seeds: Welch's t with Welch-Satterthwaite degrees of freedom, by hand and as scipy's."""
    a, b = _seeds(1.0, 2.0, 3.0), _seeds(2.0, 4.0, 6.0, 8.0, start=4)
    iv = wfstats.interval("difference", a, b, higher_is_better=True)
    va, vb = 1.0 / 3, (20.0 / 3) / 4  # s^2 / n
    df = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 3)
    assert (iv.method, iv.n, iv.estimate, iv.se) == ("Welch t", 3, -3.0, pytest.approx(math.sqrt(2.0), abs=1e-12))
    assert iv.df == pytest.approx(df, abs=1e-12) and iv.wins == ""
    ci = scipy_stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (iv.low, iv.high) == pytest.approx((ci.low, ci.high), abs=1e-12)
    # one seed on a side: Welch has no variance for it -> no interval
    iv = wfstats.interval("difference", _seeds(1.0), b, higher_is_better=True)
    assert iv.method == "" and math.isnan(iv.low) and iv.estimate == pytest.approx(1.0 - 5.0)


def test_p_a_beats_b_on_a_hand_example():
    """Accuracy differences a - b = -1, 2, 3, 4, 5 points (4 of 5 seeds won by a): mean 2.6, sd
    sqrt(5.3), t = 2.6 / sqrt(5.3 / 5) on 4 degrees of freedom, where the t CDF has the closed form
    F(t) = 1/2 + 3x/4 - x^3/4 with x = t / sqrt(t^2 + 4).  Lower is better for a time: the
    same seeds as times give P = 1 - F."""
    b = _seeds(90.0, 90.0, 90.0, 90.0, 90.0)
    a = b + _seeds(-1.0, 2.0, 3.0, 4.0, 5.0)
    t = 2.6 / math.sqrt(5.3 / 5)
    x = t / math.sqrt(t * t + 4)
    f = 0.5 + 0.75 * x - 0.25 * x ** 3
    iv = wfstats.interval("difference", a, b, higher_is_better=True)
    assert iv.p_a_beats_b == pytest.approx(f, abs=1e-12) and iv.wins == "4/5"
    assert iv.p_a_beats_b == pytest.approx(0.96751, abs=1e-5)
    iv = wfstats.interval("difference", a, b, higher_is_better=False)
    assert iv.p_a_beats_b == pytest.approx(1 - f, abs=1e-12) and iv.wins == "1/5"
    # zero spread (a deterministic statistic): the interval is the point, P is 1 or 0
    iv = wfstats.interval("ratio", 2 * b, b, higher_is_better=False)
    assert (iv.low, iv.estimate, iv.high, iv.se, iv.p_a_beats_b) == (pytest.approx(2.0), pytest.approx(2.0),
                                                                   pytest.approx(2.0), 0.0, 0.0)


def test_pass_region_and_verdict():
    """reproduced: the interval inside the pass region; not reproduced: entirely outside;
    inconclusive: it straddles a boundary (a between region's both boundaries included) or there
    is no interval."""
    lt = {"op": "<", "value": 1.0, "tolerance": 0.0}
    le = {"op": "<=", "value": 1.0, "tolerance": 0.02}
    between = {"op": "between", "value": [4.0, 8.0], "tolerance": 0.0}
    within = {"op": "within", "value": 0.0, "tolerance": 1.5}
    v = wfclaims.verdict
    assert [v(0.5, 0.9, lt), v(1.1, 1.3, lt), v(0.9, 1.1, lt), v(0.5, 1.0, lt), v(1.0, 1.2, lt)] == [
        "reproduced", "not reproduced", "inconclusive", "inconclusive", "not reproduced"]  # "<": 1 fails
    assert [v(0.5, 1.02, le), v(1.02, 1.1, le), v(1.021, 1.1, le)] == [
        "reproduced", "inconclusive", "not reproduced"]  # "<=" with tolerance: 1.02 passes
    assert [v(4.0, 8.0, between), v(3.0, 9.0, between), v(8.5, 9.0, between), v(1.0, 3.9, between)] == [
        "reproduced", "inconclusive", "not reproduced", "not reproduced"]
    assert [v(-1.0, 1.5, within), v(-2.0, 2.0, within), v(1.6, 2.0, within)] == [
        "reproduced", "inconclusive", "not reproduced"]
    assert v(math.nan, math.nan, lt) == "inconclusive"


def test_a_straddling_interval_is_inconclusive(tmp_path):
    """5 seeds whose geometric-mean ratio is < 1 but whose interval reaches past 1: inconclusive,
    neither reproduced nor not reproduced, with P(A beats B) and P(pass) between 0 and 1."""
    ratios = (0.5, 1.3, 0.7, 1.1, 0.8)
    runs = runs_table([("sgp_1peer", 4, "none", s, r, 0.9) for s, r in enumerate(ratios, 1)]
                      + [("allreduce_sgd", 4, "none", s, 1.0, 0.9) for s in range(1, 6)])
    r = evaluate(tmp_path, [claim()], runs, config=_cfg_seeds([1, 2, 3, 4, 5])).iloc[0]
    assert r["measured"] < 1 < r["ci_high"] and r["ci_low"] < 1
    assert (r["status"], r["provisional"], r["wins"]) == ("inconclusive", "", "3/5")
    assert 0.5 < r["p_a_beats_b"] < 0.975 and r["p_pass"] == pytest.approx(r["p_a_beats_b"])
    s = wfclaims.summarize(pd.DataFrame([r]))
    assert s[["status", "provisional", "shown", "inconclusive"]].values.tolist() == [
        ["inconclusive", "", "inconclusive", 1]]


def test_difference_in_display_units_and_tolerance(tmp_path):
    """Differences in points (-1.19, -1.2, -1.21, -1.2, -1.2): interval -1.2 +- 0.0088."""
    accs = ((0.9419, 0.9538), (0.9420, 0.9540), (0.9421, 0.9542), (0.9422, 0.9542), (0.9423, 0.9543))
    runs = runs_table([("sgp_1peer", 4, "none", s, 0.3, a) for s, (a, _) in enumerate(accs, 1)]
                      + [("allreduce_sgd", 4, "none", s, 0.5, b) for s, (_, b) in enumerate(accs, 1)])
    base = {"metric": "final_acc", "compare": "difference"}
    res = evaluate(tmp_path, [
        claim(**base, expect={"op": ">=", "value": -1.25, "tolerance": 0.0}),
        claim(id="c2", **base, expect={"op": ">=", "value": -1.0, "tolerance": 0.0}),
        claim(id="c3", **base, expect={"op": ">=", "value": -1.0, "tolerance": 0.25}),
        claim(id="c4", **base, expect={"op": "within", "value": 0.0, "tolerance": 1.25}),
        claim(id="c5", **base, expect={"op": "between", "value": [-1.3, -1.1], "tolerance": 0.0}),
        claim(id="c6", **base, expect={"op": ">=", "value": -1.2, "tolerance": 0.0}),
    ], runs, config=_cfg_seeds([1, 2, 3, 4, 5]))
    assert res["measured"].iloc[0] == pytest.approx(-1.2, abs=1e-9)  # points, not fractions
    assert res["unit"].iloc[0] == "pt"
    half = T975[4] * math.sqrt(0.00005 / 5)  # sd^2 = (0.01^2 + 0.01^2) / 4
    assert (res["ci_low"].iloc[0], res["ci_high"].iloc[0]) == pytest.approx((-1.2 - half, -1.2 + half), abs=1e-9)
    assert res["status"].tolist() == ["reproduced", "not reproduced", "reproduced", "reproduced", "reproduced",
                                      "inconclusive"]


def test_missing_results_are_never_reproduced(tmp_path):
    runs = runs_table([("allreduce_sgd", 4, "none", 1, 0.5, 0.9)])
    failed = pd.DataFrame([{"method": "sgp_1peer", "nodes": 4, "straggler": "none", "seed": 1}])
    res = evaluate(tmp_path, [claim(), claim(id="c2", where={"nodes": {"min": 8}})], runs, failed)
    assert res["status"].tolist() == ["not comparable", "not comparable"]
    assert res["reason"].iloc[0] == ("no completed run of sgp_1peer at n=4, none: 1 failed (seed 1: no reason "
                                     "recorded), the others not collected")  # rf.CONFIG: seeds 1, 2, 3
    assert "setting not run: the claim needs nodes >= 8" in res["reason"].iloc[1]
    assert "nodes [4]" in res["reason"].iloc[1]
    # no results at all (empty table)
    res = evaluate(tmp_path / "x", [claim()], pd.DataFrame())
    assert res["status"].tolist() == ["not comparable"]


def test_a_run_with_no_time_at_all_is_not_comparable(tmp_path):
    """Not reached and no last evaluation to censor it at (an older table without
    time_last_eval_s and wall_s): not comparable, and the reason says which seed."""
    runs = runs_table([("sgp_1peer", 4, "none", 1, 0.3, 0.9), ("allreduce_sgd", 4, "none", 1, 0.5, 0.9)])
    runs["time_to_target_s"] = [np.nan, 1.0]
    res = evaluate(tmp_path, [claim(metric="time_to_target_s")], runs)
    assert res["status"].iloc[0] == "not comparable"
    assert "sgp_1peer: no time to the target and no last evaluation at seed(s) 1" in res["reason"].iloc[0]


def _tta_runs(a: list[float | None], b: list[float | None], last: float = 10.0) -> pd.DataFrame:
    """5 seeds a side: sgp_1peer's times to the target ``a`` and AR-SGD's ``b`` (None: never
    reached, censored at its last evaluation ``last``)."""
    rows = [(m, 4, "none", s, 0.5, 0.9) for m, ts in (("sgp_1peer", a), ("allreduce_sgd", b)) for s in range(1, 6)]
    runs = runs_table(rows)
    times = [t for ts in (a, b) for t in ts]
    runs["time_to_target_s"] = [np.nan if t is None else t for t in times]
    runs["reached_target"] = [t is not None for t in times]
    runs["time_last_eval_s"] = last
    return runs


def test_time_to_target_counts_the_runs_that_never_reach_it(tmp_path):
    """sgp_1peer reaches the target in 4 of 5 runs, each sooner than any AR-SGD run (5 of 5).
    Dropping the miss (the old rule) made it "reproduced" (Welch t on 4 against 5 seeds); censored at
    its last evaluation it reaches the target less often, so it cannot be faster: inconclusive."""
    tta = claim(metric="time_to_target_s")
    runs = _tta_runs([1.0, 1.1, 1.2, 1.3, None], [2.0, 2.1, 2.2, 2.3, 2.4])
    r = evaluate(tmp_path, [tta], runs).iloc[0]
    assert r["status"] == "inconclusive" and "sgp_1peer reaches the target less often" in r["reason"]
    assert (r["tta_reached_a"], r["tta_runs_a"], r["tta_reached_b"], r["tta_runs_b"]) == (4, 5, 5, 5)
    assert (r["tta_median_a"], r["tta_median_b"]) == (1.2, 2.2) and r["measured"] == pytest.approx(1.2 / 2.2)
    assert (r["seeds_a"], r["seeds_b"]) == (5, 5) and r["interval"] == "Kaplan-Meier medians, log-rank test"
    # never reached by sgp_1peer, always by AR-SGD: AR-SGD is sooner (log-rank p 0.0018): not reproduced
    r = evaluate(tmp_path, [tta], _tta_runs([None] * 5, [2.0, 2.1, 2.2, 2.3, 2.4])).iloc[0]
    assert r["status"] == "not reproduced" and r["tta_logrank_p"] == pytest.approx(0.0018419, abs=1e-6)
    assert "allreduce_sgd reaches it sooner" in r["reason"] and math.isnan(r["measured"])
    # nobody arrives (32 simulated nodes in 2 epochs): inconclusive, never dropped
    r = evaluate(tmp_path, [tta], _tta_runs([None] * 5, [None] * 5)).iloc[0]
    assert r["status"] == "inconclusive" and r["reason"].startswith("target not reached")
    assert (r["tta_reached_a"], r["tta_reached_b"]) == (0, 0)
    # sgp_1peer 5 of 5, AR-SGD 2 of 5 and later: SGP sooner (its median defined, AR's not): reproduced
    r = evaluate(tmp_path, [tta], _tta_runs([1.0, 1.1, 1.2, 1.3, 1.4], [5.0, 6.0, None, None, None])).iloc[0]
    assert r["status"] == "reproduced" and math.isnan(r["tta_median_b"]) and r["tta_median_a"] == 1.2
    # every run arrives: nothing censored, the paired t interval on log ratios as before
    r = evaluate(tmp_path, [tta], _tta_runs([1.0, 1.1, 1.2, 1.3, 1.4], [2.0, 2.1, 2.2, 2.3, 2.4])).iloc[0]
    assert r["status"] == "reproduced" and r["interval"] == "paired t (log ratio)"
    assert r["measured"] == pytest.approx(math.exp(np.mean(np.log([1 / 2, 1.1 / 2.1, 1.2 / 2.2, 1.3 / 2.3,
                                                                    1.4 / 2.4]))), rel=1e-12)


def test_time_to_target_compares_arrivals_over_the_time_both_sides_ran(tmp_path):
    """A side whose runs stop earlier has not "reached the target less often" (issue 24's closing
    check, ddcgu_tta_faster_than_sync): DDCGU's 3 epochs end at a third of ps_sync's time.  BEFORE's
    runs: DDCGU arrives in 4 of 5 by 17.3 s, its miss is censored at 18.6 s, every ps_sync run
    arrives later (34.7-55 s): over the common 18.6 s DDCGU reached it 4 times, ps_sync never, and
    the log-rank test says DDCGU is sooner: reproduced (the shares over unequal follow-up said
    "inconclusive: reaches it less often").  AFTER's runs: every DDCGU run censored at 6.9 s, before
    ps_sync's first arrival (14.8 s): too short to compare, inconclusive, said so."""
    tta = claim(metric="time_to_target_s")
    runs = _tta_runs([14.7, None, 15.7, 17.3, 16.2], [34.7, 48.7, 55.0, 38.8, 43.3], last=60.0)
    runs.loc[runs["method"] == "sgp_1peer", "time_last_eval_s"] = 18.6
    r = evaluate(tmp_path, [tta], runs).iloc[0]
    assert (r["tta_reached_a"], r["tta_reached_b"]) == (4, 5) and r["tta_logrank_p"] < 0.05
    assert r["status"] == "reproduced" and "sgp_1peer reaches the target sooner" in r["reason"], r["reason"]
    runs = _tta_runs([None] * 5, [14.8, 20.9, 23.5, 16.6, 18.6], last=30.0)
    runs.loc[runs["method"] == "sgp_1peer", "time_last_eval_s"] = 6.9
    r = evaluate(tmp_path, [tta], runs).iloc[0]
    assert r["status"] == "inconclusive" and r["reason"].startswith(
        "runs too short to compare: both sides were followed only to 6.9 s"), r["reason"]
    assert "allreduce_sgd's first arrival: 14.8 s" in r["reason"]


def test_censored_verdict_rule():
    """:func:`claims.censored_verdict`, step by step (a / b < 1: a must be sooner)."""
    from distrepro_wf.claims.survival import LogRank, Median

    less = {"op": "<", "value": 1.0, "tolerance": 0.0}
    med = lambda m, k, n=5: Median(m, math.nan, math.inf, k, n)  # noqa: E731
    a_sooner, b_sooner, no_diff = (LogRank(0, 0, 1, 9.0, 0.01, True), LogRank(0, 0, 1, 9.0, 0.01, False),
                                   LogRank(0, 0, 1, 1.0, 0.3, True))
    v = wfclaims.censored_verdict
    assert v(less, med(math.nan, 2), med(math.nan, 1), a_sooner)[0] == "inconclusive"  # 1: no median
    assert v({"op": "within", "value": 1.0, "tolerance": 0.1}, med(1, 5), med(2, 4), a_sooner)[0] == "inconclusive"
    assert v(less, med(1, 4), med(2, 5), a_sooner)[0] == "inconclusive"      # 4: a reaches it less often
    assert v(less, med(3, 4), med(2, 5), b_sooner)[0] == "not reproduced"    # 4: ... and b is sooner
    assert v(less, med(1, 5), med(2, 4), b_sooner)[0] == "not reproduced"    # 5
    assert v(less, med(1, 5), med(2, 4), no_diff)[0] == "inconclusive"       # 5
    assert v(less, med(1, 5), med(2, 4), a_sooner)[0] == "reproduced"        # 6
    assert v(less, med(1, 5), med(2, 5), LogRank(0, 0, 0, math.nan, math.nan, False))[0] == "inconclusive"
    # b must be sooner (a / b in [4, 8]: a = AR-SGD, b = AD-PSGD): b reaching it in 0 of 5 cannot be
    between = {"op": "between", "value": [4.0, 8.0], "tolerance": 0.0}
    assert v(between, med(2, 3), med(math.nan, 0), a_sooner)[0] == "not reproduced"
    assert v(between, med(2, 3), med(math.nan, 0), no_diff)[0] == "inconclusive"
    st, why = v(between, med(8, 4), med(1, 5), b_sooner)  # sooner, but the size needs every run
    assert st == "inconclusive" and "needs every run to reach the target" in why
    assert v({"op": ">", "value": 1.0, "tolerance": 0.0}, med(8, 4), med(1, 5), b_sooner)[0] == "reproduced"


def test_absolute_numbers_only_at_the_published_setting(tmp_path):
    ab = claim(metric="best_acc", compare="absolute", b=None, a={"method": "allreduce_sgd"},
               requires={"workload": "resnet50_imagenet", "nodes": [32]},
               expect={"op": "within", "value": 76.0, "tolerance": 0.5},
               published={"value": 76.0, "note": "SlowMo"}, sources=["slowmo_t1_ar_top1"])
    del ab["b"]
    runs = runs_table([("allreduce_sgd", 32, "none", s, 100.0, 0.9) for s in (1, 2, 3)])
    runs["best_acc"] = [0.7580, 0.7590, 0.7570]
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
    r = res.iloc[0]
    assert (r["status"], r["interval"], r["provisional"]) == ("reproduced", "one-sample t", "")
    assert r["measured"] == pytest.approx(75.80) and r["gap"] == pytest.approx(-0.20)
    half = T975[2] * 0.1 / math.sqrt(3)  # [75.55, 76.05] inside [75.5, 76.5]
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((75.8 - half, 75.8 + half), abs=1e-9)
    # one seed: a point estimate and no interval: inconclusive and provisional, never reproduced
    res = evaluate(tmp_path / "d", [ab], runs.iloc[:1], config=cfg)
    r = res.iloc[0]
    assert (r["status"], r["provisional"], r["measured"]) == ("inconclusive", "yes", pytest.approx(75.8))
    assert r["reason"] == "provisional: 1 seed, fewer than 3; no interval: one seed"


def test_selectors_fix_a_sides_setting(tmp_path):
    """b = the same method without a straggler: each straggler setting is compared with 'none'."""
    cfg = copy.deepcopy(rf.CONFIG)
    cfg["experiments"]["sgp"]["stragglers"] = ["none", "slow1x4"]
    runs = runs_table([("allreduce_sgd", 4, "none", 1, 0.5, 0.9), ("allreduce_sgd", 4, "slow1x4", 1, 1.5, 0.9)])
    c = claim(a={"method": "allreduce_sgd"}, b={"method": "allreduce_sgd", "straggler": "none"},
              where={"stragglers": ["slow1x4"]}, expect={"op": ">=", "value": 2.0, "tolerance": 0.0})
    res = evaluate(tmp_path, [c], runs, config=cfg)
    assert res[["straggler", "status", "provisional"]].values.tolist() == [["slow1x4", "inconclusive", "yes"]]
    assert res["measured"].iloc[0] == pytest.approx(3.0)
    assert math.isnan(res["ci_low"].iloc[0])  # one seed: no interval
    assert res["reason"].iloc[0] == "provisional: 1 seed a side, fewer than 3; no interval: one seed a side"


def _two_seed_runs(a_times: tuple[float, float], b_times: tuple[float, float]) -> pd.DataFrame:
    return runs_table([("sgp_1peer", 4, "none", s, t, 0.9) for s, t in zip((1, 2), a_times)]
                      + [("allreduce_sgd", 4, "none", s, t, 0.9) for s, t in zip((1, 2), b_times)])


def test_a_two_seed_claim_is_provisional_and_never_reproduced(tmp_path):
    """a = b / 2 at both seeds: a deterministic ratio, its interval the point 0.5, inside the pass
    region (status reproduced), but 2 seeds < 3: provisional, and the claim is shown as
    provisional, never counted or coloured as reproduced (front page and paper page)."""
    runs = _two_seed_runs((0.25, 0.30), (0.5, 0.6))
    res = evaluate(tmp_path, [claim()], runs)
    r = res.iloc[0]
    assert (r["status"], r["provisional"], r["ci_low"], r["ci_high"]) == (
        "reproduced", "yes", pytest.approx(0.5), pytest.approx(0.5))
    assert r["reason"] == ("provisional: 2 seeds a side, fewer than 3; zero spread: every seed gives the same "
                           "value, the interval is the point")
    s = wfclaims.summarize(res)
    assert s[["status", "provisional", "shown", "provisional_settings"]].values.tolist() == [
        ["reproduced", "yes", "provisional", 1]]
    assert wfclaims.shown_status("reproduced", "yes") == "provisional"
    assert wfclaims.shown_status("not comparable", "yes") == "not comparable"
    # a firm (non-provisional) failure at another setting decides: not reproduced, not provisional
    firm = pd.concat([res, res.assign(nodes=8, status="not reproduced", provisional="")])
    assert wfclaims.summarize(firm)[["status", "provisional", "shown"]].values.tolist() == [
        ["not reproduced", "", "not reproduced"]]


def test_ratio_needs_positive_values(tmp_path):
    """A ratio is judged on log-ratios: a zero (or negative) value at any seed makes the statistic
    undefined and the setting not comparable, naming the side and the seeds."""
    res = evaluate(tmp_path, [claim()], _two_seed_runs((0.5, 0.7), (0.0, 0.0)))
    assert res[["status", "reason"]].values.tolist() == [[
        "not comparable", "statistic undefined: a ratio needs positive values (b = allreduce_sgd is <= 0 at "
                          "seed(s) 1, 2)"]]
    res = evaluate(tmp_path / "b", [claim()], _two_seed_runs((0.0, 0.0), (0.0, 0.0)))  # 0 / 0
    assert res["status"].tolist() == ["not comparable"]
    res = evaluate(tmp_path / "c", [claim()], _two_seed_runs((0.6, 0.6), (0.0, 2.0)))
    r = res.iloc[0]
    assert (r["status"], r["reason"]) == ("not comparable", "statistic undefined: a ratio needs positive values "
                                                            "(b = allreduce_sgd is <= 0 at seed(s) 1)")
    assert math.isnan(r["measured"]) and math.isnan(r["ci_low"])


def test_compare_value_claim(tmp_path):
    """compare: value is mean a in display units (percent), one side, one-sample t, gap to the
    published value: 90, 92, 94 % -> 92 +- 4.97."""
    runs = runs_table([("sgp_2peer", 4, "none", s, 0.3, acc) for s, acc in ((1, 0.90), (2, 0.92), (3, 0.94))])
    c = claim(compare="value", metric="final_acc", a={"method": "sgp_2peer"},
              expect={"op": ">=", "value": 85.0, "tolerance": 0.0}, published={"value": 93.0, "note": "n"})
    del c["b"]
    # (each claim's expect holds for its own published number: the published-claims check)
    c2 = dict(c, id="c2", expect={"op": ">=", "value": 99.0, "tolerance": 0.5}, published={"value": 99.2, "note": "n"})
    c3 = dict(c, id="c3", expect={"op": ">=", "value": 91.0, "tolerance": 0.0})
    res = evaluate(tmp_path, [c, c2, c3], runs)
    r = res.iloc[0]
    assert (r["status"], r["unit"], r["seeds_a"], r["seeds_b"], r["provisional"]) == ("reproduced", "%", 3, 0, "")
    assert r["measured"] == pytest.approx(92.0, abs=1e-12) and r["gap"] == pytest.approx(-1.0, abs=1e-12)
    h = T975[2] * 2 / math.sqrt(3)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((92 - h, 92 + h), abs=1e-12)
    assert math.isnan(r["p_a_beats_b"]) and r["wins"] == ""  # one side: nobody to beat
    assert r["expected"] == "a >= 85"
    assert res["status"].tolist() == ["reproduced", "not reproduced", "inconclusive"]
    assert res["expected"].iloc[1] == "a >= 99 (tolerance 0.5)"
    assert 0 < res["p_pass"].iloc[2] < 1 and res["p_pass"].iloc[1] < 0.025 < 0.975 < res["p_pass"].iloc[0]


# ------------------------------------------------------------------ failed runs

DIVERGED = "diverged: rank 0, step 13 (epoch 1): loss/train = nan"


def failed_table(rows: list[tuple], kind: bool = True) -> pd.DataFrame:
    """failed.csv rows (method, nodes, straggler, seed, reason); with or without the `kind` column."""
    df = pd.DataFrame([{"experiment": "sgp", "method": m, "nodes": n, "straggler": s, "seed": seed, "reason": r,
                        "returncode": 1, "log": "results/logs/train/sgp/n4.log", "attempt_dir": ""}
                       for m, n, s, seed, r in rows])
    if kind:
        df["kind"] = ["diverged" if r.startswith("diverged:") else "crashed" for r in df["reason"]]
    return df


@pytest.mark.parametrize("kind", [True, False], ids=["with-kind", "without-kind"])
def test_a_setting_whose_runs_all_failed_is_not_comparable_naming_the_failure(tmp_path, kind):
    runs = runs_table([("allreduce_sgd", 4, "none", s, 0.5, 0.9) for s in (1, 2, 3)])
    failed = failed_table([("sgp_1peer", 4, "none", s, DIVERGED if s < 3 else "rank 2 exited with code 17")
                           for s in (3, 1, 2)], kind)
    res = evaluate(tmp_path, [claim()], runs, failed)
    assert res[["status", "reason", "seeds_a", "seeds_b"]].values.tolist() == [[
        "not comparable", f"every run failed: sgp_1peer at n=4, none: 3 failed (seed 1: {DIVERGED}; +2 more)", 0, 3]]


def test_a_setting_with_some_runs_failed_is_judged_on_the_completed_ones(tmp_path):
    """Seed 3 of sgp_1peer diverged (its row is only in failed.csv): the ratio uses seeds 1, 2, 4 of
    a and all four of b, unpaired (Welch's t on the logs: geomean a / geomean b), and the reason
    says one run failed and why."""
    runs = runs_table([("sgp_1peer", 4, "none", s, t, 0.9) for s, t in ((1, 0.30), (2, 0.34), (4, 0.32))]
                      + [("allreduce_sgd", 4, "none", s, t, 0.9) for s, t in ((1, 0.50), (2, 0.52), (3, 0.54),
                                                                               (4, 0.51))])
    failed = failed_table([("sgp_1peer", 4, "none", 3, DIVERGED)])
    r = evaluate(tmp_path, [claim()], runs, failed, config=_cfg_seeds([1, 2, 3, 4])).iloc[0]
    assert (r["status"], r["seeds_a"], r["seeds_b"], r["interval"], r["provisional"]) == (
        "reproduced", 3, 4, "Welch t (log ratio)", "")
    gm = lambda *v: math.exp(np.mean(np.log(v)))  # noqa: E731
    assert r["measured"] == pytest.approx(gm(0.30, 0.34, 0.32) / gm(0.50, 0.52, 0.54, 0.51), abs=1e-14)
    assert r["reason"] == f"judged on 3 completed run(s) of sgp_1peer; 1 failed (seed 3: {DIVERGED})"
    # with 2 seeds left on a side the verdict is provisional, and says why
    r = evaluate(tmp_path / "b", [claim()], runs[runs["seed"] != 4], failed, config=_cfg_seeds([1, 2, 3, 4])
                 ).iloc[0]
    assert r["provisional"] == "yes" and r["reason"].startswith(
        "provisional: 2 seeds on the smaller side, fewer than 3; judged on 2")


# ------------------------------------------------------------------ the claim cells of the report


def test_report_cells_show_the_measured_value_interval_and_gap(tmp_path):
    """Render a paper page from hand-made runs and read the claims table back from the HTML: the
    status, measured value, 95% interval with its method, P(A beats B) with the seeds won, P(pass),
    seeds, published and gap cells carry the exact numbers; a provisional claim is shown as
    provisional (never reproduced); a diverged run is in the front page's failed list with its
    reason and in no claim."""
    value = claim(id="v", compare="value", metric="final_acc", a={"method": "sgp_2peer"},
                  expect={"op": ">=", "value": 85.0, "tolerance": 0.0}, published={"value": 93.0, "note": "n"})
    del value["b"]
    claims = [claim(id="r", published={"value": 0.724, "note": "SlowMo"}), value,
              claim(id="z", a={"method": "sgp_2peer"}, expect={"op": "<", "value": 0.2, "tolerance": 0.0}),
              claim(id="p", a={"method": "dpsgd"}), claim(id="f", a={"method": "osgp"})]
    cfg = copy.deepcopy(rf.CONFIG)
    cfg["experiments"]["sgp"]["methods"]["dpsgd"] = {"seeds": [1, 2]}
    runs = runs_table([("sgp_1peer", 4, "none", s, t, 0.9) for s, t in ((1, 0.5), (2, 1.3), (3, 0.7))]
                      + [("allreduce_sgd", 4, "none", s, 1.0, 0.9) for s in (1, 2, 3)]
                      + [("sgp_2peer", 4, "none", s, 0.3, acc) for s, acc in ((1, 0.90), (2, 0.92), (3, 0.94))]
                      + [("dpsgd", 4, "none", s, 0.5, 0.9) for s in (1, 2)])
    failed = failed_table([("osgp", 4, "none", s, DIVERGED) for s in (1, 2)])
    # a simulated speed claim whose verdict flips inside the sensitivity ranges (OSGP / SGP = 0.9 at
    # every seed: reproduced at the nominal parameters only; at half the compute the closed form's
    # OSGP / SGP grows 1.19x on ethernet_10g's nominal 0.456)
    claims.append(claim(id="s", experiment="sgp_sim", a={"method": "osgp"}, b={"method": "sgp_1peer"}))
    # a claim whose experiment only another config file defines: not run by this config (another page)
    claims.append(claim(id="o", paper="adpsgd", experiment="katyusha_x"))
    sim = runs_table([(m, 4, "none", s, t, 0.9) for m, t in (("osgp", 0.27), ("sgp_1peer", 0.30)) for s in (1, 2, 3)])
    tables = tmp_path / "results" / "tables"
    for e, (r, f) in {"sgp": (runs, failed), "baseline": (runs.iloc[0:0], failed.iloc[0:0]),
                      "sgp_sim": (sim, failed.iloc[0:0])}.items():
        (tables / e).mkdir(parents=True)
        r.to_csv(tables / e / "runs.csv", index=False)
        f.to_csv(tables / e / "failed.csv", index=False)
    pub = wfpublished.load(cfg, _published_with(tmp_path, claims))  # osgp: seeds 1, 2
    results = wfclaims.evaluate(pub, cfg, *wfclaims.read_tables(tables, ["baseline", "sgp", "sgp_sim"]))
    out = tmp_path / "reports" / "index.html"
    build(["baseline", "sgp", "sgp_sim"], cfg, tables, out, [], [], pub, results)

    rows = {r[0]: r for r in rf.html_tables(out.parent / "papers" / "sgp.html")["claims"]}
    cols = ["claim", "statement", "experiment", "setting", "status", "measured", "ci", "p_better", "p_pass", "seeds",
            "expected", "published", "gap", "sources", "speed_result", "sensitivity", "rerun"]
    cell = {cid: dict(zip(cols, r)) for cid, r in rows.items()}
    keys = ("setting", "status", "measured", "ci", "p_better", "p_pass", "seeds", "published", "gap")
    # per-seed ratios 0.5, 1.3, 0.7: geomean 0.7691, exp(mean log +- t_{0.975,2} se) = [0.2307, 2.564]
    assert {k: cell["r"][k] for k in keys} == {
        "setting": "n=4, none", "measured": "0.7691 x",
        "status": "inconclusive direction: inconclusive · size: reproduced (0.769x [0.231, 2.56] against 0.724x "
                  "published)",
        "ci": "[0.2307, 2.564] paired t (log ratio), df 2", "p_better": "0.776 2/3 seeds", "p_pass": "0.776",
        "seeds": "3 / 3", "published": "0.724 SlowMo", "gap": "0.0451"}
    assert {k: cell["v"][k] for k in keys + ("expected",)} == {
        "setting": "n=4, none", "measured": "92 %", "ci": "[87.03, 96.97] one-sample t, df 2",
        "status": "reproduced direction: reproduced · size: reproduced (92 % [87, 97] against 93 % published)",
        "p_better": "", "p_pass": "0.987", "seeds": "3", "published": "93 n", "gap": "-1", "expected": "a >= 85"}
    assert {k: cell["z"][k] for k in ("status", "measured", "ci", "p_better", "p_pass")} == {
        "status": "not reproduced direction: not reproduced · size: n/a (the paper states no magnitude) zero spread: "
                  "every seed gives the same value, the interval is the point",
        "measured": "0.3 x", "ci": "[0.3, 0.3] paired t (log ratio), df 2",
        "p_better": "1 3/3 seeds", "p_pass": "0"}  # the same ratio at every seed: zero spread
    # 2 seeds of dpsgd against 3 of allreduce_sgd (unpaired): provisional, whatever its interval says
    assert cell["p"]["status"] == ("provisional direction: provisional · size: n/a (the paper states no magnitude) "
                                   "provisional: 2 seeds on the smaller side, fewer than 3; zero "
                                   "spread: every seed gives the same value, the interval is the point; the "
                                   "interval lies inside the pass region")
    assert (cell["p"]["ci"], cell["p"]["seeds"]) == ("[0.5, 0.5] Welch t (log ratio), df 3", "2 / 3")
    assert cell["f"]["status"] == ("not comparable every run failed: osgp at n=4, none: "
                                   f"2 failed (seed 1: {DIVERGED}; +1 more)")
    assert (cell["f"]["measured"], cell["f"]["ci"], cell["f"]["seeds"]) == ("", "", "")
    # issue 24: each claim names the command (with its --configfile) that produces its rows
    assert {c["rerun"] for c in cell.values()} == {
        "snakemake --cores 2 --configfile config/config.yaml results/tables/claims.csv"}
    front = rf.html_tables(out)
    # every not-comparable row names the config file and the command that produce it
    assert [r[3:] for r in front["missing"] if r[1] == "f"] == [[
        cell["f"]["status"].removeprefix("not comparable "), "config/config.yaml",
        "snakemake --cores 2 --configfile config/config.yaml results/tables/claims.csv"]]
    # the index links the CSV tables, relative links that resolve from reports/
    hrefs = re.findall(r'href="([^"]+\.csv)"', out.read_text())
    assert "../results/tables/sgp/runs.csv" in hrefs and all((out.parent / h).is_file() for h in hrefs), hrefs
    assert [r[:7] for r in front["failed"]] == [["sgp", "osgp", "4", "none", str(s), "diverged", DIVERGED]
                                                for s in (1, 2)]
    # the front page counts each claim once, by the status shown: the provisional one is not reproduced
    sgp_row = next(r for r in front["papers"] if r[0].startswith("SGP"))
    assert sgp_row[4:] == ["6", "1", "1", "2", "1", "1"]  # claims, reproduced, not rep., inconcl., prov., n.c.
    # issue 24, read without a browser: the classes that colour each status (a verdict that flips
    # inside the ranges is never green) and mark each row real or simulated; the front page's
    # verdicts counted apart, real and simulated
    classes = {r[0]: c for r, c in zip(rf.html_tables(out.parent / "papers" / "sgp.html")["claims"],
                                       rf.html_classes(out.parent / "papers" / "sgp.html")["claims"])}
    assert {cid: c[4] for cid, c in classes.items()} == {"r": {"st-inc"}, "v": {"st-ok"}, "z": {"st-fail"},
                                                         "p": {"st-prov"}, "f": {"st-nc"}, "s": {"st-inc"}}
    assert cell["s"]["status"].startswith("inconclusive direction: inconclusive · size: n/a (the paper states no "
                                          "magnitude) reproduced at the nominal parameters, but the verdict flips")
    assert cell["s"]["sensitivity"].startswith("flips to not reproduced when compute per step passes")
    assert {cid: c[14] - {"l"} for cid, c in classes.items()} == {
        **{cid: {"speed-result", "real"} for cid in "rvzpf"}, "s": {"speed-result", "simulated"}}
    assert cell["s"]["speed_result"].startswith("predicted (simulated: platform ethernet_10g, profile resnet50_v100x8)")
    assert cell["r"]["speed_result"] == "measured (real ranks: gloo, 1 host)"
    index = out.read_text()
    for where, label, n, counts in (("real", "real ranks (measured)", 5, {"st-ok": 1, "st-fail": 1, "st-inc": 1}),
                                    ("simulated", "simulated (model predictions)", 1, {"st-inc": 1})):
        assert f'id="split-{where}">On {label}: {n} claims' in index, where
        for cls, k in counts.items():
            assert re.search(rf'id="split-{where}-{cls}">{k} ', index), (where, cls)
    # issue 31: the front page counts the size verdicts too (claims r and v: reproduced; the others n/a)
    assert re.search(r'id="size-reproduced">2 reproduced</span>, <span class="st-fail" id="size-not-reproduced">0 not '
                     r'reproduced</span>, <span class="st-inc" id="size-inconclusive">0 inconclusive</span>, <span '
                     r'class="st-nc" id="size-na">5 n/a</span>', index)
    # the claims this config does not run are in neither split: counted on their own line, so that
    # real + simulated + not run = every claim (5 + 1 + 1 = 7)
    assert re.search(r"Claims: 7;", index)
    assert 'id="split-not-run">Not run by this config: 1 claims,\nnot comparable (their experiments are in ' \
           "config/katyusha_x.yaml)" in index


def test_summary_status_per_claim():
    res = pd.DataFrame({"claim": ["x", "x", "y", "y", "z", "w", "w", "u", "u"], "paper": "p", "experiment": "e",
                        "statement": "s",
                        "status": ["reproduced", "not comparable", "reproduced", "not reproduced", "not comparable",
                                   "reproduced", "inconclusive", "reproduced", "reproduced"],
                        "provisional": ["", "", "", "", "", "", "", "", "yes"],
                        "reason": ["", "no run", "", "", "experiment 'e' not in config", "", "", "", ""]})
    s = wfclaims.summarize(res).set_index("claim")
    assert s["status"].to_dict() == {"x": "reproduced", "y": "not reproduced", "z": "not comparable",
                                     "w": "inconclusive", "u": "reproduced"}
    assert s["shown"].to_dict() == {"x": "reproduced", "y": "not reproduced", "z": "not comparable",
                                    "w": "inconclusive", "u": "provisional"}
    assert s.loc["x", "reason"] == "no run"
    assert s.loc["w", ["reproduced", "inconclusive", "provisional_settings"]].tolist() == [1, 1, 0]


def test_every_metric_is_a_column_of_the_collected_runs_table():
    ep = rf._epochs(("sgp", "sgp_1peer", 4, "none"), 1)
    info = {"experiment": "sgp", "method": "sgp_1peer", "nodes": 4, "straggler": "none", "seed": 1,
            "target_metric": "acc/val", "target_value": 0.5, "steps_per_epoch": 10}
    row = summarize(info, ep)
    for name, m in wfcatalogue.METRICS.items():
        assert m.column in row, name
        # a classification run has every metric but the finite-sum task's (and keys it did not log)
        missing = m.source is not None and m.source[0] not in ep
        missing |= name == "grad_evals_to_target"  # from opt/grad_evals, which only svrg logs
        assert pd.isna(row[m.column]) == missing, name
    assert pd.isna(row["final_gap"]) and not pd.isna(row["final_acc"]) and not pd.isna(row["time_to_target_s"])
    assert row["bytes_per_step"] == pytest.approx(row["bytes_sent_per_epoch"] / 10)


def test_a_claim_on_the_finite_sum_tasks_own_metric(tmp_path):
    """A task's own metric flows into claims: final suboptimality, lower is better, as a ratio of
    the gap of all-reduce SGD to serial SGD's and as a value against a threshold."""
    runs = runs_table([("sgp_1peer", 4, "none", s, 1.0, float("nan")) for s in (1, 2)]
                      + [("allreduce_sgd", 4, "none", s, 1.0, float("nan")) for s in (1, 2)])
    runs["final_gap"] = [2e-5, 4e-5, 4e-5, 4e-5]
    ratio = claim(metric="final_gap", expect={"op": "<=", "value": 1.0, "tolerance": 0.0})
    value = claim(id="c2", compare="value", metric="final_gap", a={"method": "allreduce_sgd"},
                  expect={"op": "<=", "value": 1e-4, "tolerance": 0.0})
    del value["b"]
    res = evaluate(tmp_path, [ratio, value], runs).set_index("claim")
    assert res.loc["c1", "measured"] == pytest.approx(math.sqrt(0.5))  # geometric mean of 0.5 and 1
    assert res.loc["c1", ["status", "provisional"]].tolist() == ["inconclusive", "yes"]  # 2 seeds: t_{0.975,1}
    assert res.loc["c2", "measured"] == pytest.approx(4e-5) and res.loc["c2", "status"] == "reproduced"
    assert res.loc["c2", "provisional"] == "yes" and res.loc["c2", "unit"] == ""


# ------------------------------------------------------------------ mechanisms, controls, second measure


def _timed(rows: list[tuple]) -> pd.DataFrame:
    """rows of (method, nodes, straggler, seed, time_per_epoch_s, comm share, compute share)."""
    t = pd.DataFrame(rows, columns=["method", "nodes", "straggler", "seed", "time_per_epoch_s", "cs", "ps"])
    t["bd_comm_s"] = t["cs"] * t["time_per_epoch_s"]
    t["bd_compute_s"] = t["ps"] * t["time_per_epoch_s"]
    t["final_acc"] = 0.9
    return t.drop(columns=["cs", "ps"])


def _eval_sim(tmp_path, claims, runs, config=None):
    config = config or rf.CONFIG
    pub = wfpublished.load(config, _published_with(tmp_path, claims))
    return wfclaims.evaluate(pub, config, {"sgp_sim": runs, "sgp": runs}, {})


def test_a_setting_that_cannot_show_the_mechanism_is_not_comparable(tmp_path):
    """Same numbers (SGP 0.6x AR-SGD's epoch): judged when AR-SGD communicates 60 % of its epoch
    (above 25 % across the sensitivity ranges; at 40 % it falls below with 2.5x the compute:
    tests/test_closedform.py's gate tests), refused with the share in the reason when it
    communicates 10 %; and on real ranks of a local launch the network check refuses whatever the
    share (loopback)."""
    mech = {"text": "slow network", "requires": [{"check": "network"},
                                                 {"check": "comm_share", "side": "b", "min": 0.25, "source": "S"}]}
    c = claim(experiment="sgp_sim", mechanism=mech)

    def runs(share):
        return _timed([("sgp_1peer", 4, "none", s, 0.3 + 0.01 * s, 0.2, 0.8) for s in (1, 2, 3)]
                      + [("allreduce_sgd", 4, "none", s, 0.5 + 0.01 * s, share, 0.6) for s in (1, 2, 3)])
    ok = _eval_sim(tmp_path, [c], runs(0.6)).iloc[0]
    assert ok["status"] == "reproduced" and ok["mechanism"] == "slow network"
    low = _eval_sim(tmp_path, [c], runs(0.1)).iloc[0]
    assert low["status"] == "not comparable"
    assert "communication is 10% of allreduce_sgd's epoch time (< 25%)" in low["reason"]
    assert "measured 0.6" in low["reason"] and math.isnan(low["ci_low"])
    real = _eval_sim(tmp_path, [claim(mechanism=mech)], runs(0.9)).iloc[0]  # experiment sgp: real ranks
    assert real["status"] == "not comparable" and "loopback" in real["reason"]


def test_a_straggler_claim_needs_compute_bound_steps(tmp_path):
    """compute_share reads the side's runs without straggler: 10 % compute -> refused ("a straggler
    cannot matter", nowhere in the sensitivity ranges; 19 % would pass at 2.54x the compute, now that
    AR-SGD's nominal overlap is its own, 1), 60 % -> judged."""
    cfg = copy.deepcopy(rf.CONFIG)
    cfg["experiments"]["sgp_sim"]["stragglers"] = ["none", "slow1x4"]
    mech = {"text": "slow worker", "requires": [{"check": "compute_share", "side": "b", "min": 0.4, "source": "S"}]}
    c = claim(experiment="sgp_sim", mechanism=mech, where={"stragglers": ["slow1x4"]})

    def runs(share):
        return _timed([(m, 4, st, s, t * (1 + 0.01 * s), 0.1, share) for s in (1, 2, 3)
                       for m, st, t in (("sgp_1peer", "none", 0.3), ("allreduce_sgd", "none", 0.5),
                                        ("sgp_1peer", "slow1x4", 0.35), ("allreduce_sgd", "slow1x4", 1.2))])
    refused = _eval_sim(tmp_path, [c], runs(0.10), cfg).iloc[0]
    assert refused["status"] == "not comparable" and "a straggler cannot matter" in refused["reason"], refused["reason"]
    assert "compute is 10% of allreduce_sgd's epoch time without straggler" in refused["reason"]
    # judged at 60 %, and at most inconclusive: on 10 GbE the share falls below 40 % inside the ranges
    judged = _eval_sim(tmp_path, [c], runs(0.6), cfg).iloc[0]
    assert judged["status"] == "inconclusive" and judged["reason"].startswith(
        "reproduced at the nominal parameters, but the setting stops showing the mechanism (allreduce_sgd's compute "
        "share >= 40%, sourced) when compute per step passes")


def test_exact_averaging_makes_an_accuracy_claim_not_comparable(tmp_path):
    mech = {"text": "approximate averaging", "requires": [{"check": "inexact_averaging", "side": "a"}]}
    c = claim(metric="final_acc", compare="difference", mechanism=mech,
              expect={"op": ">=", "value": -1.2, "tolerance": 0.0})
    runs = runs_table([(m, 4, "none", s, 0.3, 0.9 + 0.001 * s) for s in (1, 2, 3) for m in ("sgp_1peer",
                                                                                          "allreduce_sgd")])
    runs["final_consensus_distance"] = 0.0
    r = evaluate(tmp_path, [c], runs).iloc[0]
    assert r["status"] == "not comparable" and "averages exactly" in r["reason"]
    runs["final_consensus_distance"] = 0.05
    assert evaluate(tmp_path, [c], runs).iloc[0]["status"] == "reproduced"


def test_ratio_vs_control_is_the_paired_ratio_of_ratios(tmp_path):
    """(SGP/AR on the slow network) / (SGP/AR at the control) per seed, then a paired t on the log
    scale: equal to a hand computation; the control's own a/b is reported beside it."""
    cfg = copy.deepcopy(rf.CONFIG)
    cfg["experiments"]["fast"] = copy.deepcopy(cfg["experiments"]["sgp_sim"]) | {"platform": "infiniband_100g"}
    slow_a, slow_b = [0.30, 0.33, 0.31], [0.50, 0.52, 0.55]
    fast_a, fast_b = [0.26, 0.27, 0.25], [0.28, 0.27, 0.29]
    runs = {"sgp_sim": runs_table([("sgp_1peer", 4, "none", s + 1, t, 0.9) for s, t in enumerate(slow_a)]
                                  + [("allreduce_sgd", 4, "none", s + 1, t, 0.9) for s, t in enumerate(slow_b)]),
            "fast": runs_table([("sgp_1peer", 4, "none", s + 1, t, 0.9) for s, t in enumerate(fast_a)]
                               + [("allreduce_sgd", 4, "none", s + 1, t, 0.9) for s, t in enumerate(fast_b)])}
    c = claim(experiment="sgp_sim", compare="ratio_vs_control", control={"experiment": "fast"})
    pub = wfpublished.load(cfg, _published_with(tmp_path, [c]))
    r = wfclaims.evaluate(pub, cfg, runs, {}).iloc[0]
    x = np.log(np.array(slow_a) / slow_b) - np.log(np.array(fast_a) / fast_b)
    half = scipy_stats.t.ppf(0.975, 2) * x.std(ddof=1) / math.sqrt(3)
    assert r["measured"] == pytest.approx(math.exp(x.mean()), rel=1e-12)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((math.exp(x.mean() - half), math.exp(x.mean() + half)),
                                                        rel=1e-12)
    assert r["control_measured"] == pytest.approx(math.exp(np.mean(np.log(np.array(fast_a) / fast_b))), rel=1e-12)
    assert r["status"] == "reproduced" and r["scale"] == "log" and "fast" in r["control"]
    with pytest.raises(ConfigError, match="control"):  # the differential needs its control
        wfpublished.load(cfg, _published_with(tmp_path, [claim(compare="ratio_vs_control")]))


def test_gap_only_at_the_published_scale_and_harness_claims_go_to_the_harness_page(tmp_path):
    runs = runs_table([("sgp_1peer", 4, "none", s, t, 0.9) for s, t in ((1, 0.30), (2, 0.32), (3, 0.34))]
                      + [("allreduce_sgd", 4, "none", s, t, 0.9) for s, t in ((1, 0.50), (2, 0.52), (3, 0.54))])
    at32 = claim(published={"value": 0.724, "nodes": [32], "note": "n", "other": "another source: 0.32"})
    r = evaluate(tmp_path, [at32, claim(id="c2", harness=True, published={"value": 0.724, "note": "n"})], runs)
    assert math.isnan(r.iloc[0]["gap"]) and "published value is for 32 nodes" in r.iloc[0]["reason"]
    assert r.iloc[0]["published_other"] == "another source: 0.32" and r.iloc[0]["page"] == "paper"
    assert not math.isnan(r.iloc[1]["gap"]) and r.iloc[1]["page"] == "harness"


def test_a_per_epoch_speed_claim_is_judged_again_on_time_to_accuracy(tmp_path):
    """SGP's epochs are faster (reproduced) but it needs more of them: time to the target is slower,
    and the reason says the two measures disagree."""
    runs = runs_table([("sgp_1peer", 4, "none", s, t, 0.9) for s, t in ((1, 0.30), (2, 0.32), (3, 0.34))]
                      + [("allreduce_sgd", 4, "none", s, t, 0.9) for s, t in ((1, 0.50), (2, 0.52), (3, 0.54))])
    runs["time_to_target_s"] = [3.0, 3.3, 3.1, 2.0, 2.1, 2.05]
    r = evaluate(tmp_path, [claim()], runs).iloc[0]
    assert r["status"] == "reproduced" and r["tta_status"] == "not reproduced"
    assert r["tta_measured"] == pytest.approx(math.exp(np.mean(np.log([3.0 / 2.0, 3.3 / 2.1, 3.1 / 2.05]))))
    assert "time to accuracy disagrees: not reproduced" in r["reason"]
    # AR-SGD never reached the target: censored at its last evaluation (6 s), it still counts: SGP
    # reaches the target in 3 of 3, AR-SGD in 0 of 3 (log-rank p 0.014): SGP is sooner on that measure too
    runs["time_to_target_s"] = [3.0, 3.3, 3.1, np.nan, np.nan, np.nan]
    runs["reached_target"] = [True] * 3 + [False] * 3
    runs["time_last_eval_s"] = 6.0
    r = evaluate(tmp_path, [claim()], runs).iloc[0]
    assert r["status"] == "reproduced" and r["tta_status"] == "reproduced" and math.isnan(r["tta_measured"])
    assert (r["tta_reached_a"], r["tta_reached_b"], r["tta_median_a"]) == (3, 0, 3.1) and r["tta_logrank_p"] < 0.05
    runs["time_last_eval_s"] = 2.0  # ... but stopped at 2 s, before SGP arrived: no difference shown
    r = evaluate(tmp_path, [claim()], runs).iloc[0]
    assert r["tta_status"] == "inconclusive" and "time to accuracy disagrees: inconclusive" in r["reason"]


def test_claims_table_whose_text_columns_are_all_empty_still_renders():
    """A grid where every claim is "not comparable" writes empty setting/page/scale cells, which
    read back as float NaN; the report's claim frame fills them with text (this crashed the
    forest rule on the smoke config)."""
    from distrepro_wf.report.evidence import claim_frame

    csv = "claim,paper,experiment,compare,nodes,straggler,status,provisional,setting,page,scale\n" \
          "c1,sgp,sgp_sim,ratio,,,not comparable,,,,\n"
    import io
    f = claim_frame(pd.read_csv(io.StringIO(csv)))
    assert (f.loc[0, "setting"], f.loc[0, "scale"]) == ("experiment sgp_sim", "log")


def test_tta_table_counts_every_run_and_compares_with_log_rank():
    """The report's time-to-accuracy table: "reached k of n", Kaplan-Meier medians, the log-rank
    p against AR-SGD; a method that never arrives has an undefined median, not a missing row, and
    its misses are not averaged away (the old table: the mean of the 4 runs that arrived)."""
    from distrepro_wf.report.evidence import tta_display, tta_table

    runs = _tta_runs([1.0, 1.1, 1.2, 1.3, None], [2.0, 2.1, 2.2, 2.3, 2.4])
    runs = pd.concat([runs, _tta_runs([None] * 5, [None] * 5).query("method == 'sgp_1peer'")
                      .assign(method="dpsgd")], ignore_index=True)
    t = tta_table(runs, "allreduce_sgd").set_index("method")
    assert (t.loc["sgp_1peer", "reached"], t.loc["sgp_1peer", "runs"], t.loc["dpsgd", "reached"]) == (4, 5, 0)
    assert (t.loc["sgp_1peer", "median_s"], t.loc["allreduce_sgd", "median_s"]) == (1.2, 2.2)
    assert math.isnan(t.loc["dpsgd", "median_s"]) and t.loc["dpsgd", "median_high_s"] == math.inf
    assert t.loc["sgp_1peer", "speedup"] == pytest.approx(2.2 / 1.2) and math.isnan(t.loc["sgp_1peer", "speedup_low"])
    assert t.loc["dpsgd", "logrank_p"] == pytest.approx(0.0018419, abs=1e-6)  # AR-SGD arrives, dpsgd never
    rows = {r["method"]: r for r in tta_display(tta_table(runs, "allreduce_sgd"), "simulated time", "allreduce_sgd")}
    assert rows["sgp_1peer"]["reached"] == "4 of 5" and rows["sgp_1peer"]["miss"]
    assert rows["dpsgd"]["median"].startswith("undefined") and rows["dpsgd"]["speedup"] == "n/a"
    assert rows["allreduce_sgd"]["speedup"] == "1 (baseline)" and rows["allreduce_sgd"]["p"] == ""
    # a workload without a target: no table (not a table of misses)
    assert tta_table(runs.assign(target_value=np.nan), "allreduce_sgd").empty
    # the baseline is the config's (report.baseline), not a name in the code
    from distrepro_wf.pipeline.config import report_settings

    base = report_settings({"report": {"baseline": "sgp_1peer"}})["baseline"]
    rows = {r["method"]: r for r in tta_display(tta_table(runs, base), "simulated time", base)}
    assert rows["sgp_1peer"]["speedup"] == "1 (baseline)" and rows["allreduce_sgd"]["speedup"] != "1 (baseline)"


def test_report_settings_come_from_config_over_the_schema_default():
    """Colours and the baseline are config (schema default: the house colours, AR-SGD blue):
    a config colours a new method and keeps the others; a malformed colour is refused naming
    the key."""
    from distrepro_wf.pipeline.config import check_schema, report_settings
    from distrepro_wf.report.plots import method_colour

    assert report_settings(None)["baseline"] == "allreduce_sgd"
    assert method_colour("allreduce_sgd") == "#1f77b4"
    cfg = {"report": {"colours": {"my_method": "#123456", "allreduce_sgd": "#000000"}}}
    assert (method_colour("my_method", cfg), method_colour("allreduce_sgd", cfg), method_colour("dpsgd", cfg)) == \
        ("#123456", "#000000", "#2ca02c")
    assert method_colour("unlisted") == method_colour("unlisted", cfg)  # a stable hash colour
    base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    check_schema({**base, "report": cfg["report"]})
    with pytest.raises(ConfigError, match=r"report\.colours\.x"):
        check_schema({**base, "report": {"colours": {"x": "blue"}}})


def test_an_experiment_draws_the_figures_its_config_names(tmp_path):
    """``experiments.<e>.figures`` (default: every registered figure, in the registry's order):
    the figures rule plot draws for it and the only ones its page shows; an unknown name is
    refused naming the key and the known figures."""
    from distrepro_wf.report.plots import FIGURES, experiment_figures

    cfg = copy.deepcopy(rf.CONFIG)
    assert experiment_figures(cfg, "sgp") == list(FIGURES)  # the default reproduction's figures
    cfg["experiments"]["sgp"]["figures"] = ["to_target", "scaling"]
    assert experiment_figures(cfg, "sgp") == ["to_target", "scaling"]
    with pytest.raises(ConfigError) as e:
        experiment_figures({"experiments": {"x": {"figures": ["scaling", "pie"]}}}, "x")
    assert e.value.key == "experiments.x.figures" and f"known: {', '.join(sorted(FIGURES))}" in str(e.value)
    # the page: one figure block (drawn, or the sentence saying why not) per figure asked for,
    # and no image of a figure the experiment does not draw
    tables = tmp_path / "results" / "tables"
    for e_ in ("baseline", "sgp"):
        (tables / e_).mkdir(parents=True)
        runs_table([]).to_csv(tables / e_ / "runs.csv", index=False)
        failed_table([("osgp", 4, "none", 1, DIVERGED)]).iloc[0:0].to_csv(tables / e_ / "failed.csv", index=False)
    pub = wfpublished.load(cfg, _published_with(tmp_path, [claim()]))
    results = wfclaims.evaluate(pub, cfg, *wfclaims.read_tables(tables, ["baseline", "sgp"]))
    out = tmp_path / "reports" / "index.html"
    build(["baseline", "sgp"], cfg, tables, out, [], [], pub, results)
    html = (out.parent / "papers" / "sgp.html").read_text()
    assert re.findall(r'id="(?:no)?fig-sgp-(\w+)"', html) == ["to_target", "scaling"]
    assert not re.search(r'src="[^"]*figures/sgp/(?!to_target|scaling)', html)
    harness = (out.parent / "papers" / "harness.html").read_text()  # baseline: the default, every figure
    assert sorted(re.findall(r'id="(?:no)?fig-baseline-(\w+)"', harness)) == sorted(FIGURES)


# ------------------------------------------------------------------ like for like (issue 24 item 3)


def test_a_both_sides_check_refuses_a_comparison_that_is_not_like_for_like(tmp_path):
    """SGP (30 % of its epoch communicating) against a D-PSGD that hides its exchange behind its
    compute (0.07 %): the same numbers are judged with the check on SGP alone, and refused, naming
    D-PSGD, when the check gates both sides (side: both); judged again when both communicate."""
    def mech(side):
        return {"text": "t", "requires": [{"check": "network"},
                                          {"check": "comm_share", "side": side, "min": 0.1, "source": "S"}]}

    def runs(dpsgd_share):
        return _timed([("sgp_1peer", 4, "none", s, 0.5 + 0.01 * s, 0.3, 0.6) for s in (1, 2, 3)]
                      + [("dpsgd", 4, "none", s, 0.4 + 0.01 * s, dpsgd_share, 0.9) for s in (1, 2, 3)])
    one = claim(experiment="sgp_sim", mechanism=mech("a"), b={"method": "dpsgd"})
    both = claim(experiment="sgp_sim", mechanism=mech("both"), b={"method": "dpsgd"})
    # judged (not reproduced at the nominal parameters; the sensitivity ranges may make it inconclusive)
    assert _eval_sim(tmp_path, [one], runs(0.0007)).iloc[0]["status"] in ("not reproduced", "inconclusive")
    r = _eval_sim(tmp_path, [both], runs(0.0007)).iloc[0]
    assert r["status"] == "not comparable"
    assert "communication is 0% of dpsgd's epoch time (< 10%)" in r["reason"] and "sgp_1peer" not in r["reason"]
    assert _eval_sim(tmp_path, [both], runs(0.4)).iloc[0]["status"] in ("not reproduced", "inconclusive")
    single = claim(experiment="sgp_sim", mechanism=mech("both"), compare="value")
    del single["b"]
    with pytest.raises(ConfigError, match="names side both; the claim has one side"):
        wfpublished.load(rf.CONFIG, _published_with(tmp_path, [single]))


def test_shipped_sgp_vs_dpsgd_claims_compare_like_for_like():
    """SGP against D-PSGD in SGP's order (step, then exchange), both gated on communicating; the
    overlapped D-PSGD against OSGP as its own claim."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    claims = {c["id"]: c for c in wfpublished.load(cfg).claims}
    c = claims["sgp_faster_than_dpsgd"]
    dpsgd = cfg["experiments"]["sgp_sim"]["methods"][c["b"]["method"]]
    assert dpsgd["algorithm"] == {"name": "dpsgd", "order": "step_then_mix"}
    assert {"check": "comm_share", "side": "both", "min": 0.1} in c["mechanism"]["requires"]
    o = claims["osgp_faster_than_dpsgd"]
    assert (o["a"]["method"], o["b"]["method"], o["experiment"]) == ("osgp", "dpsgd", "sgp_sim")
    # a D-PSGD whose exchange never outlasts its compute cannot tell the two apart: refused, not judged
    assert {"check": "comm_share", "side": "b", "min": 0.1} in o["mechanism"]["requires"]
    assert "algorithm" not in cfg["experiments"]["sgp_sim"]["methods"]["dpsgd"]  # Lian et al.'s overlapped order


def test_hyperparameters_tuned_on_scored_seeds_are_refused_and_tuning_seeds_are_shown(tmp_path):
    c = claim(metric="final_acc", compare="difference", expect={"op": ">=", "value": -3.0, "tolerance": 0.0})
    with pytest.raises(ConfigError, match=r"tuned_on_seeds.*seed\(s\) 2, 3 tuned the hyperparameters and are scored"):
        wfpublished.load(rf.CONFIG, _published_with(tmp_path, [{**c, "tuned_on_seeds": [2, 3, 6]}]))
    runs = runs_table([(m, 4, "none", s, 0.3, 0.9 + 0.001 * s) for s in (1, 2, 3)
                       for m in ("sgp_1peer", "allreduce_sgd")])
    r = evaluate(tmp_path, [{**c, "tuned_on_seeds": [6, 7, 8]}], runs).iloc[0]
    assert (r["tuned_on_seeds"], r["scored_on_seeds"], r["status"]) == ("6 7 8", "1 2 3", "reproduced")
    assert evaluate(tmp_path, [c], runs).iloc[0]["tuned_on_seeds"] == ""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    shipped = {x["id"]: x for x in wfpublished.load(cfg).claims}["signum_top1_close_to_sgd"]
    assert shipped["tuned_on_seeds"] == [6, 7, 8]


def test_a_platform_without_sources_makes_the_claim_platform_unknown(tmp_path):
    """shared_hpc's racks, uplinks and background load have no source: the claim is "not
    comparable: platform unknown" with what the published effect would need; on ethernet_10g
    (sourced bandwidth) the same numbers are judged.  A bandwidth overridden in the config has no
    recorded source either."""
    from impls.sim.platforms import platform_config, unsourced

    assert unsourced(platform_config("ethernet_10g")) == []
    assert unsourced(platform_config({"name": "ethernet_10g", "nic_gbps": 1.0})) == ["nic_gbps"]
    assert unsourced(platform_config({"name": "star", "nic_gbps": 0.1, "latency_us": 9})) == []
    assert unsourced(platform_config("shared_hpc")) == ["nic_gbps", "rack_size", "uplink_gbps", "background_load",
                                                        "burst_mb"]
    mech = {"text": "t", "requires": [{"check": "platform_sourced", "needs": "4-8x needs uplinks <= 1 Gbit/s"}]}
    c = claim(experiment="sgp_sim", mechanism=mech)
    runs = _timed([(m, 4, "none", s, t + 0.01 * s, 0.4, 0.5) for s in (1, 2, 3)
                   for m, t in (("sgp_1peer", 0.3), ("allreduce_sgd", 0.5))])
    assert _eval_sim(tmp_path, [c], runs).iloc[0]["status"] == "reproduced"
    cfg = copy.deepcopy(rf.CONFIG)
    cfg["experiments"]["sgp_sim"]["platform"] = "shared_hpc"
    r = _eval_sim(tmp_path, [c], runs, cfg).iloc[0]
    assert r["status"] == "not comparable"
    assert r["reason"].startswith("platform unknown: shared_hpc's nic_gbps = 10, rack_size = 8, uplink_gbps = 10, "
                                  "background_load = 0.5, burst_mb = 64 have no source; 4-8x needs uplinks <= 1 Gbit/s")
    assert "measured 0.6" in r["reason"]
    shipped = yaml.safe_load((PUB / "claims.yaml").read_text())["claims"]
    req = next(c for c in shipped if c["id"] == "adpsgd_epoch_4to8x_faster")["mechanism"]["requires"]
    assert req[0]["check"] == "platform_sourced" and "64:1" in req[0]["needs"]


def test_signum_mv_speed_claim_runs_on_its_papers_hardware():
    """15 single-V100 machines: the resnet50_v100x1 profile charges batch 128 at NVIDIA's published
    367 img/s (FP32, V100 16 GB) and scales messages to ResNet-50's 102.2 MB."""
    from impls.sim.profiles import profile_config

    p = profile_config("resnet50_v100x1")
    assert p.step_ms == pytest.approx(128 / 367 * 1e3, abs=0.05) and p.model_mb == pytest.approx(102.228128)
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert cfg["experiments"]["signsgd"]["profile"]["name"] == "resnet50_v100x1"


# ------------------------------------------------------------------ the figures' labels (issue 24)


@pytest.fixture(scope="module")
def fixture_tables(tmp_path_factory):
    tables = tmp_path_factory.mktemp("tables") / "results" / "tables"
    rf.build_tables(tables, rf.CONFIG)
    return tables


def _drawn_axes(monkeypatch, name: str, tables: dict, path: Path) -> list:
    """The axes figure ``name`` draws (read just before it is saved) and the file's notes."""
    from distrepro_wf.report import plots

    seen = []
    real = plots._save

    def keep(fig, p, *note):
        seen.extend((ax.get_xlabel(), ax.get_ylabel(), len(ax.get_lines())) for ax in fig.axes)
        real(fig, p, *note)

    monkeypatch.setattr(plots, "_save", keep)
    plots.draw(name, tables, path, rf.CONFIG)
    return seen


def test_simulated_time_is_labelled_simulated_on_every_axis(fixture_tables, tmp_path, monkeypatch):
    """Every time axis says the runs' kind of time: "simulated time" for the simulated experiment
    (sgp_sim, whose curves read evals.csv, which has no time kind of its own), "wall-clock time" for
    real ranks; never "wall" for simulated runs."""
    from distrepro_wf.report.plots import read_tables

    for e, word, never in (("sgp_sim", "simulated time", "wall"), ("sgp", "wall-clock time", "simulated")):
        t = read_tables(fixture_tables / e)
        for name in ("acc_vs_wall", "epoch_time_vs_nodes", "time_breakdown", "to_target"):
            labels = [lab for x, y, _ in _drawn_axes(monkeypatch, name, t, tmp_path / f"{e}_{name}.png")
                      for lab in (x, y) if "(s)" in lab]  # the time axes: in seconds
            assert labels and all(word in lab and never not in lab for lab in labels), (e, name, labels)


def test_loss_panel_has_the_training_loss_and_placeholders_say_why(fixture_tables, tmp_path, monkeypatch):
    """The convergence figure of an experiment whose curves are evals.csv (no training loss there)
    draws the training loss from epochs.csv: no empty panel; a figure without data is a
    placeholder whose reason the report prints instead of the image."""
    from distrepro_wf.report.plots import figure_notes, read_tables

    t = read_tables(fixture_tables / "sgp_sim")
    axes = _drawn_axes(monkeypatch, "loss_vs_epoch", t, tmp_path / "loss.png")
    assert [(x, y) for x, y, _ in axes[:2]] == [("epoch", "training loss"), ("epoch", "validation top-1 (%)")]
    assert all(n > 0 for _, _, n in axes[:2]), axes  # lines in both panels
    assert figure_notes(tmp_path / "loss.png") == (None, "")
    _drawn_axes(monkeypatch, "scaling", t, tmp_path / "scaling.png")  # one node count: nothing to draw
    assert figure_notes(tmp_path / "scaling.png") == ("fewer than two node counts per method", "")


def test_a_same_accuracy_claim_needs_both_sides_at_their_plateau():
    """'Converges to the same accuracy' compares where two methods end: a side whose top-1 still
    rises in its last quarter (the mean of the last quarter of its evaluations minus the quarter
    before) is not at its plateau, and the setting is refused naming it.  The curves are the
    default run's ps_modes_plateau seeds 3 (DDCGU) and 1 (synchronous) at 10 epochs."""
    from distrepro_wf.claims import mechanisms
    from distrepro_wf.pipeline.collect import _late_gain

    ddcgu = pd.Series([42.6, 55.2, 59.9, 69.1, 72.7, 84.1, 89.1, 86.1, 93.0, 94.7]) / 100
    sync = pd.Series([54.9, 76.9, 90.3, 91.4, 92.8, 92.5, 93.3, 95.0, 94.7, 94.4]) / 100
    assert _late_gain(ddcgu) == pytest.approx((93.0 + 94.7 - 89.1 - 86.1) / 2 / 100)  # k = 10 // 4 = 2
    assert _late_gain(sync) == pytest.approx((94.7 + 94.4 - 93.3 - 95.0) / 2 / 100)
    assert math.isnan(_late_gain(pd.Series([0.5]))) and _late_gain(pd.Series([0.5, np.nan, 0.7])) == pytest.approx(0.2)
    c = claim(metric="final_acc", compare="difference", a={"method": "ddcgu"}, b={"method": "ps_sync"},
              mechanism={"text": "t", "requires": [{"check": "plateau", "side": "both", "max_gain": 0.025}]})
    table = pd.DataFrame([("ddcgu", 8, "slow1x4", _late_gain(ddcgu)), ("ps_sync", 8, "slow1x4", _late_gain(sync))],
                         columns=["method", "nodes", "straggler", "late_gain_acc"])
    why = mechanisms.check(c, rf.CONFIG, table, 8, "slow1x4")
    assert why == "ddcgu still learns: +6.3 points of top-1 in the last quarter of its run (> 2.5): not at its " \
                  "plateau, the final accuracies do not compare"
    flat = table.assign(late_gain_acc=[0.01, -0.002])
    assert mechanisms.check(c, rf.CONFIG, flat, 8, "slow1x4") == ""
    shipped = {x["id"]: x for x in wfpublished.load(yaml.safe_load((ROOT / "config" / "config.yaml").read_text())).claims}
    assert {"check": "plateau", "side": "both", "max_gain": 0.025} in \
        shipped["ddcgu_same_accuracy_as_sync"]["mechanism"]["requires"]


# ------------------------------------------------------------------ issue 31: gates with sources


def test_a_share_gate_is_sourced_derived_or_context(tmp_path):
    """A share check's threshold is written with its source, derived from the claim, or bare (the
    harness's choice: context); the combinations that mean nothing are errors naming the key."""
    def gate(published=None, **g):
        return claim(experiment="sgp_sim", mechanism={"text": "t", "requires": [{"check": "comm_share", "side": "b",
                                                                                  **g}]},
                     **({"published": published} if published else {}))
    load = lambda c: wfpublished.load(rf.CONFIG, _published_with(tmp_path, [c]))  # noqa: E731
    for bad, words in (({"min": 0.2, "derived": True}, "either min"), ({}, "either min"),
                       ({"derived": True, "source": "x"}, "derived: true or source, not both"),
                       ({"derived": True}, "derived: true needs a ratio of step or epoch times")):
        with pytest.raises(ConfigError, match=re.escape(words)):
            load(gate(**bad))
    with pytest.raises(ConfigError, match="takes no source or derived"):
        load(claim(mechanism={"text": "t", "requires": [{"check": "network", "source": "x"}]}))
    with pytest.raises(ConfigError, match="only comm_share has a derivation"):
        load(claim(mechanism={"text": "t", "requires": [{"check": "compute_share", "side": "b", "derived": True}]}))
    load(gate(derived=True, published={"value": 0.724, "note": "n"}))
    load(gate(min=0.2, source="a paper"))


def test_shipped_share_gates_demote_only_with_a_derived_threshold():
    """No shipped share gate has a source: the five that demote are derived from the claim's
    speed-up (1 - 1/s: SlowMo 2a's 0.724 -> 27.6 %, 0.891 -> 10.9 %, 2b's 0.743 -> 25.7 %, signSGD's
    0.75 -> 25 %, AD-PSGD's 4x -> 75 %); every other one is context."""
    from distrepro_wf.claims import mechanisms

    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    claims = wfpublished.load(cfg).claims
    derived = {c["id"]: round(mechanisms.derived_min(c)[0], 3) for c in claims
               for r in (c.get("mechanism") or {}).get("requires", []) if r.get("derived")}
    assert derived == {"sgp_epoch_faster_than_ar": 0.276, "osgp_epoch_faster_than_sgp": 0.109,
                       "sgp_transformer_epoch_faster_than_ar": 0.257, "adpsgd_epoch_4to8x_faster": 0.75,
                       "signum_mv_faster_than_ar_slow_net": 0.25}
    assert not [c["id"] for c in claims for r in (c.get("mechanism") or {}).get("requires", []) if "source" in r]


def test_every_sensitivity_range_is_sourced_or_a_scenario():
    from distrepro_wf.claims import sensitivity as sens

    assert all(r["kind"] in ("uncertainty", "scenario") for r in sens.RANGES)
    assert all(r.get("source") for r in sens.RANGES if r["kind"] == "uncertainty")
    assert {r["name"] for r in sens.RANGES if r["kind"] == "scenario"} == {"latency_s", "background", "jitter",
                                                                          "stage_bandwidth"}


def test_a_harness_check_that_fails_is_not_reproduced(tmp_path):
    """A harness check whose interval misses its pass region (here: >= 2, with a share gate without
    a source) is judged and fails, never "inconclusive" or "not comparable" (issue 31, item 4)."""
    cfg = copy.deepcopy(rf.CONFIG)
    cfg["experiments"]["sgp_sim"]["stragglers"] = ["none", "slow1x4"]
    c = claim(experiment="sgp_sim", harness=True, a={"method": "allreduce_sgd", "straggler": "slow1x4"},
              b={"method": "allreduce_sgd", "straggler": "none"}, expect={"op": ">=", "value": 2.0, "tolerance": 0.0},
              where={"stragglers": ["slow1x4"]},
              mechanism={"text": "slow worker", "requires": [{"check": "compute_share", "side": "b", "min": 0.4}]})
    runs = _timed([("allreduce_sgd", 4, st, s, t * (1 + 0.001 * s), 0.6, 0.19) for s in (1, 2, 3)
                   for st, t in (("none", 13.55), ("slow1x4", 13.77))])
    r = _eval_sim(tmp_path, [c], runs, cfg).iloc[0]
    assert r["status"] == "not reproduced"
    assert "context (not a demotion): allreduce_sgd's compute share without straggler 19% (below 40%" in r["reason"]


# ------------------------------------------------------------------ derived expectations (predicted:)

def _straggler_runs(method: str, nodes: int, none_s: float, slow_s: float, compute_share: float,
                    steps: int = 10, seeds=(1, 2, 3)) -> pd.DataFrame:
    """A method's runs without and with slow1x4: epoch times (a 0.1 % spread over seeds), the mean
    rank's compute (``compute_share`` of the epoch without straggler, the same healthy compute with it)."""
    rows = [(method, nodes, st, s, t * (1 + 0.001 * s), 0.0, compute_share * none_s / t)
            for s in seeds for st, t in (("none", none_s), ("slow1x4", slow_s))]
    t = _timed(rows)
    t["steps_per_epoch"] = steps
    return t


def _ar_straggler_claim(experiment: str, method: str = "allreduce_sgd", **over) -> dict:
    return claim(**{"experiment": experiment, "harness": True, "a": {"method": method, "straggler": "slow1x4"},
                    "b": {"method": method, "straggler": "none"}, "expect": {"op": ">", "value": 1.0, "tolerance": 0.0},
                    "where": {"stragglers": ["slow1x4"]}, "predicted": {"by": "closed_form"},
                    "mechanism": {"text": "slow worker"}, **over})


def test_closed_form_prediction_of_a_straggler_on_real_ranks():
    """Real ranks (a bare point: no latency, no jitter, one bucket): calibrated on AR-SGD without
    straggler (compute 25 ms of a 100 ms step), one 4x-slow worker adds 3 x 25 ms to the step:
    1 + 3 x 0.25 = 1.75; compute 80 %: 1 + 3 x 0.8 = 3.4; all compute: 4."""
    from distrepro_wf.claims import predict

    c = _ar_straggler_claim("baseline")
    for share, want in ((0.25, 1.75), (0.8, 3.4), (1.0, 4.0)):
        got = predict.predict(c, rf.CONFIG, _straggler_runs("allreduce_sgd", 2, 1.0, 9.9, share), 2, "slow1x4")
        assert got.value == pytest.approx(want, rel=1e-6), share
        assert "bare point" in got.how and f"compute {share * 100.2:.3g} ms, step 100 ms" in got.how
    assert predict.predict(c, rf.CONFIG, _timed([]), 2, "slow1x4").startswith("no time breakdown of allreduce_sgd")
    cfg = copy.deepcopy(rf.CONFIG)
    cfg["stragglers"]["slow1x4"] = {"kind": "random", "mean_fraction": 3.0}
    assert "has no single compute factor" in predict.predict(c, cfg, _straggler_runs("allreduce_sgd", 2, 1, 2, .5),
                                                             2, "slow1x4")


def test_closed_form_prediction_of_a_straggler_on_the_simulated_platform():
    """adpsgd_sim (shared_hpc, 16 nodes, ResNet-50's layout; the measured figures of issue 31's run:
    compute 107 ms of a 294 ms step without straggler, 3 seeds): the calibrated closed form
    reproduces the measured step without straggler and predicts 1.681 with one 4x-slow worker,
    below the 2.09 of a step that hides nothing more (1 + (4 - z) C/T): its overlapped buckets hide
    more of the all-reduce behind the slow worker's longer backward pass.  Measured: 1.542.  (1.632
    before the closed form counted the staging of each bucket, 17 ms a step that the slow worker
    pays on top of its 4x compute and the calibrated network no longer hides.)"""
    from distrepro_wf.claims import closedform as cf
    from distrepro_wf.claims import predict, sensitivity

    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    c = next(x for x in wfpublished.load(cfg).claims if x["id"] == "ar_slowed_by_straggler")
    runs = _straggler_runs("allreduce_sgd", 16, 9.4148, 14.520, 3.4138 / 9.4148, steps=32)
    got = predict.predict(c, cfg, runs, 16, "slow1x4")
    assert got.value == pytest.approx(1.681, abs=2e-3)
    p = sensitivity.nominal_point(cfg, "adpsgd_sim", 16, "none").with_(compute_s=3.4138 / 32, overlap=1.0)
    step = lambda q: cf.step_s("allreduce_sgd", q)  # noqa: E731
    q, k = predict.calibrate(step, p, 9.4148 * 1.002 / 32)
    assert step(q) == pytest.approx(9.4148 * 1.002 / 32, rel=1e-9) and 0 < k < math.inf
    assert got.value < 1 + (4 - cf.expected_max_factor(16, 0.03)) * 3.4138 / 9.4148 / 1.002


def test_a_harness_straggler_check_is_judged_against_its_prediction(tmp_path):
    """ar_slowed_by_straggler's rule (issue 31): direction a/b > 1 and size within x/÷ 1.15 of the
    closed form's prediction at the setting.  Compute 25 % of AR-SGD's step predicts 1.75: 1.72
    measured is reproduced (both verdicts); the old emulation's 1.016 (the delay hidden behind the
    all-reduce) passes the direction and fails: "not reproduced", the sizes in the reason; 1.016
    with compute 0.5 % of the step (predicted 1.015) passes; no breakdown: not comparable."""
    c = _ar_straggler_claim("baseline")

    def row(slow_s, share, runs=None):
        runs = _straggler_runs("allreduce_sgd", 2, 1.0, slow_s, share) if runs is None else runs
        pub = wfpublished.load(rf.CONFIG, _published_with(tmp_path, [c]))
        res = wfclaims.evaluate(pub, rf.CONFIG, {"baseline": runs}, {})
        return res[res["nodes"] == 2].iloc[0]

    r = row(1.72, 0.25)
    assert (r["status"], r["size_status"]) == ("reproduced", "reproduced")
    assert r["predicted"] == pytest.approx(1.75) and "bare point" in r["predicted_how"]
    assert r["expected"] == "a/b > 1; size: within ×/÷ 1.15 of the closed form prediction at the setting"
    assert r["size_reason"].startswith("1.72x [1.72, 1.72] against 1.75x predicted; tolerance ×/÷ 1.15")
    r = row(1.016, 0.25)
    assert (r["status"], r["size_status"]) == ("not reproduced", "not reproduced")
    assert r["reason"].startswith("a harness check whose size misses its prediction fails: 1.02x [1.02, 1.02] "
                                  "against 1.75x predicted")
    r = row(1.016, 0.005)
    assert (r["status"], r["size_status"]) == ("reproduced", "reproduced")
    r = row(0, 0, runs=_straggler_runs("allreduce_sgd", 2, 1.0, 1.7, 0.25).drop(columns=["bd_compute_s"]))
    assert r["status"] == "not comparable" and "no time breakdown of allreduce_sgd" in r["reason"]


def test_a_prediction_needs_a_known_predictor_and_a_claim_of_its_shape(tmp_path):
    load = lambda c: wfpublished.load(rf.CONFIG, _published_with(tmp_path, [c]))  # noqa: E731
    with pytest.raises(ConfigError, match=r"claims\[0\] \(c1\)\.predicted\.by: unknown predictor 'simulator'; "
                                          r"allowed: closed_form"):
        load(_ar_straggler_claim("baseline", predicted={"by": "simulator"}))
    with pytest.raises(ConfigError, match=r"predicted: predictor 'closed_form' predicts one method with and without"):
        load(_ar_straggler_claim("baseline", b={"method": "serial_sgd", "straggler": "none"}))
    with pytest.raises(ConfigError, match=r"predicts a ratio \(compare: ratio\) of time_per_epoch_s or "
                                          r"time_per_step_s; this claim compares final_acc by 'ratio'"):
        load(_ar_straggler_claim("baseline", metric="final_acc"))
    load(_ar_straggler_claim("baseline"))


def test_the_shipped_straggler_checks_are_predicted_on_both_backends():
    """ar_slowed_by_straggler (simulated, adpsgd_sim) and its real-rank twin (adpsgd: 4 gloo ranks,
    compute charged by a fixed profile) test the mechanism against the closed form's prediction,
    with no share gate (the prediction reads the compute share itself)."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    claims = {c["id"]: c for c in wfpublished.load(cfg).claims}
    for cid, exp in (("ar_slowed_by_straggler", "adpsgd_sim"), ("ar_slowed_by_straggler_real", "adpsgd")):
        c = claims[cid]
        assert (c["experiment"], c["predicted"]["by"], c["expect"]["op"], c["harness"]) == (exp, "closed_form", ">",
                                                                                         True)
        assert not (c["mechanism"].get("requires"))
    m = cfg["experiments"]["adpsgd"]["methods"][claims["ar_slowed_by_straggler_real"]["a"]["method"]]
    assert m["profile"]["name"] == "fixed" and "backend" not in cfg["experiments"]["adpsgd"]
