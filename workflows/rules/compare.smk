# Published numbers and the claims derived from them (config/published/): validated here,
# at pipeline start (a malformed row, an unknown metric, method or experiment is a
# WorkflowError naming the file, the row or claim and the key; a claim whose experiment only
# another config file defines is a warning naming that file); rule compare evaluates every
# claim against the collected tables.  See distrepro_wf.claims.published for the rules and
# distrepro_wf.claims.evaluate for the statuses.
from distrepro_wf.report import pages as wfpages
from distrepro_wf.claims import published as wfpublished
from distrepro_wf.claims import simends as wfsimends

try:
    PUBLISHED = wfpublished.load(config)
except ConfigError as e:
    raise WorkflowError(f"invalid published numbers or claims: {e}") from None
if workflow.is_main_process:  # claims whose experiment only another config file defines (e.g. translation.yaml)
    for warning in PUBLISHED.warnings:
        print(f"WARNING: {warning}", file=sys.stderr)

PAPERS = list(PUBLISHED.papers)
# absolute: the data lives in the repository, whatever the working directory (-d)
PUBLISHED_FILES = [str(wfpublished.PUBLISHED_DIR / f) for f in ("numbers.csv", "sources.csv", "claims.yaml")]
HARNESS_PAGE = "harness"
PAGE_TITLES = {p: v["title"] for p, v in PUBLISHED.papers.items()} | {
    HARNESS_PAGE: "Harness baselines and other experiments"
}


# Report page (paper id) of an experiment: its `paper:` string matched to claims.yaml; and
# the category of Snakemake's native report for a job with an {experiment} wildcard.
experiment_page = lambda e: wfpages.page_of_experiment(PUBLISHED.papers, config, e)
experiment_category = lambda wildcards: PAGE_TITLES[experiment_page(wildcards.experiment)]


# The short runs that give a simulated verdict the closed form does not model (other jobs' traffic
# on racks: shared_hpc) its sensitivity from the simulator itself (distrepro_wf.claims.simends): one
# job per (node count, part), through the train rule's launcher (one fork server a job).
SENSITIVITY_GROUPS = wfsimends.groups(PUBLISHED.claims, config)


rule sensitivity_points:
    wildcard_constraints:
        group=r"n\d+\.p\d+",
    output:
        "results/sensitivity/{group}.csv",
    log:
        "results/logs/sensitivity/{group}.log",
    params:
        members=lambda wc: SENSITIVITY_GROUPS[wc.group],
        timeout_s=LAUNCHER.get("timeout_s", 600),
    threads: 1  # one simulation at a time (one process each)
    resources:
        **launch_resources([None]),  # common.smk: under Slurm one task, as a simulated train job
    script:
        "../scripts/sensitivity_points.py"


rule compare:
    input:
        runs=expand("results/tables/{experiment}/runs.csv", experiment=EXPERIMENTS),
        failed=expand("results/tables/{experiment}/failed.csv", experiment=EXPERIMENTS),
        published=PUBLISHED_FILES,
        # simulated range ends of the rows the closed form does not model
        sensitivity_points=expand("results/sensitivity/{group}.csv", group=list(SENSITIVITY_GROUPS)),
    output:
        claims="results/tables/claims.csv",
        summary="results/tables/claims_summary.csv",
        # the tornado figures' data: each simulated speed row over the uncertain parameters' ranges
        sensitivity="results/tables/sensitivity.csv",
        # the three tables' checksums (distrepro_wf.pipeline.collect.write_derived), checked below
        manifest=f"results/tables/{wfcollect.DERIVED_MANIFEST}",
        per_paper=[
            report(
                f"results/claims/{p}.csv",
                category=PAGE_TITLES[p],
                subcategory="Claims",
                labels={"table": "claims: status per setting"},
            )
            for p in PAPERS
        ],
        numbers=[
            report(
                f"results/claims/{p}_published.csv",
                category=PAGE_TITLES[p],
                subcategory="Published numbers",
                labels={"table": "published numbers with sources"},
            )
            for p in PAPERS
        ],
    params:
        experiments=EXPERIMENTS,
        config=config,
        # changes when a table above fails its check (cut in place: a half row, or rows missing
        # against its checksum): it is set aside before any job and rebuilt, and the report with
        # it, never built from it (distrepro_wf.pipeline.collect.derived_token)
        rebuild=lambda wc: wfcollect.derived_token("results/tables", change=executing()),
    log:
        "results/logs/compare.log",
    script:
        "../scripts/compare.py"
