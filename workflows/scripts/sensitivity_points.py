"""Snakemake script of rule ``sensitivity_points``: one launch group of the short runs that give the
rows the closed form does not model their sensitivity (:mod:`distrepro_wf.claims.simends`), read into
``results/sensitivity/n<nodes>.p<part>.csv``."""

from pathlib import Path

from distrepro_wf.claims.simends import run_group

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = Path(sm.log[0])
log.parent.mkdir(parents=True, exist_ok=True)
log.write_text("")
out = Path(sm.output[0])
run_group(dict(sm.params.members), out, out.parent / "launches" / f"{out.stem}.json", log, float(sm.params.timeout_s))
