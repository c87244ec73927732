"""Tier 2: golden first-step losses per method (quick regression) and same-seed determinism.

``tests/golden/first_losses.json`` holds the first ``STEPS`` training losses of every
rank for every synchronous method: ``serial_sgd`` at 1 rank, the others at 4 ranks,
where their updates really differ (settings: ``tests/update_golden.py``).  The test
only reads the file.  After an intended change of the numbers regenerate it with

    python tests/update_golden.py

and say in the commit why the numbers changed.  The file is checked against the
independent float64 references too (``tests/reference_math.py``; every golden loss
agreed to 1.9e-7 when the file was written), so a regenerated file cannot enshrine
a wrong method.

Checked: the same methods, node counts and step counts as the file, exactly (no rank
or step may go missing); every loss within ``REL_TOL`` = 1e-5 relative (the numbers
are deterministic on one machine, see the determinism test; the slack covers other
CPUs' float summation orders).  And the file itself must be able to tell the methods
apart: any two rows at the same node count differ somewhere by at least
``DISTINCT`` x ``REL_TOL``.
"""

from __future__ import annotations

import json

import pytest

from conftest import TINY_WORKLOAD, make_config
from reference_math import simulate
from update_golden import GOLDEN, METHODS, NODES, REL_TOL, STEPS, collect, losses

pytestmark = pytest.mark.spawn

DISTINCT = 100
REF_TOL = 5e-7  # float32 losses against the float64 reference: measured <= 1.9e-7
DETERMINISTIC = ("sgp", "dpsgd", "d2")
LABELS = {"dataset": {"name": "digits", "partition": {"kind": "labels", "classes_per_worker": 5}}}
PLAIN = {"optimizer": {"lr": 0.05, "momentum": 0.0, "nesterov": False, "weight_decay": 1e-4}}


@pytest.fixture(scope="module")
def golden_runs(tmp_path_factory):
    # determinism: sgp, dpsgd, d2 (iid and label split, 2 x 10 steps) twice, in the golden launch
    det = [make_config(m, NODES, workload={"max_steps_per_epoch": 10, "epochs": 2, **lab,
                                           **(PLAIN if m == "d2" else {})})
           for m in DETERMINISTIC for lab in ({}, LABELS)]
    got, extra = collect(tmp_path_factory.mktemp("golden"), det + det)
    return got, extra[:len(det)], extra[len(det):]


def _max_rel_diff(a, b):
    return max(abs(x / y - 1) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def test_golden_file_tells_the_methods_apart():
    """Same methods and shapes as ``update_golden.METHODS``; rows that should differ do."""
    gold = json.loads(GOLDEN.read_text())
    assert gold["steps"] == STEPS and gold["rel_tol"] == REL_TOL
    assert gold["nodes"] == {k: n for k, (_, n, _) in METHODS.items()}
    assert sorted(gold["losses"]) == sorted(METHODS)
    for name, rows in gold["losses"].items():
        assert [len(r) for r in rows] == [STEPS] * gold["nodes"][name], name
    names = sorted(METHODS)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if gold["nodes"][a] == gold["nodes"][b]:
                diff = _max_rel_diff(gold["losses"][a], gold["losses"][b])
                assert diff >= DISTINCT * REL_TOL, f"{a} and {b} differ by only {diff:.1e}"


def test_golden_file_agrees_with_the_float64_reference():
    gold = json.loads(GOLDEN.read_text())
    for name, (algo, nodes, over) in METHODS.items():
        wl = {**TINY_WORKLOAD, **over}
        ref = simulate({**algo, "lazy": algo["name"] == "d2"}, wl, nodes)  # d2 on the 4-ring: (W + I) / 2
        err = max(abs(x / ref.losses[t, r].item() - 1) for r, row in enumerate(gold["losses"][name])
                  for t, x in enumerate(row))
        assert err <= REF_TOL, f"{name}: golden losses off the reference by {err:.1e}"


def test_first_losses_match_the_golden_file(golden_runs):
    got, _, _ = golden_runs
    gold = json.loads(GOLDEN.read_text())
    assert sorted(got) == sorted(gold["losses"])
    for name, want in gold["losses"].items():
        assert [len(r) for r in got[name]] == [len(r) for r in want], f"{name}: ranks x steps"
        for rank, (a, b) in enumerate(zip(got[name], want)):
            assert a == pytest.approx(b, rel=REL_TOL), f"{name} rank {rank}"


def test_same_seed_gives_identical_numbers(golden_runs):
    """sgp, dpsgd, d2 (iid and label split) at 4 ranks, run twice with seed 1: every
    loss and every final parameter on every rank bit-identical."""
    _, first, second = golden_runs
    for a, b in zip(first, second, strict=True):
        assert len(losses(a)) == NODES and losses(a) == losses(b)
        for r in range(NODES):
            sa, sb = a.final_state(r), b.final_state(r)
            assert sorted(sa) == sorted(sb) and all((sa[k] == sb[k]).all() for k in sa), f"{a.out} rank {r}"
