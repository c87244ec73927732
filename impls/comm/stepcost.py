"""Closed-form alpha-beta step times: the quantities and the shared terms.

A method's closed-form step time is the method's own fact, declared in its file
(:meth:`impls.protocol.Algorithm.step_cost`, ``impls/algorithms/<name>.py``) from the terms
here; the workflow asks for it (``distrepro_wf.claims.closedform.step_s``) beside every
simulated speed result and in the sensitivity analysis, whose derivations it documents.

A :class:`Point` holds what the simulation is built on: compute per step ``C``, model bytes
``B``, per-direction NIC bandwidth ``bw`` (the platform's beta,
:func:`impls.sim.platforms.alpha_beta`), end-to-end latency ``alpha``, node count ``n``, and
the uncertain parameters the sensitivity analysis varies.  One message costs ``m(S) = alpha +
o + S / bw'`` (:func:`message_s`) with ``o`` the per-message software overhead and ``bw' = bw *
efficiency * (1 - background)`` (:func:`flow_bandwidth`); the compute of a synchronous step
waiting on ``k`` workers is the slowest of ``k`` lognormal draws (:func:`sync_compute`).
Pure arithmetic: nothing here imports torch or SimGrid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

#: share of a step the backward pass takes (an all-reduce can hide behind it)
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
    #: the op-cost model's bandwidths (bytes/s, :mod:`impls.sim.opcost`: ``mem_gbps``, ``copy_gbps``,
    #: ``compress_gbps`` x 1e9); inf: free, as under a ``fixed`` profile that sets none (:func:`ops_s`)
    mem_bandwidth: float = math.inf
    copy_bandwidth: float = math.inf
    compress_bandwidth: float = math.inf
    #: the workload's local optimizer step in passes over the model (its ``bytes_touched``,
    #: :class:`impls.optim.LocalOptimizer`: SGD with momentum 5), charged ``optim`` at ``mem_bandwidth``
    optim_passes: float = 0.0
    #: the workload's coupled weight decay is non-zero: a method that adds the L2 term to the gradient
    #: itself (gossip, AD-PSGD: :func:`impls.families.gossip.add_weight_decay`) pays its passes
    weight_decay: bool = False
    #: the model's parameter sizes (bytes) in the order the backward pass completes them, where the
    #: profile knows them (``profile.model_layout``: the paper model's); (): not known
    layout: tuple[int, ...] = ()

    def with_(self, **kw: Any) -> "Point":
        return replace(self, **kw)


def ops_s(p: Point, arith: float = 0.0, copy: float = 0.0, compress: float = 0.0, stage: float = 0.0) -> float:
    """Local work on a step's critical path, in passes over one model's bytes ``B``, as the
    simulated clock charges it (:mod:`impls.sim.opcost`): ``B (arith / mem + copy / copy_bw +
    compress / compress_bw + stage / stage_bw)`` (``arith`` counts ``optim`` passes too: the same
    bandwidth; ``stage``: a payload between the device and the transport's host memory, one pass
    per direction, :mod:`impls.comm.communicator`).  Every term is free where the point leaves its
    bandwidth infinite (a ``fixed`` profile that sets none)."""
    return p.model_bytes * (arith / p.mem_bandwidth + copy / p.copy_bandwidth + compress / p.compress_bandwidth
                            + stage / p.stage_bandwidth)


def optimizer_s(p: Point) -> float:
    """The workload's local optimizer step (``optim_passes`` over the model, ``optim`` kind)."""
    return ops_s(p, arith=p.optim_passes)


def ring_allreduce_s(n: int, nbytes: float, alpha: float, bw: float) -> float:
    """The ring all-reduce of ``nbytes`` over ``n`` nodes: ``2 (n-1) (alpha + B / (n bw))``."""
    return 0.0 if n <= 1 else 2 * (n - 1) * (alpha + nbytes / (n * bw))


def ddp_buckets(layout: "tuple[int, ...] | list[int]", bucket_bytes: float, first_bytes: float) -> list[int]:
    """DDP's cut of parameters (``layout``: their bytes, backward order) into buckets: the first
    up to ``first_bytes``, then ``bucket_bytes``; a bucket closes before a parameter that would
    overflow it (a parameter larger than a bucket is a bucket of its own)."""
    sizes: list[int] = []
    size = 0
    for x in layout:
        if size and size + x > (first_bytes if not sizes else bucket_bytes):
            sizes.append(size)
            size = 0
        size += x
    sizes.append(size)
    return sizes


def bucket_pipeline_s(p: Point, shares: "list[float]", compute_s: float, ring, stage_s: float = 0.0) -> float:
    """A step whose all-reduce goes bucket by bucket as the backward pass completes them (DDP's,
    the simulated AR-SGD's): bucket ``k`` (``shares[k]`` = ``s_k`` of the model's bytes, ``f_k`` the shares of
    buckets ``0..k``) is ready at ``C' (1 - b o (1 - f_k))`` (``C'``: the slowest worker's
    compute, a straggler's included; ``b``: the backward share; ``o``: the overlap), its ring
    ``ring(s_k B)`` starts when it is ready and the previous bucket's is done; the step ends with
    the last ring, or the compute.  ``o = 1`` hides every bucket but the last behind a backward
    pass ``F`` times as long on a ``F``-times slow straggler; ``o = 0``: ``C' + sum_k ring(s_k B)``.
    ``stage_s``: the staging of the whole model (``sigma``), paid by the rank bucket by bucket
    before each ring leaves, on its own timeline: bucket ``k`` is ready ``f_k sigma`` later, and the
    compute ends ``sigma`` later."""
    end, done = 0.0, 0.0
    for s in shares:
        done += s
        ready = compute_s * (1 - BACKWARD_SHARE * p.overlap * (1 - min(done, 1.0))) + stage_s * min(done, 1.0)
        end = max(end, ready) + ring(s * p.model_bytes)
    return max(compute_s + stage_s, end)


def expected_max_factor(k: int, cv: float) -> float:
    """E[max of k lognormal draws of mean 1 and coefficient of variation cv] (Blom's
    approximation of the expected maximum of k standard normals)."""
    if cv <= 0 or k <= 1:
        return 1.0
    sigma = math.sqrt(math.log1p(cv * cv))
    z = NormalDist().inv_cdf((k - 0.375) / (k + 0.25))
    return math.exp(sigma * z - sigma * sigma / 2)


def flow_bandwidth(p: Point, flows_on_uplink: float = 0.0) -> float:
    """A flow's bandwidth: the NIC's, or its share of a rack uplink, less background traffic."""
    bw = p.bandwidth * p.efficiency
    if not p.rack_size:  # one switch: other jobs' traffic shares the NIC
        return bw * (1 - p.background)
    if flows_on_uplink > 0:  # racks: it shares the uplinks, with the flows that cross them
        bw = min(bw, p.uplink_bandwidth * p.efficiency * (1 - p.background) / flows_on_uplink)
    return bw


def message_s(p: Point, nbytes: float, flows_on_uplink: float = 0.0) -> float:
    """One message of ``nbytes``: ``alpha + o + S / bw'``."""
    return p.latency_s + p.msg_overhead_s + nbytes / flow_bandwidth(p, flows_on_uplink)


def sync_compute(p: Point, k: int) -> float:
    """Compute of a step that waits on ``k`` workers: ``C max(z_k, F)`` (the slowest draw, or the straggler)."""
    return p.compute_s * max(expected_max_factor(k, p.jitter), p.slow_factor)


def pair_flows(p: Point, senders: float = 1.0) -> float:
    """Flows crossing one rack uplink when a share ``senders`` of the nodes each sends to a random
    peer: ``senders r (n-r)/(n-1)``."""
    n, r = p.nodes, p.rack_size
    return 0.0 if not r or n <= r else senders * r * (n - r) / (n - 1)


def crosses_racks(p: Point) -> bool:
    """More nodes than one rack holds (``shared_hpc``): some traffic crosses an uplink."""
    return bool(p.rack_size and p.nodes > p.rack_size)


def server_round_s(p: Point, share: float) -> float:
    """A synchronous round through one server rank of compressed messages weighing ``share`` of
    a model: ``C_n + 2 (alpha + o + n S / bw')``, the server's NIC receiving then sending ``n``."""
    s = p.model_bytes * share
    return sync_compute(p, p.nodes) + 2 * (p.latency_s + p.msg_overhead_s + p.nodes * s / flow_bandwidth(p))


# the parameter-server family (impls/families/ps.py): a "step" is one *round*, ``n`` gradients
# applied; quantities per message of a model (``B`` bytes; ``k`` servers, each owning ``B/k``):
# ``sigma = B / stage_bandwidth`` the host/device staging of a payload, ``o`` the per-message
# overhead, ``delta = sigma + o``, ``D = B / bw'`` a model on the wire, ``a`` the server's apply
# (``apply_s``), ``C f_i`` worker ``i``'s compute (one straggler ``f = slow_factor``, the others 1).
# The derivations: distrepro_wf.claims.closedform's module docstring, item 7.


def worker_factors(p: Point) -> list[float]:
    """Each worker's compute factor: the straggler's ``slow_factor`` first, the others 1."""
    n = p.nodes
    return [p.slow_factor] + [1.0] * (n - 1) if p.slow_factor != 1.0 else [1.0] * n


def worker_cycle_s(p: Point, factor: float, servers: int = 1) -> float:
    """One blocking worker's push-pull cycle when nobody queues (its receive staging is slept
    while it waits, so hidden).  The push: the ``k`` parts are staged and sent one after
    another (``d_k = sigma/k + o`` each) and share the worker's NIC, so the last lands
    ``d_k + max(D, (k-1) d_k + D/k)`` after the compute; the servers apply and stage their reply
    parts as their parts land (``a/k + d_k``), and the last reply part needs the rest of the
    worker's NIC, ``max(D/k, D - (k-1) d_k)``.  ``k = 1``: ``C f + 2 (sigma + o + D + alpha) + a``."""
    k = servers
    D, dk = p.model_bytes / flow_bandwidth(p), p.model_bytes / p.stage_bandwidth / k + p.msg_overhead_s
    push = dk + max(D, (k - 1) * dk + D / k)
    reply = p.apply_s / k + dk + max(D / k, D - (k - 1) * dk)
    return p.compute_s * factor + push + reply + 2 * p.latency_s


def server_pushes_s(p: Point, servers: int = 1) -> float:
    """A round's ``n`` pushes at the servers.  A push's transfer is a rendezvous: it starts when
    the server posts its receive, and the server posts the next one only once it has applied the
    last push (``a/k``) and staged its reply (``sigma/k``, then the reply's overhead ``o``); the
    receive's own staging is slept while the push is on the wire.  So per push
    ``max(sigma, D)/k + sigma/k + a/k + o``: ``n`` times that (staging free: ``n (D/k + o)``, the
    server's link)."""
    k = max(1, int(servers))
    sigma, D = p.model_bytes / p.stage_bandwidth, p.model_bytes / flow_bandwidth(p)
    return p.nodes * (max(sigma, D) / k + sigma / k + p.apply_s / k + p.msg_overhead_s)


def async_round_s(p: Point, servers: int = 1, inflight: int = 1) -> float:
    """``ps_async``'s round: the smaller throughput of the workers' and the servers',
    ``T = max(n (max(sigma, D) + sigma + a)/k + n o, n / sum_i 1/t_i)`` (:func:`server_pushes_s`);
    with ``inflight b > 1`` a worker waits only for its ``b``-th oldest reply but still sleeps the
    staging of its push and of each reply:
    ``t_i -> max(C f_i + 2 sigma + k o, t_i / b)``."""
    k = max(1, int(servers))
    sigma = p.model_bytes / p.stage_bandwidth
    factors = worker_factors(p)
    cycles = [worker_cycle_s(p, f, k) for f in factors]
    if inflight > 1:  # the worker sleeps the staging of its push and, when it next looks, of the reply
        cycles = [max(p.compute_s * f + 2 * sigma + k * p.msg_overhead_s, t / inflight)
                  for f, t in zip(factors, cycles)]
    return max(server_pushes_s(p, k), p.nodes / sum(1 / t for t in cycles))
