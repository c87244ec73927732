"""Alpha-beta cost model of collective operations (the survey's allreduce section).

A message of ``m`` bytes over one link costs ``alpha + m / beta`` seconds (latency
``alpha``, bandwidth ``beta`` in bytes/s).  For ``n`` ranks and a payload of ``S``
bytes per rank the standard algorithms cost (Thakur, Rabenseifner & Gropp 2005;
Chan et al. 2007):

================  ==========================  ===================================
algorithm         time                         bytes sent per rank
================  ==========================  ===================================
ring allreduce    2(n-1) alpha + 2(n-1)/n S/b  2(n-1)/n S
tree allreduce    2 log2(n) (alpha + S/b)      ~2 S   (reduce + broadcast)
rec. doubling     log2(n) (alpha + S/b)        log2(n) S
ring allgather    (n-1) (alpha + S/b)          (n-1) S      (S = one rank's part)
binomial bcast    log2(n) (alpha + S/b)        S  (<= S log2 n at the root)
binomial reduce   log2(n) (alpha + S/b)        S (n-1)/n    (mean over ranks)
gather / scatter  log2(n) alpha + (n-1) S/b    S (n-1)/n    (mean; the root moves (n-1) S)
ring reduce-scat. (n-1) (alpha + S/(n b))      S (n-1)/n    (S = the whole input)
point-to-point    alpha + S/b                  S
================  ==========================  ===================================

:func:`collective_cost` returns both numbers; the communicator uses the bytes to count
the traffic of collectives, which happens inside the backend (gloo / NCCL), with the
all-reduce algorithm of the run config (``allreduce_algorithm``).  Point-to-point
messages are counted from the tensors themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ALGORITHMS = ("ring", "tree", "recursive_doubling")


@dataclass(frozen=True)
class Cost:
    bytes_sent: float  # per rank
    bytes_recv: float  # per rank
    steps: int  # sequential message rounds (each pays latency once)
    wire_bytes: float  # bytes on the critical path (each pays 1/bandwidth)


def _log2(n: int) -> int:
    return max(1, math.ceil(math.log2(n))) if n > 1 else 0


def collective_cost(op: str, nbytes: int, world: int, algorithm: str = "ring") -> Cost:
    """Cost of collective ``op`` with a per-rank payload of ``nbytes`` on ``world`` ranks."""
    n = world
    if n <= 1:
        return Cost(0.0, 0.0, 0, 0.0)
    S = float(nbytes)
    if op == "all_reduce":
        if algorithm == "ring":
            per = 2 * (n - 1) / n * S
            return Cost(per, per, 2 * (n - 1), per)
        if algorithm == "tree":
            k = _log2(n)
            return Cost(2 * S, 2 * S, 2 * k, 2 * k * S)
        if algorithm == "recursive_doubling":
            k = _log2(n)
            return Cost(k * S, k * S, k, k * S)
        raise ValueError(f"unknown allreduce algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    if op == "all_gather":
        return Cost((n - 1) * S, (n - 1) * S, n - 1, (n - 1) * S)
    if op == "broadcast":
        k = _log2(n)
        return Cost(S, S, k, k * S)
    if op == "reduce":
        k = _log2(n)
        return Cost(S * (n - 1) / n, S * (n - 1) / n, k, k * S)
    if op in ("gather", "scatter"):
        return Cost(S * (n - 1) / n, S * (n - 1) / n, _log2(n), (n - 1) * S)
    if op == "reduce_scatter":
        per = (n - 1) / n * S
        return Cost(per, per, n - 1, per)
    if op == "p2p":
        return Cost(S, S, 1, S)
    raise ValueError(f"unknown collective {op!r}")
