# `snakemake --cores 2 plan --configfile config/plan/<name>.yaml`: every method ranked on a
# described cluster (docs/plan.md; distrepro_wf.plan).  One job per (node count, part) runs its
# points' short simulations through the train rule's launcher (distrepro_wf.plan.jobs); the
# table and the page are made on the submitting machine (localrules, Snakefile).
from distrepro_wf.plan import config as plan_config
from distrepro_wf.plan import jobs as plan_jobs

PLAN = config.get("plan")
PLAN_NAME = PLAN["name"] if PLAN else None
PLAN_PAGE = f"reports/plan/{PLAN_NAME}.html" if PLAN else []
PLAN_POINTS = plan_config.points(config) if PLAN else []
PLAN_PARTS = [
    f"results/plan/{PLAN_NAME}/n{n}.p{k}.csv"
    for n in sorted({p.nodes for p in PLAN_POINTS})
    for k in range(plan_jobs.PARTS)
]


rule plan_points:
    output:
        "results/plan/{name}/n{nodes}.p{part}.csv",
    log:
        "results/logs/plan/{name}/n{nodes}.p{part}.log",
    params:
        members=lambda wc: plan_jobs.group(config, int(wc.nodes), int(wc.part)),
        timeout_s=LAUNCHER.get("timeout_s", 600),
    threads: 1  # one simulation at a time (one process each)
    script:
        "../scripts/plan_points.py"


rule plan_table:
    input:
        PLAN_PARTS,
    output:
        ranking="results/plan/{name}.csv",
        points="results/plan/{name}/points.csv",
        crossover="results/plan/{name}/crossover.csv",
        sensitivity="results/plan/{name}/sensitivity.csv",
    log:
        "results/logs/plan/{name}/table.log",
    params:
        plan=PLAN,
    script:
        "../scripts/plan_table.py"


rule plan_report:
    input:
        ranking="results/plan/{name}.csv",
        points="results/plan/{name}/points.csv",
        crossover="results/plan/{name}/crossover.csv",
        sensitivity="results/plan/{name}/sensitivity.csv",
    output:
        "reports/plan/{name}.html",
    log:
        "results/logs/plan/{name}/report.log",
    params:
        config=config,
        command=plan_config.command(USER_CONFIG_FILES),
    script:
        "../scripts/plan_report.py"


# Snakemake gives a Snakefile no access to the command line's targets: the main process looks
# at its own arguments (as for target studies, common.smk)
if not PLAN and workflow.is_main_process and "plan" in sys.argv[1:]:
    raise WorkflowError(
        "invalid configuration: target plan needs a plan: section; run it with a plan's config, e.g. "
        "snakemake --cores 2 plan --configfile config/plan/example.yaml (docs/plan.md)"
    )


rule plan:
    input:
        PLAN_PAGE,
