"""Scenarios on the simulated platform, one per process (SimGrid's engine runs once per
process): ``python tests/sim_probe.py <scenario> '<json args>'`` prints a JSON result.
Used by ``tests/test_sim_platform.py``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from impls.backends.sim import SimBackend  # noqa: E402
from impls.sim.engine import run_actors  # noqa: E402
from impls.sim.measure import collective_times  # noqa: E402
from impls.sim.platforms import platform_config  # noqa: E402


def _now() -> float:
    import simgrid

    return simgrid.Engine.clock


def ring_cost(a):
    cfg = platform_config({**a["platform"], "small_allreduce_bytes": 0})
    return collective_times(cfg, a["n"], a["sizes"])


def collectives(a):
    """Every collective's values, on every rank, with the given all-reduce algorithm."""
    n = a["n"]
    cfg = platform_config({"name": "ethernet_10g", "small_allreduce_bytes": 0})

    def main(rank, world):
        b = SimBackend(world, rank, list(range(n)))
        x = torch.arange(7, dtype=torch.float64) * (rank + 1) + rank  # 7: chunks of unequal size
        got = {}
        for op in ("sum", "max", "min"):
            t = x.clone()
            b.all_reduce(t, op=op)
            got[f"all_reduce_{op}"] = t.tolist()
        t = x.clone()
        h = b.all_reduce(t, async_op=True)  # in a helper actor; the rank goes on meanwhile
        h.wait()
        got["all_reduce_async"] = t.tolist()
        t = x.clone()
        b.broadcast(t, src=n - 1)
        got["broadcast"] = t.tolist()
        t = x.clone()
        b.reduce(t, dst=1)
        got["reduce"] = t.tolist() if rank == 1 else None
        outs = [torch.zeros(7, dtype=torch.float64) for _ in range(n)]
        b.all_gather(outs, x)
        got["all_gather"] = [o.tolist() for o in outs]
        outs = [torch.zeros(7, dtype=torch.float64) for _ in range(n)]
        b.gather(x, outs, dst=0)
        got["gather"] = [o.tolist() for o in outs] if rank == 0 else None
        t = torch.zeros(7, dtype=torch.float64)
        b.scatter(t, [torch.full((7,), float(10 * d + rank)) .double() for d in range(n)], src=2)
        got["scatter"] = t.tolist()
        out = torch.zeros(3, dtype=torch.float64)
        b.reduce_scatter(out, [torch.full((3,), float(d + rank), dtype=torch.float64) for d in range(n)])
        got["reduce_scatter"] = out.tolist()
        b.barrier()
        got["objects"] = b.all_gather_object({"rank": rank})
        sub = b.subgroup([0, 2])
        if rank in (0, 2):
            t = torch.tensor([float(rank)])
            sub.all_reduce(t)
            got["subgroup"] = t.tolist()
        return got

    return run_actors(cfg, n, main, allreduce_algorithm=a["algorithm"])


def contention(a):
    """Lone and simultaneous transfers of ``size`` bytes (point to point, both sides posted together)."""
    cfg = platform_config(a["platform"])
    pairs, n, size = a["pairs"], a["n"], a["size"]

    def main(rank, world):
        b = SimBackend(world, rank, list(range(n))).scaled(size / 4096)
        t = torch.ones(1024)
        spans = []
        for phase, active in (("lone", pairs[:1]), ("together", pairs)):
            b.barrier()
            t0 = _now()
            for src, dst in active:
                if rank == src:
                    b.isend(t, dst).wait()
                if rank == dst:
                    b.irecv(t, src).wait()
            if any(rank == dst for _, dst in active):
                spans.append((phase, _now() - t0))
        return spans

    out = {}
    for spans in run_actors(cfg, n, main):
        for phase, d in spans:
            out[phase] = max(out.get(phase, 0.0), d)
    return out


def rendezvous(a):
    """gloo's point-to-point protocol: a late sender is charged from its post; a send posted
    early waits for its receive; a receive from any source takes the first sender announced,
    one at a time (rank 0 receives from ranks 1 and 2)."""
    import simgrid

    cfg = platform_config({"name": "ethernet_10g", "msg_efficiency": 1.0})  # at line rate (the test's constants)
    size = a["size"]

    def main(rank, world):
        b = SimBackend(world, rank, [0, 1, 2]).scaled(size / 4096)
        t = torch.ones(1024) * (rank + 1)
        if rank == 1:
            simgrid.this_actor.sleep_for(1.0)  # late sender: its receive is posted since t = 0
            b.isend(t, 0).wait()
            first = _now()
            simgrid.this_actor.sleep_for(3.0 - _now())
            b.isend(t, 0).wait()  # posted at t = 3, after rank 2's
            return {"first_send_done": first, "send_done": _now()}
        if rank == 2:
            simgrid.this_actor.sleep_for(2.0)
            b.isend(t, 0).wait()
            return {"send_done": _now()}
        b.irecv(t, 1).wait()
        out = {"first_received": _now()}
        simgrid.this_actor.sleep_for(5.0 - _now())  # late receiver: both sends posted, none has left
        for k in (1, 2):
            t0 = _now()
            b.irecv(t, None).wait()
            out[f"any{k}_wait"], out[f"any{k}_value"] = _now() - t0, float(t[0])
        return out

    return run_actors(cfg, 3, main)


def streams(a):
    """``k`` all-reduces of ``size`` bytes issued at once (``async_op``), then a synchronous one of
    the same size, on ``n`` ranks with ``collective_streams`` slots: when each ended (rank 0)."""
    cfg = platform_config({"name": "ethernet_10g", "msg_efficiency": 1.0, "small_allreduce_bytes": 0,
                           "collective_streams": a["streams"]})
    n, k, size = a["n"], a["k"], a["size"]

    def main(rank, world):
        b = SimBackend(world, rank, list(range(n))).scaled(size / 4096)
        ts = [torch.ones(1024) for _ in range(k + 1)]
        hs = [b.all_reduce(t, async_op=True) for t in ts[:k]]
        ends = []
        for h in hs:
            h.wait()
            ends.append(_now())
        b.all_reduce(ts[k])
        ends.append(_now())
        return {"ends": ends, "sums": [float(t[0]) for t in ts]}

    return run_actors(cfg, n, main)[0]


def deadlock(a):
    cfg = platform_config("ethernet_10g")

    def main(rank, world):
        b = SimBackend(world, rank, [0, 1])
        if rank == 0:
            b.irecv(torch.zeros(3), 1).wait()  # rank 1 never sends

    try:
        run_actors(cfg, 2, main)
    except Exception as e:  # noqa: BLE001
        return {"error": type(e).__name__, "message": str(e)}
    return {"error": None}


if __name__ == "__main__":
    print(json.dumps(globals()[sys.argv[1]](json.loads(sys.argv[2]))))
