"""Simulated time is a result: each method's simulated step against its closed form, the
overlap OSGP is for, the all-reduce of the paper model at 16 nodes, and one absolute time
per platform preset.  The constants are numbers written here (from the alpha-beta
formulas of the preset's documented parameters), never read back from the code under
test, so a wrong bandwidth, a doubled charge or a lost overlap turns a test red.

Every run: the tiny digits MLP, batch 16, 1 epoch of 4 steps; the timing of a step after
each rank's first (the first pays the set-up).  ``ethernet_10g`` at line rate (``msg_efficiency``
1; its nominal 0.456 has its own test, ``tests/test_nominal.py``): alpha = 50 us, beta =
0.97 x 10 Gbit/s / 8 / 1.05 = 1.154762e9 bytes/s per direction of a NIC that sends and
receives at once (``impls/sim/platforms.py``).  ``fixed`` profiles charge no op costs, so
a step is compute + its messages.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sim_server
from conftest import make_config

S = 100e6  # model_mb: 100 -> every message of the algorithm weighs 1e8 bytes x its share
ALPHA, BETA = 50e-6, 0.97 * 10e9 / 8 / 1.05  # ethernet_10g, written out (not the preset's values)
ETH = {"name": "ethernet_10g", "msg_efficiency": 1.0}  # at line rate: the constants above


#: AR-SGD with one all-reduce of the whole gradient after the backward pass: the closed forms
#: here are of that order and of one ring (the overlap with backward, ``allreduce_sgd``'s
#: default, has its own closed-form test:
#: ``test_sim_runs.py::test_simulated_overlap_hides_the_closed_form_share``; DDP's 25 MB
#: buckets of the paper model run as concurrent rings, whose flows together reach the link's
#: capacity where one flow gets 1/1.05 of it: 153 ms instead of 167 ms at 16 nodes)
AR_AFTER_BACKWARD = {"name": "allreduce_sgd", "overlap_backward": False, "bucket_mb": 1000.0,
                     "first_bucket_mb": 1000.0}


def _run(tmp: Path, algo, nodes: int, profile, platform=ETH, **over) -> list[dict]:
    cfg = make_config(algo, nodes, backend="simgrid", platform=platform, profile=profile,
                      workload={"epochs": 1, "max_steps_per_epoch": 4}, **over)
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "cfg.json").write_text(json.dumps(cfg))
    rc = sim_server.run(tmp / "cfg.json", tmp / "out", tmp / "ckpt", None, tmp / "sim.log")
    assert rc == 0, (tmp / "sim.log").read_text()[-3000:]
    recs = [json.loads(x) for x in (tmp / "out" / "metrics" / "rank0.jsonl").read_text().splitlines()]
    return [r for r in recs if r["kind"] == "step"][1:]


def _fixed(step_ms: float) -> dict:
    return {"name": "fixed", "step_ms": step_ms, "model_mb": 100.0}


def test_each_methods_step_is_its_closed_form_and_osgp_hides_what_sgp_waits_for(tmp_path):
    """A 100 MB model, 4 nodes on ethernet_10g:

    * AR-SGD (10 ms compute): compute + ring ``2 (n-1) (alpha + S / (n beta))``
      = 10 ms + 130.197 ms;
    * SGP (1 peer, 100 ms compute): compute + one exchange of the model vector each way (the
      share ``[x, w] / 2`` weighs the whole vector), ``alpha + S / beta`` = 100 ms + 86.648 ms,
      all of it waited for;
    * OSGP (tau 1, 100 ms compute): the same exchange, shorter than the compute, travels
      during the next step's compute: the step is the compute alone, no wait."""
    ring = 2 * 3 * (ALPHA + S / (4 * BETA))
    assert ring == pytest.approx(0.1301969, rel=1e-6)  # the formula, evaluated by hand
    ar = _run(tmp_path / "ar", AR_AFTER_BACKWARD, 4, _fixed(10))
    for r in ar:
        assert r["time/compute_s"] == pytest.approx(0.010, rel=1e-9)
        assert r["time/step_s"] == pytest.approx(0.010 + 0.1301969, rel=2e-3)
    peer1 = {"topology": {"name": "exponential", "peers": 1}}
    sgp = _run(tmp_path / "sgp", {"name": "sgp", **peer1}, 4, _fixed(100))
    osgp = _run(tmp_path / "osgp", {"name": "osgp", "tau": 1, **peer1}, 4, _fixed(100))
    for a, b in zip(sgp, osgp):
        assert a["time/compute_s"] == pytest.approx(0.100, rel=1e-9)
        assert a["time/comm_s"] == pytest.approx(0.0866479, rel=2e-3)
        assert a["time/step_s"] == pytest.approx(0.100 + 0.0866479, rel=2e-3)
        assert b["time/comm_s"] < 0.001
        assert b["time/step_s"] == pytest.approx(0.100, rel=1e-3)


def test_allreduce_of_the_paper_model_at_16_nodes(tmp_path):
    """AR-SGD, 16 nodes, ethernet_10g, resnet50_v100x8 (102.228128 MB): the ring of the
    paper model, ``2 x 15 x (alpha + 102.228128 MB / (16 beta))`` = 167.46 ms, plus the
    profile's 10 us per message x 30 messages, whatever the stand-in's own size (19 KB,
    below the 64 KiB small-message switch: a switch that forgot the scale would run
    recursive doubling of the whole model instead,
    ``4 x (alpha + S / beta)`` = 354 ms)."""
    steps = _run(tmp_path, AR_AFTER_BACKWARD, 16, "resnet50_v100x8")
    for r in steps:
        assert r["time/comm_s"] == pytest.approx(0.1674890 + 30 * 10e-6, rel=2e-3)
        assert r["time/compute_s"] == pytest.approx(0.0896673, rel=1e-5)  # 256 images / 2855 images/s
        # the op-cost model (impls/sim/opcost.py): the gradient to host memory and back over PCIe
        # (2 x 102.228128 MB / 12 GB/s) before the all-reduce; SGD's update, 5 x the model's bytes
        # at 720 GB/s (V100 HBM2 x 0.8); 30 messages x 10 us
        assert r["time/stage_s"] == pytest.approx(0.01703802, rel=1e-5)
        assert r["time/optim_s"] == pytest.approx(0.000709918, rel=1e-5)
        assert r["time/msg_overhead_s"] == pytest.approx(30 * 10e-6, rel=1e-6)
        assert r["time/step_s"] == pytest.approx(0.0896673 + 0.0170380 + 0.1674890 + 0.0003 + 0.00070992, rel=2e-3)


@pytest.mark.parametrize("platform,step_s", [
    ("infiniband_100g", 0.0230017),  # 10 ms + 2 x 3 x (2 us + 1e8 / (4 x 11.54762e9))
    ("fat_tree", 0.0230137),  # 10 ms + 2 x 3 x (4 us + 1e8 / (4 x 11.54762e9))
    ("shared_hpc", 0.1401969),  # 4 nodes: one rack, no uplink crossed: the ethernet ring
])
def test_one_absolute_time_per_platform_preset(tmp_path, platform, step_s):
    """AR-SGD at 4 nodes, 10 ms compute, a 100 MB model: each preset's step in seconds
    (ethernet_10g's: the closed-form test above)."""
    steps = _run(tmp_path, AR_AFTER_BACKWARD, 4, _fixed(10), platform=platform)
    assert steps[-1]["time/step_s"] == pytest.approx(step_s, rel=2e-3)
