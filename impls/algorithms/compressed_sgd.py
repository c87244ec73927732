"""Compressed SGD: synchronous SGD whose gradients travel through any registered compressor.

Papers: the compressors' (:mod:`impls.compression`: QSGD, TernGrad, top-k, random-k, DGC,
1-bit SGD, sign / EF-SGD, fp16 casting); the method is the survey's common frame, e.g.
Xu et al., "GRACE: A Compressed Communication Framework for Distributed Machine Learning"
(ICDCS 2021): all-gather the compressed gradients, decompress and average them everywhere.

Steps of :meth:`CompressedSGD.step`, on every worker:

1. The gradient already sits in one flat buffer (``p.grad`` are views into it, reverse
   parameter order, :class:`impls.comm.flat.GradientBuckets` with a single bucket).
2. Compress it (``compressor``; with ``error_feedback: true`` the residual is added first
   and the new residual kept: :class:`impls.compression.ErrorFeedback`).
3. Concatenate the packed parts as bytes into one message and ``all_gather`` it: one
   collective per step (every worker's message has the same shape: the compressors' shapes
   depend on the vector's size only).
4. Decompress all ``n`` messages, in rank order, and average them into the buffer (every
   worker computes the same average, so the replicas stay equal).
5. The workload's optimizer steps (``optimizer_use: gradient``: momentum and weight decay
   act on the averaged decompressed gradient; with ``dgc`` set the optimizer's momentum to 0,
   DGC carries it).

Bytes per step per worker (``comm/bytes_sent``, all-gather cost model: ``(n - 1) M``) for a
message of ``M`` bytes, ``d`` parameters, ``B`` blocks, ``c8 = ceil(d / 8)``:

=============================  ============================================
``cast`` float32 / fp16, bf16  ``4 d`` / ``2 d``
``sign``                       ``c8`` (+ ``4 B`` with ``scale: mean_abs``)
``onebit``                     ``c8 + 8 B``
``terngrad``                   ``2 c8 + 4 B``
``qsgd`` (``s`` levels)        ``(1 + bit_length(s)) c8 + 4 B``
``topk``, ``dgc`` (``k``)      ``8 k``
``randomk`` (``k``)            ``4 k`` (indices regenerated from the shared seed)
=============================  ============================================

An all-gather moves ``(n - 1) M`` per worker where an all-reduce of fp32 moves
``2 (n - 1) / n * 4 d``: compression pays once ``M < 8 d / n``.  Unlike an all-reduce, the
decompress-and-average work grows with ``n`` (the price of compressors that do not add up).

Hyperparameters:

* ``compressor`` (``{name: sign, scale: mean_abs, error_feedback: true}``, EF-SGD): any
  compressor's ``{name, error_feedback?, <its hyperparameters>}``; ``{name: cast, dtype:
  float32}`` is lossless and equals ``allreduce_sgd`` (tested to 1e-6).  Each worker's
  compressor is seeded with its own seed (independent rounding in ``qsgd`` / ``terngrad``),
  except ``randomk``'s, whose receivers regenerate the sender's indices from the shared one.
* ``broadcast_buffers`` (true): rank 0's buffers (BatchNorm statistics) before each forward
  pass and evaluation, as ``allreduce_sgd`` and DDP do (one message).

No overlap with backward (``allreduce_sgd``'s ``overlap_backward``), and why: compression
here is a function of the whole gradient, so it cannot start on a bucket without changing
the result.  ``topk``, ``dgc`` and ``randomk`` choose their ``k`` coordinates among all of
them (per bucket, another ``k`` per bucket and other coordinates); the stochastic
quantisers (``qsgd``, ``terngrad``) and ``randomk`` draw their random numbers in one
sequence over the whole vector (per bucket, in another order); ``sign`` / ``onebit``
scales and error feedback's residual are per block of the layout, which buckets would
respect, but the message is one ``all_gather`` of one packed vector whose parts are sized
by the whole gradient.  Only ``cast`` is elementwise throughout; its lossless form is
``allreduce_sgd`` itself, which overlaps.  Compressing per bucket would be a different method
(per-bucket ``k``, per-bucket scales), with its own parameters: not this one's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from ..compression import build, wire_bytes
from ..errors import ConfigError
from ..comm.flat import GradientBuckets
from ..protocol import StepContext
from . import register
from .allreduce_sgd import AllreduceSGD


@dataclass
class CompressedSGDConfig:
    compressor: Any = field(default_factory=lambda: {"name": "sign", "scale": "mean_abs", "error_feedback": True})
    broadcast_buffers: bool = True

    def validate(self, key: str) -> None:
        if not isinstance(self.compressor, Mapping):
            raise ConfigError(f"{key}.compressor", f"expected a mapping {{name: ..., ...}}, got {self.compressor!r}")
        build(self.compressor, f"{key}.compressor", layout=[1])  # names and keys; the real layout in setup


def to_bytes(parts: list[torch.Tensor]) -> torch.Tensor:
    """The parts as one uint8 message (each part's bytes, in order)."""
    return torch.cat([p.contiguous().reshape(-1).view(torch.uint8) for p in parts])


def from_bytes(msg: torch.Tensor, like: list[torch.Tensor]) -> list[torch.Tensor]:
    """:func:`to_bytes`' inverse, shapes and dtypes from ``like`` (a message of the same shape)."""
    out, offset = [], 0
    for p in like:
        n = p.numel() * p.element_size()
        out.append(msg[offset: offset + n].clone().view(p.dtype).view(p.shape))  # clone: aligned storage
        offset += n
    return out


@register("compressed_sgd")
class CompressedSGD(AllreduceSGD):  # shares allreduce_sgd's buffer broadcast; the step differs
    Config = CompressedSGDConfig

    @classmethod
    def step_cost(cls, p, peers: int = 1, **opts) -> float | None:
        """No closed form: its wire size is the compressor's (not allreduce_sgd's ring)."""
        return None

    def setup(self, model):
        super().setup(model)  # allreduce_sgd's: initial state, the buckets below, the buffer broadcast
        layout = [p.numel() for p, _ in self.buckets.views]
        probe = build(self.cfg.compressor, "algorithm.compressor", layout=layout)
        seed = self.ctx.seed if probe.shared_seed else self.ctx.seed * 7919 + 104729 * (self.ctx.rank + 1)
        self.compressor = build(self.cfg.compressor, "algorithm.compressor", seed=seed, layout=layout,
                                clock=self.comm.clock)  # it charges its own (de)compression

    def _gradient_buckets(self, model) -> GradientBuckets:
        return GradientBuckets(list(model.parameters()), float("inf"))  # 1: one flat buffer

    def _backward_overlap(self, model) -> None:
        return None  # no overlap: see the docstring

    def step(self, s: StepContext) -> dict[str, float]:
        world = self.ctx.world
        flat = self.buckets.flats[0]
        parts = self.compressor.compress(flat)  # 2 (the compressor charges its work)
        msg = to_bytes(parts)
        gathered = [torch.empty_like(msg) for _ in range(world)]
        self.comm.all_gather(gathered, msg)  # 3
        total = torch.zeros_like(flat)
        for m in gathered:  # 4
            total.add_(self.compressor.decompress(from_bytes(m, parts), flat.numel()))
        flat.copy_(total.div_(world))
        nb, clock = flat.numel() * flat.element_size(), self.comm.clock  # the method's own average:
        clock.charge_op("arith", (3 * world + 2) * nb)  # n sums of 3 passes, the division (2)
        clock.charge_op("copy", nb)  # into the gradient buffer
        self.set_lr(s.lr)
        self.optimizer.step()  # 5
        return {"compress/bytes": float(wire_bytes(parts)), "compress/ratio": wire_bytes(parts) / (4 * flat.numel())}

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "compressor": self.compressor.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.compressor.load_state_dict(state.get("compressor") or {})
