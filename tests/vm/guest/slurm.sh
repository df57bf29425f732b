#!/bin/sh
# The Slurm scenarios, sourced by scenarios.sh (its helpers and /etc/nstest.conf are in scope).

# ---------------------------------------------------------------- slurm
# slurm: numasched beside a real one-node Slurm (munged, slurmctld, slurmd from Debian,
# carried in by tests/vm/run.sh; cgroup v1, proctrack/cgroup, task/cgroup with
# ConstrainCores, task/affinity; slurmv2 the same on cgroup v2 alone, cgroup/v2 with
# IgnoreSystemd=yes), run with --pin cpu so every placement shows in the
# affinity. Checked from /proc and the cgroup tree, in five steps:
#  1. a job with NUMASCHED=off gets node 0's CPUs: a process outside every job must
#     leave them (CPUs are free elsewhere);
#  2. the next job's step gets node 1's CPUs, its stream load's memory is on node 0 and
#     the step's cpuset.mems only node 0: the task stays inside the step's CPUs and is
#     placed there, no page of it arrives on a node outside the step's mems, the
#     opted-out task keeps its whole step, `status` shows both steps;
#  3. the opted-out job is cancelled: the outsider must be off the managed job's CPUs;
#  4. a job with the node's fake GPU (gres.conf: the last node's cores) and every CPU
#     runs on the GPU's node, though its memory and the idle CPUs are on node 0;
#  5. the same for a job with the node's fake NIC (gres/nic) and no GPU.
# And the daemon logs no failed placement or page move.
SLURM_DIR=/run/slurm
SLURM_NODE=nsvm
# The cluster as "name:address" words, and its controller's; one node on the loopback
# unless slurmpair says otherwise. SLURM_KEY: a munge key the nodes share (else a new one).
SLURM_NODES="nsvm:127.0.0.1"
SLURM_CTL="nsvm:127.0.0.1"
SLURM_KEY=""
SLURM_PIDS=""
CG=/sys/fs/cgroup
# The cgroup version Slurm runs on (slurm: 1, slurmv2: 2).
SLURM_CGV=1

# cgroup v1 cpuset and freezer at /sys/fs/cgroup/<name>, as Slurm's cgroup/v1 expects.
# The mems scenario leaves cgroup v2 mounted there with cpuset enabled: cpuset is
# released from it and a tmpfs mounted on top, both undone by slurm_cgroups_down.
# slurmv2: cgroup v2 alone at /sys/fs/cgroup with cpuset enabled from the root, as
# Slurm's cgroup/v2 expects on a node without systemd (IgnoreSystemd=yes: slurmd makes
# system.slice/slurmstepd.scope itself); what it was mounted for is left as it was.
slurm_cgroups_up() {
  local c i
  [ "$SLURM_CGV" = 2 ] && { slurm_cgroup2_up; return; }
  V2_CPUSET=""
  if grep -q " $CG cgroup2 " /proc/mounts && grep -qw cpuset "$CG/cgroup.subtree_control"; then
    echo -cpuset >"$CG/cgroup.subtree_control" && V2_CPUSET=1
  fi
  mount -t tmpfs -o mode=755 cgroup_root "$CG" || return 1
  for c in cpuset freezer; do
    mkdir -p "$CG/$c"
    i=0
    # A controller just released by cgroup v2 may stay busy for a moment.
    until mount -t cgroup -o "$c" "$c" "$CG/$c" 2>/dev/null; do
      i=$((i + 1)); [ $i -lt 40 ] || return 1; sleep 0.25
    done
  done
}
slurm_cgroup2_up() {
  local c
  V2_MOUNTED="" V2_ADDED=""
  if ! grep -q " $CG cgroup2 " /proc/mounts; then
    mount -t cgroup2 cgroup2 "$CG" || return 1
    V2_MOUNTED=1
  fi
  # Every controller enabled down to system.slice, where systemd would have put it,
  # as systemd does: Slurm's cgroup/v2 wants cpu as well as cpuset in its scope
  # ("Controller cpu is not enabled!", and then no cpuset for the step).
  mkdir -p "$CG/system.slice"
  for c in $(cat "$CG/cgroup.controllers"); do
    grep -qw "$c" "$CG/cgroup.subtree_control" || {
      echo "+$c" >"$CG/cgroup.subtree_control" && V2_ADDED="$V2_ADDED $c"; }
    echo "+$c" >"$CG/system.slice/cgroup.subtree_control" 2>/dev/null
  done
  grep -qw cpuset "$CG/system.slice/cgroup.subtree_control"
}
slurm_cgroups_down() {
  local c i
  if [ "$SLURM_CGV" = 2 ]; then
    # Slurm's scope and what it left under it, deepest first, once their tasks are gone.
    i=0
    while [ -d "$CG/system.slice" ] && [ $i -lt 40 ]; do
      find "$CG/system.slice" -depth -type d -exec rmdir {} \; 2>/dev/null
      [ -d "$CG/system.slice" ] && sleep 0.25
      i=$((i + 1))
    done
    for c in $V2_ADDED; do echo "-$c" >"$CG/cgroup.subtree_control" 2>/dev/null; done
    [ -z "$V2_MOUNTED" ] || umount "$CG" 2>/dev/null
    return 0
  fi
  for c in cpuset freezer; do
    grep -q " $CG/$c cgroup " /proc/mounts || continue
    # A v1 hierarchy goes (and its controller back to v2) only if it has no cgroup left
    # at umount; Slurm's are removable once their last task has exited.
    i=0
    while [ -n "$(find "$CG/$c" -mindepth 1 -type d | head -n 1)" ] && [ $i -lt 40 ]; do
      find "$CG/$c" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null
      sleep 0.25; i=$((i + 1))
    done
    umount "$CG/$c"
  done
  grep -q "^cgroup_root $CG tmpfs " /proc/mounts && umount "$CG"
  if [ -n "$V2_CPUSET" ]; then
    # The hierarchy is released in the background: cpuset may take a moment to return.
    i=0
    until echo +cpuset 2>/dev/null >"$CG/cgroup.subtree_control" || [ $i -ge 40 ]; do
      sleep 0.25; i=$((i + 1))
    done
  fi
  true
}

# Starts munged, slurmctld and slurmd (pids in SLURM_PIDS), waits until the node is idle.
slurm_up() {
  local d=$SLURM_DIR i topo state
  local n nodes="" node_lines="" wait=${SLURM_WAIT:-60}
  hostname "$SLURM_NODE"
  ifconfig lo 127.0.0.1 up
  # Slurm resolves its listening address with AI_ADDRCONFIG, which finds nothing on a
  # machine whose only IPv4 address is 127.0.0.1 (a guest without a network card).
  ip addr add 10.0.2.15/32 dev lo 2>/dev/null
  echo "127.0.0.1 localhost" >/etc/hosts
  for n in $SLURM_NODES; do
    echo "${n#*:} ${n%%:*}" >>/etc/hosts
    nodes="$nodes${nodes:+,}${n%%:*}"
  done
  rm -rf "$d"
  mkdir -p "$d/etc" "$d/state" "$d/spool" "$d/log" "$d/munge"
  chmod 755 "$d"; chmod 711 "$d/munge"
  if [ -n "$SLURM_KEY" ]; then cp "$SLURM_KEY" "$d/munge/munge.key"
  else head -c 1024 /dev/urandom >"$d/munge/munge.key"; fi
  chmod 400 "$d/munge/munge.key"
  /usr/sbin/munged -F --key-file="$d/munge/munge.key" --socket="$d/munge/sock" \
    --pid-file="$d/munge/munged.pid" --log-file="$d/log/munged.log" \
    --seed-file="$d/munge/seed" </dev/null >"$d/log/munged.out" 2>&1 &
  SLURM_PIDS="$!"
  i=0; while [ ! -S "$d/munge/sock" ] && [ $i -lt 40 ]; do sleep 0.25; i=$((i + 1)); done
  [ -S "$d/munge/sock" ] || { SLURM_ERR="munged did not start: $(tail -n 3 "$d/log/munged.out" "$d/log/munged.log" 2>/dev/null)"; return 1; }
  # The node as slurmd itself sees it, so it does not refuse a config that differs.
  topo=$(SLURM_CONF=/nonexistent /usr/sbin/slurmd -C 2>/dev/null | head -n 1 |
    grep -oE '(Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=[0-9]+' | tr '\n' ' ')
  # Every node of the cluster is a guest like this one (the pair boots two alike).
  for n in $SLURM_NODES; do
    node_lines="${node_lines}NodeName=${n%%:*} NodeAddr=${n#*:} CPUs=$(count_words "$(all_cpus)") ${topo}RealMemory=512 Gres=gpu:1,nic:1 State=UNKNOWN
"
  done
  cat >"$d/etc/slurm.conf" <<CONF
ClusterName=nsvm
SlurmctldHost=${SLURM_CTL%%:*}(${SLURM_CTL#*:})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/sock
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
PlugStackConfig=$d/etc/plugstack.conf
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MessageTimeout=20
SlurmctldTimeout=60
SlurmdTimeout=60
InactiveLimit=0
KillWait=2
MinJobAge=5
WaitTime=0
GresTypes=gpu,nic
${node_lines}PartitionName=debug Nodes=$nodes Default=YES MaxTime=INFINITE State=UP
CONF
  if [ "$SLURM_CGV" = 2 ]; then
    printf '%s\n' CgroupPlugin=cgroup/v2 CgroupMountpoint=$CG IgnoreSystemd=yes \
      ConstrainCores=yes ConstrainRAMSpace=no ConstrainDevices=no >"$d/etc/cgroup.conf"
  else
    printf '%s\n' CgroupPlugin=cgroup/v1 CgroupMountpoint=$CG ConstrainCores=yes \
      ConstrainRAMSpace=no ConstrainDevices=no >"$d/etc/cgroup.conf"
  fi
  : >"$d/etc/plugstack.conf"
  # A fake GPU and a fake NIC (gres/nic) for the device steps: character devices
  # (/dev/null's numbers) that gres.conf puts on the last node's cores, as a site with
  # its GPUs and its network card on one socket would.
  [ -e /dev/nsgpu0 ] || mknod /dev/nsgpu0 c 1 3
  [ -e /dev/nsnic0 ] || mknod /dev/nsnic0 c 1 3
  set -- $(cpu_nodes)
  eval "DEV_NODE=\${$#}"
  eval "DEV_CORES=\$CPUS_$DEV_NODE"
  { echo "Name=gpu File=/dev/nsgpu0 Cores=$(echo $DEV_CORES | tr ' ' ',')"
    echo "Name=nic File=/dev/nsnic0 Cores=$(echo $DEV_CORES | tr ' ' ',')"; } >"$d/etc/gres.conf"
  export SLURM_CONF=$d/etc/slurm.conf
  if [ "${SLURM_CTL%%:*}" = "$SLURM_NODE" ]; then
    /usr/sbin/slurmctld -D -i -c </dev/null >"$d/log/slurmctld.out" 2>&1 &
    SLURM_PIDS="$SLURM_PIDS $!"
  fi
  /usr/sbin/slurmd -D -N "$SLURM_NODE" </dev/null >"$d/log/slurmd.out" 2>&1 &
  SLURM_PIDS="$SLURM_PIDS $!"
  i=0 state=""
  while [ $i -lt $((wait * 4)) ]; do
    state=$(sinfo -h -n "$SLURM_NODE" -o %T 2>/dev/null | head -n 1)
    [ "$state" = idle ] && return 0
    for p in $SLURM_PIDS; do
      [ -d "/proc/$p" ] || { SLURM_ERR="a Slurm daemon (pid $p) exited: $(tail -n 4 "$d"/log/*.log "$d"/log/*.out 2>/dev/null | tr '\n' ' ')"; return 1; }
    done
    sleep 0.25; i=$((i + 1))
  done
  SLURM_ERR="node not idle after $wait s (state '${state:-no answer}'): $(tail -n 4 "$d"/log/slurmd.log "$d"/log/slurmctld.log 2>/dev/null | tr '\n' ' ')"
  return 1
}

# Cancels the jobs, stops slurmd, slurmctld and munged by pid (last started first), and
# any step daemon left in the freezer tree.
slurm_down() {
  local jobs p order="" i
  # The jobs are the controller's to cancel (a node of the pair would cancel the other's).
  if [ "${SLURM_CTL%%:*}" = "$SLURM_NODE" ]; then
    jobs=$(squeue -h -o %i 2>/dev/null)
    [ -z "$jobs" ] || scancel $jobs 2>/dev/null
    i=0; while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ $i -lt 40 ]; do sleep 0.25; i=$((i + 1)); done
  fi
  for p in $SLURM_PIDS; do order="$p $order"; done
  for p in $order; do stop_pids "$p"; done
  for p in $(find "$CG/freezer" "$CG/system.slice" -name cgroup.procs -exec cat {} + 2>/dev/null); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmstepd ] && kill -9 "$p"
  done
  SLURM_PIDS=""
  unset SLURM_CONF
}

# A process named $1 in a Slurm job step other than cgroup $2: sets TASK (its pid) and
# STEP_CG (its step's cgroup, e.g. /slurm_nsvm/uid_0/job_2/step_0). Shell builtins only:
# a fork per process would take seconds under TCG.
find_task() {
  local d c cs
  for d in /proc/[0-9]*; do
    read -r c 2>/dev/null <"$d/comm" || continue
    [ "$c" = "$1" ] || continue
    read -r cs 2>/dev/null <"$d/cpuset" || continue
    case $cs in */job_*/step_*) ;; *) continue ;; esac
    while case ${cs##*/} in step_*) false ;; *) true ;; esac; do cs=${cs%/*}; done
    [ "$cs" = "$2" ] && continue
    TASK=${d#/proc/} STEP_CG=$cs
    return 0
  done
  return 1
}
# find_task, retried for up to 60 s.
wait_task() {
  local i=0
  TASK="" STEP_CG=""
  while [ $i -lt 240 ]; do
    find_task "$@" && return 0
    sleep 0.25; i=$((i + 1))
  done
  return 1
}
# A step's cgroup directory, its CPUs and its memory nodes, on either version (v2 has
# them as the kernel enforces them, `.effective`).
cg_path() { if [ "$SLURM_CGV" = 2 ]; then echo "$CG$1"; else echo "$CG/cpuset$1"; fi; }
cg_eff() { [ "$SLURM_CGV" = 2 ] && echo .effective; }
cg_cpus() { expand_list "$(cat "$(cg_path "$1")/cpuset.cpus$(cg_eff)" 2>/dev/null)"; }
cg_mems() { expand_list "$(cat "$(cg_path "$1")/cpuset.mems$(cg_eff)" 2>/dev/null)"; }
# "12.0" for a step's cgroup path.
step_name() { echo "$1" | sed 's#.*/job_\([0-9]*\)/step_\(.*\)#\1.\2#'; }
# The step's line of `numasched status`: "<step> <mode> <cpus> <mems> <tasks> <managed>"
# (compared as strings: step 1.0 is not pid 1).
step_status() { numasched status --socket "$SOCK" 2>/dev/null | awk -v s="$1" '($1 "") == s'; }
# Whole seconds since uptime $1.
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { print int(b - a) }'; }

# Step 4 or 5 of slurm_scenario: a job given the node's fake device $1 (gpu, nic) and
# every CPU, its memory on node $n0, must run on the device's node; the task of step
# cgroup $2 (the job before) is not taken for its task. Adds to the caller's `why`;
# leaves the step's cgroup in DEVICE_CG.
device_job() {
  local kind=$1 label job s t step cpus
  label=$(echo "$kind" | tr a-z A-Z)
  eval "cpus=\$CPUS_$DEV_NODE"
  srun -J "ns$kind" --gres="$kind:1" -n1 -c "$(count_words "$all")" --cpu-bind=none \
    jobload workload stream --touch-node "$n0" --size 32M --seconds 300 --report-interval 60 \
    >"/tmp/slurm-$kind.out" 2>&1 &
  job=$!
  DEVICE_CG=""
  if ! wait_task jobload "$2"; then
    why="$why the $label job never ran a task ($(tail -n 2 "/tmp/slurm-$kind.out" | tr '\n' ' '));"
  else
    DEVICE_CG=$STEP_CG
    say "$label job's task $TASK was given: $(tr '\0' '\n' <"/proc/$TASK/environ" 2>/dev/null |
      grep -E '^(SLURM_(JOB|STEP)_(GPUS|NICS)|CUDA_VISIBLE_DEVICES|OMPI_MCA_btl_openib_if_include)=' | tr '\n' ' ')"
    t=$(now) s=""
    # A task that is gone has no affinity: empty is never on the device's node.
    while [ "$(since "$t")" -lt 15 ]; do
      s=$(affinity "$TASK")
      [ -n "$s" ] && within "$s" "$cpus" && break
      sleep 0.5
    done
    step=$(step_name "$STEP_CG")
    if [ -n "$s" ] && within "$s" "$cpus"; then
      say "$label job $step: task $TASK on [$s], the $label's node $DEV_NODE, within $(since "$t") s (step [$(cg_cpus "$STEP_CG")], memory on node $n0); status: $(step_status "$step")"
      status_json | grep -q "\"${kind}_nodes\":\[$DEV_NODE\]" ||
        why="$why status --json does not show step $step's ${kind}_nodes as [$DEV_NODE];"
    else
      why="$why $label job $step's task $TASK on [$s] after 15 s, not on its $label's node $DEV_NODE [$cpus];"
      say "daemon: $(grep -E "pid $TASK |$label" "$DAEMON_LOG" | sed 's/^.*INFO //' | tail -n 3 | tr '\n' ';')"
    fi
  fi
  scancel -n "ns$kind"
  # Gone before the next job starts, so that its task is not taken for the next's.
  t=$(now)
  while [ -n "$TASK" ] && [ -d "/proc/$TASK" ] && [ "$(since "$t")" -lt 10 ]; do sleep 0.25; done
  stop_pids $job
}

scenario_slurm() { SLURM_CGV=1; slurm_scenario slurm; }
scenario_slurmv2() { SLURM_CGV=2; slurm_scenario slurmv2; SLURM_CGV=1; }
# The slurm scenario on cgroup version $SLURM_CGV, its results named $1.
slurm_scenario() {
  local sc=$1 why="" t0 t n0 n1 c0 c1 all off main off_task off_cg main_task main_cg off_cpus \
    main_cpus main_mems i narrowed=0 set_by_daemon samples=0 outsider before after grown off_line="" \
    main_line="" s s_off s_main strays=0
  [ -x /usr/sbin/slurmd ] || { echo "SKIP $sc: no Slurm in this initramfs (tests/vm/run.sh carries it in when the scenario list names slurm)"; return; }
  set -- $(cpu_nodes)
  [ $# -ge 2 ] || { echo "SKIP $sc: needs two nodes with CPUs"; return; }
  n0=$1 n1=$2
  eval "c0=\$CPUS_$n0; c1=\$CPUS_$n1"
  all=$(all_cpus)
  t0=$(now)
  balancing 0   # page moves are numasched's alone
  trail "$sc: cgroups and daemons"
  slurm_cgroups_up || { echo "FAIL $sc: cannot mount cgroup v$SLURM_CGV for Slurm at $CG"; slurm_cgroups_down; return; }
  if ! slurm_up; then
    echo "FAIL $sc: $SLURM_ERR"; slurm_down; slurm_cgroups_down; return
  fi
  say "Slurm up after $(since "$t0") s: node $(sinfo -h -N -o '%N %T, %c CPUs (sockets:cores:threads %z)' | head -n 1)"
  ln -sf /usr/bin/numasched /usr/bin/jobload
  ln -sf /usr/bin/numasched /usr/bin/outsider
  numasched profile set jobload --mpki 20 --numa-penalty 1.4 --db "$PROFILE_DB" >/dev/null
  outsider workload cpu --seconds 300 --report-interval 60 >>/tmp/loads.log 2>&1 &
  outsider=$!
  start_daemon --pin cpu --include-comm jobload --include-comm outsider \
    --migrate-pages --migrate-rate 64 --policy auto --db "$PROFILE_DB"
  [ -S "$SOCK" ] || { echo "FAIL $sc: daemon did not open $SOCK: $(tail -n 3 $DAEMON_LOG)"; stop_pids $outsider; slurm_down; slurm_cgroups_down; return; }

  # 1. A job that opts out gets node 0's CPUs; the outsider must leave them.
  trail "$sc: opted-out job"
  NUMASCHED=off srun -J nsoff -n1 -c "$(count_words "$c0")" --cpu-bind=none \
    jobload workload cpu --seconds 300 --report-interval 60 >/tmp/slurm-off.out 2>&1 &
  off=$!
  if ! wait_task jobload ""; then
    echo "FAIL $sc: the NUMASCHED=off job never ran a task: $(tail -n 2 /tmp/slurm-off.out | tr '\n' ' '); slurmd: $(grep -E 'error|launch' "$SLURM_DIR/log/slurmd.log" | tail -n 8 | tr '\n' ' ')"
    stop_daemon; stop_pids $outsider $off; slurm_down; slurm_cgroups_down; balancing "$BALANCING_AT_BOOT"; return
  fi
  off_task=$TASK off_cg=$STEP_CG off_cpus=$(cg_cpus "$STEP_CG") s_off=$(step_name "$STEP_CG")
  say "job $s_off (NUMASCHED=off): task $off_task, step cpuset cpus [$off_cpus] mems [$(cg_mems "$off_cg")]"
  t=$(now)
  while ! disjoint "$(affinity "$outsider")" "$off_cpus" && [ "$(since "$t")" -lt 10 ]; do sleep 0.5; done
  disjoint "$(affinity "$outsider")" "$off_cpus" &&
    say "outsider moved off the job's CPUs within $(since "$t") s: on [$(affinity "$outsider")]" ||
    why="$why outsider still on [$(affinity "$outsider")] 10 s after job $s_off took [$off_cpus] (CPUs were free);"

  # 2. The next job gets node 1's CPUs; its load's memory is placed on node 0. Slurm
  # 22.05 gives every step its parent's cpuset.mems (all nodes), so no page move could
  # leave them: before the load starts, the step's mems are narrowed here to node 0, as
  # a site confining memory would (the task waits in a shell for /tmp/slurm-go, then
  # execs the load). numasched must run the task inside the step's CPUs and leave its
  # pages on node 0, though the task runs on node 1.
  trail "$sc: managed job"
  rm -f /tmp/slurm-go
  srun -J nsmain -n1 -c "$(count_words "$c1")" --cpu-bind=none sh -c "while [ ! -e /tmp/slurm-go ]; do sleep 0.2; done
    exec jobload workload stream --touch-node $n0 --size 64M --seconds 300 --report-interval 60" >/tmp/slurm-main.out 2>&1 &
  main=$!
  if ! wait_task sh "$off_cg"; then
    echo "FAIL $sc: the managed job never ran a task: $(tail -n 2 /tmp/slurm-main.out | tr '\n' ' ')"
    stop_daemon; stop_pids $outsider $off $main; slurm_down; slurm_cgroups_down; balancing "$BALANCING_AT_BOOT"; return
  fi
  main_task=$TASK main_cg=$STEP_CG main_cpus=$(cg_cpus "$STEP_CG") s_main=$(step_name "$STEP_CG")
  say "job $s_main: task $main_task, step cpuset cpus [$main_cpus] mems [$(cg_mems "$main_cg")] as Slurm set them"
  echo "$n0" >"$(cg_path "$main_cg")/cpuset.mems" || why="$why could not narrow $main_cg's cpuset.mems to $n0;"
  main_mems=$(cg_mems "$main_cg")
  touch /tmp/slurm-go
  [ "$off_cpus" = "$c0" ] || say "(Slurm did not give the first job node $n0's CPUs [$c0])"
  [ "$main_cpus" = "$c1" ] || say "(Slurm did not give the second job node $n1's CPUs [$c1])"
  wait_touched "$main_task" 64 || why="$why the managed job's load never touched its 64M;"
  before=$(anon_pages_by_node "$main_task" | tr '\n' ' ')
  trail "$sc: both jobs running"
  t=$(now)
  while [ "$(since "$t")" -lt 10 ]; do
    for s in $(thread_affinities "$main_task"); do
      s=$(echo "$s" | tr ',' ' ')
      within "$s" "$main_cpus" || why="$why managed task $main_task had a thread on [$s], outside its step's [$main_cpus];"
      [ "$(count_words "$s")" -lt "$(count_words "$main_cpus")" ] && narrowed=$((narrowed + 1))
    done
    for s in $(thread_affinities "$off_task"); do
      [ "$s" = "$(commas "$off_cpus")" ] || why="$why opted-out task $off_task had a thread on [$s], not its step's [$off_cpus];"
    done
    # Left to the kernel (all CPUs) or off the jobs' CPUs; never pinned onto them.
    s=$(affinity "$outsider")
    [ "$s" = "$all" ] || disjoint "$s" "$off_cpus $main_cpus" || strays=$((strays + 1))
    samples=$((samples + 1))
    [ -n "$off_line" ] || off_line=$(step_status "$s_off" | awk '$2 == "off"')
    [ -n "$main_line" ] || main_line=$(step_status "$s_main" | awk '$2 == "manage" && $6 >= 1')
    sleep 0.5
  done
  say "$samples samples: managed task on [$(affinity "$main_task")] ($narrowed thread samples narrowed inside its step); opted-out task on [$(affinity "$off_task")]; outsider on [$(affinity "$outsider")]"
  say "status: ${off_line:-no line of step $s_off in mode off}; ${main_line:-no line of step $s_main with a managed task}"
  # Placed: a sample caught it on fewer CPUs than its step, or the daemon set its
  # affinity inside the step. A task the daemon measured as busy on two threads is
  # rightly given both of the step's CPUs, and a slow guest may take few samples.
  set_by_daemon=$(sed -n "s/.*pid $main_task affinity \([0-9,-]*\): done.*/\1/p" "$DAEMON_LOG" | tail -n 1)
  [ "$narrowed" -gt 0 ] || { [ -n "$set_by_daemon" ] && within "$(expand_list "$set_by_daemon")" "$main_cpus"; } ||
    why="$why numasched never placed the managed task inside its step (--pin cpu; last set by the daemon: ${set_by_daemon:-none});"
  [ "$strays" = 0 ] || why="$why outsider pinned onto the jobs' CPUs in $strays of $samples samples;"
  [ -n "$off_line" ] || why="$why status never showed step $s_off in mode off;"
  [ -n "$main_line" ] || why="$why status never showed step $s_main managed;"
  # Were a CPU left beside both jobs (4n), the outsider must be there already.
  if [ "$(count_words "$all")" -gt "$(count_words "$off_cpus $main_cpus")" ]; then
    disjoint "$(affinity "$outsider")" "$off_cpus $main_cpus" ||
      why="$why outsider on [$(affinity "$outsider")] while CPUs outside both jobs were free;"
  fi

  # 3. The opted-out job ends: CPUs are free again, the outsider must leave the managed
  # job's (where it may have been left while the jobs held every CPU).
  trail "$sc: opted-out job cancelled"
  s=$(affinity "$outsider")
  i=$(wc -l <"$DAEMON_LOG")
  scancel -n nsoff
  # The CPUs are free once Slurm removed the job's cgroup (numasched reads the jobs'
  # allocations there); the outsider's 10 s start then.
  t=$(now)
  while [ -d "$(cg_path "${off_cg%/*}")" ] && [ "$(since "$t")" -lt 30 ]; do sleep 0.25; done
  if [ -d "$(cg_path "${off_cg%/*}")" ]; then
    say "NOT CHECKED: Slurm kept job $s_off's cgroup ${off_cg%/*} for 30 s after scancel (task $off_task $([ -d "/proc/$off_task" ] && echo "still alive" || echo "gone")): its CPUs never became free"
  else
    say "job $s_off cancelled: Slurm removed its cgroup within $(since "$t") s"
    t=$(now)
    while ! disjoint "$(affinity "$outsider")" "$main_cpus" && [ "$(since "$t")" -lt 10 ]; do sleep 0.5; done
    if ! disjoint "$(affinity "$outsider")" "$main_cpus"; then
      why="$why outsider still on [$(affinity "$outsider")] 10 s after CPUs outside job $s_main [$main_cpus] became free;"
      # What held it: numasched's view of the jobs and its decisions since.
      say "status: $(numasched status --socket "$SOCK" 2>&1 | tr -s ' \n' '  ')"
      say "daemon log since the cancel: $(tail -n +"$((i + 1))" "$DAEMON_LOG" | sed -r 's/^.*(INFO|WARN|DEBUG) //' | tail -n 12 | tr '\n' ';')"
    elif disjoint "$s" "$main_cpus"; then
      say "outsider on [$(affinity "$outsider")] (it was not on job $s_main's CPUs: nothing to check)"
    else
      say "outsider moved from [$s] to [$(affinity "$outsider")] within $(since "$t") s"
    fi
  fi
  for s in $(thread_affinities "$main_task"); do
    within "$(echo "$s" | tr ',' ' ')" "$main_cpus" || why="$why managed task $main_task had a thread on [$s] at the end;"
  done
  after=$(anon_pages_by_node "$main_task" | tr '\n' ' ')
  say "managed task's anonymous pages per node before: $before after: $after (step mems [$main_mems]); policies in numa_maps: $(awk '{ print $2 }' "/proc/$main_task/numa_maps" | sort | uniq -c | tr -s ' \n' '  ')"
  grown=$(echo "$before|$after" | awk -F'|' -v m=" $main_mems " '{ n = split($1, b, " "); split($2, a, " ")
      for (i = 1; i < n; i += 2) if (index(m, " " b[i] " ") == 0 && a[i + 1] > b[i + 1]) g += a[i + 1] - b[i + 1]; print g + 0 }')
  [ "$grown" = 0 ] || why="$why $grown page(s) of the managed task arrived on nodes outside its step's mems [$main_mems];"
  say "daemon: $(grep -E "pid $main_task (affinity|pages)" "$DAEMON_LOG" | sed 's/^.*INFO //' | tail -n 2 | tr '\n' ';')"

  # 4, 5. A job with the fake GPU, then one with the fake NIC, whose gres.conf cores
  # are the last node's, each given every CPU: Slurm lets it run anywhere, its stream
  # load's memory is on node 0, and numasched must run it on the device's node. The
  # outsider is stopped meanwhile, so node 0 is idle: memory alone would keep the task
  # there (checked once by hand with the GPU rule disabled: the task stayed on node 0
  # and this step failed).
  trail "$sc: GPU job"
  scancel -n nsmain
  kill -STOP "$outsider"
  device_job gpu "$main_cg"
  trail "$sc: NIC job"
  device_job nic "$DEVICE_CG"
  kill -CONT "$outsider"
  trail "$sc: stopping"
  stop_daemon || why="$why the daemon did not stop on SIGTERM;"
  grep -qiE "failed=[1-9]| failed:" "$DAEMON_LOG" &&
    why="$why the daemon logged failures: $(grep -iE 'failed=[1-9]| failed:' "$DAEMON_LOG" | head -n 2 | sed -r 's/^.*(INFO|WARN) //' | tr '\n' ';');"
  [ "$(affinity "$outsider")" = "$all" ] || why="$why outsider on [$(affinity "$outsider")] after the daemon stopped, not all CPUs;"
  stop_pids $outsider $off $main
  slurm_down
  slurm_cgroups_down
  balancing "$BALANCING_AT_BOOT"
  say "scenario took $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s"
  if [ -z "$why" ]; then echo "PASS $sc"; else
    grep -E "pid ($main_task|$off_task|$outsider) |re-planned" "$DAEMON_LOG" | sed 's/^.*INFO //' | tail -n 12 | sed 's/^/    /'
    echo "FAIL $sc:$why"
  fi
}

# ---------------------------------------------------------------- slurmpair
# slurmpair: a Slurm of two nodes, one per guest of the pair (tests/vm/run.sh 2x2n boots
# both on one network with the same munge key; nsa runs the controller). One job of
# two tasks, one on each node, each given every CPU of its node, each with its memory on
# its node's node 1: on each node numasched, knowing only its own node, must keep the
# task inside its own step and place it beside its memory, and `status` there must show
# the job's step as managed. Each guest prints its own PASS or FAIL.

# The network card (a module in the cloud kernel) and the address the host gave this
# guest; waits until the other guest answers (they boot at the same time, not in step).
pair_net_up() {
  local m i=0
  for i in 1 2 3; do
    for m in virtio virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci \
             failover net_failover virtio_net; do
      grep -q "^$m " /proc/modules || insmod "/lib/modules/net/$m.ko" 2>/dev/null
    done
  done
  i=0; while [ ! -d /sys/class/net/eth0 ] && [ $i -lt 40 ]; do sleep 0.25; i=$((i + 1)); done
  [ -d /sys/class/net/eth0 ] || { PAIR_ERR="no eth0 (modules loaded: $(cut -d' ' -f1 /proc/modules | tr '\n' ' '))"; return 1; }
  ifconfig eth0 "$PAIR_ADDR" netmask 255.255.255.0 up || { PAIR_ERR="ifconfig eth0 $PAIR_ADDR failed"; return 1; }
  i=0; until ping -c 1 -W 1 "$PAIR_PEER_ADDR" >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 120 ] || { PAIR_ERR="$PAIR_PEER ($PAIR_PEER_ADDR) did not answer in 120 tries"; return 1; }
    sleep 1
  done
}

scenario_slurmpair() {
  local sc="slurmpair-$PAIR_ME" why="" n1 cpus1 job="" t i s step_cpus placed="" outside=0 samples=0 \
    line="" job_id nodes
  [ -n "${PAIR_ME:-}" ] || { echo "SKIP slurmpair: needs the two-guest bed (tests/vm/run.sh 2x2n)"; return; }
  [ -x /usr/sbin/slurmd ] || { echo "SKIP $sc: no Slurm in this initramfs"; return; }
  set -- $(cpu_nodes)
  n1=$2
  eval "cpus1=\$CPUS_$n1"
  t=$(now)
  pair_net_up || { echo "FAIL $sc: $PAIR_ERR"; return; }
  say "network up, $PAIR_PEER answers after $(since "$t") s"
  balancing 0
  SLURM_CGV=2 SLURM_NODE=$PAIR_ME SLURM_KEY=/etc/nspair/munge.key SLURM_WAIT=180
  # The same slurm.conf on both: nodes in name order.
  if [ "$PAIR_ME" = nsa ]; then SLURM_NODES="nsa:$PAIR_ADDR nsb:$PAIR_PEER_ADDR"
  else SLURM_NODES="nsa:$PAIR_PEER_ADDR nsb:$PAIR_ADDR"; fi
  SLURM_CTL="$PAIR_CTL:$PAIR_CTL_ADDR"
  trail "$sc: cgroups and daemons"
  slurm_cgroups_up || { echo "FAIL $sc: cannot mount cgroup v2 for Slurm at $CG"; slurm_cgroups_down; return; }
  if ! slurm_up; then
    echo "FAIL $sc: $SLURM_ERR"; slurm_down; slurm_cgroups_down; return
  fi
  say "Slurm up after $(since "$t") s: $(sinfo -h -N -o '%N %T' | tr '\n' ' ')"
  ln -sf /usr/bin/numasched /usr/bin/jobload
  numasched profile set jobload --mpki 20 --numa-penalty 1.4 --db "$PROFILE_DB" >/dev/null
  start_daemon --pin cpu --include-comm jobload --policy auto --db "$PROFILE_DB"
  [ -S "$SOCK" ] || { echo "FAIL $sc: daemon did not open $SOCK: $(tail -n 3 $DAEMON_LOG)"; slurm_down; slurm_cgroups_down; return; }

  # The controller submits, once both nodes are idle; the job's load outlasts both
  # nodes' checks (each waits for its own task first).
  if [ "$PAIR_ME" = "$PAIR_CTL" ]; then
    i=0
    while [ "$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -lt 2 ] && [ $i -lt 480 ]; do
      sleep 0.25; i=$((i + 1))
    done
    trail "$sc: submitting"
    srun -J nspair -N2 -n2 --ntasks-per-node=1 -c "$(count_words "$(all_cpus)")" --cpu-bind=none \
      jobload workload stream --touch-node "$n1" --size 32M --seconds 45 --report-interval 45 \
      >/tmp/slurm-pair.out 2>&1 &
    job=$!
  fi
  trail "$sc: waiting for this node's task"
  i=0; while ! wait_task jobload "" && [ $i -lt 3 ]; do i=$((i + 1)); done
  if [ -z "$TASK" ]; then
    echo "FAIL $sc: no task of the job ran on $PAIR_ME in 240 s: $(tail -n 2 /tmp/slurm-pair.out 2>/dev/null | tr '\n' ' ') slurmd: $(grep -E 'error' "$SLURM_DIR/log/slurmd.log" | tail -n 4 | tr '\n' ' ')"
    stop_daemon; stop_pids $job; slurm_down; slurm_cgroups_down; balancing "$BALANCING_AT_BOOT"; return
  fi
  step_cpus=$(cg_cpus "$STEP_CG")
  s=$(step_name "$STEP_CG")
  job_id=${s%.*}
  say "step $s on $PAIR_ME: task $TASK, step cpuset cpus [$step_cpus]"
  if [ "$PAIR_ME" = "$PAIR_CTL" ]; then
    nodes=$(scontrol show job "$job_id" 2>/dev/null | tr ' ' '\n' | sed -n 's/^NodeList=//p' | head -n 1)
    say "job $job_id runs on nodes $nodes"
    [ "$nodes" = "nsa,nsb" ] ||
      why="$why job $job_id's NodeList is '$nodes', not both nodes;"
  fi
  wait_touched "$TASK" 32 || why="$why the task never touched its 32M;"
  t=$(now)
  while [ "$(since "$t")" -lt 20 ]; do
    for s in $(thread_affinities "$TASK"); do
      within "$(echo "$s" | tr ',' ' ')" "$step_cpus" || outside=$((outside + 1))
    done
    s=$(affinity "$TASK")
    [ -z "$placed" ] && [ -n "$s" ] && within "$s" "$cpus1" && [ "$(count_words "$s")" -lt "$(count_words "$step_cpus")" ] &&
      placed="on [$s] after $(since "$t") s"
    [ -n "$line" ] || line=$(step_status "$job_id.0" | awk '$2 == "manage" && $6 >= 1')
    samples=$((samples + 1))
    [ -n "$placed" ] && [ -n "$line" ] && [ "$samples" -ge 10 ] && break
    sleep 0.5
  done
  say "$samples samples: task on [$(affinity "$TASK")], placed ${placed:-never on node $n1 [$cpus1]}; status: ${line:-no managed line for step $job_id.0}"
  say "anonymous pages per node: $(anon_pages_by_node "$TASK" | tr '\n' ' ')"
  [ "$outside" = 0 ] || why="$why a thread of task $TASK ran outside its step's [$step_cpus] in $outside samples;"
  [ -n "$placed" ] || why="$why numasched never placed task $TASK beside its memory on node $n1 [$cpus1] (on [$(affinity "$TASK")]);"
  [ -n "$line" ] || why="$why status on $PAIR_ME never showed step $job_id.0 managed;"

  # Both nodes stay up until the job is over: the controller's srun ends with it, the
  # other node waits for its own task to go.
  trail "$sc: waiting for the job's end"
  if [ -n "$job" ]; then
    i=0; while [ -d "/proc/$job" ] && ! grep -q '^State:.*Z' "/proc/$job/status" 2>/dev/null && [ $i -lt 480 ]; do
      sleep 0.25; i=$((i + 1)); done
    [ -d "/proc/$job" ] && ! grep -q '^State:.*Z' "/proc/$job/status" 2>/dev/null &&
      say "(the job outlived 120 s of waiting: cancelled)"
  else
    i=0; while [ -d "/proc/$TASK" ] && [ $i -lt 480 ]; do sleep 0.25; i=$((i + 1)); done
  fi
  stop_daemon || why="$why the daemon did not stop on SIGTERM;"
  grep -qiE "failed=[1-9]| failed:" "$DAEMON_LOG" &&
    why="$why the daemon logged failures: $(grep -iE 'failed=[1-9]| failed:' "$DAEMON_LOG" | head -n 2 | sed -r 's/^.*(INFO|WARN) //' | tr '\n' ';');"
  stop_pids $job
  slurm_down
  slurm_cgroups_down
  balancing "$BALANCING_AT_BOOT"
  if [ -z "$why" ]; then echo "PASS $sc"; else
    grep -E "pid $TASK |re-planned" "$DAEMON_LOG" | sed 's/^.*INFO //' | tail -n 8 | sed 's/^/    /'
    echo "FAIL $sc:$why"
  fi
}
