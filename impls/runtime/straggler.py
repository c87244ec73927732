"""Straggler model: the same seeded, configured slowdown for every method.

What a real slow GPU does.  A device that is ``k`` times slower (thermal throttling, a
lower clock, a busier neighbour on a shared node, an older card in the pool) runs every
kernel of its forward and backward pass ``k`` times as long.  Its forward pass ends late;
its backward pass produces each layer's gradient late, so each gradient bucket it hands
to the all-reduce is ready ``k`` times later into the step than on a healthy device,
and the collective, which cannot finish before the last rank's contribution, finishes
late on every rank.  Communication already launched (its NIC and the CPU thread of the
transport) is *not* slowed: a slow device does not slow the wire.  So an all-reduce
overlapped with backward cannot hide a straggler: the straggler's compute is on the
critical path of every bucket.

How it is emulated (:meth:`StragglerModel.slowdown` draws a step's :class:`Slowdown`, the
clock applies it inside ``clock.compute``, :mod:`impls.backends`):

* simulated (:class:`impls.backends.sim.SimClock`) and profile-charged real ranks
  (:class:`impls.backends.ChargedClock`): the step's compute is charged
  ``factor x step + delay_s`` seconds, with the profile's forward/backward split, so every
  backward point (a bucket ready, :meth:`impls.backends.Clock.backward_point`) moves out
  by the same factor;
* real ranks on the wall clock (:class:`impls.backends.Clock`): the real forward and
  backward run at this machine's speed and the rank sleeps the difference in pieces:
  ``(factor - 1) x`` the forward pass's measured time once the forward pass ends, and
  during the backward pass, before each bucket's all-reduce is launched, up to
  ``(factor - 1) x`` the backward time measured so far (the rest when backward ends), so a
  bucket leaves when a device ``factor`` times slower would have produced it.  ``delay_s``
  is spread the same way by the backward share of a step (``1 - backward_fraction``
  after forward, the backward part in proportion to the parameters done).

The kinds:

* ``none`` - no slowdown.
* ``fixed`` - ranks in ``ranks`` (negative indices count from the last rank, so
  ``[-1]`` is "the last worker" at every node count) compute ``factor`` times as long
  each step; ``delay_s`` adds a fixed number of seconds of compute per step (a slowdown
  that does not scale with the workload, e.g. a worker on a shared host).
* ``random`` - every rank in ``ranks`` (default: all) is slowed by a factor of
  ``1 + x mean_fraction`` (``x`` exponential with mean 1) with probability ``prob`` per
  step; seeded by (seed, rank), so reruns draw identically.

The seconds a slowdown added are logged per step as ``time/straggler_delay_s`` (and
``time/compute_s`` stays the step's compute at the healthy speed): ``factor - 1`` times
the compute plus ``delay_s``, as charged (simulated) or as slept (real ranks: at least
that, a sleep only overshoots; what the algorithm does after the backward pass, e.g.
launching the last buckets, is not slowed).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..config.dataclass_config import from_dict
from ..errors import ConfigError

KINDS = ("none", "fixed", "random")


@dataclass(frozen=True)
class Slowdown:
    """One step's slowdown of a rank's compute: ``factor`` times as long, plus ``extra_s``
    seconds (spread over the forward and backward pass by the clock, module docstring)."""

    factor: float = 1.0
    extra_s: float = 0.0

    @property
    def active(self) -> bool:
        return self.factor != 1.0 or self.extra_s > 0

    def added(self, compute_s: float) -> float:
        """Seconds it adds to a compute of ``compute_s`` at the healthy speed."""
        return (self.factor - 1.0) * compute_s + self.extra_s


NO_SLOWDOWN = Slowdown()


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


    def compute_factor(self) -> float | None:
        """The one factor a slow rank's compute takes every step: 1 for ``none``, ``factor`` for
        ``fixed``; None where there is no single one (``random``: drawn per step; ``delay_s``: seconds
        added, not a factor).  What a closed form of the step takes as its straggler."""
        if self.kind == "none":
            return 1.0
        if self.kind != "fixed" or self.delay_s > 0:
            return None
        return float(self.factor)


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

    def slowdown(self) -> "Slowdown":
        """This step's slowdown of the rank's compute (one draw per step for ``random``)."""
        if not self.active:
            return NO_SLOWDOWN
        if self.cfg.kind == "fixed":
            return Slowdown(self.cfg.factor, self.cfg.delay_s)
        # random: draw both numbers every step so the sequence does not depend on timing
        hit = self.rng.random() < self.cfg.prob
        x = self.rng.expovariate(1.0)
        return Slowdown(1.0 + x * self.cfg.mean_fraction) if hit else NO_SLOWDOWN

    def delay(self, compute_s: float) -> float:
        """The seconds this step's slowdown adds to a compute of ``compute_s`` (draws a step)."""
        return self.slowdown().added(compute_s)
