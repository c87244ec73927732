"""Snakemake script of rule ``bench_sim_cost_model``: the simulated ring all-reduce against
the alpha-beta formula ``2 (n - 1) (alpha + S / (n beta))`` of each platform preset.

One simulation (one child process, ``python -m impls.sim.measure``) per (platform, n)
times every size one after another; ``small_allreduce_bytes: 0`` makes small sizes take
the ring too.  Simulated times are deterministic: the table does not depend on the machine.
"""

import logging
import time

import pandas as pd

from distrepro_wf.bench import simbench

sm = snakemake  # noqa: F821
log = sm.log[0]
logging.basicConfig(filename=log, filemode="w", level=logging.INFO, format="%(asctime)s %(message)s")
spec = simbench.bench_spec("sim_cost_model", sm.params.spec)
t0 = time.time()
tables = []
for name in spec["platforms"]:
    platform = {"name": name, "small_allreduce_bytes": 0}
    for n in spec["nodes"]:
        t = time.time()
        measured = simbench.collective_times(platform, n, spec["sizes"], log)
        tables.append(simbench.cost_model_table(measured, platform))
        logging.info("%s n=%d: %.1f s wall\n%s", name, n, time.time() - t, tables[-1].to_string(index=False))
table = pd.concat(tables, ignore_index=True)
table.to_csv(sm.output[0], index=False)
logging.info("%d rows, %d within 5 %%, %.1f s", len(table), int(table["within_5pct"].sum()), time.time() - t0)
