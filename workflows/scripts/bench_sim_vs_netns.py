"""Snakemake script of rule ``bench_sim_vs_netns``: every method on real ranks in shaped
network namespaces against the simulator on the same network (:mod:`distrepro_wf.bench.netnsbench`).

Needs root, ``ip`` and ``tc`` (refused first, with what is missing, before any launch).
"""

import logging
import tempfile

from distrepro_wf.bench import netns

from distrepro_wf.bench import netnsbench

sm = snakemake  # noqa: F821
open(sm.log[0], "w").close()  # the launches append their output to the same log: no handler in "w" mode
logging.basicConfig(filename=sm.log[0], filemode="a", level=logging.INFO, format="%(asctime)s %(message)s")
netns.preflight()
spec = netnsbench.bench_spec(sm.params.spec)
with tempfile.TemporaryDirectory() as tmp:
    table, link = netnsbench.run_all(spec, tmp, sm.log[0])
if table.empty:
    raise RuntimeError(f"no method ran on both sides; see {sm.log[0]}")
table.to_csv(sm.output.table, index=False)
link.to_csv(sm.output.link, index=False)
