"""One rank's training run: the loop every algorithm plugs into.

Started once per rank by ``torchrun`` (``python -m impls.run``); without torchrun's
environment it runs as a single process.  It owns everything that must be the same
for every method: seeding, data sharding, the straggler model, timing,
metrics, evaluation, checkpoints and resume.  The algorithm (``impls/algorithms``)
owns only communication and the parameter update (protocol: :mod:`impls.protocol`).
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..backends import Backend, ChargedClock, Clock, backend_of, current_backend
from ..comm import Communicator
from ..data.sampler import build_sampler
from ..dataclass_config import from_dict
from ..errors import ConfigError, DivergedError
from ..metrics import MetricsWriter
from ..protocol import Context
from ..provenance import config_hash, provenance, rank_map
from ..runconfig import resolve
from ..straggler import StragglerModel, straggler_config
from ..protocol import ServeContext, StepContext
from ..tasks import Task, build_task
from .loop import batches, consensus_distance, measure_compute, steady_heap, train_step
from .precision import LossScaleConfig, MixedPrecision
from .steps import STEP_SCHEDULES

STARTED = "STARTED"  # marker rank 0 writes into a run's output directory when the launch reaches it
# tests: "rank:step": that rank dies with exit code 17 at that step; "rank:step:nan" ("...:inf"):
# that rank's gradient holds a NaN (an infinity) after that step's backward pass, its loss finite
FAULT_ENV = "DISTREPRO_FAULT"


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


def _load_checkpoint(path: Path, model: torch.nn.Module, h: str, device) -> tuple[dict | None, str | None]:
    """This rank's checkpoint if it is readable and of this config, else ``(None, why)``.

    An unreadable or damaged file (truncated, not a checkpoint, another model's
    shapes) is moved aside to ``<name>.unreadable-<time>`` and treated as absent: the
    run starts from scratch instead of failing every retry.  A checkpoint of another
    config is simply ignored (it is overwritten at the end of the first epoch).
    """
    if not path.exists():
        return None, None
    try:
        state = torch.load(path, map_location=device, weights_only=False)
        missing = {"epoch", "config_hash", "model", "algo", "rng", "wall_s", "metrics"} - set(state)
        if missing:
            raise ValueError(f"missing {sorted(missing)}")
        ours = model.state_dict()
        if set(state["model"]) != set(ours) or any(state["model"][k].shape != v.shape for k, v in ours.items()):
            raise ValueError("its parameters do not match this model")
    except Exception as e:  # noqa: BLE001  (any damage: EOFError, UnpicklingError, RuntimeError, ...)
        aside = path.with_name(f"{path.name}.unreadable-{time.strftime('%Y%m%dT%H%M%S')}")
        path.rename(aside)
        return None, f"{path.name} unreadable ({type(e).__name__}: {str(e)[:200]}), kept as {aside.name}"
    return (state if state["config_hash"] == h else None), None


def _gather_notes(note: str | None, backend: Backend) -> list[str]:
    """Every rank's note (None skipped), on every rank; one int all-reduce when there are none."""
    if backend.world == 1:
        return [f"rank 0: {note}"] if note else []
    flag = torch.tensor([int(note is not None)])
    backend.all_reduce(flag, op="max")
    if not int(flag):
        return []
    notes = backend.all_gather_object(note)
    return [f"rank {r}: {n}" for r, n in enumerate(notes) if n]


def _charge_optimizer(algo, clock, model_bytes: int) -> None:
    """Charge each local optimizer update to the clock as an ``optim`` op: one memory-bound
    pass over the parameters, the gradient and the optimizer's state (SGD with momentum
    reads p, g, m and writes p, m: 5 x the parameter bytes; the optimizer's
    ``bytes_touched`` says its own).  A no-op on the wall clock (the update's real time is
    spent); on a simulated one the op-cost model's time (:mod:`impls.sim.opcost`)."""
    opt = getattr(algo, "optimizer", None)
    if opt is None:
        return
    step, touched = opt.step, getattr(opt, "bytes_touched", 5) * model_bytes

    def charged(*a, **k):
        out = step(*a, **k)
        clock.charge_op("optim", touched)
        return out

    opt.step = charged


def _closure(algo, model: torch.nn.Module, task: Task, batch, prec: MixedPrecision | None = None):
    """``StepContext.closure``: loss and gradients on ``batch`` at the model's current parameters
    (under the run's precision: autocast, and fp16's scale applied and removed)."""
    def closure() -> torch.Tensor:
        algo.zero_grad()
        if prec is None:
            loss = task.loss(model, batch)
            loss.backward()
            return loss
        with prec.autocast():
            loss = task.loss(model, batch)
        prec.closure_backward(loss, model.parameters())
        return loss
    return closure


def _full_pass(sampler, epoch: int):
    """This worker's batches of one whole pass over its shard (``epoch``'s order); the
    algorithm's ``full_pass()`` yields each with its closure (``StepContext.closure``'s)."""
    own = copy.copy(sampler)  # the step schedule keeps iterating the original
    own.set_epoch(epoch)
    return own


def _finite_params(model: torch.nn.Module) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


def _arm_grad_fault(model: torch.nn.Module, value: float):
    """The gradient fault of :data:`FAULT_ENV` (tests): the first parameter's gradient gets
    ``value`` in its first entry as backward produces it (a tensor hook, so it enters the
    buckets the way a real one would, overlapped or not); returns the hook's handle."""
    p = next(p for p in model.parameters() if p.requires_grad)

    def poison(g: torch.Tensor) -> torch.Tensor:
        g = g.clone()
        g.view(-1)[0] = value
        return g

    return p.register_hook(poison)


def _check_divergence(first_bad: str | None, backend: Backend) -> None:
    """Raise :class:`DivergedError` on every rank if any rank saw a non-finite value.

    ``first_bad``: this rank's first such event ("step 13 (epoch 1): loss/train = nan").
    Called where every rank calls it (an epoch's end), so the ranks agree and leave the
    run together; the earliest report (the lowest step, then the lowest rank) names the
    run's failure: where a NaN appeared in one rank's gradient, not where the all-reduce
    spread it to the others' losses a step later.
    """
    notes = _gather_notes(first_bad, backend)
    if notes:
        notes.sort(key=lambda n: int(m.group(1)) if (m := re.search(r": step (\d+) ", n)) else math.inf)
        raise DivergedError(f"diverged: {notes[0]}" + (f" (and {len(notes) - 1} more rank(s))" if len(notes) > 1
                                                       else ""))


def _agree(value: int, backend: Backend) -> int | None:
    """The common value if every rank holds the same one, else None."""
    if backend.world == 1:
        return value
    t = torch.tensor([value, -value], dtype=torch.int64)
    backend.all_reduce(t, op="max")
    return value if int(t[0]) == -int(t[1]) else None


def train(raw: dict[str, Any], out_dir: str | os.PathLike, ckpt_dir: str | os.PathLike | None = None,
          backend: Backend | None = None, clock: Clock | None = None) -> None:
    """Run one configuration on this rank (``backend``: its process group; default: this
    process alone, or torchrun's group when started by torchrun)."""
    res = resolve(raw)
    run, wl = res.run, res.workload
    out_dir = Path(out_dir)
    backend = backend if backend is not None else current_backend(run.backend)
    if clock is None and run.profile is not None:  # real ranks under a fixed profile (ChargedClock)
        from ..sim.profiles import Profile, profile_config

        prof = Profile(profile_config(run.profile))
        clock = ChargedClock(prof.step_time(run.seed, backend.rank), prof.describe(), prof.cfg.backward_fraction)
    clock = clock if clock is not None else Clock()
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
    _charge_optimizer(algo, clock, model_bytes)
    h = config_hash(raw)
    ranks = rank_map(backend)  # where each rank ran (host, torchrun node, Slurm task)
    if rank == 0:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "config.json").write_text(json.dumps(raw, indent=2, sort_keys=True))
        (out_dir / "provenance.json").write_text(json.dumps(provenance(raw, {
            "world": backend.world, "roles": roles, **backend.spec.provenance(backend), "ranks": ranks,
            "device": str(device),
            # wire_scale: how many times its bytes each algorithm message weighs on this clock (the
            # paper model's size / the stand-in's under a paper profile; 1 otherwise): the report
            # shows bytes at the model size the times use (distrepro_wf.collect)
            "time": {**clock.describe(), "wire_scale": clock.wire_scale(model_bytes)}}), indent=2))
    _run_loop(res, algo, model, task, comm, wgroup, straggler, rank, workers, device, out_dir,
              Path(ckpt_dir) if ckpt_dir and run.checkpoint else None, h, backend.next_run_id(), backend)


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


def eval_marks(steps_per_epoch: int, evals_per_epoch: int) -> list[int]:
    """The steps into an epoch after which its ``evals_per_epoch - 1`` mid-epoch evaluations
    fall, evenly spaced (the epoch's end is the last evaluation point, as always).

    Time to target is read between evaluation points (``distrepro_wf.collect``
    interpolates), so more points make it finer; an epoch with fewer steps than points
    has one point per step at most (duplicates and the epoch's ends are dropped).
    """
    marks = {round(j * steps_per_epoch / evals_per_epoch) for j in range(1, evals_per_epoch)}
    return sorted(marks - {0, steps_per_epoch})


def _run_loop(res, algo, model, task: Task, comm, wgroup, straggler, rank, world, device, out_dir, ckpt_dir,
              h, run_id: int, ctl):
    """One rank's run; ``world`` counts the workers (a server rank's ``rank >= world``).
    ``ctl``: the process group for the runtime's own agreement (not the algorithm's view of
    it, which may be a side group or weigh its messages as a paper model's)."""
    run, wl, o = res.run, res.workload, res.optim
    sampler = build_sampler(wl.dataset.get("partition"), task.train, wl.batch_size, rank if rank < world else 0,
                            world, run.seed)
    steps_per_epoch = len(sampler) if wl.max_steps_per_epoch is None else min(len(sampler), wl.max_steps_per_epoch)
    fault = os.environ.get(FAULT_ENV, "").split(":")
    fault_rank, fault_step = (int(fault[0]), int(fault[1])) if len(fault) > 1 else (-1, -1)
    fault_grad = float(fault[2]) if len(fault) > 2 else None  # "nan" / "inf": a gradient fault

    start_epoch, wall_offset, initial, resumed_clock = 0, 0.0, "", None
    ckpt_path = ckpt_dir / f"rank{rank}.pt" if ckpt_dir else None
    state, note = _load_checkpoint(ckpt_path, model, h, device) if ckpt_path is not None else (None, None)
    found = state["epoch"] if state is not None else -1
    discarded = _gather_notes(note, ctl)
    for n in discarded:
        if rank == 0:
            print(f"WARNING: checkpoint {n}; every rank starts this run from scratch", file=sys.stderr, flush=True)
    agreed = _agree(found, ctl)
    if agreed is None and rank == 0:
        print("WARNING: the ranks' checkpoints are of different epochs (an asynchronous run killed between "
              "two ranks' checkpoints); every rank starts this run from scratch", file=sys.stderr, flush=True)
    if agreed not in (None, -1):
        model.load_state_dict(state["model"])
        algo.load_state_dict(state["algo"])
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate(state["rng"]["python"])
        if "straggler" in state["rng"]:
            straggler.rng.setstate(state["rng"]["straggler"])
        start_epoch, wall_offset, initial = found + 1, state["wall_s"], state["metrics"]
        resumed_clock = state.get("clock")  # absent in checkpoints written before it was saved
    writer = MetricsWriter(out_dir / "metrics" / f"rank{rank}.jsonl", rank, initial)
    prec: MixedPrecision | None = None  # a worker's, set below (server ranks have none)

    def save_checkpoint(epoch: int) -> None:
        """Written where the next epoch starts (after the epoch's agreement, whose time the
        next epoch's wall time includes); the clock's reading goes with it, so that a resumed
        simulation continues at exactly this simulated time (``Clock.resume``)."""
        if ckpt_path is None:
            return
        now = comm.clock.now()
        ckpt_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = ckpt_path.with_suffix(".tmp")
        torch.save({"epoch": epoch, "config_hash": h, "model": model.state_dict(), "algo": algo.state_dict(),
                    "amp": prec.state_dict() if prec is not None else None,
                    "rng": {"torch": torch.get_rng_state(), "python": random.getstate(),
                            "straggler": straggler.rng.getstate()},
                    "wall_s": now - t_start, "clock": {"t_start": t_start, "now": now},
                    "metrics": writer.text()}, tmp)
        os.replace(tmp, ckpt_path)

    if not algo.is_worker():  # a server rank (Algorithm.roles): its own records and checkpoints
        t_start = comm.clock.resume(wall_offset, resumed_clock)

        # the workers' schedule: barrier-free workers agree on divergence once, after the last epoch
        per_epoch = STEP_SCHEDULES.get(algo.step_schedule).per_epoch_collectives

        def end_epoch(epoch: int, extra: dict[str, float]) -> None:
            rec = {**comm.pop_counters().as_metrics(), **extra, "time/wall_s": comm.clock.now() - t_start}
            writer.write("epoch", epoch, (epoch + 1) * steps_per_epoch, rec)
            writer.flush()
            if per_epoch or epoch == wl.epochs - 1:
                _check_divergence(None, ctl)  # the workers' verdict: leave with them
            save_checkpoint(epoch)

        def log(epoch: int, step: int, values: dict[str, float]) -> None:
            writer.write("push", epoch, step, {**values, "time/wall_s": comm.clock.now() - t_start})

        comm.pop_counters()
        algo.serve(ServeContext(start_epoch, wl.epochs, steps_per_epoch,
                                lambda e: res.schedule.lr(o.lr, world, e, wl.epochs), end_epoch, log))
        algo.close()
        writer.close()
        return

    sampler.set_epoch(0)
    b0 = next(batches(task.train, sampler, 0, device))
    compute_ref = measure_compute(model, lambda: task.loss(model, b0))
    if rank == 0:
        (out_dir / "runinfo.json").write_text(json.dumps({
            "world": world, "steps_per_epoch": steps_per_epoch, "compute_ref_s": compute_ref,
            "params": sum(p.numel() for p in model.parameters()), "slow_ranks": straggler.slow_ranks,
            "resumed_from_epoch": start_epoch - 1 if start_epoch else None,
            "checkpoints_discarded": discarded,
        }, indent=2))

    # which steps this worker takes (impls.runtime.steps); asynchronous schedules allow no
    # per-epoch collective and drain the algorithm before the final evaluation
    schedule = STEP_SCHEDULES.get(algo.step_schedule)(
        ctl, f"distrepro/steps/{h}/{run_id}", task.train, sampler, steps_per_epoch, world, start_epoch,
        wl.loader_workers, device)
    barrier_free, closed = not schedule.per_epoch_collectives, False
    # mixed precision (impls.runtime.precision): a synchronous schedule agrees on fp16's skips
    # through its own Communicator on the runtime's group (unscaled: a flag weighs 4 bytes)
    prec = MixedPrecision(wl.precision, device, from_dict(LossScaleConfig, wl.loss_scale, "workload.loss_scale"),
                          Communicator(ctl, comm.clock, run.allreduce_algorithm), agree=not barrier_free)
    if state is not None and agreed not in (None, -1) and state.get("amp"):
        prec.load_state_dict(state["amp"])
    clock = comm.clock
    t_start = clock.resume(wall_offset, resumed_clock)
    marks = eval_marks(steps_per_epoch, wl.evals_per_epoch)

    def evaluate(epoch: int, step: int) -> dict[str, float]:
        """A mid-training evaluation point (``evals_per_epoch > 1``): an ``eval`` record of
        the evaluating ranks, stamped with the time its parameters were reached (on real
        ranks the evaluation's own time shows in every later record, as the epoch-end
        evaluation's does).  ``eval_params`` is called on every rank, as at an epoch's end:
        it may be a collective (a buffer sync) for synchronous schedules; a barrier-free
        schedule's must be local (AD-PSGD's is: a lock and a copy), since the workers reach
        a point at different times.  Returns the traffic it caused (the buffer sync)."""
        now = clock.now() - t_start
        with algo.eval_params() as m:
            if wl.eval_ranks == "all" or rank == 0:
                writer.write("eval", epoch, step, {**task.evaluate(m, workers=wl.loader_workers), "time/wall_s": now})
        return comm.pop_counters().as_metrics()

    if marks and start_epoch == 0:
        evaluate(0, 0)  # the starting point: step 0, time 0
    comm.pop_counters()
    clock.pop_costs()  # set-up's op costs are no step's
    first_bad: str | None = None  # this rank's first non-finite loss, gradient or parameters (divergence)
    for epoch in range(start_epoch, wl.epochs):
        model.train()
        t_epoch = clock.now()
        sums: dict[str, float] = {}
        losses = []
        algo.epoch_start(epoch, lambda: ((b, _closure(algo, model, task, b))
                                         for b in batches(task.train, _full_pass(sampler, epoch), wl.loader_workers,
                                                          device)))
        todo = list(marks)  # this epoch's mid-epoch evaluation points, in steps into the epoch
        for gstep, epoch_f, batch in schedule.steps(epoch):
            if rank == fault_rank and gstep == fault_step and fault_grad is None:
                os._exit(17)
            # before the first step at or past a point (a barrier-free worker may have skipped
            # some while others took the epoch's steps: it evaluates once, at the latest)
            passed = [m for m in todo if m <= (epoch_f - epoch) * steps_per_epoch + 1e-6]
            if passed:
                todo = todo[len(passed):]
                for k, v in evaluate(epoch, epoch * steps_per_epoch + passed[-1]).items():
                    sums[k] = sums.get(k, 0.0) + v  # the evaluation's traffic belongs to its epoch
            t0 = clock.now()
            s = StepContext(lr=res.schedule.lr(o.lr, world, epoch_f, wl.epochs), step=gstep, epoch=epoch_f,
                            batch=batch, closure=_closure(algo, model, task, batch, prec))
            armed = _arm_grad_fault(model, fault_grad) if rank == fault_rank and gstep == fault_step \
                and fault_grad is not None else None
            st = train_step(algo, model, lambda: task.loss(model, batch), s, clock, prec, straggler, t0,
                            check_grads=first_bad is None)
            if armed is not None:
                armed.remove()
            loss, compute_s, delay, t_sync, skipped, scale, extra, bad_grad = (
                st.loss, st.compute_s, st.delay_s, st.t_sync, st.skipped, st.scale, st.extra, st.bad_grad)
            c = prec.counters(comm.pop_counters())
            costs = clock.pop_costs()  # simulated clocks: the op-cost model's seconds per kind
            now = clock.now()
            rec = {"loss/train": loss.item(), "opt/lr": s.lr, "time/compute_s": compute_s,
                   "time/straggler_delay_s": delay, "time/sync_s": now - t_sync, "time/step_s": now - t0,
                   "time/wall_s": now - t_start, **c.as_metrics(), **costs, **extra,
                   **prec.step_metrics(skipped, scale)}
            writer.write("step", epoch, gstep, rec)
            if first_bad is None and not math.isfinite(rec["loss/train"]):
                first_bad = f"step {gstep} (epoch {epoch}): loss/train = {rec['loss/train']}"
            elif first_bad is None and bad_grad is not None:
                first_bad = f"step {gstep} (epoch {epoch}): non-finite gradient of {bad_grad}"
            losses.append(rec["loss/train"])
            for k in ("time/compute_s", "time/straggler_delay_s", "time/sync_s", *c.as_metrics(), *costs):
                sums[k] = sums.get(k, 0.0) + rec[k]
        epoch_s = clock.now() - t_epoch
        if barrier_free and epoch == wl.epochs - 1:  # drain in-flight exchanges before the final evaluation
            algo.close()
            closed = True
        ep = {"loss/train": float(np.mean(losses)) if losses else float("nan"), "time/epoch_s": epoch_s,
              **algo.epoch_end(epoch), **prec.pop_epoch_metrics()}
        with algo.eval_params() as m:
            if wl.eval_ranks == "all" or rank == 0:
                ep.update(task.evaluate(m, workers=wl.loader_workers))
            if not barrier_free or closed:  # barrier-free: once, after every worker has finished
                ep["consensus/distance"] = consensus_distance(m, wgroup)
        # the epoch's end moved data too (a drain, OSGP's flush, a buffer sync): it belongs to this epoch
        for k, v in {**comm.pop_counters().as_metrics(), **clock.pop_costs()}.items():
            sums[k] = sums.get(k, 0.0) + v
        ep.update(sums)
        ep["time/wall_s"] = clock.now() - t_start
        writer.write("epoch", epoch, (epoch + 1) * steps_per_epoch, ep)
        writer.flush()
        if first_bad is None and not _finite_params(model):
            first_bad = f"epoch {epoch}: non-finite parameters"
        if not barrier_free or closed:  # barrier-free ranks agree once, after the last epoch
            try:
                _check_divergence(first_bad, ctl)  # never checkpoint a diverged model
            except DivergedError:
                if not closed:  # every rank is here: drain in-flight messages before the next run
                    algo.close()
                writer.close()
                raise
        save_checkpoint(epoch)
    if not closed:
        algo.close()
    writer.close()
