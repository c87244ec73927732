"""Benchmarks run under torchrun: ``python -m impls.bench ddp --out F.csv ...``.

``ddp``: per-step time of ``allreduce_sgd`` against ``torch.nn.parallel.
DistributedDataParallel`` on the same model, batches and ranks, measured side by side
in one launch: blocks of ``steps`` steps alternate between the two ``repeats`` times
and the median step time of each is reported, with their ratio.  Both take the same
local update (:class:`impls.optim.SGD`), so the ratio isolates gradient
communication: our bucketed all-reduce after backward against DDP's all-reduce
overlapped with backward.
"""

from __future__ import annotations

import argparse
import csv
import os
import socket
import statistics
import time

import torch
import torch.nn.functional as F

from .backends import Backend, current_backend
from .comm import Communicator
from .models import build_model
from .optim import SGD, SGDConfig
from .protocol import Context, StepContext
from .provenance import git_commit


def _batch(model_name: str, batch: int, rank: int, step: int):
    g = torch.Generator().manual_seed(rank * 100_003 + step)
    shape = (1, 8, 8) if model_name in ("mlp", "cnn") else (3, 32, 32)
    return torch.randn(batch, *shape, generator=g), torch.randint(0, 10, (batch,), generator=g)


def bench_ddp(backend: Backend, model_name: str, batch: int, steps: int, repeats: int) -> dict:
    from .algorithms import get_algorithm

    rank, world = backend.rank, backend.world
    shape = (1, 8, 8) if model_name in ("mlp", "cnn") else (3, 32, 32)
    torch.manual_seed(0)
    ours_model = build_model({"name": model_name}, shape, 10)
    torch.manual_seed(0)
    ddp_model = torch.nn.parallel.DistributedDataParallel(build_model({"name": model_name}, shape, 10))
    cls = get_algorithm("allreduce_sgd")
    algo = cls(cls.Config(), Context(rank, world, Communicator(backend=backend), SGDConfig(lr=0.01), 0))
    algo.setup(ours_model)
    ddp_opt = SGD(ddp_model.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-4)

    def ours(i):
        x, y = _batch(model_name, batch, rank, i)
        algo.zero_grad()
        F.cross_entropy(ours_model(x), y).backward()
        algo.step(StepContext(lr=0.01, step=i, epoch=0.0, batch=(x, y), closure=None))

    def ddp(i):
        x, y = _batch(model_name, batch, rank, i)
        for p in ddp_model.parameters():
            p.grad = None
        F.cross_entropy(ddp_model(x), y).backward()
        ddp_opt.step()

    times = {"ours": [], "ddp": []}
    for fn in (ours, ddp):  # warm-up
        for i in range(3):
            fn(i)
    for r in range(repeats):
        for name, fn in (("ours", ours), ("ddp", ddp)) if r % 2 == 0 else (("ddp", ddp), ("ours", ours)):
            backend.barrier()
            t0 = time.perf_counter()
            for i in range(steps):
                fn(i)
            backend.barrier()
            times[name].append((time.perf_counter() - t0) / steps)
    ours_s, ddp_s = statistics.median(times["ours"]), statistics.median(times["ddp"])
    return {"model": model_name, "params": sum(p.numel() for p in ours_model.parameters()), "nodes": world,
            "batch_per_rank": batch, "steps": steps, "repeats": repeats, "allreduce_sgd_ms": round(ours_s * 1e3, 4),
            "ddp_ms": round(ddp_s * 1e3, 4), "ratio": round(ours_s / ddp_s, 4), "target": "<= 1.05",
            "torch": torch.__version__, "git_commit": git_commit(), "host": socket.gethostname(),
            "cpu_count": os.cpu_count()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["ddp"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    backend = current_backend("gloo")
    try:
        row = bench_ddp(backend, a.model, a.batch, a.steps, a.repeats)
        if backend.rank == 0:
            new = not os.path.exists(a.out)
            with open(a.out, "a", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(row))
                if new:
                    w.writeheader()
                w.writerow(row)
    finally:
        backend.close()


if __name__ == "__main__":
    main()
