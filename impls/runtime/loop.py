"""Building blocks of the training loop: batches, evaluation, consensus, calibration."""

from __future__ import annotations

import copy
import time
from typing import Iterator

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from ..data.sampler import GlobalBatchSampler


def batches(ds: Dataset, sampler: GlobalBatchSampler, workers: int, device) -> Iterator[tuple]:
    if isinstance(ds, TensorDataset):  # tiny in-memory data: index directly, no loader overhead
        x, y = ds.tensors
        for idx in sampler:
            i = torch.as_tensor(idx)
            yield x[i].to(device), y[i].to(device)
        return
    loader = DataLoader(ds, batch_sampler=sampler, num_workers=workers, pin_memory=device.type == "cuda",
                        persistent_workers=False)
    for x, y in loader:
        yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)


@torch.no_grad()
def evaluate(model: nn.Module, ds: Dataset, device, batch_size: int = 1024, workers: int = 0) -> tuple[float, float]:
    """(mean cross-entropy, top-1 accuracy) of ``model`` on ``ds``."""
    was = model.training
    model.eval()
    total, loss_sum, correct = 0, 0.0, 0
    if isinstance(ds, TensorDataset):
        x, y = ds.tensors
        it = ((x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, len(y), batch_size))
    else:
        it = DataLoader(ds, batch_size=batch_size, num_workers=workers)
    for xb, yb in it:
        xb, yb = xb.to(device), yb.to(device)
        out = model(xb)
        loss_sum += F.cross_entropy(out, yb, reduction="sum").item()
        correct += (out.argmax(1) == yb).sum().item()
        total += len(yb)
    model.train(was)
    return loss_sum / total, correct / total


@torch.no_grad()
def consensus_distance(model: nn.Module, world: int) -> float:
    """sqrt(mean_i ||x_i - mean_j x_j||^2): 0 when all replicas are equal.

    Uses raw collectives: this is instrumentation, not counted as the method's traffic.
    """
    if world == 1:
        return 0.0
    flat = torch.nn.utils.parameters_to_vector(model.parameters()).detach().double()
    avg = flat.clone()
    dist.all_reduce(avg)
    avg /= world
    d2 = torch.tensor([float(((flat - avg) ** 2).sum())], dtype=torch.float64, device=flat.device)
    dist.all_reduce(d2)
    return float((d2 / world).sqrt())


def measure_compute(model: nn.Module, x: torch.Tensor, y: torch.Tensor, repeats: int = 3) -> float:
    """Median forward+backward time on one batch, leaving model, buffers and RNG untouched."""
    state = copy.deepcopy(model.state_dict())
    times = []
    with torch.random.fork_rng(devices=[]):
        for _ in range(repeats):
            t0 = time.perf_counter()
            F.cross_entropy(model(x), y).backward()
            times.append(time.perf_counter() - t0)
    model.load_state_dict(state)
    for p in model.parameters():
        p.grad = None
    return sorted(times)[len(times) // 2]
