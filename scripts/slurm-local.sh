#!/usr/bin/env bash
# A real single-node Slurm on this machine, for tests and for trying the Slurm profile:
#
#   bash scripts/slurm-local.sh start    # install if missing, configure, start, wait until idle
#   bash scripts/slurm-local.sh status   # daemons and node state (exit 1 if not up)
#   bash scripts/slurm-local.sh stop     # cancel its jobs, stop the daemons
#
# Needs root (the daemons run as root) and, the first time, apt (Debian's slurm-wlm and
# munge).  What it writes is under $DISTREPRO_SLURM_DIR (default /tmp/distrepro-slurm):
# slurm.conf, cgroup.conf, the munge key, state, spool and logs.  No systemd: the
# daemons are background processes, found again by their pid files there.
#
# The cluster: one node "localhost" (127.0.0.1: loopback only) with this machine's CPUs
# (DISTREPRO_SLURM_CPUS declares more, to let small jobs run side by side) and 90 % of its
# memory, one partition "debug", no accounting.  Facts it is built on:
# * slurmd runs configless (slurmctld has enable_configless; slurmd -N localhost
#   --conf-server 127.0.0.1:6817) and caches the config in its spool, where client
#   commands on this machine find it (/run/slurm/conf).  That is what makes srun work
#   *inside* jobs: Snakemake's Slurm plugin runs jobs through an srun that drops every
#   SLURM_* variable, SLURM_CONF included, so a config given only through SLURM_CONF
#   fails there.  (It refuses to start where /etc/slurm/slurm.conf exists: a real
#   cluster's config, which client commands would read first.)  `stop` removes that
#   cache link: left behind, every Slurm client command, and so every Snakemake start
#   (its Slurm plugin asks `scontrol show config`), waits ~10 s for a dead controller.
# * munged listens on its default socket (/run/munge/munge.socket.2): slurmd
#   authenticates before it has a config that could name another one.  A munged already
#   serving that socket is used as it is (and left running by `stop`).
# * No accounting (no slurmdbd): sacct exists but fails, so Snakemake's Slurm plugin must
#   poll squeue (--slurm-status-command squeue).  MinJobAge=300 keeps a finished job and
#   its state (COMPLETED, FAILED, TIMEOUT, CANCELLED) visible to squeue for 5 minutes.
# * Processes are tracked with cgroups (proctrack/cgroup, task/cgroup; memory is a
#   consumable resource and limited): a cancelled or timed-out job's processes all die,
#   even one its shell orphaned.  Where cgroups are unusable it falls back to
#   proctrack/linuxproc + task/none (DISTREPRO_SLURM_PROCTRACK=linuxproc forces it),
#   which loses processes reparented to init.
# * Several "nodes" on this one node: a job asks for them as tasks with --overcommit
#   (launcher.emulate_nodes, distrepro_wf/pipeline/launch.py); more tasks than CPUs otherwise wait
#   forever.
set -euo pipefail
DIR=${DISTREPRO_SLURM_DIR:-/tmp/distrepro-slurm}
SCRIPTS=$(cd "$(dirname "$0")" && pwd)  # system-packages.sh: the one place a Debian package is installed
PORT_CTLD=6817
NODE=localhost
PARTITION=debug
MUNGE_SOCKET=/run/munge/munge.socket.2
export SLURM_CONF="$DIR/slurm.conf"  # this script's own client commands

die() { echo "slurm-local: $*" >&2; exit 1; }
pid_of() { [ -s "$DIR/$1.pid" ] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null && cat "$DIR/$1.pid"; }
node_state() { sinfo -h -n "$NODE" -o %t 2>/dev/null | head -n1; }

install() {
  local missing=""
  for c in slurmctld slurmd sbatch srun squeue munged munge; do command -v $c >/dev/null || missing="$missing $c"; done
  [ -z "$missing" ] && return
  echo "slurm-local: missing:$missing" >&2
  # the packages' own services are not started (no systemd); their daemons are run below
  bash "$SCRIPTS/system-packages.sh" slurm-wlm munge
}

write_config() {  # $1: proctrack plugin (cgroup or linuxproc)
  mkdir -p "$DIR"/{munge,state,spool,log}
  chmod 700 "$DIR/munge"
  [ -s "$DIR/munge/munge.key" ] || { head -c 1024 /dev/urandom > "$DIR/munge/munge.key"; chmod 400 "$DIR/munge/munge.key"; }
  local hw cpus mem extra="" task=none
  hw=$(slurmd -C | head -n1)
  cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
  mem=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
  [ -n "$cpus" ] && [ -n "$mem" ] || die "cannot read CPUs and memory from 'slurmd -C': $hw"
  if [ -n "${DISTREPRO_SLURM_CPUS:-}" ] && [ "$DISTREPRO_SLURM_CPUS" != "$cpus" ]; then
    cpus=$DISTREPRO_SLURM_CPUS extra="SlurmdParameters=config_overrides"  # more CPUs than there are
  fi
  [ "$1" = cgroup ] && task=cgroup
  cat > "$DIR/slurm.conf" <<EOF
# written by scripts/slurm-local.sh: a single-node loopback cluster
ClusterName=distrepro
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT_CTLD
SlurmdPort=$((PORT_CTLD + 1))
SlurmctldParameters=enable_configless
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/$1
TaskPlugin=task/$task
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
MpiDefault=none
ReturnToService=2
MinJobAge=300
KillWait=5
InactiveLimit=0
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
$extra
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE CPUs=$cpus RealMemory=$((mem * 9 / 10)) State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  cat > "$DIR/cgroup.conf" <<EOF
# written by scripts/slurm-local.sh (read with proctrack/cgroup only)
CgroupPlugin=autodetect
ConstrainCores=no
ConstrainRAMSpace=yes
ConstrainDevices=no
EOF
}

start_daemons() {  # $1: proctrack plugin; returns 1 if the node does not come up idle in 30 s
  stop_daemons
  rm -rf "$DIR/state" "$DIR/spool"
  write_config "$1"
  if timeout 5 scontrol ping 2>/dev/null | grep -q UP; then
    die "a Slurm controller already answers on port $PORT_CTLD (another cluster of this script, with another DISTREPRO_SLURM_DIR?); stop it first"
  fi
  if ! munge -n -s "$MUNGE_SOCKET" 2>/dev/null | unmunge -s "$MUNGE_SOCKET" >/dev/null 2>&1; then
    mkdir -p "$(dirname "$MUNGE_SOCKET")"
    chmod 755 "$(dirname "$MUNGE_SOCKET")"
    munged --force --key-file="$DIR/munge/munge.key" --socket="$MUNGE_SOCKET" \
      --pid-file="$DIR/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
  fi
  slurmctld -f "$DIR/slurm.conf" -c -i
  for _ in $(seq 50); do
    timeout 5 scontrol ping 2>/dev/null | grep -q UP && break
    sleep 0.2
  done
  # configless: slurmd fetches the config from slurmctld (and caches it for clients here)
  slurmd -N "$NODE" --conf-server "127.0.0.1:$PORT_CTLD" || return 1
  local state=""
  for _ in $(seq 150); do
    state=$(node_state)
    [ "$state" = idle ] && return 0
    sleep 0.2
  done
  echo "slurm-local: node $NODE is '${state:-unreachable}' after 30 s with proctrack/$1; logs follow" >&2
  scontrol show node "$NODE" >&2 || true
  tail -n 20 "$DIR"/log/*.log >&2 || true
  return 1
}

start() {
  [ "$(id -u)" = 0 ] || die "needs root (the Slurm daemons run as root here)"
  [ -e /etc/slurm/slurm.conf ] && die "/etc/slurm/slurm.conf exists (a real cluster's config?): client commands would read it instead of this local cluster's"
  if [ -n "$(pid_of slurmctld || true)" ] && [ "$(node_state)" = idle ]; then
    echo "slurm-local: already running ($DIR)"; return
  fi
  install
  local t0=$SECONDS track=${DISTREPRO_SLURM_PROCTRACK:-cgroup}
  if ! start_daemons "$track"; then
    [ "$track" = cgroup ] && [ -z "${DISTREPRO_SLURM_PROCTRACK:-}" ] || { stop_daemons; die "Slurm did not come up"; }
    echo "slurm-local: cgroups unusable here; falling back to proctrack/linuxproc" >&2
    track=linuxproc
    start_daemons "$track" || { stop_daemons; die "Slurm did not come up"; }
  fi
  echo "slurm-local: node $NODE idle after $((SECONDS - t0)) s (partition $PARTITION, proctrack/$track, config $DIR/slurm.conf)"
}

stop_daemons() {
  local p
  for d in slurmd slurmctld munged; do
    p=$(pid_of $d || true)
    [ -n "$p" ] || continue
    kill "$p" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null || true
  done
  if [ "$(readlink /run/slurm/conf 2>/dev/null)" = "$DIR/spool/conf-cache" ]; then rm -f /run/slurm/conf; fi
  return 0
}

stop() {
  if [ -n "$(pid_of slurmctld || true)" ]; then
    # cancel this cluster's jobs first: their step daemons would outlive slurmd
    local states=PENDING,RUNNING,SUSPENDED,COMPLETING jobs
    jobs=$(squeue -h -t $states -o %i 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      for _ in $(seq 100); do
        [ -z "$(squeue -h -t $states -o %i 2>/dev/null)" ] && break
        sleep 0.2
      done
    fi
  fi
  stop_daemons
  echo "slurm-local: stopped"
}

status() {
  local ok=0 p
  for d in munged slurmctld slurmd; do
    if p=$(pid_of $d); then echo "$d: running (pid $p)"; else echo "$d: not running"; [ $d = munged ] || ok=1; fi
  done
  if [ $ok = 0 ]; then sinfo -N -o "%N %P %t %c %m"; squeue; fi
  return $ok
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
