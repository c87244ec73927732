"""Snakemake script of rule ``bench_sim_vs_netns``: every method on real ranks in shaped
network namespaces against the simulator on the same network (:mod:`distrepro_wf.bench.netnsbench`).

Needs root, ``ip`` and ``tc`` (refused first, with what is missing, before any launch).
"""

import logging
import tempfile

from distrepro_wf.bench import netns

from distrepro_wf.bench import netnsbench
from distrepro_wf.pipeline.collect import write_atomic
from distrepro_wf.pipeline.runs import raise_on_stop, stop_with_owner

# the testbed, its watchdog and the ranks stop with this workflow (kill -9 of Snakemake, Ctrl-C):
# the signal unwinds the testbed's and the launches' finally blocks, and nothing is written
raise_on_stop()
stop_with_owner()
sm = snakemake  # noqa: F821
open(sm.log[0], "w").close()  # the launches append their output to the same log: no handler in "w" mode
logging.basicConfig(filename=sm.log[0], filemode="a", level=logging.INFO, format="%(asctime)s %(message)s")
netns.preflight()
spec = netnsbench.bench_spec(sm.params.spec)
with tempfile.TemporaryDirectory() as tmp:
    table, link = netnsbench.run_all(spec, tmp, sm.log[0])
if table.empty:
    raise RuntimeError(f"no method ran on both sides; see {sm.log[0]}")
write_atomic(table, sm.output.table)
write_atomic(link, sm.output.link)
