"""Snakemake script of rule ``plot``: one experiment's figures."""

import logging
from pathlib import Path

import pandas as pd

from distrepro_wf.plots import FIGURES

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(levelname)s %(message)s")
tables = {"epochs": pd.read_csv(sm.input.epochs), "runs": pd.read_csv(sm.input.runs)}
for out in sm.output:
    table, fn = FIGURES[Path(out).stem]
    fn(tables[table], Path(out))
    logging.info("wrote %s", out)
