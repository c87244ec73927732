"""Snakemake script of rule ``bench_translation``: the tiny Transformer's training-step tokens/s
and its BLEU after a short CPU budget against the copy baseline (distrepro_wf/bench/mtbench.py)."""

import logging
from pathlib import Path

from distrepro_wf.pipeline.collect import write_atomic
from distrepro_wf.bench.mtbench import measure

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(message)s")
table = measure(dict(sm.params.spec), dict(sm.params.workloads), str(Path(sm.input.corpus).parent), all_threads=sm.threads)
write_atomic(table, sm.output[0])
logging.info("%s", table.to_string())
