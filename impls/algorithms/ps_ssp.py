"""Stale-synchronous parallel SGD on a parameter server: bounded staleness.

Paper: Ho, Cipar, Cui, Kim, Lee, Gibbons, Gibson, Ganger, Xing, "More Effective
Distributed ML via a Stale Synchronous Parallel Parameter Server" (NeurIPS 2013); the
survey's middle ground between ``ps_sync`` (bulk-synchronous) and ``ps_async``.

Rule: a worker's clock ``c_i`` is the number of its pushes the server has applied; a
worker may start step ``c_i + 1`` only when ``c_i - min_j c_j <= s`` over the workers
still training (Ho et al.: "the fastest may be at most ``s`` clocks ahead of the slowest").

What is sent to whom, and when (:mod:`impls.families.ps`; the same messages as ``ps_async``):

1. Worker: pushes its gradient (header: rank, parameter version) to every server and
   waits for the reply.
2. Server: applies each push as it arrives (weight ``1/W``), logs its staleness, then
   releases the replies the rule allows; a worker more than ``s`` clocks ahead waits for
   its reply, which then carries the parameters at release (fresher than at its push).
   The lead each reply was released at is ``ps/gap`` (worker step records).
3. Epochs are shared (``shared_epochs``), as in ``ps_async``; a finished worker stops
   counting in the minimum, and all receive the final parameters at the end.

``s = 0`` is bulk-synchronous: every worker reads the parameters after all ``W`` pushes of
the round, so with plain SGD it equals ``ps_sync`` (1e-6, tested); with momentum the
server's buffer takes ``W`` updates per round, as in any per-push server.  ``s -> inf`` is
``ps_async``.

Hyperparameters:

* ``staleness`` (3): the bound ``s``.  Ho et al. use 3-10; larger hides longer stragglers
  but lets more stale gradients in.  With a worker ``r`` times slower than the rest, a
  bound below ``W``-ish makes the others wait for it every ``s`` steps.
* ``servers`` (1): as in ``ps_async``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..comm import stepcost as sc
from ..protocol import ServeContext, StepContext
from ..families.ps import ParameterServer
from . import register


@dataclass
class PSSSPConfig:
    staleness: int = field(default=3, metadata={"min": 0})
    servers: int = field(default=1, metadata={"min": 1})


@register("ps_ssp")
class PSSSP(ParameterServer):
    Config = PSSSPConfig
    step_schedule = "shared_epochs"
    timing_dependent = True  # staleness follows the workers' speeds

    @classmethod
    def step_cost(cls, p: sc.Point, peers: int = 1, servers: int = 1, staleness: int = 3, inflight: int = 1,
                  rounds: float | None = None, **opts) -> float:
        """Without a straggler the bound never binds: ``ps_async``'s round.  With one, a round
        lasts the slow worker's cycle (its reply after the ``n - 1`` it releases): ``t_ssp = C f +
        delta + alpha + D + a + max(n delta + D, delta + n D) + alpha``, less the head start of
        ``(n-1) s_b`` pushes over the run's ``rounds``; ``s_b = 0`` binds on every round."""
        n = p.nodes
        sigma, D, a = p.model_bytes / p.stage_bandwidth, p.model_bytes / sc.flow_bandwidth(p), p.apply_s
        delta = sigma + p.msg_overhead_s
        t_async = sc.async_round_s(p, servers, inflight)
        if p.slow_factor <= 1.0 and staleness > 0:
            return t_async
        # the bound binds: on the slow worker, or with s_b = 0 on the slowest draw of every round
        compute = p.compute_s * p.slow_factor if staleness > 0 else sc.sync_compute(p, n)
        t_ssp = compute + delta + 2 * p.latency_s + D + a + max(n * delta + D, delta + n * D)
        if rounds:
            t_ssp *= max(0.0, 1 - (n - 1) * staleness / (n * rounds))
        return max(t_async, t_ssp)

    def step(self, s: StepContext) -> dict[str, float]:
        grads = self.shards.grads()
        head = self.push_pull(grads, 1.0)  # 1
        return {"ps/staleness": head[1], "ps/gap": head[2],
                "ps/grad_sum": float(sum(float(g.double().sum()) for g in grads))}

    def serve(self, sc: ServeContext) -> None:
        self.serve_arrivals(sc, bound=self.cfg.staleness)  # 2, 3

    def close(self) -> None:
        self.finish()
