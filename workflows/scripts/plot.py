"""Snakemake script of rule ``plot``: one experiment's figures.

The curves read evals.csv beside epochs.csv where collect wrote it (the same collect job
writes both, so it is as fresh as the declared input epochs.csv); see plots.read_tables."""

import logging
from pathlib import Path

from distrepro_wf.report.plots import draw, read_tables

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(levelname)s %(message)s")
tables = read_tables(Path(sm.input.runs).parent)
for out in sm.output:
    draw(Path(out).stem, tables, Path(out), dict(sm.params.config))
    logging.info("wrote %s", out)
