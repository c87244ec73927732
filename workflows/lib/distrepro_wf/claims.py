"""Claims evaluated on our results: statuses per claim and setting.

The published numbers and claims are loaded and validated by :mod:`distrepro_wf.published`,
their statistics come from :mod:`distrepro_wf.stats` (t intervals over seeds, paired by seed,
on the log scale for ratios; see there why not the bootstrap), the metrics they name from
:mod:`distrepro_wf.catalogue`.

Statuses (:func:`evaluate`), per claim and setting (nodes x straggler), from completed runs
only (``runs.csv``; a failed run, a diverged one included, is only in ``failed.csv``), judged by
the 95 % interval of the statistic (:func:`distrepro_wf.stats.interval`) against the claim's
pass region (``expect`` with its tolerance, :func:`pass_region`):

* ``reproduced``: the interval lies entirely inside the pass region;
* ``not reproduced``: it lies entirely outside;
* ``inconclusive``: it straddles a boundary of the region, or there is no interval (one seed a
  side, or a side with one seed when the seeds differ);
* ``not comparable``: the experiment, method or setting was not run, every run failed
  ("every run failed: ... (seed 1: diverged: ...)"), no run completed, the metric is missing
  (e.g. target accuracy never reached), a ratio's values are not all positive (no log, the
  statistic is undefined), or, for an absolute number, the run's workload / node count differs
  from the published setting.  Missing results are never "reproduced".

When some runs of a setting failed, it is judged on the completed ones and the reason says how
many failed and why.  ``provisional`` ("yes") marks a comparable setting judged on fewer than
:data:`MIN_SEEDS` = 3 seeds (pairs; the smaller side when unpaired): its status stands, but it is
shown as provisional, never as reproduced (:func:`shown_status`).  Deterministic simulated runs
are no exception: another seed is another data order and initialisation, so the same statistics
apply (when the statistic does not vary at all the interval is the point).

A claim's overall status (:func:`summarize`): "not reproduced" if any setting is, "reproduced" if
every comparable setting is (and there is one), "not comparable" if none is comparable, else
"inconclusive"; it is provisional when a provisional setting takes part in that verdict (any
comparable setting is provisional, unless a non-provisional setting is not reproduced).

Each row also carries the estimate (``measured``: the geometric mean of the per-seed ratios, the
mean difference, the mean value), the interval and its method, ``p_a_beats_b`` (the t posterior
probability that a's metric is better than b's), ``wins`` (seeds where a beat b) and ``p_pass``
(the same posterior's probability that the statistic lies in the pass region).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .catalogue import METRICS, Metric
from .config import expand
from .published import Published
from .stats import interval, nonpositive, p_between

REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = "reproduced", "not reproduced", "not comparable"
INCONCLUSIVE, PROVISIONAL = "inconclusive", "provisional"
STATUSES = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_COMPARABLE)
#: fewer seeds (pairs) than this: the setting is provisional, never shown as reproduced
MIN_SEEDS = 3


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


def _passes(m: float, expect: dict[str, Any]) -> bool:
    r = pass_region(expect)
    return not _below(m, r) and not _above(m, r)


def verdict(low: float, high: float, expect: dict[str, Any]) -> str:
    """Status of an interval [low, high] against the pass region: reproduced (inside), not
    reproduced (entirely outside), inconclusive (straddles a boundary; or no interval: nan)."""
    if math.isnan(low) or math.isnan(high):
        return INCONCLUSIVE
    r = pass_region(expect)
    if _passes(low, expect) and _passes(high, expect):
        return REPRODUCED
    if _above(low, r) or _below(high, r):
        return NOT_REPRODUCED
    return INCONCLUSIVE


def shown_status(status: str, provisional: Any) -> str:
    """What the report shows: "provisional" for a provisional comparable setting or claim (never
    green, whatever its interval says), else the status."""
    return PROVISIONAL if provisional == "yes" and status != NOT_COMPARABLE else status


def expect_text(expect: dict[str, Any], compare: str) -> str:
    op, v, tol = expect["op"], expect["value"], expect["tolerance"]
    what = {"ratio": "a/b", "difference": "a-b", "value": "a", "absolute": "a"}[compare]
    t = f" (tolerance {tol:g})" if tol else ""
    if op == "between":
        return f"{what} in [{v[0]:g}, {v[1]:g}]{t}"
    if op == "within":
        return f"|{what} - {v:g}| <= {tol:g}"
    return f"{what} {op} {v:g}{t}"


def _grid(config: dict[str, Any], experiment: str) -> pd.DataFrame:
    runs = expand(config, [experiment])
    return pd.DataFrame([r._asdict() for r in runs], columns=["experiment", "method", "nodes", "straggler", "seed"])


def _settings(c: dict[str, Any], grid: pd.DataFrame) -> list[tuple[int, str]]:
    a = c["a"]
    g = grid[grid["method"] == a["method"]]
    if "nodes" in a:
        g = g[g["nodes"] == a["nodes"]]
    if "straggler" in a:
        g = g[g["straggler"] == a["straggler"]]
    w = c.get("where", {})
    if isinstance(w.get("nodes"), list):
        g = g[g["nodes"].isin(w["nodes"])]
    elif isinstance(w.get("nodes"), dict):
        g = g[g["nodes"] >= w["nodes"]["min"]]
    if "stragglers" in w:
        g = g[g["straggler"].isin(w["stragglers"])]
    return sorted({(int(n), str(s)) for n, s in zip(g["nodes"], g["straggler"])}, key=lambda t: (t[0], t[1] != "none", t[1]))


def _where_text(c: dict[str, Any]) -> str:
    w = c.get("where", {})
    parts = []
    if isinstance(w.get("nodes"), list):
        parts.append(f"nodes {w['nodes']}")
    elif isinstance(w.get("nodes"), dict):
        parts.append(f"nodes >= {w['nodes']['min']}")
    if "stragglers" in w:
        parts.append(f"stragglers {w['stragglers']}")
    return ", ".join(parts) or "any setting"


def _select(table: pd.DataFrame | None, sel: dict[str, Any], nodes: int, straggler: str) -> pd.DataFrame:
    """Rows of a runs/failed/grid table for one side of a claim at one setting."""
    if table is None or table.empty:
        return pd.DataFrame(columns=["method", "nodes", "straggler", "seed"])
    return table[(table["method"] == sel["method"]) & (table["nodes"] == sel.get("nodes", nodes))
                 & (table["straggler"] == sel.get("straggler", straggler))]


def _failed_text(failed: pd.DataFrame) -> str:
    """'2 failed (seed 1: diverged: rank 0, step 3 ...; +1 more)': the count and the first reason."""
    f = failed.sort_values("seed")
    first = f.iloc[0]
    reason = first["reason"] if isinstance(first.get("reason"), str) and first["reason"] else "no reason recorded"
    more = f"; +{len(f) - 1} more" if len(f) > 1 else ""
    return f"{len(f)} failed (seed {int(first['seed'])}: {reason}{more})"


def _side(runs: pd.DataFrame, failed: pd.DataFrame | None, grid: pd.DataFrame, sel: dict[str, Any], nodes: int,
          straggler: str, metric: Metric) -> tuple[pd.Series, str, str]:
    """One side of a claim at one setting: ``(values by seed, problem, note)``.

    Values come from completed runs only (runs.csv; a failed run, diverged ones included, is
    only in failed.csv).  ``problem`` (the side is not comparable) when no completed run has the
    metric; ``note`` says how many runs failed when the side is judged on the others."""
    m, n, st = sel["method"], sel.get("nodes", nodes), sel.get("straggler", straggler)
    ok = _select(runs, sel, nodes, straggler)
    values = (pd.Series(dtype=float) if metric.column not in ok else
              (ok.set_index("seed")[metric.column].astype(float) * metric.scale).dropna())
    bad = _select(failed, sel, nodes, straggler)
    failed_text = _failed_text(bad) if len(bad) else ""
    if len(values):
        return values, "", f"judged on {len(values)} completed run(s) of {m}; {failed_text}" if failed_text else ""
    if len(ok):
        problem = f"{metric.column} missing for {m} (e.g. the target accuracy was never reached)"
        return values, problem + (f"; {failed_text}" if failed_text else ""), ""
    if failed_text:
        configured = set(_select(grid, sel, nodes, straggler)["seed"])
        if configured <= set(bad["seed"]):
            return values, f"every run failed: {m} at n={n}, {st}: {failed_text}", ""
        return values, f"no completed run of {m} at n={n}, {st}: {failed_text}, the others not collected", ""
    return values, f"no completed run of {m} at n={n}, {st}", ""


COLUMNS = ["claim", "paper", "experiment", "statement", "metric", "unit", "compare", "nodes", "straggler", "status",
           "provisional", "reason", "measured", "ci_low", "ci_high", "interval", "df", "p_a_beats_b", "wins", "p_pass",
           "seeds_a", "seeds_b", "published", "gap", "expected", "published_note", "sources"]


def _row(c: dict[str, Any], status: str, reason: str, nodes: Any = None, straggler: Any = None, **kw: Any) -> dict:
    m = METRICS[c["metric"]]
    unit = "x" if c["compare"] == "ratio" else (("pt" if m.unit == "%" else m.unit) if c["compare"] == "difference"
                                              else m.unit)
    pub = c.get("published", {})
    row = {"claim": c["id"], "paper": c["paper"], "experiment": c["experiment"], "statement": c["statement"],
           "metric": c["metric"], "unit": unit, "compare": c["compare"], "nodes": nodes, "straggler": straggler,
           "status": status, "provisional": "", "reason": reason, "measured": math.nan, "ci_low": math.nan,
           "ci_high": math.nan, "interval": "", "df": math.nan, "p_a_beats_b": math.nan, "wins": "",
           "p_pass": math.nan, "seeds_a": 0, "seeds_b": 0, "published": pub.get("value"), "gap": math.nan,
           "expected": expect_text(c["expect"], c["compare"]), "published_note": pub.get("note", ""),
           "sources": " ".join(c["sources"])}
    row.update(kw)
    return row


def evaluate_claim(c: dict[str, Any], config: dict[str, Any], runs: dict[str, pd.DataFrame],
                   failed: dict[str, pd.DataFrame], not_configured: dict[str, str]) -> list[dict[str, Any]]:
    if c["id"] in not_configured:
        return [_row(c, NOT_COMPARABLE, not_configured[c["id"]])]
    e = c["experiment"]
    exp = config["experiments"][e]
    if c["compare"] == "absolute":
        req = c["requires"]
        if exp["workload"] != req["workload"]:
            return [_row(c, NOT_COMPARABLE, f"reduced scale: experiment {e!r} runs workload {exp['workload']!r}, the "
                                            f"published number is for {req['workload']!r}"
                                            + (f" at {req['nodes']} nodes" if "nodes" in req else ""))]
    grid = _grid(config, e)
    settings = _settings(c, grid)
    if c["compare"] == "absolute" and "nodes" in c["requires"]:
        settings = [s for s in settings if s[0] in c["requires"]["nodes"]]
    if not settings:
        ran = grid[grid["method"] == c["a"]["method"]]
        return [_row(c, NOT_COMPARABLE, f"setting not run: the claim needs {_where_text(c)}"
                                        + (f", nodes {c['requires']['nodes']}" if c.get("requires", {}).get("nodes")
                                           else "")
                                        + f"; the config runs {c['a']['method']} at nodes "
                                          f"{sorted(set(ran['nodes']))}, stragglers {sorted(set(ran['straggler']))}")]
    metric = METRICS[c["metric"]]
    table = runs.get(e, pd.DataFrame())
    out = []
    for nodes, straggler in settings:
        sides = {"a": c["a"]} | ({"b": c["b"]} if "b" in c else {})
        vals, problems, notes = {}, [], []
        for side, sel in sides.items():
            vals[side], problem, note = _side(table, failed.get(e), grid, sel, nodes, straggler, metric)
            problems += [problem] if problem else []
            notes += [note] if note else []
        seeds = {"seeds_a": len(vals["a"]), "seeds_b": len(vals.get("b", ()))}
        if problems:
            out.append(_row(c, NOT_COMPARABLE, "; ".join(problems + notes), nodes, straggler, **seeds))
            continue
        a, b = vals["a"], vals.get("b")
        if c["compare"] == "ratio":
            bad = [f"{k} = {sides[k]['method']} is <= 0 at seed(s) {', '.join(map(str, nonpositive(v)))}"
                   for k, v in vals.items() if nonpositive(v)]
            if bad:
                out.append(_row(c, NOT_COMPARABLE, "; ".join([f"statistic undefined: a ratio needs positive values "
                                                              f"({'; '.join(bad)})"] + notes),
                                nodes, straggler, **seeds))
                continue
        iv = interval(c["compare"], a, b, metric.higher_is_better)
        if not iv.method:
            paired = b is None or sorted(a.index) == sorted(b.index)
            notes.insert(0, ("no interval: one seed" + (" a side" if b is not None else "")) if paired else
                         f"no interval: the sides ran different seeds (a {len(a)}, b {len(b)}) and Welch's t needs "
                         f">= 2 a side")
        provisional = iv.n < MIN_SEEDS
        if provisional:
            which = ("" if b is None else " a side" if sorted(a.index) == sorted(b.index) else " on the smaller side")
            notes.insert(0, f"provisional: {iv.n} seed{'s' if iv.n != 1 else ''}{which}, fewer than {MIN_SEEDS}")
        if iv.se == 0 and iv.n >= 2:
            notes.append("zero spread: every seed gives the same value, the interval is the point")
        r = pass_region(c["expect"])
        p_pass = (float(_passes(iv.estimate, c["expect"])) if iv.se == 0 else p_between(iv, r[0], r[2]))
        pub = (c.get("published") or {}).get("value")
        out.append(_row(c, verdict(iv.low, iv.high, c["expect"]), "; ".join(notes), nodes, straggler,
                        provisional="yes" if provisional else "", measured=iv.estimate, ci_low=iv.low,
                        ci_high=iv.high, interval=iv.method, df=iv.df, p_a_beats_b=iv.p_a_beats_b, wins=iv.wins,
                        p_pass=p_pass, gap=iv.estimate - pub if pub is not None else math.nan, **seeds))
    return out


def evaluate(published: Published, config: dict[str, Any], runs: dict[str, pd.DataFrame],
             failed: dict[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """One row per (claim, setting); see the module docstring for the statuses."""
    rows = []
    for c in published.claims:
        rows.extend(evaluate_claim(c, config, runs, failed or {}, published.not_configured))
    return pd.DataFrame(rows, columns=COLUMNS)


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """One row per claim: its overall status (see the module docstring), whether it is provisional,
    what the report shows (``shown``) and how many settings had each status."""
    rows = []
    for cid, g in results.groupby("claim", sort=False):
        st = set(g["status"])
        comparable = g[g["status"] != NOT_COMPARABLE]
        prov = (comparable["provisional"] == "yes") if "provisional" in g else pd.Series(False, comparable.index)
        overall = (NOT_REPRODUCED if NOT_REPRODUCED in st else NOT_COMPARABLE if comparable.empty
                   else REPRODUCED if (comparable["status"] == REPRODUCED).all() else INCONCLUSIVE)
        firm_failure = ((comparable["status"] == NOT_REPRODUCED) & ~prov).any()
        provisional = "yes" if prov.any() and not firm_failure else ""
        rows.append({"claim": cid, "paper": g["paper"].iloc[0], "experiment": g["experiment"].iloc[0],
                     "statement": g["statement"].iloc[0], "status": overall, "provisional": provisional,
                     "shown": shown_status(overall, provisional),
                     "settings": len(g), "reproduced": int((g["status"] == REPRODUCED).sum()),
                     "not_reproduced": int((g["status"] == NOT_REPRODUCED).sum()),
                     "inconclusive": int((g["status"] == INCONCLUSIVE).sum()),
                     "not_comparable": int((g["status"] == NOT_COMPARABLE).sum()),
                     "provisional_settings": int(prov.sum()),
                     "reason": "; ".join(dict.fromkeys(r for r in g["reason"] if isinstance(r, str) and r))})
    return pd.DataFrame(rows, columns=["claim", "paper", "experiment", "statement", "status", "provisional", "shown",
                                       "settings", "reproduced", "not_reproduced", "inconclusive", "not_comparable",
                                       "provisional_settings", "reason"])


def read_tables(tables_dir: Path, experiments: Iterable[str]) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    runs, failed = {}, {}
    for e in experiments:
        d = Path(tables_dir) / e
        runs[e] = pd.read_csv(d / "runs.csv") if (d / "runs.csv").exists() else pd.DataFrame()
        failed[e] = pd.read_csv(d / "failed.csv") if (d / "failed.csv").exists() else pd.DataFrame()
    return runs, failed
