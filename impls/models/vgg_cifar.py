"""VGG-16 for CIFAR (Simonyan & Zisserman 2015, configuration "D", adapted to 32x32).

Which VGG-16 this is: the *standard CIFAR VGG-16* of the CIFAR literature (the model of
the DGC, QSGD and PowerSGD CIFAR tables and of common CIFAR training code), not
torchvision's ``vgg16`` resized.  It keeps configuration D's 13 convolutions
(3x3, padding 1, with bias; 64-64-M-128-128-M-256x3-M-512x3-M-512x3-M), each followed by batch
normalisation (``batch_norm``, on by default: without it VGG-16 needs a careful init to
train from scratch) and ReLU; the five 2x2 max-pools take a 32x32 image to 1x1x512, and
one linear layer 512 -> classes replaces torchvision's three fully connected layers
(4096-4096-classes behind a 7x7 adaptive pool, 119M of its 138M parameters).  At 10
classes it has 14,728,266 parameters (15.0M with CIFAR-100's head).

Initialisation (seeded by the runtime like every model): convolutions He-normal (fan-out,
ReLU), zero biases, BN scale 1 / shift 0, classifier N(0, 0.01), as torchvision's VGG.

``width`` scales every convolution's channels (0.125 -> 8-8-M-16-...-64): a tiny stand-in
with the same depth, pooling and layer count for CPU tests.
"""

from __future__ import annotations

from torch import nn

from ..errors import ConfigError
from . import MODELS

VGG16_D = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


class CifarVGG(nn.Module):
    def __init__(self, num_classes: int, in_channels: int = 3, width: float = 1.0, batch_norm: bool = True,
                 cfg=VGG16_D):
        super().__init__()
        layers: list[nn.Module] = []
        c = in_channels
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
                continue
            out = max(1, int(round(v * width)))
            layers.append(nn.Conv2d(c, out, 3, padding=1))
            if batch_norm:
                layers.append(nn.BatchNorm2d(out))
            layers.append(nn.ReLU(inplace=True))
            c = out
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(c, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


@MODELS.register("vgg16")
def vgg16(input_shape, num_classes, width: float = 1.0, batch_norm: bool = True) -> nn.Module:
    """The CIFAR VGG-16 (module docstring): 32x32 inputs, any number of channels."""
    if len(input_shape) != 3 or tuple(input_shape[1:]) != (32, 32):
        raise ConfigError("workload.model.name", f"vgg16 is the CIFAR VGG-16: its five 2x2 max-pools need 32x32 "
                                                 f"images, got input shape {tuple(input_shape)}")
    if not width > 0:
        raise ConfigError("workload.model.width", f"must be > 0, got {width}")
    return CifarVGG(num_classes, input_shape[0], width, batch_norm)
