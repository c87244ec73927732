"""Step schedules: which steps a worker takes in an epoch, chosen by the algorithm.

An algorithm names its schedule (``Algorithm.step_schedule``); the runtime builds it
from this registry.  A schedule yields ``(step, fractional epoch, batch)`` for each
step of an epoch, and owns the **epoch-end policy**: what the runtime may do where an
epoch ends, which only the schedule knows (whether the workers end it together).  The
runtime's loops (:mod:`impls.runtime.worker`, :mod:`impls.runtime.server`) ask it and
branch on no capability of their own:

=====================  =========================================  ==========================================
policy                 ``local_epochs``                           ``shared_epochs``
=====================  =========================================  ==========================================
``agrees_at_end``      every epoch: consensus distance and the    the last epoch only (after the drain):
                       divergence check (collectives) each epoch  consensus and divergence once
``agrees_on_skips``    yes: fp16's overflow skip is one counted   no: each worker skips alone (a skipped
                       all-reduce per step, all skip or none      step is a step it did not take)
``drain``              nothing (the algorithm is closed after     the last epoch: the algorithm is closed
                       the last checkpoint)                       *before* its evaluation and checkpoint
=====================  =========================================  ==========================================

* ``local_epochs`` (synchronous methods, the default): every worker takes the same
  ``steps_per_epoch`` steps of each epoch and evaluates after every epoch.
* ``shared_epochs`` (asynchronous methods, AD-PSGD): epoch ``e`` ends when the workers
  *together* have taken ``(e + 1) * steps_per_epoch * workers`` steps (Lian et al. 2018:
  an epoch is one pass over the data by all workers, so fast workers take more of its
  steps).  No collective may run during training, hence the policy above: the in-flight
  exchanges are drained before the final evaluation, which then sees the drained models.

Room is left for the parameter-server schedules (bounded staleness, token order): a
schedule is one class here and one name.
"""

from __future__ import annotations

from typing import Any, Iterator

from torch.utils.data import Dataset

from ..data.sampler import GlobalBatchSampler
from ..registry import Registry
from .loop import batches

STEP_SCHEDULES: Registry = Registry("step schedule", "algorithm.step_schedule")


class StepSchedule:
    """A worker's steps and the epoch-end policy (module docstring).  The defaults are the
    synchronous policy: every rank ends every epoch together."""

    #: the workers take an epoch's steps together, each at its own pace, and end it apart (an
    #: asynchronous method): an epoch's time is the job's per epoch of data, not a rank's own
    #: epoch (``distrepro_wf.pipeline.collect``)
    shared: bool = False

    def __init__(self, backend, key: str, ds: Dataset, sampler: GlobalBatchSampler, steps_per_epoch: int,
                 world: int, start_epoch: int, workers: int, device):
        self.backend, self.key, self.ds, self.sampler = backend, key, ds, sampler
        self.spe, self.world = steps_per_epoch, world
        self.start, self.workers, self.device = start_epoch, workers, device
        self.closed = False  # the algorithm has been closed (drained) through this schedule

    def steps(self, epoch: int) -> Iterator[tuple[int, float, Any]]:
        """``(step, fractional epoch, batch)`` of this worker's share of ``epoch``."""
        raise NotImplementedError

    @classmethod
    def agrees_at_end(cls, epoch: int, epochs: int) -> bool:
        """Whether every rank (server ranks too) reaches the end of ``epoch`` (of ``epochs``)
        together, so that the runtime may run its collectives there: the consensus distance
        and the divergence check.  A class method: server ranks ask it without steps."""
        return True

    @classmethod
    def agrees_on_skips(cls) -> bool:
        """Whether fp16's overflow skip is agreed across the workers each step (one all-reduce
        of a flag, :class:`impls.runtime.precision.MixedPrecision`'s ``agree``)."""
        return True

    def drain(self, epoch: int, epochs: int, algo) -> None:
        """After ``epoch``'s last step, before its evaluation and checkpoint: close the
        algorithm here if that evaluation must see it drained."""

    def close(self, algo) -> None:
        """Close the algorithm (``Algorithm.close``) unless :meth:`drain` already has: at the
        run's end, or when every rank leaves a diverged run."""
        if not self.closed:
            algo.close()
            self.closed = True


@STEP_SCHEDULES.register("local_epochs")
class LocalEpochs(StepSchedule):
    """Every worker takes the same ``steps_per_epoch`` steps; ``step`` counts them globally."""

    def steps(self, epoch: int) -> Iterator[tuple[int, float, Any]]:
        self.sampler.set_epoch(epoch)
        for i, batch in enumerate(batches(self.ds, self.sampler, self.workers, self.device)):
            if i >= self.spe:
                return
            yield epoch * self.spe + i, epoch + i / self.spe, batch


@STEP_SCHEDULES.register("shared_epochs")
class SharedEpochs(StepSchedule):
    """Barrier-free epochs counted with an atomic ticket counter.

    Before each step a worker claims a ticket from the backend's atomic counter
    (``counter_add``: the process group's key-value store on real ranks; atomic across
    ranks, no barrier, no collective).  Ticket ``t`` (1-based) belongs to epoch ``start_epoch + (t-1) // S``
    with ``S = steps_per_epoch * world``; a worker ends its epoch when its next ticket
    belongs to a later one (so a slow worker may take no step in some epochs), and stops
    when the ticket is past the last epoch: exactly ``S`` steps per epoch in total.
    Each worker streams its own shard, pass after pass (``sampler.set_epoch(pass)``).
    ``step`` counts this worker's own steps (from 0 again after a resume).  ``key`` must
    be unique per run in the process group.
    """

    shared = True

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.S = self.spe * self.world
        self.taken = 0  # steps this worker took
        self._pending: int | None = None  # a claimed ticket that belongs to a later epoch
        self._stream = self._batches()

    def _batches(self) -> Iterator[Any]:
        p = 0
        while True:
            self.sampler.set_epoch(p)
            yield from batches(self.ds, self.sampler, self.workers, self.device)
            p += 1

    @classmethod
    def agrees_at_end(cls, epoch: int, epochs: int) -> bool:
        """Only after the last epoch (no collective may run while any worker trains)."""
        return epoch == epochs - 1

    @classmethod
    def agrees_on_skips(cls) -> bool:
        """Never: a worker's skipped step is a step it did not take."""
        return False

    def drain(self, epoch: int, epochs: int, algo) -> None:
        """In the last epoch: drain the in-flight exchanges before the final evaluation."""
        if epoch == epochs - 1:
            self.close(algo)

    def _claim(self) -> int:
        return self.backend.counter_add(self.key, 1)

    def steps(self, epoch: int) -> Iterator[tuple[int, float, Any]]:
        while True:
            t = self._pending if self._pending is not None else self._claim()
            self._pending = None
            if self.start + (t - 1) // self.S != epoch:
                self._pending = t
                return
            batch = next(self._stream)
            yield self.taken, self.start + (t - 1) / self.S, batch
            self.taken += 1
