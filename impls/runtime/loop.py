"""Building blocks of the training loop: batches, consensus, calibration, the step itself
(:func:`train_step`), and the process's heap settings for it (:func:`steady_heap`)."""

from __future__ import annotations

import copy
import ctypes
import ctypes.util
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from ..data.sampler import GlobalBatchSampler


def batches(ds: Dataset, sampler: GlobalBatchSampler, workers: int, device) -> Iterator[tuple]:
    """This rank's batches in the sampler's order: tuples of tensors on ``device``.

    A seeded augmentation (:mod:`impls.data.augment`) is read through its view of the
    sampler's seed and epoch (``for_epoch``: a copy, so interleaved passes keep their own)."""
    for_epoch = getattr(ds, "for_epoch", None)
    if for_epoch is not None:
        ds = for_epoch(sampler.seed, sampler.epoch)
    in_memory = getattr(ds, "in_memory_batch", None)  # an augmented TensorDataset: whole batches
    if isinstance(ds, TensorDataset) or in_memory is not None:  # tiny in-memory data: no loader overhead
        for idx in sampler:
            i = torch.as_tensor(idx)
            part = in_memory(i) if in_memory is not None else tuple(t[i] for t in ds.tensors)
            yield tuple(t.to(device) for t in part)
        return
    # a dataset of variable-size samples (token sequences) brings its own ``collater``
    loader = DataLoader(ds, batch_sampler=sampler, num_workers=workers, pin_memory=device.type == "cuda",
                        persistent_workers=False, collate_fn=getattr(ds, "collater", None))
    for batch in loader:
        yield tuple(t.to(device, non_blocking=True) for t in batch)


@torch.no_grad()
def consensus_distance(model: nn.Module, backend) -> float:
    """sqrt(mean_i ||x_i - mean_j x_j||^2): 0 when all replicas are equal.

    Uses the backend's raw collectives: this is instrumentation, not counted as the
    method's traffic.
    """
    world = backend.world
    if world == 1:
        return 0.0
    flat = torch.nn.utils.parameters_to_vector(model.parameters()).detach().double()
    avg = flat.clone()
    backend.all_reduce(avg)
    avg /= world
    d2 = torch.tensor([float(((flat - avg) ** 2).sum())], dtype=torch.float64, device=flat.device)
    backend.all_reduce(d2)
    return float((d2 / world).sqrt())


def measure_compute(model: nn.Module, loss: Callable[[], torch.Tensor], repeats: int = 3) -> float:
    """Median forward+backward time of ``loss()`` (one batch), leaving model, buffers and RNG untouched."""
    state = copy.deepcopy(model.state_dict())
    times = []
    with torch.random.fork_rng(devices=[]):
        for _ in range(repeats):
            t0 = time.perf_counter()
            loss().backward()
            times.append(time.perf_counter() - t0)
    model.load_state_dict(state)
    for p in model.parameters():
        p.grad = None
    return sorted(times)[len(times) // 2]


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
_heap_steady: bool | None = None


def steady_heap(trim_mb: int = 1024, mmap_mb: int = 32) -> bool:
    """Keep the memory a training step frees for the next step (glibc's ``malloc``; a
    no-op elsewhere): returns whether the settings apply.  Called once per process, by
    the runtime before the model is built and by the ``ddp`` benchmark (:mod:`impls.bench.ddp`).

    Why: a CPU step allocates its activations in the forward pass (ResNet-20 at batch 32:
    tens of MB in blocks of ~2 MB) and frees them in the backward pass.  glibc returns the
    freed top of its heap to the kernel once more than ``M_TRIM_THRESHOLD`` (by default
    twice the largest block it has mapped, a few MB) lies free there, and the next forward
    pass takes the same pages back from the kernel, one page fault (a zeroed 4 KiB page)
    at a time.  Measured on ResNet-20, 2 gloo ranks on 2 cores: 4,000-11,000 faults per
    step, 20-25 % of the step's CPU time, and how many depended on where small long-lived
    objects happened to sit in the heap, so it differed between AR-SGD, DDP and the
    no-communication baseline of one benchmark process by up to 10 ms per step.  With
    freed memory kept (``trim_mb``) and blocks up to ``mmap_mb`` served from the heap
    rather than mapped and unmapped each time (32 MiB: glibc's largest), a step faults
    (almost) never: the step's peak memory stays mapped, which it is anyway at every step.

    An explicit ``MALLOC_TRIM_THRESHOLD_`` / ``MALLOC_MMAP_THRESHOLD_`` in the environment
    wins (nothing is changed).  Same idea as the jemalloc / tcmalloc ``LD_PRELOAD`` that
    PyTorch's CPU performance guides recommend, without a library to install."""
    global _heap_steady
    if _heap_steady is not None:
        return _heap_steady
    _heap_steady = False
    if any(k in os.environ for k in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")):
        return False
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):
        mallopt = None
    if mallopt is None:  # not glibc (macOS, musl): its allocator's own policy stays
        return False
    trim_ok = mallopt(_M_TRIM_THRESHOLD, trim_mb << 20)  # mallopt returns 1 on success
    mmap_ok = mallopt(_M_MMAP_THRESHOLD, mmap_mb << 20)
    _heap_steady = bool(trim_ok and mmap_ok)
    return _heap_steady


@dataclass
class StepTimes:
    """What :func:`train_step` measured (seconds of the run's clock) and returned."""

    loss: torch.Tensor
    compute_s: float
    delay_s: float  # what the straggler's slowdown added to the compute (inside it)
    t_sync: float  # the clock when communication was awaited (after the slowed compute)
    skipped: bool
    scale: float
    extra: dict[str, float] = field(default_factory=dict)
    bad_grad: str | None = None  # this rank's non-finite gradient ("name (nan)"), if checked and found


def train_step(algo, model: nn.Module, loss_fn: Callable[[], torch.Tensor], s, clock, prec, straggler,
               t0: float, check_grads: bool = True, stop_on_bad: bool = True) -> StepTimes:
    """One worker's training step, as every run takes it (the runtime's loop and the
    ``ddp`` benchmark, :mod:`impls.bench.ddp`, run this one function):

    1. ``algo.zero_grad()``; forward and backward inside ``algo.computing(s)`` (which may
       synchronise buffers first, or start communicating during backward) and the clock's
       ``compute`` (a simulated clock charges the step's compute there), slowed by the
       straggler's slowdown of this step (``straggler.slowdown()``: the clock makes the
       forward and backward pass ``factor`` times as long, :mod:`impls.runtime.straggler`;
       ``clock.forward_done()`` between the two passes);
    2. ``algo.await_gradients()``: communication started during backward is awaited before
       anyone reads the gradients;
    3. the precision check (fp16: unscale, agreed overflow skip); unless fp16 checked it
       already, ``algo.gradient_fault()`` (``check_grads``): a NaN or infinite gradient of
       this rank (one fused check, :func:`impls.comm.flat.nonfinite_grad`) is returned as
       ``bad_grad``: with ``stop_on_bad`` *without* ``algo.step(s)`` (the runtime stops the
       run at this step, before the algorithm, its optimizer or a compressor sees it), else
       with the gradients zeroed first (a rank that must stay in lockstep with the others
       sends nothing non-finite); then ``algo.step(s)``.

    ``t0``: the clock when the step began (the compute time is counted from it).  The
    returned ``compute_s`` is the compute at the healthy speed, ``delay_s`` what the slowdown
    added to it (``clock.straggler_delay``: ``(factor - 1) x`` the step's compute ``+ delay_s``,
    exactly as a simulated clock charged it; a real rank slept at least that, the pieces
    within its passes and the rest, on what the algorithm did after backward, at
    ``clock.settle()``: :class:`impls.backends.Clock`)."""
    algo.zero_grad()
    slowdown = straggler.slowdown()
    with algo.computing(s), clock.compute(model, s.batch, slowdown=slowdown, since=t0):
        with prec.autocast():
            loss = loss_fn()
        clock.forward_done()
        prec.backward(loss)
    clock.settle()  # the wall clock: what the slowdown still owes, after the algorithm's end of compute
    t_sync = clock.now()
    compute_s = clock.healthy_compute_s(t_sync - t0, slowdown)  # without what the slowdown took
    delay = clock.straggler_delay(slowdown, compute_s)  # (factor - 1) x compute + delay_s
    algo.await_gradients()
    scale = prec.scale
    skipped = prec.check(model.parameters())  # fp16: an overflow skips the step (agreed)
    bad = None if skipped or prec.scaled or not check_grads else algo.gradient_fault()
    if bad is not None and stop_on_bad:  # never stepped: the caller stops the run at this step
        return StepTimes(loss, compute_s, delay, t_sync, skipped, scale, {}, bad)
    if bad is not None:
        for p in model.parameters():
            if p.grad is not None:
                p.grad.zero_()
    extra = {} if skipped else algo.step(s)
    return StepTimes(loss, compute_s, delay, t_sync, skipped, scale, extra, bad)
