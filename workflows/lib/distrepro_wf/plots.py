"""Figures of one experiment from its tidy tables (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def _label(method: str, nodes: int) -> str:
    return f"{method} n={nodes}"


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _empty(path: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(5, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, f"{title}: no completed runs", ha="center", va="center")
    _save(fig, path)


def _stragglers(ep: pd.DataFrame) -> list[str]:
    s = list(dict.fromkeys(ep["straggler"]))
    return sorted(s, key=lambda v: (v != "none", v))


def loss_vs_epoch(ep: pd.DataFrame, path: Path) -> None:
    if ep.empty:
        return _empty(path, "loss vs epoch")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    sub = ep[ep["straggler"] == _stragglers(ep)[0]]
    for (m, n), g in sub.groupby(["method", "nodes"]):
        mean = g.groupby("epoch")[["loss/train", "acc/val"]].mean()
        axes[0].plot(mean.index + 1, mean["loss/train"], marker="o", ms=3, label=_label(m, n))
        axes[1].plot(mean.index + 1, mean["acc/val"], marker="o", ms=3, label=_label(m, n))
    axes[0].set(xlabel="epoch", ylabel="training loss (mean over seeds)", yscale="log")
    axes[1].set(xlabel="epoch", ylabel="validation top-1 (mean over seeds)")
    axes[1].legend(fontsize=7)
    fig.suptitle(f"straggler setting: {_stragglers(ep)[0]}", fontsize=9)
    _save(fig, path)


def acc_vs_wall(ep: pd.DataFrame, path: Path) -> None:
    if ep.empty:
        return _empty(path, "accuracy vs wall time")
    ss = _stragglers(ep)
    fig, axes = plt.subplots(1, len(ss), figsize=(5 * len(ss), 3.6), squeeze=False)
    for ax, s in zip(axes[0], ss):
        for (m, n), g in ep[ep["straggler"] == s].groupby(["method", "nodes"]):
            mean = g.groupby("epoch")[["time/wall_s", "acc/val"]].mean()
            ax.plot(mean["time/wall_s"], mean["acc/val"], marker="o", ms=3, label=_label(m, n))
        ax.set(xlabel="wall time (s)", ylabel="validation top-1", title=f"straggler: {s}")
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
        ax.set(xlabel="nodes (workers)", ylabel="time per epoch (s), mean +- std over seeds",
               title=f"straggler: {s}")
        ax.set_xscale("log", base=2)
        ax.legend(fontsize=7)
    _save(fig, path)


FIGURES = {"loss_vs_epoch": ("epochs", loss_vs_epoch), "acc_vs_wall": ("epochs", acc_vs_wall),
           "epoch_time_vs_nodes": ("runs", epoch_time_vs_nodes)}
