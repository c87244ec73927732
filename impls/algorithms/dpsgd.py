"""D-PSGD: decentralized parallel SGD with symmetric doubly-stochastic gossip averaging.

Paper: Lian, Zhang, Zhang, Hsieh, Zhang, Liu, "Can Decentralized Algorithms
Outperform Centralized Algorithms? A Case Study for Decentralized Parallel Stochastic
Gradient Descent", NeurIPS 2017, Algorithm 1.  Every rank keeps its own replica
``x_i``; per iteration it averages with its neighbours through a symmetric
doubly-stochastic ``W`` (uniform weights ``1/(k+1)`` on a regular undirected graph)
and takes a local gradient step.  There is no PushSum weight: ``W`` being doubly
stochastic keeps the average of the replicas an SGD iterate.

Communication per step: the full parameter vector, scaled by ``1/(k+1)``, to each of
the ``k`` neighbours of this iteration (ring: 2; ``bipartite_exponential``: 1),
with non-blocking ``comm.isend/irecv``.

Steps, ``order: mix_then_step`` (Algorithm 1 of the paper, the default):

1. On entering ``computing()`` post the exchange of the current ``x_k``, so it
   travels while the forward/backward pass computes ``g = grad F_i(x_k)``.
2. ``g += weight_decay * x_k`` (the L2 term at the gradient's point).
3. Wait for the neighbours: ``x_{k+1/2} = sum_j W_ij x_{k,j}``.
4. Local momentum step from the mixed point: ``x_{k+1} = x_{k+1/2} - lr d`` with
   ``d`` the (Nesterov) momentum direction of ``g``; the momentum buffer stays local.

``order: step_then_mix`` (adapt-then-combine, the order of the SGP repository's
D-PSGD): step locally first, then mix the result, ``x_{k+1} = W (x_k - lr d)``.  With a
complete graph this makes every replica equal after each step and reproduces
all-reduce SGD exactly (the mean of the local momentum buffers follows the
all-reduce buffer's recursion); the spawn tests use that.

Hyperparameters:

* ``topology`` (default ``ring``, the paper's): a symmetric graph (``ring``,
  ``complete``, ``bipartite_exponential``); a directed one is a config error.
  Sparser graphs send less but mix slower (``gossip/spectral_gap``).
* ``order`` (default ``mix_then_step``): see above.
* ``init_spread`` (default 0): as for ``sgp``.

Metrics: ``gossip/spectral_gap`` per epoch.  Lian et al. use plain SGD; momentum (a
local buffer, not mixed) comes from the workload's optimizer section, as for every
method here.

Difference from the reference code: the SGP repository's D-PSGD mixes with a
*non-symmetric* shift (each rank sends to ``+h`` and receives from ``-h``, so its ``W``
is only column-stochastic); here ``W`` is a symmetric matching or ring, as Lian et
al.'s analysis requires (symmetric doubly stochastic).  This file follows the paper,
not the reference.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from ..comm.flat import flat_params, write_params
from ..comm import stepcost as sc
from ..families.gossip import GossipAlgorithm, Round, local_step_ops_s, round_ops_s, start_round, topology_spec
from ..protocol import StepContext
from . import register


@dataclass
class DPSGDConfig:
    topology: Any = "ring"
    order: str = field(default="mix_then_step", metadata={"choices": ("mix_then_step", "step_then_mix")})
    init_spread: float = field(default=0.0, metadata={"min": 0})

    def validate(self, key: str) -> None:
        self.topology = topology_spec(self.topology, f"{key}.topology", symmetric_only=True)


@register("dpsgd")
class DPSGD(GossipAlgorithm):
    Config = DPSGDConfig
    #: neighbours a step by topology (a topology not listed has no closed form)
    closed_form_neighbours = {"ring": 2, "bipartite_exponential": 1}

    @classmethod
    def closed_form_options(cls, spec) -> dict | None:
        """Its order and neighbours a step (``{order: step_then_mix}`` -> ``{"order":
        "step_then_mix", "neighbours": 2}``); None on a topology without a closed form."""
        topo = spec.get("topology") or "ring"
        topo = topo.get("name", "ring") if isinstance(topo, dict) else topo
        if topo not in cls.closed_form_neighbours:
            return None
        return {"order": str(spec.get("order", "mix_then_step")), "neighbours": cls.closed_form_neighbours[topo]}

    @classmethod
    def step_cost(cls, p: sc.Point, peers: int = 1, neighbours: int = 2, order: str = "mix_then_step",
                  **opts) -> float:
        """Lian et al.'s order overlaps its exchange: ``max(C_2, comm)``, ``comm = alpha + o +
        k B/bw'`` (``k`` neighbours a step through one NIC; on racks at least one ring-boundary
        flow sharing an uplink with one other); ``step_then_mix`` (SGP's order: step, then
        exchange and wait for the ``k`` neighbours) hides nothing: ``C_{k+1} + comm``.  Either
        order adds the op costs the rank pays in turn, ``ops``: the flatten of its parameters (a
        copy), the round with its staging of ``k`` messages in and ``k`` out
        (:func:`~impls.families.gossip.round_ops_s`) and the local step; in Lian et al.'s order
        they sit before the compute (the flatten, the share, the staging: the messages leave after
        them) and after the wait (the sum, the local step), so they hide behind neither."""
        k = int(neighbours)
        cross = sc.message_s(p, p.model_bytes, 2.0) if sc.crosses_racks(p) else 0.0
        comm = max(sc.message_s(p, k * p.model_bytes), cross)
        ops = sc.ops_s(p, copy=1) + round_ops_s(p, k, k) + local_step_ops_s(p)
        if order == "step_then_mix":  # step, then exchange and wait: nothing hidden
            return sc.sync_compute(p, k + 1) + comm + ops
        return max(sc.sync_compute(p, 2), comm) + ops

    def __init__(self, cfg, ctx):
        super().__init__(cfg, ctx)
        self.pending: Round | None = None

    @contextlib.contextmanager
    def computing(self, s: StepContext):
        if self.cfg.order == "mix_then_step":  # 1
            self.pending = start_round(self.comm, self.graph, self.ctx.rank, s.step,
                                       flat_params(self.model, self.comm.clock))
        yield

    def step(self, s: StepContext) -> dict[str, float]:
        self.add_weight_decay()  # 2
        self.set_lr(s.lr)
        clock = self.comm.clock  # the flatten and the write back charge their copies (impls.comm.flat)
        if self.cfg.order == "mix_then_step":
            if self.pending is None:
                raise RuntimeError("dpsgd: step() without computing() (the exchange starts there)")
            write_params(self.model, self.pending.wait())  # 3
            self.pending = None
            self.optimizer.step()  # 4
        else:
            self.optimizer.step()
            mixed = start_round(self.comm, self.graph, self.ctx.rank, s.step, flat_params(self.model, clock)).wait()
            write_params(self.model, mixed)
        return {}

    def close(self) -> None:
        if self.pending is not None:
            self.pending.wait()

