# Benchmarks (pipeline targets writing CSV, never timed tests):
#   snakemake --cores 2 bench
# allreduce_vs_ddp.csv: allreduce_sgd step time / torch DDP step time, side by side in one launch.
# max_ranks.csv: does the tiny workload run at N ranks on this machine, and how fast.
# step_time_vs_allreduce.csv: each method's time per step / allreduce_sgd's, same experiment,
#   nodes and straggler setting (from the experiments' runs, i.e. measured in one pipeline run).


rule bench:
    input:
        BENCH_TABLES,  # report.smk


rule bench_ddp:
    output:
        "results/bench/allreduce_vs_ddp.csv",
    log:
        "results/logs/bench/allreduce_vs_ddp.log",
    params:
        spec=config.get("benchmarks", {}).get("ddp_compare", {}),
    threads: 64  # everything there is (Snakemake scales it down to --cores)
    script:
        "../scripts/bench_ddp.py"


rule bench_max_ranks:
    output:
        "results/bench/max_ranks.csv",
    log:
        "results/logs/bench/max_ranks.log",
    params:
        spec=config.get("benchmarks", {}).get("max_ranks", {}),
        workloads=config["workloads"],
    threads: 64  # everything there is (Snakemake scales it down to --cores)
    script:
        "../scripts/bench_max_ranks.py"


rule bench_step_time:
    input:
        expand("results/tables/{experiment}/runs.csv", experiment=EXPERIMENTS),
    output:
        "results/bench/step_time_vs_allreduce.csv",
    log:
        "results/logs/bench/step_time_vs_allreduce.log",
    script:
        "../scripts/bench_step_time.py"
