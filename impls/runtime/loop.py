"""Building blocks of the training loop: batches, step schedules, evaluation, consensus, calibration."""

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


def local_steps(ds: Dataset, sampler: GlobalBatchSampler, epoch: int, steps_per_epoch: int, workers: int,
                device) -> Iterator[tuple]:
    """Synchronous epochs: every rank takes the same ``steps_per_epoch`` steps of ``epoch``.

    Yields ``(step, fractional epoch, x, y)``; ``step`` counts this rank's steps.
    """
    sampler.set_epoch(epoch)
    for i, (x, y) in enumerate(batches(ds, sampler, workers, device)):
        if i >= steps_per_epoch:
            return
        yield epoch * steps_per_epoch + i, epoch + i / steps_per_epoch, x, y


class SharedSteps:
    """Barrier-free epochs: epoch ``e`` ends when the workers *together* have taken
    ``(e + 1) * steps_per_epoch * world`` steps (Lian et al. 2018: an epoch is one pass
    over the data by all workers, so fast workers take more of its steps).

    Before each step a worker claims a ticket from an atomic counter in the process
    group's key-value store (``store.add``: atomic across ranks, no barrier, no
    collective).  Ticket ``t`` (1-based) belongs to epoch ``start_epoch + (t-1) // S``
    with ``S = steps_per_epoch * world``; a worker ends its epoch when its next ticket
    belongs to a later one (so a slow worker may take no step in some epochs), and stops
    when the ticket is past the last epoch: exactly ``S`` steps per epoch in total.
    Each worker streams its own shard, pass after pass (``sampler.set_epoch(pass)``).
    ``key`` must be unique per run in the process group.
    """

    def __init__(self, key: str, ds: Dataset, sampler: GlobalBatchSampler, steps_per_epoch: int, world: int,
                 start_epoch: int, workers: int, device):
        self.store = dist.distributed_c10d._get_default_store() if dist.is_initialized() else None
        self.key, self.S, self.start = key, steps_per_epoch * world, start_epoch
        self.ds, self.sampler, self.workers, self.device = ds, sampler, workers, device
        self.taken = 0  # steps this worker took
        self._count = 0  # the counter itself when there is no process group
        self._pending: int | None = None  # a claimed ticket that belongs to a later epoch
        self._stream = self._batches()

    def _batches(self) -> Iterator[tuple]:
        p = 0
        while True:
            self.sampler.set_epoch(p)
            yield from batches(self.ds, self.sampler, self.workers, self.device)
            p += 1

    def _claim(self) -> int:
        if self.store is None:
            self._count += 1
            return self._count
        return int(self.store.add(self.key, 1))

    def steps(self, epoch: int) -> Iterator[tuple]:
        """``(step, fractional epoch, x, y)`` of this worker's share of ``epoch``."""
        while True:
            t = self._pending if self._pending is not None else self._claim()
            self._pending = None
            if self.start + (t - 1) // self.S != epoch:
                self._pending = t
                return
            x, y = next(self._stream)
            yield self.taken, self.start + (t - 1) / self.S, x, y
            self.taken += 1


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
