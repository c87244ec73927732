"""1-bit sign compression, optionally with a scale per block: signSGD's and dist-EF-blockSGDM's.

Papers: Bernstein et al., "signSGD: Compressed Optimisation for Non-Convex Problems" (ICML 2018)
send ``sign(g)`` (``scale: none``); Karimireddy et al. (ICML 2019, EF-SGD) and Zheng et al.,
"Communication-Efficient Distributed Blockwise Momentum SGD with Error-Feedback" (NeurIPS 2019)
send ``(||g_b||_1 / d_b) sign(g_b)`` per block ``b`` (``scale: mean_abs``): the block's mean
absolute value times its signs, which keeps the vector's l1 norm per block.

On the wire, per message of ``d`` elements: the signs packed 8 to a byte (``ceil(d / 8)``
uint8, :func:`impls.compression.pack_bits`; a zero is sent as ``+``), plus one fp32 scale
per block with ``scale: mean_abs``.  So ``d / 8 + 4 B`` bytes against ``4 d`` for fp32: 32x
fewer, minus the scales.

Hyperparameters:

* ``scale`` (``none``): ``none`` decompresses to +-1 (signSGD, majority vote: the magnitude is
  the learning rate's job); ``mean_abs`` to +-(mean |x| of the block).
* ``block`` (``tensor``): the blocks of ``mean_abs``: ``tensor`` (one scale for the whole
  vector: EF-SGD / dist-EF-SGDM), ``layer`` (one per layer of the model, from ``layout``:
  the seed's blockwise variant), or ``size`` (fixed blocks of ``block_size`` elements, the
  last one shorter).  Smaller blocks track the gradient's scale better and cost 4 B each.
* ``block_size`` (0): the elements per block for ``block: size``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from . import BlockConfig, Compressor, pack_bits, register, unpack_bits


@dataclass
class SignConfig(BlockConfig):
    block: str = field(default="tensor", metadata={"choices": ("tensor", "layer", "size")})
    scale: str = field(default="none", metadata={"choices": ("none", "mean_abs")})


@register("sign")
class Sign(Compressor):
    Config = SignConfig

    def __init__(self, cfg: SignConfig, seed: int = 0, layout: Sequence[int] | None = None):
        super().__init__(cfg, seed, layout)
        from ..errors import ConfigError

        cfg.check_blocks()
        if cfg.block == "layer" and cfg.scale == "mean_abs" and layout is None:
            raise ConfigError("compressor.block", "block 'layer' needs the model's layer sizes (the algorithm's layout)")

    def blocks(self, numel: int) -> list[int]:
        """Sizes of the scale blocks of a ``numel``-element vector."""
        return self.cfg.sizes(numel, self.layout)

    def wire(self, numel: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
        parts = [((-(-numel // 8),), torch.uint8)]
        if self.cfg.scale == "mean_abs":
            parts.append(((len(self.blocks(numel)),), torch.float32))
        return parts

    def encode(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = x.reshape(-1)
        parts = [pack_bits(x >= 0)]
        if self.cfg.scale == "mean_abs":
            parts.append(torch.stack([b.abs().mean() for b in x.split(self.blocks(x.numel()))]).float())
        return parts

    def decode(self, parts: Sequence[torch.Tensor], numel: int) -> torch.Tensor:
        s = unpack_bits(parts[0], numel).float().mul_(2).sub_(1)
        if self.cfg.scale == "mean_abs":
            sizes = torch.tensor(self.blocks(numel), device=s.device)
            s.mul_(torch.repeat_interleave(parts[1].to(s.device), sizes))
        return s
