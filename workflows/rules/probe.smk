# `snakemake --cores 2 probe --configfile config/probe/<name>.yaml`: measure a cluster (docs/plan.md;
# impls.bench.probe on the launcher's ranks, distrepro_wf.plan.probe) -> results/probe/<cluster>.yaml,
# which a plan names as plan.probe.
PROBE = config.get("probe")
PROBE_FILE = f"results/probe/{PROBE['cluster']}.yaml" if PROBE else []


rule probe_cluster:
    output:
        yaml="results/probe/{cluster}.yaml",
        csv="results/probe/{cluster}.csv",
    log:
        "results/logs/probe/{cluster}.log",
    params:
        probe=PROBE,
        launcher=LAUNCHER,
    threads: PROBE.get("nodes", 2) if PROBE else 1
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
