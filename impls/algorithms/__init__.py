"""Algorithm registry: one module per method, registered under its file name.

``ALGORITHMS.get(name)`` returns the class (with its ``Config`` dataclass);
an unknown name raises :class:`~impls.errors.ConfigError` listing the known ones.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..config.dataclass_config import from_dict
from ..registry import Registry

ALGORITHMS: Registry = Registry("algorithm", "algorithm.name", package=__name__, one_per_file=True)
register = ALGORITHMS.register


def load_all() -> Registry:
    """Import every algorithm module once; check that each registers under its file name."""
    return ALGORITHMS.discover()


def get_algorithm(name: str):
    return load_all().get(name)


def algorithm_config(spec: Mapping[str, Any], key: str = "algorithm"):
    """(class, config) from ``{"name": ..., <hyperparameters>}``."""
    spec = dict(spec)
    from ..errors import ConfigError

    if "name" not in spec:
        raise ConfigError(f"{key}.name", f"missing; known: {', '.join(load_all().names())}")
    cls = get_algorithm(spec.pop("name"))
    return cls, from_dict(cls.Config, spec, key)
