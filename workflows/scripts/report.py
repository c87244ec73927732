"""Snakemake script of rule ``report``: reports/index.html."""

import logging
from pathlib import Path

from distrepro_wf.report import build

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(levelname)s %(message)s")
build(list(sm.params.experiments), dict(sm.params.config), Path("results/tables"), Path(sm.output[0]),
      Path("results/bench"), list(sm.params.configfiles))
logging.info("wrote %s", sm.output[0])
