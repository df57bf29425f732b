#!/bin/sh
# Scenarios run inside the test guest (busybox sh). Each prints exactly one line
# `PASS name`, `FAIL name: why` or `SKIP name: why`; tests/vm/run.sh counts them.
# /etc/nstest.conf (written by the host per topology) says what QEMU was told:
#   TOPO, NODES="0 1", CPUS_<n>="0 1", DIST_<n>="10 20", SCENARIOS, MIGRATE_HOME.
# Debian's busybox sh runs its own applets before PATH: util-linux tools are called by
# full path (/usr/bin/taskset, /usr/bin/unshare).
# No jq here: JSON is flattened with `tr` and picked apart with sed/awk.

. /etc/nstest.conf

# Loads get their own command names so the daemons can select exactly them:
# `numasched workload` would otherwise be called `numasched`, like the daemon.
cp /usr/bin/numasched /usr/bin/nsload   # memory-bound stream loads
cp /usr/bin/numasched /usr/bin/nscpu    # cpu-bound loads
cp /usr/bin/numasched /usr/bin/nsblind  # stream loads with no profile (scenario blind)
cp /usr/bin/numasched /usr/bin/nsmeasure  # the program `profile measure` measures
SOCK=/tmp/s.sock
DAEMON_LOG=/tmp/daemon.log

# Without hardware counters (none under TCG) a process is characterised only by the
# profile store, and numasched confines no process it knows nothing of (--pin llc and
# node). The stream loads get a profile, as an operator would give them: MPKI 20,
# NUMA penalty 1.4, like a streaming SPEC program. The cpu loads get none.
PROFILE_DB=/tmp/profiles.db
numasched profile set nsload --mpki 20 --numa-penalty 1.4 --db "$PROFILE_DB" >/dev/null

# ---------------------------------------------------------------- small helpers

say() { echo "  $*"; }        # detail lines; the host only counts PASS/FAIL/SKIP
now() { cut -d' ' -f1 /proc/uptime; }

# "0-2,5" -> "0 1 2 5"
expand_list() {
  echo "$1" | tr ',' '\n' | awk -F- 'NF == 1 && $1 != "" { print $1 }
    NF == 2 { for (i = $1; i <= $2; i++) print i }' | tr '\n' ' ' | sed 's/ $//'
}

all_cpus() { expand_list "$(cat /sys/devices/system/cpu/online)"; }

# Node holding CPU $1.
node_of_cpu() {
  for n in $NODES; do
    eval "c=\$CPUS_$n"
    for x in $c; do [ "$x" = "$1" ] && { echo "$n"; return; }; done
  done
}

# Sorted unique nodes of a CPU list given as words.
nodes_of_cpus() {
  for c in $1; do node_of_cpu "$c"; done | sort -n -u | tr '\n' ' ' | sed 's/ $//'
}

# Affinity of a process's main thread, as words ("" if it is gone).
affinity() {
  expand_list "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null)"
}

# The distinct affinities of all threads of $1, one word per line with commas
# ("0,1"), so a partly applied plan shows.
thread_affinities() {
  for t in /proc/"$1"/task/*; do
    expand_list "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$t/status" 2>/dev/null)" | tr ' ' ','
    echo
  done | sort -u
}
commas() { echo $1 | tr ' ' ','; }
# "a b c" within "x y z" (word lists of CPUs)? An empty list is within anything.
within() { for w in $1; do case " $2 " in *" $w "*) ;; *) return 1 ;; esac; done; return 0; }
disjoint() { for w in $1; do case " $2 " in *" $w "*) return 1 ;; esac; done; return 0; }
count_words() { echo $1 | wc -w; }

# Pages per node of $1 from numa_maps: "node pages" lines, all nodes of the machine.
pages_by_node() {
  awk -v nodes="$NODES" -v anon_only="${2:-0}" '
    anon_only == 1 && / file=/ { next }
    { for (i = 1; i <= NF; i++) if ($i ~ /^N[0-9]+=/) { split(substr($i, 2), kv, "="); p[kv[1]] += kv[2] } }
    END { n = split(nodes, ns, " "); for (i = 1; i <= n; i++) print ns[i], p[ns[i]] + 0 }' \
    "/proc/$1/numa_maps" 2>/dev/null
}
# The same for anonymous mappings only (heap, stack, anonymous mmap): the process's
# own memory, what page migration moves and what cpuset.mems confines.
anon_pages_by_node() { pages_by_node "$1" 1; }

total_pages() { pages_by_node "$1" | awk '{ s += $2 } END { print s + 0 }'; }

# Fraction of $1's pages on the nodes listed in $2.
fraction_on() {
  pages_by_node "$1" | awk -v on=" $2 " '{ t += $2; if (index(on, " " $1 " ")) l += $2 }
    END { if (t == 0) print "0.000"; else printf "%.3f\n", l / t }'
}

# Waits until process $1 has at least $2 MiB of pages (its first touch is done).
wait_touched() {
  local pid=$1 want=$(( $2 * 256 )) i=0
  while [ $i -lt 120 ]; do
    [ -d "/proc/$pid" ] || return 1
    [ "$(total_pages "$pid")" -ge "$want" ] && return 0
    sleep 0.5; i=$((i + 1))
  done
  return 1
}

# Why load $1 (logging to $2) has not touched its memory: gone (with its last log line
# and any out-of-memory kill the kernel logged) or still running with how much touched.
untouched_why() {
  if [ -d "/proc/$1" ]; then echo "still running with $(( $(total_pages "$1") / 256 )) MiB touched"; return; fi
  echo "exited; its log: $(grep -v ' GB moved ' "$2" 2>/dev/null | tail -n 1); kernel: $(dmesg | grep -iE 'out of memory|oom-kill|killed process' | tail -n 1)"
}

# Free MiB on node $1 once the page cache is dropped (earlier scenarios' files and
# loads leave it smaller than MemTotal: a bound load sized from the total can be killed).
node_free_mib() {
  sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
  awk '/MemFree/ { print int($4 / 1024) }' "/sys/devices/system/node/node$1/meminfo"
}

# CPU seconds used so far by $1: utime + stime, or utime alone with $2 = user. (Page
# migration is copied by the kernel in the caller's context: it shows as stime.)
cpu_seconds() {
  awk -v hz=100 -v only="$2" '{ sub(/^.*\) /, ""); s = only == "user" ? $12 : only == "sys" ? $13 : $12 + $13
    printf "%.2f\n", s / hz }' "/proc/$1/stat" 2>/dev/null
}

# Starts a stream load named nsload with memory on node $1, $2 MiB, for $3 s, under the
# optional wrapper "$4" (e.g. "/usr/bin/taskset -c 0"). Prints its pid (the wrapper execs it).
# The memory is bound there (--membind: it stays put, so placement can be checked
# against it) unless $5 is --touch-node: then the pages are placed on node $1 and
# nothing binds them there, like a program that first ran on that node, and a manager
# (or the kernel) may move them.
# Its progress lines go to $LOAD_LOG (default /tmp/loads.log) every $LOAD_REPORT s (5).
start_stream() {
  $4 nsload workload stream "${5:---membind}" "$1" --size "$2M" --seconds "$3" \
    --report-interval "${LOAD_REPORT:-5}" >>"${LOAD_LOG:-/tmp/loads.log}" 2>&1 &
  echo $!
}

# "0 812 1 300": free memory of each node, MiB.
free_by_node() {
  for n in $NODES; do
    awk -v n="$n" '/MemFree/ { printf "%s %d ", n, $4 / 1024 }' "/sys/devices/system/node/node$n/meminfo"
  done
}

# Pids of every numad running, the one a case started or any other.
numad_pids() {
  for d in /proc/[0-9]*; do
    [ "$(cat "$d/comm" 2>/dev/null)" = numad ] && echo "${d#/proc/}"
  done
  return 0
}

# Stops numad and waits until none is left: asks it to exit, then TERM, then KILL.
# Every numad, not only the pid its pid file gave: one whose pid file was not there in
# time (a slow guest) would run on into the next case and act on its load. And gone,
# not only signalled: a numad inside a migrate_pages of 320 MiB (seconds under TCG)
# takes the signal only when that returns. (Once, the next load did not get its memory
# within 60 s, right after a numad that had moved the previous load twice.)
stop_numad() {
  local left i=0
  numad -i 0 >/dev/null 2>&1
  sleep 1
  while :; do
    left=$(numad_pids)
    [ -z "$left" ] && return 0
    if [ $i -ge 40 ]; then kill -9 $left 2>/dev/null; sleep 0.5; return 0; fi
    kill $left 2>/dev/null
    sleep 0.25; i=$((i + 1))
  done
}

# Before a case: a numad left from an earlier one would manage this case's load too.
no_numad_left() {
  local left
  left=$(numad_pids)
  [ -z "$left" ] && return 0
  say "numad (pid $(echo $left)) was still running from an earlier case: stopped first"
  stop_numad
}

start_cpu() {
  $2 nscpu workload cpu --seconds "$1" --report-interval 5 >>/tmp/loads.log 2>&1 &
  echo $!
}

# Stops processes: TERM, up to 10 s to go, then KILL (a plain `wait` on a load that
# does not die would hold the whole guest until the host's timeout).
stop_pids() {
  local p i=0
  for p in "$@"; do kill "$p" 2>/dev/null; done
  while [ $i -lt 40 ]; do
    for p in "$@"; do
      [ -d "/proc/$p" ] && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null && break
      p=""
    done
    [ -z "$p" ] && break
    sleep 0.25; i=$((i + 1))
  done
  for p in "$@"; do kill -9 "$p" 2>/dev/null; done
  for p in "$@"; do wait "$p" 2>/dev/null; done
  true
}

# Where a scenario is, with the guest's uptime: printed if the scenario hangs.
TRAIL=/tmp/trail
trail() { echo "$(now) $*" >>"$TRAIL"; }

DAEMON_PID=""
# Starts `numasched daemon` with the test's socket and epoch; --no-db unless the
# arguments name a --db.
start_daemon() {
  local db=--no-db
  case " $* " in *" --db "*) db="" ;; esac
  rm -f "$SOCK"
  numasched daemon $db --socket "$SOCK" --interval "${DAEMON_INTERVAL_MS:-500}ms" \
    --min-replan-interval "${DAEMON_INTERVAL_MS:-500}ms" \
    --min-cpu 0 "$@" >>"$DAEMON_LOG" 2>&1 &
  DAEMON_PID=$!
  local i=0
  while [ ! -S "$SOCK" ] && [ $i -lt 40 ]; do sleep 0.25; i=$((i + 1)); done
}

# Sends SIGTERM and waits up to 10 s; returns 1 if it did not stop.
stop_daemon() {
  [ -n "$DAEMON_PID" ] || return 0
  kill -TERM "$DAEMON_PID" 2>/dev/null
  local i=0
  while [ -d "/proc/$DAEMON_PID" ] && [ $i -lt 40 ]; do
    # A zombie counts as stopped: wait reaps it below.
    grep -q '^State:.*Z' "/proc/$DAEMON_PID/status" 2>/dev/null && break
    sleep 0.25; i=$((i + 1))
  done
  wait "$DAEMON_PID" 2>/dev/null
  local rc=$?
  [ -d "/proc/$DAEMON_PID" ] && return 1
  DAEMON_PID=""
  DAEMON_RC=$rc
  return 0
}

status_json() { numasched status --json --socket "$SOCK" 2>/dev/null | tr -d '\n\t '; }

# Numeric field $2 of flat JSON $1 (first occurrence).
json_num() { echo "$1" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" | head -n 1; }

# The plan's placements, "pid|cpus|nodes" per line, from `numasched plan --json`: each
# placement is a flat object with "pid", "cpus" and "nodes" (other objects lack "nodes"
# or contain nested objects, which the [^{}] match skips).
plan_placements() {
  tr -d '\n\t ' | grep -o '{[^{}]*}' | grep '"nodes":\[' | grep '"pid":' | while read -r obj; do
    pid=$(echo "$obj" | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
    cpus=$(echo "$obj" | sed -n 's/.*"cpus":\[\([0-9,]*\)\].*/\1/p' | tr ',' ' ')
    nodes=$(echo "$obj" | sed -n 's/.*"nodes":\[\([0-9,]*\)\].*/\1/p' | tr ',' ' ')
    echo "$pid|$cpus|$nodes"
  done
}

# Waits until every pid in $2.. has the affinity predicted in plan file $1 (node-level
# match accepted); up to $WAIT_S seconds. Prints mismatches on failure.
wait_plan_applied() {
  local plan=$1 i=0 bad
  shift
  while :; do
    bad=""
    for pid in "$@"; do
      want=$(grep "^$pid|" "$plan" | cut -d'|' -f2)
      wantn=$(grep "^$pid|" "$plan" | cut -d'|' -f3)
      have=$(affinity "$pid")
      if [ "$have" != "$want" ] && [ "$(nodes_of_cpus "$have")" != "$wantn" ]; then
        bad="$bad pid $pid has [$have] plan [$want] (nodes $wantn);"
      fi
    done
    [ -z "$bad" ] && return 0
    i=$((i + 1))
    if [ $i -gt $((WAIT_S * 2)) ]; then echo "$bad"; return 1; fi
    sleep 0.5
  done
}

# The CPU node(s) at the smallest distance from node $1, other than node $2 if given.
nearest_cpu_nodes() {
  local skip=${2:-none} best="" bestd=999 n
  eval "d=\$DIST_$1"
  set -- $d
  for n in $NODES; do
    eval "c=\$CPUS_$n"
    dist=$1; shift
    [ -n "$c" ] && [ "$n" != "$skip" ] || continue
    if [ "$dist" -lt "$bestd" ]; then best=$n bestd=$dist
    elif [ "$dist" = "$bestd" ]; then best="$best $n"; fi
  done
  echo "$best"
}

# The plan's one line of why for pid $1 (from /tmp/plan.json; its processes list has
# pid and reason per process).
plan_reason() {
  tr -d '\n' </tmp/plan.json | tr -s ' ' | awk -v k="\"pid\": $1," '{ i = index($0, k); if (!i) exit
    r = substr($0, i); j = index(r, "\"reason\": \""); if (!j) exit
    r = substr(r, j + 11); print substr(r, 1, index(r, "\"") - 1) }'
}

# Nodes that have both CPUs and memory (the homes a load can be local on).
cpu_nodes() {
  for n in $NODES; do eval "c=\$CPUS_$n"; [ -n "$c" ] && printf '%s ' "$n"; done | sed 's/ $//'
}

# ---------------------------------------------------------------- scenarios

# topo: what numasched reads from sysfs is what QEMU was told.
scenario_topo() {
  local json got_nodes why=""
  json=$(numasched topo --json 2>&1 | tr -d '\n\t ') || { echo "FAIL topo: numasched topo --json failed: $json"; return; }
  # One chunk per node, cut before its "llcs" (whose objects also have "cpus").
  echo "$json" | awk '{ n = split($0, parts, /\{"id":/)
      for (i = 2; i <= n; i++) { c = parts[i]; sub(/"llcs".*/, "", c); print c } }' >/tmp/topo.nodes
  got_nodes=$(sed 's/^\([0-9]*\).*/\1/' /tmp/topo.nodes | tr '\n' ' ' | sed 's/ $//')
  [ "$got_nodes" = "$NODES" ] || why="$why node ids [$got_nodes] want [$NODES];"
  for n in $NODES; do
    line=$(grep "^$n," /tmp/topo.nodes)
    cpus=$(echo "$line" | sed -n 's/.*"cpus":\[\([0-9,]*\)\].*/\1/p' | tr ',' ' ')
    dist=$(echo "$line" | sed -n 's/.*"distances":\[\([0-9,]*\)\].*/\1/p' | tr ',' ' ')
    eval "wc=\$CPUS_$n; wd=\$DIST_$n"
    [ "$cpus" = "$wc" ] || why="$why node $n cpus [$cpus] want [$wc];"
    [ "$dist" = "$wd" ] || why="$why node $n distances [$dist] want [$wd];"
    say "node $n: cpus [$cpus] distances [$dist]"
  done
  if [ -z "$why" ]; then echo "PASS topo"; else echo "FAIL topo:$why"; fi
}

# placement: one stream load per node holding memory; the daemon applies what `plan`
# predicted, and a load homed on a node with CPUs runs on that node's CPUs.
LOAD_PIDS=""
scenario_placement() {
  local why="" n pid
  : >/tmp/loads.home
  for n in $NODES; do
    pid=$(start_stream "$n" 64 120)
    LOAD_PIDS="$LOAD_PIDS $pid"
    echo "$pid $n" >>/tmp/loads.home
  done
  for pid in $LOAD_PIDS; do
    wait_touched "$pid" 60 || why="$why load $pid never touched its 64M;"
  done
  [ -z "$why" ] || { echo "FAIL placement:$why"; return; }
  sleep 2   # a little CPU history, so every load counts as running
  numasched plan --json --db "$PROFILE_DB" --min-cpu 0 --include-comm nsload >/tmp/plan.json 2>/tmp/plan.err ||
    { echo "FAIL placement: numasched plan failed: $(head -c 300 /tmp/plan.err)"; return; }
  plan_placements </tmp/plan.json >/tmp/plan.txt
  for pid in $LOAD_PIDS; do
    grep -q "^$pid|" /tmp/plan.txt || why="$why plan has no placement for load $pid;"
  done
  [ -z "$why" ] || { echo "FAIL placement:$why"; return; }
  while read -r pid n; do
    say "load $pid memory on node $n: plan cpus [$(grep "^$pid|" /tmp/plan.txt | cut -d'|' -f2)]: $(plan_reason "$pid")"
  done </tmp/loads.home

  start_daemon --include-comm nsload --db "$PROFILE_DB"
  [ -S "$SOCK" ] || { echo "FAIL placement: daemon did not open $SOCK: $(tail -n 3 $DAEMON_LOG)"; return; }
  WAIT_S=15
  bad=$(wait_plan_applied /tmp/plan.txt $LOAD_PIDS)
  # The plan before the daemon saw others' work of that one moment (CI 2026-11-28, 4n:
  # 0.3 CPUs on node 3 as loads started, so it spread the fourth load over nodes 2
  # and 3; the daemon, planning every epoch, kept it on its home node 3). Then a plan
  # taken beside the running daemon, of the same machine, must agree with it.
  tries=0
  while [ -n "$bad" ] && [ $tries -lt 3 ]; do
    say "the daemon and the plan before it differ:$bad planning again beside it"
    numasched plan --json --db "$PROFILE_DB" --min-cpu 0 --include-comm nsload \
      >/tmp/plan2.json 2>/dev/null
    plan_placements </tmp/plan2.json >/tmp/plan2.txt
    WAIT_S=3
    bad=$(wait_plan_applied /tmp/plan2.txt $LOAD_PIDS)
    tries=$((tries + 1))
  done
  why="$why$bad"
  sleep 1.5   # a few more epochs: the placement must also stay
  while read -r pid n; do
    # The daemon sets a process's threads one at a time, so a re-plan in progress (a
    # load found to need more CPUs than planned) can be read half done: read again
    # until the threads agree, for up to 2 s. Threads that never agree still fail.
    tries=0
    while :; do
      have=$(affinity "$pid")
      split=""
      for t in $(thread_affinities "$pid"); do
        [ "$t" = "$(commas "$have")" ] || split="$split load $pid threads differ ($t vs $have);"
      done
      if [ -z "$split" ] || [ "$tries" -ge 10 ]; then break; fi
      tries=$((tries + 1))
      sleep 0.2
    done
    why="$why$split"
    eval "home=\$CPUS_$n"
    if [ -n "$home" ] && [ "$(nodes_of_cpus "$have")" != "$n" ]; then
      why="$why load $pid (memory on node $n) runs on [$have], not node $n [$home];"
    fi
    # Memory on a node without CPUs: the load belongs on the nearest node with CPUs,
    # which has room for one more load as planned. It can lose that room for a while:
    # a neighbour there found to need more CPUs than planned (under TCG, vCPUs that
    # wait read as demand) takes the node, and the daemon moves this load to the
    # nearest node with room, saying which. That detour passes only when the daemon's
    # last word on this load names the node it runs on.
    if [ -z "$home" ]; then
      near=$(nearest_cpu_nodes "$n")
      got=$(nodes_of_cpus "$have")
      said=$(grep "pid $pid affinity" "$DAEMON_LOG" | tail -n 1 |
        sed -n 's/.*nearest node with room is \([0-9]*\).*/\1/p')
      case " $near " in
        *" $got "*) ;;
        *) if [ -n "$said" ] && [ "$said" = "$got" ]; then
             say "load $pid detoured to node $got: the daemon found nearer node(s) $near full"
           else
             why="$why load $pid (memory on CPU-less node $n) runs on node(s) $got, but the nearest node(s) with CPUs are $near (distances: $(eval echo \$DIST_$n)), and the daemon did not say node $got was the nearest with room;"
           fi ;;
      esac
    fi
    say "load $pid memory on node $n: affinity [$have] (node $(nodes_of_cpus "$have"))"
  done </tmp/loads.home
  st=$(status_json)
  [ -n "$st" ] || why="$why status --json gave nothing;"
  for pid in $LOAD_PIDS; do
    echo "$st" | grep -q "\"pid\":$pid," || why="$why status does not list load $pid;"
  done
  epochs=$(json_num "$st" epochs); errs=$(json_num "$st" errors_total)
  say "status: epochs ${epochs:-?}, replans $(json_num "$st" replans), errors ${errs:-?}"
  [ "${errs:-1}" = 0 ] || why="$why status reports errors_total=${errs:-?};"
  if [ -z "$why" ]; then echo "PASS placement"; else
    # What the daemon decided and why, for the one reading the CI log.
    grep -E "affinity|re-planned" "$DAEMON_LOG" | sed 's/^.*INFO //' | tail -n 12 | sed 's/^/    /'
    echo "FAIL placement:$why"
  fi
}

# restore: SIGTERM makes the daemon give every thread its original affinity (all CPUs),
# and `numasched run` exits with its command's status.
scenario_restore() {
  local why="" all pid rc
  all=$(all_cpus)
  if [ -z "$DAEMON_PID" ] || [ -z "$LOAD_PIDS" ]; then
    echo "FAIL restore: needs the daemon and loads of the placement scenario"; return
  fi
  # At least one load must have been narrowed, or there is nothing to restore.
  narrowed=0
  for pid in $LOAD_PIDS; do [ "$(affinity "$pid")" != "$all" ] && narrowed=$((narrowed + 1)); done
  [ $narrowed -gt 0 ] || why="$why no load was narrowed before SIGTERM;"
  stop_daemon || why="$why daemon still running 10 s after SIGTERM;"
  [ "${DAEMON_RC:-1}" = 0 ] || why="$why daemon exited $DAEMON_RC after SIGTERM;"
  for pid in $LOAD_PIDS; do
    for t in $(thread_affinities "$pid"); do
      [ "$t" = "$(commas "$all")" ] || why="$why load $pid has a thread on [$t], not all CPUs [$all];"
    done
  done
  stop_pids $LOAD_PIDS
  LOAD_PIDS=""
  numasched run --no-db -- sh -c 'exit 7' >/tmp/run.log 2>&1
  rc=$?
  [ $rc = 7 ] || why="$why numasched run -- sh -c 'exit 7' exited $rc;"
  say "restored $narrowed narrowed load(s) to [$all]; numasched run exit status $rc"
  if [ -z "$why" ]; then echo "PASS restore"; else echo "FAIL restore:$why"; fi
}

# noharm: a 2-thread cpu load, and one whose second thread starts 1.5 s late, run
# unmanaged, under `numasched run --dry-run` (the daemon observing, changing nothing)
# and under `numasched run` (defaults: pin llc), NOHARM_ROUNDS rounds (3; more for a
# figure, see docs/vm.md), the order rotating from round to round. Judged: the daemon
# never changes the load's CPUs (see the end). Printed beside it: per round the ratios
# managed/unmanaged and managed/observed of runs made back to back, and their medians
# (paired ratios cancel the drift of a shared host that medians of rates do not).
NOHARM_SECONDS=${NOHARM_SECONDS:-6}
NOHARM_ROUNDS=${NOHARM_ROUNDS:-3}
rate_of() { sed -n 's/.*"event":"summary".*"rate":\([0-9.e+]*\).*/\1/p' "$1" | head -n 1; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print 0 }'; }
# One run of the load, unmanaged (un), observed (dr) or managed (ma); prints its rate.
noharm_run() {
  case $1 in
    un) nscpu workload cpu $2 --seconds "$NOHARM_SECONDS" --json >/tmp/nh.json 2>/dev/null ;;
    dr) numasched run --no-db --dry-run -- \
          nscpu workload cpu $2 --seconds "$NOHARM_SECONDS" --json >/tmp/nh.json 2>>/tmp/nh.err ;;
    ma) numasched run -v --no-db --journal /tmp/nh-journal.json -- \
          nscpu workload cpu $2 --seconds "$NOHARM_SECONDS" --json >/tmp/nh.json 2>>/tmp/nh.err ;;
  esac
  rate_of /tmp/nh.json
}
scenario_noharm() {
  local why="" name args i un dr ma u d m mu md r_un r_dr r_ma order k narrowed
  : >/tmp/nh.err
  for name in two late; do
    case $name in
      two) args="--threads 2" ;;
      late) args="--threads 2 --late 1.5" ;;
    esac
    un="" dr="" ma="" mu="" md=""
    i=0
    while [ $i -lt "$NOHARM_ROUNDS" ]; do
      case $((i % 3)) in
        0) order="un dr ma" ;;
        1) order="dr ma un" ;;
        2) order="ma un dr" ;;
      esac
      for k in $order; do eval "r_$k=\$(noharm_run $k \"\$args\")"; done
      un="$un $r_un"; dr="$dr $r_dr"; ma="$ma $r_ma"
      mu="$mu $(ratio "$r_ma" "$r_un")"; md="$md $(ratio "$r_ma" "$r_dr")"
      i=$((i + 1))
    done
    u=$(median $un); d=$(median $dr); m=$(median $ma)
    say "$name: median rates unmanaged $u, observed (dry run) $d, managed $m ($NOHARM_ROUNDS rounds of ${NOHARM_SECONDS} s)"
    say "$name: per round managed/unmanaged$mu; managed/observed$md"
    say "$name: median of the paired ratios: managed/unmanaged $(median $mu), managed/observed $(median $md) (daemon overhead included)"
  done
  grep -E "affinity|re-planned" /tmp/nh.err | sed 's/^.*INFO //' | tail -n 12 | sed 's/^/    /'
  # What is judged: the load (no counters here, no profile: nothing known of it) is
  # never narrowed, so no placement of numasched's can cost it anything. The rates are
  # printed, not judged: under TCG on this 2-core host the medians of 3 identical runs
  # differ by up to 9% (cpuless, CI 2026-11-25: unmanaged 700, observed 638 M iter/s),
  # more than the 3% issue 12 asks about.
  narrowed=$(grep -cE "done: set| changed=[1-9]" /tmp/nh.err)
  [ "$narrowed" = 0 ] || why="$why the daemon changed the load's CPUs $narrowed time(s): $(grep -m 1 -E "done: set| changed=[1-9]" /tmp/nh.err | sed 's/^.*INFO //');"
  grep -q "re-planned.*placements=1" /tmp/nh.err || why="$why the managed runs logged no plan of the load (was it managed?);"
  if [ -z "$why" ]; then echo "PASS noharm"; else echo "FAIL noharm:$why"; fi
}

# tcgpairs: diagnostic for noharm, no numasched at all: the 2-thread load pinned by
# taskset to two vCPUs of one virtual socket, to one vCPU of each, and unpinned.
scenario_tcgpairs() {
  local set i r rates
  for set in all "0,1" "2,3" "0,2" "1,3"; do
    rates=""
    for i in 1 2 3; do
      if [ "$set" = all ]; then
        nscpu workload cpu --threads 2 --seconds "$NOHARM_SECONDS" --json >/tmp/nh.json 2>/dev/null
      else
        /usr/bin/taskset -c "$set" nscpu workload cpu --threads 2 --seconds "$NOHARM_SECONDS" --json >/tmp/nh.json 2>/dev/null
      fi
      rates="$rates $(rate_of /tmp/nh.json)"
    done
    say "cpus $set: median $(median3 $rates) (rates$rates)"
  done
  echo "PASS tcgpairs"
}

# pinned: a load an administrator pinned with taskset keeps its pin while the daemon
# runs and after it stops, even though its memory is on another node.
scenario_pinned() {
  local why="" pin far pinned free
  pin=$(echo $CPUS_0 | cut -d' ' -f1)
  far=$(echo "$(cpu_nodes)" | awk '{ print $NF }')
  pinned=$(start_stream "$far" 64 120 "/usr/bin/taskset -c $pin")
  free=$(start_stream "$far" 64 120)
  wait_touched "$pinned" 60 && wait_touched "$free" 60 || { echo "FAIL pinned: loads never touched their memory"; stop_pids $pinned $free; return; }
  start_daemon --include-comm nsload --db "$PROFILE_DB"
  sleep 4
  [ "$(affinity "$free")" != "$(all_cpus)" ] || why="$why the daemon placed nothing (unpinned load still on all CPUs);"
  for t in $(thread_affinities "$pinned"); do
    [ "$t" = "$pin" ] || why="$why pinned load has a thread on [$t] while the daemon runs;"
  done
  say "pinned load (memory on node $far) on [$(affinity "$pinned")], unpinned load on [$(affinity "$free")]"
  stop_daemon || why="$why daemon did not stop;"
  for t in $(thread_affinities "$pinned"); do
    [ "$t" = "$pin" ] || why="$why pinned load has a thread on [$t] after the daemon stopped;"
  done
  stop_pids $pinned $free
  if [ -z "$why" ]; then echo "PASS pinned"; else echo "FAIL pinned:$why"; fi
}

# The end of the others' work scenarios: the pinned cpu loads listed in /tmp/hogs.cpu
# must have kept their CPUs; stops the daemon and the loads; PASS or FAIL scenario $1
# with the reasons $2 (the daemon's last decisions printed on failure).
others_end() {
  local name=$1 why=$2 h c
  shift 2
  while read -r h c; do
    [ "$(affinity "$h")" = "$c" ] || why="$why pinned cpu load $h moved to [$(affinity "$h")];"
  done </tmp/hogs.cpu
  stop_daemon || why="$why daemon did not stop;"
  stop_pids "$@"
  if [ -z "$why" ]; then echo "PASS $name"; else
    grep -E "affinity|re-planned" "$DAEMON_LOG" | sed 's/^.*INFO //' | tail -n 12 | sed 's/^/    /'
    echo "FAIL $name:$why"
  fi
}

# othersnode: node 0's CPUs run cpu loads an administrator pinned there (`taskset`),
# which numasched does not manage; a load with its memory on node 0 must not be
# confined beside them, but run on another node, as the kernel alone runs it. (Until others' work was counted per cache, every policy saw
# node 0 as free and pinned the load there to share its CPUs.)
scenario_othersnode() {
  local why="" c h hogs="" pid have got i
  eval "home=\$CPUS_0"
  : >/tmp/hogs.cpu
  for c in $home; do
    h=$(start_cpu 120 "/usr/bin/taskset -c $c")
    hogs="$hogs $h"
    echo "$h $c" >>/tmp/hogs.cpu
  done
  pid=$(start_stream 0 64 120)
  wait_touched "$pid" 64 || { echo "FAIL othersnode: load never touched its 64M"; stop_pids $pid $hogs; return; }
  sleep 1   # CPU history for the load's profile of demand
  say "unmanaged, the kernel runs load $pid's threads on CPUs $(for t in /proc/$pid/task/*; do awk '{ sub(/^.*\) /, ""); printf "%s ", $37 }' "$t/stat"; done)"
  start_daemon --include-comm nsload --db "$PROFILE_DB"
  [ -S "$SOCK" ] || { echo "FAIL othersnode: daemon did not open $SOCK: $(tail -n 3 $DAEMON_LOG)"; stop_pids $pid $hogs; return; }
  i=0
  while [ $i -lt 40 ] && [ "$(affinity "$pid")" = "$(all_cpus)" ]; do sleep 0.25; i=$((i + 1)); done
  sleep 2   # a few more epochs: the placement must also stay
  have=$(affinity "$pid")
  got=$(nodes_of_cpus "$have")
  say "load $pid (memory on node 0, pinned cpu loads on [$home]): affinity [$have] (node $got)"
  if [ "$have" = "$(all_cpus)" ]; then
    why="$why the daemon never placed the load;"
  else
    case " $got " in *" 0 "*) why="$why load $pid runs on [$have], beside the work pinned to node 0 [$home];" ;; esac
  fi
  # Why it is where it is: node 0 full of others' work, or (when something else ran
  # on node 1 as well and the young load asked for both of its CPUs) time-sharing
  # there. Either way off node 0, which without counting others' work was free.
  say "the daemon's reason: $(grep "pid $pid affinity" "$DAEMON_LOG" | tail -n 1 | sed 's/.*threads: //')"
  others_end othersnode "$why" $pid $hogs
}

# othersarrive: the same work arrives after the daemon confined the load to node 0
# (two cpu loads pinned to each of node 0's CPUs, so the load would run a third of the
# time there). Every CPU there reads busy and the load's own share hides the queue, so
# only its run-queue delay shows it: the daemon must move it off node 0 within 15 s.
scenario_othersarrive() {
  local why="" c h hogs="" pid have got i
  eval "home=\$CPUS_0"
  pid=$(start_stream 0 64 120)
  wait_touched "$pid" 64 || { echo "FAIL othersarrive: load never touched its 64M"; stop_pids $pid; return; }
  start_daemon --include-comm nsload --db "$PROFILE_DB"
  [ -S "$SOCK" ] || { echo "FAIL othersarrive: daemon did not open $SOCK: $(tail -n 3 $DAEMON_LOG)"; stop_pids $pid; return; }
  i=0
  while [ $i -lt 40 ] && [ "$(nodes_of_cpus "$(affinity "$pid")")" != 0 ]; do sleep 0.25; i=$((i + 1)); done
  have=$(affinity "$pid")
  say "load $pid (memory on node 0), alone: affinity [$have]"
  [ "$(nodes_of_cpus "$have")" = 0 ] || { echo "FAIL othersarrive: the daemon did not confine the load to node 0 first ([$have])"; stop_daemon; stop_pids $pid; return; }
  : >/tmp/hogs.cpu
  for c in $home $home; do
    h=$(start_cpu 120 "/usr/bin/taskset -c $c")
    hogs="$hogs $h"
    echo "$h $c" >>/tmp/hogs.cpu
  done
  i=0
  while [ $i -lt 60 ]; do
    got=$(nodes_of_cpus "$(affinity "$pid")")
    case " $got " in *" 0 "*) ;; *) break ;; esac
    sleep 0.25; i=$((i + 1))
  done
  sleep 2   # a few more epochs: it must stay away
  have=$(affinity "$pid")
  got=$(nodes_of_cpus "$have")
  say "two cpu loads pinned to each of [$home] arrived: load $pid on [$have] (node $got) after $(awk -v i=$i 'BEGIN { printf "%.1f", i / 4 }') s"
  case " $got " in *" 0 "*) why="$why load $pid still runs on [$have], queueing behind the work pinned to node 0 [$home];" ;; esac
  others_end othersarrive "$why" $pid $hogs
}

# ---------------------------------------------------------------- migration case
# One memory-bound load with its memory bound to node $MIGRATE_HOME, whose CPUs are all
# taken by cpu loads an administrator pinned there: the load cannot run locally. A
# manager can run it on another node and move its pages after it.
# `run_case MANAGER MIB SECONDS EARLY` runs it under MANAGER (numasched|numad|none|autonuma)
# for SECONDS (or, with EARLY=1, until 3 s after it settled) and sets the CASE_* variables.
# The kernel's automatic NUMA balancing is off except for `autonuma`, which is no
# manager but the kernel's own balancing (kernel.numa_balancing=1), what an operator has
# by default; each manager is measured alone.
#
# The load has the stream loads' profile (see PROFILE_DB at the top): with none its
# NUMA penalty would count as 1, no page move could pay off, and numasched would
# never migrate.
run_case() {
  local mgr=$1 mib=$2 secs=$3 window=$3 early=$4 hogs="" c pid t0 before after settle="" i mpid="" \
    frac=0 nodes cpus sum=0 samples=0 prog0 sys0
  eval "home=\$CPUS_$MIGRATE_HOME"
  if [ "$mgr" = autonuma ]; then balancing 1; else balancing 0; fi
  no_numad_left
  trail "$mgr: starting loads"
  for c in $home; do hogs="$hogs $(start_cpu 300 "/usr/bin/taskset -c $c")"; done
  rm -f /tmp/case-load.log
  pid=$(LOAD_LOG=/tmp/case-load.log; LOAD_REPORT=1; start_stream "$MIGRATE_HOME" "$mib" 300 "" --touch-node)
  if ! wait_touched "$pid" "$mib"; then
    CASE_ERR="load never touched its ${mib}M: $(untouched_why "$pid" /tmp/case-load.log)"; stop_pids $pid $hogs; return 1
  fi
  sleep 1
  trail "$mgr: load $pid touched its memory"
  before=$(pages_by_node "$pid" | tr '\n' ' ')
  case $mgr in
    numasched)
      start_daemon --include-comm 'ns*' --migrate-pages --migrate-rate 64 --policy auto \
        --db "$PROFILE_DB"
      mpid=$DAEMON_PID ;;
    numad)
      # -i 1:2: scan every 1-2 s (the default is 5-15 s). numad forks into the background.
      # numad leaves alone any process it thinks it bound in the last 300 s, and counts
      # from CLOCK_MONOTONIC, which starts at boot: in a guest that booted seconds ago
      # it would do nothing. A time namespace starts its clock 600 s later.
      rm -f /var/log/numad.log /var/run/numad.pid
      /usr/bin/unshare --time --fork --monotonic 600 numad -i 1:2 -l 6 >/tmp/numad.out 2>&1 || { CASE_ERR="numad failed: $(cat /tmp/numad.out)"; stop_pids $pid $hogs; return 1; }
      i=0; while [ ! -s /var/run/numad.pid ] && [ $i -lt 20 ]; do sleep 0.25; i=$((i + 1)); done
      mpid=$(cat /var/run/numad.pid 2>/dev/null) ;;
    none|autonuma) ;;
  esac
  trail "$mgr: manager started (pid ${mpid:-none})"
  t0=$(now)
  # The load's own progress (elapsed s, GB moved) and system time when the window opens.
  prog0=$(load_progress /tmp/case-load.log) sys0=$(cpu_seconds "$pid" sys)
  # Every second: the node(s) it runs on (its affinity when narrowed, else the node of
  # the CPU it last ran on) and the fraction of its pages there. Settled = the start of
  # the final run of samples with at least 90% local.
  i=0
  while awk -v a="$t0" -v b="$(now)" -v s="$secs" 'BEGIN { exit !(b - a < s) }'; do
    sleep 1; i=$((i + 1))
    cpus=$(affinity "$pid")
    if [ "$cpus" = "$(all_cpus)" ]; then
      cpus=$(awk '{ sub(/^.*\) /, ""); print $37 }' "/proc/$pid/stat")
    fi
    nodes=$(nodes_of_cpus "$cpus")
    frac=$(fraction_on "$pid" "$nodes")
    sum=$(awk -v s="$sum" -v f="$frac" 'BEGIN { print s + f }'); samples=$((samples + 1))
    # Early, settled counts only once numasched has placed the load: before that it may
    # run beside the pinned loads on its home node with every page local, which ended
    # the window 3 s later, just after the daemon ran it elsewhere (CI 2026-11-28, 2n:
    # "only 0.006 of the load's pages are local after 4s").
    if awk -v f="$frac" 'BEGIN { exit !(f >= 0.9) }' &&
      { [ "$early" != 1 ] || grep -q "pid $pid affinity" "$DAEMON_LOG"; }; then
      if [ -z "$settle" ]; then
        settle=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
        [ "$early" = 1 ] && secs=$(awk -v s="$settle" 'BEGIN { print int(s) + 3 }')
      fi
    else
      settle=""   # not settled after all (e.g. numad binds first, moves it later)
      secs=$window
    fi
  done
  trail "$mgr: window over"
  # Its rate over the window from its own progress lines, and the system time it was
  # charged meanwhile (hinting faults and page copies it triggered are charged to it).
  CASE_RATE=$(echo "$prog0 $(load_progress /tmp/case-load.log)" |
    awk '{ if ($3 > $1) printf "%.3f", ($4 - $2) / ($3 - $1); else print "-" }')
  CASE_LOAD_SYS=$(awk -v a="$sys0" -v b="$(cpu_seconds "$pid" sys)" 'BEGIN { printf "%.2f", b - a }')
  after=$(pages_by_node "$pid" | tr '\n' ' ')
  CASE_MOVED=$(echo "$before|$after" | awk -F'|' '{ n = split($1, b, " "); split($2, a, " ")
      for (i = 1; i < n; i += 2) { d = a[i + 1] - b[i + 1]; if (d > 0) m += d } print m + 0 }')
  CASE_PID=$pid CASE_FRAC=$frac CASE_NODES=$nodes CASE_CPUS=$(affinity "$pid") CASE_SETTLE=${settle:--} CASE_FREE=$(free_by_node)
  CASE_MEAN=$(awk -v s="$sum" -v n="$samples" 'BEGIN { printf "%.3f", n ? s / n : 0 }')
  CASE_BEFORE=$before CASE_AFTER=$after CASE_CPU_S="-" CASE_USER_S="-" CASE_ERR="" CASE_REASON="" CASE_PAGE_LINES="" CASE_LAST_PAGES="" CASE_LAST_AFFINITY="" CASE_TRACE=""
  CASE_WALL=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }')
  # The daemon walks the whole address space it planned to move, also after the pages
  # that mattered are there: give it up to 30 s more to say the move is done.
  if [ "$mgr" = numasched ] && [ "$early" = 1 ] && [ -n "$settle" ]; then
    i=0
    while ! grep -q "pid $pid pages .*: done" "$DAEMON_LOG" && [ $i -lt 60 ]; do
      sleep 0.5; i=$((i + 1))
    done
  fi
  trail "$mgr: stopping the manager"
  case $mgr in
    numasched)
      CASE_CPU_S=$(cpu_seconds "$DAEMON_PID")
      CASE_USER_S=$(cpu_seconds "$DAEMON_PID" user)
      case_status=$(status_json)
      CASE_MAX_EPOCH=$(json_num "$case_status" max_epoch_ms)
      CASE_MAX_STEP=$(json_num "$case_status" max_migration_step_ms)
      CASE_MAX_CALL=$(json_num "$case_status" max_migration_call_ms)
      stop_daemon
      # What the daemon did with this load and why, from its log (complete once it has
      # stopped: an epoch's lines are written when its apply pass ends).
      CASE_REASON=$(grep -E "pid $pid (affinity|pages)" "$DAEMON_LOG" | sed 's/^.*INFO //' |
        tail -n 3 | tr '\n' ';')
      CASE_PAGES_DONE=$(grep -c "pid $pid pages .*: done" "$DAEMON_LOG")
      # For a failure's one line (the host's summary shows only that): how often the
      # daemon spoke of its pages, and its last word on them and on its CPUs.
      CASE_PAGE_LINES=$(grep -c "pid $pid pages" "$DAEMON_LOG")
      CASE_LAST_PAGES=$(grep "pid $pid pages" "$DAEMON_LOG" | tail -n 1 | sed 's/^.*INFO //')
      CASE_LAST_AFFINITY=$(grep "pid $pid affinity" "$DAEMON_LOG" | tail -n 1 | sed 's/^.*INFO //')
      # Every line about the load, kept for a failure's detail (the host keeps the
      # guest's console, not the daemon's log).
      CASE_TRACE=$(grep -E "pid $pid (affinity|pages)" "$DAEMON_LOG" | cut -c1-400 | tail -n 20) ;;
    numad)
      [ -n "$mpid" ] && CASE_CPU_S=$(cpu_seconds "$mpid") CASE_USER_S=$(cpu_seconds "$mpid" user)
      stop_numad ;;
  esac
  trail "$mgr: stopping the loads"
  stop_pids $pid $hogs
  balancing "$BALANCING_AT_BOOT"
  trail "$mgr: done"
  return 0
}

BALANCING_AT_BOOT=$(cat /proc/sys/kernel/numa_balancing 2>/dev/null || echo 0)
# Sets kernel.numa_balancing (ignored where the kernel has none).
balancing() { [ -w /proc/sys/kernel/numa_balancing ] && echo "$1" >/proc/sys/kernel/numa_balancing; true; }

# migrate: numasched --migrate-pages runs the load off its full home node and moves its
# pages after it (or, honestly, SKIP when the policy decides otherwise).
scenario_migrate() {
  # At the default 1 s interval: the bound below is two intervals, and what an epoch
  # costs under TCG apart from page moves (reading /proc: 0.4-0.9 s measured) does not
  # shrink with the interval. Steps of 100 ms move ~3 MB an epoch here, so 160 MiB
  # take ~55 epochs: the window is 200 s (it ends 3 s after the load settles). 160,
  # not the numad comparison's 320 MiB (numad's threshold, not numasched's): the 320
  # settled after 93-130 s (CI 2026-11-30), a third of CI's time in the VM bed, and
  # the steps and epochs bounded here are as many as the check needs at half of it.
  DAEMON_INTERVAL_MS=1000
  if ! run_case numasched 160 200 1; then
    unset DAEMON_INTERVAL_MS; echo "FAIL migrate: $CASE_ERR"; return
  fi
  unset DAEMON_INTERVAL_MS
  say "load on [$CASE_CPUS] (node(s) $CASE_NODES); pages per node before: $CASE_BEFORE after: $CASE_AFTER"
  say "local fraction $CASE_FRAC, $CASE_MOVED pages moved, settled after ${CASE_SETTLE}s"
  say "daemon: ${CASE_REASON:-(no line about pid $CASE_PID in its log; last lines follow)}"
  [ -n "$CASE_REASON" ] || tail -n 5 "$DAEMON_LOG" | sed 's/^/    /'
  say "nearest node(s) with CPUs to node $MIGRATE_HOME: $(nearest_cpu_nodes "$MIGRATE_HOME" "$MIGRATE_HOME")"
  # Page moves go in steps: calls of 1 MiB until 0.1 s of the epoch is spent. The calls
  # run on the daemon's mover thread, and a step waits for one only until its 0.1 s are
  # up: a call still running then is answered in a later epoch. So a step holds the
  # loop for about 100 ms however long one call takes; 150 ms more are allowed for the
  # process checks before the calls and for waking the loop's thread under TCG, where
  # 8 vCPUs share 2 host cores (CI 2026-11-25: 120.7 ms on 2n with a 520 ms call, 151 ms
  # on 4n with a 1,109 ms call, which failed a 150 ms bound). Under TCG one call costs
  # 100s of ms whatever its size (3.8 s seen once with the host loaded), which before
  # the mover held the loop for the whole call. The whole epoch also reads /proc under
  # TCG (1.08 s once at a 500 ms interval, CI 2026-11-24): issue 12 bounds it at two
  # intervals, here 2 s.
  say "longest migration step: ${CASE_MAX_STEP:-?} ms; longest call: ${CASE_MAX_CALL:-?} ms; slowest epoch: ${CASE_MAX_EPOCH:-?} ms"
  if [ -z "$CASE_MAX_STEP" ] || [ -z "$CASE_MAX_CALL" ] || [ -z "$CASE_MAX_EPOCH" ]; then
    echo "FAIL migrate: status --json had no max_migration_step_ms, max_migration_call_ms or max_epoch_ms"
  elif awk -v m="$CASE_MAX_STEP" 'BEGIN { exit !(m > 250) }'; then
    echo "FAIL migrate: page moves held an epoch for ${CASE_MAX_STEP} ms, more than 100 ms + 150 ms (the longest call took ${CASE_MAX_CALL} ms)"
  elif awk -v m="$CASE_MAX_EPOCH" 'BEGIN { exit !(m > 2000) }'; then
    echo "FAIL migrate: an epoch took ${CASE_MAX_EPOCH} ms (more than two 1 s intervals) while pages moved"
  elif [ "$CASE_MOVED" -gt 0 ] && [ "${CASE_PAGES_DONE:-0}" = 0 ]; then
    echo "FAIL migrate: $CASE_MOVED pages moved, but the daemon's log has no page move of pid $CASE_PID done"
  elif [ "$CASE_MOVED" -gt 0 ] && awk -v f="$CASE_FRAC" 'BEGIN { exit !(f >= 0.9) }'; then
    echo "PASS migrate"
  elif [ "$CASE_MOVED" -gt 0 ]; then
    say "the daemon's lines about pid $CASE_PID:"; echo "$CASE_TRACE" | sed 's/^/    /'
    echo "FAIL migrate: $CASE_MOVED pages moved but only $CASE_FRAC of the load's pages are local after ${CASE_WALL}s on [$CASE_CPUS]; the daemon logged ${CASE_PAGE_LINES:-0} page lines, the last: ${CASE_LAST_PAGES:-none}; its last affinity line: ${CASE_LAST_AFFINITY:-none}; free MiB per node: $CASE_FREE"
  elif echo " $CASE_NODES " | grep -q " $MIGRATE_HOME "; then
    echo "SKIP migrate: the policy kept the load on its home node $MIGRATE_HOME (sharing a pinned CPU), nothing to migrate ($CASE_REASON)"
  else
    echo "SKIP migrate: the policy ran the load on node(s) $CASE_NODES but moved no pages ($CASE_REASON)"
  fi
}

# mems: the migrate case, but the load lives in a cgroup whose cpuset.mems is only its
# home node (whose CPUs are all taken). numasched may run it elsewhere, but must not move
# a page out of cpuset.mems: every page stays on the home node.
scenario_mems() {
  local cg=/sys/fs/cgroup hogs="" c pid before after files_before files_after on_home total grown
  grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts || mount -t cgroup2 none "$cg" ||
    { echo "SKIP mems: cannot mount cgroup2"; return; }
  echo +cpuset >"$cg/cgroup.subtree_control" 2>/dev/null
  mkdir -p "$cg/nsmems"
  if ! echo "$MIGRATE_HOME" >"$cg/nsmems/cpuset.mems" 2>/dev/null; then
    echo "SKIP mems: no cpuset controller in this kernel"; return
  fi
  balancing 0
  eval "home=\$CPUS_$MIGRATE_HOME"
  for c in $home; do hogs="$hogs $(start_cpu 120 "/usr/bin/taskset -c $c")"; done
  sh -c "echo \$\$ >$cg/nsmems/cgroup.procs && exec nsload workload stream --touch-node $MIGRATE_HOME \
    --size 64M --seconds 120 --report-interval 5" >>/tmp/loads.log 2>&1 &
  pid=$!
  if ! wait_touched "$pid" 64; then
    echo "FAIL mems: load never touched its 64M"; stop_pids $pid $hogs; balancing "$BALANCING_AT_BOOT"; return
  fi
  say "load $pid: Mems_allowed_list $(sed -n 's/^Mems_allowed_list:\t*//p' "/proc/$pid/status")"
  before=$(anon_pages_by_node "$pid" | tr '\n' ' ')
  files_before=$(pages_by_node "$pid" | tr '\n' ' ')
  start_daemon --include-comm 'ns*' --migrate-pages --migrate-rate 64 --policy auto --db "$PROFILE_DB"
  sleep 15
  after=$(anon_pages_by_node "$pid" | tr '\n' ' ')
  files_after=$(pages_by_node "$pid" | tr '\n' ' ')
  total=$(anon_pages_by_node "$pid" | awk '{ s += $2 } END { print s + 0 }')
  on_home=$(anon_pages_by_node "$pid" | awk -v h="$MIGRATE_HOME" '$1 == h { print $2 }')
  say "runs on [$(affinity "$pid")]; anonymous pages per node before: $before after: $after"
  say "all mapped pages, shared files included, before: $files_before after: $files_after"
  say "daemon: $(grep -E "pid $pid (affinity|pages)" "$DAEMON_LOG" | sed 's/^.*INFO //' | tail -n 2 | tr '\n' ';')"
  stop_daemon
  stop_pids $pid $hogs
  rmdir "$cg/nsmems" 2>/dev/null
  balancing "$BALANCING_AT_BOOT"
  # The process's own (anonymous) pages are checked: per node outside cpuset.mems, no
  # more after than before. Pages of shared files (the binary, libc) are not: they sit
  # in the page cache wherever another process first read them, and a process placed
  # on another node maps more of them there as it runs (CI 2026-11-25, 4n: 30 file
  # pages on node 0 once auto ran the load there, none moved by numasched, which said
  # its memory stays: node 0 is outside its cpuset.mems).
  grown=$(echo "$before|$after" | awk -F'|' -v h="$MIGRATE_HOME" '{ n = split($1, b, " "); split($2, a, " ")
      for (i = 1; i < n; i += 2) if (b[i] != h && a[i + 1] > b[i + 1]) m += a[i + 1] - b[i + 1]; print m + 0 }')
  if [ "${total:-0}" -eq 0 ]; then
    echo "FAIL mems: the load had no pages to check"
  elif [ "$grown" -gt 0 ]; then
    echo "FAIL mems: $grown page(s) arrived on nodes outside its cpuset.mems ($MIGRATE_HOME); ${on_home:-0} of $total on node $MIGRATE_HOME"
  else
    echo "PASS mems"
  fi
}

# numad: the same case (320 MiB: numad ignores processes under 300 MB or half a CPU)
# under neither manager, numad alone and numasched alone, for the same fixed time.
COMPARE_SECONDS=${COMPARE_SECONDS:-30}
scenario_numad() {
  local json="" rows="" m null
  for m in none autonuma numad numasched; do
    if ! run_case "$m" 320 "$COMPARE_SECONDS" 0; then echo "FAIL numad: case '$m': $CASE_ERR"; return; fi
    rows="$rows$m $CASE_FRAC $CASE_MEAN $CASE_MOVED $CASE_SETTLE $CASE_RATE $CASE_LOAD_SYS $CASE_CPU_S $CASE_USER_S $(commas "$CASE_CPUS")
"
    json="$json${json:+,}{\"manager\":\"$m\",\"load_gbps\":$(nullable "$CASE_RATE"),\"load_sys_s\":$CASE_LOAD_SYS,\"local_fraction_end\":$CASE_FRAC,\"local_fraction_mean\":$CASE_MEAN,\"pages_migrated\":$CASE_MOVED,\"settle_s\":$(nullable "$CASE_SETTLE"),\"daemon_cpu_s\":$(nullable "$CASE_CPU_S"),\"daemon_user_cpu_s\":$(nullable "$CASE_USER_S"),\"window_s\":$CASE_WALL,\"final_cpus\":\"$(commas "$CASE_CPUS")\",\"pages_per_node_before\":\"$CASE_BEFORE\",\"pages_per_node_after\":\"$CASE_AFTER\"}"
    if [ "$m" = numad ]; then
      grep -i 'advis\|migrat\|bind' /var/log/numad.log 2>/dev/null | tail -n 2 | sed 's/^/  numad log: /'
    fi
  done
  say "one 320 MiB stream load, memory placed on node $MIGRATE_HOME, whose CPUs run pinned cpu loads; ${COMPARE_SECONDS}s per manager; kernel.numa_balancing=1 only for autonuma"
  printf '  %-10s %9s %9s %9s %9s %9s %9s %9s %9s  %s\n' manager local_end local_avg pages_mv settle_s load_GB/s load_sys cpu_s user_s final_cpus
  echo "$rows" | while read -r m f a p s r ls c u cpus; do
    [ -n "$m" ] && printf '  %-10s %9s %9s %9s %9s %9s %9s %9s %9s  %s\n' "$m" "$f" "$a" "$p" "$s" "$r" "$ls" "$c" "$u" "$cpus"
  done
  echo "RESULT_JSON {\"topology\":\"$TOPO\",\"home_node\":$MIGRATE_HOME,\"load_mib\":320,\"cases\":[$json]}"
  echo "PASS numad"
}
# One sample of where loads $4... run, read in a single process: "1" when each runs on
# CPUs of $1 (its affinity when narrowed, else the CPU it last ran on) and, with $2 = 1,
# its affinity lies within $1 too, else "0"; then "affinity@cpu" for each load. $3 is
# every online CPU.
# (The loads' descriptions are joined with "|", so the sample is two words.)
where_loads() {
  local home=$1 strict=$2 all=$3; shift 3
  awk -v home="$home" -v strict="$strict" -v all="$all" -v pids="$*" '
    function expand(l,   n, r, i, j, b, out) {
      out = ""; n = split(l, r, ",")
      for (i = 1; i <= n; i++) {
        if (split(r[i], b, "-") == 2) { for (j = b[1]; j <= b[2]; j++) out = out (out == "" ? "" : " ") j }
        else if (r[i] != "") out = out (out == "" ? "" : " ") r[i]
      }
      return out
    }
    function inside(l,   n, w, i) { n = split(l, w, " "); for (i = 1; i <= n; i++) if (!(w[i] in h)) return 0; return 1 }
    BEGIN {
      split(home, hw, " "); for (i in hw) h[hw[i]] = 1
      ok = 1; out = ""; n = split(pids, p, " ")
      for (i = 1; i <= n; i++) {
        aff = ""; f = "/proc/" p[i] "/status"
        while ((getline line < f) > 0) if (line ~ /^Cpus_allowed_list:/) { sub(/^Cpus_allowed_list:[ \t]*/, "", line); aff = line }
        close(f)
        cpu = "?"; f = "/proc/" p[i] "/stat"
        if ((getline line < f) > 0) { sub(/^.*\) /, "", line); split(line, st, " "); cpu = st[37] }
        close(f)
        cpus = expand(aff)
        if (aff == "") ok = 0
        if (!inside(cpus == all ? cpu : cpus)) ok = 0
        if (strict == 1 && !inside(cpus)) ok = 0
        out = out (out == "" ? "" : "|") aff "@" cpu
      }
      print ok, out
    }'
}

# blind: issue 39's plain case with nothing known. Busy stream loads with no profile
# (there are no counters under TCG) first touch their memory on node $MIGRATE_HOME, are
# moved to node 0 with taskset and released there. Under each manager in turn (none,
# the kernel's NUMA balancing, numad, numasched at its defaults but --no-db) the node
# each load runs on is sampled every 0.5 s. numasched must have every load confined to
# the home node within 10 s of its start and keep it there to the end of the window;
# the others are measured beside it, for the table. TCG has no remote penalty, so
# behaviour and cost are checked, not speed.
BLIND_SECONDS=${BLIND_SECONDS:-16}
blind_case() {
  local mgr=$1 mib=$2 pids="" pid i t0 t dt up settle="" on_home=0 samples=0 all_home mpid="" strict=0 cpus_all
  eval "home=\$CPUS_$MIGRATE_HOME"
  cpus_all=$(all_cpus)
  [ "$mgr" = numasched ] && strict=1
  if [ "$mgr" = autonuma ]; then balancing 1; else balancing 0; fi
  no_numad_left
  for i in 1 2; do
    pid=$(LOAD_LOG=/tmp/blind-load.log; nsblind workload stream --touch-node "$MIGRATE_HOME" --size "${mib}M" \
      --seconds 300 --report-interval 5 >>/tmp/blind-load.log 2>&1 & echo $!)
    pids="$pids $pid"
  done
  for pid in $pids; do
    wait_touched "$pid" "$mib" || { BLIND_ERR="load $pid never touched its ${mib}M: $(untouched_why "$pid" /tmp/blind-load.log)"; stop_pids $pids; return 1; }
    /usr/bin/taskset -apc "$(commas "$CPUS_0")" "$pid" >/dev/null
  done
  sleep 1
  for pid in $pids; do /usr/bin/taskset -apc "$(commas "$(all_cpus)")" "$pid" >/dev/null; done
  BLIND_BEFORE=""
  for pid in $pids; do BLIND_BEFORE="$BLIND_BEFORE$(fraction_on "$pid" "$MIGRATE_HOME") "; done
  case $mgr in
    numasched)
      BLIND_LOG_FROM=$(($(wc -l <"$DAEMON_LOG" 2>/dev/null || echo 0) + 1))
      DAEMON_INTERVAL_MS=1000 start_daemon --include-comm nsblind
      mpid=$DAEMON_PID ;;
    numad)
      rm -f /var/log/numad.log /var/run/numad.pid
      /usr/bin/unshare --time --fork --monotonic 600 numad -i 1:2 -l 6 >/tmp/numad.out 2>&1 ||
        { BLIND_ERR="numad failed: $(cat /tmp/numad.out)"; stop_pids $pids; return 1; }
      i=0; while [ ! -s /var/run/numad.pid ] && [ $i -lt 20 ]; do sleep 0.25; i=$((i + 1)); done
      mpid=$(cat /var/run/numad.pid 2>/dev/null) ;;
  esac
  # Where each load runs: its affinity when narrowed, else the CPU it last ran on.
  # Settled = the start of the final run of samples with every load on the home node.
  # One awk per sample and shell arithmetic for the clock: the loop must not load the
  # CPUs it watches (it forked some fifty programs per sample before, a CPU's worth
  # under TCG, and the loads queued behind it).
  # (/proc/uptime's "12.34" read as centiseconds: the guest has been up over a second.)
  read -r up _ </proc/uptime; t0=${up%.*}${up#*.}
  BLIND_TIMELINE=""
  while read -r up _ </proc/uptime && dt=$((${up%.*}${up#*.} - t0)) && [ $dt -lt $((BLIND_SECONDS * 100)) ]; do
    t="$((dt / 100)).$((dt % 100 / 10))"
    sleep 0.5
    set -- $(where_loads "$home" "$strict" "$cpus_all" $pids)
    all_home=$1
    BLIND_TIMELINE="$BLIND_TIMELINE $t:$all_home:$2"
    samples=$((samples + 1))
    if [ "$all_home" = 1 ]; then on_home=$((on_home + 1)); [ -n "$settle" ] || settle=$t; else settle=""; fi
  done
  BLIND_SETTLE=${settle:--} BLIND_SHARE=$(awk -v a="$on_home" -v n="$samples" 'BEGIN { printf "%.2f", n ? a / n : 0 }')
  BLIND_CPUS="" BLIND_AFTER=""
  for pid in $pids; do
    BLIND_CPUS="$BLIND_CPUS$(commas "$(affinity "$pid")") "
    BLIND_AFTER="$BLIND_AFTER$(fraction_on "$pid" "$MIGRATE_HOME") "
  done
  BLIND_CPU_S="-" BLIND_REASON="" BLIND_PIDS=$pids
  case $mgr in
    numasched)
      BLIND_CPU_S=$(cpu_seconds "$DAEMON_PID")
      stop_daemon
      BLIND_REASON=$(grep -E "pid $(echo $pids | cut -d" " -f1) affinity" "$DAEMON_LOG" | sed 's/^.*INFO //' | tail -n 1) ;;
    numad)
      [ -n "$mpid" ] && BLIND_CPU_S=$(cpu_seconds "$mpid")
      stop_numad ;;
  esac
  stop_pids $pids
  balancing "$BALANCING_AT_BOOT"
  return 0
}

scenario_blind() {
  local m mib rows="" node_mib free_mib why="" json=""
  [ "$MIGRATE_HOME" != 0 ] || { echo "SKIP blind: needs a home node other than node 0"; return; }
  # Two loads in 70% of the home node's memory and 80% of what is free there, at most
  # 320 MiB each (numad manages only processes over 300 MB, so on the smaller nodes it
  # leaves them alone).
  node_mib=$(awk '/MemTotal/ { print int($4 / 1024) }' "/sys/devices/system/node/node$MIGRATE_HOME/meminfo")
  free_mib=$(node_free_mib "$MIGRATE_HOME")
  mib=$(awk -v n="$node_mib" -v f="$free_mib" 'BEGIN { m = int(n * 0.7 / 2); if (m > int(f * 0.8 / 2)) m = int(f * 0.8 / 2); if (m > 320) m = 320; print m }')
  say "node $MIGRATE_HOME: $node_mib MiB, $free_mib MiB free"
  for m in none autonuma numad numasched; do
    trail "blind: $m"
    if ! blind_case "$m" "$mib"; then echo "FAIL blind: case '$m': $BLIND_ERR"; return; fi
    rows="$rows$m $BLIND_SETTLE $BLIND_SHARE $BLIND_CPU_S $(echo $BLIND_BEFORE | tr ' ' ',') $(echo $BLIND_AFTER | tr ' ' ',') $(echo $BLIND_CPUS | tr ' ' '/')
"
    json="$json${json:+,}{\"manager\":\"$m\",\"settle_s\":$(nullable "$BLIND_SETTLE"),\"share_on_home\":$BLIND_SHARE,\"manager_cpu_s\":$(nullable "$BLIND_CPU_S"),\"final_cpus\":\"$(echo $BLIND_CPUS)\"}"
    if [ "$m" = numasched ]; then
      say "daemon: ${BLIND_REASON:-(no affinity line for the loads in its log)}"
      say "numasched's samples (s:all home:affinity@CPU of each load):$BLIND_TIMELINE"
      if [ "$BLIND_SETTLE" = - ] || awk -v s="$BLIND_SETTLE" 'BEGIN { exit !(s > 10) }'; then
        why="$why the loads were not all confined to node $MIGRATE_HOME within 10 s and kept there (settled: $BLIND_SETTLE, final CPUs $BLIND_CPUS);"
      fi
      case "$BLIND_REASON" in *"which has room"*) ;; *) why="$why the daemon did not say it placed the loads where their memory is;" ;; esac
    fi
  done
  say "two ${mib} MiB stream loads, no profile, memory first touched on node $MIGRATE_HOME, moved to node 0 and released; ${BLIND_SECONDS}s per manager"
  printf '  %-10s %9s %9s %9s %13s %13s  %s\n' manager settle_s on_home cpu_s local_before local_after final_cpus
  echo "$rows" | while read -r m s h c b a cpus; do
    [ -n "$m" ] && printf '  %-10s %9s %9s %9s %13s %13s  %s\n' "$m" "$s" "$h" "$c" "$b" "$a" "$cpus"
  done
  echo "RESULT_JSON {\"scenario\":\"blind\",\"topology\":\"$TOPO\",\"home_node\":$MIGRATE_HOME,\"load_mib\":$mib,\"cases\":[$json]}"
  if [ -z "$why" ]; then echo "PASS blind"; else
    # What numasched did, from that case's start.
    tail -n "+$BLIND_LOG_FROM" "$DAEMON_LOG" | grep -E "nsblind|affinity|re-planned|others|held|wait" | tail -n 30 | sed 's/^/    /'
    echo "FAIL blind:$why"
  fi
}

# The last progress line of a load's log: elapsed seconds and GB moved so far.
load_progress() {
  awk '/ GB moved / { t = $1; g = $2 } END { sub(/s$/, "", t); print t + 0, g + 0 }' "$1" 2>/dev/null
}
nullable() { if [ "$1" = - ] || [ -z "$1" ]; then echo null; else echo "$1"; fi; }

# ---------------------------------------------------------------- slurm
# slurm, slurmv2 and slurmpair live in their own file.
. /bin/slurm.sh

# Each scenario runs under a watchdog: one that hangs (a wait on a process stuck in
# the kernel, a manager that never exits) says FAIL with where it was and what ran,
# and the next scenario still runs, instead of the host's timeout losing the guest.
SCENARIO_LIMIT=${SCENARIO_LIMIT:-360}
# SIGKILLs every process whose command name is one of the arguments (no pkill here).
kill_named() {
  local d c n
  for d in /proc/[0-9]*; do
    c=$(cat "$d/comm" 2>/dev/null) || continue
    for n in "$@"; do [ "$c" = "$n" ] && kill -9 "${d#/proc/}" 2>/dev/null; done
  done
  true
}
watchdog() {
  local s=$1 job=$2 i=0
  # Running = present and not a zombie (a finished job waits for `wait` to reap it).
  running() { [ -d "/proc/$job" ] && ! grep -q '^State:.*Z' "/proc/$job/status" 2>/dev/null; }
  while running && [ $i -lt "$SCENARIO_LIMIT" ]; do sleep 1; i=$((i + 1)); done
  running || return 0
  # The scenario of the job that was running (a job may hold two).
  s=$(sed -n 's/^[0-9.]* scenario //p' "$TRAIL" | tail -n 1)
  echo "FAIL ${s:-$1}: no result after ${SCENARIO_LIMIT}s; its last steps (uptime, step):"
  tail -n 8 "$TRAIL" 2>/dev/null | sed 's/^/    /'
  echo "  processes (pid state wchan command):"
  for d in /proc/[0-9]*; do
    [ -r "$d/stat" ] || continue
    printf '    %s %s %s %s\n' "${d#/proc/}" "$(awk '{ print $3 }' "$d/stat" 2>/dev/null)" \
      "$(cat "$d/wchan" 2>/dev/null)" "$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null | cut -c1-60)"
  done | grep -E ' (ns|numa|unshare)' || true
  kill -9 "$job" 2>/dev/null
  kill_named nsload nscpu nsblind nsmeasure numad numasched jobload outsider srun slurmstepd slurmd slurmctld munged
  balancing "$BALANCING_AT_BOOT"
}
# measure: `profile measure --llc-pressure` runs a stream twice with its memory on node
# 0, twice on node 1 and twice beside an LLC stream (memory on node 0), its CPUs on
# node 0, in turn. From outside, each run's numa_maps must show
# its anonymous pages where that run was bound; the profile is stored as measured, and
# the next `plan` ranks a running nsmeasure by it and says so. TCG has no remote
# penalty: the figure is printed, not checked.
scenario_measure() {
  local out=/tmp/measure.json err=/tmp/measure.err samples=/tmp/measure.samples mpid rc pid \
    order="" k=0 want got why="" load line
  : >"$samples"
  numasched profile measure --runs 2 --local 0 --remote 1 --llc-pressure --db "$PROFILE_DB" --json -- \
    nsmeasure workload stream --size 64M --seconds 2 >"$out" 2>"$err" &
  mpid=$!
  # The children of the measuring process, by the pid stat gives as their parent.
  while [ -d "/proc/$mpid" ] && ! grep -q '^State:.*Z' "/proc/$mpid/status" 2>/dev/null; do
    for pid in $(awk -v p="$mpid" '$2 == "(nsmeasure)" && $4 == p { print $1 }' /proc/[0-9]*/stat 2>/dev/null); do
      line=$(anon_pages_by_node "$pid" | tr '\n' ' ')
      [ -n "$line" ] && echo "$pid $line" >>"$samples"
    done
    sleep 0.2
  done
  wait "$mpid"; rc=$?
  [ "$rc" = 0 ] || { echo "FAIL measure: profile measure exited $rc: $(tail -n 3 "$err" | tr '\n' ' ')"; return; }
  say "result: $(tr -d '\n ' <"$out" | grep -Eo '"(numa_penalty|spread|uncertain|cache_slowdown|mpki)":[^,]*' | tr '\n' ' ')"
  # Runs in the order their children appeared: local, remote, beside the LLC stream
  # (memory local), twice.
  order=$(awk '!seen[$1]++ { print $1 }' "$samples" | tr '\n' ' ')
  [ "$(echo $order | wc -w)" = 6 ] || why="$why saw $(echo $order | wc -w) runs, not 6 ($order);"
  tr -d '\n ' <"$out" | grep -Eq '"cache_slowdown":-?[0-9]' || why="$why no cache_slowdown in --json;"
  # TCG has no PMU: MPKI is null there, a number where the guest has counters.
  tr -d '\n ' <"$out" | grep -Eq '"mpki":(null|[0-9])' || why="$why no mpki in --json;"
  # The co-runner goes with each pressured run.
  ps -o pid,args 2>/dev/null | grep -q '[w]orkload stream --seconds 86400' &&
    why="$why the LLC co-runner outlived the session;"
  for pid in $order; do
    if [ $((k % 3)) = 1 ]; then want=1; else want=0; fi
    # The look that saw most of its pages (the first may come before its arrays
    # exist, the last as it exits and frees them): node pages as "0 N 1 M ...".
    line=$(grep "^$pid " "$samples" | awk '{ t = 0; for (i = 3; i <= NF; i += 2) t += $i
      if (t >= best) { best = t; l = $0 } } END { print l }' | cut -d' ' -f2-)
    got=$(echo "$line" | awk -v w="$want" '{ for (i = 1; i < NF; i += 2) { t += $(i + 1); if ($i == w) on = $(i + 1) } }
      END { printf "%.3f", t ? on / t : 0 }')
    say "run $((k + 1)) (pid $pid, memory bound to node $want): anonymous pages per node $line; $got on node $want"
    awk -v g="$got" 'BEGIN { exit !(g >= 0.9) }' || why="$why run $((k + 1)) had only $got of its pages on node $want;"
    k=$((k + 1))
  done
  numasched profile list --db "$PROFILE_DB" >/tmp/measure.list 2>&1
  say "profile list: $(grep '^nsmeasure' /tmp/measure.list)"
  grep '^nsmeasure' /tmp/measure.list | grep -q 'measured' || why="$why profile list does not show nsmeasure as measured;"
  # A running nsmeasure: the next plan ranks it by the measurement.
  load=$(nsmeasure workload stream --size 64M --seconds 60 >/dev/null 2>&1 & echo $!)
  sleep 2
  numasched plan --db "$PROFILE_DB" --min-cpu 0 --include-comm nsmeasure >/tmp/measure.plan 2>&1
  stop_pids $load
  line=$(grep -E "^ *$load " /tmp/measure.plan)
  say "plan: $line; $(grep 'np measured' /tmp/measure.plan | head -n 1 | sed 's/^ *//')"
  echo "$line" | grep -q ' measured ' || why="$why plan did not rank nsmeasure by its measurement;"
  grep -q 'np measured [0-9-]*: penalty' /tmp/measure.plan || why="$why plan did not say what was measured;"
  if [ -n "$why" ]; then echo "FAIL measure:$why"; else echo "PASS measure"; fi
}

# `restore` goes on from the daemon and loads `placement` left running, so the two
# share one job; after each job whatever it left running is stopped, so no scenario
# sees another's daemon or loads.
set -- $SCENARIOS
while [ $# -gt 0 ]; do
  s=$1; shift
  job=$s
  if [ "$s" = placement ] && [ "${1:-}" = restore ]; then job="placement restore"; shift; fi
  : >"$TRAIL"
  t_job=$(now)
  (
    for one in $job; do
      echo "--- $one"
      trail "scenario $one"
      "scenario_$one"
    done
  ) &
  watchdog "$job" $!
  wait 2>/dev/null
  kill_named nsload nscpu nsblind nsmeasure numad numasched jobload outsider srun slurmstepd slurmd slurmctld munged
  balancing "$BALANCING_AT_BOOT"
  # For the host's table of where the guest's time goes.
  echo "TIME $(echo $job | tr ' ' '+') $(awk -v a="$t_job" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }')"
done
true
