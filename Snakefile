# DistRepro: run each paper's method at several node counts and straggler settings,
# collect the metrics into pandas tables and render the comparison report.
#
#   snakemake --cores 2                      default reproduction (tiny stand-ins)
#   snakemake --cores 2 --configfile F.yaml  another grid (config/full/*.yaml for a cluster)
#   snakemake --cores 2 bench                benchmarks -> results/bench/*.csv
#   snakemake --cores 2 studies              every study config (config/*.yaml) into one report (~1 h)
#   snakemake --profile profiles/slurm   real scale on Slurm
#   snakemake --report report.html           Snakemake's own report of the same figures
import sys
from pathlib import Path

from snakemake.utils import min_version

from distrepro_wf.pipeline import session
from distrepro_wf.pipeline.collect import echo_failures

min_version("9.0")

# A lock left by a killed invocation is removed, a live one's kept (distrepro_wf/pipeline/session.py).
if workflow.is_main_process:
    if session.clear_stale_lock(Path.cwd()):
        print("removed a stale lock of a killed invocation (.snakemake/locks)", file=sys.stderr)
    session.register(Path.cwd())


# common.smk reads the config: config/config.yaml, unless the user names config files of
# their own (those replace it rather than being merged into it, so a smoke config runs
# only its own experiments).
include: "workflows/rules/common.smk"


# A plan's config (config/plan/*.yaml: a plan: section, no experiments) has only the plan's
# rules (workflows/rules/plan.smk; docs/plan.md).
PLAN_ONLY = "experiments" not in config
if not PLAN_ONLY:

    include: "workflows/rules/train.smk"
    include: "workflows/rules/collect.smk"
    include: "workflows/rules/compare.smk"
    include: "workflows/rules/report.smk"
    include: "workflows/rules/bench.smk"
    include: "workflows/rules/translation.smk"


include: "workflows/rules/plan.smk"
include: "workflows/rules/probe.smk"


report: "workflows/report/workflow.rst"


# On a cluster (--profile profiles/slurm) only training is submitted; tables,
# claims, figures and the report are made on the submitting machine.
if not PLAN_ONLY:

    localrules:
        all,
        collect,
        compare,
        plot,
        forest,
        report,
        bench,
        bench_step_time,
        studies,


localrules:
    plan_table,
    plan_report,
    plan,


rule all:
    input:
        "reports/index.html" if not PLAN_ONLY else PLAN_PAGE,
    default_target: True


onstart:
    check_executor(workflow.executor_plugin.name)  # launcher.kind matches the profile
    record_pipeline_start()


# Failed runs are never silent: which, what kind, why, and where the log is.
onsuccess:
    record_pipeline_end("success")
    echo_failures(Path("results/tables"), EXPERIMENTS)


onerror:
    record_pipeline_end("error")
    echo_failures(Path("results/tables"), EXPERIMENTS)
