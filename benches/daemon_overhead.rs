//! What the daemon costs the machine it manages: CPU time over wall time of a real
//! `numasched daemon` (release build) managing N idle processes at a 1 s interval.
//! Target (issue 4): at most 0.5% of one core with 500 processes.
//!
//! Not a criterion benchmark: the quantity is a ratio of two clocks of another
//! process over tens of seconds, so this is a bench command.
//!
//!     cargo bench --bench daemon_overhead            # 500 processes, 120 s
//!     NS_BENCH_PROCS=100 NS_BENCH_SECS=30 cargo bench --bench daemon_overhead
//!     NS_BENCH_FORKS=10 cargo bench --bench daemon_overhead   # 10 short commands/s
//!     NS_BENCH_NUMAD=5:15 cargo bench --bench daemon_overhead # numad beside, as root
//!
//! It starts N copies of `sleep` under a name of its own, a daemon that selects exactly
//! those, lets the first epochs place them and waits `NS_BENCH_WARM` seconds more
//! (default 60: an idle process has its stat read less often the longer it has been
//! idle, up to every 8th epoch after 32), then reads the daemon's utime+stime from
//! /proc before and after the measured window (default 120 s, two cycles of the idle
//! processes' numa_maps re-reads). `NS_BENCH_FORKS` runs that many `true` commands a
//! second meanwhile: a machine where processes come and go, so that the daemon lists
//! /proc every epoch (on a quiet one it reuses the last listing, see
//! `observe::pids`). Everything it starts is killed at the end, and the daemon
//! restores every affinity on SIGTERM.
//!
//! `NS_BENCH_NUMAD=<min>:<max>` then runs Debian's numad (`numad -i <min>:<max>`, its
//! scan interval in seconds; its default is 5:15) over the same idle processes, after
//! the daemon has stopped, and measures its share the same way: what an operator's
//! existing tool costs on the same machine. It needs root and no numad running; the
//! log numad writes is removed if it was not there before.

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
    let secs = env_or("NS_BENCH_SECS", 120);
    let warm = env_or("NS_BENCH_WARM", 60);
    let forks = env_or("NS_BENCH_FORKS", 0);
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
    let forking = Forker::start(forks);
    std::thread::sleep(Duration::from_secs(warm));
    let rss_before = rss_kib(pid).unwrap_or(0);

    let start_cpu = cpu_seconds(pid);
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let cpu = cpu_seconds(pid) - start_cpu;
    let wall = start.elapsed().as_secs_f64();
    let forked = forking.stop();
    let last = status(&socket);
    let rss_after = rss_kib(pid).unwrap_or(0);

    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = daemon.wait();

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("daemon overhead: {procs} idle processes ({managed} managed), 1 s interval");
    println!(
        "  warm-up (placing them): {warm_cpu:.2} s CPU over {warm_wall:.1} s, then {warm} s idle"
    );
    if forks > 0 {
        println!("  meanwhile {forked} short commands ({forks}/s asked)");
    }
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
    match std::env::var("NS_BENCH_NUMAD") {
        Ok(interval) => match numad_share(&interval, warm, secs) {
            Ok((cpu, wall)) => println!(
                "numad -i {interval} over the same {procs} processes: {cpu:.2} s CPU over \
                 {wall:.1} s wall = {:.3}% of one core",
                cpu / wall * 100.0
            ),
            Err(e) => println!("numad: not measured: {e}"),
        },
        Err(_) => println!("numad: not measured (NS_BENCH_NUMAD=5:15 measures it beside)"),
    }
}

/// numad's CPU time over `secs` s of wall time, after `warm` s, started with
/// `-i interval` and stopped (`numad -i 0`) at the end.
fn numad_share(interval: &str, warm: u64, secs: u64) -> Result<(f64, f64), String> {
    let running = Command::new("pgrep").args(["-x", "numad"]).output();
    if running.is_ok_and(|o| !o.stdout.is_empty()) {
        return Err("numad is already running".into());
    }
    let log = Path::new("/var/log/numad.log");
    let had_log = log.exists();
    let pid_file = Path::new("/var/run/numad.pid");
    let _ = std::fs::remove_file(pid_file);
    let started = Command::new("numad")
        .args(["-i", interval])
        .status()
        .map_err(|e| format!("cannot run numad: {e}"))?;
    if !started.success() {
        return Err(format!("numad -i {interval}: {started}"));
    }
    let mut pid = None;
    for _ in 0..50 {
        pid = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        if pid.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = pid.ok_or("numad wrote no /var/run/numad.pid")?;
    std::thread::sleep(Duration::from_secs(warm));
    let start_cpu = cpu_seconds(pid);
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let cpu = cpu_seconds(pid) - start_cpu;
    let wall = start.elapsed().as_secs_f64();
    let _ = Command::new("numad").args(["-i", "0"]).status();
    for _ in 0..50 {
        if !Path::new(&format!("/proc/{pid}/exe")).exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_file(pid_file);
    if !had_log {
        let _ = std::fs::remove_file(log);
    }
    Ok((cpu, wall))
}

/// Runs `true` about `per_second` times a second in a thread until stopped.
struct Forker {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Forker {
    fn start(per_second: u64) -> Forker {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = (per_second > 0).then(|| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0;
                let gap = Duration::from_secs_f64(1.0 / per_second as f64);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok(mut c) = Command::new("true").spawn() {
                        let _ = c.wait();
                        n += 1;
                    }
                    std::thread::sleep(gap);
                }
                n
            })
        });
        Forker { stop, thread }
    }

    /// Commands run.
    fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.and_then(|t| t.join().ok()).unwrap_or(0)
    }
}
