"""A server rank's loop (``Algorithm.roles``: a parameter server's ranks ``>= workers``).

The algorithm's ``serve`` drives it: it serves every step of every epoch from
``resumed.start_epoch`` on and calls back the runtime's epoch end (:class:`impls.protocol.ServeContext`):

1. an ``epoch`` record of the server's own (its traffic, its op costs ``time/<kind>_s`` as a
   worker's records carry them: the aggregation, the apply, the optimizer, compression, the
   algorithm's extra metrics, the wall time), and ``push`` records of an asynchronous server's applied pushes (``log``);
2. the divergence agreement with the workers, where the *workers'* step schedule agrees at
   an epoch's end (:meth:`impls.runtime.steps.StepSchedule.agrees_at_end`): a diverged run
   leaves every rank at the same epoch, servers included;
3. the server's checkpoint (its model and state, as a worker's).
"""

from __future__ import annotations

from .metrics import MetricsWriter
from ..protocol import ServeContext
from .agreement import check_divergence
from .checkpoint import Resumed, save_checkpoint
from .context import RunContext
from .steps import STEP_SCHEDULES


def run_server(ctx: RunContext, resumed: Resumed, writer: MetricsWriter) -> None:
    """A server rank's run (module docstring); closes the algorithm and the writer at its end."""
    t_start = ctx.clock.resume(resumed.wall_offset, resumed.clock)
    workers_schedule = STEP_SCHEDULES.get(ctx.algo.step_schedule)  # its epoch-end policy (a class method)

    def end_epoch(epoch: int, extra: dict[str, float]) -> None:
        rec = {**ctx.comm.pop_counters().as_metrics(), **ctx.clock.pop_costs(), **extra,
               "time/wall_s": ctx.clock.now() - t_start}
        writer.write("epoch", epoch, (epoch + 1) * ctx.steps_per_epoch, rec)
        writer.flush()
        if workers_schedule.agrees_at_end(epoch, ctx.epochs):
            check_divergence(None, ctx.ctl)  # the workers' verdict: leave with them
        save_checkpoint(ctx, epoch, t_start, writer)

    def log(epoch: int, step: int, values: dict[str, float]) -> None:
        writer.write("push", epoch, step, {**values, "time/wall_s": ctx.clock.now() - t_start})

    ctx.comm.pop_counters()
    ctx.clock.pop_costs()  # set-up's op costs are no epoch's
    ctx.algo.serve(ServeContext(resumed.start_epoch, ctx.epochs, ctx.steps_per_epoch, ctx.lr, end_epoch, log))
    ctx.algo.close()
    writer.close()
