"""A launch never outlives the train rule's script that started it.

The script (here a stand-in that calls :func:`distrepro_wf.pipeline.runs.execute_group`, as
``workflows/scripts/train.py`` does) is killed mid-run, by SIGTERM (``kill``, or Snakemake
stopping a job) or by SIGKILL (``kill -9``, the out-of-memory killer), and every process of
its launch must be gone within seconds: torchrun and its ranks, or the simulation's fork
server and its forked run.  Otherwise they go on writing into the run directory that the next
invocation resumes from (found when a killed ``reproduce.sh`` left its ranks behind).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, make_config

pytestmark = pytest.mark.spawn

LAUNCHER = """
import json, sys
from pathlib import Path
from distrepro_wf.pipeline.runs import execute_group, write_run_configs
paths = write_run_configs({"run": json.loads(sys.argv[1])})
execute_group(paths, Path("launch.json"), Path("launch.log"), {"kind": "local", "timeout_s": 300})
"""
SLOW = {"kind": "fixed", "ranks": [-1], "delay_s": 1.0}  # >= 1 s per step: still running when killed
CASES = {
    "real-sigterm": (make_config("allreduce_sgd", 2, straggler_name="slow", straggler=SLOW), signal.SIGTERM),
    "real-sigkill": (make_config("allreduce_sgd", 2, straggler_name="slow", straggler=SLOW), signal.SIGKILL),
    "sim-sigkill": (make_config("allreduce_sgd", 2, backend="simgrid", platform="ethernet_10g",
                                profile={"name": "fixed", "step_ms": 10}, workload={"epochs": 100_000}),
                    signal.SIGKILL),
}


def processes_in(workdir: Path, but: int) -> dict[int, str]:
    """{pid: command line} of live processes whose working directory is ``workdir``."""
    out = {}
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if int(p.name) != but and Path(os.readlink(p / "cwd")) == workdir:
                state = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":  # a zombie is dead, only not yet reaped by its parent
                    out[int(p.name)] = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
        except (OSError, IndexError):
            continue
    return out


def until(cond, timeout: float, what: str) -> None:
    t0 = time.time()
    while not cond():
        assert time.time() - t0 < timeout, f"timed out ({timeout} s) waiting for {what}"
        time.sleep(0.1)


@pytest.mark.parametrize("case", list(CASES))
def test_a_killed_launcher_takes_its_launch_with_it(tmp_path, case):
    cfg, sig = CASES[case]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "workflows/lib")])}
    script = subprocess.Popen([sys.executable, "-c", LAUNCHER, json.dumps(cfg)], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # running: the run has started and a step record is out (real: every rank's process is up)
        until(lambda: list(tmp_path.glob("run/.attempt-*/metrics/rank0.jsonl")) or script.poll() is not None,
              120, "the run's first metrics")
        assert script.poll() is None, (tmp_path / "launch.log").read_text()[-3000:]
        launched = processes_in(tmp_path, but=script.pid)
        expect = ("torch.distributed.run", "impls.run --plan") if case.startswith("real") else ("impls.sim --serve",)
        for what in expect:
            assert any(what in c for c in launched.values()), (what, launched)
        script.send_signal(sig)
        script.wait(30)
        until(lambda: not processes_in(tmp_path, but=script.pid), 20, f"the launch to stop: {launched}")
    finally:
        script.kill()
        script.wait()
        for pid in processes_in(tmp_path, but=script.pid):  # a failed test leaves nothing running
            os.kill(pid, signal.SIGKILL)
    assert not (tmp_path / "run" / "run").exists()  # never a result
