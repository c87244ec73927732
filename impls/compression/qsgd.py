"""QSGD: stochastic quantisation of each entry to ``s`` levels of the vector's norm.

Paper: Alistarh et al., "QSGD: Communication-Efficient SGD via Gradient Quantization and
Encoding" (NeurIPS 2017).  Per bucket ``b`` (the whole vector, or ``bucket_size`` entries)::

    q(x_i) = ||x_b|| * sign(x_i) * l_i / s,   l_i = floor(r_i) + Bernoulli(r_i - floor(r_i)),
    r_i = s |x_i| / ||x_b||

so ``E[q(x)] = x`` (unbiased) with variance at most ``min(d / s^2, sqrt(d) / s) ||x||^2``.
The uniform draws come from a generator seeded by (``seed``, call count): reproducible and
resumable (the count is the state); each worker should have its own seed.

On the wire, per message of ``d`` elements and ``B`` buckets, ``b = bit_length(s)`` (the
fewest bits that hold the levels ``0..s``): the norms (``B`` fp32), the signs (``ceil(d/8)``
bytes, bit set = negative, :func:`impls.compression.pack_bits`) and the levels as ``b`` bit
planes (``b * ceil(d/8)`` bytes, :func:`impls.compression.pack_codes`)::

    4 B + (1 + b) * ceil(d / 8) bytes      (s = 1: 2 bits/entry; s = 7: 4; s = 127: 8)

The paper's Elias coding of the levels (fewer bytes for sparse, low-``s`` messages) is not
done: the shapes must not depend on the values (receive buffers, ``all_gather``).

Hyperparameters:

* ``levels`` (``s``, 7): more levels, less variance, more bits.  The paper's "4-bit" and
  "8-bit" QSGD are ``s = 7`` / ``s = 127`` here (sign separate); ``s = 1`` is ternary.
* ``bucket_size`` (0 = the whole vector): a norm per bucket, 4 B each; the paper uses 512 to
  keep the variance of large vectors down.
* ``norm`` (``l2``): ``max`` (the max-norm the paper's experiments use) has less variance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch

from . import Compressor, code_bits, generator, pack_bits, pack_codes, register, unpack_bits, unpack_codes


@dataclass
class QSGDConfig:
    levels: int = field(default=7, metadata={"min": 1, "max": 2**16})
    bucket_size: int = field(default=0, metadata={"min": 0})
    norm: str = field(default="l2", metadata={"choices": ("l2", "max")})


@register("qsgd")
class QSGD(Compressor):
    Config = QSGDConfig

    def __init__(self, cfg: QSGDConfig, seed: int = 0, layout: Sequence[int] | None = None):
        super().__init__(cfg, seed, layout)
        self.calls = 0

    def bucket(self, numel: int) -> int:
        return self.cfg.bucket_size if self.cfg.bucket_size else max(numel, 1)

    def wire(self, numel: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
        nb = -(-numel // self.bucket(numel))
        per = -(-numel // 8)
        return [((nb,), torch.float32), ((per,), torch.uint8), ((code_bits(self.cfg.levels) * per,), torch.uint8)]

    def _norms(self, x: torch.Tensor) -> torch.Tensor:
        B = self.bucket(x.numel())
        padded = torch.cat([x, x.new_zeros((-x.numel()) % B)]).view(-1, B)  # zeros change neither norm
        return padded.norm(dim=1) if self.cfg.norm == "l2" else padded.abs().amax(dim=1)

    def encode(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = x.reshape(-1).float()
        s = self.cfg.levels
        norms = self._norms(x)
        per_elem = norms.repeat_interleave(self.bucket(x.numel()))[: x.numel()]
        r = torch.where(per_elem > 0, x.abs() / per_elem.clamp_min(1e-30) * s, torch.zeros_like(x))
        u = torch.rand(x.numel(), generator=generator(self.seed, self.calls)).to(x.device)
        self.calls += 1
        low = r.floor()
        level = (low + (u < r - low).float()).clamp_(max=s).to(torch.int64)
        return [norms, pack_bits(x < 0), pack_codes(level, code_bits(s))]

    def decode(self, parts: Sequence[torch.Tensor], numel: int) -> torch.Tensor:
        norms, signs, codes = parts
        level = unpack_codes(codes, code_bits(self.cfg.levels), numel).float()
        sign = 1 - 2 * unpack_bits(signs, numel).float()
        return level.mul_(sign).mul_(norms.repeat_interleave(self.bucket(numel))[:numel] / self.cfg.levels)

    def state_dict(self) -> dict[str, Any]:
        return {"calls": self.calls}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.calls = int(state.get("calls", 0))
