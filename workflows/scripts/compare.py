"""Snakemake script of rule ``compare``: every claim against the collected tables."""

import logging
from pathlib import Path

from distrepro_wf.claims import evaluate as claims

from distrepro_wf.claims import published as wfpublished
from distrepro_wf.claims import simends
from distrepro_wf.pipeline.collect import write_atomic, write_derived

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(levelname)s %(message)s")
config = dict(sm.params.config)
published = wfpublished.load(config)
runs, failed = claims.read_tables(Path("results/tables"), list(sm.params.experiments))
# the simulated range ends of the rows the closed form does not model
sim_ends = simends.all_ends(published.claims, config, simends.read_times(sm.input.sensitivity_points))
results = claims.evaluate(published, config, runs, failed, sim_ends)
summary = claims.summarize(results)
# the three tables, then their checksums (checked before the next invocation's jobs)
tables = {"claims": results, "claims_summary": summary,
          "sensitivity": claims.sensitivity_table(published, config, results, runs, sim_ends)}
write_derived(tables, Path(sm.output.manifest).parent)  # = results/tables: sm.output.claims etc.
for out in sm.output.per_paper:
    write_atomic(results[results["paper"] == Path(out).stem], Path(out))
for out in sm.output.numbers:
    write_atomic(published.numbers[published.numbers["page"] == Path(out).stem.removesuffix("_published")], Path(out))
for status, n in summary["status"].value_counts().items():
    logging.info("%d claim(s) %s", n, status)
