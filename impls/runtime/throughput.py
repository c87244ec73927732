"""Throughput of one worker's training step on this machine: samples/s (tokens/s for
translation), and the compute time a simulated node of that batch would charge.

One code path for three users: the benchmark ``results/bench/workload_throughput.csv``
(rule ``bench_workload_throughput``), the simulated platform's ``measured`` profile
(:func:`impls.sim.calibration.measure_sample_s`: its calibration is :func:`time_steps` at one
thread without the optimizer), and ``python -m impls.sim.calibrate`` (a ``fixed`` profile
entry for your own hardware, :func:`profile_entry`).

:func:`time_steps`, for a workload (``workload:`` of a config) at ``threads`` and
``precision``:

1. builds the task, its data, model and local optimizer through the registries, exactly as
   a run does (:func:`impls.tasks.build_task`, :func:`impls.optim.build_optimizer`), seeded;
2. takes the first batch of the run's sampler (rank 0 of 1; a classification batch is
   ``batch_size`` rows) or, for translation with ``tokens``, a random token batch of
   ``sentences x length`` (no data-bin needed: the model's shapes depend only on the
   vocabulary size);
3. times ``warmup + steps`` training steps on that batch: zero the gradients, the loss under
   the precision's autocast (:class:`~impls.runtime.precision.MixedPrecision`: bf16 / fp16),
   backward (fp16: scaled, then unscaled and checked), then the optimizer's step; each
   step's forward/backward and optimizer times are kept apart;
4. reports the median over the timed steps (the steady state; the warm-up steps, which
   allocate and pick kernels, are excluded) and the minimum (the uncontended time: other
   load on the machine only ever adds time).

Where the data is not on this machine, :func:`synthetic_stand_in` replaces a CIFAR or
ImageNet dataset by random tensors of the same shape and number of classes
(:mod:`impls.data.synthetic`): the model and its cost are the real ones.

Timings are wall clock on a possibly shared machine: compare rows measured side by side in
one run (ratios), and read absolute numbers with the machine's load (``loadavg_1m``).
"""

from __future__ import annotations

import copy
import os
import platform as _platform
import socket
import statistics
import time
from typing import Any, Mapping

import torch

#: the input shape and classes of the datasets that live in files (``synthetic_stand_in``)
REAL_SHAPES = {"cifar10": ((3, 32, 32), 10), "cifar100": ((3, 32, 32), 100)}
IMAGENET_CLASSES = 1000


def cpu_model() -> str:
    """This machine's CPU model name (``/proc/cpuinfo``, else ``platform.processor()``)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or _platform.machine()


def machine(threads: int, device: torch.device = torch.device("cpu")) -> dict[str, Any]:
    """The columns that say where a timing was taken (``device``: ``cpu`` or the GPU's name)."""
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        load = float("nan")
    dev = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    return {"device": dev, "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "threads": threads,
            "torch": torch.__version__, "host": socket.gethostname(), "loadavg_1m": load}


def synthetic_stand_in(workload: Mapping[str, Any], train: int | None = None) -> dict[str, Any]:
    """``workload`` with a file-based image dataset (CIFAR-10/100, ImageNet's ``imagefolder``)
    replaced by ``synthetic`` tensors of its shape and classes (``train`` samples: at least
    one batch); any other workload is returned unchanged."""
    wl = copy.deepcopy(dict(workload))
    ds = dict(wl.get("dataset") or {})
    name = ds.get("name")
    if name in REAL_SHAPES:
        shape, classes = REAL_SHAPES[name]
    elif name == "imagefolder":
        size = int(ds.get("image_size", 224))
        shape, classes = (3, size, size), IMAGENET_CLASSES
    else:
        return wl
    n = train or int(wl.get("batch_size", 32))
    wl["dataset"] = {"name": "synthetic", "shape": list(shape), "classes": classes, "train": n, "val": 1}
    return wl


def time_steps(workload: Mapping[str, Any] | Any, threads: int = 1, precision: str | None = None,
               steps: int = 5, warmup: int = 2, optimizer: bool = True, tokens: Mapping[str, int] | None = None,
               budget_s: float | None = None, min_steps: int = 3, seed: int = 0,
               device: torch.device = torch.device("cpu")) -> dict[str, Any]:
    """Time ``steps`` training steps after ``warmup`` (module docstring, steps 1-4).

    ``workload``: a ``workload:`` mapping or a resolved :class:`~impls.config.runconfig.WorkloadConfig`;
    ``precision``: fp32 / bf16 / fp16 (default: the workload's); ``optimizer``: include the
    local optimizer's step; ``tokens``: ``{vocab, sentences, length}`` for a translation task
    timed on random token batches; ``budget_s``: stop once the timed steps add up to more
    than this, after at least ``min_steps`` of them (a slow machine times fewer steps, and
    the row says how many).  Returns one row: the batch (``rows``; ``tokens`` for
    translation), per-step times in ms (``step_ms`` median, ``step_ms_min``,
    ``fwd_bwd_ms`` median, ``fwd_bwd_ms_min``, ``optim_ms`` median), ``samples_per_s`` and
    ``tokens_per_s`` at the median step, the model's size, and :func:`machine`.
    """
    from ..data.sampler import build_sampler
    from ..config.dataclass_config import from_dict
    from ..optim import build_optimizer, optimizer_config
    from ..config.workload import WorkloadConfig
    from ..tasks import build_task
    from .loop import batches
    from .precision import LossScaleConfig, MixedPrecision

    wl = workload if isinstance(workload, WorkloadConfig) else from_dict(WorkloadConfig, dict(workload), "workload")
    precision = precision or wl.precision
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        task = build_task(wl, device)
        torch.manual_seed(seed)
        if tokens is not None:  # the task's own random batch (translation: token batches), no data files
            batch = tuple(t.to(device) for t in task.synthetic_batch(tokens, seed))
        else:
            task.build_data()
            sampler = build_sampler((wl.dataset or {}).get("partition"), task.train, wl.batch_size, 0, 1, seed)
            sampler.set_epoch(0)
            batch = next(batches(task.train, sampler, 0, device))
        torch.manual_seed(seed)
        model = task.build_model()
        model.train()
        opt = build_optimizer(optimizer_config(wl.optimizer), list(model.parameters()))[0] if optimizer else None
        prec = MixedPrecision(precision, device, from_dict(LossScaleConfig, wl.loss_scale, "workload.loss_scale"))
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        fb, total = [], []
        for i in range(warmup + steps):
            for p in model.parameters():
                p.grad = None
            sync()
            t0 = time.perf_counter()
            with prec.autocast():
                loss = task.loss(model, batch)
            prec.backward(loss)
            skipped = prec.check(model.parameters())
            sync()
            t1 = time.perf_counter()
            if opt is not None and not skipped:
                opt.step()
            sync()
            t2 = time.perf_counter()
            if i >= warmup:
                fb.append(t1 - t0)
                total.append(t2 - t0)
                if budget_s is not None and len(total) >= min_steps and sum(total) > budget_s:
                    break
        if not torch.isfinite(loss.detach().float()):
            raise FloatingPointError(f"non-finite loss {float(loss)} while timing (precision {precision})")
    finally:
        torch.set_num_threads(before)
    rows = int(batch[0].shape[0]) if batch and hasattr(batch[0], "shape") else 1
    ntok = task.batch_units(batch)
    params = sum(p.numel() for p in model.parameters())
    step_s = statistics.median(total)
    return {"rows": rows, "tokens": ntok, "params": params, "model_mb": params * 4 / 1e6, "precision": precision,
            "optimizer": (wl.optimizer or {}).get("name", "sgd") if optimizer else None,
            "warmup": warmup, "steps": len(total),
            "step_ms": step_s * 1e3, "step_ms_min": min(total) * 1e3, "fwd_bwd_ms": statistics.median(fb) * 1e3,
            "fwd_bwd_ms_min": min(fb) * 1e3, "optim_ms": statistics.median(t - f for t, f in zip(total, fb)) * 1e3,
            "samples_per_s": rows / step_s, "tokens_per_s": None if ntok is None else ntok / step_s,
            **machine(threads, device)}


def profile_entry(row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``profile:`` a simulated node of this row's batch, on this machine, would charge:
    ``fixed`` with the median training step (forward, backward, optimizer) as ``step_ms``
    and the model's fp32 size as ``model_mb`` (messages are scaled to it)."""
    return {"name": "fixed", "step_ms": round(float(row["step_ms"]), 4), "model_mb": round(float(row["model_mb"]), 6)}
