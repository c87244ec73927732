"""The one entry point of a run, on any backend::

    torchrun --standalone --nproc-per-node 4 -m impls.run --config run.json --out DIR
    torchrun --standalone --nproc-per-node 4 -m impls.run --plan plan.json
    python -m impls.run --config sim.json --out DIR      (backend: simgrid)

A config whose backend is not torchrun's (its registered spec's ``entry_module``, e.g. the
simulated backend's ``impls.sim``) is handed to that backend's ``run_one`` in this process:
one command runs a run wherever it runs.  A plan is a JSON list of ``{"config", "out",
"checkpoint_dir"}`` entries of the same world size, run one after another in one torchrun
launch (see ``impls.runtime.trainer.run_plan``).

Importing this module does nothing; only ``python -m impls.run`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal

TORCHRUN_ENTRY = "impls.run"  # this module (``__name__`` is ``__main__`` under ``python -m``)


def parser() -> argparse.ArgumentParser:
    """The command line; ``--backend`` takes the values of the registered backends torchrun
    runs (their spec's ``entry_module`` is this one: ``auto``, ``gloo``, ``nccl``)."""
    from .backends import BACKENDS, DEFAULT

    served = [v for n in BACKENDS.names() if BACKENDS.get(n).entry_module == TORCHRUN_ENTRY
              for v in BACKENDS.get(n).run_values]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="resolved run config (JSON)")
    ap.add_argument("--out", help="output directory (metrics, config, provenance)")
    ap.add_argument("--checkpoint-dir", default=None, help="per-epoch checkpoints; resumed from if present")
    ap.add_argument("--plan", help="JSON list of {config, out, checkpoint_dir} entries to run in order")
    ap.add_argument("--backend", default=DEFAULT, choices=served,
                    help="the process group of the ranks (the torch backend's requests; default: %(default)s)")
    ap.add_argument("--calibration", default=None, help="a simulated run's cache of the 'measured' profile (JSON)")
    return ap


def main(argv: list[str] | None = None) -> None:
    ap = parser()
    args = ap.parse_args(argv)
    if bool(args.plan) == bool(args.config and args.out):
        ap.error("give either --plan, or --config and --out")
    entry = _entry_of(args.config) if args.config else TORCHRUN_ENTRY
    if entry != TORCHRUN_ENTRY:  # another backend's run (e.g. simulated): its own entry, in this process
        import importlib

        mod = importlib.import_module(entry)  # a package runs as ``python -m`` does: its __main__
        run_one = getattr(mod, "run_one", None) or importlib.import_module(f"{entry}.__main__").run_one
        run_one(args.config, args.out, args.checkpoint_dir, args.calibration)
        return
    from .runtime.procs import die_with_parent
    from .runtime.trainer import run_plan

    if "TORCHELASTIC_RUN_ID" in os.environ:  # a rank under torchrun: never outlive its agent
        die_with_parent(signal.SIGKILL)

    if args.plan:
        with open(args.plan) as f:
            entries = json.load(f)
    else:
        entries = [{"config": args.config, "out": args.out, "checkpoint_dir": args.checkpoint_dir}]
    run_plan(entries, args.backend)


def _entry_of(config: str) -> str:
    """The module that runs ``config`` (its backend's registered ``entry_module``); this one
    for torchrun's backends, and for a config that cannot be read (the runtime reports it)."""
    try:
        with open(config) as f:
            value = json.load(f).get("backend")
        from .backends import backend_of

        entry = backend_of(value).entry_module
    except Exception:  # noqa: BLE001  an unreadable or invalid config fails in the runtime, named
        return TORCHRUN_ENTRY
    return entry or TORCHRUN_ENTRY


if __name__ == "__main__":
    main()
