# Benchmarks (targets, not tests): CSVs under results/bench/.  `snakemake --cores 2 bench`


rule bench:
    input:
        "results/bench/allreduce_vs_ddp.csv",
        "results/bench/max_ranks.csv",
