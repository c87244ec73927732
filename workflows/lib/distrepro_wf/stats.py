"""Statistics over seeds for the claims: the statistic of a comparison and its interval.

Confidence interval: percentile bootstrap over seeds (paired by seed when both sides ran
the same seeds), :data:`N_BOOT` resamples with a fixed generator, so the report is
deterministic; none with one seed a side, or when a resample's ratio divides by zero.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

N_BOOT = 2000
CI_LEVEL = 0.95


def _stat(compare: str, a: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Statistic on the last axis' means (works on bootstrap matrices); a ratio whose
    denominator mean is 0 is inf or nan (0/0), never a warning."""
    ma = a.mean(axis=-1)
    if compare == "ratio":
        with np.errstate(divide="ignore", invalid="ignore"):
            return ma / b.mean(axis=-1)
    if compare == "difference":
        return ma - b.mean(axis=-1)
    return ma


def bootstrap_ci(compare: str, a: pd.Series, b: pd.Series | None, n_boot: int = N_BOOT,
                 level: float = CI_LEVEL, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap over seeds; ``a``/``b`` are indexed by seed.  Paired resampling when
    both sides ran the same seeds.  NaN where fewer than two seeds, and where the statistic is
    undefined in some resample (a ratio whose resampled denominator mean is 0): the interval
    is then unbounded, and no percentile of the defined resamples may stand for it."""
    rng = np.random.default_rng(seed)
    if len(a) < 2 and (b is None or len(b) < 2):
        return math.nan, math.nan
    if b is not None and sorted(a.index) == sorted(b.index):
        seeds = sorted(a.index)
        av, bv = a.loc[seeds].to_numpy(float), b.loc[seeds].to_numpy(float)
        idx = rng.integers(0, len(seeds), size=(n_boot, len(seeds)))
        stats = _stat(compare, av[idx], bv[idx])
    else:
        av = a.to_numpy(float)
        ia = rng.integers(0, len(av), size=(n_boot, len(av)))
        if b is None:
            stats = _stat(compare, av[ia], None)
        else:
            bv = b.to_numpy(float)
            ib = rng.integers(0, len(bv), size=(n_boot, len(bv)))
            stats = _stat(compare, av[ia], bv[ib])
    if not np.isfinite(stats).all():
        return math.nan, math.nan
    lo, hi = np.percentile(stats, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(lo), float(hi)
