"""One Snakemake invocation at a time, and recovery after one was killed.

Snakemake refuses a second invocation on the same outputs with a lock in
``.snakemake/locks/``; a ``kill -9`` leaves that lock behind and every later invocation
then stops with "Directory cannot be locked" until someone runs ``--unlock``.  The lock
files say nothing about who holds them, so the main Snakemake process of this workflow
registers itself in ``.snakemake/distrepro-owners/<host>-<pid>`` (removed at exit):

* :func:`clear_stale_lock` removes the lock only when no registered owner is alive on
  this host (a concurrent invocation is alive and registered: its lock is kept, and
  Snakemake refuses the newcomer as before);
* :func:`register` also exports ``DISTREPRO_SNAKEMAKE=<host>:<pid>`` to the jobs, so a
  launch whose Snakemake is gone is stopped (:mod:`distrepro_wf.pipeline.runs`) instead of
  running beside the next invocation;
* :func:`register` also makes Ctrl-C reach the jobs (:func:`forward_interrupt`).

**Ctrl-C.**  A terminal's Ctrl-C sends SIGINT to the whole foreground process group:
Snakemake and every job it runs (a ``script:`` rule is a shell and a Python process in
that group), so each script raises ``KeyboardInterrupt`` and stops, and Snakemake marks
its outputs incomplete.  SIGINT sent to the Snakemake process alone (``kill -INT <pid>``,
a supervisor, an IDE's stop button) reaches no job: Snakemake 9's local executor then
waits for its running jobs to *finish* (``ThreadPoolExecutor.shutdown``) before it exits
1, so a report or benchmark ran on to the end (issue 34).  :func:`forward_interrupt`
makes the main Snakemake process pass the SIGINT on to the processes of its own process
group that descend from it, i.e. what a terminal's Ctrl-C would have hit; launches and
testbeds in sessions of their own are stopped by their script as it unwinds (or by
their parent-death signal), as on a terminal's Ctrl-C.

Incomplete outputs of a killed invocation are rerun by ``rerun-incomplete`` in
``profiles/default/`` (Snakemake's workflow profile, used by plain ``snakemake``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
from pathlib import Path

from .runs import OWNER_ENV, _host, pid_alive

OWNERS = Path(".snakemake") / "distrepro-owners"
LOCKS = Path(".snakemake") / "locks"


def _live_owners(workdir: Path) -> list[str]:
    d = workdir / OWNERS
    live = []
    for p in d.iterdir() if d.is_dir() else []:
        host, _, pid = p.name.rpartition("-")
        if host != _host() or (pid.isdigit() and pid_alive(int(pid)) and int(pid) != os.getpid()):
            live.append(p.name)  # another host: cannot tell, assume alive
        else:
            p.unlink(missing_ok=True)
    return live


def clear_stale_lock(workdir: Path) -> bool:
    """Remove Snakemake's lock if no other invocation registered here is alive; True if removed."""
    workdir = Path(workdir)
    if not (workdir / LOCKS).is_dir() or _live_owners(workdir):
        return False
    shutil.rmtree(workdir / LOCKS)
    return True


def register(workdir: Path) -> Path:
    """Register this process as an owner of ``workdir`` until it exits (see module docstring)."""
    me = Path(workdir).resolve() / OWNERS / f"{_host()}-{os.getpid()}"
    me.parent.mkdir(parents=True, exist_ok=True)
    me.touch()
    atexit.register(me.unlink, missing_ok=True)
    os.environ[OWNER_ENV] = f"{_host()}:{os.getpid()}"
    forward_interrupt()
    return me


def job_processes(root: int | None = None) -> list[int]:
    """The processes descending from ``root`` (default: this one) that are in its process group:
    those a terminal's Ctrl-C reaches (not those in sessions or groups of their own)."""
    root = os.getpid() if root is None else root
    group, children = os.getpgid(root), {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:  # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
            ppid, pgrp = (int(x) for x in (d / "stat").read_text().rpartition(")")[2].split()[1:3])
        except (OSError, ValueError):
            continue  # gone meanwhile
        children.setdefault(ppid, []).append((int(d.name), pgrp))
    found, todo = [], [root]
    while todo:
        for pid, pgrp in children.get(todo.pop(), []):
            todo.append(pid)
            if pgrp == group:
                found.append(pid)
    return found


def forward_interrupt() -> None:
    """SIGINT to this (the main Snakemake) process is passed on to :func:`job_processes`, then
    raised here as ``KeyboardInterrupt`` (Snakemake's own handling: cancel, exit 1, outputs of
    the interrupted jobs incomplete).  See the module docstring."""

    def on_sigint(signum, frame):
        for pid in job_processes():
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, on_sigint)
