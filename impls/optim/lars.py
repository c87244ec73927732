"""LARS: layer-wise adaptive rate scaling (You, Gitman & Ginsburg 2017, arXiv 1708.03888,
Algorithm 1), the optimizer that extends the usable batch size of ResNet training.

Each parameter tensor ("layer") ``w`` with gradient ``g`` gets its own rate:

1. ``local = trust_coefficient * ||w|| / (||g|| + weight_decay * ||w|| + eps)``
   (``local = 1`` when ``||w||`` or ``||g||`` is 0, e.g. a zero-initialised layer).
2. ``v = momentum * v + lr * local * (g + weight_decay * w)``
3. ``w = w - v``

Biases and normalisation parameters (tensors of one dimension) are excluded, as in
the large-batch recipes that use LARS (Goyal et al.'s successors, MLPerf): no
adaptation (``local = 1``) and no weight decay (``exclude_1d: false`` adapts them too).

Hyperparameters (``workload.optimizer``): ``lr`` (the global rate, scaled and warmed up
by the schedule: LARS is used with warmup), ``momentum`` (0.9), ``weight_decay`` (5e-4
in the paper's AlexNet runs; 1e-4 for ResNets), ``trust_coefficient`` (eta, 0.001 in
the paper; larger values trust the layer ratio more), ``eps`` (1e-9, only for 0/0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import torch

from . import LocalOptimizer, register


@dataclass
class LARSConfig:
    name: str = "lars"
    lr: float = field(default=0.1, metadata={"min": 0})
    momentum: float = field(default=0.9, metadata={"min": 0, "lt": 1})
    weight_decay: float = field(default=1e-4, metadata={"min": 0})
    trust_coefficient: float = field(default=1e-3, metadata={"gt": 0})
    eps: float = field(default=1e-9, metadata={"min": 0})
    exclude_1d: bool = True


@register("lars")
class LARS(LocalOptimizer):
    bytes_touched = 7  # per parameter byte and step: the norms read w, g; reads w, g, v; writes v, w (op-cost model)
    Config = LARSConfig

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, momentum: float = 0.9,
                 weight_decay: float = 0.0, trust_coefficient: float = 1e-3, eps: float = 1e-9,
                 exclude_1d: bool = True):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.eta, self.eps, self.exclude_1d = trust_coefficient, eps, exclude_1d
        self.buffers: list[torch.Tensor | None] = [None] * len(self.params)

    @classmethod
    def from_config(cls, cfg: LARSConfig, params, weight_decay: float) -> "LARS":
        return cls(params, cfg.lr, cfg.momentum, weight_decay, cfg.trust_coefficient, cfg.eps, cfg.exclude_1d)

    @torch.no_grad()
    def step(self) -> None:
        for i, w in enumerate(self.params):
            if w.grad is None:
                continue
            g, wd, local = w.grad, self.weight_decay, 1.0
            if self.exclude_1d and w.ndim <= 1:
                wd = 0.0
            else:  # 1
                wn, gn = float(w.norm()), float(g.norm())
                if wn > 0 and gn > 0:
                    local = self.eta * wn / (gn + wd * wn + self.eps)
            d = g.add(w, alpha=wd) if wd else g.clone()  # 2
            if self.buffers[i] is None:
                self.buffers[i] = torch.zeros_like(w)
            v = self.buffers[i].mul_(self.momentum).add_(d, alpha=self.lr * local)
            w.sub_(v)  # 3
        self.charge_step()

    def state_dict(self) -> dict[str, Any]:
        return {"lr": self.lr, "buffers": [None if b is None else b.clone() for b in self.buffers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lr = state["lr"]
        self.buffers = [None if b is None else b.clone() for b in state["buffers"]]
