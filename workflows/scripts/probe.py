"""Snakemake script of rule ``probe_cluster``: one launch of :mod:`impls.bench.probe` with the
config's launcher, its timings turned into ``results/probe/<cluster>.yaml``
(:mod:`distrepro_wf.plan.probe`)."""

import subprocess
from pathlib import Path

from distrepro_wf.plan.probe import command, write

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = Path(sm.log[0])
log.parent.mkdir(parents=True, exist_ok=True)
csv_out = Path(sm.output.csv)
csv_out.parent.mkdir(parents=True, exist_ok=True)
probe, launcher = dict(sm.params.probe), dict(sm.params.launcher)
cmd = command(probe, launcher, str(csv_out))
with open(log, "w") as f:
    f.write(" ".join(cmd) + "\n")
    f.flush()
    subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True, timeout=launcher.get("timeout_s", 600))
write(csv_out, csv_out.with_suffix(".json"), Path(sm.output.yaml), sm.wildcards.cluster,
      extra={"workload": probe["workload"]})
