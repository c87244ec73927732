"""Real loaders for full datasets, tested on tiny files written in the same formats."""

import pickle

import numpy as np
import pytest
import torch

from impls.data import build_dataset
from impls.data.sampler import GlobalBatchSampler
from impls.errors import ConfigError
from impls.runtime.loop import batches


# Keys are str, as in the official pickles (Python 2 str loads as str with latin1).
def _write_cifar10(root, n_train=20, n_test=10):
    d = root / "cifar-10-batches-py"
    d.mkdir(parents=True)
    rng = np.random.RandomState(0)
    for i in range(1, 6):
        with open(d / f"data_batch_{i}", "wb") as f:
            pickle.dump({"data": rng.randint(0, 256, (n_train // 5, 3072), dtype=np.uint8),
                         "labels": list(rng.randint(0, 10, n_train // 5))}, f)
    with open(d / "test_batch", "wb") as f:
        pickle.dump({"data": rng.randint(0, 256, (n_test, 3072), dtype=np.uint8),
                     "labels": list(range(n_test))}, f)
    with open(d / "batches.meta", "wb") as f:
        pickle.dump({"label_names": [f"c{i}" for i in range(10)]}, f)


# Keys are str, as in the official pickles (Python 2 str loads as str with latin1).
def _write_cifar100(root, n=12):
    d = root / "cifar-100-python"
    d.mkdir(parents=True)
    rng = np.random.RandomState(1)
    for name in ("train", "test"):
        with open(d / name, "wb") as f:
            pickle.dump({"data": rng.randint(0, 256, (n, 3072), dtype=np.uint8),
                         "fine_labels": list(rng.randint(0, 100, n)), "coarse_labels": [0] * n}, f)
    with open(d / "meta", "wb") as f:
        pickle.dump({"fine_label_names": [f"c{i}" for i in range(100)]}, f)


def test_cifar10_local_files(tmp_path):
    _write_cifar10(tmp_path)
    b = build_dataset({"name": "cifar10", "root": str(tmp_path), "verify_md5": False})
    assert (len(b.train), len(b.val), b.num_classes, b.input_shape) == (20, 10, 10, (3, 32, 32))
    x, y = b.val[3]
    assert x.shape == (3, 32, 32) and y == 3
    s = GlobalBatchSampler(len(b.train), 4, 0, 2, seed=0)
    xb, yb = next(batches(b.train, s, 0, torch.device("cpu")))
    assert xb.shape == (4, 3, 32, 32) and yb.shape == (4,)


def test_cifar10_md5_check_on_by_default(tmp_path):
    _write_cifar10(tmp_path)
    with pytest.raises(ConfigError, match="workload.dataset.root"):
        build_dataset({"name": "cifar10", "root": str(tmp_path)})


def test_cifar100_local_files(tmp_path):
    _write_cifar100(tmp_path)
    b = build_dataset({"name": "cifar100", "root": str(tmp_path), "verify_md5": False, "augment": False})
    assert (len(b.train), b.num_classes) == (12, 100)
    assert b.train[0][0].shape == (3, 32, 32)


def test_imagefolder_imagenet_layout(tmp_path):
    from PIL import Image

    rng = np.random.RandomState(0)
    for split, n in (("train", 3), ("val", 2)):
        for wnid in ("n01440764", "n01443537"):
            (tmp_path / split / wnid).mkdir(parents=True)
            for i in range(n):
                Image.fromarray(rng.randint(0, 256, (40, 50, 3), dtype=np.uint8)).save(
                    tmp_path / split / wnid / f"{wnid}_{i}.JPEG", format="JPEG")
    b = build_dataset({"name": "imagefolder", "root": str(tmp_path), "image_size": 32})
    assert (len(b.train), len(b.val), b.num_classes, b.input_shape) == (6, 4, 2, (3, 32, 32))
    x, y = b.val[3]
    assert x.shape == (3, 32, 32) and y == 1


def test_missing_dataset_dir_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        build_dataset({"name": "imagefolder", "root": str(tmp_path / "nope")})
    with pytest.raises(ConfigError, match="does not exist"):
        build_dataset({"name": "cifar10", "root": str(tmp_path / "nope")})
