"""Image classification: the harness's original task (and the papers' ImageNet / CIFAR
ResNets).  Data and model come from their registries (``workload.dataset``,
``workload.model``); the loss is cross-entropy; evaluation reports ``loss/val`` (mean
cross-entropy) and ``acc/val`` (top-1, the primary metric)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ..data import build_dataset
from ..errors import ConfigError
from ..models import build_model
from . import TASKS, Task


@dataclass
class ClassificationConfig:
    name: str = "classification"


@TASKS.register("classification")
class Classification(Task):
    Config = ClassificationConfig
    primary_metric = "acc/val"
    higher_is_better = True
    metrics = ("acc/val", "loss/val")

    def build_data(self, probe: bool = False) -> None:
        for k in ("dataset", "model"):
            if "name" not in (getattr(self.workload, k) or {}):
                raise ConfigError(f"workload.{k}.name", "missing (classification needs a dataset and a model)")
        data = build_dataset(self.workload.dataset, probe=probe)
        self.train, self.val = data.train, data.val
        self.num_classes, self.input_shape = data.num_classes, data.input_shape

    def build_model(self) -> nn.Module:
        return build_model(self.workload.model, self.input_shape, self.num_classes).to(self.device)

    def loss(self, model: nn.Module, batch) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(model(x), y)

    @torch.no_grad()
    def evaluate(self, model: nn.Module, workers: int = 0, batch_size: int = 1024) -> dict[str, float]:
        was = model.training
        model.eval()
        total, loss_sum, correct = 0, 0.0, 0
        if isinstance(self.val, TensorDataset):
            x, y = self.val.tensors
            it = ((x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, len(y), batch_size))
        else:
            it = DataLoader(self.val, batch_size=batch_size, num_workers=workers)
        for xb, yb in it:
            xb, yb = xb.to(self.device), yb.to(self.device)
            out = model(xb)
            loss_sum += F.cross_entropy(out, yb, reduction="sum").item()
            correct += (out.argmax(1) == yb).sum().item()
            total += len(yb)
        model.train(was)
        return {"loss/val": loss_sum / total, "acc/val": correct / total}
