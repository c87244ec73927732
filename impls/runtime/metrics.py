"""Metrics as JSONL with namespaced keys.

One file per rank, one JSON object per line.  Every record has ``kind``, ``rank``,
``epoch`` and ``step``; the kinds:

* ``step``: one training step of this rank (``step``: its global step index);
* ``epoch``: the end of an epoch, with its evaluation (``step``: ``(epoch + 1) *
  steps_per_epoch``) and the epoch's sums of the step times and traffic;
* ``eval``: an evaluation point inside training (workload ``evals_per_epoch > 1``): one
  before the first step (``step`` 0, ``time/wall_s`` 0) and ``evals_per_epoch - 1``
  evenly spaced ones inside each epoch (``step``: the steps taken by then), with the
  evaluation's keys and ``time/wall_s`` (when its parameters were reached), written by
  the evaluating ranks only (``eval_ranks``).  With the epoch records they make the
  run's evaluation series, which time to target is interpolated on.
* ``push``: a push a parameter server applied (asynchronous modes, written by the server
  rank; ``step``: the server's count of pushes): ``ps/worker``, ``ps/staleness``,
  ``ps/k`` (gradients it sums), ``ps/version`` and ``time/wall_s``.

The measured values use namespaced keys ``<namespace>/<name>``:

=========================  ===========================================================
``loss/train``             training loss (step: this batch; epoch: mean over steps)
``loss/val``, ``acc/val``  validation loss and top-1 accuracy (epoch, eval records; classification)
``loss/objective``         full objective F(x) (epoch, eval records; finite_sum task)
``opt/gap``                suboptimality F(x) - F(x*) (epoch, eval records; finite_sum task)
``opt/lr``                 the step's learning rate
``opt/grad_evals``         component gradients grad f_i this rank computed in the epoch (epoch; svrg)
``time/compute_s``         forward + backward time at the rank's healthy speed
``time/straggler_delay_s`` what a straggler's slowdown added to the forward + backward pass
                           (:mod:`impls.runtime.straggler`)
``time/comm_s``            time spent waiting on communication (every activity of the rank,
                           a background gossip thread's included)
``time/sync_s``            the worker loop's time in ``algo.step``: its own wait for
                           communication plus the update (the breakdown's communication part:
                           a background exchange that overlaps compute is not in it)
``time/step_s``            the whole step; ``time/epoch_s`` the whole epoch
``time/wall_s``            seconds since training started on this rank
``comm/bytes_sent|recv``   bytes this rank sent / received (counted, see impls.comm.communicator)
``comm/messages``          messages this rank sent (a collective counts as one)
``consensus/distance``     RMS distance of the local models to their average (epoch)
=========================  ===========================================================

Algorithms may add keys in their own namespace (``gossip/...``, ``ps/...``).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Iterable

KEY = re.compile(r"^[a-z][a-z0-9_]*/[a-z0-9_]+$")
META = ("kind", "rank", "epoch", "step")


def check_keys(record: dict[str, Any]) -> None:
    for k in record:
        if k not in META and not KEY.match(k):
            raise ValueError(f"metric key {k!r} is not namespaced as '<namespace>/<name>'")


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class MetricsWriter:
    def __init__(self, path: Path, rank: int, initial: str = ""):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self._f = open(self.path, "w")
        if initial:
            self._f.write(initial)

    def write(self, kind: str, epoch: int, step: int, values: dict[str, Any]) -> None:
        rec = {"kind": kind, "rank": self.rank, "epoch": epoch, "step": step}
        rec.update({k: _clean(v) for k, v in values.items()})
        check_keys(rec)
        self._f.write(json.dumps(rec) + "\n")

    def flush(self) -> None:
        self._f.flush()

    def text(self) -> str:
        self._f.flush()
        return self.path.read_text()

    def close(self) -> None:
        self._f.close()


def read_jsonl(paths: Iterable[Path]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in paths:
        with open(p) as f:
            out.extend(json.loads(line) for line in f if line.strip())
    return out
