"""Claims: validation at pipeline start, evaluation (statuses, statistics, bootstrap CI over seeds)
and the rule that missing results are never "reproduced"."""

from __future__ import annotations

import copy
import itertools
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import report_fixture as rf
from distrepro_wf import claims as wfclaims
from distrepro_wf import published as wfpublished
from distrepro_wf import stats as wfstats
from distrepro_wf import catalogue as wfcatalogue
from distrepro_wf.collect import summarize
from distrepro_wf.report import build
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
    # experiments not configured yet are "not comparable", not errors
    assert pub.not_configured["signum_mv_32x_fewer_bytes"] == "experiment 'signsgd' not in config"
    assert "d2_beats_dpsgd_labels" not in pub.not_configured  # configured: evaluated


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
    assert res[["status", "reason"]].values.tolist() == [["not comparable", "experiment 'signsgd' not in config"]]


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
    ({"compare": "quotient"}, "compare", "allowed values: ratio, difference, value, absolute"),
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
    assert res["reason"].iloc[0] == ("no completed run of sgp_1peer at n=4, none: 1 failed (seed 1: no reason "
                                     "recorded), the others not collected")  # rf.CONFIG: seeds 1, 2, 3
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


def _seeds(*values: float, start: int = 1) -> pd.Series:
    return pd.Series(values, index=range(start, start + len(values)), dtype=float)


def test_bootstrap_ci_exact_where_the_extreme_resamples_are_frequent():
    """With 2 or 3 seeds, resampling every seed from the same extreme one is frequent (1/4, 1/27 of
    the resamples: ~500, ~74 of 2000, against the 50 that the 2.5th percentile needs), so the 95%
    interval is exactly [statistic of the all-min resample, statistic of the all-max resample]."""
    assert wfstats.bootstrap_ci("value", _seeds(0.0, 1.0, 2.0), None) == (0.0, 2.0)
    # paired ratio: the resamples are a seed set's mean a / mean b: 0.5 / 1 ... 1.3 / 1
    assert wfstats.bootstrap_ci("ratio", _seeds(0.5, 1.3), _seeds(1.0, 1.0)) == (0.5, 1.3)
    # unpaired difference, 2 seeds a side: (min a - max b, max a - min b)
    assert wfstats.bootstrap_ci("difference", _seeds(1.0, 2.0), _seeds(10.0, 14.0, start=5)) == (-13.0, -8.0)


def test_bootstrap_ci_against_the_exact_bootstrap_distribution():
    """4 seeds: the exact bootstrap distribution of the mean has 4^4 equally likely resamples; the
    2000-resample percentiles lie within one step (0.25) of its 2.5% / 97.5% quantiles."""
    vals = [1.0, 2.0, 3.0, 4.0]
    means = np.sort([sum(r) / 4 for r in itertools.product(vals, repeat=4)])
    lo_exact = means[math.ceil(0.025 * len(means)) - 1]  # smallest m with P(mean <= m) >= 2.5%
    hi_exact = means[math.ceil(0.975 * len(means)) - 1]
    assert (lo_exact, hi_exact) == (1.5, 3.5)
    lo, hi = wfstats.bootstrap_ci("value", _seeds(*vals), None)
    assert abs(lo - lo_exact) <= 0.25 and abs(hi - hi_exact) <= 0.25, (lo, hi)


def test_bootstrap_ci_deterministic_numbers_and_degenerate_intervals():
    """The report is deterministic: the fixed generator gives these exact numbers (N_BOOT=2000,
    seed 0; a change of either, of the pairing or of the percentile rule changes them)."""
    a, b = _seeds(0.31, 0.30, 0.36, 0.33), _seeds(0.52, 0.50, 0.55, 0.49)
    assert wfstats.bootstrap_ci("ratio", a, b) == (0.5980392156862745, 0.6634615384615384)  # paired by seed
    assert wfstats.bootstrap_ci("ratio", a, b.set_axis([5, 6, 7, 8])) == (0.5806337492391966, 0.6844660194174758)
    # degenerate: every resample gives the same statistic
    assert wfstats.bootstrap_ci("value", _seeds(7.0, 7.0, 7.0), None) == (7.0, 7.0)
    assert wfstats.bootstrap_ci("difference", _seeds(1.0, 2.0, 3.0, 4.0), _seeds(11.0, 12.0, 13.0, 14.0)) == (
        -10.0, -10.0)
    assert wfstats.bootstrap_ci("ratio", 2 * b, b) == (2.0, 2.0)  # paired, a = 2 b seed by seed
    # one seed: no interval
    assert all(math.isnan(x) for x in wfstats.bootstrap_ci("value", _seeds(1.0), None))


def _two_seed_runs(a_times: tuple[float, float], b_times: tuple[float, float]) -> pd.DataFrame:
    return runs_table([("sgp_1peer", 4, "none", s, t, 0.9) for s, t in zip((1, 2), a_times)]
                      + [("allreduce_sgd", 4, "none", s, t, 0.9) for s, t in zip((1, 2), b_times)])


def test_robust_no_when_the_interval_crosses_the_expectation(tmp_path):
    """Mean ratio 0.9 < 1 (reproduced) but seed 2's ratio is 1.3: the exact interval [0.5, 1.3]
    crosses 1, so the claim is not robust."""
    res = evaluate(tmp_path, [claim(published={"value": 0.724, "note": "n"})], _two_seed_runs((0.5, 1.3), (1.0, 1.0)))
    r = res.iloc[0]
    assert (r["status"], r["robust"], r["ci_low"], r["ci_high"]) == ("reproduced", "no", 0.5, 1.3)
    assert r["measured"] == pytest.approx(0.9, abs=1e-15) and r["gap"] == pytest.approx(0.9 - 0.724, abs=1e-15)


def test_ratio_with_a_zero_denominator(tmp_path):
    """Mean b = 0: the statistic is undefined, the setting not comparable.  Mean b > 0 but some
    seed's b = 0: measured is defined, the bootstrap resamples drawing only that seed divide by
    zero, so there is no interval and the claim is not robust."""
    res = evaluate(tmp_path, [claim()], _two_seed_runs((0.5, 0.7), (0.0, 0.0)))
    assert res[["status", "reason"]].values.tolist() == [["not comparable", "statistic undefined (division by zero)"]]
    res = evaluate(tmp_path / "b", [claim()], _two_seed_runs((0.0, 0.0), (0.0, 0.0)))  # 0 / 0
    assert res["status"].tolist() == ["not comparable"]
    res = evaluate(tmp_path / "c", [claim()], _two_seed_runs((0.6, 0.6), (0.0, 2.0)))
    r = res.iloc[0]
    assert (r["status"], r["measured"], r["robust"]) == ("reproduced", 0.6, "no")
    assert math.isnan(r["ci_low"]) and math.isnan(r["ci_high"])
    assert r["reason"] == "no confidence interval: the denominator's mean is 0 in some bootstrap resamples"


def test_compare_value_claim(tmp_path):
    """compare: value is mean a in display units (percent), one side, gap to the published value."""
    runs = runs_table([("sgp_2peer", 4, "none", s, 0.3, acc) for s, acc in ((1, 0.90), (2, 0.92), (3, 0.94))])
    c = claim(compare="value", metric="final_acc", a={"method": "sgp_2peer"},
              expect={"op": ">=", "value": 91.0, "tolerance": 0.0}, published={"value": 93.0, "note": "n"})
    del c["b"]
    c2 = dict(c, id="c2", expect={"op": ">=", "value": 93.0, "tolerance": 0.5})
    res = evaluate(tmp_path, [c, c2], runs)
    r = res.iloc[0]
    assert (r["status"], r["unit"], r["seeds_a"], r["seeds_b"], r["robust"]) == ("reproduced", "%", 3, 0, "no")
    assert r["measured"] == pytest.approx(92.0, abs=1e-12) and r["gap"] == pytest.approx(-1.0, abs=1e-12)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((90.0, 94.0), abs=1e-12)  # 3 seeds: exact, see above
    assert r["expected"] == "a >= 91"
    assert res["status"].iloc[1] == "not reproduced" and res["expected"].iloc[1] == "a >= 93 (tolerance 0.5)"


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
    """Seed 3 of sgp_1peer diverged (its row is only in failed.csv): the ratio uses seeds 1 and 2 of
    a and all of b, and the reason says one run failed and why."""
    runs = runs_table([("sgp_1peer", 4, "none", s, t, 0.9) for s, t in ((1, 0.30), (2, 0.34))]
                      + [("allreduce_sgd", 4, "none", s, t, 0.9) for s, t in ((1, 0.50), (2, 0.52), (3, 0.54))])
    failed = failed_table([("sgp_1peer", 4, "none", 3, DIVERGED)])
    r = evaluate(tmp_path, [claim()], runs, failed).iloc[0]
    assert (r["status"], r["seeds_a"], r["seeds_b"]) == ("reproduced", 2, 3)
    assert r["measured"] == pytest.approx(0.32 / 0.52, abs=1e-15)
    assert r["reason"] == f"judged on 2 completed run(s) of sgp_1peer; 1 failed (seed 3: {DIVERGED})"


# ------------------------------------------------------------------ the claim cells of the report


def test_report_cells_show_the_measured_value_interval_and_gap(tmp_path):
    """Render a paper page from hand-made runs and read the claims table back from the HTML: the
    measured value, 95% CI, robust, seeds, published and gap cells carry the exact numbers; a
    diverged run is in the front page's failed list with its reason and in no claim."""
    value = claim(id="v", compare="value", metric="final_acc", a={"method": "sgp_2peer"},
                  expect={"op": ">=", "value": 91.0, "tolerance": 0.0}, published={"value": 93.0, "note": "n"})
    del value["b"]
    claims = [claim(id="r", published={"value": 0.724, "note": "SlowMo"}), value,
              claim(id="z", a={"method": "dpsgd"}, published={"value": 1.0, "note": "n"}), claim(id="f", a={"method": "osgp"})]
    runs = runs_table([("sgp_1peer", 4, "none", s, t, 0.9) for s, t in ((1, 0.5), (2, 1.3))]
                      + [("allreduce_sgd", 4, "none", s, 1.0, 0.9) for s in (1, 2)]
                      + [("sgp_2peer", 4, "none", s, 0.3, acc) for s, acc in ((1, 0.90), (2, 0.92), (3, 0.94))]
                      + [("dpsgd", 4, "none", s, t, 0.9) for s, t in ((1, 1.25), (2, 1.30))])
    failed = failed_table([("osgp", 4, "none", s, DIVERGED) for s in (1, 2)])
    tables = tmp_path / "results" / "tables"
    for e, (r, f) in {"sgp": (runs, failed), "baseline": (runs.iloc[0:0], failed.iloc[0:0])}.items():
        (tables / e).mkdir(parents=True)
        r.to_csv(tables / e / "runs.csv", index=False)
        f.to_csv(tables / e / "failed.csv", index=False)
    pub = wfpublished.load(rf.CONFIG, _published_with(tmp_path, claims))  # osgp: seeds 1, 2
    results = wfclaims.evaluate(pub, rf.CONFIG, *wfclaims.read_tables(tables, ["baseline", "sgp"]))
    out = tmp_path / "reports" / "index.html"
    build(["baseline", "sgp"], rf.CONFIG, tables, out, [], [], pub, results)

    rows = {r[0]: r for r in rf.html_tables(out.parent / "papers" / "sgp.html")["claims"]}
    cols = ["claim", "statement", "experiment", "setting", "status", "measured", "ci", "robust", "seeds", "expected",
            "published", "gap", "sources"]
    cell = {cid: dict(zip(cols, r)) for cid, r in rows.items()}
    assert {k: cell["r"][k] for k in ("setting", "status", "measured", "ci", "robust", "seeds", "published", "gap")} == {
        "setting": "n=4, none", "status": "reproduced", "measured": "0.9 x", "ci": "[0.5, 1.3]", "robust": "no",
        "seeds": "2 / 2", "published": "0.724 SlowMo", "gap": "0.176"}
    assert {k: cell["v"][k] for k in ("status", "measured", "ci", "robust", "seeds", "gap", "expected")} == {
        "status": "reproduced", "measured": "92 %", "ci": "[90, 94]", "robust": "no", "seeds": "3", "gap": "-1",
        "expected": "a >= 91"}
    assert (cell["z"]["status"], cell["z"]["measured"], cell["z"]["ci"], cell["z"]["gap"]) == (
        "not reproduced", "1.275 x", "[1.25, 1.3]", "0.275")  # 4 significant digits, the gap 3
    assert cell["f"]["status"] == ("not comparable every run failed: osgp at n=4, none: "
                                   f"2 failed (seed 1: {DIVERGED}; +1 more)")
    assert (cell["f"]["measured"], cell["f"]["ci"], cell["f"]["seeds"]) == ("", "", "")
    front = rf.html_tables(out)
    assert [r[:7] for r in front["failed"]] == [["sgp", "osgp", "4", "none", str(s), "diverged", DIVERGED]
                                                for s in (1, 2)]


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
            "target_metric": "acc/val", "target_value": 0.5, "steps_per_epoch": 10}
    row = summarize(info, ep)
    for name, m in wfcatalogue.METRICS.items():
        assert m.column in row, name
        # a classification run has every metric but the finite-sum task's (and keys it did not log)
        missing = m.source is not None and m.source[0] not in ep
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
    assert res.loc["c1", "measured"] == pytest.approx(0.75) and res.loc["c1", "status"] == "reproduced"
    assert res.loc["c2", "measured"] == pytest.approx(4e-5) and res.loc["c2", "status"] == "reproduced"
    assert res.loc["c2", "unit"] == ""
