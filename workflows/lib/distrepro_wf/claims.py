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
* ``not comparable``: the setting cannot show the claim's mechanism (:mod:`distrepro_wf.mechanisms`:
  e.g. "communication is 3 % of AR-SGD's epoch time", "compute is 19 % of the step, a straggler
  cannot matter", "1-peer SGP averages exactly at n=2"; the measured value is in the reason, not
  judged), the experiment, method or setting was not run, every run failed
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

Controls and the second measure.  A claim with a ``control`` (the fast network, no straggler)
shows the same comparison there (``control_*``); ``compare: ratio_vs_control`` judges the
mechanism differentially, (a/b here) / (a/b at the control), per seed (a paired t interval on
the log scale when both settings ran the same seeds).  A per-epoch speed claim is judged again on
time to the target (MLPerf's measure, ``tta_*``) and the reason says when the two disagree.
The published value is one source's number (``published.other`` says what another source says,
shown, never averaged); the ``gap`` is shown only at the published scale (``published.nodes``).
A ``harness: true`` claim checks the harness itself and is shown on the harness page.

Each row also carries the estimate (``measured``: the geometric mean of the per-seed ratios, the
mean difference, the mean value), the interval and its method, ``p_a_beats_b`` (the t posterior
probability that a's metric is better than b's), ``wins`` (seeds where a beat b), ``p_pass``
(the same posterior's probability that the statistic lies in the pass region), and the seeds the
setting is scored on (``scored_on_seeds``) beside those its hyperparameters were tuned on
(``tuned_on_seeds``, from the claim; validated disjoint by :mod:`distrepro_wf.published`).
A ``platform_sourced`` check that fails makes the setting "not comparable" with the reason
"platform unknown: ..." (:mod:`distrepro_wf.mechanisms`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .catalogue import METRICS, Metric
from .config import expand
from .published import Published
from . import mechanisms
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
    what = {"ratio": "a/b", "ratio_vs_control": "(a/b) / (a/b at the control)", "difference": "a-b", "value": "a",
            "absolute": "a"}[compare]
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


COLUMNS = ["claim", "paper", "page", "experiment", "statement", "mechanism", "metric", "unit", "compare", "scale",
           "nodes", "straggler", "setting", "status", "provisional", "reason", "measured", "ci_low", "ci_high",
           "interval", "df", "p_a_beats_b", "wins", "p_pass", "seeds_a", "seeds_b", "pass_low", "pass_high",
           "control", "control_measured", "control_low", "control_high", "tta_measured", "tta_low", "tta_high",
           "tta_status", "published", "published_nodes", "gap", "expected", "published_note", "published_other",
           "sources", "tuned_on_seeds", "scored_on_seeds"]
#: speed claims stated per epoch are also judged on time to the target (MLPerf's measure), shown beside
SECONDARY = {"time_per_epoch_s": "time_to_target_s"}


def _row(c: dict[str, Any], status: str, reason: str, nodes: Any = None, straggler: Any = None, **kw: Any) -> dict:
    m = METRICS[c["metric"]]
    ratio = c["compare"] in ("ratio", "ratio_vs_control")
    unit = "x" if ratio else (("pt" if m.unit == "%" else m.unit) if c["compare"] == "difference" else m.unit)
    pub = c.get("published", {})
    lo, _, hi, _ = pass_region(c["expect"])
    row = {"claim": c["id"], "paper": c["paper"], "page": "harness" if c.get("harness") else "paper",
           "experiment": c["experiment"], "statement": c["statement"],
           "mechanism": (c.get("mechanism") or {}).get("text", ""), "metric": c["metric"], "unit": unit,
           "compare": c["compare"], "scale": "log" if ratio else "linear", "nodes": nodes, "straggler": straggler,
           "setting": "", "status": status, "provisional": "", "reason": reason, "measured": math.nan,
           "ci_low": math.nan, "ci_high": math.nan, "interval": "", "df": math.nan, "p_a_beats_b": math.nan,
           "wins": "", "p_pass": math.nan, "seeds_a": 0, "seeds_b": 0, "pass_low": lo, "pass_high": hi,
           "control": _control_text(c), "control_measured": math.nan, "control_low": math.nan,
           "control_high": math.nan, "tta_measured": math.nan, "tta_low": math.nan, "tta_high": math.nan,
           "tta_status": "", "published": pub.get("value"),
           "published_nodes": " ".join(map(str, pub.get("nodes", []))), "gap": math.nan,
           "expected": expect_text(c["expect"], c["compare"]), "published_note": pub.get("note", ""),
           "published_other": pub.get("other", ""), "sources": " ".join(c["sources"]),
           "tuned_on_seeds": " ".join(map(str, c.get("tuned_on_seeds") or ())), "scored_on_seeds": ""}
    row.update(kw)
    return row


def _control_text(c: dict[str, Any], config: dict[str, Any] | None = None, nodes: Any = None,
                  straggler: Any = None) -> str:
    """The control setting in words: 'sgp_sim_fastnet: 32 nodes, no straggler; simulated
    infiniband_100g, ...' (with the config and a setting), else its keys."""
    ctl = c.get("control")
    if not ctl:
        return ""
    if config is not None and nodes is not None:
        e, n, st = _control_setting(c, config, nodes, straggler)
        if e in config["experiments"]:
            return setting_text(config, e, n, st)
        return f"experiment {e} (not in this config)"
    return ", ".join(f"{k} {v}" for k, v in ctl.items())


def setting_text(config: dict[str, Any], experiment: str, nodes: int, straggler: str) -> str:
    """'32 nodes, no straggler; simulated ethernet_10g, resnet50_v100x8 profile' (the report's 'our setting')."""
    exp = config["experiments"][experiment]
    st = "no straggler" if straggler == "none" else f"straggler {straggler}"
    if exp.get("backend") == "simgrid":
        name = lambda v: v if isinstance(v, str) else (v or {}).get("name")  # noqa: E731
        where = (f"simulated {name(exp.get('platform')) or 'ethernet_10g'}, "
                 f"{name(exp.get('profile')) or 'measured'} profile")
    else:
        where = "real ranks on this machine"
    return f"{nodes} nodes, {st}; {where} ({experiment}, {exp['workload']})"


def _sides(c: dict[str, Any], table: pd.DataFrame, failed: pd.DataFrame | None, grid: pd.DataFrame, nodes: int,
           straggler: str, metric: Metric) -> tuple[dict[str, pd.Series], list[str], list[str]]:
    """Values by seed of each side at one setting, the problems (not comparable) and notes."""
    sides = {"a": c["a"]} | ({"b": c["b"]} if "b" in c else {})
    vals, problems, notes = {}, [], []
    for side, sel in sides.items():
        vals[side], problem, note = _side(table, failed, grid, sel, nodes, straggler, metric)
        problems += [problem] if problem else []
        notes += [note] if note else []
    if c["compare"] in ("ratio", "ratio_vs_control") and not problems:
        bad = [f"{k} = {sides[k]['method']} is <= 0 at seed(s) {', '.join(map(str, nonpositive(v)))}"
               for k, v in vals.items() if nonpositive(v)]
        if bad:
            problems.append(f"statistic undefined: a ratio needs positive values ({'; '.join(bad)})")
    return vals, problems, notes


def _control_setting(c: dict[str, Any], config: dict[str, Any], nodes: int, straggler: str) -> tuple[str, int, str]:
    ctl = c.get("control") or {}
    return ctl.get("experiment", c["experiment"]), int(ctl.get("nodes", nodes)), ctl.get("straggler", straggler)


def _stat(c: dict[str, Any], config: dict[str, Any], runs: dict[str, pd.DataFrame],
          failed: dict[str, pd.DataFrame], nodes: int, straggler: str, metric: Metric,
          control: bool = False) -> tuple[Any, list[str], list[str], dict[str, int]]:
    """(interval or None, problems, notes, seeds) of the claim's statistic at a setting (or its control);
    ``seeds["paired"]`` says whether both sides ran the same seeds."""
    e, n, st = _control_setting(c, config, nodes, straggler) if control else (c["experiment"], nodes, straggler)
    if e not in config["experiments"]:
        return None, [f"control experiment {e!r} not in config"], [], {"seeds_a": 0, "seeds_b": 0, "paired": True}
    vals, problems, notes = _sides(c, runs.get(e, pd.DataFrame()), failed.get(e), _grid(config, e), n, st, metric)
    seeds = {"seeds_a": len(vals["a"]), "seeds_b": len(vals.get("b", ())),
             "paired": "b" not in vals or sorted(vals["a"].index) == sorted(vals["b"].index)}
    if problems:
        return None, problems, notes, seeds
    cmp = "ratio" if c["compare"] == "ratio_vs_control" else c["compare"]
    return interval(cmp, vals["a"], vals.get("b"), metric.higher_is_better), problems, notes, seeds


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
        scored = sorted({int(x) for side in ("a", "b") if side in c
                         for x in _select(grid, c[side], nodes, straggler)["seed"]})
        where = {"setting": setting_text(config, e, nodes, straggler),
                 "control": _control_text(c, config, nodes, straggler),
                 "scored_on_seeds": " ".join(map(str, scored))}
        iv, problems, notes, seeds = _stat(c, config, runs, failed, nodes, straggler, metric)
        paired = seeds.pop("paired")
        ctl = None
        if c.get("control"):
            ctl, cproblems, _, _ = _stat(c, config, runs, failed, nodes, straggler, metric, control=True)
            if ctl is not None:
                where.update(control_measured=ctl.estimate, control_low=ctl.low, control_high=ctl.high)
            elif c["compare"] == "ratio_vs_control":
                problems += [f"control: {p}" for p in cproblems]
        if problems:
            out.append(_row(c, NOT_COMPARABLE, "; ".join(problems + notes), nodes, straggler, **seeds, **where))
            continue
        if c["compare"] == "ratio_vs_control":
            iv = _versus_control(c, config, runs, nodes, straggler, metric)
        mech = mechanisms.check(c, config, table, nodes, straggler)
        if mech:
            ci = f" [{iv.low:.3g}, {iv.high:.3g}]" if iv.method else ""
            why = "" if mech.startswith(mechanisms.PLATFORM_UNKNOWN) else "the setting cannot show the mechanism: "
            out.append(_row(c, NOT_COMPARABLE, f"{why}{mech} (measured {iv.estimate:.3g}{ci}, not judged)", nodes, straggler,
                            **seeds, **where))
            continue
        a_n, b_n = seeds["seeds_a"], seeds["seeds_b"]
        if not iv.method:
            notes.insert(0, ("no interval: one seed" + (" a side" if b_n else "")) if paired else
                         f"no interval: the sides ran different seeds (a {a_n}, b {b_n}) and Welch's t needs "
                         f">= 2 a side")
        provisional = iv.n < MIN_SEEDS
        if provisional:
            which = "" if not b_n else " a side" if paired else " on the smaller side"
            notes.insert(0, f"provisional: {iv.n} seed{'s' if iv.n != 1 else ''}{which}, fewer than {MIN_SEEDS}")
        if iv.se == 0 and iv.n >= 2:
            notes.append("zero spread: every seed gives the same value, the interval is the point")
        r = pass_region(c["expect"])
        p_pass = (float(_passes(iv.estimate, c["expect"])) if iv.se == 0 else p_between(iv, r[0], r[2]))
        status = verdict(iv.low, iv.high, c["expect"])
        where.update(_secondary(c, config, runs, failed, nodes, straggler, status, notes))
        pub = c.get("published") or {}
        at_scale = pub.get("value") is not None and (not pub.get("nodes") or nodes in pub["nodes"])
        if pub.get("value") is not None and not at_scale:
            notes.append(f"no gap: the published value is for {', '.join(map(str, pub['nodes']))} nodes")
        out.append(_row(c, status, "; ".join(notes), nodes, straggler,
                        provisional="yes" if provisional else "", measured=iv.estimate, ci_low=iv.low,
                        ci_high=iv.high, interval=iv.method, df=iv.df, p_a_beats_b=iv.p_a_beats_b, wins=iv.wins,
                        p_pass=p_pass, gap=iv.estimate - pub["value"] if at_scale else math.nan, **seeds, **where))
    return out


def _versus_control(c: dict[str, Any], config: dict[str, Any], runs: dict[str, pd.DataFrame], nodes: int,
                    straggler: str, metric: Metric) -> Any:
    """(a/b at the setting) / (a/b at the control): per seed the two ratios, then the paired (or Welch)
    t interval of their ratio on the log scale (:func:`distrepro_wf.stats.interval`)."""
    def ratios(e: str, n: int, st: str) -> pd.Series:
        a = _select(runs.get(e), c["a"], n, st).set_index("seed")[metric.column].astype(float)
        b = _select(runs.get(e), c["b"], n, st).set_index("seed")[metric.column].astype(float)
        return (a / b).dropna()
    here = ratios(c["experiment"], nodes, straggler)
    there = ratios(*_control_setting(c, config, nodes, straggler))
    return interval("ratio", here, there, metric.higher_is_better)


def _secondary(c: dict[str, Any], config: dict[str, Any], runs: dict[str, pd.DataFrame],
               failed: dict[str, pd.DataFrame], nodes: int, straggler: str, status: str, notes: list[str]) -> dict:
    """A per-epoch speed claim judged again on time to the target (``tta_*`` columns); a note when
    the two measures disagree."""
    other = SECONDARY.get(c["metric"])
    if other is None or c["compare"] not in ("ratio", "difference") or other not in runs.get(c["experiment"], ()):
        return {}  # no second measure recorded (an older table): nothing to say
    alt = {**c, "metric": other}
    iv, problems, _, _ = _stat(alt, config, runs, failed, nodes, straggler, METRICS[other])
    if iv is None:
        if status != NOT_COMPARABLE and problems:
            notes.append(f"time to accuracy not comparable: {problems[0]}")
        return {"tta_status": NOT_COMPARABLE}
    st = verdict(iv.low, iv.high, c["expect"])
    if st != status:
        notes.append(f"time to accuracy disagrees: {st} ({iv.estimate:.3g}"
                     + (f" [{iv.low:.3g}, {iv.high:.3g}]" if iv.method else "") + ")")
    return {"tta_measured": iv.estimate, "tta_low": iv.low, "tta_high": iv.high, "tta_status": st}


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
        rows.append({"claim": cid, "paper": g["paper"].iloc[0],
                     "page": g["page"].iloc[0] if "page" in g else "paper", "experiment": g["experiment"].iloc[0],
                     "statement": g["statement"].iloc[0], "status": overall, "provisional": provisional,
                     "shown": shown_status(overall, provisional),
                     "settings": len(g), "reproduced": int((g["status"] == REPRODUCED).sum()),
                     "not_reproduced": int((g["status"] == NOT_REPRODUCED).sum()),
                     "inconclusive": int((g["status"] == INCONCLUSIVE).sum()),
                     "not_comparable": int((g["status"] == NOT_COMPARABLE).sum()),
                     "provisional_settings": int(prov.sum()),
                     "reason": "; ".join(dict.fromkeys(r for r in g["reason"] if isinstance(r, str) and r))})
    return pd.DataFrame(rows, columns=["claim", "paper", "page", "experiment", "statement", "status", "provisional", "shown",
                                       "settings", "reproduced", "not_reproduced", "inconclusive", "not_comparable",
                                       "provisional_settings", "reason"])


def read_tables(tables_dir: Path, experiments: Iterable[str]) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    runs, failed = {}, {}
    for e in experiments:
        d = Path(tables_dir) / e
        runs[e] = pd.read_csv(d / "runs.csv") if (d / "runs.csv").exists() else pd.DataFrame()
        failed[e] = pd.read_csv(d / "failed.csv") if (d / "failed.csv").exists() else pd.DataFrame()
    return runs, failed
