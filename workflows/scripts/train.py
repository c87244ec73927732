"""Snakemake script of rule ``train``: one torchrun launch for a group of runs.

Writes each run's ``run.json``, then runs the group; each run's outcome (ok / failed,
with the reason and the log's tail) goes to its ``outcome.json``.  See
:mod:`distrepro_wf.pipeline.runs` for why a failure still exits 0.
"""

import logging
from pathlib import Path

from distrepro_wf.pipeline.runs import execute_group, write_run_configs

sm = snakemake  # noqa: F821  (injected by Snakemake)
log_path = Path(sm.log[0])
log_path.parent.mkdir(parents=True, exist_ok=True)
log_path.write_text("")
logging.basicConfig(filename=log_path, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

paths = write_run_configs(dict(sm.params.members))
launch = execute_group(paths, Path(sm.output[0]), log_path, dict(sm.params.launcher), worlds=dict(sm.params.worlds))
for m in launch["members"]:
    level = logging.INFO if m["status"] == "ok" else logging.ERROR
    logging.log(level, "%s: %s%s%s", m["run"], m["status"], f" [{m['kind']}]" if m.get("kind") else "",
                " (reused)" if m["reused"] else "")
