"""What a simulated run pays besides its simulation (issue 33: a plan's 64-node crossover maps
within its time budget): the fork server builds a paper model's layout once, not once per run;
the ranks of one simulation parse the stand-in's data once, not once each (and build a finite-sum
problem once); the server hides its heap from its children's collector; and a launch's end is
seen when it comes, not at the next poll.  None of it changes a simulated number
(``tests/test_sim_runs.py``, ``tests/test_plan.py`` pin them)."""

from __future__ import annotations

import json
import subprocess
import time

from conftest import make_config


def test_the_fork_server_builds_a_paper_layout_before_forking_its_runs(tmp_path):
    """A run under a paper profile times its buckets by the paper model's layout, built from
    torchvision's definition (importing torchvision and torch._dynamo: ~3.5 CPU-s, more than a
    16-node simulation).  The server builds it while preparing the request, so the forked run
    finds it built; a profile without a layout builds nothing."""
    from impls.sim import __main__ as server
    from impls.sim import profiles

    fixed, paper = tmp_path / "fixed.json", tmp_path / "paper.json"
    fixed.write_text(json.dumps(make_config("allreduce_sgd", 2, backend="simgrid", platform="ethernet_10g",
                                            profile={"name": "fixed", "step_ms": 10})))
    paper.write_text(json.dumps(make_config("allreduce_sgd", 2, backend="simgrid", platform="ethernet_10g",
                                            profile={"name": "resnet50_v100x1"})))
    saved = dict(profiles._LAYOUT_CACHE)
    profiles._LAYOUT_CACHE.clear()
    try:
        server._preload(str(fixed))
        assert profiles._LAYOUT_CACHE == {}
        server._preload(str(paper))
        assert list(profiles._LAYOUT_CACHE) == ["resnet50"]
        layout = profiles._LAYOUT_CACHE["resnet50"]
        assert len(layout) == 161 and sum(layout) == 25_557_032 * 4  # torchvision's ResNet-50, fp32
        server._preload(str(tmp_path / "missing.json"))  # a request the child will report: nothing raised here
    finally:
        profiles._LAYOUT_CACHE.clear()
        profiles._LAYOUT_CACHE.update(saved)


def test_the_digits_are_parsed_once_per_process_and_each_caller_gets_its_own_array():
    """The ranks of a simulation share one process; each builds its data (64 parses of the
    gzipped CSV took 0.35 CPU-s of a 64-node run).  One parse, and a fresh array per call: a
    rank that changes its copy (``digits`` scales the pixels in place) changes no other's."""
    from impls.data import digits as d

    d._parsed.cache_clear()
    a = d.load_digits_array()
    a[:, :64] /= 16.0
    b = d.load_digits_array()
    assert d._parsed.cache_info().misses == 1 and d._parsed.cache_info().hits == 1
    assert b.shape == (1797, 65) and b[:, :64].max() == 16.0 and a[:, :64].max() == 1.0
    x1, x2 = d.digits().train.tensors[0], d.digits().train.tensors[0]
    assert float(x1.max()) == 1.0 and bool((x1 == x2).all())


def test_the_finite_sum_problem_is_built_once_per_process():
    """Every rank of a simulation builds the same problem from ``data_seed``: 16 ranks each
    building a 4096-component quadratic took 40 % of a short 16-node simulation (issue 31's
    simulated range ends).  Built once a process, the numbers the ones the recipe gives."""
    import torch

    from impls.tasks import TASKS
    from impls.tasks import finite_sum as fs

    fs._problem.cache_clear()
    cfg = fs.FiniteSumConfig(n=256, dim=6, condition=5, spread=0.3)
    a, b = (TASKS.get("finite_sum")(cfg, None, torch.device("cpu")) for _ in range(2))
    a.build_data()
    b.build_data()
    assert a.A is b.A and a.x_star is b.x_star and fs._problem.cache_info().misses == 1
    fresh = fs._problem.__wrapped__(*fs.astuple(cfg))  # the recipe itself, uncached
    assert torch.equal(a.A, fresh["A"]) and torch.equal(a.b, fresh["b"]) and a.f_star == fresh["f_star"]
    other = TASKS.get("finite_sum")(fs.FiniteSumConfig(n=256, dim=6, condition=5, spread=0.3, data_seed=1), None,
                                    torch.device("cpu"))
    other.build_data()
    assert not torch.equal(other.A, a.A) and fs._problem.cache_info().misses == 2


def test_the_fork_server_hides_its_heap_from_the_childrens_collector(tmp_path, monkeypatch):
    """The server holds torch, SimGrid and the registries; a forked run that collects garbage
    would write into every inherited object and copy the whole heap page by page (a short
    16-node run took 0.61 s, 0.44 s with the heap frozen).  So the server freezes it right before
    each fork (``gc.freeze``), and the run still completes."""
    import gc
    import io
    import os

    from impls.sim import __main__ as server

    cfg = tmp_path / "run.json"
    cfg.write_text(json.dumps(make_config("allreduce_sgd", 2, backend="simgrid", platform="ethernet_10g",
                                          profile={"name": "fixed", "step_ms": 10})))
    frozen, real_fork = [], os.fork
    monkeypatch.setattr(os, "fork", lambda: frozen.append(gc.get_freeze_count()) or real_fork())
    gc.unfreeze()
    out = io.StringIO()
    try:
        server.serve(io.StringIO(json.dumps({"config": str(cfg), "out": str(tmp_path / "out"),
                                             "log": str(tmp_path / "log")}) + "\n"), out)
    finally:
        gc.unfreeze()
    replies = [json.loads(x) for x in out.getvalue().splitlines()]
    assert replies[-1] == {"rc": 0}, (tmp_path / "log").read_text()[-2000:]
    assert len(frozen) == 1 and frozen[0] > 10_000  # the server's objects, torch's among them
    assert (tmp_path / "out" / "metrics" / "rank0.jsonl").exists()


def test_a_launch_is_seen_to_end_when_it_ends_not_at_the_next_poll():
    """The launcher's watch checks a run's timeout every ``POLL_S`` (0.5 s) but returns as soon
    as the launch ends: a plan runs hundreds of simulations of 0.4-8 s one after another per
    core, and sleeping to the next poll idled each core 0.25 s per run on average."""
    from distrepro_wf.pipeline import runs

    assert runs.POLL_S >= 0.5
    proc = subprocess.Popen(["true"])
    t0 = time.monotonic()
    assert runs._watch(proc, [], timeout_s=60) == (None, None)
    assert time.monotonic() - t0 < runs.POLL_S / 2 and proc.returncode == 0


def test_a_simulation_runs_on_one_cpu_and_two_side_by_side_on_two(tmp_path):
    """SimGrid runs each actor as a thread and hands control from one to the next: a cross-CPU
    wake-up at every hand-off doubled a 64-node AR-SGD simulation's CPU time.  Every thread of a
    simulation (the ranks' actors) runs on one CPU; a second simulation beside it claims another
    (a lock per CPU); with none free it runs unpinned; the caller's CPU set comes back after."""
    import os
    import sys
    import threading

    import pytest

    from impls.sim.engine import one_cpu

    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        pytest.skip("one CPU: nothing to pin")
    seen, go = {}, threading.Event()

    def beside() -> None:  # another simulation of this machine, side by side (started unpinned)
        go.wait()
        with one_cpu(tmp_path) as b:
            seen.update(b=b, beside=os.sched_getaffinity(0))

    other = threading.Thread(target=beside)
    other.start()
    with one_cpu(tmp_path) as a:
        t = threading.Thread(target=lambda: seen.update(thread=os.sched_getaffinity(0)))
        t.start()
        t.join()
        go.set()
        other.join()
        assert os.sched_getaffinity(0) == {a} and seen["thread"] == {a}
    assert a in allowed and seen["b"] in allowed and seen["b"] != a and seen["beside"] == {seen["b"]}
    assert os.sched_getaffinity(0) == allowed
    # every allowed CPU held by other simulations: unpinned
    import fcntl

    held = [open(tmp_path / f"cpu{k}.lock", "a") for k in sorted(allowed)]
    for f in held:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with one_cpu(tmp_path) as none:
        assert none is None and os.sched_getaffinity(0) == allowed
    for f in held:
        f.close()
    # a real simulation's ranks: their actors' threads all on the CPU it claimed
    code = ("import json, os, sys; from impls.sim.engine import run_actors; "
            "from impls.sim.platforms import platform_config; "
            "print(json.dumps(run_actors(platform_config('ethernet_10g'), 4, "
            "lambda r, w: sorted(os.sched_getaffinity(0)))))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "run")})
    assert p.returncode == 0, p.stderr[-2000:]
    cpus = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(cpus) == 4 and all(c == cpus[0] for c in cpus) and len(cpus[0]) == 1 and cpus[0][0] in allowed


_STREAMS = r"""
import json, torch
import impls.backends.sim as sim
from impls.backends.sim import SimBackend
from impls.sim.engine import run_actors
from impls.sim.platforms import platform_config

saves = [0]
orig = sim._rng_state
def counted():
    saves[0] += 1
    return orig()
sim._rng_state = counted

def main(rank, world):
    torch.manual_seed(100 + rank)
    b = SimBackend(world, rank, list(range(8)))
    x = torch.ones(64) * rank
    got = [float(torch.rand(1))]
    b.all_reduce(x)  # a blocking ring: 14 messages a rank
    got.append(float(torch.rand(1)))
    h = b.all_reduce(x, async_op=True)  # in a helper actor, while this rank draws
    got.append(float(torch.rand(1)))
    h.wait()
    got.append(float(torch.rand(1)))
    y = torch.zeros(4)  # gossip's point to point: a send right, a receive from the left
    s = b.isend(torch.ones(4) * rank, (rank + 1) % 8)
    b.irecv(y, (rank - 1) % 8).wait()
    s.wait()
    got.append(float(torch.rand(1)))
    return got, float(x[0])

out = run_actors(platform_config({"name": "ethernet_10g", "small_allreduce_bytes": 0}), 8, main)
print(json.dumps({"out": out, "saves": saves[0]}))
"""


def test_a_collective_keeps_the_ranks_random_stream_once_not_per_message(tmp_path):
    """Each rank draws from its own torch stream while the others run (every blocking call of a
    rank keeps its stream: module docstring of impls.backends.sim).  A collective's schedule
    draws nothing, so its stream is kept once around the schedule, not around each of its
    blocking calls (a 64-node ring all-reduce: four a message, 126 messages a rank): 8 ranks,
    two ring all-reduces and a send each, save the stream a dozen times per rank, not 4 x 14 x 2.  (Before,
    the first use of a mailbox switched actors unkept: every rank continued the stream of the
    rank that ran last, from its first collective or send on.)"""
    import os
    import sys

    import torch

    p = subprocess.run([sys.executable, "-c", _STREAMS], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)})
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    for rank, (got, summed) in enumerate(res["out"]):
        g = torch.Generator().manual_seed(100 + rank)
        assert got == [float(torch.rand(1, generator=g)) for _ in range(5)], rank  # its own stream, undisturbed
        assert summed == 8 * sum(range(8))  # two all-reduces: the sum, then 8 times it
    assert res["saves"] < 8 * 20, res["saves"]  # measured: 104
