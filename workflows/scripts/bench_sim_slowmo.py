"""Snakemake script of rule ``bench_sim_slowmo``: SlowMo (Wang et al. 2020) Table 2a, time
per iteration at 32 nodes on 10 GbE, on the simulated platform.

Each method is one simulation (a child process, ``python -m impls.sim``) of the tiny digits
stand-in for one epoch under the ``resnet50_v100x8`` profile (ResNet-50's compute and
message sizes) on ``ethernet_10g``; its time per iteration is the mean of ``time/step_s``
over every rank's steps after its first.  The profile's compute is derived from the
device's published throughput (not from any of these rows), the platform is the preset as it
is: all three rows are predictions (the all-reduce efficiency fitted on the AR row, and what it
predicts elsewhere, is ``bench/sim_paper_rows``).
"""

import logging
import tempfile
import time

from distrepro_wf.bench import simbench

sm = snakemake  # noqa: F821
log = sm.log[0]
logging.basicConfig(filename=log, filemode="w", level=logging.INFO, format="%(asctime)s %(message)s")
spec = simbench.bench_spec("sim_slowmo", sm.params.spec)
published = simbench.published_tpi(sm.input.numbers)
logging.info("published (%s): %s", sm.input.numbers, published)
workload = simbench.merged(simbench.TINY_WORKLOAD, spec["workload"])
simulated = {}
with tempfile.TemporaryDirectory() as tmp:
    for method, algorithm in spec["methods"].items():
        cfg = simbench.sim_config(algorithm, spec["nodes"], workload, spec["platform"], spec["profile"],
                                  method=method)
        child, out = simbench.simulate(cfg, f"{tmp}/{method}", log)
        steps = simbench.after_warmup(simbench.step_times(out), skip=1)
        simulated[method] = sum(steps) / len(steps) * 1e3
        logging.info("%s: %.3f ms per iteration (%d steps after each rank's first), %.1f s wall", method,
                     simulated[method], len(steps), child.wall_s)
table = simbench.slowmo_table({m: published[m] for m in spec["methods"] if m in published}, simulated)
table.insert(1, "nodes", spec["nodes"])
table.insert(2, "platform", simbench.platform_label(spec["platform"]))
table.insert(3, "profile", simbench.platform_label(spec["profile"]))
table.to_csv(sm.output[0], index=False)
logging.info("done at %s\n%s", time.strftime("%H:%M:%S"), table.to_string(index=False))
