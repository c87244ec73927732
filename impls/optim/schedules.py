"""Learning-rate schedules, by name (``workload.schedule.name``).

Every schedule shares the large-batch recipe of Goyal et al. (2017, "Accurate, Large
Minibatch SGD"):

* ``lr_scaling: linear`` multiplies the optimizer's base ``lr`` by the number of workers
  (the linear scaling rule at a fixed per-worker batch): the *peak* rate;
* ``warmup_epochs: k`` ramps linearly, per step, from ``warmup_from`` (default: the base
  lr, Goyal et al.'s gradual warmup; fairseq's Transformer recipe starts from 0) to the
  peak over the first ``k`` epochs.

After the warmup, each schedule decays the peak its own way (``e`` = fractional epoch):

=============  ==========================================================================
``step``       ``peak * gamma ** #{m in milestones : e >= m}`` (the ResNet recipe: x0.1 at
               epochs 30, 60, 80 of 90); the default, with no milestones a constant rate
``cosine``     ``eta_min + (peak - eta_min) (1 + cos(pi (e - k) / (E - k))) / 2`` over the
               remaining ``E - k`` epochs (Loshchilov & Hutter 2017, without restarts)
``inverse_sqrt``  ``peak * sqrt(k / e)`` (fairseq's ``inverse_sqrt`` for Transformers; the
               decay starts where the warmup ends, so ``warmup_epochs > 0`` is required)
=============  ==========================================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..config.dataclass_config import from_dict
from ..errors import ConfigError
from ..registry import Registry

SCHEDULES: Registry = Registry("schedule", "workload.schedule.name")


@dataclass
class Schedule:
    """Common fields; subclasses add their decay and implement :meth:`decay`."""

    name: str = "step"
    lr_scaling: str = field(default="none", metadata={"choices": ("none", "linear")})
    warmup_epochs: float = field(default=0.0, metadata={"min": 0})
    warmup_from: float | None = field(default=None, metadata={"min": 0})

    def lr(self, base: float, world: int, epoch_f: float, epochs: int) -> float:
        """The learning rate at fractional epoch ``epoch_f`` of ``epochs``."""
        target = base * (world if self.lr_scaling == "linear" else 1)
        if self.warmup_epochs > 0 and epoch_f < self.warmup_epochs:
            start = base if self.warmup_from is None else self.warmup_from
            lr = start + (target - start) * epoch_f / self.warmup_epochs
        else:
            lr = target
        return self.decay(lr, epoch_f, epochs)

    def decay(self, lr: float, epoch_f: float, epochs: int) -> float:
        """The schedule's own factor on ``lr`` (the warmup ramp or the peak) at ``epoch_f``."""
        raise NotImplementedError


@SCHEDULES.register("step")
@dataclass
class StepSchedule(Schedule):
    """Constant, multiplied by ``gamma`` at each of ``milestones`` (epochs)."""

    milestones: list[float] = field(default_factory=list, metadata={"min": 0})
    gamma: float = field(default=0.1, metadata={"gt": 0})

    def decay(self, lr: float, epoch_f: float, epochs: int) -> float:
        return lr * self.gamma ** sum(1 for m in self.milestones if epoch_f >= m)


@SCHEDULES.register("cosine")
@dataclass
class CosineSchedule(Schedule):
    """Half a cosine from the peak (end of warmup) to ``eta_min`` (last epoch)."""

    name: str = "cosine"
    eta_min: float = field(default=0.0, metadata={"min": 0})

    def decay(self, lr: float, epoch_f: float, epochs: int) -> float:
        if epoch_f < self.warmup_epochs:
            return lr
        t = min((epoch_f - self.warmup_epochs) / max(epochs - self.warmup_epochs, 1e-12), 1.0)
        return self.eta_min + (lr - self.eta_min) * (1 + math.cos(math.pi * t)) / 2


@SCHEDULES.register("inverse_sqrt")
@dataclass
class InverseSqrtSchedule(Schedule):
    """fairseq's ``inverse_sqrt``: after the warmup, proportional to 1/sqrt(progress)."""

    name: str = "inverse_sqrt"

    def validate(self, key: str) -> None:
        if self.warmup_epochs <= 0:
            raise ConfigError(f"{key}.warmup_epochs", "inverse_sqrt decays from the end of its warmup: "
                                                      "set warmup_epochs > 0 (fairseq: 4000 updates)")

    def decay(self, lr: float, epoch_f: float, epochs: int) -> float:
        return lr if epoch_f < self.warmup_epochs else lr * math.sqrt(self.warmup_epochs / epoch_f)


def schedule_config(spec: Mapping[str, Any] | None, key: str = "workload.schedule") -> Schedule:
    spec = dict(spec or {})
    spec.setdefault("name", "step")
    return from_dict(SCHEDULES.get(spec["name"]), spec, key)
