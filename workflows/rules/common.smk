# Config validation, the expanded run grid and small shared helpers.
import os
import sys
import time
from pathlib import Path
from functools import lru_cache
from types import SimpleNamespace

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from distrepro_wf.pipeline import collect as wfcollect
from distrepro_wf.pipeline import config as wfconfig
from distrepro_wf.pipeline import launch as wflaunch
from distrepro_wf.pipeline import studies as wfstudies
from distrepro_wf.plan import checks as wfplan
from distrepro_wf.report import plots as wfplots
from distrepro_wf.pipeline.runs import launch_retry_token
from distrepro_wf.pipeline.timing import append_pipeline_row
from impls.errors import ConfigError

#: `snakemake --cores 2 studies`: the default config and every study config (pipeline/studies.py)
STUDY_CONFIGS = wfstudies.STUDY_CONFIGS
# Snakemake gives a Snakefile no access to the command line's targets while it is read: the
# main process looks at its own arguments; the jobs it spawns (a cluster's) get the files as
# --configfiles (set below), as if the user had named them.
STUDIES = workflow.is_main_process and "studies" in sys.argv[1:]
if STUDIES and workflow.overwrite_configfiles:
    raise WorkflowError("invalid configuration: target studies runs its own config files "
                        f"({', '.join(STUDY_CONFIGS)}); run it without --configfile")
CONFIG_FILES = list(workflow.overwrite_configfiles) or (
    [f"{workflow.basedir}/{f}" for f in STUDY_CONFIGS] if STUDIES else [f"{workflow.basedir}/config/config.yaml"])
#: the config files as a user names them (commands in the report)
USER_CONFIG_FILES = [str(f) for f in workflow.overwrite_configfiles or []] or (STUDY_CONFIGS if STUDIES else [])
try:
    # strictly, first: a key defined twice (Snakemake's loader keeps the last silently)
    # or a YAML syntax error names the file, the line and the key
    wfconfig.check_config_files(CONFIG_FILES)
except ConfigError as e:
    raise WorkflowError(f"invalid configuration: {e}") from None

if not workflow.overwrite_configfiles:
    for _f in CONFIG_FILES:  # one file (config/config.yaml), or the studies' (merged in order)
        workflow.configfile(_f)
    if STUDIES:  # spawned jobs read the same files
        workflow.config_settings.configfiles = [Path(f) for f in CONFIG_FILES]


try:
    RUNS = wfplan.validate(config)  # experiments, plan, probe: the key and the allowed values
    for _e in config.get("experiments") or {}:  # experiments.<e>.figures: the report's registered figures only
        wfplots.experiment_figures(config, _e)
except ConfigError as e:
    raise WorkflowError(f"invalid configuration: {e}") from None
validate(config, "../schemas/config.schema.yaml")

if config.get("launcher", {}).get("kind", "local") != "slurm":  # Slurm jobs get the CPUs they ask for
    for warning in wfconfig.oversubscription_warnings(RUNS, os.cpu_count() or 1, config=config):
        print(f"WARNING: {warning}", file=sys.stderr)

EXPERIMENTS = sorted({r.experiment for r in RUNS})
_T0 = {}


wildcard_constraints:
    experiment="[a-z][a-z0-9_]*",
    method="[a-z][a-z0-9_]*",
    nodes=r"\d+",
    straggler="[A-Za-z0-9_]+",
    seed=r"\d+",


LAUNCH = "results/launches/{experiment}/n{nodes}.json"


def group_members(wc):
    """{run directory: resolved config} of launch group (experiment, nodes)."""
    return {f"results/runs/{r.path}": wfconfig.run_config(config, r) for r in RUNS
            if (r.experiment, r.nodes) == (wc.experiment, int(wc.nodes))}


def group_worlds(wc):
    """{run directory: processes its launch starts (None: simulated)} of launch group (experiment,
    nodes): the train job need not import torch to work them out (distrepro_wf.pipeline.runs.execute_group)."""
    return {d: wflaunch.launch_world(c) for d, c in group_members(wc).items()}


def group_processes(wc):
    """Cores a launch group uses: one per rank, or one for a group of simulated runs
    (each simulation is one process, run one after another)."""
    members = group_members(wc).values()
    return 1 if all(wfconfig.is_simulated(m) for m in members) else int(wc.nodes)


def retry_token(wc):
    """Changes (params rerun trigger) once after a failed launch, so the group is retried."""
    return launch_retry_token(LAUNCH.format(experiment=wc.experiment, nodes=wc.nodes))


def launches(experiment):
    return [LAUNCH.format(experiment=experiment, nodes=n) for n in sorted({r.nodes for r in RUNS
                                                                           if r.experiment == experiment})]


LAUNCHER = config.get("launcher", {})


@lru_cache(maxsize=None)
def _train_resources(experiment, nodes):
    members = group_members(SimpleNamespace(experiment=experiment, nodes=nodes))
    return wflaunch.job_resources([wflaunch.launch_world(c) for c in members.values()], LAUNCHER)


def _train_resource(key):
    return lambda wc: _train_resources(wc.experiment, wc.nodes).get(key)


def launch_resources(worlds):
    """Slurm resources of a job that launches with the config's launcher, sized for the largest of
    ``worlds`` (processes of a launch; None: a simulation, one process): what a train job of those
    launches asks for (distrepro_wf.pipeline.launch.job_resources; none unless launcher.kind: slurm).
    The plan's and probe's jobs (plan.smk, probe.smk) launch as train does, so they are sized so."""
    try:
        return {k: v for k, v in wflaunch.job_resources(worlds, LAUNCHER).items() if v is not None}
    except ValueError as e:
        raise WorkflowError(f"invalid configuration: {e}") from None


def launch_runtime(runs):
    """Slurm runtime (minutes) of a job that launches ``runs`` runs (a number, or a function of the
    job's wildcards) with the config's launcher: each may take launcher.timeout_s, plus 5 minutes
    (Snakemake and torchrun starting), times the attempt (a job Slurm killed at its time limit gets
    twice as long when retried).  Train, probe and verify jobs (train.smk, probe.smk, plan.smk)."""
    timeout_s = int(LAUNCHER.get("timeout_s", 3600))
    return lambda wc, attempt: attempt * ((runs(wc) if callable(runs) else int(runs)) * timeout_s // 60 + 5)


# Slurm resources of each train job (launcher.kind: slurm; distrepro_wf.pipeline.launch.job_resources);
# every launch must fit the layout (its ranks split evenly over the hosts it needs)
TRAIN_SLURM_RESOURCES = {}
if LAUNCHER.get("kind") == "slurm":
    TRAIN_SLURM_RESOURCES = {k: _train_resource(k) for k in wflaunch.RESOURCE_KEYS}
    try:
        wflaunch.check_layouts([w for w in (wflaunch.launch_world(wfconfig.run_config(config, r)) for r in RUNS)
                                if w is not None], LAUNCHER)
    except ValueError as e:
        raise WorkflowError(f"invalid configuration: {e}") from None


def check_executor(name):
    """Under the Slurm executor the train jobs are sized by launcher.kind: slurm; with kind
    local every group would be a one-node job of default size."""
    if name == "slurm" and LAUNCHER.get("kind", "local") != "slurm":
        raise WorkflowError(f"invalid configuration: launcher.kind: {LAUNCHER.get('kind', 'local')!r} under the "
                            "Slurm executor (--profile profiles/slurm); set launcher.kind: slurm, with "
                            "gpus_per_node, backend, cpus_per_rank and mem_mb_per_rank, so that each train job asks "
                            "for the nodes it needs")


def record_pipeline_start():
    _T0["t"] = time.time()


def record_pipeline_end(status):
    try:
        cores = workflow.cores
    except WorkflowError:  # a cluster executor (Slurm profile) has no local core count
        cores = ""
    if "t" in _T0:
        append_pipeline_row("results/bench/pipeline_wall.csv", _T0["t"], time.time(), status, cores, len(RUNS))



def tables_token(experiment):
    """Rule collect's params.rebuild: a table of the experiment that fails its own check (cut in
    place: a half row, fewer rows than the runs on disk) is set aside, which changes this token,
    so that collect rebuilds it (and what was made from it) rather than anyone trusting it:
    Snakemake regenerates neither a missing intermediate file nor one cut in place (its
    modification time is new).  See distrepro_wf.pipeline.collect.rebuild_token."""
    return wfcollect.rebuild_token(f"results/tables/{experiment}", launches(experiment), change=executing())


def executing():
    """Whether this invocation runs jobs (and may set damaged tables aside): not a dry run
    (-n), --touch, --summary, --report, --lint or a DAG listing (no executor then), nor a job
    a cluster executor spawned (the main process checked the tables before submitting it)."""
    return (workflow.is_main_process and workflow.executor_plugin is not None and not workflow.dryrun
            and not workflow.touch)
