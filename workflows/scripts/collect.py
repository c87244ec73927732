"""Snakemake script of rule ``collect``: launch groups -> outcome.json + metrics -> CSV tables."""

import logging
from pathlib import Path

from distrepro_wf.collect import collect, outcome_paths, write_atomic

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(levelname)s %(message)s")

epochs, runs, failed = collect(outcome_paths(Path(p) for p in sm.input))
write_atomic(epochs, Path(sm.output.epochs))
write_atomic(runs, Path(sm.output.runs))
write_atomic(failed, Path(sm.output.failed))
logging.info("%d runs ok, %d failed, %d epoch rows", len(runs), len(failed), len(epochs))
for _, f in failed.iterrows():
    logging.warning("failed run %s/%s/n%s/%s/seed%s: %s", f.experiment, f.method, f.nodes, f.straggler, f.seed,
                    f.reason)
