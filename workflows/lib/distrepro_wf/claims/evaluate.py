"""Claims evaluated on our results: statuses per claim and setting.

The published numbers and claims are loaded and validated by :mod:`distrepro_wf.claims.published`,
their statistics come from :mod:`distrepro_wf.claims.stats` (t intervals over seeds, paired by seed,
on the log scale for ratios; see there why not the bootstrap), the metrics they name from
:mod:`distrepro_wf.pipeline.catalogue`.

Statuses (:func:`evaluate`), per claim and setting (nodes x straggler), from completed runs
only (``runs.csv``; a failed run, a diverged one included, is only in ``failed.csv``), judged by
the 95 % interval of the statistic (:func:`distrepro_wf.claims.stats.interval`) against the claim's
pass region (``expect`` with its tolerance, :func:`pass_region`):

* ``reproduced``: the interval lies entirely inside the pass region;
* ``not reproduced``: it lies entirely outside;
* ``inconclusive``: it straddles a boundary of the region, or there is no interval (one seed a
  side, or a side with one seed when the seeds differ);
* ``not comparable``: the setting cannot show the claim's mechanism (:mod:`distrepro_wf.claims.mechanisms`:
  e.g. "communication is 3 % of AR-SGD's epoch time", "compute is 19 % of the step, a straggler
  cannot matter", "1-peer SGP averages exactly at n=2"; the measured value is in the reason, not
  judged; on a simulated setting a share gate is also swept through the sensitivity ranges,
  :func:`distrepro_wf.claims.sensitivity.gates`, and only a gate failing across the whole ranges
  leaves the row here: one that passes somewhere inside makes it inconclusive, :func:`gated`),
  the experiment, method or setting was not run, every run failed
  ("every run failed: ... (seed 1: diverged: ...)"), no run completed, the metric is missing
  (e.g. a final accuracy never logged), a ratio's values are not all positive (no log, the
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

Time to the target counts every run.  A claim on ``time_to_target_s`` (a ratio) never drops a run
that did not reach the target: it is censored at its last evaluation (``time_last_eval_s``), each
side gets a Kaplan-Meier median with its interval and the sides a log-rank test
(:mod:`distrepro_wf.claims.survival`; why not a paired test: there).  When every run of both sides
arrived nothing is censored and the paired t interval of the ratio stands; otherwise the status
follows :func:`censored_verdict` (e.g. a side that reaches the target less often, counted over
the time both sides ran, can never be "faster to it"; neither median defined: inconclusive,
"target not reached").  The ``tta_*``
columns carry "reached k of n" per side, the medians and the test's p-value.

Controls and the second measure.  A claim with a ``control`` (the fast network, no straggler)
shows the same comparison there (``control_*``); ``compare: ratio_vs_control`` judges the
mechanism differentially, (a/b here) / (a/b at the control), per seed (a paired t interval on
the log scale when both settings ran the same seeds).  A per-epoch speed claim is judged again on
time to the target (MLPerf's measure, ``tta_*``, every run counted as above) and the reason says
when the two disagree.
The published value is one source's number (``published.other`` says what another source says,
shown, never averaged); the ``gap`` is shown only at the published scale (``published.nodes``).
A ``harness: true`` claim checks the harness itself and is shown on the harness page.

Each row also carries the estimate (``measured``: the geometric mean of the per-seed ratios, the
mean difference, the mean value), the interval and its method, ``p_a_beats_b`` (the t posterior
probability that a's metric is better than b's), ``wins`` (seeds where a beat b), ``p_pass``
(the same posterior's probability that the statistic lies in the pass region), and the seeds the
setting is scored on (``scored_on_seeds``) beside those its hyperparameters were tuned on
(``tuned_on_seeds``, from the claim; validated disjoint by :mod:`distrepro_wf.claims.published`).
A ``platform_sourced`` check that fails makes the setting "not comparable" with the reason
"platform unknown: ..." (:mod:`distrepro_wf.claims.mechanisms`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, NamedTuple

import numpy as np
import pandas as pd

from impls.backends import DEFAULT as DEFAULT_BACKEND
from impls.backends import backend_of, is_simulated

from ..pipeline.catalogue import METRICS, Metric
from ..pipeline.config import expand
from .expect import _above, _below, pass_region
from .published import Published
from . import mechanisms, predict, size
from .stats import interval, nonpositive, p_between
from .survival import Median, km_median, logrank

REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = "reproduced", "not reproduced", "not comparable"
INCONCLUSIVE, PROVISIONAL = "inconclusive", "provisional"
STATUSES = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_COMPARABLE)
#: fewer seeds (pairs) than this: the setting is provisional, never shown as reproduced
MIN_SEEDS = 3


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


#: where a row's runs ran and what its speed result is (:func:`label_row`), the scenario axes'
#: effect, the context gates, a derived expectation (:mod:`distrepro_wf.claims.predict`) and the size
#: verdict (:mod:`distrepro_wf.claims.size`)
LABEL_COLUMNS = ["runs_on", "speed_result", "closed_form", "sensitivity", "published_fitted", "scenarios",
                 "gate_context", "predicted", "predicted_how", *size.COLUMNS]
COLUMNS = ["claim", "paper", "page", "experiment", "statement", "mechanism", "metric", "unit", "compare", "scale",
           "nodes", "straggler", "setting", "status", "provisional", "reason", "measured", "ci_low", "ci_high",
           "interval", "df", "p_a_beats_b", "wins", "p_pass", "seeds_a", "seeds_b", "pass_low", "pass_high",
           "control", "control_measured", "control_low", "control_high", "tta_measured", "tta_low", "tta_high",
           "tta_status", "tta_reached_a", "tta_runs_a", "tta_reached_b", "tta_runs_b", "tta_median_a",
           "tta_median_a_low", "tta_median_a_high", "tta_median_b", "tta_median_b_low", "tta_median_b_high",
           "tta_logrank_p", "published", "published_nodes", "gap", "expected", "published_note", "published_other",
           "sources", "tuned_on_seeds", "scored_on_seeds", *LABEL_COLUMNS]
#: the censored time-to-target columns (:func:`censored_fields`), NaN / 0 where not judged
TTA_KM = {"tta_reached_a": 0, "tta_runs_a": 0, "tta_reached_b": 0, "tta_runs_b": 0, "tta_median_a": math.nan,
          "tta_median_a_low": math.nan, "tta_median_a_high": math.nan, "tta_median_b": math.nan,
          "tta_median_b_low": math.nan, "tta_median_b_high": math.nan, "tta_logrank_p": math.nan}
#: metrics judged with the runs that never reach the target censored (compare: ratio)
CENSORED = {"time_to_target_s"}
#: the log-rank test's level: p below it decides which side reaches the target sooner
ALPHA = 0.05
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
           "tta_status": "", **TTA_KM, "published": pub.get("value"),
           "published_nodes": " ".join(map(str, pub.get("nodes", []))), "gap": math.nan,
           "expected": expect_text(c["expect"], c["compare"]) + _predicted_text(c),
           "published_note": pub.get("note", ""),
           "published_other": pub.get("other", ""), "sources": " ".join(c["sources"]),
           "tuned_on_seeds": " ".join(map(str, c.get("tuned_on_seeds") or ())), "scored_on_seeds": "", "runs_on": "",
           "speed_result": "", "closed_form": math.nan, "sensitivity": "", "published_fitted": "", "scenarios": "",
           "gate_context": "", "predicted": math.nan, "predicted_how": "", "size_status": "", "size_reason": "",
           "size_low": math.nan, "size_high": math.nan, "size_range_low": math.nan, "size_range_high": math.nan}
    row.update(kw)
    return row


def _predicted_text(c: dict[str, Any]) -> str:
    """The size a claim with a derived expectation must also have, in words (:mod:`.predict`)."""
    if not c.get("predicted"):
        return ""
    return (f"; size: within {size.TOLERANCE['predicted']['text']} of the {c['predicted']['by'].replace('_', ' ')} "
            f"prediction at the setting")


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
    if is_simulated(exp.get("backend")):
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
        if c["metric"] in CENSORED and c["compare"] == "ratio":
            out.append(_censored_row(c, config, runs, failed, table, nodes, straggler, where))
            continue
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
        mech, gate, ctx = mechanism(c, config, table, nodes, straggler)
        if mech and not (gate and gate.flips):
            ci = f" [{iv.low:.3g}, {iv.high:.3g}]" if iv.method else ""
            why = "" if mech.startswith(mechanisms.PLATFORM_UNKNOWN) else "the setting cannot show the mechanism: "
            out.append(_with_context(_row(c, NOT_COMPARABLE, f"{why}{mech} (measured {iv.estimate:.3g}{ci}, not "
                                          "judged)" + (f"; {gate.text}" if gate else ""), nodes, straggler, **seeds,
                                          **where, sensitivity=f"mechanism: {gate.text}" if gate else ""), ctx))
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
        if c.get("predicted"):  # a derived expectation: the size the setting's own measurements predict
            pred = predict.predict(c, config, table, nodes, straggler)
            where.update({"predicted": pred.value, "predicted_how": pred.how} if isinstance(pred, predict.Prediction)
                         else {"predicted_how": pred})
        out.append(_with_context(gated(_row(c, status, "; ".join(notes), nodes, straggler,
                                            provisional="yes" if provisional else "", measured=iv.estimate,
                                            ci_low=iv.low, ci_high=iv.high, interval=iv.method, df=iv.df,
                                            p_a_beats_b=iv.p_a_beats_b, wins=iv.wins, p_pass=p_pass,
                                            gap=iv.estimate - pub["value"] if at_scale else math.nan, **seeds,
                                            **where), mech, gate), ctx))
    return out


def mechanism(c: dict[str, Any], config: dict[str, Any], table: pd.DataFrame, nodes: int,
              straggler: str) -> tuple[str, Any, str]:
    """(every failed demoting mechanism check's reason at the nominal point, '' when none; the
    demoting share gates swept through the sensitivity ranges,
    :func:`distrepro_wf.claims.sensitivity.gates`, or None; the share gates without a sourced or
    derived threshold in words, :func:`distrepro_wf.claims.mechanisms.context`: shown, never
    demoting)."""
    from . import sensitivity  # noqa: PLC0415

    outs = mechanisms.outcomes(c, config, table, nodes, straggler)
    return ("; ".join(o.reason for o in outs if o.reason), sensitivity.gates(c, config, outs, nodes),
            mechanisms.context(c, outs))


def _with_context(row: dict[str, Any], ctx: str) -> dict[str, Any]:
    """A row with its context gates (:func:`mechanism`'s third value) in ``gate_context`` and, after
    its reason, "context (not a demotion): ..."."""
    if ctx:
        row["gate_context"] = ctx
        row["reason"] = "; ".join(x for x in (row["reason"], f"context (not a demotion): {ctx}") if x)
    return row


#: the key a judged row carries its flipping mechanism gate under until :func:`label_row` reads it
GATE = "_gate"


def gated(row: dict[str, Any], mech: str, gate: Any) -> dict[str, Any]:
    """A judged row whose mechanism gate flips inside the sensitivity ranges, at most inconclusive:
    (a) the gate fails at the nominal point (``mech``) but passes somewhere inside the ranges: the
    setting shows the mechanism only there, so the row is inconclusive, whatever its interval
    says (the reason says where, why not at the nominal point, the measured value and the
    interval's verdict); (b) it passes at the nominal point but fails somewhere: a reproduced
    or not reproduced row becomes inconclusive.  A gate failing throughout never gets here (not
    comparable)."""
    if gate is None or not gate.flips:
        return row
    row[GATE] = gate
    st = row["status"]
    if mech:
        m, lo, hi = row["measured"], row["ci_low"], row["ci_high"]
        est = "undefined" if math.isnan(m) else f"{m:.3g}" + (f" [{lo:.3g}, {hi:.3g}]" if not math.isnan(lo) else "")
        head = f"{gate.text} ({mech}; measured {est}, its interval alone: {st}): at most inconclusive"
    elif st in (REPRODUCED, NOT_REPRODUCED):
        head = f"{st} at the nominal parameters, but {gate.text}: at most inconclusive"
    else:
        return row
    row["reason"] = "; ".join(x for x in (head, row["reason"]) if x)
    row["status"] = INCONCLUSIVE
    return row


def _versus_control(c: dict[str, Any], config: dict[str, Any], runs: dict[str, pd.DataFrame], nodes: int,
                    straggler: str, metric: Metric) -> Any:
    """(a/b at the setting) / (a/b at the control): per seed the two ratios, then the paired (or Welch)
    t interval of their ratio on the log scale (:func:`distrepro_wf.claims.stats.interval`)."""
    def ratios(e: str, n: int, st: str) -> pd.Series:
        a = _select(runs.get(e), c["a"], n, st).set_index("seed")[metric.column].astype(float)
        b = _select(runs.get(e), c["b"], n, st).set_index("seed")[metric.column].astype(float)
        return (a / b).dropna()
    here = ratios(c["experiment"], nodes, straggler)
    there = ratios(*_control_setting(c, config, nodes, straggler))
    return interval("ratio", here, there, metric.higher_is_better)


def _secondary(c: dict[str, Any], config: dict[str, Any], runs: dict[str, pd.DataFrame],
               failed: dict[str, pd.DataFrame], nodes: int, straggler: str, status: str, notes: list[str]) -> dict:
    """A per-epoch speed claim judged again on time to the target (``tta_*`` columns), every run
    counted (:func:`censored_judgement`: a run that never reached the target is censored at its
    last evaluation); a note when the two measures disagree."""
    other = SECONDARY.get(c["metric"])
    table = runs.get(c["experiment"], pd.DataFrame())
    if other is None or c["compare"] != "ratio" or other not in table or not has_target(table):
        return {}  # no second measure recorded (an older table, a workload without a target): nothing to say
    data, problems, _, _ = _censored_stat(c, config, runs, failed, nodes, straggler)
    if problems:
        if status != NOT_COMPARABLE:
            notes.append(f"time to accuracy not comparable: {problems[0]}")
        return {"tta_status": NOT_COMPARABLE}
    st, f, why = censored_judgement(c["expect"], *data["a"], *data["b"], names=side_names(c))
    if st != status:
        ci = f" [{f['ci_low']:.3g}, {f['ci_high']:.3g}]" if not math.isnan(f["ci_low"]) else ""
        est = f"{f['measured']:.3g}{ci}; " if not math.isnan(f["measured"]) else ""
        notes.append(f"time to accuracy disagrees: {st} ({est}{why})")
    return {"tta_measured": f["measured"], "tta_low": f["ci_low"], "tta_high": f["ci_high"], "tta_status": st,
            **{k: f[k] for k in TTA_KM}}


# ------------------------------------------------------------------ time to the target, every run counted

def reached(runs: pd.DataFrame) -> pd.Series:
    """Whether each run reached its target (``reached_target``; an older table: a time to it)."""
    if "reached_target" in runs:
        return runs["reached_target"].astype(str).str.lower().isin(("true", "1", "1.0", "yes"))
    return runs["time_to_target_s"].notna() if "time_to_target_s" in runs else pd.Series(False, runs.index)


def has_target(runs: pd.DataFrame) -> bool:
    """Whether the runs had a target to reach (``target_value``; an older table without it: yes)."""
    return "target_value" not in runs or bool(pd.to_numeric(runs["target_value"], errors="coerce").notna().any())


def censored_times(ok: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Completed runs as (time, reached), indexed like ``ok``: the time to the target where it was
    reached, else the run's censoring time, its last evaluation (``time_last_eval_s``; in an
    older runs.csv without it, ``wall_s``: the last epoch's end, where its last evaluation ran).
    NaN where a run has neither."""
    hit = reached(ok)
    num = lambda col: (pd.to_numeric(ok[col], errors="coerce") if col in ok  # noqa: E731
                       else pd.Series(math.nan, ok.index, dtype=float))
    last = num("time_last_eval_s").fillna(num("wall_s"))
    return num("time_to_target_s").where(hit, last), hit


def _censored_side(table: pd.DataFrame, failed: pd.DataFrame | None, grid: pd.DataFrame, sel: dict[str, Any],
                   nodes: int, straggler: str) -> tuple[tuple[pd.Series, pd.Series] | None, str, str]:
    """One side's completed runs as ``((times, reached) by seed, problem, note)``; as :func:`_side`."""
    ok = _select(table, sel, nodes, straggler)
    if not len(ok):
        _, problem, _ = _side(table, failed, grid, sel, nodes, straggler, METRICS["time_to_target_s"])
        return None, problem, ""
    if not has_target(ok):
        return None, f"{sel['method']}: the workload has no target (workload.target)", ""
    t, hit = censored_times(ok)
    t, hit = t.set_axis(ok["seed"].to_numpy()), hit.set_axis(ok["seed"].to_numpy())
    if t.isna().any():
        seeds = ", ".join(str(int(x)) for x in t.index[t.isna()])
        return None, (f"{sel['method']}: no time to the target and no last evaluation at seed(s) {seeds} "
                      "(a runs.csv without time_last_eval_s and wall_s)"), ""
    bad = _select(failed, sel, nodes, straggler)
    note = f"judged on {len(t)} completed run(s) of {sel['method']}; {_failed_text(bad)}" if len(bad) else ""
    return (t, hit), "", note


def _censored_stat(c: dict[str, Any], config: dict[str, Any], runs: dict[str, pd.DataFrame],
                   failed: dict[str, pd.DataFrame], nodes: int, straggler: str, control: bool = False
                   ) -> tuple[dict[str, tuple[pd.Series, pd.Series]], list[str], list[str], dict[str, int]]:
    """Both sides' (times, reached) at a setting (or its control), problems, notes and seed counts."""
    e, n, st = _control_setting(c, config, nodes, straggler) if control else (c["experiment"], nodes, straggler)
    if e not in config["experiments"]:
        return {}, [f"control experiment {e!r} not in config"], [], {"seeds_a": 0, "seeds_b": 0}
    data, problems, notes = {}, [], []
    for side in ("a", "b"):
        d, problem, note = _censored_side(runs.get(e, pd.DataFrame()), failed.get(e), _grid(config, e), c[side], n, st)
        problems += [problem] if problem else []
        notes += [note] if note else []
        if d is not None:
            data[side] = d
    seeds = {"seeds_a": len(data["a"][0]) if "a" in data else 0, "seeds_b": len(data["b"][0]) if "b" in data else 0}
    return data, problems, notes, seeds


def side_names(c: dict[str, Any]) -> tuple[str, str]:
    """The two sides' names in a reason: the methods, with the setting a side pins when the
    methods are the same (ar_slowed_by_straggler: 'allreduce_sgd (straggler slow1x4)')."""
    a, b = c["a"], c.get("b", {})
    if a.get("method") != b.get("method"):
        return a["method"], b.get("method", "b")
    def name(sel: dict[str, Any]) -> str:
        pinned = ", ".join(f"{k} {sel[k]}" for k in ("nodes", "straggler") if k in sel)
        return f"{sel['method']} ({pinned or 'this setting'})"
    return name(a), name(b)


def censored_fields(a: Median, b: Median, test: Any) -> dict[str, Any]:
    """The ``tta_*`` Kaplan-Meier columns of two sides and their log-rank test."""
    return {"tta_reached_a": a.reached, "tta_runs_a": a.runs, "tta_reached_b": b.reached, "tta_runs_b": b.runs,
            "tta_median_a": a.median, "tta_median_a_low": a.low, "tta_median_a_high": a.high,
            "tta_median_b": b.median, "tta_median_b_low": b.low, "tta_median_b_high": b.high,
            "tta_logrank_p": test.p}


class Window(NamedTuple):
    """Both sides followed over the same time: runs of each side that reached the target by
    ``horizon``, the earlier of the two sides' last observations (an arrival or a censoring)."""
    horizon: float          # s: min over the sides of their latest run's time
    reached_a: int          # runs of a that reached the target by the horizon
    reached_b: int
    first_a: float          # a's first arrival (nan: none)
    first_b: float


def common_window(ta: Any, ea: Any, tb: Any, eb: Any) -> Window:
    """:class:`Window` of two sides' times (to the target where ``e``, else to the last
    evaluation)."""
    ta, tb = np.asarray(ta, float), np.asarray(tb, float)
    ea, eb = np.asarray(ea, bool), np.asarray(eb, bool)
    h = float(min(ta.max(), tb.max()))
    first = lambda t, e: float(t[e].min()) if e.any() else math.nan  # noqa: E731
    return Window(h, int((ea & (ta <= h)).sum()), int((eb & (tb <= h)).sum()), first(ta, ea), first(tb, eb))


def censored_verdict(expect: dict[str, Any], a: Median, b: Median, test: Any, names: tuple[str, str] = ("a", "b"),
                     alpha: float = ALPHA, window: Window | None = None) -> tuple[str, str]:
    """Status and reason of a time-to-target ratio claim (a / b against ``expect``) when some run
    never reached the target, from both sides' Kaplan-Meier medians (``a``, ``b``:
    :func:`distrepro_wf.claims.survival.km_median`) and their log-rank ``test``
    (:func:`distrepro_wf.claims.survival.logrank`).  The rule, in order:

    1. Neither median is defined (fewer than half of each side's runs reach the target):
       inconclusive, "target not reached".
    2. The claim names the side that must reach the target sooner: a when the pass region lies
       at or below 1 (a / b < 1), b when it lies at or above 1.  A region around parity
       (e.g. |a / b - 1| <= 0.1) names none: censored times show which side is sooner, not a
       ratio near 1: inconclusive.
    3. Sooner means the log-rank test finds a difference (p < ``alpha``, 5 %) in that
       direction: the side reaching the target more (O > E) is sooner.
    4. A side that reaches the target in a smaller share of its runs than the other
       (k_s / n_s < k_o / n_o) cannot be faster to it: not reproduced if the other side is
       significantly sooner, else inconclusive, whatever the medians say.  With a ``window``
       (:func:`common_window`) the shares count the arrivals by the time both sides were still
       followed: a side whose runs stopped earlier (e.g. an asynchronous method's 3 epochs
       take a third of the synchronous one's time) has not "reached it less often"; when
       neither side arrives within that window the runs are too short to compare:
       inconclusive, saying so.
    5. The other side significantly sooner: not reproduced.  No significant difference:
       inconclusive.
    6. The named side significantly sooner and its median defined: reproduced when the pass
       region is the direction itself (its bound is 1: "a / b < 1"); a region with a size
       (e.g. a / b in [4, 8], or < 0.5) cannot be checked on censored times (no per-seed
       ratio exists for a run that never arrived): inconclusive.
    """
    lo, _, hi, _ = pass_region(expect)
    na, nb = names
    counts = f"{na} reached the target in {a.reached} of {a.runs} runs, {nb} in {b.reached} of {b.runs}"
    ptext = "log-rank p n/a" if math.isnan(test.p) else f"log-rank p = {test.p:.3g}"
    if math.isnan(a.median) and math.isnan(b.median):
        return INCONCLUSIVE, f"target not reached: neither median time to the target is defined ({counts})"
    sooner = "a" if hi <= 1 else "b" if lo >= 1 else None
    if sooner is None:
        return INCONCLUSIVE, (f"a pass region around parity cannot be judged on censored times ({counts}, "
                              f"{ptext})")
    sig = not math.isnan(test.p) and test.p < alpha
    winner = ("a" if test.a_sooner else "b") if sig else None
    s, o = (a, b) if sooner == "a" else (b, a)
    sn, on = (na, nb) if sooner == "a" else (nb, na)
    ks, ko = s.reached, o.reached
    if window is not None:
        ks, ko = (window.reached_a, window.reached_b) if sooner == "a" else (window.reached_b, window.reached_a)
        if ks == 0 and ko == 0:
            late = [(t, n) for t, n in ((window.first_a, na), (window.first_b, nb)) if not math.isnan(t)]
            t, n = min(late)
            return INCONCLUSIVE, (f"runs too short to compare: both sides were followed only to "
                                  f"{window.horizon:.3g} s and nobody reached the target by then ({n}'s first "
                                  f"arrival: {t:.3g} s; {counts})")
    if ks * o.runs < ko * s.runs:
        if winner not in (None, sooner):
            return NOT_REPRODUCED, (f"{sn} reaches the target less often and {on} reaches it sooner ({counts}, "
                                    f"{ptext})")
        return INCONCLUSIVE, (f"{sn} reaches the target less often, so it cannot be faster to it ({counts}, "
                              f"{ptext})")
    if winner is None:
        return INCONCLUSIVE, f"no significant difference in time to the target ({counts}, {ptext})"
    if winner != sooner:
        return NOT_REPRODUCED, f"{on} reaches the target sooner ({counts}, {ptext})"
    if math.isnan(s.median):
        return INCONCLUSIVE, f"{sn}'s median time to the target is undefined ({counts}, {ptext})"
    if (hi if sooner == "a" else lo) != 1:
        return INCONCLUSIVE, (f"{sn} reaches the target sooner ({counts}, {ptext}), but the claimed size "
                              f"({expect_text(expect, 'ratio')}) needs every run to reach the target")
    return REPRODUCED, f"{sn} reaches the target sooner ({counts}, {ptext})"


def censored_judgement(expect: dict[str, Any], ta: pd.Series, ea: pd.Series, tb: pd.Series, eb: pd.Series,
                       names: tuple[str, str] = ("a", "b")) -> tuple[str, dict[str, Any], str]:
    """(status, fields, reason) of a time-to-target ratio claim over every run: ``ta``/``tb`` the
    times by seed (to the target, or to the last evaluation where ``ea``/``eb`` is False).

    Every run of both sides reached the target (and in positive time): nothing is censored, the
    per-seed times are complete, so the ratio keeps its t interval over seeds (paired by seed,
    :func:`distrepro_wf.claims.stats.interval`), which also measures a claimed size (e.g. [4, 8]).
    Otherwise :func:`censored_verdict`; the estimate is then the ratio of the Kaplan-Meier
    medians (NaN when one is undefined), without an interval.  The Kaplan-Meier columns
    (:func:`censored_fields`) are filled either way."""
    ma, mb = km_median(ta.to_numpy(float), ea.to_numpy(bool)), km_median(tb.to_numpy(float), eb.to_numpy(bool))
    test = logrank(ta.to_numpy(float), ea.to_numpy(bool), tb.to_numpy(float), eb.to_numpy(bool))
    f = censored_fields(ma, mb, test)
    if ea.all() and eb.all() and (ta > 0).all() and (tb > 0).all():
        iv = interval("ratio", ta.astype(float), tb.astype(float), higher_is_better=False)
        f.update(measured=iv.estimate, ci_low=iv.low, ci_high=iv.high, interval=iv.method, n=iv.n, df=iv.df,
                 p_a_beats_b=iv.p_a_beats_b, wins=iv.wins, iv=iv)
        return verdict(iv.low, iv.high, expect), f, "every run reached the target"
    st, why = censored_verdict(expect, ma, mb, test, names, window=common_window(ta, ea, tb, eb))
    ratio = ma.median / mb.median if ma.median > 0 and mb.median > 0 else math.nan
    f.update(measured=ratio, ci_low=math.nan, ci_high=math.nan, interval="Kaplan-Meier medians, log-rank test",
             n=min(ma.runs, mb.runs), df=math.nan, p_a_beats_b=math.nan, wins="", iv=None)
    return st, f, why


def _censored_row(c: dict[str, Any], config: dict[str, Any], runs: dict[str, pd.DataFrame],
                  failed: dict[str, pd.DataFrame], table: pd.DataFrame, nodes: int, straggler: str,
                  where: dict[str, Any]) -> dict[str, Any]:
    """A time-to-target ratio claim at one setting, every completed run counted
    (:func:`censored_judgement`)."""
    data, problems, notes, seeds = _censored_stat(c, config, runs, failed, nodes, straggler)
    if c.get("control"):
        cdata, cproblems, _, _ = _censored_stat(c, config, runs, failed, nodes, straggler, control=True)
        if not cproblems:
            _, cf, _ = censored_judgement(c["expect"], *cdata["a"], *cdata["b"])
            where.update(control_measured=cf["measured"], control_low=cf["ci_low"], control_high=cf["ci_high"])
    if problems:
        return _row(c, NOT_COMPARABLE, "; ".join(problems + notes), nodes, straggler, **seeds, **where)
    status, f, why = censored_judgement(c["expect"], *data["a"], *data["b"], names=side_names(c))
    km = {k: f[k] for k in TTA_KM}
    mech, gate, ctx = mechanism(c, config, table, nodes, straggler)
    if mech and not (gate and gate.flips):
        est = "undefined" if math.isnan(f["measured"]) else f"{f['measured']:.3g}"
        return _with_context(_row(c, NOT_COMPARABLE, f"the setting cannot show the mechanism: {mech} (measured "
                                                     f"{est}; {why}; not judged)" + (f"; {gate.text}" if gate else ""),
                                  nodes, straggler, **seeds, **where, **km,
                                  sensitivity=f"mechanism: {gate.text}" if gate else ""), ctx)
    iv = f["iv"]
    if iv is not None and not iv.method:
        notes.insert(0, "no interval: one seed a side")
    notes.insert(0, why)
    provisional = f["n"] < MIN_SEEDS
    if provisional:
        notes.insert(0, f"provisional: {f['n']} seed{'s' if f['n'] != 1 else ''} a side, fewer than {MIN_SEEDS}")
    r = pass_region(c["expect"])
    p_pass = (math.nan if iv is None else float(_passes(iv.estimate, c["expect"])) if iv.se == 0
              else p_between(iv, r[0], r[2]))
    pub = c.get("published") or {}
    at_scale = pub.get("value") is not None and (not pub.get("nodes") or nodes in pub["nodes"])
    if pub.get("value") is not None and not at_scale:
        notes.append(f"no gap: the published value is for {', '.join(map(str, pub['nodes']))} nodes")
    return _with_context(gated(_row(c, status, "; ".join(notes), nodes, straggler,
                                    provisional="yes" if provisional else "", measured=f["measured"],
                                    ci_low=f["ci_low"], ci_high=f["ci_high"], interval=f["interval"], df=f["df"],
                                    p_a_beats_b=f["p_a_beats_b"], wins=f["wins"], p_pass=p_pass,
                                    gap=f["measured"] - pub["value"] if at_scale else math.nan, **seeds, **where,
                                    **km), mech, gate), ctx)


def evaluate(published: Published, config: dict[str, Any], runs: dict[str, pd.DataFrame],
             failed: dict[str, pd.DataFrame] | None = None, sim_ends: dict[tuple, Any] | None = None) -> pd.DataFrame:
    """One row per (claim, setting); see the module docstring for the statuses.  ``sim_ends``:
    {(claim, nodes, straggler): simulated range ends} of the rows the closed form does not model
    (:func:`distrepro_wf.claims.simends.all_ends`, from the short runs of rule ``sensitivity_points``)."""
    rows = []
    for c in published.claims:
        rows.extend(label_row(c, config, r, sim_ends) for r in evaluate_claim(c, config, runs, failed or {},
                                                                              published.not_configured))
    return pd.DataFrame(rows, columns=COLUMNS)


REAL, SIMULATED = "real", "simulated"
#: metrics whose result is a speed (labelled measured or predicted)
SPEED_METRICS = {"time_per_epoch_s", "time_per_step_s", "time_to_target_s", "wall_s", "wall_h"}


def runs_on(config: dict[str, Any], experiment: str) -> tuple[str, str]:
    """("real" | "simulated" | "", how): where an experiment's runs run, e.g. ("simulated",
    "platform ethernet_10g, profile resnet50_v100x8") or ("real", "gloo, 1 host")."""
    exp = (config.get("experiments") or {}).get(experiment)
    if not exp:
        return "", ""
    name = lambda v, d: v if isinstance(v, str) else (v or {}).get("name", d)  # noqa: E731
    if is_simulated(exp.get("backend")):
        return SIMULATED, (f"platform {name(exp.get('platform'), 'ethernet_10g')}, "
                           f"profile {name(exp.get('profile'), 'measured')}")
    launcher = config.get("launcher") or {}
    requested = launcher.get("backend", DEFAULT_BACKEND)
    # the process group it names; auto: gloo, said of CPU ranks (a run's provenance records its own)
    backend = backend_of(requested).process_group(requested, gpu=False)
    hosts = launcher.get("hosts", launcher.get("nodes", 1)) if launcher.get("kind", "local") != "local" else 1
    return REAL, f"{backend}, {hosts} host{'s' if hosts != 1 else ''}"


def fitted_sources(c: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The claim's published rows that a parameter of its simulated platform was fitted on
    (:data:`distrepro_wf.claims.published.FITTED_ROWS`: only when the experiment runs that parameter
    away from line rate: ``allreduce_efficiency`` other than 1, a ``msg_efficiency`` other than 1
    (``ethernet_10g``'s own nominal 0.456 was fitted on a row), a preset's ``nic_gbps`` other than
    its own; a ``nic_gbps`` the preset leaves to the config, ``star``'s, is no fit)."""
    from impls.sim.platforms import PRESETS, PlatformConfig  # noqa: PLC0415

    from .published import FITTED_ROWS  # noqa: PLC0415

    exp = (config.get("experiments") or {}).get(c["experiment"]) or {}
    plat = exp.get("platform") if isinstance(exp.get("platform"), dict) else {}
    if not is_simulated(exp.get("backend")):
        return []
    preset = PRESETS.get(plat.get("name", PlatformConfig.name), {})

    def fitted(key: str) -> bool:
        if key.endswith("efficiency"):  # a share of line rate: fitted wherever it is not 1, the preset's own too
            return float(plat.get(key, preset.get(key)) or 1.0) != 1.0
        nominal = preset[key] if key in preset else PlatformConfig.__dataclass_fields__[key].default
        return plat.get(key) is not None and nominal is not None and float(plat[key]) != float(nominal)

    return [s for s in c["sources"] if s in FITTED_ROWS and fitted(FITTED_ROWS[s])]


def label_row(c: dict[str, Any], config: dict[str, Any], row: dict[str, Any],
              sim_ends: dict[tuple, Any] | None = None) -> dict[str, Any]:
    """Say what a row is (issue 24): ``runs_on`` real or simulated; a speed row's ``speed_result``
    "measured (real ranks: gloo, 1 host)" or "predicted (simulated: platform ..., profile ...)";
    a simulated speed ratio's ``closed_form`` (:mod:`distrepro_wf.claims.closedform`) and
    ``sensitivity`` (:mod:`distrepro_wf.claims.sensitivity`): a verdict that flips inside a sourced
    range becomes inconclusive, what the scenario axes do is said in ``scenarios`` (never a
    demotion); a published value built on a row a platform parameter was fitted on is moved to
    ``published_fitted`` and not shown as the published value.  Then the row gets its size verdict
    (:func:`distrepro_wf.claims.size.judge`; against the derived expectation where the claim has one)
    and a harness check that does not pass fails (:func:`harness_verdict`)."""
    row, res = _label(c, config, row, sim_ends)
    row.update(size.judge(row, c, res.tornado if res is not None else None))
    if c.get("harness"):
        row = harness_verdict(c, row)
    return row


def harness_verdict(c: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """A harness check (``harness: true``) tests the harness as configured, at its nominal
    parameters: one that does not pass is "not reproduced", never "inconclusive" (an interval
    straddling the pass region's boundary has not passed; without an interval the estimate is
    judged: provisional either way, fewer than :data:`MIN_SEEDS` seeds).  Not comparable stays.
    A check with a derived expectation (``predicted``, :mod:`distrepro_wf.claims.predict`) tests the
    mechanism's size too: it passes only when its size verdict against the prediction is reproduced
    (not reproduced: it fails, with the sizes in the reason; no prediction: not comparable, why)."""
    row = _harness_direction(c, row)
    if not c.get("predicted") or row["status"] != REPRODUCED or row.get("size_status") == size.REPRODUCED:
        return row
    if row.get("size_status") == size.NOT_REPRODUCED:
        row["status"] = NOT_REPRODUCED
        why = ("a harness check whose size misses its prediction fails: "
               + row["size_reason"].split("; predicted by")[0])
    else:
        row["status"] = NOT_COMPARABLE
        why = f"no size to check the mechanism by: {row.get('size_reason') or 'no prediction'}"
    row["reason"] = "; ".join(x for x in (why, row["reason"]) if x)
    return row


def _harness_direction(c: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """:func:`harness_verdict`'s direction: an inconclusive harness row passes or fails on its interval."""
    if row["status"] != INCONCLUSIVE:
        return row
    m, lo, hi = (float(row[k]) for k in ("measured", "ci_low", "ci_high"))
    if math.isnan(lo) or math.isnan(hi):
        if math.isnan(m):
            why = "no estimate"
        elif _passes(m, c["expect"]):
            row["status"] = REPRODUCED
            return row
        else:
            why = f"the estimate {m:.3g} lies outside the pass region"
    else:
        why = f"the interval [{lo:.3g}, {hi:.3g}] straddles the pass region's boundary"
    row["status"] = NOT_REPRODUCED
    row["reason"] = "; ".join(x for x in (f"a harness check that does not pass fails: {why}", row["reason"]) if x)
    return row


def _label(c: dict[str, Any], config: dict[str, Any], row: dict[str, Any],
           sim_ends: dict[tuple, Any] | None = None) -> tuple[dict[str, Any], Any]:
    """:func:`label_row` up to the sensitivity: (row, the sensitivity's Result or None)."""
    gate = row.pop(GATE, None)
    where, how = runs_on(config, c["experiment"])
    row["runs_on"] = where
    if c["metric"] in SPEED_METRICS and where:
        row["speed_result"] = (f"predicted (simulated: {how})" if where == SIMULATED
                               else f"measured (real ranks: {how})")
    fitted = fitted_sources(c, config)
    if fitted:
        from .published import FITTED_ROWS  # noqa: PLC0415

        row["published_fitted"] = "; ".join(f"{s} (platform.{FITTED_ROWS[s]} fitted on it)" for s in fitted)
        row["published"], row["gap"] = None, math.nan
    if where != SIMULATED or row["nodes"] is None or row["status"] == NOT_COMPARABLE:
        return row, None
    from . import sensitivity  # noqa: PLC0415

    ctl = _control_setting(c, config, int(row["nodes"]), str(row["straggler"])) if c.get("control") else None
    res = sensitivity.analyse(row, c, config, lambda lo, hi: verdict(lo, hi, c["expect"]), ctl, gate,
                              _ends(c, config, row, sim_ends))
    scenarios = [x for x in (res.scenarios if res is not None else "", gate.scenarios if gate is not None else "") if x]
    row["scenarios"] = "; ".join(scenarios)
    if res is None:
        if c["metric"] in sensitivity.SPEED_METRICS:
            row["sensitivity"] = "not evaluated: no closed form for a side"
        if gate is not None:
            row["sensitivity"] = f"mechanism: {gate.text}; verdict: {row['sensitivity'] or 'not evaluated'}"
        return row, None
    row["closed_form"], row["sensitivity"] = res.closed_form, res.text
    if gate is not None:  # the mechanism gate flips inside the ranges: it decides the row, shown first
        row["sensitivity"] = f"mechanism: {gate.text}; verdict: {res.text}"
    judged_by_interval = verdict(row["ci_low"], row["ci_high"], c["expect"]) == row["status"]
    if (res.flips and row["status"] in (REPRODUCED, NOT_REPRODUCED) and judged_by_interval
            and not c.get("harness")):  # a harness check is judged at its nominal parameters
        row["reason"] = "; ".join(x for x in (f"{row['status']} at the nominal parameters, but the verdict "
                                              f"{res.text}: at most inconclusive", row["reason"]) if x)
        row["status"] = INCONCLUSIVE
    return row, res


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """One row per claim: its overall status (see the module docstring), whether it is provisional,
    what the report shows (``shown``), how many settings had each status and its size verdict over
    its settings (``size``: :func:`distrepro_wf.claims.size.overall`)."""
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
                     "reason": "; ".join(dict.fromkeys(r for r in g["reason"] if isinstance(r, str) and r)),
                     "runs_on": _first_text(g, "runs_on"),
                     "size": size.overall(list(g["size_status"])) if "size_status" in g else size.NA})
    return pd.DataFrame(rows, columns=["claim", "paper", "page", "experiment", "statement", "status", "provisional", "shown",
                                       "settings", "reproduced", "not_reproduced", "inconclusive", "not_comparable",
                                       "provisional_settings", "reason", "runs_on", "size"])


def _first_text(g: pd.DataFrame, col: str) -> str:
    """A claim's ``runs_on`` ("real", "simulated"; "" where its experiment is not in the config)."""
    vals = [v for v in g[col] if isinstance(v, str) and v] if col in g else []
    return vals[0] if vals else ""


def read_tables(tables_dir: Path, experiments: Iterable[str]) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    runs, failed = {}, {}
    for e in experiments:
        d = Path(tables_dir) / e
        runs[e] = pd.read_csv(d / "runs.csv") if (d / "runs.csv").exists() else pd.DataFrame()
        failed[e] = pd.read_csv(d / "failed.csv") if (d / "failed.csv").exists() else pd.DataFrame()
    return runs, failed


#: columns of results/tables/sensitivity.csv (one row per claim x setting x parameter)
SENSITIVITY_COLUMNS = ["claim", "nodes", "straggler", "measured", "closed_form", "pass_low", "pass_high", "parameter",
                       "label", "low", "high", "nominal", "at_low", "at_high", "min", "max", "flips_at", "gate_at",
                       "gate_statistic", "reason", "kind"]


def _ends(c: dict[str, Any], config: dict[str, Any], row: dict[str, Any], sim_ends: dict[tuple, Any] | None) -> Any:
    """The row's simulated range ends (:func:`distrepro_wf.claims.simends.all_ends`), or None."""
    return (sim_ends or {}).get((c["id"], int(row["nodes"]), str(row["straggler"])))


def sensitivity_table(published: Published, config: dict[str, Any], results: pd.DataFrame,
                      runs: dict[str, pd.DataFrame] | None = None, sim_ends: dict[tuple, Any] | None = None
                      ) -> pd.DataFrame:
    """The tornado figures' data: every simulated speed row of ``results`` (claims.csv) with a
    sensitivity analysis, each parameter's range and the scaled statistic at its ends
    (:func:`distrepro_wf.claims.sensitivity.analyse`); with the ``runs`` tables, where a row's
    mechanism gate flips (``gate_at``, :func:`distrepro_wf.claims.sensitivity.gates`)."""
    from . import sensitivity  # noqa: PLC0415

    by_id = {c["id"]: c for c in published.claims}
    rows = []
    for _, r in results.iterrows():
        c = by_id.get(r["claim"])
        text = r.get("sensitivity")
        if c is None or not isinstance(text, str) or not text or text.startswith("not evaluated"):
            continue
        gate = None
        if runs is not None and text.startswith("mechanism: "):
            gate = mechanism(c, config, runs.get(c["experiment"], pd.DataFrame()), int(r["nodes"]),
                             str(r["straggler"]))[1]
        ctl = _control_setting(c, config, int(r["nodes"]), str(r["straggler"])) if c.get("control") else None
        res = sensitivity.analyse(r.to_dict(), c, config, lambda lo, hi: verdict(lo, hi, c["expect"]), ctl, gate,
                                  _ends(c, config, r.to_dict(), sim_ends))
        for t in res.tornado if res else []:
            rows.append({"claim": r["claim"], "nodes": int(r["nodes"]), "straggler": r["straggler"],
                         "measured": r["measured"], "closed_form": res.closed_form, "pass_low": r["pass_low"],
                         "pass_high": r["pass_high"], **{k: t[k] for k in SENSITIVITY_COLUMNS if k in t}})
    return pd.DataFrame(rows, columns=SENSITIVITY_COLUMNS)
