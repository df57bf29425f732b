//! `autonuma`: a model of Linux's automatic NUMA balancing (`kernel.numa_balancing=1`),
//! the baseline an operator already has.
//!
//! Source: the algorithm of kernel/sched/fair.c (`task_numa_work`,
//! `update_task_scan_period`, `task_numa_placement`, `task_numa_migrate`,
//! `task_numa_compare`, `load_too_imbalanced`, `adjust_numa_imbalance`) and mm
//! (`do_numa_page`, `should_numa_migrate_memory`), re-expressed at the granularity of
//! scan windows; no kernel code is copied. What is modelled, per process (a process's
//! threads are one NUMA group, as threads sharing an `mm` are):
//!
//! - **Scanning** ([`AutoNumaParams::scan_delay_s`] after the start, then every scan
//!   period): the next [`AutoNumaParams::scan_size_bytes`] of the address space are
//!   unmapped. The address space is cut into windows of at most that size, one node each.
//!   Every page of the window is touched again before the next scan (the programs of the
//!   suites touch their whole footprint continually), so each page costs one *hinting
//!   fault*, charged to the process as system time ([`AutoNumaParams::fault_us`] per
//!   [`AutoNumaParams::page_bytes`] page).
//! - **Pages follow the task** (`should_numa_migrate_memory`): a faulting window on
//!   another node than the thread that touches it migrates there when the previous fault
//!   on it came from that same node (the two-touch filter), or, early in the process's
//!   life (first [`AutoNumaParams::early_passes`] passes), on its first fault. The copy
//!   runs in the faulting task's context ([`Trajectory::copies`]; the caller charges it).
//!   The fault is then recorded on the page's new node, as `do_numa_page` does. With
//!   [`AutoNumaParams::move_pages`] off (memory that may not move), nothing migrates.
//!   Memory under an explicit policy (`Process::policy_bytes`: `numactl --membind`,
//!   `mbind`) is not scanned at all: `task_numa_work` skips mappings whose policy lacks
//!   `MPOL_F_MOF` (`vma_policy_mof`), so it costs no faults and draws no task.
//! - **Scan period** (`update_task_scan_period`), after each full pass over the address
//!   space: with `r` = tenths of the pass's faults that were local, the period grows by
//!   `max(1, r − 7)` tenths when `r ≥ 7` and shrinks by `7 − r` tenths otherwise, within
//!   [`AutoNumaParams::scan_period_min_s`]–[`AutoNumaParams::scan_period_max_s`].
//! - **Preferred node** (`task_numa_placement`), after each pass: fault counts per node
//!   decay by half and add the pass's faults; the node with most is preferred (ties keep
//!   the current preference).
//! - **Tasks move toward their memory** (`task_numa_migrate`), at each scan of a process
//!   that runs on one node other than its preferred one: to idle CPUs there (an idle core
//!   first) when the move does not worsen the capacity-scaled load imbalance between the
//!   two nodes (`load_too_imbalanced`), or when the destination stays lightly loaded
//!   (at most a quarter of its CPUs busy, imbalance at most 2: `adjust_numa_imbalance`);
//!   otherwise it is swapped with the process on the preferred node whose swap improves
//!   the pair's fault locality most, by more than [`AutoNumaParams::small_imp`] in sum
//!   (`task_numa_compare`'s test; one of the two may lose a little if the other gains
//!   more). Only processes of the same size, each allowed on the other's CPUs, swap.
//!   Processes spread over several nodes (more threads than a node) are not moved; their
//!   pages follow the thread that touches them.
//!
//! On a machine with one node it does nothing (the kernel leaves it off there). It knows
//! nothing of LLC contention or memory bandwidth, and the load balancer's own
//! moves are not modelled (it is NUMA-aware enough not to undo these within the allowed
//! imbalance). The result is a [`Trajectory`]: the placement and memory of every process
//! over the horizon, the system time its hinting faults cost and the pages it copied. The
//! simulator scores it time-weighted (a converging trajectory, not only its end state);
//! as a [`Policy`] it returns the end state from where the processes run now.

use std::collections::BTreeMap;

use crate::alloc::{self, AllowedMask, Occupancy};
use crate::linux::Linux;
use crate::Policy;
use numasched_model::plan::{PageMove, Placement, Plan};
use numasched_model::snapshot::{Process, Snapshot};
use numasched_model::topology::{CpuId, NodeId, Topology};
use numasched_model::CpuSet;

#[derive(Debug, Clone, PartialEq)]
pub struct AutoNumaParams {
    /// `numa_balancing_scan_delay_ms`: first scan after the process starts, s.
    pub scan_delay_s: f64,
    /// `numa_balancing_scan_size_mb`: bytes unmapped per scan.
    pub scan_size_bytes: u64,
    /// `numa_balancing_scan_period_min_ms`, s.
    pub scan_period_min_s: f64,
    /// `numa_balancing_scan_period_max_ms`, s.
    pub scan_period_max_s: f64,
    /// How long the run lasts, s (the horizon `auto-migrate` amortises its copies over).
    pub horizon_s: f64,
    /// Whether pages may migrate (off: the suites where memory stays where it was put;
    /// memory under an explicit policy is `Process::policy_bytes`, not this).
    pub move_pages: bool,
    /// Base page size: one hinting fault per page (4 KiB; transparent huge pages would
    /// fault 512 times less often).
    pub page_bytes: u64,
    /// System time per hinting fault, µs: trap, PTE restore and fault statistics. An
    /// estimate (a minor fault costs about 0.5–1 µs on the CPUs of the presets).
    pub fault_us: f64,
    /// Passes over the address space during which a first fault migrates at once
    /// (`numa_scan_seq <= 4` in `should_numa_migrate_memory`).
    pub early_passes: u32,
    /// Copy rate of a migrating hinting fault, GB/s (the estimate `auto-migrate` uses).
    pub copy_gbps: f64,
    /// Smallest improvement of the pair's fault locality (sum of the two tasks'
    /// fractions) worth a swap (`SMALLIMP` = 30 of 1000).
    pub small_imp: f64,
}

impl Default for AutoNumaParams {
    fn default() -> Self {
        AutoNumaParams {
            scan_delay_s: 1.0,
            scan_size_bytes: 256 << 20,
            scan_period_min_s: 1.0,
            scan_period_max_s: 60.0,
            horizon_s: 300.0,
            move_pages: true,
            page_bytes: 4096,
            fault_us: 1.0,
            early_passes: 4,
            copy_gbps: 1.0,
            small_imp: 0.03,
        }
    }
}

/// One interval of the trajectory during which nothing moved.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub start_s: f64,
    pub end_s: f64,
    /// CPU ids per process, in snapshot order.
    pub cpus: Vec<CpuSet>,
    /// Memory per process and node id, bytes.
    pub memory: Vec<BTreeMap<NodeId, u64>>,
}

/// Pages migrated by a hinting fault.
#[derive(Debug, Clone, PartialEq)]
pub struct Copy {
    /// Process index in the snapshot.
    pub process: usize,
    pub from_node: NodeId,
    pub to_node: NodeId,
    pub bytes: u64,
    pub at_s: f64,
}

/// A task moved by `task_numa_migrate`.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskMove {
    pub process: usize,
    pub at_s: f64,
    pub from_node: NodeId,
    pub to_node: NodeId,
    /// The process it swapped with, if it was a swap.
    pub swapped_with: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Trajectory {
    /// Consecutive phases covering [0, horizon).
    pub phases: Vec<Phase>,
    /// Per process: system time spent in hinting faults over the horizon, s.
    pub fault_seconds: Vec<f64>,
    pub copies: Vec<Copy>,
    pub moves: Vec<TaskMove>,
}

/// A window of the address space: where its pages are and which node last faulted it.
#[derive(Debug, Clone)]
struct Window {
    node: usize,
    bytes: u64,
    last_fault: Option<usize>,
}

struct Task {
    windows: Vec<Window>,
    /// Bytes per node index that are never scanned: under an explicit memory policy
    /// (`Process::policy_bytes`), which `task_numa_work` skips (`vma_policy_mof`).
    fixed: Vec<u64>,
    cursor: usize,
    passes: u32,
    period: f64,
    next_scan: f64,
    /// Decayed faults per node index, and this pass's.
    faults: Vec<f64>,
    pass_faults: Vec<f64>,
    pass_local: f64,
    pass_remote: f64,
    preferred: Option<usize>,
    /// CPU indices.
    cpus: Vec<usize>,
    fault_seconds: f64,
}

impl Task {
    /// Process `p` on CPU ids `ids`, before its first scan: its memory cut into
    /// windows of at most a scan's size, in node order.
    fn new(topo: &Topology, p: &Process, ids: &[CpuId], params: &AutoNumaParams) -> Task {
        let n_nodes = topo.nodes().len();
        let mut windows = Vec::new();
        let mut fixed = vec![0; n_nodes];
        // Which of its pages the policy holds is not known per node: the same share
        // of each.
        let total = p.rss_bytes().max(1) as f64;
        let held = (p.policy_bytes as f64 / total).min(1.0);
        for (&node, &bytes) in &p.memory_bytes {
            let Some(ni) = topo.node_index(node) else {
                continue;
            };
            fixed[ni] = (bytes as f64 * held).round() as u64;
            let mut left = bytes - fixed[ni].min(bytes);
            while left > 0 {
                let b = left.min(params.scan_size_bytes.max(1));
                windows.push(Window {
                    node: ni,
                    bytes: b,
                    last_fault: None,
                });
                left -= b;
            }
        }
        Task {
            windows,
            fixed,
            cursor: 0,
            passes: 0,
            period: params.scan_period_min_s,
            next_scan: params.scan_delay_s,
            faults: vec![0.0; n_nodes],
            pass_faults: vec![0.0; n_nodes],
            pass_local: 0.0,
            pass_remote: 0.0,
            preferred: None,
            cpus: alloc::indices(topo, ids),
            fault_seconds: 0.0,
        }
    }
}

/// The placement (CPU ids) and memory (bytes per node id) of every task, as a phase
/// records them.
fn state_of(topo: &Topology, tasks: &[Task]) -> (Vec<CpuSet>, Vec<BTreeMap<NodeId, u64>>) {
    let cpus = tasks.iter().map(|t| alloc::ids(topo, &t.cpus)).collect();
    let memory = tasks
        .iter()
        .map(|t| {
            let mut m: BTreeMap<NodeId, u64> = BTreeMap::new();
            for w in &t.windows {
                *m.entry(topo.nodes()[w.node].id).or_default() += w.bytes;
            }
            for (ni, &b) in t.fixed.iter().enumerate().filter(|(_, b)| **b > 0) {
                *m.entry(topo.nodes()[ni].id).or_default() += b;
            }
            m
        })
        .collect();
    (cpus, memory)
}

/// The task that scans next: earliest time, then lowest index; tasks without memory
/// never scan.
fn next_scanner(tasks: &[Task]) -> Option<usize> {
    (0..tasks.len())
        .filter(|&i| !tasks[i].windows.is_empty())
        .min_by(|&a, &b| {
            tasks[a]
                .next_scan
                .total_cmp(&tasks[b].next_scan)
                .then(a.cmp(&b))
        })
}

/// Records the state at `now` (which may have changed) as the last phase: a new phase
/// from `now` to `horizon_s` when it differs, replacing the last one's state instead
/// when that one also starts at `now`.
fn record_phase(
    phases: &mut Vec<Phase>,
    topo: &Topology,
    tasks: &[Task],
    now: f64,
    horizon_s: f64,
) {
    let (cpus, memory) = state_of(topo, tasks);
    let last = phases.last_mut().expect("one phase at least");
    if last.cpus != cpus || last.memory != memory {
        if last.start_s == now {
            last.cpus = cpus;
            last.memory = memory;
        } else {
            last.end_s = now;
            phases.push(Phase {
                start_s: now,
                end_s: horizon_s,
                cpus,
                memory,
            });
        }
    }
}

/// `phases` with adjacent phases that ended up equal (a move and its undoing) joined.
fn merge_phases(phases: Vec<Phase>) -> Vec<Phase> {
    let mut merged: Vec<Phase> = Vec::with_capacity(phases.len());
    for ph in phases {
        match merged.last_mut() {
            Some(last) if last.cpus == ph.cpus && last.memory == ph.memory => {
                last.end_s = ph.end_s;
            }
            _ => merged.push(ph),
        }
    }
    merged
}

/// The balancing of `snapshot` from where its processes run now (`current_cpus`; a
/// process without is placed as [`Linux`] would) over `params.horizon_s`. Pure and
/// deterministic.
pub fn trajectory(snapshot: &Snapshot, params: &AutoNumaParams) -> Trajectory {
    let topo = &snapshot.topology;
    let start = Linux.plan(snapshot);
    let mut tasks: Vec<Task> = snapshot
        .processes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            // Where others' work now holds its CPU, the load balancer moves it off
            // (as Linux's placement of it does), before NUMA balancing starts.
            let held = p
                .current_cpus
                .iter()
                .any(|c| snapshot.others_taken.contains(*c));
            let ids = if p.current_cpus.is_empty() || held {
                &start.placements[i].cpus
            } else {
                &p.current_cpus
            };
            Task::new(topo, p, ids, params)
        })
        .collect();
    let (cpus, memory) = state_of(topo, &tasks);
    let mut phases = vec![Phase {
        start_s: 0.0,
        end_s: params.horizon_s,
        cpus,
        memory,
    }];
    let mut copies = Vec::new();
    let mut moves = Vec::new();
    let fault_s = params.fault_us * 1e-6 / params.page_bytes.max(1) as f64;
    // The kernel enables NUMA balancing only on machines with more than one node.
    if topo.nodes().len() < 2 {
        for t in &mut tasks {
            t.windows.clear();
        }
    }
    while let Some(i) = next_scanner(&tasks) {
        let now = tasks[i].next_scan;
        if now >= params.horizon_s {
            break;
        }
        let mut changed = scan(topo, snapshot, params, &mut tasks[i], i, now, &mut copies);
        tasks[i].fault_seconds += fault_s * tasks[i].windows[prev(&tasks[i])].bytes as f64;
        if tasks[i].cursor == 0 {
            end_pass(params, &mut tasks[i]);
        }
        if let Some(m) = numa_migrate(topo, snapshot, params, &mut tasks, i, now) {
            moves.push(m);
            changed = true;
        }
        let period = tasks[i].period;
        tasks[i].next_scan = now + period;
        if changed {
            record_phase(&mut phases, topo, &tasks, now, params.horizon_s);
        }
    }
    Trajectory {
        phases: merge_phases(phases),
        fault_seconds: tasks.iter().map(|t| t.fault_seconds).collect(),
        copies,
        moves,
    }
}

/// Index of the window scanned last.
fn prev(t: &Task) -> usize {
    (t.cursor + t.windows.len() - 1) % t.windows.len()
}

/// Node index of the thread that touches window `w` of a task on `cpus`: threads take
/// windows in turn (private data follows the thread that uses it).
fn toucher(topo: &Topology, cpus: &[usize], w: usize) -> Option<usize> {
    if cpus.is_empty() {
        return None;
    }
    Some(topo.cpus()[cpus[w % cpus.len()]].node)
}

/// One scan window: its hinting faults, and its migration if the two-touch filter
/// lets it. Returns whether memory moved.
fn scan(
    topo: &Topology,
    snapshot: &Snapshot,
    params: &AutoNumaParams,
    t: &mut Task,
    i: usize,
    now: f64,
    copies: &mut Vec<Copy>,
) -> bool {
    let k = t.cursor;
    t.cursor = (t.cursor + 1) % t.windows.len();
    let Some(target) = toucher(topo, &t.cpus, k) else {
        return false;
    };
    let early = t.passes < params.early_passes;
    let p = &snapshot.processes[i];
    let w = &mut t.windows[k];
    let mut moved = false;
    if params.move_pages
        && w.node != target
        && p.may_use_memory_of(topo.nodes()[target].id)
        && (w.last_fault == Some(target) || (early && w.last_fault.is_none()))
    {
        copies.push(Copy {
            process: i,
            from_node: topo.nodes()[w.node].id,
            to_node: topo.nodes()[target].id,
            bytes: w.bytes,
            at_s: now,
        });
        w.node = target;
        moved = true;
    }
    w.last_fault = Some(target);
    let pages = w.bytes as f64 / params.page_bytes.max(1) as f64;
    t.pass_faults[w.node] += pages;
    if w.node == target {
        t.pass_local += pages;
    } else {
        t.pass_remote += pages;
    }
    moved
}

/// After a full pass: adapt the scan period and choose the preferred node.
fn end_pass(params: &AutoNumaParams, t: &mut Task) {
    t.passes += 1;
    let total = t.pass_local + t.pass_remote;
    if total > 0.0 {
        let r = (10.0 * t.pass_local / total).floor() as i64;
        let slot = t.period / 10.0;
        let diff = if r >= 7 {
            (r - 7).max(1) as f64 * slot
        } else {
            -((7 - r) as f64) * slot
        };
        t.period = (t.period + diff).clamp(params.scan_period_min_s, params.scan_period_max_s);
    }
    for (f, new) in t.faults.iter_mut().zip(t.pass_faults.iter_mut()) {
        *f = *f / 2.0 + *new;
        *new = 0.0;
    }
    t.pass_local = 0.0;
    t.pass_remote = 0.0;
    let best =
        (0..t.faults.len()).max_by(|&a, &b| t.faults[a].total_cmp(&t.faults[b]).then(b.cmp(&a)));
    if let Some(b) = best {
        let keep = t.preferred.is_some_and(|p| t.faults[p] >= t.faults[b]);
        if t.faults[b] > 0.0 && !keep {
            t.preferred = Some(b);
        }
    }
}

/// The node a task runs on, if it runs on exactly one.
fn single_node(topo: &Topology, cpus: &[usize]) -> Option<usize> {
    let first = topo.cpus()[*cpus.first()?].node;
    cpus.iter()
        .all(|&c| topo.cpus()[c].node == first)
        .then_some(first)
}

/// Fraction of a task's (decayed) faults on node `n`.
fn weight(t: &Task, n: usize) -> f64 {
    let total: f64 = t.faults.iter().sum();
    if total > 0.0 {
        t.faults[n] / total
    } else {
        0.0
    }
}

/// `task_numa_migrate`: task `i` toward its preferred node, to idle CPUs within the
/// allowed imbalance, or by a swap that raises the pair's locality.
fn numa_migrate(
    topo: &Topology,
    snapshot: &Snapshot,
    params: &AutoNumaParams,
    tasks: &mut [Task],
    i: usize,
    now: f64,
) -> Option<TaskMove> {
    let dst = tasks[i].preferred?;
    let src = single_node(topo, &tasks[i].cpus)?;
    if src == dst || topo.nodes()[dst].cpus.is_empty() {
        return None;
    }
    let p = &snapshot.processes[i];
    let slots = tasks[i].cpus.len();
    let mask = AllowedMask::of(topo, p);
    let mut occ = Occupancy::for_snapshot(snapshot);
    let mut running = vec![0.0; topo.nodes().len()];
    for (j, t) in tasks.iter().enumerate() {
        occ.add(&t.cpus, snapshot.processes[j].cpu_demand);
        for &c in &t.cpus {
            running[topo.cpus()[c].node] += 1.0;
        }
    }
    let dst_cpus: Vec<usize> = mask.filter(topo.node_cpu_indices(dst)).collect();
    let node_cap = |n: usize| topo.node_cpu_indices(n).len() as f64;
    let s = slots as f64;
    if occ.free_count(dst_cpus.iter().copied()) >= slots {
        let (sl, dl) = (running[src], running[dst]);
        let (sc, dc) = (node_cap(src), node_cap(dst));
        let old_imb = (dl * sc - sl * dc).abs();
        let new_imb = ((dl + s) * sc - (sl - s) * dc).abs();
        let imb_numa_nr = (dc / 4.0).floor().max(1.0);
        let light = dl + s <= imb_numa_nr && (dl + s) - (sl - s) <= 2.0;
        if new_imb <= old_imb || light {
            let mut rest = occ.clone();
            rest.remove(&tasks[i].cpus, p.cpu_demand);
            let cpus = pick_in_node(&rest, topo, &dst_cpus, slots);
            if cpus.len() == slots {
                tasks[i].cpus = cpus;
                return Some(TaskMove {
                    process: i,
                    at_s: now,
                    from_node: topo.nodes()[src].id,
                    to_node: topo.nodes()[dst].id,
                    swapped_with: None,
                });
            }
        }
    }
    // A swap with a task on the preferred node.
    let mut best: Option<(usize, f64)> = None;
    for (j, q) in tasks.iter().enumerate() {
        if j == i || q.cpus.len() != slots || single_node(topo, &q.cpus) != Some(dst) {
            continue;
        }
        let qmask = AllowedMask::of(topo, &snapshot.processes[j]);
        if !tasks[i].cpus.iter().all(|&c| qmask.contains(c))
            || !q.cpus.iter().all(|&c| mask.contains(c))
        {
            continue;
        }
        let imp = weight(&tasks[i], dst) - weight(&tasks[i], src) + weight(q, src) - weight(q, dst);
        if imp > params.small_imp && best.is_none_or(|(_, b)| imp > b + 1e-12) {
            best = Some((j, imp));
        }
    }
    let (j, _) = best?;
    let mine = std::mem::take(&mut tasks[i].cpus);
    tasks[i].cpus = std::mem::replace(&mut tasks[j].cpus, mine);
    Some(TaskMove {
        process: i,
        at_s: now,
        from_node: topo.nodes()[src].id,
        to_node: topo.nodes()[dst].id,
        swapped_with: Some(j),
    })
}

/// `slots` CPUs of a node: the LLC with most idle cores (then free CPUs, then lowest
/// index), idle cores first within it; the whole node when no LLC has room.
fn pick_in_node(occ: &Occupancy, topo: &Topology, cands: &[usize], slots: usize) -> Vec<usize> {
    let mut llcs: Vec<usize> = cands.iter().map(|&c| topo.cpus()[c].llc).collect();
    llcs.dedup();
    llcs.sort_unstable();
    llcs.dedup();
    let in_llc = |l: usize| -> Vec<usize> {
        cands
            .iter()
            .copied()
            .filter(|&c| topo.cpus()[c].llc == l)
            .collect()
    };
    let best = llcs
        .iter()
        .copied()
        .filter(|&l| occ.free_count(in_llc(l)) >= slots)
        .max_by(|&a, &b| {
            let (ca, cb) = (in_llc(a), in_llc(b));
            occ.idle_cores(ca.iter().copied())
                .cmp(&occ.idle_cores(cb.iter().copied()))
                .then(occ.free_count(ca).cmp(&occ.free_count(cb)))
                .then(b.cmp(&a))
        });
    match best {
        Some(l) => occ.pick(&in_llc(l), slots),
        None => occ.pick(cands, slots),
    }
}

/// The kernel's balancing as a policy: the end state of [`trajectory`] from where the
/// processes run now, with the pages it migrated as page moves.
#[derive(Debug, Clone, Default)]
pub struct AutoNuma {
    pub params: AutoNumaParams,
}

impl Policy for AutoNuma {
    fn name(&self) -> &str {
        "autonuma"
    }

    fn uses_current_placement(&self) -> bool {
        true
    }

    fn plan(&self, snapshot: &Snapshot) -> Plan {
        let topo = &snapshot.topology;
        let traj = trajectory(snapshot, &self.params);
        let Some(last) = traj.phases.last() else {
            return Plan::new(self.name(), Vec::new());
        };
        let mut placements = Vec::with_capacity(snapshot.processes.len());
        let mut page_moves = Vec::new();
        for (i, p) in snapshot.processes.iter().enumerate() {
            let moved: Vec<&TaskMove> = traj
                .moves
                .iter()
                .filter(|m| m.process == i || m.swapped_with == Some(i))
                .collect();
            let copied: u64 = traj
                .copies
                .iter()
                .filter(|c| c.process == i)
                .map(|c| c.bytes)
                .sum();
            let mut why = match moved.last() {
                Some(m) if m.process == i => format!(
                    "kernel NUMA balancing: moved toward its memory, node {} to {} at {:.0} s{}",
                    m.from_node,
                    m.to_node,
                    m.at_s,
                    if m.swapped_with.is_some() {
                        " (swap)"
                    } else {
                        ""
                    }
                ),
                Some(m) => format!(
                    "kernel NUMA balancing: swapped out of node {} at {:.0} s",
                    m.to_node, m.at_s
                ),
                None => "kernel NUMA balancing: left where the load balancer put it".into(),
            };
            if copied > 0 {
                why.push_str(&format!(
                    "; {:.2} GiB of pages followed it",
                    copied as f64 / (1u64 << 30) as f64
                ));
            }
            placements.push(Placement::new(topo, p.pid, last.cpus[i].clone(), why));
            // Net page movement per node: what left each node, sent where it arrived.
            let mut delta: BTreeMap<NodeId, i64> = BTreeMap::new();
            for (&n, &b) in &p.memory_bytes {
                *delta.entry(n).or_default() -= b as i64;
            }
            for (&n, &b) in &last.memory[i] {
                *delta.entry(n).or_default() += b as i64;
            }
            let mut gains: Vec<(NodeId, i64)> = delta
                .iter()
                .filter(|(_, &d)| d > 0)
                .map(|(&n, &d)| (n, d))
                .collect();
            for (&from, &d) in delta.iter().filter(|(_, &d)| d < 0) {
                let mut need = -d;
                for g in gains.iter_mut().filter(|g| g.1 > 0) {
                    let b = need.min(g.1);
                    if b == 0 {
                        break;
                    }
                    page_moves.push(PageMove {
                        pid: p.pid,
                        from_node: from,
                        to_node: g.0,
                        bytes: b as u64,
                        reason: "kernel NUMA balancing: pages followed the task".into(),
                    });
                    g.1 -= b;
                    need -= b;
                }
            }
        }
        let mut plan = Plan::new(self.name(), placements);
        plan.page_moves = page_moves;
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::testkit::nehalem_workload;

    fn placed(map: &str, cpus: &[u32]) -> Snapshot {
        let programs = vec!["mcf"; map.len()];
        let mut s = nehalem_workload(&programs, map);
        for (p, &c) in s.processes.iter_mut().zip(cpus) {
            p.current_cpus = vec![c].into();
        }
        s
    }

    fn node_of(s: &Snapshot, cpus: &[CpuId]) -> NodeId {
        s.topology.nodes()[s.topology.cpu(cpus[0]).unwrap().node].id
    }

    #[test]
    fn pages_follow_at_one_window_per_scan_period_after_the_delay() {
        // One 1 GiB process on node 1 with its memory on node 0: nothing before 1 s,
        // then 256 MiB per period (early passes migrate on the first fault).
        let s = placed("0", &[4]);
        let t = trajectory(&s, &AutoNumaParams::default());
        assert_eq!(t.phases[0].start_s, 0.0);
        assert_eq!(t.phases[0].end_s, 1.0);
        let times: Vec<f64> = t.copies.iter().map(|c| c.at_s).collect();
        assert_eq!(times, vec![1.0, 2.0, 3.0, 4.0]);
        assert!(t
            .copies
            .iter()
            .all(|c| c.bytes == 256 << 20 && c.to_node == 1));
        let last = t.phases.last().unwrap();
        assert_eq!(last.memory[0].get(&1), Some(&(1 << 30)));
        assert_eq!(last.memory[0].get(&0).copied().unwrap_or(0), 0);
        // It never moved: the pages came to it.
        assert!(t.moves.is_empty());
        assert_eq!(last.cpus[0], vec![4]);
    }

    /// Memory under an explicit policy (`numactl --membind`) is never scanned: no
    /// hinting faults, no pages copied, no task drawn toward it (Hyser's `Mem: 0 CPU:
    /// 1` runs, docs/fidelity.md row 17). Half of it held: half the faults, and only
    /// the other half follows.
    #[test]
    fn memory_under_an_explicit_policy_is_not_scanned() {
        let mut s = placed("0", &[4]);
        let all = s.processes[0].rss_bytes();
        s.processes[0].policy_bytes = all;
        let t = trajectory(&s, &AutoNumaParams::default());
        assert_eq!(t.fault_seconds, vec![0.0]);
        assert!(t.copies.is_empty() && t.moves.is_empty());
        assert_eq!(t.phases.len(), 1);
        assert_eq!(t.phases[0].memory[0].get(&0), Some(&all));
        s.processes[0].policy_bytes = all / 2;
        let t = trajectory(&s, &AutoNumaParams::default());
        let moved: u64 = t.copies.iter().map(|c| c.bytes).sum();
        assert_eq!(moved, all / 2);
        let last = t.phases.last().unwrap();
        assert_eq!(last.memory[0].get(&0), Some(&(all / 2)));
        assert_eq!(last.memory[0].get(&1), Some(&(all / 2)));
    }

    #[test]
    fn scan_period_backs_off_once_faults_are_local() {
        let s = placed("1", &[4]);
        let t = trajectory(&s, &AutoNumaParams::default());
        // Already local: 4 faults' worth of 1 GiB per pass at first, fewer later.
        // 300 s at the minimum period would be 299 windows = 74.75 GiB of faults.
        let fastest = 299.0 * (256u64 << 20) as f64 / 4096.0 * 1e-6;
        assert!(
            t.fault_seconds[0] > 0.0 && t.fault_seconds[0] < fastest / 4.0,
            "{:?}",
            t.fault_seconds
        );
        assert!(t.copies.is_empty());
        assert_eq!(t.phases.len(), 1);
    }

    #[test]
    fn bound_memory_makes_tasks_swap_toward_it() {
        // WL-like: two processes homed on node 1 run on node 0 and two homed on node 0
        // run on node 1; memory may not move, so they swap.
        let s = placed("1100", &[0, 1, 4, 5]);
        let params = AutoNumaParams {
            move_pages: false,
            ..Default::default()
        };
        let t = trajectory(&s, &params);
        assert!(t.copies.is_empty());
        let last = t.phases.last().unwrap();
        for (i, p) in s.processes.iter().enumerate() {
            assert_eq!(
                Some(node_of(&s, &last.cpus[i])),
                p.home_node(),
                "{i}: {last:?}"
            );
        }
        assert!(t.moves.iter().all(|m| m.swapped_with.is_some()));
        // The swaps come after the first full pass (4 windows of 256 MiB from 1 s).
        assert!(t.moves.iter().all(|m| m.at_s >= 4.0));
    }

    #[test]
    fn an_idle_cpu_on_the_memory_node_draws_a_task_within_the_allowed_imbalance() {
        // Three processes, all memory on node 0, one of them on node 1: node 0 has two
        // idle CPUs, but 3 against 0 is a worse imbalance than 2 against 1 and node 0
        // would not be lightly loaded (3 busy of 4), so it stays; no swap helps either.
        let s = placed("000", &[0, 1, 4]);
        let params = AutoNumaParams {
            move_pages: false,
            ..Default::default()
        };
        let t = trajectory(&s, &params);
        assert!(t.moves.is_empty(), "{:?}", t.moves);
        // A single process on node 1 with its memory on node 0: 1 against 0 is no worse
        // than 0 against 1, so it moves to an idle CPU there.
        let s = placed("0", &[4]);
        let t = trajectory(&s, &params);
        assert_eq!(t.moves.len(), 1);
        assert_eq!(node_of(&s, &t.phases.last().unwrap().cpus[0]), 0);
    }

    #[test]
    fn one_node_machines_are_left_alone() {
        let mut s = placed("0", &[0]);
        s.topology = numasched_model::topology::machine("1n:2l:2c:1t").unwrap();
        let t = trajectory(&s, &AutoNumaParams::default());
        assert_eq!(t.phases.len(), 1);
        assert!(t.copies.is_empty() && t.moves.is_empty());
        assert_eq!(t.fault_seconds, vec![0.0]);
    }

    #[test]
    fn it_is_deterministic_and_the_plan_is_the_end_state() {
        let s = placed("1100", &[0, 1, 4, 5]);
        let a = trajectory(&s, &AutoNumaParams::default());
        let b = trajectory(&s, &AutoNumaParams::default());
        assert_eq!(a, b);
        let plan = AutoNuma::default().plan(&s);
        let last = a.phases.last().unwrap();
        for (pl, cpus) in plan.placements.iter().zip(&last.cpus) {
            assert_eq!(&pl.cpus, cpus);
            assert!(pl.reason.contains("kernel NUMA balancing"), "{}", pl.reason);
        }
        // Phases tile the horizon.
        assert_eq!(a.phases.last().unwrap().end_s, 300.0);
        for w in a.phases.windows(2) {
            assert_eq!(w[0].end_s, w[1].start_s);
        }
    }
}
