"""Tier 2: golden first-step losses per method (quick regression) and same-seed determinism.

``tests/golden/first_losses.json`` holds the first ``STEPS`` per-rank training losses
of every method at 2 ranks (``serial_sgd``: 1 rank, batch 2 x 16) on the tiny workload.
Tolerance: 1e-5 relative, declared here: the numbers are deterministic on one machine
(see the determinism test), the slack covers other CPUs' float summation orders.
Regenerate after an intended change with ``DISTREPRO_UPDATE_GOLDEN=1 pytest tests/test_spawn_golden.py``
and say why in the commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import make_config

pytestmark = pytest.mark.spawn

GOLDEN = Path(__file__).parent / "golden" / "first_losses.json"
STEPS = 5
REL_TOL = 1e-5
WL = {"epochs": 1, "max_steps_per_epoch": STEPS}
PLAIN = {**WL, "optimizer": {"lr": 0.05, "momentum": 0.0, "nesterov": False, "weight_decay": 1e-4}}
METHODS = {  # name -> (algorithm, workload overrides); 2 ranks
    "allreduce_sgd": ({"name": "allreduce_sgd"}, WL),
    "sgp": ({"name": "sgp"}, WL),
    "osgp": ({"name": "osgp"}, WL),
    "dpsgd": ({"name": "dpsgd"}, WL),
    "d2": ({"name": "d2"}, PLAIN),
}
DETERMINISTIC = ("sgp", "dpsgd", "d2")
LABELS = {"dataset": {"name": "digits", "partition": {"kind": "labels", "classes_per_worker": 5}}}


def _losses(run, nodes):
    return [[r["loss/train"] for r in run.records(k, "step")] for k in range(nodes)]


@pytest.fixture(scope="module")
def golden_runs(tmp_path_factory):
    from conftest import launch

    tmp = tmp_path_factory.mktemp("golden")
    names = list(METHODS)
    cfgs = [make_config(a, 2, workload=w) for a, w in METHODS.values()]
    # determinism: the same configs again (full length, iid and label split) in the same launch
    det = [make_config({"name": m}, 2, workload={**METHODS[m][1], "max_steps_per_epoch": 10, "epochs": 2, **lab})
           for m in DETERMINISTIC for lab in ({}, LABELS)]
    runs, _ = launch(cfgs + det + det, tmp / "n2")
    (serial,), _ = launch([make_config("serial_sgd", 1, workload={**WL, "batch_size": 32})], tmp / "n1")
    got = {n: _losses(r, 2) for n, r in zip(names, runs)}
    got["serial_sgd"] = _losses(serial, 1)
    k = len(det)
    return got, runs[len(cfgs):len(cfgs) + k], runs[len(cfgs) + k:]


def test_first_losses_match_the_golden_file(golden_runs):
    got, _, _ = golden_runs
    if os.environ.get("DISTREPRO_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        rows = ",\n".join(f"  {json.dumps(n)}: {json.dumps(v)}" for n, v in sorted(got.items()))
        GOLDEN.write_text(f'{{"steps": {STEPS}, "nodes": 2, "rel_tol": {REL_TOL},\n "losses": {{\n{rows}\n }}\n}}\n')
    want = json.loads(GOLDEN.read_text())["losses"]
    assert sorted(want) == sorted(got)
    for name in want:
        for rank, (a, b) in enumerate(zip(got[name], want[name])):
            assert len(a) == STEPS
            assert a == pytest.approx(b, rel=REL_TOL), f"{name} rank {rank}"


def test_same_seed_gives_identical_numbers(golden_runs):
    """sgp, dpsgd, d2 (iid and label split), run twice with seed 1: every loss and every
    final parameter bit-identical."""
    _, first, second = golden_runs
    for a, b in zip(first, second):
        assert _losses(a, 2) == _losses(b, 2)
        for r in range(2):
            sa, sb = a.final_state(r), b.final_state(r)
            assert all((sa[k] == sb[k]).all() for k in sa), f"{a.out} rank {r}"
