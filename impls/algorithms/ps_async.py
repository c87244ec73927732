"""Asynchronous parameter-server SGD (Downpour / A-PSGD): no barrier anywhere.

Papers: Dean et al., "Large Scale Distributed Deep Networks" (DistBelief's Downpour SGD,
NeurIPS 2012); Li et al., "Scaling Distributed Machine Learning with the Parameter Server"
(OSDI 2014); the A-PSGD baseline of Lian et al.'s AD-PSGD paper (ICML 2018), whose
abstract says such servers become a communication bottleneck as workers grow; the
staleness-aware learning rate of Zhang, Gupta, Lian, Liu, "Staleness-aware Async-SGD for
Distributed Deep Learning" (IJCAI 2016), as the Hitchhiker's survey cites it.

What is sent to whom, and when (``W`` workers, ``d`` parameters, :mod:`impls.ps`):

1. Worker: computes a gradient on the parameters it last pulled (server version ``v``),
   pushes it to every server (each its tensors' part, ``4 (d_j + 4)`` bytes with the
   header), and waits for the reply (the server's current parameters, same size).
2. Server: takes pushes in the order they arrive, from any worker; applies each at once
   with weight ``1/W`` (``W`` pushes move the model as far as one ``ps_sync`` step at the
   same learning rate); its *staleness* is the number of updates applied since ``v``
   (logged per push: ``push`` records of the server's rank, and ``ps/staleness`` in the
   worker's step record); it replies at once.
3. A fast worker therefore never waits for a slow one: epochs are shared
   (``step_schedule = "shared_epochs"``: epoch ``e`` ends after ``W * steps_per_epoch``
   steps of all workers together).  At the end every worker says "done" and receives the
   final parameters, so the evaluated models are equal.

The server receives and sends a model per push: ``2 W`` models per round, the bottleneck
the AD-PSGD paper names; sharding (``servers: k``) splits it over ``k`` ranks.

Hyperparameters:

* ``servers`` (1): server ranks, each owning an equal range of the flat parameters.  Raise it
  when the server's link saturates (the ``server_*`` columns show its bytes and time).
* ``staleness_lr`` (false): divide each push's step by its staleness (``max(1, tau)``),
  Zhang et al.'s rule; useful when staleness is large (many workers, big speed spread).

On real ranks the arrival order depends on timing, so two runs differ; on the simulated
platform simulated time orders the arrivals and a run is deterministic.  Differences from
DistBelief: no separate fetch/push periods (``n_fetch = n_push = 1``), and the update is
the workload's optimizer (momentum kept per push) rather than Adagrad.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol import ServeContext, StepContext
from ..ps import ParameterServer
from . import register


@dataclass
class PSAsyncConfig:
    servers: int = field(default=1, metadata={"min": 1})
    staleness_lr: bool = False


@register("ps_async")
class PSAsync(ParameterServer):
    Config = PSAsyncConfig
    step_schedule = "shared_epochs"

    def step(self, s: StepContext) -> dict[str, float]:
        grads = self.shards.grads()
        head = self.push_pull(grads, 1.0)  # 1
        return {"ps/staleness": head[1], "ps/grad_sum": float(sum(float(g.double().sum()) for g in grads))}

    def serve(self, sc: ServeContext) -> None:
        self.serve_arrivals(sc, bound=None, staleness_lr=self.cfg.staleness_lr)  # 2, 3

    def close(self) -> None:
        self.finish()
