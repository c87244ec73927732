"""Real loaders for full datasets, tested on tiny files written in the same formats."""

import numpy as np
import pytest
import torch

from impls.data import build_dataset
from impls.data.sampler import GlobalBatchSampler
from impls.errors import ConfigError
from impls.runtime.loop import batches

from datafiles import write_cifar10, write_cifar100


def test_cifar10_local_files(tmp_path):
    write_cifar10(tmp_path)
    b = build_dataset({"name": "cifar10", "root": str(tmp_path), "verify_md5": False})
    assert (len(b.train), len(b.val), b.num_classes, b.input_shape) == (20, 10, 10, (3, 32, 32))
    x, y = b.val[3]
    assert x.shape == (3, 32, 32) and y == 3
    s = GlobalBatchSampler(len(b.train), 4, 0, 2, seed=0)
    xb, yb = next(batches(b.train, s, 0, torch.device("cpu")))
    assert xb.shape == (4, 3, 32, 32) and yb.shape == (4,)


def test_cifar10_md5_check_on_by_default(tmp_path):
    write_cifar10(tmp_path)
    with pytest.raises(ConfigError, match="workload.dataset.root"):
        build_dataset({"name": "cifar10", "root": str(tmp_path)})


def test_cifar100_local_files(tmp_path):
    write_cifar100(tmp_path)
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
