# `snakemake --cores 2 plan --configfile config/plan/<name>.yaml`: every method ranked on a
# described cluster (docs/plan.md; distrepro_wf.plan).  One job per (node count, part) runs its
# points' short simulations through the train rule's launcher (distrepro_wf.plan.jobs); the
# table and the page are made on the submitting machine (localrules, Snakefile).
from distrepro_wf.plan import config as plan_config
from distrepro_wf.plan import jobs as plan_jobs
from distrepro_wf.plan import verify as plan_verify

PLAN = config.get("plan")
PLAN_NAME_PATTERN = "[a-z][a-z0-9_]*"  # plan.name (the schema)
PLAN_NAME = PLAN["name"] if PLAN else None
PLAN_PAGE = f"reports/plan/{PLAN_NAME}.html" if PLAN else []
PLAN_POINTS = plan_config.points(config) if PLAN else []
PLAN_PARTS = [
    f"results/plan/{PLAN_NAME}/n{n}.p{k}.csv"
    for n in sorted({p.nodes for p in PLAN_POINTS})
    for k in range(plan_jobs.PARTS)
]


rule plan_points:
    wildcard_constraints:
        name=PLAN_NAME_PATTERN,  # the schema's: results/plan/<name>/verify.csv is no plan
    output:
        "results/plan/{name}/n{nodes}.p{part}.csv",
    log:
        "results/logs/plan/{name}/n{nodes}.p{part}.log",
    params:
        members=lambda wc: plan_jobs.group(config, int(wc.nodes), int(wc.part)),
        timeout_s=LAUNCHER.get("timeout_s", 600),
    threads: 1  # one simulation at a time (one process each)
    resources:
        **launch_resources([None]),  # common.smk: under Slurm one task, as a simulated train job
    script:
        "../scripts/plan_points.py"


rule plan_table:
    wildcard_constraints:
        name=PLAN_NAME_PATTERN,  # the schema's: results/plan/<name>/verify.csv is no plan
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


# `verify` among the targets (the main process reads its own arguments, as below): the page shows the
# measured step times beside the predicted ones (results/plan/<name>/verify.csv)
VERIFY_TARGETED = bool(PLAN) and workflow.is_main_process and "verify" in sys.argv[1:]


rule plan_report:
    wildcard_constraints:
        name=PLAN_NAME_PATTERN,  # the schema's: results/plan/<name>/verify.csv is no plan
    input:
        unpack(lambda wc: {"verify": f"results/plan/{wc.name}/verify.csv"} if VERIFY_TARGETED else {}),
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


# `snakemake --cores 2 verify --configfile config/plan/<name>.yaml`: the plan's first methods and AR-SGD
# run on real ranks with the config's launcher, measured beside the predicted step times
# (distrepro_wf.plan.verify) -> results/plan/<name>/verify.csv and the page's measured column.
# One job: a launch group per verified node count, run one after another (execute_group).
VERIFY = None
if PLAN and ("verify" in config or VERIFY_TARGETED):
    try:  # a verify: section is checked with the config (plan.checks.validate); its defaults need no section
        VERIFY = plan_verify.settings(config)
    except ConfigError as e:
        raise WorkflowError(f"invalid configuration: {e}") from None
VERIFY_NODES = VERIFY["nodes"] if VERIFY else []
VERIFY_RUNS = plan_verify.max_runs(VERIFY) if VERIFY else 1


rule plan_verify:
    wildcard_constraints:
        name=PLAN_NAME_PATTERN,  # the schema's: results/plan/<name>/verify.csv is no plan
    input:
        ranking="results/plan/{name}.csv",
    output:
        "results/plan/{name}/verify.csv",
    log:
        "results/logs/plan/{name}/verify.log",
    params:
        config=config,
        launcher=LAUNCHER,
    threads: max(VERIFY_NODES, default=1)  # one core per rank (scaled down to --cores)
    resources:
        **launch_resources([max(VERIFY_NODES, default=1)]),  # common.smk: as a train job of that many ranks
        runtime=launch_runtime(VERIFY_RUNS),  # at most that many runs, one after another
    script:
        "../scripts/plan_verify.py"


if not PLAN and workflow.is_main_process and "verify" in sys.argv[1:]:
    raise WorkflowError(
        "invalid configuration: target verify needs a plan: section; run it with a plan's config, e.g. "
        "snakemake --cores 2 verify --configfile config/plan/example.yaml (docs/plan.md)"
    )


rule verify:
    input:
        [f"results/plan/{PLAN_NAME}/verify.csv", PLAN_PAGE] if PLAN else [],
