"""Tiny dataset files in the real on-disk formats (the loaders under test read them as
they would read the full datasets; nothing is downloaded)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np


# Keys are str, as in the official pickles (Python 2 str loads as str with latin1).
def write_cifar10(root: Path, n_train: int = 20, n_test: int = 10, balanced: bool = False) -> Path:
    """``root/cifar-10-batches-py``: five training batches of ``n_train // 5`` images, a test batch.

    ``balanced``: labels cycle through the 10 classes (every class has the same count),
    else they are random.
    """
    d = root / "cifar-10-batches-py"
    d.mkdir(parents=True)
    rng = np.random.RandomState(0)
    per = n_train // 5
    for i in range(1, 6):
        labels = [(j + i * per) % 10 for j in range(per)] if balanced else list(rng.randint(0, 10, per))
        with open(d / f"data_batch_{i}", "wb") as f:
            pickle.dump({"data": rng.randint(0, 256, (per, 3072), dtype=np.uint8), "labels": labels}, f)
    with open(d / "test_batch", "wb") as f:
        pickle.dump({"data": rng.randint(0, 256, (n_test, 3072), dtype=np.uint8),
                     "labels": [j % 10 for j in range(n_test)]}, f)
    with open(d / "batches.meta", "wb") as f:
        pickle.dump({"label_names": [f"c{i}" for i in range(10)]}, f)
    return root


def write_cifar100(root: Path, n: int = 12) -> Path:
    d = root / "cifar-100-python"
    d.mkdir(parents=True)
    rng = np.random.RandomState(1)
    for name in ("train", "test"):
        with open(d / name, "wb") as f:
            pickle.dump({"data": rng.randint(0, 256, (n, 3072), dtype=np.uint8),
                         "fine_labels": list(rng.randint(0, 100, n)), "coarse_labels": [0] * n}, f)
    with open(d / "meta", "wb") as f:
        pickle.dump({"fine_label_names": [f"c{i}" for i in range(100)]}, f)
    return root


def write_imagefolder(root: Path, classes: list[str], per_class: int = 2, size: int = 40) -> Path:
    """``root/{train,val}/<wnid>/*.JPEG`` (ImageNet's layout), random RGB images."""
    from PIL import Image

    rng = np.random.RandomState(2)
    for split in ("train", "val"):
        for c in classes:
            (root / split / c).mkdir(parents=True)
            for i in range(per_class):
                Image.fromarray(rng.randint(0, 256, (size, size, 3), dtype=np.uint8)).save(
                    root / split / c / f"{c}_{i}.JPEG", format="JPEG")
    return root
