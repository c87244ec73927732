"""Top-k sparsification: send the ``k`` entries of largest magnitude.

Papers: Aji & Heafield, "Sparse Communication for Distributed Gradient Descent" (EMNLP 2017);
Stich et al., "Sparsified SGD with Memory" (NeurIPS 2018) for the analysis with error
feedback (``error_feedback: true``), without which the dropped entries are lost for good.

On the wire, per message of ``d`` elements, ``k = ceil(ratio * d)`` (exact:
:func:`~impls.compression.keep_count`): the values (``k`` fp32) and their indices (``k``
int32): ``8 k`` bytes against ``4 d``, so it only pays below ``ratio = 0.5``.  Decompressing scatters the values into zeros.

Hyperparameters:

* ``ratio`` (0.01): the fraction of entries kept, in (0, 1].  0.001-0.01 is usual with error
  feedback; without it, stay above ~0.1 or training stalls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from . import Compressor, keep_count, register


@dataclass
class TopKConfig:
    ratio: float = field(default=0.01, metadata={"gt": 0, "max": 1})


def top_k(x: torch.Tensor, k: int) -> list[torch.Tensor]:
    """[values fp32, indices int32] of the ``k`` largest ``|x|``."""
    idx = torch.topk(x.abs(), k, sorted=False).indices
    return [x[idx].float(), idx.to(torch.int32)]


def scatter(parts: Sequence[torch.Tensor], numel: int) -> torch.Tensor:
    out = torch.zeros(numel, dtype=torch.float32, device=parts[0].device)
    out[parts[1].long()] = parts[0]
    return out


@register("topk")
class TopK(Compressor):
    Config = TopKConfig

    def k(self, numel: int) -> int:
        return keep_count(self.cfg.ratio, numel)

    def wire(self, numel: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
        k = self.k(numel)
        return [((k,), torch.float32), ((k,), torch.int32)]

    def encode(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = x.reshape(-1)
        return top_k(x, self.k(x.numel()))

    def decode(self, parts: Sequence[torch.Tensor], numel: int) -> torch.Tensor:
        return scatter(parts, numel)
