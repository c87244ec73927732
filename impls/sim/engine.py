"""Run one configuration on the simulated platform: one process, one SimGrid engine,
one actor per rank (workers and servers), each running :func:`impls.runtime.trainer.train`
with a :class:`~impls.backends.sim.SimBackend` and a :class:`~impls.backends.sim.SimClock`.

SimGrid allows one engine per process, so every simulated run is a process of its own
(``python -m impls.sim``); it is deterministic: the same config gives the same numbers,
simulated times included.  A rank's exception ends that rank; the others end or block,
and the first error (in rank order) is raised once the simulation stops.  Ranks still
blocked when nothing else can happen are a deadlock (on real ranks: a hang until the
process group's timeout), raised as :class:`SimulationDeadlock` naming them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

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
    outcome: dict[int, tuple[bool, Any]] = {}

    def body(rank: int) -> None:
        try:
            outcome[rank] = (True, main(rank, world))
        except simgrid.ActorKilled:  # SimGrid ends the actors of a deadlock this way: leave, unrecorded
            raise
        except BaseException as e:  # noqa: BLE001 - an uncaught exception would abort the process
            outcome[rank] = (False, e)

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
