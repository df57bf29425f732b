//! `numasched top` in a real terminal: tmux runs it detached on a 160×40 pane, the
//! test reads the screen with `capture-pane`, sends keys and checks their effect, and
//! that `q` ends the program with the terminal restored. Skipped (with the reason
//! printed) when tmux is not installed; CI installs it.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::live::{named_copy, Guard};

/// A tmux server of our own (`tmux -L NAME`), killed when dropped, even when an
/// assertion fails.
struct Tmux {
    socket: String,
    config: PathBuf,
    /// Where the shell around `top` writes its exit status.
    exit_file: PathBuf,
}

impl Tmux {
    /// `remain-on-exit` keeps the pane after the program ends, so its end (and an
    /// early error) can be observed.
    fn new(dir: &Path) -> Tmux {
        let config = dir.join("tmux.conf");
        std::fs::write(
            &config,
            "set -g remain-on-exit on\nset -g default-shell /bin/sh\n",
        )
        .expect("tmux.conf");
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        Tmux {
            socket: format!("numasched-top-test-{}-{nanos}", std::process::id()),
            config,
            exit_file: dir.join("top.exit"),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("-f")
            .arg(&self.config)
            .args(args)
            .output()
            .expect("run tmux")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.ok(&["capture-pane", "-p", "-t", "top"])
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "top"];
        args.extend(keys);
        self.ok(&args);
    }

    fn literal(&self, text: &str) {
        self.ok(&["send-keys", "-t", "top", "-l", text]);
    }

    /// Runs `numasched top` standalone on a 160×40 pane, showing only `comm`. A shell
    /// around it records its exit status: tmux's own `pane_dead_status` is not
    /// reliable (it is sometimes never set).
    fn start_top(&self, comm: &str) {
        let cmd = format!(
            "{} top --standalone --min-cpu 0 --include-comm {comm} --no-db; echo $? > {}",
            env!("CARGO_BIN_EXE_numasched"),
            self.exit_file.display()
        );
        self.ok(&[
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "40",
            "-s",
            "top",
            &cmd,
        ]);
    }

    /// The pid of `top` itself: the child of the pane's shell.
    fn top_pid(&self) -> i32 {
        let shell = self.ok(&["display-message", "-p", "-t", "top", "#{pane_pid}"]);
        let shell = shell.trim();
        std::fs::read_dir("/proc")
            .expect("/proc")
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .find(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
                    // pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
                    st.rsplit_once(')')
                        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                        == Some(shell)
                })
            })
            .expect("top runs under the pane's shell")
    }

    /// Waits for `top` to end (`why`: what ended it): exit status 0, and the terminal
    /// back on the normal screen.
    fn assert_ended_cleanly(&self, why: &str) {
        let until = Instant::now() + Duration::from_secs(10);
        let show = |f: &str| self.ok(&["display-message", "-p", "-t", "top", f]);
        let status = loop {
            let code = std::fs::read_to_string(&self.exit_file).unwrap_or_default();
            if !code.trim().is_empty() && show("#{pane_dead}").trim() == "1" {
                break code.trim().to_string();
            }
            assert!(Instant::now() < until, "top still runs after {why}");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(status, "0", "exit status after {why}");
        assert_eq!(
            show("#{alternate_on}").trim(),
            "0",
            "alternate screen after {why}"
        );
        let after = self.screen();
        assert!(
            !after.contains("LLC pressure"),
            "the alternate screen was left after {why}:\n{after}"
        );
    }

    /// Polls the screen until `f` holds (at most `secs`); returns the last screen.
    fn wait(&self, secs: u64, what: &str, f: impl Fn(&str) -> bool) -> String {
        let until = Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.screen();
            if f(&s) {
                return s;
            }
            assert!(
                Instant::now() < until,
                "waited {secs}s for {what}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn tmux_installed() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The cpulist of node 0 as sysfs gives it (what the node row shows).
fn node0_cpus() -> Option<String> {
    let text = std::fs::read_to_string("/sys/devices/system/node/node0/cpulist").ok()?;
    let cpus = numasched::topology::cpulist::parse(text.trim()).ok()?;
    Some(numasched::topology::cpulist::format(&cpus))
}

/// The cells of a table row on screen, without the borders.
fn cells(line: &str) -> Vec<&str> {
    line.trim_matches(|c: char| c == '│' || c == '|' || c.is_whitespace())
        .split_whitespace()
        .collect()
}

#[test]
fn top_shows_nodes_and_processes_and_obeys_its_keys_in_tmux() {
    if !tmux_installed() {
        eprintln!("skipped: tmux is not installed (apt-get install -y tmux)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let sleep = named_copy(dir.path(), "sleep", "nstop_sleep");
    let Some(child) = Guard::spawn(Command::new(&sleep).arg("300")) else {
        return;
    };
    let pid = child.pid().to_string();

    let tmux = Tmux::new(dir.path());
    tmux.start_top("nstop_sleep");
    let has_row = |s: &str| {
        s.lines().any(|l| {
            let c = cells(l);
            c.first() == Some(&pid.as_str()) && c.get(1) == Some(&"nstop_sleep")
        })
    };
    let screen = tmux.wait(30, "the process row", has_row);
    assert!(
        screen.contains("standalone"),
        "header says standalone:\n{screen}"
    );
    assert!(screen.contains("LLC pressure"), "node table:\n{screen}");
    if let Some(cpus) = node0_cpus() {
        assert!(
            screen
                .lines()
                .any(|l| cells(l).starts_with(&["0", cpus.as_str()])),
            "node 0 row with CPUs {cpus}:\n{screen}"
        );
    }
    assert!(screen.contains("sort: cpu (desc)"), "footer:\n{screen}");

    tmux.keys(&["s"]);
    tmux.wait(5, "sort by pid", |s| s.contains("sort: pid (asc)"));
    tmux.keys(&["r"]);
    tmux.wait(5, "reversed", |s| s.contains("sort: pid (desc)"));

    tmux.keys(&["/"]);
    tmux.wait(5, "the filter prompt", |s| s.contains("filter command: _"));
    tmux.literal("nstop");
    tmux.keys(&["Enter"]);
    let s = tmux.wait(5, "the filter applied", |s| s.contains("filter: nstop"));
    assert!(has_row(&s), "the filter keeps the process:\n{s}");
    assert!(s.contains("processes: 1 of 1 shown"), "{s}");

    tmux.keys(&["/"]);
    tmux.literal("zzz");
    tmux.keys(&["Enter"]);
    let s = tmux.wait(5, "a filter matching nothing", |s| {
        s.contains("filter: zzz") && s.contains("processes: 0 of 1 shown")
    });
    assert!(!has_row(&s), "filtered out:\n{s}");
    tmux.keys(&["/", "Escape"]);
    tmux.wait(5, "the filter cleared", |s| {
        !s.contains("filter: ") && has_row(s)
    });

    tmux.keys(&["p"]);
    tmux.wait(5, "paused", |s| s.contains("PAUSED"));
    tmux.keys(&["p"]);
    tmux.wait(5, "resumed", |s| !s.contains("PAUSED"));

    tmux.keys(&["q"]);
    tmux.assert_ended_cleanly("q");
    drop(child);
}

#[test]
fn sigterm_ends_top_with_the_terminal_restored() {
    if !tmux_installed() {
        eprintln!("skipped: tmux is not installed (apt-get install -y tmux)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let sleep = named_copy(dir.path(), "sleep", "nstop_term");
    let Some(child) = Guard::spawn(Command::new(&sleep).arg("300")) else {
        return;
    };
    let tmux = Tmux::new(dir.path());
    tmux.start_top("nstop_term");
    tmux.wait(30, "the process row", |s| s.contains("nstop_term"));
    let pid = tmux.top_pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("kill");
    tmux.assert_ended_cleanly("SIGTERM");
    drop(child);
}

/// A closed pane (or window, or ssh session) ends `top`: crossterm spins on a hung-up
/// terminal (crossterm-rs/crossterm#793), and `top` stayed, burning a CPU, after
/// `tmux kill-session` until killed by hand (-9: SIGTERM was not looked at either).
#[test]
fn a_closed_terminal_ends_top() {
    if !tmux_installed() {
        eprintln!("skipped: tmux is not installed (apt-get install -y tmux)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let sleep = named_copy(dir.path(), "sleep", "nstop_hup");
    let Some(child) = Guard::spawn(Command::new(&sleep).arg("300")) else {
        return;
    };
    let tmux = Tmux::new(dir.path());
    tmux.start_top("nstop_hup");
    tmux.wait(30, "the process row", |s| s.contains("nstop_hup"));
    let pid = tmux.top_pid();
    tmux.ok(&["kill-session", "-t", "top"]);
    let running = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
            st.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .is_some_and(|state| state != "Z")
        })
    };
    let until = Instant::now() + Duration::from_secs(5);
    while running() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let still = running();
    if still {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(!still, "top still runs 5 s after its terminal closed");
    drop(child);
}

#[test]
fn without_a_terminal_top_points_to_status() {
    let (code, out, err) = common::numasched(&["top", "--standalone", "--no-db"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("numasched status"), "{err}");
}
