"""``python -m impls.sim --config run.json --out DIR``: one simulated run (see
:mod:`impls.sim.engine`).  Writes ``STARTED`` first, and ``error.json`` for a config
error or a divergence (as real ranks do); any other failure exits non-zero.

``python -m impls.sim --serve``: a fork server for many runs.  Starting Python and importing
torch, SimGrid and the registries costs ~3 s, more than a small simulation itself, and a
pipeline starts one simulation per run.  The server imports once, then reads one JSON request
per line on stdin (``{"config", "out", "checkpoint_dir", "calibration", "log"}``, and optionally
``"env"``: variables set in the child only, e.g. the runtime's fault injection for tests) and forks a
child per request: the child starts its own session (so it can be killed as a group), sends
its output to ``log``, runs exactly what ``--config`` runs and exits with its status.  The
server answers ``{"pid": ...}`` when the child starts and ``{"rc": ...}`` when it ends
(negative: killed by that signal).  Each run is still its own process (isolated state, its
own exit status); nothing is imported by the parent that starts threads or a SimGrid engine.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

from ..runtime.procs import die_with_parent


def run_one(config: str, out: str, checkpoint_dir: str | None, calibration: str | None) -> None:
    from ..errors import ConfigError, DivergedError
    from ..runtime.trainer import STARTED, write_error
    from .engine import simulate

    outp = Path(out)
    outp.mkdir(parents=True, exist_ok=True)
    (outp / STARTED).write_text(time.strftime("%Y-%m-%dT%H:%M:%S%z") + "\n")
    raw = json.loads(Path(config).read_text())
    try:
        simulate(raw, outp, checkpoint_dir, calibration)
    except (ConfigError, DivergedError) as err:
        write_error(outp, "config" if isinstance(err, ConfigError) else "diverged", err)


def _preload(config: str) -> None:
    """Import or build, once in the server, what the run would import or build lazily and
    slowly in every child: its task's imports (``Task.preload``: fairseq for translation) and
    its profile's paper model layout (:func:`impls.sim.profiles.preload`: torchvision's
    ResNet-50, ~3.5 CPU-s a run otherwise)."""
    try:
        with open(config) as f:
            raw = json.load(f)
        task = (raw.get("workload") or {}).get("task") or {}
        from ..tasks import TASKS as tasks

        if task.get("name") in tasks:
            tasks.get(task["name"]).preload()
        if raw.get("profile") is not None:
            from .profiles import preload

            preload(raw["profile"])
    except Exception:  # noqa: BLE001  the child meets (and reports) any problem itself
        pass


def serve(stdin=sys.stdin, stdout=sys.stdout) -> None:
    """The fork server (module docstring)."""
    import torch  # noqa: F401  the imports every run needs, paid once
    import simgrid  # noqa: F401

    from ..algorithms import load_all
    from ..compression import load_all as load_compressors
    from ..runtime import trainer  # noqa: F401
    from . import engine  # noqa: F401

    load_all()
    load_compressors()
    from ..data import DATASETS
    from ..models import MODELS
    from ..optim import OPTIMIZERS
    from ..tasks import TASKS

    for registry in (DATASETS, MODELS, OPTIMIZERS, TASKS):
        registry.discover()  # their modules, imported once here rather than in every child
    for line in stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        _preload(req["config"])
        server = os.getpid()
        # what the server holds is the child's too: out of the collector's sight, so that the child's
        # collections do not write into every inherited object (copy-on-write of the whole heap: a
        # short 16-node simulation took 0.61 s a run forked after it, 0.44 s with it)
        gc.freeze()
        pid = os.fork()
        if pid == 0:  # the child: one run, its own session and output, its own exit status
            code = 1
            try:
                os.setsid()
                die_with_parent(signal.SIGKILL, server)  # its own session: gone with the server
                fd = os.open(req["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.environ.update(req.get("env") or {})
                run_one(req["config"], req["out"], req.get("checkpoint_dir"), req.get("calibration"))
                code = 0
            except BaseException:  # noqa: BLE001  reported in the log, as a failed process would
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        stdout.write(json.dumps({"pid": pid}) + "\n")
        stdout.flush()
        _, status = os.waitpid(pid, 0)
        stdout.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        stdout.flush()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", help="resolved run config (JSON) with backend: simgrid")
    ap.add_argument("--out", help="output directory (metrics, config, provenance)")
    ap.add_argument("--checkpoint-dir", default=None)
    ap.add_argument("--calibration", default=None, help="cache of the 'measured' profile (JSON)")
    ap.add_argument("--serve", action="store_true", help="fork server: requests on stdin (module docstring)")
    args = ap.parse_args(argv)
    if args.serve:
        serve()
        return
    if not (args.config and args.out):
        ap.error("--config and --out are required (or --serve)")
    run_one(args.config, args.out, args.checkpoint_dir, args.calibration)


if __name__ == "__main__":
    main()
