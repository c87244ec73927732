"""What one rank's run loops share (:class:`RunContext`), built once by the run skeleton
(:func:`impls.runtime.trainer.train`) and read by the checkpoint (:mod:`.checkpoint`), the
worker loop (:mod:`.worker`) and the server loop (:mod:`.server`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..backends import Backend, Clock
from ..comm.communicator import Communicator
from ..data.sampler import build_sampler
from ..protocol import Algorithm
from ..config.runconfig import Resolved
from .straggler import StragglerModel
from ..tasks import Task


@dataclass
class RunContext:
    """One rank's run, set up: the config, the built parts and where things go.

    ``workers`` counts the worker ranks (a server rank's ``rank >= workers``).  ``ctl`` is the
    process group for the runtime's own agreement (checkpoint epoch, divergence), not the
    algorithm's view of it (``comm``, which may be a side group or weigh its messages as a
    paper model's); ``wgroup`` is the workers' own group (the consensus distance).
    ``sampler`` (this worker's shard; a server rank gets worker 0's, for the epoch length)
    and ``steps_per_epoch`` are derived on construction.
    """

    res: Resolved
    algo: Algorithm
    model: torch.nn.Module
    task: Task
    comm: Communicator
    ctl: Backend
    wgroup: Backend
    straggler: StragglerModel
    rank: int
    workers: int
    device: torch.device
    out_dir: Path
    ckpt_dir: Path | None  # None: no checkpoints (the run's ``checkpoint: false``)
    config_hash: str
    run_id: int  # unique per run in the process group (the step schedule's counter key)
    sampler: Any = field(init=False)
    steps_per_epoch: int = field(init=False)

    def __post_init__(self) -> None:
        run, wl = self.res.run, self.res.workload
        self.sampler = build_sampler(wl.dataset.get("partition"), self.task.train, wl.batch_size,
                                     self.rank if self.rank < self.workers else 0, self.workers, run.seed)
        n = len(self.sampler)
        self.steps_per_epoch = n if wl.max_steps_per_epoch is None else min(n, wl.max_steps_per_epoch)

    @property
    def clock(self) -> Clock:
        return self.comm.clock

    @property
    def epochs(self) -> int:
        return self.res.workload.epochs

    def lr(self, epoch: float) -> float:
        """The learning-rate schedule's value at a fractional epoch."""
        return self.res.schedule.lr(self.res.optim.lr, self.workers, epoch, self.res.workload.epochs)
