"""The torchrun command lines of a launch (distrepro_wf.launch): exact commands locally and under
Slurm, the node arithmetic, the errors, and that every torchrun flag we emit is one the pinned
torch's own argument parser accepts with the meaning we intend.  (No Slurm cluster here: the
Slurm command is checked as bash would split it, with the head node substituted.)"""

from __future__ import annotations

import shlex

import pytest
from torch.distributed.run import get_args_parser

from distrepro_wf.launch import slurm_nodes, torchrun_command

PY = "/venv/bin/python"
HEAD = "$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n1)"


def test_local_command_is_exact():
    assert torchrun_command(4, "/r/plan.json", {"kind": "local", "backend": "gloo"}, python=PY) == [
        PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
        "-m", "impls.run", "--plan", "/r/plan.json", "--backend", "gloo"]
    # no launcher section: local, backend auto
    assert torchrun_command(1, "p.json", None, python=PY) == [
        PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
        "-m", "impls.run", "--plan", "p.json", "--backend", "auto"]


def test_slurm_command_is_exact():
    cmd = torchrun_command(16, "/r/plan.json", {"kind": "slurm", "gpus_per_node": 8, "backend": "nccl"}, python=PY)
    assert cmd == ["srun", "--nodes=2", "--ntasks-per-node=1", "bash", "-c",
                   f"{PY} -m torch.distributed.run --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d "
                   f"--rdzv-endpoint={HEAD}:29500 --rdzv-id=$SLURM_JOB_ID -m impls.run --plan /r/plan.json "
                   "--backend nccl"]


@pytest.mark.parametrize("nodes, gpus, hosts, per", [
    (1, 8, 1, 1), (4, 8, 1, 4), (8, 8, 1, 8), (12, 8, 2, 6), (16, 8, 2, 8), (32, 8, 4, 8), (24, 8, 3, 8),
    (4, 1, 4, 1), (6, 4, 2, 3), (32, None, 4, 8),  # gpus_per_node defaults to 8
])
def test_slurm_node_arithmetic_as_torchrun_reads_it(nodes, gpus, hosts, per):
    """ceil(nodes / gpus_per_node) machines, nodes / machines ranks on each; the inner command, split as
    bash splits it on a node, parses with torch's own torchrun parser to that many nodes and ranks."""
    launcher = {"kind": "slurm"} | ({"gpus_per_node": gpus} if gpus else {})
    assert slurm_nodes(nodes, launcher) == hosts
    cmd = torchrun_command(nodes, "/r/plan.json", launcher, python=PY)
    assert cmd[:5] == ["srun", f"--nodes={hosts}", "--ntasks-per-node=1", "bash", "-c"] and len(cmd) == 6
    words = shlex.split(cmd[5].replace(HEAD, "node001"))
    assert words[:3] == [PY, "-m", "torch.distributed.run"]
    args = get_args_parser().parse_args(words[3:])
    assert (args.nnodes, args.nproc_per_node, args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id) == (
        str(hosts), str(per), "c10d", "node001:29500", "$SLURM_JOB_ID")
    assert (args.module, args.training_script, args.training_script_args) == (
        True, "impls.run", ["--plan", "/r/plan.json", "--backend", "auto"])
    assert int(args.nnodes) * int(args.nproc_per_node) == nodes


def test_slurm_command_survives_paths_with_spaces():
    """The inner command is one bash string: the interpreter and plan paths must stay one word each."""
    py, plan = "/opt/my env/bin/python", "/data/run 1/plan.json"
    words = shlex.split(torchrun_command(4, plan, {"kind": "slurm"}, python=py)[5].replace(HEAD, "node001"))
    assert words[0] == py and words[words.index("--plan") + 1] == plan


@pytest.mark.parametrize("nodes, launcher, message", [
    (9, {"kind": "slurm", "gpus_per_node": 8}, "nodes=9 is not a multiple of the 2 Slurm nodes it needs"),
    (3, {"kind": "slurm", "gpus_per_node": 2}, "nodes=3 is not a multiple of the 2 Slurm nodes it needs"),
    (4, {"kind": "pbs"}, "launcher.kind: unknown 'pbs'; allowed values: local, slurm"),
])
def test_launcher_errors(nodes, launcher, message):
    with pytest.raises(ValueError) as e:
        torchrun_command(nodes, "p.json", launcher, python=PY)
    assert str(e.value) == message
