"""Step schedules: which steps a worker takes in an epoch, chosen by the algorithm.

An algorithm names its schedule (``Algorithm.step_schedule``); the runtime builds it
from this registry.  A schedule yields ``(step, fractional epoch, batch)`` for each
step of an epoch and says how the runtime may synchronise around it:

* ``local_epochs`` (synchronous methods, the default): every worker takes the same
  ``steps_per_epoch`` steps of each epoch; the runtime may run per-epoch collectives
  (consensus distance, the divergence check) and evaluates after every epoch.
* ``shared_epochs`` (asynchronous methods, AD-PSGD): epoch ``e`` ends when the workers
  *together* have taken ``(e + 1) * steps_per_epoch * workers`` steps (Lian et al. 2018:
  an epoch is one pass over the data by all workers, so fast workers take more of its
  steps).  No collective may run during training: the consensus distance and the
  divergence check run once, after the last epoch, and the algorithm is closed (its
  in-flight exchanges drained) *before* that final evaluation and checkpoint.

Room is left for the parameter-server schedules (bounded staleness, token order): a
schedule is one class here and one name.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterator

from torch.utils.data import Dataset

from ..data.sampler import GlobalBatchSampler
from ..registry import Registry
from .loop import batches

STEP_SCHEDULES: Registry = Registry("step schedule", "algorithm.step_schedule")


class StepSchedule:
    #: the runtime may run collectives between epochs (all workers end each epoch together)
    per_epoch_collectives: ClassVar[bool] = True

    def __init__(self, backend, key: str, ds: Dataset, sampler: GlobalBatchSampler, steps_per_epoch: int,
                 world: int, start_epoch: int, workers: int, device):
        self.backend, self.key, self.ds, self.sampler = backend, key, ds, sampler
        self.spe, self.world = steps_per_epoch, world
        self.start, self.workers, self.device = start_epoch, workers, device

    def steps(self, epoch: int) -> Iterator[tuple[int, float, Any]]:
        """``(step, fractional epoch, batch)`` of this worker's share of ``epoch``."""
        raise NotImplementedError


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

    per_epoch_collectives = False

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
