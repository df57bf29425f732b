//! A real `numasched daemon` under test: its own socket, journal and JSON log in the
//! test's directory, no profile store (unless the test passes `--db`), every process
//! selected by the test's flags.
#![allow(dead_code)] // each test binary uses its own subset

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use super::live::{wait_secs, Guard};
use super::numasched;

pub const BIN: &str = env!("CARGO_BIN_EXE_numasched");

/// A daemon under test, with its log in the test's directory.
pub struct Daemon {
    pub guard: Guard,
    pub log: PathBuf,
    pub socket: PathBuf,
}

impl Daemon {
    pub fn start(dir: &Path, extra: &[&str]) -> Daemon {
        Daemon::every(dir, "200ms", extra)
    }

    /// With epochs (and the shortest re-plan interval) of `interval`.
    pub fn every(dir: &Path, interval: &str, extra: &[&str]) -> Daemon {
        Daemon::with_journal(dir, &dir.join("journal.json"), interval, extra)
    }

    /// With its journal at `journal` rather than in `dir`.
    pub fn with_journal(dir: &Path, journal: &Path, interval: &str, extra: &[&str]) -> Daemon {
        let log = dir.join("daemon.log");
        let socket = dir.join("numasched.sock");
        let mut cmd = Command::new(BIN);
        cmd.arg("daemon")
            .arg("--socket")
            .arg(&socket)
            .args(["--interval", interval, "--min-replan-interval", interval])
            .arg("--journal")
            .arg(journal)
            .args(["--min-cpu", "0", "--log-format", "json"])
            .args(extra)
            .env("NUMASCHED_LOG", "debug")
            .stderr(File::create(&log).expect("log file"));
        // No profile store unless the test names one.
        if !extra.contains(&"--db") {
            cmd.arg("--no-db");
        }
        let guard = Guard::spawn(&mut cmd).expect("start the daemon");
        Daemon { guard, log, socket }
    }

    pub fn status(&self) -> Option<Value> {
        let sock = self.socket.display().to_string();
        let (code, out, _) = numasched(&["status", "--json", "--socket", &sock]);
        if code != 0 {
            return None;
        }
        serde_json::from_str(&out).ok()
    }

    /// Waits until the daemon has run `n` epochs with `pid` managed.
    pub fn wait_managed(&self, pid: u32, epochs: u64) -> Value {
        let mut last = None;
        let ok = wait_secs(20, || {
            last = self.status();
            last.as_ref().is_some_and(|s| {
                s["epochs"].as_u64().unwrap_or(0) >= epochs && view(s, pid).is_some()
            })
        });
        assert!(
            ok,
            "pid {pid} not managed; status {last:?}; log:\n{}",
            self.log()
        );
        last.expect("status")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `sig` and returns the exit code, failing after 10 s.
    pub fn stop(&mut self, sig: Signal) -> i32 {
        let pid = Pid::from_raw(self.guard.pid() as i32);
        kill(pid, sig).expect("signal the daemon");
        let child = self.guard.child();
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = child.try_wait().expect("wait") {
                return st.code().unwrap_or(-1);
            }
            assert!(
                Instant::now() < until,
                "daemon did not stop:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Log lines at WARN or ERROR.
    pub fn complaints(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| l.contains("\"level\":\"WARN\"") || l.contains("\"level\":\"ERROR\""))
            .map(String::from)
            .collect()
    }
}

/// The status entry of `pid`, if the daemon manages it.
pub fn view(status: &Value, pid: u32) -> Option<&Value> {
    status["processes"]
        .as_array()?
        .iter()
        .find(|p| p["pid"].as_u64() == Some(u64::from(pid)))
}

/// `numasched run --pin cpu` with a fast epoch (`interval`, also the re-plan interval)
/// and a journal in `dir`, around `sh -c script`; its output once it has ended.
pub fn run_script(dir: &Path, interval: &str, script: &str) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(["run", "--no-db", "--pin", "cpu", "--interval", interval])
        .args(["--min-replan-interval", interval])
        .arg("--journal")
        .arg(dir.join("journal.json"))
        .args(["--", "sh", "-c", script])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run numasched")
}
