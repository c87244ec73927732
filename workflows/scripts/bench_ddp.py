"""Snakemake script of rule ``bench_ddp``: one torchrun launch per (model, nodes)."""

import logging
import subprocess
import sys
from pathlib import Path

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(asctime)s %(message)s")
spec = dict(sm.params.spec)
out = Path(sm.output[0])
tmp = out.with_suffix(".partial")
tmp.unlink(missing_ok=True)
for model in spec.get("models", ["mlp"]):
    for n in spec.get("nodes", [2, 4]):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
               "-m", "impls.bench", "ddp", "--out", str(tmp), "--model", model,
               "--steps", str(spec.get("steps", 100)), "--repeats", str(spec.get("repeats", 3)),
               "--batch", str(spec.get("batch", 32))]
        logging.info("$ %s", " ".join(cmd))
        with open(sm.log[0], "a") as log:
            subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)
tmp.replace(out)  # only a complete benchmark replaces the previous CSV
