"""The metric catalogue: every metric the tables, claims, plots and report name, in one place.

Two levels, read by :mod:`distrepro_wf.pipeline.collect` (aggregation and summaries), the claims
(:mod:`distrepro_wf.claims.published` refuses a claim whose metric is not in :data:`METRICS`;
labels and units come from here), the plots and the report:

* :data:`EPOCH`: a key of the runtime's epoch records (``impls/runtime/metrics.py``) -> how the
  worker ranks' values become the run's value for that epoch (``mean``: losses,
  accuracies, bytes per rank; ``max``: times, since a synchronous epoch lasts as long as
  its slowest rank) and which direction is better (what a target means for it).
* :data:`METRICS`: a column of ``results/tables/<experiment>/runs.csv`` -> its label and
  unit for people, the factor into that unit, which direction is better (P(A beats B) of a
  claim, :mod:`distrepro_wf.claims.stats`), and how :func:`distrepro_wf.pipeline.collect.summarize`
  computes it from the run's epoch table: ``(epoch key, reducer)`` with ``last``, ``max``,
  ``min`` or ``mean`` over epochs, or ``None`` for the few computed there by hand (per step,
  to target on the run's evaluation series, the time breakdown, and ``network``: a text
  saying what the communication time is: a simulated network, loopback or a real one).

Both levels also say which values a metric can take (``bounds``, ``[low, high]``, None for
no bound: accuracies lie in [0, 1], BLEU in [0, 100], losses, times, bytes and counts are
>= 0).  A value outside them can never be measured, so a ``workload.target`` there is refused
by :func:`distrepro_wf.pipeline.config.validate` (:func:`unreachable`), and so is a claim whose pass
region lies outside them (:func:`distrepro_wf.claims.published.load`); both before any job.

Adding a metric: the runtime logs its key (one line in :data:`EPOCH`), and a run-level
column is one line in :data:`METRICS`; collect, claims, plots and report follow.
"""

from __future__ import annotations

from dataclasses import dataclass

Bounds = tuple[float | None, float | None]
#: the values a metric can take, [low, high] (None: unbounded on that side)
ANY: Bounds = (None, None)
NONNEG: Bounds = (0.0, None)  # losses, suboptimality, times, bytes, counts
UNIT: Bounds = (0.0, 1.0)  # accuracies, shares, yes/no as 1/0


@dataclass(frozen=True)
class EpochMetric:
    across: str  # aggregation over worker ranks: mean | max | min (server keys: sum over servers)
    higher_is_better: bool | None = None
    bounds: Bounds = ANY


EPOCH: dict[str, EpochMetric] = {
    "loss/train": EpochMetric("mean", False),  # unbounded: finite_sum's components may be < 0
    "loss/val": EpochMetric("mean", False, NONNEG),
    "acc/val": EpochMetric("mean", True, UNIT),
    "loss/objective": EpochMetric("mean", False),  # unbounded: F(x) of any sign
    "opt/gap": EpochMetric("mean", False, NONNEG),  # F(x) - F(x*) >= 0
    "bleu/val": EpochMetric("mean", True, (0.0, 100.0)),  # translation (sacrebleu on decodes)
    "nll/val": EpochMetric("mean", False, NONNEG),
    "comm/bytes_sent": EpochMetric("mean", bounds=NONNEG),
    "comm/bytes_recv": EpochMetric("mean", bounds=NONNEG),
    "consensus/distance": EpochMetric("mean", bounds=NONNEG),
    "opt/grad_evals": EpochMetric("sum", bounds=NONNEG),  # component gradients (svrg): the workers' total
    "time/epoch_s": EpochMetric("max", bounds=NONNEG),
    "time/wall_s": EpochMetric("max", bounds=NONNEG),
    "time/compute_s": EpochMetric("max", bounds=NONNEG),
    "time/comm_s": EpochMetric("max", bounds=NONNEG),
    "time/straggler_delay_s": EpochMetric("max", bounds=NONNEG),
    "time/sync_s": EpochMetric("max", bounds=NONNEG),
    # simulated runs: the op-cost model's seconds per kind (impls/sim/opcost.py), parts of the
    # step's time (local arithmetic, optimizer, copies, host staging, compression, and the
    # transport's per-message overhead, which is inside time/comm_s)
    "time/arith_s": EpochMetric("max", bounds=NONNEG),
    "time/optim_s": EpochMetric("max", bounds=NONNEG),
    "time/copy_s": EpochMetric("max", bounds=NONNEG),
    "time/stage_s": EpochMetric("max", bounds=NONNEG),
    "time/compress_s": EpochMetric("max", bounds=NONNEG),
    "time/msg_overhead_s": EpochMetric("max", bounds=NONNEG),
    # server ranks (Algorithm.roles), apart from the workers: bytes summed over the servers;
    # the asynchronous modes' staleness of the applied pushes and their number (impls/families/ps.py)
    "server/bytes_sent": EpochMetric("sum", bounds=NONNEG),
    "server/bytes_recv": EpochMetric("sum", bounds=NONNEG),
    "server/staleness_mean": EpochMetric("mean", bounds=NONNEG),
    "server/staleness_max": EpochMetric("max", bounds=NONNEG),
    "server/pushes": EpochMetric("mean", bounds=NONNEG),
    # a simulated server's op costs per kind (its aggregation, apply, optimizer, compression), the
    # busiest server's: its records carry them as a worker's do (impls/runtime/server.py)
    **{f"server/{k}_s": EpochMetric("max", bounds=NONNEG) for k in ("arith", "optim", "copy", "stage", "compress")},
}
#: per-epoch columns derived over ranks from another key: the worst rank's accuracy, and the
#: mean rank's times (the time breakdown: EPOCH's maxima of its parts need not add up)
EPOCH_DERIVED = {"acc/val_min": ("acc/val", "min"), "time/compute_s_mean": ("time/compute_s", "mean"),
                 "time/comm_s_mean": ("time/comm_s", "mean"),
                 "time/straggler_delay_s_mean": ("time/straggler_delay_s", "mean"),
                 "time/sync_s_mean": ("time/sync_s", "mean"),
                 **{f"time/{k}_s_mean": (f"time/{k}_s", "mean")
                    for k in ("arith", "optim", "copy", "stage", "compress", "msg_overhead")}}
#: the evaluation's keys (``task.evaluate``): what an evaluation point of a run carries, in
#: ``eval`` and ``epoch`` records alike; the metric columns of ``evals.csv``
EVAL_KEYS = ("acc/val", "loss/val", "loss/objective", "opt/gap", "bleu/val", "nll/val")


@dataclass(frozen=True)
class Metric:
    label: str
    unit: str
    column: str
    scale: float = 1.0  # display value = column value * scale
    source: tuple[str, str] | None = None  # (epoch key, reducer over epochs); None: computed by collect
    higher_is_better: bool = False  # accuracies; lower is better for times, losses, bytes, gaps, epochs
    bounds: Bounds = ANY  # the column's possible values (before ``scale``), see the module docstring

    def display_bounds(self) -> Bounds:
        """:attr:`bounds` in the display unit (accuracies [0, 100] %)."""
        return tuple(None if b is None else b * self.scale for b in self.bounds)  # type: ignore[return-value]


METRICS: dict[str, Metric] = {
    "final_acc": Metric("final validation top-1", "%", "final_acc", 100.0, ("acc/val", "last"), True, bounds=UNIT),
    "best_acc": Metric("best validation top-1", "%", "best_acc", 100.0, ("acc/val", "max"), True, bounds=UNIT),
    # the plateau check (distrepro_wf.claims.mechanisms "plateau"): mean top-1 of the last quarter of the
    # evaluations minus the quarter's before (collect._late_gain)
    "late_gain_acc": Metric("top-1 gained in the run's last quarter (about 0 at a plateau)", "points",
                            "late_gain_acc", 100.0, ("acc/val", "late_gain"), True, bounds=(-1.0, 1.0)),
    "final_train_loss": Metric("final training loss", "", "final_train_loss", source=("loss/train", "last")),
    "final_val_loss": Metric("final validation loss (all classes)", "", "final_val_loss",
                             source=("loss/val", "last"), bounds=NONNEG),
    "final_objective": Metric("final objective F(x)", "", "final_objective", source=("loss/objective", "last")),
    "final_gap": Metric("final suboptimality F(x) - F(x*)", "", "final_gap", source=("opt/gap", "last"),
                        bounds=NONNEG),
    "final_bleu": Metric("final validation BLEU", "", "final_bleu", source=("bleu/val", "last"), higher_is_better=True,
                         bounds=(0.0, 100.0)),
    "best_bleu": Metric("best validation BLEU", "", "best_bleu", source=("bleu/val", "max"), higher_is_better=True,
                        bounds=(0.0, 100.0)),
    "time_per_epoch_s": Metric("time per epoch", "s", "time_per_epoch_s", source=("time/epoch_s", "mean"),
                               bounds=NONNEG),
    "time_per_step_s": Metric("time per step", "s", "time_per_step_s", bounds=NONNEG),
    # the ranks' own epochs, longest minus shortest (an asynchronous method's time per epoch is
    # the job's per epoch of data: distrepro_wf.pipeline.collect.epoch_time)
    "time_per_epoch_rank_spread_s": Metric("spread of the ranks' own epoch times", "s",
                                           "time_per_epoch_rank_spread_s",
                                           source=("time/epoch_s_rank_spread", "mean"), bounds=NONNEG),
    "wall_s": Metric("wall-clock time of the run", "s", "wall_s", source=("time/wall_s", "last"), bounds=NONNEG),
    "wall_h": Metric("wall-clock time of the run", "h", "wall_s", 1 / 3600, bounds=NONNEG),
    "bytes_sent_per_epoch": Metric("bytes sent per epoch per rank", "B", "bytes_sent_per_epoch",
                                   source=("comm/bytes_sent", "mean"), bounds=NONNEG),
    "bytes_per_step": Metric("bytes sent per step per rank", "B", "bytes_per_step", bounds=NONNEG),
    "server_bytes_sent_per_epoch": Metric("bytes the servers sent per epoch", "B", "server_bytes_sent_per_epoch",
                                          source=("server/bytes_sent", "mean"), bounds=NONNEG),
    "server_bytes_recv_per_epoch": Metric("bytes the servers received per epoch", "B",
                                          "server_bytes_recv_per_epoch", source=("server/bytes_recv", "mean"),
                                          bounds=NONNEG),
    "staleness_mean": Metric("mean staleness of an applied push (updates since its read)", "updates",
                             "staleness_mean", source=("server/staleness_mean", "mean"), bounds=NONNEG),
    "staleness_max": Metric("largest staleness of an applied push", "updates", "staleness_max",
                            source=("server/staleness_max", "max"), bounds=NONNEG),
    "server_pushes_per_epoch": Metric("pushes a server applied per epoch", "pushes", "server_pushes_per_epoch",
                                      source=("server/pushes", "mean"), bounds=NONNEG),
    "compute_s_per_epoch": Metric("compute time per epoch", "s", "compute_s_per_epoch",
                                  source=("time/compute_s", "mean"), bounds=NONNEG),
    "comm_s_per_epoch": Metric("communication time per epoch", "s", "comm_s_per_epoch",
                               source=("time/comm_s", "mean"), bounds=NONNEG),
    **{f"{k}_s_per_epoch": Metric(f"{label} time per epoch (simulated op-cost model)", "s", f"{k}_s_per_epoch",
                                  source=(f"time/{k}_s", "mean"), bounds=NONNEG)
       for k, label in (("arith", "local arithmetic"), ("optim", "optimizer update"), ("copy", "buffer copy"),
                        ("stage", "host staging"), ("compress", "compression"),
                        ("msg_overhead", "per-message transport overhead"))},
    "straggler_delay_s_per_epoch": Metric("straggler delay per epoch", "s", "straggler_delay_s_per_epoch",
                                          source=("time/straggler_delay_s", "mean"), bounds=NONNEG),
    # to target: interpolated between the last evaluation point that missed it and the first that met it
    "time_to_target_s": Metric("wall-clock time to the target", "s", "time_to_target_s", bounds=NONNEG),
    "steps_to_target": Metric("steps to the target", "steps", "steps_to_target", bounds=NONNEG),
    "epochs_to_target": Metric("epochs to the target", "epochs", "epochs_to_target", bounds=NONNEG),
    "bytes_to_target": Metric("bytes sent per rank to the target", "B", "bytes_to_target", bounds=NONNEG),
    "grad_evals_to_target": Metric("component gradients to the target (all workers)", "gradients",
                                   "grad_evals_to_target", bounds=NONNEG),
    "reached_target": Metric("target reached", "", "reached_target", higher_is_better=True, bounds=UNIT),
    "target_at_first_eval": Metric("target met at the first evaluation (an upper bound)", "",
                                   "target_at_first_eval", bounds=UNIT),
    "time_last_eval_s": Metric("time of the last evaluation (where a run that never reaches the target is censored)",
                               "s", "time_last_eval_s", bounds=NONNEG),
    "tta_evals": Metric("evaluation points per epoch", "", "tta_evals", higher_is_better=True, bounds=NONNEG),
    # where an epoch's time goes (means over worker ranks and epochs; they add up to time per epoch)
    "bd_compute_s": Metric("compute per epoch (mean rank)", "s", "bd_compute_s", bounds=NONNEG),
    "bd_comm_s": Metric("communication wait of the worker loop per epoch (mean rank)", "s", "bd_comm_s",
                        bounds=NONNEG),
    "bd_straggler_s": Metric("straggler delay per epoch (mean rank)", "s", "bd_straggler_s", bounds=NONNEG),
    "bd_other_s": Metric("other time per epoch (evaluation, data, overhead)", "s", "bd_other_s"),
    "comm_share": Metric("communication share of an epoch", "%", "comm_share", 100.0, bounds=UNIT),
    "compute_share": Metric("compute share of an epoch", "%", "compute_share", 100.0, higher_is_better=True,
                            bounds=UNIT),
    "network": Metric("what the communication time is", "", "network"),
    "grad_evals_per_epoch": Metric("component gradients per epoch (all workers)", "gradients",
                                   "grad_evals_per_epoch", source=("opt/grad_evals", "mean"), bounds=NONNEG),
    "final_consensus_distance": Metric("final consensus distance", "", "final_consensus_distance",
                                       source=("consensus/distance", "last"), bounds=NONNEG),
}


def better_direction(key: str) -> bool:
    """True if a higher value of epoch metric ``key`` is better (a target is reached from below)."""
    m = EPOCH.get(key)
    if m is None or m.higher_is_better is None:
        raise KeyError(f"{key!r} has no better direction; metrics with one: "
                       f"{', '.join(k for k, v in EPOCH.items() if v.higher_is_better is not None)}")
    return m.higher_is_better


def bounds_text(bounds: Bounds) -> str:
    """'in [0, 1]', '>= 0', '<= 1' or 'of any value' (after 'is always')."""
    lo, hi = bounds
    if lo is not None and hi is not None:
        return f"in [{lo:g}, {hi:g}]"
    return f">= {lo:g}" if lo is not None else f"<= {hi:g}" if hi is not None else "of any value"


def within(value: float, bounds: Bounds) -> bool:
    lo, hi = bounds
    return (lo is None or value >= lo) and (hi is None or value <= hi)


def unreachable_target(metric: str, value: float) -> str | None:
    """Why a ``workload.target`` of epoch metric ``metric`` at ``value`` can never be reached
    (the value lies outside the metric's bounds, e.g. ``acc/val`` 1.5), else None."""
    m = EPOCH.get(metric)
    if m is None or within(value, m.bounds):
        return None
    return (f"{value:g} can never be reached: {metric} is always {bounds_text(m.bounds)} "
            f"(the metric catalogue, distrepro_wf.pipeline.catalogue.EPOCH)")
