//! The operator commands end to end: `config check|default`, `completions`, `man`, as
//! the binary runs them (exit codes, stdout versus stderr).

use crate::common;
use common::numasched;

#[test]
fn config_check_exits_1_with_one_line_per_problem() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "min_cpu = -1\npolicy = \"nmass\"\nmigrate_rate = 0\nexlude_pid = [3]\n",
    )
    .expect("write");
    let f = file.display().to_string();
    let (code, out, err) = numasched(&["config", "check", &f]);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty(), "nothing on stdout: {out}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    for (line, (at, key)) in
        lines
            .iter()
            .zip([(1, "min_cpu"), (3, "migrate_rate"), (4, "exlude_pid")])
    {
        assert!(
            line.starts_with(&format!("{f}: line {at}: {key}: ")),
            "{line}"
        );
    }
}

#[test]
fn empty_paths_are_refused_by_config_check_and_the_daemon_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("paths.toml");
    std::fs::write(&file, "socket = \"\"\npolicy = \"nmas\"\ndb = \"\"\n").expect("write");
    let f = file.display().to_string();
    let (code, _, err) = numasched(&["config", "check", &f]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("{f}: line 1: socket: an empty path")),
        "{err}"
    );
    assert!(
        err.contains(&format!("{f}: line 3: db: an empty path")),
        "{err}"
    );
    // The daemon reads the file as `config check` does: every problem, one line each,
    // before it touches anything.
    let (code, _, err) = numasched(&["daemon", "--config", &f, "--dry-run"]);
    assert_eq!(code, 1, "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    for (line, key) in lines
        .iter()
        .zip(["line 1: socket", "line 2: policy", "line 3: db"])
    {
        assert!(
            line.starts_with(&format!("numasched: {f}: {key}")),
            "{key}: {line}"
        );
    }
    let (code, _, err) = numasched(&["daemon", "--socket", "", "--dry-run"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("an empty path names no file"), "{err}");
}

#[test]
fn config_check_prints_the_effective_options_of_a_good_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("good.toml");
    std::fs::write(&file, "interval = \"250ms\"\nexclude_comm = [\"sshd\"]\n").expect("write");
    let f = file.display().to_string();
    let (code, out, err) = numasched(&["config", "check", &f]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\ninterval = \"250ms\"\n"), "{out}");
    assert!(out.contains("\nexclude_comm = [\"sshd\"]\n"), "{out}");
    assert!(
        out.contains("\nrelease_after = \"30s\"\n"),
        "defaults filled: {out}"
    );
    assert!(err.is_empty(), "nothing to warn of: {err}");
}

#[test]
fn config_check_warns_of_a_bare_number_that_makes_a_long_epoch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("slip.toml");
    std::fs::write(&file, "interval = 500\n").expect("write");
    let f = file.display().to_string();
    let (code, out, err) = numasched(&["config", "check", &f]);
    assert_eq!(code, 0, "valid, only doubtful: {err}");
    assert!(out.contains("\ninterval = \"8m 20s\"\n"), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("{f}: warning: interval is 8m 20s")),
        "{err}"
    );
    assert!(err.contains("\"500ms\" is milliseconds"), "{err}");
}

#[test]
fn config_check_of_the_absent_default_file_shows_the_defaults() {
    // Only where no /etc/numasched/numasched.toml is installed (CI's clean machine);
    // an installed one is checked like any other file.
    if std::path::Path::new("/etc/numasched/numasched.toml").exists() {
        return;
    }
    let (code, out, err) = numasched(&["config", "check"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("# /etc/numasched/numasched.toml: absent"),
        "{out}"
    );
    assert!(out.contains("\nrelease_after = \"30s\"\n"), "{out}");
}

#[test]
fn config_check_of_a_missing_file_says_so() {
    let (code, _, err) = numasched(&["config", "check", "/nonexistent/n.toml"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("/nonexistent/n.toml: cannot read"), "{err}");
}

#[test]
fn completions_and_man_pages_come_from_the_binary() {
    let (code, out, err) = numasched(&["completions", "zsh"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("#compdef numasched"), "{out}");
    let (code, _, _) = numasched(&["completions", "tcsh"]);
    assert_eq!(code, 2, "an unknown shell is a usage error");

    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().join("man1");
    let (code, out, err) = numasched(&["man", "--out", &d.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(d.join("numasched.1").is_file() && d.join("numasched-status.1").is_file());
    assert_eq!(
        out.lines().count(),
        std::fs::read_dir(&d).expect("dir").count()
    );
    // Every page says what clap cannot: exit status, environment, examples; and the
    // files of the commands that read or write their own.
    for page in out.lines() {
        let text = std::fs::read_to_string(page).expect("read the page");
        for section in [".SH \"EXIT STATUS\"", ".SH ENVIRONMENT", ".SH EXAMPLES"] {
            assert_eq!(text.matches(section).count(), 1, "{page}: {section}");
        }
        for var in ["NUMASCHED_LOG", "NO_COLOR"] {
            assert!(text.contains(&format!("\\fB{var}\\fR")), "{page}: {var}");
        }
        let name = page.rsplit('/').next().unwrap_or_default();
        let files = !["sim", "workload", "completions", "man"]
            .iter()
            .any(|c| name == format!("numasched-{c}.1"));
        assert_eq!(text.contains(".SH FILES"), files, "{page}: FILES");
    }
    let daemon = std::fs::read_to_string(d.join("numasched-daemon.1")).expect("read");
    assert!(daemon.contains(".SH SIGNALS"), "{daemon}");
    let (code, out, _) = numasched(&["man"]);
    assert_eq!(code, 0);
    assert!(out.contains(".TH numasched 1"), "{out}");
}

#[test]
fn negative_numbers_are_refused_with_the_flag_and_its_range() {
    for (args, needle) in [
        (vec!["daemon", "--interval", "-1s"], "invalid duration"),
        (
            vec!["daemon", "--min-replan-interval", "-2s"],
            "invalid duration",
        ),
        (vec!["plan", "--min-cpu", "-1"], "0 or greater"),
        (
            vec!["run", "--migrate-rate", "-5", "--", "true"],
            "greater than 0",
        ),
        (vec!["daemon", "--release-after", "-3"], "invalid duration"),
        (vec!["advise", "--cpus", "-1"], "not in 1.."),
        (vec!["top", "--interval", "-1s"], "invalid duration"),
    ] {
        refused_naming(&args, args[1], needle);
    }
}

/// Exit 2, and a first line naming `flag` that contains `needle` (the range), not
/// clap's "unexpected argument".
fn refused_naming(args: &[&str], flag: &str, needle: &str) {
    let (code, _, err) = numasched(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.contains(&format!("for '{flag}")) && first.contains(needle),
        "{args:?}: {err}"
    );
    assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
}

#[test]
fn negative_counts_sizes_seconds_pids_and_nodes_are_refused_with_the_range() {
    let seconds = "expected seconds greater than 0";
    let pid = "-1 is not in 1..=4194304";
    let node = "-1 is not in 0..1024";
    let duration = "between 10ms and 24h";
    for (line, needle) in [
        ("workload cpu --seconds -1", seconds),
        ("workload cpu --report-interval -1", seconds),
        ("workload cpu --late -1", seconds),
        ("workload cpu --threads -1", "-1 is not in 1..=4096"),
        ("workload stream --size -1", "expected bytes greater than 0"),
        ("workload cpu --membind -1", node),
        ("plan --include-pid -1", pid),
        ("plan --exclude-pid -1", pid),
        ("run --exclude-pid -1", pid),
        ("daemon --exclude-pid -1", pid),
        ("sim --machine 2n:1l:2c:1t --programs mcf --homes -1", node),
        ("eval --suite nmass --jobs -1", "-1 is not in 1..=1024"),
        // A duration's error states its range, whatever is wrong with it.
        ("daemon --interval -1s", duration),
        ("top --interval -0.5", duration),
        ("daemon --interval 1fortnight", duration),
    ] {
        let args: Vec<&str> = line.split_whitespace().collect();
        refused_naming(&args, args[args.len() - 2], needle);
    }
}

/// A `--late` that would start nothing is refused, not run as if it had (issue found
/// by a new user: `--late 5 --seconds 1 --threads 2` said "2 threads" and ran one).
#[test]
fn a_late_start_that_could_never_happen_is_refused() {
    for (line, needle) in [
        (
            "workload cpu --late 5 --seconds 1 --threads 2",
            "--late 5: the late threads would start after the run ends (--seconds 1)",
        ),
        (
            "workload cpu --late 0.5 --seconds 1",
            "give --threads 2 or more",
        ),
    ] {
        let args: Vec<&str> = line.split_whitespace().collect();
        let (code, out, err) = numasched(&args);
        assert_eq!(code, 1, "{line}: {err}");
        assert!(out.is_empty(), "{line}: ran: {out}");
        assert!(err.contains(needle), "{line}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{line}: {err}");
    }
}

#[test]
fn run_is_quiet_unless_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let j = dir.path().join("j.json").display().to_string();
    let (code, out, err) = numasched(&["run", "--no-db", "--journal", &j, "--", "true"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty() && err.is_empty(), "{out}{err}");
    let (code, _, err) = numasched(&["run", "-v", "--no-db", "--journal", &j, "--", "true"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("numasched run starting"), "{err}");
}

/// A command `run` cannot start exits as a shell's would (127 not found, 126 not
/// executable), with one line, so a script tells it from the command's own failure.
#[test]
fn run_exits_127_for_a_missing_command_and_126_for_one_not_executable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let j = dir.path().join("j.json").display().to_string();
    let plain = dir.path().join("plain.txt");
    std::fs::write(&plain, "not a program\n").expect("write");
    let p = plain.display().to_string();
    for (cmd, want) in [("/nonexistent/numasched-test", 127), (p.as_str(), 126)] {
        let (code, out, err) = numasched(&["run", "--no-db", "--journal", &j, "--", cmd]);
        assert_eq!(code, want, "{cmd}: {err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with("numasched: cannot start "), "{err}");
    }
}

/// A bad flag is one line, as every other error: what is wrong, with clap's tip if it
/// has one, without its usage block.
#[test]
fn usage_errors_are_one_line() {
    for (args, needle) in [
        (
            vec!["daemon", "--interval", "-1s", "--dry-run"],
            "--interval",
        ),
        (vec!["daemon", "--once"], "unexpected argument '--once'"),
        (vec!["sim", "--machine", "2n:1l:2c:1t"], "--programs"),
    ] {
        let (code, out, err) = numasched(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: ") && err.contains(needle), "{err}");
    }
}

/// Logs on a terminal are coloured unless `NO_COLOR` is set to anything but the empty
/// string (https://no-color.org). The terminal is `script`'s pty; without `script`
/// the test says so and passes.
#[test]
fn logs_on_a_terminal_respect_no_color() {
    let logs_with = |no_color: &str| {
        let cmd = format!(
            "'{}' plan --no-db --include-comm nsd_no_such_program",
            env!("CARGO_BIN_EXE_numasched")
        );
        let out = std::process::Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env("NUMASCHED_LOG", "debug")
            .env("NO_COLOR", no_color)
            .output()
            .ok()?;
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let Some(coloured) = logs_with("") else {
        eprintln!("`script` not available: no terminal to test on");
        return;
    };
    assert!(coloured.contains("DEBUG"), "{coloured}");
    assert!(
        coloured.contains("\u{1b}["),
        "an empty NO_COLOR is unset: {coloured:?}"
    );
    let plain = logs_with("1").expect("script ran before");
    assert!(plain.contains("DEBUG"), "{plain}");
    assert!(!plain.contains('\u{1b}'), "{plain:?}");
}

/// Paths the daemon refuses at start (a device as the journal, a file as the socket, a
/// directory as the store, a mistyped directory) are problems of the file for `config
/// check` too, which passed them before; the daemon names them all before it writes
/// anything.
#[test]
fn config_check_and_the_daemon_refuse_the_same_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().display();
    let file = dir.path().join("paths.toml");
    std::fs::write(
        &file,
        format!("journal = \"/dev/null\"\nsocket = \"{d}/paths.toml\"\ndb = \"{d}\"\n"),
    )
    .expect("write");
    let f = file.display().to_string();
    let (code, out, err) = numasched(&["config", "check", &f]);
    assert_eq!(code, 1, "{out}{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    // Each with the line of its key, in the order the daemon checks them.
    for (line, key) in lines.iter().zip([
        "line 1: journal: /dev/null",
        "line 3: db: ",
        "line 2: socket: ",
    ]) {
        assert!(line.starts_with(&format!("{f}: {key}")), "{line}");
    }
    assert!(err.contains("a character device"), "{err}");
    assert!(err.contains("is a directory"), "{err}");
    assert!(err.contains("not a socket"), "{err}");
    let (code, _, err) = numasched(&["daemon", "--config", &f, "--dry-run"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(err.lines().all(|l| l.starts_with("numasched: ")), "{err}");
    // A mistyped directory is refused, not made into a tree, by the daemon and `run`.
    let typo = dir.path().join("sate/numasched/journal.json");
    let t = typo.display().to_string();
    for cmd in [
        vec!["daemon", "--no-db", "--no-socket", "--journal", &t],
        vec!["run", "--no-db", "--journal", &t, "--", "true"],
    ] {
        let (code, _, err) = numasched(&cmd);
        assert_eq!(code, 1, "{cmd:?}: {err}");
        assert!(err.contains("sate does not exist"), "{err}");
        assert!(!dir.path().join("sate").exists(), "{cmd:?} made a tree");
    }
}
