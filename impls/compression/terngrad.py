"""TernGrad: stochastic ternary gradients {-1, 0, +1} times a per-block scale.

Paper: Wen et al., "TernGrad: Ternary Gradients to Reduce Communication in Distributed Deep
Learning" (NeurIPS 2017).  Per block with scale ``s = max |x|``::

    t_i = sign(x_i) * Bernoulli(|x_i| / s),      D = s * t

so ``E[D] = x`` (unbiased; the paper's clipping, below, trades that for less variance).  The
draws come from a generator seeded by (``seed``, call count); each worker has its own seed.

On the wire, per message of ``d`` elements and ``B`` blocks: the scales (``B`` fp32) and the
ternary digits as 2 bits per element: two bit planes (:func:`impls.compression.pack_codes`),
plane 0 "non-zero", plane 1 "negative"::

    4 B + 2 * ceil(d / 8) bytes             (16x fewer than fp32)

Hyperparameters:

* ``block`` (``layer``, the paper's layer-wise scales; ``tensor``: one; ``size``: fixed blocks
  of ``block_size``): smaller blocks, tighter scales, less variance, 4 B each.
* ``clip`` (0 = off): clip each entry to ``clip`` standard deviations of the vector before
  scaling (the paper uses 2.5); it shrinks ``s`` and the variance, at a small bias.

Clipping (the paper's Sec. 3.3, "gradient clipping"): ``x_i <- clamp(x_i, -c sigma, c sigma)``
with ``sigma`` the standard deviation of the gradient vector, its population value
``sqrt(mean((x - mean(x))**2))`` (divided by ``d``, not ``d - 1``).  The paper does not name
the estimator; its authors' code (github.com/wenwei202/terngrad, ``clip_gradients_by_stddev``
in ``bingrad_common.py``: ``tf.sqrt(tf.reduce_mean(tf.square(g - mean)))``) and GRACE's
``grace_dl/torch/compressor/terngrad.py`` (the same formula) both divide by ``d``, and so does
this file (``torch.std``'s default would divide by ``d - 1``: a threshold ``sqrt(d / (d - 1))``
times higher, tested).

Where this differs from the reference code: both references clip each layer's tensor with
that tensor's own ``sigma`` (they compress per tensor); here ``sigma`` is that of the whole
vector compressed (an algorithm's flat gradient), whatever ``block`` says, so with several
layers the threshold is one for the model, not one per layer.  GRACE always clips (2.5) and
draws its uniforms from torch's global generator; here ``clip`` is a hyperparameter (off by
default) and the draws are seeded per call (above).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch

from . import BlockConfig, Compressor, generator, pack_codes, register, unpack_codes


@dataclass
class TernGradConfig(BlockConfig):  # block: layer (the paper's), block_size
    clip: float = field(default=0.0, metadata={"min": 0})


@register("terngrad")
class TernGrad(Compressor):
    Config = TernGradConfig

    def __init__(self, cfg: TernGradConfig, seed: int = 0, layout: Sequence[int] | None = None):
        super().__init__(cfg, seed, layout)
        cfg.check_blocks()
        self.calls = 0

    def blocks(self, numel: int) -> list[int]:
        return self.cfg.sizes(numel, self.layout)

    def wire(self, numel: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
        return [((len(self.blocks(numel)),), torch.float32), ((2 * -(-numel // 8),), torch.uint8)]

    def encode(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = x.reshape(-1).float()
        if self.cfg.clip > 0 and x.numel() > 1:
            c = self.cfg.clip * x.std(correction=0).item()  # population sigma (docstring)
            x = x.clamp(-c, c)
        sizes = self.blocks(x.numel())
        scales = torch.stack([b.abs().amax() if b.numel() else b.new_zeros(()) for b in x.split(sizes)])
        s = torch.repeat_interleave(scales, torch.tensor(sizes, device=x.device))
        p = torch.where(s > 0, x.abs() / s.clamp_min(1e-30), torch.zeros_like(x))
        u = torch.rand(x.numel(), generator=generator(self.seed, self.calls)).to(x.device)
        self.calls += 1
        nonzero = u < p
        code = nonzero.to(torch.int64) + 2 * (nonzero & (x < 0)).to(torch.int64)
        return [scales, pack_codes(code, 2)]

    def decode(self, parts: Sequence[torch.Tensor], numel: int) -> torch.Tensor:
        code = unpack_codes(parts[1], 2, numel)
        t = (code & 1).float() * (1 - (code >> 1).float() * 2)
        return t.mul_(torch.repeat_interleave(parts[0], torch.tensor(self.blocks(numel), device=t.device)))

    def state_dict(self) -> dict[str, Any]:
        return {"calls": self.calls}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.calls = int(state.get("calls", 0))
