"""The torchrun command lines of a launch and the size of its Slurm job (distrepro_wf.pipeline.launch):
exact commands locally and under Slurm, the node arithmetic, the errors, and that every torchrun
flag we emit is one the pinned torch's own argument parser accepts with the meaning we intend.
(The Slurm command is checked here as bash would split it, with the head node and port
substituted; tests/test_slurm.py runs it against a real Slurm.)"""

from __future__ import annotations

import re
import shlex

import pytest
from torch.distributed.run import get_args_parser

from distrepro_wf.pipeline.launch import (HEAD, JOB_MEM_MB, PORT, RESOURCE_KEYS, check_layouts, job_resources, slurm_layout, slurm_nodes,
                                 torchrun_command)

PY = "/venv/bin/python"
JOB = {"SLURM_JOB_ID": "4242", "SLURM_CPUS_PER_TASK": "80"}


def test_local_command_is_exact():
    assert torchrun_command(4, "/r/plan.json", {"kind": "local", "backend": "gloo"}, python=PY) == [
        PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
        "-m", "impls.run", "--plan", "/r/plan.json", "--backend", "gloo"]
    # no launcher section: local, backend auto
    assert torchrun_command(1, "p.json", None, python=PY) == [
        PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
        "-m", "impls.run", "--plan", "p.json", "--backend", "auto"]


def test_slurm_command_is_exact():
    cmd = torchrun_command(16, "/r/plan.json", {"kind": "slurm", "gpus_per_node": 8, "backend": "nccl"}, python=PY,
                           env=JOB)
    assert cmd == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=80",
                   "--kill-on-bad-exit=1", "bash", "-c",
                   f"{PY} -m torch.distributed.run --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d "
                   f"--rdzv-endpoint={HEAD}:{PORT} --rdzv-id=$SLURM_JOB_ID -m impls.run --plan /r/plan.json "
                   "--backend nccl"]
    # a one-machine test cluster: the hosts are tasks on one node, overcommitted
    cmd = torchrun_command(4, "/r/plan.json", {"kind": "slurm", "gpus_per_node": 2, "emulate_nodes": True},
                           python=PY, env={"SLURM_JOB_ID": "3"})
    assert cmd[:5] == ["srun", "--nodes=1", "--ntasks=2", "--overcommit", "--kill-on-bad-exit=1"]


def test_slurm_single_host_is_standalone():
    """One machine's worth of ranks: torchrun --standalone inside the job, no srun, no rendezvous host."""
    for env in (JOB, {}):
        assert torchrun_command(8, "p.json", {"kind": "slurm", "gpus_per_node": 8}, python=PY, env=env) == \
            torchrun_command(8, "p.json", {"kind": "local"}, python=PY)


def test_multi_host_outside_a_slurm_job_is_refused():
    with pytest.raises(ValueError, match=r"^launcher.kind: slurm: 16 ranks on 2 hosts need a Slurm job of 2 nodes"):
        torchrun_command(16, "p.json", {"kind": "slurm", "gpus_per_node": 8}, python=PY, env={})


def test_head_and_port_as_bash_expands_them(tmp_path):
    """The rendezvous host is the allocation's first node, the port follows the job id (two jobs on
    one node do not collide) and stays below the ephemeral range."""
    import subprocess

    fake = tmp_path / "scontrol"
    fake.write_text('#!/bin/sh\n[ "$1 $2 $3" = "show hostnames node[007-009]" ] && printf "node007\\nnode008\\n"\n')
    fake.chmod(0o755)
    out = subprocess.run(["bash", "-c", f"echo {HEAD}:{PORT}"], capture_output=True, text=True, check=True,
                         env={"PATH": f"{tmp_path}:/usr/bin:/bin", "SLURM_JOB_NODELIST": "node[007-009]",
                              "SLURM_JOB_ID": "123457"}).stdout.strip()
    assert out == f"node007:{29500 + 123457 % 2000}" and 29500 + 1999 < 32768


@pytest.mark.parametrize("nodes, gpus, hosts, per", [
    (1, 8, 1, 1), (4, 8, 1, 4), (8, 8, 1, 8), (12, 8, 2, 6), (16, 8, 2, 8), (32, 8, 4, 8), (24, 8, 3, 8),
    (4, 1, 4, 1), (6, 4, 2, 3), (32, None, 4, 8),  # gpus_per_node defaults to 8
])
def test_slurm_node_arithmetic_as_torchrun_reads_it(nodes, gpus, hosts, per):
    """ceil(nodes / gpus_per_node) machines, nodes / machines ranks on each; the inner command, split as
    bash splits it on a node, parses with torch's own torchrun parser to that many nodes and ranks."""
    launcher = {"kind": "slurm"} | ({"gpus_per_node": gpus} if gpus else {})
    assert slurm_nodes(nodes, launcher) == hosts and slurm_layout(nodes, launcher) == (hosts, per)
    cmd = torchrun_command(nodes, "/r/plan.json", launcher, python=PY, env=JOB)
    if hosts == 1:
        words = cmd
    else:
        assert cmd[:4] == ["srun", f"--nodes={hosts}", f"--ntasks={hosts}", "--ntasks-per-node=1"]
        assert cmd[-3:-1] == ["bash", "-c"]
        words = shlex.split(cmd[-1].replace(HEAD, "node001").replace(PORT, "29501"))
    assert words[:3] == [PY, "-m", "torch.distributed.run"]
    args = get_args_parser().parse_args(words[3:])
    if hosts == 1:
        assert (args.standalone, args.nnodes, args.nproc_per_node) == (True, "1:1", str(nodes))
    else:
        assert (args.nnodes, args.nproc_per_node, args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id) == (
            str(hosts), str(per), "c10d", "node001:29501", "$SLURM_JOB_ID")
        assert int(args.nnodes) * int(args.nproc_per_node) == nodes
    assert (args.module, args.training_script, args.training_script_args) == (
        True, "impls.run", ["--plan", "/r/plan.json", "--backend", "auto"])


def test_slurm_command_survives_paths_with_spaces():
    """The inner command is one bash string: the interpreter and plan paths must stay one word each."""
    py, plan = "/opt/my env/bin/python", "/data/run 1/plan.json"
    inner = torchrun_command(16, plan, {"kind": "slurm"}, python=py, env=JOB)[-1]
    words = shlex.split(inner.replace(HEAD, "node001").replace(PORT, "29501"))
    assert words[0] == py and words[words.index("--plan") + 1] == plan


@pytest.mark.parametrize("nodes, launcher, message", [
    (9, {"kind": "slurm", "gpus_per_node": 8}, "launcher.gpus_per_node: nodes=9 is not a multiple of the 2 Slurm nodes"),
    (3, {"kind": "slurm", "gpus_per_node": 2}, "launcher.gpus_per_node: nodes=3 is not a multiple of the 2 Slurm nodes"),
    (4, {"kind": "pbs"}, "launcher.kind: unknown 'pbs'; allowed values: local, slurm"),
])
def test_launcher_errors(nodes, launcher, message):
    with pytest.raises(ValueError) as e:
        torchrun_command(nodes, "p.json", launcher, python=PY, env=JOB)
    assert str(e.value).startswith(message)


def test_check_layouts_names_the_key_only_for_slurm():
    check_layouts([1, 2, 3, 5], {"kind": "local", "gpus_per_node": 2})
    check_layouts([1, 2, 4, 8], {"kind": "slurm", "gpus_per_node": 2})
    with pytest.raises(ValueError, match=r"^launcher.gpus_per_node: nodes=3 is not a multiple of the 2 Slurm"):
        check_layouts([1, 2, 3], {"kind": "slurm", "gpus_per_node": 2})


J = JOB_MEM_MB  # per node, beside the ranks


def res(**kw):
    return dict.fromkeys(RESOURCE_KEYS) | kw


@pytest.mark.parametrize("worlds, launcher, expected", [
    # local: no Slurm resources at all
    ([4], {"kind": "local"}, {}),
    # one host: a single-task job with the host's CPUs and memory
    ([1], {"kind": "slurm", "gpus_per_node": 8, "backend": "gloo"}, res(nodes=1, cpus_per_task=1, mem_mb=4000 + J)),
    ([4, 4], {"kind": "slurm", "backend": "gloo", "cpus_per_rank": 2, "mem_mb_per_rank": 1000},
     res(nodes=1, cpus_per_task=8, mem_mb=4000 + J)),
    # one GPU per rank, unless gloo (auto: NCCL where the GPUs are)
    ([8], {"kind": "slurm", "backend": "nccl", "cpus_per_rank": 10, "mem_mb_per_rank": 32000},
     res(nodes=1, cpus_per_task=80, mem_mb=256000 + J, gpu=8)),
    ([2], {"kind": "slurm"}, res(nodes=1, cpus_per_task=2, mem_mb=8000 + J, gpu=2)),
    # several hosts: N nodes, one task each (mpi: the job runs its own srun), per-node CPUs/memory/GPUs
    ([16], {"kind": "slurm", "backend": "nccl", "cpus_per_rank": 10, "mem_mb_per_rank": 32000},
     res(nodes=2, tasks=2, mpi="srun", cpus_per_task=80, mem_mb=256000 + J, gres="gpu:8", tasks_per_gpu=0)),
    ([4, 2, 4], {"kind": "slurm", "gpus_per_node": 1, "backend": "gloo"},
     res(nodes=4, tasks=4, mpi="srun", cpus_per_task=1, mem_mb=4000 + J)),
    # the largest launch of the group sizes the job (ps_sync: 4 workers + 1 server = 5 ranks)
    ([4, 5], {"kind": "slurm", "gpus_per_node": 8, "threads_per_rank": 2, "backend": "gloo"},
     res(nodes=1, cpus_per_task=10, mem_mb=20000 + J)),
    # emulated hosts: one node, the hosts as tasks, overcommitted, the whole world's memory on it
    ([4], {"kind": "slurm", "gpus_per_node": 2, "emulate_nodes": True, "mem_mb_per_rank": 500, "backend": "gloo"},
     res(nodes=1, tasks=2, mpi="srun", cpus_per_task=2, mem_mb=2 * (1000 + J), slurm_extra="--overcommit")),
    ([4], {"kind": "slurm", "gpus_per_node": 2, "emulate_nodes": True, "mem_mb_per_rank": 500},
     res(nodes=1, tasks=2, mpi="srun", cpus_per_task=2, mem_mb=2 * (1000 + J), gres="gpu:4", tasks_per_gpu=0,
         slurm_extra="--overcommit")),
    # simulated: one process whatever its virtual nodes, sized by memory
    ([None, None], {"kind": "slurm", "gpus_per_node": 1, "backend": "nccl", "mem_mb_simulated": 12000},
     res(nodes=1, cpus_per_task=1, mem_mb=12000 + J)),
])
def test_job_resources(worlds, launcher, expected):
    assert job_resources(worlds, launcher) == expected


def test_placement_reads_torchrun_and_slurm(monkeypatch):
    """The rank map in provenance.json: torchrun's node and local rank, Slurm's job, step, task and node."""
    from impls.backends import Backend
    from impls.runtime.provenance import placement, rank_map

    for var in ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NODEID", "SLURM_NNODES",
                "SLURMD_NODENAME", "SLURM_JOB_NODELIST", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("GROUP_RANK", "3")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    me = placement(7)
    assert (me["rank"], me["node_rank"], me["local_rank"], me["local_world_size"]) == (7, 3, 1, 2) and "slurm" not in me
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("SLURMD_NODENAME", "node004")
    assert placement(7)["slurm"] == {"job_id": 42, "task": 3, "node": "node004"}
    assert rank_map(Backend()) == [placement(0)]  # one process: no gather


@pytest.mark.workflow
def test_slurm_dry_run_shows_each_jobs_size(tmp_path):
    """Checking a Slurm profile without a cluster: the dry run lists every train job's resources
    (nodes, tasks, CPUs, memory, runtime x attempt), and a layout that cannot be is refused first."""
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    cfg = {"experiments": {"e": {"title": "t", "workload": "w", "nodes": [2, 4], "stragglers": ["none"], "seeds": [1],
                                 "methods": {"allreduce_sgd": {}}}},
           "workloads": {"w": {"dataset": {"name": "digits"}, "model": {"name": "mlp", "hidden": [8]}, "batch_size": 8,
                               "epochs": 1, "max_steps_per_epoch": 2, "optimizer": {"lr": 0.1}}},
           "stragglers": {"none": {"kind": "none"}},
           "launcher": {"kind": "slurm", "gpus_per_node": 2, "backend": "gloo", "cpus_per_rank": 3,
                        "mem_mb_per_rank": 1000, "timeout_s": 600}}

    def dry(cfg, *args):
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
        return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(root / "Snakefile"), "-d", str(tmp_path),
                               "--configfile", str(tmp_path / "c.yaml"), "--profile",
                               str(root / "profiles/slurm"), "-n", *args],
                              capture_output=True, text=True, timeout=300)

    for attempt in (1, 2):
        proc = dry(cfg, "--attempt", str(attempt), "--set-resources", "train:slurm_partition=gpu")
        assert proc.returncode == 0, proc.stderr[-3000:]
        jobs = {}
        for block in proc.stdout.split("\nrule train:")[1:]:
            nodes = re.search(r"wildcards: experiment=e, nodes=(\d+)", block).group(1)
            jobs[nodes] = dict(re.findall(r"(\w+)=([^,\s]+)", re.search(r"resources: (.*)", block).group(1)))
        want = {"2": {"nodes": "1", "cpus_per_task": "6", "mem_mb": str(2000 + JOB_MEM_MB)},
                "4": {"nodes": "2", "tasks": "2", "mpi": "srun", "cpus_per_task": "6", "mem_mb": str(2000 + JOB_MEM_MB)}}
        for n, w in want.items():
            assert {k: jobs[n].get(k) for k in w} == w and "gpu" not in jobs[n] and "gres" not in jobs[n], jobs[n]
            assert jobs[n]["runtime"] == str(attempt * (600 // 60 + 5)) and jobs[n]["slurm_partition"] == "gpu"
        assert "tasks" not in jobs["2"] and "mpi" not in jobs["2"]
    cfg["experiments"]["e"]["nodes"] = [2, 5]  # 5 ranks on ceil(5 / 2) = 3 machines: no
    proc = dry(cfg)
    assert proc.returncode != 0
    assert "invalid configuration: launcher.gpus_per_node: nodes=5 is not a multiple of the 3 Slurm nodes" in \
        proc.stdout + proc.stderr


def test_one_builder_spells_every_torchrun_command():
    """Every launch, benchmark and rerun command comes from distrepro_wf.pipeline.launch (torchrun /
    standalone / run_command / torchrun_command): no other file of the pipeline or library
    spells out a torchrun (issue 25: it was built in 7 places)."""
    from conftest import ROOT
    from distrepro_wf.pipeline.launch import run_command, standalone

    assert run_command(3, "c.json", "o", python="py") == [
        "py", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3", "-m", "impls.run",
        "--config", "c.json", "--out", "o"]
    assert standalone(2, "-m", "impls.bench.ddp", "--steps", 5, python="py")[-2:] == ["--steps", "5"]
    spelled = sorted(str(p.relative_to(ROOT)) for d in ("impls", "workflows", "scripts")
                     for p in (ROOT / d).rglob("*") if p.suffix in (".py", ".smk", ".sh")
                     and "torch.distributed.run" in p.read_text() and p.name != "launch.py")
    assert spelled == [], spelled
