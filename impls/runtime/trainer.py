"""One rank's training run: the run skeleton every algorithm plugs into.

Started once per rank by ``torchrun`` (``python -m impls.run``) or as a simulated rank
(:mod:`impls.sim`); without torchrun's environment it runs as a single process.  The
runtime owns everything that must be the same for every method: seeding, data sharding,
the straggler model, timing, metrics, evaluation, checkpoints and resume.  The algorithm
(``impls/algorithms``) owns only communication and the parameter update (protocol:
:mod:`impls.protocol`).  The runtime by concern:

=================  ======================================================================
``trainer.py``     the run skeleton (:func:`train`): config, seeding, backend, clock, model,
                   algorithm, the run's files; :func:`run_plan`: several runs in one launch
``context.py``     :class:`~impls.runtime.context.RunContext`: what the loops below share
``checkpoint.py``  each rank's checkpoint: saved per epoch, the epoch to resume agreed, restored
``worker.py``      a worker's loop: epochs, steps, evaluation points, records, divergence
``server.py``      a server rank's loop (parameter servers): records, divergence, checkpoint
``steps.py``       the step schedules: which steps a worker takes, and the epoch-end policy
``agreement.py``   the runtime's own agreement across ranks (notes, a common value, divergence)
``precision.py``   mixed precision (autocast, fp16's loss scaler), for every method
``loop.py``        the training step and its parts, shared with the benchmarks
=================  ======================================================================
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..backends import Backend, ChargedClock, Clock, backend_of, current_backend
from ..comm.communicator import Communicator
from ..errors import ConfigError, DivergedError
from .metrics import MetricsWriter
from ..protocol import Context
from .provenance import config_hash, provenance, rank_map
from ..config.runconfig import Resolved, RunConfig, resolve
from .straggler import StragglerModel, straggler_config
from ..tasks import build_task
from .checkpoint import resume
from .context import RunContext
from .loop import steady_heap
from .server import run_server
from .worker import run_worker

STARTED = "STARTED"  # marker rank 0 writes into a run's output directory when the launch reaches it


def write_error(out: Path, kind: str, err: Exception) -> None:
    """Record why a run failed deterministically: ``ERROR.txt`` (one line for people) and
    ``error.json`` ``{"kind": "config" | "diverged", "message": ...}`` for the workflow
    (a deterministic failure is not retried until its config changes)."""
    out.mkdir(parents=True, exist_ok=True)
    text = f"invalid configuration: {err}" if kind == "config" else str(err)
    (out / "ERROR.txt").write_text(text + "\n")
    (out / "error.json").write_text(json.dumps({"kind": kind, "message": text}))


def _seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _clock(run: RunConfig, backend: Backend, clock: Clock | None) -> Clock:
    """The run's clock: the one given (a simulated rank's), a charged one for real ranks under a
    fixed profile (:class:`~impls.backends.ChargedClock`), else the wall clock."""
    if clock is None and run.profile is not None:
        from ..sim.profiles import Profile

        prof = Profile(run.parsed["profile"])  # parsed once, by the backend's spec
        clock = ChargedClock(prof.step_time(run.seed, backend.rank), prof.describe(), prof.cfg.backward_fraction)
    return clock if clock is not None else Clock()


def _write_run_files(out_dir: Path, raw: dict[str, Any], backend: Backend, roles: list[str], device,
                     clock: Clock, model_bytes: int) -> None:
    """Rank 0's ``config.json`` and ``provenance.json`` (what ran where, the clock)."""
    ranks = rank_map(backend)  # where each rank ran (host, torchrun node, Slurm task); every rank calls it
    if backend.rank != 0:
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(raw, indent=2, sort_keys=True))
    (out_dir / "provenance.json").write_text(json.dumps(provenance(raw, {
        "world": backend.world, "roles": roles, **backend.spec.provenance(backend), "ranks": ranks,
        "device": str(device),
        # wire_scale: how many times its bytes each algorithm message weighs on this clock (the
        # paper model's size / the stand-in's under a paper profile; 1 otherwise): the report
        # shows bytes at the model size the times use (distrepro_wf.pipeline.collect)
        "time": {**clock.describe(), "wire_scale": clock.wire_scale(model_bytes)}}), indent=2))


def train(raw: dict[str, Any], out_dir: str | os.PathLike, ckpt_dir: str | os.PathLike | None = None,
          backend: Backend | None = None, clock: Clock | None = None, resolved: Resolved | None = None) -> None:
    """Run one configuration on this rank (``backend``: its process group; default: this
    process alone, or torchrun's group when started by torchrun).

    1. resolve the config, check the world size against the algorithm's roles;
    2. build the task's data and the model (the same seed on every rank: identical init);
    3. the algorithm on its Communicator, set up; rank 0 writes the run's files;
    4. resume from the ranks' agreed checkpoint, then the worker's or the server's loop.

    ``resolved``: ``raw`` resolved already (the simulation engine resolves a run once for all its
    ranks, each getting its own copy)."""
    res = resolved if resolved is not None else resolve(raw)
    run, wl = res.run, res.workload
    backend = backend if backend is not None else current_backend(run.backend)
    clock = _clock(run, backend, clock)
    rank, workers = backend.rank, run.nodes
    roles = res.algorithm_cls.roles(workers, res.algorithm)
    device = backend_of(run.backend).device(run.backend)
    if backend.world != len(roles):
        raise ConfigError("nodes", f"config says {workers} workers ({len(roles)} processes with the algorithm's "
                                   f"other roles) but {backend.world} processes were started")
    torch.set_num_threads(run.threads_per_rank)
    steady_heap()  # a step's freed memory stays for the next step (impls.runtime.loop)
    if backend.spec.one_process:
        wl.loader_workers = 0  # ranks sharing one process (simulated ones): no loader processes per rank
    task = build_task(wl, device)
    _seed_all(run.seed)
    task.build_data()
    _seed_all(run.seed)  # identical model init on every rank
    model = task.build_model()
    # the algorithm's traffic; where time is simulated under a paper profile its messages weigh
    # what the paper's model would (impls.sim.profiles); the runtime's own control traffic does not
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    comm = Communicator(backend.scaled(clock.wire_scale(model_bytes)), clock, run.allreduce_algorithm)
    # the workers' own group for what only workers do (consensus); all ranks create it
    wgroup = backend.subgroup(list(range(workers))) if len(roles) > workers else backend
    worker = rank < workers
    straggler = StragglerModel(res.straggler if worker else straggler_config(None), rank if worker else 0,
                               workers, run.seed)
    algo = res.algorithm_cls(res.algorithm, Context(rank, workers, comm, res.optim, run.seed, device, tuple(roles)))
    algo.setup(model)
    _write_run_files(Path(out_dir), raw, backend, roles, device, clock, model_bytes)
    _run_rank(RunContext(res, algo, model, task, comm, backend, wgroup, straggler, rank, workers, device,
                         Path(out_dir), Path(ckpt_dir) if ckpt_dir and run.checkpoint else None, config_hash(raw),
                         backend.next_run_id()))


def _run_rank(ctx: RunContext) -> None:
    """Step 4: resume (every rank agrees on the checkpoint's epoch), then this rank's loop."""
    resumed = resume(ctx)
    writer = MetricsWriter(ctx.out_dir / "metrics" / f"rank{ctx.rank}.jsonl", ctx.rank, resumed.metrics)
    loop = run_worker if ctx.algo.is_worker() else run_server
    loop(ctx, resumed, writer)


def run_plan(entries: list[dict[str, str]], backend: str = "auto") -> None:
    """Run several configurations of one world size in one launch, in order.

    ``entries``: ``[{"config": path, "out": dir, "checkpoint_dir": dir}, ...]``.  One
    process group serves them all, which saves every run the process start, the
    ``import torch`` and the rendezvous.  Each entry reseeds everything, so its numbers
    do not depend on what ran before it.
    """
    group = current_backend(backend)
    rank = group.rank
    try:
        for e in entries:
            out = Path(e["out"])
            if rank == 0:  # the workflow tells "started" from "never reached" by this marker
                out.mkdir(parents=True, exist_ok=True)
                (out / STARTED).write_text(time.strftime("%Y-%m-%dT%H:%M:%S%z") + "\n")
            with open(e["config"]) as f:
                raw = json.load(f)
            try:
                train(raw, out, e.get("checkpoint_dir"), group)
            except (ConfigError, DivergedError) as err:
                # Raised identically on every rank (config checks come before any communication;
                # divergence is agreed by all ranks first), so all ranks skip this entry together
                # and the rest of the plan still runs.
                if rank == 0:
                    write_error(out, "config" if isinstance(err, ConfigError) else "diverged", err)
            group.barrier()
    finally:
        group.close()
