"""Rank-sharded, seeded batch order.

Each epoch draws one permutation of the training set from ``(seed, epoch)``; step
``k`` uses the global batch ``perm[k*B:(k+1)*B]`` with ``B = world * batch_size``,
and rank ``r`` takes the contiguous slice ``[r*b:(r+1)*b]`` of it.  The union of the
ranks' batches at step ``k`` is therefore exactly the batch a single process with
batch size ``B`` sees, which is what makes ``allreduce_sgd`` testable against
``serial_sgd``.  The last incomplete global batch is dropped, so all ranks take the
same number of steps.
"""

from __future__ import annotations

from typing import Iterator

import torch


class GlobalBatchSampler:
    def __init__(self, n: int, batch_size: int, rank: int = 0, world: int = 1, seed: int = 0):
        if n < batch_size * world:
            raise ValueError(f"dataset of {n} samples is smaller than one global batch ({batch_size}x{world})")
        self.n, self.b, self.rank, self.world, self.seed = n, batch_size, rank, world, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n // (self.b * self.world)

    def __iter__(self) -> Iterator[list[int]]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        perm = torch.randperm(self.n, generator=g)
        B = self.b * self.world
        for k in range(len(self)):
            lo = k * B + self.rank * self.b
            yield perm[lo : lo + self.b].tolist()
