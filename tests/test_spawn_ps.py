"""Roles: a parameter server beside the workers (runtime v2), proven with ``ps_sync``.

``nodes`` counts workers; ``ps_sync`` adds one server rank.  On the same data it must equal
``allreduce_sgd`` to 1e-6 (the server averages the workers' gradients and takes the same
optimizer step), at 2 and 4 workers; the server writes its own metrics (its bytes apart
from the workers') and checkpoints, and a killed run resumes on every rank, server included.
"""

import json
import shutil

import pytest
import torch

from conftest import launch, make_config

pytestmark = pytest.mark.spawn
F32 = 4
RESUMED = make_config("ps_sync", 2, seed=3)


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """ps_sync at 2 workers (3 processes): RESUMED killed at worker 1's step 15 (epoch 1), then
    one launch of RESUMED resumed from that run's checkpoints, RESUMED from scratch and seed 2
    (for test_ps_sync_equals_allreduce_sgd[2]).  Returns (killed run, its process, the three runs)."""
    tmp = tmp_path_factory.mktemp("ps3")
    (killed,), proc = launch([RESUMED], tmp / "killed", env={"DISTREPRO_FAULT": "1:15"}, check=False)
    if killed.ckpt.is_dir():
        shutil.copytree(killed.ckpt, tmp / "resume" / "ckpt0")  # where the relaunch's first run resumes from
    runs, _ = launch([RESUMED, RESUMED, make_config("ps_sync", 2, seed=2)], tmp / "resume")
    return killed, proc, runs


@pytest.mark.parametrize("workers", [2, 4])
def test_ps_sync_equals_allreduce_sgd(run_torchrun, three, workers):
    if workers == 2:
        ps = three[2][2]
    else:
        (ps,), _ = run_torchrun([make_config("ps_sync", workers, seed=2)])
    (ar,), _ = run_torchrun([make_config("allreduce_sgd", workers, seed=2)])
    assert json.loads((ps.out / "provenance.json").read_text())["roles"] == ["worker"] * workers + ["server"]
    for rank in range(workers):
        a, b = ps.final_state(rank), ar.final_state(rank)
        assert max(float((a[k] - b[k]).abs().max()) for k in b) < 1e-6
        la = [s["loss/train"] for s in ps.records(rank, "step")]
        lb = [s["loss/train"] for s in ar.records(rank, "step")]
        assert len(la) == len(lb) == 20 and max(abs(x - y) for x, y in zip(la, lb)) < 1e-6
    server = ps.final_state(workers)  # the server's copy equals the workers'
    assert all(torch.equal(server[k], ps.final_state(0)[k]) for k in server)
    d = sum(v.numel() for v in server.values())
    for s in ps.records(0, "step"):  # a worker: its gradient up, the parameters down
        assert (s["comm/bytes_sent"], s["comm/bytes_recv"]) == (F32 * d, F32 * d)
    srv = ps.records(workers, "epoch")  # the server's own records: W gradients in, W models out per step
    assert [e["epoch"] for e in srv] == [0, 1]
    assert all(e["comm/bytes_recv"] == e["comm/bytes_sent"] == 10 * workers * F32 * d for e in srv)


def test_ps_sync_resumes_on_every_rank(three):
    killed, proc, (resumed, fresh, _) = three
    assert proc.returncode != 0 and len(list(killed.ckpt.glob("rank*.pt"))) == 3  # the server's too
    assert json.loads((resumed.out / "runinfo.json").read_text())["resumed_from_epoch"] == 0
    for rank in range(3):
        a, b = resumed.final_state(rank), fresh.final_state(rank)
        assert all(torch.equal(a[k], b[k]) for k in b), rank
