"""One ``python -m impls.sim --serve`` for the whole test session.

The pipeline runs simulated runs through that fork server (``distrepro_wf.pipeline.runs``): it
imports torch, SimGrid and the registries once and forks one child per run, which runs
exactly what ``python -m impls.sim --config`` runs (``impls.sim.__main__.run_one``).  A
test that starts the plain command per simulation pays those ~3 s of start-up every time;
:func:`run` forks from one server instead.  (The plain command stays tested:
``tests/test_sim_runs.py`` compares it with a forked run, byte for byte.)
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_lock = threading.Lock()
_server: subprocess.Popen | None = None


def _stop() -> None:
    if _server is not None and _server.poll() is None:
        _server.stdin.close()
        try:
            _server.wait(10)
        except subprocess.TimeoutExpired:
            _server.kill()


def _start() -> subprocess.Popen:
    global _server
    if _server is None or _server.poll() is not None:
        _server = subprocess.Popen([sys.executable, "-m", "impls.sim", "--serve"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, cwd=ROOT, start_new_session=True)
        atexit.register(_stop)
    return _server


def _answer(server: subprocess.Popen, deadline: float) -> dict:
    line = b""
    while not line.endswith(b"\n"):
        if not select.select([server.stdout], [], [], max(0.0, deadline - time.time()))[0]:
            raise TimeoutError("no answer from the simulation server")
        chunk = os.read(server.stdout.fileno(), 1)
        if not chunk:
            raise RuntimeError("the simulation server exited")
        line += chunk
    return json.loads(line)


def run(config: Path, out: Path, checkpoint_dir: Path | None, calibration: Path | None, log: Path,
        timeout: float = 300, env: dict[str, str] | None = None) -> int:
    """Run one simulation (what ``python -m impls.sim --config ...`` runs) in a child forked by the
    session's server; its output goes to ``log``, ``env`` is set in the child (a fault to inject).
    Returns its exit status (killed after ``timeout``)."""
    with _lock:
        server = _start()
        req = {"config": str(config), "out": str(out), "log": str(log),
               "checkpoint_dir": None if checkpoint_dir is None else str(checkpoint_dir),
               "calibration": None if calibration is None else str(calibration), "env": env or {}}
        server.stdin.write((json.dumps(req) + "\n").encode())
        server.stdin.flush()
        deadline = time.time() + timeout
        pid = _answer(server, deadline)["pid"]
        try:
            return int(_answer(server, deadline)["rc"])
        except TimeoutError:
            os.killpg(pid, signal.SIGKILL)  # the child leads its own session
            return int(_answer(server, time.time() + 30)["rc"])
