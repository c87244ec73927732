"""Random-k sparsification: send ``k`` entries chosen uniformly at random.

Papers: Stich et al., "Sparsified SGD with Memory" (NeurIPS 2018; rand-k with error
feedback); Wangni et al., "Gradient Sparsification for Communication-Efficient Distributed
Optimization" (NeurIPS 2018) for the unbiased ``d / k`` scaling.

The indices do **not** travel: they are drawn from a generator seeded by (``seed``, round),
which every sender and receiver builds with the same seed (``shared_seed``), so a receiver
regenerates them.  All workers of a round therefore pick the same coordinates (as in
GRACE's and PowerSGD's reference rand-k).  The round is this instance's count of
``compress`` calls; ``decompress`` uses the indices of the latest round (a synchronous method
compresses once per step, then decompresses that step's messages), or round 0 before any.

On the wire, per message of ``d`` elements, ``k = ceil(ratio * d)`` (exact:
:func:`~impls.compression.keep_count`): the values only,
``4 k`` bytes (top-k pays ``8 k``: its indices depend on the data).

Hyperparameters:

* ``ratio`` (0.01): the fraction of entries sent, in (0, 1].
* ``unbiased`` (false): scale the received values by ``d / k`` so that ``E[D(C(x))] = x``
  (Wangni et al.); the variance grows by ``d / k``, so use it without error feedback.  With
  error feedback (``error_feedback: true``, Stich et al.) leave it off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch

from . import Compressor, generator, keep_count, register


@dataclass
class RandomKConfig:
    ratio: float = field(default=0.01, metadata={"gt": 0, "max": 1})
    unbiased: bool = False


@register("randomk")
class RandomK(Compressor):
    Config = RandomKConfig
    shared_seed = True

    def __init__(self, cfg: RandomKConfig, seed: int = 0, layout: Sequence[int] | None = None):
        super().__init__(cfg, seed, layout)
        self.rounds = 0
        self._cache: tuple[int, int, torch.Tensor] | None = None  # (round, numel, indices)

    def k(self, numel: int) -> int:
        return keep_count(self.cfg.ratio, numel)

    def indices(self, round_: int, numel: int, device: torch.device | str = "cpu") -> torch.Tensor:
        if self._cache is None or self._cache[:2] != (round_, numel):
            idx = torch.randperm(numel, generator=generator(self.seed, round_))[: self.k(numel)]
            self._cache = (round_, numel, idx.to(device))
        return self._cache[2]

    def wire(self, numel: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
        return [((self.k(numel),), torch.float32)]

    def encode(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = x.reshape(-1)
        idx = self.indices(self.rounds, x.numel(), x.device)
        self.rounds += 1
        return [x[idx].float()]

    def decode(self, parts: Sequence[torch.Tensor], numel: int) -> torch.Tensor:
        idx = self.indices(max(self.rounds - 1, 0), numel, parts[0].device)
        out = torch.zeros(numel, dtype=torch.float32, device=parts[0].device)
        out[idx] = parts[0] * (numel / idx.numel()) if self.cfg.unbiased else parts[0]
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"rounds": self.rounds}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.rounds = int(state.get("rounds", 0))
