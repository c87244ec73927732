"""Tier 2: the runtime under real torchrun (gloo): determinism, stragglers, faults, resume."""

import pytest
import torch

from conftest import make_config

pytestmark = pytest.mark.spawn

TIMING = ("time/", "gossip/wait")


def numbers(records):
    """The non-timing content of metric records (losses, accuracies, bytes, lr)."""
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in records]


def test_same_seed_same_numbers(run_torchrun):
    cfg = make_config("allreduce_sgd", 2, seed=5)
    (a, b), _ = run_torchrun([cfg, cfg])  # two runs in one launch: independent of what ran before
    (c,), _ = run_torchrun([cfg])  # and a fresh launch
    for rank in range(2):
        ra = numbers(a.records(rank))
        assert ra == numbers(b.records(rank)) == numbers(c.records(rank))
    assert numbers(a.records(0)) != numbers(run_torchrun([make_config("allreduce_sgd", 2, seed=6)])[0][0].records(0))


def test_fixed_straggler_slows_exactly_the_configured_rank_by_the_factor(run_torchrun):
    cfg = make_config("allreduce_sgd", 3, straggler={"kind": "fixed", "ranks": [-1], "factor": 4})
    (r,), _ = run_torchrun([cfg])
    for rank in range(3):
        steps = r.records(rank, "step")
        assert steps
        for s in steps:
            expected = 3.0 * s["time/compute_s"] if rank == 2 else 0.0
            assert s["time/straggler_delay_s"] == pytest.approx(expected, rel=1e-12, abs=0)
    # the others wait for it: their communication time includes the straggler's delay
    slow = sum(s["time/straggler_delay_s"] for s in r.records(2, "step"))
    wait = sum(s["time/comm_s"] for s in r.records(0, "step"))
    assert wait > 0.5 * slow


def test_random_straggler_is_seeded(run_torchrun):
    cfg = make_config("allreduce_sgd", 2, straggler={"kind": "random", "mean_fraction": 1.0, "prob": 0.5})
    (a,), _ = run_torchrun([cfg])
    for rank in range(2):
        d = [s["time/straggler_delay_s"] / s["time/compute_s"] for s in a.records(rank, "step")]
        assert any(x == 0 for x in d) and any(x > 0 for x in d)
    (b,), _ = run_torchrun([cfg])
    ra = [s["time/straggler_delay_s"] / s["time/compute_s"] for s in a.records(1, "step")]
    rb = [s["time/straggler_delay_s"] / s["time/compute_s"] for s in b.records(1, "step")]
    assert ra == pytest.approx(rb, rel=1e-9)


def test_bytes_counted_from_the_tensors_sent(run_torchrun):
    cfg = make_config("allreduce_sgd", 4)
    (r,), _ = run_torchrun([cfg])
    nparams = 64 * 32 + 32 + 32 * 10 + 10
    for s in r.records(1, "step"):
        assert s["comm/bytes_sent"] == pytest.approx(2 * 3 / 4 * 4 * nparams)  # ring all-reduce, fp32


def test_killed_worker_fails_the_launch_and_resume_continues_exactly(run_torchrun):
    cfg = make_config("allreduce_sgd", 2, workload={"epochs": 3})
    (full,), _ = run_torchrun([cfg])
    # rank 1 dies at global step 15 (epoch 1 of 3, 10 steps per epoch)
    (crashed,), proc = run_torchrun([cfg], env={"DISTREPRO_FAULT": "1:15"}, check=False)
    assert proc.returncode != 0
    assert torch.load(crashed.ckpt / "rank0.pt", weights_only=False)["epoch"] == 0
    # a relaunch with the same checkpoint directory resumes from epoch 1
    crashed.out.rename(crashed.out.with_name("first-attempt"))
    from conftest import launch

    (resumed,), _ = launch([cfg], crashed.out.parent, check=True)
    assert [e["epoch"] for e in resumed.records(0, "epoch")] == [0, 1, 2]
    assert numbers(resumed.records(0)) == numbers(full.records(0))
    for k, v in full.final_state(0).items():
        assert torch.equal(v, resumed.final_state(0)[k])


def test_a_config_error_skips_that_run_only(run_torchrun):
    """A run whose config fails its checks on every rank is skipped; the launch goes on."""
    bad = make_config({"name": "sgp", "topology": {"name": "exponential", "peers": 2}}, 2)
    good = make_config("allreduce_sgd", 2)
    (b, g), proc = run_torchrun([bad, good])
    assert proc.returncode == 0
    assert "algorithm.topology.peers" in (b.out / "ERROR.txt").read_text()
    assert [e["epoch"] for e in g.records(1, "epoch")] == [0, 1]
