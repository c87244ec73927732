"""Probe, plan and verify on a real Slurm (issue 33 items 2-3), through the Slurm profile.

The local Slurm of ``tests/slurm_local.py`` (one node; several "hosts" are emulated as tasks of
one job, ``launcher.emulate_nodes``) is the cluster, and the commands are the user's
(docs/plan.md, "On Slurm"):

1. ``snakemake --profile profiles/slurm probe``: one Slurm job of 2 tasks (2 hosts x 1 gloo
   rank), whose ``srun`` starts a torchrun per task that rendezvous as on two machines; the
   probe file's figures are sane, and its provenance names that job (each rank's Slurm job and
   task), which Slurm's own record shows as 2 tasks, completed;
2. ``snakemake --profile profiles/slurm verify --configfile plan.yaml probe.yaml`` (the probe's
   config for its launcher) on a plan that names the probe's file: the plan takes its NIC rate
   and step time from it, its simulations run as one-task Slurm jobs sized as a simulated train
   job, and its first method and AR-SGD run as one 2-task Slurm job with the same launcher; verify.csv has their measured step times beside the predicted ones, and each run's
   provenance names that job.

About 1.5-2 minutes on 2 cores, most of it Snakemake starting (here and inside each job) and the
Slurm plugin's status polling.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from distrepro_wf.pipeline.launch import JOB_MEM_MB
from slurm_local import SLURM_ARGS, finish, scontrol_job, snakemake, submitted

pytestmark = [pytest.mark.slurm, pytest.mark.workflow]

WORKLOAD = {"dataset": {"name": "digits"}, "model": {"name": "mlp", "hidden": [16]}, "batch_size": 16}
# 2 ranks on 2 hosts (one rank per host), emulated as 2 tasks of a one-node job
LAUNCHER = {"kind": "slurm", "backend": "gloo", "gpus_per_node": 1, "emulate_nodes": True, "timeout_s": 120,
            "mem_mb_per_rank": 400, "mem_mb_simulated": 600}
PROBE = {"probe": {"cluster": "slurmlocal", "nodes": 2, "reps": 2, "sizes_mb": [0.001, 0.1],
                   "p2p_sizes_mb": [0.001, 0.1], "workload": WORKLOAD},
         "launcher": LAUNCHER}
PLAN = {"plan": {"name": "onslurm", "probe": "results/probe/slurmlocal.yaml", "model": {"epoch_samples": 1000},
                 "nodes": [2], "stragglers": ["none"], "methods": {"allreduce_sgd": {}, "dpsgd": {}}, "steps": 3,
                 "crossover": {"nodes": []}},
        "verify": {"methods": 1, "steps": 10, "warmup_steps": 2},
        "stragglers": {"none": {"kind": "none"}}}  # the launcher: the probe's config's (docs/plan.md's command)


def _only(jobs: dict[str, str], rule: str) -> str:
    assert len(jobs) == 1, f"{rule}: {jobs}"
    return next(iter(jobs.values()))


def _from_job(ranks: list[dict], job_id: str) -> None:
    """Every rank ran in Slurm job ``job_id``, one per task of its 2 tasks (the emulated hosts)."""
    assert {(r["slurm"]["job_id"], r["slurm"]["tasks"], r["local_world_size"]) for r in ranks} == {(int(job_id), 2, 1)}
    assert sorted(r["rank"] for r in ranks) == [0, 1], ranks
    assert sorted(r["slurm"]["task"] for r in ranks) == sorted(r["node_rank"] for r in ranks) == [0, 1], ranks


@pytest.mark.timeout(1200)  # a hang guard: 111-158 s on 2 cores beside the main suite
def test_probe_then_a_plan_on_it_verified_under_slurm(slurm, tmp_path):
    t0 = time.time()
    w = tmp_path / "cluster"
    # 1. the probe: one Slurm job of 2 tasks
    rc, out = finish(snakemake(w, PROBE, *SLURM_ARGS, "probe", env=slurm, configfile="probe.yaml"))
    assert rc == 0, out[-5000:]
    probe_job = _only(submitted(out, "probe_cluster"), "probe_cluster")
    rec = scontrol_job(probe_job)  # Slurm's record: one node, 2 tasks (the hosts), done
    assert (rec["NumNodes"], rec["NumTasks"], rec["JobState"]) == ("1", "2", "COMPLETED"), rec
    assert rec["MinMemoryNode"] == f"{2 * (400 + JOB_MEM_MB)}M", rec
    assert rec["TimeLimit"] == "00:07:00", rec  # one launch: timeout_s (2 min) + 5
    log = (w / "results/logs/probe/slurmlocal.log").read_text()
    assert "srun --nodes=1 --ntasks=2 --overcommit" in log and "--nnodes=2 --nproc-per-node=1" in log, log[-3000:]
    doc = yaml.safe_load((w / "results/probe/slurmlocal.yaml").read_text())
    prov = doc["provenance"]
    assert (prov["world"], prov["backend"], len(prov["hosts"])) == (2, "gloo", 2)
    _from_job(prov["ranks"], probe_job)
    # sane figures: loopback between two ranks of this machine, a 5 KB MLP's step on one CPU thread
    plat, prof, meas = doc["platform"], doc["profile"], doc["measured"]
    assert plat["topology"] == "star" and 0.01 < plat["nic_gbps"] < 1000, plat
    assert 0 < plat["latency_us"] < 1e6 and 0 <= plat["overhead_us"] < 1e6, plat
    assert 0 < prof["step_ms"] < 1e4 and 0 < prof["model_mb"] < 0.01 and prof["batch"] == 16, prof
    assert [a["bytes"] for a in meas["all_reduce"]] == [1000.0, 100000.0]
    assert all(a["busbw_gbps"] > 0 and math.isfinite(a["busbw_gbps"]) for a in meas["all_reduce"]), meas
    assert list(meas["p2p"]) == ["0-1"] and meas["p2p_bandwidth_gbps"] > 0.01, meas
    t_probe = time.time() - t0

    # 2. a plan on the probe's file, verified with the same launcher: the probe's config named too
    rc, out = finish(snakemake(w, PLAN, *SLURM_ARGS, "verify", env=slurm, configfile="plan.yaml",
                               also=("probe.yaml",)))
    assert rc == 0, out[-5000:]
    rank = pd.read_csv(w / "results/plan/onslurm.csv")
    assert rank["nic_gbps"].tolist() == [plat["nic_gbps"]] * 2 and rank["compute_ms"].tolist() == [prof["step_ms"]] * 2
    assert sorted(rank["method"]) == ["allreduce_sgd", "dpsgd"], rank.to_dict("records")
    # the simulations: one-task jobs sized as a simulated train job (mem_mb_simulated)
    points = submitted(out, "plan_points")
    assert len(points) == 2, points  # 2 parts at 2 nodes
    for i in points.values():
        rec = scontrol_job(i)
        assert (rec["NumTasks"], rec["MinMemoryNode"], rec["JobState"]) == ("1", f"{600 + JOB_MEM_MB}M",
                                                                          "COMPLETED"), rec
    verify_job = _only(submitted(out, "plan_verify"), "plan_verify")
    rec = scontrol_job(verify_job)
    assert (rec["NumNodes"], rec["NumTasks"], rec["JobState"]) == ("1", "2", "COMPLETED"), rec
    assert rec["TimeLimit"] == "00:09:00", rec  # at most 2 runs (1 cell x (1 method + AR-SGD)) x 2 min + 5
    t = pd.read_csv(w / "results/plan/onslurm/verify.csv")
    first = rank.sort_values("rank")["method"].iloc[0]
    expected = [first] + ([] if first == "allreduce_sgd" else ["allreduce_sgd"])
    assert t["method"].tolist() == expected and (t["status"] == "ok").all(), t.to_dict("records")
    assert (t["steps_measured"] == 2 * (10 - 2)).all() and (t["measured_step_ms"] > 0).all()
    pred = rank.set_index("method")["step_ms"]
    assert t.set_index("method")["predicted_step_ms"].to_dict() == pytest.approx({m: pred[m] for m in expected})
    assert t["error"].tolist() == pytest.approx((t["predicted_step_ms"] / t["measured_step_ms"] - 1).tolist())
    for m in expected:  # each measured row ran in the verify job, one rank per task
        run = w / f"results/plan/onslurm/verify/runs/{m}/n2/none/run"
        _from_job(json.loads((run / "provenance.json").read_text())["ranks"], verify_job)
    vlog = (w / "results/logs/plan/onslurm/verify.log").read_text()
    assert "srun --nodes=1 --ntasks=2 --overcommit" in vlog, vlog[-3000:]
    page = (w / "reports/plan/onslurm.html").read_text()
    for _, r in t.iterrows():
        assert re.search(rf'data-method="{r["method"]}"[^>]*data-measured-step-ms="{r["measured_step_ms"]:.6g}"',
                         page), r["method"]
    print(f"slurm probe: {t_probe:.0f} s, plan + verify: {time.time() - t0 - t_probe:.0f} s")
