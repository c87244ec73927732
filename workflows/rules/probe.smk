# `snakemake --cores 2 probe --configfile config/probe/<name>.yaml`: measure a cluster (docs/plan.md;
# impls.bench.probe on the launcher's ranks, distrepro_wf.plan.probe) -> results/probe/<cluster>.yaml,
# which a plan names as plan.probe.  Under the Slurm profile the probe is one Slurm job, sized as a
# train job of its ranks (launcher.kind: slurm; docs/plan.md, "On Slurm").
from distrepro_wf.plan import probe as plan_probe

PROBE = config.get("probe")
PROBE_FILE = f"results/probe/{PROBE['cluster']}.yaml" if PROBE else []
PROBE_RANKS = int(PROBE.get("nodes", plan_probe.DEFAULTS["nodes"])) if PROBE else 1


rule probe_cluster:
    output:
        yaml="results/probe/{cluster}.yaml",
        csv="results/probe/{cluster}.csv",
    log:
        "results/logs/probe/{cluster}.log",
    params:
        probe=PROBE,
        launcher=LAUNCHER,
    threads: PROBE_RANKS  # one core per rank (scaled down to --cores)
    resources:
        # under Slurm a job of the probe's ranks, as a train job of as many (common.smk): its hosts as
        # tasks, which the probe's srun starts one torchrun each on
        **launch_resources([PROBE_RANKS]),
        runtime=launch_runtime(1),  # one launch (common.smk)
    script:
        "../scripts/probe.py"


if not PROBE and workflow.is_main_process and "probe" in sys.argv[1:]:
    raise WorkflowError(
        "invalid configuration: target probe needs a probe: section; run it with a probe's config, e.g. "
        "snakemake --cores 2 probe --configfile config/probe/local.yaml (docs/plan.md)"
    )


rule probe:
    input:
        PROBE_FILE,
