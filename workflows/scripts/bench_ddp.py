"""Snakemake script of rule ``bench_ddp``: one torchrun launch per (model, nodes)
(settings and commands: ``distrepro_wf.bench.ddpbench``; the timing: ``impls.bench.ddp``)."""

import logging
import subprocess
from pathlib import Path

from distrepro_wf.bench.ddpbench import bench_spec, commands

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(asctime)s %(message)s")
spec = bench_spec(sm.params.spec)
out = Path(sm.output[0])
tmp = out.with_suffix(".partial")
tmp.unlink(missing_ok=True)
for cmd in commands(spec, str(tmp)):
    logging.info("$ %s", " ".join(cmd))
    with open(sm.log[0], "a") as log:
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)
tmp.replace(out)  # only a complete benchmark replaces the previous CSV
