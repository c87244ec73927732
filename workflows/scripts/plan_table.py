"""Snakemake script of rule ``plan_table``: a plan's points into its ranking
(``results/plan/<name>.csv``), its crossover grid and its sensitivity (:mod:`distrepro_wf.plan.table`)."""

from pathlib import Path

import pandas as pd

from distrepro_wf.plan import config as pconfig
from distrepro_wf.plan import table

sm = snakemake  # noqa: F821  (injected by Snakemake)
plan = dict(sm.params.plan)
points = pd.concat([pd.read_csv(p) for p in sm.input], ignore_index=True)
points.to_csv(sm.output.points, index=False)
mdl = pconfig.model(plan)
rank = table.ranking(points, mdl.epoch_samples, mdl.batch, mdl.step_ms, plan.get("epochs_to_target"),
                     plan["network"]["nic_gbps"])
rank.to_csv(sm.output.ranking, index=False)
nodes, compute, gbps = pconfig.crossover_axes(plan)
grid = table.crossover(points, nodes, compute, gbps, pconfig.NO_STRAGGLER)
grid.to_csv(sm.output.crossover, index=False)
table.swaps(rank, grid, mdl.step_ms).to_csv(sm.output.sensitivity, index=False)
Path(sm.log[0]).parent.mkdir(parents=True, exist_ok=True)
ok = int((points["status"] == "ok").sum())
Path(sm.log[0]).write_text(f"{len(points)} points, {ok} ok; {len(rank)} ranked rows, {len(grid)} crossover cells\n")
