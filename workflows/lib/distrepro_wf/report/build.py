"""The standalone HTML report: ``reports/index.html`` and ``reports/papers/<paper>.html``.

The front page leads with the evidence: a banner saying what the numbers were measured on
(hardware, real ranks or the simulated platform, ranks per core, seeds), the forest plot of
every paper claim x setting (rule forest, :func:`distrepro_wf.report.plots.forest`) and the table
behind it (claim, paper statement, our setting, effect with its interval, pass region, seeds,
verdict; not-comparable settings listed with their reason); the harness page has its own for
the harness's sanity claims.  Each experiment section then shows its time-to-accuracy table
(:func:`distrepro_wf.report.evidence.tta_table`), its figures and a per-run table linking every run
to its directory, metrics, launch log, config and the command that reruns it.

Then: every paper with its claim statuses, the failed runs, the claims that could
not be compared (missing experiments, settings or runs) and the provenance.  A paper
page: its claims (status per setting, measured value with its 95 % t interval over seeds,
P(A beats B), P(pass), published value, gap; a provisional claim, judged on fewer than 3
seeds, is shown as "provisional" in its own colour, never as reproduced), the published numbers beside ours (absolute numbers only where a run's setting
matches the published one, otherwise "not comparable" with the reason), and per
experiment its figures (each with the command and config that regenerate it, the
hardware and the run time), summary table and failed runs.  Experiments whose ``paper``
matches no paper of claims.yaml go to the harness page.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from jinja2 import Environment, FileSystemLoader, select_autoescape

from impls.backends import is_simulated

from ..claims import evaluate as wfclaims
from ..claims import size as wfsize
from . import evidence
from .pages import paper_of_experiment
from .plots import _time_word, bytes_column, experiment_figures, figure_notes
from ..claims.published import Published, defining_files, run_command
from ..pipeline.config import WORKFLOW_DIR, expand, report_settings

TEMPLATES = WORKFLOW_DIR / "report" / "templates"
HARNESS_PAGE = "harness"
HARNESS_TITLE = "Harness baselines and other experiments"
FIGURE_TITLES = {
    "to_target": "Time-to-accuracy and bytes-to-accuracy (95% t interval over seeds)",
    "scaling": "Weak scaling: throughput speedup and scaling efficiency against nodes, with the ideal line",
    "straggler_sensitivity": "Straggler sensitivity: time per epoch relative to no straggler, against the slowdown factor",
    "time_breakdown": "Time breakdown per epoch: compute, communication, straggler wait, other",
    "staleness": "Staleness of the pushes a parameter server applied (asynchronous modes)",
    "acc_vs_wall": "Validation accuracy against time (wall-clock on real ranks, simulated on the simulated platform), "
                   "per straggler setting; band over seeds",
    "loss_vs_epoch": "Convergence per epoch (training loss, validation accuracy); band over seeds",
    "epoch_time_vs_nodes": "Time per epoch against the number of workers, per straggler setting",
}
#: runs.csv column -> (header, factor into the shown unit): accuracy in %
SUMMARY_COLS = {"final_acc": ("final top-1 (%)", 100.0), "time_per_epoch_s": ("s / epoch", 1.0),
                "time_to_target_s": ("s to target", 1.0), "bytes_sent_per_epoch": ("bytes sent / epoch / rank", 1.0),
                "straggler_delay_s_per_epoch": ("straggler s / epoch", 1.0)}
# keyed by the status shown (claims.shown_status): provisional is never green
STATUS_CLASS = {wfclaims.REPRODUCED: "st-ok", wfclaims.NOT_REPRODUCED: "st-fail",
                wfclaims.INCONCLUSIVE: "st-inc", wfclaims.PROVISIONAL: "st-prov",
                wfclaims.NOT_COMPARABLE: "st-nc"}
#: the size verdict's class (:mod:`distrepro_wf.claims.size`)
SIZE_CLASS = {wfsize.REPRODUCED: "st-ok", wfsize.NOT_REPRODUCED: "st-fail", wfsize.INCONCLUSIVE: "st-inc",
              wfsize.NA: "st-nc"}
#: the interval's position, said without a status word (a provisional row's note)
INTERVAL_WORDS = {wfclaims.REPRODUCED: "the interval lies inside the pass region",
                  wfclaims.NOT_REPRODUCED: "the interval lies outside the pass region",
                  wfclaims.INCONCLUSIVE: "the interval straddles the pass region's boundary"}


def summary_table(runs: pd.DataFrame) -> pd.DataFrame:
    if runs.empty:
        return pd.DataFrame()
    g = runs.groupby(["method", "nodes", "straggler"])
    out = g.size().rename("seeds").to_frame()
    for col, (name, factor) in SUMMARY_COLS.items():
        if col == "bytes_sent_per_epoch":  # at the model size the times use (a paper profile's), labelled
            col, what = bytes_column(runs, col)
            name = f"{name} ({what})" if col != "bytes_sent_per_epoch" else name
        if col not in runs:
            continue
        m, s = g[col].mean() * factor, g[col].std().fillna(0) * factor
        fmt = "{:.3g}" if "bytes" in col else "{:.3f}"
        out[name] = [("n/a" if pd.isna(a) else f"{fmt.format(a)} ± {fmt.format(b)}") for a, b in zip(m, s)]
    return out.reset_index()


def split_counts(summary: pd.DataFrame) -> list[dict[str, Any]]:
    """The front page's verdicts counted apart (issue 24): claims judged on real ranks
    (measurements) and on the simulated platform (model predictions), each with its count per
    status shown."""
    where = summary["runs_on"] if "runs_on" in summary else pd.Series("", index=summary.index)
    out = []
    for key, label in (("real", "real ranks (measured)"), ("simulated", "simulated (model predictions)")):
        sel = summary[where == key]
        out.append({"key": key, "label": label, "n": len(sel), "counts": sel["shown"].value_counts().to_dict()})
    return out


def size_counts(summary: pd.DataFrame) -> dict[str, int]:
    """The front page's size verdicts (:func:`distrepro_wf.claims.size.overall` per claim), counted:
    every size status, n/a included (a claim whose paper states no magnitude, or not judged)."""
    sizes = summary["size"] if "size" in summary else pd.Series(wfsize.NA, index=summary.index)
    counts = sizes.fillna(wfsize.NA).replace("", wfsize.NA).value_counts().to_dict()
    return {st: int(counts.get(st, 0)) for st in wfsize.SIZE_STATUSES}


def not_run(summary: pd.DataFrame, commands: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """The claims this config does not run (their experiment is not in it: neither real nor
    simulated, so in neither of :func:`split_counts`' counts), with the config files that do
    (``commands``: experiment -> (config file, command)); "not comparable" rows naming that file."""
    where = summary["runs_on"].fillna("") if "runs_on" in summary else pd.Series("", index=summary.index)
    sel = summary[~where.isin(("real", "simulated"))]
    files = sorted({commands.get(e, ("", ""))[0] for e in sel["experiment"]} - {""})
    return {"n": len(sel), "files": files}


def _html_table(df: pd.DataFrame, cls: str = "table") -> str:
    if df.empty:
        return "<p><em>none</em></p>"
    return df.to_html(index=False, classes=cls, border=0, escape=True, na_rep="n/a")


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, (int, float)):
        return f"{v:.{digits}g}"
    return str(v)


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path) if path.exists() else pd.DataFrame()


def _hardware(runs: pd.DataFrame) -> str:
    if runs.empty:
        return "no completed runs"
    cols = [c for c in ("host", "cpu_count", "platform", "device", "torch") if c in runs]
    parts = []
    for _, r in runs[cols].drop_duplicates().iterrows():
        d = {c: r[c] for c in cols if not pd.isna(r[c])}
        parts.append(", ".join(f"{k} {v}" for k, v in d.items()))
    return "; ".join(parts)


def _runtime(runs: pd.DataFrame) -> str:
    if runs.empty or "wall_s" not in runs:
        return "n/a"
    w = runs["wall_s"].astype(float)
    sim = "time_kind" in runs and (runs["time_kind"] == "simulated").all()
    return (f"{len(runs)} run(s), training {'time (simulated)' if sim else 'wall time'} {w.sum():.1f} s in total "
            f"(median {w.median():.2f} s, max {w.max():.2f} s per run)")


def _prob(p: Any) -> str:
    """A probability for people: exact 0 and 1 (zero spread) as such, else 3 decimals, clamped."""
    if p is None or pd.isna(p):
        return ""
    if p in (0.0, 1.0):
        return f"{p:g}"
    return "> 0.999" if p > 0.999 else "< 0.001" if p < 0.001 else f"{p:.3f}"


def claim_command(experiment: str, config: dict[str, Any], configfiles: list[str] | None,
                  defined: dict[str, list[str]]) -> tuple[str, str]:
    """(config file(s), command) that produce a claim's rows of claims.csv: this run's config files
    (config/config.yaml by default) where the claim's experiment is in its config, else the
    known config file that defines it (the claim is "not comparable" here), or ("", "") if none."""
    if experiment in (config.get("experiments") or {}):
        files = list(configfiles or []) or ["config/config.yaml"]
        return " ".join(files), run_command(files, "results/tables/claims.csv")
    files = (defined.get(experiment) or [])[:1]
    return (files[0], run_command(files, "results/tables/claims.csv")) if files else ("", "")


def _claim_rows(results: pd.DataFrame, commands: dict[str, tuple[str, str]] | None = None,
                tornado_dir: Path | None = None, rel_to: Path | None = None) -> list[dict[str, Any]]:
    rows = []
    for _, r in results.iterrows():
        setting = ("" if pd.isna(r["nodes"]) else f"n={int(r['nodes'])}, {r['straggler']}")
        ci = ("" if pd.isna(r["ci_low"]) else f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]")
        method = "" if pd.isna(r["interval"]) or not r["interval"] else f"{r['interval']}, df {_fmt(r['df'], 3)}"
        shown = wfclaims.shown_status(r["status"], r["provisional"])
        reason = "" if pd.isna(r["reason"]) else r["reason"]
        if shown == wfclaims.PROVISIONAL and r["status"] in INTERVAL_WORDS and ci:
            reason = "; ".join(x for x in (reason, INTERVAL_WORDS[r["status"]]) if x)
        wins = "" if pd.isna(r["wins"]) or not r["wins"] else f"{r['wins']} seeds"
        rows.append({"claim": r["claim"], "statement": r["statement"], "experiment": r["experiment"],
                     "setting": setting, "status": shown, "cls": STATUS_CLASS[shown], "reason": reason,
                     "measured": _fmt(r["measured"]), "unit": "" if pd.isna(r["unit"]) else r["unit"], "ci": ci,
                     "method": method, "p_better": _prob(r["p_a_beats_b"]), "wins": wins, "p_pass": _prob(r["p_pass"]),
                     "seeds": "" if r["status"] == wfclaims.NOT_COMPARABLE and not r["seeds_a"]
                     else f"{int(r['seeds_a'])}" + (f" / {int(r['seeds_b'])}" if r["compare"] in ("ratio", "difference")
                                                    else ""),
                     "expected": r["expected"], "published": _fmt(r["published"]),
                     "published_note": "" if pd.isna(r["published_note"]) else r["published_note"],
                     "gap": _fmt(r["gap"], 3), "metric": r["metric"], "tta": evidence.fmt_tta(r),
                     "sources": str(r["sources"]).split(),
                     "rerun": (commands or {}).get(r["experiment"], ("", ""))[1], **_label_fields(r, tornado_dir, rel_to)})
    return rows


def _text(r: Any, col: str) -> str:
    v = r.get(col, "") if hasattr(r, "get") else ""
    return v if isinstance(v, str) else ""


def _label_fields(r: Any, tornado_dir: Path | None = None, rel_to: Path | None = None) -> dict[str, Any]:
    """What a claim row is (issue 24): real ranks or simulated, a speed row's "measured (...)" or
    "predicted (...)", the closed-form prediction beside it, the sensitivity verdict
    ("holds across the ranges" / "flips when ..."), a published value fitted on, and the
    tornado figure where one was drawn."""
    cf = r.get("closed_form", math.nan) if hasattr(r, "get") else math.nan
    cf = pd.to_numeric(pd.Series([cf]), errors="coerce").iloc[0]
    # "n/a" reads back from claims.csv as NaN (pandas' default missing values): a reason without a status is n/a
    size_status = _text(r, "size_status") or (wfsize.NA if _text(r, "size_reason") else "")
    verdicts = (wfsize.row_text(wfclaims.shown_status(r["status"], r.get("provisional", "")), size_status,
                                _text(r, "size_reason"))
                if size_status and r.get("status") != wfclaims.NOT_COMPARABLE else "")
    return {"runs_on": _text(r, "runs_on"), "speed_result": _text(r, "speed_result"),
            "closed_form": "" if pd.isna(cf) else _fmt(cf), "sensitivity": _text(r, "sensitivity"),
            "published_fitted": _text(r, "published_fitted"), "tornado": _tornado_src(r, tornado_dir, rel_to),
            "scenarios": _text(r, "scenarios"), "verdicts": verdicts, "size_status": size_status,
            "size_cls": SIZE_CLASS.get(size_status, "")}


#: where rule tornado draws (reports/figures/tornado/<claim>.png), relative to reports/
TORNADO_DIR = Path("figures") / "tornado"


def _tornado_src(r: Any, tornado_dir: Path | None, rel_to: Path | None) -> str:
    if tornado_dir is None or rel_to is None:
        return ""
    png = tornado_dir / f"{r['claim']}.png"
    return os.path.relpath(png, rel_to) if png.exists() else ""


def _evidence_rows(frame: pd.DataFrame, page: str) -> list[dict[str, Any]]:
    """The table behind a page's forest plot: one row per claim x setting (not-comparable ones
    too, with their reason), in the plot's order: claim, the paper's statement, our setting
    (and what it must exercise), effect with its interval, the control's and the published
    value, the pass region, seeds and the verdict shown (provisional never reproduced)."""
    f = frame[frame["page"] == page]
    drawn = evidence.plotted(frame, page)
    order = {i: k for k, (_, _, g) in enumerate(evidence.panels(drawn)) for i in g.index}
    f = f.assign(_o=[order.get(i, len(order) + 1) for i in f.index]).sort_values("_o", kind="stable")
    rows = []
    for i, r in f.iterrows():
        shown = r["shown"]
        reason = r["reason"]
        if shown == wfclaims.PROVISIONAL and r["status"] in INTERVAL_WORDS and not math.isnan(r["ci_low"]):
            reason = "; ".join(x for x in (reason, INTERVAL_WORDS[r["status"]]) if x)
        ctrl = ""
        if r["control"] or not math.isnan(r["control_measured"]):
            cm = r["control_measured"]
            ctrl = (f"{r['control'] or 'control'}: " + ("n/a" if math.isnan(cm) else
                    f"{cm:.3g}" + ("" if math.isnan(r["control_low"]) else
                                    f" [{r['control_low']:.3g}, {r['control_high']:.3g}]")))
        comparable = r["status"] != wfclaims.NOT_COMPARABLE
        seeds = (f"{int(r['seeds_a'])}" + (f" / {int(r['seeds_b'])}" if r["compare"] in ("ratio", "difference") else "")
                 if comparable or r["seeds_a"] else "n/a")
        rows.append({"claim": r["claim"], "paper": r["paper"], "statement": r["statement"], "setting": r["setting"],
                     "mechanism": r["mechanism"], "effect": evidence.fmt_effect(r), "control": ctrl,
                     "published": "" if math.isnan(r["published"]) else f"{r['published']:.3g}",
                     "region": (r["expected"] if isinstance(r.get("expected"), str) and r["expected"]
                                else evidence.fmt_region(r["pass_low"], r["pass_high"])), "seeds": seeds,
                     "status": shown, "cls": STATUS_CLASS[shown], "reason": reason, "drawn": i in drawn.index,
                     "tta": evidence.fmt_tta(r),
                     "scale": "log axis" if r["scale"] == "log" else "linear axis", **_label_fields(r)})
    return rows


def _published_rows(numbers: pd.DataFrame, claims_list: list[dict[str, Any]], results: pd.DataFrame,
                    page_experiments: list[str], config: dict[str, Any]) -> list[dict[str, Any]]:
    """Each published number of a page beside ours: measured only through an absolute claim whose
    setting matched; otherwise "not comparable" with the reason."""
    absolute = {}
    for c in claims_list:
        if c["compare"] == "absolute":
            for s in c["sources"]:
                absolute.setdefault(s, []).append(c["id"])
    if page_experiments:
        ours = "; ".join(f"{e}: {config['experiments'][e]['workload']} on nodes "
                         f"{sorted({int(n) for m in config['experiments'][e]['methods'].values() for n in ((m or {}).get('nodes') or config['experiments'][e]['nodes'])})}"
                         for e in page_experiments)
        default_reason = f"not comparable: reduced scale (ours: {ours}); no run at the published setting"
    else:
        default_reason = "not comparable: no experiment of this paper in the config"
    rows = []
    for _, n in numbers.iterrows():
        value = n["value"] if n["relation"] in ("=", "text") else (
            n["value"].replace("..", "–") if n["relation"] == "range" else f"{n['relation']} {n['value']}")
        ours, cls = default_reason, "st-nc"
        if n["verified"] == "NOT RETRIEVED":
            ours = "not comparable: the number has not been retrieved from the paper yet"
        for cid in absolute.get(n["id"], []):
            r = results[results["claim"] == cid]
            if r.empty:
                continue
            ok = r[r["status"] != wfclaims.NOT_COMPARABLE]
            if len(ok):
                x = ok.iloc[0]
                ci = "" if pd.isna(x["ci_low"]) else f" [{_fmt(x['ci_low'])}, {_fmt(x['ci_high'])}]"
                shown = wfclaims.shown_status(x["status"], x["provisional"])
                ours = f"{_fmt(x['measured'])} {x['unit']}{ci} (claim {cid}: {shown})"
                cls = STATUS_CLASS[shown]
            else:
                ours = f"not comparable: {r.iloc[0]['reason']} (claim {cid})"
        rows.append({"id": n["id"], "paper": n["paper"], "source": n["source"], "location": n["location"],
                     "workload": n["workload"], "method": n["method"], "nodes": n["nodes"], "gpus": n["gpus"],
                     "setting": n["setting"], "metric": n["metric"], "value": value or "—", "unit": n["unit"],
                     "verified": n["verified"], "checked": n["checked"], "ours": ours, "cls": cls,
                     "vcls": "v-yes" if n["verified"] == "yes" else "v-no"})
    return rows


def where_text(exp: dict[str, Any]) -> str:
    """Where an experiment's runs ran and what their times mean (methods may override)."""
    sims = [m for m, spec in exp["methods"].items() if is_simulated((spec or {}).get("backend", exp.get("backend")))]
    if not sims:
        return "Real ranks on this machine (torch.distributed); times are wall-clock times of this machine."
    name = lambda v: v if isinstance(v, str) else (v or {}).get("name")  # noqa: E731
    text = (f"Simulated platform (SimGrid): platform {name(exp.get('platform')) or 'ethernet_10g'}, timing profile "
            f"{name(exp.get('profile')) or 'measured'}; every time is simulated time.  The math is real (the same "
            "code on real tensors); under a paper profile each step is charged the paper's compute time and every "
            "message weighs what the paper's model would (impls/sim/profiles.py).")
    if len(sims) < len(exp["methods"]):
        text += f"  Simulated methods: {', '.join(sims)}; the others ran on real ranks of this machine."
    return text


def _experiment_section(e: str, config: dict[str, Any], tables_dir: Path, out_dir: Path, page_dir: Path,
                        cfg_arg: str) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    exp = config["experiments"][e]
    runs = _read(tables_dir / e / "runs.csv")
    failed = _read(tables_dir / e / "failed.csv")
    cfg_files = "config/config.yaml" + (f" {cfg_arg}" if cfg_arg else "")
    hardware, runtime = _hardware(runs), _runtime(runs)
    figs = [{"src": os.path.relpath(out_dir / "figures" / e / f"{name}.png", page_dir), "title": t, "name": name,
             "cmd": " ".join(f"snakemake --cores 2 {cfg_arg} reports/figures/{e}/{name}.png".split()),
             "config": cfg_files, "hardware": hardware, "runtime": runtime}
            for name in experiment_figures(config, e) for t in [FIGURE_TITLES.get(name, name)]]
    for f in figs:  # a figure without data is not shown: the page says why (plots._empty)
        f["missing"], f["note"] = figure_notes(out_dir / "figures" / e / f"{f['name']}.png")
    wl = config["workloads"].get(exp["workload"], {})
    time_word = _time_word(runs) if not runs.empty else "time"
    baseline = report_settings(config)["baseline"]  # config's report.baseline (schema default: allreduce_sgd)
    tta = evidence.tta_display(evidence.tta_table(runs, baseline), time_word, baseline)
    target = (f"{runs['target_metric'].dropna().iloc[0]} >= {runs['target_value'].dropna().iloc[0]:g}"
              if not runs.empty and "target_value" in runs and runs["target_value"].notna().any() else "n/a")
    section = {"where": where_text(exp), "tta": tta, "tta_target": target, "time_word": time_word,
        "runs": evidence.run_rows(e, runs, failed, tables_dir.parent, page_dir),
        "name": e, "title": exp.get("title", e), "paper": exp.get("paper"),
        "workload": exp["workload"],
        "grid": f"methods {', '.join(exp['methods'])} x nodes {exp['nodes']} x stragglers "
                f"{exp['stragglers']} x seeds {exp['seeds']}",
        "config_yaml": yaml.safe_dump({"experiments": {e: exp}, "workloads": {exp["workload"]: wl}},
                                      sort_keys=False, default_flow_style=None),
        "figures": figs, "summary": _html_table(summary_table(runs)),
        "n_ok": len(runs), "n_failed": len(failed), "failed": _html_table(failed[
            [c for c in ("method", "nodes", "straggler", "seed", "kind", "reason", "log") if c in failed]]),
        "hardware": hardware, "runtime": runtime,
    }
    return section, runs, failed


def build(experiments: list[str], config: dict[str, Any], tables_dir: Path, out: Path, bench_files: list[Path],
          configfiles: list[str] | None, published: Published, results: pd.DataFrame) -> list[Path]:
    """Write ``out`` (index.html) and ``out.parent/papers/<page>.html``; return the written paths.

    A pure function of its inputs (the rule's declared inputs): the tables under
    ``tables_dir``, the evaluated claims ``results`` (rule compare's claims.csv, never
    re-evaluated here), the published data and the benchmark CSVs ``bench_files``.
    """
    out = Path(out)
    out_dir = out.parent
    page_dir = out_dir / "papers"
    summary = (wfclaims.summarize(results) if len(results)
               else pd.DataFrame(columns=["claim", "paper", "status", "shown"]))
    cfg_arg = " ".join(f"--configfile {c}" for c in (configfiles or []))
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    frame = evidence.claim_frame(results, published.claims, published.papers) if len(results) else None
    forest_src = {pg: os.path.relpath(out_dir / "figures" / f"forest_{pg}.png", d)
                  for pg, d in (("paper", out_dir), ("harness", page_dir))}
    pages: dict[str, list[str]] = {p: [] for p in published.papers} | {HARNESS_PAGE: []}
    for e in experiments:
        pid = paper_of_experiment(published.papers, config["experiments"][e].get("paper"))
        pages[pid or HARNESS_PAGE].append(e)
    titles = {p: v["title"] for p, v in published.papers.items()} | {HARNESS_PAGE: HARNESS_TITLE}

    defined = defining_files()
    commands = {e: claim_command(e, config, configfiles, defined)
                for e in set(results["experiment"]) if isinstance(e, str)} if len(results) else {}
    failed_all, prov, written, index_rows, all_runs = [], [], [], [], []
    for pid, exps in pages.items():
        sections = []
        for e in exps:
            s, runs, failed = _experiment_section(e, config, tables_dir, out_dir, page_dir, cfg_arg)
            sections.append(s)
            all_runs.append(runs)
            if len(failed):
                failed_all.append(failed.assign(experiment=e))
            if not runs.empty:
                prov.append(runs[[c for c in ("git_commit", "torch", "python", "host", "cpu_count", "platform")
                                  if c in runs]].drop_duplicates())
        res = results[results["paper"] == pid]
        summ = summary[summary["paper"] == pid]
        paper_claims = [c for c in published.claims if c["paper"] == pid]
        numbers = published.numbers[published.numbers["page"] == pid]
        srcs = sorted({k for s in numbers["source"] for k in s.split("+") if k != "-"})
        info = published.papers.get(pid, {"title": HARNESS_TITLE, "citation": "Experiments of the harness itself "
                                          "and experiments whose paper matches no paper of claims.yaml."})
        # experiments this page's claims were judged on that belong to another paper's page (an
        # experiment has one page; e.g. the signSGD experiment serves the majority-vote paper too)
        home = {e: p for p, es in pages.items() for e in es}
        elsewhere = [{"experiment": e, "page": home[e], "title": titles[home[e]]}
                     for e in dict.fromkeys(c["experiment"] for c in paper_claims) if e in home and e not in exps]
        page = env.get_template("paper.html.j2").render(
            pid=pid, title=titles[pid], info=info, sections=sections,
            claims=_claim_rows(res, commands, out_dir / TORNADO_DIR, page_dir), elsewhere=elsewhere,
            counts=summ["shown"].value_counts().to_dict(),
            published=_published_rows(numbers, paper_claims, results, exps, config),
            sources=published.sources[published.sources["key"].isin(srcs)].to_dict("records"),
            generated=generated, regen=" ".join(f"snakemake --cores 2 {cfg_arg} reports/papers/{pid}.html".split()),
            status_class=STATUS_CLASS,
            harness_evidence=_evidence_rows(frame, "harness") if pid == HARNESS_PAGE and frame is not None else None,
            forest_src=forest_src["harness"])
        path = page_dir / f"{pid}.html"
        _write(path, page)
        written.append(path)
        verified = int((numbers["verified"] == "yes").sum())
        index_rows.append({"pid": pid, "title": titles[pid], "citation": info.get("citation", ""),
                           "experiments": exps, "n_numbers": len(numbers), "n_verified": verified,
                           "counts": summ["shown"].value_counts().to_dict(), "n_claims": len(summ),
                           "seed": info.get("seed", pid != HARNESS_PAGE),
                           "n_runs_failed": sum(s["n_failed"] for s in sections),
                           "n_runs_ok": sum(s["n_ok"] for s in sections)})

    failed_df = pd.concat(failed_all, ignore_index=True) if failed_all else pd.DataFrame()
    missing = summary[summary["status"] == wfclaims.NOT_COMPARABLE][["paper", "claim", "experiment", "reason"]]
    missing = missing.assign(configfile=[commands.get(e, ("", ""))[0] for e in missing["experiment"]],
                             command=[commands.get(e, ("", ""))[1] for e in missing["experiment"]])
    no_runs = [e for e in experiments if _read(tables_dir / e / "runs.csv").empty]
    absent = _absent_runs(experiments, config, tables_dir)
    benches = [{"name": Path(p).name, "table": _html_table(pd.read_csv(p).tail(40))} for p in sorted(map(Path, bench_files))]
    index = env.get_template("index.html.j2").render(
        papers=index_rows, n_failed=len(failed_df), generated=generated,
        failed=_html_table(failed_df[[c for c in ("experiment", "method", "nodes", "straggler", "seed", "kind", "reason", "log")
                                      if c in failed_df]]) if len(failed_df) else "",
        missing=missing.to_dict("records"), no_runs=no_runs, absent=_html_table(absent) if len(absent) else "",
        totals=summary["shown"].value_counts().to_dict(), n_claims=len(summary), size_totals=size_counts(summary),
        size_class=SIZE_CLASS, size_tolerance=wfsize.TOLERANCE,
        split=split_counts(summary), not_run=not_run(summary, commands),
        n_numbers=len(published.numbers), n_verified=int((published.numbers["verified"] == "yes").sum()),
        provenance=_html_table(pd.concat(prov).drop_duplicates()) if prov else "<p><em>no runs</em></p>",
        tables=csv_links(tables_dir, experiments, out_dir),
        benches=benches, regen=" ".join(f"snakemake --cores 2 {cfg_arg}".split()),
        status_class=STATUS_CLASS, banner=evidence.banner(all_runs),
        evidence=_evidence_rows(frame, "paper") if frame is not None else [], forest_src=forest_src["paper"],
        forest_cmd=" ".join(f"snakemake --cores 2 {cfg_arg} reports/figures/forest_paper.png".split()))
    _write(out, index)
    written.insert(0, out)
    return written


def csv_links(tables_dir: Path, experiments: list[str], out_dir: Path) -> list[dict[str, Any]]:
    """The CSV tables behind the report, as relative links from ``out_dir`` (work from any copy
    of the reproduction's directory): the claims' tables, then each experiment's."""
    groups = [("claims", sorted(Path(tables_dir).glob("*.csv")))]
    groups += [(e, sorted((Path(tables_dir) / e).glob("*.csv"))) for e in experiments]
    return [{"group": g, "files": [{"name": f.name, "href": os.path.relpath(f, out_dir)} for f in fs]}
            for g, fs in groups if fs]


def _absent_runs(experiments: list[str], config: dict[str, Any], tables_dir: Path) -> pd.DataFrame:
    """Runs of the configured grid that are in neither runs.csv nor failed.csv (e.g. never collected)."""
    keys = ["experiment", "method", "nodes", "straggler", "seed"]
    rows = []
    for e in experiments:
        seen = set()
        for name in ("runs.csv", "failed.csv"):
            t = _read(tables_dir / e / name)
            if not t.empty:
                seen |= {(m, int(n), str(st), int(sd)) for m, n, st, sd in
                         zip(t["method"], t["nodes"], t["straggler"], t["seed"])}
        rows += [r._asdict() for r in expand(config, [e]) if (r.method, r.nodes, r.straggler, r.seed) not in seen]
    return pd.DataFrame(rows, columns=keys)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
