"""Cyclic delayed updates on a parameter server: workers take turns in a fixed order.

Paper: Agarwal & Duchi, "Distributed Delayed Stochastic Optimization" (NeurIPS 2011),
its cyclic delayed architecture; the synchronous-vs-cyclic baseline of Hu et al.'s
dynamic-delay cyclic method (``ddcgu``).

What is sent to whom, and when (``W`` workers, :mod:`impls.families.ps`):

1. Worker ``i``: computes a gradient on the parameters of its last reply, pushes it
   (header: rank, parameter version) and waits for the reply.
2. Server: its ``t``-th update takes worker ``t mod W``'s push and nobody else's (it
   receives from that worker only, so a push that arrives early waits its turn), applies
   it with weight ``1/W``, and replies to that worker alone.
3. So worker ``i``'s gradient is applied ``W - 1`` updates after the parameters it was
   computed on were made (after the first round: delay ``i``); every worker takes
   ``steps_per_epoch`` steps per epoch (``local_epochs``).
4. At its epoch's end every worker fetches the server's current parameters (a header
   alone; the server answers each worker in turn after the epoch's last update), so the
   model evaluated and checkpointed is the server's, not the worker's last reply, which
   misses the last ``W - 1`` updates.

Compute overlaps: while worker ``i`` computes, the server serves the others.  But the
order is fixed, so a slow worker stalls the cycle once per round: this is what the
dynamic-delay method (``ddcgu``) removes.

Hyperparameters:

* ``servers`` (1): server ranks, each owning an equal range of the parameters; every one
  follows the same order, so sharding gives the same parameters (tested).

With one worker it is plain SGD (tested to 1e-6).  Agarwal & Duchi analyse the averaged
iterate and a ``1/sqrt(t)`` step; here the workload's optimizer and schedule apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..comm import stepcost as sc
from ..protocol import ServeContext, StepContext
from ..families.ps import ParameterServer, split, staleness_stats
from . import register


@dataclass
class PSCyclicConfig:
    servers: int = field(default=1, metadata={"min": 1})


@register("ps_cyclic")
class PSCyclic(ParameterServer):
    Config = PSCyclicConfig

    @classmethod
    def step_cost(cls, p: sc.Point, peers: int = 1, servers: int = 1, **opts) -> float:
        """The fixed order waits for each worker in turn: a round is at least the slowest cycle
        (compute ``C max(f, z_n)``) and at least the servers' ``n`` pushes."""
        k = max(1, int(servers))
        slowest = sc.worker_cycle_s(p.with_(compute_s=sc.sync_compute(p, p.nodes)), 1.0, k)
        return max(sc.server_pushes_s(p, k), slowest)

    def step(self, s: StepContext) -> dict[str, float]:
        grads = self.shards.grads()
        head = self.push_pull(grads, 1.0)  # 1
        return {"ps/staleness": head[1], "ps/grad_sum": float(sum(float(g.double().sum()) for g in grads))}

    def serve(self, sc: ServeContext) -> None:
        W, sh = self.ctx.world, self.server
        S = sc.steps_per_epoch * W
        buf = self.shards.buffer(sh.j)
        for epoch in range(sc.start_epoch, sc.epochs):
            stale, checksum = [], 0.0
            for t in range(S):
                w = t % W  # 2
                self.comm.irecv(buf, w).wait()
                g, (_, ver, _, _, _) = split(buf)
                tau = sh.version - ver
                sh.apply(g, sc.lr_at(epoch + t / S), 1.0 / W)
                stale.append(tau)
                checksum += float(g.double().sum())
                sc.log(epoch, epoch * S + t, {"ps/worker": w, "ps/staleness": tau, "ps/k": 1.0,
                                              "ps/version": sh.version})
                self.send_reply(w, [sh.version, tau, 0.0, 0.0, 0.0])
            for w in range(W):  # 4: each worker's fetch, answered with the epoch's final parameters
                self.comm.irecv(buf, w).wait()
                self.send_reply(w, [sh.version, 0.0, 0.0, 0.0, 0.0])
            self.drain_replies()
            self.end_epoch(sc, epoch, {**staleness_stats(stale), "ps/applied_sum": checksum})

    def epoch_end(self, epoch: int) -> dict[str, float]:
        if self.is_worker():
            self.fetch()  # 4
        return {}
