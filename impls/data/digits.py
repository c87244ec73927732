"""The embedded tiny dataset: scikit-learn's handwritten digits (no download)."""

from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np
import torch
from torch.utils.data import TensorDataset

from ..errors import ConfigError
from . import DATASETS, DataBundle


def load_digits_array() -> np.ndarray:
    """The UCI digits as scikit-learn ships them: 1,797 rows of 64 pixels + label (a fresh
    array the caller may change).

    Reads ``sklearn/datasets/data/digits.csv.gz`` directly (the same file
    ``sklearn.datasets.load_digits`` parses), without importing scikit-learn, which
    would add about two seconds to every rank's start-up.  Parsed once per process
    (:func:`_parsed`): the ranks of a simulation share one process, and 64 of them parsing
    the file each took 0.35 CPU-s of a 64-node run.
    """
    return _parsed().copy()


@functools.lru_cache(maxsize=1)
def _parsed() -> np.ndarray:
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("workload.dataset.name", "'digits' needs scikit-learn installed (it ships the data)")
    path = os.path.join(spec.submodule_search_locations[0], "datasets", "data", "digits.csv.gz")
    return np.loadtxt(path, delimiter=",", dtype=np.float32)


@DATASETS.register("digits")
def digits(val_fraction: float = 0.2, flatten: bool = False, split_seed: int = 0) -> DataBundle:
    """1,797 8x8 grey images in [0, 1], 10 classes; a fixed stratified-free split.

    The split uses ``split_seed`` (not the run's seed), so every run of every method
    is validated on the same images.
    """
    if not 0 < val_fraction < 1:
        raise ConfigError("workload.dataset.val_fraction", f"must be in (0, 1), got {val_fraction}")
    raw = load_digits_array()
    x = torch.from_numpy(raw[:, :64]).float().div_(16.0).reshape(-1, 1, 8, 8)
    if flatten:
        x = x.flatten(1)
    y = torch.from_numpy(raw[:, 64]).long()
    perm = torch.from_numpy(np.random.RandomState(split_seed).permutation(len(y)))
    n_val = int(round(len(y) * val_fraction))
    val_idx, train_idx = perm[:n_val], perm[n_val:]
    return DataBundle(
        train=TensorDataset(x[train_idx], y[train_idx]),
        val=TensorDataset(x[val_idx], y[val_idx]),
        num_classes=10,
        input_shape=tuple(x.shape[1:]),
    )
