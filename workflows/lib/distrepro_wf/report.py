"""The standalone HTML report: reports/index.html.

Per experiment: its setting, figures (each with the command that regenerates it),
a summary table (mean and std over seeds), and the runs that failed; then the
provenance of the runs and any benchmark CSVs present under results/bench/.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, FileSystemLoader, select_autoescape

from .config import WORKFLOW_DIR

TEMPLATES = WORKFLOW_DIR / "report" / "templates"
FIGURE_TITLES = {
    "loss_vs_epoch": "Convergence per epoch (training loss, validation accuracy)",
    "acc_vs_wall": "Validation accuracy against wall-clock time, per straggler setting",
    "epoch_time_vs_nodes": "Time per epoch against the number of workers, per straggler setting",
}
SUMMARY_COLS = {"final_acc": "final top-1", "time_per_epoch_s": "s / epoch", "time_to_target_s": "s to target",
                "bytes_sent_per_epoch": "bytes sent / epoch / rank", "straggler_delay_s_per_epoch":
                "straggler s / epoch"}


def summary_table(runs: pd.DataFrame) -> pd.DataFrame:
    if runs.empty:
        return pd.DataFrame()
    g = runs.groupby(["method", "nodes", "straggler"])
    out = g.size().rename("seeds").to_frame()
    for col, name in SUMMARY_COLS.items():
        m, s = g[col].mean(), g[col].std().fillna(0)
        fmt = "{:.3g}" if "bytes" in col else "{:.3f}"
        out[name] = [("n/a" if pd.isna(a) else f"{fmt.format(a)} ± {fmt.format(b)}") for a, b in zip(m, s)]
    return out.reset_index()


def _html_table(df: pd.DataFrame, cls: str = "table") -> str:
    if df.empty:
        return "<p><em>none</em></p>"
    return df.to_html(index=False, classes=cls, border=0, escape=True, na_rep="n/a")


def build(experiments: list[str], config: dict[str, Any], tables_dir: Path, out: Path,
          bench_dir: Path, configfiles: list[str] | None = None) -> str:
    out = Path(out)
    cfg_arg = " ".join(f"--configfile {c}" for c in (configfiles or []))
    sections, failed_all, prov = [], [], []
    for e in experiments:
        exp = config["experiments"][e]
        runs = pd.read_csv(tables_dir / e / "runs.csv")
        failed = pd.read_csv(tables_dir / e / "failed.csv")
        failed_all.append(failed)
        if not runs.empty:
            prov.append(runs[["git_commit", "torch", "python", "host"]].drop_duplicates())
        figs = [{"src": os.path.relpath(out.parent / "figures" / e / f"{name}.png", out.parent), "title": t,
                 "cmd": f"snakemake --cores 2 {cfg_arg} reports/figures/{e}/{name}.png".replace("  ", " ")}
                for name, t in FIGURE_TITLES.items()]
        sections.append({
            "name": e, "title": exp.get("title", e), "paper": exp.get("paper"),
            "workload": exp["workload"], "network": exp.get("network", "none"),
            "grid": f"methods {', '.join(exp['methods'])} x nodes {exp['nodes']} x stragglers "
                    f"{exp['stragglers']} x seeds {exp['seeds']}",
            "figures": figs, "summary": _html_table(summary_table(runs)),
            "n_ok": len(runs), "n_failed": len(failed), "failed": _html_table(failed[
                [c for c in ("method", "nodes", "straggler", "seed", "reason", "log") if c in failed]]),
        })
    failed_df = pd.concat(failed_all, ignore_index=True) if failed_all else pd.DataFrame()
    benches = []
    for p in sorted(Path(bench_dir).glob("*.csv")):
        benches.append({"name": p.name, "table": _html_table(pd.read_csv(p).tail(20))})
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    page = env.get_template("index.html.j2").render(
        sections=sections, n_failed=len(failed_df),
        failed=_html_table(failed_df[[c for c in ("experiment", "method", "nodes", "straggler", "seed", "reason")
                                      if c in failed_df]]) if len(failed_df) else "",
        provenance=_html_table(pd.concat(prov).drop_duplicates()) if prov else "<p><em>no runs</em></p>",
        benches=benches, regen=html.escape(f"snakemake --cores 2 {cfg_arg}".strip()),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(page)
    tmp.replace(out)
    return page
