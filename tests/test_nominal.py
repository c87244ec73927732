"""One nominal value per uncertain parameter (issue 31, item 7): :mod:`impls.sim.nominal`'s table
is what the simulator, the closed form's nominal point, the sensitivity ranges and the docs read.

* the simulator: ``ethernet_10g`` runs every message at its preset's ``msg_efficiency`` (0.456,
  fitted on SlowMo Table 2a's SGP row), written out here: a 2-rank ring all-reduce of 100 MB is
  ``2 (alpha + S / (2 beta e))`` with ``beta = 0.97 x 10 Gbit/s / 8 / 1.05``;
* the closed form's nominal point has the same efficiency, the same per-message overhead, and
  the method's own overlap (1 for ``allreduce_sgd``, whose ``overlap_backward`` is on by default);
* ``RANGES`` is the table; the docs page shows the table as :func:`impls.sim.nominal.markdown`
  prints it (regenerate: ``python -m impls.sim.nominal``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from distrepro_wf.claims import closedform as cf
from distrepro_wf.claims import sensitivity as sens
from impls.sim import nominal

ALPHA, LINE_BETA = 50e-6, 0.97 * 10e9 / 8 / 1.05  # ethernet_10g at line rate, written out
S = 1e8


def _ring2(platform: dict) -> float:
    p = subprocess.run([sys.executable, str(ROOT / "tests" / "sim_probe.py"), "ring_cost",
                        json.dumps({"platform": platform, "n": 2, "sizes": [S]})],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])[0]["seconds"]


@pytest.mark.parametrize("platform,e", [({"name": "ethernet_10g"}, 0.456),
                                        ({"name": "ethernet_10g", "msg_efficiency": 1.0}, 1.0),
                                        ({"name": "infiniband_100g", "msg_efficiency": 0.5}, 0.5)])
def test_the_simulator_runs_every_message_at_the_platforms_msg_efficiency(platform, e):
    line = LINE_BETA * (10 if platform["name"] == "infiniband_100g" else 1)
    alpha = 2e-6 if platform["name"] == "infiniband_100g" else ALPHA
    assert _ring2(platform) == pytest.approx(2 * (alpha + S / (2 * line * e)), rel=0.02)


def _config(method: dict, platform="ethernet_10g", profile="resnet50_v100x8") -> dict:
    return {"experiments": {"x": {"backend": "simgrid", "platform": platform, "profile": profile,
                                  "methods": {"m": method, "sgp": {"algorithm": {"name": "sgp"}}}}}}


def test_the_closed_forms_nominal_point_reads_the_same_values():
    p = sens.nominal_point(_config({}), "x", 8, "none")
    assert p.efficiency == 0.456 and p.bandwidth == pytest.approx(LINE_BETA)
    assert p.msg_overhead_s == pytest.approx(10e-6)  # the paper profiles' msg_us (NCCL's 9.6 us a ring step)
    assert sens.nominal_point(_config({}, "infiniband_100g"), "x", 8, "none").efficiency == 1.0
    # the overlap is the method's own: AR-SGD overlaps by default (DDP), not with overlap_backward off
    ar = {"algorithm": {"name": "allreduce_sgd"}}
    off = {"algorithm": {"name": "allreduce_sgd", "overlap_backward": False}}
    assert cf.method_overlap(ar, "m") == 1.0 and cf.method_overlap({}, "allreduce_sgd") == 1.0
    assert cf.method_overlap(off, "m") == 0.0 and cf.method_overlap({}, "sgp") == 0.0
    claim = {"experiment": "x", "a": {"method": "sgp"}, "b": {"method": "m"}}
    assert sens.claim_nominal(claim, _config(ar), 8, "none").overlap == 1.0
    assert sens.claim_nominal(claim, _config(off), 8, "none").overlap == 0.0


def test_the_sensitivity_ranges_are_the_table():
    assert [r["name"] for r in sens.RANGES] == [p.name for p in nominal.PARAMETERS]
    eff, msg = nominal.parameter("efficiency"), nominal.parameter("msg_overhead_s")
    assert (eff.low, eff.high) == (0.3, 0.9) and (msg.low, msg.high) == (0.0, 50e-6)
    for p in nominal.PARAMETERS:
        assert p.kind in (nominal.UNCERTAINTY, nominal.SCENARIO)
        assert bool(p.source) == (p.kind == nominal.UNCERTAINTY), p.name
    # every sourced preset's nominal efficiency lies inside the sourced range or at line rate
    for name, (e, source) in nominal.msg_efficiencies().items():
        assert e == 1.0 or (source and eff.low <= e <= eff.high), name


def test_the_docs_page_shows_the_table():
    page = (ROOT / "docs" / "sim-parameter-sources.md").read_text()
    assert nominal.markdown() in page, "regenerate the table: python -m impls.sim.nominal"
