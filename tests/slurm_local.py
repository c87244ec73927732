"""The local Slurm of the Slurm tests (``tests/test_slurm.py``, ``tests/test_slurm_plan.py``).

:func:`cluster` starts a real single-node Slurm on this machine (``scripts/slurm-local.sh
start``: munged, slurmctld, configless slurmd; one node "localhost") for one test module
and stops it after; the ``slurm`` fixture of ``conftest.py`` is it.  The helpers below run
Snakemake under the Slurm profile and read Slurm's own record of what it submitted.

Only one such cluster can run on a machine (its controller's port is fixed): the Slurm tests
run in one pytest process (``scripts/test.sh``: beside the main suite, marker ``slurm``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile")]
SCRIPT = ROOT / "scripts" / "slurm-local.sh"
# test speed only: the first status check after 1 s (the profile's 40 s suits a real cluster)
SLURM_ARGS = ["--profile", str(ROOT / "profiles/slurm"), "--slurm-status-command", "squeue",
              "--slurm-init-seconds-before-status-checks", "1", "--seconds-between-status-checks", "1"]


def skip_reason() -> str | None:
    """Why this machine cannot run the local Slurm, or None."""
    if os.geteuid() != 0:
        return "needs root: scripts/slurm-local.sh runs the Slurm daemons as root"
    if not shutil.which("slurmctld") and not shutil.which("apt-get"):
        return "Slurm is not installed and there is no apt-get to install it (scripts/slurm-local.sh)"
    if Path("/etc/slurm/slurm.conf").exists():
        return "/etc/slurm/slurm.conf exists: this machine belongs to a real Slurm cluster"
    return None


@contextlib.contextmanager
def cluster(state_dir: Path) -> Iterator[dict]:
    """The local Slurm, started in ``state_dir`` and stopped on exit (skips the test where it
    cannot run).  Yields the environment additions of the commands run against it (none: client
    commands here and inside jobs find its config as a user's would, configless slurmd's cache
    /run/slurm/conf; no SLURM_CONF)."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    # 6 CPUs declared on this machine's 2: small jobs (1-2 CPUs each) run side by side, as the
    # local profile runs more ranks than cores
    env = {**os.environ, "DISTREPRO_SLURM_DIR": str(state_dir), "DISTREPRO_SLURM_CPUS": "6"}
    start = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True, env=env, timeout=600)
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        yield {}
    finally:
        stop = subprocess.run(["bash", str(SCRIPT), "stop"], capture_output=True, text=True, env=env, timeout=120)
        assert stop.returncode == 0, stop.stdout + stop.stderr


def snakemake(workdir: Path, cfg: dict, *args: str, env: dict | None = None, configfile: str = "config.yaml",
              also: tuple[str, ...] = ()) -> subprocess.Popen:
    """Snakemake in ``workdir`` (also its working directory, where a config's relative paths
    point) on ``cfg``, written to ``workdir/configfile``, and the config files ``also`` (of
    ``workdir``) after it; its output is the process's stdout."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / configfile).write_text(yaml.safe_dump(cfg))
    files = [str(workdir / f) for f in (configfile, *also)]
    return subprocess.Popen([*SNAKEMAKE, "-d", str(workdir), "--configfile", *files, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=workdir,
                            env={**os.environ, **(env or {})})


def finish(proc: subprocess.Popen, timeout: float = 600) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def scontrol_job(job_id: str) -> dict[str, str]:
    """Slurm's record of a job (finished jobs stay for MinJobAge = 300 s)."""
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, check=True).stdout
    return dict(re.findall(r"(\S+?)=(\S*)", out))


def submitted(out: str, rule: str = "train") -> dict[str, str]:
    """{wildcards: Slurm job id} of the ``rule`` jobs an invocation submitted (its output says so)."""
    return {w: i for i, w in re.findall(rf"has been submitted with SLURM jobid (\d+) \(log: \S*/rule_{rule}/(\w+?)/",
                                        out)}
