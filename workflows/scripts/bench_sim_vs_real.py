"""Snakemake script of rule ``bench_sim_vs_real``: the simulated backend against real ranks
on this machine, in a compute-bound setting (2 ranks, <= 1 per core).

The same run config (allreduce_sgd on a CNN workload, ~25 ms of compute a step) runs once
on real ranks (``torchrun --standalone``, gloo) and once simulated (``python -m impls.sim``)
with the ``measured`` profile, whose compute per sample is calibrated once on this machine
and cached (``params.calibration``).  Medians over every rank's steps after the warm-up.
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
spec = simbench.bench_spec("sim_vs_real", sm.params.spec)
workload = simbench.merged(sm.params.workloads[spec["workload"]], spec["workload_overrides"])
keys = ("time/step_s", "time/compute_s", "time/comm_s")
with tempfile.TemporaryDirectory() as tmp:
    load = os.getloadavg()[0]
    real_cfg = simbench.run_config("allreduce_sgd", spec["nodes"], workload)
    child, out = simbench.real_run(real_cfg, f"{tmp}/real", log)
    real = {k: simbench.step_times(out, k) for k in keys}
    logging.info("real ranks: %.1f s wall, step times (rank 0) %s", child.wall_s, real["time/step_s"][0])
    sim_cfg = simbench.sim_config("allreduce_sgd", spec["nodes"], workload, spec["platform"], "measured")
    child, out = simbench.simulate(sim_cfg, f"{tmp}/sim", log, calibration=sm.params.calibration)
    sim = {k: simbench.step_times(out, k) for k in keys}
    compute_ms = simbench.profile_compute_ms(out)
    logging.info("simulated: %.1f s wall, step times (rank 0) %s", child.wall_s, sim["time/step_s"][0])
row = simbench.vs_real_row(real, sim, compute_ms, spec["warmup_steps"])
row = {**row, "nodes": spec["nodes"], "method": "allreduce_sgd", "workload": spec["workload"],
       "model": json.dumps(workload["model"], sort_keys=True), "batch_size": workload["batch_size"], "platform": simbench.platform_label(
           spec["platform"]), "steps_per_rank": len(real["time/step_s"][0]), "warmup_steps": spec["warmup_steps"],
       "load_avg_1min": round(load, 2), "host": socket.gethostname(), "cpu_count": os.cpu_count()}
pd.DataFrame([row]).to_csv(sm.output[0], index=False)
logging.info("%s", row)
