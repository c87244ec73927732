"""Communication graphs of the decentralized methods, with uniform mixing weights.

A graph answers, for iteration ``itr``, whom rank ``i`` sends to (``out_peers``) and
hears from (``in_peers``); every rank computes this locally in lock-step, so no
coordination is needed.  ``mixing_matrix(itr)`` is the ``n x n`` matrix ``W`` with
``W[dst, src]`` = the weight ``src``'s value gets in ``dst``'s new value:
``x_new = W @ x``.  Weights are uniform: a rank with ``k`` out-peers keeps
``1 / (k + 1)`` and sends ``1 / (k + 1)`` to each.

Graphs (``TOPOLOGIES`` registry, config ``topology: {name: ..., ...}``):

* ``complete`` - everyone to everyone (k = n - 1): ``W = 11^T / n``, one step averages.
* ``ring`` - undirected ring, neighbours ``i - 1`` and ``i + 1`` (D-PSGD's graph in
  Lian et al. 2017): symmetric and doubly stochastic, spectral gap ``O(1/n^2)``.
* ``exponential`` - SGP's time-varying directed exponential graph (Assran et al.
  2019, Sec. 5): rank ``i`` sends to ``i + 2^j (mod n)``, cycling through
  ``j = 0 .. log2(n) - 1`` with ``peers`` out-peers per iteration (1-peer / 2-peer).
  Column-stochastic (and, being regular, doubly stochastic); with ``peers: 1`` and
  ``n`` a power of two the product of ``log2(n)`` consecutive matrices is exactly
  ``11^T / n``.  The reference code's out-peer list alternates ``+1, -1, +2, -2, ...``;
  we follow the paper's forward-only description.
* ``bipartite_exponential`` - the graph of the SGP repo's D-PSGD / AD-PSGD: odd ranks
  active, even ranks passive, odd hop distances ``1, 3, 5, 9, 17, ...`` cycled per
  iteration; at iteration ``t`` active rank ``i`` is paired with ``i + h_t (mod n)``,
  a perfect matching for even ``n`` (pairwise averaging, doubly stochastic).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import torch

from ..errors import ConfigError
from ..registry import Registry

TOPOLOGIES: Registry = Registry("topology", "algorithm.topology.name")


class Graph:
    """Base class: subclasses define ``out_peers`` and ``in_peers``."""

    #: W is symmetric (undirected exchange), as D-PSGD and D^2 require
    symmetric: bool = False

    def __init__(self, world: int):
        self.world = world

    def out_peers(self, rank: int, itr: int) -> list[int]:
        raise NotImplementedError

    def in_peers(self, rank: int, itr: int) -> list[int]:
        raise NotImplementedError

    def weight(self, rank: int, itr: int) -> float:
        """Uniform weight: kept by ``rank`` and sent to each out-peer."""
        return 1.0 / (len(self.out_peers(rank, itr)) + 1)

    @property
    def period(self) -> int:
        """Number of iterations after which the peer schedule repeats."""
        return 1

    def min_eigenvalue(self, itr: int) -> float:
        """Smallest eigenvalue of a symmetric graph's ``W`` at ``itr`` (D^2's condition).  Here
        from the n x n matrix; ``ring`` and ``complete`` override it in closed form, O(1),
        so that validating at any node count builds no n x n state."""
        return float(torch.linalg.eigvalsh(self.mixing_matrix(itr)).min())

    def mixing_matrix(self, itr: int) -> torch.Tensor:
        n = self.world
        W = torch.zeros(n, n, dtype=torch.float64)
        for src in range(n):
            w = self.weight(src, itr)
            W[src, src] += w
            for dst in self.out_peers(src, itr):
                W[dst, src] += w
        return W


def spectral_gap(W: torch.Tensor) -> float:
    """``1 - ||W - 11^T/n||_2``: how much one mixing step contracts the disagreement.

    For a symmetric doubly-stochastic ``W`` this is ``1 - max(|lambda_2|, |lambda_n|)``;
    1 for exact averaging, 0 for no mixing.
    """
    n = W.shape[0]
    J = torch.full_like(W, 1.0 / n)
    return float(1.0 - torch.linalg.matrix_norm(W.double() - J.double(), ord=2))


def period_spectral_gap(g: Graph) -> float:
    """Spectral gap of the product of one period of a time-varying graph's matrices."""
    P = torch.eye(g.world, dtype=torch.float64)
    for t in range(g.period):
        P = g.mixing_matrix(t) @ P
    return spectral_gap(P)


@TOPOLOGIES.register("complete")
class Complete(Graph):
    symmetric = True

    def out_peers(self, rank, itr):
        return [j for j in range(self.world) if j != rank]

    in_peers = out_peers

    def min_eigenvalue(self, itr):
        return 1.0 if self.world == 1 else 0.0  # W = 11^T / n: eigenvalues 1 and 0


@TOPOLOGIES.register("ring")
class Ring(Graph):
    symmetric = True

    def out_peers(self, rank, itr):
        n = self.world
        return sorted({(rank - 1) % n, (rank + 1) % n} - {rank})

    in_peers = out_peers

    def min_eigenvalue(self, itr):
        """A circulant ``W``: eigenvalues ``1/3 + 2/3 cos(2 pi k / n)`` for n >= 3, smallest at
        ``k = floor(n / 2)`` (``-1/3`` for even n); n = 2: ``{1, 0}``; n = 1: ``{1}``."""
        n = self.world
        if n <= 2:
            return 1.0 if n == 1 else 0.0
        return 1 / 3 + 2 / 3 * math.cos(2 * math.pi * (n // 2) / n)


def _log2(n: int) -> int:
    return max(1, math.ceil(math.log2(n))) if n > 1 else 0


@TOPOLOGIES.register("exponential")
class Exponential(Graph):
    def __init__(self, world: int, peers: int = 1):
        super().__init__(world)
        self.offsets = [2**j for j in range(_log2(world))]
        if world > 1 and not 1 <= peers <= len(self.offsets):
            raise ConfigError("algorithm.topology.peers",
                              f"must be between 1 and {len(self.offsets)} for {world} ranks, got {peers}")
        self.peers = peers

    def _offsets(self, itr: int) -> list[int]:
        if self.world == 1:
            return []
        m = len(self.offsets)
        return sorted({self.offsets[(itr * self.peers + j) % m] for j in range(self.peers)})

    @property
    def period(self) -> int:
        m = len(self.offsets)
        return m // math.gcd(m, self.peers) if m else 1

    def out_peers(self, rank, itr):
        return [(rank + o) % self.world for o in self._offsets(itr)]

    def in_peers(self, rank, itr):
        return [(rank - o) % self.world for o in self._offsets(itr)]


@TOPOLOGIES.register("bipartite_exponential")
class BipartiteExponential(Graph):
    symmetric = True

    def __init__(self, world: int):
        super().__init__(world)
        if world > 1 and world % 2:
            raise ConfigError("nodes", f"bipartite_exponential needs an even number of ranks, got {world}")
        hops = [1] + [2**k + 1 for k in range(1, _log2(world)) if 2**k + 1 < world]
        self.hops = hops if world > 1 else []

    @staticmethod
    def is_active(rank: int) -> bool:
        return rank % 2 == 1

    @property
    def period(self) -> int:
        return max(1, len(self.hops))

    def partner(self, rank: int, itr: int) -> int | None:
        if not self.hops:
            return None
        h = self.hops[itr % len(self.hops)]
        return (rank + h) % self.world if self.is_active(rank) else (rank - h) % self.world

    def out_peers(self, rank, itr):
        p = self.partner(rank, itr)
        return [] if p is None else [p]

    in_peers = out_peers

    def active_peers(self, rank: int) -> list[int]:
        """All partners of ``rank`` over a period (for asynchronous pairing)."""
        return sorted({self.partner(rank, t) for t in range(self.period)} - {None})


def build_topology(spec: str | Mapping[str, Any], world: int) -> Graph:
    spec = {"name": spec} if isinstance(spec, str) else dict(spec)
    return TOPOLOGIES.build(spec, world, fixed=("world",))
