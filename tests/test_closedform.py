"""Closed-form step times, the sensitivity flip rule and the claim rows' classes (issue 24).

The closed-form constants are written out as numbers (worked by hand in each comment), not
derived from the code under test.  Milliseconds (one torch import for the profile config)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from distrepro_wf.claims import evaluate as wfclaims
from distrepro_wf.claims import closedform as cf
from distrepro_wf.claims import sensitivity as sens

# C = 0.2 s, B = 100 MB, bw = 1 GB/s, alpha = 50 us, n = 8
P = cf.Point(compute_s=0.2, model_bytes=100e6, bandwidth=1e9, latency_s=50e-6, nodes=8)


def test_ring_allreduce_alpha_beta():
    # 2 (n-1) (alpha + B/(n bw)) = 14 (50e-6 + 0.0125) = 0.1757
    assert cf.ring_allreduce_s(8, 100e6, 50e-6, 1e9) == pytest.approx(0.1757, abs=1e-12)
    assert cf.ring_allreduce_s(1, 100e6, 50e-6, 1e9) == 0.0


@pytest.mark.parametrize("alg,expected", [
    ("allreduce_sgd", 0.3757),  # 0.2 + 0.1757
    ("sgp", 0.30005),  # 0.2 + (50e-6 + 0.1): one message to one peer, not overlapped
    ("osgp", 0.2),  # max(0.2, 0.10005): the exchange hides behind compute
    ("dpsgd", 0.20005),  # max(0.2, 50e-6 + 2B/bw = 0.20005): two neighbours through one NIC
    # 8 / (4 passive / 0.2 + 4 active / (E + (2/3) E/2)), E = 2 x 0.10005: an active worker waits for a request
    # and a reply, and with 3 partners finds its passive busy with one of the 2 others' exchanges (a third of
    # the time each, communication-bound) for half of one
    ("adpsgd", 8 / (4 / 0.2 + 4 / (0.2001 + 2 / 3 * 0.2001 / 2))),
    ("ps_sync", 1.8001),  # 0.2 + 2 (50e-6 + 8 x 0.1): the server's NIC in and out
    ("signum_mv", 0.2501),  # 0.2 + 2 (50e-6 + 8 x 0.1/32)
    ("signum_mv_allgather", 0.222225),  # 0.2 + 7 (50e-6 + 0.1/32)
])
def test_step_time_per_method(alg, expected):
    assert cf.step_s(alg, P) == pytest.approx(expected, abs=1e-12)


# P with the op costs a simulated rank pays (impls.sim.opcost): staging at 10 GB/s (sigma = 0.01 s a
# message, one way), arithmetic at 100 GB/s (1 ms a pass over B), copies at 50 GB/s (2 ms a pass), an
# optimizer step of 5 passes (SGD with momentum) and a coupled weight decay (an L2 term of 3 passes)
Q = P.with_(stage_bandwidth=10e9, mem_bandwidth=100e9, copy_bandwidth=50e9, optim_passes=5, weight_decay=True)


@pytest.mark.parametrize("alg,opts,expected", [
    # 0.2 + 2 sigma (each bucket staged out and back before its ring) + 0.1757 + the optimizer's 5 ms
    ("allreduce_sgd", {}, 0.4007),
    # 0.30005 + arith (L2 3, optimizer 5, share 2, sum 3, de-bias 2: 15 ms) + copies (vector 2, sum 1:
    # 6 ms) + staging (one message in, one out: 20 ms) = 0.30005 + 0.041
    ("sgp", {}, 0.34105),
    ("osgp", {}, 0.241),  # max(0.2 + 0.041, 0.10005): the rank's own work beside the wire
    # ring, 2 neighbours: max(0.2, 0.20005) + arith (share 2, sums 6, L2 3, optimizer 5: 16 ms) + copies
    # (flatten 1, sum 1: 4 ms) + staging (2 in, 2 out: 40 ms)
    ("dpsgd", {}, 0.26005),
    ("dpsgd", {"order": "step_then_mix", "neighbours": 2}, 0.46005),  # 0.2 + 0.20005 + 0.06: nothing hidden
    # passive t = 0.2 + read 0.002 + own (copies 3: 6 ms, L2 and optimizer: 8 ms) = 0.216; active: the exchange
    # E = 2 x 0.10005 + 2 sigma + averages (2 copies: 4 ms, 11 passes: 11 ms) = 0.2351 against 0.214, busy
    # rho = E / (0.002 + E), and the collisions' wait (2/3) rho E/2: t = 0.002 + E + (2/3) rho E/2
    ("adpsgd", {}, 8 / (4 / 0.216 + 4 / (0.2371 + 2 / 3 * 0.2351 / 0.2371 * 0.2351 / 2))),
    # the server posts the next push's receive once it has staged its reply: 8 (max(sigma, D) + sigma) = 0.88,
    # against the workers' 0.2 + 2 (sigma + D + alpha) = 0.4201
    ("ps_async", {}, 0.88),
])
def test_closed_forms_count_the_op_costs_their_ranks_pay(alg, opts, expected):
    assert cf.step_s(alg, Q, **opts) == pytest.approx(expected, abs=1e-9)
    assert cf.step_s(alg, Q.with_(stage_bandwidth=math.inf, mem_bandwidth=math.inf, copy_bandwidth=math.inf)) \
        == pytest.approx(cf.step_s(alg, P), abs=1e-4)  # free op costs: P's step (ps_async: + n o = 0)


def test_step_time_overlap_straggler_jitter():
    # overlap 1 hides 2/3 x 0.2 = 0.13333 of the ring: 0.2 + 0.1757 - 0.133333 = 0.2423667
    assert cf.step_s("allreduce_sgd", P.with_(overlap=1.0)) == pytest.approx(0.24236667, abs=1e-8)
    # a 4x straggler: a synchronous step waits for it (0.8 + 0.1757); AD-PSGD loses its share (the
    # straggler active): 8 / (4 / 0.2 + 1 / 0.8 + 3 / (0.2001 + (2/3) 0.2001 / 2)) = 0.2461964
    assert cf.step_s("allreduce_sgd", P.with_(slow_factor=4.0)) == pytest.approx(0.9757, abs=1e-12)
    assert cf.step_s("adpsgd", P.with_(slow_factor=4.0)) == pytest.approx(8 / (20 + 1.25 + 3 / 0.2668), abs=1e-7)
    # jitter 3 %, 8 draws: sigma = 0.029993, Blom z_8 = 1.4236 -> factor 1.04349
    assert cf.expected_max_factor(8, 0.03) == pytest.approx(1.04349, abs=1e-5)
    assert cf.step_s("unknown_method", P) is None


def test_allreduce_buckets_of_a_known_layout_leave_as_backward_completes_them():
    # a model of two parameters, 40 MB (backward reaches it first) and 60 MB: DDP's buckets [40e6, 60e6]
    # (each larger than a bucket). Overlap 1: bucket 0 ready at 0.2 (1 - 2/3 x 0.6) = 0.12, its ring
    # 14 (50e-6 + 40e6 / 8e9) = 0.0707 ends at 0.1907; bucket 1 ready at 0.2, its ring 14 (50e-6 +
    # 0.0075) = 0.1057: 0.3057 (the even spread's 0.2424 hides 2/3 C of the whole ring)
    p = P.with_(layout=(40_000_000, 60_000_000), overlap=1.0)
    assert cf.step_s("allreduce_sgd", p) == pytest.approx(0.3057, abs=1e-12)
    # a 4x straggler: its backward pass completes bucket 0 at 0.48 (ring over at 0.5507), bucket 1 at 0.8:
    # 0.9057 (the even spread's 0.8 + 0.1757 - 0.1333 = 0.8424 hid only the healthy backward pass)
    assert cf.step_s("allreduce_sgd", p.with_(slow_factor=4.0)) == pytest.approx(0.9057, abs=1e-12)
    # overlap 0: both rings after the compute, 0.2 + 0.0707 + 0.1057; one 100 MB bucket: 0.2 + 0.1757
    assert cf.step_s("allreduce_sgd", p.with_(overlap=0.0)) == pytest.approx(0.3764, abs=1e-12)
    assert cf.step_s("allreduce_sgd", p, bucket_mb=100.0, first_bucket_mb=100.0) == pytest.approx(0.3757, abs=1e-12)


def test_method_algorithm_from_config():
    assert cf.method_algorithm({}, "allreduce_sgd") == ("allreduce_sgd", 1)
    spec = {"algorithm": {"name": "sgp", "topology": {"name": "exponential", "peers": 2}}}
    assert cf.method_algorithm(spec, "sgp_2peer") == ("sgp", 2)
    assert cf.method_algorithm({"algorithm": {"name": "signum_mv", "aggregation": "allgather"}}, "signum")[0] \
        == "signum_mv_allgather"


# AR-SGD after the backward pass (overlap_backward off): its nominal overlap, the method's own, is 0
# (the sensitivity's overlap range still sweeps 0-1)
SIM = {"backend": "simgrid", "platform": {"name": "star", "nic_gbps": 8.4, "latency_us": 50.0},
       "profile": {"name": "fixed", "step_ms": 200.0, "model_mb": 100.0},
       "methods": {"allreduce_sgd": {"algorithm": {"name": "allreduce_sgd", "overlap_backward": False}}, "sgp_1peer": {"algorithm": {"name": "sgp", "topology": {"peers": 1}}},
                   "osgp": {"algorithm": {"name": "osgp", "topology": {"peers": 1}}}}}
CONFIG = {"experiments": {"simx": SIM, "realx": {"workload": "w", "methods": {"allreduce_sgd": {}, "sgp_1peer": {}}}},
          "launcher": {"kind": "local"}}
EXPECT_LT1 = {"op": "<", "value": 1.0, "tolerance": 0.0}


def _claim(a, b, experiment="simx", metric="time_per_epoch_s", sources=()):
    return {"id": "x", "experiment": experiment, "metric": metric, "compare": "ratio", "expect": EXPECT_LT1,
            "a": {"method": a}, "b": {"method": b}, "sources": list(sources)}


def _row(status, m, lo, hi):
    return {"status": status, "nodes": 8, "straggler": "none", "measured": m, "ci_low": lo, "ci_high": hi,
            "reason": "", "published": 0.7, "gap": math.nan, "runs_on": "", "speed_result": "",
            "closed_form": math.nan, "sensitivity": "", "published_fitted": ""}


def test_flip_inside_the_ranges_makes_the_verdict_inconclusive():
    # SGP/AR on the star (bw = 0.97 * 8.4e9 / 8 / 1.05 = 0.97e9 B/s), 8 nodes: ring 0.181113 s, SGP's
    # message 0.103143 s -> closed form 0.303143 / 0.381113 = 0.795415.  AR hiding its ring behind the
    # backward pass (overlap -> 1) brings AR below SGP: the verdict "a/b < 1" flips inside the range.
    row = wfclaims.label_row(_claim("sgp_1peer", "allreduce_sgd"), CONFIG, _row("reproduced", 0.80, 0.79, 0.81))
    assert row["closed_form"] == pytest.approx(0.795415, abs=1e-5)
    assert row["status"] == "inconclusive"
    assert "AR/backward overlap passes" in row["sensitivity"] and "at most inconclusive" in row["reason"]
    # where: 0.81 x r(o) / r0 = 1 -> r(o) = 0.981994 -> AR(o) = 0.303143 / 0.981994 = 0.308702
    # = 0.381113 - 0.133333 o -> o = 0.5431
    flip = float(row["sensitivity"].split("AR/backward overlap passes ")[1].split(" ")[0])
    assert flip == pytest.approx(0.543, abs=1e-3)


def test_dpsgd_in_sgp_order_overlaps_nothing():
    # D-PSGD in SGP's order (step, then exchange with both ring neighbours and wait): the star's
    # 0.2 s of compute, then 2B through the NIC, 50e-6 + 2e8 / 0.97e9 = 0.206236 s: 0.406236 s a
    # step; SGP's 0.303143 / 0.406236 = 0.746226 (the simulation's 0.66 on sgp_sim has the same
    # form).  Lian et al.'s order hides the exchange behind compute: max(0.2, 0.206236), SGP/D-PSGD
    # 1.469891.  On bipartite_exponential one neighbour a step: 0.2 + 0.103143.
    methods = {**SIM["methods"], "dpsgd": {}, "dpsgd_stm": {"algorithm": {"name": "dpsgd", "order": "step_then_mix"}},
               "dpsgd_bip": {"algorithm": {"name": "dpsgd", "topology": "bipartite_exponential",
                                           "order": "step_then_mix"}},
               "dpsgd_torus": {"algorithm": {"name": "dpsgd", "topology": "torus"}}}
    config = {**CONFIG, "experiments": {"simx": {**SIM, "methods": methods}}}
    row = lambda b: wfclaims.label_row(_claim("sgp_1peer", b), config, _row("reproduced", .7, .69, .71))  # noqa: E731
    assert row("dpsgd_stm")["closed_form"] == pytest.approx(0.303143 / 0.406236, abs=1e-5)
    assert row("dpsgd")["closed_form"] == pytest.approx(0.303143 / 0.206236, abs=1e-5)
    assert row("dpsgd_bip")["closed_form"] == pytest.approx(0.303143 / 0.303143, abs=1e-5)
    assert math.isnan(row("dpsgd_torus")["closed_form"])  # a topology without a closed form: none, not a wrong one


def test_a_verdict_that_holds_stays():
    # OSGP / SGP = max(C, m) / (C + m) < 1 for every value of every range
    row = wfclaims.label_row(_claim("osgp", "sgp_1peer"), CONFIG, _row("reproduced", 0.66, 0.65, 0.67))
    assert row["status"] == "reproduced" and row["sensitivity"] == sens.HOLDS
    res = sens.analyse(_row("reproduced", 0.66, 0.65, 0.67), _claim("osgp", "sgp_1peer"), CONFIG,
                       lambda lo, hi: wfclaims.verdict(lo, hi, EXPECT_LT1))
    assert {t["parameter"] for t in res.tornado} == {r["name"] for r in sens.RANGES}
    assert all(r["reason"] for r in sens.RANGES)


def test_row_classes_real_and_simulated():
    real = wfclaims.label_row(_claim("sgp_1peer", "allreduce_sgd", "realx"), CONFIG, _row("reproduced", .8, .79, .81))
    assert (real["runs_on"], real["speed_result"]) == ("real", "measured (real ranks: gloo, 1 host)")
    assert real["sensitivity"] == "" and math.isnan(real["closed_form"]) and real["status"] == "reproduced"
    sim = wfclaims.label_row(_claim("osgp", "sgp_1peer"), CONFIG, _row("reproduced", .66, .65, .67))
    assert (sim["runs_on"], sim["speed_result"]) == ("simulated", "predicted (simulated: platform star, profile fixed)")
    acc = wfclaims.label_row(_claim("osgp", "sgp_1peer", metric="final_acc"), CONFIG, _row("reproduced", 0, -1, 1))
    assert (acc["runs_on"], acc["speed_result"], acc["sensitivity"]) == ("simulated", "", "")


def test_fitted_published_row_is_not_shown_as_published():
    c = _claim("osgp", "sgp_1peer", sources=["slowmo_t2a_sgp_tpi", "slowmo_t2a_ar_tpi"])
    kept = wfclaims.label_row(c, CONFIG, _row("reproduced", .66, .65, .67))
    assert kept["published"] == 0.7 and kept["published_fitted"] == ""  # efficiency not set: nothing fitted
    fitted = {**CONFIG, "experiments": {"simx": {**SIM, "platform": {**SIM["platform"], "allreduce_efficiency": 0.4}}}}
    row = wfclaims.label_row(c, fitted, _row("reproduced", .66, .65, .67))
    assert row["published"] is None and "slowmo_t2a_ar_tpi" in row["published_fitted"]
    # SlowMo 2a's SGP row fits the every-message efficiency, ethernet_10g's own msg_efficiency (0.456): the
    # preset as it is hides it, as does any value but line rate; at line rate (1) it is shown
    for plat in ("ethernet_10g", {"name": "ethernet_10g", "msg_efficiency": 0.3}):
        eth = {**CONFIG, "experiments": {"simx": {**SIM, "platform": plat}}}
        row = wfclaims.label_row(c, eth, _row("reproduced", .66, .65, .67))
        assert row["published"] is None
        assert row["published_fitted"] == "slowmo_t2a_sgp_tpi (platform.msg_efficiency fitted on it)"
    eth = {**CONFIG, "experiments": {"simx": {**SIM, "platform": {"name": "ethernet_10g", "msg_efficiency": 1.0}}}}
    assert wfclaims.label_row(c, eth, _row("reproduced", .66, .65, .67))["published"] == 0.7


# the parameter-server family: C = 0.1 s, B = 100 MB, bw = 10 GB/s (D = 0.01 s on the wire), staging
# at 10 GB/s (sigma = 0.01 s), apply 1 ms, no latency or per-message overhead, 4 workers.  A worker's
# cycle t(f) = 0.1 f + sigma + D + a + sigma + D = 0.1 f + 0.041; the server's push s = 2 sigma + a = 0.021
PS = cf.Point(compute_s=0.1, model_bytes=100e6, bandwidth=10e9, latency_s=0.0, nodes=4, stage_bandwidth=10e9,
              apply_s=0.001)


@pytest.mark.parametrize("alg,opts,factor,expected", [
    ("ps_async", {}, 1.0, 0.141),  # max(4 x 0.021, t(1) = 0.141): the workers set the pace
    ("ps_async", {}, 4.0, 0.16989344),  # 4 / (3/0.141 + 1/0.441): the slow worker removes its share only
    # two servers: halves staged 0.005 each; push 0.005 + max(D, 0.005 + D/2) = 0.015, reply
    # a/2 + 0.005 + max(D/2, D - 0.005) = 0.0105: t = 0.1255 (the halves pipeline staging and wire)
    ("ps_async", {"servers": 2}, 1.0, 0.1255),
    ("ps_async", {"inflight": 2}, 1.0, 0.12),  # max(C + 2 sigma, t / 2): the wire hides behind the next gradient
    ("ps_sync", {}, 1.0, 0.171),  # C + a + 2 sigma + max(4D, 3 sigma + D) + D = 0.1 + 0.001 + 0.02 + 0.04 + 0.01
    ("ps_sync", {}, 4.0, 0.471),  # the slow worker's compute, 0.4, instead
    ("ps_cyclic", {}, 1.0, 0.141),  # max(4 s = 0.084, t(1))
    ("ps_cyclic", {}, 4.0, 0.441),  # the fixed order waits for the slow worker's cycle t(4)
    ("ps_ssp", {}, 1.0, 0.141),  # no straggler: the bound never binds, ps_async
    ("ps_ssp", {"staleness": 0}, 1.0, 0.171),  # s = 0 binds every round: 0.1 + 0.021 + 0.05, ps_sync's round
    ("ps_ssp", {}, 4.0, 0.471),  # 0.4 + sigma + D + a + max(4 sigma + D, sigma + 4 D) = 0.4 + 0.021 + 0.05
    ("ps_ssp", {"rounds": 10}, 4.0, 0.365025),  # 0.471 (1 - 3 x 3 / (4 x 10)): the head start of 9 pushes
    ("ps_ssp", {"staleness": 100, "rounds": 10}, 4.0, 0.16989344),  # a bound never reached: ps_async
    ("ddcgu", {}, 1.0, 0.1),  # the workers never wait: their compute rate
    ("ddcgu", {}, 4.0, 0.12307692),  # 4 / (3/0.1 + 1/0.4)
])
def test_parameter_server_round(alg, opts, factor, expected):
    assert cf.step_s(alg, PS.with_(slow_factor=factor), **opts) == pytest.approx(expected, abs=1e-8)


def test_ps_sync_is_two_phase_when_staging_is_free_and_async_is_link_bound():
    # P: staging free, no apply: C + 2 (alpha + n B/bw) = 0.2 + 2 (50e-6 + 0.8), the replies and the
    # next pushes each a phase of the server's NIC
    assert cf.step_s("ps_sync", P) == pytest.approx(1.8001, abs=1e-12)
    # a 4x-slow worker (0.8 s) computes while the 7 others' pushes (0.7 s) share the link, then sends
    # its own (0.1 s): max(0.8 + 0.1, 0.2 + 0.1 + 7 x 0.1) = 1.0, as without it
    assert cf.step_s("ps_sync", P.with_(slow_factor=4.0)) == pytest.approx(1.8001, abs=1e-12)
    # ps_async on P: the server's link, 8 x 0.1 = 0.8, against t = 0.2 + 2 (50e-6 + 0.1) = 0.4001
    assert cf.step_s("ps_async", P) == pytest.approx(0.8, abs=1e-12)
    # four servers: their links carry 8 x 0.025 = 0.2 a round, below the workers' 0.4001
    assert cf.step_s("ps_async", P, servers=4) == pytest.approx(0.4001, abs=1e-12)


def test_method_options_of_parameter_servers():
    assert cf.method_options({"algorithm": {"name": "ps_async", "servers": 4}}) == {"servers": 4}
    assert cf.method_options({"algorithm": {"name": "ps_ssp", "staleness": 3}}) == {"staleness": 3}
    assert cf.method_options({}) == {} and cf.method_options(None) == {}
    assert cf.method_options({"algorithm": {"name": "sgp", "topology": {"peers": 1}}}) == {}


# a parameter-server experiment: the fixed profile with the op costs the server pays, on a star whose
# NIC gives bw = 10 GB/s per direction (0.97 x 86.5979 Gbit/s / 8 / 1.05), no latency: the PS point above
PS_SIM = {"backend": "simgrid", "platform": {"name": "star", "nic_gbps": 86.597938, "latency_us": 0.0},
          "profile": {"name": "fixed", "step_ms": 100.0, "model_mb": 100.0, "stage_gbps": 10.0, "mem_gbps": 800.0},
          "methods": {"ps_sync": {}, "ps_async": {}, "ps_cyclic": {}, "ddcgu": {}}}
PS_CONFIG = {"experiments": {"psx": PS_SIM}, "launcher": {"kind": "local"}}


def test_parameter_server_claims_get_a_closed_form_and_a_sensitivity():
    # async_ps_not_slowed_by_straggler's shape: (async/sync at slow1x4) / (async/sync without)
    # = (0.16989344 / 0.471) / (0.141 / 0.171) = 0.36070794 / 0.82456140 = 0.43745
    c = {**_claim("ps_async", "ps_sync", "psx"), "compare": "ratio_vs_control", "control": {"straggler": "none"}}
    row = {**_row("reproduced", 0.43, 0.42, 0.44), "straggler": "slow1x4", "nodes": 4}
    out = wfclaims.label_row(c, PS_CONFIG, row)
    assert out["closed_form"] == pytest.approx(0.43745, abs=1e-5)
    assert out["sensitivity"] == sens.HOLDS and out["status"] == "reproduced"


def test_time_to_target_of_an_asynchronous_method_is_not_scaled_by_the_closed_form():
    """Every run reached the target (a ratio with an interval), but DDCGU's steps to the target
    depend on timing (its pushes' staleness; on the default reproduction a change of the timing
    model took it from 4 of 5 runs reaching 80 % in 3 epochs to 0 of 5): the time per step's
    closed form cannot scale it, so its sensitivity is not evaluated; a synchronous pair's is."""
    tta = lambda a, b: {**_claim(a, b, "psx", metric="time_to_target_s"), "control": None}  # noqa: E731
    row = {**_row("reproduced", 0.52, 0.34, 0.80), "straggler": "slow1x4", "nodes": 4}
    out = wfclaims.label_row(tta("ddcgu", "ps_sync"), PS_CONFIG, dict(row))
    assert out["sensitivity"].startswith("not evaluated: ddcgu is asynchronous") and out["status"] == "reproduced"
    assert out["closed_form"] == pytest.approx(0.12307692 / 0.471, abs=1e-6)
    sync = wfclaims.label_row(tta("ps_cyclic", "ps_sync"), PS_CONFIG, dict(row))
    assert sync["sensitivity"] == sens.HOLDS


def test_time_to_target_without_a_simulated_ratio_says_what_the_verdict_rests_on():
    """A side that reaches the target in fewer runs cannot be faster to it: that does not depend on
    timing when both sides are synchronous (holds), and may when one is asynchronous (its
    staleness depends on timing: not evaluated); no longer "no simulated value to scale"."""
    counts = {"tta_reached_a": 0, "tta_runs_a": 5, "tta_reached_b": 3, "tta_runs_b": 5}
    row = {**_row("inconclusive", math.nan, math.nan, math.nan), **counts}
    sync = wfclaims.label_row(_claim("sgp_1peer", "allreduce_sgd", metric="time_to_target_s"), CONFIG, dict(row))
    assert sync["sensitivity"].startswith(sens.HOLDS + ": the verdict rests on how many runs reached the target")
    assert "sgp_1peer 0 of 5, allreduce_sgd 3 of 5" in sync["sensitivity"] and sync["status"] == "inconclusive"
    assert sync["closed_form"] == pytest.approx(0.795415, abs=1e-5)
    asyn = wfclaims.label_row(_claim("ddcgu", "ps_sync", "psx", metric="time_to_target_s"), PS_CONFIG,
                              {**dict(row), "nodes": 4})
    assert asyn["sensitivity"].startswith("not evaluated: the verdict rests on how many runs reached the target")
    assert "ddcgu is asynchronous" in asyn["sensitivity"]
    # the closed form is the rounds' ratio: 0.1 / 0.171
    assert asyn["closed_form"] == pytest.approx(0.58479532, abs=1e-8)
    # a verdict resting on censored times (the sooner side reaches it as often) is not scaled
    times = {**row, "tta_reached_a": 5, "tta_reached_b": 3}
    other = wfclaims.label_row(_claim("sgp_1peer", "allreduce_sgd", metric="time_to_target_s"), CONFIG, times)
    assert other["sensitivity"].startswith("not evaluated: the verdict rests on censored times")


# ------------------------------------------------------------------ mechanism gates through the ranges
# The star above at 8 nodes: AR-SGD's step 0.2 + 0.181113 = 0.381113 s, its closed-form
# communication share 0.181113 / 0.381113 = 0.475219, compute share 0.2 / 0.381113 = 0.524781.  A
# gate's measured share m is scaled by the closed form's change, m x s(p) / s0.
GATE_CONFIG = {"experiments": {"simx": {**SIM, "workload": "w", "nodes": [8], "stragglers": ["none", "slow1x4"],
                                        "seeds": [1, 2, 3]}}, "launcher": {"kind": "local"}}


def _gated_row(check, minimum, comm=0.45, compute=0.55, straggler="none", side="b", source="a test's source"):
    """SGP / AR-SGD = 0.5 at every seed (reproduced, and the verdict holds across the ranges: at
    full AR/backward overlap 0.5 x 1.538 = 0.77), AR-SGD's measured shares
    ``comm`` and ``compute`` of its epoch of 1 s, judged with one share gate on AR-SGD (with a
    ``source``: it may demote; None: context only)."""
    gate = {"check": check, "side": side, "min": minimum} | ({"source": source} if source else {})
    c = {**_claim("sgp_1peer", "allreduce_sgd"), "paper": "p", "statement": "s", "where": {"stragglers": [straggler]},
         "mechanism": {"text": "t", "requires": [gate]}}
    rows = [(m, 8, st, s, t, t * comm if m == "allreduce_sgd" else 0.1, t * compute if m == "allreduce_sgd" else 0.2)
            for m, t in (("sgp_1peer", 0.5), ("allreduce_sgd", 1.0)) for st in ("none", "slow1x4") for s in (1, 2, 3)]
    runs = pd.DataFrame(rows, columns=["method", "nodes", "straggler", "seed", "time_per_epoch_s", "bd_comm_s",
                                       "bd_compute_s"])
    [row] = wfclaims.evaluate_claim(c, GATE_CONFIG, {"simx": runs}, {}, {})
    gate = wfclaims.mechanism(c, GATE_CONFIG, runs, 8, straggler)[1]
    _gated_row.flips = {spec["name"]: v for spec, v, _ in gate.flips} if gate else {}
    return wfclaims.label_row(c, GATE_CONFIG, row)


def _passes_at(_text, label):
    """Where the gate flips along the range labelled ``label`` (the last :func:`_gated_row`'s)."""
    return next(v for k, v in _gated_row.flips.items() if next(r for r in sens.RANGES if r["name"] == k)["label"] == label)


def test_a_gate_failing_at_the_nominal_point_but_passing_inside_the_ranges_is_inconclusive():
    # (a) AR's communication share measured 45 % < 50 %: passes where 0.45 s(p) / 0.475219 >= 0.5,
    # s(p) >= 0.528021.  Compute k C: R / (k C + R) >= 0.528021 -> k <= 0.181113 x 0.893864 / 0.2
    # = 0.80945 (162 ms); efficiency e: R(e) = 14 (50e-6 + 0.0128866 / e) >= 0.2 x 0.528021 / 0.471979
    # = 0.223748 -> e <= 0.808851; background b: 0.0128866 / (1 - b) >= 0.015932 -> b >= 0.191146
    row = _gated_row("comm_share", 0.5)
    assert row["status"] == "inconclusive"
    assert row["reason"].startswith("the setting shows the mechanism (allreduce_sgd's communication share >= 50%, "
                                    "sourced) only when compute per step passes 0.809x = 162 ms (below nominal 1x = "
                                    "200 ms")
    assert "at the nominal point it does not (communication is 45% of allreduce_sgd's epoch time (< 50%)" \
        in row["reason"] and "measured 0.5 [0.5, 0.5], its interval alone: reproduced" in row["reason"]
    assert _passes_at(row["reason"], "compute per step") == pytest.approx(0.80945, abs=1e-4)
    assert _passes_at(row["reason"], "bandwidth efficiency") == pytest.approx(0.80885, abs=1e-4)
    # background load is a scenario axis (no source): where the gate changes along it is said, not a flip
    assert "background load" not in row["reason"] and "background load" not in _gated_row.flips
    assert "the setting shows the mechanism under scenario background load above 0.191" in row["scenarios"]
    assert row["sensitivity"].startswith("mechanism: the setting shows the mechanism") and "; verdict: " in row["sensitivity"]
    # the straggler claims' gate: AR's compute share without straggler 35 % < 40 % passes where
    # 0.35 s(p) / 0.524781 >= 0.4, s(p) >= 0.599750: k C / (k C + R) -> k >= 0.181113 x 0.59975 /
    # 0.40025 / 0.2 = 1.35694 (271 ms); overlap o: 0.2 / (0.381113 - 0.133333 o) >= 0.59975 -> o >= 0.357297
    row = _gated_row("compute_share", 0.4, compute=0.35, straggler="slow1x4")
    assert row["status"] == "inconclusive" and "only when compute per step passes 1.36x = 271 ms" in row["reason"]
    assert _passes_at(row["reason"], "compute per step") == pytest.approx(1.35694, abs=1e-4)
    assert _passes_at(row["reason"], "AR/backward overlap") == pytest.approx(0.357297, abs=1e-4)


def test_a_gate_passing_at_the_nominal_point_but_failing_inside_the_ranges_is_at_most_inconclusive():
    # (b) 45 % >= 40 % at the nominal point; fails where s(p) < 0.4 x 0.475219 / 0.45 = 0.422417:
    # compute k > 0.181113 x 1.367332 / 0.2 = 1.23821; overlap o: (R - 0.133333 o) / (0.2 + R -
    # 0.133333 o) < 0.422417 -> o > (0.181113 - 0.146272) / 0.133333 = 0.261308
    row = _gated_row("comm_share", 0.4)
    assert row["status"] == "inconclusive"
    assert row["reason"].startswith("reproduced at the nominal parameters, but the setting stops showing the "
                                    "mechanism (allreduce_sgd's communication share >= 40%, sourced) when compute "
                                    "per step passes")
    assert _passes_at(row["reason"], "compute per step") == pytest.approx(1.23821, abs=1e-4)
    assert _passes_at(row["reason"], "AR/backward overlap") == pytest.approx(0.261308, abs=1e-4)
    # a gate that holds across the ranges (45 % >= 10 % everywhere: at full overlap 18 %) changes nothing
    held = _gated_row("comm_share", 0.1)
    assert (held["status"], held["sensitivity"]) == ("reproduced", sens.HOLDS)


def test_a_gate_failing_across_the_ranges_stays_not_comparable():
    # (c) 45 % < 90 %: would need s(p) >= 0.950438; the most one parameter gives is background load's
    # high end, R(0.75) = 14 (50e-6 + 0.0515464) = 0.722350, s = 0.783155 -> 0.45 x 0.783155 / 0.475219
    # = 74 % (efficiency 0.3: R = 0.602074, s = 0.750642, 71 %)
    row = _gated_row("comm_share", 0.9)
    assert row["status"] == "not comparable"
    assert row["reason"].startswith("the setting cannot show the mechanism: communication is 45% of allreduce_sgd's")
    # background load (74 %) is a scenario axis: the sourced ranges' highest is efficiency 0.3's 71 %
    assert row["reason"].endswith("the setting shows the mechanism nowhere in the sourced ranges (one parameter at "
                                  "a time): allreduce_sgd's communication share reaches at most 71% (at bandwidth "
                                  "efficiency 0.3), below 90%")
    assert "(< 90%): the network cannot decide this setting (threshold source: a test's source)" in row["reason"]
    assert row["sensitivity"].startswith("mechanism: the setting shows the mechanism nowhere")
    # a real-rank claim's gate is a measurement: not swept
    real = {"experiments": {"realx": {**CONFIG["experiments"]["realx"], "nodes": [8], "stragglers": ["none"],
                                      "seeds": [1, 2]}}, "launcher": {"kind": "local"}}
    c = {**_claim("sgp_1peer", "allreduce_sgd", "realx"), "paper": "p", "statement": "s",
         "mechanism": {"text": "t", "requires": [{"check": "comm_share", "side": "b", "min": 0.5, "source": "s"}]}}
    runs = pd.DataFrame([(m, 8, "none", s, 1.0, 0.45) for m in ("sgp_1peer", "allreduce_sgd") for s in (1, 2)],
                        columns=["method", "nodes", "straggler", "seed", "time_per_epoch_s", "bd_comm_s"])
    [r] = wfclaims.evaluate_claim(c, real, {"realx": runs}, {}, {})
    assert r["status"] == "not comparable" and "nowhere" not in r["reason"] and r["sensitivity"] == ""


# ------------------------------------------------------------------ issue 31: size verdicts, gates with sources

def _sized(published, m=0.80, lo=0.79, hi=0.81, status="reproduced"):
    """SGP / AR-SGD on the star at 8 nodes (closed form 0.795415 above) with a published size."""
    c = {**_claim("sgp_1peer", "allreduce_sgd"), "published": {"value": published, "nodes": [8]}}
    row = {**_row(status, m, lo, hi), "published": published, "unit": "x", "scale": "log"}
    return wfclaims.label_row(c, CONFIG, row)


@pytest.mark.parametrize("published,size", [(0.9, "reproduced"), (1.2, "inconclusive"), (0.5, "not reproduced"),
                                            (3.1, "not reproduced")])
def test_size_verdict_inside_between_and_outside(published, size):
    """Our interval [0.79, 0.81] widened by x/÷ 1.25: [0.632, 1.0125] (0.9 inside: reproduced).  The
    sourced ranges scale it at most by 1.538110 (full AR/backward overlap: AR 0.381113 - 0.133333 =
    0.247780, SGP/AR 1.223436 over 0.795415) and at least by 0.852206 (efficiency 0.3: SGP 0.2 +
    50e-6 + 1e8 / 0.291e9 = 0.543693, AR 0.2 + 14 (50e-6 + 1.25e7 / 0.291e9) = 0.802074, 0.677860
    over 0.795415), widened alike: [0.79 x 0.852206 / 1.25, 0.81 x 1.538110 x 1.25] = [0.538594,
    1.557336]: 1.2 lies only there (inconclusive), 0.5 and 3.1 outside both (not reproduced).  The
    scenario axes do not widen it (background load alone would reach below 0.5)."""
    row = _sized(published)
    assert row["size_status"] == size
    assert (row["size_low"], row["size_high"]) == (pytest.approx(0.632), pytest.approx(1.0125))
    assert row["size_range_low"] == pytest.approx(0.538594, abs=2e-6)
    assert row["size_range_high"] == pytest.approx(1.557336, abs=2e-5)
    assert row["size_reason"].startswith(f"0.8x [0.79, 0.81] against {published:g}x published; tolerance ×/÷ 1.25")


def test_size_is_na_with_the_reason_without_a_published_magnitude():
    row = wfclaims.label_row(_claim("sgp_1peer", "allreduce_sgd"), CONFIG, _row("reproduced", 0.8, 0.79, 0.81))
    assert (row["size_status"], row["size_reason"]) == ("n/a", "the paper states no magnitude")
    c = {**_claim("sgp_1peer", "allreduce_sgd"), "published": {"value": 0.7, "nodes": [32]}}
    other = wfclaims.label_row(c, CONFIG, {**_row("reproduced", 0.8, 0.79, 0.81), "published": 0.7, "scale": "log"})
    assert (other["size_status"], other["size_reason"]) == ("n/a", "the published value is for 32 nodes")


def test_a_difference_size_is_judged_in_its_unit():
    """A difference: [-0.9, -0.3] points widened by ± 0.5 = [-1.4, 0.2]; no sensitivity on accuracy."""
    c = {**_claim("sgp_1peer", "allreduce_sgd", metric="final_acc"), "compare": "difference",
         "published": {"value": -0.85}}
    row = lambda p: wfclaims.label_row({**c, "published": {"value": p}}, CONFIG, {  # noqa: E731
        **_row("reproduced", -0.6, -0.9, -0.3), "published": p, "unit": "pt", "scale": "linear"})
    assert row(-0.85)["size_status"] == "reproduced" and row(-1.5)["size_status"] == "not reproduced"
    assert row(-0.85)["size_reason"].startswith("-0.6 pt [-0.9, -0.3] against -0.85 pt published; tolerance ± 0.5")


def test_a_gate_without_a_source_is_context_not_a_demotion():
    """The same gate as the not-comparable one above (45 % < 90 %) without a source: the row is
    judged (reproduced; the verdict holds across the ranges) and the share is shown beside it."""
    row = _gated_row("comm_share", 0.9, source=None)
    assert row["status"] == "reproduced" and row["sensitivity"] == sens.HOLDS
    assert row["gate_context"] == ("allreduce_sgd's communication share 45% (below 90%, the harness's choice, "
                                   "without a source: not a demotion)")
    assert row["reason"].endswith("context (not a demotion): " + row["gate_context"])
    # nor does one that would flip inside the ranges (the 50 % gate of the inconclusive test above)
    assert _gated_row("comm_share", 0.5, source=None)["status"] == "reproduced"


def _derived_row(published, comm=0.45):
    """SGP / AR-SGD = 0.5 (as :func:`_gated_row`) with AR's communication share gated by a threshold
    derived from the published speed-up."""
    c = {**_claim("sgp_1peer", "allreduce_sgd"), "paper": "p", "statement": "s", "where": {"stragglers": ["none"]},
         "published": {"value": published, "nodes": [8]},
         "mechanism": {"text": "t", "requires": [{"check": "comm_share", "side": "b", "derived": True}]}}
    rows = [(m, 8, "none", s, t, t * comm if m == "allreduce_sgd" else 0.1, 0.5) for m, t in
            (("sgp_1peer", 0.5), ("allreduce_sgd", 1.0)) for s in (1, 2, 3)]
    runs = pd.DataFrame(rows, columns=["method", "nodes", "straggler", "seed", "time_per_epoch_s", "bd_comm_s",
                                       "bd_compute_s"])
    [row] = wfclaims.evaluate_claim(c, GATE_CONFIG, {"simx": runs}, {}, {})
    return wfclaims.label_row(c, GATE_CONFIG, row)


def test_a_derived_gate_demotes():
    """Published 0.25x: a speed-up of 4 needs AR-SGD to communicate at least 1 - 1/4 = 75 % of its
    step, even against a method without communication.  Measured 45 %: the sourced ranges raise it
    to 71 % at most (efficiency 0.3, the 90 % test above): not comparable, the threshold's
    derivation in the reason.  Published 0.9x: 1 - 0.9 = 10 %, below 45 % everywhere in the sourced
    ranges (at most 22 % lower, at 3x the compute): judged.  Published 0.7x: 30 % at the nominal point
    but not at 3x the compute (0.45 x 0.232 / 0.475 = 22 %): a derived gate flipping inside the
    ranges makes the row inconclusive, like a sourced one."""
    row = _derived_row(0.25)
    assert row["status"] == "not comparable"
    assert ("communication is 45% of allreduce_sgd's epoch time (< 75%): the network cannot decide this setting "
            "(threshold derived from the published 0.25x: a speed-up of 4x needs a communication share of at least "
            "1 - 1/4 = 75%, even for a method without communication)") in row["reason"]
    assert row["size_status"] == "n/a"
    assert _derived_row(0.9)["status"] == "reproduced"
    flips = _derived_row(0.7)
    assert flips["status"] == "inconclusive"
    assert "(allreduce_sgd's communication share >= 30%, derived) when compute per step passes" in flips["reason"]


def test_a_harness_check_that_does_not_pass_is_not_reproduced():
    """A harness check is judged at its nominal parameters: a sensitivity flip does not demote it
    (the 0.8 row above flips at AR/backward overlap 0.543), and an interval straddling the pass
    region's boundary is a failure, not "inconclusive"."""
    c = {**_claim("sgp_1peer", "allreduce_sgd"), "harness": True}
    held = wfclaims.label_row(c, CONFIG, _row("reproduced", 0.80, 0.79, 0.81))
    assert held["status"] == "reproduced" and held["sensitivity"].startswith("flips to inconclusive")
    failed = wfclaims.label_row(c, CONFIG, _row("inconclusive", 0.99, 0.95, 1.03))
    assert failed["status"] == "not reproduced"
    assert failed["reason"].startswith("a harness check that does not pass fails: the interval [0.95, 1.03] "
                                       "straddles the pass region's boundary")
    # without an interval the estimate decides
    assert wfclaims.label_row(c, CONFIG, _row("inconclusive", 1.2, math.nan, math.nan))["status"] == "not reproduced"
    assert wfclaims.label_row(c, CONFIG, _row("inconclusive", 0.9, math.nan, math.nan))["status"] == "reproduced"


def test_the_nominal_point_carries_the_workloads_optimizer():
    """The point's optimizer terms are the experiment's workload's: sgp_sim's SGD with momentum (5
    passes) and weight decay 1e-4; ps_bottleneck's plain SGD (3 passes); a config without a workload
    (SIM): none."""
    from conftest import ROOT
    from distrepro_wf.pipeline.yamlio import load_yaml

    config = load_yaml(ROOT / "config" / "config.yaml")
    p = sens.nominal_point(config, "sgp_sim", 8, "none")
    assert (p.optim_passes, p.weight_decay) == (5.0, True)
    q = sens.nominal_point(config, "ps_bottleneck", 8, "none")
    assert (q.optim_passes, q.weight_decay) == (3.0, True)
    r = sens.nominal_point(CONFIG, "simx", 8, "none")
    assert (r.optim_passes, r.weight_decay) == (0.0, False)
