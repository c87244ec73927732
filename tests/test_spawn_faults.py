"""Tier 2 faults under real torchrun (gloo): a diverging run fails cleanly, a damaged
checkpoint is set aside instead of failing every retry.

* Divergence (issue: "diverged runs count as successes"): a run whose loss or parameters
  become non-finite must fail with a message naming the rank, the step and the value,
  write ``error.json`` (kind ``diverged``) for the workflow, never checkpoint the diverged
  model, and leave the launch able to run the rest of its plan with numbers identical to
  a launch of its own (so the diverged run drained its messages).
* Damaged checkpoints: truncated, garbage, another model's shapes, a dict missing keys.
  Each is moved aside (``rank<r>.pt.unreadable-<time>``), the run says so in
  ``runinfo.json`` and starts from scratch, ending bit-identical to an uninterrupted run.
"""

import json

import pytest
import torch

from conftest import launch, make_config

pytestmark = pytest.mark.spawn

DIVERGE = {"optimizer": {"lr": 1.0e6, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4}}
TIMING = ("time/", "gossip/wait")


def numbers(records):
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in records]


def test_a_diverging_run_fails_with_rank_step_and_value_and_the_plan_goes_on(run_torchrun):
    healthy = make_config("allreduce_sgd", 2, seed=3)
    plan = [make_config("allreduce_sgd", 2, workload=DIVERGE),  # synchronous: agreed at the epoch's end
            make_config("sgp", 2, workload=DIVERGE),  # gossip: in-flight messages must be drained
            make_config("adpsgd", 2, workload=DIVERGE),  # barrier-free: agreed after the last epoch
            healthy]
    results, proc = run_torchrun(plan)
    assert proc.returncode == 0
    for r, cfg in zip(results[:3], plan[:3]):
        err = json.loads((r.out / "error.json").read_text())
        assert err["kind"] == "diverged", cfg["method"]
        assert err["message"] == (r.out / "ERROR.txt").read_text().strip()
        msg = err["message"]
        assert msg.startswith("diverged: rank "), msg
        assert ("loss/train = nan" in msg or "loss/train = inf" in msg or "non-finite parameters" in msg), msg
        # the step it names is one whose logged loss is indeed non-finite on that rank
        rank = int(msg.split("rank ")[1].split(":")[0])
        steps = r.records(rank, "step")
        if "loss/train" in msg:
            step = int(msg.split("step ")[1].split(" ")[0])
            bad = [s for s in steps if s["step"] == step]
            assert bad and bad[0]["loss/train"] is None  # NaN/inf are written as null
            assert all(s["loss/train"] is not None for s in steps if s["step"] < step)
        assert not r.ckpt.exists() or not list(r.ckpt.glob("rank*.pt")) or cfg["method"] == "adpsgd"
    # synchronous methods stop at the end of the epoch that diverged: nothing after it
    for r in results[:2]:
        epochs = [e["epoch"] for e in r.records(0, "epoch")]
        assert epochs == [0] and not list(r.ckpt.glob("rank*.pt"))
    # the healthy run after them equals the same config in a launch of its own
    (alone,), _ = run_torchrun([healthy])
    assert not (results[3].out / "ERROR.txt").exists()
    for rank in range(2):
        assert numbers(results[3].records(rank)) == numbers(alone.records(rank))


def _damage(kind, path, other_model_state):
    if kind == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif kind == "garbage":
        path.write_bytes(b"\x00not a checkpoint\xff" * 10)
    elif kind == "other_model":
        state = torch.load(path, weights_only=False)
        state["model"] = other_model_state
        torch.save(state, path)
    elif kind == "missing_keys":
        state = torch.load(path, weights_only=False)
        del state["rng"]
        torch.save(state, path)


@pytest.mark.parametrize("kinds", [("truncated", "garbage", "other_model", "missing_keys")])
def test_a_damaged_checkpoint_is_set_aside_and_the_run_starts_from_scratch(run_torchrun, tmp_path, kinds):
    import shutil

    cfg = make_config("allreduce_sgd", 2, seed=4)
    (killed,), proc = run_torchrun([cfg], env={"DISTREPRO_FAULT": "1:15"}, check=False)  # epoch 1 of 2
    assert proc.returncode != 0 and sorted(p.name for p in killed.ckpt.glob("rank*.pt")) == ["rank0.pt", "rank1.pt"]
    other = make_config("allreduce_sgd", 2, workload={"model": {"name": "mlp", "hidden": [7]}})
    from impls.models import build_model

    other_state = build_model(other["workload"]["model"], (1, 8, 8), 10).state_dict()
    base = tmp_path / "resume"  # launch() reads entry i's checkpoints from base/ckpt<i>
    for i, kind in enumerate(kinds):  # rank 1's file damaged (rank 0's for missing_keys), the other intact
        shutil.copytree(killed.ckpt, base / f"ckpt{i}")
        _damage(kind, base / f"ckpt{i}" / ("rank0.pt" if kind == "missing_keys" else "rank1.pt"), other_state)
    # one launch: the damaged runs resume, then the same config from scratch, uninterrupted
    results, proc = launch([cfg] * (len(kinds) + 1), base)
    fresh = results[-1]
    for kind, r in zip(kinds, results[:-1]):
        damaged_rank = 0 if kind == "missing_keys" else 1
        info = json.loads((r.out / "runinfo.json").read_text())
        assert info["resumed_from_epoch"] is None, kind
        assert len(info["checkpoints_discarded"]) == 1, (kind, info)
        assert info["checkpoints_discarded"][0].startswith(f"rank {damaged_rank}: rank{damaged_rank}.pt unreadable")
        assert len(list(r.ckpt.glob(f"rank{damaged_rank}.pt.unreadable-*"))) == 1, kind
        assert "every rank starts this run from scratch" in proc.stderr
        for rank in range(2):  # trained from scratch: identical to the uninterrupted run
            assert numbers(r.records(rank)) == numbers(fresh.records(rank)), (kind, rank)
            got, want = r.final_state(rank), fresh.final_state(rank)
            assert all(torch.equal(got[k], want[k]) for k in want), (kind, rank)
