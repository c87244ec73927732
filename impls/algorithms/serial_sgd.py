"""Serial SGD: plain mini-batch SGD in one process, the reference for every method.

Nothing is communicated.  It is the ground truth that exact distributed methods are
tested against: ``allreduce_sgd`` with ``n`` ranks on batch ``b`` must match
``serial_sgd`` on batch ``n * b`` over the same samples (the runtime's sampler
splits each global batch contiguously across ranks, so the sample sets agree).

Steps of :meth:`SerialSGD.step`: set the scheduled learning rate, then take one
``torch.optim.SGD`` step (momentum, Nesterov and weight decay from the workload's
``optimizer`` section).

Hyperparameters: none of its own; tune the workload's optimizer section.  To stand in
for ``n`` workers of batch ``b``, give it ``batch_size: n * b``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..protocol import Algorithm, StepContext
from . import register


@dataclass
class SerialSGDConfig:
    pass


@register("serial_sgd")
class SerialSGD(Algorithm):
    Config = SerialSGDConfig

    def __init__(self, cfg, ctx):
        # here, not in setup: the workflow builds every algorithm at every node count while it
        # validates a config (impls.protocol), so nodes: [4] is refused before any job
        super().__init__(cfg, ctx)
        if self.ctx.world != 1:
            raise ConfigError("nodes", f"serial_sgd runs in one process; got {self.ctx.world} (use nodes: [1])")

    def step(self, s: StepContext) -> dict[str, float]:
        self.set_lr(s.lr)
        self.optimizer.step()
        return {}
