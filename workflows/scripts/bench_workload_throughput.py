"""Snakemake script of rule ``bench_workload_throughput``: each workload's training-step
samples/s (tokens/s) at 1 thread and all, fp32 and bf16, with its measured profile entry
(distrepro_wf/bench/wlbench.py)."""

import logging

from distrepro_wf.pipeline.collect import write_atomic
from distrepro_wf.bench.wlbench import measure

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(message)s")
table = measure(dict(sm.params.spec), all_threads=sm.threads)
write_atomic(table, sm.output[0])
logging.info("%s", table.to_string())
