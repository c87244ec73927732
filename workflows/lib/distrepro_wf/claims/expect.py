"""A claim's expectation as the region of measured values that pass it: read by the claims'
loader (:mod:`.published`, which checks the region against the metric's bounds), their
mechanisms' gates, the verdicts (:mod:`.evaluate`), the sensitivity analysis and the report's
evidence.  Below all of them: it imports nothing of the workflow."""

from __future__ import annotations

import math
from typing import Any


def pass_region(expect: dict[str, Any]) -> tuple[float, bool, float, bool]:
    """``expect`` with its tolerance as an interval ``(low, low_closed, high, high_closed)``:
    ``<``/``<=`` pass when m op value+tol, ``>``/``>=`` when m op value-tol, ``between [lo, hi]``
    when lo-tol <= m <= hi+tol, ``within`` when |m - value| <= tol."""
    op, v, tol = expect["op"], expect["value"], expect["tolerance"]
    if op == "<":
        return -math.inf, False, v + tol, False
    if op == "<=":
        return -math.inf, False, v + tol, True
    if op == ">":
        return v - tol, False, math.inf, False
    if op == ">=":
        return v - tol, True, math.inf, False
    if op == "between":
        return v[0] - tol, True, v[1] + tol, True
    return v - tol, True, v + tol, True  # within


def _below(x: float, region: tuple[float, bool, float, bool]) -> bool:
    lo, lo_closed, _, _ = region
    return x < lo or (x == lo and not lo_closed)


def _above(x: float, region: tuple[float, bool, float, bool]) -> bool:
    _, _, hi, hi_closed = region
    return x > hi or (x == hi and not hi_closed)
