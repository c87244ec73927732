"""Models by name: tiny stand-ins and the papers' torchvision / CIFAR ResNets.

* ``mlp`` - flatten + hidden layers (ReLU); the default tiny model.
* ``cnn`` - two 3x3 conv layers + linear head, for 8x8 digits or 32x32 images.
* ``resnet20`` - the CIFAR ResNet-20 of He et al. (2016), 0.27M parameters, as used
  by the signSGD and AD-PSGD CIFAR experiments.
* ``vgg16`` - the standard CIFAR VGG-16 (13 conv + BN layers, one linear head; 14.7M
  parameters), not torchvision's ImageNet VGG-16 (:mod:`impls.models.vgg_cifar`).
* ``resnet18`` / ``resnet50`` - torchvision's ImageNet ResNets (random init).
"""

from __future__ import annotations

import math
from typing import Any

from torch import nn

from ..registry import Registry

MODELS: Registry = Registry("model", "workload.model.name", package=__name__)


def build_model(spec: dict[str, Any], input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    return MODELS.build(spec, input_shape=input_shape, num_classes=num_classes)


@MODELS.register("mlp")
def mlp(input_shape, num_classes, hidden: list[int] | None = None) -> nn.Module:
    hidden = [64] if hidden is None else hidden
    dims = [math.prod(input_shape)] + list(hidden)
    layers: list[nn.Module] = [nn.Flatten()]
    for a, b in zip(dims[:-1], dims[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    layers.append(nn.Linear(dims[-1], num_classes))
    return nn.Sequential(*layers)


@MODELS.register("cnn")
def cnn(input_shape, num_classes, channels: int = 16) -> nn.Module:
    c, h, w = input_shape
    return nn.Sequential(
        nn.Conv2d(c, channels, 3, padding=1), nn.ReLU(),
        nn.Conv2d(channels, 2 * channels, 3, padding=1, stride=2), nn.ReLU(),
        nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        nn.Linear(8 * channels, num_classes),
    )


def _tv(name: str, num_classes: int) -> nn.Module:
    import torchvision

    return getattr(torchvision.models, name)(weights=None, num_classes=num_classes)


@MODELS.register("resnet18")
def resnet18(input_shape, num_classes) -> nn.Module:
    return _tv("resnet18", num_classes)


@MODELS.register("resnet50")
def resnet50(input_shape, num_classes, zero_init_residual: bool = True) -> nn.Module:
    """torchvision ResNet-50 (25,557,032 parameters at 1000 classes).

    ``zero_init_residual`` (default on) zero-initialises the last BN scale of each
    block, as Goyal et al. and the SGP job scripts do.
    """
    import torchvision

    return torchvision.models.resnet50(weights=None, num_classes=num_classes, zero_init_residual=zero_init_residual)
