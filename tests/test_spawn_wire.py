"""Tier 2: what goes on the wire, per step and per rank, in real 4-rank torchrun (gloo) runs.

One launch runs every method.  The expected numbers are derived here, from the tiny
MLP's parameter count and each method's message pattern, not from the code under test:

* bytes: each method's messages (``P`` fp32 parameters, ``+1`` for the PushSum weight,
  ``+2`` for AD-PSGD's request flag and sender); a collective counts its payload times
  the cost model of the run's ``allreduce_algorithm`` (ring: ``2(n-1)/n``, each rank sends
  and receives that much; recursive doubling: ``log2(n)``);
* messages: the sends (or collectives) each step posts;
* time: real ranks emulate no network, so a step's records hold only what was measured
  (``time/comm_s``, the waiting, is part of the step) and no emulated time.

Every loop first asserts how many records it checks.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import pytest

from conftest import TINY_WORKLOAD, make_config

N = 4
HIDDEN = TINY_WORKLOAD["model"]["hidden"][0]
P = 64 * HIDDEN + HIDDEN + HIDDEN * 10 + 10  # digits (8x8 pixels, 10 classes) -> MLP: weights + biases
F32 = 4
EPOCHS, SPE = 2, 5
PLAIN_SGD = {"lr": 0.05, "momentum": 0.0, "nesterov": False, "weight_decay": 1e-4}  # d2 has no momentum
RING = 2 * (N - 1) / N * F32 * P  # ring all-reduce: bytes each rank sends (and receives) per step
DOUBLING = 2 * F32 * P  # recursive doubling at 4 ranks: log2(4) exchanges of the whole payload


class Pattern(NamedTuple):
    """A synchronous method's traffic per step, on every rank."""
    algorithm: dict
    bytes: float  # sent, and received
    messages: int  # sends (a collective: one) per step
    run: dict = {}  # run config keys besides the algorithm


SYNC = {
    "allreduce_sgd": Pattern({"name": "allreduce_sgd"}, RING, 1),  # the tiny MLP fits one bucket
    "allreduce_doubling": Pattern({"name": "allreduce_sgd"}, DOUBLING, 1,
                                  {"allreduce_algorithm": "recursive_doubling"}),
    "sgp": Pattern({"name": "sgp"}, F32 * (P + 1), 1),
    "sgp_2peer": Pattern({"name": "sgp", "topology": {"name": "exponential", "peers": 2}}, 2 * F32 * (P + 1), 2),
    "osgp": Pattern({"name": "osgp", "tau": 1}, F32 * (P + 1), 1),
    "dpsgd": Pattern({"name": "dpsgd"}, 2 * F32 * P, 2),
    "d2": Pattern({"name": "d2"}, 2 * F32 * P, 2),
}
ACTIVE, PASSIVE = (1, 3), (0, 2)  # AD-PSGD at 4 ranks: odd ranks active, each pairs with both passives
REQUEST, REPLY = F32 * (P + 2), F32 * P  # [model, flag, sender] and the passive's model


def _config(algorithm, **run):
    wl = {"epochs": EPOCHS, "max_steps_per_epoch": SPE}
    if algorithm["name"] == "d2":
        wl["optimizer"] = PLAIN_SGD
    return make_config(algorithm, N, workload=wl, **run)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from conftest import launch

    cfgs = {m: _config(p.algorithm, **p.run) for m, p in SYNC.items()}
    cfgs["adpsgd"] = _config({"name": "adpsgd"})
    results, _ = launch(list(cfgs.values()), tmp_path_factory.mktemp("wire"))
    return dict(zip(cfgs, results))


def _steps(run, rank):
    steps = run.records(rank, "step")
    assert len(steps) == EPOCHS * SPE, (rank, len(steps))
    return steps


@pytest.mark.spawn
def test_parameter_count_is_the_mlps_and_runinfo_names_no_network(runs):
    info = json.loads((runs["sgp"].out / "runinfo.json").read_text())
    assert info["params"] == P
    assert "network" not in info and info["compute_ref_s"] > 0


@pytest.mark.spawn
@pytest.mark.parametrize("method", list(SYNC))
def test_synchronous_methods_send_and_receive_exact_bytes_on_every_rank(runs, method):
    per_step, messages = SYNC[method].bytes, SYNC[method].messages
    for rank in range(N):
        for s in _steps(runs[method], rank):
            assert (s["comm/bytes_sent"], s["comm/bytes_recv"]) == (per_step, per_step), (rank, s["step"])
            assert s["comm/messages"] == messages, (rank, s["step"])
        epochs = runs[method].records(rank, "epoch")
        assert [e["comm/bytes_sent"] for e in epochs] == [SPE * per_step] * EPOCHS
        assert [e["comm/bytes_recv"] for e in epochs] == [SPE * per_step] * EPOCHS


@pytest.mark.spawn
@pytest.mark.parametrize("method", [*SYNC, "adpsgd"])
def test_records_hold_measured_times_only(runs, method):
    """No emulated network: no ``time/net_*`` key, and a synchronous method's time waited
    for communication is part of the step's measured time (AD-PSGD's gossip thread waits
    beside the steps)."""
    for rank in range(N):
        steps = runs[method].records(rank, "step")
        assert steps, rank
        for s in steps:
            assert not [k for k in s if k.startswith("time/net")], (rank, s["step"])
            assert 0 <= s["time/comm_s"] <= (s["time/step_s"] if method in SYNC else float("inf")), (rank, s["step"])
        assert not [k for e in runs[method].records(rank, "epoch") for k in e if k.startswith("time/net")]


@pytest.mark.spawn
def test_adpsgd_exchange_bytes_on_every_rank(runs):
    """An active worker's step waits for its own exchange (request out, reply in), so
    each of its step records holds exactly one; passive workers answer whenever asked,
    so their totals (epoch records, the last one including the final "done" messages)
    count the exchanges: replies sent = requests received = the actives' steps."""
    run = runs["adpsgd"]
    steps = {r: run.records(r, "step") for r in range(N)}
    assert sum(len(s) for s in steps.values()) == EPOCHS * SPE * N
    total = {r: {k: sum(e[k] for e in run.records(r, "epoch")) for k in ("comm/bytes_sent", "comm/bytes_recv")}
             for r in range(N)}
    for a in ACTIVE:
        assert steps[a], a
        for s in steps[a]:
            assert (s["comm/bytes_sent"], s["comm/bytes_recv"]) == (REQUEST, REPLY), (a, s["step"])
        # plus one "done" per passive neighbour at the end
        assert total[a] == {"comm/bytes_sent": (len(steps[a]) + len(PASSIVE)) * REQUEST,
                            "comm/bytes_recv": len(steps[a]) * REPLY}
    served = {}
    for p in PASSIVE:
        served[p], rest = divmod(total[p]["comm/bytes_sent"], REPLY)
        assert rest == 0, p
        assert total[p]["comm/bytes_recv"] == (served[p] + len(ACTIVE)) * REQUEST, p
    assert sum(served.values()) == sum(len(steps[a]) for a in ACTIVE)
