"""Adam (Kingma & Ba, ICLR 2015) and AdamW (Loshchilov & Hutter, ICLR 2019): one class,
the weight-decay coupling is the config's ``name``.

Same arithmetic, op for op, as ``torch.optim.Adam`` / ``AdamW``'s single-tensor path
(non-AMSGrad).  For parameter ``p`` with gradient ``g`` at step ``t = 1, 2, ...``:

1. adam: ``g = g + weight_decay * p`` (L2, coupled); adamw: ``p = p (1 - lr weight_decay)``
   (decoupled: it shrinks the parameters, the moments never see it).
2. ``m = m + (1 - beta1) (g - m)``; ``v = beta2 v + (1 - beta2) g^2``.
3. ``p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)``.

Hyperparameters (``workload.optimizer``): ``lr`` (1e-3; Transformers use 5e-4 with an
inverse-square-root schedule and warmup), ``betas`` ([0.9, 0.999]; fairseq's Transformer
recipe uses [0.9, 0.98]), ``eps`` (1e-8), ``weight_decay`` (0; adamw typically 0.01-0.1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import torch

from ..errors import ConfigError
from . import LocalOptimizer, register


@dataclass
class AdamConfig:
    name: str = "adam"
    lr: float = field(default=1e-3, metadata={"min": 0})
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999], metadata={"min": 0, "lt": 1})
    eps: float = field(default=1e-8, metadata={"gt": 0})
    weight_decay: float = field(default=0.0, metadata={"min": 0})

    def validate(self, key: str) -> None:
        if len(self.betas) != 2:
            raise ConfigError(f"{key}.betas", f"expected [beta1, beta2], got {self.betas}")


class Adam(LocalOptimizer):
    bytes_touched = 7  # per parameter byte and step: reads p, g, m, v; writes p, m, v (op-cost model)
    Config = AdamConfig

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled: bool = False):
        self.params = [p for p in params if p.requires_grad]
        self.lr, (self.beta1, self.beta2), self.eps = lr, betas, eps
        self.weight_decay, self.decoupled = weight_decay, decoupled
        self.t = 0
        self.m: list[torch.Tensor | None] = [None] * len(self.params)
        self.v: list[torch.Tensor | None] = [None] * len(self.params)

    @classmethod
    def from_config(cls, cfg: AdamConfig, params, weight_decay: float) -> "Adam":
        return cls(params, cfg.lr, tuple(cfg.betas), cfg.eps, weight_decay, decoupled=cls.decoupled_weight_decay)

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        bc1, bc2_sqrt = 1 - self.beta1 ** self.t, (1 - self.beta2 ** self.t) ** 0.5
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = p.grad
            if self.weight_decay != 0:  # 1
                if self.decoupled:
                    p.mul_(1 - self.lr * self.weight_decay)
                else:
                    g = g.add(p, alpha=self.weight_decay)
            if self.m[i] is None:
                self.m[i], self.v[i] = torch.zeros_like(p), torch.zeros_like(p)
            m, v = self.m[i], self.v[i]
            m.lerp_(g, 1 - self.beta1)  # 2
            v.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
            denom = (v.sqrt() / bc2_sqrt).add_(self.eps)  # 3
            p.addcdiv_(m, denom, value=-(self.lr / bc1))
        self.charge_step()

    def state_dict(self) -> dict[str, Any]:
        clone = lambda xs: [None if x is None else x.clone() for x in xs]  # noqa: E731
        return {"lr": self.lr, "t": self.t, "m": clone(self.m), "v": clone(self.v)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lr, self.t = state["lr"], state["t"]
        self.m = [None if x is None else x.clone() for x in state["m"]]
        self.v = [None if x is None else x.clone() for x in state["v"]]


@dataclass
class AdamWConfig(AdamConfig):
    name: str = "adamw"
    weight_decay: float = field(default=1e-2, metadata={"min": 0})


register("adam")(Adam)


@register("adamw")
class AdamW(Adam):
    """Adam with decoupled weight decay: the variant is the class attribute, not new code."""

    Config = AdamWConfig
    decoupled_weight_decay = True
