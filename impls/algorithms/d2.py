"""D^2: decentralized SGD with a variance-reduction correction for data that differs per worker.

Paper: Tang, Lian, Yan, Zhang, Liu, "D^2: Decentralized Training over Decentralized
Data", ICML 2018 (arXiv 1803.07068), Algorithm 1.  In matrix form (row ``i`` = rank
``i``'s replica, ``G_t`` its stochastic gradient at ``x_{t,i}``)::

    X_1     = W (X_0 - gamma G_0)                                  (plain D-PSGD step)
    X_{t+1} = W (2 X_t - X_{t-1} - gamma G_t + gamma G_{t-1})      (t >= 1)

The correction ``-(X_{t-1} - gamma G_{t-1})`` cancels the part of the gradient that
is specific to a worker's data, so the consensus error no longer grows with the
spread ``zeta^2`` of the workers' local objectives (Theorem 1).

Communication per step: the vector ``2 x_t - x_{t-1} - gamma g_t + gamma g_{t-1}``,
scaled by ``1/(k+1)``, to each neighbour (ring: 2), non-blocking ``comm.isend/irecv``.

Steps of :meth:`D2.step` at iteration ``t``:

1. ``g = grad F_i(x_t) + weight_decay * x_t``; ``u_t = lr_t * g``.
2. ``h = x_t - u_t`` if ``t = 0``, else ``h = 2 x_t - x_{t-1} - u_t + u_{t-1}``.
3. Keep ``x_t`` and ``u_t`` for the next iteration.
4. Mix: ``x_{t+1} = sum_j W_ij h_j`` (``lazy``: ``(h + sum_j W_ij h_j) / 2``).

Requirements, enforced at start-up with a config error:

* ``W`` symmetric doubly stochastic and fixed (the paper's setting): ``ring``,
  ``complete``, or ``bipartite_exponential`` with 2 ranks (otherwise it changes every
  iteration).
* Smallest eigenvalue of ``W`` above ``-1/3`` (the paper's assumption; D^2 diverges
  otherwise).  The uniform ring with an even number ``n >= 4`` of ranks has exactly
  ``-1/3``: ``mixing: auto`` (default) then mixes with ``(W + I) / 2`` (eigenvalues in
  ``[0, 1]``, as a third-party implementation always does), ``mixing: plain`` is an
  error, ``mixing: lazy`` always uses ``(W + I) / 2``.
* Plain SGD: ``workload.optimizer.momentum`` must be 0 (the paper has no momentum;
  what momentum would do to the correction is not analysed).  A learning-rate
  schedule is allowed: the correction uses ``lr_{t-1} g_{t-1}``, which keeps the
  mean of the replicas an exact SGD iterate, ``xbar_{t+1} = xbar_t - lr_t gbar_t``.

Hyperparameters: ``topology`` (default ``ring``), ``mixing`` (see above),
``init_spread`` (as for ``sgp``).  Metrics: ``gossip/spectral_gap`` (of the matrix
actually used) and ``gossip/lazy`` (1 if ``(W + I) / 2``) per epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import ConfigError
from ..comm.flat import flat_grads, flat_params, write_params
from ..families.gossip import GossipAlgorithm, add_weight_decay, start_round, topology_spec
from ..protocol import StepContext
from ..comm.topology import spectral_gap
from . import register


@dataclass
class D2Config:
    topology: Any = "ring"
    mixing: str = field(default="auto", metadata={"choices": ("auto", "plain", "lazy")})
    init_spread: float = field(default=0.0, metadata={"min": 0})

    def validate(self, key: str) -> None:
        self.topology = topology_spec(self.topology, f"{key}.topology", symmetric_only=True)


@register("d2")
class D2(GossipAlgorithm):
    Config = D2Config
    optimizer_use = "owns"
    # plain SGD (Tang et al. 2018, Algorithm 1): what momentum does to the correction is not analysed
    supported_optimizers = {"sgd": {"momentum": 0.0}}

    def __init__(self, cfg, ctx):
        super().__init__(cfg, ctx)
        if self.graph.period != 1:
            raise ConfigError("algorithm.topology", f"d2 needs a fixed W; {cfg.topology['name']!r} changes every "
                                                    f"iteration at {ctx.world} ranks (period {self.graph.period})")
        lam_min = self.graph.min_eigenvalue(0)  # O(1) for ring and complete: no n x n matrix at validation
        ok = lam_min > -1 / 3 + 1e-9
        if cfg.mixing == "plain" and not ok:
            raise ConfigError("algorithm.mixing", f"smallest eigenvalue of W is {lam_min:.4f}, D^2 needs > -1/3; "
                                                  "use mixing: lazy (or auto) to mix with (W + I) / 2")
        self.lazy = cfg.mixing == "lazy" or (cfg.mixing == "auto" and not ok)

    def _spectral_gap(self) -> float:
        """Of the matrix actually used (``(W + I) / 2`` when lazy)."""
        W = self.graph.mixing_matrix(0)
        return spectral_gap((W + torch.eye(self.ctx.world, dtype=W.dtype)) / 2 if self.lazy else W)

    def setup(self, model):
        super().setup(model)
        self.x_prev: torch.Tensor | None = None
        self.u_prev: torch.Tensor | None = None

    @torch.no_grad()
    def step(self, s: StepContext) -> dict[str, float]:
        clock = self.comm.clock  # the helpers charge their own copies and arithmetic (op-cost model)
        add_weight_decay(self.model, self.wd, clock)  # 1
        x = flat_params(self.model, clock)
        u = flat_grads(self.model, clock).mul_(s.lr)
        nb = x.numel() * x.element_size()
        # D^2's own arithmetic (charged here, as nothing else does it): u = lr g (2 passes), then
        # h = x - u (3) on the first step, else h = 2x - x' - u + u' (2 + 3 x 3 passes)
        clock.charge_op("arith", (2 + 3 if self.x_prev is None else 2 + 11) * nb)
        if self.x_prev is None:  # 2
            h = x - u
        else:
            h = x.mul(2).sub_(self.x_prev).sub_(u).add_(self.u_prev)
        self.x_prev, self.u_prev = x, u  # 3
        mixed = start_round(self.comm, self.graph, self.ctx.rank, s.step, h).wait()  # 4
        if self.lazy:
            mixed.add_(h).mul_(0.5)
            clock.charge_op("arith", 5 * nb)  # D^2's own: the lazy half-step (add 3, halve 2 passes)
        write_params(self.model, mixed)
        return {}

    def epoch_end(self, epoch: int) -> dict[str, float]:
        return {"gossip/spectral_gap": self.gap, "gossip/lazy": float(self.lazy)}

    def state_dict(self):
        return {"x_prev": self.x_prev, "u_prev": self.u_prev}

    def load_state_dict(self, state):
        self.x_prev, self.u_prev = state["x_prev"], state["u_prev"]
