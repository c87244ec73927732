"""Snakemake script of rule ``bench_katyusha_x``: gradients, rounds and simulated time to the
target of Katyusha X and SVRG against workers (distrepro_wf/bench/kxbench.py)."""

import logging
from pathlib import Path

import pandas as pd

from distrepro_wf.pipeline.collect import write_atomic
from distrepro_wf.bench.kxbench import katyusha_x_table

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(message)s")
table = katyusha_x_table(pd.read_csv(sm.input.runs))
write_atomic(table, Path(sm.output[0]))
logging.info("%s", table.to_string())
