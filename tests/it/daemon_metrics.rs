//! The Prometheus endpoint of the real daemon on this machine: `--metrics` serves the
//! node and process metrics in a form a Prometheus text parser reads, the default opens
//! no TCP port at all, and an address on every interface is refused. Also `advise` on
//! this machine. Each test selects its own processes by a command name of its own.

use crate::common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;
use prometheus_parse::{Sample, Scrape, Value};

use common::daemon::{Daemon, BIN};
use common::live::{named_copy, two_cpus, wait_secs, Guard};
use common::numasched;

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Status code and body of `GET path`.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(c, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").ok()?;
    let mut out = String::new();
    c.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}

fn find<'a>(s: &'a Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    s.samples
        .iter()
        .find(|x| x.metric == metric && labels.iter().all(|(k, v)| x.labels.get(k) == Some(v)))
}

fn num(v: &Value) -> f64 {
    match v {
        Value::Counter(x) | Value::Gauge(x) | Value::Untyped(x) => *x,
        other => panic!("not a number: {other:?}"),
    }
}

/// Inodes of the TCP sockets in LISTEN state (IPv4 and IPv6) of this network namespace.
fn listening_inodes() -> HashSet<u64> {
    let mut out = HashSet::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for l in text.lines().skip(1) {
            let w: Vec<&str> = l.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
            if w.len() > 9 && w[3] == "0A" {
                if let Ok(i) = w[9].parse() {
                    out.insert(i);
                }
            }
        }
    }
    out
}

/// How many listening TCP sockets `pid` holds open.
fn tcp_listeners_of(pid: u32) -> usize {
    let listening = listening_inodes();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|t| {
            let t = t.to_string_lossy().into_owned();
            t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .filter(|i| listening.contains(i))
        .count()
}

#[test]
fn metrics_are_served_and_parse_as_prometheus_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let name = "nsmetrics";
    // Busy loads, hard-pinned: on this one-LLC machine numasched changes nothing
    // under the default `--pin llc`, and idle processes are never placed.
    let bin = dir.path().join(name);
    std::os::unix::fs::symlink(BIN, &bin).expect("link numasched");
    let load = || {
        Guard::spawn(
            Command::new(&bin)
                .args(["workload", "cpu", "--seconds", "60"])
                .stdout(std::process::Stdio::null()),
        )
        .expect("load")
    };
    let a = load();
    let b = load();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut d = Daemon::start(
        dir.path(),
        &["--include-comm", name, "--metrics", &addr, "--pin", "cpu"],
    );

    let pid_a = a.pid().to_string();
    let pid_b = b.pid().to_string();
    let mut scrape = None;
    let mut last = None;
    let ok = wait_secs(20, || {
        let Some((200, body)) = get(port, "/metrics") else {
            return false;
        };
        let s = Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("parses");
        let placed = |pid: &str| {
            find(
                &s,
                "numasched_process_placement_changes_total",
                &[("pid", pid)],
            )
            .is_some_and(|x| !two_cpus() || num(&x.value) >= 1.0)
        };
        let done = find(&s, "numasched_epochs_total", &[]).is_some_and(|x| num(&x.value) >= 3.0)
            && placed(&pid_a)
            && placed(&pid_b);
        last = Some(body);
        if done {
            scrape = Some(s);
        }
        done
    });
    assert!(ok, "no complete scrape; last {last:?}\nlog:\n{}", d.log());
    let s = scrape.expect("scrape");
    let body = last.expect("body");

    // Nothing was skipped by the parser: every sample line became a sample.
    let lines = body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .count();
    assert_eq!(s.samples.len(), lines, "{body}");
    for fam in [
        "numasched_node_load_cpus",
        "numasched_node_memory_total_bytes",
        "numasched_process_placement_changes_total",
        "numasched_epochs_total",
    ] {
        assert!(s.docs.contains_key(fam), "no HELP for {fam}");
    }

    // Counters and gauges are typed as such.
    let epochs = find(&s, "numasched_epochs_total", &[]).expect("epochs");
    assert!(
        matches!(epochs.value, Value::Counter(_)),
        "{:?}",
        epochs.value
    );
    for c in ["numasched_replans_total", "numasched_errors_total"] {
        let x = find(&s, c, &[]).unwrap_or_else(|| panic!("{c}"));
        assert!(matches!(x.value, Value::Counter(v) if v >= 0.0), "{c}");
    }
    assert!(num(&find(&s, "numasched_replans_total", &[]).expect("r").value) >= 1.0);
    let took = num(&find(&s, "numasched_epoch_duration_seconds", &[])
        .expect("d")
        .value);
    assert!(took > 0.0 && took < 5.0, "{took}");
    assert_eq!(
        num(&find(&s, "numasched_managed_processes", &[])
            .expect("m")
            .value),
        2.0
    );

    // Node 0: load within the machine, memory sane.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let load = find(&s, "numasched_node_load_cpus", &[("node", "0")]).expect("load");
    assert!(matches!(load.value, Value::Gauge(_)));
    assert!((0.0..=cpus).contains(&num(&load.value)), "{:?}", load.value);
    let total = num(
        &find(&s, "numasched_node_memory_total_bytes", &[("node", "0")])
            .expect("total")
            .value,
    );
    assert!(total > (64u64 << 20) as f64, "{total}");
    if let Some(used) = find(&s, "numasched_node_memory_used_bytes", &[("node", "0")]) {
        assert!(num(&used.value) > 0.0 && num(&used.value) <= total);
    }
    let pressure = find(&s, "numasched_node_llc_pressure_mpki", &[("node", "0")]).expect("llc");
    assert!(num(&pressure.value) >= 0.0);

    // Both sleepers, labelled with pid and program.
    for pid in [&pid_a, &pid_b] {
        let labels = [("pid", pid.as_str()), ("program", name)];
        let ch = find(&s, "numasched_process_placement_changes_total", &labels)
            .unwrap_or_else(|| panic!("pid {pid} not in\n{body}"));
        assert!(matches!(ch.value, Value::Counter(_)));
        if let Some(lf) = find(&s, "numasched_process_local_fraction", &labels) {
            assert!((0.0..=1.0).contains(&num(&lf.value)), "{:?}", lf.value);
        }
        for m in ["numasched_process_mpki", "numasched_process_numa_penalty"] {
            if let Some(x) = find(&s, m, &labels) {
                assert!(num(&x.value) >= 0.0, "{m}");
            }
        }
    }

    // Anything but GET /metrics is 404.
    assert_eq!(get(port, "/").map(|r| r.0), Some(404));
    // The daemon itself holds the listening socket (so the check below can fail).
    assert_eq!(tcp_listeners_of(d.guard.pid()), 1, "{}", d.log());

    assert_eq!(d.stop(Signal::SIGTERM), 0, "{}", d.log());
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "port still open after stop"
    );
}

#[test]
fn by_default_the_daemon_listens_on_no_tcp_port() {
    let dir = tempfile::tempdir().expect("tempdir");
    let name = "nsnometrics";
    let bin = named_copy(dir.path(), "sleep", name);
    let _a = Guard::spawn(Command::new(&bin).arg("60")).expect("sleeper");
    let mut d = Daemon::start(dir.path(), &["--include-comm", name]);
    assert!(
        wait_secs(20, || d
            .status()
            .is_some_and(|s| s["epochs"].as_u64().unwrap_or(0) >= 2)),
        "daemon did not run:\n{}",
        d.log()
    );
    assert_eq!(tcp_listeners_of(d.guard.pid()), 0, "{}", d.log());
    assert_eq!(d.stop(Signal::SIGTERM), 0, "{}", d.log());
}

/// `no_socket = true` in the config file does what `--no-socket` does: the daemon runs
/// (its metrics answer) and the socket the file names does not appear. A `--socket`
/// flag wins over the file, as every flag does.
#[test]
fn no_socket_in_the_config_file_serves_no_socket_unless_a_flag_asks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let in_file = dir.path().join("file.sock");
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!("no_socket = true\nsocket = \"{}\"\n", in_file.display()),
    )
    .expect("write");
    let start = |extra: &[&str]| {
        let port = free_port();
        let mut cmd = Command::new(BIN);
        cmd.arg("daemon")
            .arg("--config")
            .arg(&cfg)
            .args(["--dry-run", "--no-db", "--include-comm", "ns_nothing"])
            .arg("--journal")
            .arg(dir.path().join("j.json"))
            .args(["--metrics", &format!("127.0.0.1:{port}")])
            .args(extra)
            .stderr(std::process::Stdio::null());
        let d = Guard::spawn(&mut cmd).expect("start the daemon");
        assert!(
            wait_secs(20, || get(port, "/metrics")
                .is_some_and(|(code, _)| code == 200)),
            "daemon {extra:?} did not serve metrics"
        );
        d
    };
    let d = start(&[]);
    assert!(!in_file.exists(), "the file's socket was created");
    drop(d);
    let flag = dir.path().join("flag.sock");
    let f = flag.display().to_string();
    let d = start(&["--socket", &f]);
    assert!(
        wait_secs(10, || flag.exists()),
        "--socket did not win over the file's no_socket"
    );
    drop(d);
}

#[test]
fn metrics_on_every_interface_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _, err) = numasched(&[
        "daemon",
        "--no-db",
        "--no-socket",
        "--journal",
        &dir.path().join("j.json").display().to_string(),
        "--metrics",
        "0.0.0.0:9477",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("every interface"), "{err}");
}

#[test]
fn advise_on_this_machine_names_node_0() {
    // Hard pinning: the one CPU. (Under the default `--pin llc`, the whole LLC: the
    // unit tests of `advise` check both.)
    let (code, out, err) =
        numasched(&["advise", "--cpus", "1", "--json", "--no-db", "--pin", "cpu"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let nodes = v["nodes"].as_array().expect("nodes");
    assert!(
        nodes.iter().any(|n| n.as_u64() == Some(0)),
        "node 0 not advised: {out}"
    );
    assert_eq!(v["cpus_requested"], 1);
    assert_eq!(v["cpus"].as_array().map(Vec::len), Some(1), "{out}");
    assert!(!v["reason"].as_str().unwrap_or_default().is_empty());
    let n0 = v["per_node"]
        .as_array()
        .and_then(|a| a.iter().find(|n| n["node"] == 0))
        .expect("node 0 detail");
    assert_eq!(n0["eligible"], true);
    assert!(n0["memory_total_bytes"].as_u64().unwrap_or(0) > 0);

    // More memory than any node has: nowhere, exit 1, and the text says why.
    let (code, out, _) = numasched(&["advise", "--cpus", "1", "--mem", "1000T", "--no-db"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("nodes: -\n"), "{out}");
    assert!(out.contains("no node has"), "{out}");
}

/// Idle connections and a client that drips one byte at a time cannot hold the servers
/// (issue 17: a drip blocked every `status` for 36 s, 200 idle connections for about
/// 400 s, and 100 idle ones made a scrape time out): with 200 idle connections and a
/// drip on each, `status` and a scrape still answer within 2 s.
#[test]
fn idle_and_dripping_clients_cannot_hold_status_or_scrapes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut d = Daemon::start(
        dir.path(),
        &[
            "--dry-run",
            "--include-comm",
            "ns_nothing",
            "--metrics",
            &addr,
        ],
    );
    assert!(wait_secs(10, || d.status().is_some()), "{}", d.log());
    let mut idle_unix = Vec::new();
    let mut idle_tcp = Vec::new();
    for _ in 0..200 {
        if let Ok(c) = std::os::unix::net::UnixStream::connect(&d.socket) {
            idle_unix.push(c);
        }
        if let Ok(c) = TcpStream::connect(("127.0.0.1", port)) {
            idle_tcp.push(c);
        }
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drips: Vec<_> = [true, false]
        .into_iter()
        .map(|unix| {
            let stop = std::sync::Arc::clone(&stop);
            let sock = d.socket.clone();
            std::thread::spawn(move || {
                let mut w: Box<dyn Write + Send> = if unix {
                    Box::new(std::os::unix::net::UnixStream::connect(&sock).expect("connect"))
                } else {
                    Box::new(TcpStream::connect(("127.0.0.1", port)).expect("connect"))
                };
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if w.write_all(b"s").is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let sock = d.socket.display().to_string();
        let (code, _, err) = numasched(&["status", "--json", "--socket", &sock]);
        assert_eq!(code, 0, "{err}");
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "status took {:?}",
            t.elapsed()
        );
        let t = std::time::Instant::now();
        let got = get(port, "/metrics");
        assert_eq!(got.map(|(c, _)| c), Some(200));
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "scrape took {:?}",
            t.elapsed()
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in drips {
        let _ = t.join();
    }
    drop(idle_unix);
    drop(idle_tcp);
    assert_eq!(d.stop(Signal::SIGTERM), 0);
}
