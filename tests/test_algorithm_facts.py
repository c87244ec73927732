"""What the workflow asks of a method is declared by its algorithm class (issue 32, item 3):
whether its steps end in a collective over all workers, whether its steps to a target depend on
timing, its closed-form step time and the config options that form reads.  The sets are written
out here (they were name sets in the workflow before: collect's SYNC_COLLECTIVE_ALGORITHMS,
sensitivity's TIMING_DEPENDENT, closedform's ALGORITHMS), so a class that loses or gains a fact
turns this red.  Milliseconds."""

from __future__ import annotations

import pytest

from distrepro_wf.claims import closedform as cf
from distrepro_wf.pipeline.collect import sync_collective
from impls.algorithms import ALGORITHMS
from impls.comm.stepcost import Point

P = Point(compute_s=0.2, model_bytes=100e6, bandwidth=1e9, latency_s=50e-6, nodes=8)


def _with(flag: str) -> set[str]:
    return {n for n in ALGORITHMS.names() if getattr(ALGORITHMS.get(n), flag)}


def test_each_algorithm_declares_whether_its_step_ends_in_a_collective_over_all_workers():
    assert _with("sync_collective") == {"allreduce_sgd", "compressed_sgd", "ef_blocksgdm", "signum_mv", "svrg",
                                        "ps_sync"}
    assert sync_collective("allreduce_sgd") and not sync_collective("sgp") and not sync_collective("no_such")


def test_each_algorithm_declares_whether_its_trajectory_depends_on_timing():
    assert _with("timing_dependent") == {"adpsgd", "ps_async", "ps_ssp", "ddcgu"}
    assert cf.timing_dependent({"algorithm": {"name": "ps_async", "servers": 2}}, "psa")
    assert not cf.timing_dependent({}, "ps_cyclic") and not cf.timing_dependent({}, "no_such")


def test_the_methods_with_a_closed_form_are_the_classes_that_declare_one():
    have = {n for n in ALGORITHMS.names() if cf.step_s(n, P) is not None}
    assert have == {"allreduce_sgd", "sgp", "osgp", "dpsgd", "adpsgd", "signum_mv", "ef_blocksgdm", "ps_sync",
                    "ps_async", "ps_ssp", "ps_cyclic", "ddcgu"}
    assert cf.closed_form("signum_mv_allgather") == (ALGORITHMS.get("signum_mv"), {"aggregation": "allgather"})
    assert cf.step_s("signum_mv_allgather", P) == pytest.approx(0.222225, abs=1e-12)  # 0.2 + 7 (50e-6 + 0.1/32)
    # D-PSGD reads its order and neighbours from its config; a topology it has no form for: none
    assert cf.method_options({"algorithm": {"name": "dpsgd", "topology": {"name": "bipartite_exponential"}}}) == \
        {"order": "mix_then_step", "neighbours": 1}
    assert cf.method_options({"algorithm": {"name": "dpsgd", "topology": "torus"}}) is None
