"""Child processes of the benchmarks and the sensitivity sweep: one command with its output
appended to a log, its wall time, CPU time and its own peak RSS (:func:`run_child`); one
simulated run of a config in a directory (:func:`simulate`), and the check that it succeeded.
Below the claims and the benchmarks, which both run simulations through it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

REPO = Path(__file__).resolve().parents[4]


@dataclass
class Child:
    rc: int
    wall_s: float
    peak_rss_mb: float  # the child's own peak resident set (wait4's ru_maxrss), MiB
    timed_out: bool = False
    cpu_s: float = 0.0  # the child's user + system CPU time (with its own reaped children)
    peak_vm_mb: float = float("nan")  # its peak virtual size (/proc/<pid>/status VmPeak, last read), MiB
    peak_maps: int = -1  # the most memory mappings it held at one time (/proc/<pid>/maps, sampled)


#: how often :func:`run_child` samples the child's virtual size and mappings (seconds)
SAMPLE_S = 0.25


def _sample(pid: int, peak: dict[str, float], done: threading.Event) -> None:
    """Until ``done``: the child's VmPeak (kB; a peak the kernel keeps) and the largest number
    of lines of its ``/proc/<pid>/maps`` seen (one a mapping), into ``peak``."""
    while not done.is_set():
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmPeak:"):
                        peak["vm_kb"] = max(peak.get("vm_kb", 0), int(line.split()[1]))
            with open(f"/proc/{pid}/maps") as f:
                peak["maps"] = max(peak.get("maps", 0), sum(1 for _ in f))
        except (OSError, ValueError):  # gone (or a zombie, whose maps read empty)
            pass
        done.wait(SAMPLE_S)


def run_child(cmd: list[str], log: str | os.PathLike, timeout_s: float = 1800, cwd: str | os.PathLike = REPO,
              env: Mapping[str, str] | None = None) -> Child:
    """Run ``cmd`` with its output appended to ``log``; its wall time, peak RSS, peak virtual
    size and most mappings held (a simulation whose actors leak stacks grows the last two
    by 8 MiB and 2 a collective: issue 35).

    The RSS is this child's own (``os.wait4``), not the maximum over every child so far that
    ``getrusage(RUSAGE_CHILDREN)`` reports; virtual size and mappings are sampled every
    :data:`SAMPLE_S` from ``/proc`` while it runs.  A child past ``timeout_s`` is killed."""
    with open(log, "a") as f:
        f.write(f"$ {' '.join(map(str, cmd))}\n")
        f.flush()
        t0 = time.perf_counter()
        p = subprocess.Popen(list(map(str, cmd)), stdout=f, stderr=subprocess.STDOUT, cwd=cwd,
                             env={**os.environ, **(env or {})})
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            p.kill()

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        peak: dict[str, float] = {}
        done = threading.Event()
        sampler = threading.Thread(target=_sample, args=(p.pid, peak, done), daemon=True)
        sampler.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
            done.set()
            sampler.join()
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    return Child(p.returncode, wall, usage.ru_maxrss / 1024, killed.is_set(), usage.ru_utime + usage.ru_stime,
                 peak.get("vm_kb", float("nan")) / 1024, int(peak.get("maps", -1)))


def simulate(cfg: Mapping[str, Any], workdir: str | os.PathLike, log: str | os.PathLike,
             calibration: str | os.PathLike | None = None, timeout_s: float = 1800,
             must_succeed: bool = True) -> tuple[Child, Path]:
    """One simulated run (``python -m`` its backend's entry module, ``impls.sim``) of ``cfg`` in ``workdir``; its output
    directory.  A failure raises, unless not ``must_succeed`` (then see ``Child``)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "cfg.json").write_text(json.dumps(cfg, indent=1))
    from impls.backends import backend_of

    module = backend_of(cfg.get("backend")).entry_module  # the simulated backend's (impls.sim)
    cmd = [sys.executable, "-m", module, "--config", workdir / "cfg.json", "--out", workdir / "out"]
    if calibration is not None:
        cmd += ["--calibration", calibration]
    child = run_child(cmd, log, timeout_s)
    if must_succeed:
        check(child, workdir / "out", "simulation")
    return child, workdir / "out"


def check(child: Child, out: Path, what: str) -> None:
    if child.timed_out:
        raise RuntimeError(f"{what} {out} killed after {child.wall_s:.0f} s (timeout)")
    if child.rc != 0 or (out / "error.json").exists():
        err = (out / "error.json").read_text() if (out / "error.json").exists() else f"exit status {child.rc}"
        raise RuntimeError(f"{what} {out} failed: {err} (see the log)")
