"""Straggler model: the same seeded, configured slowdown for every method.

A straggler is emulated by a real ``time.sleep`` in the worker (the clock's: simulated
time on the simulated backend), after its forward and backward pass and before its step
communicates, so a slow rank's messages leave late exactly as a slow GPU's would.  A
method that starts communicating during backward (``allreduce_sgd``'s default
``overlap_backward``) has sent its buckets by then: its delay overlaps that all-reduce, and
the other ranks wait for it at the next step's (its docstring).  The delay is proportional to the compute time the
rank just measured for that step, so the slowdown holds whatever the workload:

* ``none`` - no delay.
* ``fixed`` - ranks in ``ranks`` (negative indices count from the last rank, so
  ``[-1]`` is "the last worker" at every node count) sleep ``(factor - 1) * compute``
  each step: a factor of 4 makes the step's compute phase 4x as long; ``delay_s``
  adds a fixed number of seconds per step (a slowdown that does not scale with the
  workload, e.g. a worker on a shared host).
* ``random`` - every rank in ``ranks`` (default: all) sleeps an exponential delay
  with mean ``mean_fraction * compute`` with probability ``prob`` per step; seeded by
  (seed, rank), so reruns sleep identically.

The delay is logged per step as ``time/straggler_delay_s``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..config.dataclass_config import from_dict
from ..errors import ConfigError

KINDS = ("none", "fixed", "random")


@dataclass
class StragglerConfig:
    kind: str = field(default="none", metadata={"choices": KINDS})
    ranks: list[int] | None = None
    factor: float = field(default=1.0, metadata={"min": 1})  # fixed: slowdown of the compute phase (4 = 4x)
    delay_s: float = field(default=0.0, metadata={"min": 0})  # fixed: plus this many seconds per step
    mean_fraction: float = field(default=0.0, metadata={"min": 0})  # random: mean delay / compute time
    prob: float = field(default=1.0, metadata={"gt": 0, "max": 1})  # random: probability a step is delayed

    def validate(self, key: str) -> None:
        if self.kind == "fixed":
            if not self.ranks:
                raise ConfigError(f"{key}.ranks", "kind 'fixed' needs a non-empty list of ranks, e.g. [-1]")
        if self.delay_s > 0 and self.kind != "fixed":
            raise ConfigError(f"{key}.delay_s", f"only kind 'fixed' takes a delay_s, not kind {self.kind!r}")
        if self.kind == "random":
            if self.mean_fraction <= 0:
                raise ConfigError(f"{key}.mean_fraction", "kind 'random' needs mean_fraction > 0")


def straggler_config(spec: Mapping[str, Any] | None, key: str = "straggler") -> StragglerConfig:
    return from_dict(StragglerConfig, spec, key)


class StragglerModel:
    def __init__(self, cfg: StragglerConfig, rank: int, world: int, seed: int):
        self.cfg = cfg
        self.rank = rank
        if cfg.ranks is None:
            slow = set(range(world)) if cfg.kind == "random" else set()
        else:
            slow = set()
            for r in cfg.ranks:
                if not -world <= r < world:
                    raise ConfigError("straggler.ranks", f"rank {r} does not exist with {world} workers")
                slow.add(r % world)
        self.slow_ranks = sorted(slow)
        self.active = cfg.kind != "none" and rank in slow
        self.rng = random.Random(int(seed) * 1_000_003 + int(rank) + 17)

    def delay(self, compute_s: float) -> float:
        """Seconds this rank must sleep after a step whose compute took ``compute_s``."""
        if not self.active:
            return 0.0
        if self.cfg.kind == "fixed":
            return (self.cfg.factor - 1.0) * compute_s + self.cfg.delay_s
        # random: draw both numbers every step so the sequence does not depend on timing
        hit = self.rng.random() < self.cfg.prob
        x = self.rng.expovariate(1.0)
        return x * self.cfg.mean_fraction * compute_s if hit else 0.0
