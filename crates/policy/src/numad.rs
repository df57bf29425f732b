//! numad's placement (Bill Gray, Red Hat; numad 0.5, git 20150602), as a baseline: the
//! daemon operators run today, which bin-packs free CPU and free memory and knows nothing
//! of caches. Written from numad's public source (`pick_numa_nodes`, `manage_loads`).
//!
//! Algorithm, per scan:
//! 1. Candidates are processes using more than 300 MiB and more than half a CPU. Not yet
//!    bound ones go first, then bound ones, each biggest first by CPUs × memory (numad
//!    orders bound ones by bind time within 20% bins; a snapshot has no bind times).
//! 2. A candidate asks for its memory and CPU divided by the target utilisation (85%),
//!    CPUs capped at its thread count.
//! 3. Per node: spare memory = node memory − memory of every snapshot process there;
//!    spare CPU = node CPUs − demand of the processes currently running there. The
//!    candidate's own memory is credited back to its nodes, ×17/16 when unbound (with its
//!    CPU in proportion to that memory) and ×5/4 when bound (its bound nodes then get the
//!    average spare CPU of those nodes plus its own demand), so that moving is never
//!    free and a bound process has to find a clearly better place to move.
//! 4. Node score = (needed memory × 10 + spare memory × 4) × (needed CPU × 6 + spare
//!    CPU × 1), where "needed" is the part of the request the node can meet and "spare"
//!    what is left over.
//! 5. The minimum number of nodes is the larger of memory / node memory and (CPU − flex)
//!    / node CPUs (flex = half the utilisation margin of one node). For each node, the
//!    scores of that many nodes nearest to it are summed, divided by distance²; the
//!    best sum picks the best node. Nodes are then added in distance order from it
//!    (ties: higher score) until memory and CPU are covered.
//! 6. A process already bound to exactly those nodes with ≥ 90% of its memory there is
//!    left alone; otherwise it is bound to every CPU of the chosen nodes (within its pin)
//!    and its memory elsewhere is moved there. At most one process is moved per scan.
//!
//! "Bound" here: its current CPUs (or, if it has none, its pin) are exactly the CPUs of
//! a set of nodes smaller than all the nodes with CPUs, which is what a numad bind
//! leaves behind (numad itself reads `Mems_allowed_list`, which a snapshot lacks).
//! Differences from numad, all for lack of data in a snapshot: no virtual size (numad
//! asks for it instead of RSS for processes bigger than a node), no interleave
//! detection, no 5-minute re-evaluation delay, SMT siblings count as whole CPUs (numad
//! counts them as 20%), memory-only nodes are never chosen, since a plan binds CPUs.

use crate::alloc;
use crate::{PageMove, Placement, Plan, Policy, Process, Snapshot};
use numasched_model::plural::count;
use numasched_model::topology::Topology;

const MIB: f64 = (1u64 << 20) as f64;
/// numad keeps this much memory (MiB) free on a node it allocates from.
const MBS_MARGIN: f64 = 100.0;
/// numad's minimum spare CPU on a node (1/100 CPU), so a full node still scores.
const MIN_CPU_FREE: f64 = 0.01;

#[derive(Debug, Clone, PartialEq)]
pub struct NumadParams {
    /// Processes must use more than this many CPUs to be managed (numad: 50%).
    pub cpu_threshold: f64,
    /// …and more than this much resident memory (numad: 300 MB).
    pub memory_threshold_bytes: u64,
    /// Fraction of a node's resources a placement aims to use (numad `-u`: 85%).
    pub target_utilization: f64,
    /// Fraction of memory that must already be on the target nodes for a bound process
    /// to be left alone (numad `-m`: 90%).
    pub target_memlocality: f64,
    /// Moves per scan (numad: 1).
    pub max_moves_per_scan: usize,
    /// Move the memory with the process, as numad's bind does.
    pub migrate_memory: bool,
}

impl Default for NumadParams {
    fn default() -> Self {
        NumadParams {
            cpu_threshold: 0.5,
            memory_threshold_bytes: 300 << 20,
            target_utilization: 0.85,
            target_memlocality: 0.90,
            max_moves_per_scan: 1,
            migrate_memory: true,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Numad {
    pub params: NumadParams,
}

/// Spare resources per node index, in MiB and CPUs.
#[derive(Debug, Clone)]
pub struct NodeState {
    pub mem_total: Vec<f64>,
    pub mem_free: Vec<f64>,
    pub cpu_total: Vec<f64>,
    pub cpu_free: Vec<f64>,
}

impl NodeState {
    pub fn new(snapshot: &Snapshot) -> NodeState {
        let topo = &snapshot.topology;
        let mem_total: Vec<f64> = topo
            .nodes()
            .iter()
            .map(|x| x.memory_bytes as f64 / MIB)
            .collect();
        let cpu_total: Vec<f64> = topo.nodes().iter().map(|x| x.cpus.len() as f64).collect();
        let mut st = NodeState {
            mem_free: mem_total.clone(),
            cpu_free: cpu_total.clone(),
            mem_total,
            cpu_total,
        };
        for p in &snapshot.processes {
            for (ni, mb) in process_mb(topo, p).into_iter().enumerate() {
                st.mem_free[ni] -= mb;
            }
            for (ni, cpu) in cpu_by_node(topo, p).into_iter().enumerate() {
                st.cpu_free[ni] -= cpu;
            }
        }
        // numad reads each node's idle time, so others' work is no spare CPU to it.
        for c in snapshot.others_taken.iter().filter_map(|&c| topo.cpu(c)) {
            st.cpu_free[c.node] -= 1.0;
        }
        for v in st.mem_free.iter_mut().chain(st.cpu_free.iter_mut()) {
            *v = v.max(0.0);
        }
        st
    }
}

/// A process's memory per node index, MiB.
fn process_mb(topo: &Topology, p: &Process) -> Vec<f64> {
    let mut v = vec![0.0; topo.nodes().len()];
    for (&id, &b) in &p.memory_bytes {
        if let Some(ni) = topo.node_index(id) {
            v[ni] += b as f64 / MIB;
        }
    }
    v
}

/// A process's CPU demand per node index, spread evenly over its current CPUs.
fn cpu_by_node(topo: &Topology, p: &Process) -> Vec<f64> {
    let mut v = vec![0.0; topo.nodes().len()];
    let cpus: Vec<usize> = p
        .current_cpus
        .iter()
        .filter_map(|&c| topo.cpu(c))
        .map(|c| c.node)
        .collect();
    if !cpus.is_empty() && p.cpu_demand.is_finite() {
        let share = p.cpu_demand / cpus.len() as f64;
        for n in cpus {
            v[n] += share;
        }
    }
    v
}

/// numad's `combined_value_of_weighted_resources`.
pub fn score(mb_request: f64, cpu_request: f64, mem_free: f64, cpu_free: f64) -> f64 {
    let (needed_mem, excess_mem) = if mem_free > mb_request {
        (mb_request, mem_free - mb_request)
    } else {
        (mem_free, 0.0)
    };
    let (needed_cpu, excess_cpu) = if cpu_free > cpu_request {
        (cpu_request, cpu_free - cpu_request)
    } else {
        (cpu_free, 0.0)
    };
    (needed_mem * 10.0 + excess_mem * 4.0) * (needed_cpu * 6.0 + excess_cpu)
}

/// The nodes a process is bound to, as node indices (see the module doc).
pub fn bound_nodes(topo: &Topology, p: &Process) -> Option<Vec<usize>> {
    let ids: &[u32] = if !p.current_cpus.is_empty() {
        &p.current_cpus
    } else {
        p.allowed_cpus.as_deref()?
    };
    let mut cpus: Vec<u32> = ids
        .iter()
        .copied()
        .filter(|&c| topo.cpu(c).is_some())
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    let mut nodes: Vec<usize> = cpus
        .iter()
        .filter_map(|&c| topo.cpu(c))
        .map(|c| c.node)
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    let mut union: Vec<u32> = nodes
        .iter()
        .flat_map(|&n| topo.nodes()[n].cpus.iter().copied())
        .collect();
    union.sort_unstable();
    let cpu_nodes = topo.cpu_nodes().count();
    (!nodes.is_empty() && union == cpus && nodes.len() < cpu_nodes).then_some(nodes)
}

/// What numad decided for one process.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Score of each usable node (index, score) after the credit-back.
    pub scores: Vec<(usize, f64)>,
    pub best: usize,
    /// Chosen node indices, in the order they were added.
    pub target: Vec<usize>,
    pub mb_request: f64,
    pub cpu_request: f64,
}

/// A process's request (step 2), with what the credit-back needs to know of it.
struct Request {
    /// Its memory per node index, MiB, and their sum.
    pmb: Vec<f64>,
    rss: f64,
    /// Its CPU demand, finite and not negative.
    demand: f64,
    /// Memory asked for, MiB: its RSS over the target utilisation (at most 1).
    mbs: f64,
    /// CPUs asked for: its demand over the target utilisation, at most one per thread.
    cpus: f64,
}

/// The nodes as one process sees them (steps 3 and 4), per node index: spare memory
/// and CPU with its own credited back, and the score of each usable node (0 for the
/// others).
struct Spare {
    mem: Vec<f64>,
    cpu: Vec<f64>,
    score: Vec<f64>,
}

impl Spare {
    /// Credits `req`'s own resources back to `nodes`, then scores them.
    fn new(topo: &Topology, st: &NodeState, p: &Process, req: &Request, nodes: &[usize]) -> Spare {
        let bound = bound_nodes(topo, p);
        let mut mem_free = st.mem_free.clone();
        let mut cpu_free = st.cpu_free.clone();
        let bound_avg = bound.as_ref().map(|b| {
            (req.demand + b.iter().map(|&n| st.cpu_free[n]).sum::<f64>()) / b.len() as f64
        });
        for &n in nodes {
            match (&bound, bound_avg) {
                (Some(b), Some(avg)) => {
                    mem_free[n] += req.pmb[n] * 5.0 / 4.0;
                    if b.contains(&n) {
                        cpu_free[n] = avg;
                    }
                }
                _ => {
                    mem_free[n] += req.pmb[n] * 17.0 / 16.0;
                    if req.rss > 0.0 {
                        cpu_free[n] += req.demand * req.pmb[n] / req.rss;
                    }
                }
            }
            mem_free[n] = mem_free[n].min(st.mem_total[n]);
            cpu_free[n] = cpu_free[n].min(st.cpu_total[n]).max(MIN_CPU_FREE);
        }
        let mut mag = vec![0.0; topo.nodes().len()];
        for &n in nodes {
            mag[n] = score(req.mbs, req.cpus, mem_free[n], cpu_free[n]);
        }
        Spare {
            mem: mem_free,
            cpu: cpu_free,
            score: mag,
        }
    }

    /// `nodes` ordered by distance from `from`, ties to the higher score.
    fn by_distance(&self, topo: &Topology, nodes: &[usize], from: usize) -> Vec<usize> {
        let mut v = nodes.to_vec();
        v.sort_by(|&a, &b| {
            topo.distance(from, a)
                .cmp(&topo.distance(from, b))
                .then(self.score[b].total_cmp(&self.score[a]))
                .then(a.cmp(&b))
        });
        v
    }

    /// The best node (step 5): the one whose `min_req` nearest nodes have the highest
    /// sum of scores over distance²; the first such in `nodes` on ties.
    fn best_node(&self, topo: &Topology, nodes: &[usize], min_req: usize) -> usize {
        let mut best = nodes[0];
        let mut best_total = f64::NEG_INFINITY;
        for &ix in nodes {
            let total: f64 = self
                .by_distance(topo, nodes, ix)
                .iter()
                .take(min_req)
                .map(|&j| {
                    let d = topo.distance(ix, j).max(1) as f64;
                    self.score[j] / (d * d)
                })
                .sum();
            if total > best_total {
                best_total = total;
                best = ix;
            }
        }
        best
    }

    /// Takes nodes in `order` until at least `min_req` are taken and the request is
    /// covered: its memory with [`MBS_MARGIN`] left on each node, its CPUs up to
    /// `flex` (or entirely when `assume` says there are CPUs enough).
    fn fill(
        &self,
        order: Vec<usize>,
        mut min_req: usize,
        req: &Request,
        flex: f64,
        assume: bool,
    ) -> Vec<usize> {
        let (mut mbs, mut cpus) = (req.mbs, req.cpus);
        let mut target = Vec::new();
        for n in order {
            if !(min_req > 0 || mbs > 0.0 || (cpus > flex && !assume)) {
                break;
            }
            target.push(n);
            min_req = min_req.saturating_sub(1);
            if self.mem[n] >= mbs + MBS_MARGIN {
                mbs = 0.0;
            } else {
                mbs -= (self.mem[n] - MBS_MARGIN).max(0.0);
            }
            if self.cpu[n] >= cpus {
                cpus = 0.0;
            } else {
                cpus -= self.cpu[n];
            }
        }
        target
    }
}

/// The node indices of `cpus` (CPU indices), sorted, each once.
fn nodes_of(topo: &Topology, cpus: &[usize]) -> Vec<usize> {
    let mut nodes: Vec<usize> = cpus.iter().map(|&c| topo.cpus()[c].node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

/// The fewest nodes that can hold `req` (step 5), between 1 and all of `nodes`, and the
/// CPU flex: half the utilisation margin of the biggest node.
fn min_nodes(st: &NodeState, nodes: &[usize], req: &Request, util: f64) -> (usize, f64) {
    let node_mem = nodes.iter().map(|&n| st.mem_total[n]).fold(0.0, f64::max);
    let node_cpus = nodes.iter().map(|&n| st.cpu_total[n]).fold(0.0, f64::max);
    let flex = (1.0 - util).max(0.0) * node_cpus / 2.0;
    let need = |amount: f64, per: f64| {
        if amount <= 0.0 {
            0
        } else if per <= 0.0 {
            nodes.len()
        } else {
            (amount / per).ceil().min(nodes.len() as f64) as usize
        }
    };
    let min_req = need(req.mbs, node_mem)
        .max(need(req.cpus - flex, node_cpus))
        .clamp(1, nodes.len());
    (min_req, flex)
}

impl Numad {
    /// `pick_numa_nodes` for one process against the current node state; `None` when the
    /// process may use no node with CPUs.
    pub fn evaluate(
        &self,
        topo: &Topology,
        st: &NodeState,
        p: &Process,
        assume_enough_cpus: bool,
    ) -> Option<Evaluation> {
        let nodes = nodes_of(topo, &alloc::allowed(topo, p));
        if nodes.is_empty() {
            return None;
        }
        let util = self.utilisation();
        let req = request(topo, p, util);
        let spare = Spare::new(topo, st, p, &req, &nodes);
        let sum_cpu_free: f64 = nodes.iter().map(|&n| spare.cpu[n]).sum();
        let assume = assume_enough_cpus || req.cpus > sum_cpu_free;
        let (min_req, flex) = min_nodes(st, &nodes, &req, util);
        let best = spare.best_node(topo, &nodes, min_req);
        let target = spare.fill(
            spare.by_distance(topo, &nodes, best),
            min_req,
            &req,
            flex,
            assume,
        );
        Some(Evaluation {
            scores: nodes.iter().map(|&n| (n, spare.score[n])).collect(),
            best,
            target,
            mb_request: req.mbs,
            cpu_request: req.cpus,
        })
    }

    /// The target utilisation, or 1 when the parameter is not a positive number.
    fn utilisation(&self) -> f64 {
        if self.params.target_utilization.is_finite() && self.params.target_utilization > 0.0 {
            self.params.target_utilization
        } else {
            1.0
        }
    }

    fn is_candidate(&self, p: &Process) -> bool {
        p.rss_bytes() > self.params.memory_threshold_bytes
            && p.cpu_demand > self.params.cpu_threshold
    }

    /// The candidates (step 1) in numad's order: not yet bound ones first, then bound
    /// ones, each biggest first. Every other process gets its placement in `out`.
    fn candidates(
        &self,
        topo: &Topology,
        procs: &[Process],
        out: &mut [Option<Placement>],
    ) -> Vec<usize> {
        let mut candidates = Vec::new();
        for (i, p) in procs.iter().enumerate() {
            if self.is_candidate(p) {
                candidates.push(i);
            } else {
                out[i] = Some(Placement::unchanged(
                    p.pid,
                    format!(
                        "numad leaves it alone: it manages only processes above {:.0} MiB and {:.2} CPUs; this one uses {:.0} MiB and {:.2} CPUs",
                        self.params.memory_threshold_bytes as f64 / MIB,
                        self.params.cpu_threshold,
                        p.rss_bytes() as f64 / MIB,
                        p.cpu_demand
                    ),
                ));
            }
        }
        let magnitude = |i: usize| procs[i].cpu_demand * procs[i].rss_bytes() as f64;
        let bound: Vec<bool> = procs
            .iter()
            .map(|p| bound_nodes(topo, p).is_some())
            .collect();
        candidates.sort_by(|&a, &b| {
            bound[a]
                .cmp(&bound[b])
                .then(magnitude(b).total_cmp(&magnitude(a)))
                .then(a.cmp(&b))
        });
        candidates
    }

    /// Steps 2–6 for one candidate: its placement, and whether it was moved. A move is
    /// committed to `st` (and its page moves added to `page_moves`) so that the next
    /// candidate sees the machine with it in place.
    fn place(
        &self,
        topo: &Topology,
        st: &mut NodeState,
        p: &Process,
        assume_enough: bool,
        page_moves: &mut Vec<PageMove>,
    ) -> (Placement, bool) {
        let Some(ev) = self.evaluate(topo, st, p, assume_enough) else {
            return (
                Placement::unchanged(p.pid, "no node with CPUs inside its pin".into()),
                false,
            );
        };
        let mut target = ev.target.clone();
        target.sort_unstable();
        let (local, nonlocal) = locality(topo, p, &target);
        let need = format!(
            "asks {:.2} CPUs and {:.0} MiB",
            ev.cpu_request, ev.mb_request
        );
        let bound_to = bound_nodes(topo, p);
        if bound_to.as_ref() == Some(&target) && local >= self.params.target_memlocality - 1e-12 {
            let reason = format!(
                "numad: {need}; already bound to its best nodes {} with {:.0}% of its memory there",
                node_list(topo, &target),
                local * 100.0
            );
            return (Placement::unchanged(p.pid, reason), false);
        }
        let allowed = alloc::allowed(topo, p);
        let cpus: Vec<usize> = allowed
            .iter()
            .copied()
            .filter(|&c| target.contains(&topo.cpus()[c].node))
            .collect();
        if bound_to.is_none() && target == nodes_of(topo, &allowed) && nonlocal <= 0.0 {
            let reason = format!("numad: {need}; it needs every node it may use, so no bind");
            return (Placement::unchanged(p.pid, reason), false);
        }
        move_cpu_demand(topo, st, p, &target);
        let moved = if self.params.migrate_memory {
            move_memory(topo, st, p, &ev.target, &target, page_moves)
        } else {
            0.0
        };
        let best_score = ev
            .scores
            .iter()
            .find(|(n, _)| *n == ev.best)
            .map_or(0.0, |s| s.1);
        let reason = format!(
            "numad: {need}; best node {} (score {:.3e}); bound to nodes {}{}",
            topo.nodes()[ev.best].id,
            best_score,
            node_list(topo, &target),
            if moved > 0.0 {
                format!(", moving {moved:.0} MiB of memory there")
            } else {
                String::new()
            }
        );
        let placement = Placement::new(topo, p.pid, alloc::ids(topo, &cpus), reason);
        (placement, true)
    }
}

/// What `p` asks for (step 2) at target utilisation `util`.
fn request(topo: &Topology, p: &Process, util: f64) -> Request {
    let pmb = process_mb(topo, p);
    let rss: f64 = pmb.iter().sum();
    let demand = if p.cpu_demand.is_finite() {
        p.cpu_demand.max(0.0)
    } else {
        0.0
    };
    let mbs = rss / util.min(1.0);
    let cpus = (demand / util).min(p.threads.max(1) as f64);
    Request {
        pmb,
        rss,
        demand,
        mbs,
        cpus,
    }
}

/// The fraction of `p`'s memory on `target` (1 when it has none), and its memory
/// elsewhere, MiB.
fn locality(topo: &Topology, p: &Process, target: &[usize]) -> (f64, f64) {
    let pmb = process_mb(topo, p);
    let rss: f64 = pmb.iter().sum();
    let nonlocal: f64 = (0..pmb.len())
        .filter(|n| !target.contains(n))
        .map(|n| pmb[n])
        .sum();
    let local = if rss > 0.0 { 1.0 - nonlocal / rss } else { 1.0 };
    (local, nonlocal)
}

/// Moves `p`'s CPU demand in `st` from the nodes it runs on to `target`, spread in
/// proportion to their CPUs.
fn move_cpu_demand(topo: &Topology, st: &mut NodeState, p: &Process, target: &[usize]) {
    for (n, c) in cpu_by_node(topo, p).into_iter().enumerate() {
        st.cpu_free[n] = (st.cpu_free[n] + c).min(st.cpu_total[n]);
    }
    let target_cpus: f64 = target.iter().map(|&n| st.cpu_total[n]).sum();
    for &n in target {
        if target_cpus > 0.0 {
            let share = p.cpu_demand.max(0.0) * st.cpu_total[n] / target_cpus;
            st.cpu_free[n] = (st.cpu_free[n] - share).max(0.0);
        }
    }
}

/// Moves `p`'s memory off `target` (sorted) to the nearest node of `chosen` (the same
/// nodes in the order they were chosen, which decides distance ties), in `st` and as
/// page moves; returns the MiB moved.
fn move_memory(
    topo: &Topology,
    st: &mut NodeState,
    p: &Process,
    chosen: &[usize],
    target: &[usize],
    page_moves: &mut Vec<PageMove>,
) -> f64 {
    let mut moved = 0.0;
    for (&id, &bytes) in &p.memory_bytes {
        let Some(from) = topo.node_index(id) else {
            continue;
        };
        if bytes == 0 || target.contains(&from) {
            continue;
        }
        let Some(&to) = chosen.iter().min_by_key(|&&t| topo.distance(from, t)) else {
            continue;
        };
        let mb = bytes as f64 / MIB;
        st.mem_free[from] = (st.mem_free[from] + mb).min(st.mem_total[from]);
        st.mem_free[to] = (st.mem_free[to] - mb).max(0.0);
        moved += mb;
        page_moves.push(PageMove {
            pid: p.pid,
            from_node: id,
            to_node: topo.nodes()[to].id,
            bytes,
            reason: format!("numad binds memory to nodes {}", node_list(topo, target)),
        });
    }
    moved
}

fn node_list(topo: &Topology, nodes: &[usize]) -> String {
    let mut ids: Vec<u32> = nodes.iter().map(|&n| topo.nodes()[n].id).collect();
    ids.sort_unstable();
    let s: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    s.join(",")
}

impl Policy for Numad {
    fn uses_current_placement(&self) -> bool {
        true
    }
    fn name(&self) -> &str {
        "numad"
    }

    fn plan(&self, snapshot: &Snapshot) -> Plan {
        let topo = &snapshot.topology;
        let procs = &snapshot.processes;
        let mut st = NodeState::new(snapshot);
        let mut out: Vec<Option<Placement>> = vec![None; procs.len()];
        let mut page_moves = Vec::new();
        let candidates = self.candidates(topo, procs, &mut out);
        let sum_used: f64 = candidates.iter().map(|&i| procs[i].cpu_demand).sum();
        let sum_total: f64 = topo.cpu_nodes().map(|n| st.cpu_total[n]).sum();
        let assume_enough = sum_used <= sum_total;
        let mut moves = 0;
        for i in candidates {
            let p = &procs[i];
            if moves >= self.params.max_moves_per_scan {
                out[i] = Some(Placement::unchanged(
                    p.pid,
                    format!(
                        "deferred: numad moves at most {} per scan",
                        count(self.params.max_moves_per_scan, "process")
                    ),
                ));
                continue;
            }
            let (placement, moved) = self.place(topo, &mut st, p, assume_enough, &mut page_moves);
            out[i] = Some(placement);
            if moved {
                moves += 1;
            }
        }
        let placements = out
            .into_iter()
            .zip(procs)
            .map(|(pl, p)| pl.unwrap_or_else(|| Placement::unchanged(p.pid, "not planned".into())))
            .collect();
        let mut plan = Plan::new(self.name(), placements);
        plan.page_moves = page_moves;
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::testkit;
    use numasched_model::topology;
    use proptest::prelude::*;

    const GIB: u64 = 1 << 30;

    fn proc_at(pid: u32, demand: f64, mem: &[(u32, u64)]) -> Process {
        let mut p = Process::new(pid, "x");
        p.threads = 8;
        p.cpu_demand = demand;
        for &(n, b) in mem {
            p.memory_bytes.insert(n, b);
        }
        p
    }

    #[test]
    fn score_follows_numad_weights() {
        // Request 100 MiB / 1 CPU on a node with 300 MiB / 3 CPUs spare:
        // (100·10 + 200·4) · (1·6 + 2·1) = 1800 · 8.
        assert_eq!(score(100.0, 1.0, 300.0, 3.0), 1800.0 * 8.0);
        // Not enough: everything is "needed", nothing spare.
        assert_eq!(score(500.0, 4.0, 300.0, 3.0), 3000.0 * 18.0);
    }

    #[test]
    fn small_or_idle_processes_are_left_alone() {
        let t = topology::machine("2n:1l:2c:1t").unwrap();
        let small = proc_at(1, 2.0, &[(0, 200 << 20)]);
        let idle = proc_at(2, 0.4, &[(0, 4 * GIB)]);
        let s = Snapshot {
            topology: t,
            processes: vec![small, idle],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = Numad::default().plan(&s);
        for pl in &plan.placements {
            assert!(pl.cpus.is_empty());
            assert!(pl.reason.contains("leaves it alone"), "{}", pl.reason);
        }
        assert!(plan.page_moves.is_empty());
    }

    #[test]
    fn moves_one_process_per_scan_biggest_first() {
        let t = topology::machine("2n:1l:4c:1t").unwrap();
        // Both nodes have the same spare memory; the big one's memory is mostly on 0.
        let small = proc_at(1, 1.0, &[(1, GIB)]);
        let big = proc_at(2, 2.0, &[(0, 2 * GIB), (1, GIB)]);
        let s = Snapshot {
            topology: t,
            processes: vec![small, big],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = Numad::default().plan(&s);
        assert!(plan.placements[0].cpus.is_empty());
        assert!(plan.placements[0].reason.contains("deferred"));
        assert_eq!(plan.placements[1].nodes, vec![0]);
        assert_eq!(plan.placements[1].cpus, vec![0, 1, 2, 3]);
        // Its memory on node 1 follows it.
        assert_eq!(
            plan.page_moves,
            vec![PageMove {
                pid: 2,
                from_node: 1,
                to_node: 0,
                bytes: GIB,
                reason: "numad binds memory to nodes 0".into()
            }]
        );
        // With two moves allowed, the second process sees the first's new place and
        // goes to the other node.
        let two = Numad {
            params: NumadParams {
                max_moves_per_scan: 2,
                ..NumadParams::default()
            },
        };
        let plan = two.plan(&s);
        assert_eq!(plan.placements[1].nodes, vec![0]);
        assert_eq!(plan.placements[0].nodes, vec![1], "{plan:#?}");
    }

    #[test]
    fn credit_back_keeps_a_well_placed_process_in_place() {
        let t = topology::machine("2n:1l:4c:1t").unwrap(); // node 0: CPUs 0-3
        let mut a = proc_at(1, 2.0, &[(0, 4 * GIB)]);
        a.current_cpus = vec![0, 1, 2, 3].into();
        let mut c = proc_at(2, 0.4, &[(1, 2 * GIB)]); // below the CPU threshold
        c.current_cpus = vec![4].into();
        let s = Snapshot {
            topology: t,
            processes: vec![a, c],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        // Raw spare resources favour node 1 on both counts...
        let st = NodeState::new(&s);
        assert!(st.mem_free[1] > st.mem_free[0] && st.cpu_free[1] > st.cpu_free[0]);
        // ...but with its own memory (×5/4) and CPU credited back, node 0 wins.
        let numad = Numad::default();
        let ev = numad
            .evaluate(&s.topology, &st, &s.processes[0], true)
            .unwrap();
        assert_eq!(bound_nodes(&s.topology, &s.processes[0]), Some(vec![0]));
        assert_eq!(ev.best, 0);
        assert_eq!(ev.target, vec![0]);
        let plan = numad.plan(&s);
        assert!(plan.placements[0].cpus.is_empty());
        assert!(
            plan.placements[0].reason.contains("already bound"),
            "{}",
            plan.placements[0].reason
        );
        assert!(plan.page_moves.is_empty());
    }

    #[test]
    fn bound_process_with_scattered_memory_is_rebound_to_pull_it_home() {
        let t = topology::machine("2n:1l:4c:1t").unwrap();
        let mut a = proc_at(1, 2.0, &[(0, 4 * GIB), (1, GIB)]);
        a.current_cpus = vec![0, 1, 2, 3].into();
        let s = Snapshot {
            topology: t,
            processes: vec![a],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = Numad::default().plan(&s);
        assert_eq!(plan.placements[0].nodes, vec![0]);
        assert_eq!(plan.page_moves.len(), 1);
        assert_eq!(plan.page_moves[0].from_node, 1);
    }

    fn three_in_a_row() -> Topology {
        let mut d = topology::spec::build(3, 1, 2, 1, None);
        d.nodes[0].distances = vec![10, 20, 30];
        d.nodes[1].distances = vec![20, 10, 20];
        d.nodes[2].distances = vec![30, 20, 10];
        Topology::from_desc(d).unwrap()
    }

    #[test]
    fn a_process_bigger_than_a_node_gets_nodes_in_distance_order() {
        // 18 GiB / 85% needs two 16 GiB nodes. All nodes score alike, so node 0 (first)
        // is best, and its nearest neighbour, node 1, joins it, although node 2 holds
        // part of the memory.
        let p = proc_at(1, 2.0, &[(0, 12 * GIB), (2, 6 * GIB)]);
        let s = Snapshot {
            topology: three_in_a_row(),
            processes: vec![p],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = Numad::default().plan(&s);
        assert_eq!(plan.placements[0].nodes, vec![0, 1], "{plan:#?}");
        assert_eq!(plan.placements[0].cpus, vec![0, 1, 2, 3]);
        assert_eq!(plan.page_moves.len(), 1);
        assert_eq!(
            (plan.page_moves[0].from_node, plan.page_moves[0].to_node),
            (2, 1)
        );
    }

    #[test]
    fn sparse_node_ids_and_pins() {
        let mut d = topology::spec::build(2, 1, 2, 1, None);
        d.nodes[0].id = 1;
        d.nodes[1].id = 3;
        let t = Topology::from_desc(d).unwrap(); // node 1: CPUs 0,1; node 3: CPUs 2,3
        let mut p = proc_at(7, 1.5, &[(3, 2 * GIB)]);
        p.allowed_cpus = Some(vec![1, 3].into());
        // Keeps node 1 from tying with node 3 on spare memory.
        let other = proc_at(8, 0.1, &[(1, GIB)]);
        let s = Snapshot {
            topology: t,
            processes: vec![p, other],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = Numad::default().plan(&s);
        assert_eq!(plan.placements[0].nodes, vec![3]);
        assert_eq!(plan.placements[0].cpus, vec![3]);
        assert!(plan.placements[0].reason.contains("nodes 3"));
    }

    #[test]
    fn a_single_node_machine_needs_no_binding() {
        let s = Snapshot {
            topology: topology::machine("1n:1l:4c:1t").unwrap(),
            processes: vec![proc_at(1, 2.0, &[(0, 2 * GIB)])],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = Numad::default().plan(&s);
        assert!(plan.placements[0].cpus.is_empty());
        assert!(plan.placements[0].reason.contains("every node"));
    }

    #[test]
    fn bound_means_exactly_a_strict_subset_of_nodes() {
        let t = topology::machine("2n:1l:2c:1t").unwrap();
        let mut p = Process::new(1, "x");
        p.current_cpus = vec![0, 1].into();
        assert_eq!(bound_nodes(&t, &p), Some(vec![0]));
        p.current_cpus = vec![0].into();
        assert_eq!(bound_nodes(&t, &p), None);
        p.current_cpus = vec![0, 1, 2, 3].into();
        assert_eq!(bound_nodes(&t, &p), None);
        p.current_cpus = vec![].into();
        p.allowed_cpus = Some(vec![2, 3].into());
        assert_eq!(bound_nodes(&t, &p), Some(vec![1]));
    }

    proptest! {
        #[test]
        fn plans_are_well_formed(raw in testkit::raw_snapshot()) {
            let s = testkit::build(&raw);
            let plan = Numad::default().plan(&s);
            testkit::check_plan(&s, &plan)?;
            let moved = plan.placements.iter().filter(|p| !p.cpus.is_empty()).count();
            prop_assert!(moved <= 1);
        }
    }
}
