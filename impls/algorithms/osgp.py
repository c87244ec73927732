"""Overlap SGP (OSGP): SGP whose gossip runs while the next steps compute.

Paper: Assran, Loizou, Ballas, Rabbat, "Stochastic Gradient Push for Distributed Deep
Learning", ICML 2019, Section 3 ("Overlap SGP") and its bounded-delay analysis: a
message sent at iteration ``t`` may be absorbed up to ``tau`` iterations later; the
PushSum weight keeps the de-biased ``z = x / w`` correct under such delays, because
mass in flight is simply not yet counted in either ``x`` or ``w``.

Communication per step: as :mod:`~impls.algorithms.sgp` (``[x, w] / (k+1)`` to each
of ``k`` out-peers, non-blocking), but nobody waits for it in the same step.

Steps of :meth:`OSGP.step` at iteration ``t`` (the gradient was computed at ``z``):

1. ``g += weight_decay * z``; local momentum step on the numerator ``x`` (as SGP).
2. Split: keep ``[x, w] / (k+1)``, post the sends of the same share to this
   iteration's out-peers and the receives from its in-peers; do not wait.
3. Absorb every round sent at iteration ``<= t - tau``: wait for its messages (with
   ``tau >= 1`` they travelled during the forward/backward of the following steps)
   and add them to ``[x, w]``.
4. De-bias: the parameters become ``z = x / w``.

At the end of each epoch (and in ``close``) all rounds still in flight are absorbed,
so evaluation, ``consensus/distance`` and checkpoints see all the mass.

Hyperparameters:

* ``tau`` (default 1, the paper's one-step overlap): how many iterations a round may
  stay in flight.  Larger hides more latency but mixes with older information;
  ``tau: 0`` is plain SGP.
* ``topology``, ``init_spread``: as for ``sgp``.

Metrics: ``gossip/weight``, ``gossip/staleness`` (age in iterations of the oldest round
absorbed this step, 0 if none) per step; ``gossip/spectral_gap`` per epoch.

Differences from the reference code (checked by running it side by side):

* Order of step and send: here the rank takes its local step first and sends a share
  of the *post-step* ``[x, w]`` (step 1, then 2).  The reference sends a share of the
  *pre-step* value and applies the step only to the share it keeps, so its peers see
  this step one round later.  Both are the paper's bounded-delay PushSum and keep the
  de-biased average an SGD iterate, but the trajectories differ (not bit-comparable
  with the reference even at ``tau: 1``).
* Timing of absorption: the reference absorbs whatever has arrived at the start of an
  iteration (non-blocking) and blocks only every ``synch_freq`` iterations, so the
  delays depend on timing.  Here a round is absorbed exactly ``tau`` iterations after
  it was sent (waiting if it is late): same bounded-delay model, deterministic for a
  given seed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..comm import stepcost as sc
from ..families.gossip import (GossipAlgorithm, Round, local_step_ops_s, pushsum_ops_s, round_ops_s,
                               start_round, topology_spec)
from ..protocol import StepContext
from . import register


@dataclass
class OSGPConfig:
    tau: int = field(default=1, metadata={"min": 0})
    topology: Any = field(default_factory=lambda: {"name": "exponential", "peers": 1})
    init_spread: float = field(default=0.0, metadata={"min": 0})

    def validate(self, key: str) -> None:
        self.topology = topology_spec(self.topology, f"{key}.topology")


@register("osgp")
class OSGP(GossipAlgorithm):
    Config = OSGPConfig

    @classmethod
    def step_cost(cls, p: sc.Point, peers: int = 1, **opts) -> float:
        """SGP's exchange hidden behind the next step's compute, at steady state:
        ``max(C_2 + ops, p m(B))``; ``ops``, SGP's (the local step, the PushSum vector, the round
        with its staging), are the rank's own work, on its timeline with the compute, while the wire
        carries the last step's messages.  An epoch's end drains the exchange
        (:attr:`pipelined`): a short epoch's first step waits for none."""
        ops = local_step_ops_s(p) + pushsum_ops_s(p) + round_ops_s(p, peers, peers)
        return max(sc.sync_compute(p, 2) + ops, peers * sc.message_s(p, p.model_bytes, sc.pair_flows(p)))
    pushsum = True
    pipelined = True  # a round is absorbed tau steps later; the epoch's end absorbs the rest

    def __init__(self, cfg, ctx):
        super().__init__(cfg, ctx)
        self.inflight: deque[tuple[int, Round]] = deque()

    def _absorb(self, upto: int, now: int) -> int:
        """Add every in-flight round sent at iteration <= ``upto``; returns the max age at ``now``."""
        age = 0
        while self.inflight and self.inflight[0][0] <= upto:
            sent, rnd = self.inflight.popleft()
            rnd.absorb_into(self.x, self.w)
            age = max(age, now - sent)
        return age

    def step(self, s: StepContext) -> dict[str, float]:
        self.add_weight_decay()  # 1
        self.numerator_to_model()
        self.set_lr(s.lr)
        self.optimizer.step()
        rnd = start_round(self.comm, self.graph, self.ctx.rank, s.step, self.model_vector())  # 2
        self.x, self.w = rnd.kept()
        self.inflight.append((s.step, rnd))
        age = self._absorb(s.step - self.cfg.tau, s.step)  # 3
        self.debiased_to_model()  # 4
        return {"gossip/weight": float(self.w), "gossip/staleness": float(age)}

    def _flush(self) -> None:
        if self.inflight:
            last = self.inflight[-1][0]
            self._absorb(last, last + 1)
        self.debiased_to_model()

    def epoch_end(self, epoch: int) -> dict[str, float]:
        self._flush()
        return super().epoch_end(epoch)

    def close(self) -> None:
        self._flush()
