"""Every study config file runs for real, small (issue 35): each file's experiments at one
seed and two epochs of at most two steps (``distrepro_wf.pipeline.studies.smoke``), through
the real pipeline to its report.  A study that cannot finish (a crash at its node count, a
resource leak at its scale, a key the code no longer reads) fails here, not for the user.

All study files run in one invocation (as ``snakemake studies`` merges them).  Cost measured
one file an invocation at load ~8: compression survey 176 s, parameter-server studies 265 s,
translation 316 s, large batch 154 s, Katyusha X 45 s (the default config, not run here: 882 s
at load 10).  ``scripts/test.sh`` runs this file beside the main suite, after the Slurm test.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from distrepro_wf.pipeline.config import expand
from distrepro_wf.pipeline.studies import STUDY_CONFIGS, smoke

pytestmark = pytest.mark.workflow
ROOT = Path(__file__).resolve().parents[1]


def test_smoke_keeps_the_grid_and_shortens_the_runs():
    cfg = yaml.safe_load((ROOT / "config/translation.yaml").read_text())
    small = smoke(cfg)
    assert small["experiments"].keys() == cfg["experiments"].keys()
    for name, exp in small["experiments"].items():
        assert exp["seeds"] == cfg["experiments"][name]["seeds"][:1]
        assert exp["nodes"] == cfg["experiments"][name]["nodes"] and exp["methods"] == cfg["experiments"][name]["methods"]
    for name, w in small["workloads"].items():
        assert w["epochs"] <= 2 and w["max_steps_per_epoch"] <= 2
        assert 0 < w["schedule"].get("warmup_epochs", 1) < w["epochs"] or w["epochs"] == 1
    assert cfg["workloads"]["tiny_transformer_8n"]["epochs"] == 10  # the input is untouched


#: the study files (the default config is the README's reproduction itself, and its smoke form
#: costs ~4 CPU-minutes of plots for 17 experiments: the tiny end-to-end run of test_workflow.py
#: covers its pipeline path, and the dry run of the studies target its grid)
STUDY_FILES = [f for f in STUDY_CONFIGS if f != "config/config.yaml"]


@pytest.mark.timeout(2400)
def test_every_study_config_runs_to_its_report(tmp_path):
    """The study files in their smoke form, merged in one invocation as ``snakemake studies``
    merges them (a later file's keys win; they share only the launcher): one DAG, one report,
    both cores busy throughout (one invocation a file cost ~4 x 30-60 s of report and plots)."""
    files, want = [], collections.Counter()
    for configfile in STUDY_FILES:
        cfg = smoke(yaml.safe_load((ROOT / configfile).read_text()))
        small = tmp_path / Path(configfile).name
        small.write_text(yaml.safe_dump(cfg))
        files.append(str(small))
        want.update(r.experiment for r in expand(cfg))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
                           "--cores", "2", "--configfile", *files],
                          capture_output=True, text=True, env=dict(os.environ), timeout=2300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "run(s) failed" not in proc.stderr, proc.stderr[-4000:]
    assert len(want) >= len(STUDY_FILES)  # every file has its experiments in the merged run
    for exp, n in want.items():
        tables = tmp_path / "results" / "tables" / exp
        failed = pd.read_csv(tables / "failed.csv")
        assert failed.empty, failed.to_string()
        assert len(pd.read_csv(tables / "runs.csv")) == n, exp
    assert (tmp_path / "reports" / "index.html").stat().st_size > 0
