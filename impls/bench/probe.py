"""``python -m impls.bench.probe``: measure a cluster on its real ranks (issue 33, ``probe``).

Run under torchrun (the pipeline's launcher: ``snakemake --cores 2 probe``, docs/plan.md), one
rank per node, it times on the ranks' own transport (the :class:`~impls.backends.Backend` of
``--backend``: gloo or NCCL):

* **all-reduce** of ``--sizes`` bytes per rank (the process group's own ``all_reduce``):
  each repetition is the slowest rank's time after a barrier;
* **point to point**: a ping-pong between rank 0 and each other rank (the pair's round trip
  of ``--p2p-sizes`` bytes each way; the other ranks wait at the barrier);
* **one training step** of ``--workload`` on each rank's device
  (:func:`impls.sim.calibrate.calibrate`: the model, its optimizer, one batch; the median
  of a few steps after warm-up), all ranks at once as in training.

Rank 0 writes ``--out``: one CSV row per repetition (``kind`` all_reduce / p2p / step,
``bytes``, ``peer``, ``rep``, ``seconds``) and a JSON sidecar (``--out`` with ``.json``) of the
provenance: host names, world size, transport, date, the step's row (model size), and where each
rank ran (``ranks``: :func:`impls.runtime.provenance.rank_map`, as a run's ``provenance.json``:
host, pid, torchrun's node and local rank, and under Slurm the job, task and node).  Turning
them into a platform and a profile is :mod:`distrepro_wf.plan.probe`'s (nccl-tests' bus
bandwidth, the latency and per-message overhead fit).

    torchrun --standalone --nproc-per-node=2 -m impls.bench.probe --sizes 1e3,1e6 \\
        --p2p-sizes 1e3,1e6 --workload '{"dataset": {"name": "digits"}, "model": {"name": "mlp"}}' \\
        --out results/probe/local.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import socket
import time
from datetime import datetime, timezone
from typing import Any, Sequence

import torch


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def all_reduce_times(backend: Any, sizes: Sequence[float], reps: int, warmup: int = 1, device: Any = "cpu") -> list[dict[str, Any]]:
    """One row per timed repetition: the slowest rank's seconds of ``all_reduce`` of ``size`` bytes."""
    rows = []
    for size in sizes:
        elems = max(1, int(size) // 4)
        x = torch.ones(elems, device=device)
        for rep in range(warmup + reps):
            backend.barrier()
            t0 = time.perf_counter()
            backend.all_reduce(x)
            _sync(x)
            slowest = max(backend.all_gather_object(time.perf_counter() - t0))
            if rep >= warmup:
                rows.append({"kind": "all_reduce", "bytes": elems * 4, "peer": "", "rep": rep - warmup,
                             "seconds": slowest})
    return rows


def p2p_times(backend: Any, sizes: Sequence[float], reps: int, warmup: int = 1, device: Any = "cpu") -> list[dict[str, Any]]:
    """One row per timed ping-pong between rank 0 and each other rank: the round trip's seconds
    (rank 0 sends ``size`` bytes, the peer sends them back), measured on rank 0."""
    rows = []
    r = backend.rank
    for peer in range(1, backend.world):
        for size in sizes:
            elems = max(1, int(size) // 4)
            x = torch.ones(elems, device=device)
            for rep in range(warmup + reps):
                backend.barrier()
                if r == 0:
                    t0 = time.perf_counter()
                    backend.isend(x, peer).wait()
                    backend.irecv(x, peer).wait()
                    _sync(x)
                    dt = time.perf_counter() - t0
                    if rep >= warmup:
                        rows.append({"kind": "p2p", "bytes": elems * 4, "peer": peer, "rep": rep - warmup,
                                     "seconds": dt})
                elif r == peer:
                    backend.irecv(x, 0).wait()
                    backend.isend(x, 0).wait()
    return rows


def _sync(x: torch.Tensor) -> None:
    if x.is_cuda:
        torch.cuda.synchronize(x.device)


def step_time(workload: dict[str, Any], batch: int | None, device: Any, threads: int) -> dict[str, Any]:
    """This rank's training step (:func:`impls.sim.calibrate.calibrate`'s row)."""
    from ..sim.calibrate import calibrate

    return calibrate(workload, batch=batch, threads=threads, device=str(device))


def main(argv: list[str] | None = None) -> None:
    from ..backends import backend_of, current_backend
    from ..runtime.provenance import rank_map

    ap = argparse.ArgumentParser(prog="python -m impls.bench.probe", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="gloo", help="the ranks' transport: gloo, nccl, auto")
    ap.add_argument("--sizes", required=True, help="all-reduce bytes per rank, comma-separated")
    ap.add_argument("--p2p-sizes", required=True, help="point-to-point bytes, comma-separated")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions of each size")
    ap.add_argument("--workload", required=True, help="a workload mapping (JSON) whose step is timed")
    ap.add_argument("--batch", type=int, default=None, help="rows per step (default: the workload's)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads of the step")
    ap.add_argument("--out", required=True, help="CSV of the raw timings (rank 0; provenance beside it, .json)")
    args = ap.parse_args(argv)
    backend = current_backend(args.backend)
    if backend.world < 2:
        ap.error("a probe needs at least 2 ranks (run it under torchrun)")
    device = backend_of(args.backend).device(args.backend)
    hosts = backend.all_gather_object(socket.gethostname())
    ranks = rank_map(backend)  # where each rank ran: torchrun's node and local rank, Slurm's job and task
    rows = all_reduce_times(backend, _floats(args.sizes), args.reps, device=device)
    rows += p2p_times(backend, _floats(args.p2p_sizes), args.reps, device=device)
    step = step_time(json.loads(args.workload), args.batch, device, args.threads)
    steps = backend.all_gather_object(float(step["step_ms"]))
    if backend.rank == 0:
        rows += [{"kind": "step", "bytes": "", "peer": rank, "rep": 0, "seconds": ms / 1e3}
                 for rank, ms in enumerate(steps)]
        with open(args.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["kind", "bytes", "peer", "rep", "seconds"])
            w.writeheader()
            w.writerows(rows)
        meta = {"hosts": hosts, "world": backend.world, "backend": backend.name, "device": str(device),
                "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "model": step.get("model"), "model_mb": float(step["model_mb"]), "batch": step.get("rows"),
                "threads": args.threads, "ranks": ranks}
        with open(args.out.rsplit(".", 1)[0] + ".json", "w") as f:
            json.dump(meta, f, indent=1)
    backend.barrier()
    backend.close()


if __name__ == "__main__":
    main()
