"""Kaplan-Meier, its median's interval and the log-rank test against textbook examples.

Freireich et al.'s 6-MP leukaemia trial (remission times in weeks, + censored), as tabulated
in Kleinbaum & Klein, *Survival Analysis: A Self-Learning Text* (ch. 2, the KM table of the
6-MP group; the log-rank test of 6-MP against placebo: O1 = 9, E1 = 19.25, Var = 6.2570,
chi^2 = 16.79).  The expected values below are worked by hand from the book's table of
(n_j, d_j), with exact fractions, not by the module's own counting.
"""

from __future__ import annotations

import math
from fractions import Fraction as F

import pytest

from distrepro_wf.claims.survival import kaplan_meier, km_median, logrank

# 6-MP: 9 relapses (events) and 12 censored times
MP_EVENTS = [6, 6, 6, 7, 10, 13, 16, 22, 23]
MP_CENSORED = [6, 9, 10, 11, 17, 19, 20, 25, 32, 32, 34, 35]
MP_T, MP_E = MP_EVENTS + MP_CENSORED, [True] * 9 + [False] * 12
# placebo: 21 relapses, none censored
PL_T = [1, 1, 2, 2, 3, 4, 4, 5, 5, 8, 8, 8, 8, 11, 11, 12, 12, 15, 17, 22, 23]
# the book's KM table of the 6-MP group: t_j, n_j, d_j
BOOK = [(6, 21, 3), (7, 17, 1), (10, 15, 1), (13, 12, 1), (16, 11, 1), (22, 7, 1), (23, 6, 1)]
Z975 = 1.959963984540054


def _hand_km():
    s, g, out = F(1), F(0), []
    for t, n, d in BOOK:
        s *= F(n - d, n)
        g += F(d, n * (n - d))
        out.append((t, s, g))
    return out


def test_kaplan_meier_matches_the_books_table():
    km = kaplan_meier(MP_T, MP_E)
    hand = _hand_km()
    assert list(km.times) == [t for t, _, _ in BOOK]
    assert list(km.at_risk) == [n for _, n, _ in BOOK] and list(km.events) == [d for _, _, d in BOOK]
    for (t, s, g), s_code, g_code in zip(hand, km.survival, km.greenwood):
        assert s_code == pytest.approx(float(s), abs=1e-9) and g_code == pytest.approx(float(g), abs=1e-9)
    # the book's printed values (3 decimals)
    assert [round(float(v), 3) for v in km.survival] == [0.857, 0.807, 0.753, 0.690, 0.627, 0.538, 0.448]


def test_median_and_its_log_log_interval():
    """Median 23 (S(22) = 0.538 > 1/2, S(23) = 0.448); the log-log band's lower edge first falls to
    1/2 at t = 13 (0.432; at t = 10 it is 0.503), its upper edge never does (0.680 at t = 23):
    [13, not reached], as R's survfit(conf.type = "log-log") gives for these data."""
    m = km_median(MP_T, MP_E)
    assert (m.median, m.low, m.high, m.reached, m.runs) == (23.0, 13.0, math.inf, 9, 21)
    hand = {t: (s, g) for t, s, g in _hand_km()}
    for t, below in ((10, False), (13, True)):
        s, g = float(hand[t][0]), float(hand[t][1])
        lower_edge = s ** math.exp(Z975 * math.sqrt(g) / abs(math.log(s)))
        assert (lower_edge <= 0.5) is below
    s, g = (float(v) for v in hand[23])
    assert s ** math.exp(-Z975 * math.sqrt(g) / abs(math.log(s))) == pytest.approx(0.680143, abs=1e-6)
    # placebo, nothing censored: S(5) = 12/21 > 1/2, S(8) = 8/21: median 8, interval [4, 11]
    p = km_median(PL_T, [True] * 21)
    assert (p.median, p.low, p.high, p.reached) == (8.0, 4.0, 11.0, 21)


def test_median_undefined_when_fewer_than_half_arrive():
    """2 of 5 runs reach the target, 3 are censored later: S stays at 3/5 > 1/2, no median, no upper limit."""
    m = km_median([1.0, 2.0, 5.0, 5.0, 5.0], [True, True, False, False, False])
    assert math.isnan(m.median) and m.high == math.inf and (m.reached, m.runs) == (2, 5)
    none = km_median([5.0, 5.0], [False, False])
    assert math.isnan(none.median) and math.isnan(none.low) and none.reached == 0
    assert math.isnan(km_median([], []).median)


def test_a_run_censored_at_an_event_time_is_still_at_risk_there():
    """Times 2 (event), 2 (censored), 3 (event): n = 3 at t = 2 (S = 2/3), then n = 1 at 3 (S = 0)."""
    km = kaplan_meier([2.0, 2.0, 3.0], [True, False, True])
    assert list(km.at_risk) == [3.0, 1.0] and km.survival[0] == pytest.approx(2 / 3, abs=1e-12)
    assert km.survival[1] == 0.0


def test_logrank_6mp_against_placebo():
    """Hand: at each distinct relapse time of the pooled 42 patients, E1 += d n1 / n and
    V += d (n1/n)(1 - n1/n)(n - d)/(n - 1); the book's O1 = 9, E1 = 19.25, V = 6.2570, chi^2 = 16.79."""
    t = MP_T + PL_T
    e = MP_E + [True] * 21
    g1 = [True] * 21 + [False] * 21
    e1 = v = F(0)
    for u in sorted({ti for ti, ei in zip(t, e) if ei}):
        n = sum(ti >= u for ti in t)
        n1 = sum(ti >= u and gi for ti, gi in zip(t, g1))
        d = sum(ti == u and ei for ti, ei in zip(t, e))
        e1 += F(d * n1, n)
        v += F(d * n1 * (n - n1) * (n - d), n * n * (n - 1))
    chi2 = (9 - e1) ** 2 / v
    r = logrank(MP_T, MP_E, PL_T, [True] * 21)
    assert r.observed_a == 9 and r.expected_a == pytest.approx(float(e1), abs=1e-9)
    assert r.variance == pytest.approx(float(v), abs=1e-9) and r.chi2 == pytest.approx(float(chi2), abs=1e-9)
    assert (round(r.expected_a, 2), round(r.variance, 4), round(r.chi2, 2)) == (19.25, 6.2570, 16.79)
    assert r.p == pytest.approx(math.erfc(math.sqrt(float(chi2) / 2)), rel=1e-9) and not r.a_sooner
    # swapping the groups: same chi^2, placebo "sooner" (relapses earlier)
    s = logrank(PL_T, [True] * 21, MP_T, MP_E)
    assert s.chi2 == pytest.approx(r.chi2, abs=1e-9) and s.a_sooner


def test_logrank_without_information_has_no_p():
    r = logrank([3.0, 4.0], [False, False], [3.0, 4.0], [False, False])  # nobody arrived
    assert math.isnan(r.p) and r.variance == 0


def test_bad_times_are_refused():
    with pytest.raises(ValueError, match="finite and >= 0"):
        kaplan_meier([1.0, float("nan")], [True, False])
    with pytest.raises(ValueError, match="one length"):
        kaplan_meier([1.0], [True, False])
