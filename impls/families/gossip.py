"""Gossip machinery shared by the synchronous decentralized methods (sgp, osgp, dpsgd, d2).

A *round* is one application of a graph's mixing matrix ``W`` at iteration ``itr``
(see :mod:`impls.comm.topology`): rank ``i`` pre-scales its vector by its own weight
``a_i = 1 / (k_i + 1)`` (``k_i`` out-peers), keeps that share and sends the same
scaled vector to each out-peer with non-blocking ``comm.isend``, while ``comm.irecv``
collects the in-peers' scaled vectors.  Because the *sender* scales, the receiver
needs no knowledge of its in-peers' degrees: that is what lets PushSum run on
directed graphs where ``W`` is only column-stochastic.

:meth:`Round.wait` sums the shares in increasing source rank (own share included),
so ranks that receive the same shares (a complete graph) end up with bit-identical
vectors.  :meth:`Round.received` returns only the in-peers' shares, for methods
that absorb them later (overlap SGP).

:class:`GossipAlgorithm` is the small base the four methods share: the graph and its
spectral gap, the local optimizer without its coupled L2 term, equal (or deliberately
perturbed) replicas, and for the PushSum methods the numerator ``x`` and weight ``w``.

Also here (flat vectors come from :mod:`impls.comm.flat`): the gradient of the L2 term taken at
the point where the gradient was computed, and the per-rank initial perturbation
(``init_spread``) that lets tests and experiments start replicas apart.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Mapping

import torch
from torch import nn

from ..comm import stepcost as sc
from ..comm.communicator import STAGE_PASSES, Communicator, Handle, nbytes
from ..errors import ConfigError
from ..comm.flat import flat_params, write_params
from ..optim import LocalOptimizer, build_optimizer
from ..protocol import Algorithm
from ..comm.topology import TOPOLOGIES, Graph, build_topology, period_spectral_gap

#: passes over a vector's bytes of the arithmetic the gossip parts charge (op kind ``arith``)
ADD = 3  # a.add_(b): reads a and b, writes a
SCALE = 2  # v * c (v / w): reads v, writes the result


class Round:
    """One in-flight mixing round of a flat vector."""

    def __init__(self, rank: int, own: torch.Tensor, handles: list[Handle], recv: dict[int, torch.Tensor],
                 clock=None):
        self.rank, self.own, self._handles, self._recv = rank, own, handles, recv
        self._done = False
        self.clock = clock  # where the mixing's own arithmetic is charged (op-cost model)

    def _finish(self) -> None:
        if not self._done:
            for h in self._handles:
                h.wait()
            self._done = True

    def received(self) -> list[torch.Tensor]:
        """The in-peers' scaled vectors, in increasing source rank (waits for them)."""
        self._finish()
        return [self._recv[s] for s in sorted(self._recv)]

    def absorb_into(self, x: torch.Tensor, w: torch.Tensor) -> None:
        """``[x, w] += v`` for every received ``v`` (overlap SGP's late mixing; waits for them).
        Charged: 3 passes of the vector's bytes per ``v`` (``arith``)."""
        for v in self.received():
            x.add_(v[:-1])
            w.add_(v[-1:])
            if self.clock is not None:
                self.clock.charge_op("arith", ADD * nbytes(v))

    def kept(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Copies of this rank's own share ``[x, w]`` (what it keeps); charged one ``copy``."""
        if self.clock is not None:
            self.clock.charge_op("copy", nbytes(self.own))
        return self.own[:-1].clone(), self.own[-1:].clone()

    def wait(self) -> torch.Tensor:
        """``(W v)_rank``: own share plus the received shares, summed in source order."""
        self._finish()
        parts = {self.rank: self.own, **self._recv}
        srcs = sorted(parts)
        out = parts[srcs[0]].clone()
        for s in srcs[1:]:
            out.add_(parts[s])
        if self.clock is not None:  # the clone (copy) and k additions of 3 vectors' bytes each
            nb = nbytes(self.own)
            self.clock.charge_op("copy", nb)
            self.clock.charge_op("arith", ADD * nb * (len(srcs) - 1))
        return out


def start_round(comm: Communicator, graph: Graph, rank: int, itr: int, vec: torch.Tensor) -> Round:
    """Post the sends and receives of ``W(itr) @ v`` for this rank; returns at once."""
    out_peers, in_peers = graph.out_peers(rank, itr), graph.in_peers(rank, itr)
    share = vec * graph.weight(rank, itr)
    comm.clock.charge_op("arith", SCALE * nbytes(vec))  # the share: read v, write v / (k + 1)
    handles: list[Handle] = []
    recv: dict[int, torch.Tensor] = {}
    for src in in_peers:  # post receives first: a peer's send never waits for us
        recv[src] = torch.empty_like(share)
        handles.append(comm.irecv(recv[src], src))
    for dst in out_peers:
        handles.append(comm.isend(share, dst))
    return Round(rank, share, handles, recv, comm.clock)


def round_ops_s(p: sc.Point, received: int, sent: int) -> float:
    """The op costs of one mixing round of a model-sized vector at this rank, at the closed form's
    point ``p`` (:class:`impls.comm.stepcost.Point`), as its parts charge them, every one on the
    rank's own timeline (a simulated rank sleeps them before its next interaction): the share
    (:func:`start_round`, ``SCALE``), the staging of each message received and sent
    (:data:`impls.comm.communicator.STAGE_PASSES`: the one cost of a round that is not a few % of a
    paper step, ``B / stage_bw`` each) and the sum (:meth:`Round.wait`: the clone, ``ADD`` per share
    received) or its late form (:meth:`Round.kept` and :meth:`Round.absorb_into`: the same passes)."""
    return sc.ops_s(p, arith=SCALE + ADD * received, copy=1,
                    stage=STAGE_PASSES["recv"] * received + STAGE_PASSES["send"] * sent)


def local_step_ops_s(p: sc.Point) -> float:
    """The local step of a gossip method at ``p``: the L2 term where the workload has one
    (:func:`add_weight_decay`, ``ADD``) and the workload's optimizer step (``optim_passes``)."""
    return sc.ops_s(p, arith=ADD if p.weight_decay else 0) + sc.optimizer_s(p)


def pushsum_ops_s(p: sc.Point) -> float:
    """A PushSum step's own vector work at ``p`` (:class:`GossipAlgorithm`): the vector it mixes
    (:meth:`~GossipAlgorithm.model_vector`: the flatten and the ``cat``, a copy each) and the
    de-biasing (:meth:`~GossipAlgorithm.debiased_to_model`, ``SCALE``)."""
    return sc.ops_s(p, copy=2, arith=SCALE)


def topology_spec(spec: Any, key: str, symmetric_only: bool = False) -> dict[str, Any]:
    """Check a topology spec's name (world-size checks happen when the graph is built)."""
    spec = {"name": spec} if isinstance(spec, str) else spec
    if not isinstance(spec, Mapping) or "name" not in spec:
        raise ConfigError(f"{key}.name", f"missing; known: {', '.join(TOPOLOGIES.names())}")
    try:
        cls = TOPOLOGIES.get(spec["name"])
    except ConfigError:
        raise ConfigError(f"{key}.name", f"unknown topology {spec['name']!r}; "
                                         f"known: {', '.join(TOPOLOGIES.names())}") from None
    if symmetric_only and not cls.symmetric:
        sym = [n for n in TOPOLOGIES.names() if TOPOLOGIES.get(n).symmetric]
        raise ConfigError(f"{key}.name", f"{spec['name']!r} is directed (W not symmetric); this method needs a "
                                         f"symmetric doubly-stochastic graph: {', '.join(sym)}")
    return dict(spec)


def make_graph(spec: Mapping[str, Any], world: int) -> tuple[Graph, float]:
    """The graph and the spectral gap of one period of its mixing matrices (:func:`period_gap`)."""
    return build_topology(spec, world), period_gap(spec, world)


def period_gap(spec: Mapping[str, Any] | str, world: int) -> float:
    """The spectral gap of one period of graph ``spec``'s mixing matrices at ``world`` ranks.

    Computed once per (topology, world size) in a process: it costs O(n^2) memory and O(n^3)
    time (a 1024-rank exponential graph: 1.6 s), and a simulation runs every rank in one
    process.  A metric, not a check: the algorithms compute it at set-up, never when
    validation builds them at a node count (100,000 ranks would need an 80 GB matrix)."""
    try:
        key = json.dumps({"name": spec} if isinstance(spec, str) else dict(spec), sort_keys=True)
    except TypeError:  # not plain data: not cached
        return period_spectral_gap(build_topology(spec, world))
    return _period_gap(key, world)


@functools.lru_cache(maxsize=32)
def _period_gap(spec_json: str, world: int) -> float:
    return period_spectral_gap(build_topology(json.loads(spec_json), world))


@torch.no_grad()
def add_weight_decay(model: nn.Module, wd: float, clock=None) -> None:
    """``g += wd * p`` at the current parameters (where the gradient was computed); ``clock``:
    charged 3 passes of the parameters' bytes (``arith``: reads g and p, writes g)."""
    if wd:
        nb = 0
        for p in model.parameters():
            if p.grad is not None:
                p.grad.add_(p, alpha=wd)
                nb += p.numel() * p.element_size()
        if clock is not None:
            clock.charge_op("arith", ADD * nb)


@torch.no_grad()
def perturb(model: nn.Module, spread: float, seed: int, rank: int) -> None:
    """Add N(0, spread^2) noise drawn from ``(seed, rank)`` to every parameter."""
    if spread > 0:
        g = torch.Generator().manual_seed(seed * 1_000_003 + rank + 1)
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype).to(p.device), alpha=spread)


def local_sgd(optim_cfg, params, clock=None) -> tuple[LocalOptimizer, float]:
    """The workload's local optimizer without its coupled weight decay, and that weight decay.

    Gossip methods apply the optimizer to a vector other than the one the gradient
    was taken at (PushSum's numerator ``x``, or the mixed parameters), while the L2
    term belongs to the gradient's point: :func:`add_weight_decay` adds it there.
    (A decoupled decay, adamw's, stays in the optimizer: see :mod:`impls.optim`.)
    """
    return build_optimizer(optim_cfg, params, l2_outside=True, clock=clock)


class GossipAlgorithm(Algorithm):
    """Set-up shared by sgp, osgp, dpsgd and d2 (their configs have ``topology`` and
    ``init_spread``).  ``pushsum`` methods also keep ``x`` (the PushSum numerator, the
    replica at set-up) and ``w`` (the weight, 1), and checkpoint both."""

    optimizer_use = "local_then_mix"
    pushsum: bool = False

    def __init__(self, cfg, ctx):
        super().__init__(cfg, ctx)
        self.graph = build_topology(cfg.topology, ctx.world)  # O(n): validation builds this at every node count
        self.gap: float | None = None  # the graph's spectral gap (a metric), at set-up

    def setup(self, model: nn.Module) -> None:
        self.model = model
        if self.gap is None:  # O(n^2) memory, O(n^3) time: at set-up, never during validation
            self.gap = self._spectral_gap()
        if self.optimizer_use == "owns":  # the method applies lr and the L2 term itself
            self.optimizer, self.wd = None, self.ctx.optim.weight_decay
        else:
            self.optimizer, self.wd = local_sgd(self.ctx.optim, model.parameters(), self.comm.clock)
        self.broadcast_initial_state(model)
        perturb(model, self.cfg.init_spread, self.ctx.seed, self.ctx.rank)
        if self.pushsum:
            self.x = flat_params(model)
            self.w = torch.ones(1, dtype=self.x.dtype, device=self.x.device)

    # -- the PushSum vectors, each charging its own copies and arithmetic (op-cost model) --
    def add_weight_decay(self) -> None:
        """The L2 term at the parameters the gradient was taken at (:func:`add_weight_decay`)."""
        add_weight_decay(self.model, self.wd, self.comm.clock)

    def numerator_to_model(self) -> None:
        """``x`` into the model (the optimizer steps the numerator): no copy, the parameters
        become views of ``x`` (:func:`impls.comm.flat.write_params`)."""
        write_params(self.model, self.x)

    def model_vector(self) -> torch.Tensor:
        """``[the model's parameters, w]``, the vector a PushSum round mixes: the flatten and
        the ``cat``, one ``copy`` each."""
        vec = torch.cat([flat_params(self.model, self.comm.clock), self.w])
        self.comm.clock.charge_op("copy", nbytes(vec))
        return vec

    def debiased_to_model(self) -> None:
        """``z = x / w`` into the model: the division (2 passes, ``arith``; the parameters become
        views of ``z``, no copy)."""
        z = self.x / self.w
        self.comm.clock.charge_op("arith", SCALE * nbytes(z))
        write_params(self.model, z)

    def _spectral_gap(self) -> float:
        """The metric ``gossip/spectral_gap``: of one period of the graph (once per process)."""
        return period_gap(self.cfg.topology, self.ctx.world)

    def epoch_end(self, epoch: int) -> dict[str, float]:
        return {"gossip/spectral_gap": self.gap}

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        return {**state, "x": self.x.clone(), "w": self.w.clone()} if self.pushsum else state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if self.pushsum:
            self.x, self.w = state["x"].clone(), state["w"].clone()
