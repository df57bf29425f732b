//! Maximum-local mapping, step 1–2 of N-MASS (Majo & Gross, ISMM 2011).
//!
//! Processes are taken in descending NUMA penalty (the per-node lists merged by
//! penalty), and each gets free CPUs on its home node, or when that is full, on the
//! nearest node with room. Those that suffer most from remote execution therefore stay
//! local. Generalised here beyond the paper's two single-LLC nodes:
//! - "home" is the node holding most of the process's pages (numa_maps), and the
//!   fallback order is by SLIT distance from it rather than "the other node";
//! - inside a node with several LLCs, the process goes to the LLC with the lowest cache
//!   pressure that still has room (ties: most free CPUs), so locality does not pile
//!   processes onto one CCX while another sits idle;
//! - multi-threaded processes take `slots()` CPUs as a group, in one LLC if one fits; a
//!   group wider than any node spreads over free CPUs nearest first, but with more busy
//!   threads than CPUs takes no more than its share of the machine (every process counts
//!   alike in what the policies maximise);
//! - when no node has room (more processes than CPUs) the process time-shares the least
//!   loaded CPUs, the nearest node with such a CPU winning ties, a CPU per busy thread;
//! - a foreign pin (`allowed_cpus`) restricts every choice.

use std::fmt::Write;

use crate::alloc::{self, AllowedMask, Occupancy};
use crate::locality::remote_factor;
use crate::Policy;
use numasched_model::plan::{Placement, Plan};
use numasched_model::plural::count;
use numasched_model::snapshot::{Process, Snapshot};
use numasched_model::topology::Topology;

/// Where the maximum-local step put everyone, in a form the refinement step can edit.
#[derive(Debug, Clone)]
pub struct Layout<'s> {
    pub snapshot: &'s Snapshot,
    pub occ: Occupancy<'s>,
    /// Per process (snapshot order): CPU indices.
    pub cpus: Vec<Vec<usize>>,
    /// Per process: NUMA penalty and MPKI after defaults are filled in.
    pub np: Vec<f64>,
    pub mpki: Vec<f64>,
    /// Per process: position in the descending-penalty order (0 = first placed).
    pub rank: Vec<usize>,
    /// Per process: why the maximum-local step put it where it did.
    pub why: Vec<String>,
}

impl<'s> Layout<'s> {
    pub fn topology(&self) -> &'s Topology {
        &self.snapshot.topology
    }

    /// LLC index holding all of process `i`'s CPUs, if they share one.
    pub fn llc_of(&self, i: usize) -> Option<usize> {
        let cpus = self.topology().cpus();
        let first = cpus[*self.cpus[i].first()?].llc;
        self.cpus[i]
            .iter()
            .all(|&c| cpus[c].llc == first)
            .then_some(first)
    }

    /// Node index of process `i`'s first CPU.
    pub fn node_of(&self, i: usize) -> Option<usize> {
        Some(self.topology().cpus()[*self.cpus[i].first()?].node)
    }

    /// Cache pressure process `i` puts on whatever LLC it runs in at node `at`: its
    /// MPKI, inflated by its remote penalty when it runs away from its memory (remote
    /// misses occupy the cache longer), weighted by how busy it is.
    pub fn contribution(&self, i: usize, at: usize) -> f64 {
        let p = &self.snapshot.processes[i];
        self.mpki[i] * remote_factor(self.topology(), p, self.np[i], at) * weight(p)
    }

    /// Σ contributions per LLC.
    pub fn pressures(&self) -> Vec<f64> {
        let topo = self.topology();
        let mut pr = vec![0.0; topo.llcs().len()];
        for i in 0..self.cpus.len() {
            let Some(node) = self.node_of(i) else {
                continue;
            };
            let c = self.contribution(i, node);
            let n = self.cpus[i].len() as f64;
            for &cpu in &self.cpus[i] {
                pr[topo.cpus()[cpu].llc] += c / n;
            }
        }
        pr
    }

    pub fn into_plan(self, policy: &str, reasons: Vec<String>) -> Plan {
        let topo = self.topology();
        let placements = self
            .snapshot
            .processes
            .iter()
            .zip(self.cpus.iter().zip(reasons))
            .map(|(p, (cpus, why))| Placement::new(topo, p.pid, alloc::ids(topo, cpus), why))
            .collect();
        Plan::new(policy, placements)
    }
}

/// How much of a CPU the process keeps busy (pressure scales with it).
fn weight(p: &Process) -> f64 {
    p.cpu_demand.min(p.slots() as f64)
}

/// Runs the maximum-local step.
pub fn place(snapshot: &Snapshot) -> Layout<'_> {
    let topo = &snapshot.topology;
    let n = snapshot.processes.len();
    let chars: Vec<_> = snapshot
        .processes
        .iter()
        .map(|p| p.character_on(topo))
        .collect();
    let homes: Vec<Option<usize>> = snapshot
        .processes
        .iter()
        .map(|p| p.home_node().and_then(|h| topo.node_index(h)))
        .collect();
    // Merging per-node lists sorted by np is a global sort by np; ties keep the
    // per-node interleaving stable by home node, then snapshot order.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| {
        chars[b]
            .numa_penalty
            .total_cmp(&chars[a].numa_penalty)
            .then(
                homes[a]
                    .unwrap_or(usize::MAX)
                    .cmp(&homes[b].unwrap_or(usize::MAX)),
            )
            .then(a.cmp(&b))
    });
    let mut layout = Layout {
        snapshot,
        occ: Occupancy::for_snapshot(snapshot),
        cpus: vec![Vec::new(); n],
        np: chars.iter().map(|c| c.numa_penalty).collect(),
        mpki: chars.iter().map(|c| c.mpki).collect(),
        rank: vec![0; n],
        why: vec![String::new(); n],
    };
    let mut pressure = vec![0.0; topo.llcs().len()];
    // Others' work competes for CPUs like a busy thread.
    let demand = snapshot.wanted_cpus();
    // Fallback orders are per home node, not per process: sort them once.
    let orders: Vec<Vec<usize>> = (0..topo.nodes().len())
        .map(|h| topo.nodes_by_distance(h))
        .collect();
    for (rank, &i) in order.iter().enumerate() {
        layout.rank[i] = rank;
        let p = &snapshot.processes[i];
        let allowed = AllowedMask::of(topo, p);
        let home = homes[i].map(|h| (h, orders[h].as_slice()));
        let (cpus, why) = place_one(&layout, p, home, &allowed, &pressure, demand);
        layout.occ.add(&cpus, p.cpu_demand);
        layout.cpus[i] = cpus;
        if let Some(node) = layout.node_of(i) {
            let c = layout.contribution(i, node) / layout.cpus[i].len() as f64;
            for &cpu in &layout.cpus[i] {
                pressure[topo.cpus()[cpu].llc] += c;
            }
        }
        // One allocation per reason: planning thousands of processes per epoch.
        let mut text = String::with_capacity(96);
        why.write(&mut text, topo);
        // A penalty nobody gave is shown as what it was ranked by: the MPKI
        // regression's estimate, or none (ranked as 1.00).
        let _ = match (p.numa_penalty, p.mpki) {
            (Some(_), _) => write!(text, " (np {:.2}, ", layout.np[i]),
            (None, Some(_)) => write!(text, " (np ~{:.2} from MPKI, ", layout.np[i]),
            (None, None) => write!(text, " (np unknown, ranked at ~{:.2}, ", layout.np[i]),
        };
        let _ = write!(
            text,
            "{}{} of {n} by penalty)",
            rank + 1,
            ordinal_suffix(rank + 1)
        );
        layout.why[i] = text;
    }
    layout
}

/// Why the maximum-local step chose what it chose (node indices); formatted once.
enum Why {
    Local(usize),
    Nearest {
        home: usize,
        node: usize,
        /// CPUs of the home node others' work holds.
        others: usize,
    },
    NoMemory(usize),
    Spread,
    TimeShare(usize),
    NoCpu,
}

impl Why {
    fn write(&self, out: &mut String, topo: &Topology) {
        let id = |ni: usize| topo.nodes()[ni].id;
        let _ = match *self {
            Why::Local(n) => write!(out, "local on home node {}", id(n)),
            Why::Nearest { home, node, others } => {
                let _ = write!(out, "home node {} full", id(home));
                if others > 0 {
                    let _ = write!(out, " ({} of others' work)", count(others, "CPU"));
                }
                write!(out, ", nearest node with room is {}", id(node))
            }
            Why::NoMemory(n) => write!(out, "no memory yet, node {} has most room", id(n)),
            Why::Spread => write!(out, "spread over the nearest nodes with free CPUs"),
            Why::TimeShare(n) => write!(out, "no free CPU, time-shares on node {}", id(n)),
            Why::NoCpu => write!(out, "no allowed CPU"),
        };
    }
}

/// Places one process; `home` is its home node with the nodes in distance order;
/// `demand` is the busy threads of every process in the snapshot.
fn place_one(
    layout: &Layout,
    p: &Process,
    home: Option<(usize, &[usize])>,
    allowed: &AllowedMask,
    pressure: &[f64],
    demand: usize,
) -> (Vec<usize>, Why) {
    let topo = layout.topology();
    let occ = &layout.occ;
    let slots = p.slots();
    let by_room: Vec<usize>;
    let node_order: &[usize] = match home {
        Some((_, order)) => order,
        // No memory yet: any node will do; take the one with most room.
        None => {
            let mut v: Vec<usize> = topo.cpu_nodes().collect();
            v.sort_by_key(|&ni| {
                let free = occ.free_count(allowed.filter(topo.node_cpu_indices(ni)));
                (std::cmp::Reverse(free), ni)
            });
            by_room = v;
            &by_room
        }
    };
    let label = |ni: usize| match home {
        Some((h, _)) if h == ni => Why::Local(ni),
        Some((h, _)) => Why::Nearest {
            home: h,
            node: ni,
            others: layout
                .snapshot
                .others_taken
                .iter()
                .filter(|&&c| topo.cpu(c).is_some_and(|c| c.node == h))
                .count(),
        },
        None => Why::NoMemory(ni),
    };
    // 1. A node with enough free CPUs, nearest first.
    for &ni in node_order {
        if let Some(cpus) = free_in_node(occ, ni, allowed, slots, pressure) {
            return (cpus, label(ni));
        }
    }
    // 2. A group larger than any node's free room: free CPUs in distance order, at most
    // its fair share of the machine when there are more busy threads than CPUs. That
    // share is what the kernel's balancing would give its threads, so it loses nothing
    // against leaving it alone; more is taken from the others, and every process counts
    // alike: eight CPUs for one 8-thread process that left thirteen others two threads a
    // CPU cost more than they gave (seed 63 r0 of `random`).
    let cpus = topo.num_cpus();
    let fair = if demand > cpus {
        (slots * cpus).div_ceil(demand).max(1)
    } else {
        slots
    };
    let free: Vec<usize> = node_order
        .iter()
        .flat_map(|&ni| allowed.filter(topo.node_cpu_indices(ni)))
        .filter(|&c| occ.is_free(c))
        .take(slots.min(fair))
        .collect();
    // A group wider than any node it may use takes every free CPU, and time-shares its
    // own threads there: squeezing 16 busy threads onto the nearest node's 4 CPUs while
    // another node's sat idle made it slower than leaving it alone. A group that fits
    // in a node stays near its memory and time-shares there, as below; and once no CPU
    // is free, spreading a group over CPUs others already use would not give it more
    // and would halve them.
    let widest = topo
        .cpu_nodes()
        .map(|ni| allowed.filter(topo.node_cpu_indices(ni)).count())
        .max()
        .unwrap_or(0);
    if free.len() >= slots.min(fair) || !free.is_empty() && slots > widest {
        return (free, Why::Spread);
    }
    // 3. Overcommitted: time-share the least-loaded CPUs, nearest node on ties.
    let min_load = (0..topo.num_cpus())
        .filter(|&c| allowed.contains(c))
        .map(|c| occ.load(c))
        .fold(f64::INFINITY, f64::min);
    // A group takes as many of that node's CPUs as it has busy threads, least loaded
    // first: four threads on the one least-loaded CPU would queue behind each other
    // while the node's other CPUs held one thread each.
    for &ni in node_order {
        let cands: Vec<usize> = allowed.filter(topo.node_cpu_indices(ni)).collect();
        if cands.iter().any(|&c| occ.load(c) <= min_load + 1e-9) {
            return (occ.pick(&cands, slots), Why::TimeShare(ni));
        }
    }
    // Only memory-only nodes allowed: impossible for a validated snapshot, whose pins
    // name existing CPUs. Leave the process where it is rather than guess.
    (Vec::new(), Why::NoCpu)
}

/// `slots` free CPUs in node `ni`: in the least-pressured LLC that fits them, else
/// across the node's LLCs. `None` when the node has too few.
fn free_in_node(
    occ: &Occupancy,
    ni: usize,
    allowed: &AllowedMask,
    slots: usize,
    pressure: &[f64],
) -> Option<Vec<usize>> {
    let topo = occ.topology();
    let llcs = topo.nodes()[ni].llcs.clone();
    let free_in = |l: usize| -> usize {
        if allowed.is_all() {
            occ.free_in_llc(l)
        } else {
            occ.free_count(allowed.filter(topo.llc_cpu_indices(l)))
        }
    };
    if llcs.clone().map(free_in).sum::<usize>() < slots {
        return None;
    }
    // An LLC with enough idle cores beats one that has room only on SMT siblings of
    // busy cores, whatever its pressure: sharing a pipeline costs a thread about 40%,
    // more than any cache or bandwidth sharing the pressure stands for.
    let idle_in = |l: usize| {
        let idle = if allowed.is_all() {
            occ.idle_cores_in_llc(l)
        } else {
            occ.idle_cores(allowed.filter(topo.llc_cpu_indices(l)))
        };
        idle >= slots
    };
    let mut best: Option<(usize, bool, usize)> = None; // (llc, on idle cores, free count)
    for llc in llcs {
        let f = free_in(llc);
        if f < slots {
            continue;
        }
        let idle = idle_in(llc);
        let better = match best {
            None => true,
            Some((b, bidle, bf)) => {
                (idle && !bidle)
                    || (idle == bidle
                        && (pressure[llc] < pressure[b] - 1e-9
                            || ((pressure[llc] - pressure[b]).abs() <= 1e-9 && f > bf)))
            }
        };
        if better {
            best = Some((llc, idle, f));
        }
    }
    let domain: &[usize] = match best {
        Some((llc, _, _)) => topo.llc_cpu_indices(llc),
        None => topo.node_cpu_indices(ni),
    };
    let cands: Vec<usize> = allowed.filter(domain).filter(|&c| occ.is_free(c)).collect();
    Some(occ.pick(&cands, slots))
}

/// English ordinal suffix of `n` ("st" for 1, "th" for 11).
fn ordinal_suffix(n: usize) -> &'static str {
    match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    }
}

/// The maximum-local policy on its own (the paper's comparison point).
#[derive(Debug, Clone, Default)]
pub struct MaxLocal;

impl Policy for MaxLocal {
    fn name(&self) -> &str {
        "maxlocal"
    }
    fn plan(&self, snapshot: &Snapshot) -> Plan {
        let layout = place(snapshot);
        let why = layout.why.clone();
        layout.into_plan(self.name(), why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::testkit::{nehalem_workload, node_of_plan, proc_on};
    use numasched_model::topology;

    #[test]
    fn everyone_local_when_homes_are_balanced() {
        // WL9, map 1100: mcf, milc on node 1; soplex, lbm on node 0.
        let s = nehalem_workload(&["mcf", "milc", "soplex", "lbm"], "1100");
        let plan = MaxLocal.plan(&s);
        assert_eq!(node_of_plan(&s, &plan), vec![1, 1, 0, 0]);
        assert!(plan.placements[0].reason.contains("local on home node 1"));
    }

    #[test]
    fn highest_penalty_stays_local_when_home_overflows() {
        // Five processes homed on node 0 (4 cores): the lowest-np one goes remote.
        let mut s = nehalem_workload(&["mcf", "milc", "soplex", "lbm", "libquantum"], "00000");
        s.processes[0].numa_penalty = Some(1.15);
        let plan = MaxLocal.plan(&s);
        // mcf has the lowest penalty (1.15) and is placed last: remote.
        assert_eq!(node_of_plan(&s, &plan), vec![1, 0, 0, 0, 0]);
        assert!(plan.placements[0].reason.contains("home node 0 full"));
        assert!(
            plan.placements[4].reason.contains("1st of 5"),
            "{}",
            plan.placements[4].reason
        );
    }

    #[test]
    fn a_penalty_nobody_gave_is_not_shown_as_known() {
        let mut s = nehalem_workload(&["mcf", "milc", "soplex"], "000");
        s.processes[0].numa_penalty = None;
        s.processes[1].numa_penalty = None;
        s.processes[1].mpki = None;
        let plan = MaxLocal.plan(&s);
        let reason = |pid| &plan.placement(pid).expect("placed").reason;
        assert!(
            reason(s.processes[0].pid).contains("(np ~"),
            "{}",
            reason(s.processes[0].pid)
        );
        assert!(reason(s.processes[0].pid).contains("from MPKI"));
        assert!(
            reason(s.processes[1].pid).contains("(np unknown,"),
            "{}",
            reason(s.processes[1].pid)
        );
        assert!(
            reason(s.processes[2].pid).contains("(np 1."),
            "{}",
            reason(s.processes[2].pid)
        );
    }

    #[test]
    fn all_on_one_node_stays_there_while_cores_are_free() {
        let s = nehalem_workload(&["mcf", "milc", "soplex", "lbm"], "0000");
        let plan = MaxLocal.plan(&s);
        assert_eq!(node_of_plan(&s, &plan), vec![0, 0, 0, 0]);
        let mut cpus: Vec<u32> = plan
            .placements
            .iter()
            .flat_map(|p| p.cpus.clone())
            .collect();
        cpus.sort_unstable();
        assert_eq!(cpus, vec![0, 1, 2, 3], "one core each, no sharing");
    }

    #[test]
    fn overcommit_time_shares_near_home() {
        let names: Vec<&str> = vec!["mcf"; 10];
        let s = nehalem_workload(&names, "0000000000");
        let plan = MaxLocal.plan(&s);
        let mut per_cpu = [0; 8];
        for p in &plan.placements {
            assert_eq!(p.cpus.len(), 1);
            per_cpu[p.cpus[0] as usize] += 1;
        }
        // 8 CPUs, 10 processes: two CPUs carry two, and those are on the home node.
        assert_eq!(per_cpu.iter().sum::<i32>(), 10);
        assert!(per_cpu.iter().all(|&k| (1..=2).contains(&k)));
        assert_eq!(per_cpu[..4].iter().sum::<i32>(), 6);
    }

    #[test]
    fn pins_are_respected_even_against_locality() {
        let mut s = nehalem_workload(&["mcf", "milc"], "00");
        s.processes[1].allowed_cpus = Some(vec![6, 7].into());
        let plan = MaxLocal.plan(&s);
        assert!([6, 7].contains(&plan.placements[1].cpus[0]));
        assert_eq!(plan.placements[0].nodes, vec![0]);
    }

    #[test]
    fn sparse_nodes_and_multiple_llcs() {
        let mut d = topology::spec::build(2, 2, 2, 1, None);
        d.nodes[1].id = 4;
        let topo = topology::Topology::from_desc(d).unwrap();
        let s = Snapshot {
            topology: topo,
            processes: vec![
                proc_on(1, "a", 4, 20.0, 1.3),
                proc_on(2, "b", 4, 20.0, 1.3),
                proc_on(3, "c", 4, 1.0, 1.0),
            ],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = MaxLocal.plan(&s);
        assert!(plan.placements.iter().all(|p| p.nodes == vec![4]));
        // The two memory-bound ones end up in different LLCs of node 4.
        let llc = |cpu: u32| s.topology.cpu(cpu).unwrap().llc;
        assert_ne!(
            llc(plan.placements[0].cpus[0]),
            llc(plan.placements[1].cpus[0])
        );
    }

    /// A node whose CPUs others' work holds (an unmanaged program pinned there) is no
    /// room: confined to it, a load would share its CPUs, where the kernel left alone
    /// runs it on the idle node.
    #[test]
    fn a_home_node_held_by_others_work_is_full() {
        let mut s = nehalem_workload(&["mcf"], "0");
        s.others_taken = vec![0, 1, 2, 3].into();
        let plan = MaxLocal.plan(&s);
        assert_eq!(plan.placements[0].nodes, vec![1], "{plan:?}");
        assert!(
            plan.placements[0].reason.starts_with(
                "home node 0 full (4 CPUs of others' work), nearest node with room is 1"
            ),
            "{}",
            plan.placements[0].reason
        );
        // One CPU of the node left: room for it at home.
        s.others_taken = vec![0, 1, 2].into();
        let plan = MaxLocal.plan(&s);
        assert_eq!(plan.placements[0].cpus, [3]);
    }

    #[test]
    fn multithreaded_group_fits_one_node() {
        let topo = topology::machine("2n:2l:4c:1t").unwrap();
        let mut p = proc_on(1, "omp", 1, 5.0, 1.2);
        p.threads = 6;
        p.cpu_demand = 6.0;
        let s = Snapshot {
            topology: topo,
            processes: vec![p],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = MaxLocal.plan(&s);
        assert_eq!(plan.placements[0].cpus.len(), 6);
        assert_eq!(plan.placements[0].nodes, vec![1]);
    }

    /// With more busy threads than CPUs, a group wider than any node takes its share of
    /// the machine, not every free CPU: on 16 CPUs, 8 threads of 20 get 7 (⌈8·16/20⌉),
    /// and the eight single-threaded processes after it find five CPUs of their own
    /// instead of four (seed 63 r0 of `random`: eight CPUs for one 8-thread process
    /// left thirteen others two threads a CPU).
    #[test]
    fn a_wide_group_takes_its_share_when_threads_outnumber_cpus() {
        let topo = topology::machine("4n:1l:4c:1t").unwrap();
        let mut processes: Vec<Process> = (0..4)
            .map(|k| proc_on(k + 1, "lbm", 0, 30.0, 1.3))
            .collect();
        let mut wide = proc_on(5, "omp", 0, 0.1, 1.0);
        wide.threads = 8;
        wide.cpu_demand = 8.0;
        processes.push(wide);
        processes.extend((0..8).map(|k| proc_on(k + 6, "gamess", 0, 0.05, 1.0)));
        let s = Snapshot {
            topology: topo,
            processes,
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = MaxLocal.plan(&s);
        assert_eq!(
            plan.placements[4].cpus.len(),
            7,
            "{}",
            plan.placements[4].reason
        );
        let used: std::collections::BTreeSet<u32> = plan
            .placements
            .iter()
            .flat_map(|p| p.cpus.iter().copied())
            .collect();
        assert_eq!(used.len(), 16, "every CPU carries a thread");
        let alone = plan.placements[5..]
            .iter()
            .filter(|p| {
                let c = p.cpus[0];
                plan.placements
                    .iter()
                    .filter(|q| q.cpus.contains(c))
                    .count()
                    == 1
            })
            .count();
        assert_eq!(alone, 5);
    }

    /// A group that must time-share gets a CPU per busy thread on the node it shares,
    /// least loaded first, not just the one idle CPU there: four threads queued on one
    /// CPU while three others held a thread each.
    #[test]
    fn a_time_sharing_group_gets_a_cpu_per_thread() {
        let mut s = nehalem_workload(
            &["mcf", "milc", "soplex", "lbm", "mcf", "milc", "lbm"],
            "0000111",
        );
        let mut group = proc_on(8, "omp", 1, 0.1, 1.0);
        group.threads = 4;
        group.cpu_demand = 4.0;
        s.processes.push(group);
        let plan = MaxLocal.plan(&s);
        let g = &plan.placements[7];
        assert_eq!(g.cpus.len(), 4, "{}", g.reason);
        assert_eq!(g.nodes, vec![1], "{}", g.reason);
    }
}
