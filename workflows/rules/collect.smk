# Metrics of every run of an experiment -> tidy CSV tables (ok runs only; failures listed).


rule collect:
    input:
        lambda wc: launches(wc.experiment),
    output:
        epochs=report(
            "results/tables/{experiment}/epochs.csv",
            category=lambda wc: experiment_category(wc),  # the paper's title (compare.smk)
            subcategory="{experiment}",
            labels={"table": "per-epoch metrics"},
        ),
        runs=report(
            "results/tables/{experiment}/runs.csv",
            category=lambda wc: experiment_category(wc),  # the paper's title (compare.smk)
            subcategory="{experiment}",
            labels={"table": "per-run summary"},
        ),
        failed="results/tables/{experiment}/failed.csv",
        # every run's evaluation points (step, epoch_f, time/wall_s, metrics): curves with seed bands
        evals="results/tables/{experiment}/evals.csv",
        # parameter-server modes: how stale the applied pushes were (histograms; empty otherwise)
        staleness="results/tables/{experiment}/staleness.csv",
    params:
        # changes when a table that fails its own check is set aside: collect rebuilds it
        rebuild=lambda wc: tables_token(wc.experiment),
    log:
        "results/logs/collect/{experiment}.log",
    script:
        "../scripts/collect.py"
