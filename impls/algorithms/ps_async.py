"""Asynchronous parameter-server SGD (Downpour / A-PSGD): no barrier anywhere.

Papers: Dean et al., "Large Scale Distributed Deep Networks" (DistBelief's Downpour SGD,
NeurIPS 2012); Li et al., "Scaling Distributed Machine Learning with the Parameter Server"
(OSDI 2014); the A-PSGD baseline of Lian et al.'s AD-PSGD paper (ICML 2018), whose
abstract says such servers become a communication bottleneck as workers grow; the
staleness-aware learning rate of Zhang, Gupta, Lian, Liu, "Staleness-aware Async-SGD for
Distributed Deep Learning" (IJCAI 2016), as the Hitchhiker's survey cites it.

What is sent to whom, and when (``W`` workers, ``d`` parameters, :mod:`impls.families.ps`):

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

With ``inflight: B > 1`` a worker does not wait for its reply (DistBelief's Downpour
replicas push and fetch in the background): it pushes, installs every reply that has
already arrived, and computes its next gradient at once; only with ``B`` pushes
unanswered does it wait for the oldest.  On a fast network the replies arrive within a
gradient's compute and nothing changes; when the server's link is congested the replies
lag, every worker runs ``B`` pushes ahead of its parameters, and the staleness grows from
about ``W`` to about ``B W`` updates: the "significantly worse convergence when the
traffic to the parameter server is congested" of the AD-PSGD paper's abstract.  With
``B = 1`` (a worker waits for each reply) congestion costs time but not staleness: every
worker still sees each other worker's update once per round.

The server receives and sends a model per push: ``2 W`` models per round, the bottleneck
the AD-PSGD paper names; sharding (``servers: k``) splits it over ``k`` ranks.

On the wire (gloo, and the simulated backend, which models its protocol): the server's
receive from any worker is matched with one sender, the first whose push was announced,
and a push's data leaves the worker only then.  So pushes reach the server one after
another, each at the link's full rate, while the reply to the worker just served leaves
on the other direction of the server's link: pushes in and replies out overlap, and a
link-bound server's round is ``W`` pushes, not ``W`` pushes then ``W`` replies.  With
``k`` servers every server takes the workers in the same (announcement) order, so they
tend to take the same worker's ``k`` parts at once, which then share that worker's link:
sharding relieves a link-bound server by less than ``k`` (32 workers on 10 GbE, four
servers: 2.2x, not 4x).

Hyperparameters:

* ``servers`` (1): server ranks, each owning an equal range of the flat parameters.  Raise it
  when the server's link saturates (the ``server_*`` columns show its bytes and time).
* ``inflight`` (1): pushes a worker may have unanswered.  1 is the blocking worker; 2-4 is
  Downpour's background fetch, which hides the reply's transfer behind compute when the
  network is fast, and multiplies the staleness when it is not (watch ``staleness_mean``).
* ``staleness_lr`` (false): divide each push's step by its staleness (``max(1, tau)``),
  Zhang et al.'s rule; useful when staleness is large (many workers, big speed spread).

On real ranks the arrival order depends on timing, so two runs differ; on the simulated
platform simulated time orders the arrivals and a run is deterministic.  Differences from
DistBelief: no separate fetch/push periods (``n_fetch = n_push = 1``), and the update is
the workload's optimizer (momentum kept per push) rather than Adagrad.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..comm import stepcost as sc
from ..protocol import ServeContext, StepContext
from ..families.ps import ParameterServer
from . import register


@dataclass
class PSAsyncConfig:
    servers: int = field(default=1, metadata={"min": 1})
    staleness_lr: bool = False
    inflight: int = field(default=1, metadata={"min": 1})


@register("ps_async")
class PSAsync(ParameterServer):
    Config = PSAsyncConfig
    step_schedule = "shared_epochs"
    timing_dependent = True  # staleness follows the workers' speeds

    @classmethod
    def step_cost(cls, p: sc.Point, peers: int = 1, servers: int = 1, inflight: int = 1, **opts) -> float:
        """The smaller throughput of the workers' and the servers' (:func:`impls.comm.stepcost.async_round_s`)."""
        return sc.async_round_s(p, servers, inflight)

    def setup(self, model) -> None:
        super().setup(model)
        self.pending: deque = deque()  # (send handles, posted reply receives), oldest first

    def step(self, s: StepContext) -> dict[str, float]:
        grads = self.shards.grads()
        checksum = float(sum(float(g.double().sum()) for g in grads))
        if self.cfg.inflight == 1:
            head = self.push_pull(grads, 1.0)  # 1
            return {"ps/staleness": head[1], "ps/grad_sum": checksum}
        self.pending.append((self.push(grads, 1.0), self.post_pull()))  # 1, without waiting
        head = [float("nan")] * 2
        while self.pending and (len(self.pending) >= self.cfg.inflight or self._arrived(self.pending[0])):
            head = self._complete()
        return {"ps/staleness": head[1], "ps/grad_sum": checksum, "ps/inflight": float(len(self.pending))}

    def _arrived(self, entry) -> bool:
        return all(h.is_completed() for h in entry[1][1])

    def _complete(self) -> list[float]:
        """Install the oldest unanswered push's reply (replies come back in push order)."""
        sends, posted = self.pending.popleft()
        head = self.pull(posted)
        for h in sends:
            h.wait()
        return head

    def serve(self, sc: ServeContext) -> None:
        self.serve_arrivals(sc, bound=None, staleness_lr=self.cfg.staleness_lr)  # 2, 3

    def close(self) -> None:
        while self.pending:
            self._complete()
        self.finish()
