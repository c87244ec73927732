"""Snakemake script of rule ``bench_max_ranks``: the tiny workload at growing rank counts.

Each rank count is one real torchrun launch of ``allreduce_sgd`` (1 epoch, a few
steps); a row records whether it completed, its launch wall time (process start,
imports and rendezvous included) and its median step time.
"""

import json
import logging
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd

from distrepro_wf.pipeline.launch import run_command
from distrepro_wf.bench.simbench import run_config

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(asctime)s %(message)s")
spec = dict(sm.params.spec)
workload = dict(sm.params.workloads[spec.get("workload", "digits_mlp")])
workload.update(epochs=1, max_steps_per_epoch=int(spec.get("steps", 20)), batch_size=8)
rows = []
for n in spec.get("nodes", [2, 4, 8, 16]):
    with tempfile.TemporaryDirectory() as d:
        cfg = run_config("allreduce_sgd", n, workload)
        Path(d, "cfg.json").write_text(json.dumps(cfg))
        cmd = run_command(n, f"{d}/cfg.json", f"{d}/out")
        t0 = time.time()
        with open(sm.log[0], "a") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=1200).returncode
        wall = time.time() - t0
        steps = []
        if rc == 0:
            for line in open(f"{d}/out/metrics/rank0.jsonl"):
                rec = json.loads(line)
                if rec["kind"] == "step":
                    steps.append(rec["time/step_s"])
        rows.append({"nodes": n, "ok": rc == 0, "launch_wall_s": round(wall, 2),
                     "median_step_ms": round(statistics.median(steps) * 1e3, 3) if steps else None,
                     "host": socket.gethostname(), "target": "16 ranks run"})
        logging.info("%s", rows[-1])
pd.DataFrame(rows).to_csv(sm.output[0], index=False)
