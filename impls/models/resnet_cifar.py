"""CIFAR ResNet-20/32/44/56 (He et al., 2016, Sec. 4.2): 6n+2 layers, 16/32/64 channels."""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from . import MODELS


class _Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:  # option B: 1x1 projection shortcut
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.b1(self.c1(x)))
        out = self.b2(self.c2(out))
        return F.relu(out + (x if self.short is None else self.short(x)))


class CifarResNet(nn.Module):
    def __init__(self, depth: int, num_classes: int, in_channels: int = 3):
        super().__init__()
        if (depth - 2) % 6:
            raise ValueError(f"CIFAR ResNet depth must be 6n+2, got {depth}")
        n = (depth - 2) // 6
        self.stem = nn.Sequential(nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        layers, cin = [], 16
        for i, cout in enumerate((16, 32, 64)):
            for j in range(n):
                layers.append(_Block(cin, cout, 2 if (i > 0 and j == 0) else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


@MODELS.register("resnet20")
def resnet20(input_shape, num_classes, depth: int = 20) -> nn.Module:
    return CifarResNet(depth, num_classes, in_channels=input_shape[0])
