#!/usr/bin/env bash
# slurm/spank/test.sh -- build the numasched SPANK plugin and test it in a real
# one-node Slurm cluster (tests/slurm/cluster.sh) against a fake daemon socket.
# Needs root, cgroup v1, Debian's slurm-wlm 22.05 + munge, libslurm-dev.
#
# Checks: (a) srun --help lists --numasched; (b) NUMASCHED=off reaches both
# tasks' environ; (c) a bad value is refused naming the option; (d) the fake
# daemon got start+exit lines with job id, step "0", task pids, mode "off";
# (e) with no daemon, jobs still run and slurmd stays up (failure logged at
# debug level); (f) an sbatch job with "#SBATCH --numasched=manage" reports
# step "batch"; (g) a daemon that never answers costs one 200 ms timeout per
# step, not per task; (h) a bad plugstack.conf argument is logged by
# slurmstepd and the job still runs; (i) the option set by Slurm's variable
# for it; (j) a site default=manage; (k) allow_opt_out=no refuses off.
#
# Exit 0 = pass; otherwise the last line on stderr is "SPANK FAIL: <reason>".
# KEEP=1 keeps the cluster directory (logs) even on success.
# The single-quoted task commands are expanded by the job's shell, not here.
# shellcheck disable=SC2016
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../../tests/slurm/cluster.sh
source "$ROOT/tests/slurm/cluster.sh"

DIR=""
FAKE_PID=""
fail() {
    echo "SPANK FAIL: $*" >&2
    exit 1
}
stop_fake() {
    if [[ -n $FAKE_PID ]]; then
        kill -TERM "$FAKE_PID" 2>/dev/null
        wait "$FAKE_PID" 2>/dev/null
        FAKE_PID=""
    fi
    [[ -n $DIR ]] && rm -f "$DIR/fake.sock"
}
cleanup() {
    local rc=$?
    stop_fake
    [[ -n $DIR ]] && slurm_stop "$DIR"
    if ((rc == 0)) && [[ -z ${KEEP:-} && -n $DIR ]]; then rm -rf "$DIR"; fi
    [[ -n $DIR && -d $DIR ]] && echo "(logs kept in $DIR/log)" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

hr() { printf '\n== %s\n' "$*"; }
now_ms() { date +%s%3N; }

# ---------------------------------------------------------------- build
hr "cargo build --release --locked (slurm/spank)"
t0=$(now_ms)
(cd "$HERE" && cargo build --release --locked) || fail "plugin build failed"
t1=$(now_ms)
SO=$HERE/target/release/libnumasched_spank.so
[[ -f $SO ]] || fail "$SO not built"
BUILD_MS=$((t1 - t0))
echo "plugin built in $BUILD_MS ms: $SO"

slurm_install || fail "slurm_install failed"
# Two clusters on one host share the node's cgroup tree (slurm_<node>), and
# slurm_stop would sweep the other one's empty cgroups: run alone.
other=$(pgrep -x slurmd | head -n1)
[[ -z $other ]] || fail "another slurmd (pid $other) is running on this host; stop it first"

DIR=$(mktemp -d /tmp/numasched-spank.XXXXXX) || fail "mktemp"
chmod 755 "$DIR"
# On a busy machine a step can wait for the CPU the step before it still holds, and
# srun says so on stderr ("srun: job N queued and waiting for resources", then "...
# has been allocated resources"): notes on the queue, not the job's output, which (i),
# (j) and (k) compare line for line (a clean-clone CI run failed (j) on them). An
# srun first on PATH drops just those two lines and passes everything else through.
REAL_SRUN=$(command -v srun) || fail "srun not found after slurm_install"
mkdir "$DIR/bin" || fail "mkdir $DIR/bin"
cat >"$DIR/bin/srun" <<EOF
#!/usr/bin/env bash
exec 2> >(grep -v -E '^srun: job [0-9]+ (queued and waiting for resources|has been allocated resources)\$' >&2)
exec "$REAL_SRUN" "\$@"
EOF
chmod 755 "$DIR/bin/srun"
PATH=$DIR/bin:$PATH
FAKE_LOG=$DIR/fake.log
: >"$FAKE_LOG"
write_plugstack() { printf 'optional %s socket=%s%s\n' "$SO" "$DIR/fake.sock" "${1:-}" >"$DIR/plugstack.conf"; }
write_plugstack

start_fake() {  # start_fake [ok|silent]
    stop_fake
    python3 "$HERE/fake_daemon.py" "$DIR/fake.sock" "$FAKE_LOG" "${1:-ok}" &
    FAKE_PID=$!
    local i
    for ((i = 0; i < 50; i++)); do
        [[ -S $DIR/fake.sock ]] && return 0
        sleep 0.1
    done
    fail "fake daemon did not create $DIR/fake.sock"
}

# debug level: (e) and (g) look for the plugin's debug messages in slurmd.log
SLURM_TEST_DEBUG=${SLURM_TEST_DEBUG:-debug} \
    SLURM_TEST_EXTRA_CONF="PlugStackConfig=$DIR/plugstack.conf" \
    slurm_start "$DIR" || fail "slurm_start failed (see messages above)"
SLURMD_LOG=$DIR/log/slurmd.log
grep -q "^PlugStackConfig=$DIR/plugstack.conf\$" "$SLURM_CONF" || fail "PlugStackConfig not in slurm.conf"
start_fake ok

slurmd_alive() {
    local name pid st
    while read -r name pid st; do
        [[ $name == slurmd ]] && _slurm_alive "$pid" "$st" && return 0
    done <"$DIR/pids"
    return 1
}

# check_events OFFSET JOB STEP MODE "PID..." -- the fake log's lines after line
# OFFSET for JOB: exactly one start and one exit per pid, all with STEP, MODE.
# Waits up to 10 s for the exit lines (task_exit runs after the client returns).
check_events() {
    local i out
    for ((i = 0; i < 100; i++)); do
        out=$(python3 - "$FAKE_LOG" "$@" <<'EOF'
import json, sys
log, offset, job, step, mode, pids = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6].split()
lines = open(log).read().splitlines()[offset:]
evs = []
for l in lines:
    if not l.startswith("job-task "):
        print(f"not a job-task line: {l!r}"); sys.exit(2)
    e = json.loads(l[len("job-task "):])
    if set(e) != {"event", "job", "step", "pid", "mode", "cpus"}:
        print(f"wrong keys: {l}"); sys.exit(2)
    if e["job"] == job:
        evs.append(e)
want = sorted(int(p) for p in pids)
for kind in ("start", "exit"):
    got = sorted(e["pid"] for e in evs if e["event"] == kind)
    if got != want:
        print(f"{kind} pids {got} != task pids {want}"); sys.exit(1)
for e in evs:
    if e["step"] != step or e["mode"] != (None if mode == "null" else mode):
        print(f"bad event {e}"); sys.exit(2)
    if e["cpus"] is not None and not isinstance(e["cpus"], str):
        print(f"bad cpus {e}"); sys.exit(2)
print(f"ok: {len(evs)} events, cpus={evs[0]['cpus']!r}")
EOF
)
        case $? in
            0) echo "$out"; return 0 ;;
            1) sleep 0.1 ;;
            *) echo "$out"; return 1 ;;
        esac
    done
    echo "$out"
    return 1
}

# ---------------------------------------------------------------- (a)
hr "(a) srun --help lists --numasched"
help=$(srun --help 2>&1) || fail "(a) srun --help failed"
grep -E -- '--numasched(=| )' <<<"$help" || fail "(a) srun --help does not list --numasched"

# ---------------------------------------------------------------- (b)
hr "(b) srun -n2 --numasched=off: NUMASCHED=off in both tasks' environ"
# /proc/$$/environ, not /proc/self/environ: a redirect opens the file in the
# forked child before it execs tr, and after the exec that fd reads 0 bytes
# (the mm it was opened on is gone). $$ is the task itself (bash is what
# slurmstepd exec'd), i.e. exactly what the daemon reads.
out=$(timeout 60 srun -n2 --numasched=off bash -c 'tr "\0" "\n" </proc/$$/environ | grep ^NUMASCHED=' 2>&1) ||
    fail "(b) srun failed: $(tail -n1 <<<"$out")"
echo "$out"
[[ $(grep -c '^NUMASCHED=off$' <<<"$out") == 2 ]] || fail "(b) expected NUMASCHED=off twice, got: $(tr '\n' ' ' <<<"$out")"

# ---------------------------------------------------------------- (c)
hr "(c) srun --numasched=bogus is refused"
out=$(timeout 60 srun --numasched=bogus true 2>&1) && fail "(c) srun --numasched=bogus succeeded"
echo "$out"
grep -q -- '--numasched' <<<"$out" || fail "(c) error does not name --numasched: $(tr '\n' ' ' <<<"$out")"
out=$(timeout 60 sbatch --numasched=Manage --wrap true 2>&1) && fail "(c) sbatch --numasched=Manage succeeded: $out"
echo "$out"
grep -q -- '--numasched' <<<"$out" || fail "(c) sbatch error does not name --numasched"

# ---------------------------------------------------------------- (d)
hr "(d) fake daemon got start/exit lines for srun -n2 --numasched=off"
off=$(wc -l <"$FAKE_LOG")
out=$(timeout 60 srun -n2 --numasched=off bash -c 'echo "pid=$$ job=$SLURM_JOB_ID step=$SLURM_STEP_ID $(tr "\0" "\n" </proc/$$/environ | grep ^NUMASCHED=)"' 2>&1) ||
    fail "(d) srun failed: $(tail -n1 <<<"$out")"
echo "$out"
jid=$(sed -n 's/.* job=\([0-9]*\) .*/\1/p' <<<"$out" | sort -u)
pids=$(sed -n 's/^pid=\([0-9]*\) .*/\1/p' <<<"$out" | tr '\n' ' ')
[[ $jid =~ ^[0-9]+$ && $(wc -w <<<"$pids") == 2 ]] || fail "(d) could not read job id / 2 pids from the tasks"
check_events "$off" "$jid" 0 off "$pids" || fail "(d) daemon events for job $jid wrong"
sed -n "$((off + 1)),\$p" "$FAKE_LOG"
[[ $(sort -u "$FAKE_LOG.uid") == 0 ]] || fail "(d) events did not come from uid 0: $(sort -u "$FAKE_LOG.uid" | tr '\n' ' ')"
echo "all events sent by uid 0 (SO_PEERCRED)"

# ---------------------------------------------------------------- (e)
hr "(e) no daemon: srun -n1 --numasched=advise still works, slurmd stays up"
stop_fake
t0=$(now_ms)
out=$(timeout 60 srun -n1 --numasched=advise bash -c 'tr "\0" "\n" </proc/$$/environ | grep ^NUMASCHED=' 2>&1) ||
    fail "(e) srun without daemon failed: $(tail -n1 <<<"$out")"
t1=$(now_ms)
echo "$out (srun took $((t1 - t0)) ms)"
[[ $out == NUMASCHED=advise ]] || fail "(e) expected NUMASCHED=advise, got: $out"
timeout 60 srun -n1 --numasched=advise true || fail "(e) srun -n1 --numasched=advise true failed"
slurmd_alive || fail "(e) slurmd died"
for ((i = 0; i < 50; i++)); do
    grep -q 'debug: *numasched: daemon not notified via .*fake.sock: connect: No such file' "$SLURMD_LOG" && break
    sleep 0.1
done
grep -m2 'numasched: daemon not notified' "$SLURMD_LOG" || fail "(e) no debug message about the missing daemon in slurmd.log"
grep 'numasched' "$SLURMD_LOG" | grep -E '\] (error|info|verbose):' && fail "(e) plugin logged above debug level"
echo "slurmd alive; failures logged at debug level only"

# ---------------------------------------------------------------- (f)
hr "(f) sbatch with #SBATCH --numasched=manage: step \"batch\""
start_fake ok
off=$(wc -l <"$FAKE_LOG")
cat >"$DIR/job.sh" <<'EOF'
#!/bin/bash
#SBATCH --numasched=manage
echo "pid=$$ NUMASCHED=${NUMASCHED:-unset}"
EOF
jid=$(timeout 60 sbatch --parsable --wait -n1 -o "$DIR/job-%j.out" "$DIR/job.sh") || fail "(f) sbatch --wait failed (${jid:-no job id})"
jid=${jid%%;*}
cat "$DIR/job-$jid.out"
grep -q '^pid=[0-9]* NUMASCHED=manage$' "$DIR/job-$jid.out" || fail "(f) batch script did not see NUMASCHED=manage"
bpid=$(sed -n 's/^pid=\([0-9]*\) .*/\1/p' "$DIR/job-$jid.out")
check_events "$off" "$jid" batch manage "$bpid" || fail "(f) daemon events for batch job $jid wrong"
sed -n "$((off + 1)),\$p" "$FAKE_LOG"

# ---------------------------------------------------------------- (g)
hr "(g) a daemon that never answers: one 200 ms timeout per step"
start_fake silent
t0=$(now_ms)
out=$(timeout 60 srun -n2 --numasched=off true 2>&1) || fail "(g) srun with a silent daemon failed: $out"
t1=$(now_ms)
echo "srun -n2 with a silent daemon took $((t1 - t0)) ms"
for ((i = 0; i < 50; i++)); do
    grep -q 'numasched: daemon timed out earlier in this step' "$SLURMD_LOG" && break
    sleep 0.1
done
n_to=$(grep -c 'numasched: daemon not notified via .*no answer within 200 ms' "$SLURMD_LOG")
n_skip=$(grep -c 'numasched: daemon timed out earlier in this step' "$SLURMD_LOG")
echo "timeouts logged: $n_to, skipped events: $n_skip"
((n_to == 1 && n_skip == 3)) || fail "(g) expected 1 timeout and 3 skipped events, got $n_to and $n_skip"
slurmd_alive || fail "(g) slurmd died"

# ---------------------------------------------------------------- (h)
hr "(h) bad plugstack.conf argument: logged by slurmstepd, job still runs"
start_fake ok
write_plugstack " sokcet=/typo"
out=$(timeout 60 srun -n1 --numasched=manage bash -c 'echo "NUMASCHED=$NUMASCHED"' 2>&1) || fail "(h) srun failed with a bad plugin argument: $out"
echo "$out"
grep -q '^NUMASCHED=manage$' <<<"$out" || fail "(h) NUMASCHED not set with a bad plugin argument"
grep -q -- 'sokcet' <<<"$out" && fail "(h) srun showed the admin's typo to the user"
grep -m1 "error: *numasched: bad plugstack.conf argument 'sokcet=/typo'" "$SLURMD_LOG" ||
    fail "(h) bad argument not logged as an error in slurmd.log"
write_plugstack
slurmd_alive || fail "(h) slurmd died"

# ---------------------------------------------------------------- (i)
hr "(i) the option by environment: SLURM_SPANK__SLURM_SPANK_OPTION_numasched_numasched"
# Slurm's own name for a SPANK option's variable (spank_process_env_options:
# SLURM_SPANK_ + _SLURM_SPANK_OPTION_ + plugin name + _ + option name).
out=$(SLURM_SPANK__SLURM_SPANK_OPTION_numasched_numasched=advise timeout 60 srun -n1 bash -c 'echo "NUMASCHED=${NUMASCHED:-unset}"' 2>&1) ||
    fail "(i) srun with the option's variable failed: $out"
echo "$out"
[[ $out == NUMASCHED=advise ]] || fail "(i) expected NUMASCHED=advise from the environment, got: $out"
out=$(SLURM_SPANK__SLURM_SPANK_OPTION_numasched_numasched=bogus timeout 60 srun -n1 true 2>&1) &&
    fail "(i) a bad value by environment was accepted"
echo "$out"

# ---------------------------------------------------------------- (j)
hr "(j) plugstack.conf default=manage: a job that says nothing is managed"
off=$(wc -l <"$FAKE_LOG")
write_plugstack " default=manage"
out=$(timeout 60 srun -n1 bash -c 'echo "pid=$$ job=$SLURM_JOB_ID NUMASCHED=${NUMASCHED:-unset}"' 2>&1) ||
    fail "(j) srun failed: $out"
echo "$out"
grep -q 'NUMASCHED=manage$' <<<"$out" || fail "(j) expected NUMASCHED=manage by the site's default, got: $out"
jid=$(sed -n 's/.* job=\([0-9]*\) .*/\1/p' <<<"$out")
pid=$(sed -n 's/^pid=\([0-9]*\) .*/\1/p' <<<"$out")
check_events "$off" "$jid" 0 manage "$pid" || fail "(j) daemon events for job $jid do not say manage"
out=$(timeout 60 srun -n1 --numasched=off bash -c 'echo "NUMASCHED=${NUMASCHED:-unset}"' 2>&1) ||
    fail "(j) srun --numasched=off failed where opting out is allowed: $out"
[[ $out == NUMASCHED=off ]] || fail "(j) the user's off did not stand against the default: $out"
out=$(NUMASCHED=advise timeout 60 srun -n1 bash -c 'echo "NUMASCHED=${NUMASCHED:-unset}"' 2>&1) ||
    fail "(j) srun with NUMASCHED=advise exported failed: $out"
[[ $out == NUMASCHED=advise ]] || fail "(j) the environment's advise did not stand against the default: $out"

# ---------------------------------------------------------------- (k)
hr "(k) plugstack.conf allow_opt_out=no: --numasched=off refused at submit, others run"
write_plugstack " default=advise allow_opt_out=no"
out=$(timeout 60 srun -n1 --numasched=off true 2>&1) && fail "(k) srun --numasched=off succeeded: $out"
echo "$out"
grep -q 'allow_opt_out=no' <<<"$out" || fail "(k) the refusal does not say why: $(tr '\n' ' ' <<<"$out")"
out=$(timeout 60 sbatch --numasched=off --wrap true 2>&1) && fail "(k) sbatch --numasched=off succeeded: $out"
out=$(SLURM_SPANK__SLURM_SPANK_OPTION_numasched_numasched=off timeout 60 srun -n1 true 2>&1) &&
    fail "(k) opting out by environment succeeded: $out"
out=$(timeout 60 srun -n1 bash -c 'echo "NUMASCHED=${NUMASCHED:-unset}"' 2>&1) || fail "(k) srun failed: $out"
[[ $out == NUMASCHED=advise ]] || fail "(k) expected the site's default advise, got: $out"
# Exported by hand, past srun's check: slurmstepd overrules it and says why.
out=$(NUMASCHED=off timeout 60 srun -n1 bash -c 'echo "NUMASCHED=${NUMASCHED:-unset}"' 2>&1) ||
    fail "(k) srun with NUMASCHED=off exported failed: $out"
echo "$out"
grep -q '^NUMASCHED=advise$' <<<"$out" || fail "(k) NUMASCHED=off exported was not overruled: $out"
grep -q 'allow_opt_out=no' <<<"$out" || fail "(k) the job's output does not say why it was overruled: $out"
out=$(timeout 60 srun -n1 --numasched=manage bash -c 'echo "NUMASCHED=${NUMASCHED:-unset}"' 2>&1) || fail "(k) srun --numasched=manage failed: $out"
[[ $out == NUMASCHED=manage ]] || fail "(k) expected the user's manage, got: $out"
write_plugstack
slurmd_alive || fail "(k) slurmd died"

hr "SPANK PASS (plugin build $BUILD_MS ms)"
