"""1-bit SGD: one bit per entry, reconstructed as the mean of its side.

Paper: Seide et al., "1-Bit Stochastic Gradient Descent and its Application to Data-Parallel
Distributed Training of Speech DNNs" (Interspeech 2014).  Each entry is quantised at 0; the
two reconstruction values are the means of the entries on each side (which minimise the
squared error for that split), and the quantisation error is fed back into the next step:
use it with ``error_feedback: true`` as the paper does (without, it is biased and stalls).

The paper takes the means per column of each weight matrix.  The flat vector protocol carries
layer sizes but not matrix shapes, so the means here are per block: ``tensor``, ``layer``
(per weight tensor) or ``size`` (``block_size`` consecutive entries: with a layer's row
length, that is per row of a row-major matrix, the closest to the paper's columns).

On the wire, per message of ``d`` elements and ``B`` blocks: the bits (``ceil(d/8)`` bytes,
set = ``x >= 0``) and two fp32 per block (mean of the non-negative entries, mean of the
negative ones, interleaved)::

    ceil(d / 8) + 8 B bytes

Hyperparameters: ``block`` (``layer``) and ``block_size`` (for ``size``): smaller blocks
reconstruct better and cost 8 B each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from . import BlockConfig, Compressor, pack_bits, register, unpack_bits


@dataclass
class OneBitConfig(BlockConfig):
    """``block`` (``layer``) and ``block_size``: :class:`~impls.compression.BlockConfig`."""


@register("onebit")
class OneBit(Compressor):
    Config = OneBitConfig

    def __init__(self, cfg: OneBitConfig, seed: int = 0, layout: Sequence[int] | None = None):
        super().__init__(cfg, seed, layout)
        cfg.check_blocks()

    def _ids(self, numel: int, device) -> tuple[int, torch.Tensor]:
        sizes = self.cfg.sizes(numel, self.layout)
        return len(sizes), torch.repeat_interleave(torch.arange(len(sizes), device=device),
                                                   torch.tensor(sizes, device=device))

    def wire(self, numel: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
        nb = len(self.cfg.sizes(numel, self.layout))
        return [((-(-numel // 8),), torch.uint8), ((2 * nb,), torch.float32)]

    def encode(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = x.reshape(-1).float()
        nb, ids = self._ids(x.numel(), x.device)
        pos = x >= 0
        means = x.new_zeros(2, nb)
        for row, side in enumerate((pos, ~pos)):
            total = x.new_zeros(nb).index_add_(0, ids, torch.where(side, x, torch.zeros_like(x)))
            count = x.new_zeros(nb).index_add_(0, ids, side.float())
            means[row] = total / count.clamp_min(1)
        return [pack_bits(pos), means.t().reshape(-1).contiguous()]

    def decode(self, parts: Sequence[torch.Tensor], numel: int) -> torch.Tensor:
        nb, ids = self._ids(numel, parts[1].device)
        means = parts[1].view(nb, 2)
        return torch.where(unpack_bits(parts[0], numel), means[ids, 0], means[ids, 1])
