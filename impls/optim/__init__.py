"""Local optimizers, by name (``workload.optimizer.name``), and the one factory that builds
them for every algorithm.

========  ==============================================================  ============
name      update (per parameter tensor ``p`` with gradient ``g``)           module
========  ==============================================================  ============
sgd       momentum / Nesterov SGD, L2 coupled (torch.optim.SGD's math)      ``sgd.py``
adam      Adam (Kingma & Ba 2015), L2 coupled (torch.optim.Adam's math)     ``adam.py``
adamw     Adam with decoupled weight decay (Loshchilov & Hutter 2019)       ``adam.py``
lars      layer-wise adaptive rate scaling (You et al. 2017), momentum      ``lars.py``
========  ==============================================================  ============

None of them imports ``torch.optim`` (its import of ``torch._dynamo`` costs every rank
about 2.5 s of start-up); the tests check each against a naive float64 reference and
against ``torch.optim`` where it has the same optimizer.

How an algorithm composes with the optimizer (``Algorithm.optimizer_use``):

* ``gradient``: the method transforms the gradient (averaging, compression), then the
  local optimizer steps: :func:`build_optimizer` with the optimizer's own weight decay.
* ``local_then_mix``: the method steps locally, then mixes parameters (gossip).  The
  L2 term belongs to the point where the gradient was taken, not to the vector the
  optimizer steps (PushSum's numerator, the mixed parameters), so
  :func:`build_optimizer` with ``l2_outside=True`` returns the optimizer without its
  *coupled* weight decay plus that coefficient, which the method adds to the gradient
  itself; a *decoupled* decay (adamw) stays in the optimizer, applied to the stepped
  vector.
* ``owns``: the method implements the whole update (D^2); it declares the optimizers
  and hyperparameter values it accepts (``Algorithm.supported_optimizers``), checked
  at validation by :func:`check_composition`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable, Mapping

import torch

from ..sim.charging import Charging
from ..config.dataclass_config import from_dict
from ..errors import ConfigError
from ..registry import Registry

OPTIMIZERS: Registry = Registry("optimizer", "workload.optimizer.name", package=__name__)
register = OPTIMIZERS.register
_KEY = "workload.optimizer"


class LocalOptimizer(Charging):
    """What every local optimizer offers the algorithms: ``params``, a settable ``lr``,
    ``step()`` on the parameters' ``.grad``, and checkpoint state.

    Each ``step()`` charges itself to the clock it was built with (:func:`build_optimizer`'s
    ``clock``; op-cost kind ``optim``, :mod:`impls.sim.opcost`) when it ends
    (:meth:`charge_step`): ``bytes_touched`` times its parameters' bytes, one memory-bound
    pass over the parameters, gradients and state (SGD with momentum reads p, g, m and writes
    p, m: 5)."""

    Config: ClassVar[type]
    #: bytes touched per parameter byte and step (the op-cost model's ``optim`` charge)
    bytes_touched: ClassVar[float] = 5
    #: weight decay applied to the parameters rather than added to the gradient
    decoupled_weight_decay: ClassVar[bool] = False
    params: list[torch.nn.Parameter]
    lr: float

    @classmethod
    def from_config(cls, cfg: Any, params: Iterable[torch.nn.Parameter], weight_decay: float) -> "LocalOptimizer":
        raise NotImplementedError

    def step(self) -> None:
        raise NotImplementedError

    def charge_step(self) -> None:
        """Called by ``step()`` when the update is done: charge it (``optim``)."""
        self.charge("optim", self.bytes_touched * sum(p.numel() * p.element_size() for p in self.params))

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


def optimizer_config(spec: Mapping[str, Any] | None, key: str = _KEY) -> Any:
    """The typed config of ``workload.optimizer`` (``name`` defaults to ``sgd``)."""
    spec = dict(spec or {})
    spec.setdefault("name", "sgd")
    cls = OPTIMIZERS.get(spec["name"])
    return from_dict(cls.Config, spec, key)


def build_optimizer(cfg: Any, params: Iterable[torch.nn.Parameter],
                    l2_outside: bool = False, clock: Any = None) -> tuple[LocalOptimizer, float]:
    """``(optimizer, weight decay left to the caller)`` for the config ``cfg``.

    ``l2_outside``: the caller adds a coupled L2 term to the gradient itself (see the
    module docstring); the returned coefficient is then the optimizer's, else 0.
    ``clock``: the run's clock, which each step charges itself to (None: nothing charged).
    """
    cls = OPTIMIZERS.get(cfg.name)
    wd = cfg.weight_decay
    if l2_outside and not cls.decoupled_weight_decay:
        return cls.from_config(cfg, params, 0.0).bind_clock(clock), wd
    return cls.from_config(cfg, params, wd).bind_clock(clock), 0.0


def step_passes(cfg: Any) -> float:
    """The step of the optimizer of config ``cfg`` in passes over its parameters' bytes (its
    ``bytes_touched``, the op-cost model's ``optim`` charge): what a closed form counts
    (:attr:`impls.comm.stepcost.Point.optim_passes`)."""
    return OPTIMIZERS.get(cfg.name).from_config(cfg, [], cfg.weight_decay).bytes_touched


def check_composition(algorithm: str, supported: Mapping[str, Mapping[str, Any]] | None, cfg: Any) -> None:
    """Refuse an optimizer (or a hyperparameter value) the algorithm cannot work with."""
    if supported is None:
        return
    if cfg.name not in supported:
        raise ConfigError(f"{_KEY}.name", f"{algorithm} implements its own update and accepts the optimizer(s) "
                                          f"{', '.join(sorted(supported))}, not {cfg.name!r}")
    for k, want in supported[cfg.name].items():
        if getattr(cfg, k) != want:
            raise ConfigError(f"{_KEY}.{k}", f"{algorithm} needs {cfg.name} with {k}: {want} "
                                             f"(got {getattr(cfg, k)!r})")


from .sgd import SGD, SGDConfig  # noqa: E402  (the default optimizer, importable from here)

__all__ = ["OPTIMIZERS", "LocalOptimizer", "SGD", "SGDConfig", "build_optimizer", "check_composition",
           "optimizer_config", "register"]
