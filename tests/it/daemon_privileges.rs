//! Once started, `numasched daemon` holds only the capabilities its epochs use
//! (CAP_SYS_NICE, CAP_SYS_PTRACE, and CAP_PERFMON, or CAP_SYS_ADMIN on a kernel
//! without it), in every thread, with `no_new_privs`; a daemon that starts with less
//! keeps what it has and runs on; and the command of `numasched run` keeps the
//! caller's capabilities. Read back from `/proc/<pid>/task/*/status`.
//!
//! Needs root (to start a daemon with capabilities to drop); otherwise each test says
//! why and passes.

use crate::common;

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use common::daemon::{Daemon, BIN};
use common::live::{wait_secs, Guard};

const CAP_SETPCAP: u32 = 8;
const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYS_NICE: u32 = 23;
const CAP_PERFMON: u32 = 38;

fn cap_last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .expect("cap_last_cap")
        .trim()
        .parse()
        .expect("a number")
}

/// The capabilities the daemon keeps on this kernel, as a mask.
fn kept_mask() -> u64 {
    let counters = if cap_last_cap() >= CAP_PERFMON {
        CAP_PERFMON
    } else {
        CAP_SYS_ADMIN
    };
    [CAP_SYS_NICE, CAP_SYS_PTRACE, counters]
        .iter()
        .fold(0, |m, c| m | 1 << c)
}

/// The `Cap*` masks and `NoNewPrivs` of a status file.
fn privileges(status: &str) -> HashMap<String, u64> {
    status
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.starts_with("Cap") || *k == "NoNewPrivs")
        .map(|(k, v)| {
            let v = v.trim();
            let n = if k == "NoNewPrivs" {
                v.parse().expect("NoNewPrivs")
            } else {
                u64::from_str_radix(v, 16).expect("a capability mask")
            };
            (k.to_string(), n)
        })
        .collect()
}

fn own() -> HashMap<String, u64> {
    privileges(&std::fs::read_to_string("/proc/self/status").expect("own status"))
}

/// The privileges of every thread of `pid`, by thread id. Threads that end while
/// being read (the scan's workers) are left out.
fn threads(pid: u32) -> Vec<(String, HashMap<String, u64>)> {
    let dir = format!("/proc/{pid}/task");
    std::fs::read_dir(&dir)
        .expect("the daemon's threads")
        .filter_map(|e| {
            let tid = e.ok()?.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(format!("{dir}/{tid}/status")).ok()?;
            Some((tid, privileges(&text)))
        })
        .collect()
}

fn hex(m: &HashMap<String, u64>) -> String {
    let mut v: Vec<_> = m.iter().map(|(k, v)| format!("{k}={v:x}")).collect();
    v.sort();
    v.join(" ")
}

fn root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    eprintln!("skipped: needs root to start a daemon with capabilities to drop");
    false
}

#[test]
fn a_root_daemon_keeps_only_nice_ptrace_and_perfmon_in_every_thread() {
    if !root() {
        return;
    }
    let me = own();
    let need = kept_mask() | 1 << CAP_SETPCAP;
    if me["CapBnd"] & need != need {
        eprintln!(
            "skipped: this process's bounding set {:x} lacks some of {need:x}",
            me["CapBnd"]
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut d = Daemon::start(dir.path(), &["--include-comm", "nsd_privileges_none"]);
    assert!(
        wait_secs(20, || d.status().is_some()),
        "no epoch:\n{}",
        d.log()
    );
    let want = kept_mask();
    let all = threads(d.guard.pid());
    assert!(all.len() >= 3, "main, signal and socket threads: {all:?}");
    for (tid, p) in &all {
        let got = hex(p);
        assert_eq!(p["CapEff"], want, "thread {tid}: {got}");
        assert_eq!(p["CapPrm"], want, "thread {tid}: {got}");
        assert_eq!(p["CapBnd"], want, "thread {tid}: {got}");
        assert_eq!(p["CapInh"], 0, "thread {tid}: {got}");
        assert_eq!(p["CapAmb"], 0, "thread {tid}: {got}");
        assert_eq!(p["NoNewPrivs"], 1, "thread {tid}: {got}");
    }
    let log = d.log();
    assert!(
        log.contains("capabilities dropped except those the epochs use"),
        "{log}"
    );
    assert!(d.complaints().is_empty(), "{:?}", d.complaints());
    // What it kept is enough to stop cleanly: restore, remove the socket.
    assert_eq!(d.stop(Signal::SIGTERM), 0, "{}", d.log());
    assert!(!d.socket.exists(), "the socket was removed");
}

#[test]
fn a_daemon_without_root_or_setpcap_keeps_what_it_has_and_runs_on() {
    if !root() {
        return;
    }
    let perfmon = cap_last_cap() >= CAP_PERFMON;
    let given = if perfmon {
        "+sys_nice,+sys_ptrace,+perfmon,+sys_admin"
    } else {
        "+sys_nice,+sys_ptrace,+sys_admin"
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // The unprivileged daemon must be able to create its socket, journal and log here:
    // its own directory, as `StateDirectory=` makes one for `User=` (one open to all
    // would be refused for the journal's lock).
    nix::unistd::chown(
        dir.path(),
        Some(nix::unistd::Uid::from_raw(65534)),
        Some(nix::unistd::Gid::from_raw(65534)),
    )
    .expect("chown");
    let socket = dir.path().join("s.sock");
    let log = dir.path().join("d.log");
    // As `User=` with `AmbientCapabilities=` in the unit would: an ordinary user with
    // the capabilities as ambient ones, and without CAP_SETPCAP.
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(format!("--inh-caps={given}"))
        .arg(format!("--ambient-caps={given}"))
        .args([BIN, "daemon", "--no-db", "--log-format", "json"])
        .arg("--journal")
        .arg(dir.path().join("journal.json"))
        .arg("--socket")
        .arg(&socket)
        .args(["--interval", "200ms", "--min-cpu", "0"])
        .args(["--include-comm", "nsd_privileges_none"])
        .env("NUMASCHED_LOG", "debug")
        .stderr(File::create(&log).expect("log"));
    let Some(mut g) = Guard::spawn(&mut cmd) else {
        return;
    };
    let logtext = || std::fs::read_to_string(&log).unwrap_or_default();
    let answers = || status_answers(&socket);
    assert!(wait_secs(20, answers), "no epoch:\n{}", logtext());
    let bounding = own()["CapBnd"];
    for (tid, p) in threads(g.pid()) {
        let got = hex(&p);
        assert_eq!(p["CapEff"], kept_mask(), "thread {tid}: {got}");
        assert_eq!(p["CapPrm"], kept_mask(), "thread {tid}: {got}");
        assert_eq!(p["CapInh"], 0, "thread {tid}: {got}");
        assert_eq!(p["CapAmb"], 0, "thread {tid}: {got}");
        assert_eq!(p["CapBnd"], bounding, "left alone: {got}");
        assert_eq!(p["NoNewPrivs"], 1, "thread {tid}: {got}");
    }
    let text = logtext();
    assert!(text.contains("no CAP_SETPCAP"), "{text}");
    assert!(
        !text
            .lines()
            .any(|l| l.contains("\"level\":\"WARN\"") && l.contains("capabilities")),
        "skipping what it cannot do is no warning:\n{text}"
    );
    kill(Pid::from_raw(g.pid() as i32), Signal::SIGTERM).expect("signal");
    let mut code = None;
    assert!(
        wait_secs(10, || {
            code = g.child().try_wait().ok().flatten().and_then(|s| s.code());
            code.is_some()
        }),
        "did not stop:\n{}",
        logtext()
    );
    assert_eq!(code, Some(0), "{}", logtext());
}

fn status_answers(socket: &Path) -> bool {
    Command::new(BIN)
        .args(["status", "--json", "--socket"])
        .arg(socket)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn the_command_of_run_keeps_the_callers_capabilities() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = "grep -E '^(Cap|NoNewPrivs)' /proc/self/status";
    let direct = Command::new("sh")
        .args(["-c", script])
        .output()
        .expect("sh");
    let managed = Command::new(BIN)
        .args(["run", "--no-db", "--journal"])
        .arg(dir.path().join("journal.json"))
        .args(["--", "sh", "-c", script])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&managed.stderr);
    assert_eq!(managed.status.code(), Some(0), "{stderr}");
    let direct = privileges(&String::from_utf8_lossy(&direct.stdout));
    let managed = privileges(&String::from_utf8_lossy(&managed.stdout));
    assert_eq!(managed.len(), 6, "{managed:?}");
    assert_eq!(
        hex(&managed),
        hex(&direct),
        "as if started without numasched\n{stderr}"
    );
    assert_eq!(managed["CapEff"], own()["CapEff"], "{stderr}");
}
