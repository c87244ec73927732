# DistRepro: run each paper's method at several node counts and straggler settings,
# collect the metrics into pandas tables and render the comparison report.
#
#   snakemake --cores 2                      default reproduction (tiny stand-ins)
#   snakemake --cores 2 --configfile F.yaml  another grid (config/full/*.yaml for a cluster)
#   snakemake --cores 2 bench                benchmarks -> results/bench/*.csv
#   snakemake --profile workflows/profiles/slurm   real scale on Slurm
#   snakemake --report report.html           Snakemake's own report of the same figures
from snakemake.utils import min_version

min_version("9.0")


# common.smk reads the config: config/config.yaml, unless the user names config files of
# their own (those replace it rather than being merged into it, so a smoke config runs
# only its own experiments).
include: "workflows/rules/common.smk"
include: "workflows/rules/train.smk"
include: "workflows/rules/collect.smk"
include: "workflows/rules/compare.smk"
include: "workflows/rules/report.smk"
include: "workflows/rules/bench.smk"


report: "workflows/report/workflow.rst"


rule all:
    input:
        "reports/index.html",
    default_target: True


onstart:
    record_pipeline_start()


onsuccess:
    record_pipeline_end("success")


onerror:
    record_pipeline_end("error")
