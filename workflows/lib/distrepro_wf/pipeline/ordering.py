"""Whether two timings order methods alike: the fastest-first order and its disagreements
beyond a margin.  Read by the simulator-vs-testbed benchmark
(:mod:`distrepro_wf.bench.netnsbench`) and by a plan's verification
(:mod:`distrepro_wf.plan.verify`), so it lives below both."""

from __future__ import annotations

from typing import Mapping


def order(times: Mapping[str, float]) -> list[str]:
    """Methods fastest first (ties by name)."""
    return sorted(times, key=lambda m: (times[m], m))


def discordant(real: Mapping[str, float], sim: Mapping[str, float], margin: float) -> list[tuple[str, str]]:
    """Pairs (a, b), a faster on real ranks, that the simulator orders the other way, both
    sides separating them by more than ``margin`` (relative): the order disagreements that
    are not ties (the simulator times several methods identically, e.g. SGP with one peer
    and the ring at 2 ranks, and noise then orders them at random)."""
    out = []
    for a in order(real):
        for b in order(real):
            if real[a] < real[b] and real[b] > (1 + margin) * real[a] and sim[a] > (1 + margin) * sim[b]:
                out.append((a, b))
    return out
