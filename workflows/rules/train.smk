# One torchrun launch per group (experiment, nodes) runs its methods x stragglers x seeds
# one after another (process start and `import torch` are paid once per group).  A changed
# run config reruns the group (params trigger), where only runs without a verified complete
# result for that exact config are executed.  A failed run still gets outcome.json (status
# failed, with its kind) so tables and report list it; it never enters a table.  The retry
# token (distrepro_wf/runs.py) makes the next invocation retry a group with a crashed,
# timed-out, not-started or damaged run; a config error or divergence waits for a new config.
# launcher.timeout_s is per run; the job's runtime (Slurm) allows it for every member.


rule train:
    output:
        LAUNCH,
    log:
        "results/logs/train/{experiment}/n{nodes}.log",
    params:
        members=group_members,
        launcher=config.get("launcher", {}),
        retry=retry_token,
    threads: group_processes  # one core per rank (a simulation: one); scaled down to --cores
    resources:
        ranks=group_processes,
        runtime=lambda wc: len(group_members(wc)) * int(config.get("launcher", {}).get("timeout_s", 3600)) // 60
        + 5,
    script:
        "../scripts/train.py"
