//! Memory-aware CPU allocation, after Kang, Park & Choi.
//!
//! Per process k: CPU intensity `Ci(k) = consumed / allocated time slice` and memory
//! intensity `Mi(k) = used page frames / (total page frames / number of processes)`. Per
//! core i: `Cload(i) = ΣCi`, `Mload(i) = ΣMi`, `CMload(i) = α·Cload(i) + (1−α)·Mload(i)`.
//! Placement is hierarchical: on *fork* the child stays on its parent's node and takes the
//! core with least CMload at α = 1; on *exec* the node with least summed CMload at α = 0
//! is chosen, then its core with least CMload at α = 1; on *load balancing* a process
//! with more pages remote than local is treated like exec, otherwise like a fork from
//! its own node.
//!
//! Mapping onto a snapshot:
//! - `Ci` is `cpu_demand` per CPU of the group, clamped to [0, 1]: a time slice cannot
//!   be consumed more than fully, and a multi-threaded process is spread over `slots()`
//!   CPUs, each carrying its per-thread share. `Mi` is `rss_bytes()` over
//!   `total_memory() / number of snapshot processes`, split evenly over the group's CPUs.
//! - A "core" is one CPU (SMT siblings are separate CPUs in Kang's model); ties between
//!   equally loaded CPUs go to the one whose physical core is less loaded, then to the
//!   lowest CPU number.
//! - A process with no `current_cpus` and a `parent` in the snapshot is a fork; with no
//!   parent there, an exec; an already-placed process is load-balanced.
//! - Order: loads accumulate as processes are placed, so order matters. Already-placed
//!   processes are seeded at their current CPUs (the machine as it is), then balanced in
//!   snapshot order, each lifting its own load before choosing; then new processes are
//!   placed in snapshot order, parents before their children. New processes go last
//!   because their fork/exec decision should see the machine as balancing leaves it,
//!   and because a freshly exec'd image has touched little memory yet, so it is the
//!   cheapest to fit around the others.
//! - A pin restricts every choice; when the fork node has no allowed CPU the exec rule
//!   picks among the allowed nodes. A group bigger than its node spills to the nearest
//!   nodes. Exec ties in memory load (e.g. processes without memory yet) go to the node
//!   with less summed CPU load, so that memoryless processes do not all pile onto one
//!   node, then to the node nearest the process's home, then to the lowest node index.
//!   Near-ties are not ties: at α = 0 a node with slightly less memory load wins however
//!   busy its CPUs are, which is the paper's rule.

use crate::alloc;
use crate::{Placement, Plan, Policy, Process, Snapshot};
use numasched_model::topology::Topology;

/// Intensities of one process (or of the share of it that runs on one core).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Intensity {
    pub ci: f64,
    pub mi: f64,
}

/// Load of one core.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CoreLoad {
    pub cload: f64,
    pub mload: f64,
}

impl CoreLoad {
    /// `α·Cload + (1−α)·Mload`, α clamped to [0, 1].
    pub fn cm(&self, alpha: f64) -> f64 {
        let a = if alpha.is_finite() {
            alpha.clamp(0.0, 1.0)
        } else {
            1.0
        };
        a * self.cload + (1.0 - a) * self.mload
    }

    fn add(&mut self, i: Intensity, sign: f64) {
        self.cload = (self.cload + sign * i.ci).max(0.0);
        self.mload = (self.mload + sign * i.mi).max(0.0);
    }
}

/// `Ci = consumed / allocated`, clamped to [0, 1]; 0 when nothing was allocated.
pub fn cpu_intensity(allocated: f64, consumed: f64) -> f64 {
    if allocated > 0.0 && consumed.is_finite() {
        (consumed / allocated).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// `Mi = used / (total / processes)`; 0 when there is nothing to share.
pub fn memory_intensity(used: f64, total: f64, processes: usize) -> f64 {
    if total > 0.0 && processes > 0 && used.is_finite() {
        used.max(0.0) * processes as f64 / total
    } else {
        0.0
    }
}

/// Per-core loads from `(core, intensity)` assignments; assignments to cores at or past
/// `cores` are ignored.
pub fn core_loads(cores: usize, assignments: &[(usize, Intensity)]) -> Vec<CoreLoad> {
    let mut loads = vec![CoreLoad::default(); cores];
    for &(core, i) in assignments {
        if let Some(l) = loads.get_mut(core) {
            l.add(i, 1.0);
        }
    }
    loads
}

#[derive(Debug, Clone, PartialEq)]
pub struct CmLoadParams {
    /// α for choosing a core within a node (the paper uses 1: CPU load only).
    pub core_alpha: f64,
    /// α for choosing a node on exec (the paper uses 0: memory load only).
    pub node_alpha: f64,
}

impl Default for CmLoadParams {
    fn default() -> Self {
        CmLoadParams {
            core_alpha: 1.0,
            node_alpha: 0.0,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct CmLoad {
    pub params: CmLoadParams,
}

/// Which of Kang's rules placed a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Fork,
    Exec,
    BalanceExec,
    BalanceFork,
}

struct State<'a> {
    topo: &'a Topology,
    params: &'a CmLoadParams,
    /// Per CPU index.
    loads: Vec<CoreLoad>,
}

impl State<'_> {
    fn node_sum(&self, node: usize) -> f64 {
        self.node_sum_at(node, self.params.node_alpha)
    }

    fn node_sum_at(&self, node: usize, alpha: f64) -> f64 {
        self.topo.nodes()[node]
            .cpus
            .iter()
            .filter_map(|&c| self.topo.cpu(c))
            .map(|c| self.loads[c.index].cm(alpha))
            .sum()
    }

    fn core_sum(&self, cpu: usize) -> f64 {
        let core = self.topo.cpus()[cpu].core;
        self.topo.cores()[core]
            .cpus
            .iter()
            .filter_map(|&c| self.topo.cpu(c))
            .map(|c| self.loads[c.index].cm(self.params.core_alpha))
            .sum()
    }

    /// Exec rule: the allowed node with least summed CMload at `node_alpha`.
    fn exec_node(&self, allowed: &[usize], home: Option<usize>) -> Option<usize> {
        let mut nodes: Vec<usize> = allowed.iter().map(|&c| self.topo.cpus()[c].node).collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes.into_iter().min_by(|&a, &b| {
            let dist = |n: usize| home.map_or(0, |h| self.topo.distance(h, n));
            self.node_sum(a)
                .total_cmp(&self.node_sum(b))
                .then(
                    self.node_sum_at(a, self.params.core_alpha)
                        .total_cmp(&self.node_sum_at(b, self.params.core_alpha)),
                )
                .then(dist(a).cmp(&dist(b)))
                .then(a.cmp(&b))
        })
    }

    /// `n` CPUs with least CMload at `core_alpha`, from `node` first and then from the
    /// nearest nodes, each pick raising the chosen CPU by `share` so a group spreads.
    fn pick(&mut self, allowed: &[usize], node: usize, n: usize, share: Intensity) -> Vec<usize> {
        let mut chosen = Vec::with_capacity(n);
        for nd in self.topo.nodes_by_distance(node) {
            while chosen.len() < n {
                let best = allowed
                    .iter()
                    .copied()
                    .filter(|&c| self.topo.cpus()[c].node == nd && !chosen.contains(&c))
                    .min_by(|&a, &b| {
                        let alpha = self.params.core_alpha;
                        self.loads[a]
                            .cm(alpha)
                            .total_cmp(&self.loads[b].cm(alpha))
                            .then(self.core_sum(a).total_cmp(&self.core_sum(b)))
                            .then(a.cmp(&b))
                    });
                let Some(c) = best else { break };
                self.loads[c].add(share, 1.0);
                chosen.push(c);
            }
        }
        chosen
    }
}

/// Per-CPU share of a process spread over `n` CPUs.
fn share(p: &Process, mi: f64, n: usize) -> Intensity {
    let n = n.max(1) as f64;
    let demand = if p.cpu_demand.is_finite() {
        p.cpu_demand
    } else {
        0.0
    };
    Intensity {
        ci: (demand / n).clamp(0.0, 1.0),
        mi: mi / n,
    }
}

/// Node index holding most of `cpus` (indices), lowest index on ties.
fn majority_node(topo: &Topology, cpus: &[usize]) -> Option<usize> {
    let mut count = vec![0usize; topo.nodes().len()];
    for &c in cpus {
        count[topo.cpus()[c].node] += 1;
    }
    (0..count.len())
        .filter(|&n| count[n] > 0)
        .max_by(|&a, &b| count[a].cmp(&count[b]).then(b.cmp(&a)))
}

impl Policy for CmLoad {
    fn uses_current_placement(&self) -> bool {
        true
    }
    fn name(&self) -> &str {
        "cmload"
    }

    fn plan(&self, snapshot: &Snapshot) -> Plan {
        let topo = &snapshot.topology;
        let procs = &snapshot.processes;
        let n = procs.len();
        let total = topo.total_memory() as f64;
        let mi: Vec<f64> = procs
            .iter()
            .map(|p| memory_intensity(p.rss_bytes() as f64, total, n))
            .collect();
        let mut st = State {
            topo,
            params: &self.params,
            loads: vec![CoreLoad::default(); topo.num_cpus()],
        };
        // Others' work is CPU load like any process's (Kang's scheduler sees every
        // task), though no memory load of the snapshot's.
        let others = Intensity { ci: 1.0, mi: 0.0 };
        for c in snapshot.others_taken.iter().filter_map(|&c| topo.cpu(c)) {
            st.charge(&[c.index], others, 1.0);
        }
        // Seed the machine as it is.
        let current: Vec<Vec<usize>> = procs
            .iter()
            .map(|p| alloc::indices(topo, &p.current_cpus))
            .collect();
        for (i, p) in procs.iter().enumerate() {
            st.charge(&current[i], share(p, mi[i], current[i].len()), 1.0);
        }
        let order = placement_order(procs, &current);
        let mut planned_node: Vec<Option<usize>> = vec![None; n];
        let mut out: Vec<Option<Placement>> = vec![None; n];
        for i in order {
            let p = &procs[i];
            if !current[i].is_empty() {
                st.charge(&current[i], share(p, mi[i], current[i].len()), -1.0);
            }
            let allowed = alloc::allowed(topo, p);
            let (rule, from, mut why) = match majority_node(topo, &current[i]) {
                Some(cur) => balance_rule(topo, p, cur),
                None => new_process_rule(topo, procs, i, &planned_node, &current),
            };
            let Some(node) = st.rule_node(&allowed, p, rule, from, &mut why) else {
                out[i] = Some(Placement::unchanged(
                    p.pid,
                    "no allowed CPU exists on this machine".into(),
                ));
                continue;
            };
            let chosen = st.take_cpus(&allowed, node, p, mi[i], &mut why);
            planned_node[i] = majority_node(topo, &chosen);
            out[i] = Some(Placement::new(topo, p.pid, alloc::ids(topo, &chosen), why));
        }
        let placements = out
            .into_iter()
            .zip(procs)
            .map(|(pl, p)| pl.unwrap_or_else(|| Placement::unchanged(p.pid, "not planned".into())))
            .collect();
        Plan::new(self.name(), placements)
    }
}

impl State<'_> {
    /// Adds (`sign` 1) or lifts (−1) the per-CPU share `s` on each of `cpus`.
    fn charge(&mut self, cpus: &[usize], s: Intensity, sign: f64) {
        for &c in cpus {
            self.loads[c].add(s, sign);
        }
    }

    /// The node a process goes to: `from` (its rule's node) when its pin allows it,
    /// otherwise the exec rule's; `None` when no allowed CPU exists. Says why in `why`.
    fn rule_node(
        &self,
        allowed: &[usize],
        p: &Process,
        rule: Rule,
        from: Option<usize>,
        why: &mut String,
    ) -> Option<usize> {
        let topo = self.topo;
        let from = from.filter(|&nd| allowed.iter().any(|&c| topo.cpus()[c].node == nd));
        if let Some(nd) = from {
            return Some(nd);
        }
        if matches!(rule, Rule::Fork | Rule::BalanceFork) {
            why.push_str(", but the pin excludes it, so like exec");
        }
        let home = p.home_node().and_then(|h| topo.node_index(h));
        let nd = self.exec_node(allowed, home);
        if let Some(nd) = nd {
            why.push_str(&format!(
                "; node {} had the least memory load ({:.2})",
                topo.nodes()[nd].id,
                self.node_sum(nd)
            ));
        }
        nd
    }

    /// Picks `p`'s CPUs from `node` outward and charges it there, its share spread
    /// over the CPUs it got (a group may get fewer than it has threads). Says why in
    /// `why`.
    fn take_cpus(
        &mut self,
        allowed: &[usize],
        node: usize,
        p: &Process,
        mi: f64,
        why: &mut String,
    ) -> Vec<usize> {
        let slots = p.slots();
        let provisional = share(p, mi, slots);
        let chosen = self.pick(allowed, node, slots, provisional);
        let fin = share(p, mi, chosen.len());
        for &c in &chosen {
            self.loads[c].add(provisional, -1.0);
            self.loads[c].add(fin, 1.0);
        }
        let least = chosen
            .iter()
            .map(|&c| self.loads[c].cm(self.params.core_alpha) - fin.ci)
            .fold(f64::INFINITY, f64::min);
        why.push_str(&format!(
            "; least CPU load there ({:.2} before it came)",
            if least.is_finite() {
                least.max(0.0)
            } else {
                0.0
            }
        ));
        chosen
    }
}

/// Load balancing of a process running mostly on node `cur`: exec's rule when more of
/// its memory is remote than local, otherwise fork's from `cur`.
fn balance_rule(topo: &Topology, p: &Process, cur: usize) -> (Rule, Option<usize>, String) {
    let total = p.rss_bytes();
    let local = topo.nodes()[cur].id;
    let local = *p.memory_bytes.get(&local).unwrap_or(&0);
    let remote = total - local.min(total);
    if remote > local {
        (
            Rule::BalanceExec,
            None,
            format!(
                "balance: {:.0}% of its memory is remote from node {}, so re-placed like exec",
                remote as f64 * 100.0 / total.max(1) as f64,
                topo.nodes()[cur].id
            ),
        )
    } else {
        (
            Rule::BalanceFork,
            Some(cur),
            format!(
                "balance: memory mostly local, so it stays on node {}",
                topo.nodes()[cur].id
            ),
        )
    }
}

/// A new process `i`: fork's rule on its parent's node (as planned, or where the
/// parent runs) when the parent is in the snapshot and has one, otherwise exec's.
fn new_process_rule(
    topo: &Topology,
    procs: &[Process],
    i: usize,
    planned_node: &[Option<usize>],
    current: &[Vec<usize>],
) -> (Rule, Option<usize>, String) {
    let p = &procs[i];
    let parent = p
        .parent
        .and_then(|pp| procs.iter().position(|q| q.pid == pp && q.pid != p.pid));
    let Some(j) = parent else {
        return (Rule::Exec, None, "exec: new process".to_string());
    };
    match planned_node[j].or_else(|| majority_node(topo, &current[j])) {
        Some(nd) => (
            Rule::Fork,
            Some(nd),
            format!(
                "fork: child of {} stays on its node {}",
                procs[j].pid,
                topo.nodes()[nd].id
            ),
        ),
        None => (
            Rule::Exec,
            None,
            format!("exec: parent {} has no node yet", procs[j].pid),
        ),
    }
}

/// Already-placed processes in snapshot order, then new ones with parents first.
fn placement_order(procs: &[Process], current: &[Vec<usize>]) -> Vec<usize> {
    let n = procs.len();
    let is_new = |i: usize| current[i].is_empty();
    let index_of = |pid: u32| procs.iter().position(|q| q.pid == pid);
    // Depth in the tree of new processes; the walk is capped at n so a parent cycle
    // (impossible in a live system, possible in a hand-written snapshot) terminates.
    let depth = |mut i: usize| {
        let mut d = 0;
        while d < n {
            match procs[i].parent.and_then(index_of) {
                Some(j) if is_new(j) && j != i => {
                    d += 1;
                    i = j;
                }
                _ => break,
            }
        }
        d
    };
    let mut placed: Vec<usize> = (0..n).filter(|&i| !is_new(i)).collect();
    let mut fresh: Vec<(usize, usize)> = (0..n)
        .filter(|&i| is_new(i))
        .map(|i| (depth(i), i))
        .collect();
    fresh.sort_unstable();
    placed.extend(fresh.into_iter().map(|(_, i)| i));
    placed
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::testkit;
    use numasched_model::topology;
    use proptest::prelude::*;

    const GIB: u64 = 1 << 30;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn worked_example_from_the_paper() {
        let slices = [
            (0, 100.0, 20.0),
            (0, 100.0, 20.0),
            (0, 100.0, 50.0),
            (1, 100.0, 20.0),
            (1, 100.0, 10.0),
            (1, 200.0, 60.0),
        ];
        let frames = [40.0, 80.0, 40.0, 20.0, 160.0, 40.0];
        let assignments: Vec<(usize, Intensity)> = slices
            .iter()
            .zip(frames)
            .map(|(&(core, alloc, used), f)| {
                (
                    core,
                    Intensity {
                        ci: cpu_intensity(alloc, used),
                        mi: memory_intensity(f, 1200.0, 6),
                    },
                )
            })
            .collect();
        let loads = core_loads(2, &assignments);
        assert!(close(loads[0].cload, 0.9), "{loads:?}");
        assert!(close(loads[1].cload, 0.6), "{loads:?}");
        assert!(close(loads[0].mload, 0.8), "{loads:?}");
        assert!(close(loads[1].mload, 1.1), "{loads:?}");
        assert!(close(loads[0].cm(1.0), 0.9));
        assert!(close(loads[1].cm(0.0), 1.1));
        assert!(close(loads[0].cm(0.5), 0.85));
    }

    #[test]
    fn intensities_are_guarded() {
        assert_eq!(cpu_intensity(0.0, 10.0), 0.0);
        assert_eq!(cpu_intensity(100.0, 150.0), 1.0);
        assert_eq!(memory_intensity(10.0, 0.0, 3), 0.0);
        assert_eq!(memory_intensity(10.0, 100.0, 0), 0.0);
        assert!(core_loads(1, &[(5, Intensity { ci: 1.0, mi: 1.0 })])[0] == CoreLoad::default());
    }

    fn machine() -> Topology {
        topology::machine("2n:1l:2c:1t").unwrap() // node 0: CPUs 0,1; node 1: CPUs 2,3
    }

    fn placed(pid: u32, cpu: u32, demand: f64, mem: &[(u32, u64)]) -> Process {
        let mut p = Process::new(pid, "x");
        p.cpu_demand = demand;
        p.current_cpus = vec![cpu].into();
        for &(n, b) in mem {
            p.memory_bytes.insert(n, b);
        }
        p
    }

    #[test]
    fn fork_stays_on_the_parent_node_on_its_least_loaded_cpu() {
        // Parent on CPU 0 (node 0); node 0 is memory-heavy, node 1 idle, yet a forked
        // child stays with its parent, on node 0's other CPU.
        let parent = placed(1, 0, 1.0, &[(0, 8 * GIB)]);
        let mut child = Process::new(2, "x");
        child.parent = Some(1);
        let s = Snapshot {
            topology: machine(),
            processes: vec![child, parent],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = CmLoad::default().plan(&s);
        assert_eq!(plan.placements[0].cpus, vec![1], "{plan:#?}");
        assert!(plan.placements[0].reason.starts_with("fork: child of 1"));
    }

    #[test]
    fn fork_of_a_new_parent_follows_the_parents_plan() {
        // Node 0 carries memory load, so the new parent execs to node 1, and its child
        // (listed first) must follow it there.
        let heavy = placed(9, 0, 0.1, &[(0, 8 * GIB)]);
        let mut child = Process::new(2, "x");
        child.parent = Some(1);
        let parent = Process::new(1, "x");
        let s = Snapshot {
            topology: machine(),
            processes: vec![child, heavy, parent],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = CmLoad::default().plan(&s);
        assert_eq!(plan.placements[2].nodes, vec![1]);
        assert_eq!(plan.placements[0].nodes, vec![1]);
        assert_ne!(plan.placements[0].cpus, plan.placements[2].cpus);
    }

    #[test]
    fn exec_picks_the_node_with_least_memory_load_then_least_cpu_load() {
        // Node 0: little memory but busy CPUs; node 1: lots of memory, idle CPUs.
        // α = 0 for the node means memory decides: node 0. Then α = 1: CPU 1 (0.2) beats
        // CPU 0 (0.9).
        let a = placed(1, 0, 0.9, &[(0, GIB)]);
        let b = placed(2, 1, 0.2, &[(0, GIB)]);
        let c = placed(3, 2, 0.0, &[(1, 12 * GIB)]);
        let new = Process::new(4, "x");
        let s = Snapshot {
            topology: machine(),
            processes: vec![a, b, c, new],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = CmLoad::default().plan(&s);
        assert_eq!(plan.placements[3].cpus, vec![1], "{plan:#?}");
        assert!(plan.placements[3].reason.starts_with("exec: new process"));
        assert!(plan.placements[3].reason.contains("least memory load"));
    }

    #[test]
    fn exec_on_an_idle_machine_prefers_home() {
        let mut p = Process::new(1, "x");
        p.memory_bytes.insert(1, GIB);
        let s = Snapshot {
            topology: machine(),
            processes: vec![p],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        assert_eq!(CmLoad::default().plan(&s).placements[0].nodes, vec![1]);
    }

    #[test]
    fn balancing_moves_remote_processes_like_exec_and_keeps_local_ones_home() {
        // Both run on node 0. `remote` has its memory on node 1 → exec rule, which sends
        // it to the node with less memory load; `local` stays on node 0.
        let remote = placed(1, 0, 1.0, &[(1, GIB)]);
        let local = placed(2, 1, 1.0, &[(0, 2 * GIB)]);
        let s = Snapshot {
            topology: machine(),
            processes: vec![remote, local],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = CmLoad::default().plan(&s);
        // Without `remote`, node 0 holds 2 GiB of Mload-weighted memory and node 1 none.
        assert_eq!(plan.placements[0].nodes, vec![1], "{plan:#?}");
        assert!(plan.placements[0].reason.contains("re-placed like exec"));
        assert_eq!(plan.placements[1].nodes, vec![0]);
        assert!(plan.placements[1].reason.contains("stays on node 0"));
    }

    #[test]
    fn balancing_spreads_a_crowded_cpu_within_its_node() {
        let a = placed(1, 0, 1.0, &[(0, GIB)]);
        let b = placed(2, 0, 1.0, &[(0, GIB)]);
        let s = Snapshot {
            topology: machine(),
            processes: vec![a, b],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = CmLoad::default().plan(&s);
        let mut cpus: Vec<u32> = plan.placements.iter().map(|p| p.cpus[0]).collect();
        cpus.sort_unstable();
        assert_eq!(cpus, vec![0, 1]);
    }

    #[test]
    fn placed_processes_are_balanced_before_new_ones_arrive() {
        let cur = vec![vec![0usize], vec![], vec![1]];
        let mut procs = vec![
            Process::new(1, "a"),
            Process::new(2, "b"),
            Process::new(3, "c"),
        ];
        procs[0].current_cpus = vec![0].into();
        procs[2].current_cpus = vec![1].into();
        assert_eq!(placement_order(&procs, &cur), vec![0, 2, 1]);
        // Parent cycles in a hand-written snapshot terminate.
        procs[1].parent = Some(2);
        let cur = vec![vec![], vec![], vec![]];
        let order = placement_order(&procs, &cur);
        assert_eq!(order.len(), 3);
    }

    #[test]
    fn overcommit_spreads_cpu_load_evenly() {
        let procs: Vec<Process> = (1..=10).map(|i| Process::new(i, "x")).collect();
        let s = Snapshot {
            topology: machine(),
            processes: procs,
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = CmLoad::default().plan(&s);
        let mut per_cpu = [0; 4];
        for pl in &plan.placements {
            assert_eq!(pl.cpus.len(), 1);
            per_cpu[pl.cpus[0] as usize] += 1;
        }
        per_cpu.sort_unstable();
        assert_eq!(per_cpu, [2, 2, 3, 3]);
    }

    #[test]
    fn pins_are_respected_even_against_the_fork_rule() {
        let parent = placed(1, 0, 1.0, &[]);
        let mut child = Process::new(2, "x");
        child.parent = Some(1);
        child.allowed_cpus = Some(vec![3].into());
        let mut other = Process::new(3, "x");
        other.allowed_cpus = Some(vec![1, 2].into());
        let s = Snapshot {
            topology: machine(),
            processes: vec![parent, child, other],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = CmLoad::default().plan(&s);
        assert_eq!(plan.placements[1].cpus, vec![3]);
        assert!(plan.placements[1].reason.contains("pin excludes"));
        assert!([1, 2].contains(&plan.placements[2].cpus[0]));
    }

    #[test]
    fn multi_threaded_group_spreads_over_its_node_first() {
        let mut p = Process::new(1, "omp");
        p.threads = 4;
        p.cpu_demand = 3.0;
        p.memory_bytes.insert(0, GIB);
        let s = Snapshot {
            topology: machine(),
            processes: vec![p],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let pl = &CmLoad::default().plan(&s).placements[0];
        assert_eq!(pl.cpus, vec![0, 1, 2]);
    }

    #[test]
    fn smt_ties_go_to_idle_cores() {
        let t = topology::machine("1n:1l:2c:2t").unwrap(); // cores {0,2} {1,3}
        let s = Snapshot {
            topology: t,
            processes: vec![placed(1, 0, 1.0, &[]), Process::new(2, "x")],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = CmLoad::default().plan(&s);
        assert_eq!(plan.placements[1].cpus, vec![1]);
    }

    proptest! {
        #[test]
        fn plans_are_well_formed(raw in testkit::raw_snapshot()) {
            let s = testkit::build(&raw);
            let plan = CmLoad::default().plan(&s);
            testkit::check_plan(&s, &plan)?;
            for pl in &plan.placements {
                prop_assert!(!pl.cpus.is_empty());
            }
        }
    }
}
