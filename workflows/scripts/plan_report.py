"""Snakemake script of rule ``plan_report``: ``reports/plan/<name>.html`` from the plan's tables
(:mod:`distrepro_wf.plan.page`)."""

from pathlib import Path

import pandas as pd

from distrepro_wf.plan import config as pconfig
from distrepro_wf.plan.page import render
from distrepro_wf.plan.published import accuracy_costs
from distrepro_wf.report.plots import method_colour

sm = snakemake  # noqa: F821  (injected by Snakemake)
config = dict(sm.params.config)
plan = config["plan"]
why = pconfig.applicable(config)
points = pd.read_csv(sm.input.points)
page = render(plan, pd.read_csv(sm.input.ranking), pd.read_csv(sm.input.crossover), pd.read_csv(sm.input.sensitivity),
              accuracy_costs({m: s for m, s in pconfig.methods(plan).items() if why.get(m) is None}),
              {m: w for m, w in why.items() if w is not None}, lambda m: method_colour(m, config),
              sm.params.command, points[points["status"] != "ok"],
              pd.read_csv(sm.input.verify) if "verify" in sm.input.keys() else None)
Path(sm.output[0]).parent.mkdir(parents=True, exist_ok=True)
Path(sm.output[0]).write_text(page)
Path(sm.log[0]).parent.mkdir(parents=True, exist_ok=True)
Path(sm.log[0]).write_text(f"{sm.output[0]}: {len(page)} characters\n")
