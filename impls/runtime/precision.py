"""Mixed precision, a runtime switch usable with every algorithm (``workload.precision``).

Micikevicius et al. (2018, "Mixed Precision Training") keep an fp32 master copy of the
weights and run the forward and backward passes in 16 bits; ``torch.autocast`` does the
casting per operation (matrix products and convolutions in 16 bits, reductions such as
softmax and cross-entropy in fp32).  Here the parameters, the gradients the algorithms
exchange and the optimizer state all stay fp32: only the task's forward pass (and so its
backward) runs under autocast, so every method composes with it unchanged.

=========  ================================================================================
``fp32``   the default: no autocast
``bf16``   autocast to bfloat16 (CPU and GPU).  bf16 has fp32's exponent range, so gradients
           cannot overflow where fp32's would not and no loss scaling is needed.
``fp16``   autocast to float16 with a dynamic loss scaler (below).  The GPU recipe; on CPU it
           runs too (torch's CPU autocast supports float16) and is kept for testing the
           scaler's path on CPU-only machines: it is slower than fp32 there, never faster.
=========  ================================================================================

Dynamic loss scaling (fp16; Micikevicius et al. Sec. 3.2, torch's ``GradScaler`` policy),
per step:

1. the loss is multiplied by the scale ``S`` before ``backward`` (small gradients that would
   flush to zero in fp16 are kept), and the gradients are divided by ``S`` afterwards, so
   the algorithm sees the true gradient;
2. if any gradient is non-finite (an fp16 overflow in the backward pass) the step is
   **skipped**: the algorithm's ``step`` is not called, parameters and optimizer state stay
   as they were, and ``S *= backoff_factor``;
3. after ``growth_interval`` consecutive finite steps, ``S *= growth_factor``.

Under a synchronous step schedule (``local_epochs``: every worker takes the same steps) the
skip is **agreed across the workers**: each worker's overflow flag goes through one
all-reduce (max) of the runtime's Communicator, counted in ``comm/*`` like any message, so
either every worker skips or none does (a worker that skipped alone would leave the others
waiting in the step's collective, or let the replicas drift).  Under the barrier-free
schedule (``shared_epochs``, AD-PSGD) no collective may run inside a step, and each worker
decides for itself: a skipped step is simply a step it did not take.  Parameter-server
methods (server ranks, ``Algorithm.roles``) are refused with fp16: their servers count the
workers' pushes, and a skipped push would stall them (use bf16 there).

Hyperparameters (``workload.loss_scale``, fp16 only): ``init`` (2**16, torch's default;
lower it if the first steps are all skipped), ``growth_factor`` (2), ``backoff_factor``
(0.5), ``growth_interval`` (2000 steps; a short run may use ~100 so that the scale finds
its level).  The step records carry ``amp/loss_scale`` and ``amp/skipped`` (0 or 1), the
epoch records ``amp/skipped_steps``.

Where this differs from torch's ``GradScaler``: it works on the model's ``.grad`` rather
than on a ``torch.optim`` optimizer (the algorithms own the update), and the overflow
decision is agreed through the instrumented Communicator, not a device-local flag.
``StepContext.closure`` (a second gradient, SVRG-style methods) runs under the same
autocast and scale, unscaled at once; an overflow there is not skipped but shows as a
non-finite parameter (the run's divergence check).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterable

import torch

from ..comm.communicator import Communicator, Counters

PRECISIONS = ("fp32", "bf16", "fp16")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class LossScaleConfig:
    """``workload.loss_scale`` (fp16): the dynamic loss scaler's policy (module docstring)."""

    init: float = field(default=2.0 ** 16, metadata={"gt": 0})
    growth_factor: float = field(default=2.0, metadata={"gt": 1})
    backoff_factor: float = field(default=0.5, metadata={"gt": 0, "lt": 1})
    growth_interval: int = field(default=2000, metadata={"min": 1})


class MixedPrecision:
    """One worker's precision policy for a run.

    ``comm``: the Communicator the skip flag is agreed through (``agree``: synchronous
    schedules), with the runtime's clock; its counters join the step's (:meth:`counters`).
    """

    def __init__(self, precision: str, device: torch.device, loss_scale: LossScaleConfig | None = None,
                 comm: Communicator | None = None, agree: bool = False):
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; known: {', '.join(PRECISIONS)}")
        self.precision, self.device = precision, device
        self.cfg = loss_scale or LossScaleConfig()
        self.scaled = precision == "fp16"
        self.comm, self.agree = comm, agree
        self.scale = float(self.cfg.init)
        self.good_steps = 0  # consecutive finite steps since the scale last changed
        self.skipped_steps = 0  # in the current epoch (pop_epoch_metrics)

    def autocast(self) -> contextlib.AbstractContextManager:
        """Around the task's forward pass (the loss)."""
        if self.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=_DTYPES[self.precision])

    def backward(self, loss: torch.Tensor) -> None:
        """1. backward of the (scaled) loss; the gradients stay scaled until :meth:`check`."""
        (loss * self.scale if self.scaled else loss).backward()

    @torch.no_grad()
    def unscale(self, params: Iterable[torch.nn.Parameter]) -> bool:
        """Divide the gradients by the scale; whether any of them is non-finite (this worker)."""
        bad = torch.zeros((), dtype=torch.bool, device=self.device)
        inv = 1.0 / self.scale
        for p in params:
            if p.grad is not None:
                p.grad.mul_(inv)
                bad |= ~torch.isfinite(p.grad).all()
        return bool(bad)

    def check(self, params: Iterable[torch.nn.Parameter]) -> bool:
        """Steps 1-3 after the backward pass: unscale, agree on an overflow, update the scale.
        Returns True when the step must be skipped (by every worker, where ``agree``)."""
        if not self.scaled:
            return False
        overflow = self.unscale(params)
        if self.agree and self.comm is not None and self.comm.world > 1:
            flag = torch.tensor([float(overflow)], device=self.device)
            self.comm.all_reduce(flag, op="max")
            overflow = bool(flag.item() > 0)
        if overflow:  # 2
            self.scale *= self.cfg.backoff_factor
            self.good_steps = 0
            self.skipped_steps += 1
        else:  # 3
            self.good_steps += 1
            if self.good_steps >= self.cfg.growth_interval:
                self.scale *= self.cfg.growth_factor
                self.good_steps = 0
        return overflow

    def closure_backward(self, loss: torch.Tensor, params: Iterable[torch.nn.Parameter]) -> None:
        """A closure's backward: scaled like the step's, unscaled at once (no skip, no agreement)."""
        self.backward(loss)
        if self.scaled:
            self.unscale(params)

    def step_metrics(self, skipped: bool, scale_used: float) -> dict[str, float]:
        return {"amp/loss_scale": scale_used, "amp/skipped": float(skipped)} if self.scaled else {}

    def pop_epoch_metrics(self) -> dict[str, float]:
        n, self.skipped_steps = self.skipped_steps, 0
        return {"amp/skipped_steps": float(n)} if self.scaled else {}

    def counters(self, c: Counters) -> Counters:
        """The step's counters ``c`` plus the agreement's traffic since the last call."""
        if self.comm is None:
            return c
        own = self.comm.pop_counters()
        return Counters(c.bytes_sent + own.bytes_sent, c.bytes_recv + own.bytes_recv, c.comm_s + own.comm_s,
                        c.messages + own.messages)

    def state_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, "good_steps": self.good_steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scale, self.good_steps = float(state["scale"]), int(state["good_steps"])
