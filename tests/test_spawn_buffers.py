"""allreduce_sgd keeps BatchNorm statistics consistent across ranks, as DDP does.

Parameters are averaged every step, but running statistics are updated by each rank's
forward pass on its own batch; like DDP (``broadcast_buffers=True``) the method
broadcasts rank 0's buffers before each forward pass and before evaluation, so every
rank ends with rank 0's model.  ``broadcast_buffers: false`` shows the drift it removes.
"""

import pytest
import torch

from conftest import make_config

pytestmark = pytest.mark.spawn

WL = {"model": {"name": "resnet20"}, "dataset": {"name": "digits"}, "batch_size": 8, "epochs": 1,
      "max_steps_per_epoch": 3}


def test_batchnorm_buffers_are_rank_zeros_on_every_rank(run_torchrun):
    (synced, drifting, after), _ = run_torchrun([
        make_config("allreduce_sgd", 2, workload=WL),
        make_config({"name": "allreduce_sgd", "broadcast_buffers": False}, 2, workload=WL),
        make_config({"name": "allreduce_sgd", "overlap_backward": False}, 2, workload=WL)])
    a, b = synced.final_state(0), synced.final_state(1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    a, b = drifting.final_state(0), drifting.final_state(1)
    differ = [k for k in a if not torch.equal(a[k], b[k])]
    assert differ and all("running_" in k for k in differ)  # parameters equal, statistics drift
    # the broadcast is real traffic: each step sends more than the gradient all-reduce alone
    extra = [s["comm/bytes_sent"] - d["comm/bytes_sent"] for s, d in zip(synced.records(1, "step"),
                                                                         drifting.records(1, "step"))]
    assert len(extra) == 3 and all(e > 0 for e in extra)
    # ... in one message per step (float statistics and int64 counters together; DDP sends one per
    # dtype), in flight from each backward pass to the next forward; the first forward pass also
    # waits for a blocking one (nothing is in flight yet)
    assert [s["comm/messages"] - d["comm/messages"] for s, d in zip(synced.records(1, "step"),
                                                                   drifting.records(1, "step"))] == [2, 1, 1]
    _overlap_equals_after(synced, after)


def _overlap_equals_after(synced, after):
    """ResNet-20's two buckets (1 MiB first, then the rest) all-reduced during backward (the
    default: both leave from the backward pass) end where the all-reduce after backward does."""
    assert {r["overlap/buckets_in_backward"] for r in synced.records(1, "step")} == {2.0}
    assert all("overlap/buckets_in_backward" not in r for r in after.records(1, "step"))
    for rank in range(2):
        a, b = synced.final_state(rank), after.final_state(rank)
        assert max(float((a[k].double() - b[k].double()).abs().max()) for k in a) <= 1e-6
