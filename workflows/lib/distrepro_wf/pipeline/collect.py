"""Metrics JSONL -> tidy pandas tables.  Only runs whose outcome is ``ok`` enter them.

* ``epochs``: one row per (run, epoch), aggregated over ranks as the metric catalogue
  says (:data:`distrepro_wf.pipeline.catalogue.EPOCH`: losses, accuracy and bytes are means over
  ranks; times are the maximum over ranks, since a synchronous epoch lasts as long as its
  slowest rank).
* ``evals``: one row per (run, evaluation point): the run's evaluation series, ordered by
  step: its ``eval`` records (workload ``evals_per_epoch > 1``) and epoch-end evaluations,
  aggregated over the evaluating ranks as EPOCH says (rank 0 alone under ``eval_ranks:
  zero``), with ``step``, ``epoch_f`` (fractional epochs), ``time/wall_s`` and the
  evaluation's keys (:data:`distrepro_wf.pipeline.catalogue.EVAL_KEYS`): accuracy curves over time
  with seed bands.
* ``runs``: one row per run: every column of :data:`distrepro_wf.pipeline.catalogue.METRICS`
  (final / best accuracy or suboptimality, time per epoch and per step, bytes per epoch
  and per step with steps per epoch from ``run/runinfo.json``, time / steps / epochs /
  bytes to the workload's target, which names its metric, interpolated on the evaluation
  series (:func:`to_target`), and where an epoch's time goes (:func:`breakdown`)), with
  provenance.
* ``failed``: one row per run that failed, with its ``kind`` (config, diverged, crashed,
  timeout, not_started, damaged; see :mod:`distrepro_wf.pipeline.runs`) and reason.  An ``ok``
  outcome is not trusted: a run whose files are missing or unreadable is ``damaged``.

One damaged run never fails the collection of the others, and the tables are written
atomically (a crash never leaves a half-written table).  A table damaged later (cut in place)
fails its own check against the runs on disk (:func:`table_problems`) and is set aside at the
start of the next invocation, so that it is rebuilt rather than trusted
(:func:`set_aside_bad_tables`); so are the claims tables made from them (rule compare's,
:func:`derived_problems`, against the checksums it wrote).  A dry run (``snakemake -n``) only
says what it would set aside.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from impls.backends import backend_of, is_simulated
from impls.runtime.metrics import read_jsonl

from . import runs
from .catalogue import EPOCH, EPOCH_DERIVED, EVAL_KEYS, METRICS, better_direction

log = logging.getLogger(__name__)
KEYS = ["experiment", "method", "nodes", "straggler", "seed"]
#: the server ranks' epoch keys behind EPOCH's ``server/`` columns
SERVER_KEYS = {"server/bytes_sent": "comm/bytes_sent", "server/bytes_recv": "comm/bytes_recv",
               "server/staleness_mean": "ps/staleness_mean", "server/staleness_max": "ps/staleness_max",
               "server/pushes": "ps/pushes",
               **{f"server/{k}_s": f"time/{k}_s" for k in ("arith", "optim", "copy", "stage", "compress")}}
FAILED_COLS = KEYS + ["kind", "reason", "returncode", "log", "attempt_dir"]
SERIES_COLS = ["step", "epoch_f", "time/wall_s"]  # an evaluation point's place; then its EVAL_KEYS


@dataclass
class RunTables:
    """An ok run's tables: ``epochs`` (one row per epoch, over ranks), ``evals`` (its
    evaluation series, :func:`evaluation_series`) and ``step_bytes`` (:func:`step_bytes`)."""

    epochs: pd.DataFrame
    evals: pd.DataFrame
    step_bytes: pd.DataFrame


def _ident(run_dir: Path) -> dict:
    """The run's identity, from its ``run.json`` (the config rule train wrote); only a run
    whose run.json is unreadable is named from its directory, to list it as damaged."""
    try:
        cfg = runs.read_json(Path(run_dir) / "run.json")
        return {"experiment": cfg["experiment"], "method": cfg["method"], "nodes": int(cfg["nodes"]),
                "straggler": cfg["straggler_name"], "seed": int(cfg["seed"])}
    except (OSError, ValueError, KeyError, TypeError):
        p = Path(run_dir).parts  # .../runs/<experiment>/<method>/n<N>/<straggler>/seed<S>/
        return {"experiment": p[-5], "method": p[-4], "nodes": int(p[-3][1:]), "straggler": p[-2],
                "seed": int(p[-1][4:])}


def _read_metrics(run_dir: Path, nodes: int) -> list[dict]:
    recs = []
    for r in range(nodes):
        p = run_dir / "metrics" / f"rank{r}.jsonl"
        try:
            recs.extend(read_jsonl([p]))
        except (OSError, ValueError) as e:
            raise ValueError(f"metrics of rank {r} unreadable ({e})") from None
    return recs


def _server_epochs(run_dir: Path, workers: int) -> pd.DataFrame | None:
    """Per epoch, the server ranks' values as ``server/...`` columns (:data:`EPOCH`'s
    ``server/`` keys: bytes summed over servers; the parameter-server modes' staleness and
    pushes, which every server sees alike, averaged; the largest staleness, the maximum; a
    simulated server's op costs per kind, the busiest server's)."""
    files = [p for p in (run_dir / "metrics").glob("rank*.jsonl") if int(p.stem[4:]) >= workers]
    if not files:
        return None
    ep = pd.DataFrame([r for r in read_jsonl(sorted(files)) if r["kind"] == "epoch"])
    how = {k: m.across for k, m in EPOCH.items() if k.startswith("server/") and SERVER_KEYS[k] in ep}
    ep = ep.rename(columns={SERVER_KEYS[k]: k for k in how})
    return ep.groupby("epoch", as_index=False).agg(how)


def staleness_table(launch_paths: Iterable[Path]) -> pd.DataFrame:
    """How stale the applied pushes of every ok run were: one row per (run, pushing worker
    slow or not, staleness) with the number of ``pushes``, from the server ranks' ``push``
    records (the asynchronous parameter-server modes; empty for every other method).
    ``slow``: the pushing worker is one of the run's straggler ranks (``runinfo.json``)."""
    rows = []
    for p in outcome_paths(launch_paths):
        info, tables = load_run(p)
        if tables is None:
            continue
        run = p.parent / runs.read_outcome(p.parent).get("run_dir", "run")
        workers = int(info["nodes"])
        slow = set(runs.read_json(run / "runinfo.json").get("slow_ranks") or [])
        files = sorted(f for f in (run / "metrics").glob("rank*.jsonl") if int(f.stem[4:]) == workers)
        pushes = [r for r in read_jsonl(files) if r["kind"] == "push"]  # server 0 sees every push
        if not pushes:
            continue
        df = pd.DataFrame({"slow": [int(r["ps/worker"]) in slow for r in pushes],
                           "staleness": [int(r["ps/staleness"]) for r in pushes]})
        for (sl, st), n in df.groupby(["slow", "staleness"]).size().items():
            rows.append({**{k: info[k] for k in KEYS}, "slow": bool(sl), "staleness": int(st), "pushes": int(n)})
    return pd.DataFrame(rows, columns=KEYS + ["slow", "staleness", "pushes"])


def load_run(outcome_path: Path) -> tuple[dict, RunTables | None]:
    """(run info, its tables) of an ok run; (failure row, None) otherwise.

    An ok run is verified from its files (:func:`distrepro_wf.pipeline.runs.verify_run`, plus
    ``run.json``) rather than trusted from ``outcome.json``; whatever is missing,
    unreadable, repeated, out of order or changed since the run was published (its checksum
    manifest) makes it a ``damaged`` failure naming the file, never an exception.  A run
    published before checksum manifests existed is checked for completeness only (a note in
    the collect log says so).
    """
    run_dir = Path(outcome_path).parent
    ident = _ident(run_dir)
    outcome = runs.read_outcome(run_dir)
    if outcome.get("status") != "ok":
        # outcomes written before kinds existed were crashes (deterministic ones said "invalid")
        kind = outcome.get("kind") if outcome.get("kind") in runs.KINDS else "crashed"
        return {**ident, **outcome, "kind": kind}, None
    run = run_dir / outcome.get("run_dir", "run")
    problem = runs.verify_run(run, runs.has_checksums(outcome))
    if problem is None and not (run / runs.CHECKSUMS).exists():
        log.info("%s: no checksum manifest (published before manifests existed): checked for completeness only",
                 run)
    if problem is None:
        try:
            runs.read_json(run_dir / "run.json")
            return read_run(run, ident)
        except Exception as e:  # noqa: BLE001  one damaged run must never crash the collection
            problem = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
    return {**ident, "status": "failed", "kind": "damaged", "reason": f"damaged: {problem}",
            "log": outcome.get("log"), "returncode": outcome.get("returncode"), "damaged_run": str(run)}, None


def read_run(run_dir: Path, ident: dict | None = None) -> tuple[dict, RunTables]:
    """(info, tables) of a finished run's directory (``config.json``, ``runinfo.json``,
    ``provenance.json``, ``metrics/``), trusting its files: :func:`load_run` verifies them
    first.  ``ident``: the run's KEYS (default: from its config)."""
    cfg = runs.read_json(run_dir / "config.json")
    runinfo = runs.read_json(run_dir / "runinfo.json")
    prov = runs.read_json(run_dir / "provenance.json")
    if ident is None:
        ident = {"experiment": cfg.get("experiment"), "method": cfg.get("method"), "nodes": int(cfg["nodes"]),
                 "straggler": cfg.get("straggler_name"), "seed": cfg.get("seed")}
    records = _read_metrics(run_dir, int(cfg["nodes"]))
    ep = pd.DataFrame([r for r in records if r["kind"] == "epoch"])
    agg = {k: m.across for k, m in EPOCH.items() if k in ep and not k.startswith("server/")}
    for derived, (key, how) in EPOCH_DERIVED.items():
        if key in ep:
            ep[derived] = ep[key]
            agg[derived] = how
    table = ep.groupby("epoch", as_index=False).agg(agg)
    table["step"] = ep.groupby("epoch")["step"].max().values
    servers = _server_epochs(run_dir, int(cfg["nodes"]))
    if servers is not None:  # an algorithm's server ranks (roles): their traffic apart from the workers'
        table = table.merge(servers, on="epoch", how="left")
    where = backend_columns(cfg)
    for k, v in {**ident, **where}.items():
        table[k] = v
    info = {**ident, **where, "status": "ok", "algorithm": cfg["algorithm"]["name"],
            "target_metric": (cfg["workload"].get("target") or {}).get("metric"),
            "target_value": (cfg["workload"].get("target") or {}).get("value"), "epochs": cfg["workload"]["epochs"],
            "config_hash": prov["config_hash"], "git_commit": prov["git_commit"], "host": prov["host"],
            "torch": prov["versions"].get("torch"), "python": prov["versions"].get("python"),
            "started_at": prov["started_at"], "steps_per_epoch": runinfo.get("steps_per_epoch"),
            "params": runinfo.get("params"), "cpu_count": prov.get("cpu_count"), "platform": prov.get("platform"),
            "device": prov.get("device"), "world": prov.get("world"),
            "hosts": len({r.get("host") for r in prov["ranks"]}) if prov.get("ranks") else None,
            **model_size(prov, runinfo)}
    spe = int(runinfo["steps_per_epoch"])
    wait = collective_wait(records, simulated=where["time_kind"] == "simulated", algorithm=cfg["algorithm"]["name"])
    if len(wait):
        table = table.merge(wait, on="epoch", how="left")
    table = epoch_time(table, ep, records, cfg["algorithm"]["name"])
    evals = evaluation_series(records, spe, (cfg["workload"].get("eval_ranks") or "all"))
    return info, RunTables(table, evals, step_bytes(records, spe))


def evaluation_series(records: list[dict], steps_per_epoch: int, eval_ranks: str = "all") -> pd.DataFrame:
    """The run's evaluation points, ordered by step: ``eval`` records and the epoch-end
    evaluations (``epoch`` records), one row per step, aggregated over the evaluating ranks
    as :data:`EPOCH` says (means of the metrics, the latest rank's time).

    Under ``eval_ranks: zero`` only rank 0 evaluates, so only its records count (the other
    ranks' times are not those of an evaluation).  ``epoch_f``: fractional epochs.
    """
    pts = pd.DataFrame([r for r in records if r["kind"] in ("eval", "epoch")
                        and (eval_ranks == "all" or r["rank"] == 0)])
    if pts.empty:
        return pd.DataFrame(columns=SERIES_COLS)
    keys = [k for k in EVAL_KEYS if k in pts]
    out = pts.groupby("step", as_index=False).agg({k: EPOCH[k].across for k in ["time/wall_s", *keys]})
    out = out.sort_values("step", ignore_index=True)
    out["epoch_f"] = out["step"] / steps_per_epoch
    return out[SERIES_COLS + keys]


def step_bytes(records: list[dict], steps_per_epoch: int) -> pd.DataFrame:
    """Bytes sent per rank within each epoch, step by step: ``epoch``, ``step`` (steps taken
    by the run, the global count) and ``bytes`` (the mean rank's cumulative bytes of that
    epoch's steps so far).  An epoch's end adds its own traffic (drains, flushes, evaluation
    buffer syncs): :func:`bytes_at` anchors each epoch's end at the epoch record's total.

    A rank's ``k``-th step of an epoch counts as the epoch's step ``k``: exact for
    synchronous schedules; under a barrier-free one (AD-PSGD) the workers take different
    numbers of an epoch's steps and the shape inside an epoch is the mean worker's.
    """
    st = pd.DataFrame([{"rank": r["rank"], "epoch": r["epoch"], "bytes": r["comm/bytes_sent"]}
                       for r in records if r["kind"] == "step" and r.get("comm/bytes_sent") is not None])
    if st.empty:
        return pd.DataFrame(columns=["epoch", "step", "bytes"])
    st["k"] = st.groupby(["rank", "epoch"]).cumcount()
    m = st.groupby(["epoch", "k"], as_index=False)["bytes"].mean()
    m["bytes"] = m.groupby("epoch")["bytes"].cumsum()
    m["step"] = m["epoch"] * steps_per_epoch + m["k"] + 1
    inside = m["k"] + 1 < steps_per_epoch  # an epoch's last step: the epoch record's total
    return m.loc[inside, ["epoch", "step", "bytes"]].reset_index(drop=True)


def backend_columns(cfg: dict) -> dict:
    """Where the run ran and what its times are: ``backend`` ``torch`` (real ranks, wall
    clock on this machine) or ``simgrid`` (simulated time on ``sim_platform`` with the
    ``sim_profile`` timing profile)."""
    backend = backend_of(cfg.get("backend"))
    sim = backend.simulated

    def name(spec):
        return spec if isinstance(spec, str) or spec is None else spec.get("name")

    return {"backend": backend.name, "time_kind": backend.time_kind,
            "sim_platform": name(cfg.get("platform") or "ethernet_10g") if sim else None,
            "sim_profile": name(cfg.get("profile") or "measured") if sim else None}


def model_size(prov: dict, runinfo: dict) -> dict:
    """``wire_scale``: how many times its bytes each message of the algorithm weighed on the run's
    clock (under a paper timing profile the simulated network carries the paper model's bytes,
    e.g. ResNet-50's 102 MB, for the stand-in's; 1 elsewhere), and ``model_mb``, the model size
    the times use (NaN: the stand-in's own).  Runs written before the provenance recorded the
    scale: the profile's ``model_mb`` over the stand-in's fp32 parameters (``runinfo.params``)."""
    t = prov.get("time") or {}
    mb = t.get("model_mb") if "simulated" in str(t.get("kind", "")) else None
    scale = t.get("wire_scale")
    if scale is None:
        params = runinfo.get("params")
        scale = mb * 1e6 / (4.0 * params) if mb and params else 1.0
    return {"wire_scale": float(scale), "model_mb": float(mb) if mb and float(scale) != 1.0 else np.nan}


#: tolerance of "no rank ended the step before the last rank arrived" (:func:`collective_wait`):
#: exact on the simulated clock; on real ranks each rank's times start at its own t_start,
#: taken right after a collective (the ranks leave it within a fraction of a millisecond on one host)
GATE_TOL_S = {"simulated": 1e-9, "wall clock": 1e-3}


def sync_collective(algorithm: str) -> bool:
    """Whether every step of ``algorithm`` ends in a collective over all workers (an all-reduce or
    all-gather, a synchronous parameter-server round), where a fast worker waits for the last one:
    the algorithm's class says (``sync_collective``, :class:`impls.protocol.Algorithm`).  Gossip
    (a rank waits for its in-peers only, and for their messages' transfer), asynchronous and
    barrier-free methods do not: their waits stay communication."""
    from impls.algorithms import ALGORITHMS

    return algorithm in ALGORITHMS and ALGORITHMS.get(algorithm).sync_collective


def collective_wait(records: list[dict], simulated: bool, algorithm: str = "allreduce_sgd") -> pd.DataFrame:
    """Each epoch's straggler wait inside synchronous collectives, per worker rank (the mean over
    ranks of its sum over the epoch's steps): ``epoch``, ``time/collective_wait_s_mean``.

    Definition.  A rank *arrives* at its step's communication when its compute (slowed by a
    straggler's slowdown, which lies inside it: :mod:`impls.runtime.straggler`) ends:
    ``time/wall_s - time/sync_s`` of its step record.  For an algorithm
    whose step ends in a collective over every worker (:func:`sync_collective`) the
    collective cannot finish before the last rank arrives, so rank r's wait for the others is
    ``max_j arrival_j - arrival_r`` (at most its own ``time/sync_s``): straggler wait, not
    communication.  A step where some rank ended before the last one arrived (``min end <
    max arrival``, beyond :data:`GATE_TOL_S`) contradicts that and counts nothing.  Other
    algorithms count nothing: a gossip rank waits for its in-peers only, and mostly for their
    messages' transfer, which is communication.

    Clocks: exact on the simulated platform (one clock); real ranks of one host read the same
    monotonic clock, each from its own start (taken right after a collective, so the starts agree
    to well under a millisecond).  On several hosts the clocks differ by the hosts' offset, which
    enters the arrivals as is: the split is then as good as the hosts' clock agreement (NTP:
    about a millisecond), and the gate fails, counting nothing, where the offset is larger."""
    rows = [(r["epoch"], r["step"], r["rank"], float(r["time/wall_s"]) - float(r["time/sync_s"]),
             float(r["time/wall_s"]), float(r["time/sync_s"]))
            for r in records if r["kind"] == "step" and r.get("time/sync_s") is not None
            and r.get("time/wall_s") is not None]
    if not rows or not sync_collective(algorithm):
        return pd.DataFrame(columns=["epoch", "time/collective_wait_s_mean"])
    st = pd.DataFrame(rows, columns=["epoch", "step", "rank", "arrive", "end", "sync"])
    ranks = st["rank"].nunique()
    if ranks < 2:
        return pd.DataFrame(columns=["epoch", "time/collective_wait_s_mean"])
    tol = GATE_TOL_S["simulated" if simulated else "wall clock"]
    g = st.groupby("step")
    last = g["arrive"].transform("max")
    gated = (g["end"].transform("min") >= last - tol) & (g["rank"].transform("nunique") == ranks)
    st["wait"] = np.where(gated, np.minimum((last - st["arrive"]).clip(lower=0.0), st["sync"]), 0.0)
    per_rank = st.groupby(["epoch", "rank"])["wait"].sum()
    out = per_rank.groupby("epoch").mean().rename("time/collective_wait_s_mean").reset_index()
    return out


def is_asynchronous(algorithm: str) -> bool:
    """Whether ``algorithm``'s workers share each epoch's steps, each at its own pace, and end
    it apart: asked of the algorithm's step schedule (``Algorithm.step_schedule``,
    :attr:`impls.runtime.steps.StepSchedule.shared`), never of its name."""
    from impls.algorithms import get_algorithm
    from impls.runtime.steps import STEP_SCHEDULES

    return bool(STEP_SCHEDULES.get(get_algorithm(algorithm).step_schedule).shared)


def epoch_time(table: pd.DataFrame, ep: pd.DataFrame, records: list[dict], algorithm: str) -> pd.DataFrame:
    """Each epoch's time (``time/epoch_s``) and its spread over the ranks
    (``time/epoch_s_rank_spread``: the longest rank's own epoch minus the shortest's).

    A synchronous method's ranks end every epoch together: its time is the slowest rank's
    epoch, as the epoch table has it.  An asynchronous method's (:func:`is_asynchronous`)
    workers take an epoch's ``steps_per_epoch x workers`` steps together, a fast one more of
    them: the epoch is over when the job has taken them, so its time is the job's **per epoch
    of data**, from the ranks' throughput: rank ``r`` took ``n_r`` steps of the epoch in
    ``t_r`` seconds of its steps (their ``time/step_s``), at ``n_r / t_r`` steps a second while
    the others ran too, so the epoch's ``sum n_r`` steps take ``sum n_r / sum (n_r / t_r)``.
    (The slowest rank's own epoch, which includes its last step's straddle into the next
    epoch and its wait for its share of tickets, overstates it: AD-PSGD at 64 nodes by up to
    1.8x.)  The rank spread is shown beside it either way."""
    spread = ep.groupby("epoch")["time/epoch_s"].agg(lambda s: float(s.max() - s.min())) \
        if "time/epoch_s" in ep else None
    if spread is not None:
        table = table.merge(spread.rename("time/epoch_s_rank_spread").reset_index(), on="epoch", how="left")
    if not is_asynchronous(algorithm):
        return table
    steps = pd.DataFrame([(r["epoch"], r["rank"], float(r["time/step_s"])) for r in records
                          if r["kind"] == "step" and r.get("time/step_s") is not None],
                         columns=["epoch", "rank", "step_s"])
    if steps.empty:
        return table
    per = steps.groupby(["epoch", "rank"])["step_s"].agg(["count", "sum"])
    per = per[per["sum"] > 0]
    per["rate"] = per["count"] / per["sum"]
    job = per.groupby("epoch").agg(n=("count", "sum"), rate=("rate", "sum"))
    job_s = (job["n"] / job["rate"]).rename("job_epoch_s")
    table = table.merge(job_s.reset_index(), on="epoch", how="left")
    table["time/epoch_s"] = table["job_epoch_s"].fillna(table["time/epoch_s"])
    return table.drop(columns="job_epoch_s")


def _late_gain(s: pd.Series) -> float:
    """The mean of the series' last quarter (its evaluated epochs, at least one point) minus
    the mean of the quarter before: about 0 once a run has reached its plateau (the
    evaluation's noise, halved by the means), several points while it still learns; NaN
    with fewer than two points."""
    s = s.dropna()
    k = max(1, len(s) // 4)
    return float(s.iloc[-k:].mean() - s.iloc[-2 * k:-k].mean()) if len(s) >= 2 else np.nan


_REDUCE = {"last": lambda s: s.iloc[-1], "max": pd.Series.max, "min": pd.Series.min, "mean": pd.Series.mean,
           "late_gain": _late_gain}


def summarize(info: dict, t: pd.DataFrame, evals: pd.DataFrame | None = None,
              steps_bytes: pd.DataFrame | None = None) -> dict:
    """The run's row of runs.csv from its epoch table ``t``: every catalogue metric with a
    source (NaN where the run has no such key: e.g. accuracy for a finite-sum task), then
    the per-step, to-target (on the evaluation series ``evals``, :func:`to_target`; without
    one, on the epoch ends of ``t``) and time-breakdown columns (:func:`breakdown`).
    ``steps_bytes``: :func:`step_bytes` (without it, bytes grow linearly within an epoch)."""
    row = dict(info)
    for m in METRICS.values():
        if m.source is not None:
            key, how = m.source
            row[m.column] = float(_REDUCE[how](t[key])) if key in t else np.nan
    steps = info.get("steps_per_epoch")
    row["bytes_per_step"] = row["bytes_sent_per_epoch"] / steps if steps else np.nan
    row["time_per_step_s"] = row["time_per_epoch_s"] / steps if steps else np.nan
    row.update(to_target(info, t, evals, steps_bytes))
    row.update(breakdown(t, row["time_per_epoch_s"]))
    scale = info.get("wire_scale", 1.0)
    # the bytes at the model size the times use (= the stand-in's where wire_scale is 1)
    row["bytes_sent_per_epoch_model"] = row["bytes_sent_per_epoch"] * scale
    row["bytes_to_target_model"] = row["bytes_to_target"] * scale
    row["network"] = network(info)
    return row


def _epoch_ends(t: pd.DataFrame, steps_per_epoch: int) -> pd.Series:
    """The step of each row's epoch end: the epoch table's own ``step``, else counted."""
    return t["step"] if "step" in t else (t["epoch"] + 1) * steps_per_epoch


def to_target(info: dict, t: pd.DataFrame, evals: pd.DataFrame | None = None,
              steps_bytes: pd.DataFrame | None = None) -> dict:
    """When the run first met its target (MLPerf's time to accuracy), at step resolution.

    On the evaluation series (``evals``; the epoch ends of ``t`` without one, or when it
    lacks the target's metric), the target is met between the last point that missed it and
    the first that met it; the metric is taken as linear in between, in time and in steps,
    so ``time_to_target_s`` and ``steps_to_target`` are interpolated there (evaluating more
    often, ``evals_per_epoch``, narrows that interval).  ``epochs_to_target`` is fractional
    (steps / steps per epoch), ``bytes_to_target`` the mean rank's bytes sent up to that
    step (:func:`bytes_at`) and ``grad_evals_to_target`` the workers' component gradients
    (:func:`grad_evals_at`; NaN for methods that do not count them).  A series whose first point meets the target has no interval:
    that point's values are taken and ``target_at_first_eval`` marks them (an upper bound).
    ``reached_target``: whether the target was met at all (the to-target values are NaN if
    not); ``tta_evals``: the series' points per epoch; ``time_last_eval_s``: the time of the
    series' last point with the target's metric, where a run that never met the target is
    censored (:mod:`distrepro_wf.claims.survival`: "not reached by then", never dropped).
    """
    spe = info.get("steps_per_epoch") or 1
    metric, target = info.get("target_metric"), info.get("target_value")
    if evals is None or len(evals) == 0 or (metric is not None and metric not in evals):
        evals = pd.DataFrame({"step": _epoch_ends(t, spe), "time/wall_s": t["time/wall_s"],
                              **({metric: t[metric]} if metric in t else {})})
    evals = evals.sort_values("step")
    first_epoch = evals[(evals["step"] > 0) & (evals["step"] <= spe)]
    out = {"time_to_target_s": np.nan, "steps_to_target": np.nan, "epochs_to_target": np.nan,
           "bytes_to_target": np.nan, "grad_evals_to_target": np.nan, "reached_target": False,
           "target_at_first_eval": False, "time_last_eval_s": np.nan,
           "tta_evals": len(first_epoch) if len(first_epoch) else np.nan}
    if target is None or metric not in evals:
        return out
    pts = evals.dropna(subset=[metric])
    v, step, time = (pts[c].to_numpy(float) for c in (metric, "step", "time/wall_s"))
    if len(time):
        out["time_last_eval_s"] = float(time[-1])
    met = v >= target if better_direction(metric) else v <= target
    if not met.any():
        return out
    i = int(np.argmax(met))
    if i == 0:
        s, tt = step[0], time[0]
    else:
        f = (target - v[i - 1]) / (v[i] - v[i - 1])  # in (0, 1]: v[i - 1] missed, v[i] met
        s, tt = step[i - 1] + f * (step[i] - step[i - 1]), time[i - 1] + f * (time[i] - time[i - 1])
    out.update(time_to_target_s=float(tt), steps_to_target=float(s), epochs_to_target=float(s) / spe,
               bytes_to_target=bytes_at(float(s), t, spe, steps_bytes), reached_target=True,
               target_at_first_eval=i == 0, grad_evals_to_target=grad_evals_at(float(s), t, spe))
    return out


def grad_evals_at(step: float, t: pd.DataFrame, steps_per_epoch: int) -> float:
    """The workers' component gradients (``opt/grad_evals``, svrg) in the run's first ``step``
    steps: the epochs' totals at their ends, linear in between (as time to target is)."""
    if "opt/grad_evals" not in t:
        return np.nan
    ends = _epoch_ends(t, steps_per_epoch).to_numpy(float)
    totals = np.cumsum(t["opt/grad_evals"].to_numpy(float))
    return float(np.interp(step, [0.0, *ends], [0.0, *totals]))


def bytes_at(step: float, t: pd.DataFrame, steps_per_epoch: int, steps_bytes: pd.DataFrame | None = None) -> float:
    """The mean rank's bytes sent in the run's first ``step`` steps (fractional: linear
    between two steps): the epochs' totals (``comm/bytes_sent`` of ``t``) at their ends and,
    inside an epoch, its steps' traffic so far (``steps_bytes``, :func:`step_bytes`)."""
    if "comm/bytes_sent" not in t:
        return np.nan
    ends = _epoch_ends(t, steps_per_epoch).to_numpy(float)
    totals = np.cumsum(t["comm/bytes_sent"].to_numpy(float))
    xs, ys = [0.0, *ends], [0.0, *totals]
    if steps_bytes is not None and len(steps_bytes):
        before = dict(zip(t["epoch"], totals - t["comm/bytes_sent"].to_numpy(float)))  # at each epoch's start
        inside = steps_bytes[steps_bytes["epoch"].isin(before)]
        xs += list(inside["step"].astype(float))
        ys += [before[e] + b for e, b in zip(inside["epoch"], inside["bytes"])]
    order = np.argsort(xs, kind="stable")
    return float(np.interp(step, np.asarray(xs)[order], np.asarray(ys)[order]))


BREAKDOWN = {"bd_compute_s": "time/compute_s", "bd_comm_s": "time/sync_s", "bd_straggler_s": "time/straggler_delay_s"}
#: simulated runs' op-cost kinds (impls/sim/opcost.py): taken out of the sync part (where the
#: worker pays them), so the parts still add up; a run without them (real ranks) gets NaN
OP_PARTS = {"bd_arith_s": "time/arith_s", "bd_optim_s": "time/optim_s", "bd_copy_s": "time/copy_s",
            "bd_stage_s": "time/stage_s", "bd_compress_s": "time/compress_s"}
#: runs logged before ``time/sync_s`` existed: their communication part is the counters' wait
BREAKDOWN_FALLBACK = {"time/sync_s": "time/comm_s"}


def breakdown(t: pd.DataFrame, time_per_epoch_s: float) -> dict:
    """Where an epoch's time goes, in parts that add up to ``time_per_epoch_s``: compute,
    communication wait and straggler delay (each the mean over epochs of the mean worker
    rank's sum over its steps: the epoch table's ``*_mean`` columns; a table without them,
    e.g. one rank's, uses its own columns), and ``bd_other_s``, the rest (evaluation, data
    loading, framework overhead; clipped at 0).  ``comm_share`` and ``compute_share``: their
    fractions of the epoch.  Means, not EPOCH's maxima over ranks: the slowest rank's
    compute and another rank's wait for it would count the same seconds twice.

    The communication part is ``time/sync_s``, the worker loop's own time in the algorithm's
    step (its wait for communication plus the update), not ``time/comm_s``: a background
    exchange (AD-PSGD's gossip) waits while the worker computes, and counting that wait would
    make the parts exceed the epoch.  Older runs without ``time/sync_s`` use ``time/comm_s``.

    Simulated runs also log the op-cost model's seconds per kind (:data:`OP_PARTS`: local
    arithmetic, optimizer, copies, host staging, compression); they are paid inside the
    step's sync time, so they are taken out of ``bd_comm_s`` (scaled to fit it where a
    background activity paid some of them) and the parts still add up.

    A fast rank's wait inside a synchronous collective for the last rank to arrive
    (``time/collective_wait_s_mean``, :func:`collective_wait`) is counted as straggler wait and
    taken out of the communication part.

    Where the parts add up to more than ``time_per_epoch_s`` (an asynchronous method, whose
    epoch is the job's time per epoch of data, :func:`epoch_time`), they are scaled to fit it:
    each the mean rank's share of its own time, applied to the job's epoch."""
    out = {}
    for col, key in BREAKDOWN.items():
        if f"{key}_mean" not in t and key not in t:
            key = BREAKDOWN_FALLBACK.get(key, key)
        src = f"{key}_mean" if f"{key}_mean" in t else key
        out[col] = float(t[src].mean()) if src in t else np.nan
    # a fast rank's wait inside a synchronous collective for the last rank (collective_wait) is
    # straggler wait, moved out of the communication part (the parts still add up)
    wait = "time/collective_wait_s_mean"
    if wait in t and t[wait].notna().any() and not np.isnan(out.get("bd_comm_s", np.nan)):
        w = min(float(t[wait].fillna(0.0).mean()), out["bd_comm_s"])
        out["bd_comm_s"] -= w
        out["bd_straggler_s"] = (0.0 if np.isnan(out["bd_straggler_s"]) else out["bd_straggler_s"]) + w
    parts = sum(out.values())
    if np.isfinite(parts) and parts > time_per_epoch_s > 0:
        # an asynchronous method's epoch is the job's per epoch of data (epoch_time), shorter
        # than a rank's own steps add up to: its parts are the mean rank's shares of that epoch
        out = {col: v * time_per_epoch_s / parts for col, v in out.items()}
    rest = time_per_epoch_s - sum(out.values())
    out["bd_other_s"] = float(np.clip(rest, 0.0, None))  # NaN (a part not logged) stays NaN
    ops = {col: float(t[f"{key}_mean" if f"{key}_mean" in t else key].mean())
           for col, key in OP_PARTS.items() if f"{key}_mean" in t or key in t}
    total = sum(ops.values())
    if ops and np.isfinite(out["bd_comm_s"]):
        # a background activity's ops (AD-PSGD's gossip) are not in the worker's sync time:
        # scaled down to fit it, so the parts still add up to the epoch
        f = min(1.0, out["bd_comm_s"] / total) if total > 0 else 0.0
        ops = {col: v * f for col, v in ops.items()}
        out["bd_comm_s"] -= sum(ops.values())
    out.update({col: ops.get(col, np.nan) for col in OP_PARTS})
    out["comm_share"] = out["bd_comm_s"] / time_per_epoch_s if time_per_epoch_s else np.nan
    out["compute_share"] = out["bd_compute_s"] / time_per_epoch_s if time_per_epoch_s else np.nan
    return out


def network(info: dict) -> str:
    """What a run's communication time is, for people reading a breakdown: a simulated
    network (``simgrid``, its platform), loopback (real ranks all on one host: no wire in
    between), a real network (ranks on several hosts), or none (a single process)."""
    if is_simulated(info.get("backend")):
        return f"simulated network ({info.get('sim_platform')})"
    if info.get("world") == 1:
        return "none (one process)"
    hosts = info.get("hosts")
    if hosts is None or (isinstance(hosts, float) and np.isnan(hosts)):
        return "unknown (the ranks' hosts were not recorded)"
    return "loopback (one host)" if hosts == 1 else "real network"


def outcome_paths(launch_paths: Iterable[Path]) -> list[Path]:
    """outcome.json of every member of the given launch groups (results/launches/...json)."""
    return [Path(m["run"]) / "outcome.json" for lp in launch_paths for m in json.loads(Path(lp).read_text())["members"]]


def collect(launch_paths: Iterable[Path]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(epochs, runs, failed, evals) tables of every member of the given launch groups.

    A run found damaged here is marked (:func:`distrepro_wf.pipeline.runs.mark_damaged`) so that
    the next invocation recomputes it; its files stay where they are.
    """
    epochs, rows, failed, evals = [], [], [], []
    for lp in map(Path, launch_paths):
        for p in outcome_paths([lp]):
            info, tables = load_run(p)
            if tables is None:
                if info.get("damaged_run") or info.get("corrupt_outcome"):
                    runs.mark_damaged(p.parent, info["reason"], lp)
                failed.append({k: info.get(k) for k in FAILED_COLS})
                continue
            epochs.append(tables.epochs)
            evals.append(tables.evals.assign(**{k: info[k] for k in KEYS}))
            rows.append(summarize(info, tables.epochs, tables.evals, tables.step_bytes))
    ep = pd.concat(epochs, ignore_index=True) if epochs else pd.DataFrame(columns=KEYS + ["epoch"])
    ep = ep[KEYS + [c for c in ep.columns if c not in KEYS]]
    ev = pd.concat(evals, ignore_index=True) if evals else pd.DataFrame(columns=KEYS + SERIES_COLS)
    ev = ev[KEYS + SERIES_COLS + [k for k in EVAL_KEYS if k in ev]]
    rn = pd.DataFrame(rows, columns=None if rows else KEYS)
    fl = pd.DataFrame(failed, columns=FAILED_COLS)
    return ep, rn, fl, ev


def failure_summary(tables_dir: Path, experiments: Iterable[str]) -> str:
    """Console summary of the failed runs in ``<tables_dir>/<experiment>/failed.csv`` ('' if none)."""
    lines = []
    for e in experiments:
        try:
            f = pd.read_csv(Path(tables_dir) / e / "failed.csv")
        except (OSError, ValueError):
            continue
        for r in f.itertuples():
            kind = r.kind if isinstance(getattr(r, "kind", None), str) else "crashed"
            again = "not retried until its config changes" if kind in runs.DETERMINISTIC else "retried next time"
            lines.append(f"  {r.experiment}/{r.method}/n{r.nodes}/{r.straggler}/seed{r.seed}  [{kind}, {again}]  "
                         f"{r.reason}  (log: {r.log})")
    if not lines:
        return ""
    return f"{len(lines)} run(s) failed (results/tables/<experiment>/failed.csv):\n" + "\n".join(lines)


def echo_failures(tables_dir: Path, experiments: Iterable[str]) -> None:
    """Print :func:`failure_summary` to stderr if any run failed (end of a Snakemake invocation)."""
    text = failure_summary(tables_dir, experiments)
    if text:
        print(text, file=sys.stderr)


def write_atomic(df: pd.DataFrame, path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    df.to_csv(tmp, index=False)
    tmp.replace(path)


TABLES = ("epochs", "runs", "failed", "evals", "staleness")  # rule collect's tables of an experiment


def _csv_problem(path: Path) -> str | None:
    """What is structurally wrong with a CSV table this module wrote (None: nothing): not
    UTF-8, a last row cut short (no final newline), a row with another number of fields than
    the header, a quote left open."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        return f"unreadable ({type(e).__name__})"
    if not text.endswith("\n"):
        return "its last row is cut short (no final newline)"
    try:
        rows = list(csv.reader(io.StringIO(text), strict=True))
    except csv.Error as e:
        return f"unparsable ({e})"
    width = len(rows[0]) if rows else 0
    bad = next((i for i, r in enumerate(rows[1:], 2) if len(r) != width), None)
    return None if bad is None else f"line {bad} has {len(rows[bad - 1])} fields, the header {width}"


def _run_keys(df: pd.DataFrame) -> pd.Series:
    return df[KEYS].astype(str).agg("|".join, axis=1) if len(df) else pd.Series([], dtype=str)


def table_problems(table_dir: Path, launch_paths: Iterable[Path]) -> dict[str, str]:
    """{table: what is wrong} for the collect tables of one experiment (``table_dir``) that fail
    their own check against the runs on disk (the members of ``launch_paths``, the collect
    rule's inputs); a table that does not exist, or is older than an input (Snakemake rebuilds
    it anyway), is not checked.

    A table must parse (:func:`_csv_problem`: no half row at its end), ``runs`` and ``failed``
    must hold one row per member of the launches, and against ``runs``: ``epochs`` one row per
    epoch of each run, ``evals`` each run's evaluation series up to its last epoch's end (a table
    cut in place at a row boundary loses a run, or the end of one).
    """
    launch_paths = [Path(p) for p in launch_paths]
    try:
        newest = max(p.stat().st_mtime for p in launch_paths)
        members = len(outcome_paths(launch_paths))
    except (OSError, ValueError, KeyError, TypeError):  # a launch missing or unreadable: collect reruns
        return {}
    problems: dict[str, str] = {}
    frames: dict[str, pd.DataFrame] = {}
    for t in TABLES:
        p = Path(table_dir) / f"{t}.csv"
        if not p.exists() or p.stat().st_mtime < newest:
            continue
        why = _csv_problem(p)
        if why is None:
            try:
                frames[t] = pd.read_csv(p)
            except (ValueError, pd.errors.ParserError) as e:
                why = f"unparsable ({str(e)[:200]})"
        if why is not None:
            problems[t] = why
    rn, fl = frames.get("runs"), frames.get("failed")
    if rn is not None and fl is not None and len(rn) + len(fl) != members:
        why = f"{len(rn)} run rows and {len(fl)} failed rows for the {members} runs on disk"
        problems["runs"] = problems["failed"] = why  # which one was cut cannot be told: both rebuilt
    if rn is None or "runs" in problems:
        return problems
    keys = _run_keys(rn)
    epochs = dict(zip(keys, rn["epochs"])) if "epochs" in rn else {}
    ends = (dict(zip(keys, rn["epochs"] * rn["steps_per_epoch"])) if {"epochs", "steps_per_epoch"} <= set(rn)
            else {})
    ep, ev = frames.get("epochs"), frames.get("evals")
    if ep is not None:
        have = _run_keys(ep).value_counts().to_dict()
        wrong = next((k for k in sorted(set(have) | set(epochs)) if have.get(k, 0) != epochs.get(k, 0)), None)
        if wrong is not None:
            problems["epochs"] = (f"{have.get(wrong, 0)} epoch rows for run {wrong}, which has "
                                  f"{epochs.get(wrong, 0)} epochs in runs.csv")
    if ev is not None:
        last = ev.assign(_k=_run_keys(ev)).groupby("_k")["step"].max().to_dict() if len(ev) else {}
        wrong = next((k for k in sorted(set(last) | set(keys)) if k not in last or k not in set(keys)
                      or (pd.notna(ends.get(k)) and last[k] != ends[k])), None)
        if wrong is not None:
            problems["evals"] = (f"run {wrong}: evaluation series up to step {last.get(wrong, 'none')}, "
                                 f"its last epoch ends at step {ends.get(wrong, 'none')} (runs.csv)")
    return problems


def set_aside_bad_tables(table_dir: Path, launch_paths: Iterable[Path]) -> list[tuple[str, str, Path]]:
    """Move each table of :func:`table_problems` aside (``<table>.csv.damaged-<time>``); returns
    ``(table, why, where it was kept)`` for each."""
    return _set_aside(table_dir, table_problems(table_dir, launch_paths))


def _set_aside(table_dir: Path, problems: dict[str, str]) -> list[tuple[str, str, Path]]:
    out = []
    for t, why in problems.items():
        p = Path(table_dir) / f"{t}.csv"
        if p.exists():
            out.append((t, why, runs._keep_aside(p, f"{p.name}.damaged")))
    return out


def _token(table_dir: Path, problems: dict[str, str], change: bool, what: str) -> str:
    """Set aside the tables of ``problems`` with a warning (``change``), or only say so (a dry
    run, ``snakemake -n``: nothing on disk changes, and the token names the tables that would be
    set aside, so that the dry run's plan shows their rebuild); then the token: the copies set
    aside, and those pending."""
    table_dir = Path(table_dir)
    if change:
        for t, why, kept in _set_aside(table_dir, problems):
            print(f"WARNING: {table_dir / (t + '.csv')} fails its check ({why}); kept as {kept.name}, rebuilt from "
                  f"{what}", file=sys.stderr)
        pending = []
    else:
        for t, why in problems.items():
            print(f"WARNING: {table_dir / (t + '.csv')} fails its check ({why}); a run that is not a dry run "
                  f"sets it aside and rebuilds it from {what} (nothing changed now)", file=sys.stderr)
        pending = [f"{t}.csv.pending" for t in problems]
    return ",".join(sorted([p.name for p in table_dir.glob("*.csv.damaged-*")] + pending))


def rebuild_token(table_dir: Path | str, launch_paths: Iterable[Path], change: bool = True) -> str:
    """Rule collect's ``params.rebuild`` (evaluated by Snakemake on every invocation, ``-n``
    too): first sets aside the experiment's tables that fail their check
    (:func:`set_aside_bad_tables`, with a warning), then names the copies set aside.  A new copy
    changes the token, so Snakemake's params rerun trigger rebuilds the tables from the runs,
    and with them the claims, figures and report made from them; once rebuilt, the token is
    stable.  (Setting a table aside alone is not enough: Snakemake does not regenerate a missing
    intermediate file whose consumers are up to date, and a table cut in place looks new.)
    ``change=False`` (a dry run, or any invocation that executes nothing): nothing is moved, the
    token names the tables that would be (:func:`_token`)."""
    table_dir = Path(table_dir)
    return _token(table_dir, table_problems(table_dir, launch_paths), change, "the runs")


# -- rule compare's tables (derived from collect's and config/published/) ------------------------

#: rule compare's tables in ``results/tables/``, checked by :func:`derived_problems`
DERIVED = ("claims", "claims_summary", "sensitivity")
#: their checksum manifest, beside them (``sha256sum -c`` reads it), written after the tables
DERIVED_MANIFEST = "claims.SHA256SUMS"


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_derived(frames: dict[str, pd.DataFrame], table_dir: Path | str) -> Path:
    """Write rule compare's tables (``{name: frame}``, names of :data:`DERIVED`) atomically,
    then their checksum manifest (:data:`DERIVED_MANIFEST`, atomically, last: a table written
    without its manifest's line is not trusted).  Returns the manifest's path."""
    table_dir = Path(table_dir)
    for name, df in frames.items():
        write_atomic(df, table_dir / f"{name}.csv")
    manifest = table_dir / DERIVED_MANIFEST
    tmp = manifest.with_name(manifest.name + ".tmp")
    tmp.write_text("".join(f"{_sha256(table_dir / f'{n}.csv')}  {n}.csv\n" for n in sorted(frames)))
    tmp.replace(manifest)
    return manifest


def derived_problems(table_dir: Path | str) -> dict[str, str]:
    """{table: what is wrong} for rule compare's tables (:data:`DERIVED`) in ``table_dir``: one
    that does not parse (:func:`_csv_problem`: a half row at its end), or whose bytes are not
    those rule compare wrote (its checksum manifest, :func:`write_derived`: a table cut in place
    at a row boundary parses, but has other bytes), or that no manifest vouches for.  A table
    that does not exist is not checked (Snakemake makes it)."""
    table_dir = Path(table_dir)
    present = [t for t in DERIVED if (table_dir / f"{t}.csv").exists()]
    if not present:
        return {}
    sums: dict[str, str] = {}
    try:
        for line in (table_dir / DERIVED_MANIFEST).read_text().splitlines():
            digest, _, name = line.partition("  ")
            sums[name.strip()] = digest.strip()
    except (OSError, UnicodeDecodeError):
        pass
    problems = {}
    for t in present:
        p = table_dir / f"{t}.csv"
        why = _csv_problem(p)
        if why is None and f"{t}.csv" not in sums:
            why = f"no checksum in {DERIVED_MANIFEST} (written before it, or its writing was cut off)"
        elif why is None and _sha256(p) != sums[f"{t}.csv"]:
            rows = max(p.read_text().count("\n") - 1, 0)
            why = f"its {rows} rows are not what rule compare wrote (checksum in {DERIVED_MANIFEST})"
        if why is not None:
            problems[t] = why
    return problems


def derived_token(table_dir: Path | str, change: bool = True) -> str:
    """Rule compare's ``params.rebuild``: as :func:`rebuild_token` for its tables
    (:func:`derived_problems`): a claims table cut in place is set aside before any job, so
    that compare rebuilds it and the report is never built from it (nor deleted for it: a
    failing job's outputs are removed by Snakemake)."""
    table_dir = Path(table_dir)
    return _token(table_dir, derived_problems(table_dir), change, "the collected tables (rule compare)")
