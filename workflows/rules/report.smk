# Plots per experiment (own rule), then the HTML report that links them.

FIGURES = ["loss_vs_epoch", "acc_vs_wall", "epoch_time_vs_nodes"]


rule plot:
    input:
        epochs="results/tables/{experiment}/epochs.csv",
        runs="results/tables/{experiment}/runs.csv",
    output:
        [
            report(
                f"reports/figures/{{experiment}}/{name}.png",
                category="{experiment}",
                subcategory="Figures",
                labels={"figure": name},
            )
            for name in FIGURES
        ],
    log:
        "results/logs/plot/{experiment}.log",
    script:
        "../scripts/plot.py"


rule report:
    input:
        tables=expand("results/tables/{experiment}/runs.csv", experiment=EXPERIMENTS),
        failed=expand("results/tables/{experiment}/failed.csv", experiment=EXPERIMENTS),
        figures=expand("reports/figures/{experiment}/{name}.png", experiment=EXPERIMENTS, name=FIGURES),
    output:
        "reports/index.html",
    params:
        experiments=EXPERIMENTS,
        config=config,
        configfiles=list(workflow.overwrite_configfiles or []),
    log:
        "results/logs/report.log",
    script:
        "../scripts/report.py"
