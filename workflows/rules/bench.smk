# Benchmarks (pipeline targets writing CSV, never timed tests):
#   snakemake --cores 2 bench
# allreduce_vs_ddp.csv: allreduce_sgd step time (through the runtime's step) / torch DDP's, and each over a
#   no-communication baseline, interleaved in one launch per (model, nodes) (distrepro_wf/bench/ddpbench.py).
# max_ranks.csv: does the tiny workload run at N ranks on this machine, and how fast.
# step_time_vs_allreduce.csv: each method's time per step / allreduce_sgd's, same experiment,
#   nodes and straggler setting (from the experiments' runs, i.e. measured in one pipeline run).
# The simulated platform (impls/sim; one simulation per child process, distrepro_wf/bench/simbench.py;
# settings: simbench.DEFAULTS, overridable under benchmarks.<rule's name> in the config):
# sim_cost_model.csv: simulated ring all-reduce / alpha-beta formula, 4-64 hosts, 1 KB-100 MB.
# sim_slowmo_table2a.csv: SlowMo Table 2a time per iteration (32 nodes, 10 GbE) simulated.
# sim_paper_rows.csv: every published timing row we hold (SlowMo 2a/2b, SGP v1 abstract, signSGD-MV,
#   EF-blockSGDM) against the simulator's prediction; rows a platform parameter was fitted on marked.
# sim_scale.csv: virtual node-steps per second of this machine, 16-256 simulated nodes.
# sim_vs_real.csv: simulated (profile measured) / real ranks' step time, 2 compute-bound ranks.
# ps_server_throughput.csv: gradients an asynchronous server applies per second on real ranks vs workers
#   (1 and 2 server ranks); ps_tta_vs_sync.csv: each parameter-server mode's time to target / ps_sync's
#   under one 4x-slow worker, from the ps_modes runs of the same pipeline run (distrepro_wf/bench/psbench.py).
# katyusha_x.csv (only with config/katyusha_x.yaml): Katyusha X and SVRG's component gradients, rounds and
#   simulated time to the target vs workers, as ratios per seed (distrepro_wf/bench/kxbench.py).
# compression_throughput.csv: sign / blockwise-sign compress + pack of 25.6M fp32 (ResNet-50) as a
#   ratio of memcpy bandwidth measured in the same run, 1 thread and all (distrepro_wf/bench/compbench.py).
# workload_throughput.csv: each shipped workload's training-step samples/s (tokens/s for translation),
#   1 thread and all, fp32 and bf16, and the `profile:` entry a simulated node of that batch would
#   charge here (distrepro_wf/bench/wlbench.py; the same code as the measured profile's calibration).


rule bench:
    input:
        BENCH_TABLES,  # report.smk


from distrepro_wf.bench import ddpbench

DDPBENCH_SPEC = ddpbench.bench_spec(config.get("benchmarks", {}).get("ddp_compare"))  # refused before any job
from distrepro_wf.bench.tables import step_time_targets
from distrepro_wf.pipeline.config import report_settings

STEP_TIME_TARGETS = step_time_targets(config.get("benchmarks", {}).get("step_time_vs_allreduce"))  # likewise


rule bench_ddp:
    output:
        "results/bench/allreduce_vs_ddp.csv",
    log:
        "results/logs/bench/allreduce_vs_ddp.log",
    params:
        spec=DDPBENCH_SPEC,
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
    params:
        baseline=report_settings(config)["baseline"],
        targets=[[a, s, t] for (a, s), t in STEP_TIME_TARGETS.items()],
    log:
        "results/logs/bench/step_time_vs_allreduce.log",
    script:
        "../scripts/bench_step_time.py"


rule bench_sim_cost_model:
    output:
        "results/bench/sim_cost_model.csv",
    log:
        "results/logs/bench/sim_cost_model.log",
    params:
        spec=config.get("benchmarks", {}).get("sim_cost_model", {}),
    threads: 1  # simulated times: deterministic, whatever else runs
    script:
        "../scripts/bench_sim_cost_model.py"


rule bench_sim_slowmo:
    input:
        numbers=PUBLISHED_FILES[0],  # compare.smk: config/published/numbers.csv
    output:
        "results/bench/sim_slowmo_table2a.csv",
    log:
        "results/logs/bench/sim_slowmo_table2a.log",
    params:
        spec=config.get("benchmarks", {}).get("sim_slowmo", {}),
    threads: 1  # simulated times: deterministic, whatever else runs
    script:
        "../scripts/bench_sim_slowmo.py"


rule bench_sim_paper_rows:
    input:
        numbers=PUBLISHED_FILES[0],  # compare.smk: config/published/numbers.csv
    output:
        "results/bench/sim_paper_rows.csv",
    log:
        "results/logs/bench/sim_paper_rows.log",
    params:
        spec=config.get("benchmarks", {}).get("sim_paper_rows", {}),
    threads: 1  # simulated times: deterministic, whatever else runs
    script:
        "../scripts/bench_sim_paper_rows.py"


# sensitivity_sweep.csv (target studies, not bench: 332 short simulations, ~4 min on 2 cores): every simulated speed claim
#   re-simulated at both ends of each range of distrepro_wf/claims/sensitivity.py, its verdict there against the
#   closed form's (distrepro_wf/claims/sweep.py; settings benchmarks.sensitivity_sweep: simbench.DEFAULTS).
from distrepro_wf.bench import simbench as _simbench
from distrepro_wf.claims import sweep as _sweep

try:
    # every simulated benchmark's settings, checked with the config before any job: unknown keys,
    # wrong types and values out of range (simbench.RANGES) are refused naming the key and the range
    for _name in _simbench.DEFAULTS:
        _simbench.bench_spec(_name, config.get("benchmarks", {}).get(_name))
    SWEEP_SPEC = _simbench.bench_spec("sensitivity_sweep", config.get("benchmarks", {}).get("sensitivity_sweep"))
    _sweep.chosen(SWEEP_SPEC["claims"], PUBLISHED.claims)  # an unknown claim: refused before any job
except ConfigError as e:
    raise WorkflowError(f"invalid configuration: {e}") from None


rule sensitivity_sweep:
    input:
        published=PUBLISHED_FILES,  # compare.smk
    output:
        "results/bench/sensitivity_sweep.csv",
    log:
        "results/logs/bench/sensitivity_sweep.log",
    params:
        spec=SWEEP_SPEC,
        config=config,
    threads: 64  # simulations at once: everything there is (Snakemake scales it down to --cores)
    script:
        "../scripts/sensitivity_sweep.py"


rule bench_sim_scale:
    output:
        "results/bench/sim_scale.csv",
    log:
        "results/logs/bench/sim_scale.log",
    params:
        spec=config.get("benchmarks", {}).get("sim_scale", {}),
    threads: 64  # wall times: the machine to itself (Snakemake scales it down to --cores)
    script:
        "../scripts/bench_sim_scale.py"


rule bench_sim_vs_real:
    output:
        "results/bench/sim_vs_real.csv",
    log:
        "results/logs/bench/sim_vs_real.log",
    params:
        spec=config.get("benchmarks", {}).get("sim_vs_real", {}),
        workloads=config["workloads"],
        calibration="results/bench/sim_calibration.json",  # the measured profile's cache, kept between runs
    threads: 64  # real ranks, one per core, and nothing else
    script:
        "../scripts/bench_sim_vs_real.py"


from distrepro_wf.bench import netnsbench

try:  # unknown keys, and values out of range (netnsbench.RANGES: a bandwidth > 0), refused before any job
    netnsbench.bench_spec(config.get("benchmarks", {}).get("sim_vs_netns"))
except ConfigError as e:
    raise WorkflowError(f"invalid configuration: {e}") from None


# sim_vs_netns.csv (a target of its own: it needs root): every method on real ranks, each a host in a
# network namespace of its own, links shaped by tc tbf, against SimGrid on the same bandwidth and the
# measured latency; netns_link.csv: the testbed's latency, payload rate and gloo's per-message overhead.
#   snakemake --cores 2 bench_sim_vs_netns
rule bench_sim_vs_netns:
    output:
        table="results/bench/sim_vs_netns.csv",
        link="results/bench/netns_link.csv",
    log:
        "results/logs/bench/sim_vs_netns.log",
    params:
        spec=config.get("benchmarks", {}).get("sim_vs_netns", {}),
    threads: 64  # real ranks sleep through their compute, but share the cores: nothing else beside them
    script:
        "../scripts/bench_sim_vs_netns.py"


from distrepro_wf.bench import planverify

try:  # unknown keys, and values out of range (planverify.RANGES), refused before any job
    planverify.bench_spec(config.get("benchmarks", {}).get("plan_verify_netns"))
except ConfigError as e:
    raise WorkflowError(f"invalid configuration: {e}") from None


# plan_verify_netns.csv (a target of its own: it needs root; issue 33's benchmark): per bandwidth, the
# namespace testbed probed (impls.bench.probe), a plan made on the probe's file, and the plan's first
# methods and AR-SGD run on the testbed's real ranks (distrepro_wf.plan.verify): predicted vs measured
# step time per method, within 15 %, and whether the order agrees; _summary.csv: per cell.
#   snakemake --cores 2 bench_plan_verify_netns
rule bench_plan_verify_netns:
    output:
        table="results/bench/plan_verify_netns.csv",
        summary="results/bench/plan_verify_netns_summary.csv",
    log:
        "results/logs/bench/plan_verify_netns.log",
    params:
        spec=config.get("benchmarks", {}).get("plan_verify_netns", {}),
        workdir="results/bench/runs/plan_verify_netns",  # probes, plans and runs, kept for inspection
    threads: 64  # real ranks sleep through their compute, but share the cores: nothing else beside them
    script:
        "../scripts/bench_plan_verify_netns.py"


rule bench_compression:
    output:
        "results/bench/compression_throughput.csv",
    log:
        "results/logs/bench/compression_throughput.log",
    params:
        spec=config.get("benchmarks", {}).get("compression", {}),
    threads: 64  # "all threads" is what Snakemake scales this down to (--cores)
    script:
        "../scripts/bench_compression.py"


from distrepro_wf.bench import wlbench

WLBENCH_SPEC = wlbench.bench_spec(config.get("benchmarks", {}).get("workload_throughput"))  # refused before any job


rule bench_workload_throughput:
    input:
        wlbench.config_files(WLBENCH_SPEC),  # the workloads are read from these
    output:
        "results/bench/workload_throughput.csv",
    log:
        "results/logs/bench/workload_throughput.log",
    params:
        spec=config.get("benchmarks", {}).get("workload_throughput", {}),
    threads: 64  # "all threads" is what Snakemake scales this down to (--cores)
    script:
        "../scripts/bench_workload_throughput.py"


rule bench_ps:
    input:
        runs="results/tables/ps_modes/runs.csv",
    output:
        throughput="results/bench/ps_server_throughput.csv",
        tta="results/bench/ps_tta_vs_sync.csv",
    log:
        "results/logs/bench/ps.log",
    params:
        spec=config.get("benchmarks", {}).get("ps", {}),
        workloads=config["workloads"],
    threads: 64  # everything there is (Snakemake scales it down to --cores)
    script:
        "../scripts/bench_ps.py"


# The survey's all-reduce study (config/allreduce_study.yaml; distrepro_wf/bench/arstudy.py), a target
# of its own (the 256-node rings take minutes; not in `bench`):  snakemake --cores 2 allreduce_study
# allreduce_study.csv: every algorithm's time beside its alpha-beta time (simulated 2..256 nodes on
#   10 GbE and InfiniBand; real gloo ranks on loopback); allreduce_winners.csv: which wins where;
# allreduce_claims.csv (+ _settings): the survey's statements checked; the figure beside them.
ARSTUDY_CONFIG = "config/allreduce_study.yaml"
from distrepro_wf.bench import arstudy


rule allreduce_study:
    input:
        spec=ARSTUDY_CONFIG,
        numbers=PUBLISHED_FILES[0],  # compare.smk: config/published/numbers.csv (the claims' sources)
        sim=lambda wc: expand("results/bench/allreduce_study/sim_{platform}.json", platform=arstudy.platforms(ARSTUDY_CONFIG)),
        real="results/bench/allreduce_study/real.json",
    output:
        table="results/bench/allreduce_study.csv",
        winners="results/bench/allreduce_winners.csv",
        grid="results/bench/allreduce_winners_grid.csv",
        claims="results/bench/allreduce_claims.csv",
        settings="results/bench/allreduce_claims_settings.csv",
        figure="reports/figures/allreduce_study.png",
    log:
        "results/logs/bench/allreduce_study.log",
    script:
        "../scripts/allreduce_study.py"


rule allreduce_study_sim:
    input:
        spec=ARSTUDY_CONFIG,
    output:
        "results/bench/allreduce_study/sim_{platform}.json",
    log:
        "results/logs/bench/allreduce_study_sim_{platform}.log",
    threads: 1  # simulated times: deterministic, whatever else runs
    script:
        "../scripts/allreduce_study_runs.py"


rule allreduce_study_real:
    input:
        spec=ARSTUDY_CONFIG,
    output:
        "results/bench/allreduce_study/real.json",
    log:
        "results/logs/bench/allreduce_study_real.log",
    threads: 64  # real ranks, one per core, and nothing else (Snakemake scales it down to --cores)
    script:
        "../scripts/allreduce_study_runs.py"


rule bench_katyusha_x:
    input:
        runs="results/tables/katyusha_x/runs.csv",
    output:
        "results/bench/katyusha_x.csv",
    log:
        "results/logs/bench/katyusha_x.log",
    script:
        "../scripts/bench_katyusha_x.py"
