//! `numasched workload` end to end: the JSON Lines contract tests rely on, real memory
//! binding seen through `/proc/<pid>/numa_maps`, clean stop on SIGTERM, one-line errors.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use common::numasched;

fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

fn events<'a>(all: &'a [Value], kind: &str) -> Vec<&'a Value> {
    all.iter().filter(|v| v["event"] == kind).collect()
}

/// Spawns a JSON workload and returns once its `start` line is out: by then the signal
/// handlers are installed and the memory is allocated and touched.
fn spawn_started(args: &[&str]) -> (Child, BufReader<std::process::ChildStdout>, Value) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_numasched"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn numasched");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("read start line");
    let start: Value = serde_json::from_str(&first).unwrap_or_else(|e| panic!("{first:?}: {e}"));
    assert_eq!(start["event"], "start");
    (child, out, start)
}

fn rest(out: BufReader<std::process::ChildStdout>) -> Vec<Value> {
    out.lines()
        .map(|l| {
            let l = l.expect("line");
            serde_json::from_str(&l).unwrap_or_else(|e| panic!("{l:?}: {e}"))
        })
        .collect()
}

#[test]
fn cpu_reports_progress_and_a_summary() {
    let (code, out, err) = numasched(&["workload", "cpu", "--seconds", "1", "--json"]);
    assert_eq!(code, 0, "{err}");
    let all = lines(&out);
    let progress = events(&all, "progress");
    assert!(!progress.is_empty(), "{out}");
    for p in &progress {
        assert_eq!(p["unit"], "iterations");
        assert!(p["rate"].as_f64().expect("rate") > 0.0, "{p}");
    }
    let summary = events(&all, "summary");
    assert_eq!(summary.len(), 1, "{out}");
    assert_eq!(all.last().expect("lines")["event"], "summary");
    assert_eq!(summary[0]["stopped_by"], "deadline");
    assert!(summary[0]["total"].as_u64().expect("total") > 0);
    assert!(summary[0]["elapsed_s"].as_f64().expect("elapsed") >= 1.0);
}

#[test]
fn stream_reports_positive_gb_per_s_and_threads_add_up() {
    let (code, out, err) = numasched(&[
        "workload",
        "stream",
        "--size",
        "64M",
        "--seconds",
        "1",
        "--threads",
        "2",
        "--report-interval",
        "0.5",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let all = lines(&out);
    assert_eq!(all[0]["size_bytes"], 64u64 << 20);
    assert_eq!(all[0]["threads"], 2);
    assert!(events(&all, "progress").len() >= 2, "{out}");
    let summary = events(&all, "summary");
    assert_eq!(summary.len(), 1, "{out}");
    let s = summary[0];
    assert_eq!(s["unit"], "bytes");
    let gbs = s["gb_per_s"].as_f64().expect("gb_per_s");
    assert!(gbs > 0.0, "{s}");
    let total = s["total"].as_u64().expect("total");
    assert_eq!(total % 24, 0, "24 bytes per triad element");
    let elapsed = s["elapsed_s"].as_f64().expect("elapsed");
    assert!((gbs - total as f64 / elapsed / 1e9).abs() < 1e-9 * gbs.max(1.0));
}

#[test]
fn membind_0_shows_bind_0_in_numa_maps() {
    let (mut child, out, start) = spawn_started(&[
        "workload",
        "stream",
        "--size",
        "16M",
        "--seconds",
        "1",
        "--membind",
        "0",
        "--json",
    ]);
    assert_eq!(start["membind"], 0);
    std::thread::sleep(Duration::from_millis(500));
    let maps = std::fs::read_to_string(format!("/proc/{}/numa_maps", child.id()));
    let all = rest(out);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    assert_eq!(events(&all, "summary").len(), 1);
    let maps = maps.expect("read numa_maps of the running workload");
    assert!(maps.contains("bind:0"), "{maps}");
}

/// `--touch-node` leaves the pages on the node but no policy behind, so numa_maps says
/// `default` and the pages count on node 0.
#[test]
fn touch_node_0_places_pages_and_leaves_no_policy() {
    let (mut child, out, start) = spawn_started(&[
        "workload",
        "stream",
        "--size",
        "16M",
        "--seconds",
        "1",
        "--touch-node",
        "0",
        "--json",
    ]);
    assert_eq!(start["membind"], 0);
    std::thread::sleep(Duration::from_millis(500));
    let maps = std::fs::read_to_string(format!("/proc/{}/numa_maps", child.id()));
    let all = rest(out);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    assert_eq!(events(&all, "summary").len(), 1);
    let maps = maps.expect("read numa_maps of the running workload");
    assert!(!maps.contains("bind:"), "{maps}");
    let big = maps.lines().filter(|l| l.contains("anon=")).any(|l| {
        l.starts_with(|c: char| c.is_ascii_hexdigit())
            && l.contains(" default ")
            && l.contains("N0=")
    });
    assert!(big, "{maps}");
}

#[test]
fn membind_and_touch_node_together_are_refused() {
    let (code, _out, err) = numasched(&[
        "workload",
        "stream",
        "--membind",
        "0",
        "--touch-node",
        "0",
        "--seconds",
        "1",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--touch-node") || err.contains("--membind"),
        "{err}"
    );
}

/// A flag that means nothing for the kind is refused on one line, before any work.
#[test]
fn flags_of_the_other_kind_are_refused() {
    for (args, needle) in [
        (
            &["workload", "cpu", "--size", "1G"][..],
            "--size applies to the stream workload only",
        ),
        (
            &["workload", "stream", "--duty", "1:1"][..],
            "--duty applies to the cpu workload only",
        ),
    ] {
        let (code, out, err) = numasched(&[args, &["--seconds", "5"]].concat());
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
    }
}

#[test]
fn membind_to_a_missing_node_is_a_one_line_error() {
    let (code, out, err) = numasched(&["workload", "stream", "--membind", "7", "--seconds", "1"]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--membind 7") && err.contains("no such NUMA node"),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
}

#[test]
fn sigterm_ends_the_run_promptly_with_a_summary() {
    let (mut child, out, _) = spawn_started(&["workload", "cpu", "--seconds", "30", "--json"]);
    let pid = child.id() as libc::pid_t;
    // SAFETY: pid is our own live child (not yet waited for).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let sent = Instant::now();
    let all = rest(out);
    let status = child.wait().expect("wait");
    assert!(
        sent.elapsed() < Duration::from_secs(1),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(status.code(), Some(0), "{status:?}");
    let summary = events(&all, "summary");
    assert_eq!(summary.len(), 1, "{all:?}");
    assert_eq!(summary[0]["stopped_by"], "signal");
}

#[test]
fn bad_input_is_rejected_without_panicking() {
    for args in [
        &["workload", "cpu", "--threads", "0"][..],
        &["workload", "stream", "--size", "0"],
        &["workload", "stream", "--size", "lots"],
        &["workload", "stream", "--size=-5M"],
        &["workload", "cpu", "--seconds", "0"],
        &["workload", "cpu", "--seconds=-1"],
        &["workload", "cpu", "--seconds", "soon"],
        &["workload", "cpu", "--report-interval", "0"],
        &["workload", "disk"],
    ] {
        let (code, _, err) = numasched(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            err.lines().next().is_some_and(|l| l.starts_with("error:")),
            "{err}"
        );
    }
}

#[test]
fn text_output_has_a_summary_line() {
    let (code, out, err) = numasched(&[
        "workload",
        "cpu",
        "--seconds",
        "0.3",
        "--report-interval",
        "0.1",
    ]);
    assert_eq!(code, 0, "{err}");
    let last = out.lines().last().expect("output");
    assert!(last.starts_with("summary: cpu"), "{out}");
    assert!(last.contains("M iter/s"), "{out}");
}
