"""A run's workload (``workload:`` of a run config): the task, its data and model, the
batch, epochs, optimizer and schedule, the target and evaluation, the precision.

Its own module, below :mod:`impls.config.runconfig`, so that what needs only the workload (the
throughput benchmark, :mod:`impls.runtime.throughput`; the simulator's ``measured`` profile,
:mod:`impls.sim.profiles`) does not import the run config, which imports the backends and,
through them, the simulator (the import cycle runconfig -> sim.profiles ->
runtime.throughput -> runconfig this module removed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .dataclass_config import from_dict
from ..errors import ConfigError


@dataclass
class TargetConfig:
    """``workload.target``: the quality a run must reach for time-to-target (MLPerf's speed
    measure): an epoch metric of the workload's task and its value, e.g. ``{metric: acc/val,
    value: 0.9}`` (reached from below) or ``{metric: opt/gap, value: 1.0e-4}`` (from above)."""

    metric: str
    value: float


@dataclass
class WorkloadConfig:
    dataset: dict[str, Any] = field(default_factory=dict)  # classification's (impls.data)
    model: dict[str, Any] = field(default_factory=dict)  # classification's (impls.models)
    task: dict[str, Any] = field(default_factory=dict)  # impls.tasks; default {name: classification}
    batch_size: int = field(default=32, metadata={"min": 1})  # per worker
    epochs: int = field(default=5, metadata={"min": 1})
    optimizer: dict[str, Any] = field(default_factory=dict)
    schedule: dict[str, Any] = field(default_factory=dict)
    target: dict[str, Any] | None = None  # {metric: acc/val, value: 0.9}: time / epochs / bytes to reach it
    eval_ranks: str = field(default="all", metadata={"choices": ("all", "zero")})
    # evaluation points per epoch: k > 1 adds k - 1 evenly spaced ones inside each epoch and
    # one before the first step, for a finer time to target (synchronous and AD-PSGD schedules)
    evals_per_epoch: int = field(default=1, metadata={"min": 1})
    max_steps_per_epoch: int | None = field(default=None, metadata={"min": 1})
    loader_workers: int = field(default=0, metadata={"min": 0})
    # mixed precision around the task's forward pass, with every algorithm (impls.runtime.precision)
    precision: str = field(default="fp32", metadata={"choices": ("fp32", "bf16", "fp16")})
    loss_scale: dict[str, Any] | None = None  # fp16's dynamic loss scaler: {init, growth_factor, ...}

    def validate(self, key: str) -> None:
        if self.target is not None:
            from_dict(TargetConfig, self.target, f"{key}.target")
        if self.loss_scale is not None:
            if self.precision != "fp16":
                raise ConfigError(f"{key}.loss_scale", f"only fp16 scales the loss; this workload's precision is "
                                                       f"{self.precision!r} (allowed with loss_scale: fp16)")
            from ..runtime.precision import LossScaleConfig

            from_dict(LossScaleConfig, self.loss_scale, f"{key}.loss_scale")
