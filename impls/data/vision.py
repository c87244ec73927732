"""Full-scale image datasets from local files: CIFAR-10/100 and ImageNet (ImageFolder).

Nothing is downloaded: ``root`` must already hold the data in the standard layout.
The tests write tiny files in exactly these formats and load them through here.
"""

from __future__ import annotations

import os

from ..errors import ConfigError
from . import DATASETS, DataBundle

CIFAR_MEAN = {10: (0.4914, 0.4822, 0.4465), 100: (0.5071, 0.4865, 0.4409)}
CIFAR_STD = {10: (0.2470, 0.2435, 0.2616), 100: (0.2673, 0.2564, 0.2762)}
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _need_dir(key: str, path: str) -> None:
    if not path or not path.strip("/."):
        raise ConfigError(key, "missing: set it to the local directory that holds the data (nothing is downloaded)")
    if not os.path.isdir(path):
        raise ConfigError(key, f"dataset directory {path!r} does not exist (nothing is downloaded; "
                               "point it at a local copy)")


def _cifar(root: str, classes: int, augment: bool, verify_md5: bool) -> DataBundle:
    from torchvision import datasets, transforms as T

    _need_dir("workload.dataset.root", root)
    norm = T.Normalize(CIFAR_MEAN[classes], CIFAR_STD[classes])
    # augment: random crop (padding 4) + horizontal flip, seeded per (run seed, epoch, sample)
    # (impls.data.augment), applied on the [0, 1] image before normalisation like torchvision's
    base = datasets.CIFAR10 if classes == 10 else datasets.CIFAR100
    if verify_md5:
        cls = base
    else:  # same parser; the md5 checks of the official files become "the files exist"
        cls = type(base.__name__, (base,), {
            "train_list": [[f, None] for f, _ in base.train_list],
            "test_list": [[f, None] for f, _ in base.test_list],
            "meta": {**base.meta, "md5": None}})
    try:
        train = cls(root, train=True, download=False, transform=T.ToTensor() if augment else T.Compose(
            [T.ToTensor(), norm]))
        val = cls(root, train=False, download=False, transform=T.Compose([T.ToTensor(), norm]))
    except RuntimeError as e:  # torchvision: "Dataset not found or corrupted. You can use download=True ..."
        why = str(e).split(". You can use download=True")[0]  # this project never downloads
        raise ConfigError("workload.dataset.root", f"{root!r}: {why} (expected the standard python-pickle "
                                                   f"batches of {base.__name__}; nothing is downloaded)") from None
    if augment:
        from .augment import SeededCropFlip

        train = SeededCropFlip(train, padding=4, flip=True, normalize=(CIFAR_MEAN[classes], CIFAR_STD[classes]))
    return DataBundle(train, val, classes, (3, 32, 32))


@DATASETS.register("cifar10")
def cifar10(root: str = "", augment: bool = True, verify_md5: bool = True) -> DataBundle:
    """``root/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}``.

    ``verify_md5: false`` accepts a subset or re-packed copy in the same format.
    """
    return _cifar(root, 10, augment, verify_md5)


@DATASETS.register("cifar100")
def cifar100(root: str = "", augment: bool = True, verify_md5: bool = True) -> DataBundle:
    """``root/cifar-100-python/{train,test,meta}``."""
    return _cifar(root, 100, augment, verify_md5)


@DATASETS.register("imagefolder")
def imagefolder(root: str = "", image_size: int = 224, augment: bool = True) -> DataBundle:
    """ImageNet layout; the standard ResNet recipe's transforms (random-resized crop)."""
    from torchvision import datasets, transforms as T

    for split in ("train", "val"):
        _need_dir("workload.dataset.root", os.path.join(root, split))
    norm = T.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    if augment:
        train_tf = [T.RandomResizedCrop(image_size), T.RandomHorizontalFlip()]
    else:
        train_tf = [T.Resize(int(image_size * 256 / 224)), T.CenterCrop(image_size)]
    val_tf = [T.Resize(int(image_size * 256 / 224)), T.CenterCrop(image_size)]
    train = datasets.ImageFolder(os.path.join(root, "train"), T.Compose(train_tf + [T.ToTensor(), norm]))
    val = datasets.ImageFolder(os.path.join(root, "val"), T.Compose(val_tf + [T.ToTensor(), norm]))
    if train.classes != val.classes:
        raise ConfigError("workload.dataset.root", "train/ and val/ hold different class folders")
    return DataBundle(train, val, len(train.classes), (3, image_size, image_size))


def _imagefolder_probe(root: str = "", image_size: int = 224, augment: bool = True) -> DataBundle:
    """Validation without scanning a million files: the layout and the class folders only
    (``train``/``val`` are ``None``: sizes are known only after the full scan of a run)."""
    classes = {}
    for split in ("train", "val"):
        _need_dir("workload.dataset.root", os.path.join(root, split))
        classes[split] = sorted(e.name for e in os.scandir(os.path.join(root, split)) if e.is_dir())
        if not classes[split]:
            raise ConfigError("workload.dataset.root", f"{os.path.join(root, split)!r} has no class folders")
    if classes["train"] != classes["val"]:
        raise ConfigError("workload.dataset.root", "train/ and val/ hold different class folders")
    return DataBundle(None, None, len(classes["train"]), (3, image_size, image_size))


imagefolder.probe = _imagefolder_probe
