"""Snakemake script of rule ``bench_compression``: compress + pack throughput / memcpy's."""

import logging

from distrepro_wf.pipeline.collect import write_atomic
from distrepro_wf.bench.compbench import measure

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(message)s")
table = measure(dict(sm.params.spec), all_threads=sm.threads)
write_atomic(table, sm.output[0])
logging.info("%s", table.to_string())
