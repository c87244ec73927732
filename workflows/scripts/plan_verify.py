"""Snakemake script of rule ``plan_verify``: the plan's first methods and AR-SGD on real ranks,
launched as the train rule launches (:func:`distrepro_wf.pipeline.runs.execute_group`, the config's
launcher), measured beside the predicted step times -> ``results/plan/<name>/verify.csv``
(:mod:`distrepro_wf.plan.verify`)."""

from pathlib import Path

import pandas as pd

from distrepro_wf.pipeline.runs import execute_group, read_outcome, write_run_configs
from distrepro_wf.plan import verify
from impls.backends import DEFAULT as DEFAULT_BACKEND

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = Path(sm.log[0])
log.parent.mkdir(parents=True, exist_ok=True)
log.write_text("")
config, launcher = dict(sm.params.config), dict(sm.params.launcher)
v = verify.settings(config)
rows = verify.chosen(pd.read_csv(sm.input.ranking), v)
meas = {}
for nodes, members in verify.members(config, v, rows, launcher.get("backend", DEFAULT_BACKEND)).items():
    execute_group(write_run_configs(members), verify.root(sm.wildcards.name) / "launches" / f"n{nodes}.json",
                  log, launcher)
    for d, cfg in members.items():
        out = read_outcome(Path(d)) if Path(d, "outcome.json").exists() else {"status": "failed", "reason": "never ran"}
        key = (nodes, cfg["straggler_name"], cfg["method"])
        meas[key] = (verify.measured(Path(d) / "run", int(v["warmup_steps"])) if out.get("status") == "ok" else
                     {"status": "failed", "reason": f"{out.get('kind', '')}: {out.get('reason', '')} ({d}/outcome.json)"})
Path(sm.output[0]).parent.mkdir(parents=True, exist_ok=True)
verify.table(rows, meas, v).to_csv(sm.output[0], index=False)
