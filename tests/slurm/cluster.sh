#!/bin/sh
# A single-node SLURM cluster on loopback for tests/test_slurm_cluster.py (root only; Debian's slurm-wlm, munge).
#   tests/slurm/cluster.sh start    write /etc/slurm/slurm.conf + gres.conf, start munged, slurmctld, slurmd
#   tests/slurm/cluster.sh stop     stop the daemons this script started (by their pid files) and remove the
#                                   config it wrote: a slurm.conf naming a dead controller makes every SLURM
#                                   client call (and so every snakemake start, via the plugin) wait ~9 s
# slurm.conf must sit at /etc/slurm/ (the executor plugin drops SLURM_CONF before srun). No accounting
# database: use --slurm-status-command squeue and --slurm-no-account. One fake GPU (h100) is declared so that
# GPU jobs (gpu + gpu_model) can be scheduled.
set -eu
STATE=/var/run/amd-test-slurm
HOST=$(hostname)

start() {
    if sinfo -h >/dev/null 2>&1; then
        return 0    # a cluster already answers: use it as it is
    fi
    mkdir -p "$STATE" /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
    fi
    chown munge:munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
    chmod 400 /etc/munge/munge.key
    if ! munge -n >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
        cp /run/munge/munged.pid "$STATE/munged.pid"
    fi
    cpus=$(nproc)
    memory=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
    cat > /etc/slurm/slurm.conf <<CONF
ClusterName=amdtest
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
MpiDefault=none
GresTypes=gpu
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory Gres=gpu:h100:1 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
    echo "NodeName=$HOST Name=gpu Type=h100 File=/dev/null" > /etc/slurm/gres.conf
    touch "$STATE/wrote-config"
    /usr/sbin/slurmctld
    /usr/sbin/slurmd
    for _ in $(seq 60); do
        if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
            return 0
        fi
        sleep 1
    done
    echo "slurm did not come up; see /var/log/slurm/" >&2
    return 1
}

stop() {
    for daemon in slurmd slurmctld munged; do
        if [ -s "$STATE/$daemon.pid" ]; then
            kill "$(cat "$STATE/$daemon.pid")" 2>/dev/null || true
            rm -f "$STATE/$daemon.pid"
        fi
    done
    if [ -e "$STATE/wrote-config" ]; then
        rm -f /etc/slurm/slurm.conf /etc/slurm/gres.conf "$STATE/wrote-config"
    fi
}

"$1"
