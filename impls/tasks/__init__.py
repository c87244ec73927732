"""Tasks, by name (``workload.task.name``): what is being learned, and how it is scored.

A task owns everything task-specific, so the runtime and the algorithms never assume
image classification: building the training / validation data and the model, moving a
batch to the device, the training loss of a batch, the evaluation metrics, and the
primary metric with its direction (what "time to target" and the claims read).

=================  ======================================================================
``classification``  the default: a dataset and a model from their registries
                    (``workload.dataset``, ``workload.model``), cross-entropy, metrics
                    ``loss/val`` and ``acc/val`` (primary, higher is better)
``finite_sum``      ``min_x F(x) = 1/n sum_i f_i(x)``, generated from a seed: least squares,
                    or a sum of nonconvex quadratics whose mean is strongly convex (Katyusha
                    X's setting); metrics ``loss/objective`` and ``opt/gap`` = ``F(x) - F(x*)``
                    against the closed-form optimum (primary, lower is better)
``translation``     fairseq's Transformer on a ``fairseq-preprocess`` data-bin, token-based
                    batches, label-smoothed cross entropy; metrics ``loss/val``,
                    ``nll/val`` and ``bleu/val`` (primary, higher is better: sacrebleu on
                    greedy or beam decodes).  fairseq is imported only when it is built
=================  ======================================================================

Adding a task: a file here with a config dataclass (``name`` first) and a :class:`Task`
subclass registered with ``@TASKS.register("<name>")``; nothing else changes.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

import torch
from torch import nn
from torch.utils.data import Dataset

from ..config.dataclass_config import from_dict
from ..registry import Registry

TASKS: Registry = Registry("task", "workload.task.name", package=__name__)


class Task:
    Config: ClassVar[type]
    #: the metric that targets, time-to-target and claims read by default, and its direction
    primary_metric: ClassVar[str]
    higher_is_better: ClassVar[bool]
    #: the keys :meth:`evaluate` returns (what a workload's ``target`` may name)
    metrics: ClassVar[tuple[str, ...]]
    #: what the throughput benchmark counts per second (``samples/s``; translation: ``tokens/s``)
    throughput_unit: ClassVar[str] = "samples/s"

    def __init__(self, cfg: Any, workload: Any, device: torch.device):
        self.cfg, self.workload, self.device = cfg, workload, device
        self.train: Dataset | None = None
        self.val: Dataset | None = None

    @classmethod
    def preload(cls) -> None:
        """Import what this task imports lazily and slowly (a fork server calls it once, before
        forking its runs); default nothing."""

    @classmethod
    def describe(cls, spec: Mapping[str, Any], synthetic: Mapping[str, Any] | None) -> tuple[str, str] | None:
        """(model, data) as a benchmark table names them, for a task whose model and data are
        not the workload's ``model`` / ``dataset`` (``spec``: ``workload.task``; ``synthetic``:
        the benchmark's :meth:`synthetic_batch` spec, if any); None: the workload's."""
        return None

    def synthetic_batch(self, spec: Mapping[str, Any], seed: int) -> tuple[torch.Tensor, ...]:
        """A random training batch of this task's shape, for timing without its data files
        (the throughput benchmark's ``tokens:``); a task without one refuses."""
        own = [n for n in TASKS.names() if TASKS.get(n).synthetic_batch is not Task.synthetic_batch]
        raise ValueError(f"tokens: random batches are not defined for the {type(self).__name__} task; "
                         f"tasks that define them: {', '.join(own)}")

    def batch_units(self, batch: tuple[torch.Tensor, ...]) -> int | None:
        """What :attr:`throughput_unit` counts in ``batch`` beyond its rows (translation: its
        target tokens); None: rows only."""
        return None

    def build_data(self, probe: bool = False) -> None:
        """Set ``self.train`` / ``self.val``; ``probe``: validation only, as cheaply as possible
        (a large on-disk dataset may leave ``train`` as None)."""
        raise NotImplementedError

    def build_model(self) -> nn.Module:
        """The model, on ``self.device`` (the runtime seeds before calling this)."""
        raise NotImplementedError

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Mean training loss of ``batch`` (a tuple of tensors, already on the device)."""
        raise NotImplementedError

    def evaluate(self, model: nn.Module, workers: int = 0) -> dict[str, float]:
        raise NotImplementedError


def build_task(workload: Any, device: torch.device = torch.device("cpu")) -> Task:
    """The task of a resolved workload (``workload.task``, default classification)."""
    spec: Mapping[str, Any] = dict(workload.task or {})
    spec = {"name": "classification", **spec}
    cls = TASKS.get(spec["name"])
    return cls(from_dict(cls.Config, spec, "workload.task"), workload, device)
