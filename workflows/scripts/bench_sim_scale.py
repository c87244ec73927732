"""Snakemake script of rule ``bench_sim_scale``: how many virtual node-steps per second this
machine simulates, by method and node count.

Each (method, nodes) is one simulation (a child process, ``python -m impls.sim``) of one
epoch; its wall time (process start and imports included) and peak RSS (``wait4``) are the
child's.  Node counts go up in order; once a method's epoch takes 5 minutes or more, its
larger node counts are skipped (they would only take longer).
"""

import json
import logging
import os
import socket
import tempfile

import pandas as pd

from distrepro_wf.bench import simbench

sm = snakemake  # noqa: F821
log = sm.log[0]
logging.basicConfig(filename=log, filemode="w", level=logging.INFO, format="%(asctime)s %(message)s")
spec = simbench.bench_spec("sim_scale", sm.params.spec)
workload = simbench.merged(simbench.TINY_WORKLOAD, spec["workload"])
note = ("one epoch of the digits MLP stand-in (batch 1) under profile {profile} on {platform}; "
        "wall_s includes the process start (~3 s: imports)").format(
    profile=simbench.platform_label(spec["profile"]), platform=simbench.platform_label(spec["platform"]))
rows = []
with tempfile.TemporaryDirectory() as tmp:
    for method, algorithm in spec["methods"].items():
        for n in sorted(spec["nodes"]):
            if rows and rows[-1]["method"] == method and not rows[-1]["under_5_min"]:
                logging.info("%s at %d nodes skipped: %d nodes took 5 minutes or more", method, n, rows[-1]["nodes"])
                continue
            load = os.getloadavg()[0]
            cfg = simbench.sim_config(algorithm, n, workload, spec["platform"], spec["profile"], method=method)
            child, out = simbench.simulate(cfg, f"{tmp}/{method}-n{n}", log, timeout_s=spec["timeout_s"],
                                           must_succeed=False)
            if child.timed_out:
                steps = int(workload["max_steps_per_epoch"])
            else:
                simbench.check(child, out, "simulation")
                steps = json.loads((out / "runinfo.json").read_text())["steps_per_epoch"]
            rows.append(simbench.scale_row(method, n, steps, child, load_avg_1min=round(load, 2),
                                           host=socket.gethostname(), cpu_count=os.cpu_count(), note=note))
            logging.info("%s", rows[-1])
table = pd.DataFrame(rows)
table.to_csv(sm.output[0], index=False)
logging.info("largest node count under 5 minutes: %s", simbench.largest_under(table))
