"""impls.comm.allreduce: every all-reduce algorithm built from point-to-point messages sums
exactly, on simulated ranks (SimGrid actors) and on real gloo ranks, and on the simulated
star network its time is the alpha-beta prediction of impls.comm.costmodel.

Simulations run in a forked child of the test process (SimGrid's engine runs once per
process; forking skips the ~3 s of importing torch again)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import torch

from impls.comm.allreduce import (ALGORITHMS, DUPLEX, all_reduce, binomial_broadcast_steps, binomial_reduce_steps, fold,
                             ring_steps)
from impls.backends import Backend
from impls.comm.costmodel import allreduce_cost, alpha_beta_seconds, collective_cost
from impls.sim.platforms import alpha_beta, platform_config
from impls.backends.sim import NOTIFY_BYTES

ROOT = Path(__file__).resolve().parents[1]
NODES = [2, 3, 4, 5, 8]
#: the simulated star network (no link shared by two flows of a power-of-two world) gives the
#: alpha-beta time up to SimGrid's float arithmetic
SIM_TOL = 1e-4


def in_child(fn, *args):
    """``fn(*args)`` in a forked child (its own SimGrid engine); its JSON-able result."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        code = 0
        try:
            payload = json.dumps({"ok": fn(*args)})
        except BaseException:  # noqa: BLE001
            payload, code = json.dumps({"error": traceback.format_exc()}), 1
        with os.fdopen(wfd, "w") as f:
            f.write(payload)
        os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd) as f:
        data = json.loads(f.read() or '{"error": "no answer"}')
    os.waitpid(pid, 0)
    assert "ok" in data, data.get("error")
    return data["ok"]


def inputs(n: int, size: int) -> list[torch.Tensor]:
    """Every rank's integer-valued float32 tensor (sums exact in any order)."""
    return [torch.arange(size, dtype=torch.float32) * (r + 1) - 3 * r for r in range(n)]


def _sizes(n: int) -> list[int]:
    return sorted({1, max(1, n - 1), n, 7, 2 * n + 1, 101})


def _simulate_values() -> dict:
    from impls.backends.sim import SimBackend
    from impls.sim.engine import run_actors

    top = max(NODES)

    def main(rank, world):
        everyone = SimBackend(world, rank, list(range(top)), gid="all")
        got = {}
        for n in NODES:
            if rank < n:
                b = SimBackend(world, rank, list(range(n)), gid=f"n{n}")
                for size in _sizes(n):
                    for algo in ALGORITHMS:
                        t = inputs(n, size)[rank]
                        all_reduce(t, b, algo)
                        got[f"{n}/{size}/{algo}"] = t.tolist()
                    # float64, random: the same bits on every rank, within 1e-12 of the naive sum
                    x = torch.randn(size, dtype=torch.float64, generator=torch.Generator().manual_seed(7 * n + rank))
                    for algo in ALGORITHMS:
                        t = x.clone()
                        all_reduce(t, b, algo)
                        got[f"{n}/{size}/{algo}/f64"] = t.tolist()
            everyone.barrier()
        return got

    return run_actors(platform_config({"name": "ethernet_10g", "small_allreduce_bytes": 0}), top, main)


@pytest.fixture(scope="module")
def simulated():
    return in_child(_simulate_values)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_simulated_ranks_sum_exactly(simulated, algorithm):
    for n in NODES:
        for size in _sizes(n):
            want = torch.stack(inputs(n, size)).sum(0).tolist()
            ref = torch.stack([torch.randn(size, dtype=torch.float64,
                                           generator=torch.Generator().manual_seed(7 * n + r)) for r in range(n)]).sum(0)
            for r in range(n):
                assert simulated[r][f"{n}/{size}/{algorithm}"] == want, (n, size, r)
                f64 = simulated[r][f"{n}/{size}/{algorithm}/f64"]
                assert f64 == simulated[0][f"{n}/{size}/{algorithm}/f64"], ("ranks differ", n, size, r)
                assert torch.allclose(torch.tensor(f64, dtype=torch.float64), ref, rtol=0, atol=1e-12), (n, size)


@pytest.mark.parametrize("n", range(1, 10))
def test_the_shared_schedules_deliver_every_contribution(n):
    """The schedules both executors run (impls.comm.allreduce's functions and the simulated backend's
    collectives), played on sets of contributions: every rank ends with every rank's part."""
    held = [[{r} for _ in range(n)] for r in range(n)]  # held[rank][chunk]: whose values it holds
    plans = [ring_steps(n, r) for r in range(n)]
    for phase in (0, 1):  # reduce-scatter (add), all-gather (copy); all ranks step together
        for s in range(n - 1):
            sent = [set(held[(r - 1) % n][plans[(r - 1) % n][phase][s][0]]) for r in range(n)]
            for r in range(n):
                send, recv = plans[r][phase][s]
                assert recv == plans[(r - 1) % n][phase][s][0]  # both ends name the same chunk
                held[r][recv] = held[r][recv] | sent[r] if phase == 0 else sent[r]
    assert all(c == set(range(n)) for h in held for c in h)
    tree, done = [{v} for v in range(n)], set()
    for v in sorted(range(1, n), key=lambda v: v & -v):  # reduce to 0: v sends in round log2(lowbit(v))
        *recvs, (kind, to) = binomial_reduce_steps(n, v)
        assert kind == "send" and {u for _, u in recvs} <= done  # its subtree's sums arrived first
        tree[to] |= tree[v]
        done.add(v)
    assert all(k == "recv" for k, _ in binomial_reduce_steps(n, 0))  # the root only receives
    assert {u for _, u in binomial_reduce_steps(n, 0)} <= done and tree[0] == set(range(n))
    got = {0}
    for v in range(n):  # parents before children (v - lowbit(v) < v)
        parent, children = binomial_broadcast_steps(n, v)
        assert (parent is None) == (v == 0) and (parent is None or parent in got)
        assert all(v in binomial_broadcast_steps(n, c)[0:1] for c in children)
        got.add(v)
    p, _, _ = fold(n, 0)
    assert p <= n < 2 * p and [fold(n, r)[1] for r in range(n)] == \
        [r + p if r + p < n else None for r in range(p)] + [r - p for r in range(p, n)]


def test_one_rank_and_bad_input():
    t = torch.arange(5.0)
    for algo in ALGORITHMS:
        assert all_reduce(t, Backend(), algo).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="algorithm: unknown all-reduce algorithm 'butterfly'; allowed: ring"):
        all_reduce(t, Backend(), "butterfly")
    with pytest.raises(ValueError, match="contiguous"):
        all_reduce(torch.zeros(4, 4).t(), Backend(), "ring")


def test_cost_model_bytes_and_steps():
    S, n = 1000.0, 8
    assert allreduce_cost("ring", S, n) == collective_cost("all_reduce", S, n, "ring")
    assert (allreduce_cost("rabenseifner", S, n).steps, allreduce_cost("rabenseifner", S, n).wire_bytes) == (6, 1750.0)
    assert allreduce_cost("recursive_doubling", S, 5).steps == 4  # 2 rounds + fold in + fold out
    assert allreduce_cost("ps", S, n).wire_bytes == 14 * S
    assert allreduce_cost("tree", S, n).steps == 6


def _simulate_times(platform: str) -> list:
    from impls.bench.allreduce import sim_times

    return sim_times(platform_config({"name": platform}), [2, 4, 8], [1e3, 1e6, 1e8])


@pytest.mark.parametrize("platform", ["ethernet_10g", "infiniband_100g"])
def test_simulated_time_is_alpha_beta_and_deterministic(platform):
    rows = in_child(_simulate_times, platform)
    assert rows == in_child(_simulate_times, platform)  # same platform, same numbers
    alpha, beta = alpha_beta(platform_config(platform))
    one_way = alpha_beta(platform_config(platform), duplex=False)[1]
    assert len(rows) == 3 * 3 * len(ALGORITHMS)
    for row in rows:
        b = beta if DUPLEX[row["algorithm"]] else one_way
        cost = allreduce_cost(row["algorithm"], row["bytes"], row["n"])
        # every message is a torch isend/irecv pair, gloo's rendezvous: its 48-byte "send ready"
        # notification shares the link with its data (impls.backends.sim); one per message on the
        # critical path (the server's link carries every worker's message)
        messages = cost.wire_bytes / row["bytes"] if row["algorithm"] == "ps" else cost.steps
        cost = dataclasses.replace(cost, wire_bytes=cost.wire_bytes + messages * NOTIFY_BYTES)
        want = alpha_beta_seconds(cost, alpha, b)
        assert abs(row["seconds"] / want - 1) <= SIM_TOL, (row, want)


@pytest.mark.spawn
def test_real_gloo_ranks_match_dist_all_reduce(tmp_path):
    """One torchrun launch of 4 ranks: groups of 2, 3 and 4 ranks."""
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
                           str(ROOT / "tests" / "spawn_allreduce_p2p.py"), str(tmp_path)], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
    for key in got[0]:
        n = int(key.split("/")[0])
        for r in range(n):
            assert got[r][key]["max_err"] <= 1e-12, (key, r, got[r][key]["max_err"])
            assert got[r][key]["bits"] == got[0][key]["bits"], ("ranks differ", key, r)
    sizes = {n: len({1, n - 1, 7, 1000}) for n in (2, 3, 4)}  # as spawn_allreduce_p2p.py's
    assert len(got[0]) == sum(sizes.values()) * len(ALGORITHMS) and len(got[3]) == sizes[4] * len(ALGORITHMS)
