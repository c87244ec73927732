"""The simulator's sensitivity sweep (workflows/lib/distrepro_wf/claims/sweep.py, rule sensitivity_sweep):
its parameter mapping on the simulator's knobs, the points it plans for the default config and
the verdicts of its table.  One test runs 4 tiny simulations (2 nodes, 6 steps: a few seconds);
the rest are milliseconds (one torch import for the profile configs)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from distrepro_wf.claims import published as wfpublished
from distrepro_wf.claims import sensitivity
from distrepro_wf.bench import simbench
from distrepro_wf.claims import sweep
from distrepro_wf.pipeline.yamlio import load_yaml
from impls.config.runconfig import resolve

REPO = Path(__file__).resolve().parents[1]
EXPECT_LT1 = {"op": "<", "value": 1.0, "tolerance": 0.0}


def _tiny(platform="ethernet_10g", algorithm=None):
    wl = simbench.merged(simbench.TINY_WORKLOAD, {"max_steps_per_epoch": 3, "epochs": 2})
    return simbench.sim_config(algorithm or {"name": "allreduce_sgd", "overlap_backward": False}, 2, wl, platform,
                               {"name": "fixed", "step_ms": 20.0, "model_mb": 2.0, "msg_us": 10.0, "stage_gbps": 12.0})


def test_every_range_maps_onto_a_knob_the_simulator_accepts():
    base = _tiny("shared_hpc", "allreduce_sgd")
    for spec in sensitivity.RANGES:
        for v in (spec["low"], spec["high"]):
            resolve(sweep.perturb(base, spec["name"], v))  # validates platform, profile and algorithm
    p = lambda name, v: sweep.perturb(base, name, v)  # noqa: E731
    assert p("compute_s", 3.0)["profile"]["step_ms"] == 60.0
    # every message (the platform's msg_efficiency: NICs and uplinks), not allreduce_efficiency
    assert p("efficiency", 0.3)["platform"] == {"name": "shared_hpc", "msg_efficiency": 0.3}
    assert p("efficiency", 1.0) == base  # shared_hpc's nominal (line rate): simulated once
    assert p("latency_s", 5.0)["platform"]["latency_us"] == 250.0
    assert p("msg_overhead_s", 50e-6)["profile"]["msg_us"] == pytest.approx(50.0)
    assert p("background", 0.75)["platform"]["background_load"] == 0.75
    assert p("jitter", 0.15)["profile"]["jitter"] == 0.15
    assert p("stage_bandwidth", 0.25)["profile"]["stage_gbps"] == 3.0
    assert p("overlap", 0.0)["algorithm"]["overlap_backward"] is False
    assert p("overlap", 1.0) == base  # allreduce_sgd overlaps by default: the nominal config, simulated once
    with pytest.raises(sweep.NotSwept, match="no background traffic"):
        sweep.perturb(_tiny(), "background", 0.5)
    with pytest.raises(sweep.NotSwept, match="stages nothing"):
        sweep.perturb({**base, "profile": {"name": "fixed", "step_ms": 20.0}}, "stage_bandwidth", 4.0)


def test_perturbed_simulations_move_the_step_time(tmp_path):
    base = _tiny()
    cfgs = {"nominal": base, "compute": sweep.perturb(base, "compute_s", 3.0),
            "bandwidth": sweep.perturb(base, "efficiency", 0.3), "latency": sweep.perturb(base, "latency_s", 5.0)}
    t, cpu = sweep.simulate_all(cfgs, tmp_path, tmp_path / "log", threads=2)
    assert cpu > 0
    # one epoch of 3 synchronous steps, overlap off: compute 3 x (60 - 20) ms more
    assert t["compute"] - t["nominal"] == pytest.approx(0.120, abs=1e-4)
    # the ring's 2 messages of 1 MB per step at 0.3 of the NIC instead of ethernet_10g's nominal 0.456:
    # 3 x 2 x 1 MB x (1/0.3 - 1/0.456) / 1.155 GB/s ~ 5.9 ms
    assert 0.004 < t["bandwidth"] - t["nominal"] < 0.008
    # 5x latency: 3 x 2 x 200 us = 1.2 ms (plus slow-start effects of the flow model)
    assert 0.0008 < t["latency"] - t["nominal"] < 0.003


def test_plan_of_the_default_config():
    config = load_yaml(REPO / "config" / "config.yaml")
    claims = wfpublished.load(config).claims
    points, configs = sweep.plan(claims, config)
    df = pd.DataFrame(points)
    tta = df[df["claim"] == "sgp_tta_faster_than_ar"]
    assert len(tta) == 2 and (tta["note"] == sweep.TTA_NOT_SWEPT).all() and tta["keys"].isna().all()
    one = df[(df["claim"] == "sgp_epoch_faster_than_ar") & (df["nodes"] == 32)].set_index(["parameter", "end"])
    assert len(one) == 1 + 2 * len(sensitivity.RANGES)
    # ethernet_10g's nominal efficiency 0.456 inside the range 0.3-0.9: both ends simulated
    assert one.loc[("efficiency", "low"), "value"] == 0.3 and one.loc[("efficiency", "high"), "value"] == 0.9
    ps = df[(df["claim"] == "async_ps_not_slowed_by_straggler")].set_index(["parameter", "end"])
    assert ps.loc[("efficiency", "high"), "keys"] == ps.loc[("nominal", "nominal"), "keys"]  # infiniband's 1: once
    assert one.loc[("background", "low"), "note"].startswith("not swept: platform 'ethernet_10g'")
    assert one.loc[("compute_s", "high"), "closed_form_ratio"] > one.loc[("nominal", "nominal"), "closed_form_ratio"]
    ctl = df[(df["claim"] == "sgp_advantage_needs_slow_network") & (df["end"] == "nominal")]
    assert [configs[k]["platform"] for k in ctl["keys"].iloc[0]] == ["ethernet_10g"] * 2 + ["infiniband_100g"] * 2
    bg = df[(df["claim"] == "adpsgd_epoch_4to8x_faster") & (df["parameter"] == "background")]
    assert bg["value"].tolist() == [0.0, 0.75] and bg["keys"].notna().all()  # shared_hpc: swept
    gossip = df[(df["claim"] == "osgp_epoch_faster_than_sgp") & (df["parameter"] == "overlap")]
    assert gossip["note"].str.contains("no side all-reduces").all()
    assert set(df["claim"]) == {c["id"] for c, _, _ in sweep.simulated_speed_rows(claims, config)}
    with pytest.raises(Exception, match="benchmarks.sensitivity_sweep.claims.*unknown claim"):
        sweep.chosen(["no_such_claim"], claims)


def test_table_and_verdicts_of_a_hand_made_frame():
    pts = [{"claim": "x", "experiment": "e", "nodes": 8, "straggler": "none", "parameter": p, "label": p, "end": end,
            "value": v, "keys": keys, "note": note, "closed_form_ratio": cf}
           for p, end, v, keys, note, cf in (
               ("nominal", "nominal", math.nan, ["a", "b"], "", 0.84),
               ("compute_s", "high", 3.0, ["a3", "b3"], "", 0.96),
               ("overlap", "high", 1.0, ["a", "b"], "", 1.20),
               ("background", "low", 0.0, None, "not swept: no knob", math.nan))]
    pts.append({**pts[0], "claim": "y", "keys": ["a", "b", "ca", "cb"], "closed_form_ratio": 0.5})
    times = {"a": 0.8, "b": 1.0, "a3": 2.7, "b3": 3.0, "ca": 0.5, "cb": 0.25}
    frame = sweep.table(pts, times)
    assert frame["sim_ratio"].tolist()[:3] == pytest.approx([0.8, 0.9, 0.8]) and math.isnan(frame["sim_ratio"][3])
    assert frame["sim_ratio"].iloc[4] == pytest.approx(0.8 / 2.0)  # over the control's a/b
    out = sweep.judge(frame, {"x": EXPECT_LT1, "y": {"op": ">", "value": 1.0, "tolerance": 0.0}})
    assert list(out.columns) == sweep.COLUMNS
    # closed form scaled to the sweep's nominal: 0.8 x 0.96 / 0.84 = 0.914; 0.8 x 1.2 / 0.84 = 1.143
    assert out["closed_form_scaled"].tolist()[:3] == pytest.approx([0.8, 0.9142857, 1.1428571])
    assert out["verdict"].tolist() == ["reproduced", "reproduced", "reproduced", "", "not reproduced"]
    assert out["closed_form_verdict"].tolist() == ["reproduced", "reproduced", "not reproduced", "", "not reproduced"]
    assert out["agrees"].tolist() == ["yes", "yes", "no", "", "yes"]


def test_the_sweep_rule_runs_from_snakemake(tmp_path):
    """Rule ``sensitivity_sweep`` itself (one claim, short runs): its launch groups are child
    processes of the rule's script (a :mod:`multiprocessing` ``spawn`` pool re-ran the script,
    which only Snakemake can run, and the rule failed), and its log keeps both the groups' logs and
    the summary (the summary was written over them)."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    import yaml  # noqa: PLC0415

    config = load_yaml(REPO / "config" / "config.yaml")
    config.setdefault("benchmarks", {})["sensitivity_sweep"] = {
        "claims": ["async_ps_not_slowed_by_straggler"], "steps": 2, "epochs": 1, "timeout_s": 300}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    out = "results/bench/sensitivity_sweep.csv"
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path),
                           "--cores", "2", out, "--configfile", str(tmp_path / "c.yaml")],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    frame = pd.read_csv(tmp_path / out)
    assert set(frame["claim"]) == {"async_ps_not_slowed_by_straggler"} and frame["sim_ratio"].notna().any()
    swept = frame[frame["agrees"].isin(["yes", "no"])]
    assert len(swept) >= 10 and swept["verdict"].isin(["reproduced", "not reproduced"]).all()
    log = (tmp_path / "results/logs/bench/sensitivity_sweep.log").read_text()
    # the plan's line, then the groups' launch logs, then the summary: none written over another
    assert log.index("distinct simulations") < log.index("python -m impls.sim") < log.index("done:")
    assert "swept points agree with the closed form" in log
