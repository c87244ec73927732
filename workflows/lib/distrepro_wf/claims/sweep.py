"""Sensitivity sweep: the simulator itself re-run at both ends of every declared range.

:mod:`distrepro_wf.claims.sensitivity` re-evaluates each simulated speed verdict over
:data:`~distrepro_wf.claims.sensitivity.RANGES` with the closed form (a model of the model: what the
default run can afford).  This module checks that closed form against the simulator: for every
simulated speed claim row (the same rows: ``claims.yaml`` entries whose experiment is simulated,
metric in :data:`~distrepro_wf.claims.sensitivity.SPEED_METRICS`, at each of the claim's settings) it

1. builds each side's run config exactly as the pipeline does (:func:`distrepro_wf.pipeline.config.
   run_config`, seed 1, the claim's nodes and straggler), short: :data:`EPOCHS` epochs of
   :data:`STEPS` steps, one evaluation each (time per epoch is steps x step time, and both sides
   take the same steps, so the ratio of short epochs is the ratio of step times);
2. sets one parameter to the low or the high end of its range (:func:`perturb`, the others
   nominal) on the simulator's own knobs:

   * compute per step: the profile's ``step_ms`` (scaled);
   * bandwidth efficiency: the platform's ``msg_efficiency`` (its links built at ``nic_gbps``, and
     ``uplink_gbps`` on racks, times it), **not** ``allreduce_efficiency``: the range is the achieved
     share of the NIC's rate for *every* message (:data:`~distrepro_wf.claims.sensitivity.RANGES`), and the claims compare
     all-reducing methods with gossip, AD-PSGD and servers, whose messages ``allreduce_efficiency``
     does not touch (:mod:`impls.sim.platforms`: it weighs all-reduce messages only);
   * per-message overhead: the profile's ``msg_us``; latency: the platform's ``latency_us``
     (scaled); jitter: the profile's ``jitter``; staging: the profile's ``stage_gbps`` (scaled);
   * background load: the platform's ``background_load``, only on a preset that has background
     traffic (``shared_hpc``); elsewhere "not swept" (on one switch the closed form models it as a
     smaller NIC share, which the bandwidth row already sweeps);
   * AR/backward overlap: ``allreduce_sgd``'s ``overlap_backward`` off (0) / on (1); a claim with
     no all-reducing side is "not swept" (neither side moves, in the closed form either);

3. simulates every distinct config once (the nominal point and ends that leave a side's config
   unchanged share its simulation), and reads each run's simulated time per epoch over the
   whole run (its total over its epochs: an asynchronous side's shared epochs split their steps
   unevenly between the first and the last, AD-PSGD at 16 nodes 4.68 s + 0.56 s, where the last
   alone made a slower network look faster; a pipelined method's, OSGP's, at its steady steps:
   an epoch's end drains its exchange, so a short epoch's first step waits for none, :func:`epoch_time`);
4. :func:`judge`: the claim's statistic at each point (``a/b``; over the control's ``a/b`` for
   ``ratio_vs_control``), its verdict (the claim's ``expect`` on that point), the closed form's
   ratio at the same point and its verdict as :mod:`distrepro_wf.claims.sensitivity` draws it (the
   sweep's nominal simulated ratio scaled by ``closed_form(p) / closed_form(nominal)``), and
   whether the two verdicts agree.

A time-to-target claim is "not swept" (:data:`TTA_NOT_SWEPT`).  A short run is a synchronous
method's steady state (OSGP's read at its steady steps); an asynchronous side's few-step epochs
(AD-PSGD, ``ps_async``) may not be: its nominal row is there to be read against the claims table's value.  Cost: one short simulation per
distinct (side, point): 332 simulations of 7-32 simulated nodes for the default config
(README: rule ``sensitivity_sweep``), so it is part of ``studies``, not of the default run.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from impls.backends import is_simulated
from impls.errors import ConfigError

from . import closedform as cf
from . import evaluate as wfclaims
from ..pipeline import config as wfconfig
from . import sensitivity

STEPS = 3  # steps per epoch of a short run
EPOCHS = 2  # the whole run's time per epoch is read (both epochs: see the module docstring)
TTA_NOT_SWEPT = ("not swept: a time to target is the steps to the target (a whole run's learning curve, which a "
                 "short run does not have; an asynchronous method's depends on timing) times the step time; the "
                 "step time is swept by the same experiment's per-epoch claims")
COLUMNS = ["claim", "experiment", "nodes", "straggler", "sensitivity_from", "parameter", "label", "end", "value",
           "sim_a_s", "sim_b_s", "sim_ratio", "closed_form_ratio", "closed_form_scaled", "verdict", "closed_form_verdict",
           "agrees", "note"]
#: where a row's sensitivity in the claims table comes from (column ``sensitivity_from``)
CLOSED_FORM, SIMULATED_ENDS = "closed form", "simulated ends"


class NotSwept(Exception):
    """A parameter the simulator has no knob for in this setting (the message says why)."""


@dataclass(frozen=True)
class Side:
    experiment: str
    method: str
    nodes: int
    straggler: str


def chosen(names: Iterable[str], claims: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The claims named (``benchmarks.sensitivity_sweep.claims``; none named: all); an unknown
    name is a :class:`ConfigError` naming the key and the known claims."""
    claims, names = list(claims), list(names or [])
    known = [c["id"] for c in claims]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ConfigError("benchmarks.sensitivity_sweep.claims",
                          f"unknown claim(s) {unknown}; known: {', '.join(sorted(known))}")
    return [c for c in claims if not names or c["id"] in names]


def simulated_speed_rows(claims: Iterable[dict[str, Any]], config: dict[str, Any]) -> list[tuple[dict, int, str]]:
    """(claim, nodes, straggler) of every simulated speed claim at each of its settings: the rows
    :func:`distrepro_wf.claims.sensitivity.analyse` evaluates."""
    out = []
    for c in claims:
        exp = (config.get("experiments") or {}).get(c["experiment"])
        if not exp or not is_simulated(exp.get("backend")) or c["metric"] not in sensitivity.SPEED_METRICS:
            continue
        out += [(c, n, st) for n, st in wfclaims._settings(c, wfclaims._grid(config, c["experiment"]))]
    return out


def sides(c: dict[str, Any], config: dict[str, Any], nodes: int, straggler: str) -> list[Side]:
    """[a, b] at the setting, then [a, b] at the control for ``ratio_vs_control``."""
    settings = [(c["experiment"], nodes, straggler)]
    if c["compare"] == "ratio_vs_control":
        settings.append(wfclaims._control_setting(c, config, nodes, straggler))
    return [Side(e, sel["method"], int(sel.get("nodes", n)), str(sel.get("straggler", st)))
            for e, n, st in settings for sel in (c["a"], c["b"])]


def unmodelled(c: dict[str, Any], config: dict[str, Any], nodes: int, straggler: str) -> str | None:
    """Why the closed form does not model a claim row's setting (any side's, the control's too),
    or None; None for a row that is no ratio of two sides (nothing to scale)."""
    if "b" not in c or c["compare"] not in ("ratio", "ratio_vs_control"):
        return None
    for s in sides(c, config, nodes, straggler):
        p = sensitivity.nominal_point(config, s.experiment, s.nodes, s.straggler)
        why = cf.unmodelled(p) if p is not None else None
        if why:
            return why
    return None


def short_config(config: dict[str, Any], side: Side, steps: int = STEPS, epochs: int = EPOCHS) -> dict[str, Any]:
    """The side's run config (seed 1) as the pipeline builds it, cut to ``epochs`` of ``steps``."""
    cfg = wfconfig.run_config(config, wfconfig.Run(side.experiment, side.method, side.nodes, side.straggler, 1))
    wl = cfg["workload"]
    wl.update(epochs=epochs, evals_per_epoch=1, max_steps_per_epoch=min(steps, wl.get("max_steps_per_epoch") or steps))
    return cfg


def _spec(x: Any) -> dict[str, Any]:
    return {"name": x} if isinstance(x, str) else copy.deepcopy(dict(x))


overlap_default = cf.overlap_default  # the algorithm's own default of overlap_backward


def perturb(cfg: dict[str, Any], name: str, value: float) -> dict[str, Any]:
    """``cfg`` with parameter ``name`` (a :data:`~distrepro_wf.claims.sensitivity.RANGES` name) at
    ``value`` (a factor for the "scale" ranges) on the simulator's knobs (module docstring);
    :class:`NotSwept` where it has none here."""
    from impls.sim.opcost import FREE, given_opcost, paper_opcost  # noqa: PLC0415
    from impls.sim.platforms import PRESETS, platform_config  # noqa: PLC0415
    from impls.sim.profiles import PAPER, profile_config  # noqa: PLC0415

    cfg = copy.deepcopy(cfg)
    plat, prof = platform_config(cfg["platform"]), profile_config(cfg["profile"])
    pspec, rspec = _spec(cfg["platform"]), _spec(cfg["profile"])
    if name == "compute_s":
        if prof.step_ms is None:
            raise NotSwept(f"profile {prof.name!r} measures its compute on this machine: no step_ms to scale")
        rspec["step_ms"] = prof.step_ms * value
    elif name == "efficiency":
        if value == plat.msg_efficiency:  # the nominal: the config as it is (one simulation with the nominal point)
            return cfg
        pspec["msg_efficiency"] = value
    elif name == "msg_overhead_s":
        rspec["msg_us"] = value * 1e6
    elif name == "latency_s":
        pspec["latency_us"] = plat.latency_us * value
    elif name == "background":
        if "background_load" not in PRESETS[plat.name]:
            raise NotSwept(f"platform {plat.name!r} has no background traffic (only shared_hpc does); the closed "
                           "form's share of one switch's NIC is the bandwidth row")
        pspec["background_load"] = value
    elif name == "jitter":
        rspec["jitter"] = value
    elif name == "stage_bandwidth":
        stage = given_opcost(vars(prof), paper_opcost() if prof.name in PAPER else FREE).stage_gbps
        if not stage:
            raise NotSwept(f"profile {prof.name!r} stages nothing (stage_gbps unset)")
        rspec["stage_gbps"] = stage * value
    elif name == "overlap":
        on = bool(value >= 0.5)
        default = overlap_default(cfg["algorithm"]["name"])
        if default is not None and cfg["algorithm"].get("overlap_backward", default) != on:
            cfg["algorithm"]["overlap_backward"] = on
        return cfg
    else:
        raise NotSwept(f"no simulator knob for {name!r}")
    cfg["platform"], cfg["profile"] = pspec, rspec
    return cfg


def key(cfg: dict[str, Any]) -> str:
    return json.dumps(cfg, sort_keys=True)


def row_points(c: dict[str, Any], config: dict[str, Any], nodes: int, straggler: str, steps: int = STEPS,
               epochs: int = EPOCHS) -> list[dict[str, Any]]:
    """The points of one simulated speed claim row: its nominal point, then each range's low and
    high end (:data:`~distrepro_wf.claims.sensitivity.RANGES`), each a dict with ``parameter``
    ("nominal" or the range's name), ``label``, ``end``, ``value``, ``cfgs`` (the sides' short
    configs there: [a, b] and the control's [a, b] for ``ratio_vs_control``; None where the simulator
    has no knob for it, ``note`` says why) and ``closed_form_ratio`` (the closed form's statistic
    there; NaN without one)."""
    base = {"claim": c["id"], "experiment": c["experiment"], "nodes": nodes,
            "straggler": straggler}
    if c["metric"] == "time_to_target_s":
        return [{**base, "parameter": "", "end": "", "cfgs": None, "note": TTA_NOT_SWEPT}]
    ctl = wfclaims._control_setting(c, config, nodes, straggler) if c["compare"] == "ratio_vs_control" else None
    fn = sensitivity.ratio_fn(c, config, nodes, straggler, ctl)
    nominal = sensitivity.claim_nominal(c, config, nodes, straggler)
    short = [short_config(config, s, steps, epochs) for s in sides(c, config, nodes, straggler)]
    has_ar = any(overlap_default(s["algorithm"]["name"]) is not None for s in short)
    ends = [("", "nominal", math.nan, lambda p: p, list(short), "")]
    for spec in sensitivity.RANGES:
        make, low, high, _ = sensitivity._setter(spec, nominal) if nominal else (None, spec["low"], spec["high"], 0)
        for end, v in (("low", low), ("high", high)):
            try:
                if spec["name"] == "overlap" and not has_ar:
                    raise NotSwept("no side all-reduces: the overlap moves neither side")
                cfgs = [perturb(s, spec["name"], v) for s in short]
                ends.append((spec["name"], end, v, make(v) if make else None, cfgs, ""))
            except NotSwept as e:
                ends.append((spec["name"], end, v, None, None, f"not swept: {e}"))
    labels = {s["name"]: s["label"] for s in sensitivity.RANGES}
    return [{**base, "parameter": name or "nominal", "label": labels.get(name, "nominal"), "end": end, "value": v,
             "cfgs": cfgs, "note": note,
             "closed_form_ratio": fn(f) if fn is not None and f is not None else math.nan}
            for name, end, v, f, cfgs, note in ends]


def plan(claims: Iterable[dict[str, Any]], config: dict[str, Any], steps: int = STEPS,
         epochs: int = EPOCHS) -> tuple[list[dict[str, Any]], dict[str, dict]]:
    """(points, configs): one point per claim row x (nominal, each range's low and high end)
    (:func:`row_points`), each with its sides' config keys (None: not swept, ``note`` says why) and
    the closed form's ratio there; ``configs``: every distinct config to simulate, by key."""
    points, configs = [], {}
    for c, n, st in simulated_speed_rows(claims, config):
        source = SIMULATED_ENDS if c["metric"] != "time_to_target_s" and unmodelled(c, config, n, st) else CLOSED_FORM
        for p in row_points(c, config, n, st, steps, epochs):
            p["sensitivity_from"] = source
            cfgs = p.pop("cfgs")
            p["keys"] = None if cfgs is None else [key(x) for x in cfgs]
            configs.update({k: x for k, x in zip(p["keys"] or [], cfgs or [])})
            points.append(p)
    return points, configs


def statistic(times: list[float]) -> float:
    """A point's statistic from its sides' simulated times per epoch: ``a/b``, or ``(a/b) / (a'/b')``
    over the control's sides for ``ratio_vs_control``."""
    return times[0] / times[1] / (times[2] / times[3]) if len(times) == 4 else times[0] / times[1]


def epoch_time(out: str | os.PathLike) -> float:
    """The simulated time per epoch of a finished short run, over all its epochs (each over
    ranks, as the runs table aggregates it: :func:`distrepro_wf.pipeline.collect.read_run`).

    A pipelined method's (:attr:`impls.protocol.Algorithm.pipelined`: OSGP, whose epoch's end
    drains the exchange in flight) is its steady epoch: steps per epoch times the mean step after
    each epoch's first (:func:`steady_step_s`).  Its closed form is the steady step, which is what a
    long epoch is made of; a short epoch's first step waits for no exchange, so an epoch of 3
    steps is ``C + 2 max(C, m)`` against 3 steady steps (OSGP at ``sgp_sim``'s nominal point,
    4 nodes: 12 % shorter, at a bandwidth efficiency of 0.3 19 %).  A verdict's epoch of ``S``
    steps is shorter than its steady ``S`` steps by at most ``max(0, m - C) / S`` of one."""
    from ..pipeline.collect import read_run  # noqa: PLC0415

    info, tables = read_run(Path(out))
    if _pipelined(info["algorithm"]):
        return steady_step_s(out) * float(info["steps_per_epoch"])
    return float(tables.epochs["time/epoch_s"].mean())


def _pipelined(algorithm: str) -> bool:
    from impls.algorithms import ALGORITHMS  # noqa: PLC0415

    return algorithm in ALGORITHMS and ALGORITHMS.get(algorithm).pipelined


def steady_step_s(out: str | os.PathLike) -> float:
    """The mean ``time/step_s`` of a finished run's steps after each epoch's first, over ranks
    (a pipelined method's steady step: module docstring of :func:`epoch_time`)."""
    from ..pipeline.collect import _read_metrics  # noqa: PLC0415
    from ..pipeline import runs as wfruns  # noqa: PLC0415

    nodes = int(wfruns.read_json(Path(out) / "config.json")["nodes"])
    steps = [r for r in _read_metrics(Path(out), nodes) if r["kind"] == "step"]
    first = {}
    for r in steps:
        first[(r["rank"], r["epoch"])] = min(first.get((r["rank"], r["epoch"]), r["step"]), r["step"])
    steady = [r["time/step_s"] for r in steps if r["step"] != first[(r["rank"], r["epoch"])]]
    if not steady:
        raise ValueError(f"{out}: no step after an epoch's first (a pipelined method's steady step needs 2 an epoch)")
    return float(sum(steady) / len(steady))


def config_id(k: str) -> str:
    """A config key's short name (its run directory): the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(k.encode()).hexdigest()[:16]


def run_members(members: dict[str, dict[str, Any]], launch: Path, log: Path,
                timeout_s: float = 600) -> dict[str, dict[str, Any]]:
    """Simulate ``{run directory: config}`` (one node count) through the train rule's launcher
    (:func:`distrepro_wf.pipeline.runs.run_members`: one fork server, no Python start-up a run).
    ``{run directory: {"status": "ok", "time_per_epoch_s": ...} or {"status": "failed", "reason":
    ...}}``: a failed run is reported, never read."""
    from ..pipeline import runs  # noqa: PLC0415

    return {d: {"status": "ok", "time_per_epoch_s": epoch_time(Path(d) / "run")} if o["status"] == "ok" else o
            for d, o in runs.run_members(members, launch, log, timeout_s).items()}


def split(configs: dict[str, dict[str, Any]], parts: int) -> list[tuple[int, int, dict[str, dict[str, Any]]]]:
    """(nodes, part, {key: config}) launch groups: the configs by node count (a group shares one),
    each dealt round-robin into ``parts`` so that two cores share even the largest node count, in
    the order of their ids (a claim's points alternate its sides, so dealt in that order one part
    would get every run of the slower side)."""
    by: dict[int, dict[str, dict[str, Any]]] = {}
    for k, cfg in sorted(configs.items(), key=lambda kv: config_id(kv[0])):
        by.setdefault(int(cfg["nodes"]), {})[k] = cfg
    out = []
    for n, group in sorted(by.items()):
        items = list(group.items())
        out += [(n, i, dict(items[i::parts])) for i in range(min(parts, len(items)))]
    return out


def simulate_all(configs: dict[str, dict[str, Any]], workdir: str | os.PathLike, log: str | os.PathLike,
                 threads: int = 1, timeout_s: float = 600) -> tuple[dict[str, float], float]:
    """({key: simulated time per epoch}, CPU seconds of the simulations): the configs in launch
    groups (:func:`split`), each group one fork server (:func:`run_members`) in a Python process of
    its own (:func:`job_main`, through :func:`distrepro_wf.pipeline.child.run_child`: the launcher
    installs signal handlers, a main thread's), ``threads`` groups at once (simulated times do not
    depend on the load); a failed simulation raises, so no partial table is written.

    The groups are plain child processes (``python -c``), not a :mod:`multiprocessing` pool: its
    ``spawn`` start re-runs the caller's ``__main__``, and a Snakemake script's (rule
    ``sensitivity_sweep``) reads the ``snakemake`` object only Snakemake defines."""
    import sys  # noqa: PLC0415
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    from ..pipeline.child import run_child  # noqa: PLC0415

    workdir, log = Path(workdir).resolve(), Path(log).resolve()  # the groups run in the repository
    groups = split(configs, max(1, int(threads)))
    jobs = []  # (job file, the group's log)
    for n, i, group in groups:
        job, lg = workdir / "launches" / f"n{n}.p{i}.job.json", Path(f"{log}.n{n}.p{i}")
        job.parent.mkdir(parents=True, exist_ok=True)
        job.write_text(json.dumps({"members": {str(workdir / config_id(k)): cfg for k, cfg in group.items()},
                                   "launch": str(workdir / "launches" / f"n{n}.p{i}.json"),
                                   "log": str(lg), "timeout_s": timeout_s}))
        jobs.append((job, lg))

    def run(job_log: tuple[Path, Path]) -> tuple[dict[str, dict[str, Any]], float]:
        job, lg = job_log
        members = len(json.loads(job.read_text())["members"])
        child = run_child([sys.executable, "-c", "import sys; from distrepro_wf.claims import sweep; "
                           "sweep.job_main(sys.argv[1])", job], lg, timeout_s * members + 60)
        out = job.with_suffix(".out.json")
        if child.rc != 0 or not out.exists():
            raise RuntimeError(f"launch group {job.name} failed (exit {child.rc}"
                               f"{', timed out' if child.timed_out else ''}): see {log}")
        return json.loads(out.read_text()), child.cpu_s

    try:
        with ThreadPoolExecutor(max(1, int(threads))) as pool:
            results = list(pool.map(run, jobs))
    finally:
        with open(log, "a") as f:  # the groups' own logs, one after another
            for _, lg in jobs:
                if lg.exists():
                    f.write(lg.read_text())
                    lg.unlink()
    times: dict[str, float] = {}
    for (res, _), (_, _, group) in zip(results, groups):
        bad = [f"{d}: {r['reason']}" for d, r in res.items() if r["status"] != "ok"]
        if bad:
            raise RuntimeError(f"{len(bad)} simulation(s) failed (see {log}): " + "; ".join(bad[:3]))
        times.update({k: res[str(workdir / config_id(k))]["time_per_epoch_s"] for k in group})
    return times, sum(cpu for _, cpu in results)


def job_main(job: str) -> None:
    """One launch group of :func:`simulate_all`, in its own process: ``<job>.json`` holds
    :func:`run_members`' arguments, the outcomes go to ``<job>.out.json``; the process ends with
    the sweep's (``PR_SET_PDEATHSIG``)."""
    import signal  # noqa: PLC0415

    from impls.runtime.procs import die_with_parent  # noqa: PLC0415

    die_with_parent(signal.SIGTERM)
    spec = json.loads(Path(job).read_text())
    res = run_members(spec["members"], Path(spec["launch"]), Path(spec["log"]), float(spec["timeout_s"]))
    Path(job).with_suffix(".out.json").write_text(json.dumps(res))


def table(points: list[dict[str, Any]], times: dict[str, float]) -> pd.DataFrame:
    """The sweep's rows from the simulated time per epoch of every config key."""
    rows = []
    for p in points:
        t = [times[k] for k in p["keys"]] if p.get("keys") else []
        ratio = statistic(t) if t else math.nan
        rows.append({**{k: p.get(k, math.nan) for k in COLUMNS if k in p and k != "keys"},
                     "sim_a_s": t[0] if t else math.nan, "sim_b_s": t[1] if t else math.nan, "sim_ratio": ratio})
    return pd.DataFrame(rows).reindex(columns=[c for c in COLUMNS if c not in ("closed_form_scaled", "verdict",
                                                                             "closed_form_verdict", "agrees")])


def judge(frame: pd.DataFrame, expects: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Verdicts of the sweep's rows: ``verdict`` (the claim's ``expect`` on ``sim_ratio``),
    ``closed_form_scaled`` (the row's setting's nominal ``sim_ratio`` times ``closed_form_ratio /
    closed_form_ratio at nominal``, as :mod:`distrepro_wf.claims.sensitivity` scales), its verdict, and
    ``agrees``; rows without a simulated ratio (not swept) get none."""
    out = frame.copy()
    for col in ("closed_form_scaled", "verdict", "closed_form_verdict", "agrees"):
        out[col] = math.nan if col == "closed_form_scaled" else ""
    for (claim, n, st), g in out.groupby(["claim", "nodes", "straggler"], sort=False):
        nom = g[g["end"] == "nominal"]
        if nom.empty:
            continue
        m0, r0 = float(nom["sim_ratio"].iloc[0]), float(nom["closed_form_ratio"].iloc[0])
        expect = expects[claim]
        for i, r in g.iterrows():
            if not math.isfinite(r["sim_ratio"]):
                continue
            out.at[i, "verdict"] = wfclaims.verdict(r["sim_ratio"], r["sim_ratio"], expect)
            if math.isfinite(r["closed_form_ratio"]) and math.isfinite(r0) and r0 > 0:
                scaled = m0 * r["closed_form_ratio"] / r0
                out.at[i, "closed_form_scaled"] = scaled
                out.at[i, "closed_form_verdict"] = wfclaims.verdict(scaled, scaled, expect)
                out.at[i, "agrees"] = "yes" if out.at[i, "closed_form_verdict"] == out.at[i, "verdict"] else "no"
    return out[COLUMNS]
