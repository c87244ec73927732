"""Figures of one experiment from its tidy tables, and the claims' forest plot (matplotlib, Agg).

Conventions shared by every figure, so that a reader learns them once:

* colour = method, from one fixed mapping (:func:`method_colour`): AR-SGD is the same blue
  in every figure of every page;
* line style = node count (:func:`nodes_style`), the same in every figure;
* legends sit outside the axes (right of them), never over the data;
* accuracy is shown in % (the tables hold fractions), times in seconds of the run's kind of
  time (simulated time on the simulated platform, wall-clock time on real ranks);
* curves over seeds show the mean and a band from the seeds' minimum to their maximum (with
  3-5 seeds a t band would mostly show the t quantile; the min-max band shows the seeds).

Every figure function takes its table, the output path and the config (for the straggler
factors); :data:`FIGURES` maps a figure's name to (table, function), and an experiment
draws those its config names (:func:`experiment_figures`: ``experiments.<e>.figures``, by
default all of them).  Tables: ``runs``
(runs.csv), ``epochs`` (epochs.csv) and ``curves`` (evals.csv where collect wrote it: finer
evaluation points, else epochs.csv).
"""

from __future__ import annotations

import math
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from impls.errors import ConfigError

from ..pipeline.config import report_settings

_PYPLOT = None


def _plt():
    """matplotlib.pyplot on the Agg backend, imported on the first figure: the Snakefile and
    the report script import this module for :data:`FIGURES` alone (about 1 s less each)."""
    global _PYPLOT
    if _PYPLOT is None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot

        _PYPLOT = matplotlib.pyplot
    return _PYPLOT

_PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf", "#aec7e8", "#98df8a", "#f7b6d2", "#c49c94", "#dbdb8d", "#9edae5"]
_STYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 3))]
STATUS_COLOURS = {"reproduced": "#1b7a1b", "not reproduced": "#b01515", "inconclusive": "#c27c00",
                  "provisional": "#3a4fa0", "not comparable": "#888888"}
#: the published value's cross in the forest plot, by the row's size verdict (black: n/a)
SIZE_COLOURS = {"reproduced": "#1b7a1b", "not reproduced": "#b01515", "inconclusive": "#c27c00", "n/a": "black"}


def method_colour(method: str, config: dict[str, Any] | None = None) -> str:
    """The method's colour in every figure: the config's ``report.colours`` (over the schema's
    house colours: AR-SGD the same blue everywhere), else a stable hash of the name (the same
    name always gets the same colour)."""
    colours = report_settings(config)["colours"]
    return colours.get(method) or _PALETTE[zlib.crc32(method.encode()) % len(_PALETTE)]


def nodes_style(nodes: int) -> Any:
    """Line style of a node count, fixed by its power of two (1 solid, 2 dashed, 4 dash-dot, ...)."""
    k = int(round(math.log2(max(int(nodes), 1))))
    return _STYLES[k % len(_STYLES)]


def _label(method: str, nodes: int) -> str:
    return f"{method} n={nodes}"


def _legend(ax, **kw) -> None:
    """The legend right of the axes (outside the data)."""
    h, _ = ax.get_legend_handles_labels()
    if h:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False, **kw)


#: PNG text keys the report reads (:func:`figure_notes`): a placeholder's reason (the figure has
#: no data: the page says why instead of showing it) and a drawn figure's note (what it leaves out)
EMPTY_KEY, NOTE_KEY = "distrepro-empty", "distrepro-note"


def _save(fig, path: Path, note: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, bbox_inches="tight", metadata={NOTE_KEY: note} if note else None)
    _plt().close(fig)


def _empty(path: Path, title: str, why: str = "no completed runs") -> None:
    """A placeholder (rule plot declares every figure an experiment draws): the reason is written into
    the PNG (:data:`EMPTY_KEY`), and the report prints it as a sentence instead of the image."""
    fig, ax = _plt().subplots(figsize=(5, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, f"{title}: {why}", ha="center", va="center")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, bbox_inches="tight", metadata={EMPTY_KEY: why})
    _plt().close(fig)


def figure_notes(path: Path) -> tuple[str | None, str]:
    """(why the figure was not drawn, or None when it has data; its note, or "") from the PNG's
    text (:func:`_empty`, :func:`_save`).  A missing or unreadable file: not drawn, saying so."""
    try:
        from PIL import Image

        with Image.open(path) as im:
            text = dict(getattr(im, "text", {}) or {})
    except (OSError, ValueError) as e:
        return f"the figure file could not be read ({type(e).__name__})", ""
    return text.get(EMPTY_KEY), text.get(NOTE_KEY, "")


def _stragglers(ep: pd.DataFrame) -> list[str]:
    s = list(dict.fromkeys(ep["straggler"]))
    return sorted(s, key=lambda v: (v != "none", v))


#: the task's quality metric a curve shows: (column, axis label, y scale, factor), the first one logged
QUALITY = [("acc/val", "validation top-1 (%)", "linear", 100.0), ("opt/gap", "suboptimality F(x) - F(x*)", "log", 1.0),
           ("bleu/val", "validation BLEU (sacrebleu)", "linear", 1.0)]


def _quality(ep: pd.DataFrame) -> tuple[str, str, str, float]:
    return next((q for q in QUALITY if q[0] in ep and ep[q[0]].notna().any()), QUALITY[0])


def _time_word(df: pd.DataFrame) -> str:
    """"simulated time" for runs of the simulated platform, "wall-clock time" for real ranks (the
    table's ``time_kind``, from each run's provenance); never a kind the table does not say."""
    kinds = set(df["time_kind"].dropna()) if "time_kind" in df else set()
    if kinds == {"simulated"}:
        return "simulated time"
    if kinds == {"wall clock"}:
        return "wall-clock time"
    return "time (simulated and wall-clock mixed)" if len(kinds) > 1 else "time (kind not recorded)"


def _xcol(ep: pd.DataFrame) -> tuple[str, pd.Series]:
    """The curve's progress axis: fractional epochs of evals.csv, else the epoch number (1-based)."""
    if "epoch_f" in ep and ep["epoch_f"].notna().any():
        return "epoch_f", ep["epoch_f"].astype(float)
    return "epoch", ep["epoch"].astype(float) + 1


def _band(ax, g: pd.DataFrame, x: str, y: str, factor: float, m: str, n: int, label: str,
          config: dict[str, Any] | None = None) -> None:
    """Mean over seeds and a min-max band, per evaluation point (rows of the same point across
    seeds share ``_pt``: epoch or step); x is the mean of x at that point."""
    st = g.groupby("_pt").agg(x=(x, "mean"), mean=(y, "mean"), lo=(y, "min"), hi=(y, "max")).dropna()
    if st.empty:
        return
    c, ls = method_colour(m, config), nodes_style(n)
    ax.plot(st["x"], st["mean"] * factor, color=c, ls=ls, lw=1.4, label=label)
    if g["seed"].nunique() > 1:
        ax.fill_between(st["x"], st["lo"] * factor, st["hi"] * factor, color=c, alpha=0.15, lw=0)


def _with_points(ep: pd.DataFrame) -> pd.DataFrame:
    key = "step" if "epoch_f" in ep and "step" in ep else "epoch"
    xname, xs = _xcol(ep)
    return ep.assign(_pt=ep[key], _x=xs)


def loss_vs_epoch(ep: pd.DataFrame, path: Path, config: dict[str, Any] | None = None) -> None:
    """Training loss and the quality metric against epochs, no-straggler setting; band over seeds.
    Only the panels with data are drawn; a panel left out is named in the PNG's note (the page
    prints it under the figure)."""
    if ep.empty:
        return _empty(path, "loss vs epoch")
    ep = _with_points(ep)
    s0 = _stragglers(ep)[0]
    sub = ep[ep["straggler"] == s0]
    key, label, scale, factor = _quality(ep)
    has_loss = bool("loss/train" in sub and sub["loss/train"].notna().any())
    has_quality = bool(key in sub and sub[key].notna().any())
    if not has_loss and not has_quality:
        return _empty(path, "loss vs epoch", f"no training loss or {label} was logged")
    panels = ["loss"] * has_loss + ["quality"] * has_quality
    fig, axes = _plt().subplots(1, len(panels), figsize=(5.5 * len(panels), 3.6), squeeze=False)
    ax = dict(zip(panels, axes[0]))
    for (m, n), g in sub.groupby(["method", "nodes"]):
        if has_loss and g["loss/train"].notna().any():
            _band(ax["loss"], g, "_x", "loss/train", 1.0, m, n, _label(m, n), config)
        if has_quality:
            _band(ax["quality"], g, "_x", key, factor, m, n, _label(m, n), config)
    if has_loss:
        pos = (sub["loss/train"].dropna() > 0).all()
        ax["loss"].set(xlabel="epoch", ylabel="training loss", yscale="log" if pos else "linear")
    if has_quality:
        ax["quality"].set(xlabel="epoch", ylabel=label, yscale=scale)
    _legend(axes[0][-1])
    fig.suptitle(f"straggler setting: {s0}; line: mean over seeds, band: min-max over seeds", fontsize=9)
    note = ("" if has_loss and has_quality else
            "Training loss not shown: no run logged it." if not has_loss else f"{label} not shown: no run logged it.")
    _save(fig, path, note)


def acc_vs_wall(ep: pd.DataFrame, path: Path, config: dict[str, Any] | None = None) -> None:
    """The quality metric against time, one panel per straggler setting; band over seeds."""
    if ep.empty:
        return _empty(path, "accuracy vs time")
    ep = _with_points(ep)
    ss = _stragglers(ep)
    fig, axes = _plt().subplots(1, len(ss), figsize=(4.6 * len(ss) + 1.6, 3.6), squeeze=False, sharey=True)
    key, label, scale, factor = _quality(ep)
    for ax, s in zip(axes[0], ss):
        for (m, n), g in ep[ep["straggler"] == s].groupby(["method", "nodes"]):
            _band(ax, g, "time/wall_s", key, factor, m, n, _label(m, n), config)
        ax.set(xlabel=f"{_time_word(ep)} (s)", title=f"straggler: {s}", yscale=scale)
    axes[0][0].set_ylabel(label)
    _legend(axes[0][-1])
    _save(fig, path)


def epoch_time_vs_nodes(runs: pd.DataFrame, path: Path, config: dict[str, Any] | None = None) -> None:
    if runs.empty:
        return _empty(path, "time per epoch vs nodes")
    ss = _stragglers(runs)
    fig, axes = _plt().subplots(1, len(ss), figsize=(4.6 * len(ss) + 1.6, 3.6), squeeze=False, sharey=True)
    for ax, s in zip(axes[0], ss):
        for m, g in runs[runs["straggler"] == s].groupby("method"):
            st = g.groupby("nodes")["time_per_epoch_s"].agg(["mean", "min", "max"])
            # clipped at 0: equal times at every seed (a simulated clock without jitter) leave the
            # mean a rounding error above the max or below the min, which errorbar refuses
            lo, hi = (st["mean"] - st["min"]).clip(lower=0), (st["max"] - st["mean"]).clip(lower=0)
            ax.errorbar(st.index, st["mean"], yerr=[lo, hi], marker="o",
                        capsize=3, label=m, color=method_colour(m, config))
        ax.set(xlabel="nodes (workers)", title=f"straggler: {s}")
        ax.set_xscale("log", base=2)
    axes[0][0].set_ylabel(f"{_time_word(runs)} per epoch (s)\nmean, whiskers min-max over seeds")
    _legend(axes[0][-1])
    _save(fig, path)


def throughput(runs: pd.DataFrame) -> pd.Series:
    """Samples per second of each run, up to the per-worker batch (constant per method): steps
    per epoch x workers / time per epoch.  With a fixed per-worker batch an epoch is a fixed
    amount of data however many workers share it, so this is proportional to 1 / time per epoch
    whenever steps per epoch x workers is constant; computing it explicitly keeps it right when
    the split is uneven (a remainder batch)."""
    t = runs["time_per_epoch_s"].astype(float)
    if "steps_per_epoch" in runs and runs["steps_per_epoch"].notna().all():
        return runs["steps_per_epoch"].astype(float) * runs["nodes"].astype(float) / t
    return 1.0 / t


def scaling_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (straggler, method, nodes): throughput speedup against the method's smallest node
    count, the ideal speedup n / n_min and the efficiency speedup / ideal (mean over seeds)."""
    if runs.empty or "time_per_epoch_s" not in runs:
        return pd.DataFrame(columns=["straggler", "method", "nodes", "speedup", "ideal", "efficiency"])
    r = runs.assign(_thr=throughput(runs))
    rows = []
    for (s, m), g in r.groupby(["straggler", "method"]):
        thr = g.groupby("nodes")["_thr"].mean().sort_index()
        n0 = thr.index[0]
        for n, v in thr.items():
            sp = v / thr.iloc[0]
            rows.append({"straggler": s, "method": m, "nodes": int(n), "speedup": sp, "ideal": n / n0,
                         "efficiency": sp / (n / n0)})
    return pd.DataFrame(rows)


def scaling(runs: pd.DataFrame, path: Path, config: dict[str, Any] | None = None) -> None:
    """Weak-scaling speedup (throughput relative to the smallest node count) and efficiency
    against nodes, with the ideal line; the no-straggler setting (or the first one run)."""
    t = scaling_table(runs)
    multi = t.groupby(["straggler", "method"])["nodes"].nunique().max() if len(t) else 0
    if t.empty or multi < 2:
        return _empty(path, "scaling", "fewer than two node counts per method")
    s0 = _stragglers(t)[0]
    t = t[t["straggler"] == s0]
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig, axes = _plt().subplots(1, 2, figsize=(11, 3.6))
    for m, g in t.groupby("method"):
        if len(g) < 2:
            continue
        axes[0].plot(g["nodes"], g["speedup"], marker="o", color=method_colour(m, config), label=m)
        axes[1].plot(g["nodes"], g["efficiency"] * 100, marker="o", color=method_colour(m, config), label=m)
    t = t[t.groupby("method")["nodes"].transform("nunique") >= 2]
    ns = np.array(sorted(set(t["nodes"])), float)
    for i, n0 in enumerate(sorted(set(t.groupby("method")["nodes"].min()))):
        x = ns[ns >= n0]
        axes[0].plot(x, x / n0, color="#444", lw=0.8, ls=":", label="ideal (n / n_min)" if i == 0 else None)
    axes[1].axhline(100, color="#444", lw=0.8, ls=":", label="ideal")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns, [str(int(n)) for n in ns])
        ax.set_xlabel("nodes (workers)")
    axes[0].set(ylabel="throughput speedup vs smallest n", yscale="log")
    axes[0].yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axes[0].yaxis.set_minor_formatter(NullFormatter())
    axes[1].set(ylabel="scaling efficiency (%)", ylim=(0, max(110, float(t["efficiency"].max() * 100 + 10))))
    _legend(axes[1])
    fig.suptitle(f"weak scaling (fixed per-worker batch); straggler setting: {s0}", fontsize=9)
    _save(fig, path)


def straggler_factor(name: str, config: dict[str, Any] | None) -> float:
    """The slowdown factor of straggler setting ``name`` from the config's ``stragglers:``
    (``none``: 1); NaN when the config does not say (a random or unknown setting)."""
    if name == "none":
        return 1.0
    spec = ((config or {}).get("stragglers") or {}).get(name) or {}
    f = spec.get("factor")
    return float(f) if isinstance(f, (int, float)) else math.nan


def straggler_sensitivity(runs: pd.DataFrame, path: Path, config: dict[str, Any] | None = None) -> None:
    """Time per epoch under each straggler relative to no straggler, against the straggler's
    slowdown factor on a numeric (log) axis, per method (colour) and node count (line style);
    the line y = factor is a fully synchronous method that waits for the straggler every step."""
    if runs.empty:
        return _empty(path, "straggler sensitivity")
    ss = _stragglers(runs)
    if len(ss) < 2:
        return _empty(path, "straggler sensitivity", f"only the setting {ss[0]!r} was run")
    fac = {s: straggler_factor(s, config) for s in ss}
    known = [s for s in ss if not math.isnan(fac[s])]
    if len(known) < 2 or "none" not in known:
        return _empty(path, "straggler sensitivity", "no straggler factors in the config")
    fig, ax = _plt().subplots(figsize=(6.5, 3.6))
    for (m, n), g in runs.groupby(["method", "nodes"]):
        t = g.groupby("straggler")["time_per_epoch_s"].mean()
        if "none" not in t.index:
            continue
        xs = sorted((fac[s], t[s] / t["none"]) for s in known if s in t.index)
        if len(xs) < 2:
            continue
        ax.plot([x for x, _ in xs], [y for _, y in xs], marker="o", ms=4, color=method_colour(m, config), ls=nodes_style(n),
                label=_label(m, n))
    fs = sorted(set(fac[s] for s in known))
    ax.plot(fs, fs, color="#444", lw=0.8, ls=":", label="waits for the straggler (y = factor)")
    ax.axhline(1.0, color="#888", lw=0.8, ls="--", label="insensitive (y = 1)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(fs, [f"{f:g}" for f in fs])
    ax.set(xlabel="straggler slowdown factor (1 = none)", ylabel="time per epoch / time without straggler")
    _legend(ax)
    _save(fig, path)


#: the time-breakdown components: (runs.csv column, fallback column, label, colour)
BREAKDOWN = [("bd_compute_s", "compute_s_per_epoch", "compute", "#4c72b0"),
             ("bd_comm_s", "comm_s_per_epoch", "communication", "#dd8452"),
             ("bd_straggler_s", "straggler_delay_s_per_epoch", "straggler wait", "#c44e52"),
             ("bd_other_s", None, "other", "#bbbbbb")]
#: simulated runs' local operations (the op-cost model, impls/sim/opcost.py): optional parts,
#: taken out of communication by the collector (0 where a run has none: real ranks)
BREAKDOWN_OPS = [("bd_arith_s", "arithmetic", "#55a868"), ("bd_optim_s", "optimizer", "#8172b3"),
                 ("bd_copy_s", "copies", "#937860"), ("bd_stage_s", "host staging", "#da8bc3"),
                 ("bd_compress_s", "compression", "#ccb974")]


def breakdown_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean seconds per epoch of each component per (method, nodes, straggler).  The collector's
    ``bd_*`` columns sum to the time per epoch; without them the older per-epoch compute,
    communication and straggler times are used and "other" is the rest (never negative)."""
    keys = ["method", "nodes", "straggler"]
    if runs.empty or "time_per_epoch_s" not in runs:
        return pd.DataFrame(columns=keys + [b[2] for b in BREAKDOWN])
    r = runs.copy()
    have_bd = all(b[0] in r and r[b[0]].notna().any() for b in BREAKDOWN)
    for col, fb, lab, _ in BREAKDOWN:
        if have_bd:
            r[lab] = r[col].astype(float)
        elif fb is not None:
            r[lab] = r[fb].astype(float).fillna(0) if fb in r else 0.0
    if not have_bd:
        known = r[[b[2] for b in BREAKDOWN[:3]]].sum(axis=1)
        r["other"] = (r["time_per_epoch_s"].astype(float) - known).clip(lower=0)
    ops = [lab for col, lab, _ in BREAKDOWN_OPS if have_bd and col in r and r[col].fillna(0).gt(0).any()]
    for col, lab, _ in BREAKDOWN_OPS:
        if lab in ops:
            r[lab] = r[col].astype(float).fillna(0)
    return r.groupby(keys)[[b[2] for b in BREAKDOWN] + ops].mean().reset_index()


def time_breakdown(runs: pd.DataFrame, path: Path, config: dict[str, Any] | None = None) -> None:
    """Stacked bars of the time per epoch: compute, communication, straggler wait, other, per
    method x setting (tick labels in the method's colour)."""
    t = breakdown_table(runs)
    if t.empty:
        return _empty(path, "time breakdown")
    t = t.assign(_f=[straggler_factor(s, config) for s in t["straggler"]]).sort_values(
        ["_f", "straggler", "nodes", "method"], na_position="last")
    fig, ax = _plt().subplots(figsize=(max(5.0, 0.45 * len(t) + 3), 3.8))
    x = np.arange(len(t))
    bottom = np.zeros(len(t))
    parts = [(lab, col) for _, _, lab, col in BREAKDOWN] + [(lab, col) for _, lab, col in BREAKDOWN_OPS if lab in t]
    for lab, col in parts:
        v = t[lab].to_numpy(float)
        ax.bar(x, v, bottom=bottom, color=col, label=lab, width=0.75)
        bottom += v
    labels = [f"{m} n={n} {s}" for m, n, s in zip(t["method"], t["nodes"], t["straggler"])]
    ax.set_xticks(x, labels, rotation=40, ha="right", fontsize=7)
    for tick, m in zip(ax.get_xticklabels(), t["method"]):
        tick.set_color(method_colour(m, config))
    ax.set(ylabel=f"{_time_word(runs)} per epoch (s), mean over seeds")
    _legend(ax)
    _save(fig, path)


def _mean_ci(v: pd.Series) -> tuple[float, float, float]:
    from ..claims.stats import mean_interval

    v = v.dropna().reset_index(drop=True)
    if v.empty:
        return np.nan, np.nan, np.nan
    lo, hi = mean_interval(v)
    return float(v.mean()), lo, hi


def bytes_column(runs: pd.DataFrame, col: str) -> tuple[str, str]:
    """(column, what its bytes are) for bytes column ``col`` of runs.csv: where a paper timing profile
    made the simulated network carry the paper model's bytes (``model_mb``), the bytes at that
    size (``<col>_model``), so that bytes and times are of the same model; else the stand-in's."""
    if "model_mb" in runs and runs["model_mb"].notna().any() and f"{col}_model" in runs:
        mbs = sorted({float(v) for v in runs["model_mb"].dropna()})
        return f"{col}_model", f"at the profile's {', '.join(f'{m:.3g}' for m in mbs)} MB model, as the times"
    return col, "of the stand-in model"


def to_target(runs: pd.DataFrame, path: Path, config: dict[str, Any] | None = None) -> None:
    """Time and bytes to the workload's target accuracy, mean and 95% t interval over seeds."""
    if runs.empty or "time_to_target_s" not in runs:
        return _empty(path, "time / bytes to target accuracy")
    s0 = _stragglers(runs)[0]
    sub = runs[runs["straggler"] == s0]
    fig, axes = _plt().subplots(1, 2, figsize=(10, 3.6))
    bcol, blabel = bytes_column(runs, "bytes_to_target")
    for ax, col, ylabel in ((axes[0], "time_to_target_s", f"{_time_word(runs)} to target (s)"),
                            (axes[1], bcol, f"bytes sent per rank to target\n({blabel})")):
        labels, means, errs, notes, colours = [], [], [[], []], [], []
        for (m, n), g in sub.groupby(["method", "nodes"]):
            mean, lo, hi = _mean_ci(g[col]) if col in g else (np.nan, np.nan, np.nan)
            labels.append(_label(m, n))
            colours.append(method_colour(m, config))
            means.append(0.0 if np.isnan(mean) else mean)
            errs[0].append(0.0 if np.isnan(lo) else mean - lo)
            errs[1].append(0.0 if np.isnan(hi) else hi - mean)
            reached = int(g[col].notna().sum()) if col in g else 0
            notes.append("" if reached == len(g) else f"{len(g) - reached}/{len(g)} not reached")
        x = np.arange(len(labels))
        ax.bar(x, means, yerr=errs, capsize=3, color=colours)
        for xi, note, mv in zip(x, notes, means):
            if note:
                ax.text(xi, mv, note, ha="center", va="bottom", fontsize=7, color="#a00")
        ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=7)
        ax.set(ylabel=ylabel)
    has = "target_value" in runs and runs["target_value"].notna().any()
    target = f"{runs['target_metric'].dropna().iloc[0]} {runs['target_value'].dropna().iloc[0]:g}" if has else "none"
    fig.suptitle(f"target {target}; straggler setting {s0}; bars: mean over seeds, whiskers: 95% t interval",
                 fontsize=9, y=1.02)
    _save(fig, path)


# ------------------------------------------------------------------------------- forest plot

def _node_list(v) -> list[int]:
    """claims.csv ``published_nodes`` ("32", 32.0, "8 32", NaN) as node counts."""
    return [int(float(x)) for x in str(v if v is not None else "").split() if x.lower() != "nan"]


def tornado(table: pd.DataFrame, path: Path, title: str = "") -> None:
    """One claim's sensitivity (``results/tables/sensitivity.csv`` rows of that claim): per
    setting, each uncertain parameter's bar from the statistic at the low end of its range to the
    high end (the simulated value scaled by the closed form, :mod:`distrepro_wf.claims.sensitivity`), the
    simulated value as a line, the pass region shaded, a flip point as a red tick; where the
    claim's mechanism gate flips inside a range (``gate_at``: the setting starts or stops showing
    the mechanism there, :func:`distrepro_wf.claims.sensitivity.gates`), the statistic at that
    point as an orange diamond and the value in the label.  Only drawn for a claim with rows (the
    caller skips the others)."""
    settings = list(table.groupby(["nodes", "straggler"], sort=True))
    fig, axes = _plt().subplots(len(settings), 1, figsize=(7.5, 0.45 * len(table)
                                                         + 1.2 * len(settings)), squeeze=False)
    for ax, ((n, st), g) in zip(axes[:, 0], settings):
        g = g.reset_index(drop=True)
        ys = np.arange(len(g))
        m = float(g["measured"].iloc[0])
        for y, r in g.iterrows():
            ax.barh(y, r["max"] - r["min"], left=r["min"], color="#8fb3d9", height=0.6)
            ax.plot([r["at_low"]], [y], marker="<", color="#335", ms=5, ls="none")
            ax.plot([r["at_high"]], [y], marker=">", color="#335", ms=5, ls="none")
            if np.isfinite(r.get("gate_statistic", np.nan)):
                first = "mechanism gate flips" not in ax.get_legend_handles_labels()[1]
                ax.plot([r["gate_statistic"]], [y], marker="D", color="#e07b00", ms=5, ls="none",
                        label="mechanism gate flips" if first else None)
        lo_all = min(g["min"].min(), m) * 0.95
        hi_all = max(g["max"].max(), m) * 1.05
        plo, phi = float(g["pass_low"].iloc[0]), float(g["pass_high"].iloc[0])
        ax.axvspan(max(plo, lo_all), min(phi, hi_all), color="#2a9d2a", alpha=0.13, lw=0, label="pass region")
        ax.axvline(m, color="black", lw=1, label=f"simulated {m:.3g}")
        ax.set_yticks(ys, [f"{r['label']}{' (scenario)' if r.get('kind') == 'scenario' else ''} "
                           f"[{r['low']:.3g}, {r['high']:.3g}]"
                           + (f"  flips at {r['flips_at']:.3g}" if np.isfinite(r["flips_at"]) else "")
                           + (f"  gate at {r['gate_at']:.3g}" if np.isfinite(r.get("gate_at", np.nan)) else "")
                           for _, r in g.iterrows()], fontsize=7)
        ax.set_xlim(lo_all, hi_all)
        ax.set_title(f"n={int(n)}, {st}: statistic (a/b) over each parameter's range, others nominal", fontsize=8)
        ax.set_xlabel("the claim's statistic (simulated value scaled by the closed form; <: range's low end, >: high)",
                      fontsize=7)
        _legend(ax)
    if title:
        fig.suptitle(title, fontsize=9)
    _save(fig, path)


#: the forest plot's estimate marker by where the runs ran (claims.csv ``runs_on``): a simulated
#: verdict is a model prediction, drawn as a square; real ranks' measurement as a circle
RUNS_ON_MARKERS = {"real": "o", "simulated": "s", "": "o"}
RUNS_ON_LABELS = {"real": "real ranks (measured)", "simulated": "simulated (model prediction)"}


def forest(frame: pd.DataFrame, path: Path, title: str = "") -> None:
    """Forest plot of every claim x setting of a page (rows of
    :func:`distrepro_wf.report.evidence.plotted`, i.e. with an estimate): one panel per scale (ratios
    on a log axis, differences in points on a linear one, anything else on its own), one row
    per claim x setting with the pass region shaded, the estimate and its 95 % interval coloured
    by the status shown (provisional never green), the control setting's statistic as a hollow
    diamond, the published value as a labelled cross coloured by the row's size verdict (black:
    n/a) and our interval widened by the size tolerance as a thin bracket under it
    (:mod:`distrepro_wf.claims.size`)."""
    from .evidence import panels

    if frame.empty:
        return _empty(path, title or "claims", "no claim with an estimate")
    groups = panels(frame)
    heights = [max(len(g), 1) + 1.2 for _, _, g in groups]
    from matplotlib.ticker import FuncFormatter

    fig, axes = _plt().subplots(len(groups), 1, figsize=(11, 0.32 * sum(heights) + 1.0), squeeze=False,
                                gridspec_kw={"height_ratios": heights})
    for ax, (scale, unit, g) in zip(axes[:, 0], groups):
        g = g.reset_index(drop=True)
        vals = pd.concat([g[c] for c in ("measured", "ci_low", "ci_high", "control_measured", "control_low",
                                         "control_high", "published", "size_low", "size_high", "predicted")
                          if c in g]).astype(float)
        finite = vals[np.isfinite(vals) & ((vals > 0) if scale == "log" else True)]
        regions = pd.concat([g["pass_low"], g["pass_high"]]).astype(float)
        regions = regions[np.isfinite(regions) & ((regions > 0) if scale == "log" else True)]
        span = pd.concat([finite, regions])
        lo, hi = (float(span.min()), float(span.max())) if len(span) else (0.5, 2.0)
        if scale == "log":
            lo, hi = lo / 1.25, hi * 1.25
        else:
            pad = 0.08 * (hi - lo) or 1.0
            lo, hi = lo - pad, hi + pad
        ys = np.arange(len(g))[::-1]
        for y, (_, r) in zip(ys, g.iterrows()):
            plo = r["pass_low"] if np.isfinite(r["pass_low"]) else lo
            phi = r["pass_high"] if np.isfinite(r["pass_high"]) else hi
            if scale == "log":
                plo = max(plo, lo)
            if np.isfinite(plo) and np.isfinite(phi) and phi > plo:
                ax.fill_betweenx([y - 0.42, y + 0.42], plo, phi, color="#2a9d2a", alpha=0.13, lw=0,
                                 label="pass region" if y == ys[0] else None)
            c = STATUS_COLOURS.get(r["shown"], "#555")
            if np.isfinite(r["ci_low"]):
                ax.plot([r["ci_low"], r["ci_high"]], [y, y], color=c, lw=2.2, solid_capstyle="butt")
            ax.plot([r["measured"]], [y], marker=RUNS_ON_MARKERS.get(r.get("runs_on") or "", "o"), ms=6, color=c,
                    mfc=c if r["shown"] != "provisional" else "white", label=None)
            if np.isfinite(r["control_measured"]):
                if np.isfinite(r["control_low"]):
                    ax.plot([r["control_low"], r["control_high"]], [y - 0.25, y - 0.25], color="#777", lw=1.2)
                ax.plot([r["control_measured"]], [y - 0.25], marker="D", ms=5, mfc="white", mec="#555",
                        ls="none", label="control setting" if "control setting" not in
                        ax.get_legend_handles_labels()[1] else None)
            slo, shi = (float(r.get("size_low", math.nan)), float(r.get("size_high", math.nan)))
            if np.isfinite(slo) and np.isfinite(shi) and (scale != "log" or slo > 0):  # the size tolerance
                ax.plot([slo, slo, shi, shi], [y + 0.12, y, y, y + 0.12], color=c, lw=0.8, alpha=0.7,
                        label="our interval widened by the size tolerance"
                        if "our interval widened by the size tolerance" not in ax.get_legend_handles_labels()[1]
                        else None)
            if np.isfinite(r["published"]) and (scale != "log" or r["published"] > 0):
                size = r.get("size_status") or ""
                ax.plot([r["published"]], [y + 0.25], marker="X", ms=7, ls="none",
                        color=SIZE_COLOURS.get(size, "black"), mec="black", mew=0.5,
                        label="published value" if "published value" not in ax.get_legend_handles_labels()[1]
                        else None)
                at = _node_list(r.get("published_nodes"))  # the published value's scale, when not ours
                other_scale = bool(at) and not (np.isfinite(r["nodes"]) and int(r["nodes"]) in at)
                ax.annotate((f"published (n={', '.join(map(str, at))})" if other_scale else "published")
                            + (f"; size {size}" if size else ""),
                            (r["published"], y + 0.25),
                            xytext=(4, 2), textcoords="offset points", fontsize=6)
            pv = float(r.get("predicted", math.nan))
            if np.isfinite(pv) and (scale != "log" or pv > 0):  # a derived expectation (claims.predict)
                size = r.get("size_status") or ""
                ax.plot([pv], [y + 0.25], marker="P", ms=7, ls="none", color=SIZE_COLOURS.get(size, "black"),
                        mec="black", mew=0.5, label="predicted value" if "predicted value" not in
                        ax.get_legend_handles_labels()[1] else None)
                ax.annotate("predicted" + (f"; size {size}" if size else ""), (pv, y + 0.25), xytext=(4, 2),
                            textcoords="offset points", fontsize=6)
        for st, c in STATUS_COLOURS.items():
            if st in set(g["shown"]):
                ax.plot([], [], marker="o", color=c, mfc=c if st != "provisional" else "white", label=st)
        for where, text in RUNS_ON_LABELS.items():  # marker shape: measured on real ranks or predicted
            if "runs_on" in g and where in set(g["runs_on"]):
                ax.plot([], [], marker=RUNS_ON_MARKERS[where], color="#555", ls="none", label=text)
        ax.set_yticks(ys, [f"{lab}" for lab in g["label"]], fontsize=7)
        ax.set_ylim(-0.8, len(g) - 0.2)
        if scale == "log":
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(FuncFormatter(
                lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))  # 0.2, 0.5, 2, 5 ...
            ax.tick_params(axis="x", which="minor", labelsize=7)
            ax.axvline(1.0, color="#444", lw=0.6)
            ax.set_xlabel("ratio a / b (log axis; < 1: a's metric is smaller)")
        else:
            ax.axvline(0.0, color="#444", lw=0.6) if lo < 0 < hi else None
            ax.set_xlabel({"pt": "difference a - b (percentage points)"}.get(unit, f"value ({unit or 'no unit'})"))
        ax.set_xlim(lo, hi)
        ax.grid(axis="x", color="#eee")
        _legend(ax)
    if title:
        fig.suptitle(title, fontsize=10)
    _save(fig, path)


def staleness(st: pd.DataFrame, path: Path, config: dict[str, Any] | None = None) -> None:
    """Staleness histograms of the parameter-server modes: the share of applied pushes per
    staleness (updates applied between a worker's read and its push), one panel per
    straggler setting, one line per method x nodes (pooled over seeds); the straggler's own
    pushes dashed."""
    if st is None or st.empty:
        _empty(path, "staleness of applied pushes", "no parameter-server mode with asynchronous pushes here")
        return
    settings = sorted(st["straggler"].unique())
    fig, axes = _plt().subplots(1, len(settings), figsize=(5 * len(settings), 3.6), squeeze=False)
    for ax, strag in zip(axes[0], settings):
        g0 = st[st["straggler"] == strag]
        for (m, n, slow), g in g0.groupby(["method", "nodes", "slow"]):
            h = g.groupby("staleness")["pushes"].sum().sort_index()
            ax.step(h.index, h.values / h.sum(), where="mid", color=method_colour(m, config), ls="--" if slow else "-",
                    label=_label(m, n) + (" (slow worker)" if slow else ""))
        ax.set_xlabel("staleness (updates since the worker's read)")
        ax.set_ylabel("share of applied pushes")
        ax.set_title(f"straggler: {strag}", fontsize=9)
        _legend(ax)
    _save(fig, path)


#: every figure an experiment may draw, in the order its report section shows them by default
FIGURES = {"to_target": ("runs", to_target), "scaling": ("runs", scaling),
           "straggler_sensitivity": ("runs", straggler_sensitivity), "time_breakdown": ("runs", time_breakdown),
           "staleness": ("staleness", staleness), "acc_vs_wall": ("curves", acc_vs_wall),
           "loss_vs_epoch": ("curves", loss_vs_epoch), "epoch_time_vs_nodes": ("runs", epoch_time_vs_nodes)}
#: the across-experiment figures: reports/figures/forest_<page>.png, drawn by rule forest
FOREST_PAGES = ("paper", "harness")


def experiment_figures(config: dict[str, Any], experiment: str) -> list[str]:
    """The figures ``experiment`` draws: its config's ``experiments.<e>.figures`` in the order
    given, by default every figure of :data:`FIGURES` (rule plot draws them, the experiment's
    report section shows them and no other).  A name not in :data:`FIGURES` is a
    :class:`ConfigError` naming the key and the known figures."""
    wanted = ((config.get("experiments") or {}).get(experiment) or {}).get("figures")
    if wanted is None:
        return list(FIGURES)
    unknown = [f for f in wanted if f not in FIGURES]
    if unknown:
        raise ConfigError(f"experiments.{experiment}.figures",
                          f"unknown figure {unknown[0]!r}; known: {', '.join(sorted(FIGURES))}")
    return list(wanted)


def read_tables(tables_dir: Path) -> dict[str, pd.DataFrame]:
    """An experiment's tables for :data:`FIGURES`: ``curves`` is evals.csv where collect wrote
    it (finer evaluation points; written by the same job as epochs.csv), else epochs.csv."""
    d = Path(tables_dir)
    epochs = pd.read_csv(d / "epochs.csv") if (d / "epochs.csv").exists() else pd.DataFrame()
    evals = d / "evals.csv"
    curves = pd.read_csv(evals) if evals.exists() else epochs
    if curves.empty:
        curves = epochs
    runs = pd.read_csv(d / "runs.csv") if (d / "runs.csv").exists() else pd.DataFrame()
    keys = ["experiment", "method", "nodes", "straggler", "seed"]
    # evals.csv holds the evaluations only: the training loss (logged per epoch) comes from
    # epochs.csv at the epochs' ends (the same step in both), each run's time kind from runs.csv
    if (curves is not epochs and "loss/train" in epochs and "loss/train" not in curves
            and set(keys + ["step"]) <= set(epochs) & set(curves)):
        curves = curves.merge(epochs[keys + ["step", "loss/train"]], on=keys + ["step"], how="left")
    if "time_kind" in runs and "time_kind" not in curves and set(keys) <= set(runs) & set(curves):
        curves = curves.merge(runs[keys + ["time_kind"]].drop_duplicates(keys), on=keys, how="left")
    st = d / "staleness.csv"
    staleness_ = pd.read_csv(st) if st.exists() and st.stat().st_size > 1 else pd.DataFrame()
    return {"epochs": epochs, "curves": curves, "runs": runs, "staleness": staleness_}


def draw(name: str, tables: dict[str, pd.DataFrame], path: Path, config: dict[str, Any] | None = None) -> None:
    """Draw figure ``name`` of :data:`FIGURES` from an experiment's ``tables`` to ``path``."""
    table, fn = FIGURES[name]
    fn(tables[table], Path(path), config)
