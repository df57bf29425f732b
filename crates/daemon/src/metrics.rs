//! The Prometheus endpoint (`--metrics ADDR`, off by default): the daemon's [`DaemonStatus`]
//! in the text exposition format 0.0.4, over a deliberately tiny HTTP/1.1 server.
//!
//! [`render`] is a pure function of the status the epoch loop publishes for the control
//! socket, so the metrics and `numasched status` never disagree. The server answers
//! `GET /metrics` and nothing else (404), one connection at a time: a request must
//! arrive whole, at most [`MAX_REQUEST`] bytes, within [`CLIENT_TIMEOUT`], so a slow
//! or hostile client holds it for at most that long. No HTTP crate: the daemon has no
//! other use for one.

use std::fmt::Write as _;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use std::sync::Arc;

use super::conns::{self, Conns, Request};
use super::socket::Shared;
use super::status::DaemonStatus;

/// The whole request (line and headers) must arrive within this time.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest request accepted, line and headers together.
pub const MAX_REQUEST: usize = 8 * 1024;

/// What a scraper turned away for want of room reads.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\
Content-Length: 49\r\nRetry-After: 1\r\nConnection: close\r\n\r\n\
busy: 32 clients are being served at once; retry\n";

const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The running endpoint.
pub struct MetricsServer {
    addr: SocketAddr,
}

/// The endpoint bound but not yet answered: binding a port below 1024 needs a
/// capability that serving does not, and a thread started before the daemon drops its
/// capabilities would keep them all. So the daemon binds, drops, then serves.
pub struct BoundMetrics {
    listener: TcpListener,
    addr: SocketAddr,
}

impl MetricsServer {
    /// Binds `addr` (an error if it cannot) and serves `shared` from a background
    /// thread for as long as the process lives.
    pub fn start(addr: SocketAddr, shared: Shared) -> anyhow::Result<MetricsServer> {
        MetricsServer::bind(addr)?.serve(shared)
    }

    /// Binds `addr`, an error if it cannot; nothing answers until
    /// [`BoundMetrics::serve`].
    pub fn bind(addr: SocketAddr) -> anyhow::Result<BoundMetrics> {
        let listener = TcpListener::bind(addr).map_err(|e| {
            anyhow::anyhow!(
                "cannot serve metrics on {addr}: {e} (pass --metrics IP:PORT to use another)"
            )
        })?;
        let addr = listener.local_addr().map_err(|e| {
            anyhow::anyhow!("metrics on {addr}: cannot read the bound address: {e}")
        })?;
        Ok(BoundMetrics { listener, addr })
    }

    /// The address actually bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl BoundMetrics {
    /// Serves `shared` from a background thread for as long as the process lives.
    pub fn serve(self, shared: Shared) -> anyhow::Result<MetricsServer> {
        let BoundMetrics { listener, addr } = self;
        std::thread::Builder::new()
            .name("numasched-metrics".into())
            .spawn(move || {
                let conns = Conns::new();
                for stream in listener.incoming() {
                    match stream {
                        Ok(s) => {
                            let shared = Arc::clone(&shared);
                            conns.spawn("numasched-scrape", s, BUSY, move |s, req| {
                                if let Err(e) = answer(s, &shared, &req) {
                                    tracing::debug!("metrics request: {e}");
                                }
                            });
                        }
                        Err(e) => tracing::debug!("metrics accept: {e}"),
                    }
                }
            })
            .map_err(|e| {
                anyhow::anyhow!("metrics on {addr}: cannot start the server thread: {e}")
            })?;
        Ok(MetricsServer { addr })
    }

    /// The address actually bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// Reads one request and answers it; the connection is then closed.
fn answer(mut stream: TcpStream, shared: &Shared, req: &Request) -> std::io::Result<()> {
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let (code, body) = match read_request(&mut stream, req)? {
        Some(head) => respond(&head, shared),
        None => (400, "bad request\n".to_string()),
    };
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Service Unavailable",
    };
    let ctype = if code == 200 {
        CONTENT_TYPE
    } else {
        "text/plain; charset=utf-8"
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()?;
    // Closing with unread input would reset the connection and could lose the answer
    // (an oversized request): say we are done, then discard a bounded remainder.
    stream.shutdown(std::net::Shutdown::Write)?;
    let until = req
        .deadline
        .min(Instant::now() + Duration::from_millis(200));
    conns::drain(&mut stream, until, 64 * 1024);
    Ok(())
}

/// The request head up to the blank line, or `None` if it is too long, too slow (the
/// whole head must arrive by the request's deadline), or not text.
fn read_request(stream: &mut TcpStream, req: &Request) -> std::io::Result<Option<String>> {
    let head = conns::read_until(stream, req, MAX_REQUEST, |b| {
        find(b, b"\r\n\r\n").or_else(|| find(b, b"\n\n"))
    })?;
    Ok(head
        .filter(|h| h.len() <= MAX_REQUEST)
        .and_then(|h| String::from_utf8(h).ok()))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Status code and body for a request head.
fn respond(head: &str, shared: &Shared) -> (u16, String) {
    let mut words = head.lines().next().unwrap_or_default().split_whitespace();
    let (Some(method), Some(target), Some(version)) = (words.next(), words.next(), words.next())
    else {
        return (400, "bad request\n".into());
    };
    if !version.starts_with("HTTP/1.") {
        return (400, "bad request\n".into());
    }
    let path = target.split('?').next().unwrap_or_default();
    if method != "GET" || path != "/metrics" {
        return (404, "not found; metrics are at GET /metrics\n".into());
    }
    match shared.current(super::socket::STATUS_PATIENCE) {
        Some(s) => (200, render(&s)),
        None if shared.epochs() == 0 => (503, "no epoch has completed yet\n".into()),
        None => (
            503,
            "busy: the daemon is in a long epoch; try again\n".into(),
        ),
    }
}

/// A label value as the format wants it: `\`, `"` and newline escaped.
pub fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A sample value: Prometheus spells the non-finite ones `+Inf`, `-Inf`, `NaN`.
fn value(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x == f64::INFINITY {
        "+Inf".into()
    } else if x == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{x}")
    }
}

/// Writes the families one at a time: HELP and TYPE, then its samples.
struct Out(String);

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], x: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape_label(v));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {}", value(x));
    }
}

/// The status in the text exposition format, version 0.0.4.
pub fn render(s: &DaemonStatus) -> String {
    let mut o = Out(String::new());
    daemon_families(&mut o, s);
    migration_families(&mut o, s);
    o.family(
        "numasched_managed_processes",
        "gauge",
        "Processes managed in the last epoch.",
    );
    o.sample("numasched_managed_processes", &[], s.processes.len() as f64);
    o.family(
        "numasched_uncharacterised_processes",
        "gauge",
        "Managed processes with neither counters nor a profile (placed for locality only).",
    );
    o.sample(
        "numasched_uncharacterised_processes",
        &[],
        s.uncharacterised.len() as f64,
    );
    node_families(&mut o, &s.nodes_view);
    process_families(&mut o, &s.processes);
    if !s.jobs.is_empty() {
        job_families(&mut o, &s.jobs);
    }
    o.0
}

/// The daemon as a whole: what runs, how many epochs and plans, errors, epoch times.
fn daemon_families(o: &mut Out, s: &DaemonStatus) {
    o.family(
        "numasched_info",
        "gauge",
        "Always 1; the labels say which numasched runs which policy.",
    );
    let dry = if s.dry_run { "true" } else { "false" };
    o.sample(
        "numasched_info",
        &[
            ("version", &s.version),
            ("policy", &s.policy),
            ("dry_run", dry),
        ],
        1.0,
    );
    o.family(
        "numasched_epochs_total",
        "counter",
        "Epochs run since start.",
    );
    o.sample("numasched_epochs_total", &[], s.epochs as f64);
    o.family(
        "numasched_replans_total",
        "counter",
        "Plans made (and applied unless dry run) since start.",
    );
    o.sample("numasched_replans_total", &[], s.replans as f64);
    o.family(
        "numasched_errors_total",
        "counter",
        "Failed actions and observation problems since start.",
    );
    o.sample("numasched_errors_total", &[], s.errors_total as f64);
    o.family(
        "numasched_epoch_duration_seconds",
        "gauge",
        "Wall time of the last epoch.",
    );
    o.sample(
        "numasched_epoch_duration_seconds",
        &[],
        s.last_epoch_ms / 1e3,
    );
    o.family(
        "numasched_epoch_duration_max_seconds",
        "gauge",
        "Wall time of the longest epoch since start.",
    );
    o.sample(
        "numasched_epoch_duration_max_seconds",
        &[],
        s.max_epoch_ms / 1e3,
    );
}

/// Page moves: the longest step since start, and per move in progress its progress.
fn migration_families(o: &mut Out, s: &DaemonStatus) {
    o.family(
        "numasched_migration_step_max_seconds",
        "gauge",
        "Longest time one epoch spent moving pages since start.",
    );
    o.sample(
        "numasched_migration_step_max_seconds",
        &[],
        s.max_migration_step_ms / 1e3,
    );
    o.family(
        "numasched_migration_moved_bytes",
        "gauge",
        "Bytes a page move in progress has moved so far, per process.",
    );
    o.family(
        "numasched_migration_left_bytes",
        "gauge",
        "Address space a page move in progress has still to walk (at most this much is left to move), per process.",
    );
    for m in &s.migrations {
        let pid = m.pid.to_string();
        let labels = [("pid", pid.as_str())];
        o.sample(
            "numasched_migration_moved_bytes",
            &labels,
            m.moved_bytes as f64,
        );
        o.sample(
            "numasched_migration_left_bytes",
            &labels,
            m.left_bytes as f64,
        );
    }
}

/// Per node: load, memory, and LLC pressure.
fn node_families(o: &mut Out, view: &[super::status::NodeView]) {
    let nodes: Vec<(String, &super::status::NodeView)> =
        view.iter().map(|n| (n.node.to_string(), n)).collect();
    type NodeGet = fn(&super::status::NodeView) -> Option<f64>;
    let families: [(&str, &str, NodeGet); 5] = [
        (
            "numasched_node_load_cpus",
            "CPUs' worth of managed processes' demand running on the node.",
            |n| Some(n.load),
        ),
        (
            "numasched_node_memory_used_bytes",
            "Memory in use on the node (sysfs MemUsed).",
            |n| n.memory_used_bytes.map(|b| b as f64),
        ),
        (
            "numasched_node_memory_total_bytes",
            "Memory of the node.",
            |n| Some(n.memory_total_bytes as f64),
        ),
        (
            "numasched_node_managed_memory_bytes",
            "Memory of managed processes on the node (numa_maps).",
            |n| Some(n.managed_memory_bytes as f64),
        ),
        (
            "numasched_node_llc_pressure_mpki",
            "Sum of the MPKI of managed processes on the node's LLCs, remote ones weighted by their NUMA penalty.",
            |n| Some(n.llc_pressure),
        ),
    ];
    for (name, help, get) in families {
        o.family(name, "gauge", help);
        for (id, n) in &nodes {
            if let Some(x) = get(n) {
                o.sample(name, &[("node", id)], x);
            }
        }
    }
}

/// Per managed process: demand, locality, cache behaviour, threads, changes.
fn process_families(o: &mut Out, processes: &[super::status::ProcessView]) {
    let procs: Vec<(String, &super::status::ProcessView)> =
        processes.iter().map(|p| (p.pid.to_string(), p)).collect();
    type ProcGet = fn(&super::status::ProcessView) -> Option<f64>;
    let proc_families: [(&str, &str, &str, ProcGet); 7] = [
        (
            "numasched_process_cpu_demand_cpus",
            "gauge",
            "CPUs' worth of demand of the managed process over the last epoch.",
            |p| Some(p.cpu_demand),
        ),
        (
            "numasched_process_local_fraction",
            "gauge",
            "Fraction of the process's memory on the nodes it runs on.",
            |p| p.local_fraction,
        ),
        (
            "numasched_process_mpki",
            "gauge",
            "LLC misses per kilo-instruction of the process (measured, learned or profiled).",
            |p| p.mpki,
        ),
        (
            "numasched_process_numa_penalty",
            "gauge",
            "Slowdown of the process when its memory is remote (ratio, 1 = none).",
            |p| p.numa_penalty,
        ),
        (
            "numasched_process_threads",
            "gauge",
            "Threads of the process.",
            |p| Some(f64::from(p.threads)),
        ),
        (
            "numasched_process_placement_changes_total",
            "counter",
            "Affinity changes numasched made to the process while managing it.",
            |p| Some(p.placement_changes as f64),
        ),
        (
            "numasched_process_waiting_threads",
            "gauge",
            "Threads of the process waiting for a CPU, on average over the last epoch (read while numasched narrows it; above 0.5 its set is too small).",
            |p| Some(p.waiting),
        ),
    ];
    for (name, kind, help, get) in proc_families {
        o.family(name, kind, help);
        for (pid, p) in &procs {
            if let Some(x) = get(p) {
                o.sample(name, &[("pid", pid), ("program", &p.program)], x);
            }
        }
    }
}

/// Per Slurm job step: what it holds and how much of it numasched manages.
fn job_families(o: &mut Out, jobs: &[super::jobs::JobView]) {
    type JobGet = fn(&super::jobs::JobView) -> f64;
    let families: [(&str, &str, JobGet); 3] = [
        (
            "numasched_job_tasks",
            "Processes of the Slurm job step that the scan saw.",
            |j| j.tasks as f64,
        ),
        (
            "numasched_job_managed_processes",
            "Processes of the Slurm job step that numasched manages (advise: plans only).",
            |j| j.managed as f64,
        ),
        (
            "numasched_job_allocated_cpus",
            "CPUs in the Slurm job step's allocation (its cpuset; 0 when cores are not constrained).",
            |j| j.cpus.len() as f64,
        ),
    ];
    for (name, help, get) in families {
        o.family(name, "gauge", help);
        for j in jobs {
            o.sample(name, &[("step", &j.step), ("mode", j.mode.name())], get(j));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 503 a scraper beyond the cap reads is well-formed: its length is its body's,
    /// and it names the cap.
    #[test]
    fn the_busy_answer_is_a_whole_http_response() {
        let text = std::str::from_utf8(BUSY).expect("utf-8");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
        assert!(
            head.contains(&format!("Content-Length: {}\r\n", body.len())),
            "{head}"
        );
        assert!(body.contains(&conns::MAX_CONNS.to_string()), "{body}");
    }
    use crate::status::NodeView;
    use crate::status::ProcessView;
    use numasched_linux::observe::Sensors;
    use numasched_model::character::PenaltySource;
    use std::collections::BTreeMap;
    use std::io::Read;

    fn status() -> DaemonStatus {
        let p = |pid: u32, program: &str, mpki: Option<f64>, changes: u64| ProcessView {
            pid,
            start_time: 1,
            program: program.into(),
            threads: 2,
            cpu_demand: 1.5,
            memory_bytes: BTreeMap::from([(0, 1 << 20)]),
            memory_from: "numa_maps".into(),
            local_fraction: Some(0.75),
            mpki,
            numa_penalty: mpki.map(|_| 1.3),
            source: PenaltySource::Profile,
            basis: None,
            bandwidth_gbps: None,
            current_cpus: vec![0].into(),
            planned_cpus: vec![0].into(),
            reason: String::new(),
            allowed_cpus: None,
            placement_changes: changes,
            waiting: 0.0,
            job: None,
        };
        DaemonStatus {
            version: "0.1.0".into(),
            pid: 42,
            now_unix: 10,
            policy: "auto".into(),
            interval_s: 1.0,
            sensors_in_use: Vec::new(),
            nodes: 2,
            cpus: 4,
            epochs: 17,
            replans: 3,
            last_epoch_ms: 2.5,
            errors_total: 1,
            nodes_view: vec![
                NodeView {
                    node: 0,
                    cpus: vec![0, 1].into(),
                    load: 1.5,
                    managed_memory_bytes: 2 << 20,
                    memory_total_bytes: 8 << 30,
                    memory_used_bytes: Some(1 << 30),
                    llc_pressure: 12.5,
                },
                NodeView {
                    node: 1,
                    cpus: vec![2, 3].into(),
                    load: 0.0,
                    managed_memory_bytes: 0,
                    memory_total_bytes: 8 << 30,
                    memory_used_bytes: None,
                    llc_pressure: 0.0,
                },
            ],
            processes: vec![
                p(100, "mcf", Some(30.0), 2),
                p(101, "we\"ird\\na\nme", None, 0),
            ]
            .into(),
            uncharacterised: vec![101],
            jobs: vec![crate::jobs::JobView {
                step: "12.0".into(),
                job: 12,
                mode: numasched_linux::observe::slurm::JobMode::Advise,
                cpus: vec![2, 3].into(),
                mems: vec![1],
                tasks: 2,
                managed: 1,
                gpu_nodes: Vec::new(),
                nic_nodes: Vec::new(),
            }],
            ..DaemonStatus::new(Sensors::detect_with(
                &numasched_linux::observe::sensors::Roots {
                    proc: "/nonexistent".into(),
                    sys: "/nonexistent".into(),
                    probe_pid: 1,
                },
                Ok(()),
            ))
        }
    }

    /// Every family this module can write has a row in the operator's table (one was
    /// missing there).
    #[test]
    fn every_metric_is_in_the_documented_table() {
        let source = include_str!("metrics.rs");
        let doc = include_str!("../../../docs/operations.md");
        let mut names: Vec<&str> = source
            .split('"')
            .filter(|t| {
                t.starts_with("numasched_")
                    && t.len() > "numasched_".len()
                    && t.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
            })
            .collect();
        names.sort_unstable();
        names.dedup();
        assert!(names.len() >= 20, "{names:?}");
        let missing: Vec<_> = names
            .iter()
            .filter(|n| !doc.contains(&format!("| `{n}` |")))
            .collect();
        assert!(
            missing.is_empty(),
            "not in docs/operations.md's table: {missing:?}"
        );
    }

    /// `name{labels} value` lines, by their text before the value.
    fn samples(text: &str) -> BTreeMap<String, String> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').expect("a value");
                (k.to_string(), v.to_string())
            })
            .collect()
    }

    #[test]
    fn renders_every_family_with_help_type_and_labels() {
        let text = render(&status());
        let s = samples(&text);
        let at = |k: &str| s.get(k).unwrap_or_else(|| panic!("{k} missing in\n{text}"));
        assert_eq!(at("numasched_epochs_total"), "17");
        assert_eq!(at("numasched_replans_total"), "3");
        assert_eq!(at("numasched_errors_total"), "1");
        assert_eq!(at("numasched_epoch_duration_seconds"), "0.0025");
        assert_eq!(at("numasched_managed_processes"), "2");
        assert_eq!(at("numasched_node_load_cpus{node=\"0\"}"), "1.5");
        assert_eq!(at("numasched_node_load_cpus{node=\"1\"}"), "0");
        assert_eq!(
            at("numasched_node_memory_used_bytes{node=\"0\"}"),
            &(1u64 << 30).to_string()
        );
        assert!(
            !s.contains_key("numasched_node_memory_used_bytes{node=\"1\"}"),
            "unknown values are left out, not written as 0"
        );
        assert_eq!(
            at("numasched_node_memory_total_bytes{node=\"1\"}"),
            &(8u64 << 30).to_string()
        );
        assert_eq!(at("numasched_node_llc_pressure_mpki{node=\"0\"}"), "12.5");
        assert_eq!(
            at("numasched_job_tasks{step=\"12.0\",mode=\"advise\"}"),
            "2"
        );
        assert_eq!(
            at("numasched_job_managed_processes{step=\"12.0\",mode=\"advise\"}"),
            "1"
        );
        assert_eq!(
            at("numasched_job_allocated_cpus{step=\"12.0\",mode=\"advise\"}"),
            "2"
        );
        assert_eq!(
            at("numasched_process_local_fraction{pid=\"100\",program=\"mcf\"}"),
            "0.75"
        );
        assert_eq!(
            at("numasched_process_mpki{pid=\"100\",program=\"mcf\"}"),
            "30"
        );
        assert_eq!(
            at("numasched_process_numa_penalty{pid=\"100\",program=\"mcf\"}"),
            "1.3"
        );
        assert_eq!(
            at("numasched_process_placement_changes_total{pid=\"100\",program=\"mcf\"}"),
            "2"
        );
        // Quote, backslash and newline escaped.
        assert_eq!(
            at("numasched_process_placement_changes_total{pid=\"101\",program=\"we\\\"ird\\\\na\\nme\"}"),
            "0"
        );
        assert!(!text.contains("numasched_process_mpki{pid=\"101\""));
        // Every family has HELP then TYPE, once, before its samples.
        let mut seen = std::collections::HashSet::new();
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if let Some(rest) = l.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().expect("name");
                assert!(name.starts_with("numasched_"), "{name}");
                assert!(seen.insert(name.to_string()), "{name} twice");
                let ty = lines[i + 1];
                assert!(ty.starts_with(&format!("# TYPE {name} ")), "{ty}");
                let kind = ty.rsplit(' ').next().expect("kind");
                assert_eq!(kind == "counter", name.ends_with("_total"), "{name}");
            } else if !l.starts_with('#') {
                let name = l.split(['{', ' ']).next().expect("name");
                assert!(seen.contains(name), "{name} has no HELP before it");
            }
        }
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn values_use_prometheus_spelling() {
        assert_eq!(value(f64::NAN), "NaN");
        assert_eq!(value(f64::INFINITY), "+Inf");
        assert_eq!(value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(value(1e-3), "0.001");
    }

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut c = TcpStream::connect(addr).expect("connect");
        c.write_all(request.as_bytes()).expect("send");
        let mut out = String::new();
        c.read_to_string(&mut out).expect("read");
        out
    }

    #[test]
    fn serves_get_metrics_only_and_drops_slow_or_huge_requests() {
        let (wake, _loop) = std::sync::mpsc::channel();
        let shared: Shared = Shared::new(super::super::status_board::Board::new(wake));
        let server = MetricsServer::start("127.0.0.1:0".parse().expect("addr"), shared.clone())
            .expect("bind");
        let addr = server.addr();
        let r = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 503 "), "{r}");
        shared.epoch_done(1);
        shared.put(status());
        let r = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("Content-Type: text/plain; version=0.0.4"), "{r}");
        let body = r.split_once("\r\n\r\n").expect("body").1;
        assert_eq!(body, render(&status()));
        for bad in [
            "GET / HTTP/1.1\r\n\r\n",
            "POST /metrics HTTP/1.1\r\n\r\n",
            "GET /metricsx HTTP/1.0\r\n\r\n",
        ] {
            assert!(get(addr, bad).starts_with("HTTP/1.1 404 "), "{bad}");
        }
        let huge = format!(
            "GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_REQUEST)
        );
        let r = get(addr, &huge);
        assert!(r.starts_with("HTTP/1.1 400 "), "{r:?}");
        // A client that never finishes its request is cut off after the timeout, and
        // the server then answers the next one.
        let t0 = Instant::now();
        let mut slow = TcpStream::connect(addr).expect("connect");
        slow.write_all(b"GET /metr").expect("send");
        let mut out = String::new();
        slow.read_to_string(&mut out).expect("read");
        assert!(out.starts_with("HTTP/1.1 400 "), "{out}");
        assert!(t0.elapsed() < CLIENT_TIMEOUT + Duration::from_secs(2));
        let r = get(addr, "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 "), "{r}");
    }
}
