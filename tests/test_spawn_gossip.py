"""Tier 2: the synchronous gossip methods (sgp, osgp, dpsgd, d2) on real gloo ranks.

* PushSum conserves mass, and with lr = 0 drives every rank to the exact initial average.
* With a complete graph, sgp / osgp(tau=0) / dpsgd(step_then_mix) reproduce allreduce_sgd.
* (On sparse graphs each method is checked against its independent float64 reference
  in ``test_spawn_reference.py``.)
* On the label-partitioned split D^2 ends with a lower loss than D-PSGD (Tang et al. 2018).
"""

from __future__ import annotations

import pytest
import torch

from conftest import TINY_WORKLOAD, launch, make_config
from reference_math import Problem

pytestmark = pytest.mark.spawn

ZERO_LR = {"optimizer": {"lr": 0.0, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4}}


def _ckpt(run, rank):
    return torch.load(run.ckpt / f"rank{rank}.pt", weights_only=False)


def _flat(state):
    return torch.cat([v.reshape(-1) for v in state.values()]).double()


# test_pushsum_conserves_mass_and_averages_exactly_with_zero_lr
N, SPREAD, STEPS = 4, 0.5, 4
_WL0 = {**ZERO_LR, "epochs": 1, "max_steps_per_epoch": STEPS}
PUSHSUM = [make_config({"name": "sgp", "init_spread": SPREAD, "log_mass": True}, N, workload=_WL0),
           make_config({"name": "osgp", "tau": 1, "init_spread": SPREAD}, N, workload=_WL0),
           make_config({"name": "dpsgd", "init_spread": SPREAD}, N, workload=_WL0),
           make_config({"name": "d2", "init_spread": SPREAD}, N,
                       workload={**_WL0, "optimizer": {"lr": 0.0, "momentum": 0.0}})]
# test_complete_graph_reproduces_allreduce_sgd
_WL = {"epochs": 2, "max_steps_per_epoch": 5}
COMPLETE = [make_config("allreduce_sgd", N, workload=_WL),
            make_config({"name": "sgp", "topology": "complete"}, N, workload=_WL),
            make_config({"name": "osgp", "tau": 0, "topology": "complete"}, N, workload=_WL),
            make_config({"name": "dpsgd", "topology": "complete", "order": "step_then_mix"}, N, workload=_WL)]


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    """The runs of the two tests below at n = 4, in one launch: {"pushsum": [...], "complete": [...]}."""
    runs, _ = launch(PUSHSUM + COMPLETE, tmp_path_factory.mktemp("gossip4"))
    return {"pushsum": runs[:len(PUSHSUM)], "complete": runs[len(PUSHSUM):]}


def test_pushsum_conserves_mass_and_averages_exactly_with_zero_lr(four):
    """n = 4, 1-peer exponential graph, lr = 0, replicas started apart (init_spread).

    Per step: sum_i w_i = n and sum_i sum(x_i) = sum_i sum(x_i(0)) (float tolerance 1e-6
    relative).  After log2(4) = 2 steps every rank holds the initial average (1e-6):
    the product of two 1-peer matrices is exactly 11^T/4.  osgp (tau = 1) and dpsgd
    conserve the sum too and shrink the disagreement.
    """
    n, spread, steps = N, SPREAD, STEPS
    runs = four["pushsum"]
    x0 = Problem(TINY_WORKLOAD, seed=1).initial(n, seed=1, spread=spread)
    avg = x0.mean(0)
    assert (x0 - avg).norm() > 1.0  # the replicas really started apart

    recs = [runs[0].records(r, "step") for r in range(n)]
    for t in range(steps):
        assert sum(recs[r][t]["gossip/weight"] for r in range(n)) == pytest.approx(n, rel=1e-6)
        assert sum(recs[r][t]["gossip/mass"] for r in range(n)) == pytest.approx(x0.sum().item(), rel=1e-6)
    for r in range(n):
        z = _flat(runs[0].final_state(r))
        assert ((z - avg).norm() / avg.norm()).item() <= 1e-6, f"sgp rank {r} is not at the initial average"
        assert runs[0].records(r, "epoch")[0]["consensus/distance"] <= 1e-6 * avg.norm().item()

    for run in runs[1:]:  # osgp (after its end-of-epoch flush), dpsgd, d2: the mean is conserved
        xs = torch.stack([_flat(run.final_state(r)) for r in range(n)])
        assert ((xs.mean(0) - avg).norm() / avg.norm()).item() <= 1e-6, run.out
        assert (xs - xs.mean(0)).norm() < 0.5 * (x0 - avg).norm()
    w = sum(float(_ckpt(runs[1], r)["algo"]["w"]) for r in range(n))
    assert w == pytest.approx(n, rel=1e-6)  # osgp: no mass left in flight after the flush


def test_complete_graph_reproduces_allreduce_sgd(four):
    """n = 4, complete graph, Nesterov momentum and weight decay, 2 x 5 steps.

    Why it is exact: with W = 11^T/n the replicas are equal after every mix (and at the
    start), so every rank's gradient is taken at the same point as all-reduce SGD's;
    each rank's local update is linear in its gradient and momentum buffer, so the
    average of the locally updated replicas (= every replica after the mix) follows
    the all-reduce recursion, with the mean of the local buffers playing the role of
    the all-reduce buffer.  Compared: every rank's final parameters (relative 1e-6) and
    every rank's per-step loss (relative 1e-5).  dpsgd uses order step_then_mix (its
    default mix_then_step takes the gradient before mixing, which is not all-reduce).
    """
    n = N
    runs = four["complete"]
    ref = runs[0].final_state(0)
    for run in runs[1:]:
        for r in range(n):
            got = run.final_state(r)
            for k in ref:
                rel = (got[k] - ref[k]).norm() / ref[k].norm().clamp_min(1e-12)
                assert rel <= 1e-6, f"{run.out} rank {r} {k}: relative error {rel:.2e}"
            a = [x["loss/train"] for x in runs[0].records(r, "step")]
            b = [x["loss/train"] for x in run.records(r, "step")]
            assert b == pytest.approx(a, rel=1e-5)
            assert run.records(r, "epoch")[-1]["consensus/distance"] <= 1e-6


def test_d2_beats_dpsgd_on_label_partitioned_data(run_torchrun):
    """Tang et al. 2018's claim on a deterministic small case: 5 ranks on a ring, each
    with 2 of the 10 digit classes (the paper's CIFAR-10 split), plain SGD lr 0.1, 3
    epochs.  Compared: the validation loss (all classes, i.e. the global objective, mean
    over ranks) after the last epoch; D^2 is lower by a margin of 0.1 and its replicas
    are closer (consensus distance)."""
    n = 5
    wl = {"dataset": {"name": "digits", "partition": {"kind": "labels", "classes_per_worker": 2}},
          "optimizer": {"lr": 0.1, "momentum": 0.0, "nesterov": False, "weight_decay": 1e-4},
          "epochs": 3, "max_steps_per_epoch": None}
    runs, _ = run_torchrun([make_config("dpsgd", n, workload=wl), make_config("d2", n, workload=wl)])

    def last(run, key):
        return sum(run.records(r, "epoch")[-1][key] for r in range(n)) / n

    assert last(runs[1], "loss/val") < last(runs[0], "loss/val") - 0.1
    assert last(runs[1], "consensus/distance") < 0.5 * last(runs[0], "consensus/distance")
