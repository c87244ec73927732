# One torchrun launch per group (experiment, nodes) runs its methods x stragglers x seeds
# one after another (process start and `import torch` are paid once per group).  A changed
# run config reruns the group (params trigger), where only runs without a verified complete
# result for that exact config are executed.  A failed run still gets outcome.json (status
# failed, with its kind) so tables and report list it; it never enters a table.  The retry
# token (distrepro_wf/pipeline/runs.py) makes the next invocation retry a group with a crashed,
# timed-out, not-started or damaged run; a config error or divergence waits for a new config.
# launcher.timeout_s is per run; the job's runtime (Slurm) allows it for every member, times
# the attempt (a job Slurm killed at its time limit gets twice as long when retried).
#
# Under the Slurm profile each train job is one Slurm job sized by its launch
# (distrepro_wf.pipeline.launch.job_resources, from the config's launcher section): nodes, tasks,
# cpus_per_task, mem_mb and GPUs; a simulated group is one task sized by memory.  Site
# settings (partition, account) come from the profile; any resource can be overridden on
# the command line (--set-resources train:mem_mb=64000).  Aggregation and report rules
# run on the submitting machine (localrules, Snakefile).

from distrepro_wf.pipeline import dataprep


rule train:
    input:
        # data the group's runs need made first: whatever a data rule registered (distrepro_wf.pipeline.dataprep;
        # e.g. translation.smk's fairseq-preprocess)
        lambda wc: dataprep.inputs(group_members(wc).values()),
    output:
        LAUNCH,
    log:
        "results/logs/train/{experiment}/n{nodes}.log",
    params:
        members=group_members,
        worlds=group_worlds,  # common.smk
        launcher=LAUNCHER,
        retry=retry_token,
    threads: group_processes  # one core per rank (a simulation: one); scaled down to --cores
    resources:
        ranks=group_processes,
        runtime=launch_runtime(lambda wc: len(group_members(wc))),  # common.smk
        **TRAIN_SLURM_RESOURCES,  # common.smk
    script:
        "../scripts/train.py"
