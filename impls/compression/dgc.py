"""Deep Gradient Compression: top-k of a locally accumulated, momentum-corrected gradient.

Paper: Lin et al., "Deep Gradient Compression: Reducing the Communication Bandwidth for
Distributed Training" (ICLR 2018).  Per call, with momentum ``m`` (state ``u``, ``v``)::

    u = m u + g            momentum correction: accumulate the velocity, not the gradient
    v = v + u              local accumulation (error feedback of what was not sent)
    send top-k(|v|);  v[sent] = 0;  u[sent] = 0     (momentum factor masking)

so the receiver applies the accumulated *velocity*: run the workload's optimizer without
momentum (``momentum: 0``), the momentum lives here.  Warm-up: over the first
``warmup_steps`` calls the density falls in ``warmup_stages`` equal stages as 25 %, 6.25 %,
1.56 %, 0.39 %, ... (the paper's 75 %, 93.75 %, 98.4375 %, 99.6 % sparsity over 4 epochs:
set ``warmup_steps`` to 4 epochs of steps), never below ``ratio``; then ``ratio``.
Not done: the paper's local gradient clipping and its sampled threshold estimate (exact
top-k here).  Do not add ``error_feedback: true``: the accumulation already is one.

On the wire, per message of ``d`` elements at density ``r`` (``k = ceil(r d)``, exact:
:func:`~impls.compression.keep_count`): values
(``k`` fp32) and indices (``k`` int32), ``8 k`` bytes.  ``k`` depends on the call count during
warm-up, which every worker of a synchronous method shares: :meth:`wire` gives the next call's
shapes.

Hyperparameters:

* ``ratio`` (0.001): the density after warm-up (the paper: 0.1 %).
* ``momentum`` (0.9): the momentum factor ``m`` (the optimizer's momentum moves here).
* ``warmup_steps`` (0 = none), ``warmup_stages`` (4): the warm-up described above.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch

from . import Compressor, keep_count, register
from .topk import scatter, top_k


@dataclass
class DGCConfig:
    ratio: float = field(default=0.001, metadata={"gt": 0, "max": 1})
    momentum: float = field(default=0.9, metadata={"min": 0, "lt": 1})
    warmup_steps: int = field(default=0, metadata={"min": 0})
    warmup_stages: int = field(default=4, metadata={"min": 1})


@register("dgc")
class DGC(Compressor):
    Config = DGCConfig

    def __init__(self, cfg: DGCConfig, seed: int = 0, layout: Sequence[int] | None = None):
        super().__init__(cfg, seed, layout)
        self.u: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.steps = 0

    def density(self, step: int) -> float:
        c = self.cfg
        if step < c.warmup_steps:
            stage = step * c.warmup_stages // c.warmup_steps
            return min(1.0, max(c.ratio, 0.25 ** (stage + 1)))
        return c.ratio

    def k(self, numel: int) -> int:
        return keep_count(self.density(self.steps), numel)

    def wire(self, numel: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
        k = self.k(numel)
        return [((k,), torch.float32), ((k,), torch.int32)]

    def encode(self, x: torch.Tensor) -> list[torch.Tensor]:
        g = x.reshape(-1).float()
        if self.u is None:
            self.u, self.v = torch.zeros_like(g), torch.zeros_like(g)
        self.u.mul_(self.cfg.momentum).add_(g)
        self.v.add_(self.u)
        parts = top_k(self.v, self.k(g.numel()))
        idx = parts[1].long()
        self.v[idx] = 0
        self.u[idx] = 0
        self.steps += 1
        return parts

    def decode(self, parts: Sequence[torch.Tensor], numel: int) -> torch.Tensor:
        return scatter(parts, numel)

    def state_dict(self) -> dict[str, Any]:
        return {"u": self.u, "v": self.v, "steps": self.steps}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        u, v = state.get("u"), state.get("v")  # copies: compress updates them in place
        self.u = None if u is None else u.clone()
        self.v = None if v is None else v.clone()
        self.steps = int(state.get("steps", 0))
