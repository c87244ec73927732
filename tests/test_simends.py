"""Simulated range ends (workflows/lib/distrepro_wf/claims/simends.py, rule sensitivity_points): a
simulated verdict whose setting the closed form does not model (other jobs' bursts on racks:
``shared_hpc``) takes its sensitivity from the simulator itself.

* which rows: exactly the default config's rows on ``shared_hpc`` (the closed form says why);
* the scaled statistic meets the simulation at every range end, exactly, and a flip the
  simulation shows demotes the verdict where the closed form alone would not have;
* a failed short run is no number: the range is "not evaluated", named;
* end to end on real short simulations (4 nodes, 2 x 3 steps): the rule's jobs, read back, give
  the same statistic as the same configs simulated one by one through the fork server.
"""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys

import pytest

import sim_server
from conftest import ROOT
from distrepro_wf.claims import closedform as cf
from distrepro_wf.claims import evaluate as wfclaims
from distrepro_wf.claims import published as wfpublished
from distrepro_wf.claims import sensitivity as sens
from distrepro_wf.claims import simends, sweep
from distrepro_wf.pipeline.yamlio import load_yaml

CONFIG = load_yaml(ROOT / "config" / "config.yaml")
CLAIMS = {c["id"]: c for c in wfpublished.load(CONFIG).claims}
ROW = ("adpsgd_epoch_4to8x_faster", 16, "none")  # AR-SGD / AD-PSGD on shared_hpc, expect between 4 and 8


def test_the_rows_are_those_on_racks_with_other_jobs_traffic():
    rows = {(c["id"], n, st) for c, n, st in simends.rows(CLAIMS.values(), CONFIG)}
    on_racks = {(c["id"], n, st) for c, n, st in sweep.simulated_speed_rows(CLAIMS.values(), CONFIG)
                if c["metric"] != "time_to_target_s" and CONFIG["experiments"][c["experiment"]]["platform"] == "shared_hpc"}
    assert rows == on_racks and ROW in rows and len(rows) == 5, rows
    assert not any(CONFIG["experiments"][CLAIMS[r[0]]["experiment"]]["platform"] != "shared_hpc" for r in rows)
    p = sens.nominal_point(CONFIG, "adpsgd_sim", 16, "none")
    assert "bursts cross the rack uplinks" in cf.unmodelled(p)
    assert cf.unmodelled(p.with_(background=0.0)) is None  # racks without other jobs: modelled
    assert cf.unmodelled(sens.nominal_point(CONFIG, "sgp_sim", 32, "none")) is None


def _fabricated(c, nodes, straggler, stat):
    """{config id: time} giving every point of the row the statistic ``stat(parameter, end)``
    (side b's time 1 everywhere, side a's the statistic; an a config shared with the nominal keeps its
    time)."""
    pts = sweep.row_points(c, CONFIG, nodes, straggler)
    keys = [(p, [sweep.key(x) for x in p["cfgs"]] if p["cfgs"] else None) for p in pts]
    a0 = keys[0][1][0]
    times = {sweep.config_id(k): 1.0 for _, ks in keys if ks for k in ks[1:]}
    times[sweep.config_id(a0)] = stat("nominal", "")
    for p, ks in keys[1:]:
        if ks and ks[0] != a0:
            times[sweep.config_id(ks[0])] = stat(p["parameter"], p["end"])
    return times, keys


def _row(m):
    return {"nodes": ROW[1], "straggler": ROW[2], "measured": m, "ci_low": m * 0.99, "ci_high": m * 1.01}


def _judge(c):
    return lambda lo, hi: wfclaims.verdict(lo, hi, c["expect"])


def test_the_scaled_statistic_is_the_simulation_at_every_end():
    c = CLAIMS[ROW[0]]
    # the simulated statistic at each end: 0.5 at the nominal point, and a different, known value per end
    factors = {}

    def stat(name, end):
        if name == "nominal":
            return 0.5
        factors[(name, end)] = 0.5 * (1.2 if end == "high" else 0.9) * (1 + 0.01 * len(name))
        return factors[(name, end)]

    times, keys = _fabricated(c, ROW[1], ROW[2], stat)
    ends = simends.ends(c, CONFIG, ROW[1], ROW[2], times)
    assert ends is not None and ends.nominal == pytest.approx(0.5) and not [
        k for k, why in ends.missing.items() if not why.startswith("not swept")]
    m = 5.0  # the long runs' measured statistic (inside [4, 8]): the ends scale it, 4.5 to 6.8, still inside
    res = sens.analyse(_row(m), c, CONFIG, _judge(c), None, None, ends)
    swept = {(p["parameter"], p["end"]) for p, ks in keys[1:] if ks and ks[0] != keys[0][1][0]}
    assert swept and res is not None
    for t in res.tornado:
        for end in ("low", "high"):
            want = m * factors[(t["parameter"], end)] / 0.5 if (t["parameter"], end) in swept else m
            assert t[f"at_{end}"] == pytest.approx(want, rel=1e-12), (t["parameter"], end)
    assert not res.flips and res.text.startswith(sens.HOLDS) and "simulated at each range's ends" in res.text
    # the same row from the closed form alone: other numbers at the ends (what the simulation replaces)
    cf_only = sens.analyse(_row(m), c, CONFIG, _judge(c), None, None, None)
    assert any(abs(a["at_high"] - b["at_high"]) > 1e-3 for a, b in zip(cf_only.tornado, res.tornado))


def test_a_flip_the_simulation_shows_demotes_and_a_failed_run_is_named():
    c = CLAIMS[ROW[0]]
    # at a bandwidth efficiency of 0.3 the simulated AR-SGD / AD-PSGD is 2x its nominal: 5 -> 10, out of [4, 8]
    times, keys = _fabricated(c, ROW[1], ROW[2], lambda name, end: 1.0 if (name, end) == ("efficiency", "low")
                              else 0.5)
    ends = simends.ends(c, CONFIG, ROW[1], ROW[2], times)
    res = sens.analyse(_row(5.0), c, CONFIG, _judge(c), None, None, ends)
    assert res.flips and "bandwidth efficiency passes" in res.text and "below nominal" in res.text, res.text
    eff = next(t for t in res.tornado if t["parameter"] == "efficiency")
    assert eff["at_low"] == pytest.approx(10.0) and 0.3 < eff["flips_at"] < eff["nominal"]
    # a short run that failed: that end has no number and the row says so
    lost = next(k for p, ks in keys if p["parameter"] == "compute_s" and p["end"] == "high" for k in ks[:1])
    times[sweep.config_id(lost)] = "simulation: exit status 1 (results/sensitivity/runs/x/outcome.json)"
    ends = simends.ends(c, CONFIG, ROW[1], ROW[2], times)
    assert ("compute_s", "high") in ends.missing and ("compute_s", "high") not in ends.factor
    res = sens.analyse(_row(5.0), c, CONFIG, _judge(c), None, None, ends)
    assert "not evaluated: compute per step high: simulation failed" in res.text


def test_the_rule_jobs_give_the_simulators_own_statistic(tmp_path, monkeypatch):
    """Real short runs at 4 nodes (the adpsgd_sim rows cut to 4 nodes, one claim): the jobs of
    rule ``sensitivity_points`` run them through the launcher, and the statistic read back at the
    nominal point and at the low end of the bandwidth efficiency is the one the same configs give
    simulated one by one."""
    config = copy.deepcopy(CONFIG)
    config["experiments"]["adpsgd_sim"]["nodes"] = [4]
    claims = [CLAIMS[ROW[0]]]
    monkeypatch.chdir(tmp_path)  # the jobs write under results/sensitivity/
    groups = simends.groups(claims, config)
    assert set(groups) == {"n4.p0", "n4.p1"} and all(d.startswith("results/sensitivity/runs/") for g in groups.values()
                                                     for d in g)
    paths = []
    for name, members in groups.items():
        out = tmp_path / "results" / "sensitivity" / f"{name}.csv"
        frame = simends.run_group(members, out, out.parent / "launches" / f"{name}.json", tmp_path / f"{name}.log")
        assert (frame["status"] == "ok").all(), frame
        paths.append(out)
    times = simends.read_times(paths)
    c = claims[0]
    ends = simends.ends(c, config, 4, "none", times)
    assert ends is not None and math.isfinite(ends.nominal)
    pts = {(p["parameter"], p["end"]): p for p in sweep.row_points(c, config, 4, "none")}

    def one_by_one(point):
        t = []
        for i, cfg in enumerate(point["cfgs"]):
            d = tmp_path / f"single-{point['parameter']}-{i}"
            d.mkdir()
            (d / "cfg.json").write_text(json.dumps(cfg))
            assert sim_server.run(d / "cfg.json", d / "out", d / "ckpt", None, d / "sim.log") == 0
            t.append(sweep.epoch_time(d / "out"))
        return sweep.statistic(t)

    s0 = one_by_one(pts[("nominal", "nominal")])
    assert ends.nominal == s0  # the same simulation, bit for bit
    assert ends.factor[("efficiency", "low")] == one_by_one(pts[("efficiency", "low")]) / s0
    assert ends.factor[("efficiency", "low")] > 1.05  # AR-SGD slows more than AD-PSGD on a slower network


def test_the_default_pipeline_runs_the_ends_before_compare(tmp_path):
    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "-n",
                          "--cores", "2", "results/tables/claims.csv"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rule sensitivity_points:" in out.stdout or "localrule sensitivity_points:" in out.stdout
    assert "results/sensitivity/n16.p0.csv" in out.stdout and "results/sensitivity/n16.p1.csv" in out.stdout
