"""Statistics over seeds for the claims: the statistic of a comparison, its interval and the
probability that one side beats the other.

Why a t interval, not the bootstrap.  The default grid runs 5 seeds per claim-bearing setting
(fewer seeds mark a claim provisional, :mod:`distrepro_wf.claims.evaluate`).  At such n a percentile
bootstrap is not a 95 % interval: with 2 seeds it has 3 distinct resamples and its "95 % CI" is
the min-max of the seeds, with 5 it still undercovers (it ignores that the spread is itself
estimated from 5 values).  Student's t accounts for that, is exact for normal per-seed values
and is robust enough for the nearly symmetric per-seed statistics here; it is also a closed
form (deterministic, nothing to resample).

The intervals (:func:`interval`), all at :data:`CI_LEVEL` = 95 %, two-sided:

* ``ratio`` (a / b): on the log scale, so that the interval is multiplicative and a ratio and its
  inverse get the same verdict.  Both sides ran the same seeds -> **paired t** on the per-seed
  log-ratios ``log(a_s / b_s)`` (the same seed gives both methods the same data order and
  initialisation); the estimate is their mean and the interval ``mean +- t_{n-1} sd / sqrt(n)``,
  both exponentiated back: the estimate is the geometric mean of the per-seed ratios.  Values must
  be positive (a zero or negative time, loss or byte count has no log: the setting is not
  comparable).
* ``difference`` (a - b): **paired t** on the per-seed differences ``a_s - b_s``.
* seeds differ between the sides (e.g. a run failed on one side): **Welch's t** (unequal
  variances, Welch-Satterthwaite degrees of freedom) on the two samples (logs for a ratio: the
  estimate is then geomean(a) / geomean(b)).  Welch needs >= 2 seeds a side.
* ``value`` / ``absolute`` (mean a): **one-sample t** on a.
* One seed (a side, or one pair): no interval.  Zero spread (a deterministic statistic, e.g. the
  same simulated time at every seed): the interval is the point itself.

P(A beats B) (:attr:`Interval.p_a_beats_b`): the probability, under the t posterior of the mean
paired log-ratio / difference (the reference posterior of a normal mean with a flat prior:
``mu | data ~ mean + se * T_df``), that A's metric is better than B's, "better" being the metric's
direction (lower time, loss, bytes; higher accuracy; :data:`distrepro_wf.pipeline.catalogue.METRICS`).
Numerically it is 1 - the one-sided p-value of the t test of "A is not better".  With zero
spread it is 1, 0 or 0.5.  :attr:`Interval.wins` counts the seeds where A beat B (paired only),
for comparison.  :func:`p_between` gives the same posterior's mass of a claim's pass region.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd
# Student's t cdf and quantile straight from scipy.special: what scipy.stats.t.cdf / t.ppf
# compute (stdtr / stdtrit, bit for bit), without importing scipy.stats (about 1.5 s of
# start-up in every rule script that reads claims or draws intervals)
from scipy.special import stdtr as _t_cdf, stdtrit as _t_ppf

CI_LEVEL = 0.95

PAIRED, WELCH, ONE_SAMPLE = "paired t", "Welch t", "one-sample t"


class Interval(NamedTuple):
    """A comparison's statistic over seeds (in the claim's scale: a ratio, not its log)."""
    estimate: float        # geometric mean of the per-seed ratios / mean difference / mean value
    low: float             # 95 % interval; nan when there is none (one seed)
    high: float
    method: str            # "paired t (log ratio)", "Welch t", "one-sample t", ...; "" without an interval
    n: int                 # pairs (paired), the smaller side (Welch), seeds (one sample)
    df: float              # degrees of freedom; nan without an interval
    center: float          # mean on the working scale (log for a ratio)
    se: float              # its standard error (0: zero spread; nan: one seed)
    log: bool              # the working scale is the log of the statistic
    p_a_beats_b: float     # see the module docstring; nan for one-sided claims or without an interval
    wins: str              # "4/5": seeds where a beat b (paired); "" otherwise


def _to_work(x: float, log: bool) -> float:
    """A bound of the statistic's scale on the working scale (log of a ratio; -inf for <= 0)."""
    if not log:
        return x
    return math.log(x) if x > 0 else -math.inf


def p_between(iv: Interval, lo: float, hi: float) -> float:
    """Posterior probability (t posterior of the mean, see the module docstring) that the true
    statistic lies in [lo, hi] (bounds in the statistic's scale, +-inf allowed); nan without an
    interval.  Zero spread: 1 if the estimate lies in [lo, hi], else 0."""
    if not math.isfinite(iv.se):
        return math.nan
    wlo, whi = _to_work(lo, iv.log), _to_work(hi, iv.log)
    if whi < wlo:
        return 0.0
    if iv.se == 0:
        return float(wlo <= iv.center <= whi)
    cdf = lambda w: 0.0 if w == -math.inf else 1.0 if w == math.inf else float(  # noqa: E731
        _t_cdf(iv.df, (w - iv.center) / iv.se))
    return max(0.0, cdf(whi) - cdf(wlo))


def _se(x: np.ndarray) -> float:
    """Standard error of the mean of ``x``; nan for one value, 0 for a spread within rounding
    (1e-12 of the largest |value|: e.g. log(2 b) - log(b) at every seed)."""
    if len(x) < 2:
        return math.nan
    sd = float(np.std(x, ddof=1))
    return 0.0 if sd <= 1e-12 * float(np.max(np.abs(x))) else sd / math.sqrt(len(x))


def _t_interval(center: float, se: float, df: float, level: float) -> tuple[float, float]:
    if se == 0:
        return center, center
    q = float(_t_ppf(df, (1 + level) / 2))
    return center - q * se, center + q * se


def _p_less_than_zero(center: float, se: float, df: float) -> float:
    """P(mu < 0) under mu ~ center + se * T_df."""
    if se == 0:
        return 1.0 if center < 0 else 0.0 if center > 0 else 0.5
    return float(_t_cdf(df, -center / se))


def interval(compare: str, a: pd.Series, b: pd.Series | None = None, higher_is_better: bool | None = None,
             level: float = CI_LEVEL) -> Interval:
    """The statistic of ``compare`` over seeds with its t interval (see the module docstring).

    ``a`` and ``b`` are indexed by seed; they are paired when they hold the same seeds.  For a
    ratio every value must be positive (:func:`nonpositive` says which are not).
    ``higher_is_better`` (the metric's direction) orients P(A beats B); None: not computed."""
    log = compare == "ratio"
    f = (lambda s: np.log(s.to_numpy(float))) if log else (lambda s: s.to_numpy(float))
    nan = math.nan
    if b is None or compare in ("value", "absolute"):
        x = f(a)
        n, center, se = len(x), float(np.mean(x)), _se(x)
        df, method, wins, p = float(n - 1), ONE_SAMPLE, "", nan
    elif sorted(a.index) == sorted(b.index):
        seeds = sorted(a.index)
        x = f(a.loc[seeds]) - f(b.loc[seeds])
        n, center, se = len(x), float(np.mean(x)), _se(x)
        df, method = float(n - 1), PAIRED
        wins = ""
        if higher_is_better is not None:
            wins = f"{int((x > 0).sum() if higher_is_better else (x < 0).sum())}/{n}"
        p = nan
    else:
        xa, xb = f(a), f(b)
        n, center = min(len(xa), len(xb)), float(np.mean(xa) - np.mean(xb))
        method, wins, p = WELCH, "", nan
        if n >= 2:
            va, vb = _se(xa) ** 2, _se(xb) ** 2
            se = float(math.sqrt(va + vb))
            df = float((va + vb) ** 2 / (va ** 2 / (len(xa) - 1) + vb ** 2 / (len(xb) - 1))) if se > 0 else float(
                len(xa) + len(xb) - 2)
        else:
            se, df = nan, nan
    if not math.isfinite(se):
        return Interval(math.exp(center) if log else center, nan, nan, "", n, nan, center, nan, log, nan, wins)
    lo, hi = _t_interval(center, se, df, level)
    if b is not None and compare not in ("value", "absolute") and higher_is_better is not None:
        p_less = _p_less_than_zero(center, se, df)
        p = 1 - p_less if higher_is_better else p_less
    back = math.exp if log else (lambda v: v)
    return Interval(back(center), back(lo), back(hi), method + (" (log ratio)" if log and method != ONE_SAMPLE
                                                                  else ""),
                    n, df, center, se, log, p, wins)


def nonpositive(values: pd.Series) -> list[int]:
    """Seeds whose value is <= 0 (no log: a ratio over them is undefined)."""
    return [int(s) for s, v in values.items() if not v > 0]


def mean_interval(v: pd.Series, level: float = CI_LEVEL) -> tuple[float, float]:
    """One-sample t interval of the mean of ``v`` (nan with fewer than 2 values); for figures."""
    v = v.dropna()
    if len(v) < 2:
        return math.nan, math.nan
    iv = interval("value", v.reset_index(drop=True), None, level=level)
    return iv.low, iv.high
