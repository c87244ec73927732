"""The pipeline on a real Slurm, through the Slurm profile, against the local profile.

``scripts/slurm-local.sh start`` installs Debian's slurm-wlm and munge if missing and runs
munged, slurmctld and slurmd (configless) on this machine: a one-node, loopback-only
cluster with this machine's CPUs; the test stops it at the end.  No accounting, so the
Slurm plugin polls ``squeue`` (``--slurm-status-command squeue``; docs/cluster.md).

One node is all there is: a job that asks for several nodes is *emulated* as several
tasks on the one node (``launcher.emulate_nodes``: ``--nodes=1 --ntasks=<hosts>
--overcommit``).  Each task runs its own torchrun, and they meet in a c10d rendezvous on
the allocation's first node, exactly as on separate machines; only the host names are the
same.  Here ``gpus_per_node: 2`` makes 4 ranks a 2-host job (2 tasks x 2 ranks), while 1
and 2 ranks are single-host jobs (``torchrun --standalone`` inside the job), and 8 nodes
on the simulated platform one process: a one-task job sized by ``mem_mb_simulated``.

Checked: the same grid, stragglers and seeds give the same losses and accuracies (every
value of the collected tables, exactly) under both profiles; each job got the layout it
asked for (Slurm's own record of the job, the command in the train log, and the rank map
in provenance.json); a job killed by Slurm (``scancel`` after its first checkpoint) is
reported failed with Slurm's state, leaves no result, no table row and no process behind,
and the next invocation resumes it from its checkpoint to the same numbers; a partition
Slurm rejects fails at once with sbatch's message, and a local launcher under the Slurm
profile is refused before anything is submitted.  (A time limit ends a job the same way,
TIMEOUT instead of CANCELLED, but takes over a minute at Slurm's smallest limit: checked
by hand, not here.)  About 3 minutes on 2 cores, most of it the Slurm plugin's status
polling (after 1, 12, 33, 64 s ...) and Snakemake starting inside each job.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from distrepro_wf.pipeline.launch import JOB_MEM_MB
from slurm_local import SLURM_ARGS, finish, scontrol_job, snakemake, submitted

pytestmark = [pytest.mark.slurm, pytest.mark.workflow]
ROOT = Path(__file__).resolve().parents[1]

GRID = {
    "experiments": {
        "pair": {"title": "1 and 2 ranks: single-host jobs", "workload": "tiny", "nodes": [1, 2],
                 "stragglers": ["none"], "seeds": [1],
                 "methods": {"allreduce_sgd": {}, "serial_sgd": {"nodes": [1]}}},
        # 4 ranks = 2 hosts x 2 ranks; the last worker a (large) straggler, so the run lasts
        # long enough after its first checkpoint to be killed
        "wide": {"title": "4 ranks: a 2-host job", "workload": "tiny", "nodes": [4], "stragglers": ["slow"],
                 "seeds": [1], "methods": {"allreduce_sgd": {}}},
        # 8 virtual nodes on the simulated platform: one process, so a one-task job sized by memory
        "sim": {"title": "8 simulated nodes: a one-task job", "workload": "tiny", "nodes": [8], "stragglers": ["none"],
                "seeds": [1], "backend": "simgrid", "platform": "ethernet_10g", "profile": "resnet50_v100x8",
                "methods": {"allreduce_sgd": {}}},
    },
    "workloads": {
        "tiny": {"dataset": {"name": "digits"}, "model": {"name": "mlp", "hidden": [16]}, "batch_size": 16,
                 "epochs": 3, "max_steps_per_epoch": 8, "optimizer": {"lr": 0.1},
                 "target": {"metric": "acc/val", "value": 0.2}},
    },
    "stragglers": {"none": {"kind": "none"}, "slow": {"kind": "fixed", "ranks": [-1], "factor": 400}},
}
LOCAL = {**GRID, "launcher": {"kind": "local", "timeout_s": 300, "backend": "gloo"}}
SLURM = {**GRID, "launcher": {"kind": "slurm", "timeout_s": 300, "gpus_per_node": 2, "emulate_nodes": True,
                              "backend": "gloo", "mem_mb_per_rank": 400, "mem_mb_simulated": 600}}
KEYS = ["experiment", "method", "nodes", "straggler", "seed"]


def wait_for(cond, proc: subprocess.Popen, what: str, timeout: float = 300) -> None:
    t0 = time.time()
    while not cond():
        if proc.poll() is not None:
            raise AssertionError(f"Snakemake ended before {what}:\n{proc.stdout.read()[-5000:]}")
        assert time.time() - t0 < timeout, f"timed out waiting for {what}"
        time.sleep(0.2)


def slurm_job_of(comment_suffix: str) -> str | None:
    """The id of the live Slurm job of a train job (the plugin's comment names its wildcards)."""
    out = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k"], capture_output=True, text=True).stdout
    ids = [i for i, _, c in (line.partition("|") for line in out.splitlines()) if c.endswith(comment_suffix)]
    return ids[0] if ids else None


def processes_in(workdir: Path) -> list[str]:
    """Command lines of live processes working in ``workdir`` (Snakemake, train.py, torchrun, ranks)."""
    out = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(p / "cwd")) == workdir:
                out.append((p / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:300])
        except OSError:
            continue
    return out


# the numbers a run produces (not its timings): they must not depend on where it ran
VALUES = {"runs": ["final_acc", "best_acc", "final_train_loss", "final_val_loss", "bytes_sent_per_epoch",
                   "epochs_to_target"],
          "epochs": ["loss/train", "loss/val", "acc/val", "comm/bytes_sent"]}


def tables(workdir: Path) -> dict[str, pd.DataFrame]:
    out = {}
    for name, values in VALUES.items():
        df = pd.concat([pd.read_csv(workdir / f"results/tables/{e}/{name}.csv") for e in GRID["experiments"]])
        keys = KEYS + (["epoch"] if name == "epochs" else [])
        out[name] = df[keys + values].sort_values(keys).reset_index(drop=True)
    return out


def ranks(workdir: Path, experiment: str, method: str, nodes: int, straggler: str) -> list[dict]:
    run = workdir / f"results/runs/{experiment}/{method}/n{nodes}/{straggler}/seed1/run"
    return json.loads((run / "provenance.json").read_text())["ranks"]


# a hang guard, not a speed target: six Snakemake invocations, four under Slurm; 366 s on 2 cores beside
# the main suite, over the suite's 600 s on a loaded host (CI of 1c8e590: the beside process 1.5x slower)
@pytest.mark.timeout(1800)
def test_pipeline_on_slurm_equals_local_and_survives_a_killed_job(slurm, tmp_path):
    t0 = time.time()
    local = snakemake(tmp_path / "local", LOCAL, "--profile", str(ROOT / "profiles/local"))
    # bad input, beside: a partition Slurm does not know (Slurm's message, at once, no hang),
    # and the Slurm profile with a local launcher (refused before anything is submitted)
    partition = snakemake(tmp_path / "bad-partition", SLURM, *SLURM_ARGS, "--retries", "0", "--until", "train",
                          "--set-resources", "train:slurm_partition=nosuch", env=slurm)
    kind = snakemake(tmp_path / "bad-kind", LOCAL, *SLURM_ARGS, env=slurm)
    wide = tmp_path / "slurm/results/runs/wide/allreduce_sgd/n4/slow/seed1"
    # 1. the Slurm profile, no retries: the 2-host job is cancelled once every rank has
    #    checkpointed its first epoch
    first = snakemake(tmp_path / "slurm", SLURM, *SLURM_ARGS, "--retries", "0", env=slurm)
    wait_for(lambda: all((wide / "checkpoint" / f"rank{r}.pt").exists() for r in range(4)), first,
             "the 2-host run's first checkpoint")
    killed = slurm_job_of("rule_train_wildcards_wide_4")
    assert killed, "no running Slurm job for train wide/n4"
    subprocess.run(["scancel", killed], check=True)
    rc, out = finish(partition, timeout=120)
    assert rc != 0 and "SLURM sbatch failed. The error message was 'sbatch: error: invalid partition specified: " \
        "nosuch" in out, out[-3000:]
    rc, out = finish(kind, timeout=120)
    assert rc != 0 and "invalid configuration: launcher.kind: 'local' under the Slurm executor" in out, out[-3000:]
    assert not (tmp_path / "bad-kind/.snakemake/slurm_logs").exists()
    rc, out = finish(first)
    # reported failed, with Slurm's state; the other experiment completed (keep-going)
    assert rc != 0, out[-3000:]
    assert f"SLURM-job '{killed}' failed, SLURM status is: 'CANCELLED'" in out, out[-5000:]
    assert re.search(r"Error in rule train:\n.*\n    jobid: \d+\n    output: results/launches/wide/n4.json", out), out[-5000:]
    jobs = {w: scontrol_job(i) for w, i in submitted(out).items()}
    # nothing of the killed job keeps running (Slurm's cgroup takes every process of it)
    t1 = time.time()
    while processes_in(tmp_path / "slurm") and time.time() - t1 < 20:
        time.sleep(0.5)
    assert not processes_in(tmp_path / "slurm"), processes_in(tmp_path / "slurm")
    # no partial result: no run/, no outcome, no launch record, no table of its experiment
    s = tmp_path / "slurm"
    assert not (wide / "run").exists() and not (wide / "outcome.json").exists()
    assert not (s / "results/launches/wide/n4.json").exists()
    assert not (s / "results/tables/wide").exists()
    assert sorted(pd.read_csv(s / "results/tables/pair/runs.csv")["nodes"]) == [1, 1, 2]
    assert list(pd.read_csv(s / "results/tables/sim/runs.csv")["nodes"]) == [8]
    assert (wide / "checkpoint").is_dir()
    # 2. the same command (with the profile's one retry) resumes the killed run from its checkpoint
    rc, out = finish(snakemake(s, SLURM, *SLURM_ARGS, env=slurm))
    assert rc == 0, out[-5000:]
    assert json.loads((wide / "run/runinfo.json").read_text())["resumed_from_epoch"] in (0, 1)  # not from scratch
    assert pd.read_csv(s / "results/tables/wide/failed.csv").empty and (s / "reports/index.html").exists()
    again = submitted(out)
    assert list(again) == ["wide_4"], again  # only the killed group ran again
    jobs["wide_4 again"] = scontrol_job(again["wide_4"])
    rc, out_local = finish(local)
    assert rc == 0, out_local[-5000:]
    for e in GRID["experiments"]:  # the local twin's runs all finished (a failed one says why, and where its log is)
        failed = pd.read_csv(tmp_path / "local" / f"results/tables/{e}/failed.csv")
        assert failed.empty, failed.to_string() + "\n" + "\n".join(
            (tmp_path / "local" / log).read_text()[-3000:] for log in failed.get("log", []) if isinstance(log, str)
            and (tmp_path / "local" / log).exists())
    # 3. same seeds, same numbers: every loss and accuracy of both tables
    got, want = tables(s), tables(tmp_path / "local")
    assert len(got["runs"]) == 5 and len(got["epochs"]) == 5 * 3
    for name in ("runs", "epochs"):
        assert any(c.startswith(("final_", "loss/", "acc/")) for c in got[name].columns), got[name].columns
        pd.testing.assert_frame_equal(got[name], want[name], check_exact=True)
    # 4. layouts: Slurm's record of each job as it ran (nodes, tasks, CPUs per task, memory) ...
    layout = {w: (j["NumNodes"], j["NumTasks"], j["CPUs/Task"], j["MinMemoryNode"], j["JobState"])
              for w, j in jobs.items()}
    j = JOB_MEM_MB  # memory per node beside the ranks
    assert layout == {"pair_1": ("1", "1", "1", f"{j + 400}M", "COMPLETED"),  # allreduce_sgd and serial_sgd, 1 rank
                      "pair_2": ("1", "1", "2", f"{j + 800}M", "COMPLETED"),  # 2 ranks, one host
                      "sim_8": ("1", "1", "1", f"{j + 600}M", "COMPLETED"),  # 8 simulated nodes: one process
                      "wide_4": ("1", "2", "2", f"{2 * (j + 800)}M", "CANCELLED"),  # 2 hosts x 2 ranks, emulated
                      "wide_4 again": ("1", "2", "2", f"{2 * (j + 800)}M", "COMPLETED")}, layout
    # ... the launch command, and where each rank ran: 2 tasks (the emulated hosts) of 2 ranks
    log = (s / "results/logs/train/wide/n4.log").read_text()
    assert "$ srun --nodes=1 --ntasks=2 --overcommit" in log and "--nnodes=2 --nproc-per-node=2" in log
    r4 = ranks(s, "wide", "allreduce_sgd", 4, "slow")
    assert [(r["rank"], r["node_rank"], r["local_rank"], r["slurm"]["task"]) for r in r4] == [
        (0, 0, 0, 0), (1, 0, 1, 0), (2, 1, 0, 1), (3, 1, 1, 1)]
    assert {(r["slurm"]["job_id"], r["slurm"]["tasks"], r["slurm"]["nodes"], r["slurm"]["node_id"],
             r["local_world_size"]) for r in r4} == {(int(again["wide_4"]), 2, 1, 0, 2)}  # 2 tasks on the 1 node
    # single-host jobs: standalone torchrun in one task; locally no Slurm at all
    for nodes, method in ((1, "serial_sgd"), (1, "allreduce_sgd"), (2, "allreduce_sgd")):
        rs = ranks(s, "pair", method, nodes, "none")
        assert [(r["node_rank"], r["local_rank"], r["slurm"]["tasks"]) for r in rs] == [(0, i, 1) for i in range(nodes)]
        assert all("slurm" not in r for r in ranks(tmp_path / "local", "pair", method, nodes, "none"))
    assert " -m torch.distributed.run --standalone --nproc-per-node=2 " in (s / "results/logs/train/pair/n2.log").read_text()
    # the simulation: one process in one task, whatever its 8 virtual nodes
    assert " -m impls.sim --config " in (s / "results/logs/train/sim/n8.log").read_text()
    rs = ranks(s, "sim", "allreduce_sgd", 8, "none")
    assert len(rs) == 1 and rs[0]["slurm"]["tasks"] == 1
    print(f"slurm pipeline test: {time.time() - t0:.0f} s")
