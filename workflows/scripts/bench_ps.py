"""Snakemake script of rule ``bench_ps``: server throughput on real ranks, and each
parameter-server mode's time to target relative to ps_sync (distrepro_wf/bench/psbench.py)."""

import logging
from pathlib import Path

import pandas as pd

from distrepro_wf.pipeline.collect import write_atomic
from distrepro_wf.bench.psbench import server_throughput, tta_vs_sync

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(message)s")
with open(sm.log[0], "a") as log:
    thr = server_throughput(dict(sm.params.spec), dict(sm.params.workloads), log)
write_atomic(thr, Path(sm.output.throughput))
logging.info("%s", thr.to_string())
tta = tta_vs_sync(pd.read_csv(sm.input.runs))
write_atomic(tta, Path(sm.output.tta))
logging.info("%s", tta.to_string())
