"""Stochastic Gradient Push (SGP): local SGD steps plus PushSum gossip of the parameters.

Paper: Assran, Loizou, Ballas, Rabbat, "Stochastic Gradient Push for Distributed Deep
Learning", ICML 2019 (arXiv 1811.10792), Algorithm 1 and its Nesterov-momentum
variant (Appendix).  Each rank ``i`` holds a PushSum numerator ``x_i`` and a scalar
weight ``w_i`` (initially 1); the model it trains and evaluates is the de-biased
``z_i = x_i / w_i``, which is what the model's parameters hold between steps, so the
forward pass, evaluation and the runtime's ``consensus/distance`` all see ``z``.

Communication per step: to each of its ``k`` out-peers of this iteration's graph
(default: the 1-peer time-varying directed exponential graph, ``k = 1``) rank ``i``
sends ``[x_i, w_i] / (k + 1)`` (the model plus one float) with non-blocking
``comm.isend``, and receives the same from its in-peers with ``comm.irecv``; no
collective, no barrier.

Steps of :meth:`SGP.step` at iteration ``t`` (the gradient ``g`` was computed at ``z``):

1. ``g += weight_decay * z`` (the L2 term's gradient, at the same point).
2. Local momentum step on the numerator: ``u = m u + g``;
   ``x <- x - lr (g + m u)`` (Nesterov) or ``x <- x - lr u``.  ``u`` stays local.
3. PushSum: keep ``[x, w] / (k+1)``, send it to each out-peer of iteration ``t``,
   add what the in-peers sent: ``[x, w] <- sum_j P_ij [x_j, w_j]`` (column-stochastic ``P``).
4. De-bias: the parameters become ``z = x / w``.

Hyperparameters:

* ``topology`` (default ``{name: exponential, peers: 1}``): any graph of
  :mod:`impls.comm.topology`; ``peers: 2`` is the paper's 2-peer variant (more mixing,
  twice the bytes).  Directed graphs are fine: that is what the weight is for.
* ``init_spread`` (default 0): std of per-rank Gaussian noise added to the initial
  parameters (replicas initialised independently); 0 starts all replicas equal.
* ``log_mass`` (default false): also log ``gossip/mass``, this rank's sum of ``x``
  (PushSum conserves the sum over ranks when ``lr = 0``; used by the tests).

Metrics: ``gossip/weight`` per step; ``gossip/spectral_gap`` per epoch (of the
product of one period of the graph's mixing matrices).

Differences from the reference code (facebookresearch/stochastic_gradient_push), found
by running it side by side with this file: on the same graph the two are bit-identical.
Like the reference, the step is applied to the numerator as ``x <- x - lr d`` (the
paper's update; the reference does not rescale by ``w`` either).  The graphs differ:
the reference's exponential graph cycles its out-peers through ``+1, -1, +2, -2, +4,
...`` (mod n), while :mod:`impls.comm.topology` uses the paper's forward-only ``+2^j``
schedule.  The 2-peer variant here takes two consecutive entries of the forward-only
schedule per iteration (``+1, +2`` then ``+4, +8``, ...), which matches *neither* of
the reference's graphs (its 2-peer graph takes two entries of the alternating list,
e.g. ``+1, -1``); results at ``peers: 2`` are comparable in spectral gap and bytes,
not trajectory by trajectory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..comm import stepcost as sc
from ..families.gossip import (GossipAlgorithm, local_step_ops_s, pushsum_ops_s, round_ops_s, start_round,
                               topology_spec)
from ..protocol import StepContext
from . import register


@dataclass
class SGPConfig:
    topology: Any = field(default_factory=lambda: {"name": "exponential", "peers": 1})
    init_spread: float = field(default=0.0, metadata={"min": 0})
    log_mass: bool = False

    def validate(self, key: str) -> None:
        self.topology = topology_spec(self.topology, f"{key}.topology")


@register("sgp")
class SGP(GossipAlgorithm):
    Config = SGPConfig

    @classmethod
    def step_cost(cls, p: sc.Point, peers: int = 1, **opts) -> float:
        """Push-sum, not overlapped: ``C_2 + p m(B) + ops`` (compute waits on one in-neighbour; one
        message of the model per peer, on racks random pairs sharing the uplinks; ``ops``: the op
        costs the rank pays in turn, the local step, the PushSum vector and the round with its
        staging of ``p`` messages in and ``p`` out, :func:`~impls.families.gossip.round_ops_s`)."""
        ops = local_step_ops_s(p) + pushsum_ops_s(p) + round_ops_s(p, peers, peers)
        return sc.sync_compute(p, 2) + peers * sc.message_s(p, p.model_bytes, sc.pair_flows(p)) + ops
    pushsum = True
    variants = {"sgp_1peer": {"topology": {"name": "exponential", "peers": 1}},
                "sgp_2peer": {"topology": {"name": "exponential", "peers": 2}}}

    def step(self, s: StepContext) -> dict[str, float]:
        self.add_weight_decay()  # 1 (the parameters hold z)
        self.numerator_to_model()  # 2: the optimizer steps the numerator
        self.set_lr(s.lr)
        self.optimizer.step()
        vec = self.model_vector()
        mixed = start_round(self.comm, self.graph, self.ctx.rank, s.step, vec).wait()  # 3: W of iteration s.step
        self.x, self.w = mixed[:-1], mixed[-1:].clone()
        self.debiased_to_model()  # 4
        out = {"gossip/weight": float(self.w)}
        if self.cfg.log_mass:
            out["gossip/mass"] = float(self.x.double().sum())
        return out
