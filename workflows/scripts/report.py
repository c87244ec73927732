"""Snakemake script of rule ``report``: reports/index.html and one page per paper."""

import logging
from pathlib import Path

import pandas as pd

from distrepro_wf.claims.published import load
from distrepro_wf.report.build import build

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(levelname)s %(message)s")
config = dict(sm.params.config)
pages = build(list(sm.params.experiments), config, Path("results/tables"), Path(sm.output.index),
              list(sm.input.bench), list(sm.params.configfiles), load(config),
              pd.read_csv(sm.input.claims))
for p in pages:
    logging.info("wrote %s", p)
