"""Tier 3: Ctrl-C (SIGINT) stops a running rule of the real workflow promptly (issue 34).

A terminal's Ctrl-C reaches Snakemake's whole process group; ``kill -INT`` of the Snakemake
process (a supervisor, an IDE's stop button) reaches Snakemake alone, whose local executor
then waited for the running job to *finish* (the benchmark ran on to its end and wrote its
table); SIGINT to the rule's script process alone stops that job.  Each must end the
invocation within seconds, non-zero, with no table written and no process of the job left
(``distrepro_wf.pipeline.session.forward_interrupt``).
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from test_workflow import SNAKEMAKE, TINY, write_config

pytestmark = pytest.mark.workflow
TABLE = "results/bench/sim_cost_model.csv"  # a script with child simulations, several minutes on 2 cores


def processes(pred) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if pred(d):
                    found.append(int(d.name))
            except OSError:
                continue  # gone meanwhile
    return found


def owned_by(pid: int):
    """The processes a job of Snakemake ``pid`` started (they carry ``DISTREPRO_SNAKEMAKE=<host>:<pid>``)."""
    mark = f":{pid}".encode()
    return lambda d: int(d.name) != pid and any(v.startswith(b"DISTREPRO_SNAKEMAKE=") and v.endswith(mark)
                                                for v in (d / "environ").read_bytes().split(b"\0"))


def script_of(pid: int):
    """The Python process running the rule's script (not its shell)."""
    own = owned_by(pid)

    def pred(d: Path) -> bool:
        argv = (d / "cmdline").read_bytes().split(b"\0")
        return own(d) and "python" in os.path.basename(argv[0].decode()) and any(
            a.endswith(b".bench_sim_cost_model.py") for a in argv)
    return pred


@pytest.mark.parametrize("to", ["snakemake", "process_group", "script"])
def test_sigint_stops_a_running_benchmark_promptly_and_writes_no_table(tmp_path, to):
    proc = subprocess.Popen([*SNAKEMAKE, TABLE, "-d", str(tmp_path), "--cores", "2", "--configfile",
                             write_config(tmp_path, TINY)], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        t0 = time.time()
        while not (script := processes(script_of(proc.pid))):
            assert proc.poll() is None, proc.stdout.read()
            assert time.time() - t0 < 120, "the benchmark's script never started"
            time.sleep(0.2)
        time.sleep(2)  # into the benchmark's work (its imports done, simulations started)
        assert proc.poll() is None
        {"snakemake": lambda: os.kill(proc.pid, signal.SIGINT),
         "process_group": lambda: os.killpg(proc.pid, signal.SIGINT),  # what a terminal's Ctrl-C does
         "script": lambda: os.kill(script[0], signal.SIGINT)}[to]()
        t1 = time.time()
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"Snakemake still runs 30 s after SIGINT to the {to}")
        took = time.time() - t1
        print(f"{to}: exit {proc.returncode} {took:.1f} s after SIGINT")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0, out
    assert took < 20, f"Snakemake ran on {took:.0f} s after SIGINT"
    assert not (tmp_path / TABLE).exists(), "a table was written after SIGINT"
    deadline = time.time() + 10
    while (left := processes(owned_by(proc.pid))) and time.time() < deadline:
        time.sleep(0.2)
    assert not left, f"processes of the interrupted job still run: {left}"


def test_the_forwarded_sigint_reaches_the_jobs_group_not_sessions_of_their_own():
    """What ``forward_interrupt`` signals: descendants in this process group (a script's shell and
    its Python), never a launch or testbed in a session of its own (its script stops it)."""
    from distrepro_wf.pipeline.session import job_processes

    shell = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    own = subprocess.Popen(["sleep", "30"], start_new_session=True)
    found = []
    try:
        deadline = time.time() + 10
        while len(found := job_processes()) < 2 and time.time() < deadline:  # the shell and its sleep
            time.sleep(0.05)
        assert shell.pid in found and len(found) >= 2, found
        assert own.pid not in found
    finally:
        for pid in found:  # the shell's sleep too
            if pid not in (shell.pid, own.pid) and Path(f"/proc/{pid}/stat").exists() and \
                    int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1]) == shell.pid:
                os.kill(pid, signal.SIGKILL)
        for p in (shell, own):
            p.kill()
            p.wait()
