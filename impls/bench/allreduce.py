"""Timing the all-reduce algorithms of :mod:`impls.comm.allreduce` (the survey's all-reduce study).

* :func:`sim_times`: on a simulated platform, every algorithm at every size, for several
  world sizes, in ONE SimGrid simulation (one process): the engine gets ``max(nodes)`` hosts;
  for each ``n`` the first ``n`` ranks run, the others wait at a barrier of all ranks.  A
  tensor of ``elements`` float32 ones weighs ``size`` bytes on the wire
  (:meth:`~impls.backends.sim.SimBackend.scaled`), so 100 MB at 256 ranks needs no 25 GB of
  tensors; the result is checked (= n).  A measurement runs from the last rank's start
  (after a barrier of the n ranks) to the last rank's end.  Deterministic: simulated time.
* :func:`real_times`: on real ranks (torchrun, gloo), real tensors of ``size`` bytes, each
  algorithm and the process group's own ``all_reduce`` (labelled with its transport, the
  backend's ``name``: ``gloo``) timed ``reps`` times, interleaved; the
  median over repetitions of the slowest rank's time.

``python -m impls.bench.allreduce sim --platform ethernet_10g --nodes 2,4 --sizes 1e3,1e6``
prints the rows as one JSON line; ``torchrun --nproc-per-node=2 -m impls.bench.allreduce real
--sizes 1e3,1e6 --out F.json`` writes them (rank 0).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Sequence

import torch

from ..comm.allreduce import ALGORITHMS, all_reduce


def sim_times(pcfg: Any, nodes: Sequence[int], sizes: Sequence[float], algorithms: Sequence[str] = ALGORITHMS,
              elements: int = 4096) -> list[dict[str, Any]]:
    """Simulated seconds of each (n, algorithm, size) on platform config ``pcfg``."""
    import simgrid

    from ..backends.sim import SimBackend
    from ..sim.engine import run_actors

    nodes, top = sorted(set(int(n) for n in nodes)), max(int(n) for n in nodes)

    def main(rank: int, world: Any) -> list[tuple[int, str, float, float, float]]:
        everyone = SimBackend(world, rank, list(range(top)), gid="all")
        spans = []
        for n in nodes:
            if rank < n:
                group = SimBackend(world, rank, list(range(n)), gid=f"n{n}")
                for algo in algorithms:
                    for size in sizes:
                        peers = group.scaled(size / (elements * 4))
                        t = torch.ones(elements)
                        group.barrier()
                        t0 = simgrid.Engine.clock
                        all_reduce(t, peers, algo)
                        spans.append((n, algo, float(size), t0, simgrid.Engine.clock))
                        if not bool((t == n).all()):
                            raise AssertionError(f"{algo} at n={n}: rank {rank} got {t.unique().tolist()}, not {n}")
            everyone.barrier()
        return spans

    per_rank = run_actors(pcfg, top, main)
    by_key = [{s[:3]: s[3:] for s in spans} for spans in per_rank]
    rows = []
    for n, algo, size, _, _ in per_rank[0]:
        spans = [k[(n, algo, size)] for k in by_key[:n]]
        rows.append({"n": n, "algorithm": algo, "bytes": size,
                     "seconds": max(s[1] for s in spans) - max(s[0] for s in spans)})
    return rows


def real_times(backend: Any, sizes: Sequence[float], algorithms: Sequence[str] = ALGORITHMS, reps: int = 5,
               warmup: int = 1) -> list[dict[str, Any]]:
    """Wall seconds of each algorithm (and the process group's own ``all_reduce``, labelled with its
    transport: ``gloo``) on ``backend``'s ranks."""
    n, r = backend.world, backend.rank
    own = backend.name  # the process group's own all-reduce: gloo's
    names = list(algorithms) + [own]
    rows = []
    for size in sizes:
        elems = max(1, int(size) // 4)
        x = torch.full((elems,), float(r + 1))
        times: dict[str, list[float]] = {a: [] for a in names}
        for rep in range(warmup + reps):
            for a in names:  # interleaved: the machine's load falls on every algorithm alike
                t = x.clone()
                backend.barrier()
                t0 = time.perf_counter()
                if a == own:
                    backend.all_reduce(t)
                else:
                    all_reduce(t, backend, a)
                dt = time.perf_counter() - t0
                if t[0].item() != n * (n + 1) / 2:
                    raise AssertionError(f"{a}: rank {r} got {t[0].item()}, expected {n * (n + 1) / 2}")
                slowest = max(backend.all_gather_object(dt))
                if rep >= warmup:
                    times[a].append(slowest)
        for a in names:
            rows.append({"n": n, "algorithm": a, "bytes": float(elems * 4), "seconds": statistics.median(times[a]),
                         "reps": reps, "min_s": min(times[a]), "max_s": max(times[a])})
    return rows


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("sim", "real"))
    ap.add_argument("--sizes", required=True, help="bytes per rank, comma-separated")
    ap.add_argument("--algorithms", default=",".join(ALGORITHMS), help=f"comma-separated, of {', '.join(ALGORITHMS)}")
    ap.add_argument("--platform", help="sim: a preset name or a JSON mapping {name, <overrides>}")
    ap.add_argument("--nodes", help="sim: world sizes, comma-separated")
    ap.add_argument("--reps", type=int, default=5, help="real: timed repetitions")
    ap.add_argument("--out", help="real: JSON file of the rows (written by rank 0)")
    args = ap.parse_args(argv)
    algorithms = [a for a in args.algorithms.split(",") if a]
    bad = [a for a in algorithms if a not in ALGORITHMS]
    if bad:
        ap.error(f"--algorithms: unknown {bad}; allowed: {', '.join(ALGORITHMS)}")
    if args.mode == "sim":
        from ..sim.platforms import platform_config

        if not (args.platform and args.nodes):
            ap.error("sim needs --platform and --nodes")
        spec = json.loads(args.platform) if args.platform.lstrip().startswith("{") else args.platform
        rows = sim_times(platform_config(spec), [int(x) for x in _floats(args.nodes)], _floats(args.sizes), algorithms)
        print(json.dumps(rows))
        return
    from ..backends import current_backend

    backend = current_backend("gloo")
    rows = real_times(backend, _floats(args.sizes), algorithms, args.reps)
    if backend.rank == 0 and args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f)
    backend.close()


if __name__ == "__main__":
    main()
