"""Child processes that cannot outlive the process that started them.

A launch runs in a session of its own (so that ``killpg`` stops torchrun and every rank at
once), which also means that no signal sent to its starter reaches it.  If the starter dies
without killing it first (``kill -9`` of the train rule's script, an out-of-memory kill, a
second signal arriving while it is killing), the launch would keep training into the run
directory that the next invocation uses.  Linux's parent-death signal closes that hole: the
kernel signals the child when the thread that started it exits, however it exits.

Each link of the chain asks for it: the train rule's script -> torchrun (``SIGTERM``, so
torchrun stops its workers) -> each rank (``SIGKILL``); the rule's script -> the simulation's
fork server -> each forked run (``SIGKILL``).  Elsewhere than Linux this is a no-op.

No torch here: the workflow library imports this module.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(sig: int = signal.SIGTERM, parent: int | None = None) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent exits.

    ``parent``: the pid the caller knows as its parent (the starter's ``os.getpid()``); if
    the parent already died before this call, the process ends now.  Usable as a Popen
    ``preexec_fn`` (``lambda: die_with_parent(signal.SIGTERM, os.getpid())`` evaluated in the
    starter) or first thing in a child.
    """
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if parent is not None and os.getppid() != parent:  # the parent died before the prctl
        os._exit(128 + int(sig))


def preexec_die_with_parent(sig: int = signal.SIGTERM):
    """A Popen ``preexec_fn``: the child gets ``sig`` when this (the calling) process exits."""
    me = os.getpid()
    return lambda: die_with_parent(sig, me)
