"""Closed-form alpha-beta step times: what a simulated speed verdict predicts without a simulation.

Every simulated speed claim (``backend: simgrid``) is a model prediction.  This module gives the
same prediction in closed form, from the quantities the simulation is built on (:class:`Point`):
compute per step ``C``, model bytes ``B``, per-direction NIC bandwidth ``bw`` (the platform's
beta, :meth:`impls.sim.platforms.Platform.alpha_beta`), end-to-end latency ``alpha``, node
count ``n``, and the uncertain parameters the sensitivity analysis varies
(:mod:`distrepro_wf.sensitivity`).  The claims table shows it beside every simulated speed
result (``closed_form``), so a reader sees that e.g. SGP/AR = 0.826 simulated is 0.833 closed-form.

Step time of each method (one message ``m(S) = alpha + o + S / bw'`` with ``o`` the per-message
software overhead and ``bw' = bw * efficiency * (1 - background)``):

1. compute of a synchronous step: the slowest of ``k`` lognormal draws of mean ``C`` and
   coefficient of variation ``jitter`` (``k = n`` for a global barrier, 2 for a method that waits
   on one in-neighbour), approximated by ``C * exp(sigma z_k - sigma^2/2)`` with ``z_k`` Blom's
   expected maximum of ``k`` standard normals; a straggler (``slowNxF``) multiplies the
   slowest worker's compute by ``F``;
2. ``allreduce_sgd``: ``C_n + max(0, R - overlap * (2/3) C)``, ``R = 2 (n-1) (alpha + o + B /
   (n bw' e_AR))`` the ring all-reduce (``e_AR``: the platform's ``allreduce_efficiency``;
   ``overlap``: the fraction of the backward pass, 2/3 of the step, the all-reduce hides, as
   DDP's bucketed all-reduce does);
3. ``sgp`` (push-sum, ``p`` peers, not overlapped): ``C_2 + p m(B)``: one message per peer;
4. ``osgp`` and ``dpsgd`` (our D-PSGD overlaps its exchange; 2 ring neighbours):
   ``max(C_2, comm)``, ``comm = m(B)`` (OSGP, 1 peer) or ``alpha + o + 2B/bw'`` (D-PSGD; on racks
   at least one ring-boundary flow sharing an uplink with one other);
5. ``adpsgd`` (asynchronous pairwise averaging, overlapped): ``max(C, m(B))`` per worker step
   (half the workers, the active ones, send at a time);
   a straggler slows only itself, so an epoch's rate is ``(n - 1 + 1/F) / n`` of the nominal;
6. ``ps_sync`` and the server-aggregated sign methods (``signum_mv`` with ``aggregation: server``,
   ``ef_blocksgdm``): ``C_n + 2 (alpha + o + n S / bw')``: the server's one
   NIC receives and sends ``n`` messages of ``S`` (``B``; ``B/32`` for packed signs); ``signum_mv``
   with ``aggregation: allgather``: ``C_n + (n-1) m(B/32)``, a ring all-gather.

What it leaves out: the op costs of :mod:`impls.sim.opcost` (arithmetic, copies, compression;
the simulation charges them, the closed form does not: they are a few % of a paper step), TCP
slow start beyond the platform's latency factor, and flow contention other than the rack uplinks
of ``shared_hpc`` (``uplink_flows``).  A method outside this list has no closed form (None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

#: algorithms whose step time this module knows (the methods of the speed claims)
#: methods that aggregate through one server rank: the share of a model each message weighs
#: (packed signs: 1 bit of 32; ef_blocksgdm's per-block scales are negligible)
SERVER_COMPRESSED = {"signum_mv": 1 / 32, "ef_blocksgdm": 1 / 32}
ALGORITHMS = ("allreduce_sgd", "sgp", "osgp", "dpsgd", "adpsgd", "ps_sync", "signum_mv_allgather", *SERVER_COMPRESSED)
#: AD-PSGD: share of the workers that are active (send their model) at a time (bipartite pairs)
ADPSGD_ACTIVE = 0.5
#: share of a step the backward pass takes (the all-reduce can hide behind it)
BACKWARD_SHARE = 2 / 3


@dataclass(frozen=True)
class Point:
    """One point of the model: the nominal platform and profile, or one perturbed."""

    compute_s: float  # C: compute per step (s)
    model_bytes: float  # B: bytes of one model / gradient message
    bandwidth: float  # bw: per-direction NIC bandwidth (bytes/s)
    latency_s: float  # alpha: end-to-end latency of a message (s)
    nodes: int  # n: workers
    efficiency: float = 1.0  # achieved fraction of bw for every message
    allreduce_efficiency: float = 1.0  # the platform's all-reduce bus efficiency (fitted, bench)
    msg_overhead_s: float = 0.0  # o: per-message software overhead (s)
    background: float = 0.0  # share of the bottleneck link taken by other jobs' traffic
    jitter: float = 0.0  # coefficient of variation of a step's compute
    overlap: float = 0.0  # share of the backward pass the all-reduce hides (0: none, 1: all)
    slow_factor: float = 1.0  # one straggler computes slow_factor times slower
    uplink_bandwidth: float = math.inf  # shared_hpc: a rack's uplink (bytes/s), shared
    rack_size: int = 0  # shared_hpc: nodes per rack (0: one switch)

    def with_(self, **kw: Any) -> "Point":
        return replace(self, **kw)


def ring_allreduce_s(n: int, nbytes: float, alpha: float, bw: float) -> float:
    """The ring all-reduce of ``nbytes`` over ``n`` nodes: ``2 (n-1) (alpha + B / (n bw))``."""
    return 0.0 if n <= 1 else 2 * (n - 1) * (alpha + nbytes / (n * bw))


def expected_max_factor(k: int, cv: float) -> float:
    """E[max of k lognormal draws of mean 1 and coefficient of variation cv] (Blom's
    approximation of the expected maximum of k standard normals)."""
    if cv <= 0 or k <= 1:
        return 1.0
    sigma = math.sqrt(math.log1p(cv * cv))
    z = NormalDist().inv_cdf((k - 0.375) / (k + 0.25))
    return math.exp(sigma * z - sigma * sigma / 2)


def _bw(p: Point, flows_on_uplink: float = 0.0) -> float:
    """A flow's bandwidth: the NIC's, or its share of a rack uplink, less background traffic."""
    bw = p.bandwidth * p.efficiency
    if not p.rack_size:  # one switch: other jobs' traffic shares the NIC
        return bw * (1 - p.background)
    if flows_on_uplink > 0:  # racks: it shares the uplinks, with the flows that cross them
        bw = min(bw, p.uplink_bandwidth * p.efficiency * (1 - p.background) / flows_on_uplink)
    return bw


def _sync_compute(p: Point, k: int) -> float:
    return p.compute_s * max(expected_max_factor(k, p.jitter), p.slow_factor)


def _pair_flows(p: Point, senders: float = 1.0) -> float:
    """Flows crossing one rack uplink when a share ``senders`` of the nodes each sends to a random
    peer: ``senders r (n-r)/(n-1)``."""
    n, r = p.nodes, p.rack_size
    return 0.0 if not r or n <= r else senders * r * (n - r) / (n - 1)


def step_s(algorithm: str, p: Point, peers: int = 1) -> float | None:
    """Closed-form time of one step (s) of ``algorithm`` at ``p`` (module docstring); None for an
    algorithm without one."""
    n, B, o = p.nodes, p.model_bytes, p.msg_overhead_s
    msg = lambda s, flows=0.0: p.latency_s + o + s / _bw(p, flows)  # noqa: E731
    if algorithm == "allreduce_sgd":
        bw = _bw(p, 1.0 if p.rack_size and n > p.rack_size else 0.0) * p.allreduce_efficiency
        ring = ring_allreduce_s(n, B, p.latency_s + o, bw)
        return _sync_compute(p, n) + max(0.0, ring - p.overlap * BACKWARD_SHARE * p.compute_s)
    if algorithm == "sgp":
        return _sync_compute(p, 2) + peers * msg(B, _pair_flows(p))
    if algorithm == "osgp":
        return max(_sync_compute(p, 2), peers * msg(B, _pair_flows(p)))
    if algorithm == "dpsgd":
        # two ring neighbours: 2B through the NIC; across racks a ring boundary puts 2 flows on an uplink
        cross = msg(B, 2.0) if p.rack_size and n > p.rack_size else 0.0
        return max(_sync_compute(p, 2), msg(2 * B), cross)
    if algorithm == "adpsgd":
        rate = (n - 1 + 1 / p.slow_factor) / n if n > 1 else 1 / p.slow_factor
        return max(p.compute_s, msg(B, _pair_flows(p, ADPSGD_ACTIVE))) / rate
    if algorithm == "signum_mv_allgather":  # a ring all-gather of the packed signs, each votes locally
        return _sync_compute(p, n) + (n - 1) * msg(B * SERVER_COMPRESSED["signum_mv"], 1.0 if p.rack_size else 0.0)
    if algorithm == "ps_sync" or algorithm in SERVER_COMPRESSED:
        s = B * SERVER_COMPRESSED.get(algorithm, 1.0)
        return _sync_compute(p, n) + 2 * (p.latency_s + o + n * s / _bw(p))
    return None


def method_algorithm(method_spec: dict[str, Any] | None, method: str) -> tuple[str, int]:
    """(algorithm name, peers) of a config method entry (``sgp_1peer: {algorithm: {name: sgp,
    topology: {peers: 1}}}`` -> ("sgp", 1); ``allreduce_sgd: {}`` -> ("allreduce_sgd", 1))."""
    alg = (method_spec or {}).get("algorithm", method)
    if isinstance(alg, str):
        return alg, 1
    topo = alg.get("topology") or {}
    name = alg.get("name", method)
    if name == "signum_mv" and alg.get("aggregation") == "allgather":
        name = "signum_mv_allgather"
    return name, int(topo.get("peers", 1)) if isinstance(topo, dict) else 1
