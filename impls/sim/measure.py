"""Measurements of the simulated platform itself (tests and ``bench`` targets): how long
a collective takes among ``n`` hosts, and what the alpha-beta model predicts for it."""

from __future__ import annotations

from typing import Any

import torch

from .engine import run_actors
from .platforms import PlatformConfig


def ring_allreduce_alpha_beta(nbytes: float, n: int, alpha: float, beta: float) -> float:
    """The alpha-beta time of a ring all-reduce: ``2 (n - 1) (alpha + S / (n beta))``."""
    return 2 * (n - 1) * (alpha + nbytes / (n * beta))


def collective_times(pcfg: PlatformConfig, n: int, sizes: list[float], op: str = "all_reduce",
                     elements: int = 4096) -> list[dict[str, Any]]:
    """Simulated duration of ``op`` on ``sizes`` bytes among ``n`` hosts, one after another.

    The tensor has ``elements`` float32 entries and weighs ``size`` bytes on the wire
    (:meth:`~impls.backends.sim.SimBackend.scaled`), so a 100 MB collective needs no
    100 MB tensors.  Each is preceded by a barrier; its duration runs from the last rank's
    start to the last rank's end.  The result is checked (all-reduce of ones = n).
    """
    import simgrid

    from ..backends.sim import SimBackend

    def main(rank: int, world: Any) -> list[tuple[float, float]]:
        base = SimBackend(world, rank, list(range(n)))
        spans = []
        for size in sizes:
            b = base.scaled(size / (elements * 4))
            t = torch.ones(elements)
            base.barrier()
            t0 = simgrid.Engine.clock
            getattr(b, op)(t)
            spans.append((t0, simgrid.Engine.clock))
            if op == "all_reduce" and not bool((t == n).all()):
                raise AssertionError(f"all_reduce of ones gave {t.unique().tolist()} on rank {rank}, expected {n}")
        return spans

    per_rank = run_actors(pcfg, n, main)
    return [{"op": op, "n": n, "bytes": size,
             "seconds": max(s[i][1] for s in per_rank) - max(s[i][0] for s in per_rank)}
            for i, size in enumerate(sizes)]


def main(argv: list[str] | None = None) -> None:
    """``python -m impls.sim.measure --platform JSON --n N --sizes S1,S2,...``: prints the
    rows of :func:`collective_times` as one JSON line (one simulation, so one process)."""
    import argparse
    import json

    from .platforms import platform_config

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--platform", required=True, help="a preset name or a JSON mapping {name, <overrides>}")
    ap.add_argument("--n", type=int, required=True, help="hosts")
    ap.add_argument("--sizes", required=True, help="bytes, comma-separated")
    ap.add_argument("--op", default="all_reduce")
    args = ap.parse_args(argv)
    spec = json.loads(args.platform) if args.platform.lstrip().startswith("{") else args.platform
    rows = collective_times(platform_config(spec), args.n, [float(s) for s in args.sizes.split(",")], args.op)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
