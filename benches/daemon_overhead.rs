//! What the daemon costs the machine it manages: CPU time over wall time of a real
//! `numasched daemon` (release build) managing N idle processes at a 1 s interval.
//! Target (issue 4): at most 0.5% of one core with 500 processes.
//!
//! Not a criterion benchmark: the quantity is a ratio of two clocks of another
//! process over tens of seconds, so this is a bench command.
//!
//!     cargo bench --bench daemon_overhead            # 500 processes, 60 s
//!     NS_BENCH_PROCS=100 NS_BENCH_SECS=30 cargo bench --bench daemon_overhead
//!
//! It starts N copies of `sleep` under a name of its own, a daemon that selects exactly
//! those, lets the first epochs place them, then reads the daemon's utime+stime from
//! /proc before and after the measured window. Everything it starts is killed at the
//! end, and the daemon restores every affinity on SIGTERM.

#[path = "live/mod.rs"]
mod live;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use live::{env_or, rss_kib, Reaper};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_numasched");

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("daemon's stat");
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat; after "pid (comm) " the state is field 3.
    let ticks: u64 = f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime");
    ticks as f64 / procfs_ticks()
}

fn procfs_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn status(socket: &Path) -> Option<serde_json::Value> {
    let out = Command::new(BIN)
        .args(["status", "--json", "--socket"])
        .arg(socket)
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

fn main() {
    // `cargo bench` passes --bench; any other argument is a filter this bench ignores.
    let procs = env_or("NS_BENCH_PROCS", 500) as usize;
    let secs = env_or("NS_BENCH_SECS", 60);
    let dir = tempfile::tempdir().expect("tempdir");
    let sleep: PathBuf = dir.path().join("ns_idle");
    std::fs::copy("/bin/sleep", &sleep).expect("copy sleep");

    let mut children = Reaper(Vec::new());
    for _ in 0..procs {
        children.0.push(
            Command::new(&sleep)
                .arg("100000")
                .stdin(Stdio::null())
                .spawn()
                .expect("start an idle process"),
        );
    }
    let socket = dir.path().join("d.sock");
    let mut daemon = Command::new(BIN)
        .args(["daemon", "--no-db", "--interval", "1s", "--min-cpu", "0"])
        .arg("--journal")
        .arg(dir.path().join("journal.json"))
        .args(["--include-comm", "ns_idle", "--socket"])
        .arg(&socket)
        .stderr(Stdio::null())
        .spawn()
        .expect("start the daemon");
    let pid = daemon.id();

    // Warm-up: the first epoch places every process; wait until all are managed.
    let t0 = Instant::now();
    let mut managed = 0;
    while t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(500));
        if let Some(s) = status(&socket) {
            managed = s["processes"].as_array().map_or(0, Vec::len);
            if managed >= procs && s["epochs"].as_u64().unwrap_or(0) >= 3 {
                break;
            }
        }
    }
    let warm_cpu = cpu_seconds(pid);
    let warm_wall = t0.elapsed().as_secs_f64();
    let rss_before = rss_kib(pid).unwrap_or(0);

    let start_cpu = cpu_seconds(pid);
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let cpu = cpu_seconds(pid) - start_cpu;
    let wall = start.elapsed().as_secs_f64();
    let last = status(&socket);
    let rss_after = rss_kib(pid).unwrap_or(0);

    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = daemon.wait();

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("daemon overhead: {procs} idle processes ({managed} managed), 1 s interval");
    println!("  warm-up (placing them): {warm_cpu:.2} s CPU over {warm_wall:.1} s");
    println!(
        "  steady state: {cpu:.2} s CPU over {wall:.1} s wall = {:.3}% of one core (target <= 0.5%)",
        cpu / wall * 100.0
    );
    if let Some(s) = last {
        println!(
            "  epochs {}, re-plans {}, last epoch {:.2} ms",
            s["epochs"],
            s["replans"],
            s["last_epoch_ms"].as_f64().unwrap_or(f64::NAN)
        );
    }
    println!("  RSS {rss_before} KiB after warm-up, {rss_after} KiB at the end");
    println!("  load average during the run: {}", load.trim());
}
