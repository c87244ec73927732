"""Data a run needs made by a pipeline rule before it trains.

A rule that makes data (e.g. ``translation_data``: fairseq-preprocess of a corpus into a
data-bin, ``workflows/rules/translation.smk``) registers here what a run config needs of it
(:func:`preparer`); the generic ``train`` rule asks :func:`inputs` for a launch group's
files, so it names no task.  A preparer maps one resolved run config to the files (paths the
making rule outputs) it must wait for, ``[]`` for a run that needs nothing of it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

#: name -> preparer(raw run config) -> files that must exist before the run trains
PREPARERS: dict[str, Callable[[dict[str, Any]], list[str]]] = {}


def preparer(name: str) -> Callable[[Callable[[dict[str, Any]], list[str]]], Callable[[dict[str, Any]], list[str]]]:
    """Register ``fn(raw) -> [files]`` under ``name`` (the data-making rule's module does)."""
    def deco(fn: Callable[[dict[str, Any]], list[str]]) -> Callable[[dict[str, Any]], list[str]]:
        if name in PREPARERS and PREPARERS[name] is not fn:
            raise ValueError(f"data preparer {name!r} registered twice")
        PREPARERS[name] = fn
        return fn
    return deco


def inputs(raws: Iterable[dict[str, Any]]) -> list[str]:
    """Every file the runs ``raws`` (resolved run configs) wait for, over every registered
    preparer: the ``train`` rule's inputs."""
    raws = list(raws)
    return sorted({f for fn in PREPARERS.values() for raw in raws for f in fn(raw)})
