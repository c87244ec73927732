"""Tier 2: what goes on the wire, per step and per rank, in real 4-rank torchrun (gloo) runs.

One launch runs every method over an emulated slow network (absolute: 1 ms per
message, 10 Mbit/s) and two runs on the relative preset ``resnet50_10gbe``.  The
expected numbers are derived here, from the tiny MLP's parameter count and each
method's message pattern, not from the code under test:

* bytes: each method's messages (``P`` fp32 parameters, ``+1`` for the PushSum weight,
  ``+2`` for AD-PSGD's request flag and sender); a collective counts its payload times
  the ring all-reduce's ``2(n-1)/n`` (each rank sends and receives that much);
* network: a message of ``m`` bytes takes ``latency + m / bandwidth``; the ring
  all-reduce takes ``2(n-1)`` latencies and its ``2(n-1)/n`` payload on the critical
  path.  ``time/net_emulated_s`` is that time (exact), ``time/net_delay_s`` the part
  actually slept (at most that: the real transfer already took the rest), and a step
  cannot end before its messages have had their emulated time (``time/step_s``
  bounds, which hold whatever the machine's speed).

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
LATENCY, BANDWIDTH = 1e-3, 0.01e9 / 8  # 1 ms per message, 10 Mbit/s in bytes/s
SLOW = {"kind": "absolute", "latency_s": LATENCY, "bandwidth_gbps": 0.01}
PLAIN_SGD = {"lr": 0.05, "momentum": 0.0, "nesterov": False, "weight_decay": 1e-4}  # d2 has no momentum
RING = 2 * (N - 1) / N * F32 * P  # ring all-reduce: bytes each rank sends (and receives) per step


def message(nbytes: float) -> float:
    """Emulated time of one point-to-point message on the slow network."""
    return LATENCY + nbytes / BANDWIDTH


class Pattern(NamedTuple):
    """A synchronous method's traffic per step, on every rank."""
    algorithm: dict
    bytes: float  # sent, and received
    emulated: float | None  # network seconds of the messages completed in the step
    wait: float | None  # the least a step waits for them: messages posted together travel together
    after_compute: bool = True  # posted after the forward/backward pass (dpsgd posts before it)


SYNC = {
    "allreduce_sgd": Pattern({"name": "allreduce_sgd"}, RING, 2 * (N - 1) * LATENCY + RING / BANDWIDTH,
                             2 * (N - 1) * LATENCY + RING / BANDWIDTH),
    "sgp": Pattern({"name": "sgp"}, F32 * (P + 1), message(F32 * (P + 1)), message(F32 * (P + 1))),
    "sgp_2peer": Pattern({"name": "sgp", "topology": {"name": "exponential", "peers": 2}}, 2 * F32 * (P + 1),
                         2 * message(F32 * (P + 1)), message(F32 * (P + 1))),
    "osgp": Pattern({"name": "osgp", "tau": 1}, F32 * (P + 1), None, None),  # paid a step later: own test
    "dpsgd": Pattern({"name": "dpsgd"}, 2 * F32 * P, 2 * message(F32 * P), message(F32 * P), after_compute=False),
    "d2": Pattern({"name": "d2"}, 2 * F32 * P, 2 * message(F32 * P), message(F32 * P)),
}
ACTIVE, PASSIVE = (1, 3), (0, 2)  # AD-PSGD at 4 ranks: odd ranks active, each pairs with both passives
REQUEST, REPLY = F32 * (P + 2), F32 * P  # [model, flag, sender] and the passive's model
RELATIVE = {"allreduce_sgd": RING, "sgp": F32 * (P + 1)}  # bytes on the critical path; the preset has no latency


def _config(algorithm, network):
    wl = {"epochs": EPOCHS, "max_steps_per_epoch": SPE}
    if algorithm["name"] == "d2":
        wl["optimizer"] = PLAIN_SGD
    return make_config(algorithm, N, workload=wl, network=network)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from conftest import launch

    cfgs = {m: _config(p.algorithm, SLOW) for m, p in SYNC.items()}
    cfgs["adpsgd"] = _config({"name": "adpsgd"}, SLOW)
    cfgs.update({f"relative_{m}": _config({"name": m}, "resnet50_10gbe") for m in RELATIVE})
    results, _ = launch(list(cfgs.values()), tmp_path_factory.mktemp("wire"))
    return dict(zip(cfgs, results))


def _steps(run, rank):
    steps = run.records(rank, "step")
    assert len(steps) == EPOCHS * SPE, (rank, len(steps))
    return steps


@pytest.mark.spawn
def test_parameter_count_is_the_mlps(runs):
    assert json.loads((runs["sgp"].out / "runinfo.json").read_text())["params"] == P


def _check_delays(steps, rank, emulated, wait, after_compute=True):
    for s in steps:
        assert s["time/net_emulated_s"] == pytest.approx(emulated, rel=1e-9), (rank, s["step"])
        assert 0 <= s["time/net_delay_s"] <= emulated * (1 + 1e-9), (rank, s["step"])
        waited = s["time/step_s"] - (s["time/compute_s"] if after_compute else 0.0)
        assert waited >= wait * (1 - 1e-9), (rank, s["step"], waited, wait)


@pytest.mark.spawn
@pytest.mark.parametrize("method", list(SYNC))
def test_synchronous_methods_send_and_receive_exact_bytes_on_every_rank(runs, method):
    per_step = SYNC[method].bytes
    for rank in range(N):
        for s in _steps(runs[method], rank):
            assert (s["comm/bytes_sent"], s["comm/bytes_recv"]) == (per_step, per_step), (rank, s["step"])
        epochs = runs[method].records(rank, "epoch")
        assert [e["comm/bytes_sent"] for e in epochs] == [SPE * per_step] * EPOCHS
        assert [e["comm/bytes_recv"] for e in epochs] == [SPE * per_step] * EPOCHS


@pytest.mark.spawn
@pytest.mark.parametrize("method", [m for m, p in SYNC.items() if p.emulated is not None])
def test_network_delay_follows_the_cost_model_of_the_bytes_sent(runs, method):
    p = SYNC[method]
    for rank in range(N):
        _check_delays(_steps(runs[method], rank), rank, p.emulated, p.wait, p.after_compute)


@pytest.mark.spawn
def test_overlap_sgp_pays_each_round_one_step_later(runs):
    """tau = 1: step t waits for round t - 1; the round of an epoch's last step is
    flushed at the epoch's end and counted in that epoch's record, so each epoch's first
    step has nothing to wait for and every epoch pays exactly SPE rounds."""
    m = message(F32 * (P + 1))
    for rank in range(N):
        got = [s["time/net_emulated_s"] for s in _steps(runs["osgp"], rank)]
        assert got == pytest.approx(([0.0] + [m] * (SPE - 1)) * EPOCHS, rel=1e-9)
        epochs = [e["time/net_emulated_s"] for e in runs["osgp"].records(rank, "epoch")]
        assert epochs == pytest.approx([SPE * m] * EPOCHS, rel=1e-9)


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
            assert s["time/net_emulated_s"] == pytest.approx(message(REPLY), rel=1e-9)
        # plus one "done" per passive neighbour at the end
        assert total[a] == {"comm/bytes_sent": (len(steps[a]) + len(PASSIVE)) * REQUEST,
                            "comm/bytes_recv": len(steps[a]) * REPLY}
    served = {}
    for p in PASSIVE:
        served[p], rest = divmod(total[p]["comm/bytes_sent"], REPLY)
        assert rest == 0, p
        assert total[p]["comm/bytes_recv"] == (served[p] + len(ACTIVE)) * REQUEST, p
    assert sum(served.values()) == sum(len(steps[a]) for a in ACTIVE)


@pytest.mark.spawn
@pytest.mark.parametrize("method", list(RELATIVE))
def test_relative_preset_is_calibrated_and_delays_by_the_papers_ratio(runs, method):
    """resnet50_10gbe: the bandwidth is set so that the whole model (4P bytes) takes 0.29
    of the slowest rank's measured compute time (at least rank 0's, in runinfo.json)."""
    run = runs[f"relative_{method}"]
    info = json.loads((run.out / "runinfo.json").read_text())
    assert info["network"]["kind"] == "relative" and info["network"]["comm_to_compute"] == 0.29
    bandwidth = info["network"]["bandwidth_gbps_effective"] * 1e9 / 8
    assert bandwidth > 0
    compute = F32 * P / (0.29 * bandwidth)  # the compute time the calibration used
    assert info["compute_ref_s"] * (1 - 1e-9) <= compute < 1.0
    emulated = RELATIVE[method] / bandwidth
    assert emulated > 0
    for rank in range(N):
        _check_delays(_steps(run, rank), rank, emulated, emulated)


def test_an_uncalibrated_relative_network_refuses_to_emulate():
    """Skipping the calibration must not emulate an infinitely fast network."""
    from impls.costmodel import collective_cost
    from impls.netmodel import NetworkModel, network_config

    net = NetworkModel(network_config("resnet50_10gbe"))
    with pytest.raises(RuntimeError, match="not calibrated"):
        net.delay(collective_cost("all_reduce", F32 * P, N))
    assert net.delay(collective_cost("all_reduce", F32 * P, 1)) == 0.0  # one rank sends nothing
