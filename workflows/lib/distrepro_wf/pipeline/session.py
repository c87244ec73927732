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
  running beside the next invocation.

Incomplete outputs of a killed invocation are rerun by ``rerun-incomplete`` in
``profiles/default/`` (Snakemake's workflow profile, used by plain ``snakemake``).
"""

from __future__ import annotations

import atexit
import os
import shutil
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
    return me
