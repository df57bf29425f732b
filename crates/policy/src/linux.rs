//! The kernel's default placement, as the baseline every policy is measured against.
//!
//! Linux's load balancer equalises runnable load across the scheduling-domain hierarchy
//! (NUMA nodes, then LLCs, then cores) and does not look at where memory is or how hard
//! a task hits the cache. Its placement of a set of busy tasks is therefore *one of the
//! CPU-balanced schedules*, which one depending on timing. Majo & Gross evaluate it as
//! the average over all CPU-balanced schedules (for 4 processes on 2 nodes, the
//! C(4,2) = 6 ways of putting two on each); [`balanced_schedules`] enumerates them for
//! the simulator. As a live policy, [`Linux`] produces one balanced schedule: each
//! process, in pid order, goes to the least loaded node, then LLC, then CPU.

use crate::alloc::{self, Occupancy};
use crate::Policy;
use numasched_model::plan::{Placement, Plan};
use numasched_model::snapshot::Snapshot;

#[derive(Debug, Clone, Default)]
pub struct Linux;

impl Policy for Linux {
    fn name(&self) -> &str {
        "linux"
    }

    fn leaves_to_kernel(&self) -> bool {
        true
    }

    fn plan(&self, snapshot: &Snapshot) -> Plan {
        let topo = &snapshot.topology;
        let mut occ = Occupancy::for_snapshot(snapshot);
        let mut order: Vec<usize> = (0..snapshot.processes.len()).collect();
        order.sort_by_key(|&i| snapshot.processes[i].pid);
        let mut placements: Vec<Option<Placement>> = vec![None; order.len()];
        for i in order {
            let p = &snapshot.processes[i];
            let allowed = alloc::allowed(topo, p);
            let cpus = least_loaded(&occ, &allowed, p.slots());
            occ.add(&cpus, p.cpu_demand);
            let node = cpus.first().map(|&c| topo.nodes()[topo.cpus()[c].node].id);
            let why = match node {
                Some(n) => format!("CPU load only: node {n} was the least loaded"),
                None => "no CPU allowed".to_string(),
            };
            placements[i] = Some(Placement::new(topo, p.pid, alloc::ids(topo, &cpus), why));
        }
        Plan::new(self.name(), placements.into_iter().flatten().collect())
    }
}

/// Least loaded node, then LLC within it, then CPUs: the domain hierarchy top-down.
/// Load is per CPU so nodes and LLCs of different sizes compare fairly. A domain with
/// idle CPUs for the whole group wins over a busier-looking one without: the kernel
/// wakes tasks onto idle CPUs before it weighs load. A group larger than its domain's
/// room spills over the next domain up, idle CPUs first.
pub(crate) fn least_loaded(occ: &Occupancy, allowed: &[usize], slots: usize) -> Vec<usize> {
    let topo = occ.topology();
    // A process that may run anywhere is counted from the per-LLC aggregates, in
    // O(LLCs) rather than O(CPUs): `auto` asks this for every process it plans.
    let anywhere = allowed.len() == topo.num_cpus();
    let in_llc = |l: usize| -> Domain {
        if anywhere {
            return Domain {
                free: occ.free_in_llc(l),
                load: occ.llc_load(l),
                cpus: topo.llc_cpu_indices(l).len(),
            };
        }
        allowed
            .iter()
            .filter(|&&c| topo.cpus()[c].llc == l)
            .fold(Domain::default(), |d, &c| Domain {
                free: d.free + usize::from(occ.is_free(c)),
                load: d.load + occ.load(c),
                cpus: d.cpus + 1,
            })
    };
    let in_node = |n: usize| -> Domain {
        topo.nodes()[n]
            .llcs
            .clone()
            .map(in_llc)
            .fold(Domain::default(), Domain::plus)
    };
    let least = |domains: &mut dyn Iterator<Item = (usize, Domain)>| {
        domains
            .filter(|(_, d)| d.cpus > 0)
            .min_by(|(_, a), (_, b)| a.compare(b, slots))
    };
    let nodes: Vec<Domain> = (0..topo.nodes().len()).map(in_node).collect();
    let Some((ni, node)) = least(&mut nodes.iter().copied().enumerate()) else {
        return Vec::new();
    };
    let machine_free: usize = nodes.iter().map(|d| d.free).sum();
    let on = |cpus: &mut dyn Iterator<Item = usize>| -> Vec<usize> {
        cpus.filter(|&c| anywhere || allowed.contains(&c)).collect()
    };
    let node_llcs = topo.nodes()[ni].llcs.clone();
    let node_cpus = || {
        on(&mut node_llcs
            .clone()
            .flat_map(|l| topo.llc_cpu_indices(l).iter().copied()))
    };
    if node.cpus < slots || (node.free < slots && machine_free >= slots) {
        return occ.pick(allowed, slots);
    }
    let Some((l, llc)) = least(&mut node_llcs.clone().map(|l| (l, in_llc(l)))) else {
        return occ.pick(&node_cpus(), slots);
    };
    if llc.cpus < slots || (llc.free < slots && node.free >= slots) {
        occ.pick(&node_cpus(), slots)
    } else {
        occ.pick(&on(&mut topo.llc_cpu_indices(l).iter().copied()), slots)
    }
}

/// What [`least_loaded`] weighs of a node's or an LLC's CPUs the process may use.
#[derive(Debug, Clone, Copy, Default)]
struct Domain {
    free: usize,
    load: f64,
    cpus: usize,
}

impl Domain {
    fn plus(self, other: Domain) -> Domain {
        Domain {
            free: self.free + other.free,
            load: self.load + other.load,
            cpus: self.cpus + other.cpus,
        }
    }

    /// Room for the whole group first, then load per CPU, then the larger domain.
    /// Loads closer than rounding are equal, however they were summed.
    fn compare(&self, other: &Domain, slots: usize) -> std::cmp::Ordering {
        let (a, b) = (self.load / self.cpus as f64, other.load / other.cpus as f64);
        let per_cpu = if (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0) {
            std::cmp::Ordering::Equal
        } else {
            a.total_cmp(&b)
        };
        (self.free < slots)
            .cmp(&(other.free < slots))
            .then(per_cpu)
            .then(other.cpus.cmp(&self.cpus))
    }
}

/// The CPU-balanced schedules of a snapshot.
#[derive(Debug, Clone)]
pub struct BalancedSchedules {
    pub plans: Vec<Plan>,
    /// False when there were more than the limit and `plans` is an even sample.
    pub exhaustive: bool,
}

/// Enumerates the ways the load balancer can spread the snapshot's processes: every
/// LLC domain gets a number of processes proportional to its cores (rounded either
/// way), and within an LLC processes take idle cores first. Pinned and multi-threaded
/// processes are placed first, as the live policy would, and are the same in every
/// schedule. With more than `limit` schedules, a deterministic sample of `limit` is
/// returned (every process equally likely in every domain).
pub fn balanced_schedules(snapshot: &Snapshot, limit: usize) -> BalancedSchedules {
    let topo = &snapshot.topology;
    let base = Linux.plan(snapshot);
    let free: Vec<usize> = (0..snapshot.processes.len())
        .filter(|&i| {
            let p = &snapshot.processes[i];
            p.allowed_cpus.is_none() && p.slots() == 1
        })
        .collect();
    let mut occ = Occupancy::for_snapshot(snapshot);
    for (i, p) in snapshot.processes.iter().enumerate() {
        if !free.contains(&i) {
            let cpus: Vec<usize> = base.placements[i]
                .cpus
                .iter()
                .filter_map(|&c| topo.cpu(c).map(|c| c.index))
                .collect();
            occ.add(&cpus, p.cpu_demand);
        }
    }
    let n_llc = topo.llcs().len();
    let cores: Vec<usize> = topo.llcs().iter().map(|l| l.cores.len()).collect();
    let total: usize = cores.iter().sum();
    let n = free.len();
    let lo: Vec<usize> = cores.iter().map(|&c| n * c / total).collect();
    let hi: Vec<usize> = cores.iter().map(|&c| (n * c).div_ceil(total)).collect();

    let count = count_assignments(n, &lo, &hi, limit.saturating_add(1));
    let exhaustive = count <= limit;
    let mut assignments: Vec<Vec<usize>> = Vec::new();
    if exhaustive {
        let mut cur = Vec::with_capacity(n);
        let mut used = vec![0; n_llc];
        enumerate(n, &lo, &hi, &mut cur, &mut used, &mut assignments);
    } else {
        let mut rng = SplitMix(0x5eed_1234_abcd_0001);
        while assignments.len() < limit {
            assignments.push(sample(n, &lo, &hi, &mut rng));
        }
    }
    let plans = assignments
        .into_iter()
        .map(|llc_of| {
            let mut occ = occ.clone();
            let mut plan = base.clone();
            for (k, &i) in free.iter().enumerate() {
                let p = &snapshot.processes[i];
                let cands: Vec<usize> = topo.llcs()[llc_of[k]]
                    .cpus
                    .iter()
                    .filter_map(|&c| topo.cpu(c).map(|c| c.index))
                    .collect();
                let cpus = occ.pick(&cands, 1);
                occ.add(&cpus, p.cpu_demand);
                plan.placements[i] = Placement::new(
                    topo,
                    p.pid,
                    alloc::ids(topo, &cpus),
                    "one of the CPU-balanced schedules".to_string(),
                );
            }
            plan
        })
        .collect();
    BalancedSchedules { plans, exhaustive }
}

/// Number of balanced assignments, stopping at `cap`.
fn count_assignments(n: usize, lo: &[usize], hi: &[usize], cap: usize) -> usize {
    // Counts per LLC must sum to n; for each count vector the assignments are the
    // multinomial n! / Π kᵢ!. Walk count vectors, summing with saturation.
    fn walk(l: usize, left: usize, lo: &[usize], hi: &[usize], ways: f64, cap: f64, acc: &mut f64) {
        if *acc >= cap {
            return;
        }
        if l == lo.len() {
            if left == 0 {
                *acc += ways;
            }
            return;
        }
        for k in lo[l]..=hi[l].min(left) {
            // choose which k of the `left` remaining processes go here
            walk(l + 1, left - k, lo, hi, ways * binom(left, k), cap, acc);
        }
    }
    let mut acc = 0.0;
    walk(0, n, lo, hi, 1.0, cap as f64, &mut acc);
    acc.min(cap as f64) as usize
}

fn binom(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

fn enumerate(
    n: usize,
    lo: &[usize],
    hi: &[usize],
    cur: &mut Vec<usize>,
    used: &mut [usize],
    out: &mut Vec<Vec<usize>>,
) {
    let left = n - cur.len();
    let need: usize = lo
        .iter()
        .zip(used.iter())
        .map(|(&l, &u)| l.saturating_sub(u))
        .sum();
    if need > left {
        return;
    }
    if left == 0 {
        out.push(cur.clone());
        return;
    }
    for l in 0..lo.len() {
        if used[l] < hi[l] {
            used[l] += 1;
            cur.push(l);
            enumerate(n, lo, hi, cur, used, out);
            cur.pop();
            used[l] -= 1;
        }
    }
}

/// One balanced assignment drawn by shuffling processes into a random count vector.
fn sample(n: usize, lo: &[usize], hi: &[usize], rng: &mut SplitMix) -> Vec<usize> {
    let mut counts = lo.to_vec();
    let mut extra = n - lo.iter().sum::<usize>();
    let mut can_grow: Vec<usize> = (0..lo.len()).filter(|&l| hi[l] > lo[l]).collect();
    while extra > 0 && !can_grow.is_empty() {
        let k = rng.below(can_grow.len());
        counts[can_grow.swap_remove(k)] += 1;
        extra -= 1;
    }
    let mut slots: Vec<usize> = counts
        .iter()
        .enumerate()
        .flat_map(|(l, &c)| std::iter::repeat_n(l, c))
        .collect();
    for i in (1..slots.len()).rev() {
        slots.swap(i, rng.below(i + 1));
    }
    slots
}

/// Small deterministic generator so samples are the same on every run.
struct SplitMix(u64);

impl SplitMix {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z % n.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::testkit::{nehalem_workload, node_of_plan};
    use std::collections::BTreeSet;

    #[test]
    fn live_plan_balances_cpu_load_ignoring_memory() {
        let s = nehalem_workload(&["mcf", "milc", "soplex", "lbm"], "0000");
        let plan = Linux.plan(&s);
        let nodes = node_of_plan(&s, &plan);
        assert_eq!(nodes.iter().filter(|&&n| n == 0).count(), 2);
        assert!(plan.placements[0].reason.contains("CPU load only"));
    }

    #[test]
    fn four_on_two_nodes_gives_the_six_published_schedules() {
        let s = nehalem_workload(&["mcf", "milc", "soplex", "lbm"], "0000");
        let b = balanced_schedules(&s, 1000);
        assert!(b.exhaustive);
        assert_eq!(b.plans.len(), 6);
        let distinct: BTreeSet<Vec<u32>> = b.plans.iter().map(|p| node_of_plan(&s, p)).collect();
        assert_eq!(distinct.len(), 6);
        for p in &b.plans {
            let nodes = node_of_plan(&s, p);
            assert_eq!(nodes.iter().filter(|&&n| n == 0).count(), 2);
            let cpus: BTreeSet<u32> = p.placements.iter().map(|x| x.cpus[0]).collect();
            assert_eq!(cpus.len(), 4, "no two share a core");
        }
    }

    #[test]
    fn eight_processes_give_seventy() {
        let names = [
            "lbm",
            "milc",
            "mcf",
            "namd",
            "gobmk",
            "perlbench",
            "h264ref",
            "povray",
        ];
        let s = nehalem_workload(&names, "00000000");
        let b = balanced_schedules(&s, 1000);
        assert_eq!(b.plans.len(), 70);
    }

    #[test]
    fn large_cases_are_sampled_evenly_and_deterministically() {
        let names = vec!["mcf"; 16];
        let s = nehalem_workload(&names, "0000000000000000");
        let a = balanced_schedules(&s, 50);
        let b = balanced_schedules(&s, 50);
        assert!(!a.exhaustive);
        assert_eq!(a.plans.len(), 50);
        assert_eq!(a.plans, b.plans);
        for p in &a.plans {
            let nodes = node_of_plan(&s, p);
            assert_eq!(nodes.iter().filter(|&&n| n == 0).count(), 8);
        }
    }

    #[test]
    fn pinned_processes_stay_fixed_and_inside_their_pin() {
        let mut s = nehalem_workload(&["mcf", "milc", "soplex", "lbm"], "0000");
        s.processes[2].allowed_cpus = Some(vec![5].into());
        let b = balanced_schedules(&s, 1000);
        // 3 free processes over 2 LLCs: counts (1,2) or (2,1) → 3 + 3 = 6 ways.
        assert_eq!(b.plans.len(), 6);
        assert!(b.plans.iter().all(|p| p.placements[2].cpus == vec![5]));
    }
}
