//! `numasched daemon`, `run`, `status` and live `plan` on this real machine (one node,
//! two CPUs, no hardware counters), with real processes: affinity set and restored on
//! SIGTERM and SIGINT, a `taskset` pin kept, `--dry-run` changing nothing, process
//! churn causing no error, `run` passing the exit status through and restoring what
//! outlives its command, and the one-line errors of bad input.
//!
//! Each test selects its own processes by a command name of its own (a copy of
//! `sleep` or `true` under that name), so the tests can run side by side and never
//! touch anything else on the machine. Needs CPUs 0 and 1; otherwise each test says
//! why and passes.

use crate::common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use common::daemon::{run_script, view, Daemon, BIN};
use common::live::{
    allowed, busy, named_copy, thread_affinities, two_cpus_alone, wait_secs, Guard,
};
use common::numasched;

fn cpus(v: &Value) -> Vec<u64> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// A busy single-threaded process named `name`: numasched places only processes that
/// use CPU (an idle one keeps every CPU it may use), so tests of placement and undo
/// need load. The daemons here pin hard (`--pin cpu`), so that on this one-LLC
/// machine placement narrows at all.
fn sleeper(dir: &Path, name: &str) -> Guard {
    busy(dir, name, &[])
}

/// `--pin cpu` with the test's own flags: narrowing to single CPUs, as placement tests
/// need on this machine.
fn pinned(dir: &Path, extra: &[&str]) -> Daemon {
    let mut args = vec!["--pin", "cpu"];
    args.extend_from_slice(extra);
    Daemon::start(dir, &args)
}

fn stop_restores(sig: Signal, name: &str) {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let a = sleeper(dir.path(), name);
    let b = sleeper(dir.path(), name);
    assert_eq!(allowed(a.pid()), vec![0, 1]);
    let mut d = pinned(dir.path(), &["--include-comm", name]);
    d.wait_managed(b.pid(), 2);
    for g in [&a, &b] {
        assert!(
            wait_secs(10, || allowed(g.pid()).len() == 1),
            "pid {} not placed: {:?}\n{}",
            g.pid(),
            allowed(g.pid()),
            d.log()
        );
    }
    // The plan as applied: a first plan may have given both the whole LLC, where the
    // young loads' first epochs read others' work on every CPU (`policy::crowded`),
    // and on a busy machine an epoch may read a load that barely ran as idle (a CI
    // run's status, read once, caught such a plan): wait for the plan that placed them.
    let mut s = d.status().expect("status");
    wait_secs(10, || {
        s = d.status().expect("status");
        [&a, &b]
            .iter()
            .all(|g| view(&s, g.pid()).is_some_and(|v| cpus(&v["planned_cpus"]).len() == 1))
    });
    for g in [&a, &b] {
        let v = view(&s, g.pid()).expect("in status");
        assert_eq!(cpus(&v["planned_cpus"]).len(), 1, "{v}");
        assert_eq!(v["source"], "unknown", "no counters, no profile here");
    }
    assert!(
        cpus_of(&s["sensors_in_use"]).contains(&"numa_maps".to_string()),
        "{s}"
    );
    assert!(s["decisions"].as_array().is_some_and(|d| !d.is_empty()));
    // Two sleepers on two CPUs: the plan spreads them.
    assert_ne!(allowed(a.pid()), allowed(b.pid()));
    assert_eq!(d.stop(sig), 0, "{}", d.log());
    assert_eq!(allowed(a.pid()), vec![0, 1], "restored on {sig}");
    assert_eq!(allowed(b.pid()), vec![0, 1], "restored on {sig}");
    assert!(!d.socket.exists(), "control socket removed on exit");
    assert!(d.complaints().is_empty(), "{:?}", d.complaints());
}

fn cpus_of(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// SIGUSR1's default action ended the daemon with nothing restored; it is caught and
/// ignored now, and SIGTERM afterwards still restores.
#[test]
fn sigusr1_neither_stops_the_daemon_nor_skips_the_restore() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let a = sleeper(dir.path(), "nsd_usr1");
    let mut d = pinned(dir.path(), &["--include-comm", "nsd_usr1"]);
    d.wait_managed(a.pid(), 2);
    assert!(wait_secs(10, || allowed(a.pid()).len() == 1), "{}", d.log());
    kill(Pid::from_raw(d.guard.pid() as i32), Signal::SIGUSR1).expect("signal");
    let epochs = |d: &Daemon| d.status().and_then(|s| s["epochs"].as_u64());
    let before = epochs(&d).unwrap_or(0);
    assert!(
        wait_secs(10, || epochs(&d).is_some_and(|e| e > before + 2)),
        "the daemon stopped on SIGUSR1:\n{}",
        d.log()
    );
    // Still managed (a loaded machine may have widened it since: the sleeper's
    // thread found itself waiting on one CPU, which is numasched's to undo).
    let s = d.status().expect("status");
    assert!(view(&s, a.pid()).is_some(), "still managed\n{}", d.log());
    assert_eq!(d.stop(Signal::SIGTERM), 0, "{}", d.log());
    assert_eq!(allowed(a.pid()), vec![0, 1], "restored");
}

#[test]
fn sigterm_restores_every_affinity() {
    stop_restores(Signal::SIGTERM, "nsd_term");
}

#[test]
fn sigint_restores_every_affinity() {
    stop_restores(Signal::SIGINT, "nsd_int");
}

#[test]
fn a_taskset_pin_is_kept_while_managed_and_after() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = named_copy(dir.path(), "sleep", "nsd_pinned");
    let Some(p) = Guard::spawn(
        Command::new("taskset")
            .args(["-c", "1"])
            .arg(&bin)
            .arg("60"),
    ) else {
        return;
    };
    assert!(
        wait_secs(5, || allowed(p.pid()) == vec![1]),
        "taskset did not exec"
    );
    let mut d = Daemon::start(dir.path(), &["--include-comm", "nsd_pinned"]);
    let s = d.wait_managed(p.pid(), 3);
    let v = view(&s, p.pid()).expect("managed");
    assert_eq!(cpus(&v["allowed_cpus"]), vec![1], "seen as a pin: {v}");
    assert!(cpus(&v["planned_cpus"]).iter().all(|c| *c == 1), "{v}");
    assert_eq!(allowed(p.pid()), vec![1], "kept inside its pin");
    assert_eq!(d.stop(Signal::SIGTERM), 0);
    assert_eq!(
        allowed(p.pid()),
        vec![1],
        "still pinned after the daemon left"
    );
}

#[test]
fn dry_run_changes_nothing() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let p = sleeper(dir.path(), "nsd_dry");
    let mut d = pinned(dir.path(), &["--include-comm", "nsd_dry", "--dry-run"]);
    let s = d.wait_managed(p.pid(), 4);
    assert_eq!(s["dry_run"], true);
    assert_eq!(allowed(p.pid()), vec![0, 1], "nothing changed");
    let actions: Vec<&str> = s["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .filter_map(|d| d["action"].as_str())
        .collect();
    assert!(actions.contains(&"dry-run"), "{actions:?}");
    assert!(!actions.contains(&"done"), "{actions:?}");
    assert_eq!(d.stop(Signal::SIGTERM), 0);
    assert_eq!(allowed(p.pid()), vec![0, 1]);
}

#[test]
fn process_churn_is_no_error() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let t = named_copy(dir.path(), "true", "nsd_churn_t");
    let s = named_copy(dir.path(), "sleep", "nsd_churn_s");
    // Hundreds of processes that live from microseconds to a few epochs, some exiting
    // between the scan and the apply of an epoch.
    let script = format!(
        "for i in $(seq 1 60); do {s} 0.$((i % 7)) & {t}; {t}; {t}; sleep 0.05; done; wait",
        s = s.display(),
        t = t.display()
    );
    let mut d = Daemon::every(dir.path(), "100ms", &["--include-comm", "nsd_churn_*"]);
    let mut load = Guard::spawn(Command::new("sh").args(["-c", &script])).expect("churn");
    let deadline = Instant::now() + Duration::from_secs(30);
    while load.child().try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "churn script hangs");
        std::thread::sleep(Duration::from_millis(50));
    }
    let Some(s) = d.status() else {
        panic!("daemon does not answer:\n{}", d.log());
    };
    assert!(s["replans"].as_u64().unwrap_or(0) >= 2, "{s}");
    assert_eq!(s["errors_total"], 0, "{s}");
    assert_eq!(d.stop(Signal::SIGTERM), 0);
    assert!(d.complaints().is_empty(), "{:?}", d.complaints());
    assert!(
        d.log().contains("\"message\":\"re-planned\""),
        "it did manage the churn"
    );
}

#[test]
fn run_passes_the_exit_status_through() {
    let dir = tempfile::tempdir().expect("tempdir");
    let j = dir.path().join("journal.json").display().to_string();
    for (script, want) in [("exit 0", 0), ("exit 7", 7), ("kill -TERM $$", 128 + 15)] {
        let (code, _, err) =
            numasched(&["run", "--no-db", "--journal", &j, "--", "sh", "-c", script]);
        assert_eq!(code, want, "{script}: {err}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(
        left.is_empty(),
        "clean stops leave no journal nor its lock: {left:?}"
    );
    let (code, _, err) = numasched(&["run", "--no-db", "--journal", &j, "--", "/nonexistent/cmd"]);
    assert_eq!(code, 127, "as a shell's: not found");
    assert!(err.contains("cannot start \"/nonexistent/cmd\""), "{err}");
}

#[test]
fn run_places_its_command_and_restores_what_outlives_it() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("nsd_orphan");
    std::os::unix::fs::symlink(BIN, &bin).expect("link numasched");
    let pidfile = dir.path().join("orphan.pid");
    // The command starts a busy load that outlives it (its output elsewhere, so that
    // `output()` need not wait for it), reports the load's affinity once numasched
    // has placed it (up to 8 s: on a loaded host the load needs longer to show as busy,
    // and the daemon rightly leaves alone what it has not seen busy), and exits 3.
    let script = format!(
        "{bin} workload cpu --seconds 30 >/dev/null 2>&1 & l=$!; echo $l > {pf}; i=0; \
         while [ $i -lt 80 ] && grep -q 'Cpus_allowed_list:.*-' /proc/$l/status; do \
         sleep 0.1; i=$((i + 1)); done; \
         grep Cpus_allowed_list /proc/$l/status; exit 3",
        bin = bin.display(),
        pf = pidfile.display()
    );
    let out = run_script(dir.path(), "100ms", &script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let orphan: u32 = std::fs::read_to_string(&pidfile)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid");
    let _reaper = OrphanKiller(orphan);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list"))
        .expect("line");
    let placed = line
        .split_once(':')
        .map(|(_, v)| v.trim())
        .unwrap_or_default();
    assert!(
        placed == "0" || placed == "1",
        "placed on one CPU: {line}\n{stderr}"
    );
    assert_eq!(
        allowed(orphan),
        vec![0, 1],
        "what outlived the command was restored\n{stderr}"
    );
}

/// `run` keeps a journal of its own, `run-PID.json` under the user's runtime
/// directory: runs side by side never collide on the service's journal (the second
/// was refused while the first held it), and a run killed with SIGKILL leaves its own,
/// whose changes the next run undoes before anything else, leaving a live run's alone.
#[test]
fn a_killed_run_leaves_its_own_journal_and_the_next_run_undoes_it() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).expect("runtime directory");
    let journals = runtime.join("numasched");
    let bin = dir.path().join("nsd_runjrn");
    std::os::unix::fs::symlink(BIN, &bin).expect("link numasched");
    let pidfile = dir.path().join("loads.pid");
    let load = format!(
        "{} workload cpu --seconds 60 >/dev/null 2>&1 & echo $! >> {}",
        bin.display(),
        pidfile.display()
    );
    let script = format!("{load}; {load}; wait");
    let Some(mut first) = Guard::spawn(
        Command::new(BIN)
            .env("XDG_RUNTIME_DIR", &runtime)
            .args(["run", "--no-db", "--pin", "cpu", "--interval", "100ms"])
            .args(["--min-replan-interval", "100ms", "--", "sh", "-c", &script])
            .stderr(Stdio::null()),
    ) else {
        return;
    };
    let pids = || -> Vec<u32> {
        std::fs::read_to_string(&pidfile)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    assert!(wait_secs(10, || pids().len() == 2), "loads not started");
    let loads = pids();
    let _reapers: Vec<OrphanKiller> = loads.iter().map(|&p| OrphanKiller(p)).collect();
    let own = journals.join(format!("run-{}.json", first.pid()));
    // Beside others' work the run rightly narrows nothing (do no harm): nothing to
    // undo then, and nothing this test can show.
    if !wait_secs(20, || loads.iter().all(|&p| allowed(p).len() == 1)) {
        eprintln!("skipped: the run did not narrow its loads here (others' work?)");
        return;
    }
    assert!(own.exists(), "the run's journal is {}", own.display());

    // A second run beside it: its own journal; the live run's is not taken (taking it
    // would restore what it names and remove it).
    let out = Command::new(BIN)
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["run", "-v", "--no-db", "--include-comm", "nsd_nothing"])
        .args(["--", "true"])
        .output()
        .expect("second run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(own.exists(), "a live run's journal was taken:\n{err}");
    assert!(!err.contains("recovering from an unclean stop"), "{err}");

    // Killed while they are narrowed (read after the kill: nothing changes them then),
    // the journal names them; beside others' work the run may keep them wide, and
    // then there is nothing to undo.
    wait_secs(20, || loads.iter().all(|&p| allowed(p).len() == 1));
    first.kill();
    let narrowed = loads.iter().all(|&p| allowed(p).len() == 1);
    assert!(own.exists(), "SIGKILL left the journal");
    if !narrowed {
        eprintln!("the run had widened its loads before the kill: the undo is not exercised");
    }
    let journaled = std::fs::read_to_string(&own).unwrap_or_default();
    let out = Command::new(BIN)
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["run", "-v", "--no-db", "--include-comm", "nsd_nothing"])
        .args(["--", "true"])
        .output()
        .expect("next run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for &p in &loads {
        assert_eq!(
            allowed(p),
            vec![0, 1],
            "pid {p} not restored; the journal held {journaled}\n{err}"
        );
    }
    // The directory goes too, once empty, if a run made it.
    let left: Vec<_> = std::fs::read_dir(&journals)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.file_name())).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "journals or locks left: {left:?}");
}

/// Kills a process that is not our child (it was re-parented) when dropped.
struct OrphanKiller(u32);

impl Drop for OrphanKiller {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0 as i32), Signal::SIGKILL);
    }
}

#[test]
fn plan_on_this_machine_is_valid_names_the_missing_sensors_and_replays() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let p = sleeper(dir.path(), "nsd_plan");
    // Older than a young process (whose lifetime average is not trusted: it would be
    // given room for all its threads), so that its demand is measured.
    std::thread::sleep(Duration::from_secs_f64(
        numasched::daemon::need::YOUNG_S + 0.5,
    ));
    let (code, out, err) = numasched(&[
        "plan",
        "--json",
        "--no-db",
        "--pin",
        "cpu",
        "--min-cpu",
        "0",
        "--include-comm",
        "nsd_plan",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    let missing: Vec<&str> = v["missing_sensors"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|m| m["sensor"].as_str())
        .collect();
    assert!(missing.contains(&"hardware_counters"), "{missing:?}");
    let plan: numasched::model::Plan =
        serde_json::from_value(v["plan"].clone()).expect("a valid plan");
    assert_eq!(plan.placements.len(), 1);
    assert_eq!(plan.placements[0].pid, p.pid());
    assert_eq!(plan.placements[0].cpus.len(), 1);
    assert_eq!(v["uncharacterised"], serde_json::json!([p.pid()]));
    assert_eq!(allowed(p.pid()), vec![0, 1], "plan changes nothing");
    // The snapshot it printed replays to the same plan.
    let snap = dir.path().join("snap.json");
    std::fs::write(&snap, v["snapshot"].to_string()).expect("write");
    let (code, out, err) = numasched(&[
        "plan",
        "--json",
        "--pin",
        "cpu",
        "--snapshot",
        &snap.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    let replay: numasched::model::Plan = serde_json::from_str(&out).expect("plan");
    assert_eq!(replay.placements, plan.placements);
}

/// `plan` while a daemon manages the machine: the daemon's placements are
/// numasched's, not pins someone else set (it printed each as a foreign pin, and
/// planned inside it).
#[test]
fn plan_beside_a_running_daemon_does_not_take_its_placements_for_foreign_pins() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let l = busy(dir.path(), "nsd_beside", &[]);
    let d = Daemon::start(
        dir.path(),
        &["--pin", "cpu", "--include-comm", "nsd_beside"],
    );
    d.wait_managed(l.pid(), 2);
    // A load seconds old keeps room for all its threads for YOUNG_S (5 s) after its
    // first plan, and is narrowed at the first epoch after that: 5 s from its first
    // plan was a race with that epoch (lost by 80 ms once the first pass sampled
    // /proc/stat for 0.12 s).
    assert!(
        wait_secs(7, || allowed(l.pid()).len() == 1),
        "never placed: {}\n{}",
        allowed(l.pid()),
        d.log()
    );
    let plan = |config: &Path| {
        let (code, out, err) = numasched(&[
            "plan",
            "--json",
            "--no-db",
            "--pin",
            "cpu",
            "--include-comm",
            "nsd_beside",
            "--config",
            &config.display().to_string(),
        ]);
        assert_eq!(code, 0, "{err}");
        let v: Value = serde_json::from_str(&out).expect("JSON");
        v["snapshot"]["processes"][0]["allowed_cpus"].clone()
    };
    let config = dir.path().join("beside.toml");
    let journal = dir.path().join("journal.json");
    std::fs::write(
        &config,
        format!("journal = {:?}\n", journal.display().to_string()),
    )
    .expect("config");
    // Only a plan made while the daemon keeps the load narrowed says anything: on a
    // loaded machine it may rightly give the load its whole LLC for a while (others'
    // work overbooks it), and a pin that is not there cannot be misread.
    let narrowed = || allowed(l.pid()).len() == 1;
    let while_narrowed = |config: &Path| {
        (0..20).find_map(|_| {
            let before = narrowed();
            let seen = plan(config);
            if before && narrowed() {
                return Some(seen);
            }
            std::thread::sleep(Duration::from_millis(200));
            None
        })
    };
    let Some(beside) = while_narrowed(&config) else {
        eprintln!(
            "skipped: the daemon kept its load wide (others' work?)\n{}",
            d.log()
        );
        return;
    };
    assert_eq!(beside, Value::Null, "read as a pin beside the daemon");
    // Without the daemon's journal it can only be taken for a pin.
    let elsewhere = dir.path().join("elsewhere.toml");
    std::fs::write(&elsewhere, "journal = \"/nonexistent/journal.json\"\n").expect("config");
    let Some(alone) = while_narrowed(&elsewhere) else {
        eprintln!(
            "skipped: the daemon kept its load wide (others' work?)\n{}",
            d.log()
        );
        return;
    };
    assert!(alone.is_array(), "no journal, no way to tell");
}

/// Issue 16: on a machine without counters, a process the store knows by name is
/// characterised by its profile, and `plan` and `status` say so in its row (the
/// legend says what "profile" means), not only `plan --json`.
#[test]
fn plan_and_status_say_which_processes_matched_a_profile_by_name() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("p.db").display().to_string();
    let (code, _, err) = numasched(&[
        "profile",
        "set",
        "nsd_prof",
        "--mpki",
        "25",
        "--numa-penalty",
        "1.4",
        "--db",
        &db,
    ]);
    assert_eq!(code, 0, "{err}");
    let p = sleeper(dir.path(), "nsd_prof");
    let pid = p.pid().to_string();
    let row = |out: &str| -> Vec<String> {
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(pid.as_str()))
            .unwrap_or_else(|| panic!("no row for pid {pid}: {out}"));
        line.split_whitespace().map(String::from).collect()
    };
    let legend = numasched::model::character::PenaltySource::LEGEND;

    let select = ["--db", db.as_str(), "--include-comm", "nsd_prof"];
    let mut args = vec!["plan", "--min-cpu", "0"];
    args.extend_from_slice(&select);
    let (code, out, err) = numasched(&args);
    assert_eq!(code, 0, "{err}");
    let cells = row(&out);
    // pid, program, cpus, np, source: the penalty the profile gives, and from where.
    assert_eq!(
        (cells[1].as_str(), cells[3].as_str()),
        ("nsd_prof", "1.40"),
        "{out}"
    );
    assert_eq!(cells[4], "profile", "{out}");
    assert!(out.contains(legend), "{out}");
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");

    let mut d = pinned(dir.path(), &select);
    d.wait_managed(p.pid(), 2);
    let sock = d.socket.display().to_string();
    let (code, out, err) = numasched(&["status", "--socket", &sock]);
    assert_eq!(code, 0, "{err}");
    let cells = row(&out);
    assert!(cells.contains(&"profile".to_string()), "{out}");
    assert!(out.contains(legend), "{out}");
    assert_eq!(d.stop(Signal::SIGTERM), 0, "{}", d.log());
}

#[test]
fn bad_input_is_one_clear_line_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "policy = \"nmass\"\ninterval = \"fast\"\n").expect("write");
    let c = cfg.display().to_string();
    for args in [
        vec!["daemon", "--config", c.as_str(), "--no-db"],
        vec!["plan", "--config", c.as_str(), "--no-db"],
    ] {
        let (code, out, err) = numasched(&args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("bad.toml") && err.contains("line 2"), "{err}");
        assert!(err.contains("invalid duration"), "{err}");
    }
    let (code, _, err) = numasched(&["daemon", "--policy", "fastest"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown policy 'fastest'"), "{err}");
    for cmd in ["daemon", "run", "plan"] {
        let (code, _, err) = numasched(&[cmd, "--pin", "bogus"]);
        assert_eq!(code, 2, "{cmd}");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.contains("--pin") && first.contains("unknown pin granularity 'bogus'"),
            "{cmd}: {err}"
        );
    }
    let sock = dir.path().join("nobody.sock").display().to_string();
    let (code, _, err) = numasched(&["status", "--socket", &sock]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot reach the numasched daemon"), "{err}");
}

#[test]
fn a_second_daemon_on_the_same_socket_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut first = Daemon::start(dir.path(), &["--include-comm", "nsd_none"]);
    assert!(
        wait_secs(10, || first.status().is_some()),
        "{}",
        first.log()
    );
    let sock = first.socket.display().to_string();
    let j = dir.path().join("j2.json").display().to_string();
    let (code, _, err) = numasched(&[
        "daemon",
        "--no-db",
        "--journal",
        &j,
        "--socket",
        &sock,
        "--include-comm",
        "x",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("another numasched daemon is listening"),
        "{err}"
    );
    // Refused before it wrote anything: no journal, no store, no start logged.
    let db = dir.path().join("p2.db").display().to_string();
    let (code, _, err) = numasched(&["daemon", "--db", &db, "--journal", &j, "--socket", &sock]);
    assert_eq!(code, 1, "{err}");
    assert!(!err.contains("starting"), "{err}");
    assert!(!dir.path().join("j2.json").exists(), "journal written");
    assert!(!dir.path().join("p2.db").exists(), "store created");
    // The same journal, another socket: refused by the journal's lock, before the
    // store (whose copy at open would overwrite the running daemon's).
    let other = dir.path().join("other.sock").display().to_string();
    let journal = dir.path().join("journal.json").display().to_string();
    let (code, _, err) = numasched(&[
        "daemon",
        "--db",
        &db,
        "--journal",
        &journal,
        "--socket",
        &other,
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("keeps its journal here"), "{err}");
    assert!(!dir.path().join("p2.db").exists(), "store created");
    assert!(!dir.path().join("other.sock").exists(), "socket left");
    assert_eq!(first.stop(Signal::SIGTERM), 0);
}

/// A dry run changes nothing, but what a killed daemon left pinned is numasched's own
/// leftover: a dry-run start puts it back as any start does (it used to ignore the
/// journal, leave the process narrowed and then log "original affinities restored"),
/// and it writes no journal or store of its own.
#[test]
fn after_kill_9_a_dry_run_start_restores_too_and_writes_nothing() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let a = sleeper(dir.path(), "nsd_drykill");
    let mut d = pinned(dir.path(), &["--include-comm", "nsd_drykill"]);
    d.wait_managed(a.pid(), 2);
    assert!(wait_secs(10, || allowed(a.pid()).len() == 1));
    assert_eq!(d.stop(Signal::SIGKILL), -1, "killed, no exit code");
    assert_eq!(allowed(a.pid()).len(), 1, "SIGKILL left it narrowed");
    let journal = dir.path().join("journal.json");
    assert!(journal.exists());
    let db = dir.path().join("dry.db");
    let db_arg = db.display().to_string();
    let mut dry = Daemon::start(
        dir.path(),
        &[
            "--dry-run",
            "--db",
            &db_arg,
            "--include-comm",
            "nsd_drykill",
        ],
    );
    assert!(
        wait_secs(10, || allowed(a.pid()) == vec![0, 1]),
        "not restored:\n{}",
        dry.log()
    );
    let s = dry.wait_managed(a.pid(), 3);
    assert_eq!(s["dry_run"], true);
    assert_eq!(allowed(a.pid()), vec![0, 1], "the dry run applied nothing");
    assert!(!journal.exists(), "the leftovers were all restored");
    assert_eq!(dry.stop(Signal::SIGTERM), 0);
    let log = dry.log();
    assert!(log.contains("recovering from an unclean stop"), "{log}");
    assert!(log.contains("a dry run changed no affinity"), "{log}");
    assert!(!log.contains("original affinities restored"), "{log}");
    assert!(!db.exists(), "a dry run created the store");
    assert!(!journal.exists(), "a dry run keeps no journal");
}

/// The journal's directory writable only with `CAP_DAC_OVERRIDE` (root's own, but
/// 0500): root passes the check at start, then drops that capability. The start must
/// fail then, not run on applying nothing (it warned once and idled forever). (One
/// owned by another user is refused before, as a directory that user could swap the
/// journal's lock in.)
#[test]
fn a_journal_writable_only_before_the_capability_drop_stops_the_start() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root (the capability drop)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("mkdir");
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o500))
        .expect("chmod");
    let journal = state.join("journal.json").display().to_string();
    // Bounded: before the fix the daemon never stopped.
    let out = Command::new("timeout")
        .args(["20", BIN])
        .args(["daemon", "--no-db", "--no-socket", "--journal", &journal])
        .args(["--include-comm", "nsd_capjrn"])
        .output()
        .expect("daemon");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("journal.json") && err.contains("CAP_DAC_OVERRIDE"),
        "{err}"
    );
}

#[test]
fn without_root_placement_fails_per_process_and_the_daemon_keeps_running() {
    let Some(_alone) = two_cpus_alone().filter(|_| nix::unistd::geteuid().is_root()) else {
        eprintln!("skipped: needs root to drop to another user");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // The unprivileged daemon must be able to create its socket and journal here: its
    // own directory (one open to all would be refused for the journal's lock).
    nix::unistd::chown(
        dir.path(),
        Some(nix::unistd::Uid::from_raw(65534)),
        Some(nix::unistd::Gid::from_raw(65534)),
    )
    .expect("chown");
    let p = sleeper(dir.path(), "nsd_rootsown");
    let socket = dir.path().join("s.sock");
    let log = dir.path().join("d.log");
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        BIN,
        "daemon",
        "--no-db",
    ])
    .arg("--journal")
    .arg(dir.path().join("journal.json"))
    .arg("--socket")
    .arg(&socket)
    .args([
        "--interval",
        "200ms",
        "--pin",
        "cpu",
        "--min-cpu",
        "0",
        "--include-comm",
        "nsd_rootsown",
    ])
    .stderr(File::create(&log).expect("log"));
    let Some(mut g) = Guard::spawn(&mut cmd) else {
        return;
    };
    let logtext = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        wait_secs(15, || logtext().contains("FAILED")),
        "no failure reported:\n{}",
        logtext()
    );
    let text = logtext();
    assert!(text.contains("not running as root"), "{text}");
    assert!(
        text.contains("not permitted") || text.contains("EPERM"),
        "{text}"
    );
    assert_eq!(allowed(p.pid()), vec![0, 1], "nothing changed");
    assert!(
        g.child().try_wait().expect("wait").is_none(),
        "still running"
    );
    kill(Pid::from_raw(g.pid() as i32), Signal::SIGTERM).expect("signal");
    assert!(wait_secs(10, || g
        .child()
        .try_wait()
        .ok()
        .flatten()
        .is_some()));
}

/// A cgroup v1 cpuset made for one test, removed (its tasks moved back) when dropped.
struct Cpuset(PathBuf);

impl Cpuset {
    fn make(name: &str, cpus: &str) -> Option<Cpuset> {
        let root = Path::new("/sys/fs/cgroup/cpuset");
        let dir = root.join(name);
        let made = std::fs::create_dir(&dir)
            .and_then(|()| std::fs::write(dir.join("cpuset.cpus"), cpus))
            .and_then(|()| std::fs::write(dir.join("cpuset.mems"), "0"));
        match made {
            Ok(()) => Some(Cpuset(dir)),
            Err(e) => {
                eprintln!(
                    "skipped: cannot make a cpuset under {}: {e}",
                    root.display()
                );
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    fn add(&self, pid: u32) {
        std::fs::write(self.0.join("tasks"), pid.to_string()).expect("join the cpuset");
    }
}

impl Drop for Cpuset {
    fn drop(&mut self) {
        let tasks = std::fs::read_to_string(self.0.join("tasks")).unwrap_or_default();
        for t in tasks.lines() {
            let _ = std::fs::write("/sys/fs/cgroup/cpuset/tasks", t);
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_cpuset_restricted_process_is_planned_inside_its_cpuset() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let p = sleeper(dir.path(), "nsd_cpuset");
    let Some(cs) = Cpuset::make(&format!("nsd_test_{}", std::process::id()), "1") else {
        return;
    };
    cs.add(p.pid());
    assert_eq!(allowed(p.pid()), vec![1], "the cpuset applies");
    let mut d = pinned(dir.path(), &["--include-comm", "nsd_cpuset"]);
    let s = d.wait_managed(p.pid(), 3);
    let v = view(&s, p.pid()).expect("managed");
    assert_eq!(cpus(&v["allowed_cpus"]), vec![1], "{v}");
    assert_eq!(s["errors_total"], 0, "no EINVAL: {s}");
    assert_eq!(allowed(p.pid()), vec![1]);
    assert_eq!(d.stop(Signal::SIGTERM), 0);
    assert_eq!(
        allowed(p.pid()),
        vec![1],
        "the cpuset's choice is left as it was"
    );
    assert!(d.complaints().is_empty(), "{:?}", d.complaints());
}

#[test]
fn after_kill_9_the_next_start_restores_what_the_killed_daemon_changed() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let a = sleeper(dir.path(), "nsd_crash");
    let b = sleeper(dir.path(), "nsd_crash");
    let mut d = pinned(dir.path(), &["--include-comm", "nsd_crash"]);
    d.wait_managed(b.pid(), 2);
    assert!(wait_secs(10, || allowed(a.pid()).len() == 1
        && allowed(b.pid()).len() == 1));
    assert_eq!(d.stop(Signal::SIGKILL), -1, "killed, no exit code");
    assert_eq!(allowed(a.pid()).len(), 1, "SIGKILL left it narrowed");
    let journal = dir.path().join("journal.json");
    assert!(journal.exists(), "the journal outlived the daemon");
    // The next start, managing something else entirely, undoes it first.
    let mut next = Daemon::start(dir.path(), &["--include-comm", "nsd_nothing"]);
    assert!(
        wait_secs(10, || allowed(a.pid()) == vec![0, 1]
            && allowed(b.pid()) == vec![0, 1]),
        "not restored:\n{}",
        next.log()
    );
    // The log line follows the restore; give it the moment it takes.
    assert!(
        wait_secs(10, || next
            .log()
            .contains("recovering from an unclean stop")),
        "{}",
        next.log()
    );
    // Recovery runs before the daemon's signal handlers exist: wait until it serves.
    assert!(wait_secs(10, || next.status().is_some()), "{}", next.log());
    assert_eq!(next.stop(Signal::SIGTERM), 0);
    assert!(!journal.exists(), "clean stop");
}

#[test]
fn the_control_socket_answers_only_root_even_if_its_mode_is_opened() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to ask as another user");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let mut d = Daemon::start(dir.path(), &["--include-comm", "nsd_none"]);
    assert!(wait_secs(10, || d.status().is_some()), "{}", d.log());
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&d.socket).expect("socket").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "root-only by its mode");
    // Someone widens the mode: the peer-credential check still refuses.
    std::fs::set_permissions(
        &d.socket,
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .expect("chmod");
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            BIN,
            "status",
        ])
        .arg("--socket")
        .arg(&d.socket)
        .output();
    let Ok(out) = out else {
        eprintln!("skipped: no setpriv");
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("only root may ask"), "{err}");
    assert!(d.status().is_some(), "root is still answered");
    assert_eq!(d.stop(Signal::SIGTERM), 0);
}

/// Issue 7: a corrupt profile store, or a link planted where the store should be, is
/// reported on one line and left exactly as it was (the link's target neither read
/// nor written); the daemon runs on without the store, places, and restores on exit.
#[test]
fn a_corrupt_or_linked_profile_store_is_reported_left_alone_and_the_daemon_runs_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = named_copy(dir.path(), "sleep", "nsd_store");
    let Some(p) = Guard::spawn(Command::new(&bin).arg("60")) else {
        return;
    };
    let corrupt = dir.path().join("corrupt.db");
    let junk = b"someone's notes, not a database\n".repeat(100);
    std::fs::write(&corrupt, &junk).expect("write junk");
    let target = dir.path().join("precious.txt");
    std::fs::write(&target, "precious").expect("write target");
    let linked = dir.path().join("linked.db");
    std::os::unix::fs::symlink(&target, &linked).expect("plant link");
    let before = allowed(p.pid());
    for (name, db, what) in [("c", &corrupt, "corrupt"), ("l", &linked, "symbolic link")] {
        let sub = dir.path().join(name);
        std::fs::create_dir(&sub).expect("subdir");
        let db = db.display().to_string();
        let mut d = Daemon::start(&sub, &["--include-comm", "nsd_store", "--db", &db]);
        d.wait_managed(p.pid(), 2);
        let warned: Vec<String> = d
            .complaints()
            .into_iter()
            .filter(|l| l.contains(&db) && l.contains(what))
            .collect();
        assert_eq!(warned.len(), 1, "{:?}", d.complaints());
        assert!(
            warned[0].contains("continuing without the profile store"),
            "{}",
            warned[0]
        );
        assert_eq!(d.stop(Signal::SIGTERM), 0, "{}", d.log());
        assert_eq!(allowed(p.pid()), before, "restored ({name})");
    }
    assert_eq!(
        std::fs::read(&corrupt).expect("read"),
        junk,
        "left untouched"
    );
    assert_eq!(
        std::fs::read_to_string(&target).expect("read"),
        "precious",
        "the link was not followed"
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "c",
            "corrupt.db",
            "l",
            "linked.db",
            "nsd_store",
            "precious.txt"
        ],
        "nothing created beside them (no -wal, -shm or copy)"
    );
}

/// A process may name itself with escape sequences; `status` must show them as text
/// (`\x1b[2J`), never send them to the operator's terminal (issue 17: a name could
/// clear the screen).
#[test]
fn status_shows_escape_sequences_in_process_names_as_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    // comm is the exec'd file's name: a symlink whose name starts with ESC [ 2 J.
    let bin = dir.path().join("\u{1b}[2Jnsd_esc");
    std::os::unix::fs::symlink(BIN, &bin).expect("link numasched");
    let Some(p) = Guard::spawn(
        Command::new(&bin)
            .args(["workload", "cpu", "--seconds", "30"])
            .stdout(Stdio::null()),
    ) else {
        return;
    };
    let d = Daemon::start(dir.path(), &["--dry-run", "--include-comm", "*nsd_esc"]);
    d.wait_managed(p.pid(), 2);
    let sock = d.socket.display().to_string();
    let (code, out, err) = numasched(&["status", "--socket", &sock]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains('\u{1b}'), "raw ESC in status output: {out:?}");
    assert!(out.contains("\\x1b[2Jnsd_esc"), "{out}");
}

/// In a pid namespace of its own that still sees the host's /proc, numasched would act
/// on this namespace's processes while reading the host's (issue 17: it pinned
/// unrelated processes and logged success). It refuses in one line and changes nothing.
#[test]
fn a_proc_of_another_pid_namespace_is_refused() {
    let probe = Command::new("unshare")
        .args(["--pid", "--fork", "true"])
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("skipped: cannot unshare a pid namespace here");
        return;
    }
    let out = Command::new("unshare")
        .args(["--pid", "--fork", BIN, "run", "--no-db", "--", "true"])
        .output()
        .expect("unshare");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("another pid namespace"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// The journal deleted while the daemon runs is written again before the next change
/// (issue 17: it was never recreated, and a kill -9 then left processes narrowed with
/// no warning). Two loads on two CPUs under hard pinning; the journal is deleted, a
/// third load arrives, and after kill -9 the next start restores all three.
#[test]
fn a_deleted_journal_is_written_again_and_kill_9_is_still_undone() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let a = sleeper(dir.path(), "nsd_deljrn");
    let b = sleeper(dir.path(), "nsd_deljrn");
    let mut d = pinned(dir.path(), &["--include-comm", "nsd_deljrn"]);
    d.wait_managed(b.pid(), 2);
    assert!(wait_secs(10, || allowed(a.pid()).len() == 1
        && allowed(b.pid()).len() == 1));
    let journal = dir.path().join("journal.json");
    std::fs::remove_file(&journal).expect("delete the journal");
    assert!(
        wait_secs(5, || journal.exists()),
        "journal not written again:\n{}",
        d.log()
    );
    kill_9_then_next_start_restores(&mut d, dir.path(), &[a.pid(), b.pid()]);
}

/// A journal that cannot be written at start stops the daemon before it changes
/// anything (issue 17: it warned "continuing without a journal" and narrowed
/// processes a kill -9 then left narrowed); `--no-journal` runs anyway, knowingly.
#[test]
fn an_unwritable_journal_stops_the_start_unless_no_journal_is_given() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let a = sleeper(dir.path(), "nsd_rojrn");
    // A journal under a regular file cannot be created, whoever we are (root ignores
    // a read-only directory's mode, not ENOTDIR).
    let blocker = dir.path().join("state");
    std::fs::write(&blocker, "").expect("file");
    let journal = blocker.join("journal.json");
    let out = Command::new(BIN)
        .args(["run", "--no-db", "--pin", "cpu", "--journal"])
        .arg(&journal)
        .args(["--include-comm", "nsd_rojrn", "--", "sleep", "2"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--no-journal") && err.contains("journal.json"),
        "{err}"
    );
    assert_eq!(allowed(a.pid()), vec![0, 1], "nothing changed");
    let out = Command::new(BIN)
        .args(["run", "--no-db", "--no-journal", "--", "true"])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Mounts a tmpfs at `at` (read-only when `ro`); `false` where this user cannot mount.
fn mount_tmpfs(at: &Path, ro: bool) -> bool {
    std::fs::create_dir_all(at).expect("mount point");
    let opts = if ro { "ro,size=1m" } else { "size=1m" };
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", opts, "nsd_state"])
        .arg(at)
        .status()
        .is_ok_and(|s| s.success())
}

/// `chattr +i` (or `-i`) on a directory: while immutable nothing can be created or
/// renamed in it, by root either, while files already open stay usable (a read-only
/// remount would be refused while the daemon holds its lock file open for writing).
fn immutable(at: &Path, on: bool) -> bool {
    Command::new("chattr")
        .arg(if on { "+i" } else { "-i" })
        .arg(at)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Clears `chattr +i` on drop, so a failed assertion leaves nothing undeletable.
struct Immutable(PathBuf);

impl Drop for Immutable {
    fn drop(&mut self) {
        immutable(&self.0, false);
    }
}

/// Unmounts on drop, so a failed assertion leaves no mount behind.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Issue 17: with a read-only state directory (a real read-only file system, which
/// root cannot write either) the daemon warned and changed affinities anyway, and
/// kill -9 then left them narrowed. Now it does not start, and changes nothing.
#[test]
fn a_read_only_state_directory_stops_the_start() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    if !mount_tmpfs(&state, true) {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    }
    let _m = Mounted(state.clone());
    let a = sleeper(dir.path(), "nsd_rostate");
    let out = Command::new(BIN)
        .args(["run", "--no-db", "--pin", "cpu", "--journal"])
        .arg(state.join("journal.json"))
        .args(["--include-comm", "nsd_rostate", "--", "sleep", "2"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--no-journal") && err.contains("journal.json"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert_eq!(allowed(a.pid()), vec![0, 1], "nothing changed");
}

/// Issue 17: the state directory stops taking writes while the daemon runs. It must
/// not narrow anything it could not undo after a crash: a load that arrives then keeps
/// every CPU, and after kill -9 the next start still restores what was journaled.
#[test]
fn a_state_directory_that_stops_taking_writes_stops_changes_and_kill_9_is_undone() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("state dir");
    let a = sleeper(dir.path(), "nsd_romid");
    let mut d = Daemon::with_journal(
        dir.path(),
        &state.join("journal.json"),
        "200ms",
        &["--pin", "cpu", "--include-comm", "nsd_romid"],
    );
    d.wait_managed(a.pid(), 2);
    if !wait_secs(10, || allowed(a.pid()).len() == 1) {
        // The premise, not what is tested: a busy machine makes the daemon decline.
        eprintln!("skipped: the daemon did not narrow the first load here");
        return;
    }
    if !immutable(&state, true) {
        eprintln!("skipped: chattr +i does not work here");
        return;
    }
    let guard = Immutable(state.clone());
    let b = sleeper(dir.path(), "nsd_romid");
    assert!(
        wait_secs(10, || d.log().contains("not applying the plan")),
        "no refusal to apply\n{}",
        d.log()
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(allowed(b.pid()), vec![0, 1], "changed without a journal");
    assert_eq!(d.stop(Signal::SIGKILL), -1, "killed, no exit code");
    drop(guard);
    let mut next = Daemon::with_journal(
        dir.path(),
        &state.join("journal.json"),
        "200ms",
        &["--include-comm", "nsd_nothing"],
    );
    assert!(
        wait_secs(10, || allowed(a.pid()) == vec![0, 1]),
        "not restored: {:?}\n{}",
        allowed(a.pid()),
        next.log()
    );
    assert_eq!(allowed(b.pid()), vec![0, 1]);
    assert!(wait_secs(10, || next.status().is_some()), "{}", next.log());
    assert_eq!(next.stop(Signal::SIGTERM), 0);
}

/// A child forked after its parent was placed inherits numasched's set; kill -9 and the
/// next start must give it back too (issue 17: it stayed on one CPU after SIGTERM,
/// SIGINT and recovery alike). The parent is a busy shell that forks `sleep` once it
/// sees itself placed (its own Cpus_allowed_list one CPU; at most 20 s); `sleep` is
/// never selected itself.
#[test]
fn a_child_forked_after_placement_is_restored_after_kill_9() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let sh = named_copy(dir.path(), "sh", "nsd_forker");
    let kidfile = dir.path().join("kid.pid");
    let script = format!(
        "end=$(($(date +%s) + 20)); while [ $(date +%s) -lt $end ] && \
         grep -q 'Cpus_allowed_list:.*[-,]' /proc/$$/status; do :; done; \
         sleep 60 & echo $! > {k}; while :; do :; done",
        k = kidfile.display()
    );
    let parent = Guard::spawn(Command::new(&sh).args(["-c", &script])).expect("start");
    let mut d = pinned(dir.path(), &["--include-comm", "nsd_forker"]);
    d.wait_managed(parent.pid(), 2);
    // The premise, not what is tested: on a machine whose CPUs other loads keep busy
    // (parallel tests on 2 CPUs) the daemon rightly declines to narrow a process into
    // a shared CPU, and then no child inherits a set.
    if !wait_secs(10, || allowed(parent.pid()).len() == 1) {
        eprintln!(
            "skipped: the daemon did not narrow the parent (machine too busy):\n{}",
            d.log()
        );
        return;
    }
    assert!(wait_secs(25, || kidfile.exists()
        && std::fs::read_to_string(&kidfile)
            .is_ok_and(|t| t.ends_with('\n'))));
    let kid: u32 = std::fs::read_to_string(&kidfile)
        .expect("kid pid")
        .trim()
        .parse()
        .expect("pid");
    let _kid_guard = OrphanKiller(kid);
    assert_eq!(
        allowed(kid),
        allowed(parent.pid()),
        "the child inherited the set"
    );
    // One epoch or two to journal it.
    std::thread::sleep(Duration::from_millis(600));
    kill_9_then_next_start_restores(&mut d, dir.path(), &[kid]);
}

/// Issue 17: with the main thread under SCHED_DEADLINE the kernel refuses to move it
/// (EBUSY). The worker was narrowed anyway, the set journaled as applied, and every
/// re-plan alternated FAILED and "re-pinned by someone else"; after SIGTERM the worker
/// stayed on one CPU. Now the process is left as it was, reported once.
#[test]
fn a_process_the_kernel_refuses_to_move_is_left_as_it_was_and_reported_once() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // The busy worker runs under SCHED_DEADLINE (5 ms every 10 ms: half a CPU of
    // demand, so the process is admitted); the main thread is an ordinary one, so the
    // process is managed (a real-time main thread is left alone from the start, see
    // below), and numasched narrows the main thread before the worker refuses (EBUSY).
    let l = busy(dir.path(), "nsd_deadline", &[]);
    assert!(wait_secs(5, || thread_affinities(l.pid()).len() >= 2));
    let worker = worker_of(l.pid());
    let chrt = Command::new("chrt")
        .args([
            "-d",
            "-T",
            "5000000",
            "-P",
            "10000000",
            "-D",
            "10000000",
            "-p",
            "0",
            &worker.to_string(),
        ])
        .status();
    if !chrt.is_ok_and(|s| s.success()) {
        eprintln!("skipped: cannot make a thread SCHED_DEADLINE here");
        return;
    }
    let mut d = pinned(dir.path(), &["--include-comm", "nsd_deadline"]);
    // Until the refusal is logged, then a few epochs more: no thread may stay
    // narrowed, and the refusal is said once.
    assert!(
        wait_secs(10, || d.log().contains("refuses to move it")),
        "{}",
        d.log()
    );
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        for t in thread_affinities(l.pid()) {
            assert_eq!(t, vec![0, 1], "a thread was left narrowed\n{}", d.log());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let refusals = d
        .log()
        .lines()
        .filter(|l| l.contains("refuses to move it") && l.contains("\"WARN\""))
        .count();
    assert_eq!(refusals, 1, "{}", d.log());
    assert_eq!(d.stop(Signal::SIGTERM), 0);
    for t in thread_affinities(l.pid()) {
        assert_eq!(t, vec![0, 1]);
    }
}

/// The highest thread id of `pid`: the busy worker of a `workload cpu` load.
fn worker_of(pid: u32) -> u32 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("tasks")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .max()
        .expect("a worker")
}

/// Issue 17: a process whose main thread runs in a real-time class (here SCHED_FIFO)
/// is placed by whoever made it real-time: numasched never narrows it, while it does
/// narrow an ordinary load beside it.
#[test]
fn a_real_time_process_is_left_alone() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = busy(dir.path(), "nsd_rt", &[]);
    let plain = busy(dir.path(), "nsd_rt", &[]);
    assert!(wait_secs(5, || thread_affinities(rt.pid()).len() >= 2));
    // The main thread only: it sleeps, so no busy real-time thread holds a CPU here.
    let chrt = Command::new("chrt")
        .args(["-f", "-p", "1", &rt.pid().to_string()])
        .status();
    if !chrt.is_ok_and(|s| s.success()) {
        eprintln!("skipped: cannot make a thread SCHED_FIFO here");
        return;
    }
    let mut d = pinned(dir.path(), &["--include-comm", "nsd_rt"]);
    assert!(
        wait_secs(10, || allowed(plain.pid()).len() == 1),
        "the ordinary load was never placed\n{}",
        d.log()
    );
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        for t in thread_affinities(rt.pid()) {
            assert_eq!(
                t,
                vec![0, 1],
                "a real-time thread was narrowed\n{}",
                d.log()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(d.stop(Signal::SIGTERM), 0);
    assert_eq!(allowed(plain.pid()), vec![0, 1]);
}

/// Kills `d` with SIGKILL, starts the next daemon in `dir` (managing nothing), and
/// asserts that it restores every process in `pids` to both CPUs and then stops
/// cleanly: what every crash-recovery test ends with.
fn kill_9_then_next_start_restores(d: &mut Daemon, dir: &Path, pids: &[u32]) {
    assert_eq!(d.stop(Signal::SIGKILL), -1, "killed, no exit code");
    let mut next = Daemon::start(dir, &["--include-comm", "nsd_nothing"]);
    assert!(
        wait_secs(10, || pids.iter().all(|&p| allowed(p) == vec![0, 1])),
        "not restored: {:?}\n{}",
        pids.iter().map(|&p| allowed(p)).collect::<Vec<_>>(),
        next.log()
    );
    assert!(wait_secs(10, || next.status().is_some()), "{}", next.log());
    assert_eq!(next.stop(Signal::SIGTERM), 0);
}

/// A thread the application pinned itself is its own: numasched places the others,
/// leaves it where it is, and neither a clean stop nor the recovery after kill -9
/// widens it (issue 17: it was moved with the rest, then "restored").
#[test]
fn a_thread_the_application_pinned_survives_placement_and_kill_9_recovery() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // One busy worker beside the idle main thread: planned one CPU, so the main
    // thread is narrowed while the worker keeps the pin below.
    let l = busy(dir.path(), "nsd_apppin", &[]);
    let pid = l.pid();
    assert!(wait_secs(5, || thread_affinities(pid).len() >= 2));
    // The application pins its worker to CPU 1 (as pthread_setaffinity_np would).
    let worker = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("tasks")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .max()
        .expect("a worker");
    let st = Command::new("taskset")
        .args(["-p", "-c", "1", &worker.to_string()])
        .stdout(Stdio::null())
        .status()
        .expect("taskset");
    assert!(st.success());
    let pinned_one = || {
        common::live::allowed_of(&format!("/proc/{pid}/task/{worker}/status"))
            == Some(vec![1].into())
    };
    let mut d = pinned(dir.path(), &["--include-comm", "nsd_apppin"]);
    d.wait_managed(pid, 3);
    // On a busy machine the daemon may rightly keep the main thread wide (its worker
    // waits for CPU 1: "throttled by its 1 CPU"); the application's pin must hold
    // either way.
    if !wait_secs(5, || allowed(pid).len() == 1) {
        eprintln!("the daemon did not narrow the main thread here (others' work?)");
    }
    assert!(
        pinned_one(),
        "the application's pin was changed\n{}",
        d.log()
    );
    kill_9_then_next_start_restores(&mut d, dir.path(), &[pid]);
    assert!(
        pinned_one(),
        "the application's pin was widened by the recovery"
    );
}

/// A busy two-thread load named `name` that a `--pin cpu` daemon has narrowed to one
/// CPU: the premise of the re-pin tests. `None` (the test skips) when the daemon did
/// not narrow it, as a busy machine can make it decline.
struct Narrowed {
    pid: u32,
    worker: u32,
    /// The CPU numasched did not choose.
    other: u32,
    daemon: Daemon,
    _load: Guard,
}

impl Narrowed {
    fn start(dir: &Path, name: &str) -> Option<Narrowed> {
        let load = busy(dir, name, &[]);
        let pid = load.pid();
        assert!(wait_secs(5, || thread_affinities(pid).len() >= 2));
        let worker = worker_of(pid);
        let daemon = pinned(dir, &["--include-comm", name]);
        daemon.wait_managed(pid, 2);
        if !wait_secs(10, || allowed(pid).len() == 1) {
            eprintln!("skipped: the daemon did not narrow the load here");
            return None;
        }
        let other = if allowed(pid) == vec![0] { 1 } else { 0 };
        Some(Narrowed {
            pid,
            worker,
            other,
            daemon,
            _load: load,
        })
    }
}

/// `taskset -p -c CPU TID`: pins that one thread, as an operator or the application.
fn taskset(cpu: u32, tid: u32) {
    let st = Command::new("taskset")
        .args(["-p", "-c", &cpu.to_string(), &tid.to_string()])
        .stdout(Stdio::null())
        .status()
        .expect("taskset");
    assert!(st.success());
}

/// Issue 17: a thread that pins itself after numasched placed its process (here the
/// busy worker, re-pinned by tid to the CPU numasched did not choose) is the
/// application's from then on: later epochs do not move it back, and SIGTERM does not
/// widen it, while the main thread gets its original set back.
#[test]
fn a_thread_pinned_after_placement_keeps_its_pin_through_re_plans_and_stop() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(n) = Narrowed::start(dir.path(), "nsd_latepin") else {
        return;
    };
    let (pid, worker, other, mut d) = (n.pid, n.worker, n.other, n.daemon);
    taskset(other, worker);
    let worker_on = || common::live::allowed_of(&format!("/proc/{pid}/task/{worker}/status"));
    // Epochs go on (200 ms each): the worker's own pin must hold through them.
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        assert_eq!(
            worker_on(),
            Some(vec![other].into()),
            "moved back\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(d.stop(Signal::SIGTERM), 0);
    assert_eq!(allowed(pid), vec![0, 1], "the main thread goes back");
    assert_eq!(worker_on(), Some(vec![other].into()), "not widened at stop");
}

/// An operator who re-pins a managed process by hand (`taskset -p`, the main thread)
/// takes it back: numasched lets go, puts back the threads that still carry its set,
/// and says so as "yielded", not as a refusal (it was counted `refused: 1`, which reads
/// as something having gone wrong).
#[test]
fn a_process_re_pinned_by_hand_is_let_go_and_counted_as_yielded() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(n) = Narrowed::start(dir.path(), "nsd_handpin") else {
        return;
    };
    let (pid, worker, other, mut d) = (n.pid, n.worker, n.other, n.daemon);
    taskset(other, pid);
    let worker_on = || common::live::allowed_of(&format!("/proc/{pid}/task/{worker}/status"));
    assert!(
        wait_secs(5, || d.log().contains("\"yielded\":1")),
        "the re-pin was not seen\n{}",
        d.log()
    );
    assert_eq!(worker_on(), Some(vec![0, 1].into()), "the worker goes back");
    assert_eq!(d.stop(Signal::SIGTERM), 0);
    let log = d.log();
    assert!(!log.contains("\"refused\":1"), "{log}");
    assert!(log.contains("yielded: re-pinned"), "{log}");
    assert_eq!(allowed(pid), vec![other], "the operator's pin is kept");
}

/// Issue 41: `daemon 2>&1 | head`: once the reader of its log is gone, the next log
/// line used to end the daemon with SIGPIPE (exit 141), every process left narrowed.
/// It keeps managing, and SIGTERM still restores.
#[test]
fn a_log_reader_that_goes_away_neither_ends_the_daemon_nor_skips_the_restore() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let name = "nspipeload";
    let a = sleeper(dir.path(), name);
    let mut cmd = Command::new(BIN);
    cmd.arg("daemon")
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .arg("--journal")
        .arg(dir.path().join("journal.json"))
        .args(["--interval", "200ms", "--min-replan-interval", "200ms"])
        .args([
            "--min-cpu",
            "0",
            "--no-db",
            "--pin",
            "cpu",
            "--include-comm",
            name,
        ])
        .env("NUMASCHED_LOG", "debug")
        .stderr(Stdio::piped());
    let mut d = common::live::Guard::spawn(&mut cmd).expect("start the daemon");
    // The reader goes away at once: every log line from now on meets a closed pipe.
    drop(d.child().stderr.take());
    assert!(
        wait_secs(20, || allowed(a.pid()).len() == 1),
        "never placed: {:?} (daemon exit: {:?})",
        allowed(a.pid()),
        d.child().try_wait()
    );
    // Debug lines every 200 ms epoch: a second of them.
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        d.child().try_wait().expect("wait").is_none(),
        "the daemon ended once its log's reader was gone"
    );
    kill(Pid::from_raw(d.pid() as i32), Signal::SIGTERM).expect("signal");
    let st = d.child().wait().expect("wait");
    assert_eq!(st.code(), Some(0), "{st:?}");
    assert_eq!(allowed(a.pid()), vec![0, 1], "restored");
}

/// Issue 41: under `ulimit -f 1` a log or journal that reaches 512 bytes used to end
/// the daemon by SIGXFSZ. The write fails instead; the daemon goes on, and SIGTERM
/// leaves its load with every CPU (placed or not, it is given back).
#[test]
fn a_file_size_limit_neither_ends_the_daemon_nor_skips_the_restore() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let name = "nsfsizeload";
    let a = sleeper(dir.path(), name);
    let script = format!(
        "ulimit -f 1 && exec {BIN} daemon --socket {dir}/s.sock --journal {dir}/journal.json \
         --interval 200ms --min-replan-interval 200ms --min-cpu 0 --no-db --pin cpu \
         --include-comm {name} 2>{dir}/daemon.log",
        dir = dir.path().display()
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script]).env("NUMASCHED_LOG", "debug");
    let mut d = common::live::Guard::spawn(&mut cmd).expect("start the daemon");
    // Debug lines every 200 ms epoch pass 512 bytes within the first.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        d.child().try_wait().expect("wait").is_none(),
        "the daemon ended at the file-size limit"
    );
    kill(Pid::from_raw(d.pid() as i32), Signal::SIGTERM).expect("signal");
    let st = d.child().wait().expect("wait");
    assert_eq!(st.code(), Some(0), "{st:?}");
    assert_eq!(allowed(a.pid()), vec![0, 1], "given back");
}

/// Issue 41, for `run` as for the daemon: a log reader that goes away (`run … 2>&1 |
/// head`) and a file-size limit on its log used to end it with SIGPIPE or SIGXFSZ,
/// its command left running narrowed and its journal left behind. It lives on to its
/// command's end, passes on the command's exit status and leaves nothing behind.
#[test]
fn run_outlives_a_closed_log_and_a_file_size_limit() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).expect("runtime directory");
    // Long enough for a few epochs of debug lines, at 100 ms, after the reader left.
    let command = format!("{BIN} workload cpu --seconds 2 >/dev/null; exit 7");
    let run = |how: &str| -> std::process::ExitStatus {
        let script = format!(
            "{how} exec {BIN} run --no-db --pin cpu --interval 100ms \
             --min-replan-interval 100ms -- sh -c '{command}'"
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script])
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("NUMASCHED_LOG", "debug")
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start run");
        // The reader goes away at once (a file-size limit writes to a file instead).
        drop(child.stderr.take());
        child.wait().expect("wait for run")
    };
    let piped = run("");
    assert_eq!(piped.code(), Some(7), "closed log: {piped:?}");
    let log = dir.path().join("run.log");
    let limited = run(&format!("ulimit -f 1 && exec 2>{} &&", log.display()));
    assert_eq!(limited.code(), Some(7), "file-size limit: {limited:?}");
    let left: Vec<_> = std::fs::read_dir(runtime.join("numasched"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.file_name())).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "journals or locks left: {left:?}");
}

/// Issue 41: with its lock file deleted, a second daemon could lock a new one and
/// "recover" the first one's live processes. The running daemon now notices at its
/// next epoch, puts back what it changed and ends with one clear error.
#[test]
fn a_daemon_whose_lock_file_goes_stops_and_gives_back() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let name = "nslostlock";
    let a = sleeper(dir.path(), name);
    let b = sleeper(dir.path(), name);
    let mut d = pinned(dir.path(), &["--include-comm", name]);
    d.wait_managed(b.pid(), 2);
    assert!(
        wait_secs(10, || allowed(a.pid()).len() == 1
            || allowed(b.pid()).len() == 1),
        "nothing placed:\n{}",
        d.log()
    );
    std::fs::remove_file(dir.path().join("journal.json.lock")).expect("remove the lock");
    let child = d.guard.child();
    let ended = wait_secs(10, || child.try_wait().expect("wait").is_some());
    assert!(ended, "the daemon went on without its lock:\n{}", d.log());
    let code = d.guard.child().wait().expect("wait").code();
    assert_eq!(code, Some(1), "{}", d.log());
    assert!(
        d.log().contains("lock file was removed or replaced"),
        "{}",
        d.log()
    );
    assert_eq!(allowed(a.pid()), vec![0, 1], "given back");
    assert_eq!(allowed(b.pid()), vec![0, 1], "given back");
    assert!(
        !dir.path().join("journal.json").exists(),
        "nothing left to recover"
    );
}

/// With every managed process idle and nothing happening, epochs stretch to four times
/// the interval (`daemon::pace`): what keeps the daemon cheap on an idle machine. At
/// 200 ms, 4 s would hold 20 epochs unstretched; stretched, about 5. A busy machine
/// only slows epochs, so the bound holds there too.
#[test]
fn epochs_stretch_while_everything_managed_is_idle() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = named_copy(dir.path(), "sleep", "nsd_pace");
    let Some(p) = Guard::spawn(Command::new(&bin).arg("60")) else {
        return;
    };
    let d = Daemon::start(dir.path(), &["--include-comm", "nsd_pace"]);
    d.wait_managed(p.pid(), 3);
    if !d.log().contains("proc connector yes") {
        eprintln!("skipped: no proc connector here, so epochs never stretch");
        return;
    }
    // Three calm epochs, then doubling: stretched to the full 800 ms within 2 s.
    std::thread::sleep(Duration::from_secs(2));
    let epochs = || {
        d.status()
            .and_then(|s| s["epochs"].as_u64())
            .expect("status")
    };
    let before = epochs();
    std::thread::sleep(Duration::from_secs(4));
    let ran = epochs() - before;
    assert!(
        (1..=10).contains(&ran),
        "{ran} epochs in 4 s at a 200 ms interval, all idle\n{}",
        d.log()
    );
    // And status says so, rather than "every 0.2s".
    let shown = d.status().and_then(|s| s["stretched_s"].as_f64());
    assert!(shown.is_some_and(|s| s > 0.2), "{shown:?}");
}
