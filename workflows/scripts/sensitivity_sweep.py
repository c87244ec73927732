"""Snakemake script of rule ``sensitivity_sweep``: every simulated speed claim re-simulated at
both ends of each declared range of :mod:`distrepro_wf.claims.sensitivity`, against the closed form's
verdict there (:mod:`distrepro_wf.claims.sweep`; settings ``benchmarks.sensitivity_sweep``,
:data:`distrepro_wf.bench.simbench.DEFAULTS`).  Each distinct config is one short simulation (a child
process); ``threads`` of them run at once (simulated times do not depend on the load)."""

import logging
import tempfile
import time

from distrepro_wf.claims import published as wfpublished

from distrepro_wf.bench import simbench as sb

from distrepro_wf.claims import sweep

sm = snakemake  # noqa: F821
log = sm.log[0]
open(log, "w").close()
# appending (O_APPEND): the launch groups' own logs are appended to the same file meanwhile
logging.basicConfig(filename=log, filemode="a", level=logging.INFO, format="%(asctime)s %(message)s")
spec = sb.bench_spec("sensitivity_sweep", sm.params.spec)
config = dict(sm.params.config)
chosen = sweep.chosen(spec["claims"], wfpublished.load(config).claims)  # checked when the workflow was read, too
points, configs = sweep.plan(chosen, config, int(spec["steps"]), int(spec["epochs"]))
logging.info("%d points of %d claim rows, %d distinct simulations, %d at once", len(points),
             len({(p["claim"], p["nodes"], p["straggler"]) for p in points}), len(configs), sm.threads)
t0 = time.perf_counter()
with tempfile.TemporaryDirectory() as tmp:
    times, cpu_s = sweep.simulate_all(configs, tmp, log, sm.threads, float(spec["timeout_s"]))
frame = sweep.judge(sweep.table(points, times), {c["id"]: c["expect"] for c in chosen})
frame.to_csv(sm.output[0], index=False)
swept = frame[frame["agrees"] != ""]
cf_rows = swept[swept["sensitivity_from"] == sweep.CLOSED_FORM]
logging.info("\ndone: %d simulations, %.0f s wall, %.0f CPU-s in the simulations; %d of %d swept points agree with "
             "the closed form (%d of %d of the rows whose sensitivity is the closed form's; the others' is these "
             "simulations'); those that do not:\n%s", len(configs), time.perf_counter() - t0, cpu_s,
             (swept["agrees"] == "yes").sum(), len(swept), (cf_rows["agrees"] == "yes").sum(), len(cf_rows),
             swept[swept["agrees"] == "no"].drop(columns=["note", "label"]).to_string(index=False))
