//! Churn and load (issue 7): a release `numasched daemon` at a 1 s interval with page
//! migration on, managing 200 long-lived processes while 5,000 short-lived ones come
//! and go over 60 s. Samples the daemon's RSS and open file descriptors every second
//! and reads its error count from `status` at the end.
//!
//!     cargo bench --bench churn
//!     NS_CHURN_SECS=20 NS_CHURN_SHORT=1000 NS_CHURN_LONG=50 cargo bench --bench churn
//!
//! Targets: no crash, no error left unhandled (errors_total 0, no WARN/ERROR log
//! line), RSS under 64 MB and not growing over the run, file descriptors flat. Each is
//! printed as `PASS`/`FAIL` with the measured figure; the exit status is non-zero if
//! any failed. A bench command, not a test: it needs a minute and a quiet machine.

#[path = "live/mod.rs"]
mod live;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use live::{env_or, rss_kib, Reaper};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_numasched");

fn fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

fn copy(dir: &Path, system: &str, name: &str) -> PathBuf {
    let dst = dir.join(name);
    std::fs::copy(Path::new("/bin").join(system), &dst).expect("copy a system binary");
    dst
}

fn verdict(ok: bool, what: String) -> bool {
    println!("{} {what}", if ok { "PASS" } else { "FAIL" });
    ok
}

fn main() {
    let secs = env_or("NS_CHURN_SECS", 60);
    let short = env_or("NS_CHURN_SHORT", 5000);
    let long = env_or("NS_CHURN_LONG", 200) as usize;
    let dir = tempfile::tempdir().expect("tempdir");
    let long_bin = copy(dir.path(), "sleep", "ns_long");
    let short_bin = copy(dir.path(), "sleep", "ns_short");

    let mut children = Reaper(Vec::new());
    for _ in 0..long {
        children.0.push(
            Command::new(&long_bin)
                .arg("100000")
                .stdin(Stdio::null())
                .spawn()
                .expect("start a long-lived process"),
        );
    }
    let socket = dir.path().join("d.sock");
    let log = dir.path().join("daemon.log");
    let mut daemon = Command::new(BIN)
        .args([
            "daemon",
            "--no-db",
            "--interval",
            "1s",
            "--min-replan-interval",
            "1s",
        ])
        .args(["--min-cpu", "0", "--migrate-pages", "--log-format", "json"])
        .args(["--include-comm", "ns_*", "--journal"])
        .arg(dir.path().join("journal.json"))
        .arg("--socket")
        .arg(&socket)
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("start the daemon");
    let pid = daemon.id();
    std::thread::sleep(Duration::from_secs(3));

    // Short-lived processes at an even pace: each lives 0-90 ms, so many exit between
    // the daemon's scan and its apply.
    let per_sec = (short as f64 / secs as f64).ceil() as u64;
    let script = format!(
        "i=0; while [ $i -lt {short} ]; do {bin} 0.0$((i % 10)) & i=$((i+1)); \
         if [ $((i % {per_sec})) -eq 0 ]; then sleep 1; fi; done; wait",
        bin = short_bin.display()
    );
    let mut load = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .spawn()
        .expect("start the churn");

    let start = Instant::now();
    let mut samples: Vec<(f64, u64, usize)> = Vec::new();
    let mut crashed = false;
    while start.elapsed() < Duration::from_secs(secs + 5) {
        std::thread::sleep(Duration::from_secs(1));
        if daemon.try_wait().ok().flatten().is_some() {
            crashed = true;
            break;
        }
        if let (Some(r), Some(f)) = (rss_kib(pid), fds(pid)) {
            samples.push((start.elapsed().as_secs_f64(), r, f));
        }
    }
    let _ = load.wait();
    let status = Command::new(BIN)
        .args(["status", "--json", "--socket"])
        .arg(&socket)
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok());
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let exit = daemon.wait().ok().and_then(|s| s.code());
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let complaints = text
        .lines()
        .filter(|l| l.contains("\"level\":\"WARN\"") || l.contains("\"level\":\"ERROR\""))
        .count();

    let load_avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "churn: {long} long-lived + {short} short-lived processes over {secs} s, 1 s epochs, \
         page migration on; load average {}",
        load_avg.trim()
    );
    let max_rss = samples.iter().map(|s| s.1).max().unwrap_or(0);
    let tenth = samples.len() / 10;
    let early = samples.get(tenth).map_or(0, |s| s.1);
    let late = samples.last().map_or(0, |s| s.1);
    let (fd_min, fd_max) = samples
        .iter()
        .skip(tenth)
        .fold((usize::MAX, 0), |(lo, hi), s| (lo.min(s.2), hi.max(s.2)));
    if let Some(s) = &status {
        println!(
            "  epochs {}, re-plans {}, errors_total {}, managed at the end {}",
            s["epochs"],
            s["replans"],
            s["errors_total"],
            s["processes"].as_array().map_or(0, Vec::len)
        );
    }
    let mut ok = true;
    ok &= verdict(
        !crashed && exit == Some(0),
        format!("no crash, clean exit (exit {exit:?})"),
    );
    ok &= verdict(
        status.as_ref().is_some_and(|s| s["errors_total"] == 0),
        "errors_total 0 at the end".into(),
    );
    ok &= verdict(
        complaints == 0,
        format!("{complaints} WARN/ERROR log lines"),
    );
    ok &= verdict(
        max_rss < 64 * 1024,
        format!("max RSS {max_rss} KiB (< 64 MiB)"),
    );
    ok &= verdict(
        late <= early + early / 10 + 512,
        format!("RSS {early} KiB at 10% of the run, {late} KiB at the end (no growth)"),
    );
    ok &= verdict(
        fd_max <= fd_min + 2,
        format!("file descriptors between {fd_min} and {fd_max} after the first 10%"),
    );
    if !ok {
        std::process::exit(1);
    }
}
