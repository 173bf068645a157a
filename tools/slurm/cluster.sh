#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine (Debian/Ubuntu, root or sudo, no systemd needed).
#
#   bash tools/slurm/cluster.sh start  [STATE_DIR]   # install if needed, start munged/slurmctld/slurmd, verify
#   bash tools/slurm/cluster.sh stop   [STATE_DIR]   # stop slurmd and slurmctld of STATE_DIR (munged stays)
#   bash tools/slurm/cluster.sh status [STATE_DIR]   # sinfo and squeue
#
# STATE_DIR defaults to /tmp/privkit-slurm; slurm.conf, state, spool, logs and pid files all live there
# (nothing is written to /etc/slurm). `start` prints `export SLURM_CONF=STATE_DIR/slurm.conf` as its last
# line of stdout, so `eval "$(bash tools/slurm/cluster.sh start | tail -n 1)"` sets up the caller.
set -euo pipefail

CMD=${1:-}
STATE_DIR=${2:-/tmp/privkit-slurm}
WAIT_S=${PRIVKIT_SLURM_WAIT_S:-60}

say() { echo "cluster.sh: $*" >&2; }
die() { echo "cluster.sh: $*" >&2; exit 1; }

usage() {
    echo "usage: bash $0 {start|stop|status} [STATE_DIR]   (STATE_DIR defaults to /tmp/privkit-slurm)" >&2
    exit 2
}

[[ $CMD == start || $CMD == stop || $CMD == status ]] || usage
if [[ $CMD == start ]]; then mkdir -p "$STATE_DIR"; fi
if [[ ! -d $STATE_DIR ]]; then
    [[ $CMD == stop ]] && exit 0
    die "no cluster configured in $STATE_DIR (run: bash $0 start $STATE_DIR)"
fi
STATE_DIR=$(cd "$STATE_DIR" && pwd -P)
CONF=$STATE_DIR/slurm.conf
export SLURM_CONF=$CONF
export PATH=$PATH:/usr/sbin:/sbin
NODE=$(hostname -s)

# --- privilege -----------------------------------------------------------------------------------------
if [[ $(id -u) -eq 0 ]]; then
    AS_ROOT=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    AS_ROOT=(sudo -n -E)
else
    AS_ROOT=(false)
fi
need_root() {  # $1: what for
    [[ ${AS_ROOT[0]:-} != false ]] ||
        die "Slurm cannot be started: $1 needs root, and this is uid $(id -u) without passwordless sudo."
}
root() { "${AS_ROOT[@]}" "$@"; }

# --- pid files -----------------------------------------------------------------------------------------
pid_is() {  # $1: pid, $2: expected command name; an unreaped zombie counts as dead
    [[ $1 =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null &&
        [[ $(cat "/proc/$1/comm" 2>/dev/null) == "$2" ]] &&
        ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}
alive() {  # $1: pid file, $2: expected command name
    [[ -s $1 ]] && pid_is "$(cat "$1" 2>/dev/null)" "$2"
}

stop_daemon() {  # $1: name
    local pidf=$STATE_DIR/$1.pid pid i
    if alive "$pidf" "$1"; then
        pid=$(cat "$pidf")
        root kill "$pid" 2>/dev/null || true
        for ((i = 0; i < 150; i++)); do pid_is "$pid" "$1" || break; sleep 0.1; done
        if pid_is "$pid" "$1"; then say "$1 (pid $pid) ignores SIGTERM: SIGKILL"; root kill -9 "$pid" 2>/dev/null || true; fi
        say "stopped $1 (pid $pid)"
    fi
    root rm -f "$pidf"
}

node_state() { sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n 1 | tr -d '*~#!%$@^-' || true; }

show_logs() {
    local f
    for f in "$STATE_DIR"/slurmctld.log "$STATE_DIR"/slurmd.log; do
        [[ -f $f ]] || continue
        echo "----- tail of $f -----" >&2
        tail -n 30 "$f" >&2
    done
}

# --- commands ------------------------------------------------------------------------------------------
if [[ $CMD == stop ]]; then
    stop_daemon slurmd
    stop_daemon slurmctld
    exit 0
fi

if [[ $CMD == status ]]; then
    command -v sinfo >/dev/null 2>&1 || die "sinfo is not installed"
    [[ -f $CONF ]] || die "no cluster configured in $STATE_DIR (run: bash $0 start $STATE_DIR)"
    echo "SLURM_CONF=$CONF"
    echo "slurmctld: $(alive "$STATE_DIR/slurmctld.pid" slurmctld && echo "up (pid $(cat "$STATE_DIR/slurmctld.pid"))" || echo down)"
    echo "slurmd:    $(alive "$STATE_DIR/slurmd.pid" slurmd && echo "up (pid $(cat "$STATE_DIR/slurmd.pid"))" || echo down)"
    if alive "$STATE_DIR/slurmctld.pid" slurmctld; then
        sinfo || true
        squeue || true
    fi
    exit 0
fi

# start --------------------------------------------------------------------------------------------------
T0=$(date +%s.%N)

# 1. install
missing=()
for b in slurmctld slurmd munged sbatch; do command -v "$b" >/dev/null 2>&1 || missing+=("$b"); done
if ((${#missing[@]})); then
    command -v apt-get >/dev/null 2>&1 ||
        die "Slurm cannot be started: ${missing[*]} missing and there is no apt-get to install slurm-wlm and munge."
    need_root "installing slurm-wlm and munge (missing: ${missing[*]})"
    say "installing slurm-wlm and munge (missing: ${missing[*]})"
    root apt-get update -qq >&2 || die "Slurm cannot be started: apt-get update failed."
    root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2 ||
        die "Slurm cannot be started: apt-get install slurm-wlm munge failed."
    for b in slurmctld slurmd munged sbatch; do
        command -v "$b" >/dev/null 2>&1 || die "Slurm cannot be started: $b still missing after apt-get install."
    done
fi

# The slurm.conf this machine needs (written to STATE_DIR in step 3).
CPUS=$(nproc)
MEM_MB=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
REAL_MB=$((MEM_MB * 9 / 10))   # slurmd drains a node that reports less memory than RealMemory
((REAL_MB > 0)) || REAL_MB=1
new_conf=$(cat <<EOF
# Written by tools/slurm/cluster.sh: a single-node cluster on $NODE. Do not edit (rewritten by start).
ClusterName=privkit
SlurmctldHost=$NODE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
MailProg=/bin/true
# No cgroup delegation in containers: track processes through /proc, no task confinement.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=1,sched_min_interval=100000
# No accounting database: sacct does not work, job states come from squeue.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
JobRequeue=1
KillWait=5
MinJobAge=300
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
Waittime=0
StateSaveLocation=$STATE_DIR/state
SlurmdSpoolDir=$STATE_DIR/spool
SlurmctldPidFile=$STATE_DIR/slurmctld.pid
SlurmdPidFile=$STATE_DIR/slurmd.pid
SlurmctldLogFile=$STATE_DIR/slurmctld.log
SlurmdLogFile=$STATE_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$NODE CPUs=$CPUS RealMemory=$REAL_MB State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
)
# Already up from this STATE_DIR with the node idle: nothing to do.
if [[ -f $CONF && $(cat "$CONF") == "$new_conf" ]] && alive "$STATE_DIR/slurmctld.pid" slurmctld && alive "$STATE_DIR/slurmd.pid" slurmd &&
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && [[ $(node_state) == idle || $(node_state) == mixed || $(node_state) == allocated ]]; then
    say "already up from $STATE_DIR (node $NODE $(node_state))"
    echo "export SLURM_CONF=$CONF"
    exit 0
fi
need_root "starting munged, slurmctld and slurmd"

# 2. munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    if ! root test -s /etc/munge/munge.key; then
        say "creating /etc/munge/munge.key"
        root mkdir -p /etc/munge
        if command -v mungekey >/dev/null 2>&1; then
            root mungekey --create --keyfile=/etc/munge/munge.key
        else
            root dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        fi
    fi
    root chown munge:munge /etc/munge /etc/munge/munge.key
    root chmod 0700 /etc/munge
    root chmod 0400 /etc/munge/munge.key
    root mkdir -p /run/munge /var/lib/munge /var/log/munge
    root chown munge:munge /run/munge /var/lib/munge /var/log/munge
    root chmod 0755 /run/munge
    say "starting munged"
    root runuser -u munge -- /usr/sbin/munged ||
        root runuser -u munge -- /usr/sbin/munged --force ||
        die "Slurm cannot be started: munged failed to start (see /var/log/munge/munged.log)."
    for ((i = 0; i < 50; i++)); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
    munge -n | unmunge >/dev/null || die "Slurm cannot be started: munged is running but munge -n | unmunge fails."
fi

# 3. slurm.conf (generated above)
mkdir -p "$STATE_DIR/state" "$STATE_DIR/spool"
if [[ ! -f $CONF ]] || [[ $(cat "$CONF") != "$new_conf" ]]; then
    # A changed config needs fresh daemons.
    stop_daemon slurmd
    stop_daemon slurmctld
    printf '%s\n' "$new_conf" > "$CONF"
fi

# 4. daemons. Slurm's ports (6817/6818) are per machine: refuse to start next to a cluster of another STATE_DIR.
foreign() {  # $1: daemon name; prints the command lines of its running processes not from this STATE_DIR
    local d pid
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        pid_is "$pid" "$1" || continue
        tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -qF -- "$CONF" && continue
        echo "$pid: $(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)"
    done
}
for d in slurmctld slurmd; do
    others=$(foreign "$d")
    [[ -z $others ]] || die "Slurm cannot be started: another $d is running (stop it first, e.g. bash $0 stop <its STATE_DIR>):
$others"
done
if ! alive "$STATE_DIR/slurmctld.pid" slurmctld; then
    say "starting slurmctld"
    root env SLURM_CONF="$CONF" slurmctld -f "$CONF" || { show_logs; die "slurmctld failed to start"; }
fi
# slurmd registers with slurmctld, so wait until it answers.
for ((i = 0; i < WAIT_S * 5; i++)); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done
scontrol ping 2>/dev/null | grep -q UP || { show_logs; die "slurmctld does not answer (scontrol ping)"; }
if ! alive "$STATE_DIR/slurmd.pid" slurmd; then
    say "starting slurmd"
    root env SLURM_CONF="$CONF" slurmd -f "$CONF" || { show_logs; die "slurmd failed to start"; }
fi

state=""
end=$(($(date +%s) + WAIT_S))
while (($(date +%s) < end)); do
    state=$(node_state)
    case $state in
        idle | mixed | allocated) break ;;
        down | drain | drained | draining | fail | failing)
            scontrol update nodename="$NODE" state=resume 2>/dev/null || true ;;
    esac
    alive "$STATE_DIR/slurmd.pid" slurmd || { show_logs; die "slurmd exited"; }
    alive "$STATE_DIR/slurmctld.pid" slurmctld || { show_logs; die "slurmctld exited"; }
    sleep 0.5
done
if [[ $state != idle && $state != mixed && $state != allocated ]]; then
    sinfo -N -l >&2 || true
    show_logs
    die "node $NODE is '${state:-unknown}', not idle, after ${WAIT_S}s"
fi

# 5. end-to-end check
rm -f "$STATE_DIR"/verify-*.out
jid=$(sbatch --parsable -J privkit-verify -o "$STATE_DIR/verify-%j.out" --wrap 'echo ok') ||
    { show_logs; die "sbatch failed"; }
jid=${jid%%;*}
out=$STATE_DIR/verify-$jid.out
end=$(($(date +%s) + WAIT_S))
until grep -qx ok "$out" 2>/dev/null; do
    if (($(date +%s) >= end)); then
        squeue -j "$jid" >&2 || true
        show_logs
        die "verification job $jid did not write ok to $out within ${WAIT_S}s"
    fi
    sleep 0.2
done
say "up: node $NODE $state, job $jid ran, $(awk -v t0="$T0" -v t1="$(date +%s.%N)" 'BEGIN {printf "%.1f", t1 - t0}')s"
echo "export SLURM_CONF=$CONF"
