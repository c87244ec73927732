"""Snakemake script of rule ``bench_plan_verify_netns``: probe, plan and verify on the namespace
testbed, per bandwidth (:mod:`distrepro_wf.bench.planverify`).  Needs root, ``ip`` and ``tc``
(refused first, with what is missing, before any launch)."""

import logging
import shutil
from pathlib import Path

from distrepro_wf.bench import netns, planverify
from distrepro_wf.pipeline.collect import write_atomic
from distrepro_wf.pipeline.runs import raise_on_stop, stop_with_owner

# the testbed, its watchdog and the ranks stop with this workflow (kill -9 of Snakemake, Ctrl-C)
raise_on_stop()
stop_with_owner()
sm = snakemake  # noqa: F821
open(sm.log[0], "w").close()  # the launches append their output to the same log
logging.basicConfig(filename=sm.log[0], filemode="a", level=logging.INFO, format="%(asctime)s %(message)s")
netns.preflight()
spec = planverify.bench_spec(sm.params.spec)
workdir = Path(sm.params.workdir)
shutil.rmtree(workdir, ignore_errors=True)  # probes, plans and runs of this run only (kept for inspection)
table = planverify.run_all(spec, workdir, sm.log[0])
if (table["status"] != "ok").all():
    raise RuntimeError(f"no verified method ran; see {sm.log[0]}")
write_atomic(table, sm.output.table)
write_atomic(planverify.summary(table), sm.output.summary)
