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
checkpoints it with the parameters.

Hyperparameters:

* ``servers`` (1): server ranks; each owns an equal range of the flat parameters
  (:mod:`impls.ps`) and receives, averages and returns only that, so a server's traffic
  is ``1/servers`` of a model per worker per step.  Raise it when the server's link is the
  bottleneck (many workers, a big model).  The parameters are
  the same as with one server (tested).

Buffers (BatchNorm statistics) stay on each worker, as in DistBelief-style servers.
"""

from __future__ import annotations

from dataclasses import dataclass, field


from ..protocol import ServeContext, StepContext
from ..ps import ParameterServer
from . import register


@dataclass
class PSSyncConfig:
    servers: int = field(default=1, metadata={"min": 1})


@register("ps_sync")
class PSSync(ParameterServer):
    Config = PSSyncConfig

    def step(self, s: StepContext) -> dict[str, float]:
        sh = self.shards
        sends = [self.comm.isend(g, sh.rank(j)) for j, g in enumerate(sh.grads())]  # 1
        bufs = [sh.empty(n) for n in sh.sizes]
        for h in [self.comm.irecv(b, sh.rank(j)) for j, b in enumerate(bufs)]:  # 3
            h.wait()
        for h in sends:
            h.wait()
        sh.write(bufs)
        return {}

    def serve(self, sc: ServeContext) -> None:
        W, srv = self.ctx.world, self.server
        bufs = [self.shards.empty(self.shards.sizes[srv.j]) for _ in range(W)]
        for epoch in range(sc.start_epoch, sc.epochs):
            for i in range(sc.steps_per_epoch):
                for h in [self.comm.irecv(bufs[w], w) for w in range(W)]:  # 2
                    h.wait()
                g = bufs[0].clone()
                for b in bufs[1:]:
                    g.add_(b)
                srv.apply(g, sc.lr_at(epoch + i / sc.steps_per_epoch), 1.0 / W, W)
                out = srv.params()
                for h in [self.comm.isend(out, w) for w in range(W)]:  # 3
                    h.wait()
            self.end_epoch(sc, epoch, {})
