"""Benchmarks of the simulated platform (rules ``bench_sim_*``, ``workflows/rules/bench.smk``).

SimGrid runs one simulation per process, so every simulation here is a child process
(``python -m impls.sim`` for a training run, ``python -m impls.sim.measure`` for a
collective); this module builds their configs, runs them (wall time and peak RSS of the
child, from ``wait4``), reads their metrics and turns them into the benchmark tables.
Everything that is not a child process is pure and tested (``tests/test_simbench.py``).

* ``sim_cost_model.csv`` (:func:`cost_model_table`): a simulated ring all-reduce against
  the alpha-beta formula ``2 (n - 1) (alpha + S / (n beta))`` of the platform preset.
* ``sim_slowmo_table2a.csv`` (:func:`slowmo_table`): SlowMo (Wang et al. 2020) Table 2a,
  time per iteration at 32 nodes on 10 GbE, under the ``resnet50_v100x8`` profile.
* ``sim_paper_rows.csv`` (:func:`paper_row`, ``scripts/bench_sim_paper_rows.py``): every
  published timing row we hold against its prediction; the rows a platform parameter
  (``allreduce_efficiency``; the every-message bandwidth efficiency of :func:`with_msg_efficiency`,
  fitted on one gossip row by :func:`fit_by_simulation`) was fitted on are marked ``fitted``.
* ``sim_scale.csv`` (:func:`scale_row`): virtual node-steps per second of this machine.
* ``sim_vs_real.csv`` (:func:`vs_real_row`): real ranks (torchrun) against the simulated
  backend with the ``measured`` profile, same config otherwise.

Each benchmark's settings are :data:`DEFAULTS`, overridable key by key from the pipeline
config (``benchmarks: {sim_scale: {nodes: [16, 64]}}``: :func:`bench_spec`).
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from impls.errors import ConfigError

from ..claims.published import FITTED_ROWS
from ..pipeline.child import Child, check, run_child, simulate  # noqa: F401  (this module's API too)
from ..pipeline.launch import run_command
from .ranges import TIMEOUT_S, Range, check_spec

REPO = Path(__file__).resolve().parents[4]

COST_TOL = 0.05  # the simulator's bound: ring all-reduce within 5 % of alpha-beta
SLOWMO_TOL = 0.15
VS_REAL_TOL = 0.15
FIVE_MIN_S = 300.0

SGP_1PEER = {"name": "sgp", "topology": {"name": "exponential", "peers": 1}}
OSGP_1PEER = {"name": "osgp", "tau": 1, "topology": {"name": "exponential", "peers": 1}}

# the harness's tiny stand-in (tests/conftest.py::TINY_WORKLOAD), one epoch
TINY_WORKLOAD: dict[str, Any] = {
    "dataset": {"name": "digits"},
    "model": {"name": "mlp", "hidden": [32]},
    "batch_size": 16,
    "epochs": 1,
    "max_steps_per_epoch": 10,
    "optimizer": {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4},
}

# SlowMo Table 2a rows of config/published/numbers.csv, by method
SLOWMO_T2A_IDS = {"allreduce_sgd": "slowmo_t2a_ar_tpi", "sgp": "slowmo_t2a_sgp_tpi", "osgp": "slowmo_t2a_osgp_tpi"}
SLOWMO_LABELS = {"allreduce_sgd": "AR-SGD", "sgp": "SGP", "osgp": "OSGP"}

DEFAULTS: dict[str, dict[str, Any]] = {
    "sim_cost_model": {
        "platforms": ["ethernet_10g", "infiniband_100g"],
        "nodes": [4, 8, 16, 32, 64],
        "sizes": [1e3, 1e5, 1e7, 1e8],
    },
    "sim_slowmo": {
        "nodes": 32,
        "platform": "ethernet_10g",
        "profile": "resnet50_v100x8",
        # batch 4: 10 steps per worker at 32 workers (batch 16 leaves each 2); the profile
        # charges its step time and weighs the model as ResNet-50 whatever the batch
        "workload": {"batch_size": 4},
        # AR-SGD with its all-reduce after backward: the profile's compute is the published AR-SGD
        # row minus exactly that all-reduce (impls/sim/profiles.py), the calibration row's meaning
        "methods": {"allreduce_sgd": {"name": "allreduce_sgd", "overlap_backward": False}, "sgp": SGP_1PEER,
                    "osgp": OSGP_1PEER},
    },
    "sim_scale": {
        "nodes": [16, 64, 256],
        "methods": {"allreduce_sgd": "allreduce_sgd", "sgp": SGP_1PEER},
        "profile": "resnet50_v100x8",
        "platform": "ethernet_10g",
        # batch 1 x 4 steps: 1,438 digits training samples give every worker 4 steps up to 359 workers
        "workload": {"batch_size": 1, "max_steps_per_epoch": 4},
        "timeout_s": 900,
    },
    "sim_paper_rows": {
        # batch 4: 10 steps per worker at 32 workers; the profile charges its own compute
        "workload": {"batch_size": 4},
        "platform": "ethernet_10g",
        "timeout_s": 900,
    },
    "sensitivity_sweep": {
        # rule sensitivity_sweep (distrepro_wf/claims/sweep.py): the claims to sweep ([]: every simulated
        # speed claim), each short run's epochs of steps (the last epoch is read), a simulation's limit
        "claims": [],
        "steps": 3,
        "epochs": 2,
        "timeout_s": 600,
    },
    "sim_vs_real": {
        "nodes": 2,
        "workload": "digits_cnn",
        # digits_cnn's 16 channels at batch 32 take ~2 ms a step here: 64 channels at batch 128
        # make it compute-bound (~25 ms); 3 epochs of 5 steps per rank
        "workload_overrides": {"model": {"name": "cnn", "channels": 64}, "batch_size": 128, "epochs": 3,
                               "max_steps_per_epoch": None},
        "platform": "ethernet_10g",
        "warmup_steps": 2,
    },
}


#: each benchmark's numeric settings and their allowed ranges (:mod:`distrepro_wf.bench.ranges`)
RANGES: dict[str, dict[str, Range]] = {
    "sim_cost_model": {"nodes": Range(2, 1024, integer=True, many=True), "sizes": Range(0, 1e12, lo_open=True, many=True)},
    "sim_slowmo": {"nodes": Range(2, 1024, integer=True)},
    "sim_scale": {"nodes": Range(2, 1024, integer=True, many=True), "timeout_s": TIMEOUT_S},
    "sim_paper_rows": {"timeout_s": TIMEOUT_S},
    # ~320 simulations of epochs x steps each: 1000 x 100 steps is already hours
    "sensitivity_sweep": {"steps": Range(1, 1000, integer=True), "epochs": Range(1, 100, integer=True),
                          "timeout_s": TIMEOUT_S},
    "sim_vs_real": {"nodes": Range(2, 64, integer=True), "warmup_steps": Range(0, 1000, integer=True)},
}
#: settings that are lists of names
NAME_LISTS: dict[str, tuple[str, ...]] = {"sensitivity_sweep": ("claims",), "sim_cost_model": ("platforms",)}


def bench_spec(name: str, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """:data:`DEFAULTS` of benchmark ``name`` with the config's keys (``benchmarks.<name>``)
    replacing them; an unknown key, or a value outside its range (:data:`RANGES`), is refused
    naming the key and the allowed values."""
    spec = copy.deepcopy(DEFAULTS[name])
    if given is not None and not isinstance(given, Mapping):
        raise ConfigError(f"benchmarks.{name}", f"expected a mapping of settings, got {given!r}")
    unknown = sorted(set(given or {}) - set(spec))
    if unknown:
        raise ConfigError(f"benchmarks.{name}", f"unknown key(s) {unknown}; allowed keys: {', '.join(sorted(spec))}")
    spec.update(copy.deepcopy(dict(given or {})))
    check_spec(name, spec, RANGES.get(name, {}), NAME_LISTS.get(name, ()))
    return spec


def run_config(algorithm: str | Mapping[str, Any], nodes: int, workload: Mapping[str, Any], seed: int = 1,
               experiment: str = "bench", **over: Any) -> dict[str, Any]:
    """A resolved run config of one benchmark or study run, outside any experiment grid (an
    experiment's runs come from :func:`distrepro_wf.pipeline.config.run_config`; the tests' from
    ``tests/conftest.py::make_config``): ``over`` sets top-level keys (``backend``,
    ``platform``, ``profile``).  Every benchmark builds its run configs here."""
    algo = {"name": algorithm} if isinstance(algorithm, str) else copy.deepcopy(dict(algorithm))
    cfg = {"experiment": experiment, "method": algo["name"], "nodes": nodes, "seed": seed, "algorithm": algo,
           "workload": copy.deepcopy(dict(workload)), "straggler_name": "none", "straggler": {"kind": "none"}}
    cfg.update(copy.deepcopy(over))
    return cfg


def sim_config(algorithm: str | Mapping[str, Any], nodes: int, workload: Mapping[str, Any], platform: Any,
               profile: Any, **over: Any) -> dict[str, Any]:
    return run_config(algorithm, nodes, workload, backend="simgrid", platform=platform, profile=profile, **over)


def merged(base: Mapping[str, Any], over: Mapping[str, Any] | None) -> dict[str, Any]:
    """``base`` with ``over``'s top-level keys replacing its (a value None removes the key)."""
    out = copy.deepcopy(dict(base))
    for k, v in (over or {}).items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = copy.deepcopy(v)
    return out


def real_run(cfg: Mapping[str, Any], workdir: str | os.PathLike, log: str | os.PathLike,
             timeout_s: float = 1800) -> tuple[Child, Path]:
    """``cfg`` on real ranks: one ``torchrun --standalone`` launch of ``impls.run`` (gloo on CPU)."""
    from impls.config.runconfig import world_size

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "cfg.json").write_text(json.dumps(cfg, indent=1))
    cmd = run_command(world_size(cfg), workdir / "cfg.json", workdir / "out")
    child = run_child(cmd, log, timeout_s)
    check(child, workdir / "out", "real run")
    return child, workdir / "out"


def collective_times(platform: Any, n: int, sizes: Iterable[float], log: str | os.PathLike,
                     timeout_s: float = 600) -> list[dict[str, Any]]:
    """:func:`impls.sim.measure.collective_times` in a child process (``python -m impls.sim.measure``)."""
    cmd = [sys.executable, "-m", "impls.sim.measure", "--platform", json.dumps(platform), "--n", str(n),
           "--sizes", ",".join(repr(float(s)) for s in sizes)]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout_s)
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    if p.returncode != 0:
        raise RuntimeError(f"collective_times failed ({p.returncode}): {p.stderr[-2000:]}")
    text = p.stdout
    return json.loads(text.strip().splitlines()[-1])


# -- metrics --------------------------------------------------------------------------------
def step_times(out: str | os.PathLike, key: str = "time/step_s") -> dict[int, list[float]]:
    """``key`` (default ``time/step_s``) of every step, per rank, in order, from
    ``out/metrics/rank*.jsonl``."""
    got = {}
    for path in Path(out, "metrics").glob("rank*.jsonl"):
        recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        got[int(path.stem[4:])] = [r[key] for r in recs if r["kind"] == "step"]
    return dict(sorted(got.items()))


def after_warmup(steps: Mapping[int, list[float]], skip: int, ranks: Iterable[int] | None = None) -> list[float]:
    """Every step time of ``ranks`` (default all) after each rank's first ``skip`` steps."""
    keep = set(steps) if ranks is None else set(ranks)
    out = [t for r, ts in steps.items() if r in keep for t in ts[skip:]]
    if not out:
        raise ValueError(f"no step after the first {skip} (steps per rank: {[len(v) for v in steps.values()]})")
    return out


def profile_compute_ms(out: str | os.PathLike) -> float:
    """The simulated compute of a step (``time/compute_s`` of rank 0's first step), ms."""
    with open(Path(out, "metrics", "rank0.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if rec["kind"] == "step":
                return rec["time/compute_s"] * 1e3
    raise ValueError(f"no step in {out}")


# -- tables ---------------------------------------------------------------------------------
def platform_label(platform: Any) -> str:
    return platform if isinstance(platform, str) else platform["name"]


def cost_model_table(measured: list[dict[str, Any]], platform: Any, tol: float = COST_TOL) -> pd.DataFrame:
    """Rows of :func:`collective_times` (``n``, ``bytes``, ``seconds``) against the platform's
    alpha-beta ring formula."""
    from impls.sim.measure import ring_allreduce_alpha_beta
    from impls.sim.platforms import alpha_beta, platform_config

    alpha, beta = alpha_beta(platform_config(platform))
    rows = []
    for m in measured:
        want = ring_allreduce_alpha_beta(m["bytes"], m["n"], alpha, beta)
        ratio = m["seconds"] / want
        rows.append({"platform": platform_label(platform), "n": int(m["n"]), "bytes": int(m["bytes"]),
                     "simulated_s": m["seconds"], "alpha_beta_s": want, "ratio": round(ratio, 5),
                     "within_5pct": bool(abs(ratio - 1) <= tol), "alpha_s": alpha, "beta_bytes_per_s": beta})
    return pd.DataFrame(rows, columns=["platform", "n", "bytes", "simulated_s", "alpha_beta_s", "ratio", "within_5pct",
                                       "alpha_s", "beta_bytes_per_s"])


def published_tpi(numbers_csv: str | os.PathLike, ids: Mapping[str, str] = SLOWMO_T2A_IDS) -> dict[str, float]:
    """Published time per iteration (ms) by method, from the project's numbers.csv rows ``ids``."""
    numbers = pd.read_csv(numbers_csv, dtype=str).set_index("id")
    out = {}
    for method, nid in ids.items():
        if nid not in numbers.index:
            raise ValueError(f"{numbers_csv}: no row {nid!r} (published {method})")
        row = numbers.loc[nid]
        if row["metric"] != "time per iteration" or row["unit"] != "ms":
            raise ValueError(f"{numbers_csv}: row {nid!r} is {row['metric']!r} in {row['unit']!r}, "
                             f"not time per iteration in ms")
        out[method] = float(row["value"])
    return out


def slowmo_table(published: Mapping[str, float], simulated_ms: Mapping[str, float],
                 calibrated_from: str | None = None, tol: float = SLOWMO_TOL) -> pd.DataFrame:
    """Published against simulated time per iteration, in ``published``'s method order, which
    is the published ordering checked (slowest first)."""
    order = [m for m in published if m in simulated_ms]
    pub_sorted = sorted(order, key=lambda m: -published[m])
    sim_sorted = sorted(order, key=lambda m: -simulated_ms[m])
    kept = pub_sorted == sim_sorted
    chain = " > ".join(SLOWMO_LABELS.get(m, m) for m in pub_sorted)
    ordering = (f"ordering {chain} (published) {'preserved' if kept else 'NOT preserved'}: simulated "
                + " > ".join(f"{SLOWMO_LABELS.get(m, m)} {simulated_ms[m]:.1f}" for m in sim_sorted) + " ms")
    rows = []
    for m in order:
        ratio = simulated_ms[m] / published[m]
        if m == calibrated_from:
            role = "calibration: a parameter was fitted on this published row, so the ratio is ~1 by construction"
        else:
            role = ("prediction (compute from the device's published throughput, the platform preset as it is; "
                    "the AR row's fitted all-reduce efficiency is in sim_paper_rows)")
        rows.append({"method": m, "published_ms": published[m], "simulated_ms": round(simulated_ms[m], 3),
                     "ratio": round(ratio, 4), "within_15pct": bool(abs(ratio - 1) <= tol),
                     "role": "calibration" if m == calibrated_from else "prediction",
                     "ordering_preserved": kept, "note": f"{role}; {ordering}"})
    return pd.DataFrame(rows, columns=["method", "published_ms", "simulated_ms", "ratio", "within_15pct", "role",
                                       "ordering_preserved", "note"])


def scale_row(method: str, nodes: int, steps_per_epoch: int, child: Child, limit_s: float = FIVE_MIN_S,
              **extra: Any) -> dict[str, Any]:
    """One simulation of one epoch: virtual node-steps (workers x steps) per wall second.

    ``cpu_per_wall``: the child's CPU seconds per wall second; a simulation runs one actor
    at a time, so about 1 on a quiet machine, less where other processes took the cores."""
    return {"method": method, "nodes": nodes, "steps_per_epoch": steps_per_epoch, "wall_s": round(child.wall_s, 2),
            "node_steps_per_s": round(nodes * steps_per_epoch / child.wall_s, 2),
            "peak_rss_mb": round(child.peak_rss_mb, 1), "peak_vm_mb": round(child.peak_vm_mb, 1),
            "peak_maps": child.peak_maps, "under_5_min": bool(child.wall_s < limit_s),
            "cpu_per_wall": round(child.cpu_s / child.wall_s, 2), **extra}


def largest_under(rows: pd.DataFrame, limit_s: float = FIVE_MIN_S) -> dict[str, int | None]:
    """Per method, the largest node count whose epoch took under ``limit_s``."""
    out: dict[str, int | None] = {}
    for m, g in rows.groupby("method", sort=False):
        ok = g[g["wall_s"] < limit_s]
        out[m] = int(ok["nodes"].max()) if len(ok) else None
    return out


def median_ms(per_rank: Mapping[int, list[float]], warmup: int) -> float:
    return statistics.median(after_warmup(per_rank, warmup)) * 1e3


def vs_real_row(real: Mapping[str, Mapping[int, list[float]]], sim: Mapping[str, Mapping[int, list[float]]],
                compute_ms: float, warmup: int, tol: float = VS_REAL_TOL) -> dict[str, Any]:
    """Real against simulated ranks: medians over every rank's steps after ``warmup`` of the
    step time and its parts.  ``real``/``sim``: metric key (``time/step_s``,
    ``time/compute_s``, ``time/comm_s``) -> :func:`step_times`; ``compute_ms``: the measured
    profile's compute per step.  The note says where a gap beyond ``tol`` comes from."""
    r = {k: median_ms(v, warmup) for k, v in real.items()}
    s = {k: median_ms(v, warmup) for k, v in sim.items()}
    step, sim_step = r["time/step_s"], s["time/step_s"]
    ratio = sim_step / step
    within = bool(abs(ratio - 1) <= tol)
    other_real = step - r["time/compute_s"] - r["time/comm_s"]
    other_sim = sim_step - s["time/compute_s"] - s["time/comm_s"]
    parts = (f"compute {r['time/compute_s']:.2f} ms real vs {s['time/compute_s']:.2f} simulated; "
             f"communication {r['time/comm_s']:.2f} vs {s['time/comm_s']:.2f}; "
             f"the rest of the step (optimizer, bookkeeping) {other_real:.2f} vs {other_sim:.2f}")
    if within:
        note = f"within {tol:.0%}: {parts}"
    else:
        gaps = {"compute": r["time/compute_s"] - s["time/compute_s"], "communication": r["time/comm_s"] - s["time/comm_s"],
                "the rest of the step": other_real - other_sim}
        main = max(gaps, key=lambda k: abs(gaps[k]))
        note = (f"not within {tol:.0%}: the gap of {step - sim_step:+.2f} ms (real - simulated) is mostly "
                f"{main} ({gaps[main]:+.2f} ms); {parts}")
    return {"real_step_ms": round(step, 3), "simulated_step_ms": round(sim_step, 3), "ratio": round(ratio, 4),
            "within_15pct": within, "compute_ms": round(compute_ms, 3),
            "real_compute_ms": round(r["time/compute_s"], 3), "real_comm_ms": round(r["time/comm_s"], 3),
            "simulated_comm_ms": round(s["time/comm_s"], 3), "note": note}


# -- sim_paper_rows: every published timing row we hold against its prediction -------------
PAPER_ROWS_TOL = 0.25
IMAGENET_TRAIN = 1_281_167  # ILSVRC-2012 training images
#: the all-reduce bus efficiency (achieved bus bandwidth / line rate) of NCCL over TCP sockets:
#: measured 32-65 % of line rate at 20-100 Gb/s (NVIDIA/nccl issues #209, #398, #450,
#: nccl-tests #83); 0.9 is a single 10 GbE TCP stream's goodput, no measurement above 65 % found.
#: Sources and quotes: docs/sim-parameter-sources.md, section "all-reduce bus efficiency".
EFFICIENCY_RANGE = (0.30, 0.90)
#: a backward pass takes about twice the forward (ASSUMED: the usual 1:2 split of a training
#: step's compute), for the overlap-on variant of the fit
BACKWARD_SHARE = 2 / 3
V100X1_RESNET50_FP32 = 367.0  # images/s, 1 V100 16GB, FP32 (NVIDIA DLE PyTorch ResNet-50 v1.5 README, DGX-1)


def fit_allreduce_efficiency(published_ms: float, step_at_1_ms: float, nodes: int, model_bytes: float,
                             platform: Any = "ethernet_10g", algorithm: str = "ring") -> float:
    """``platform.allreduce_efficiency`` that makes the AR step ``published_ms``, from the
    simulated step at efficiency 1 (``step_at_1_ms``), overlap off: only the all-reduce's
    bandwidth term ``B`` grows as 1/e (the ring's ``2 (n-1) S / (n beta)``, recursive
    doubling's ``log2(n) S / beta``: :func:`impls.comm.costmodel.allreduce_cost`), so ``e = B /
    (B + published - step(1))`` (> 1: the row is faster than the algorithm allows at line
    rate; returned as is)."""
    from impls.comm.costmodel import allreduce_cost
    from impls.sim.platforms import alpha_beta, platform_config

    _, beta = alpha_beta(platform_config(platform), line_rate=True)  # step(1): every message at line rate
    b = allreduce_cost(algorithm, model_bytes, nodes).wire_bytes / beta * 1e3
    return b / (b + published_ms - step_at_1_ms)


def fit_efficiency_overlapped(published_ms: float, step_at_1_ms: float, compute_ms: float, nodes: int,
                              model_bytes: float, platform: Any = "ethernet_10g",
                              backward_share: float = BACKWARD_SHARE) -> float:
    """The same fit with DDP's overlap of the all-reduce with the backward pass (analytic:
    the simulated all-reduce does not overlap yet): ``step = step(1) - backward + max(backward,
    comm(e))`` where ``comm(e) = comm(1) + B (1/e - 1)``; the all-reduce can hide at most the
    backward (``backward_share`` of the compute)."""
    from impls.sim.platforms import alpha_beta, platform_config

    alpha, beta = alpha_beta(platform_config(platform), line_rate=True)  # step(1): every message at line rate
    b = 2 * (nodes - 1) * model_bytes / (nodes * beta) * 1e3
    comm1 = b + 2 * (nodes - 1) * alpha * 1e3
    bwd = backward_share * compute_ms
    # the step without its all-reduce is step(1) - comm1; overlapped, the all-reduce adds
    # max(bwd, comm) - bwd on top of it
    comm_e = published_ms - (step_at_1_ms - comm1) + bwd
    if comm_e <= bwd:  # even the ideal ring would be hidden: no efficiency explains the row
        return float("nan")
    return b / (b + comm_e - comm1)


def published_row(numbers: pd.DataFrame, nid: str) -> dict[str, Any]:
    if nid not in numbers.index:
        raise ValueError(f"numbers.csv: no row {nid!r}")
    r = numbers.loc[nid]
    return {"id": nid, "paper": r["paper"], "location": r["location"], "metric": r["metric"],
            "relation": r["relation"], "value": float(r["value"]), "unit": r["unit"]}


def iterations(epochs: int, batch: int, samples: int = IMAGENET_TRAIN) -> int:
    return epochs * -(-samples // batch)


def paper_row(pub: Mapping[str, Any], published: float, unit: str, predicted: float | None, role: str,
              parameters: str, plausible: bool | None, note: str, tol: float = PAPER_ROWS_TOL) -> dict[str, Any]:
    """One row of ``sim_paper_rows.csv``: ``published`` (in ``unit``, converted from the
    numbers.csv row ``pub``) against ``predicted``; ``role``: ``fitted`` (a parameter was
    fitted on this row: its ratio is 1 by construction, not a check), ``prediction`` or
    ``not simulated``.  ``within_25pct`` only for predictions; a ``>`` row is met by any
    prediction above it."""
    ratio = None if predicted is None else predicted / published
    within = None
    if role == "prediction" and ratio is not None:
        within = bool(ratio >= 1 - tol) if pub["relation"] == ">" else bool(abs(ratio - 1) <= tol)
    return {"id": pub["id"], "paper": pub["paper"], "location": pub["location"], "relation": pub["relation"],
            "published": round(published, 4), "unit": unit,
            "predicted": None if predicted is None else round(predicted, 4),
            "ratio": None if ratio is None else round(ratio, 4), "role": role, "within_25pct": within,
            "parameters": parameters, "plausible": plausible, "note": note}


PAPER_ROWS_COLUMNS = ["id", "paper", "location", "relation", "published", "unit", "predicted", "ratio", "role",
                      "within_25pct", "parameters", "plausible", "note"]


# -- the every-message bandwidth efficiency (sim_paper_rows' gossip rows) ---------------------
#: the gossip row the every-message efficiency is fitted on: SlowMo Table 2a's SGP (304 ms), the
#: cleanest: non-overlapped (its whole exchange is on the step, unlike OSGP's), one peer, the same
#: cluster, profile and code base as the AR row (unlike SGP v1's older code and Table 2b's Transformer)
MSG_EFF_ROW = "slowmo_t2a_sgp_tpi"
#: a fit by simulation stops when the simulated step is within this share of the published row
FIT_TOL = 0.005


def msg_efficiency_range() -> tuple[float, float]:
    """The sourced range of the every-message efficiency: the sensitivity analysis's "efficiency"
    (:data:`distrepro_wf.claims.sensitivity.RANGES`, docs/sim-parameter-sources.md)."""
    from ..claims.sensitivity import RANGES  # noqa: PLC0415

    r = next(r for r in RANGES if r["name"] == "efficiency")
    return float(r["low"]), float(r["high"])


def with_msg_efficiency(cfg: Mapping[str, Any], e: float) -> dict[str, Any]:
    """``cfg`` with every message at ``e`` of the NIC's rate: the platform's ``msg_efficiency`` (its
    links at ``nic_gbps``, and ``uplink_gbps``, times ``e``; 1: line rate, whatever the preset's
    nominal value), exactly as the sensitivity sweep sets its "efficiency"
    (:func:`distrepro_wf.claims.sweep.perturb`); ``allreduce_efficiency`` stays, on top of it
    (an all-reduce's achieved share of the line rate is then the product)."""
    from ..claims.sweep import perturb  # noqa: PLC0415

    return perturb(copy.deepcopy(dict(cfg)), "efficiency", float(e))


def message_ms(model_bytes: float, platform: Any = "ethernet_10g") -> float:
    """One whole-model message at the platform's line rate (``S / beta``), ms."""
    from impls.sim.platforms import alpha_beta, platform_config  # noqa: PLC0415

    return model_bytes / alpha_beta(platform_config(platform), line_rate=True)[1] * 1e3


def allreduce_bandwidth_ms(model_bytes: float, nodes: int, platform: Any = "ethernet_10g",
                           algorithm: str = "ring") -> float:
    """The all-reduce's bandwidth term at the platform's line rate, ms (the part
    ``allreduce_efficiency`` divides: :func:`fit_allreduce_efficiency`)."""
    from impls.comm.costmodel import allreduce_cost  # noqa: PLC0415
    from impls.sim.platforms import alpha_beta, platform_config  # noqa: PLC0415

    return (allreduce_cost(algorithm, model_bytes, nodes).wire_bytes
            / alpha_beta(platform_config(platform), line_rate=True)[1] * 1e3)


def fit_by_simulation(published_ms: float, step_at: Any, step_at_1_ms: float, term_ms: float,
                      tol: float = FIT_TOL, max_sims: int = 6) -> tuple[float, float, int]:
    """The efficiency ``e`` at which the simulated step ``step_at(e)`` is ``published_ms`` within
    ``tol``: (e, the simulated step at e, simulations run).

    1. closed form: only a term of ``term_ms`` at line rate grows as 1/e (a gossip step's
       whole-model message, an all-reduce's bandwidth term), so ``e0 = term / (term + published
       - step(1))``;
    2. simulate at ``e``; within ``tol``: done (the last simulation is at the returned ``e``);
    3. else secant in ``1/e`` through the last two points (the step is close to linear in 1/e:
       what the closed form leaves out, overlap or op costs, moves it little), back to 2.

    ``e`` > 1 (the row is faster than line rate) is simulated too (a faster NIC), and reported as
    it is; a step that does not move with ``e`` raises."""
    e = term_ms / (term_ms + published_ms - step_at_1_ms)
    pts = [(1.0, float(step_at_1_ms))]
    for n in range(1, max_sims + 1):
        if not e > 0:
            raise ValueError(f"no efficiency gives {published_ms} ms (next guess {e})")
        pts.append((1.0 / e, float(step_at(e))))
        if abs(pts[-1][1] / published_ms - 1) <= tol:
            return e, pts[-1][1], n
        (x0, s0), (x1, s1) = pts[-2:]
        if s1 == s0:
            raise ValueError(f"the simulated step ({s1} ms) does not move with the efficiency")
        e = 1.0 / (x1 + (published_ms - s1) * (x1 - x0) / (s1 - s0))
    raise RuntimeError(f"no fit within {tol:.1%} of {published_ms} ms after {max_sims} simulations: {pts}")


def msg_eff_row(pub: Mapping[str, Any], published: float, unit: str, predicted: float | None, e: float,
                note: str, allreduce_efficiency: float | None = None, role: str | None = None) -> dict[str, Any]:
    """A ``sim_paper_rows.csv`` row of the every-message efficiency model: ``role`` ``fitted`` on the
    row it was fitted on (:data:`MSG_EFF_ROW`, ``FITTED_ROWS``), else ``prediction`` (or as given:
    an AR row whose ``allreduce_efficiency`` on top was fitted on it).  ``parameters`` names both
    values; ``plausible``: ``e`` in :func:`msg_efficiency_range`, and for an all-reduce the product
    ``e x allreduce_efficiency`` (its achieved share of line rate) in :data:`EFFICIENCY_RANGE`."""
    if role is None:
        role = "fitted" if FITTED_ROWS.get(pub["id"]) == "msg_efficiency" else "prediction"
    lo, hi = msg_efficiency_range()
    origin = "fitted on this row" if pub["id"] == MSG_EFF_ROW else f"fitted on {MSG_EFF_ROW}"
    text = f"msg_efficiency={e:.3f} (platform nic_gbps x e, every message; {origin}; sourced range {lo}-{hi})"
    ok = lo <= e <= hi
    if allreduce_efficiency is not None:
        a = allreduce_efficiency
        text += (f", allreduce_efficiency={a:.3f} on top (the all-reduce at {e * a:.3f} of line rate; "
                 f"range {EFFICIENCY_RANGE[0]}-{EFFICIENCY_RANGE[1]})")
        ok = ok and a <= 1.0 and EFFICIENCY_RANGE[0] <= e * a <= EFFICIENCY_RANGE[1]
    return paper_row(pub, published, unit, predicted, role, text, bool(ok), note)
