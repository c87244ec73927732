"""Snakemake script of rules ``allreduce_study_sim`` (one simulation of every node count on one
platform) and ``allreduce_study_real`` (one torchrun launch per world size): the rows as JSON."""

import json
import logging
import time
from pathlib import Path


from distrepro_wf.bench import arstudy
from distrepro_wf.pipeline.yamlio import load_yaml

sm = snakemake  # noqa: F821
log = sm.log[0]
logging.basicConfig(filename=log, filemode="w", level=logging.INFO, format="%(asctime)s %(message)s")
spec = arstudy.load_spec(load_yaml(sm.input.spec), sm.input.spec)
out = Path(sm.output[0])
t0 = time.time()
if "platform" in sm.wildcards.keys():
    rows = arstudy.sim_rows(sm.wildcards.platform, spec["nodes"], spec["sizes"], spec["algorithms"], log)
else:
    real = spec["real"]
    rows = [r for n in real["nodes"]
            for r in arstudy.real_rows(n, real["sizes"], spec["algorithms"], real["reps"], out.parent, log)]
tmp = out.with_suffix(".partial")
tmp.write_text(json.dumps(rows))
tmp.replace(out)
logging.info("%d rows in %.1f s", len(rows), time.time() - t0)
