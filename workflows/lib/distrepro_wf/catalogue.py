"""The metric catalogue: what a claim, a table or a figure may name, in one place.

Each entry names a column of ``results/tables/<experiment>/runs.csv`` (written by
:func:`distrepro_wf.collect.summarize`), its label and unit for people, and the factor
that turns the column's value into that unit.  ``distrepro_wf.published`` refuses a claim
whose ``metric`` is not here; the claims and the report read labels and units from here.
Adding a metric: a column in ``summarize`` and one line here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    label: str
    unit: str
    column: str
    scale: float = 1.0  # display value = column value * scale


#: The metrics a claim may name: a column of results/tables/<experiment>/runs.csv
#: (see distrepro_wf.collect.summarize) shown in ``unit`` after multiplying by ``scale``.

METRICS: dict[str, Metric] = {
    "final_acc": Metric("final validation top-1", "%", "final_acc", 100.0),
    "best_acc": Metric("best validation top-1", "%", "best_acc", 100.0),
    "final_train_loss": Metric("final training loss", "", "final_train_loss"),
    "final_val_loss": Metric("final validation loss (all classes)", "", "final_val_loss"),
    "time_per_epoch_s": Metric("time per epoch", "s", "time_per_epoch_s"),
    "time_per_step_s": Metric("time per step", "s", "time_per_step_s"),
    "wall_s": Metric("wall-clock time of the run", "s", "wall_s"),
    "wall_h": Metric("wall-clock time of the run", "h", "wall_s", 1 / 3600),
    "bytes_sent_per_epoch": Metric("bytes sent per epoch per rank", "B", "bytes_sent_per_epoch"),
    "bytes_per_step": Metric("bytes sent per step per rank", "B", "bytes_per_step"),
    "comm_s_per_epoch": Metric("communication time per epoch", "s", "comm_s_per_epoch"),
    "straggler_delay_s_per_epoch": Metric("straggler delay per epoch", "s", "straggler_delay_s_per_epoch"),
    "time_to_target_s": Metric("wall-clock time to the target accuracy", "s", "time_to_target_s"),
    "epochs_to_target": Metric("epochs to the target accuracy", "epochs", "epochs_to_target"),
    "bytes_to_target": Metric("bytes sent per rank to the target accuracy", "B", "bytes_to_target"),
    "final_consensus_distance": Metric("final consensus distance", "", "final_consensus_distance"),
}
