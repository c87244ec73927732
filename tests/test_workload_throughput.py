"""Throughput of a workload's training step (impls/runtime/throughput.py), the benchmark
table built from it (workflows/lib/distrepro_wf/bench/wlbench.py), and the ``fixed`` profile it
emits for the simulated platform (python -m impls.sim.calibrate).  Timings vary: the tests
check what is measured and what the rows and profile entries say, never how fast."""

from __future__ import annotations

import json
import math

import pytest
import torch
import yaml

import sim_server
from conftest import make_config

from distrepro_wf.bench import wlbench
from impls.errors import ConfigError
from impls.runtime.throughput import profile_entry, synthetic_stand_in, time_steps
from impls.sim.profiles import profile_config

TINY = {"dataset": {"name": "digits"}, "model": {"name": "mlp", "hidden": [16]}, "batch_size": 8,
        "optimizer": {"lr": 0.1, "momentum": 0.9}}
CIFAR_CNN = {"dataset": {"name": "cifar10", "root": "/nowhere"}, "model": {"name": "cnn", "channels": 4},
             "batch_size": 4, "optimizer": {"lr": 0.1}}
TIMING = ("step_ms", "step_ms_min", "fwd_bwd_ms", "fwd_bwd_ms_min", "samples_per_s", "model_mb")


def test_time_steps_row_of_a_tiny_model():
    before = torch.get_num_threads()
    rows = {p: time_steps(TINY, threads=1, precision=p, steps=3, warmup=1) for p in ("fp32", "bf16")}
    assert torch.get_num_threads() == before  # restored
    params = 64 * 16 + 16 + 16 * 10 + 10
    for p, r in rows.items():
        assert r["precision"] == p and r["rows"] == 8 and r["steps"] == 3 and r["warmup"] == 1
        assert r["params"] == params and r["model_mb"] == params * 4 / 1e6 and r["optimizer"] == "sgd"
        assert all(r[k] > 0 and math.isfinite(r[k]) for k in TIMING), r
        assert r["step_ms_min"] <= r["step_ms"] and r["fwd_bwd_ms_min"] <= r["fwd_bwd_ms"]
        assert r["samples_per_s"] == pytest.approx(8 / (r["step_ms"] / 1e3))
        assert r["tokens"] is None and r["threads"] == 1 and r["torch"] == torch.__version__ and r["cpu_model"]
    # the calibration's variant: no optimizer; a budget stops after min_steps
    r = time_steps(TINY, steps=50, warmup=0, optimizer=False, budget_s=0.0, min_steps=2)
    assert r["steps"] == 2 and r["optimizer"] is None


def test_synthetic_stand_in_keeps_the_real_shape():
    wl = synthetic_stand_in(CIFAR_CNN)
    assert wl["dataset"] == {"name": "synthetic", "shape": [3, 32, 32], "classes": 10, "train": 4, "val": 1}
    img = synthetic_stand_in({"dataset": {"name": "imagefolder", "root": "/x", "image_size": 160}, "batch_size": 2})
    assert img["dataset"]["shape"] == [3, 160, 160] and img["dataset"]["classes"] == 1000
    assert synthetic_stand_in(TINY) == TINY
    from impls.data import build_dataset

    a, b = build_dataset(wl["dataset"]), build_dataset(wl["dataset"])
    assert a.input_shape == (3, 32, 32) and len(a.train) == 4 and a.num_classes == 10
    assert torch.equal(a.train.tensors[0], b.train.tensors[0])  # seeded
    with pytest.raises(ConfigError, match=r"workload\.dataset\.shape"):
        build_dataset({"name": "synthetic", "shape": [3, 0]})


def test_translation_on_random_tokens():
    import fairseq  # noqa: F401  required (scripts/setup.sh): a missing fairseq fails here, never skips
    wl = {"task": {"name": "translation", "arch": "transformer_tiny"}, "batch_size": 64,
          "optimizer": {"name": "adam", "lr": 1e-3}}
    r = time_steps(wl, steps=1, warmup=0, tokens={"vocab": 40, "sentences": 4, "length": 5})
    assert r["rows"] == 4 and r["tokens"] == 20 and r["tokens_per_s"] == pytest.approx(20 / (r["step_ms"] / 1e3))
    with pytest.raises(ValueError, match="not defined for the Classification task; tasks that define them: translation"):
        time_steps(TINY, steps=1, warmup=0, tokens={"vocab": 40, "sentences": 4, "length": 5})


def _spec(**over):
    return {"workloads": {"tiny": {"config": None, "workload": TINY},
                          "cifar_cnn": {"config": None, "workload": CIFAR_CNN, "steps": 3}},
            "threads": [1, "all"], "steps": 3, "warmup": 1, **over}


def test_benchmark_table(monkeypatch):
    monkeypatch.setattr(wlbench, "native_bf16", lambda: False)
    t = wlbench.measure(_spec(emulated_bf16_max_fp32_ms=None, gpu=False), all_threads=2)
    assert list(t.columns) == wlbench.COLUMNS and len(t) == 8  # 2 workloads x 2 thread counts x fp32, bf16
    assert sorted(set(zip(t.workload, t.threads, t.precision))) == sorted(
        (w, n, p) for w in ("tiny", "cifar_cnn") for n in (1, 2) for p in ("fp32", "bf16"))
    assert (t.status == "ok").all() and (t.throughput > 0).all() and (t.unit == "samples/s").all()
    assert (t.device == "cpu").all() and (t.throughput_best >= t.throughput).all()
    assert (t[t.threads == 1].vs_1_thread == 1).all() and (t[t.precision == "fp32"].vs_fp32 == 1).all()
    two = t[(t.threads == 2) & (t.precision == "bf16")].set_index("workload")
    one = t[(t.threads == 1) & (t.precision == "bf16")].set_index("workload")
    assert two.vs_1_thread.to_dict() == pytest.approx((two.throughput / one.throughput).to_dict())
    assert t.set_index("workload").loc["cifar_cnn", "data"].iloc[0] == "random 3x32x32, 10 classes"
    for r in t.itertuples():
        assert json.loads(r.profile) == profile_entry({"step_ms": r.step_ms, "model_mb": r.model_mb})
    # without native bf16, a bf16 row is timed only under the cap on its fp32 step
    t = wlbench.measure(_spec(emulated_bf16_max_fp32_ms=0, threads=[1], gpu=False), all_threads=2)
    skipped = t[t.precision == "bf16"]
    assert len(skipped) == 2 and skipped.status.str.startswith("skipped: bf16 is emulated").all()
    assert skipped.throughput.isna().all() and (t[t.precision == "fp32"].status == "ok").all()


def test_benchmark_spec_refuses_bad_keys():
    with pytest.raises(ConfigError, match=r"benchmarks\.workload_throughput: unknown key\(s\) \['thread'\]"):
        wlbench.bench_spec({"thread": [1]})
    with pytest.raises(ConfigError, match=r"workloads\.x: unknown key\(s\) \['batch'\]"):
        wlbench.bench_spec({"workloads": {"x": {"config": None, "batch": 4}}})
    with pytest.raises(ConfigError, match="allowed values: fp32, bf16, fp16"):
        wlbench.bench_spec({"precisions": ["fp8"]})
    with pytest.raises(ConfigError, match=r"workload_throughput\.gpu: allowed values: auto, false"):
        wlbench.bench_spec({"gpu": "yes"})
    with pytest.raises(ConfigError, match="no workload 'nope' in config/config.yaml"):
        wlbench.resolve_workload("nope", {"config": "config/config.yaml"})
    # the shipped entries name workloads their config files hold
    spec = wlbench.bench_spec(None)
    for label, entry in spec["workloads"].items():
        assert wlbench.resolve_workload(label, entry)["batch_size"] >= 1
    assert str(wlbench.REPO / "config/full/sgp.yaml") in wlbench.config_files(spec)


def test_calibrated_profile_is_valid_config_and_drives_a_simulated_run(tmp_path, capsys):
    """``python -m impls.sim.calibrate`` prints a profile entry the pipeline's validation accepts,
    and a simulated run charges its step_ms for every step."""
    from distrepro_wf.pipeline.config import validate
    from impls.sim.calibrate import main

    main(["--workload", json.dumps(CIFAR_CNN), "--threads", "1", "--steps", "2", "--warmup", "1"])
    out = capsys.readouterr().out
    assert out.startswith("# batch 4, 1 threads, fp32 on cpu, ")
    prof = yaml.safe_load(out.splitlines()[-1])["profile"]
    assert prof["name"] == "fixed" and prof["step_ms"] > 0 and prof["model_mb"] > 0
    assert profile_config(prof).step_ms == prof["step_ms"]
    config = {"experiments": {"e": {"workload": "tiny", "nodes": [2], "stragglers": ["none"], "seeds": [1],
                                    "backend": "simgrid", "platform": "ethernet_10g", "profile": prof,
                                    "methods": {"allreduce_sgd": {}}}},
              "workloads": {"tiny": {**TINY, "epochs": 1, "max_steps_per_epoch": 3}},
              "stragglers": {"none": {"kind": "none"}}, "launcher": {"kind": "local"}}
    assert len(validate(config)) == 1
    cfg = make_config("allreduce_sgd", 2, backend="simgrid", platform="ethernet_10g", profile=prof,
                      workload={"epochs": 1, "max_steps_per_epoch": 3})
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    rc = sim_server.run(tmp_path / "cfg.json", tmp_path / "out", None, None, tmp_path / "sim.log")
    assert rc == 0, (tmp_path / "sim.log").read_text()[-3000:]
    recs = [json.loads(x) for x in (tmp_path / "out" / "metrics" / "rank0.jsonl").read_text().splitlines()]
    steps = [r for r in recs if r["kind"] == "step"]
    assert len(steps) == 3
    assert all(r["time/compute_s"] == pytest.approx(prof["step_ms"] / 1e3, rel=1e-9) for r in steps)
