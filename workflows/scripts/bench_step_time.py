"""Snakemake script of rule ``bench_step_time``: per-step time ratios to allreduce_sgd."""

import logging

import pandas as pd

from distrepro_wf.bench.tables import step_time_vs_allreduce
from distrepro_wf.pipeline.collect import write_atomic

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(message)s")
runs = pd.concat([pd.read_csv(p) for p in sm.input], ignore_index=True)
targets = {(a, s): t for a, s, t in sm.params.targets}  # config benchmarks.step_time_vs_allreduce, checked at parse
table = step_time_vs_allreduce(runs, sm.params.baseline, targets)
write_atomic(table, sm.output[0])
logging.info("%s", table.to_string())
