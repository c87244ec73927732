"""Run one configuration on the simulated platform: one process, one SimGrid engine,
one actor per rank (workers and servers), each running :func:`impls.runtime.trainer.train`
with a :class:`~impls.backends.sim.SimBackend` and a :class:`~impls.backends.sim.SimClock`.

SimGrid allows one engine per process, so every simulated run is a process of its own
(``python -m impls.sim``); it is deterministic: the same config gives the same numbers,
simulated times included.  A rank's exception ends that rank; the others end or block,
and the first error (in rank order) is raised once the simulation stops.  Ranks still
blocked when nothing else can happen are a deadlock (on real ranks: a hang until the
process group's timeout), raised as :class:`SimulationDeadlock` naming them.

One CPU per simulation (:func:`one_cpu`): SimGrid's Python bindings run every actor as a thread
of its own and hand control from one to the next (thread contexts), so a simulation runs one
thread at a time, and each hand-off wakes the next thread: on another CPU, that is a cross-CPU
wake-up.  Measured on 2 cores (a 64-node ResNet-50 AR-SGD step of the plan, 122,880 ring messages,
~500,000 hand-offs): 16.9 CPU-s and 22 s free to roam, 9.5 CPU-s and 12 s on one CPU; two at once,
15-19 against 9.5 CPU-s each.  Where the threads run changes no simulated number.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from ..errors import ConfigError
from .platforms import check_hosts


class SimulationDeadlock(RuntimeError):
    pass


def check_sim_config(raw: Mapping[str, Any], res: Any = None) -> tuple[Any, Any, int]:
    """Platform and profile configs of a simulated run, and its number of hosts (every
    error raised here names its key, before any simulation starts).  ``res``: ``raw`` already
    resolved (:func:`impls.config.runconfig.resolve`), whose platform and profile were parsed
    then (``res.run.parsed``); None: resolved here."""
    from ..backends import backend_of, simulated_names
    from ..config.runconfig import resolve

    res = resolve(raw) if res is None else res
    if not backend_of(res.run.backend).simulated:
        raise ConfigError("backend", f"{res.run.backend!r} is not a simulated backend; use "
                                     f"{' or '.join(map(repr, simulated_names()))}")
    hosts = len(res.algorithm_cls.roles(res.run.nodes, res.algorithm))
    pcfg = res.run.parsed["platform"]
    check_hosts(pcfg, hosts)
    return pcfg, res.run.parsed["profile"], hosts


#: where the simulations of this machine claim their CPUs (one lock file per CPU: :func:`one_cpu`)
CPU_LOCKS = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / "distrepro-sim-cpus"


@contextmanager
def one_cpu(locks: Path | None = None) -> Iterator[int | None]:
    """Run this thread, and every thread it starts meanwhile (SimGrid's actors), on one CPU of
    those it may use, one that no other simulation of this machine holds (module docstring).

    A CPU is held by a lock on ``locks/cpu<k>.lock`` (default :data:`CPU_LOCKS`), taken without
    waiting and let go at the end (or when the process dies), so simulations running side by side
    (the pipeline's jobs, two at a time on 2 cores) take different CPUs.  Yields the CPU, or None
    where every allowed CPU is held, or the platform cannot pin (then the threads run where the
    kernel puts them, as without this).  The thread's own CPU set is restored at the end."""
    if not hasattr(os, "sched_setaffinity"):  # not Linux: the kernel decides
        yield None
        return
    import fcntl

    allowed = sorted(os.sched_getaffinity(0))
    held, cpu = None, None
    try:
        d = locks if locks is not None else CPU_LOCKS
        d.mkdir(parents=True, exist_ok=True)
        for k in allowed:
            f = open(d / f"cpu{k}.lock", "a")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.close()
                continue
            held, cpu = f, k
            break
    except OSError:  # no writable lock directory: unpinned
        pass
    pinned = False
    if cpu is not None and len(allowed) > 1:
        try:
            os.sched_setaffinity(0, {cpu})
            pinned = True
        except OSError:  # not permitted here (a sandbox): unpinned
            cpu = None
    try:
        yield cpu
    finally:
        if pinned:
            os.sched_setaffinity(0, allowed)
        if held is not None:
            held.close()


def run_actors(pcfg: Any, n: int, main: Callable[[int, Any], Any], seed: int = 0,
               allreduce_algorithm: str = "ring") -> list[Any]:
    """Simulate ``n`` ranks on platform ``pcfg``: rank ``r`` runs ``main(r, world)`` as an
    actor on host ``r`` (``world``: the :class:`~impls.backends.sim.World`, to build the
    rank's :class:`~impls.backends.sim.SimBackend`); returns every rank's return value.
    ``allreduce_algorithm``: the run's (``ring``, ``tree``, ``recursive_doubling``).
    One call per process (SimGrid's engine cannot be restarted)."""
    import simgrid

    from ..backends.sim import World
    from .platforms import build_platform

    engine = simgrid.Engine(["distrepro", "--log=root.thres:critical", "--cfg=network/model:LV08"])
    platform = build_platform(pcfg, n)
    world = World(platform.hosts, allreduce_algorithm, pcfg.small_allreduce_bytes)
    world.allreduce_efficiency = float(getattr(pcfg, "allreduce_efficiency", 1.0))
    world.collective_streams = int(getattr(pcfg, "collective_streams", 1))
    outcome: dict[int, tuple[bool, Any]] = {}

    def body(rank: int) -> None:
        try:
            outcome[rank] = (True, main(rank, world))
        except simgrid.ActorKilled:  # SimGrid ends the actors of a deadlock this way: leave, unrecorded
            raise
        except BaseException as e:  # noqa: BLE001 - an uncaught exception would abort the process
            outcome[rank] = (False, e)

    with one_cpu():  # before the first actor's thread starts: every thread of the simulation inherits it
        for r in range(n):
            world.actors[r] = simgrid.Actor.create(f"rank{r}", platform.hosts[r], body, r)
        platform.start_background(seed)
        engine.run()
    errors = [outcome[r][1] for r in sorted(outcome) if not outcome[r][0]]
    if errors:
        raise errors[0]
    stuck = [r for r in range(n) if r not in outcome]
    if stuck:
        raise SimulationDeadlock(f"simulation deadlocked at simulated time {simgrid.Engine.clock:.6f} s: "
                                 f"rank(s) {stuck} blocked forever (a send or receive without its match)")
    return [outcome[r][1] for r in range(n)]


def simulate(raw: Mapping[str, Any], out: str | os.PathLike, ckpt_dir: str | os.PathLike | None = None,
             calibration: str | os.PathLike | None = None) -> None:
    """Run ``raw`` (a resolved run config with ``backend: simgrid``) to completion."""
    import copy

    from ..backends.sim import SimBackend, SimClock
    from ..config.runconfig import resolve
    from ..runtime.trainer import train
    from .calibration import build_profile

    res = resolve(raw)  # once for the whole run: every rank gets its own copy, parsed already
    pcfg, prof_cfg, n = check_sim_config(raw, res)
    profile = build_profile(prof_cfg, raw, calibration)
    describe = {**profile.describe(), "platform": {k: v for k, v in vars(pcfg).items() if v is not None}}

    def rank_main(rank: int, world: Any) -> None:
        clock = SimClock(profile.step_time(int(raw.get("seed", 0)), rank), profile.wire_scale, describe,
                         profile.opcost, backward_fraction=prof_cfg.backward_fraction,
                         gradient_layout=profile.gradient_layout())
        world.clocks[rank] = clock
        train(raw, Path(out), ckpt_dir, SimBackend(world, rank, list(range(n))), clock, resolved=copy.deepcopy(res))

    run_actors(pcfg, n, rank_main, int(raw.get("seed", 0)), raw.get("allreduce_algorithm", "ring"))
