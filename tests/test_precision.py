"""Mixed precision (``workload.precision``, impls/runtime/precision.py): bf16 and fp16 runs
stay within a declared tolerance of fp32, an overflowing fp16 step is skipped without
touching the parameters, the skip is agreed across workers, bad values are refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import make_config
from impls.errors import ConfigError
from impls.config.runconfig import resolve
from impls.runtime.trainer import _seed_all, train
from impls.tasks import build_task

# Largest parameter difference from fp32 after 10 SGD steps (momentum 0.9, lr 0.05) of the tiny
# MLP on digits; parameters are ~0.2 in magnitude.  Measured: bf16 1.4e-3 (8-bit mantissa in the
# matrix products), fp16 2.8e-5 (11-bit mantissa).
BF16_TOL, FP16_TOL = 5e-3, 2e-4


def _run(tmp: Path, **wl) -> tuple[dict[str, torch.Tensor], list[dict]]:
    cfg = make_config("serial_sgd", 1, workload={"epochs": 1, **wl})
    train(cfg, tmp / "out", tmp / "ckpt")
    recs = [json.loads(x) for x in (tmp / "out" / "metrics" / "rank0.jsonl").read_text().splitlines()]
    return torch.load(tmp / "ckpt" / "rank0.pt", weights_only=False)["model"], recs


def _maxdiff(a, b) -> float:
    return max((a[k] - b[k]).abs().max().item() for k in a)


def test_bf16_and_fp16_close_to_fp32(tmp_path):
    ref, ref_recs = _run(tmp_path / "fp32")
    for prec, tol in (("bf16", BF16_TOL), ("fp16", FP16_TOL)):
        got, recs = _run(tmp_path / prec, precision=prec)
        steps = [r for r in recs if r["kind"] == "step"]
        assert len(steps) == 10 and all(torch.isfinite(torch.tensor(r["loss/train"])) for r in steps)
        assert all(torch.isfinite(v).all() for v in got.values())
        d = _maxdiff(ref, got)
        assert 0 < d <= tol, (prec, d)  # > 0: autocast really ran in 16 bits
        if prec == "fp16":
            assert [r["amp/skipped"] for r in steps] == [0.0] * 10 and steps[0]["amp/loss_scale"] == 2.0 ** 16
        else:
            assert "amp/skipped" not in steps[0]


def test_fp16_overflow_skips_the_step(tmp_path):
    """A scale of 2**40 overflows fp16 (max 65504) in every backward pass: each step is
    skipped, the scale halves each time, and the parameters stay the initial ones exactly."""
    got, recs = _run(tmp_path, precision="fp16", loss_scale={"init": 2.0 ** 40})
    steps = [r for r in recs if r["kind"] == "step"]
    assert [r["amp/skipped"] for r in steps] == [1.0] * 10
    assert [r["amp/loss_scale"] for r in steps] == [2.0 ** (40 - i) for i in range(10)]
    assert [r["amp/skipped_steps"] for r in recs if r["kind"] == "epoch"] == [10.0]
    res = resolve(make_config("serial_sgd", 1))
    task = build_task(res.workload)
    _seed_all(1)
    task.build_data()
    _seed_all(1)  # as the runtime builds the model
    init = task.build_model().state_dict()
    assert _maxdiff(init, got) == 0.0


def test_fp16_skip_is_agreed_across_workers():
    """2 simulated ranks (allreduce_sgd): only rank 1 overflows at step 0, yet both skip it
    (one counted all-reduce of the flag) and neither moves; at step 1 both step, equal."""
    p = subprocess.run([sys.executable, str(Path(__file__).with_name("amp_probe.py"))], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    r0, r1 = json.loads(p.stdout.strip().splitlines()[-1])
    for log in (r0["probe"], r1["probe"]):
        assert log[0]["skipped"] is True and log[0]["moved"] == 0.0 and log[0]["scale_after"] == 512.0
        assert log[0]["agree_messages"] == 1  # the flag; the algorithm sent nothing
        assert log[1]["skipped"] is False and log[1]["moved"] > 0
    assert r0["probe"][1]["params"] == r1["probe"][1]["params"]
    # through the runtime's step, with the all-reduce overlapping backward (scaled gradients on the
    # wire) and without: rank 1's real fp16 overflow skips step 0 on both ranks, then both step
    for mode in ("True", "False"):
        for log in (r0["overlap"][mode], r1["overlap"][mode]):
            assert [x["skipped"] for x in log] == [True, False, False] and log[0]["moved"] == 0.0
            assert log[1]["moved"] > 0 and log[2]["moved"] > 0
            # two buckets (first_bucket_mb 1e-4: the last bias (3 parameters), then the other 80)
            assert [x["buckets_in_backward"] for x in log[1:]] == ([2.0, 2.0] if mode == "True" else [None, None])
        assert r0["overlap"][mode][2]["params"] == r1["overlap"][mode][2]["params"]
    a, b = r0["overlap"]["True"][2]["params"], r0["overlap"]["False"][2]["params"]
    assert max(abs(u - v) for pa, pb in zip(a, b) for u, v in zip(pa, pb)) <= 1e-6


@pytest.mark.parametrize("over, key, text", [
    ({"precision": "fp8"}, "workload.precision", "allowed values: fp32, bf16, fp16"),
    ({"precision": "bf16", "loss_scale": {"init": 8.0}}, "workload.loss_scale", "only fp16"),
    ({"precision": "fp16", "loss_scale": {"backoff_factor": 2.0}}, "workload.loss_scale.backoff_factor", "< 1"),
    ({"precision": "fp16", "loss_scale": {"int": 8.0}}, "workload.loss_scale.int", "allowed keys"),
])
def test_bad_precision_config_is_refused(over, key, text):
    with pytest.raises(ConfigError) as e:
        resolve(make_config("allreduce_sgd", 2, workload=over))
    assert e.value.key == key and text in str(e.value)


def test_fp16_refused_with_parameter_servers():
    with pytest.raises(ConfigError, match="workload.precision: fp16 skips"):
        resolve(make_config("ps_sync", 2, workload={"precision": "fp16"}))
    resolve(make_config("ps_sync", 2, workload={"precision": "bf16"}))  # no skips: fine
