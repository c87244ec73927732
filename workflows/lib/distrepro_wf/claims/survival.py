"""Time to a target with the runs that never reach it: Kaplan-Meier and the log-rank test.

Why.  A run that stops before it reaches the target accuracy has no time to the target,
but it is not missing at random: it says the time is *longer than* the run lasted.  Dropping
it (the mean over the runs that arrived) flatters the method that arrives less often: of 5
seeds, the 4 fast ones are averaged and the slow one vanishes.  Survival analysis keeps it
as a **censored** observation: "not reached by time c", c being the run's last evaluation
(the last moment we know it had not arrived).  The "event" here is reaching the target.

* :func:`kaplan_meier` (Kaplan & Meier 1958): the probability S(t) that a run has *not yet*
  reached the target at time t, the product over the distinct event times t_j <= t of
  (1 - d_j / n_j), d_j runs reaching the target at t_j among the n_j still "at risk" (neither
  arrived nor censored before t_j; a run censored at t_j counts as at risk at t_j, the usual
  convention: censoring after the events of the same instant).  Its variance is Greenwood's:
  Var S(t) = S(t)^2 sum_{t_j <= t} d_j / (n_j (n_j - d_j)).
* :func:`km_median`: the median time to the target, the smallest t with S(t) <= 1/2 (NaN,
  "undefined", when S never falls to 1/2: fewer than half the runs can be shown to have
  arrived).  Its 95 % interval by Brookmeyer & Crowley (1982) on the **log-log** scale (as R's
  ``survfit(conf.type = "log-log")``): the pointwise band of S,
  S(t)^exp(+-z se), se = sqrt(sum d/(n(n-d))) / |log S(t)|, inverted at 1/2 (the times whose
  band holds 1/2): the lower limit is the first event time where the band's lower edge is
  <= 1/2, the upper limit the first where its upper edge is (+inf, "not reached", when it
  never is).  The log-log band stays
  inside (0, 1), which the plain Greenwood band does not at 5 runs a side.
* :func:`logrank`: the two-sample log-rank test (Mantel 1966; Peto & Peto 1972): at each
  distinct event time, the events of group a against their expectation under "same curve",
  E_a = d n_a / n, summed (O_a - E_a) with the hypergeometric variance
  V = sum d (n_a / n) (1 - n_a / n) (n - d) / (n - 1); chi^2 = (O_a - E_a)^2 / V on 1 degree of
  freedom.  ``a_sooner``: O_a > E_a (a reaches the target more, i.e. sooner, than chance says).

Why the log-rank test and not a paired one, though a seed gives both methods the same data
order and initialisation: with the 5 seeds of a claim a paired test on censored pairs is a
sign test over the pairs whose order is known (both arrived, or one arrived before the other
was censored), and its smallest two-sided p-value is 2 / 2^5 = 0.0625: it could never decide
at 5 %.  A log-rank test stratified by seed is the same sign test (each stratum of 2 runs adds
+-1/2 with variance 1/4).  The unstratified log-rank test uses every run's time, not just the
pairs' order (5 against 5 completely separated runs give p = 0.0018), and it is the standard
test for censored times; the price is that it ignores the pairing, which is weak here anyway
(two methods given the same seed still take different paths to the target).

Checked against textbook examples (tests/test_survival.py: Freireich's 6-MP trial as in
Kleinbaum & Klein, *Survival Analysis*, and Collett's ovarian-cancer data).
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np
from scipy.special import chdtrc as _chi2_sf, ndtri as _z

LEVEL = 0.95


class KM(NamedTuple):
    """The Kaplan-Meier curve at its distinct event times (reaching the target)."""
    times: np.ndarray       # distinct event times t_j, increasing
    at_risk: np.ndarray     # n_j
    events: np.ndarray      # d_j
    survival: np.ndarray    # S(t_j): the probability of not having reached the target by t_j
    greenwood: np.ndarray   # sum_{i <= j} d_i / (n_i (n_i - d_i)) (inf once S = 0)


class Median(NamedTuple):
    """A KM median with its interval; ``reached``/``runs`` are the counts behind it."""
    median: float           # nan: undefined (S never falls to 1/2)
    low: float              # nan when the median is undefined and no lower limit exists
    high: float             # +inf: the upper limit is not reached
    reached: int            # runs that reached the target
    runs: int               # all runs, censored ones included


class LogRank(NamedTuple):
    observed_a: float       # O_a: events of a
    expected_a: float       # E_a under "both curves the same"
    variance: float         # V (hypergeometric)
    chi2: float             # (O_a - E_a)^2 / V; nan when V = 0 (no events, or no information)
    p: float                # two-sided p-value on 1 degree of freedom; nan when V = 0
    a_sooner: bool          # O_a > E_a


def _arrays(times: Sequence[float], events: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(times, dtype=float)
    e = np.asarray(events, dtype=bool)
    if t.shape != e.shape or t.ndim != 1:
        raise ValueError(f"times and events must be 1-d and of one length, got {t.shape} and {e.shape}")
    if not np.isfinite(t).all() or (t < 0).any():
        raise ValueError(f"times must be finite and >= 0 (a censored run's time is its last evaluation), got {t}")
    return t, e


def kaplan_meier(times: Sequence[float], events: Sequence[bool]) -> KM:
    """The KM curve of runs with ``times`` (the time to the target where ``events`` is True,
    else the censoring time: the run's last evaluation); see the module docstring."""
    t, e = _arrays(times, events)
    ts = np.unique(t[e])
    n = np.array([(t >= u).sum() for u in ts], dtype=float)
    d = np.array([((t == u) & e).sum() for u in ts], dtype=float)
    s = np.cumprod(1.0 - d / n)
    with np.errstate(divide="ignore"):
        g = np.cumsum(np.where(n > d, d / (n * (n - d)), np.inf))
    return KM(ts, n, d, s, g)


def _band(km: KM, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Pointwise log-log band of S at the event times: (lower, upper)."""
    z = float(_z((1 + level) / 2))
    lo, hi = np.zeros_like(km.survival), np.zeros_like(km.survival)
    for j, (s, g) in enumerate(zip(km.survival, km.greenwood)):
        if s <= 0 or not math.isfinite(g):
            lo[j], hi[j] = 0.0, 0.0 if s <= 0 else 1.0
            continue
        if s >= 1:
            lo[j] = hi[j] = 1.0
            continue
        se = math.sqrt(g) / abs(math.log(s))
        lo[j], hi[j] = s ** math.exp(z * se), s ** math.exp(-z * se)
    return lo, hi


def km_median(times: Sequence[float], events: Sequence[bool], level: float = LEVEL) -> Median:
    """Median time to the target with its Brookmeyer-Crowley interval on the log-log scale
    (module docstring).  No run: everything nan."""
    t, e = _arrays(times, events)
    if len(t) == 0:
        return Median(math.nan, math.nan, math.nan, 0, 0)
    km = kaplan_meier(t, e)
    lo, hi = _band(km, level)
    first = lambda mask: float(km.times[np.argmax(mask)]) if mask.any() else math.nan  # noqa: E731
    median = first(km.survival <= 0.5)
    low = first(lo <= 0.5)
    high = first(hi <= 0.5)
    return Median(median, low, math.inf if math.isnan(high) else high, int(e.sum()), len(t))


def logrank(times_a: Sequence[float], events_a: Sequence[bool], times_b: Sequence[float],
            events_b: Sequence[bool]) -> LogRank:
    """The two-sample log-rank test of a against b (module docstring)."""
    ta, ea = _arrays(times_a, events_a)
    tb, eb = _arrays(times_b, events_b)
    t = np.concatenate([ta, tb])
    e = np.concatenate([ea, eb])
    in_a = np.concatenate([np.ones(len(ta), bool), np.zeros(len(tb), bool)])
    o = ex = v = 0.0
    for u in np.unique(t[e]):
        risk = t >= u
        n, na = float(risk.sum()), float((risk & in_a).sum())
        d, da = float(((t == u) & e).sum()), float(((t == u) & e & in_a).sum())
        o += da
        ex += d * na / n
        if n > 1:
            v += d * (na / n) * (1 - na / n) * (n - d) / (n - 1)
    if v <= 0:
        return LogRank(o, ex, v, math.nan, math.nan, o > ex)
    chi2 = (o - ex) ** 2 / v
    return LogRank(o, ex, v, chi2, float(_chi2_sf(1, chi2)), o > ex)
