"""The report's evidence tables, computed from the pipeline's tables (no plotting, no HTML).

Why a module of its own: the report leads with the evidence (the forest plot of every claim x
setting and the table behind it, the time-to-accuracy table per experiment), and both the plot
rule and the report rule need the same numbers.  Computing them here keeps the Snakemake
scripts thin and lets the tests check the numbers without a browser.

* :func:`claim_frame`: ``claims.csv`` with the columns the forest plot reads (``page``,
  ``scale``, ``pass_low``/``pass_high``, ``control_*``, ``setting``, ``mechanism``).  The
  claims rule writes them; an older claims.csv without them still renders: the pass region is
  derived from claims.yaml's ``expect`` (:func:`distrepro_wf.claims.evaluate.pass_region`), the scale
  from ``compare``, the page from the paper's ``seed`` flag, and what cannot be derived (a
  control setting) is NaN / "" and shown as "n/a".
* :func:`tta_table`: time to accuracy per method x setting, every run counted (a run that
  never reached the target is censored at its last evaluation): "reached k of n", the
  Kaplan-Meier median with its interval, and against AR-SGD at the same nodes and straggler
  the log-rank p-value and the speedup (:mod:`distrepro_wf.claims.survival`).
* :func:`run_rows`: one row per run (completed or failed) with relative links to its run
  directory, metrics, launch log and the exact command that reruns it alone.
* :func:`banner`: hardware, backend, ranks per core and seeds of the runs behind the report.
"""

from __future__ import annotations

import json
import math
import os
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from impls.backends import backend_of, is_simulated

from ..claims import evaluate as wfclaims
from ..pipeline import launch as wflaunch
from ..claims.survival import km_median

#: the contract's new claims.csv columns and their value when an older claims.csv lacks them
CLAIM_DEFAULTS = {"page": None, "mechanism": "", "pass_low": math.nan, "pass_high": math.nan, "scale": None,
                  "control": "", "control_measured": math.nan, "control_low": math.nan, "control_high": math.nan,
                  "setting": None, "runs_on": "", "size_status": "", "size_reason": "", "size_low": math.nan,
                  "size_high": math.nan, "scenarios": "", "gate_context": "", "predicted": math.nan}
PAPER_PAGE, HARNESS_PAGE = "paper", "harness"


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def claim_frame(results: pd.DataFrame, claims_yaml: list[dict[str, Any]] | None = None,
                papers: dict[str, dict[str, Any]] | None = None) -> pd.DataFrame:
    """``results`` (claims.csv) with every column of :data:`CLAIM_DEFAULTS` filled, plus
    ``shown`` (the status the report shows: provisional is never reproduced) and ``label``
    (one line per claim x setting, the forest plot's row label).

    A column the claims rule wrote is kept as written; a missing one (or a missing value) is
    derived where that is honest (pass region from claims.yaml, scale from ``compare``, page:
    "harness" for a claim of a paper marked ``seed: false`` or of no known paper) and left
    NaN / "" otherwise."""
    df = results.copy()
    by_id = {c["id"]: c for c in (claims_yaml or [])}
    papers = papers or {}
    for col, default in CLAIM_DEFAULTS.items():
        if col not in df:
            df[col] = default
    for c in ("pass_low", "pass_high", "control_measured", "control_low", "control_high", "published", "measured",
              "ci_low", "ci_high", "nodes", "size_low", "size_high", "predicted"):
        df[c] = pd.to_numeric(df[c], errors="coerce") if c in df else math.nan
    for c in ("mechanism", "control", "reason", "provisional", "straggler", "unit", "runs_on", "size_status",
              "size_reason", "scenarios", "gate_context"):
        df[c] = df[c].astype(object).fillna("").astype(str) if c in df else ""
    for c in ("page", "scale", "setting"):  # an all-empty column reads back as float NaN: text from here on
        df[c] = df[c].astype(object)
    for i, r in df.iterrows():
        spec = by_id.get(r["claim"])
        if (math.isnan(r["pass_low"]) and math.isnan(r["pass_high"])) and spec and "expect" in spec:
            lo, _, hi, _ = wfclaims.pass_region(spec["expect"])
            df.at[i, "pass_low"], df.at[i, "pass_high"] = lo, hi
        if not isinstance(r["scale"], str) or not r["scale"]:
            df.at[i, "scale"] = "log" if r["compare"] == "ratio" else "linear"
        if not isinstance(r["page"], str) or not r["page"]:
            p = papers.get(r["paper"])
            df.at[i, "page"] = PAPER_PAGE if p is not None and p.get("seed", True) else HARNESS_PAGE
        if not isinstance(r["setting"], str) or not r["setting"]:
            df.at[i, "setting"] = (f"{int(r['nodes'])} nodes, {'no straggler' if r['straggler'] == 'none' else r['straggler']}"
                                   f"; experiment {r['experiment']}" if not math.isnan(r["nodes"])
                                   else f"experiment {r['experiment']}")
    df["shown"] = [wfclaims.shown_status(s, p) for s, p in zip(df["status"], df["provisional"])]
    df["label"] = [f"{c} @ {'n=' + str(int(n)) + ', ' + s if not math.isnan(n) else 'no setting'}"
                   for c, n, s in zip(df["claim"], df["nodes"], df["straggler"])]
    return df


def plotted(frame: pd.DataFrame, page: str) -> pd.DataFrame:
    """The forest plot's rows of ``page``: the claim x settings with an estimate (a
    not-comparable setting has none: it is listed in the table, with its reason, not drawn)."""
    f = frame[(frame["page"] == page) & (frame["status"] != wfclaims.NOT_COMPARABLE)]
    return f[pd.to_numeric(f["measured"], errors="coerce").notna()]


def panels(frame: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """The forest plot's panels: one per (scale, unit), ratios (log axis) first, so that a
    speedup and an accuracy difference in points never share an axis."""
    out = []
    for (scale, unit), g in frame.groupby(["scale", "unit"], sort=False):
        out.append((scale, unit, g))
    return sorted(out, key=lambda t: (t[0] != "log", t[1]))


# ------------------------------------------------------------------------------- time to accuracy

def tta_table(runs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Time to accuracy per (method, nodes, straggler), every run counted: a run that never
    reached the target is censored at its last evaluation (:func:`distrepro_wf.claims.evaluate.censored_times`),
    never dropped nor imputed.  Per row: runs and how many reached the target, the Kaplan-Meier
    median time to it with its 95 % interval (:func:`distrepro_wf.claims.survival.km_median`; NaN,
    "undefined", when fewer than half can be shown to arrive), the mean steps / epochs to the
    target of the runs that reached it, and against ``baseline`` at the same nodes and
    straggler: the log-rank test's p-value (:func:`distrepro_wf.claims.survival.logrank`) and the
    speedup T_AR / T_method, as the claims judge it (:func:`distrepro_wf.claims.evaluate.censored_judgement`):
    the geometric mean over seeds with its t interval when every run of both reached the target,
    else the ratio of the two medians (no interval; NaN when one is undefined)."""
    cols = ["method", "nodes", "straggler", "runs", "reached", "not_reached", "median_s", "median_low_s",
            "median_high_s", "to_target", "speedup", "speedup_low", "speedup_high", "speedup_seeds", "interval",
            "logrank_p"]
    if runs.empty or "time_to_target_s" not in runs or not wfclaims.has_target(runs):
        return pd.DataFrame(columns=cols)
    t, hit = wfclaims.censored_times(runs)
    r = runs.assign(_t=t, _hit=hit)
    r = r[r["_t"].notna()]
    steps = "steps_to_target" if "steps_to_target" in r and r["steps_to_target"].notna().any() else (
        "epochs_to_target" if "epochs_to_target" in r else None)
    less = {"op": "<", "value": 1.0, "tolerance": 0.0}
    rows = []
    for (m, n, s), g in r.groupby(["method", "nodes", "straggler"], sort=True):
        km = km_median(g["_t"].to_numpy(float), g["_hit"].to_numpy(bool))
        ok = g[g["_hit"]]
        row = {"method": m, "nodes": int(n), "straggler": s, "runs": len(g), "reached": km.reached,
               "not_reached": len(g) - km.reached, "median_s": km.median, "median_low_s": km.low,
               "median_high_s": km.high,
               "to_target": (f"{ok[steps].mean():.3g} {steps.split('_')[0]}" if steps and len(ok) else ""),
               "speedup": math.nan, "speedup_low": math.nan, "speedup_high": math.nan, "speedup_seeds": 0,
               "interval": "", "logrank_p": math.nan}
        base = r[(r["method"] == baseline) & (r["nodes"] == n) & (r["straggler"] == s)]
        if m != baseline and len(base):
            by_seed = lambda d: (d.groupby("seed")["_t"].mean(), d.groupby("seed")["_hit"].all())  # noqa: E731
            _, f, _ = wfclaims.censored_judgement(less, *by_seed(base), *by_seed(g))
            row.update(speedup=f["measured"], speedup_low=f["ci_low"], speedup_high=f["ci_high"],
                       speedup_seeds=f["n"], logrank_p=f["tta_logrank_p"],
                       interval=("no interval (one seed)" if f["iv"] is not None and not f["iv"].method
                                 else f["interval"]))
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def _secs(v: float) -> str:
    return "not reached" if v == math.inf else "n/a" if math.isnan(v) else f"{v:.4g}"


def tta_display(t: pd.DataFrame, time_word: str, baseline: str) -> list[dict[str, Any]]:
    """:func:`tta_table` as the report's rows (text cells, "n/a" where there is no number;
    "undefined" for a median that fewer than half the runs reach)."""
    out = []
    for _, r in t.iterrows():
        if r["method"] == baseline:
            sp = "1 (baseline)"
        elif math.isnan(r["speedup"]):
            sp = "n/a"
        else:
            ci = ("" if math.isnan(r["speedup_low"]) else
                  f" [{r['speedup_low']:.3g}, {r['speedup_high']:.3g}]")
            sp = f"{r['speedup']:.3g}x{ci}"
        med = ("undefined" if math.isnan(r["median_s"]) else f"{r['median_s']:.4g} s") + (
            "" if math.isnan(r["median_low_s"]) else f" [{_secs(r['median_low_s'])}, {_secs(r['median_high_s'])}]")
        out.append({"method": r["method"], "nodes": r["nodes"], "straggler": r["straggler"],
                    "reached": f"{r['reached']} of {r['runs']}", "miss": bool(r["not_reached"]),
                    "median": med, "to_target": r["to_target"] or "n/a", "speedup": sp,
                    "seeds": f"{r['speedup_seeds']}" if r["speedup_seeds"] else "", "interval": r["interval"],
                    "p": "" if r["method"] == baseline else "n/a" if math.isnan(r["logrank_p"])
                    else f"{r['logrank_p']:.2g}", "time_word": time_word})
    return out


# ------------------------------------------------------------------------------- runs and links

def run_path(e: str, m: str, n: Any, s: str, seed: Any) -> str:
    """A run's directory under results/ (the layout of rule train: runs/<e>/<m>/n<N>/<s>/seed<S>)."""
    return f"runs/{e}/{m}/n{int(n)}/{s}/seed{int(seed)}"


def _recorded_world(run_dir: Path, cfg: dict[str, Any]) -> int | None:
    """The world :func:`distrepro_wf.pipeline.runs.execute_group` launched the run with, as its
    ``outcome.json`` records it, if that outcome is of this very config; else None."""
    from ..pipeline.runs import config_sha

    try:
        out = json.loads((run_dir / "outcome.json").read_text())
        world = out.get("world") if out.get("config_sha") == config_sha(cfg) else None
    except (OSError, ValueError, AttributeError):
        return None
    return world if isinstance(world, int) and world >= 1 else None


def run_command(results_root: Path, rel: str, nodes: int) -> str:
    """The command that reruns one run alone, from its resolved config ``run.json``: torchrun
    on the run's world (workers plus server ranks) for real ranks, one ``impls.sim`` process
    for a simulated run (as :func:`distrepro_wf.pipeline.runs.execute_group` starts them).  Without
    run.json (not written yet) the world is the node count.  The world is the one the run's
    launch recorded in ``outcome.json``; only without that record is it worked out from the
    config (:func:`distrepro_wf.pipeline.launch.launch_world`, which imports torch: 2-3 s)."""
    from ..pipeline.launch import launch_world

    cfg_path = Path("results") / rel / "run.json"
    out = f"/tmp/rerun/{rel.replace('/', '_')}"
    cfg: dict[str, Any] = {"nodes": nodes}
    p = results_root / rel / "run.json"
    if p.exists():
        try:
            cfg = json.loads(p.read_text())
        except (OSError, ValueError):
            pass
    if is_simulated(cfg.get("backend")):
        return shlex.join(["python", "-m", backend_of(cfg.get("backend")).entry_module, "--config", str(cfg_path),
                           "--out", out,
                           "--calibration", "results/calibration/measured.json"])
    world = (_recorded_world(results_root / rel, cfg) or launch_world(cfg)) if "algorithm" in cfg else nodes
    return shlex.join(wflaunch.run_command(world, cfg_path, out, python="python"))


def run_rows(e: str, runs: pd.DataFrame, failed: pd.DataFrame, results_root: Path, page_dir: Path,
             metric_col: str = "final_acc", metric_scale: float = 100.0) -> list[dict[str, Any]]:
    """One row per run of experiment ``e`` (completed, then failed) with relative links
    (from ``page_dir``) to its run directory, metrics, launch log and its exact command."""
    rel = lambda p: os.path.relpath(results_root / p, page_dir)  # noqa: E731
    rows = []
    for kind, t in (("ok", runs), ("failed", failed)):
        if t is None or t.empty:
            continue
        for _, r in t.sort_values(["method", "nodes", "straggler", "seed"]).iterrows():
            path = run_path(e, r["method"], r["nodes"], r["straggler"], r["seed"])
            log = r.get("log") if isinstance(r.get("log"), str) and r.get("log") else (
                f"results/logs/train/{e}/n{int(r['nodes'])}.log")
            v = _num(r.get(metric_col))
            rows.append({"method": r["method"], "nodes": int(r["nodes"]), "straggler": r["straggler"],
                         "seed": int(r["seed"]), "status": kind,
                         "metric": "n/a" if math.isnan(v) else f"{v * metric_scale:.2f}",
                         "epoch_s": "n/a" if math.isnan(_num(r.get("time_per_epoch_s"))) else
                         f"{_num(r.get('time_per_epoch_s')):.4g}",
                         "tta": "n/a" if math.isnan(_num(r.get("time_to_target_s"))) else
                         f"{_num(r.get('time_to_target_s')):.4g}",
                         "reason": "" if kind == "ok" else str(r.get("reason", "")),
                         "dir": rel(path) + "/", "metrics": rel(path + "/run/metrics") + "/",
                         "config": rel(path + "/run.json"),
                         "log": os.path.relpath(results_root.parent / log, page_dir),
                         "cmd": run_command(results_root, path, int(r["nodes"]))})
    return rows


# ------------------------------------------------------------------------------- banner

def banner(all_runs: list[pd.DataFrame]) -> dict[str, str]:
    """What the numbers were measured on: hardware (host, cores, device), backend (real ranks
    or the simulated platform with its network and profile), ranks per core of the real-rank
    runs (above 1 the ranks share cores: wall-clock times include that contention), seeds."""
    runs = pd.concat([r for r in all_runs if not r.empty], ignore_index=True) if any(
        not r.empty for r in all_runs) else pd.DataFrame()
    if runs.empty:
        return {"hardware": "n/a (no completed runs)", "backend": "n/a", "ranks": "n/a", "seeds": "n/a"}
    hw = []
    for c in ("host", "cpu_count", "device"):
        if c in runs:
            vals = sorted({str(v) for v in runs[c].dropna()})
            hw.append(f"{ {'host': 'host', 'cpu_count': 'cores', 'device': 'device'}[c]} {', '.join(vals) or 'n/a'}")
    backend = runs["backend"] if "backend" in runs else pd.Series("torch", runs.index)
    simulated = backend.map(is_simulated).astype(bool)
    real, sim = runs[~simulated], runs[simulated]
    parts = []
    if len(real):
        net = (", ".join(sorted(set(real["network"].dropna().astype(str)))) if "network" in real and
               real["network"].notna().any() else "loopback (one host)")
        parts.append(f"real ranks (torch.distributed) for {len(real)} runs, network: {net}, wall-clock times")
    if len(sim):
        plats = sorted({f"{p} / {q}" for p, q in zip(sim.get("sim_platform", pd.Series("n/a", sim.index)).fillna("n/a"),
                                                      sim.get("sim_profile", pd.Series("n/a", sim.index)).fillna("n/a"))})
        parts.append(f"simulated platform (SimGrid) for {len(sim)} runs, platform / profile: {', '.join(plats)}, "
                     "simulated times")
    ranks = "n/a"
    if len(real) and "cpu_count" in real and real["cpu_count"].notna().any():
        per = real["nodes"].astype(float) / real["cpu_count"].astype(float)
        ranks = (f"{per.min():.2g} to {per.max():.2g} ranks per core (real-rank runs; above 1 the ranks share cores)"
                 if per.min() != per.max() else f"{per.max():.2g} ranks per core")
    elif len(sim):
        ranks = "simulated runs: one process per run, ranks are simulated hosts"
    keys = [k for k in ("experiment", "method", "nodes", "straggler") if k in runs]
    seeds = runs.groupby(keys)["seed"].nunique() if keys and len(runs) else pd.Series([0])
    return {"hardware": "; ".join(hw) or "n/a", "backend": "; ".join(parts), "ranks": ranks,
            "seeds": (f"{seeds.min()} to {seeds.max()} seeds per setting" if seeds.min() != seeds.max()
                      else f"{seeds.max()} seeds per setting") + f" ({len(runs)} completed runs)"}


def fmt_effect(r: pd.Series) -> str:
    """Effect ± interval in the claim's scale, e.g. "0.83x [0.80, 0.86]" or "-0.11 pt [-0.64, 0.41]"."""
    if r["status"] == wfclaims.NOT_COMPARABLE or math.isnan(_num(r["measured"])):
        return "n/a"
    u = r["unit"] or ""
    u = "x" if r["scale"] == "log" and not u else u
    sep = "" if u == "x" else " "
    lo, hi = _num(r["ci_low"]), _num(r["ci_high"])
    ci = "no interval" if math.isnan(lo) else f"[{lo:.3g}, {hi:.3g}]"
    return f"{_num(r['measured']):.3g}{sep}{u} {ci}"


def fmt_tta(r: pd.Series) -> str:
    """A claim row's time to the target with every run counted (the ``tta_*`` columns of
    :mod:`distrepro_wf.claims.evaluate`), "" when it has none: "time to target: reached 4 of 5 / 5 of 5;
    median 14.7 s [13.3, not reached] / 48.7 s [43.2, 58]; log-rank p = 0.012"."""
    runs_a = _num(r.get("tta_runs_a"))
    if math.isnan(runs_a) or runs_a <= 0:
        return ""
    def med(side: str) -> str:
        m, lo, hi = (_num(r.get(f"tta_median_{side}{k}")) for k in ("", "_low", "_high"))
        text = "undefined" if math.isnan(m) else f"{m:.3g} s"
        end = lambda v: "not reached" if v == math.inf else f"{v:.3g}"  # noqa: E731
        return text + ("" if math.isnan(lo) else f" [{end(lo)}, {end(hi)}]")
    p = _num(r.get("tta_logrank_p"))
    return (f"time to target: reached {int(_num(r['tta_reached_a']))} of {int(runs_a)} / "
            f"{int(_num(r.get('tta_reached_b')))} of {int(_num(r.get('tta_runs_b')))}; "
            f"median {med('a')} / {med('b')}; log-rank p = " + ("n/a" if math.isnan(p) else f"{p:.2g}"))


def fmt_region(lo: float, hi: float) -> str:
    if np.isinf(lo) and np.isinf(hi):
        return "any"
    if np.isinf(lo) or math.isnan(lo):
        return f"< {hi:.3g}" if not math.isnan(hi) else "n/a"
    if np.isinf(hi) or math.isnan(hi):
        return f"> {lo:.3g}"
    return f"[{lo:.3g}, {hi:.3g}]"
