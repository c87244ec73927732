"""Entry point that torchrun starts on every rank::

    torchrun --standalone --nproc-per-node 4 -m impls.run --config run.json --out DIR
    torchrun --standalone --nproc-per-node 4 -m impls.run --plan plan.json

A plan is a JSON list of ``{"config", "out", "checkpoint_dir"}`` entries of the same
world size, run one after another in one launch (see ``impls.runtime.trainer.run_plan``).

Importing this module does nothing; only ``python -m impls.run`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="resolved run config (JSON)")
    ap.add_argument("--out", help="output directory (metrics, config, provenance)")
    ap.add_argument("--checkpoint-dir", default=None, help="per-epoch checkpoints; resumed from if present")
    ap.add_argument("--plan", help="JSON list of {config, out, checkpoint_dir} entries to run in order")
    ap.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"))
    args = ap.parse_args(argv)
    if bool(args.plan) == bool(args.config and args.out):
        ap.error("give either --plan, or --config and --out")
    from .procs import die_with_parent
    from .runtime.trainer import run_plan

    if "TORCHELASTIC_RUN_ID" in os.environ:  # a rank under torchrun: never outlive its agent
        die_with_parent(signal.SIGKILL)

    if args.plan:
        with open(args.plan) as f:
            entries = json.load(f)
    else:
        entries = [{"config": args.config, "out": args.out, "checkpoint_dir": args.checkpoint_dir}]
    run_plan(entries, args.backend)


if __name__ == "__main__":
    main()
