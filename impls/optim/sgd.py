"""Local SGD with momentum, Nesterov and L2 weight decay, the update of torch.optim.SGD.

Same arithmetic, op for op, as ``torch.optim.SGD(..., dampening=0)``'s single-tensor
path (tested bit-for-bit), but without ``torch.optim``'s import of ``torch._dynamo``,
which costs every rank about 2.5 s of start-up; on a 2-core machine that is most of
a tiny run.  For parameter ``p`` with gradient ``g``:

1. ``d = g + weight_decay * p``
2. ``buf = d`` on the first step, then ``buf = momentum * buf + d``
3. ``d = d + momentum * buf`` (Nesterov) or ``d = buf`` (heavy ball)
4. ``p = p - lr * d``
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import torch

from . import LocalOptimizer, register


@dataclass
class SGDConfig:
    """``workload.optimizer`` for ``name: sgd`` (the default).

    * ``lr`` (0.1): the base learning rate (the schedule scales and decays it).
    * ``momentum`` (0.9): heavy-ball coefficient; 0 is plain SGD (D^2 requires it).
    * ``nesterov`` (true): Nesterov's look-ahead form (ignored when momentum is 0).
    * ``weight_decay`` (1e-4): L2 coefficient, added to the gradient (coupled).
    """

    name: str = "sgd"
    lr: float = field(default=0.1, metadata={"min": 0})  # 0 is allowed: pure mixing, in tests
    momentum: float = field(default=0.9, metadata={"min": 0, "lt": 1})
    nesterov: bool = True
    weight_decay: float = field(default=1e-4, metadata={"min": 0})


@register("sgd")
class SGD(LocalOptimizer):
    Config = SGDConfig

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, momentum: float = 0.0,
                 nesterov: bool = False, weight_decay: float = 0.0):
        if nesterov and momentum <= 0:
            raise ValueError("Nesterov momentum needs momentum > 0")
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.momentum, self.nesterov, self.weight_decay = lr, momentum, nesterov, weight_decay
        # per parameter byte and step (op-cost model): reads p, g (and m), writes p (and m)
        self.bytes_touched = 5 if momentum else 3
        self.buffers: list[torch.Tensor | None] = [None] * len(self.params)

    @classmethod
    def from_config(cls, cfg: SGDConfig, params, weight_decay: float) -> "SGD":
        return cls(params, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov and cfg.momentum > 0,
                   weight_decay=weight_decay)

    @torch.no_grad()
    def step(self) -> None:
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            d = p.grad
            if self.weight_decay != 0:
                d = d.add(p, alpha=self.weight_decay)
            if self.momentum != 0:
                buf = self.buffers[i]
                if buf is None:
                    buf = self.buffers[i] = torch.clone(d).detach()
                else:
                    buf.mul_(self.momentum).add_(d)
                d = d.add(buf, alpha=self.momentum) if self.nesterov else buf
            p.add_(d, alpha=-self.lr)
        self.charge_step()

    def state_dict(self) -> dict[str, Any]:
        return {"lr": self.lr, "buffers": [None if b is None else b.clone() for b in self.buffers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lr = state["lr"]
        self.buffers = [None if b is None else b.clone() for b in state["buffers"]]
