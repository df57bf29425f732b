//! Forks and exits followed as they happen (the kernel's proc connector): a placed
//! parent forks 200 children, each carrying the set numasched gave it; every child
//! must be journaled, most within 100 ms of its fork though epochs are 1 s apart; when
//! the parent dies, the children it leaves must be given back. Needs root (the
//! connector) and CPUs 0 and 1; otherwise the test says why and passes.

use crate::common;

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use common::daemon::Daemon;
use common::live::{allowed, named_copy, two_cpus_alone, wait_secs, Guard};
use numasched::model::CpuSet;

const CHILDREN: usize = 200;

/// Kills a process group when dropped: the parent and its 200 sleeping children.
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(-(self.0 as i32)), Signal::SIGKILL);
    }
}

fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// The daemon's "fork followed" lines: pid, milliseconds after the fork, and whether
/// a pass between epochs journaled it (not the next epoch's poll).
fn followed(log: &str) -> Vec<(u32, f64, bool)> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            v["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("fork followed"))
        })
        .filter_map(|v| {
            Some((
                v["fields"]["pid"].as_u64()? as u32,
                v["fields"]["ms"].as_f64()?,
                v["fields"]["between"].as_bool()?,
            ))
        })
        .collect()
}

#[test]
fn a_placed_parents_forks_are_journaled_within_milliseconds_and_its_orphans_given_back() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let bash = named_copy(dir.path(), "bash", "nsfork_parent");
    // Busy, so that it is placed; on SIGUSR1 it forks the children, which sleep.
    let script =
        format!("trap 'for i in $(seq {CHILDREN}); do sleep 60 & done' USR1; while :; do :; done");
    let Some(parent) = Guard::spawn(Command::new(&bash).args(["-c", &script]).process_group(0))
    else {
        return;
    };
    let pid = parent.pid();
    let _group = Group(pid);
    // Epochs 1 s apart: a poll would find a child up to a second late.
    let d = Daemon::every(
        dir.path(),
        "1s",
        &["--pin", "cpu", "--include-comm", "nsfork_parent"],
    );
    let everything = allowed(pid);
    let narrowed = wait_secs(30, || allowed(pid).len() < everything.len());
    let log = d.log();
    if log.contains("proc connector no") {
        eprintln!("skipped: the proc connector is refused here");
        return;
    }
    assert!(
        log.contains("proc connector yes"),
        "the sensors line names no proc connector:\n{log}"
    );
    if !narrowed {
        // Beside others' work the daemon may rightly leave it wide (do no harm).
        eprintln!("skipped: the parent was never narrowed\n{log}");
        return;
    }
    let given: CpuSet = allowed(pid);
    kill(Pid::from_raw(pid as i32), Signal::SIGUSR1).expect("signal the parent");
    let mut kids = Vec::new();
    assert!(
        wait_secs(30, || {
            kids = children_of(pid);
            kids.len() >= CHILDREN
        }),
        "the parent forked {} children of {CHILDREN}",
        kids.len()
    );
    let mut lines = Vec::new();
    let all = wait_secs(30, || {
        lines = followed(&d.log());
        kids.iter().all(|k| lines.iter().any(|(p, ..)| p == k))
    });
    let missing: Vec<&u32> = kids
        .iter()
        .filter(|k| !lines.iter().any(|(p, ..)| p == *k))
        .collect();
    assert!(all, "children never journaled: {missing:?}\n{}", d.log());
    let mut ms: Vec<f64> = kids
        .iter()
        .filter_map(|k| lines.iter().find(|(p, ..)| p == k).map(|(_, m, _)| *m))
        .collect();
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    let worst = ms[ms.len() - 1];
    eprintln!(
        "{} children journaled after their fork: median {median:.1} ms, worst {worst:.1} ms \
         (epochs every 1 s)",
        ms.len()
    );
    // Followed, not polled: most children are journaled by the passes the connector
    // starts between epochs, not by the next epoch (half an interval, 500 ms, at the
    // median). Which pass did it, not how long it took: on a loaded machine a pass
    // waits for a CPU like anything else (a median of 352 ms at load 9), and issue
    // 41's 100 ms is a figure of docs/overhead.md, from this test's line above.
    let between = kids
        .iter()
        .filter(|k| lines.iter().any(|(p, _, b)| p == *k && *b))
        .count();
    assert!(
        2 * between > kids.len(),
        "{between} of {} children journaled between epochs (median {median:.1} ms, \
         worst {worst:.1} ms): polled, not followed\n{}",
        kids.len(),
        d.log()
    );
    for k in kids.iter().take(5) {
        assert_eq!(allowed(*k), given, "child {k} carries its parent's set");
    }
    // The parent dies: the set its children carry was chosen for it, so it goes.
    let t = Instant::now();
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).expect("kill the parent");
    let back = wait_secs(30, || kids.iter().all(|k| allowed(*k) == everything));
    let took = t.elapsed();
    eprintln!(
        "{} orphans given back {took:?} after the parent's death",
        kids.len()
    );
    assert!(
        back,
        "orphans still narrowed after {took:?}: {:?}\n{}",
        kids.iter()
            .filter(|k| allowed(**k) != everything)
            .collect::<Vec<_>>(),
        d.log()
    );
    assert!(
        took < Duration::from_secs(1),
        "orphans given back only after {took:?}, no sooner than a 1 s epoch's poll"
    );
}

/// In a container (here: a pid namespace of its own) the kernel refuses the
/// subscription by not answering; the daemon polls as before and its sensors line
/// says so.
#[test]
fn where_the_connector_is_refused_the_daemon_polls_and_says_so() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root for a pid namespace");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("d.log");
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--pid",
        "--fork",
        "--mount-proc",
        "--kill-child=SIGTERM",
        common::daemon::BIN,
        "daemon",
        "--no-db",
        "--interval",
        "200ms",
        "--include-comm",
        "nsfork_nobody",
    ])
    .arg("--journal")
    .arg(dir.path().join("journal.json"))
    .arg("--socket")
    .arg(dir.path().join("s.sock"))
    .stderr(std::fs::File::create(&log).expect("log"));
    let Some(mut g) = Guard::spawn(&mut cmd) else {
        return;
    };
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        wait_secs(20, || text().contains("sensors:")),
        "no sensors line:\n{}",
        text()
    );
    assert!(
        text().contains("proc connector no (subscribing refused"),
        "the sensors line does not say the connector was refused:\n{}",
        text()
    );
    assert!(
        text().contains("forks are found by each epoch's poll"),
        "{}",
        text()
    );
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        g.child().try_wait().expect("wait").is_none(),
        "the daemon did not keep running:\n{}",
        text()
    );
}
