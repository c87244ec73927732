"""Random tensors of a real dataset's shape: for timing a model where its data is not here.

``{name: synthetic, shape: [3, 224, 224], classes: 1000}`` stands in for ImageNet (through
``imagefolder``) with the same input shape and number of classes, so the model, its
forward/backward cost and the bytes its gradients weigh are the real ones; only what is
learned is meaningless (standard-normal pixels, uniform labels: accuracy stays at chance).
The benchmark ``workload_throughput.csv`` times the CIFAR and ImageNet models this way
(:func:`impls.runtime.throughput.synthetic_stand_in` maps a workload onto it).

Hyperparameters: ``shape`` (C, H, W) or any input shape the model takes; ``classes``;
``train`` / ``val`` sizes (small: the tensors are held in memory, ``train x prod(shape) x 4``
bytes); ``seed`` (the data, not the run: every run sees the same tensors).
"""

from __future__ import annotations

import math

import torch
from torch.utils.data import TensorDataset

from ..errors import ConfigError
from . import DATASETS, DataBundle

MAX_BYTES = 2 ** 30  # refuse a request for more than 1 GiB of random tensors


@DATASETS.register("synthetic")
def synthetic(shape: list[int] | tuple[int, ...] = (3, 32, 32), classes: int = 10, train: int = 256,
              val: int = 64, seed: int = 0) -> DataBundle:
    """``train`` + ``val`` standard-normal inputs of ``shape`` with uniform labels in ``[0, classes)``."""
    key = "workload.dataset"
    if not shape or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in shape):
        raise ConfigError(f"{key}.shape", f"expected a list of positive integers, got {shape!r}")
    for k, v, lo in (("classes", classes, 2), ("train", train, 1), ("val", val, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ConfigError(f"{key}.{k}", f"expected an integer >= {lo}, got {v!r}")
    if (train + val) * math.prod(shape) * 4 > MAX_BYTES:
        raise ConfigError(f"{key}.train", f"{train + val} samples of shape {list(shape)} exceed 1 GiB in memory; "
                                          "fewer samples suffice for timing")
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(train + val, *shape, generator=g)
    y = torch.randint(0, classes, (train + val,), generator=g)
    return DataBundle(TensorDataset(x[:train], y[:train]), TensorDataset(x[train:], y[train:]), classes,
                      tuple(shape))
