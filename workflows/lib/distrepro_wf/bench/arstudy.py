"""The survey's all-reduce study (rules ``allreduce_study_*``, ``workflows/rules/bench.smk``;
settings and the survey's statements: ``config/allreduce_study.yaml``).

Every timing is a child process: ``python -m impls.bench.allreduce sim`` (one SimGrid
simulation per platform, every node count in it) and one ``torchrun ... impls.bench.allreduce
real`` per real world size.  The rest is pure and tested (``tests/test_arstudy.py``):

* :func:`study_table`: every measured time beside its alpha-beta time
  (:func:`impls.comm.costmodel.allreduce_cost`; the simulated platforms' alpha and beta; on real
  ranks alpha and beta fitted by least squares to that world's measurements, since loopback
  has no preset), the ratio, the bus bandwidth ``2 (n-1)/n S / t`` (the ring's bytes: what an
  ideal all-reduce must move per rank, so algorithms compare on one scale) and the rank of the
  algorithm at its setting;
* :func:`winners`: the fastest algorithm per (platform, n, size) and its margin
  (:func:`winners_grid`: the same as a platform x n by size grid);
* :func:`evaluate_claims`: the survey's statements of the config, per setting and overall.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from impls.backends import is_simulated
from impls.errors import ConfigError

from ..pipeline.launch import standalone

REPO = Path(__file__).resolve().parents[4]
KEYS = {"platforms", "nodes", "sizes", "algorithms", "real", "claims"}
REAL_KEYS = {"nodes", "sizes", "reps"}
CLAIM_KEYS = {"id", "statement", "sources", "a", "b", "where", "expect"}
OPS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}
COLUMNS = ["backend", "platform", "n", "algorithm", "bytes", "seconds", "alpha_beta_s", "ratio", "model",
           "bus_gbps", "rank", "reps"]


def platforms(path: str | os.PathLike) -> list[str]:
    """The simulated platforms a study file sweeps (its ``platforms`` keys): the rule's inputs."""
    from ..pipeline.yamlio import load_yaml

    return list(load_yaml(path)["platforms"])


def load_spec(raw: Mapping[str, Any], where: str = "config/allreduce_study.yaml") -> dict[str, Any]:
    """The study's settings, checked: every error names the key and the allowed values."""
    from impls.comm.allreduce import ALGORITHMS
    from impls.sim.platforms import PRESETS

    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise ConfigError(f"{where}", f"unknown key(s) {unknown}; allowed: {', '.join(sorted(KEYS))}")
    spec = dict(raw)
    for key in ("platforms", "nodes", "sizes", "algorithms"):
        if not isinstance(spec.get(key), list) or not spec[key]:
            raise ConfigError(f"{where}: {key}", "a non-empty list is required")
    for p in spec["platforms"]:
        if p not in PRESETS:
            raise ConfigError(f"{where}: platforms", f"unknown platform {p!r}; allowed: {', '.join(PRESETS)}")
    for a in spec["algorithms"]:
        if a not in ALGORITHMS:
            raise ConfigError(f"{where}: algorithms", f"unknown algorithm {a!r}; allowed: {', '.join(ALGORITHMS)}")
    if any(not isinstance(n, int) or not 2 <= n <= 256 for n in spec["nodes"]):
        raise ConfigError(f"{where}: nodes", "integers in 2..256 (the presets' max_hosts)")
    real = dict(spec.get("real") or {})
    bad = sorted(set(real) - REAL_KEYS)
    if bad:
        raise ConfigError(f"{where}: real", f"unknown key(s) {bad}; allowed: {', '.join(sorted(REAL_KEYS))}")
    spec["real"] = {"nodes": real.get("nodes", [2]), "sizes": real.get("sizes", spec["sizes"]),
                    "reps": int(real.get("reps", 5))}
    ids = set()
    for i, c in enumerate(spec.get("claims") or []):
        key = f"{where}: claims[{i}]"
        missing = sorted({"id", "statement", "sources", "a", "b", "expect"} - set(c))
        extra = sorted(set(c) - CLAIM_KEYS)
        if missing or extra:
            raise ConfigError(key, f"missing {missing} / unknown {extra}; keys: {', '.join(sorted(CLAIM_KEYS))}")
        if c["id"] in ids:
            raise ConfigError(key, f"duplicate id {c['id']!r}")
        ids.add(c["id"])
        if c["expect"].get("op") not in OPS:
            raise ConfigError(f"{key}.expect.op", f"{c['expect'].get('op')!r}; allowed: {', '.join(OPS)}")
        for side in _sides(c):
            if side["algorithm"] not in ALGORITHMS:
                raise ConfigError(f"{key}", f"unknown algorithm {side['algorithm']!r}; allowed: {', '.join(ALGORITHMS)}")
    return spec


def _sides(c: Mapping[str, Any]) -> list[dict[str, Any]]:
    b = c["b"] if isinstance(c["b"], list) else [c["b"]]
    return [dict(c["a"])] + [{"algorithm": x} if isinstance(x, str) else dict(x) for x in b]


# -- child processes ------------------------------------------------------------------------
def sim_rows(platform: str, nodes: Iterable[int], sizes: Iterable[float], algorithms: Iterable[str],
             log: str | os.PathLike, timeout_s: float = 3600) -> list[dict[str, Any]]:
    """:func:`impls.bench.allreduce.sim_times` in a child process (one simulation)."""
    cmd = [sys.executable, "-m", "impls.bench.allreduce", "sim", "--platform", platform,
           "--nodes", ",".join(map(str, nodes)), "--sizes", ",".join(repr(float(s)) for s in sizes),
           "--algorithms", ",".join(algorithms)]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout_s)
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n{p.stderr[-5000:]}")
    if p.returncode != 0:
        raise RuntimeError(f"simulation failed ({p.returncode}): {p.stderr[-2000:]}")
    return [{**r, "platform": platform, "backend": "simgrid"} for r in json.loads(p.stdout.strip().splitlines()[-1])]


def real_rows(n: int, sizes: Iterable[float], algorithms: Iterable[str], reps: int, workdir: str | os.PathLike,
              log: str | os.PathLike, timeout_s: float = 1800) -> list[dict[str, Any]]:
    """:func:`impls.bench.allreduce.real_times` in one ``torchrun --standalone`` launch of ``n`` ranks."""
    out = Path(workdir, f"real_n{n}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = standalone(n, "-m", "impls.bench.allreduce", "real", "--sizes", ",".join(repr(float(s)) for s in sizes),
                     "--algorithms", ",".join(algorithms), "--reps", str(reps), "--out", str(out))
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        subprocess.run(cmd, check=True, stdout=f, stderr=subprocess.STDOUT, cwd=REPO, timeout=timeout_s)
    return [{**r, "platform": "loopback", "backend": "gloo"} for r in json.loads(out.read_text())]


# -- tables ---------------------------------------------------------------------------------
def fit_alpha_beta(rows: pd.DataFrame) -> tuple[float, float]:
    """Least-squares alpha (s) and beta (bytes/s) of ``seconds = steps alpha + wire_bytes / beta``
    over the rows' algorithms (of :mod:`impls.comm.allreduce`) and sizes; relative residuals weigh
    every size alike."""
    from impls.comm.costmodel import allreduce_cost

    costs = [allreduce_cost(a, b, int(n)) for a, b, n in zip(rows["algorithm"], rows["bytes"], rows["n"])]
    t = rows["seconds"].to_numpy(float)
    X = np.array([[c.steps, c.wire_bytes] for c in costs], float) / t[:, None]
    coef, *_ = np.linalg.lstsq(X, np.ones(len(t)), rcond=None)
    alpha, inv_beta = max(float(coef[0]), 0.0), max(float(coef[1]), 1e-30)
    return alpha, 1.0 / inv_beta


def study_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Measured times (rows of :func:`sim_rows` / :func:`real_rows`) with their alpha-beta times."""
    from impls.comm.allreduce import ALGORITHMS, DUPLEX
    from impls.comm.costmodel import allreduce_cost, alpha_beta_seconds
    from impls.sim.platforms import alpha_beta, platform_config

    df = pd.DataFrame(rows)
    if "reps" not in df:
        df["reps"] = np.nan
    out = []
    for (backend, platform, n), g in df.groupby(["backend", "platform", "n"], sort=False):
        g = g.copy()
        ours = g[g["algorithm"].isin(ALGORITHMS)]  # not the process group's own all_reduce
        if is_simulated(backend):
            cfg = platform_config(platform)
            alpha, beta = alpha_beta(cfg)
            one_way = alpha_beta(cfg, duplex=False)[1]
            betas = {a: beta if d else one_way for a, d in DUPLEX.items()}
            model = f"preset alpha={alpha * 1e6:g} us, beta={beta / 1e9:.4g} GB/s (one-way {one_way / 1e9:.4g})"
        else:
            alpha, beta = fit_alpha_beta(ours)
            betas = {a: beta for a in DUPLEX}
            model = f"fitted alpha={alpha * 1e6:.3g} us, beta={beta / 1e9:.3g} GB/s"
        g["alpha_beta_s"] = [alpha_beta_seconds(allreduce_cost(a, b, int(n)), alpha, betas[a]) if a in betas else np.nan
                             for a, b in zip(g["algorithm"], g["bytes"])]
        g["model"] = model
        out.append(g)
    df = pd.concat(out, ignore_index=True)
    df["ratio"] = (df["seconds"] / df["alpha_beta_s"]).round(6)
    df["bus_gbps"] = (2 * (df["n"] - 1) / df["n"] * df["bytes"] / df["seconds"] / 1e9).round(6)
    df["rank"] = df.groupby(["backend", "platform", "n", "bytes"])["seconds"].rank(method="min").astype(int)
    return df[COLUMNS].sort_values(["backend", "platform", "n", "bytes", "algorithm"]).reset_index(drop=True)


def winners(table: pd.DataFrame) -> pd.DataFrame:
    """Per (backend, platform, n, size): the fastest algorithm, the runner-up and how much slower
    it is, and whether the alpha-beta model picks the same winner."""
    from impls.comm.allreduce import ALGORITHMS

    rows = []
    for key, g in table[table["algorithm"].isin(ALGORITHMS)].groupby(["backend", "platform", "n", "bytes"]):
        g = g.sort_values("seconds")
        best, second = g.iloc[0], g.iloc[1] if len(g) > 1 else None
        model_best = g.sort_values("alpha_beta_s").iloc[0]["algorithm"] if g["alpha_beta_s"].notna().all() else ""
        rows.append({"backend": key[0], "platform": key[1], "n": int(key[2]), "bytes": key[3],
                     "winner": best["algorithm"], "seconds": best["seconds"],
                     "runner_up": second["algorithm"] if second is not None else "",
                     "runner_up_slower": round(second["seconds"] / best["seconds"], 4) if second is not None else np.nan,
                     "model_winner": model_best, "model_agrees": model_best == best["algorithm"]})
    return pd.DataFrame(rows)


def winners_grid(win: pd.DataFrame) -> pd.DataFrame:
    """:func:`winners` as a grid: one row per (platform, n), one column per message size, the
    winner's name in each cell ("*" where the alpha-beta model picks another)."""
    w = win.assign(cell=[f"{a}{'' if ok else '*'}" for a, ok in zip(win["winner"], win["model_agrees"])],
                   size=[_size_label(b) for b in win["bytes"]])
    order = list(dict.fromkeys(_size_label(b) for b in sorted(win["bytes"].unique())))
    grid = w.pivot_table(index=["platform", "n"], columns="size", values="cell", aggfunc="first")
    return grid[order].reset_index().rename_axis(None, axis=1)


def _size_label(b: float) -> str:
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= k:
            return f"{b / k:g} {unit}"
    return f"{b:g} B"


def _matches(value: float, sel: Any) -> bool:
    if sel is None:
        return True
    if isinstance(sel, list):
        return value in sel
    return sel.get("min", -np.inf) <= value <= sel.get("max", np.inf)


def evaluate_claims(table: pd.DataFrame, claims: list[dict[str, Any]],
                    verified: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Each claim at each matching simulated setting: ``time(a) / time(b)`` against ``expect``.

    A side with ``n`` is taken at that node count (the setting's ``n`` is then the other side's,
    or the claim's own where both fix it).  ``verified``: numbers.csv's label of each source row."""
    sim = table[table["backend"].map(is_simulated).astype(bool)]
    t = {(p, int(n), a, float(b)): s for p, n, a, b, s in
         zip(sim["platform"], sim["n"], sim["algorithm"], sim["bytes"], sim["seconds"])}
    rows = []
    for c in claims:
        where = c.get("where") or {}
        a, *bs = _sides(c)
        op, value = c["expect"]["op"], float(c["expect"]["value"])
        src = "; ".join(f"{s} ({(verified or {}).get(s, '?')})" for s in c["sources"])
        settings = sorted({(k[0], k[1], k[3]) for k in t})
        for b in bs:
            fixed = "n" in a and "n" in b  # both node counts fixed: one setting per platform and size
            seen = set()
            for p, n, size in settings:
                if not (_matches(p, where.get("platforms")) and _matches(size, where.get("sizes"))):
                    continue
                if fixed:
                    if (p, size) in seen:
                        continue
                    seen.add((p, size))
                elif not _matches(n, where.get("nodes")):
                    continue
                na, nb = a.get("n", n), b.get("n", n)
                ta, tb = t.get((p, na, a["algorithm"], size)), t.get((p, nb, b["algorithm"], size))
                if ta is None or tb is None:
                    continue
                m = ta / tb
                rows.append({"claim": c["id"], "platform": p, "bytes": size,
                             "a": f"{a['algorithm']}@{na}", "b": f"{b['algorithm']}@{nb}", "a_s": ta, "b_s": tb,
                             "measured": round(m, 5), "expect": f"a/b {op} {value:g}",
                             "passes": bool(OPS[op](m, value)), "statement": c["statement"], "sources": src})
    return pd.DataFrame(rows, columns=["claim", "platform", "bytes", "a", "b", "a_s", "b_s", "measured", "expect",
                                       "passes", "statement", "sources"])


def claims_summary(settings: pd.DataFrame, claims: list[dict[str, Any]]) -> pd.DataFrame:
    """Per claim: reproduced (every setting passes), not reproduced (none), partly reproduced
    (the failing settings named), not comparable (no setting ran)."""
    rows = []
    for c in claims:
        g = settings[settings["claim"] == c["id"]]
        fails = g[~g["passes"]]
        if g.empty:
            status, note = "not comparable", "no simulated setting of the sweep matches `where`"
        elif fails.empty:
            status, note = "reproduced", f"all {len(g)} settings pass"
        elif len(fails) == len(g):
            status, note = "not reproduced", f"all {len(g)} settings fail"
        else:
            status = "partly reproduced"
            note = f"{len(fails)} of {len(g)} settings fail: " + ", ".join(
                f"{r.platform} {r.a} vs {r.b} at {r.bytes:g} B ({r.measured:g})" for r in fails.head(6).itertuples())
        rows.append({"claim": c["id"], "status": status, "settings": len(g), "passing": int(g["passes"].sum()),
                     "min_measured": g["measured"].min() if len(g) else np.nan,
                     "max_measured": g["measured"].max() if len(g) else np.nan,
                     "expect": f"a/b {c['expect']['op']} {float(c['expect']['value']):g}", "note": note,
                     "statement": c["statement"], "sources": g["sources"].iloc[0] if len(g) else ", ".join(c["sources"])})
    return pd.DataFrame(rows)


def figure(table: pd.DataFrame, path: str | os.PathLike, nodes: Iterable[int] = (4, 32, 256)) -> None:
    """Time vs message size per algorithm (markers: measured; lines: alpha-beta), one panel per
    platform (rows) and node count (columns); real gloo ranks in the last row."""
    from ..report.plots import _plt

    plt = _plt()
    on_sim = table["backend"].map(is_simulated).astype(bool)
    simulated = table[on_sim]
    panels = [(p, n) for p in simulated["platform"].unique() for n in nodes
              if ((table["platform"] == p) & (table["n"] == n)).any()]
    real = table[~on_sim]  # real ranks (gloo on this machine's loopback)
    rows_ = sorted({p for p, _ in panels}, key=list(table["platform"].unique()).index)
    ncols = max(len(nodes), real["n"].nunique())
    nrows = len(rows_) + (1 if len(real) else 0)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.4 * nrows), squeeze=False)
    colors = {a: f"C{i}" for i, a in enumerate(["ring", "tree", "recursive_doubling", "rabenseifner", "ps", "gloo"])}
    cells = [(i, j, (table["platform"] == p) & (table["n"] == n), f"{p}, n={n} (simulated)")
             for i, p in enumerate(rows_) for j, n in enumerate(nodes)]
    cells += [(len(rows_), j, ~on_sim & (table["n"] == n), f"gloo loopback, n={n} (real)")
              for j, n in enumerate(sorted(real["n"].unique()))]
    for i, j, mask, title in cells:
        ax = axes[i][j]
        g = table[mask]
        if g.empty:
            ax.set_visible(False)
            continue
        for algo, h in g.groupby("algorithm"):
            h = h.sort_values("bytes")
            ax.plot(h["bytes"], h["seconds"], "o", ms=4, color=colors.get(algo, "k"), label=algo)
            if h["alpha_beta_s"].notna().any():
                ax.plot(h["bytes"], h["alpha_beta_s"], "-", lw=1, color=colors.get(algo, "k"), alpha=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("bytes per rank")
        ax.set_ylabel("seconds")
        ax.grid(alpha=0.3, which="both")
    for row in axes:
        for ax in row:
            if not ax.has_data():
                ax.set_visible(False)
    axes[0][0].legend(fontsize=7, title="markers: measured, lines: alpha-beta", title_fontsize=7)
    if len(real):
        axes[len(rows_)][0].legend(fontsize=7, title="gloo: its own all_reduce; lines: fitted", title_fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
