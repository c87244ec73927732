"""Snakemake script of rule ``forest``: the claims' forest plots (front page and harness page)."""

import logging
from pathlib import Path

import pandas as pd

from distrepro_wf.report.evidence import claim_frame, plotted
from distrepro_wf.report.plots import forest
from distrepro_wf.claims.published import load

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(levelname)s %(message)s")
published = load(dict(sm.params.config))
frame = claim_frame(pd.read_csv(sm.input.claims), published.claims, published.papers)
for out in sm.output:
    page = Path(out).stem.removeprefix("forest_")
    forest(plotted(frame, page), Path(out))
    logging.info("wrote %s (%d rows)", out, len(plotted(frame, page)))
