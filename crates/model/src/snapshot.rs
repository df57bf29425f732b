//! What a policy sees: the machine and the processes on it, frozen at one instant.
//! The daemon builds it from /proc and sensors, the simulator from a scenario, tests by
//! hand, and `plan --snapshot` from a file; policies cannot tell the difference.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::character::prior::Prior;
use crate::character::{Character, PenaltySource};
use crate::cpuset::CpuSet;
use crate::topology::{CpuId, NodeId, Topology};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    pub topology: Topology,
    #[serde(default, deserialize_with = "at_most_max_processes")]
    pub processes: Vec<Process>,
    /// CPUs' worth of others' work (what the snapshot does not hold) that the kernel
    /// cannot move off each CPU, over the last epoch: interrupts, and unmanaged
    /// processes whose affinity leaves them nowhere else. A CPU held by such work is
    /// no free CPU, though no planned process holds it; hard pinning one there would
    /// halve it for good (a `taskset -c 0` neighbour). Work free to move is left out: the
    /// kernel moves it off a pinned load's CPU. Empty where nothing measured it (the
    /// simulator, a first scan): every CPU is then taken as free. Summed, not capped
    /// at one CPU: it is read against the other CPUs of a cache. (An older name,
    /// `others_busy`, is read too.)
    #[serde(
        default,
        alias = "others_busy",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub others_pinned: BTreeMap<CpuId, f64>,
    /// CPUs others' work holds, as the policies count room when they choose a node or
    /// a cache: per LLC, as many CPUs as the CPUs' worth of others' work there
    /// (rounded, with hysteresis), the busiest first, and the sets of confined
    /// processes whose run-queue delay shows them held. `others_pinned` counts only
    /// work that cannot leave its CPU, right for a hard pin inside a cache but blind to
    /// a node others' work fills beside a managed process free to run anywhere; this
    /// is the estimate per cache. Empty where nothing measured it (the simulator, a machine of
    /// one LLC): every CPU is then room.
    #[serde(default, skip_serializing_if = "no_cpus")]
    pub others_taken: CpuSet,
    /// CPUs' worth of others' work, run or waited for, spread evenly over the CPUs each
    /// such process may run on: work free to move included, which `others_pinned`
    /// leaves out. Hard pinning inside a cache where it and the planned threads
    /// outnumber the CPUs only decides who waits behind whom, and the kernel no longer
    /// can even it out: a load pinned to the CPU beside a `taskset -c 0` one left a
    /// third load free to move nowhere better, which stayed beside it (no_harm bench,
    /// 0.956 of its unmanaged rate). Empty where nothing measured it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub others_demand: BTreeMap<CpuId, f64>,
}

fn no_cpus(set: &CpuSet) -> bool {
    set.is_empty()
}

/// A process across pid reuse: the pid and the start time (clock ticks since boot) that
/// `/proc/<pid>/stat` gave when it was seen. A pid alone names whichever process holds
/// it now; everything numasched remembers of a process is keyed by this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ProcessKey {
    pub pid: u32,
    pub start_time: u64,
}

/// Linux's limit on pids, and so on the tasks of one process (`PID_MAX_LIMIT` on
/// 64-bit kernels).
pub const PID_MAX_LIMIT: u32 = 1 << 22;

/// One process (all its threads are placed as a group).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    /// Start time in clock ticks since boot; with the pid it identifies the process
    /// across pid reuse.
    #[serde(default)]
    pub start_time: u64,
    pub program: String,
    #[serde(default = "one")]
    pub threads: u32,
    /// CPUs' worth of demand over the last epoch (1.0 = one CPU busy all the time).
    #[serde(default = "one_f64")]
    pub cpu_demand: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpki: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_penalty: Option<f64>,
    /// DRAM bandwidth the process draws when alone, GB/s (memory-bus pairing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_gbps: Option<f64>,
    /// Fraction of its LLC misses that more cache would remove (0 = pure streaming,
    /// 1 = all reuse): how much it suffers when co-runners take cache capacity. From a
    /// profile, or learned from its MPKI alone versus shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_reuse: Option<f64>,
    /// Resident memory per node, bytes (from numa_maps).
    #[serde(default)]
    pub memory_bytes: BTreeMap<NodeId, u64>,
    /// Where it runs now; empty for a process not yet placed (just forked or exec'd).
    #[serde(default)]
    pub current_cpus: CpuSet,
    /// Affinity someone else imposed (taskset, cpuset). `None` = the whole machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_cpus: Option<CpuSet>,
    /// Nodes its memory may be on (`Mems_allowed`, a cpuset's `cpuset.mems`), when
    /// narrower than the machine: pages never move anywhere else. `None` = every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_mems: Option<Vec<NodeId>>,
    /// Parent pid, for the fork rule of memory-aware allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
    /// Resident bytes under an explicit memory policy (`numactl --membind`, `mbind`,
    /// `set_mempolicy`; numa_maps' second column), which the kernel's NUMA balancing
    /// neither scans nor moves: `task_numa_work` skips a mapping whose policy lacks
    /// `MPOL_F_MOF`, which only the default policy and a bind with
    /// `MPOL_F_NUMA_BALANCING` carry.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub policy_bytes: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn one() -> u32 {
    1
}
fn one_f64() -> f64 {
    1.0
}

impl Process {
    /// A single-threaded, fully busy process; tests and the simulator fill in the rest.
    pub fn new(pid: u32, program: &str) -> Process {
        Process {
            pid,
            start_time: 0,
            program: program.to_string(),
            threads: 1,
            cpu_demand: 1.0,
            mpki: None,
            numa_penalty: None,
            bandwidth_gbps: None,
            cache_reuse: None,
            memory_bytes: BTreeMap::new(),
            current_cpus: CpuSet::new(),
            allowed_cpus: None,
            allowed_mems: None,
            parent: None,
            policy_bytes: 0,
        }
    }

    pub fn key(&self) -> ProcessKey {
        ProcessKey {
            pid: self.pid,
            start_time: self.start_time,
        }
    }

    pub fn character(&self) -> Character {
        Character::resolve(self.mpki, self.numa_penalty)
    }

    /// What a policy ranks it by on `topo`: [`Process::character`], except that a
    /// penalty nothing gave is the prior ([`Prior`]), not 1. The source stays
    /// `Unknown`, so reasons can say it was assumed.
    pub fn character_on(&self, topo: &Topology) -> Character {
        let mut c = self.character();
        if c.source == PenaltySource::Unknown {
            c.numa_penalty = Prior::for_topology(topo).numa_penalty;
        }
        c
    }

    /// The CPUs of `topo` it may run on: inside its foreign pin, if any.
    pub fn may_run_on(&self, topo: &Topology) -> CpuSet {
        match &self.allowed_cpus {
            Some(a) => a.intersection(&topo.all_cpus()),
            None => topo.all_cpus(),
        }
    }

    /// Whether its pages may be on `node`.
    pub fn may_use_memory_of(&self, node: NodeId) -> bool {
        self.allowed_mems.as_ref().is_none_or(|m| m.contains(&node))
    }

    pub fn rss_bytes(&self) -> u64 {
        self.memory_bytes.values().sum()
    }

    /// Node id holding most of its memory (lowest id on ties); `None` without memory.
    pub fn home_node(&self) -> Option<NodeId> {
        let mut best: Option<(NodeId, u64)> = None;
        for (&n, &b) in &self.memory_bytes {
            if b > 0 && best.is_none_or(|(_, bb)| b > bb) {
                best = Some((n, b));
            }
        }
        best.map(|(n, _)| n)
    }

    /// How many CPUs the group should be given: one per thread it can keep busy, and
    /// at least one.
    pub fn slots(&self) -> usize {
        self.busy_threads().max(1)
    }

    /// Threads it keeps busy, whole (0 for an idle process). Demand just over a whole
    /// number is that number: 1.05 CPUs' worth measured live is one busy thread plus a
    /// reporting or housekeeping thread, and rounding it up to two made plans flip with
    /// sampling noise.
    pub fn busy_threads(&self) -> usize {
        let busy = (self.cpu_demand - SLOT_SLACK).ceil().max(0.0) as usize;
        busy.min(self.threads.max(1) as usize)
    }
}

/// CPUs' worth of demand above a whole number that is still counted as that number.
pub const SLOT_SLACK: f64 = 0.1;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{path}: {}", one_line(.err))]
    Json {
        path: PathBuf,
        err: serde_json::Error,
    },
    #[error("{path}: {field}: {what}")]
    Field {
        path: PathBuf,
        field: String,
        what: String,
    },
    /// A plan without the snapshot it was made for: nothing to plan again from.
    #[error(
        "{path}: a plan, as `plan --snapshot FILE --json` writes it, not a snapshot: plan \
         FILE itself again, or what a live `plan --json` wrote (that carries its snapshot)"
    )]
    BarePlan { path: PathBuf },
}

/// serde quotes an unknown key as written, newlines and all; errors are one line.
fn one_line(err: &serde_json::Error) -> String {
    crate::files::plain_types(&err.to_string().replace('\n', "\\n").replace('\r', "\\r"))
}

/// The part of `plan --json`'s document that is a snapshot; the rest (the plan, the
/// sensors) is not needed to plan again.
#[derive(Deserialize)]
struct PlanOutput {
    snapshot: Snapshot,
    #[serde(rename = "plan")]
    _plan: serde::de::IgnoredAny,
}

/// What a JSON document holds, told from its top-level keys.
#[derive(Debug, PartialEq)]
enum Kind {
    /// A `plan` and its `snapshot`, as a live `plan --json` writes.
    PlanOutput,
    /// A plan alone (`policy`, `placements`), as `plan --snapshot F --json` writes.
    BarePlan,
    /// Anything else: read as a snapshot, which says what is wrong with it.
    Snapshot,
}

fn kind(text: &str) -> Kind {
    // Typed, with the values skipped: no tree of the file is built to tell.
    #[derive(Deserialize)]
    struct Probe {
        plan: Option<serde::de::IgnoredAny>,
        snapshot: Option<serde::de::IgnoredAny>,
        policy: Option<serde::de::IgnoredAny>,
        placements: Option<serde::de::IgnoredAny>,
        topology: Option<serde::de::IgnoredAny>,
    }
    match serde_json::from_str::<Probe>(text) {
        Ok(p) if p.plan.is_some() && p.snapshot.is_some() => Kind::PlanOutput,
        Ok(p) if p.policy.is_some() && p.placements.is_some() && p.topology.is_none() => {
            Kind::BarePlan
        }
        _ => Kind::Snapshot,
    }
}

/// Largest snapshot file read: 50,000 processes, as `plan --json` writes them, are
/// about 15 MB.
pub const MAX_SNAPSHOT_BYTES: u64 = 64 << 20;

/// Most processes a snapshot file may hold, checked while it is read: what bounds the
/// memory and time of planning it (see docs/operations.md for the figures).
pub const MAX_SNAPSHOT_PROCESSES: usize = 50_000;

fn at_most_max_processes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Process>, D::Error> {
    crate::bounded::at_most(d, MAX_SNAPSHOT_PROCESSES, "processes", "")
}

impl Snapshot {
    /// CPUs the machine's busy work wants: a slot per busy thread of each process, and
    /// each CPU others' work holds. More than the machine has, and someone takes turns.
    pub fn wanted_cpus(&self) -> usize {
        self.processes.iter().map(Process::slots).sum::<usize>() + self.others_taken.len()
    }

    pub fn load(path: &Path) -> Result<Snapshot, SnapshotError> {
        let text = crate::files::read_text(path, MAX_SNAPSHOT_BYTES, "snapshot").map_err(|e| {
            SnapshotError::Io {
                path: path.to_path_buf(),
                err: e.into_io(),
            }
        })?;
        Snapshot::from_json(&text, path)
    }

    /// Parses and validates; `origin` only labels errors. What `plan --json` writes is
    /// taken too: it carries the snapshot it planned under `snapshot`, and replaying a
    /// plan is what an operator feeding it back means.
    pub fn from_json(text: &str, origin: &Path) -> Result<Snapshot, SnapshotError> {
        let json = |err| SnapshotError::Json {
            path: origin.to_path_buf(),
            err,
        };
        // Which of the two it is, first: trying one and then the other read a large
        // file twice (and a tree of all of it, 222 MB for one over the process limit).
        let (snap, prefix) = match kind(text) {
            Kind::PlanOutput => {
                let out = serde_json::from_str::<PlanOutput>(text).map_err(json)?;
                (out.snapshot, "snapshot.")
            }
            Kind::BarePlan => {
                return Err(SnapshotError::BarePlan {
                    path: origin.to_path_buf(),
                })
            }
            Kind::Snapshot => (serde_json::from_str::<Snapshot>(text).map_err(json)?, ""),
        };
        snap.validate()
            .map_err(|(field, what)| SnapshotError::Field {
                path: origin.to_path_buf(),
                field: format!("{prefix}{field}"),
                what,
            })?;
        Ok(snap)
    }

    /// Checks what serde cannot: references to CPUs and nodes that exist, numbers in
    /// range, unique pids. Returns the offending field path and what is wrong with it.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let topo = &self.topology;
        let mut pids = std::collections::HashSet::new();
        for (i, p) in self.processes.iter().enumerate() {
            let f = |name: &str| format!("processes[{i}].{name}");
            if !pids.insert(p.pid) {
                return Err((f("pid"), format!("pid {} appears twice", p.pid)));
            }
            if p.threads == 0 || p.threads > PID_MAX_LIMIT {
                return Err((
                    f("threads"),
                    format!(
                        "{} must be between 1 and {PID_MAX_LIMIT} (Linux's most tasks)",
                        p.threads
                    ),
                ));
            }
            // Each thread uses at most one CPU: more is a unit mistake (percent, ticks).
            if !p.cpu_demand.is_finite()
                || p.cpu_demand < 0.0
                || p.cpu_demand > f64::from(p.threads)
            {
                return Err((
                    f("cpu_demand"),
                    format!(
                        "{} is not a CPU share between 0 and its {}",
                        p.cpu_demand,
                        crate::plural::count(p.threads as usize, "thread")
                    ),
                ));
            }
            for (name, v) in [("mpki", p.mpki), ("bandwidth_gbps", p.bandwidth_gbps)] {
                if let Some(v) = v {
                    if !v.is_finite() || v < 0.0 {
                        return Err((f(name), format!("{v} must be a finite number ≥ 0")));
                    }
                }
            }
            if let Some(r) = p.cache_reuse {
                if !(0.0..=1.0).contains(&r) {
                    return Err((
                        f("cache_reuse"),
                        format!("{r} must be a fraction in [0, 1]"),
                    ));
                }
            }
            if let Some(np) = p.numa_penalty {
                if !np.is_finite() || np < 1.0 {
                    return Err((
                        f("numa_penalty"),
                        format!("{np} must be ≥ 1 (remote CPI / local CPI)"),
                    ));
                }
            }
            for n in p.memory_bytes.keys() {
                if topo.node_index(*n).is_none() {
                    return Err((f("memory_bytes"), format!("node {n} does not exist")));
                }
            }
            for c in &p.current_cpus {
                if topo.cpu(*c).is_none() {
                    return Err((f("current_cpus"), format!("CPU {c} does not exist")));
                }
            }
            if let Some(allowed) = &p.allowed_cpus {
                if allowed.is_empty() {
                    return Err((f("allowed_cpus"), "is empty".into()));
                }
                if let Some(c) = allowed.iter().find(|c| topo.cpu(**c).is_none()) {
                    return Err((f("allowed_cpus"), format!("CPU {c} does not exist")));
                }
            }
            if let Some(mems) = &p.allowed_mems {
                if mems.is_empty() {
                    return Err((f("allowed_mems"), "is empty".into()));
                }
                if let Some(n) = mems.iter().find(|n| topo.node_index(**n).is_none()) {
                    return Err((f("allowed_mems"), format!("node {n} does not exist")));
                }
            }
        }
        if let Some(c) = self.others_taken.iter().find(|c| topo.cpu(**c).is_none()) {
            return Err(("others_taken".into(), format!("CPU {c} does not exist")));
        }
        for (c, busy) in &self.others_pinned {
            let field = || format!("others_pinned.{c}");
            if topo.cpu(*c).is_none() {
                return Err((field(), format!("CPU {c} does not exist")));
            }
            if !(0.0..=1.0).contains(busy) {
                return Err((
                    field(),
                    format!("{busy} is not a share of one CPU, in [0, 1]"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn demand_and_threads_out_of_range_are_refused_with_the_field() {
        let topology = crate::topology::spec::parse("1n:1l:2c:1t").expect("spec");
        let check = |demand: f64, threads: u32| {
            let mut p = Process::new(1, "p");
            p.cpu_demand = demand;
            p.threads = threads;
            let snap = Snapshot {
                topology: topology.clone(),
                processes: vec![p],
                others_pinned: Default::default(),
                others_taken: Default::default(),
                others_demand: Default::default(),
            };
            snap.validate().map_err(|(field, _)| field)
        };
        assert_eq!(check(2.0, 2), Ok(()));
        assert_eq!(check(1e300, 2), Err("processes[0].cpu_demand".into()));
        assert_eq!(check(2.5, 2), Err("processes[0].cpu_demand".into()));
        assert_eq!(check(1.0, 0), Err("processes[0].threads".into()));
        assert_eq!(check(1.0, 100_000_000), Err("processes[0].threads".into()));
    }

    #[test]
    fn others_work_and_memory_nodes_must_name_what_exists() {
        let topology = crate::topology::spec::parse("1n:1l:2c:1t").expect("spec");
        let check = |mems: Option<Vec<NodeId>>, others: &[(CpuId, f64)]| {
            let mut p = Process::new(1, "p");
            p.allowed_mems = mems;
            let snap = Snapshot {
                topology: topology.clone(),
                processes: vec![p],
                others_pinned: others.iter().copied().collect(),
                others_taken: Default::default(),
                others_demand: Default::default(),
            };
            snap.validate().map_err(|(field, _)| field)
        };
        assert_eq!(check(Some(vec![0]), &[(1, 0.5)]), Ok(()));
        assert_eq!(
            check(Some(vec![5]), &[]),
            Err("processes[0].allowed_mems".into())
        );
        assert_eq!(
            check(Some(vec![]), &[]),
            Err("processes[0].allowed_mems".into())
        );
        assert_eq!(check(None, &[(99, 1.0)]), Err("others_pinned.99".into()));
        assert_eq!(check(None, &[(0, -3.0)]), Err("others_pinned.0".into()));
        assert_eq!(check(None, &[(0, 50.0)]), Err("others_pinned.0".into()));
        assert_eq!(check(None, &[(0, f64::NAN)]), Err("others_pinned.0".into()));
    }

    #[test]
    fn a_snapshot_saved_with_the_older_name_reads_the_same() {
        let topology = crate::topology::spec::parse("1n:1l:2c:1t").expect("spec");
        let snap = Snapshot {
            topology,
            processes: Vec::new(),
            others_pinned: [(0, 0.5)].into_iter().collect(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let json = serde_json::to_string(&snap).expect("json");
        assert!(json.contains("\"others_pinned\""), "{json}");
        let older: Snapshot =
            serde_json::from_str(&json.replace("others_pinned", "others_busy")).expect("older");
        assert_eq!(older, snap);
    }

    #[test]
    fn slots_count_busy_threads_not_sampling_noise() {
        let with = |demand: f64, threads: u32| {
            let mut p = Process::new(1, "p");
            p.cpu_demand = demand;
            p.threads = threads;
            p.slots()
        };
        assert_eq!(with(1.05, 2), 1, "one busy thread and a reporter");
        assert_eq!(with(1.2, 2), 2);
        assert_eq!(with(3.0, 8), 3);
        assert_eq!(with(3.5, 2), 2, "never more than its threads");
        assert_eq!(with(0.0, 4), 1, "at least one");
    }

    use super::*;
    use crate::topology;

    fn snap() -> Snapshot {
        let mut p = Process::new(10, "mcf");
        p.memory_bytes.insert(1, 100);
        p.memory_bytes.insert(0, 50);
        Snapshot {
            topology: topology::machine("2n:1l:2c:1t").unwrap(),
            processes: vec![p],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        }
    }

    #[test]
    fn home_is_the_node_with_most_memory() {
        assert_eq!(snap().processes[0].home_node(), Some(1));
        assert_eq!(Process::new(1, "x").home_node(), None);
    }

    #[test]
    fn slots_follow_busy_threads() {
        let mut p = Process::new(1, "x");
        p.threads = 8;
        p.cpu_demand = 2.5;
        assert_eq!(p.slots(), 3);
        p.cpu_demand = 0.0;
        assert_eq!(p.slots(), 1);
        assert_eq!(p.busy_threads(), 0, "idle: a CPU to run on, no busy thread");
        p.cpu_demand = 1.05;
        assert_eq!(p.busy_threads(), 1);
        p.threads = 2;
        p.cpu_demand = 6.0;
        assert_eq!(p.slots(), 2);
    }

    #[test]
    fn round_trips_through_json() {
        let s = snap();
        let json = serde_json::to_string(&s).unwrap();
        let back = Snapshot::from_json(&json, Path::new("x.json")).unwrap();
        assert_eq!(s, back);
    }

    #[test]
    fn bad_fields_name_the_file_and_field() {
        let mut s = snap();
        s.processes[0].numa_penalty = Some(0.5);
        let json = serde_json::to_string(&s).unwrap();
        let e = Snapshot::from_json(&json, Path::new("bug.json"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bug.json: processes[0].numa_penalty"), "{e}");

        let mut s = snap();
        s.processes[0].allowed_cpus = Some(CpuSet::from([9]));
        let json = serde_json::to_string(&s).unwrap();
        let e = Snapshot::from_json(&json, Path::new("bug.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("allowed_cpus") && e.contains("CPU 9"), "{e}");

        let e = Snapshot::from_json("{\"topology\": 3}", Path::new("t.json"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.json: "), "{e}");
        let e = Snapshot::from_json("{\"topology\":{\"nodes\":[]}}", Path::new("t.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no nodes"), "{e}");
    }
}
