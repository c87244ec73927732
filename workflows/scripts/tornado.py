"""Snakemake script of rule ``tornado``: one sensitivity figure per simulated speed claim."""

import logging
from pathlib import Path

import pandas as pd

from distrepro_wf.report.plots import tornado

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(levelname)s %(message)s")
out = Path(sm.output[0])
out.mkdir(parents=True, exist_ok=True)
table = pd.read_csv(sm.input.sensitivity)
for claim, g in table.groupby("claim"):
    tornado(g, out / f"{claim}.png", f"{claim}: sensitivity of the simulated verdict")
    logging.info("wrote %s (%d rows)", out / f"{claim}.png", len(g))
