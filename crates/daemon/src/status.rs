//! What the running daemon tells `numasched status` (and, later, `top`) over its control
//! socket: which sensors it uses, what it manages and why each process sits where it
//! does, and the last decisions. Plain serde data, the contract of `status --json`.

use numasched_model::plural::count;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use numasched_linux::observe::Sensors;
use numasched_model::character::PenaltySource;
use numasched_model::topology::{cpulist, CpuId, NodeId};
use numasched_model::CpuSet;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonStatus {
    pub version: String,
    pub pid: u32,
    pub started_unix: i64,
    pub now_unix: i64,
    pub policy: String,
    pub interval_s: f64,
    /// The epoch's length where it is stretched because every managed process is
    /// idle (see `pace`); absent at `interval_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stretched_s: Option<f64>,
    pub dry_run: bool,
    pub migrate_pages: bool,
    pub sensors: Sensors,
    /// Names of the sensors in use, e.g. `numa_maps`, `hardware counters`.
    pub sensors_in_use: Vec<String>,
    /// The profile store's path, or `None` when running without one.
    pub store: Option<String>,
    pub nodes: usize,
    pub cpus: usize,
    pub epochs: u64,
    pub replans: u64,
    pub last_epoch_ms: f64,
    /// The longest epoch since start: page moves and re-plans must never hold the
    /// loop (a chunked migration spends at most 100 ms of an epoch).
    #[serde(default)]
    pub max_epoch_ms: f64,
    /// The longest time one epoch spent on page moves since start: the part of an epoch
    /// that migration may hold (about 100 ms; a call still running then goes on on the
    /// mover thread and is answered in a later epoch).
    #[serde(default)]
    pub max_migration_step_ms: f64,
    /// The longest single `move_pages` call since start, on the mover thread: what the
    /// loop would have waited for had the calls been made on it.
    #[serde(default)]
    pub max_migration_call_ms: f64,
    /// Page moves in progress.
    #[serde(default)]
    pub migrations: Vec<MigrationView>,
    /// Failed actions and observation problems since start.
    pub errors_total: u64,
    /// Per node, as numasched sees it (see [`super::nodes`]).
    #[serde(default)]
    pub nodes_view: Vec<NodeView>,
    /// Shared with the engine, which builds it once per epoch: the status published
    /// every epoch would otherwise copy every process's view.
    pub processes: Arc<Vec<ProcessView>>,
    /// Pids of managed processes with neither counters nor a profile: planned for
    /// locality only.
    pub uncharacterised: Vec<u32>,
    /// Newest last.
    pub decisions: Vec<Decision>,
    /// Slurm job steps on this node (see [`super::jobs`]); empty without Slurm.
    #[serde(default)]
    pub jobs: Vec<super::jobs::JobView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessView {
    pub pid: u32,
    pub start_time: u64,
    pub program: String,
    pub threads: u32,
    /// CPUs' worth it used over the last epoch (what `top` would show); the plan
    /// sizes its set from more: the recent peak plus what its threads waited for.
    pub cpu_demand: f64,
    pub memory_bytes: BTreeMap<NodeId, u64>,
    /// Where its memory picture came from (`numa_maps`, `hinting faults`, `none`).
    pub memory_from: String,
    pub local_fraction: Option<f64>,
    pub mpki: Option<f64>,
    pub numa_penalty: Option<f64>,
    pub source: PenaltySource,
    /// What a `measured` penalty rests on ("measured 2026-11-28: penalty 0.42 ±
    /// 0.03").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<String>,
    /// DRAM bandwidth, GB/s, from resctrl when the process has a monitoring group.
    pub bandwidth_gbps: Option<f64>,
    pub current_cpus: CpuSet,
    /// What the last plan gave it; empty if it was left alone.
    pub planned_cpus: CpuSet,
    pub reason: String,
    /// A foreign pin (taskset, cpuset) it is kept inside.
    pub allowed_cpus: Option<CpuSet>,
    /// How often numasched changed its affinity (`done` decisions) while managing it.
    #[serde(default)]
    pub placement_changes: u64,
    /// Its threads that waited for a CPU, on average over the last epoch (read only
    /// while numasched narrows it): above about half a thread, its set is too small.
    #[serde(default)]
    pub waiting: f64,
    /// Its Slurm job step (`12.0`), if it runs in one.
    #[serde(default)]
    pub job: Option<String>,
}

/// A page move in progress (see [`numasched_linux::apply::migrate`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MigrationView {
    pub pid: u32,
    pub from: NodeId,
    pub to: NodeId,
    pub planned_bytes: u64,
    pub moved_bytes: u64,
    /// Address space still to walk: at most this much is left to move.
    pub left_bytes: u64,
    pub epochs: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub unix: i64,
    pub epoch: u64,
    pub pid: u32,
    /// `done`, `refused`, `failed`, `restored`, ...
    pub action: String,
    pub text: String,
}

fn list(v: &[CpuId]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        cpulist::format(v)
    }
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.prec$}"))
}

impl DaemonStatus {
    /// This process's status before the engine and the options fill it in
    /// ([`super::Engine::fill_status`], [`super::assemble::Built::status`]): counts at
    /// zero, nothing managed, nothing decided.
    pub fn new(sensors: Sensors) -> DaemonStatus {
        DaemonStatus {
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
            started_unix: 0,
            now_unix: 0,
            policy: String::new(),
            interval_s: 0.0,
            stretched_s: None,
            dry_run: false,
            migrate_pages: false,
            sensors_in_use: sensors.in_use().into_iter().map(String::from).collect(),
            sensors,
            store: None,
            nodes: 0,
            cpus: 0,
            epochs: 0,
            replans: 0,
            last_epoch_ms: 0.0,
            max_epoch_ms: 0.0,
            max_migration_step_ms: 0.0,
            max_migration_call_ms: 0.0,
            migrations: Vec::new(),
            errors_total: 0,
            nodes_view: Vec::new(),
            processes: Arc::default(),
            uncharacterised: Vec::new(),
            decisions: Vec::new(),
            jobs: Vec::new(),
        }
    }

    /// The Slurm job steps' table of [`DaemonStatus::render`], if there are any.
    fn render_jobs(&self, s: &mut String) {
        if self.jobs.is_empty() {
            return;
        }
        // The devices' nodes only where a step has them: most nodes have none.
        let gpus = self.jobs.iter().any(|j| !j.gpu_nodes.is_empty());
        let nics = self.jobs.iter().any(|j| !j.nic_nodes.is_empty());
        let column = |shown: bool, nodes: &[NodeId]| {
            if shown {
                format!("  {:<9}", list(nodes))
            } else {
                String::new()
            }
        };
        let header = |shown: bool, name: &str| {
            if shown {
                format!("  {name:<9}")
            } else {
                String::new()
            }
        };
        let _ = writeln!(
            s,
            "\n{:<14} {:<7} {:<10} {:<6} {:>5} {:>7}{}{}",
            "slurm step",
            "mode",
            "cpus",
            "mems",
            "tasks",
            "managed",
            header(gpus, "gpu nodes"),
            header(nics, "nic nodes"),
        );
        for j in &self.jobs {
            let line = format!(
                "{:<14} {:<7} {:<10} {:<6} {:>5} {:>7}{}{}",
                j.step,
                j.mode.name(),
                list(&j.cpus),
                list(&j.mems),
                j.tasks,
                j.managed,
                column(gpus, &j.gpu_nodes),
                column(nics, &j.nic_nodes),
            );
            let _ = writeln!(s, "{}", line.trim_end());
        }
    }

    /// The human-readable form of `numasched status`.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "numasched {} (pid {}), policy {}, every {}s{}{}{}; {}, {}",
            self.version,
            self.pid,
            self.policy,
            self.interval_s,
            self.stretched_s
                .map(|s| format!(" (now {s}s: everything it manages is idle)"))
                .unwrap_or_default(),
            if self.dry_run { ", DRY RUN" } else { "" },
            if self.migrate_pages {
                ", page migration on"
            } else {
                ""
            },
            count(self.nodes, "node"),
            count(self.cpus, "CPU")
        );
        let _ = writeln!(s, "{}", self.sensors.summary());
        let _ = writeln!(
            s,
            "profile store: {}",
            self.store.as_deref().unwrap_or("none")
        );
        let _ = writeln!(
            s,
            "epochs {}, re-plans {}, last epoch {:.1} ms (longest {:.1} ms), errors {}",
            self.epochs, self.replans, self.last_epoch_ms, self.max_epoch_ms, self.errors_total
        );
        if self.max_migration_step_ms > 0.0 {
            let _ = writeln!(
                s,
                "page moves held an epoch for at most {:.1} ms (longest call {:.1} ms)",
                self.max_migration_step_ms, self.max_migration_call_ms
            );
        }
        for m in &self.migrations {
            let _ = writeln!(
                s,
                "pid {}: moving pages node {} -> {}: {:.1} of {:.1} MB moved in {} epoch(s)",
                m.pid,
                m.from,
                m.to,
                m.moved_bytes as f64 / 1e6,
                m.planned_bytes as f64 / 1e6,
                m.epochs
            );
        }
        if !self.nodes_view.is_empty() {
            let _ = writeln!(
                s,
                "\n{:>4}  {:<8} {:>6} {:>10} {:>17} {:>12}",
                "node", "cpus", "load", "managed", "used / total", "LLC pressure"
            );
            for n in &self.nodes_view {
                let gib = |b: u64| format!("{:.1}G", b as f64 / (1u64 << 30) as f64);
                let used = n.memory_used_bytes.map_or("-".into(), gib);
                let _ = writeln!(
                    s,
                    "{:>4}  {:<8} {:>6.2} {:>10} {:>17} {:>12.1}",
                    n.node,
                    list(&n.cpus),
                    n.load,
                    gib(n.managed_memory_bytes),
                    format!("{used} / {}", gib(n.memory_total_bytes)),
                    n.llc_pressure
                );
            }
        }
        self.render_jobs(&mut s);
        let _ = writeln!(
            s,
            "\n{:>8}  {:<15} {:>3} {:>5} {:>6} {:>5} {:<10} {:>5} {:<8} {:<8} reason",
            "pid", "program", "thr", "cpu", "mpki", "np", "source", "local", "ran on", "planned"
        );
        for p in self.processes.iter() {
            let _ = writeln!(
                s,
                "{:>8}  {:<15} {:>3} {:>5.2} {:>6} {:>5} {:<10} {:>5} {:<8} {:<8} {}",
                p.pid,
                p.program,
                p.threads,
                p.cpu_demand,
                opt(p.mpki, 1),
                opt(p.numa_penalty, 2),
                p.source.name(),
                opt(p.local_fraction, 2),
                list(&p.current_cpus),
                list(&p.planned_cpus),
                match &p.job {
                    Some(j) => format!("[job {j}] {}", p.reason),
                    None => p.reason.clone(),
                }
            );
            if let Some(b) = &p.basis {
                let _ = writeln!(s, "{:>8}  np {b}", "");
            }
        }
        if !self.processes.is_empty() {
            let _ = writeln!(s, "{}", PenaltySource::LEGEND);
        }
        if !self.uncharacterised.is_empty() {
            let pids: Vec<String> = self.uncharacterised.iter().map(u32::to_string).collect();
            let _ = writeln!(
                s,
                "\nnot characterised (no counters, no profile; placed for locality only): {}",
                pids.join(", ")
            );
        }
        if !self.decisions.is_empty() {
            let _ = writeln!(s, "\nlast decisions:");
            for d in &self.decisions {
                let _ = writeln!(s, "  epoch {:>6}  {}", d.epoch, d.text);
            }
        }
        s
    }
}

/// One node as the status shows it (built by `nodes::node_views`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub node: NodeId,
    pub cpus: CpuSet,
    /// CPUs' worth of managed processes' demand running on this node's CPUs (each
    /// process's demand split evenly over the CPUs its threads last ran on).
    pub load: f64,
    /// Bytes of managed processes' memory on this node (numa_maps).
    pub managed_memory_bytes: u64,
    pub memory_total_bytes: u64,
    /// Memory in use on the node (sysfs `MemUsed`), when readable.
    pub memory_used_bytes: Option<u64>,
    /// Σ MPKI of the managed processes on its LLCs, a process away from its memory
    /// counting MPKI × NUMA penalty (Majo & Gross, ISMM 2011), summed over the node's LLCs.
    pub llc_pressure: f64,
}
