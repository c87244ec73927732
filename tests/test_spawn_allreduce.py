"""Tier 2: real multi-process gloo runs of allreduce_sgd against the serial reference."""

import pytest

from conftest import launch, make_config

pytestmark = pytest.mark.spawn

B = 8
NODES = [2, 4]


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """{nodes: the serial reference on batch nodes * B}: one single-process launch for both."""
    runs, _ = launch([make_config("serial_sgd", 1, workload={"batch_size": n * B}) for n in NODES],
                     tmp_path_factory.mktemp("serial"))
    return dict(zip(NODES, runs))


@pytest.mark.parametrize("nodes", NODES)
def test_allreduce_matches_serial_on_the_global_batch(run_torchrun, serial, nodes):
    """N ranks on batch b == one process on batch N*b over the same samples (1e-6 relative)."""
    dist_cfg = make_config("allreduce_sgd", nodes, workload={"batch_size": B})
    (dist_run,), _ = run_torchrun([dist_cfg])
    serial_run = serial[nodes]
    ref = serial_run.final_state(0)
    for rank in range(nodes):
        got = dist_run.final_state(rank)
        for k in ref:
            rel = (got[k] - ref[k]).norm() / ref[k].norm().clamp_min(1e-12)
            assert rel <= 1e-6, f"rank {rank} {k}: relative error {rel:.2e}"
    # the per-step losses agree too (mean over ranks of equal-size batches = global mean)
    s = [r["loss/train"] for r in serial_run.records(0, "step")]
    d = [sum(dist_run.records(r, "step")[i]["loss/train"] for r in range(nodes)) / nodes for i in range(len(s))]
    assert s == pytest.approx(d, rel=1e-5)
