"""``reports/plan/<name>.html``: a plan's page, one self-contained HTML file.

Sections (each an element with an ``id``, its tables marked with ``data-*`` attributes so a
test can read the page without a browser): the described cluster and the command; the
ranking per node count (time per epoch and rank in each bandwidth x straggler cell, then every
column of ``results/plan/<name>.csv``); the time to target where epochs are given; a crossover
map per node count (the fastest method per compute per step x NIC rate, the user's points
marked); the ranking's sensitivity read from the maps; each method's accuracy cost as
published ("published, not measured here"); what the model does not capture.  After ``verify``
(:mod:`distrepro_wf.plan.verify`) a ranking cell that ran on the cluster also shows its measured
step time and the error, marked **verified** when within the tolerance, and a section lists every
verified row with whether the order agrees.
"""

from __future__ import annotations

import html
import math
from typing import Any

import pandas as pd

#: what the plan's model of time leaves out: stated on every page
NOT_CAPTURED = [
    "Accuracy: every time here is per step or per epoch; the epochs a method needs to a target are yours "
    "to give (plan.epochs_to_target). Gossip and asynchronous methods may need more epochs than AR-SGD; "
    "the published costs below are one recipe's, not your model's.",
    "The simulated step runs a tiny stand-in model's math; its compute is charged as your step_ms and every "
    "message weighs your model's bytes (impls/sim/profiles.py). The backward pass is modelled as a uniform "
    "share of the step (backward_fraction), and all-reduce buckets follow the stand-in's layout, which "
    "decides how much of AR-SGD's all-reduce hides behind backward.",
    "The network is SimGrid's flow-level TCP model (LV08) on the described topology: no NCCL/gloo transport "
    "details (rings, channels, protocol switches), no packet loss, no other jobs' traffic unless "
    "topology: racks with background_load is given.",
    "Stragglers are the experiments' straggler model (a slow node as a delay after its compute); a few steps "
    "per point cannot show a rare slowdown (a random straggler needs more plan.steps).",
    "An asynchronous method's (AD-PSGD's) few steps per point need not be its steady state yet: its step "
    "time can be off by tens of percent where the network is slow (not always monotonic in the NIC rate); "
    "more plan.steps narrow this.",
    "No data loading, I/O, checkpointing, evaluation or start-up time; compute per step has no step-to-step "
    "variation unless plan.model.jitter is given.",
    "Nothing here but the verified rows (snakemake verify) was measured on your cluster: a plan is a "
    "prediction from the numbers you gave.",
]
CSS = """body{font-family:sans-serif;max-width:1200px;margin:1em auto;padding:0 1em}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f3f3f3}td.m{text-align:left}td.user{outline:3px solid #000;font-weight:bold}
.note{color:#555;font-size:90%}.rank1{font-weight:bold}.verified{color:#060;font-weight:bold}
.unverified{color:#a00}"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _fmt(x: float, digits: int = 3) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}g}"


def _cost(pp: float) -> str:
    return "" if math.isnan(pp) else f"{pp:+.2f} pp"


def _duration(s: float) -> str:
    if s is None or math.isnan(s):
        return ""
    return f"{s / 3600:.2f} h" if s >= 3600 else (f"{s / 60:.1f} min" if s >= 60 else f"{s:.1f} s")


def _measured(v: Any) -> str:
    """A ranking cell's measured part: the measured step, the error, verified or not."""
    if v is None:
        return ""
    if v["status"] != "ok":
        return f'<br><span class="unverified">measured: failed</span>'
    word = "verified" if v["verified"] else "not verified"
    return (f'<br><span class="{"verified" if v["verified"] else "unverified"}">measured {v["measured_step_ms"]:.0f} '
            f'ms/step, error {100 * v["error"]:+.0f} %: {word}</span>')


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def _verify_attrs(v: Any) -> str:
    if v is None or v["status"] != "ok":
        return ""
    return f' data-measured-step-ms="{v["measured_step_ms"]:.6g}" data-verified="{int(bool(v["verified"]))}"'


def ranking_tables(rank: pd.DataFrame, verify: pd.DataFrame | None = None) -> str:
    """One table per node count; ``verify``: verify.csv's rows, shown in their cells."""
    checked = {} if verify is None else {(int(r["nodes"]), round(float(r["nic_gbps"]), 9), r["straggler"], r["method"]): r
                                         for _, r in verify.iterrows()}
    out = []
    for n, sub in rank.groupby("nodes"):
        cells = sorted({(float(g), s) for g, s in zip(sub["nic_gbps"], sub["straggler"])})
        head = "".join(f"<th>{g:g} Gbit/s, {_e(s)}</th>" for g, s in cells)
        rows = []
        for m in sorted(sub["method"].unique()):
            tds = []
            for g, s in cells:
                r = sub[(sub["method"] == m) & (sub["nic_gbps"] == g) & (sub["straggler"] == s)]
                if r.empty:
                    tds.append("<td></td>")
                    continue
                r = r.iloc[0]
                v = checked.get((int(n), round(g, 9), s, m))
                tds.append(f'<td class="rank{int(r["rank"])}" data-method="{_e(m)}" data-nic="{g:g}" '
                           f'data-straggler="{_e(s)}" data-rank="{int(r["rank"])}" data-epoch-s="{r["epoch_s"]:.6g}"'
                           f'{_verify_attrs(v)}>'
                           f'{_duration(r["epoch_s"])} ({int(r["rank"])}.)<br><span class="note">'
                           f'{r["step_ms"]:.0f} ms/step, comm {100 * r["comm_share"]:.0f} %</span>{_measured(v)}</td>')
            rows.append(f'<tr><td class="m">{_e(m)}</td>{"".join(tds)}</tr>')
        out.append(f'<h3>{int(n)} nodes</h3><table id="ranking-n{int(n)}" class="ranking" data-nodes="{int(n)}">'
                   f'<tr><th>method</th>{head}</tr>{"".join(rows)}</table>')
    return "".join(out)


def crossover_maps(grid: pd.DataFrame, user: list[tuple[float, float]], colour: Any) -> str:
    """One table per node count: rows compute per step (ms), columns NIC Gbit/s, each cell the
    fastest method (its colour) and its lead over the second; ``user``: (compute_ms, nic_gbps)."""
    out = []
    for n, sub in grid.groupby("nodes"):
        gbps = sorted(sub["nic_gbps"].unique())
        head = "".join(f"<th>{g:g} Gbit/s</th>" for g in gbps)
        rows = []
        for c in sorted(sub["compute_ms"].unique(), reverse=True):
            tds = []
            for g in gbps:
                r = sub[(sub["compute_ms"] == c) & (sub["nic_gbps"] == g)]
                if r.empty:
                    tds.append("<td></td>")
                    continue
                r = r.iloc[0]
                mine = any(math.isclose(c, uc) and math.isclose(g, ug) for uc, ug in user)
                mark = ' data-user="1"' if mine else ""
                tds.append(f'<td class="m{" user" if mine else ""}" style="background:{colour(r["fastest"])}33" '
                           f'data-method="{_e(r["fastest"])}" data-compute-ms="{c:g}" data-nic="{g:g}"{mark}>'
                           f'{"&#9733; " if mine else ""}{_e(r["fastest"])}'
                           f'<br><span class="note">{r["step_ms"]:.0f} ms; +{100 * r["margin"]:.0f} % '
                           f'{_e(r["second"] or "")}</span></td>')
            rows.append(f"<tr><th>{c:g} ms</th>{''.join(tds)}</tr>")
        out.append(f'<h3>{int(n)} nodes</h3><table id="crossover-n{int(n)}" class="crossover" data-nodes="{int(n)}">'
                   f'<tr><th>compute / step</th>{head}</tr>{"".join(rows)}</table>')
    return "".join(out)


def sensitivity_list(sens: pd.DataFrame) -> str:
    items = []
    for _, r in sens.iterrows():
        what = "compute per step" if r["parameter"] == "compute_ms" else "NIC rate"
        unit = "ms" if r["parameter"] == "compute_ms" else "Gbit/s"
        where = f"{int(r['nodes'])} nodes, {r['nic_gbps']:g} Gbit/s: {_e(r['first'])} first, {_e(r['second'])} second"
        if isinstance(r["then_fastest"], str):
            tail = (f"{what} at {r['swaps_at']:g} {unit} (yours: {r['user_value']:g}) makes "
                    f"<b>{_e(r['then_fastest'])}</b> fastest")
        else:
            tail = f"{what}: {_e(r['first'])} stays fastest over the grid ({_e(r['grid'])} {unit})"
        items.append(f"<li data-parameter=\"{_e(r['parameter'])}\">{where}; {tail}</li>")
    return f"<ul>{''.join(items)}</ul>" if items else "<p>No crossover grid at a ranked node count.</p>"


def verify_section(verify: pd.DataFrame | None) -> str:
    """Every verified row: predicted beside measured, the error, verified or not, the order."""
    if verify is None:
        return ('<p>Not verified on the cluster yet: <code>snakemake --cores 2 verify</code> with this config runs '
                'the first methods and AR-SGD there (docs/plan.md).</p>')
    rows = []
    for _, r in verify.iterrows():
        ok = r["status"] == "ok"
        attrs = (f'data-method="{_e(r["method"])}" data-nodes="{int(r["nodes"])}" data-straggler="{_e(r["straggler"])}" '
                 f'data-predicted-step-ms="{r["predicted_step_ms"]:.6g}"'
                 + (f' data-measured-step-ms="{r["measured_step_ms"]:.6g}" data-error="{r["error"]:.6g}" '
                    f'data-verified="{int(bool(r["verified"]))}"' if ok else ' data-verified="0"'))
        verdict = (("<span class=\"verified\">verified</span>" if r["verified"] else
                    "<span class=\"unverified\">not verified</span>") if ok else
                   f'<span class="unverified">failed: {_e(r["reason"])}</span>')
        rows.append(f'<tr {attrs}><td>{int(r["nodes"])}</td><td>{r["nic_gbps"]:g}</td><td class="m">{_e(r["straggler"])}</td>'
                    f'<td class="m">{_e(r["method"])}</td><td>{int(r["plan_rank"])}</td><td>{r["predicted_step_ms"]:.1f}</td>'
                    f'<td>{_fmt(r["measured_step_ms"], 4) if ok else ""}</td>'
                    f'<td>{_pct(r["error"]) if ok else ""}</td><td class="m">{verdict}</td>'
                    f'<td class="m note">{_e(r["order_measured"]) if ok else ""}'
                    f'{"" if not ok or r["order_agrees_beyond_margin"] else " (order differs: " + _e(r["order_discordant"]) + ")"}'
                    f'</td></tr>')
    return (f'<p class="note">The plan\'s first methods and AR-SGD run on the cluster with the config\'s launcher '
            f'(compute {_e(verify["compute"].iloc[0]) if len(verify) else ""}); measured step time as the predicted one '
            f'(the workers\' throughput after the first steps); error: predicted / measured - 1. '
            f'results/plan/&lt;name&gt;/verify.csv.</p>'
            '<table id="verify-table"><tr><th>nodes</th><th>NIC Gbit/s</th><th>straggler</th><th>method</th>'
            '<th>plan rank</th><th>predicted ms/step</th><th>measured ms/step</th><th>error</th><th></th>'
            f'<th>measured order</th></tr>{"".join(rows)}</table>')


def render(plan: dict[str, Any], rank: pd.DataFrame, grid: pd.DataFrame, sens: pd.DataFrame,
           costs: pd.DataFrame, not_ranked: dict[str, str], colour: Any, command: str,
           failed: pd.DataFrame | None = None, verify: pd.DataFrame | None = None) -> str:
    """The whole page (module docstring); ``failed``: points whose simulation failed (listed, with
    why, never ranked); ``verify``: ``results/plan/<name>/verify.csv`` (:mod:`distrepro_wf.plan.verify`)."""
    net = plan["network"]
    mdl = plan["model"]
    model_txt = ", ".join(f"{k} {v}" for k, v in mdl.items())
    tta = rank.dropna(subset=["time_to_target_s"])
    tta_html = ("<p>No epochs to a target given (plan.epochs_to_target).</p>" if tta.empty else
                tta[["nodes", "nic_gbps", "straggler", "method", "epochs_to_target", "time_to_target_s"]]
                .assign(time_to_target=lambda d: d["time_to_target_s"].map(_duration))
                .to_html(index=False, table_id="time-to-target", float_format=lambda x: f"{x:.4g}"))
    user = [(float(rank["compute_ms"].iloc[0]), float(g)) for g in net["nic_gbps"]] if len(rank) else []
    cost_rows = "".join(
        f'<tr><td class="m">{_e(r["method"])}</td><td data-method="{_e(r["method"])}" data-cost-pp="{r["cost_pp"]}">'
        f'{_cost(r["cost_pp"])}</td><td class="m note">{_e(r["source"])}</td></tr>' for _, r in costs.iterrows())
    skipped = "".join(f"<li>{_e(m)}: {_e(w)}</li>" for m, w in not_ranked.items())
    if failed is not None and len(failed):
        skipped += "".join(f"<li class=\"failed\">{_e(r['method'])} at {int(r['nodes'])} nodes, {r['nic_gbps']:g} Gbit/s, "
                           f"{r['compute_ms']:g} ms, {_e(r['straggler'])}: simulation failed: {_e(r['reason'])}</li>"
                           for _, r in failed.iterrows())
    details = rank.to_html(index=False, table_id="ranking-all", float_format=lambda x: f"{x:.4g}")
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Plan: {_e(plan['name'])}</title>
<style>{CSS}</style></head><body>
<h1>Plan for your cluster: {_e(plan['name'])}</h1>
<section id="cluster"><p>Model: {_e(model_txt)}. Nodes: {_e(', '.join(map(str, plan['nodes'])))}.
Network: {_e(net.get('topology', 'star'))}, NICs {_e(', '.join(f'{g:g}' for g in net['nic_gbps']))} Gbit/s,
{_e(net.get('latency_us', 50))} us a message. Stragglers: {_e(', '.join(plan['stragglers']))}.</p>
<p class="note">Every time is the project's simulator (SimGrid, impls/sim), the same model of time as the
report's simulated verdicts: one short simulation per point ({_e(plan.get('steps', 4))} steps, the first not
counted). Made by <code>{_e(command)}</code>; the table: results/plan/{_e(plan['name'])}.csv.</p></section>
<section id="ranking"><h2>Ranking: time per epoch (rank within each column)</h2>{ranking_tables(rank, verify)}
{f'<p>Not ranked (does not apply, or its simulation failed):</p><ul>{skipped}</ul>' if skipped else ''}
<details><summary>Every column</summary>{details}</details></section>
<section id="verify"><h2>Verified on the cluster: predicted vs measured step time</h2>
{verify_section(verify)}</section>
<section id="target"><h2>Time to target (the epochs you gave)</h2>{tta_html}</section>
<section id="crossover"><h2>Crossover maps: the fastest method per compute per step and NIC rate</h2>
<p class="note">No straggler; &#9733; marks your points; each cell: the fastest method, its simulated step time,
and how much slower the second is.</p>{crossover_maps(grid, user, colour)}</section>
<section id="sensitivity"><h2>Sensitivity: what swaps the first two (from the crossover maps)</h2>
{sensitivity_list(sens)}</section>
<section id="accuracy"><h2>Accuracy cost: published, not measured here</h2>
<table id="accuracy-cost"><tr><th>method</th><th>top-1 vs AR-SGD</th><th>source</th></tr>{cost_rows}</table></section>
<section id="not-captured"><h2>What this model does not capture</h2><ul>
{''.join(f'<li>{_e(x)}</li>' for x in NOT_CAPTURED)}</ul></section>
</body></html>
"""
