"""Casting to a narrower float: the simplest compressor (PyTorch DDP's fp16 / bf16 hooks).

Paper: none in particular; Micikevicius et al., "Mixed Precision Training" (ICLR 2018) for
fp16, and torch's ``fp16_compress_hook`` / ``bf16_compress_hook`` for sending gradients so.

On the wire, per message of ``d`` elements: one tensor of ``d`` elements of ``dtype``: ``2 d``
bytes for float16 / bfloat16 (2x fewer than fp32), ``4 d`` for float32 (a lossless no-op,
the control setting: ``compressed_sgd`` with it equals ``allreduce_sgd``).

Hyperparameters:

* ``dtype`` (``float16``): ``float16`` keeps 11 significant bits but overflows above 65504 and
  flushes values below ~6e-8 to zero (scale the loss or the gradient when that matters);
  ``bfloat16`` keeps fp32's range with 8 significant bits (relative error <= 2^-8);
  ``float32`` sends the vector unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from . import Compressor, register

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


@dataclass
class CastConfig:
    dtype: str = field(default="float16", metadata={"choices": tuple(DTYPES)})


@register("cast")
class Cast(Compressor):
    Config = CastConfig

    def wire(self, numel: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
        return [((numel,), DTYPES[self.cfg.dtype])]

    def encode(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = x.reshape(-1)
        dtype = DTYPES[self.cfg.dtype]
        return [x.to(dtype) if x.dtype != dtype else x.clone()]

    def decode(self, parts: Sequence[torch.Tensor], numel: int) -> torch.Tensor:
        return parts[0].reshape(-1)[:numel].float()
