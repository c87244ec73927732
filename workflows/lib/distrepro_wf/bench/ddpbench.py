"""AR-SGD against torch DDP (rule ``bench_ddp`` -> ``results/bench/allreduce_vs_ddp.csv``).

One torchrun launch per (model, nodes) runs ``python -m impls.bench.ddp ddp`` (the timing
itself, :mod:`impls.bench.ddp`: AR-SGD through the runtime's step, DDP and a no-communication
baseline interleaved in blocks).  Here: the settings, checked before any launch
(:func:`bench_spec`), and the launch commands (:func:`commands`).

Settings (``benchmarks.ddp_compare`` in the config; defaults :data:`DEFAULTS`):

* ``models``: registered model names (``mlp``, ``resnet20``, ``vgg16``, ...);
* ``nodes``: ranks per launch (one rank per core is the setting of the overhead target);
* ``steps``: steps per block, one number or ``{model: steps}`` (VGG-16's step is ~30x
  ResNet-20's on a CPU core: fewer steps per block keep its launch within minutes);
* ``repeats``: blocks per contender (the median block is reported); ``batch``: per rank.
"""

from __future__ import annotations

from typing import Any, Mapping

from impls.errors import ConfigError

from .tables import merge_spec
from ..pipeline.launch import standalone

DEFAULTS: dict[str, Any] = {"models": ["mlp", "resnet20", "vgg16"], "nodes": [2, 4],
                            "steps": {"mlp": 100, "resnet20": 20, "vgg16": 5}, "repeats": 5, "batch": 32}
KEY = "benchmarks.ddp_compare"


def bench_spec(given: Mapping[str, Any] | None) -> dict[str, Any]:
    """:data:`DEFAULTS` with the config's keys replacing them; every error names the key."""
    from impls.models import MODELS, resnet_cifar, vgg_cifar  # noqa: F401  (their models register)

    spec = merge_spec(DEFAULTS, given, KEY)
    known = sorted(MODELS.names())
    if not isinstance(spec["models"], list) or not spec["models"]:
        raise ConfigError(f"{KEY}.models", f"expected a non-empty list of model names; known: {', '.join(known)}")
    for m in spec["models"]:
        if m not in known:
            raise ConfigError(f"{KEY}.models", f"unknown model {m!r}; known: {', '.join(known)}")
    if not isinstance(spec["nodes"], list) or not spec["nodes"] or any(
            not isinstance(n, int) or isinstance(n, bool) or n < 2 for n in spec["nodes"]):
        raise ConfigError(f"{KEY}.nodes", f"expected a non-empty list of integers >= 2, got {spec['nodes']!r}")
    steps = spec["steps"]
    per_model = steps if isinstance(steps, Mapping) else {m: steps for m in spec["models"]}
    for m in spec["models"]:
        v = per_model.get(m, DEFAULTS["steps"].get(m, 20))
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"{KEY}.steps", f"expected an integer >= 1 (or {{model: integer}}), got {v!r} for {m}")
        per_model = {**per_model, m: v}
    spec["steps"] = {m: per_model[m] for m in spec["models"]}
    for k in ("repeats", "batch"):
        if not isinstance(spec[k], int) or isinstance(spec[k], bool) or spec[k] < 1:
            raise ConfigError(f"{KEY}.{k}", f"expected an integer >= 1, got {spec[k]!r}")
    return spec


def commands(spec: Mapping[str, Any], out: str) -> list[list[str]]:
    """One torchrun command per (model, nodes), appending its row to ``out``."""
    return [standalone(n, "-m", "impls.bench.ddp", "ddp", "--out", out, "--model", m, "--steps", spec["steps"][m],
                       "--repeats", spec["repeats"], "--batch", spec["batch"])
            for m in spec["models"] for n in spec["nodes"]]
