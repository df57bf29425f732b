//! One observation pass over a procfs tree, producing the [`Snapshot`] policies consume.
//!
//! The [`Scanner`] keeps the previous pass's CPU times so that `cpu_demand` is a rate
//! over the last interval. Per process, stat is read first (cheap): kernel threads,
//! excluded pids and processes the filter rejects stop there, before the costly
//! numa_maps. A process that vanishes at any step is counted and left out; a process
//! whose files cannot be read or parsed is left out and its error kept in
//! [`Observation::problems`]; neither stops the pass.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::error::ObserveError;
use super::proc::{ProcDir, ProcInfo, ReadOptions, Stat};
use crate::policy::{Process, Snapshot};
use crate::topology::{CpuId, Topology};

/// What the filter sees: everything known after stat, before the costly reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate<'a> {
    pub stat: &'a Stat,
    /// As it will appear in the snapshot (see [`DemandBasis`]).
    pub cpu_demand: f64,
    pub rss_bytes: u64,
}

/// The daemon's process filter (min CPU, min RSS, name patterns); `true` keeps it.
pub type Filter = Box<dyn Fn(&Candidate<'_>) -> bool + Send + Sync>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanConfig {
    pub proc_root: PathBuf,
    /// Never observed: the daemon itself, and whatever the configuration excludes.
    pub exclude: HashSet<u32>,
    pub read: ReadOptions,
    /// USER_HZ, the unit of CPU times and start times in stat.
    pub ticks_per_second: u64,
}

impl Default for ScanConfig {
    fn default() -> Self {
        ScanConfig {
            proc_root: PathBuf::from("/proc"),
            exclude: HashSet::from([std::process::id()]),
            read: ReadOptions::default(),
            ticks_per_second: procfs::ticks_per_second().max(1),
        }
    }
}

/// How `cpu_demand` was computed in a pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DemandBasis {
    /// First pass: CPU time over the process's whole life. Neither 0 (which would make
    /// every process look idle for one epoch) nor "unknown" (which policies cannot
    /// use); a long-idle process that just turned busy reads low until the next pass.
    Lifetime,
    /// CPU time used since the previous pass over the time between them, in seconds.
    /// Processes started since then are measured over their life.
    Interval(f64),
}

/// One pass's result.
#[derive(Debug)]
pub struct Observation {
    pub snapshot: Snapshot,
    /// Everything read about each process of the snapshot, in the same order.
    pub details: Vec<ProcInfo>,
    /// Processes left out because a file could not be read or made no sense.
    pub problems: Vec<ObserveError>,
    /// Processes kept without their memory or fault information because reading
    /// numa_maps or sched was refused (see [`ProcInfo::denied`]).
    pub incomplete: usize,
    /// Processes that exited between being listed and being read.
    pub vanished: usize,
    pub kernel_threads: usize,
    /// Left out by the exclusion list or the filter, or pinned entirely outside the
    /// topology's CPUs (nothing to plan).
    pub excluded: usize,
    /// Seconds since boot at the time of the pass (`<proc>/uptime`).
    pub uptime: f64,
    pub demand_basis: DemandBasis,
}

/// Holds what one pass needs from the previous one.
pub struct Scanner {
    config: ScanConfig,
    filter: Option<Filter>,
    /// (pid, start time) → CPU ticks at the previous pass.
    previous: HashMap<(u32, u64), u64>,
    previous_uptime: Option<f64>,
}

impl Scanner {
    pub fn new(config: ScanConfig) -> Scanner {
        Scanner {
            config,
            filter: None,
            previous: HashMap::new(),
            previous_uptime: None,
        }
    }

    pub fn with_filter(mut self, filter: Filter) -> Scanner {
        self.filter = Some(filter);
        self
    }

    pub fn config(&self) -> &ScanConfig {
        &self.config
    }

    /// One pass. Fails only if the procfs root itself cannot be read.
    pub fn scan(&mut self, topology: &Topology) -> Result<Observation, ObserveError> {
        let root = &self.config.proc_root;
        let uptime = read_uptime(root)?;
        let pids = list_pids(root)?;
        let tps = self.config.ticks_per_second.max(1) as f64;
        let basis = match self.previous_uptime {
            Some(prev) => DemandBasis::Interval((uptime - prev).max(0.0)),
            None => DemandBasis::Lifetime,
        };
        let mut obs = Observation {
            snapshot: Snapshot {
                topology: topology.clone(),
                processes: Vec::new(),
            },
            details: Vec::new(),
            problems: Vec::new(),
            incomplete: 0,
            vanished: 0,
            kernel_threads: 0,
            excluded: 0,
            uptime,
            demand_basis: basis,
        };
        let mut seen = HashMap::with_capacity(self.previous.len().max(pids.len()));
        let machine: Vec<CpuId> = topology.cpus().iter().map(|c| c.id).collect();

        for pid in pids {
            if self.config.exclude.contains(&pid) {
                obs.excluded += 1;
                continue;
            }
            let step = (|| {
                let Some(dir) = ProcDir::open(root, pid)? else {
                    return Ok(None);
                };
                let Some(stat) = dir.stat()? else {
                    return Ok(None);
                };
                Ok(Some((dir, stat)))
            })();
            let (dir, stat) = match step {
                Ok(Some(v)) => v,
                Ok(None) => {
                    obs.vanished += 1;
                    continue;
                }
                Err(e) => {
                    obs.problems.push(e);
                    continue;
                }
            };
            if stat.is_kernel_thread() {
                obs.kernel_threads += 1;
                continue;
            }
            let key = (pid, stat.start_time);
            let demand = demand(&stat, self.previous.get(&key).copied(), basis, uptime, tps);
            seen.insert(key, stat.cpu_ticks);
            let rss_bytes = stat.rss_pages.saturating_mul(procfs::page_size());
            if let Some(f) = &self.filter {
                let c = Candidate {
                    stat: &stat,
                    cpu_demand: demand,
                    rss_bytes,
                };
                if !f(&c) {
                    obs.excluded += 1;
                    continue;
                }
            }
            let info = match dir.read_rest(stat, &self.config.read) {
                Ok(Some(info)) => info,
                Ok(None) => {
                    obs.vanished += 1;
                    continue;
                }
                Err(e) => {
                    obs.problems.push(e);
                    continue;
                }
            };
            if info.kernel_thread {
                obs.kernel_threads += 1;
                continue;
            }
            match to_process(&info, demand, topology, &machine) {
                Some(p) => {
                    obs.incomplete += usize::from(!info.denied.is_empty());
                    obs.snapshot.processes.push(p);
                    obs.details.push(info);
                }
                None => obs.excluded += 1,
            }
        }
        self.previous = seen;
        self.previous_uptime = Some(uptime);
        Ok(obs)
    }
}

/// CPUs' worth of CPU time over the interval (see [`DemandBasis`]); never negative,
/// never more than the process has threads.
fn demand(stat: &Stat, before: Option<u64>, basis: DemandBasis, uptime: f64, tps: f64) -> f64 {
    let started = stat.start_time as f64 / tps;
    let life = (uptime - started).max(0.0);
    let (ticks, secs) = match (basis, before) {
        (DemandBasis::Interval(dt), Some(t0)) => (stat.cpu_ticks.saturating_sub(t0), dt),
        // First sight (new since the last pass, or unreadable then): its whole life.
        _ => (stat.cpu_ticks, life),
    };
    if secs <= 0.0 {
        return 0.0;
    }
    let d = ticks as f64 / tps / secs;
    if d.is_finite() {
        d.clamp(0.0, f64::from(stat.num_threads.max(1)))
    } else {
        0.0
    }
}

/// The snapshot's view of a process; `None` if none of the CPUs it may use is in the
/// topology.
fn to_process(
    info: &ProcInfo,
    demand: f64,
    topology: &Topology,
    machine: &[CpuId],
) -> Option<Process> {
    let mut p = Process::new(info.pid(), &info.stat.comm);
    p.start_time = info.stat.start_time;
    let threads = if info.threads.is_empty() {
        info.stat.num_threads
    } else {
        info.threads.len() as u32
    };
    p.threads = threads.max(1);
    p.cpu_demand = demand;
    p.parent = (info.stat.ppid != 0).then_some(info.stat.ppid);
    // Memory on a node the topology does not know (it was built from another view
    // of the machine) cannot be planned for; it is left out rather than failing the
    // snapshot's validation.
    if let Some(m) = &info.numa_maps {
        p.memory_bytes = m
            .node_bytes
            .iter()
            .filter(|(n, b)| **b > 0 && topology.node_index(**n).is_some())
            .map(|(n, b)| (*n, *b))
            .collect::<BTreeMap<_, _>>();
    }
    // Where its threads last ran: a sample of where it runs now, which is what
    // migration cost is judged against (the allowed set says where it could run).
    p.current_cpus = info
        .last_cpus()
        .into_iter()
        .filter(|c| topology.cpu(*c).is_some())
        .collect();
    // A foreign pin is an allowed set that leaves out some CPU of the machine; the
    // kernel's default set often lists possible-but-offline CPUs too, which is not a
    // pin.
    if let Some(allowed) = &info.cpus_allowed {
        if machine.iter().any(|c| allowed.binary_search(c).is_err()) {
            let inside: Vec<CpuId> = allowed
                .iter()
                .copied()
                .filter(|c| topology.cpu(*c).is_some())
                .collect();
            if inside.is_empty() {
                return None;
            }
            p.allowed_cpus = Some(inside);
        }
    }
    Some(p)
}

fn read_uptime(root: &Path) -> Result<f64, ObserveError> {
    let path = root.join("uptime");
    let text = std::fs::read_to_string(&path).map_err(|err| ObserveError::Io {
        path: path.clone(),
        err,
    })?;
    text.split_whitespace()
        .next()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| {
            ObserveError::parse(
                &path,
                Some(1),
                format!("{:?} is not an uptime", text.trim()),
            )
        })
}

/// Numeric entries of the procfs root, ascending.
fn list_pids(root: &Path) -> Result<Vec<u32>, ObserveError> {
    let io = |err| ObserveError::Io {
        path: root.to_path_buf(),
        err,
    };
    let mut pids = Vec::new();
    for entry in std::fs::read_dir(root).map_err(io)? {
        let entry = entry.map_err(io)?;
        if let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    Ok(pids)
}
