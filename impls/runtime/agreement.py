"""The runtime's own agreement across ranks: notes every rank sees, a common value, divergence.

These run on the runtime's process group (``RunContext.ctl``), never on the algorithm's
Communicator, so they are not counted as the method's traffic.  Every rank must call them
at the same point (the step schedule says where: :meth:`impls.runtime.steps.StepSchedule.agrees_at_end`).
"""

from __future__ import annotations

import math
import re

import torch

from ..backends import Backend
from ..errors import DivergedError


def gather_notes(note: str | None, backend: Backend) -> list[str]:
    """Every rank's note (None skipped), on every rank; one int all-reduce when there are none."""
    if backend.world == 1:
        return [f"rank 0: {note}"] if note else []
    flag = torch.tensor([int(note is not None)])
    backend.all_reduce(flag, op="max")
    if not int(flag):
        return []
    notes = backend.all_gather_object(note)
    return [f"rank {r}: {n}" for r, n in enumerate(notes) if n]


def agree(value: int, backend: Backend) -> int | None:
    """The common value if every rank holds the same one, else None."""
    if backend.world == 1:
        return value
    t = torch.tensor([value, -value], dtype=torch.int64)
    backend.all_reduce(t, op="max")
    return value if int(t[0]) == -int(t[1]) else None


def check_divergence(first_bad: str | None, backend: Backend) -> None:
    """Raise :class:`DivergedError` on every rank if any rank saw a non-finite value.

    ``first_bad``: this rank's first such event ("step 13 (epoch 1): loss/train = nan"; a
    server rank passes None).  Called where every rank calls it (an epoch's end that the
    step schedule agrees on), so the ranks agree and leave the run together; the earliest
    report (the lowest step, then the lowest rank) names the run's failure: where a NaN
    appeared in one rank's gradient, not where the all-reduce spread it to the others'
    losses a step later.
    """
    notes = gather_notes(first_bad, backend)
    if notes:
        notes.sort(key=lambda n: int(m.group(1)) if (m := re.search(r": step (\d+) ", n)) else math.inf)
        raise DivergedError(f"diverged: {notes[0]}" + (f" (and {len(notes) - 1} more rank(s))" if len(notes) > 1
                                                       else ""))
