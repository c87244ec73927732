"""Figures of one experiment from its tidy tables (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _label(method: str, nodes: int) -> str:
    return f"{method} n={nodes}"


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _empty(path: Path, title: str, why: str = "no completed runs") -> None:
    fig, ax = plt.subplots(figsize=(5, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, f"{title}: {why}", ha="center", va="center")
    _save(fig, path)


def _stragglers(ep: pd.DataFrame) -> list[str]:
    s = list(dict.fromkeys(ep["straggler"]))
    return sorted(s, key=lambda v: (v != "none", v))


#: the task's quality metric a curve shows: (epoch key, axis label, y scale), the first one logged
QUALITY = [("acc/val", "validation top-1", "linear"), ("opt/gap", "suboptimality F(x) - F(x*)", "log")]


def _quality(ep: pd.DataFrame) -> tuple[str, str, str]:
    return next((q for q in QUALITY if q[0] in ep and ep[q[0]].notna().any()), QUALITY[0])


def loss_vs_epoch(ep: pd.DataFrame, path: Path) -> None:
    if ep.empty:
        return _empty(path, "loss vs epoch")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    sub = ep[ep["straggler"] == _stragglers(ep)[0]]
    key, label, scale = _quality(ep)
    for (m, n), g in sub.groupby(["method", "nodes"]):
        mean = g.groupby("epoch")[["loss/train", key]].mean()
        axes[0].plot(mean.index + 1, mean["loss/train"], marker="o", ms=3, label=_label(m, n))
        axes[1].plot(mean.index + 1, mean[key], marker="o", ms=3, label=_label(m, n))
    axes[0].set(xlabel="epoch", ylabel="training loss (mean over seeds)",
                yscale="log" if (sub["loss/train"] > 0).all() else "linear")
    axes[1].set(xlabel="epoch", ylabel=f"{label} (mean over seeds)", yscale=scale)
    axes[1].legend(fontsize=7)
    fig.suptitle(f"straggler setting: {_stragglers(ep)[0]}", fontsize=9)
    _save(fig, path)


def _time_word(df: pd.DataFrame) -> str:
    """"simulated time" for runs of the simulated platform, "wall time" for real ranks."""
    kinds = set(df["time_kind"].dropna()) if "time_kind" in df else set()
    if kinds == {"simulated"}:
        return "simulated time"
    return "time (simulated or wall)" if len(kinds) > 1 else "wall time"


def acc_vs_wall(ep: pd.DataFrame, path: Path) -> None:
    if ep.empty:
        return _empty(path, "accuracy vs wall time")
    ss = _stragglers(ep)
    fig, axes = plt.subplots(1, len(ss), figsize=(5 * len(ss), 3.6), squeeze=False)
    key, label, scale = _quality(ep)
    for ax, s in zip(axes[0], ss):
        for (m, n), g in ep[ep["straggler"] == s].groupby(["method", "nodes"]):
            mean = g.groupby("epoch")[["time/wall_s", key]].mean()
            ax.plot(mean["time/wall_s"], mean[key], marker="o", ms=3, label=_label(m, n))
        ax.set(xlabel=f"{_time_word(ep)} (s)", ylabel=label, title=f"straggler: {s}", yscale=scale)
        ax.legend(fontsize=7)
    _save(fig, path)


def epoch_time_vs_nodes(runs: pd.DataFrame, path: Path) -> None:
    if runs.empty:
        return _empty(path, "time per epoch vs nodes")
    ss = _stragglers(runs)
    fig, axes = plt.subplots(1, len(ss), figsize=(5 * len(ss), 3.6), squeeze=False, sharey=True)
    for ax, s in zip(axes[0], ss):
        for m, g in runs[runs["straggler"] == s].groupby("method"):
            st = g.groupby("nodes")["time_per_epoch_s"].agg(["mean", "std"]).fillna(0)
            ax.errorbar(st.index, st["mean"], yerr=st["std"], marker="o", capsize=3, label=m)
        ax.set(xlabel="nodes (workers)", ylabel=f"{_time_word(runs)} per epoch (s), mean +- std over seeds",
               title=f"straggler: {s}")
        ax.set_xscale("log", base=2)
        ax.legend(fontsize=7)
    _save(fig, path)


def straggler_sensitivity(runs: pd.DataFrame, path: Path) -> None:
    """Time per epoch under each straggler setting relative to no straggler, per method and node count."""
    if runs.empty:
        return _empty(path, "straggler sensitivity")
    ss = _stragglers(runs)
    if len(ss) < 2:
        return _empty(path, "straggler sensitivity", f"only the setting {ss[0]!r} was run")
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for (m, n), g in runs.groupby(["method", "nodes"]):
        t = g.groupby("straggler")["time_per_epoch_s"].mean()
        base = t.get("none")
        xs = [s for s in ss if s in t.index]
        ys = [t[s] / base if base else t[s] for s in xs]
        ax.plot([ss.index(x) for x in xs], ys, marker="o", ms=4, label=_label(m, n))
    ax.set_xticks(range(len(ss)), ss)
    ax.axhline(1.0, color="#888", lw=0.8, ls="--")
    ax.set(xlabel="straggler setting", ylabel="time per epoch / time without straggler")
    ax.legend(fontsize=7)
    _save(fig, path)


def _mean_ci(v: pd.Series) -> tuple[float, float, float]:
    from .stats import mean_interval

    v = v.dropna().reset_index(drop=True)
    if v.empty:
        return np.nan, np.nan, np.nan
    lo, hi = mean_interval(v)
    return float(v.mean()), lo, hi


def to_target(runs: pd.DataFrame, path: Path) -> None:
    """Time and bytes to the workload's target accuracy, mean and 95% t interval over seeds."""
    if runs.empty or "time_to_target_s" not in runs:
        return _empty(path, "time / bytes to target accuracy")
    s0 = _stragglers(runs)[0]
    sub = runs[runs["straggler"] == s0]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, col, ylabel in ((axes[0], "time_to_target_s", f"{_time_word(runs)} to target (s)"),
                            (axes[1], "bytes_to_target", "bytes sent per rank to target")):
        labels, means, errs, notes = [], [], [[], []], []
        for (m, n), g in sub.groupby(["method", "nodes"]):
            mean, lo, hi = _mean_ci(g[col])
            labels.append(_label(m, n))
            means.append(0.0 if np.isnan(mean) else mean)
            errs[0].append(0.0 if np.isnan(lo) else mean - lo)
            errs[1].append(0.0 if np.isnan(hi) else hi - mean)
            reached = int(g[col].notna().sum())
            notes.append("" if reached == len(g) else f"{len(g) - reached}/{len(g)} not reached")
        x = np.arange(len(labels))
        ax.bar(x, means, yerr=errs, capsize=3, color="#6a8fbf")
        for xi, note, mv in zip(x, notes, means):
            if note:
                ax.text(xi, mv, note, ha="center", va="bottom", fontsize=7, color="#a00")
        ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=7)
        ax.set(ylabel=ylabel)
    has = "target_value" in runs and runs["target_value"].notna().any()
    target = f"{runs['target_metric'].dropna().iloc[0]} {runs['target_value'].dropna().iloc[0]:g}" if has else "none"
    fig.suptitle(f"target {target}; straggler setting {s0}; bars: mean over seeds, whiskers: 95% t interval",
                 fontsize=9)
    _save(fig, path)


FIGURES = {"loss_vs_epoch": ("epochs", loss_vs_epoch), "acc_vs_wall": ("epochs", acc_vs_wall),
           "epoch_time_vs_nodes": ("runs", epoch_time_vs_nodes),
           "straggler_sensitivity": ("runs", straggler_sensitivity), "to_target": ("runs", to_target)}
