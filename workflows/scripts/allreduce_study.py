"""Snakemake script of rule ``allreduce_study``: the study's tables, claims and figure from the
measured rows (distrepro_wf/bench/arstudy.py)."""

import json
import logging
from pathlib import Path

import pandas as pd

from distrepro_wf.bench import arstudy
from distrepro_wf.pipeline.yamlio import load_yaml

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], filemode="w", level=logging.INFO, format="%(asctime)s %(message)s")
spec = arstudy.load_spec(load_yaml(sm.input.spec), sm.input.spec)
rows = [r for p in list(sm.input.sim) + [sm.input.real] for r in json.loads(Path(p).read_text())]
table = arstudy.study_table(rows)
table.to_csv(sm.output.table, index=False)
win = arstudy.winners(table)
win.to_csv(sm.output.winners, index=False)
arstudy.winners_grid(win).to_csv(sm.output.grid, index=False)
numbers = pd.read_csv(sm.input.numbers, dtype=str).set_index("id")
missing = [s for c in spec.get("claims", []) for s in c["sources"] if s not in numbers.index]
if missing:
    raise ValueError(f"{sm.input.spec}: claims cite {missing}, not rows of {sm.input.numbers}")
settings = arstudy.evaluate_claims(table, spec.get("claims", []), numbers["verified"].to_dict())
settings.to_csv(sm.output.settings, index=False)
summary = arstudy.claims_summary(settings, spec.get("claims", []))
summary.to_csv(sm.output.claims, index=False)
arstudy.figure(table, sm.output.figure)
logging.info("winners:\n%s", win.to_string(index=False))
logging.info("claims:\n%s", summary[["claim", "status", "note"]].to_string(index=False))
