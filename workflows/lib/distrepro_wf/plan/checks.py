"""The whole config checked before any job: the experiments, then the ``plan``, ``verify`` and
``probe`` sections, each by the module that owns it (called by ``workflows/rules/common.smk``).
Its own module so that ``plan.config`` and ``plan.verify`` (which reads the plan's methods)
need not import each other."""

from __future__ import annotations

from typing import Any


def validate(config: dict[str, Any]) -> list:
    """The whole config checked before any job: the experiments (the pipeline's
    :func:`~distrepro_wf.pipeline.config.validate`, whose expanded runs this returns), then the
    ``plan`` section (:func:`distrepro_wf.plan.config.check`), the ``verify`` section (:func:`distrepro_wf.plan.verify.settings`)
    and the ``probe`` section (:func:`distrepro_wf.plan.probe.settings`).  Raises :class:`ConfigError` naming the key."""
    from ..pipeline.config import validate as validate_experiments
    from .config import check
    from .probe import settings as probe_settings
    from .verify import settings as verify_settings

    runs = validate_experiments(config)
    if "plan" in config:
        check(config)
    if "verify" in config:
        verify_settings(config)
    if "probe" in config:
        probe_settings(config["probe"])
    return runs
