"""The resolved configuration of one run, as the runtime receives it.

The workflow expands the experiment grid and writes one JSON document per run::

    {"experiment": "baseline", "method": "allreduce_sgd", "nodes": 4, "seed": 1,
     "straggler_name": "slow1x4",
     "algorithm": {"name": "allreduce_sgd", "bucket_mb": 25},
     "workload": {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
                  "batch_size": 32, "epochs": 5, "optimizer": {...}},
     "straggler": {"kind": "fixed", "ranks": [-1], "factor": 4},
     "allreduce_algorithm": "ring"}

:func:`resolve` validates every part (raising :class:`~impls.errors.ConfigError`
naming the key) and returns typed objects.

Real ranks emulate no network: a run config that still names one (``network``) is
refused with :data:`NETWORK_REMOVED`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..algorithms import algorithm_config
from ..backends import DEFAULT as DEFAULT_BACKEND
from ..backends import backend_of, run_values
from ..comm.costmodel import ALGORITHMS
from .dataclass_config import from_dict
from ..errors import ConfigError
from ..optim import check_composition, optimizer_config
from ..optim.schedules import Schedule, schedule_config
from ..runtime.straggler import StragglerConfig, straggler_config
from .workload import TargetConfig, WorkloadConfig  # noqa: F401  (a run's workload; re-exported)

#: why a ``network`` key (a run config's, or an experiment's in the pipeline config) is refused
NETWORK_REMOVED = ("network emulation on real ranks was removed: real ranks measure this machine's network; "
                   "use `backend: simgrid` with a `platform:` to study a network (see docs/simulated-platform.md)")


@dataclass
class RunConfig:
    experiment: str
    method: str
    nodes: int
    seed: int
    algorithm: dict[str, Any]
    workload: dict[str, Any]
    straggler_name: str = "none"
    straggler: dict[str, Any] = field(default_factory=dict)
    allreduce_algorithm: str = field(default="ring", metadata={"choices": ALGORITHMS})  # counts its bytes
    # the registered backends' values (impls.backends: auto, gloo, nccl: torch; simgrid); each
    # backend validates its own keys (platform, profile: BackendSpec.validate)
    backend: str = field(default=DEFAULT_BACKEND, metadata={"choices": run_values()})
    platform: Any = None  # a simulated backend's: impls.sim.platforms (a preset name or {name, overrides})
    profile: Any = None  # a simulated backend's: impls.sim.profiles; real ranks: a fixed one
    threads_per_rank: int = field(default=1, metadata={"min": 1})
    checkpoint: bool = True
    #: the backend's own keys, parsed once by its spec while this config is read
    #: (:meth:`impls.backends.BackendSpec.validate`): ``{"platform": PlatformConfig, "profile":
    #: ProfileConfig}`` of a simulated run, ``{"profile": ...}`` of real ranks under a fixed
    #: profile; not a config key
    parsed: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def validate(self, key: str) -> None:
        if self.nodes < 1:
            raise ConfigError("nodes", f"must be >= 1, got {self.nodes}")
        if self.seed < 0:
            raise ConfigError("seed", f"must be >= 0, got {self.seed}")
        self.parsed = backend_of(self.backend).validate(self)


@dataclass
class Resolved:
    run: RunConfig
    algorithm_cls: type
    algorithm: Any
    workload: WorkloadConfig
    optim: Any  # impls.optim: the config of the named optimizer
    schedule: Schedule
    straggler: StragglerConfig
    raw: dict[str, Any]


def resolve(raw: Mapping[str, Any]) -> Resolved:
    if "network" in raw:
        raise ConfigError("network", NETWORK_REMOVED)
    run = from_dict(RunConfig, raw, "run")
    cls, acfg = algorithm_config(run.algorithm, "algorithm")
    wl = from_dict(WorkloadConfig, run.workload, "workload")
    optim = optimizer_config(wl.optimizer)
    check_composition(run.algorithm["name"], cls.supported_optimizers, optim)
    if wl.precision == "fp16" and len(cls.roles(run.nodes, acfg)) > run.nodes:
        raise ConfigError("workload.precision", f"fp16 skips the steps whose gradients overflow, and "
                                                f"{run.algorithm['name']}'s server ranks count every push: use "
                                                f"bf16 or fp32 (allowed values: fp32, bf16, fp16)")
    return Resolved(
        run=run,
        algorithm_cls=cls,
        algorithm=acfg,
        workload=wl,
        optim=optim,
        schedule=schedule_config(wl.schedule),
        straggler=straggler_config(run.straggler, "straggler"),
        raw=dict(raw),
    )


def check_workload(wl: WorkloadConfig, nodes: int, seed: int, cache: dict[str, Any] | None = None) -> None:
    """Everything a run would find wrong with its workload, found before any job runs.

    Builds the task's data (a large on-disk dataset is only probed), its model on the
    ``meta`` device (no memory, no time) and rank 0's sampler at ``nodes`` workers:
    unknown names and arguments, missing or empty dataset roots, a bad partition, a
    batch larger than a worker's data.  ``cache`` shares the data between calls.
    """
    import json

    import torch

    from ..data.sampler import build_sampler
    from ..tasks import build_task

    cache = {} if cache is None else cache
    dkey = json.dumps([wl.task, wl.dataset], sort_keys=True)
    if dkey not in cache:
        cache[dkey] = build_task(wl)
        cache[dkey].build_data(probe=True)
    task = cache[dkey]
    task.workload, task.device = wl, torch.device("meta")  # the data are shared, the model is this workload's
    try:
        with torch.device("meta"):
            task.build_model()
    except ConfigError:
        raise
    except Exception as e:  # a wrong value type or an impossible shape: say which model
        raise ConfigError("workload.model", f"cannot build model {wl.model.get('name')!r}: "
                                            f"{type(e).__name__}: {e}") from None
    if wl.target is not None and wl.target["metric"] not in task.metrics:
        raise ConfigError("workload.target.metric", f"{wl.target['metric']!r} is not a metric of task "
                                                    f"{type(task).__name__}; allowed: {', '.join(task.metrics)}")
    if task.train is not None:
        build_sampler(wl.dataset.get("partition"), task.train, wl.batch_size, 0, nodes, seed)


def world_size(raw: Mapping[str, Any]) -> int:
    """Processes a run needs: its workers (``nodes``) plus the algorithm's other roles."""
    res = resolve(raw)
    return len(res.algorithm_cls.roles(res.run.nodes, res.algorithm))
