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
    (synced, drifting), _ = run_torchrun([make_config("allreduce_sgd", 2, workload=WL),
                                          make_config({"name": "allreduce_sgd", "broadcast_buffers": False}, 2,
                                                      workload=WL)])
    a, b = synced.final_state(0), synced.final_state(1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    a, b = drifting.final_state(0), drifting.final_state(1)
    differ = [k for k in a if not torch.equal(a[k], b[k])]
    assert differ and all("running_" in k for k in differ)  # parameters equal, statistics drift
    # the broadcast is real traffic: each step sends more than the gradient all-reduce alone
    extra = [s["comm/bytes_sent"] - d["comm/bytes_sent"] for s, d in zip(synced.records(1, "step"),
                                                                         drifting.records(1, "step"))]
    assert len(extra) == 3 and all(e > 0 for e in extra)
