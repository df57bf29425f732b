# shellcheck shell=bash
# tests/slurm/cluster.sh -- bring up a throw-away one-node Slurm cluster on
# this machine, for integration tests.  SOURCE this file; it only defines
# functions and does nothing at load time.
#
#   slurm_install          apt-get the Debian packages if missing (idempotent)
#   slurm_start DIR        configs/state/logs/munge under DIR, start munged,
#                          slurmctld, slurmd; wait until the node is idle;
#                          export SLURM_CONF (and SLURM_TEST_* helpers)
#   slurm_stop DIR         cancel jobs, stop the daemons BY PID, remove the
#                          slurm cgroups it left; idempotent, trap-safe
#
# Requirements: root, cgroup v1 hierarchies under /sys/fs/cgroup/<ctrl>
# (cpuset + freezer at least), Debian's slurm-wlm 22.05 + munge 0.5.
#
# Nothing is written outside DIR except:
#   * the cgroup v1 directories slurmd creates (/sys/fs/cgroup/<ctrl>/slurm*);
#     slurm_stop removes them (rmdir only -- never touches live cgroups);
#   * slurm_install may run apt-get (with a temporary /usr/sbin/policy-rc.d so
#     the packages' init scripts don't start system daemons; removed after).
#
# Tunables (environment, read by slurm_start):
#   SLURM_TEST_CTLD_PORT / SLURM_TEST_SLURMD_PORT   default: first free >= 16817
#   SLURM_TEST_TIMEOUT      seconds to wait for the node to go idle (default 30)
#   SLURM_TEST_EXTRA_CONF   extra lines appended to slurm.conf (e.g. TaskProlog=)
#   SLURM_TEST_DEBUG        SlurmctldDebug/SlurmdDebug level (default info)
#
# Exports after slurm_start: SLURM_CONF, SLURM_TEST_DIR, SLURM_TEST_NODE,
#   SLURM_TEST_PARTITION, SLURM_TEST_CPUSET_ROOT (cpuset dir of slurmd's tree).

_slurm_log() { printf 'slurm-harness: %s\n' "$*" >&2; }

_slurm_bin() {  # resolve a binary even if /usr/sbin isn't in PATH
    local b
    b=$(command -v "$1" 2>/dev/null) && { echo "$b"; return 0; }
    for d in /usr/sbin /usr/bin /sbin /bin; do
        [[ -x $d/$1 ]] && { echo "$d/$1"; return 0; }
    done
    return 1
}

slurm_install() {
    local need=() b
    for b in slurmctld slurmd srun sbatch sinfo squeue scancel munged munge; do
        _slurm_bin "$b" >/dev/null || need+=("$b")
    done
    ((${#need[@]} == 0)) && return 0
    _slurm_log "installing slurm/munge packages (missing: ${need[*]})"
    local made_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        # keep the packages' init scripts from starting system-wide daemons
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made_policy=1
    fi
    local rc=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        slurmctld slurmd slurm-client munge >/tmp/slurm-harness-apt.log 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            slurmctld slurmd slurm-client munge >/tmp/slurm-harness-apt.log 2>&1; } || rc=$?
    ((made_policy)) && rm -f /usr/sbin/policy-rc.d
    if ((rc != 0)); then
        _slurm_log "apt-get install failed (rc=$rc), see /tmp/slurm-harness-apt.log"
        return 1
    fi
}

# "pid starttime" identity, so we never signal a recycled PID.
_slurm_starttime() { awk '{ sub(/^.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null; }

_slurm_alive() {  # _slurm_alive PID STARTTIME
    [[ -e /proc/$1 ]] || return 1
    local st; st=$(_slurm_starttime "$1") || return 1
    [[ $st == "$2" ]] || return 1
    # a zombie child of ours counts as dead
    [[ $(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) != Z ]]
}

_slurm_port_free() {
    ! ss -Htln 2>/dev/null | awk '{print $4}' | grep -Eq "[:.]$1\$"
}

_slurm_pick_port() {  # first free port >= $1 that isn't $2
    local p=$1
    while ((p < $1 + 200)); do
        if [[ $p != "${2:-}" ]] && _slurm_port_free "$p"; then echo "$p"; return 0; fi
        p=$((p + 1))
    done
    return 1
}

_slurm_cg_ctrls() {  # v1 controller mount points that slurm may populate
    local c
    for c in cpuset freezer memory devices cpuacct cpu pids blkio; do
        [[ -d /sys/fs/cgroup/$c && -e /sys/fs/cgroup/$c/cgroup.procs ]] && echo "/sys/fs/cgroup/$c"
    done
}

_slurm_cg_tasks() {  # print PIDs living anywhere under a cgroup dir
    [[ -d $1 ]] || return 0
    find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null
}

_slurm_cg_rmtree() {  # rmdir a cgroup v1 subtree depth-first (empty cgroups only)
    [[ -d $1 ]] || return 0
    find "$1" -depth -type d -exec rmdir {} \; 2>/dev/null
    [[ ! -d $1 ]]
}

_slurm_record() {  # _slurm_record DIR NAME PID
    local st; st=$(_slurm_starttime "$3")
    echo "$2 $3 $st" >>"$1/pids"
}

_slurm_start_fail() {
    local dir=$1; shift
    _slurm_log "slurm_start FAILED: $*"
    local f
    for f in "$dir"/log/slurmctld.log "$dir"/log/slurmd.log "$dir"/log/*.out; do
        [[ -s $f ]] || continue
        _slurm_log "---- tail $f"
        tail -n 15 "$f" | sed 's/^/    /' >&2
    done
    slurm_stop "$dir"
    return 1
}

slurm_start() {
    local dir=${1:?usage: slurm_start DIR}
    [[ $(id -u) == 0 ]] || { _slurm_log "must run as root"; return 1; }
    local b munged slurmctld slurmd
    munged=$(_slurm_bin munged) && slurmctld=$(_slurm_bin slurmctld) && slurmd=$(_slurm_bin slurmd) ||
        { _slurm_log "slurm/munge binaries missing (run slurm_install)"; return 1; }
    for b in sinfo squeue scancel srun sbatch; do
        _slurm_bin "$b" >/dev/null || { _slurm_log "$b missing (run slurm_install)"; return 1; }
    done
    [[ -d /sys/fs/cgroup/cpuset && -e /sys/fs/cgroup/cpuset/cpuset.cpus ]] ||
        { _slurm_log "cgroup v1 cpuset not mounted at /sys/fs/cgroup/cpuset"; return 1; }
    [[ -d /sys/fs/cgroup/freezer ]] ||
        { _slurm_log "cgroup v1 freezer not mounted (proctrack/cgroup needs it)"; return 1; }
    if [[ -s $dir/pids ]]; then
        _slurm_log "$dir/pids exists: cluster already started there (slurm_stop it first)"
        return 1
    fi

    mkdir -p "$dir" || return 1
    dir=$(cd "$dir" && pwd -P)
    # munged (user munge) must traverse DIR; it also rejects group/other-writable
    # ancestors without the sticky bit (mktemp -d under /tmp is fine).
    chmod 755 "$dir"
    mkdir -p "$dir"/{etc,state,spool,log,run}
    local node cpus topo mem_mb real_mem ctld_port slurmd_port
    node=$(hostname -s)
    cpus=$(nproc)
    # topology as slurmd itself detects it (avoids "config differs from hardware")
    topo=$(SLURM_CONF=/nonexistent "$slurmd" -C 2>/dev/null | head -n1 |
        grep -oE '(Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=[0-9]+' | tr '\n' ' ')
    mem_mb=$(awk '/^MemTotal:/ { print int($2/1024) }' /proc/meminfo)
    real_mem=$((mem_mb / 2)); ((real_mem > 1024)) && real_mem=1024
    ctld_port=${SLURM_TEST_CTLD_PORT:-$(_slurm_pick_port 16817)} || { _slurm_log "no free port"; return 1; }
    slurmd_port=${SLURM_TEST_SLURMD_PORT:-$(_slurm_pick_port $((ctld_port + 1)) "$ctld_port")} || { _slurm_log "no free port"; return 1; }

    # -- cgroups: refuse if a live slurm tree exists, sweep empty leftovers
    local cg leftovers
    for cg in $(_slurm_cg_ctrls); do
        for d in "$cg"/slurm "$cg"/slurm_"$node"; do
            [[ -d $d ]] || continue
            leftovers=$(_slurm_cg_tasks "$d" | head -n1)
            if [[ -n $leftovers ]]; then
                _slurm_log "$d has live tasks (another slurmd?); refusing to start"
                return 1
            fi
            _slurm_cg_rmtree "$d" || _slurm_log "warning: could not remove stale $d"
        done
    done

    # -- munge: key, socket, seed, pid, all under DIR/munge (owner munge)
    local mdir=$dir/munge
    mkdir -p "$mdir"
    # 0711: munged insists that everyone can traverse the socket dir, and that
    # the dir holding the key is not group/world readable/writable.
    chmod 711 "$mdir"
    if [[ ! -s $mdir/munge.key ]]; then
        head -c 1024 /dev/urandom >"$mdir/munge.key" || return 1
    fi
    chown -R munge:munge "$mdir" || { _slurm_log "no 'munge' user?"; return 1; }
    chmod 400 "$mdir/munge.key"
    local msock=$mdir/munge.socket.2

    # -- configs
    cat >"$dir/etc/slurm.conf" <<EOF
# generated by tests/slurm/cluster.sh
ClusterName=nstest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$msock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=${SLURM_TEST_DEBUG:-info}
SlurmdDebug=${SLURM_TEST_DEBUG:-info}
PlugStackConfig=$dir/etc/plugstack.conf
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
MessageTimeout=5
TCPTimeout=2
SlurmctldTimeout=10
SlurmdTimeout=10
InactiveLimit=0
KillWait=2
MinJobAge=10
WaitTime=0
UnkillableStepTimeout=15
${SLURM_TEST_EXTRA_CONF:-}
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus ${topo}RealMemory=$real_mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
    cat >"$dir/etc/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=yes
ConstrainRAMSpace=no
ConstrainDevices=no
EOF
    : >"$dir/etc/plugstack.conf"   # don't pick up /etc/slurm/plugstack.conf

    export SLURM_CONF=$dir/etc/slurm.conf
    export SLURM_TEST_DIR=$dir SLURM_TEST_NODE=$node SLURM_TEST_PARTITION=debug
    # don't let a caller's SLURM_* job environment leak into our clients
    unset SLURM_JOB_ID SLURM_JOBID SLURM_STEP_ID SLURM_NODELIST SLURM_CLUSTER_NAME

    : >"$dir/pids"
    local pid t

    # -- munged (as user munge; setpriv execs, so $! is munged itself)
    setpriv --reuid=munge --regid=munge --init-groups \
        "$munged" -F --key-file="$mdir/munge.key" --socket="$msock" \
        --pid-file="$mdir/munged.pid" --log-file="$dir/log/munged.log" \
        --seed-file="$mdir/munged.seed" \
        </dev/null >"$dir/log/munged.out" 2>&1 &
    pid=$!
    _slurm_record "$dir" munged "$pid"
    for ((t = 0; t < 50; t++)); do
        [[ -S $msock ]] && break
        [[ -e /proc/$pid ]] || break
        sleep 0.1
    done
    [[ -S $msock ]] || { _slurm_start_fail "$dir" "munged did not create $msock"; return 1; }
    if ! _slurm_bin munge >/dev/null || ! munge -S "$msock" -n 2>/dev/null | unmunge -S "$msock" >/dev/null 2>&1; then
        _slurm_start_fail "$dir" "munge round-trip failed on $msock"; return 1
    fi

    # -- slurmctld (-D: foreground, -i: ignore stale state, -c: clear state)
    "$slurmctld" -D -i -c </dev/null >"$dir/log/slurmctld.out" 2>&1 &
    pid=$!
    _slurm_record "$dir" slurmctld "$pid"

    # -- slurmd
    "$slurmd" -D -N "$node" </dev/null >"$dir/log/slurmd.out" 2>&1 &
    pid=$!
    _slurm_record "$dir" slurmd "$pid"

    # -- wait for the node to be idle
    local timeout=${SLURM_TEST_TIMEOUT:-30} state="" deadline
    deadline=$((SECONDS + timeout))
    while ((SECONDS < deadline)); do
        local name p st
        while read -r name p st; do
            _slurm_alive "$p" "$st" || { _slurm_start_fail "$dir" "$name (pid $p) exited during start-up"; return 1; }
        done <"$dir/pids"
        state=$(sinfo -h -n "$node" -o %T 2>/dev/null | head -n1)
        [[ $state == idle ]] && break
        sleep 0.2
    done
    [[ $state == idle ]] ||
        { _slurm_start_fail "$dir" "node $node not idle after ${timeout}s (state='${state:-no answer from slurmctld}')"; return 1; }

    # Debian builds slurm with --enable-multiple-slurmd, so the v1 tree is
    # slurm_<NodeName> (upstream default builds use plain "slurm").  The cpuset
    # dir only appears with the first step; freezer/slurm_<node> exists already.
    export SLURM_TEST_CPUSET_ROOT=/sys/fs/cgroup/cpuset/slurm_$node
    return 0
}

slurm_stop() {
    local dir=${1:?usage: slurm_stop DIR}
    [[ -f $dir/pids ]] || return 0   # never started, or already stopped
    local node=${SLURM_TEST_NODE:-$(hostname -s)}
    local conf=$dir/etc/slurm.conf
    local name pid st t

    # 1. cancel all jobs and give slurmstepd a moment to tear steps down
    local ctld_alive=0
    while read -r name pid st; do
        [[ $name == slurmctld ]] && _slurm_alive "$pid" "$st" && ctld_alive=1
    done <"$dir/pids"
    if ((ctld_alive)) && [[ -f $conf ]]; then
        local jobs
        jobs=$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null)
        if [[ -n $jobs ]]; then
            # shellcheck disable=SC2086
            SLURM_CONF=$conf scancel $jobs >/dev/null 2>&1 || true
            for ((t = 0; t < 100; t++)); do
                [[ -z $(SLURM_CONF=$conf squeue -h -t R,CG,PD -o %i 2>/dev/null) ]] && break
                sleep 0.1
            done
        fi
    fi
    # wait for step daemons: each live slurmstepd owns a socket in the spool
    for ((t = 0; t < 100; t++)); do
        compgen -G "$dir/spool/${node}_*" >/dev/null || break
        sleep 0.1
    done

    # 2. stop daemons by PID, reverse start order: slurmd, slurmctld, munged
    local order=() line
    while read -r line; do order=("$line" "${order[@]}"); done <"$dir/pids"
    for line in "${order[@]}"; do
        read -r name pid st <<<"$line"
        _slurm_alive "$pid" "$st" || continue
        kill -TERM "$pid" 2>/dev/null || true
        for ((t = 0; t < 100; t++)); do
            _slurm_alive "$pid" "$st" || break
            sleep 0.1
        done
        if _slurm_alive "$pid" "$st"; then
            _slurm_log "$name (pid $pid) ignored SIGTERM for 10s; SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
        fi
    done
    # reap our own children (no-op if they aren't ours)
    for line in "${order[@]}"; do
        read -r name pid st <<<"$line"
        wait "$pid" 2>/dev/null || true
    done

    # 3. leftover slurmstepd (a step daemon whose spool socket is still there)
    local sock spid
    for sock in "$dir"/spool/"${node}"_*; do
        [[ -S $sock ]] || continue
        for spid in $(_slurm_cg_tasks "/sys/fs/cgroup/freezer/slurm_$node") $(_slurm_cg_tasks /sys/fs/cgroup/freezer/slurm); do
            [[ $(readlink "/proc/$spid/exe" 2>/dev/null) == */slurmstepd ]] || continue
            _slurm_log "killing leftover slurmstepd $spid"
            kill -KILL "$spid" 2>/dev/null || true
        done
    done

    # 4. remove the (now empty) slurm cgroup trees slurmd created
    local cg d
    for cg in $(_slurm_cg_ctrls); do
        for d in "$cg"/slurm_"$node" "$cg"/slurm; do
            [[ -d $d ]] || continue
            for ((t = 0; t < 20; t++)); do
                _slurm_cg_rmtree "$d" && break
                sleep 0.1
            done
            [[ -d $d ]] && _slurm_log "warning: $d still present (tasks: $(_slurm_cg_tasks "$d" | tr '\n' ' '))"
        done
    done

    mv -f "$dir/pids" "$dir/pids.stopped" 2>/dev/null || rm -f "$dir/pids"
    return 0
}
