# Plots per experiment (own rule), then the HTML report: reports/index.html (front page)
# and reports/papers/<paper>.html (one page per paper of config/published/claims.yaml,
# plus the harness page).  The same figures and claim tables are registered with
# report() for `snakemake --report report.html`, categorized by paper.
# Needs PUBLISHED, PAPERS, PAGE_TITLES, HARNESS_PAGE, experiment_category (compare.smk).

# the benchmark tables (rule bench, bench.smk); the report shows those that exist
BENCH_TABLES = [f"results/bench/{n}.csv" for n in ("allreduce_vs_ddp", "max_ranks", "step_time_vs_allreduce",
                                                    "sim_cost_model", "sim_slowmo_table2a", "sim_paper_rows", "sim_scale", "sim_vs_real",
                                                    "compression_throughput", "ps_server_throughput", "ps_tta_vs_sync",
                                                    "workload_throughput")]
# and the optional ones an experiment asks for (experiments.<e>.benchmarks: e.g. config/katyusha_x.yaml,
# config/translation.yaml's fairseq-preprocess + short CPU training)
BENCH_TABLES += sorted({f"results/bench/{b}.csv" for e in EXPERIMENTS
                        for b in config["experiments"][e].get("benchmarks", [])})
# the all-reduce study's tables (rule allreduce_study, bench.smk; not run by default): shown when present
STUDY_TABLES = ["results/bench/allreduce_claims.csv", "results/bench/allreduce_winners_grid.csv"]
# the simulator's own sensitivity sweep (rule sensitivity_sweep, bench.smk): made and shown under studies
SWEEP_TABLE = "results/bench/sensitivity_sweep.csv"
from distrepro_wf.report.plots import FIGURES, FOREST_PAGES, experiment_figures

# The figures each experiment draws: experiments.<e>.figures, by default every registered one
# (a figure = a function of distrepro_wf.report.plots.FIGURES + its caption in
# ../report/captions/<name>.rst).  Checked at parse time (common.smk: wfconfig.validate).
EXPERIMENT_FIGURES = {e: experiment_figures(config, e) for e in EXPERIMENTS}
REPORT_PAGES = PAPERS + [HARNESS_PAGE]
# One plot rule per distinct list of figures (a rule's outputs cannot depend on its wildcard):
# `plot` for the experiments that draw every figure (the default), `plot_<first experiment>`
# for each other list; each job draws one experiment's figures.
PLOT_GROUPS = {}
for _e, _names in EXPERIMENT_FIGURES.items():
    PLOT_GROUPS.setdefault(tuple(_names), []).append(_e)


for _names, _experiments in PLOT_GROUPS.items():

    rule:
        name:
            "plot" if list(_names) == list(FIGURES) else f"plot_{_experiments[0]}"
        input:
            epochs="results/tables/{experiment}/epochs.csv",
            runs="results/tables/{experiment}/runs.csv",
        output:
            [
                report(
                    f"reports/figures/{{experiment}}/{name}.png",
                    caption=f"../report/captions/{name}.rst",
                    category=experiment_category,
                    subcategory="{experiment}",
                    labels={"figure": name, "experiment": "{experiment}"},
                )
                for name in _names
            ],
        wildcard_constraints:
            experiment="|".join(_experiments),  # experiment names: [a-z][a-z0-9_]* (the schema)
        params:
            config=config,  # the straggler factors (straggler sensitivity on a numeric axis)
        log:
            "results/logs/plot/{experiment}.log",
        script:
            "../scripts/plot.py"


# The claims' forest plots, across experiments: one for the front page (paper claims), one for
# the harness page (the harness's sanity claims), from claims.csv alone (its own rule: the
# figure is an input of the report like any other, and redrawn only when the claims change).
rule forest:
    input:
        claims="results/tables/claims.csv",
        published=PUBLISHED_FILES,
    output:
        [
            report(
                f"reports/figures/forest_{page}.png",
                caption="../report/captions/forest.rst",
                category="Claims",
                labels={"figure": f"forest_{page}"},
            )
            for page in FOREST_PAGES
        ],
    params:
        config=config,
    log:
        "results/logs/plot/forest.log",
    script:
        "../scripts/forest.py"


# One tornado figure per simulated speed claim with a sensitivity analysis (claims.sensitivity_table):
# reports/figures/tornado/<claim>.png; a claim without one gets no figure.
rule tornado:
    input:
        sensitivity="results/tables/sensitivity.csv",
    output:
        directory("reports/figures/tornado"),
    log:
        "results/logs/plot/tornado.log",
    script:
        "../scripts/tornado.py"


rule report:
    input:
        tables=expand("results/tables/{experiment}/runs.csv", experiment=EXPERIMENTS),
        failed=expand("results/tables/{experiment}/failed.csv", experiment=EXPERIMENTS),
        figures=[f"reports/figures/{e}/{name}.png" for e in EXPERIMENTS for name in EXPERIMENT_FIGURES[e]],
        forest=[f"reports/figures/forest_{page}.png" for page in FOREST_PAGES],
        tornado="reports/figures/tornado",
        claims="results/tables/claims.csv",
        published=PUBLISHED_FILES,
        # the benchmark tables shown: those the bench target has written (it is not run by default)
        bench=lambda wc: [p for p in BENCH_TABLES + STUDY_TABLES if os.path.exists(p)]
        + ([SWEEP_TABLE] if STUDIES or os.path.exists(SWEEP_TABLE) else []),  # studies: made first
    output:
        index="reports/index.html",
        pages=[f"reports/papers/{p}.html" for p in REPORT_PAGES],
    params:
        experiments=EXPERIMENTS,
        config=config,
        configfiles=USER_CONFIG_FILES,  # common.smk (the studies' files under target studies)
    log:
        "results/logs/report.log",
    script:
        "../scripts/report.py"


# Every study config into one report (common.smk reads STUDY_CONFIGS when this is the target):
#   snakemake --cores 2 studies        (about an hour on 2 cores, plus ~17 CPU-min of sensitivity sweep;
#                                       never part of the default run or CI)
rule studies:
    input:
        "reports/index.html",
        SWEEP_TABLE,  # the simulator re-run over the sensitivity ranges (~320 short simulations)
