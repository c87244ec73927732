"""Closed-form alpha-beta step times: what a simulated speed verdict predicts without a simulation.

Every simulated speed claim (``backend: simgrid``) is a model prediction.  This module gives the
same prediction in closed form, from the quantities the simulation is built on (:class:`Point`):
compute per step ``C``, model bytes ``B``, per-direction NIC bandwidth ``bw`` (the platform's
beta, :meth:`impls.sim.platforms.Platform.alpha_beta`), end-to-end latency ``alpha``, node
count ``n``, and the uncertain parameters the sensitivity analysis varies
(:mod:`distrepro_wf.claims.sensitivity`).  The claims table shows it beside every simulated speed
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
4. ``osgp`` and ``dpsgd`` (D-PSGD's default order, Lian et al.'s, overlaps its exchange):
   ``max(C_2, comm)``, ``comm = m(B)`` (OSGP, 1 peer) or ``alpha + o + k B/bw'`` (D-PSGD, ``k``
   neighbours a step: 2 on its default ``ring``, 1 on ``bipartite_exponential``; on racks at least
   one ring-boundary flow sharing an uplink with one other); D-PSGD with ``order:
   step_then_mix`` (SGP's order: step, then exchange and wait for its ``k`` neighbours) overlaps
   nothing: ``C_{k+1} + comm``;
5. ``adpsgd`` (asynchronous pairwise averaging, overlapped): ``max(C, m(B))`` per worker step
   (half the workers, the active ones, send at a time);
   a straggler slows only itself, so an epoch's rate is ``(n - 1 + 1/F) / n`` of the nominal;
6. the server-aggregated sign methods (``signum_mv`` with ``aggregation: server``,
   ``ef_blocksgdm``): ``C_n + 2 (alpha + o + n S / bw')``: the server's one
   NIC receives and sends ``n`` messages of ``S = B/32`` (packed signs), one phase after the
   other (``ps_sync``'s form when staging is free, item 7); ``signum_mv``
   with ``aggregation: allgather``: ``C_n + (n-1) m(B/32)``, a ring all-gather.

7. the parameter-server family (``ps_sync``, ``ps_async``, ``ps_ssp``, ``ps_cyclic``, ``ddcgu``;
   :func:`ps_step_s`, derivations there): a "step" is one *round*, ``n`` gradients applied (a
   shared epoch of ``S`` steps is ``S`` rounds, as a synchronous epoch is ``S`` steps), and the
   server's own costs are first-order there, so these closed forms keep the two op costs the
   simulated server pays per message: the host/device staging of every payload
   (``sigma = B / stage_bandwidth``, :mod:`impls.comm.communicator`) and the optimizer apply (``apply_s``).

What it leaves out: the other op costs of :mod:`impls.sim.opcost` (arithmetic, copies,
compression; the simulation charges them, the closed form does not: they are a few % of a paper
step), TCP slow start beyond the platform's latency factor, and flow contention other than the
rack uplinks of ``shared_hpc`` (``uplink_flows``).  A method outside this list has no closed form
(None).
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
#: the parameter-server family (impls/families/ps.py): :func:`ps_step_s`
PS_FAMILY = ("ps_sync", "ps_async", "ps_ssp", "ps_cyclic", "ddcgu")
ALGORITHMS = ("allreduce_sgd", "sgp", "osgp", "dpsgd", "adpsgd", "signum_mv_allgather", *SERVER_COMPRESSED, *PS_FAMILY)
#: the options of a parameter-server method's config that its closed form reads, with defaults
PS_OPTIONS = {"servers": 1, "staleness": 3, "inflight": 1}
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
    stage_bandwidth: float = math.inf  # host <-> device staging of a message (bytes/s; opcost stage_gbps)
    apply_s: float = 0.0  # a parameter server's optimizer apply of one model-sized gradient (s)

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


def step_s(algorithm: str, p: Point, peers: int = 1, **opts: Any) -> float | None:
    """Closed-form time of one step (s) of ``algorithm`` at ``p`` (module docstring); None for an
    algorithm without one.  ``opts``: a parameter-server method's options (:data:`PS_OPTIONS`,
    :func:`ps_step_s`)."""
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
        # k neighbours (ring: 2): kB through the NIC; across racks a ring boundary puts 2 flows on an uplink
        k = int(opts.get("neighbours", 2))
        cross = msg(B, 2.0) if p.rack_size and n > p.rack_size else 0.0
        comm = max(msg(k * B), cross)
        if opts.get("order") == "step_then_mix":  # step, then exchange and wait: nothing hidden
            return _sync_compute(p, k + 1) + comm
        return max(_sync_compute(p, 2), comm)
    if algorithm == "adpsgd":
        rate = (n - 1 + 1 / p.slow_factor) / n if n > 1 else 1 / p.slow_factor
        return max(p.compute_s, msg(B, _pair_flows(p, ADPSGD_ACTIVE))) / rate
    if algorithm == "signum_mv_allgather":  # a ring all-gather of the packed signs, each votes locally
        return _sync_compute(p, n) + (n - 1) * msg(B * SERVER_COMPRESSED["signum_mv"], 1.0 if p.rack_size else 0.0)
    if algorithm in SERVER_COMPRESSED:
        s = B * SERVER_COMPRESSED[algorithm]
        return _sync_compute(p, n) + 2 * (p.latency_s + o + n * s / _bw(p))
    if algorithm in PS_FAMILY:
        return ps_step_s(algorithm, p, **opts)
    return None


def _worker_cycle(p: Point, factor: float, servers: int = 1) -> float:
    """One blocking worker's push-pull cycle when nobody queues (its receive staging is slept
    while it waits, so hidden).  The push: the ``k`` parts are staged and sent one after
    another (``d_k = sigma/k + o`` each) and share the worker's NIC, so the last lands
    ``d_k + max(D, (k-1) d_k + D/k)`` after the compute; the servers apply and stage their reply
    parts as their parts land (``a/k + d_k``), and the last reply part needs the rest of the
    worker's NIC, ``max(D/k, D - (k-1) d_k)``.  ``k = 1``: ``C f + 2 (sigma + o + D + alpha) + a``."""
    k = servers
    D, dk = p.model_bytes / _bw(p), p.model_bytes / p.stage_bandwidth / k + p.msg_overhead_s
    push = dk + max(D, (k - 1) * dk + D / k)
    reply = p.apply_s / k + dk + max(D / k, D - (k - 1) * dk)
    return p.compute_s * factor + push + reply + 2 * p.latency_s


def ps_step_s(algorithm: str, p: Point, servers: int = 1, staleness: int = 3, inflight: int = 1,
              rounds: float | None = None) -> float:
    """Closed-form time of one *round* (``n`` gradients applied) of a parameter-server method.

    Quantities (per message of a model, ``B`` bytes; ``k`` = ``servers``, each owning ``B/k``):
    ``sigma = B / stage_bandwidth`` the host/device staging of a payload (the simulated ranks
    stage every send before it leaves and every receive when it is posted, :mod:`impls.comm.communicator`),
    ``o`` the per-message overhead (slept by the sender), ``delta = sigma + o``, ``D = B / bw'``
    a model on the wire, ``alpha`` the latency, ``a`` the server's apply (``apply_s``), ``C f_i``
    worker ``i``'s compute (one straggler ``f = slow_factor``, the others 1).

    1. A server applies pushes one at a time; per push it sleeps the staging of the receive
       and of the reply, the apply and the reply's overhead: ``s = 2 sigma/k + a/k + o``, and its
       NIC carries ``D/k`` in and ``D/k`` out.  A blocking worker's cycle when nobody queues is
       ``t_i`` (:func:`_worker_cycle`).
    2. ``ps_async`` (no barrier): throughput is the smaller of the workers' and the server's,
       ``T = max(n max(s, D/k), n / sum_i 1/t_i)``; the slow worker only removes its own share
       of the rate.  With ``inflight b > 1`` a worker waits only for its ``b``-th oldest reply,
       but still sleeps the staging of its push and of each reply it installs:
       ``t_i -> max(C f_i + 2 sigma + k o, t_i / b)``.  The server's receive from any worker is
       a rendezvous with one sender at a time (gloo's, and the simulated backend's,
       :mod:`impls.backends.sim`): pushes arrive one after another at the link's full rate
       while the reply to the worker just served leaves on the other direction, so pushes in
       and replies out pipeline and equal, jitter-free workers reach this steady state from
       the first round (2 and 4 workers on the netns testbed's link, within 1 %: tested; real
       ranks within 3-10 %, README, sim_vs_netns).  (An eager transport, every push flowing
       at once and shared max-min fairly, landed equal workers' pushes together and then
       their replies: a lockstep as slow as ``ps_sync``.)  With ``k > 1`` servers on a
       link-bound setting ``T`` is a lower bound: every server takes the workers in the same
       announcement order, so the servers tend to take the same worker's parts at once and
       those share that worker's link (ps_bottleneck, 32 workers on 10 GbE, ``k = 4``:
       ``T`` 0.71 s, simulated 1.32 s a step; one server: 2.83 s, simulated 2.89 s).
    3. ``ps_sync`` (``k = 1``): after the last push arrives the server applies (``a``), then
       stages the ``n`` replies one after another (``delta`` each) onto its link; the last
       reply lands ``a + delta + max(n D, (n-1) delta + D)`` later (the replies).  Then the
       pushes: the last worker served (the straggler, rank -1) computes (the slowest of ``n``
       draws, ``C_n = C max(f, z_n)``), stages and sends its push: ``C_n + delta + D``; where
       ``delta < D`` the replies share the link and the workers finish together, so their
       pushes share it too and the last lands ``C + delta + D + (n-1)(D - delta)`` after the
       replies, whichever is later (a slow worker's compute hides behind the others' pushes on
       a busy link).  So ``T = replies + pushes + 2 alpha``: the two-phase
       ``C + 2 (alpha + o + n B/bw')`` when staging is free (``delta = o``, ``a = 0``), and
       pipelined (``C_n + a + (n+1) delta + 2 D``) when staging is slower than the wire.
    4. ``ps_cyclic`` (fixed order, one push per worker per round): the server waits for each
       worker in turn, so a round is at least the slowest cycle (compute ``C max(f, z_n)``) and
       at least the server's and its link's ``n`` pushes: ``T = max(n max(s, D), max_i t_i)``.
       (The per-epoch fetch, ``n`` more replies an epoch, is left out: ``1/S`` of a round each.)
    5. ``ps_ssp`` (staleness bound ``s_b``): without a straggler the bound never binds (equal
       workers stay within a step of each other): ``ps_async``.  With one, in steady state the
       fast workers are ``s_b`` steps ahead and each takes one step per slow step, so a round
       lasts the slow worker's cycle, whose reply the server sends *after* the ``n - 1`` replies
       it releases with it (they pushed first): ``t_ssp = C f + delta + alpha + D + a +
       max(n delta + D, delta + n D) + alpha``; ``T = max(T_async, t_ssp)``.  The head start of
       ``(n-1) s_b`` pushes saves ``(n-1) s_b / n`` rounds once per run: given the run's
       ``rounds`` ``R``, ``T = max(T_async, t_ssp (1 - (n-1) s_b / (n R)))``: between ``ps_async``
       (``s_b -> inf``) and the synchronous wait for the straggler (``s_b = 0``, which binds on
       every round, straggler or not: ``t_ssp`` with ``C_n``, ``ps_sync``'s round when the
       replies pipeline).  (Sharded ``ps_ssp`` is charged as one server.)
    6. ``ddcgu`` (a token, gradients accumulated meanwhile): a worker's main loop never waits
       (its background activity pushes the accumulation at its turn), so the gradient rate is
       the workers' compute rate: ``T = n / sum_i 1/(C f_i)``; the token's pace changes how
       many gradients a push sums and their staleness, not the rate.

    Checked against short simulations (tests/test_ps_family.py, steady-state rounds)."""
    n, o, k = p.nodes, p.msg_overhead_s, max(1, int(servers))
    sigma, D, a = p.model_bytes / p.stage_bandwidth, p.model_bytes / _bw(p), p.apply_s
    delta = sigma + o
    factors = [p.slow_factor] + [1.0] * (n - 1) if p.slow_factor != 1.0 else [1.0] * n
    if algorithm == "ddcgu":
        return n / sum(1 / (p.compute_s * f) for f in factors)
    srv = n * max(2 * sigma / k + a / k + o, D / k)  # 1: the server's n pushes (applies, its link)

    def async_round() -> float:
        cycles = [_worker_cycle(p, f, k) for f in factors]
        if inflight > 1:  # the worker sleeps the staging of its push and, when it next looks, of the reply
            cycles = [max(p.compute_s * f + 2 * sigma + k * o, t / inflight) for f, t in zip(factors, cycles)]
        return max(srv, n / sum(1 / t for t in cycles))

    if algorithm == "ps_async":
        return async_round()
    if algorithm == "ps_sync":  # k servers: each stages and sends 1/k of every reply; a worker's NIC a whole model
        ds = sigma / k + o
        push = ds + max(D, (k - 1) * ds + D / k)  # a worker's k parts, staged one after another (_worker_cycle)
        replies = a / k + ds + max(n * D / k, (n - 1) * ds + D)
        pushes = max(_sync_compute(p, n) + push, p.compute_s + push + (n - 1) * max(0.0, D / k - ds))
        return replies + pushes + 2 * p.latency_s
    if algorithm == "ps_cyclic":
        slowest = _worker_cycle(p.with_(compute_s=_sync_compute(p, n)), 1.0, k)
        return max(srv, slowest)
    if algorithm == "ps_ssp":
        t_async = async_round()
        if p.slow_factor <= 1.0 and staleness > 0:
            return t_async
        # the bound binds: on the slow worker, or with s_b = 0 on the slowest draw of every round
        compute = p.compute_s * p.slow_factor if staleness > 0 else _sync_compute(p, n)
        t_ssp = compute + delta + 2 * p.latency_s + D + a + max(n * delta + D, delta + n * D)
        if rounds:
            t_ssp *= max(0.0, 1 - (n - 1) * staleness / (n * rounds))
        return max(t_async, t_ssp)
    raise ValueError(f"not a parameter-server method: {algorithm!r}; known: {', '.join(PS_FAMILY)}")


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


#: D-PSGD's neighbours a step by topology (impls/algorithms/dpsgd.py): a topology not listed
#: has no closed form here
DPSGD_NEIGHBOURS = {"ring": 2, "bipartite_exponential": 1}


def method_options(method_spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """The options of a method's config entry its closed form reads: a parameter-server method's
    (``{algorithm: {name: ps_async, servers: 4}}`` -> ``{"servers": 4}``), D-PSGD's order and
    neighbours a step (``{algorithm: {name: dpsgd, order: step_then_mix}}`` -> ``{"order":
    "step_then_mix", "neighbours": 2}``); {} otherwise; None for a D-PSGD topology without a
    closed form (:data:`DPSGD_NEIGHBOURS`)."""
    alg = (method_spec or {}).get("algorithm")
    if isinstance(alg, dict) and alg.get("name") == "dpsgd":
        topo = alg.get("topology") or "ring"
        topo = topo.get("name", "ring") if isinstance(topo, dict) else topo
        if topo not in DPSGD_NEIGHBOURS:
            return None
        return {"order": str(alg.get("order", "mix_then_step")), "neighbours": DPSGD_NEIGHBOURS[topo]}
    if not isinstance(alg, dict) or alg.get("name") not in PS_FAMILY:
        return {}
    return {k: int(alg[k]) for k in PS_OPTIONS if k in alg}
