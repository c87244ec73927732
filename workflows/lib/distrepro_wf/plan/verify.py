"""``verify``: a plan's first methods run on the cluster, their measured step time beside the predicted one.

A plan (:mod:`distrepro_wf.plan.config`) predicts each method's steady time per step on the
simulator.  ``snakemake --cores 2 verify --configfile config/plan/<name>.yaml`` checks it: in
each verified cell (``verify.nodes`` x ``verify.stragglers`` at the plan's NIC rate
``verify.nic_gbps``) the plan's first ``verify.methods`` methods and the baseline (AR-SGD) run
on real ranks for ``verify.epochs`` x ``verify.steps`` steps, launched by the train rule's
launcher (:func:`distrepro_wf.pipeline.runs.execute_group`: the config's ``launcher:``, a local
torchrun or a Slurm job; the namespace testbed launches the same runs,
:mod:`distrepro_wf.bench.planverify`).  Each run trains ``verify.workload`` (default: the probe's
workload, whose model size and step the plan took): the real model's bytes on the real
network.  Its compute is the real one (``compute: real``), or charged as the plan's step time
(``compute: charged``: a ``fixed`` profile, the rank sleeping to ``step_ms`` after its real
forward/backward, :class:`impls.backends.ChargedClock`), so that a loaded machine's CPU does
not decide the verdict and the network is what is checked.

The measured step is read as the prediction is (:func:`distrepro_wf.plan.table.point_row`: the
workers' combined throughput after the first ``warmup_steps``), so the two mean the same.
:func:`table` writes ``results/plan/<name>/verify.csv``: per row the predicted and measured ms
per step, ``error`` (predicted / measured - 1), ``verified`` (``|error| <= tolerance``), and per
cell whether the methods' order agrees (``order_agrees``) and whether it does beyond ties
(``order_agrees_beyond_margin``: no pair both sides separate by more than ``order_margin`` is
ordered oppositely; :func:`distrepro_wf.pipeline.ordering.discordant`).  The plan's page
(:mod:`distrepro_wf.plan.page`) shows the measured column and marks a verified row.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from impls.errors import ConfigError

from . import config as pconfig

#: the ``verify:`` section's defaults (schema: ``verify``)
DEFAULTS: dict[str, Any] = {"methods": 3, "steps": 200, "epochs": 1, "warmup_steps": 5, "compute": "charged",
                            "tolerance": 0.15, "order_margin": 0.05, "seed": 1}
COMPUTE = ("charged", "real")
BASELINE_ALGORITHM = "allreduce_sgd"
COLUMNS = ["nodes", "nic_gbps", "straggler", "method", "plan_rank", "predicted_step_ms", "measured_step_ms",
           "error", "verified", "measured_rank", "order_agrees", "order_agrees_beyond_margin", "order_discordant",
           "order_predicted", "order_measured", "measured_compute_ms", "steps_measured", "compute", "status",
           "reason"]


def settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``verify:`` section with its defaults and the plan's cells filled in; ConfigError
    naming the key and the allowed values for what does not fit the plan (before any job).
    Reads ``config["plan"]`` after :func:`distrepro_wf.plan.config.check` (a probe's numbers in)."""
    if "plan" not in config:
        raise ConfigError("verify", "verifies a plan: give a plan: section in the same config (docs/plan.md)")
    plan = config["plan"]
    v = {**copy.deepcopy(DEFAULTS), **copy.deepcopy(dict(config.get("verify") or {}))}
    if v["compute"] not in COMPUTE:
        raise ConfigError("verify.compute", f"{v['compute']!r} is not allowed; allowed values: {', '.join(COMPUTE)}")
    for key, allowed in (("nodes", plan["nodes"]), ("stragglers", plan["stragglers"])):
        v.setdefault(key, list(allowed))
        bad = [x for x in v[key] if x not in allowed]
        if bad or not v[key]:
            raise ConfigError(f"verify.{key}", f"{bad or v[key]!r} not of the plan; allowed values: "
                                               f"{', '.join(map(str, allowed))}")
    rates = [float(g) for g in plan["network"]["nic_gbps"]]
    v["nic_gbps"] = float(v.get("nic_gbps", rates[0]))
    if not any(math.isclose(v["nic_gbps"], g) for g in rates):
        raise ConfigError("verify.nic_gbps", f"{v['nic_gbps']:g} is not a rate of the plan; allowed values: "
                                             f"{', '.join(f'{g:g}' for g in rates)}")
    meths = pconfig.methods(plan)
    base = [m for m, s in meths.items() if s["algorithm"]["name"] == BASELINE_ALGORITHM]
    v.setdefault("baseline", base[0] if base else None)
    if v["baseline"] not in meths:
        raise ConfigError("verify.baseline", f"{v['baseline']!r} is not a method of the plan; allowed values: "
                                             f"{', '.join(meths)} (the plan needs AR-SGD, {BASELINE_ALGORITHM}, "
                                             "to verify against)")
    if "workload" not in v:
        if not plan.get("probe"):
            raise ConfigError("verify.workload", "needed without plan.probe: the workload (a workloads: entry's "
                                                 "mapping) whose model the plan's model_mb describes")
        from .probe import load

        wl = (load(plan["probe"], "plan.probe").get("provenance") or {}).get("workload")
        if not wl:
            raise ConfigError("verify.workload", f"the probe {plan['probe']} names no workload: give one")
        v["workload"] = wl
    from impls.config.dataclass_config import from_dict
    from impls.config.workload import WorkloadConfig

    from_dict(WorkloadConfig, workload(v, plan), "verify.workload")
    return v


def workload(v: Mapping[str, Any], plan: Mapping[str, Any]) -> dict[str, Any]:
    """The real runs' workload: ``verify.workload``, the plan's batch per node step, ``steps``
    per epoch at most, ``epochs`` epochs."""
    wl = copy.deepcopy(dict(v["workload"]))
    if plan["model"].get("batch"):
        wl["batch_size"] = int(plan["model"]["batch"])
    wl.update(max_steps_per_epoch=int(v["steps"]), epochs=int(v["epochs"]))
    return wl


def max_runs(v: Mapping[str, Any]) -> int:
    """The most real runs a verification makes (:func:`chosen`: in each cell, ``verify.nodes`` x
    ``verify.stragglers``, its first ``methods`` methods and the baseline), before the plan ranks
    them: what its Slurm job's time limit allows for (``workflows/rules/plan.smk``)."""
    return len(v["nodes"]) * len(v["stragglers"]) * (int(v["methods"]) + 1)


def chosen(rank: pd.DataFrame, v: Mapping[str, Any]) -> pd.DataFrame:
    """The ranking's rows to verify: in each verified cell its first ``methods`` methods and the
    baseline (``plan_rank`` and ``predicted_step_ms`` from the ranking)."""
    sel = rank[rank["nodes"].isin([int(n) for n in v["nodes"]]) & rank["straggler"].isin(v["stragglers"])
               & pd.Series([math.isclose(float(g), v["nic_gbps"]) for g in rank["nic_gbps"]], index=rank.index)]
    out = []
    for _, cell in sel.groupby(["nodes", "straggler"], sort=True):
        cell = cell.sort_values(["rank", "method"])
        top = cell.head(int(v["methods"]))
        out.append(pd.concat([top, cell[(cell["method"] == v["baseline"]) & ~cell["method"].isin(top["method"])]]))
    cols = {"rank": "plan_rank", "step_ms": "predicted_step_ms"}
    if not out:
        return pd.DataFrame(columns=["nodes", "nic_gbps", "straggler", "method", *cols.values()])
    return pd.concat(out).rename(columns=cols)[["nodes", "nic_gbps", "straggler", "method", *cols.values()]]


def run_config(config: Mapping[str, Any], v: Mapping[str, Any], method: str, nodes: int, straggler: str,
               backend: str) -> dict[str, Any]:
    """One real run of the verification (module docstring), on ``backend`` (gloo, nccl, auto)."""
    plan = config["plan"]
    cfg = {"experiment": f"verify_{plan['name']}", "method": method, "nodes": int(nodes), "seed": int(v["seed"]),
           "algorithm": copy.deepcopy(pconfig.methods(plan)[method]["algorithm"]), "workload": workload(v, plan),
           "straggler_name": straggler,
           "straggler": copy.deepcopy(config.get("stragglers", {}).get(straggler, {"kind": "none"})),
           "allreduce_algorithm": "ring", "threads_per_rank": 1, "backend": backend, "checkpoint": False}
    if v["compute"] == "charged":
        cfg["profile"] = {"name": "fixed", "step_ms": float(pconfig.model(plan).step_ms)}
    return cfg


def root(name: str) -> Path:
    return Path("results/plan") / name / "verify"


def members(config: Mapping[str, Any], v: Mapping[str, Any], rows: pd.DataFrame, backend: str
            ) -> dict[int, dict[str, dict[str, Any]]]:
    """``{nodes: {run directory: run config}}`` of the chosen rows (one launch group per node count)."""
    out: dict[int, dict[str, dict[str, Any]]] = {}
    base = root(config["plan"]["name"]) / "runs"
    for _, r in rows.iterrows():
        d = base / str(r["method"]) / f"n{int(r['nodes'])}" / str(r["straggler"])
        out.setdefault(int(r["nodes"]), {})[str(d)] = run_config(config, v, r["method"], int(r["nodes"]),
                                                                 r["straggler"], backend)
    return out


def measured(run: Path, warmup: int) -> dict[str, Any]:
    """A finished real run's step (ms) and compute (ms), read as a plan's point is."""
    from .table import point_row

    row = point_row(run, {}, warmup)
    if row["status"] != "ok":
        return {"status": "failed", "reason": row["reason"]}
    return {"measured_step_ms": row["step_s"] * 1e3, "measured_compute_ms": row["compute_s"] * 1e3,
            "steps_measured": row["steps_measured"], "status": "ok", "reason": ""}


def table(rows: pd.DataFrame, meas: Mapping[tuple[int, str, str], Mapping[str, Any]], v: Mapping[str, Any]
          ) -> pd.DataFrame:
    """``verify.csv`` (:data:`COLUMNS`): ``rows`` (:func:`chosen`) with ``meas`` ((nodes, straggler,
    method) -> :func:`measured`'s dict, or a failure's ``status``/``reason``) beside them."""
    from ..pipeline.ordering import discordant, order

    tol, margin = float(v["tolerance"]), float(v["order_margin"])
    out = []
    for (n, s), cell in rows.groupby(["nodes", "straggler"], sort=True):
        recs = []
        for _, r in cell.iterrows():
            m = {"status": "failed", "reason": "not run", **dict(meas.get((int(n), s, r["method"]), {}))}
            rec = {**r.to_dict(), **m, "compute": v["compute"]}
            if m["status"] == "ok":
                rec["error"] = r["predicted_step_ms"] / m["measured_step_ms"] - 1
                rec["verified"] = bool(abs(rec["error"]) <= tol)
            recs.append(rec)
        ok = [x for x in recs if x["status"] == "ok"]
        pred = {x["method"]: x["predicted_step_ms"] for x in ok}
        real = {x["method"]: x["measured_step_ms"] for x in ok}
        bad = discordant(real, pred, margin)
        mrank = pd.Series(real, dtype=float).rank(method="min")
        for x in recs:
            if x["status"] == "ok":
                x.update(measured_rank=int(mrank[x["method"]]), order_agrees=order(pred) == order(real),
                         order_agrees_beyond_margin=not bad, order_predicted=" < ".join(order(pred)),
                         order_measured=" < ".join(order(real)),
                         order_discordant="; ".join(f"{a} < {b} measured, > predicted" for a, b in bad))
            out.append(x)
    return pd.DataFrame(out).reindex(columns=COLUMNS)
