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
Rabenseifner      2log2(n)alpha+2(n-1)/n S/b   2(n-1)/n S   (halving + doubling)
PS-style          2 alpha + 2(n-1) S/b         2(n-1)/n S (the root's link: 2(n-1) S)
ring allgather    (n-1) (alpha + S/b)          (n-1) S      (S = one rank's part)
binomial bcast    log2(n) (alpha + S/b)        S  (<= S log2 n at the root)
binomial reduce   log2(n) (alpha + S/b)        S (n-1)/n    (mean over ranks)
gather / scatter  log2(n) alpha + (n-1) S/b    S (n-1)/n    (mean; the root moves (n-1) S)
ring reduce-scat. (n-1) (alpha + S/(n b))      S (n-1)/n    (S = the whole input)
point-to-point    alpha + S/b                  S
================  ==========================  ===================================

:func:`allreduce_cost` is the exact critical path of :mod:`impls.comm.allreduce`'s point-to-point
all-reduce algorithms (the survey's study, non-power-of-two worlds included).
:func:`collective_cost` returns both numbers; the communicator uses the bytes to count
the traffic of collectives, which happens inside the backend (gloo / NCCL), with the
all-reduce algorithm of the run config (``allreduce_algorithm``).  Point-to-point
messages are counted from the tensors themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ALGORITHMS = ("ring", "tree", "recursive_doubling")  # the simulated backend's built-in all-reduce
#: all-reduce algorithms of :mod:`impls.comm.allreduce` (point to point, real and simulated ranks)
P2P_ALLREDUCE = ("ring", "tree", "recursive_doubling", "rabenseifner", "ps")


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
        if algorithm in P2P_ALLREDUCE:
            return allreduce_cost(algorithm, nbytes, n)
        raise ValueError(f"unknown allreduce algorithm {algorithm!r}; known: {', '.join(P2P_ALLREDUCE)}")
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


def allreduce_cost(algorithm: str, nbytes: float, world: int) -> Cost:
    """The critical path of :mod:`impls.comm.allreduce`'s ``algorithm`` on ``world`` ranks, a
    payload of ``nbytes`` per rank: ``steps`` sequential messages and ``wire_bytes`` on the
    busiest link along it (time = steps alpha + wire_bytes / beta, :func:`alpha_beta_seconds`);
    ``bytes_sent`` / ``bytes_recv``: the mean over ranks.

    Exact for those implementations (``n = p + e``, ``p`` a power of two, ``k = log2 p``):
    recursive doubling and Rabenseifner pay ``2 (alpha + S / beta)`` more when ``e > 0`` (the
    extra ranks' vectors folded in and the result sent back); the ring's chunks are ``S / n``
    (the largest of unequal chunks is one element more); ``ps`` posts each phase's ``n - 1``
    messages at once: two latencies, ``2 (n - 1) S`` bytes through the root's link (with a
    per-message software overhead, as LogP's ``o``, the root would pay ``n - 1`` of them).
    The binomial tree's rounds are ``ceil(log2 n)``; with ``e > 0`` some early sends share
    the root's link (not modelled)."""
    n, S = world, float(nbytes)
    if n <= 1:
        return Cost(0.0, 0.0, 0, 0.0)
    p = 1 << (n.bit_length() - 1)
    k, e = p.bit_length() - 1, n - p
    fold_steps, fold_bytes = (2, 2 * S) if e else (0, 0.0)
    if algorithm == "ring":
        per = 2 * (n - 1) / n * S
        return Cost(per, per, 2 * (n - 1), per)
    if algorithm == "tree":
        rounds = _log2(n)
        mean = 2 * (n - 1) / n * S  # each non-root sends once up; n - 1 sends down
        return Cost(mean, mean, 2 * rounds, 2 * rounds * S)
    if algorithm == "recursive_doubling":
        mean = (p * k * S + 2 * e * S) / n
        return Cost(mean, mean, k + fold_steps, k * S + fold_bytes)
    if algorithm == "rabenseifner":
        mean = (2 * (p - 1) * S + 2 * e * S) / n
        return Cost(mean, mean, 2 * k + fold_steps, 2 * (p - 1) / p * S + fold_bytes)
    if algorithm == "ps":
        mean = 2 * (n - 1) / n * S
        return Cost(mean, mean, 2, 2 * (n - 1) * S)
    raise ValueError(f"algorithm: unknown all-reduce algorithm {algorithm!r}; allowed: {', '.join(P2P_ALLREDUCE)}")


def alpha_beta_seconds(cost: Cost, alpha: float, beta: float) -> float:
    """``steps alpha + wire_bytes / beta``: the alpha-beta time of a critical path."""
    return cost.steps * alpha + cost.wire_bytes / beta
