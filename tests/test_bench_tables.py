"""The benchmark CSVs (results/bench/): their columns and values, exactly.

* step_time_vs_allreduce.csv: each method's time per step over seeds and its ratio to
  allreduce_sgd's at the same experiment, nodes and straggler (distrepro_wf.bench.tables);
* pipeline_wall.csv: one row per pipeline invocation (distrepro_wf.pipeline.timing);
* allreduce_vs_ddp.csv: one row per (model, nodes) from a real 2-rank torchrun launch of
  ``impls.bench.ddp ddp`` (timings vary; what they are computed from and the setting do not).
"""

import csv
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from distrepro_wf.bench.tables import step_time_targets, step_time_vs_allreduce
from distrepro_wf.pipeline.timing import append_pipeline_row
from impls.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _runs(rows: list[tuple]) -> pd.DataFrame:
    """runs.csv rows (experiment, nodes, straggler, method, algorithm, seed, time_per_step_s)."""
    return pd.DataFrame(rows, columns=["experiment", "nodes", "straggler", "method", "algorithm", "seed",
                                       "time_per_step_s"])


def test_step_time_ratio_table_is_exact():
    """Means over seeds in ms, ratio to allreduce_sgd at the same (experiment, nodes, straggler), the
    issue's target by algorithm and straggler; a setting without allreduce_sgd has no row."""
    runs = _runs([
        ("e", 4, "none", "allreduce_sgd", "allreduce_sgd", 1, 0.010),
        ("e", 4, "none", "allreduce_sgd", "allreduce_sgd", 2, 0.012),
        ("e", 4, "none", "sgp_1peer", "sgp", 1, 0.008), ("e", 4, "none", "sgp_1peer", "sgp", 2, 0.010),
        ("e", 4, "slow1x4", "allreduce_sgd", "allreduce_sgd", 1, 0.020),
        ("e", 4, "slow1x4", "adpsgd", "adpsgd", 1, 0.005),
        ("e", 4, "slow1x4", "osgp", "osgp", 1, 0.030),            # no target for osgp with a straggler
        ("e", 8, "none", "dpsgd", "dpsgd", 1, 0.004),              # no allreduce_sgd at 8 nodes: no row
        ("f", 4, "none", "allreduce_sgd", "allreduce_sgd", 1, 0.016), ("f", 4, "none", "dpsgd", "dpsgd", 1, 0.002),
    ])
    expected = pd.DataFrame([
        ("e", 4, "none", "sgp_1peer", "sgp", 2, 9.0, 11.0, 0.8182, "<= 1.0"),
        ("e", 4, "slow1x4", "adpsgd", "adpsgd", 1, 5.0, 20.0, 0.25, "< 0.5"),
        ("e", 4, "slow1x4", "osgp", "osgp", 1, 30.0, 20.0, 1.5, ""),
        ("f", 4, "none", "dpsgd", "dpsgd", 1, 2.0, 16.0, 0.125, "<= 1.0"),
    ], columns=["experiment", "nodes", "straggler", "method", "algorithm", "seeds", "time_per_step_ms",
                "allreduce_ms", "ratio", "target"])
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())  # the targets are config
    targets = step_time_targets(config["benchmarks"]["step_time_vs_allreduce"])
    pd.testing.assert_frame_equal(step_time_vs_allreduce(runs, "allreduce_sgd", targets), expected, check_exact=True)
    with pytest.raises(ConfigError, match=r"benchmarks\.step_time_vs_allreduce\.targets\.sgp: expected"):
        step_time_targets({"targets": {"sgp": "<= 1"}})
    with pytest.raises(ConfigError, match=r"benchmarks\.step_time_vs_allreduce\.targets\.sgp/none: expected"):
        step_time_targets({"targets": {"sgp/none": ""}})  # empty: refused naming the key, not an IndexError


def test_step_time_table_of_no_runs_has_the_columns():
    for empty in (pd.DataFrame(), pd.DataFrame({"experiment": ["e"], "seed": [1]})):
        t = step_time_vs_allreduce(empty)
        assert t.empty and list(t.columns) == ["experiment", "nodes", "straggler", "method", "algorithm", "seeds",
                                               "time_per_step_ms", "allreduce_ms", "ratio", "target"]


def test_pipeline_wall_csv_appends_one_row_per_invocation(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        path = tmp_path / "bench" / "pipeline_wall.csv"
        append_pipeline_row(str(path), 1_767_225_600.0, 1_767_225_612.345, "ok", 2, 24)  # 2026-01-01 00:00 UTC
        append_pipeline_row(str(path), 1_767_225_700.0, 1_767_225_701.0, "error", 1, 3)
    finally:
        monkeypatch.undo()
        time.tzset()
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    host, cpus = socket.gethostname(), str(os.cpu_count())
    assert rows == [["started_at", "wall_s", "status", "cores", "runs_in_grid", "host", "cpu_count"],
                    ["2026-01-01T00:00:00", "12.35", "ok", "2", "24", host, cpus],
                    ["2026-01-01T00:01:40", "1.0", "error", "1", "3", host, cpus]]


@pytest.mark.spawn
def test_ddp_benchmark_csv_from_a_real_launch(tmp_path):
    """Two ranks, the default MLP (64 -> 64 -> 10: 64*64+64 + 64*10+10 = 4810 parameters, no buffers),
    2 steps x 2 repeats of AR-SGD (through the runtime's step, all-reduce during backward: one bucket),
    DDP and the no-communication baseline; the ratio and the overheads are the step times' (rounded to 4
    decimals from the unrounded times: the tolerance is what rounding the ms columns to 4 decimals allows)."""
    out = tmp_path / "allreduce_vs_ddp.csv"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "impls.bench.ddp",
           "ddp", "--out", str(out), "--model", "mlp", "--steps", "2", "--repeats", "2", "--batch", "4"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    t = pd.read_csv(out)
    assert list(t.columns) == ["model", "params", "buffer_elements", "nodes", "batch_per_rank", "steps", "repeats",
                               "overlap_backward", "buckets", "allreduce_sgd_ms", "ddp_ms", "nocomm_ms", "ratio",
                               "overhead", "ddp_overhead", "buffer_sync_ms", "ddp_buffer_sync_ms", "allreduce_sgd_cpu_ms",
                               "ddp_cpu_ms", "nocomm_cpu_ms", "collectives_ms", "collectives_cpu_ms",
                               "overhead_floor", "cpu_overhead", "ddp_cpu_overhead", "target",
                               "threads_per_rank", "torch", "git_commit", "host", "cpu_count"]
    assert len(t) == 1
    r = t.iloc[0]
    assert (r["model"], r["params"], r["buffer_elements"], r["nodes"], r["batch_per_rank"], r["steps"],
            r["repeats"], r["overlap_backward"], r["buckets"], r["target"], r["threads_per_rank"], r["torch"],
            r["cpu_count"]) == ("mlp", 4810, 0, 2, 4, 2, 2, True, 1, "ratio <= 0.95", 1, torch.__version__,
                                os.cpu_count())
    assert r["allreduce_sgd_ms"] > 0 and r["ddp_ms"] > 0 and r["nocomm_ms"] > 0
    assert r["buffer_sync_ms"] >= 0 and r["ddp_buffer_sync_ms"] >= 0
    assert r["allreduce_sgd_cpu_ms"] > 0 and r["ddp_cpu_ms"] > 0 and r["nocomm_cpu_ms"] > 0
    assert r["collectives_ms"] > 0 and r["collectives_cpu_ms"] > 0

    def rounded(a: float, b: float) -> float:  # the error of a / b from ms columns rounded to 4 decimals,
        return a / b * (5e-5 / a + 5e-5 / b) + 5e-5  # plus the ratio's own rounding (a 0.1 ms step: ~5e-4 rel)

    assert r["ratio"] == pytest.approx(r["allreduce_sgd_ms"] / r["ddp_ms"], abs=rounded(r["allreduce_sgd_ms"], r["ddp_ms"]))
    assert r["overhead"] == pytest.approx(r["allreduce_sgd_ms"] / r["nocomm_ms"] - 1,
                                          abs=rounded(r["allreduce_sgd_ms"], r["nocomm_ms"]))
    assert r["ddp_overhead"] == pytest.approx(r["ddp_ms"] / r["nocomm_ms"] - 1, abs=rounded(r["ddp_ms"], r["nocomm_ms"]))
    assert r["overhead_floor"] == pytest.approx(r["collectives_cpu_ms"] / r["nocomm_ms"],
                                                abs=rounded(r["collectives_cpu_ms"], r["nocomm_ms"]))
    assert r["cpu_overhead"] == pytest.approx(r["allreduce_sgd_cpu_ms"] / r["nocomm_cpu_ms"] - 1,
                                              abs=rounded(r["allreduce_sgd_cpu_ms"], r["nocomm_cpu_ms"]))


def test_ddp_benchmark_settings_and_launches():
    """benchmarks.ddp_compare: defaults, per-model steps, one launch per (model, nodes); bad input
    names the key and the allowed values before any launch."""
    from distrepro_wf.bench.ddpbench import bench_spec, commands
    from impls.errors import ConfigError

    spec = bench_spec({"models": ["mlp", "vgg16"], "nodes": [2], "steps": {"vgg16": 3}})
    assert spec["steps"] == {"mlp": 100, "vgg16": 3} and spec["repeats"] == 5
    cmds = commands(spec, "x.csv")
    assert [(c[c.index("--model") + 1], c[4], c[c.index("--steps") + 1]) for c in cmds] == [
        ("mlp", "--nproc-per-node=2", "100"), ("vgg16", "--nproc-per-node=2", "3")]
    assert bench_spec(None)["models"] == ["mlp", "resnet20", "vgg16"]
    for given, key, text in (({"model": ["mlp"]}, "benchmarks.ddp_compare", "allowed keys: batch, models"),
                             ({"models": ["vgg19"]}, "benchmarks.ddp_compare.models", "known: cnn, mlp"),
                             ({"nodes": [1]}, "benchmarks.ddp_compare.nodes", "integers >= 2"),
                             ({"steps": {"mlp": 0}}, "benchmarks.ddp_compare.steps", "integer >= 1"),
                             ({"repeats": "5"}, "benchmarks.ddp_compare.repeats", "integer >= 1")):
        with pytest.raises(ConfigError) as e:
            bench_spec(given)
        assert e.value.key == key and text in str(e.value), (given, str(e.value))
