"""Claims evaluated on our results: statuses per claim and setting.

The published numbers and claims are loaded and validated by :mod:`distrepro_wf.published`,
their statistics come from :mod:`distrepro_wf.stats`, the metrics they name from
:mod:`distrepro_wf.catalogue`.

Statuses (:func:`evaluate`), per claim and setting (nodes x straggler), from completed runs
only (``runs.csv``; a failed run, a diverged one included, is only in ``failed.csv``):

* ``reproduced``: the statistic over the seeds' means satisfies ``expect`` (with its
  tolerance); when some runs of the setting failed, it is judged on the completed ones and
  the reason says how many failed and why;
* ``not reproduced``: it does not;
* ``not comparable``: the experiment, method or setting was not run, every run failed
  ("every run failed: ... (seed 1: diverged: ...)"), no run completed, the metric is missing
  (e.g. target accuracy never reached), a ratio's denominator mean is 0, or, for an absolute
  number, the run's workload / node count differs from the published setting.  Missing
  results are never "reproduced".

A claim's overall status: "not reproduced" if any setting is, "reproduced" if every
comparable setting is (and there is one), else "not comparable".  ``robust`` says whether
the whole bootstrap interval (:func:`distrepro_wf.stats.bootstrap_ci`) satisfies ``expect``
("no" when there is no interval because a resample's ratio divides by zero).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .catalogue import METRICS, Metric
from .config import expand
from .published import Published
from .stats import _stat, bootstrap_ci

REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = "reproduced", "not reproduced", "not comparable"


def _passes(m: float, expect: dict[str, Any]) -> bool:
    op, v, tol = expect["op"], expect["value"], expect["tolerance"]
    if op == "<":
        return m < v + tol
    if op == "<=":
        return m <= v + tol
    if op == ">":
        return m > v - tol
    if op == ">=":
        return m >= v - tol
    if op == "between":
        return v[0] - tol <= m <= v[1] + tol
    return abs(m - v) <= tol  # within


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
           "reason", "measured", "ci_low", "ci_high", "robust", "seeds_a", "seeds_b", "published", "gap", "expected",
           "published_note", "sources"]


def _row(c: dict[str, Any], status: str, reason: str, nodes: Any = None, straggler: Any = None, **kw: Any) -> dict:
    m = METRICS[c["metric"]]
    unit = "x" if c["compare"] == "ratio" else (("pt" if m.unit == "%" else m.unit) if c["compare"] == "difference"
                                              else m.unit)
    pub = c.get("published", {})
    row = {"claim": c["id"], "paper": c["paper"], "experiment": c["experiment"], "statement": c["statement"],
           "metric": c["metric"], "unit": unit, "compare": c["compare"], "nodes": nodes, "straggler": straggler,
           "status": status, "reason": reason, "measured": math.nan, "ci_low": math.nan, "ci_high": math.nan,
           "robust": "", "seeds_a": 0, "seeds_b": 0, "published": pub.get("value"), "gap": math.nan,
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
        measured = float(_stat(c["compare"], a.to_numpy(float), None if b is None else b.to_numpy(float)))
        if not math.isfinite(measured):
            out.append(_row(c, NOT_COMPARABLE, "; ".join(["statistic undefined (division by zero)"] + notes),
                            nodes, straggler, **seeds))
            continue
        lo, hi = bootstrap_ci(c["compare"], a, b)
        ok = _passes(measured, c["expect"])
        if math.isnan(lo):
            # one seed a side: no interval; a resample dividing by zero: an unbounded one
            robust = "" if max(len(a), len(b) if b is not None else 0) < 2 else "no"
            if robust:
                notes.append("no confidence interval: the denominator's mean is 0 in some bootstrap resamples")
        else:
            robust = "yes" if _passes(lo, c["expect"]) and _passes(hi, c["expect"]) else "no"
        pub = (c.get("published") or {}).get("value")
        out.append(_row(c, REPRODUCED if ok else NOT_REPRODUCED, "; ".join(notes), nodes, straggler,
                        measured=measured, ci_low=lo, ci_high=hi, robust=robust,
                        gap=measured - pub if pub is not None else math.nan, **seeds))
    return out


def evaluate(published: Published, config: dict[str, Any], runs: dict[str, pd.DataFrame],
             failed: dict[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """One row per (claim, setting); see the module docstring for the statuses."""
    rows = []
    for c in published.claims:
        rows.extend(evaluate_claim(c, config, runs, failed or {}, published.not_configured))
    return pd.DataFrame(rows, columns=COLUMNS)


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """One row per claim: its overall status and how many settings had each status."""
    rows = []
    for cid, g in results.groupby("claim", sort=False):
        st = set(g["status"])
        overall = (NOT_REPRODUCED if NOT_REPRODUCED in st else REPRODUCED if REPRODUCED in st else NOT_COMPARABLE)
        rows.append({"claim": cid, "paper": g["paper"].iloc[0], "experiment": g["experiment"].iloc[0],
                     "statement": g["statement"].iloc[0], "status": overall,
                     "settings": len(g), "reproduced": int((g["status"] == REPRODUCED).sum()),
                     "not_reproduced": int((g["status"] == NOT_REPRODUCED).sum()),
                     "not_comparable": int((g["status"] == NOT_COMPARABLE).sum()),
                     "reason": "; ".join(dict.fromkeys(r for r in g["reason"] if isinstance(r, str) and r))})
    return pd.DataFrame(rows, columns=["claim", "paper", "experiment", "statement", "status", "settings", "reproduced",
                                       "not_reproduced", "not_comparable", "reason"])


def read_tables(tables_dir: Path, experiments: Iterable[str]) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    runs, failed = {}, {}
    for e in experiments:
        d = Path(tables_dir) / e
        runs[e] = pd.read_csv(d / "runs.csv") if (d / "runs.csv").exists() else pd.DataFrame()
        failed[e] = pd.read_csv(d / "failed.csv") if (d / "failed.csv").exists() else pd.DataFrame()
    return runs, failed
