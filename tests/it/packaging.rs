//! The files in `packaging/`: the systemd unit is valid and keeps its hardening, and the
//! example config is exactly what `numasched config default` prints.
//!
//! `systemd-analyze verify` (and its offline security score) run when the tool is on
//! the machine; the unit's key lines are checked by parsing it in any case, so a
//! machine without systemd still catches a weakened or inconsistent unit.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use numasched::daemon::Options;

use crate::common;
use common::numasched;

const UNIT: &str = "packaging/numasched.service";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn unit_text() -> String {
    std::fs::read_to_string(repo(UNIT)).expect("read the unit")
}

/// Section → key → every value it is given (systemd allows repeating most keys).
fn parse_unit(text: &str) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut section = String::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        assert!(!section.is_empty(), "line {}: key outside a section", n + 1);
        let (k, v) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("line {}: not KEY=VALUE: {raw}", n + 1));
        out.entry(section.clone())
            .or_default()
            .entry(k.trim().to_string())
            .or_default()
            .push(v.trim().to_string());
    }
    out
}

fn words(v: &[String]) -> BTreeSet<String> {
    v.iter()
        .flat_map(|s| s.split_whitespace())
        .map(String::from)
        .collect()
}

#[test]
fn the_unit_runs_the_daemon_hardened_with_three_capabilities() {
    let text = unit_text();
    let unit = parse_unit(&text);
    let service = unit.get("Service").expect("[Service]");
    let one = |k: &str| -> &str {
        let v = service.get(k).unwrap_or_else(|| panic!("{k}= missing"));
        assert_eq!(v.len(), 1, "{k}= given {} times", v.len());
        &v[0]
    };
    for (key, want) in [
        ("Type", "simple"),
        ("ExecStart", "/usr/bin/numasched daemon"),
        ("Restart", "on-failure"),
        ("KillSignal", "SIGTERM"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectKernelLogs", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectControlGroups", "yes"),
        ("RestrictAddressFamilies", "AF_UNIX"),
        ("MemoryMax", "128M"),
        ("StateDirectory", "numasched"),
        ("RuntimeDirectory", "numasched"),
    ] {
        assert_eq!(one(key), want, "{key}=");
    }
    let stop = humantime::parse_duration(one("TimeoutStopSec")).expect("a duration");
    assert!(stop.as_secs() >= 5, "time to restore affinities: {stop:?}");

    let wanted: BTreeSet<String> = ["CAP_SYS_NICE", "CAP_SYS_PTRACE", "CAP_PERFMON"]
        .map(String::from)
        .into();
    for key in ["CapabilityBoundingSet", "AmbientCapabilities"] {
        assert_eq!(words(&service[key]), wanted, "{key}=");
    }
    // Neither granted nor loosened anywhere (comments may say why it is not).
    for (key, values) in service {
        for v in values {
            assert!(!v.contains("CAP_SYS_ADMIN"), "{key}={v}");
        }
    }
    // Settings that would hide the processes the daemon must see, or cut its
    // capabilities off from the host's processes.
    for key in ["PrivateUsers", "ProtectProc", "ProcSubset", "DynamicUser"] {
        assert!(!service.contains_key(key), "{key}= must not be set");
    }
    let filter = words(&service["SystemCallFilter"]);
    assert!(filter.contains("@system-service") && filter.contains("perf_event_open"));
    assert_eq!(
        unit["Install"]["WantedBy"],
        vec!["multi-user.target".to_string()]
    );
}

/// The directories systemd creates are where the daemon's defaults put its files.
#[test]
fn the_units_directories_hold_the_daemons_default_paths() {
    let unit = parse_unit(&unit_text());
    let service = &unit["Service"];
    let state = Path::new("/var/lib").join(&service["StateDirectory"][0]);
    let runtime = Path::new("/run").join(&service["RuntimeDirectory"][0]);
    let d = Options::default();
    assert_eq!(d.db.parent(), Some(state.as_path()), "profile store");
    assert_eq!(d.journal.parent(), Some(state.as_path()), "journal");
    assert_eq!(d.socket.parent(), Some(runtime.as_path()), "control socket");
    // The subcommand the unit starts exists.
    let (code, _, err) = numasched(&["daemon", "--help"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn systemd_analyze_accepts_the_unit() {
    let Ok(probe) = Command::new("systemd-analyze").arg("--version").output() else {
        println!("systemd-analyze is not available: checked the unit by parsing only");
        return;
    };
    assert!(probe.status.success(), "systemd-analyze --version failed");
    // verify checks that ExecStart's binary exists, so verify a copy that starts the
    // binary under test; the man pages named in Documentation= are not installed here.
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("numasched.service");
    let text = unit_text().replace(
        "ExecStart=/usr/bin/numasched ",
        &format!("ExecStart={} ", env!("CARGO_BIN_EXE_numasched")),
    );
    assert!(text.contains(env!("CARGO_BIN_EXE_numasched")));
    std::fs::write(&copy, text).expect("write the copy");
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&copy)
        .output()
        .expect("run systemd-analyze verify");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify: {err}");
    // Unknown keys are only warnings to verify ("..., ignoring"): refuse them too.
    assert!(!err.contains("ignoring"), "systemd-analyze verify: {err}");

    // The offline exposure score (systemd >= 250): 0 is locked down, 10 is unprotected.
    let sec = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(&copy)
        .output()
        .expect("run systemd-analyze security");
    let all =
        String::from_utf8_lossy(&sec.stdout).into_owned() + &String::from_utf8_lossy(&sec.stderr);
    let score = all
        .lines()
        .find_map(|l| l.split_once("Overall exposure level for numasched.service: "))
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse::<f64>().ok());
    match score {
        Some(s) => assert!(s <= 3.0, "exposure {s} > 3.0: the hardening was relaxed"),
        None => println!("systemd-analyze security --offline is not supported here: {all}"),
    }
}

#[test]
fn the_example_config_is_what_config_default_prints() {
    let (code, out, err) = numasched(&["config", "default"]);
    assert_eq!(code, 0, "{err}");
    let checked_in = std::fs::read_to_string(repo("packaging/numasched.toml")).expect("read");
    assert!(
        checked_in == out,
        "packaging/numasched.toml is stale: regenerate it with \
         `numasched config default > packaging/numasched.toml`"
    );
    // And the daemon's own checker accepts it.
    let (code, _, err) = numasched(&["config", "check", "packaging/numasched.toml"]);
    assert_eq!(code, 0, "{err}");
}
