"""Synchronous parameter-server SGD: the reference every parameter-server mode is compared with.

Papers: the parameter-server architecture of Li et al. (OSDI 2014) and Dean et al.'s
DistBelief (NeurIPS 2012), in its synchronous form (the survey's "synchronous SGD with a
parameter server"; the A-PSGD baseline of the AD-PSGD paper is its asynchronous form).
``nodes`` counts the workers; this method adds ``servers`` server ranks after them
(``roles``), which the launcher starts as extra processes.

Communication per step (``W`` workers, ``d`` parameters, fp32):

* each worker -> the server: its gradient, ``4 d`` bytes (the server follows the learning-rate
  schedule itself);
* the server -> each worker: the updated parameters, ``4 d`` bytes.

So the server receives and sends ``W`` times a model per step: the bandwidth bottleneck
the decentralized papers point at as workers grow (the server's bytes are reported
separately from the workers': ``server_*`` columns of the tables).

Steps at iteration ``t``:

1. Worker: send ``g`` to the server; post the receive of the new parameters.
2. Server: receive every worker's ``g_i``, average ``g = (1/W) sum_i g_i`` (summed in
   rank order, so the result does not depend on arrival order), and take the workload's
   optimizer step (momentum, weight decay, any registered optimizer) on its copy.
3. Server: send the parameters to every worker; workers write them into their model.

Replicas start equal (rank 0's model broadcast to all, servers included) and stay equal,
so on the same data this equals ``allreduce_sgd`` up to float rounding of the sum (tested
to 1e-6 at 2 and 4 workers).  Only the server keeps optimizer state (momentum); it
checkpoints it with its parameters and version in the servers' one form (:mod:`impls.families.ps`).
The loop is :class:`impls.families.ps.ServerBase`'s synchronous rounds; step 2 is ``aggregate``.

Hyperparameters:

* ``servers`` (1): server ranks; each owns an equal range of the flat parameters
  (:mod:`impls.families.ps`) and receives, averages and returns only that, so a server's traffic
  is ``1/servers`` of a model per worker per step.  Raise it when the server's link is the
  bottleneck (many workers, a big model).  The parameters are
  the same as with one server (tested).

Buffers (BatchNorm statistics) stay on each worker, as in DistBelief-style servers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..protocol import StepContext
from ..families.ps import ParameterServer
from ..comm import stepcost as sc
from . import register


@dataclass
class PSSyncConfig:
    servers: int = field(default=1, metadata={"min": 1})


@register("ps_sync")
class PSSync(ParameterServer):
    Config = PSSyncConfig
    sync_collective = True  # a round waits for every worker's push

    @classmethod
    def step_cost(cls, p: sc.Point, peers: int = 1, servers: int = 1, **opts) -> float:
        """After the last push the servers apply (``a/k``) and stage the ``n`` replies one after
        another; then the pushes: the slowest worker's compute and its push, or, where staging is
        faster than the wire, every worker's push sharing the link, and never less than the server
        takes them: one at a time, each receive staged while its push is on the wire, ``n max(sigma,
        D)/k`` (where staging is slower than the wire the workers' pushes wait for it: ps_modes, 8
        workers, staging x0.25, 0.555 s a round simulated, 0.419 without this term, 0.555 with it):
        ``T = replies + pushes + 2 alpha`` (two-phase ``C + 2 (alpha + o + n B/bw')`` when staging
        is free)."""
        n, o, k = p.nodes, p.msg_overhead_s, max(1, int(servers))
        sigma, D, a = p.model_bytes / p.stage_bandwidth, p.model_bytes / sc.flow_bandwidth(p), p.apply_s
        ds = sigma / k + o  # k servers: each stages and sends 1/k of every reply; a worker's NIC a whole model
        push = ds + max(D, (k - 1) * ds + D / k)  # a worker's k parts, staged one after another
        replies = a / k + ds + max(n * D / k, (n - 1) * ds + D)
        receives = n * max(sigma, D) / k  # the server's: one push at a time, its receive staged meanwhile
        pushes = max(sc.sync_compute(p, n) + push, p.compute_s + push + (n - 1) * max(0.0, D / k - ds), receives)
        return replies + pushes + 2 * p.latency_s
    serve = ParameterServer.serve_rounds  # 2, 3 (aggregate below)

    def step(self, s: StepContext) -> dict[str, float]:
        sh = self.shards
        bufs = [sh.empty(n) for n in sh.sizes]
        self.exchange([[g] for g in sh.grads()], [[b] for b in bufs])  # 1, 3
        sh.write(bufs)
        return {}

    def message_parts(self) -> list[torch.Tensor]:
        return [self.shards.empty(self.shards.sizes[self.server.j])]

    def aggregate(self, msgs: list[list[torch.Tensor]], lr: float) -> list[torch.Tensor]:
        g = msgs[0][0].clone()  # 2
        for (b,) in msgs[1:]:
            g.add_(b)
        self.server.apply(g, lr, 1.0 / self.ctx.world, self.ctx.world)
        return [self.server.params()]  # 3
