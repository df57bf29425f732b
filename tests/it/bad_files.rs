//! Paths an operator names that are not regular files (issue 17): `--config
//! /dev/zero` read until memory ran out, a FIFO hung the start, `--db /dev/null` left
//! `/dev/null-journal` in /dev, and a 100,000-character glob took 22 s to compile. Each
//! must be one clear line, quickly, with nothing created.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_numasched");

/// Runs numasched with a deadline (a hang fails the test instead of the suite); stderr
/// is read as it comes, so a long message cannot fill the pipe and stall the child.
fn bounded(args: &[&str], secs: u64) -> (i32, String) {
    use std::io::Read;
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start numasched");
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        let _ = stderr.read_to_string(&mut err);
        err
    });
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            let err = reader.join().unwrap_or_default();
            return (st.code().unwrap_or(-1), err);
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("numasched {args:?} still running after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn one_line_naming(err: &str, path: &str, what: &str) {
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(path) && err.contains(what), "{err}");
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().expect("mkfifo");
    assert!(st.success());
}

#[test]
fn a_device_as_config_is_refused_at_once() {
    let (code, err) = bounded(&["plan", "--config", "/dev/zero"], 10);
    assert_ne!(code, 0);
    one_line_naming(&err, "/dev/zero", "a character device");
}

#[test]
fn a_fifo_as_config_journal_or_profile_store_does_not_hang() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let f = fifo.to_str().expect("utf-8 path");
    let (code, err) = bounded(&["plan", "--config", f], 10);
    assert_ne!(code, 0);
    one_line_naming(&err, f, "a FIFO");
    let (code, err) = bounded(&["run", "--no-db", "--journal", f, "--", "true"], 10);
    assert_ne!(code, 0);
    one_line_naming(&err, f, "a FIFO");
    // The profile store: SQLite would open it and wait for a writer.
    let (code, err) = bounded(&["profile", "list", "--db", f], 10);
    assert_ne!(code, 0);
    one_line_naming(&err, f, "a FIFO");
    assert!(fifo.exists(), "the FIFO is left where it was");
    for companion in ["-journal", "-wal", "-shm"] {
        assert!(
            !dir.path().join(format!("fifo{companion}")).exists(),
            "nothing made beside it"
        );
    }
}

#[test]
fn a_device_as_journal_is_refused_and_left_alone() {
    let (code, err) = bounded(
        &["run", "--no-db", "--journal", "/dev/zero", "--", "true"],
        10,
    );
    assert_ne!(code, 0);
    one_line_naming(&err, "/dev/zero", "a character device");
    assert!(Path::new("/dev/zero").exists());
    assert!(
        !Path::new("/dev/zero.lock").exists(),
        "nothing created in /dev"
    );
}

#[test]
fn a_device_as_profile_store_creates_nothing_beside_it() {
    let before = Path::new("/dev/null-journal").exists();
    let (code, err) = bounded(&["profile", "list", "--db", "/dev/null"], 10);
    assert_ne!(code, 0, "{err}");
    one_line_naming(&err, "/dev/null", "a character device");
    if !before {
        assert!(
            !Path::new("/dev/null-journal").exists(),
            "created /dev/null-journal"
        );
    }
}

#[test]
fn a_huge_glob_is_refused_quickly() {
    let glob = "a*".repeat(50_000);
    let t = Instant::now();
    let (code, err) = bounded(&["plan", "--include-comm", &glob], 10);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("at most 4096"),
        "{}",
        &err[..err.len().min(300)]
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

/// Issue 41: a start refused after it made the socket's directory (the metrics
/// address taken) left that directory behind, and a clean stop left the directories
/// it made for the socket and the journal. Neither leaves anything now; a journal a
/// refusal keeps for the operator keeps its directory.
#[test]
fn a_refused_start_and_a_clean_stop_leave_no_directory_they_made() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = |p: &str| dir.path().join(p).display().to_string();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = taken.local_addr().expect("addr").to_string();
    let (journal, socket) = (d("state/journal.json"), d("run/numasched.sock"));
    let common = [
        "daemon",
        "--no-db",
        "--journal",
        &journal,
        "--socket",
        &socket,
    ];
    let mut args = common.to_vec();
    args.extend(["--metrics", &port]);
    let (code, err) = bounded(&args, 20);
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains(&format!("cannot serve metrics on {port}")),
        "{err}"
    );
    let left = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect()
    };
    assert!(left(dir.path()).is_empty(), "{:?}", left(dir.path()));

    // A clean stop, once it is up: `status` answers only once the loop runs, with its
    // signals caught (a socket merely bound is not that far: SIGTERM then ended it by
    // the default action, on a machine at load 9).
    let mut child = Command::new(BIN)
        .args(common)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the daemon");
    let answers = || {
        Command::new(BIN)
            .args(["status", "--socket", &socket])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let until = Instant::now() + Duration::from_secs(60);
    while !answers() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal");
    let st = child.wait().expect("wait");
    assert_eq!(st.code(), Some(0), "{st:?}");
    assert!(left(dir.path()).is_empty(), "{:?}", left(dir.path()));

    // A damaged journal is left for the operator, in its directory.
    std::fs::create_dir(dir.path().join("state")).expect("state");
    std::fs::write(&journal, "garbage").expect("journal");
    let (code, err) = bounded(&common, 20);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("move it aside"), "{err}");
    assert_eq!(left(dir.path()), vec!["state".to_string()]);
    assert_eq!(
        left(&dir.path().join("state")),
        vec!["journal.json".to_string()]
    );
}
