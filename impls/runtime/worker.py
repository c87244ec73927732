"""A worker rank's loop: epochs of steps, evaluation points, records, the divergence check.

Per epoch (:class:`WorkerLoop`):

1. ``algo.epoch_start`` (SVRG's snapshot pass), then the step schedule's steps
   (:mod:`impls.runtime.steps`); before the first step past a mid-epoch evaluation point
   (``workload.evals_per_epoch``) the model is evaluated (an ``eval`` record);
2. each step (:meth:`WorkerLoop.step`): :func:`impls.runtime.loop.train_step` (compute,
   straggler delay, the algorithm's communication and update), one ``step`` record
   (loss, learning rate, times, traffic, op costs, the algorithm's extra metrics, fp16's
   scale), and this rank's first non-finite loss or gradient is noted;
3. the epoch's end (:meth:`WorkerLoop.end_epoch`), as the step schedule's policy says:
   drain the algorithm (an asynchronous schedule's last epoch), evaluate, measure the
   consensus distance and agree on divergence where all ranks end the epoch together,
   one ``epoch`` record, then the checkpoint (never of a diverged model).

Everything that must be the same for every method (seeding, the straggler model, timing,
metrics) is here or in :mod:`impls.runtime.loop`; the algorithm owns only communication
and the update.
"""

from __future__ import annotations

import copy
import json
import math
import os

import numpy as np
import torch

from ..comm.communicator import Communicator
from ..config.dataclass_config import from_dict
from ..errors import DivergedAtStep, DivergedError
from .metrics import MetricsWriter
from ..protocol import StepContext
from ..tasks import Task
from .agreement import check_divergence
from .checkpoint import Resumed, save_checkpoint
from .context import RunContext
from .loop import batches, consensus_distance, measure_compute, train_step
from .precision import LossScaleConfig, MixedPrecision
from .steps import STEP_SCHEDULES

# tests: "rank:step": that rank dies with exit code 17 at that step; "rank:step:nan" ("...:inf"):
# that rank's gradient holds a NaN (an infinity) after that step's backward pass, its loss finite
FAULT_ENV = "DISTREPRO_FAULT"


def eval_marks(steps_per_epoch: int, evals_per_epoch: int) -> list[int]:
    """The steps into an epoch after which its ``evals_per_epoch - 1`` mid-epoch evaluations
    fall, evenly spaced (the epoch's end is the last evaluation point, as always).

    Time to target is read between evaluation points (``distrepro_wf.pipeline.collect``
    interpolates), so more points make it finer; an epoch with fewer steps than points
    has one point per step at most (duplicates and the epoch's ends are dropped).
    """
    marks = {round(j * steps_per_epoch / evals_per_epoch) for j in range(1, evals_per_epoch)}
    return sorted(marks - {0, steps_per_epoch})


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


class Fault:
    """The test fault of :data:`FAULT_ENV` for this rank: die at a step, or poison a gradient."""

    def __init__(self, rank: int, spec: str):
        f = spec.split(":")
        mine = len(f) > 1 and int(f[0]) == rank
        self.step = int(f[1]) if mine else -1
        self.grad = float(f[2]) if mine and len(f) > 2 else None  # "nan" / "inf": a gradient fault

    def die_at(self, step: int) -> None:
        if step == self.step and self.grad is None:
            os._exit(17)

    def arm(self, model: torch.nn.Module, step: int):
        """At the fault's step: the first parameter's gradient gets the fault's value in its
        first entry as backward produces it (a tensor hook, so it enters the buckets the way a
        real one would, overlapped or not); returns the hook's handle (else None)."""
        if step != self.step or self.grad is None:
            return None
        p = next(p for p in model.parameters() if p.requires_grad)
        value = self.grad

        def poison(g: torch.Tensor) -> torch.Tensor:
            g = g.clone()
            g.view(-1)[0] = value
            return g

        return p.register_hook(poison)


def _add(sums: dict[str, float], values: dict[str, float]) -> None:
    for k, v in values.items():
        sums[k] = sums.get(k, 0.0) + v


def run_worker(ctx: RunContext, resumed: Resumed, writer: MetricsWriter) -> None:
    """A worker rank's run from ``resumed.start_epoch`` to the last epoch."""
    _write_runinfo(ctx, resumed)
    WorkerLoop(ctx, resumed, writer).run()


def _write_runinfo(ctx: RunContext, resumed: Resumed) -> None:
    """Rank 0's ``runinfo.json``: the shard, the model's size, the calibrated compute time of
    one step (the straggler model's unit), the slow ranks, where the run resumed from."""
    ctx.sampler.set_epoch(0)
    b0 = next(batches(ctx.task.train, ctx.sampler, 0, ctx.device))
    compute_ref = measure_compute(ctx.model, lambda: ctx.task.loss(ctx.model, b0))
    if ctx.rank == 0:
        (ctx.out_dir / "runinfo.json").write_text(json.dumps({
            "world": ctx.workers, "steps_per_epoch": ctx.steps_per_epoch, "compute_ref_s": compute_ref,
            "params": sum(p.numel() for p in ctx.model.parameters()), "slow_ranks": ctx.straggler.slow_ranks,
            "resumed_from_epoch": resumed.start_epoch - 1 if resumed.start_epoch else None,
            "checkpoints_discarded": resumed.discarded,
        }, indent=2))


class WorkerLoop:
    """One worker's epochs (module docstring); the state its steps share: the step schedule,
    the loss scaler, the metrics writer, the run's start time and the first divergence."""

    def __init__(self, ctx: RunContext, resumed: Resumed, writer: MetricsWriter):
        run, wl = ctx.res.run, ctx.res.workload
        self.ctx, self.writer, self.start_epoch = ctx, writer, resumed.start_epoch
        # which steps this worker takes, and the epoch-end policy (impls.runtime.steps)
        self.schedule = STEP_SCHEDULES.get(ctx.algo.step_schedule)(
            ctx.ctl, f"distrepro/steps/{ctx.config_hash}/{ctx.run_id}", ctx.task.train, ctx.sampler,
            ctx.steps_per_epoch, ctx.workers, resumed.start_epoch, wl.loader_workers, ctx.device)
        # mixed precision (impls.runtime.precision): fp16's skips agreed (where the schedule says so)
        # through its own Communicator on the runtime's group (unscaled: a flag weighs 4 bytes)
        self.prec = MixedPrecision(wl.precision, ctx.device,
                                   from_dict(LossScaleConfig, wl.loss_scale, "workload.loss_scale"),
                                   Communicator(ctx.ctl, ctx.clock, run.allreduce_algorithm),
                                   agree=self.schedule.agrees_on_skips())
        if resumed.amp:
            self.prec.load_state_dict(resumed.amp)
        self.t_start = ctx.clock.resume(resumed.wall_offset, resumed.clock)
        self.marks = eval_marks(ctx.steps_per_epoch, wl.evals_per_epoch)
        self.fault = Fault(ctx.rank, os.environ.get(FAULT_ENV, ""))
        self.first_bad: str | None = None  # this rank's first non-finite loss, gradient or parameters
        self.stop_alone = ctx.ctl.world == 1 or ctx.ctl.spec.one_process  # (train_step's stop_on_bad)

    def run(self) -> None:
        ctx = self.ctx
        if self.marks and self.start_epoch == 0:
            self.evaluate(0, 0)  # the starting point: step 0, time 0
        ctx.comm.pop_counters()
        ctx.clock.pop_costs()  # set-up's op costs are no step's
        for epoch in range(self.start_epoch, ctx.epochs):
            self.epoch(epoch)
        self.schedule.close(ctx.algo)
        self.writer.close()

    def evaluate(self, epoch: int, step: int) -> dict[str, float]:
        """A mid-training evaluation point (``evals_per_epoch > 1``): an ``eval`` record of
        the evaluating ranks, stamped with the time its parameters were reached (on real
        ranks the evaluation's own time shows in every later record, as the epoch-end
        evaluation's does).  ``eval_params`` is called on every rank, as at an epoch's end:
        it may be a collective (a buffer sync) for synchronous schedules; a barrier-free
        schedule's must be local (AD-PSGD's is: a lock and a copy), since the workers reach
        a point at different times.  Returns the traffic it caused (the buffer sync)."""
        ctx, wl = self.ctx, self.ctx.res.workload
        now = ctx.clock.now() - self.t_start
        with ctx.algo.eval_params() as m:
            if wl.eval_ranks == "all" or ctx.rank == 0:
                self.writer.write("eval", epoch, step, {**ctx.task.evaluate(m, workers=wl.loader_workers),
                                                        "time/wall_s": now})
        return ctx.comm.pop_counters().as_metrics()

    def epoch(self, epoch: int) -> None:
        """Step 1: the epoch's steps and mid-epoch evaluations, then its end."""
        ctx, wl, spe = self.ctx, self.ctx.res.workload, self.ctx.steps_per_epoch
        ctx.model.train()
        t_epoch = ctx.clock.now()
        sums: dict[str, float] = {}
        losses = []
        ctx.algo.epoch_start(epoch, lambda: ((b, _closure(ctx.algo, ctx.model, ctx.task, b))
                                             for b in batches(ctx.task.train, _full_pass(ctx.sampler, epoch),
                                                              wl.loader_workers, ctx.device)))
        todo = list(self.marks)  # this epoch's mid-epoch evaluation points, in steps into the epoch
        for gstep, epoch_f, batch in self.schedule.steps(epoch):
            self.fault.die_at(gstep)
            # before the first step at or past a point (a barrier-free worker may have skipped
            # some while others took the epoch's steps: it evaluates once, at the latest)
            passed = [m for m in todo if m <= (epoch_f - epoch) * spe + 1e-6]
            if passed:
                todo = todo[len(passed):]
                _add(sums, self.evaluate(epoch, epoch * spe + passed[-1]))  # its traffic belongs to its epoch
            rec, summed = self.step(epoch, gstep, epoch_f, batch)
            losses.append(rec["loss/train"])
            for k in summed:
                sums[k] = sums.get(k, 0.0) + rec[k]
        self.end_epoch(epoch, ctx.clock.now() - t_epoch, losses, sums)

    def step(self, epoch: int, gstep: int, epoch_f: float, batch) -> tuple[dict[str, float], tuple[str, ...]]:
        """Step 2: one training step and its ``step`` record; returns the record and the keys
        that add up into the epoch's record."""
        ctx, clock, prec = self.ctx, self.ctx.clock, self.prec
        algo, model, task = ctx.algo, ctx.model, ctx.task
        t0 = clock.now()
        s = StepContext(lr=ctx.lr(epoch_f), step=gstep, epoch=epoch_f, batch=batch,
                        closure=_closure(algo, model, task, batch, prec))
        armed = self.fault.arm(model, gstep)
        # every step: one fused check; where a rank may leave alone (one rank, or all ranks in
        # one process: the simulated platform) the run stops at the step, else the rank's
        # gradient is zeroed and the ranks agree at the epoch's end (impls.errors.DivergedAtStep)
        st = train_step(algo, model, lambda: task.loss(model, batch), s, clock, prec, ctx.straggler, t0,
                        stop_on_bad=self.stop_alone)
        if armed is not None:
            armed.remove()
        c = prec.counters(ctx.comm.pop_counters())
        costs = clock.pop_costs()  # simulated clocks: the op-cost model's seconds per kind
        now = clock.now()
        rec = {"loss/train": st.loss.item(), "opt/lr": s.lr, "time/compute_s": st.compute_s,
               "time/straggler_delay_s": st.delay_s, "time/sync_s": now - st.t_sync, "time/step_s": now - t0,
               "time/wall_s": now - self.t_start, **c.as_metrics(), **costs, **st.extra,
               **prec.step_metrics(st.skipped, st.scale)}
        self.writer.write("step", epoch, gstep, rec)
        if self.first_bad is None and not math.isfinite(rec["loss/train"]):
            self.first_bad = f"step {gstep} (epoch {epoch}): loss/train = {rec['loss/train']}"
        elif self.first_bad is None and st.bad_grad is not None:
            self.first_bad = f"step {gstep} (epoch {epoch}): non-finite gradient of {st.bad_grad}"
        if st.bad_grad is not None and self.stop_alone:  # never stepped on: stop here, this rank alone
            self.writer.close()
            raise DivergedAtStep(f"diverged: rank {ctx.rank}: {self.first_bad}")
        return rec, ("time/compute_s", "time/straggler_delay_s", "time/sync_s", *c.as_metrics(), *costs)

    def end_epoch(self, epoch: int, epoch_s: float, losses: list[float], sums: dict[str, float]) -> None:
        """Step 3: the epoch's end, as the step schedule's policy says (``drain``,
        ``agrees_at_end``): evaluation, consensus, record, divergence, checkpoint."""
        ctx, wl, clock = self.ctx, self.ctx.res.workload, self.ctx.clock
        self.schedule.drain(epoch, ctx.epochs, ctx.algo)  # an asynchronous run's last epoch: drain first
        agreed = self.schedule.agrees_at_end(epoch, ctx.epochs)  # every rank ends this epoch together
        ep = {"loss/train": float(np.mean(losses)) if losses else float("nan"), "time/epoch_s": epoch_s,
              **ctx.algo.epoch_end(epoch), **self.prec.pop_epoch_metrics()}
        with ctx.algo.eval_params() as m:
            if wl.eval_ranks == "all" or ctx.rank == 0:
                ep.update(ctx.task.evaluate(m, workers=wl.loader_workers))
            if agreed:
                ep["consensus/distance"] = consensus_distance(m, ctx.wgroup)
        # the epoch's end moved data too (a drain, OSGP's flush, a buffer sync): it belongs to this epoch
        _add(sums, {**ctx.comm.pop_counters().as_metrics(), **clock.pop_costs()})
        ep.update(sums)
        ep["time/wall_s"] = clock.now() - self.t_start
        self.writer.write("epoch", epoch, (epoch + 1) * ctx.steps_per_epoch, ep)
        self.writer.flush()
        if self.first_bad is None and not _finite_params(ctx.model):
            self.first_bad = f"epoch {epoch}: non-finite parameters"
        if agreed:
            self.agree_on_divergence()  # never checkpoint a diverged model
        save_checkpoint(ctx, epoch, self.t_start, self.writer, self.prec)

    def agree_on_divergence(self) -> None:
        """Agree with every rank on divergence; on it, close and leave with them."""
        try:
            check_divergence(self.first_bad, self.ctx.ctl)
        except DivergedError:
            self.schedule.close(self.ctx.algo)  # every rank is here: drain in-flight messages before the next run
            self.writer.close()
            raise
