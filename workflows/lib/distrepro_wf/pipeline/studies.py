"""The study config files and their smoke form.

:data:`STUDY_CONFIGS` are the files ``snakemake --cores 2 studies`` runs (the default config
and every study config, merged in this order into one report).  :func:`smoke` shrinks one
config to a form that runs every experiment of it for real, quickly: one seed, at most
``epochs`` epochs of at most ``steps`` steps, the same methods, node counts, stragglers,
backends and platforms.  The suite runs each study file in that form
(``tests/test_study_configs.py``), so a study that cannot finish (a crash at scale, a
resource leak, a key the code no longer reads) fails the tests, not the user.
"""

from __future__ import annotations

import copy
from typing import Any

#: `snakemake --cores 2 studies`: the default config and every study config in one run and one
#: report (merged in this order: a later file's keys win; they share only the launcher, whose
#: timeout is katyusha_x's, the longest).  Not part of the default run or of CI (CI dry-runs it
#: and runs each file in its smoke form): about an hour on 2 cores, the sum of each file's own
#: measured time (default ~10 min, compression survey ~1, parameter-server studies ~6,
#: translation ~10.5, large batch ~12, Katyusha X ~15).
STUDY_CONFIGS = ["config/config.yaml", "config/compression_survey.yaml", "config/ps_studies.yaml",
                 "config/translation.yaml", "config/large_batch.yaml", "config/katyusha_x.yaml"]


def smoke(cfg: dict[str, Any], epochs: int = 2, steps: int = 2) -> dict[str, Any]:
    """``cfg`` with every experiment at its first seed and every workload at most ``epochs``
    epochs of at most ``steps`` steps (a copy; ``cfg`` is unchanged).  A warm-up as long as
    the shortened run or longer is halved to it, so a schedule stays valid."""
    out = copy.deepcopy(cfg)
    for exp in (out.get("experiments") or {}).values():
        if exp.get("seeds"):
            exp["seeds"] = exp["seeds"][:1]
        for m in (exp.get("methods") or {}).values():
            if isinstance(m, dict) and m.get("seeds"):
                m["seeds"] = m["seeds"][:1]
    for w in (out.get("workloads") or {}).values():
        w["epochs"] = min(int(w.get("epochs", epochs)), epochs)
        w["max_steps_per_epoch"] = min(int(w.get("max_steps_per_epoch", steps)), steps)
        sched = w.get("schedule") or {}
        if sched.get("warmup_epochs", 0) >= w["epochs"]:  # a warm-up stays positive (inverse_sqrt needs one)
            sched["warmup_epochs"] = w["epochs"] / 2
    return out
