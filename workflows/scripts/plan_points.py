"""Snakemake script of rule ``plan_points``: one launch group of a plan's short simulations
(:mod:`distrepro_wf.plan.jobs`), read into ``results/plan/<name>/n<nodes>.p<part>.csv``."""

from pathlib import Path

from distrepro_wf.plan.jobs import run_group

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = Path(sm.log[0])
log.parent.mkdir(parents=True, exist_ok=True)
log.write_text("")
out = Path(sm.output[0])
launch = out.parent / "launches" / f"{out.stem}.json"
run_group(dict(sm.params.members), out, launch, log, float(sm.params.timeout_s))
