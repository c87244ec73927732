"""The simulated platform's benchmark helpers (workflows/lib/distrepro_wf/bench/simbench.py): the
tables exactly, from given numbers; the child processes on tiny sizes (a 4-host collective,
a 2-rank simulation of 2 steps, a child killed at its timeout)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from distrepro_wf.bench import simbench
from impls.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_spec_defaults_and_overrides():
    spec = simbench.bench_spec("sim_scale", {"nodes": [8, 16]})
    assert spec["nodes"] == [8, 16] and spec["methods"] == simbench.DEFAULTS["sim_scale"]["methods"]
    assert simbench.bench_spec("sim_scale", None) == simbench.DEFAULTS["sim_scale"]
    spec["methods"]["x"] = 1  # a copy: the defaults stay
    assert "x" not in simbench.DEFAULTS["sim_scale"]["methods"]
    with pytest.raises(ConfigError, match=r"benchmarks\.sim_slowmo.*unknown key\(s\) \['node'\]"):
        simbench.bench_spec("sim_slowmo", {"node": 32})


def test_merged_and_run_config():
    assert simbench.merged({"a": 1, "b": {"c": 2}, "d": 3}, {"b": {"e": 4}, "d": None}) == {"a": 1, "b": {"e": 4}}
    cfg = simbench.sim_config(simbench.SGP_1PEER, 4, simbench.TINY_WORKLOAD, "ethernet_10g", "fixed", method="sgp")
    assert cfg["algorithm"] == simbench.SGP_1PEER and cfg["algorithm"] is not simbench.SGP_1PEER
    assert (cfg["backend"], cfg["platform"], cfg["profile"], cfg["nodes"], cfg["method"]) == (
        "simgrid", "ethernet_10g", "fixed", 4, "sgp")
    from impls.config.runconfig import resolve

    resolve({**cfg, "profile": {"name": "fixed", "step_ms": 5}})  # a valid run config


def test_cost_model_table_is_exact():
    from impls.sim.platforms import alpha_beta, platform_config

    a, b = alpha_beta(platform_config("ethernet_10g"))
    want = 2 * 3 * (a + 1e6 / (4 * b))  # n = 4, S = 1 MB
    t = simbench.cost_model_table([{"n": 4, "bytes": 1e6, "seconds": want * 1.04},
                                   {"n": 4, "bytes": 1e6, "seconds": want * 0.94}],
                                  {"name": "ethernet_10g", "small_allreduce_bytes": 0})
    assert list(t.columns[:7]) == ["platform", "n", "bytes", "simulated_s", "alpha_beta_s", "ratio", "within_5pct"]
    assert t["platform"].tolist() == ["ethernet_10g"] * 2 and t["bytes"].tolist() == [1_000_000] * 2
    assert t["alpha_beta_s"].tolist() == pytest.approx([want, want], rel=1e-12)
    assert t["ratio"].tolist() == [1.04, 0.94] and t["within_5pct"].tolist() == [True, False]


def test_published_slowmo_numbers_from_the_project_copy(tmp_path):
    numbers = ROOT / "config" / "published" / "numbers.csv"
    assert simbench.published_tpi(numbers) == {"allreduce_sgd": 420.0, "sgp": 304.0, "osgp": 271.0}
    with pytest.raises(ValueError, match="no row 'nope'"):
        simbench.published_tpi(numbers, {"sgp": "nope"})
    with pytest.raises(ValueError, match="not time per iteration in ms"):
        simbench.published_tpi(numbers, {"sgp": "slowmo_t1_sgp_top1"})


def test_slowmo_table_is_exact():
    pub = {"allreduce_sgd": 420.0, "sgp": 304.0, "osgp": 271.0}
    t = simbench.slowmo_table(pub, {"allreduce_sgd": 421.5, "sgp": 334.4, "osgp": 245.4}, "allreduce_sgd")
    assert t["method"].tolist() == ["allreduce_sgd", "sgp", "osgp"]
    assert t["ratio"].tolist() == [1.0036, 1.1, 0.9055]
    assert t["within_15pct"].tolist() == [True, True, True]
    assert t["role"].tolist() == ["calibration", "prediction", "prediction"]
    assert t["ordering_preserved"].all()
    assert "AR-SGD > SGP > OSGP (published) preserved" in t["note"][0]
    assert "compute from the device's published throughput" in t["note"][1]
    assert simbench.slowmo_table(pub, {"allreduce_sgd": 421.5, "sgp": 334.4})["role"].tolist() == [
        "prediction", "prediction"]  # the default: nothing fitted on these rows
    t = simbench.slowmo_table(pub, {"allreduce_sgd": 420.0, "sgp": 200.0, "osgp": 260.0})
    assert not t["ordering_preserved"].any() and "NOT preserved" in t["note"][2]
    assert t["within_15pct"].tolist() == [True, False, True]


def test_scale_rows_and_largest_under_five_minutes():
    fast = simbench.Child(0, 20.0, 800.04, cpu_s=19.0, peak_vm_mb=4096.04, peak_maps=812)
    slow = simbench.Child(0, 300.0, 1100.0)
    row = simbench.scale_row("sgp", 64, 4, fast, host="h")
    assert row == {"method": "sgp", "nodes": 64, "steps_per_epoch": 4, "wall_s": 20.0, "node_steps_per_s": 12.8,
                   "peak_rss_mb": 800.0, "peak_vm_mb": 4096.0, "peak_maps": 812, "under_5_min": True,
                   "cpu_per_wall": 0.95, "host": "h"}
    rows = pd.DataFrame([simbench.scale_row("ar", 16, 4, fast), simbench.scale_row("ar", 256, 4, slow), row])
    assert rows["under_5_min"].tolist() == [True, False, True]
    assert simbench.largest_under(rows) == {"ar": 16, "sgp": 64}
    assert simbench.largest_under(rows.iloc[[1]]) == {"ar": None}


def test_vs_real_row_and_its_note():
    def steps(*ts):
        return {0: list(ts), 1: list(ts)}

    real = {"time/step_s": steps(9, 0.030, 0.030, 0.031), "time/compute_s": steps(9, 0.025, 0.025, 0.026),
            "time/comm_s": steps(0, 0.002, 0.002, 0.002)}
    sim = {"time/step_s": steps(9, 0.026, 0.026, 0.026), "time/compute_s": steps(9, 0.025, 0.025, 0.025),
           "time/comm_s": steps(0, 0.001, 0.001, 0.001)}
    row = simbench.vs_real_row(real, sim, 25.0, warmup=1)
    assert (row["real_step_ms"], row["simulated_step_ms"], row["ratio"], row["within_15pct"]) == (
        30.0, 26.0, 0.8667, True)
    assert (row["real_compute_ms"], row["real_comm_ms"], row["simulated_comm_ms"]) == (25.0, 2.0, 1.0)
    assert row["note"].startswith("within 15%")
    sim["time/step_s"] = steps(9, 0.020, 0.020, 0.020)
    sim["time/compute_s"] = steps(9, 0.019, 0.019, 0.019)
    row = simbench.vs_real_row(real, sim, 19.0, warmup=1)
    assert not row["within_15pct"]
    assert row["note"].startswith("not within 15%: the gap of +10.00 ms (real - simulated) is mostly compute (+6.00 ms)")
    with pytest.raises(ValueError, match="no step after the first 4"):
        simbench.vs_real_row(real, sim, 19.0, warmup=4)


def test_metrics_readers(tmp_path):
    (tmp_path / "metrics").mkdir()
    for r in (1, 0):
        recs = [{"kind": "step", "time/step_s": 0.1 * (r + 1), "time/compute_s": 0.05},
                {"kind": "step", "time/step_s": 0.2 * (r + 1), "time/compute_s": 0.05},
                {"kind": "epoch", "time/epoch_s": 1.0}]
        (tmp_path / "metrics" / f"rank{r}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in recs))
    steps = simbench.step_times(tmp_path)
    assert steps == {0: [0.1, 0.2], 1: [0.2, 0.4]} and list(steps) == [0, 1]
    assert simbench.after_warmup(steps, 1) == [0.2, 0.4]
    assert simbench.after_warmup(steps, 0, ranks=[1]) == [0.2, 0.4]
    assert simbench.profile_compute_ms(tmp_path) == pytest.approx(50.0)


def test_children_collective_simulation_and_timeout(tmp_path):
    """Tiny sizes: a 4-host ring all-reduce within 5 % of alpha-beta; a 2-rank simulation of
    2 steps (wall time, the child's own RSS, its metrics); a child killed at its timeout."""
    log = tmp_path / "log"
    plat = {"name": "ethernet_10g", "small_allreduce_bytes": 0}
    t = simbench.cost_model_table(simbench.collective_times(plat, 4, [1e3, 1e7], log), plat)
    assert t["n"].tolist() == [4, 4] and t["bytes"].tolist() == [1000, 10_000_000] and t["within_5pct"].all()
    wl = simbench.merged(simbench.TINY_WORKLOAD, {"max_steps_per_epoch": 2})
    cfg = simbench.sim_config("allreduce_sgd", 2, wl, "ethernet_10g", {"name": "fixed", "step_ms": 7})
    child, out = simbench.simulate(cfg, tmp_path / "sim", log)
    assert child.rc == 0 and child.wall_s > 0 and 100 < child.peak_rss_mb < 4000 and 0 < child.cpu_s
    # virtual size and mappings sampled from /proc while it ran (torch + SimGrid: GBs of address
    # space, hundreds of mappings; a leak of actor stacks adds 8 MiB and 2 mappings a collective)
    assert child.peak_rss_mb < child.peak_vm_mb < 16384 and 100 < child.peak_maps < 3000
    steps = simbench.step_times(out)
    assert list(steps) == [0, 1] and [len(v) for v in steps.values()] == [2, 2]
    assert simbench.profile_compute_ms(out) == pytest.approx(7.0)
    assert all(s >= 0.007 for v in steps.values() for s in v)
    child = simbench.run_child([sys.executable, "-c", "import time; time.sleep(60)"], log, timeout_s=1)
    assert child.timed_out and child.rc != 0 and child.wall_s < 30
    bad = simbench.sim_config({"name": "allreduce_sgd", "bogus": 1}, 2, wl, "ethernet_10g",
                              {"name": "fixed", "step_ms": 7})
    with pytest.raises(RuntimeError, match="simulation .* failed: .*bogus"):
        simbench.simulate(bad, tmp_path / "bad", log)
    assert "$ " in log.read_text()


def test_gossip_spectral_gap_is_computed_once_per_process(monkeypatch):
    """Every rank of a simulation builds its gossip graph in one process: the O(n^3) spectral
    gap is computed once per (topology, world size), and is the same number."""
    from impls.families import gossip
    from impls.comm.topology import period_spectral_gap

    calls = []
    monkeypatch.setattr(gossip, "period_spectral_gap", lambda g: calls.append(g.world) or period_spectral_gap(g))
    gossip._period_gap.cache_clear()
    try:
        spec = {"name": "exponential", "peers": 1}
        gaps = [gossip.make_graph(dict(spec), 16)[1] for _ in range(3)] + [gossip.make_graph("exponential", 16)[1]]
        assert calls == [16, 16]  # {name, peers} once, the bare name once
        assert gaps[0] == gaps[1] == gaps[2] == pytest.approx(period_spectral_gap(gossip.build_topology(spec, 16)))
        assert gossip.make_graph({"peers": 2, "name": "exponential"}, 16)[1] != gaps[0] and calls == [16, 16, 16]
    finally:
        gossip._period_gap.cache_clear()


def test_allreduce_efficiency_fits_and_paper_rows():
    """The fit of ``platform.allreduce_efficiency`` on an AR row (numbers by hand: the ring's
    bandwidth term at 32 nodes of ResNet-50 on ethernet_10g is 62 x 102.228128 MB / (32 x
    1.154762 GB/s) = 171.52 ms), and the table's row semantics: a fitted row is no check, a
    '>' row is met by any prediction above it, a '=' row within 25 %."""
    e = simbench.fit_allreduce_efficiency(420.0, 282.657, 32, 102.228128e6)
    assert e == pytest.approx(171.52 / (171.52 + 420.0 - 282.657), rel=1e-4)
    assert simbench.fit_allreduce_efficiency(282.657, 282.657, 32, 102.228128e6) == pytest.approx(1.0)
    # recursive doubling (the SGP v1 code's all-reduce: PyTorch 0.5's THD tcp backend) puts log2(32) = 5
    # whole models on the wire: 5 x 102.228128 MB / 1.154762 GB/s = 442.64 ms at line rate
    e_rd = simbench.fit_allreduce_efficiency(1279.0, 600.0, 32, 102.228128e6, algorithm="recursive_doubling")
    assert e_rd == pytest.approx(442.64 / (442.64 + 1279.0 - 600.0), rel=1e-4)
    # overlapped: the backward (2/3 of 90 ms) hides 60 ms of the all-reduce, so a lower efficiency fits
    e_on = simbench.fit_efficiency_overlapped(420.0, 282.657, 90.0, 32, 102.228128e6)
    assert e_on == pytest.approx(171.52 / (171.52 + 420.0 - 282.657 + 60.0), rel=1e-3)
    assert simbench.iterations(90, 8192) == 90 * 157
    pub = {"id": "x", "paper": "P", "location": "T", "relation": "=", "value": 100.0, "unit": "ms"}
    fitted = simbench.paper_row(pub, 100.0, "ms", 100.0, "fitted", "e=0.5", True, "")
    assert fitted["within_25pct"] is None and fitted["ratio"] == 1.0
    assert simbench.paper_row(pub, 100.0, "ms", 126.0, "prediction", "-", None, "")["within_25pct"] is False
    assert simbench.paper_row(pub, 100.0, "ms", 76.0, "prediction", "-", None, "")["within_25pct"] is True
    above = {**pub, "relation": ">"}
    assert simbench.paper_row(above, 100.0, "ms", 400.0, "prediction", "-", None, "")["within_25pct"] is True
    assert simbench.paper_row(above, 100.0, "ms", 70.0, "prediction", "-", None, "")["within_25pct"] is False
    assert simbench.paper_row(pub, 100.0, "ms", None, "not simulated", "-", None, "")["ratio"] is None


def test_msg_efficiency_fit_inverts_on_a_real_simulation(tmp_path):
    """The every-message bandwidth efficiency (the platform's nic_gbps x e, as the sensitivity sweep
    sets it) fitted by simulation on a row: a simulation at the fitted value gives the row within
    FIT_TOL (0.5 %).  4 nodes of 1-peer SGP, 10 ms compute, a 10 MB model: one message per step,
    10e6 / 1.154762 GB/s = 8.66 ms at line rate (by hand); a 30 ms row leaves that message
    ~20 ms more, e ~ 8.66 / 28 ~ 0.3, the bracket below."""
    log = tmp_path / "log"
    wl = simbench.merged(simbench.TINY_WORKLOAD, {"max_steps_per_epoch": 3})
    prof = {"name": "fixed", "step_ms": 10, "model_mb": 10}

    def step(e, tag):
        cfg = simbench.sim_config(simbench.SGP_1PEER, 4, wl, "ethernet_10g", prof)
        cfg = simbench.with_msg_efficiency(cfg, e)
        assert cfg["platform"] == {"name": "ethernet_10g", "msg_efficiency": e}  # 1: line rate, not the nominal 0.456
        _, out = simbench.simulate(cfg, tmp_path / tag, log)
        return sum(simbench.after_warmup(simbench.step_times(out), skip=1)) / 8 * 1e3  # 4 ranks x 2 steps

    assert simbench.message_ms(10e6) == pytest.approx(8.66, abs=0.01)
    s1 = step(1.0, "line")
    assert 18.66 < s1 < 25.0  # compute + the line-rate message + op costs
    calls = []
    e, got, n = simbench.fit_by_simulation(30.0, lambda e: calls.append(e) or step(e, f"fit{len(calls)}"), s1,
                                           simbench.message_ms(10e6))
    assert 0.25 < e < 0.45 and n == len(calls) <= 3 and calls[-1] == e
    assert got == pytest.approx(30.0, rel=simbench.FIT_TOL)  # the last simulation: at the fitted e


def test_msg_efficiency_rows_fitted_and_predicted():
    """SlowMo 2a's SGP row is the one the every-message efficiency is fitted on (FITTED_ROWS, role
    fitted, never judged); the other gossip rows are predictions that carry the value; an AR row
    carries allreduce_efficiency on top, plausible when the product is in 0.3-0.9."""
    assert simbench.FITTED_ROWS["slowmo_t2a_sgp_tpi"] == "msg_efficiency" == simbench.FITTED_ROWS[simbench.MSG_EFF_ROW]
    assert simbench.msg_efficiency_range() == (0.3, 0.9)
    row = {"paper": "SlowMo", "location": "Table 2a", "relation": "=", "unit": "ms"}
    fit = simbench.msg_eff_row({**row, "id": "slowmo_t2a_sgp_tpi", "value": 304.0}, 304.0, "ms", 305.0, 0.455, "")
    assert fit["role"] == "fitted" and fit["within_25pct"] is None and fit["plausible"] is True
    assert "msg_efficiency=0.455" in fit["parameters"] and "fitted on this row" in fit["parameters"]
    osgp = simbench.msg_eff_row({**row, "id": "slowmo_t2a_osgp_tpi", "value": 271.0}, 271.0, "ms", 215.0, 0.455, "")
    assert osgp["role"] == "prediction" and osgp["within_25pct"] is True and osgp["plausible"] is True
    assert "msg_efficiency=0.455" in osgp["parameters"] and "fitted on slowmo_t2a_sgp_tpi" in osgp["parameters"]
    assert simbench.msg_eff_row({**row, "id": "x", "value": 271.0}, 271.0, "ms", 100.0, 0.2, "")["plausible"] is False
    ar = {**row, "id": "sgp_v1_time_ar_n32", "relation": ">", "value": 5.0}
    ring = simbench.msg_eff_row(ar, 1274.0, "ms", 1270.0, 0.455, "", allreduce_efficiency=0.32, role="fitted")
    assert ring["role"] == "fitted" and "allreduce_efficiency=0.320 on top" in ring["parameters"]
    assert "0.146 of line rate" in ring["parameters"] and ring["plausible"] is False  # 0.455 x 0.32 < 0.3
    rd = simbench.msg_eff_row(ar, 1274.0, "ms", 1270.0, 0.455, "", allreduce_efficiency=0.79, role="fitted")
    assert rd["plausible"] is True
    # the knob is the sensitivity sweep's: the platform's msg_efficiency, allreduce_efficiency kept on top
    cfg = {"platform": {"name": "ethernet_10g", "allreduce_efficiency": 0.5}, "profile": "resnet50_v100x8"}
    assert simbench.with_msg_efficiency(cfg, 0.4)["platform"] == {"name": "ethernet_10g", "allreduce_efficiency": 0.5,
                                                                  "msg_efficiency": 0.4}
