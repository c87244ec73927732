"""The allowed range of each numeric benchmark setting (``benchmarks.<name>.<key>`` in the
config), checked when the config is read, before any job: a wrong type, a NaN or an infinity,
a number out of range, or a list given as a string is a :class:`impls.errors.ConfigError`
naming the key and the allowed range (``benchmarks.sensitivity_sweep.steps: expected an integer
in [1, 1000], got -3``).

Each benchmark module states its settings' ranges beside its ``DEFAULTS`` (``RANGES``) and
calls :func:`check_spec` from its ``bench_spec``.  The upper bounds keep a typo from being a
day-long job (``epochs: 1000000000``); a bandwidth or a rate is positive and finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from impls.errors import ConfigError


@dataclass(frozen=True)
class Range:
    """A number in ``[lo, hi]`` (``(lo, hi]`` where ``lo_open``: a positive amount), an integer
    where ``integer``; ``many``: a non-empty list of such numbers (a single number is refused)."""

    lo: float
    hi: float
    integer: bool = False
    lo_open: bool = False
    many: bool = False

    def text(self) -> str:
        span = f"{'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"
        if self.many:
            return f"a non-empty list of {'integers' if self.integer else 'finite numbers'} in {span}"
        return f"{'an integer' if self.integer else 'a finite number'} in {span}"

    def ok(self, v: Any) -> bool:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        if self.integer and not (isinstance(v, int) or (isinstance(v, float) and v.is_integer())):
            return False
        return math.isfinite(v) and (v > self.lo if self.lo_open else v >= self.lo) and v <= self.hi

    def check(self, key: str, v: Any) -> None:
        good = (isinstance(v, list) and v and all(self.ok(x) for x in v)) if self.many else self.ok(v)
        if not good:
            raise ConfigError(key, f"expected {self.text()}, got {v!r}")


#: common ranges
TIMEOUT_S = Range(0, 7 * 86400, lo_open=True)  # a limit in seconds: positive, at most a week
RATE = Range(0, 1e9, lo_open=True)  # a bandwidth or a rate: positive and finite
FRACTION = Range(0, 10)  # a relative tolerance or margin


def check_spec(name: str, spec: Mapping[str, Any], ranges: Mapping[str, Range],
               names: tuple[str, ...] = ()) -> None:
    """Check the keys of ``spec`` (benchmark ``name``'s merged settings) that ``ranges`` bounds,
    and that each key of ``names`` is a list of names (strings), not a string read letter by
    letter."""
    for k, r in ranges.items():
        if k in spec:
            r.check(f"benchmarks.{name}.{k}", spec[k])
    for k in names:
        v = spec.get(k)
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            raise ConfigError(f"benchmarks.{name}.{k}", f"expected a list of names ([] for all), got {v!r}")
