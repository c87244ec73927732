"""Snakemake script of rule ``collect``: launch groups -> outcome.json + metrics -> CSV tables.

Never raises for a damaged run (it becomes a failed row, see :mod:`distrepro_wf.pipeline.collect`):
Snakemake deletes a failed job's outputs, which would wipe the experiment's tables.
"""

import logging
from pathlib import Path

from distrepro_wf.pipeline.collect import collect, staleness_table, write_atomic

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(levelname)s %(message)s")

epochs, runs, failed, evals = collect(Path(p) for p in sm.input)
write_atomic(epochs, Path(sm.output.epochs))
write_atomic(runs, Path(sm.output.runs))
write_atomic(failed, Path(sm.output.failed))
write_atomic(evals, Path(sm.output.evals))
write_atomic(staleness_table(Path(p) for p in sm.input), Path(sm.output.staleness))
logging.info("%d runs ok, %d failed, %d epoch rows, %d evaluation points", len(runs), len(failed), len(epochs),
             len(evals))
for _, f in failed.iterrows():
    logging.warning("failed run %s/%s/n%s/%s/seed%s [%s]: %s", f.experiment, f.method, f.nodes, f.straggler, f.seed,
                    f.kind, f.reason)
