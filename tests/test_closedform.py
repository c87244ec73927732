"""Closed-form step times, the sensitivity flip rule and the claim rows' classes (issue 24).

The closed-form constants are written out as numbers (worked by hand in each comment), not
derived from the code under test.  Milliseconds (one torch import for the profile config)."""

from __future__ import annotations

import math

import pytest

from distrepro_wf import claims as wfclaims
from distrepro_wf import closedform as cf
from distrepro_wf import sensitivity as sens

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
    ("adpsgd", 0.2),  # max(0.2, 0.10005)
    ("ps_sync", 1.8001),  # 0.2 + 2 (50e-6 + 8 x 0.1): the server's NIC in and out
    ("signum_mv", 0.2501),  # 0.2 + 2 (50e-6 + 8 x 0.1/32)
    ("signum_mv_allgather", 0.222225),  # 0.2 + 7 (50e-6 + 0.1/32)
])
def test_step_time_per_method(alg, expected):
    assert cf.step_s(alg, P) == pytest.approx(expected, abs=1e-12)


def test_step_time_overlap_straggler_jitter():
    # overlap 1 hides 2/3 x 0.2 = 0.13333 of the ring: 0.2 + 0.1757 - 0.133333 = 0.2423667
    assert cf.step_s("allreduce_sgd", P.with_(overlap=1.0)) == pytest.approx(0.24236667, abs=1e-8)
    # a 4x straggler: a synchronous step waits for it (0.8 + 0.1757); AD-PSGD loses its share:
    # 0.2 / ((7 + 1/4) / 8) = 0.2206897
    assert cf.step_s("allreduce_sgd", P.with_(slow_factor=4.0)) == pytest.approx(0.9757, abs=1e-12)
    assert cf.step_s("adpsgd", P.with_(slow_factor=4.0)) == pytest.approx(0.22068966, abs=1e-8)
    # jitter 3 %, 8 draws: sigma = 0.029993, Blom z_8 = 1.4236 -> factor 1.04349
    assert cf.expected_max_factor(8, 0.03) == pytest.approx(1.04349, abs=1e-5)
    assert cf.step_s("unknown_method", P) is None


def test_method_algorithm_from_config():
    assert cf.method_algorithm({}, "allreduce_sgd") == ("allreduce_sgd", 1)
    spec = {"algorithm": {"name": "sgp", "topology": {"name": "exponential", "peers": 2}}}
    assert cf.method_algorithm(spec, "sgp_2peer") == ("sgp", 2)
    assert cf.method_algorithm({"algorithm": {"name": "signum_mv", "aggregation": "allgather"}}, "signum")[0] \
        == "signum_mv_allgather"


SIM = {"backend": "simgrid", "platform": {"name": "star", "nic_gbps": 8.4, "latency_us": 50.0},
       "profile": {"name": "fixed", "step_ms": 200.0, "model_mb": 100.0},
       "methods": {"allreduce_sgd": {}, "sgp_1peer": {"algorithm": {"name": "sgp", "topology": {"peers": 1}}},
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
