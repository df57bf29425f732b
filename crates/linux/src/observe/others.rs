//! Which CPUs others' work holds, cache by cache: the room a policy must not count on
//! when it chooses a node.
//!
//! [`others_pinned`](super::cpu_time::others_pinned) counts only others' work that
//! cannot leave its CPU, which is what a hard pin inside a cache needs. For a node it is
//! blind to the rest: a node filled with unmanaged work free to move looked empty, and a
//! managed process whose memory is there was confined to it, sharing its CPUs, while the
//! kernel left alone would have run it on the idle node.
//!
//! Here each managed process's demand is put where it most likely ran: first on the
//! CPUs its threads were last seen on, as far as what those CPUs ran allows; the rest
//! over the rest of those CPUs' caches, in proportion to what each CPU ran (over its
//! whole set when no CPU was seen). What is left on each CPU is others' work. Per
//! LLC, its CPUs' worth is rounded to whole CPUs (three quarters of a CPU's worth and
//! more is a CPU: the estimate is noisy where managed and unmanaged threads float over
//! the same CPUs), and that many of the LLC's CPUs, the busiest with others' work
//! first, are taken. Pinned processes are placed first: their work is surely on their
//! CPUs. Work the kernel could move counts too: it is running there now, and where a
//! plan confines managed processes the kernel moves it elsewhere, where the next
//! estimate finds it. (Counting only what stood above the machine's idlest CPU, as
//! `crowded` does inside an LLC, lost a pinned node's second CPU as soon as the
//! daemon's own few percent ran on every other CPU.)
//!
//! On a machine of one LLC nothing is taken: there is no other cache to choose, and
//! inside it a hard pin keeps off others' pinned work (`others_pinned`, see
//! `numasched_policy::crowded`).
//!
//! What it cannot see: others' work that arrives on a node a managed process is
//! confined to, while the process still runs there. The CPUs are then shared, each
//! busy, and the process's own share hides how many threads queue behind it. Its
//! run-queue delay shows it, which the daemon reads (`numasched_daemon::queued`).

use std::collections::BTreeMap;

use numasched_model::topology::{CpuId, Topology};
use numasched_model::CpuSet;

/// What the spans' demands were measured over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The same span as the CPUs' busy time (the last epoch).
    Epoch,
    /// The process's lifetime (a first pass, which has nothing earlier).
    Lifetime,
}

/// One managed process as the estimate sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// CPUs' worth it (and the children it waits for) ran over the epoch.
    pub demand: f64,
    /// CPUs it may run on.
    pub cpus: CpuSet,
    /// CPUs its threads were last seen on.
    pub ran_on: CpuSet,
}

/// CPUs' worth of others' work in an LLC that counts as one CPU taken.
pub const A_CPU: f64 = 0.75;

/// Share of a CPU below which a remainder is rounding, not work.
const TINY: f64 = 1e-9;

/// CPUs of `topo` that others' work holds, from each CPU's busy share over the epoch
/// (`busy`: CPUs' worth, CPUs missing from it are offline) and what the managed
/// processes ran. See the module doc.
pub fn others_taken(
    topo: &Topology,
    busy: &BTreeMap<CpuId, f64>,
    spans: &[Span],
    basis: Basis,
    before: &CpuSet,
) -> CpuSet {
    if topo.llcs().len() < 2 {
        return CpuSet::new();
    }
    let mut left: BTreeMap<CpuId, f64> = busy.iter().map(|(&c, &b)| (c, b.max(0.0))).collect();
    let mut order: Vec<&Span> = spans.iter().collect();
    order.sort_by_key(|s| s.cpus.len());
    for span in order {
        let mut demand = span.demand.max(0.0);
        let ran_on = span.ran_on.intersection(&span.cpus);
        if !ran_on.is_empty() {
            let each = demand / ran_on.len() as f64;
            for c in ran_on.iter() {
                if let Some(l) = left.get_mut(c) {
                    let take = l.min(each);
                    *l -= take;
                    demand -= take;
                }
            }
        }
        // The rest where its threads most likely also ran: the rest of the caches
        // they were seen in (the kernel moves threads inside a cache first), then
        // the rest of its set (a thread that moved since, or a sample read before).
        // A lifetime average is a demand over another span than the CPUs' busy
        // time: what its caches did not run is dropped, as spread over its whole
        // set it put a load's own work on the CPUs of the pinned program it had fled.
        let near: CpuSet = ran_on
            .iter()
            .filter_map(|&c| topo.cpu(c))
            .flat_map(|c| topo.llcs()[c.llc].cpus.iter().copied())
            .collect::<CpuSet>()
            .intersection(&span.cpus);
        demand -= spread(&mut left, &near, demand);
        if basis == Basis::Epoch || ran_on.is_empty() {
            spread(&mut left, &span.cpus, demand);
        }
    }
    let mut taken = CpuSet::new();
    for llc in topo.llcs() {
        let mut here: Vec<(CpuId, f64)> = llc
            .cpus
            .iter()
            .filter_map(|c| Some((*c, *left.get(c)?)))
            .collect();
        let excess: f64 = here.iter().map(|(_, e)| e.max(0.0)).sum();
        // With hysteresis: a count rises at A_CPU above it and falls at half a CPU
        // below it, so work that hovers at the edge does not re-plan every epoch.
        let was = llc.cpus.iter().filter(|c| before.contains(**c)).count();
        let up = (excess + 1.0 - A_CPU).floor() as usize;
        let down = (excess + 0.5).floor() as usize;
        let n = if up > was {
            up
        } else if down < was {
            down
        } else {
            was
        }
        .min(here.len());
        here.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        for (c, _) in here.into_iter().take(n) {
            taken.insert(c);
        }
    }
    taken
}

/// Takes up to `demand` off `left` over `cpus`, in proportion to what each has left;
/// returns what it took.
fn spread(left: &mut BTreeMap<CpuId, f64>, cpus: &CpuSet, demand: f64) -> f64 {
    let weight: f64 = cpus.iter().filter_map(|c| left.get(c)).sum();
    if demand <= TINY || weight <= TINY {
        return 0.0;
    }
    let share = (demand / weight).min(1.0);
    for c in cpus.iter() {
        if let Some(l) = left.get_mut(c) {
            *l -= *l * share;
        }
    }
    weight * share
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::topology;

    fn span(demand: f64, cpus: &[CpuId], ran_on: &[CpuId]) -> Span {
        Span {
            demand,
            cpus: CpuSet::from(cpus),
            ran_on: CpuSet::from(ran_on),
        }
    }

    fn busy(per_cpu: &[f64]) -> BTreeMap<CpuId, f64> {
        (0..).zip(per_cpu.iter().copied()).collect()
    }

    /// The case that hid: node 0's four CPUs run pinned unmanaged work, the managed
    /// load runs on node 1 and may run anywhere.
    #[test]
    fn a_node_of_pinned_work_beside_a_load_free_to_move_is_taken() {
        let t = topology::machine("2n:1l:4c:1t").expect("spec");
        let b = busy(&[1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
        let all: Vec<CpuId> = (0..8).collect();
        let taken = others_taken(
            &t,
            &b,
            &[span(1.0, &all, &[4])],
            Basis::Epoch,
            &CpuSet::new(),
        );
        assert_eq!(taken, [0, 1, 2, 3]);
        // Its lifetime average (a first pass) above what its CPU ran in the sample:
        // the rest is put on its own cache, not on the pinned work's.
        let both = busy(&[1.0, 1.0, 1.0, 1.0, 0.7, 0.3, 0.0, 0.0]);
        let first = [span(1.6, &all, &[4, 5])];
        assert_eq!(
            others_taken(&t, &both, &first, Basis::Lifetime, &CpuSet::new()),
            [0, 1, 2, 3]
        );
        // Its last CPU unknown (stale or unread), the rest of the estimate still
        // leaves node 1 with room for it.
        let taken = others_taken(
            &t,
            &b,
            &[span(1.0, &all, &[])],
            Basis::Epoch,
            &CpuSet::new(),
        );
        assert_eq!(taken.intersection(&CpuSet::from(vec![4, 5, 6, 7])).len(), 1);
        assert_eq!(taken.intersection(&CpuSet::from(vec![0, 1, 2, 3])).len(), 3);
    }

    /// Once confined to the busy node, the load's own work is told from the pinned
    /// work's by how much of the node is busy.
    #[test]
    fn a_load_sharing_a_node_with_pinned_work_finds_it_taken() {
        let t = topology::machine("2n:1l:4c:1t").expect("spec");
        let b = busy(&[1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
        let taken = others_taken(
            &t,
            &b,
            &[span(0.8, &[0, 1, 2, 3], &[2])],
            Basis::Epoch,
            &CpuSet::new(),
        );
        assert_eq!(taken.len(), 3, "3.2 CPUs' worth is others': {taken}");
        assert!(!taken.contains(2), "{taken}");
    }

    #[test]
    fn managed_work_alone_takes_nothing() {
        let t = topology::machine("2n:1l:2c:1t").expect("spec");
        // Two managed loads, one pinned, one free and sampled on the wrong CPU.
        let b = busy(&[1.0, 0.0, 1.0, 0.0]);
        let spans = [span(1.0, &[0], &[0]), span(1.0, &[0, 1, 2, 3], &[1])];
        assert!(others_taken(&t, &b, &spans, Basis::Epoch, &CpuSet::new()).is_empty());
        assert!(
            others_taken(&t, &BTreeMap::new(), &spans, Basis::Epoch, &CpuSet::new()).is_empty()
        );
    }

    #[test]
    fn three_quarters_of_a_cpu_is_a_cpu_and_a_crumb_is_none() {
        let t = topology::machine("2n:1l:2c:1t").expect("spec");
        let spread = busy(&[0.7, 0.7, 0.1, 0.1]);
        assert_eq!(
            others_taken(&t, &spread, &[], Basis::Epoch, &CpuSet::new()),
            [0]
        );
        let crumbs = busy(&[0.35, 0.35, 0.0, 0.0]);
        assert!(others_taken(&t, &crumbs, &[], Basis::Epoch, &CpuSet::new()).is_empty());
        let most = busy(&[0.45, 0.35, 0.0, 0.0]);
        assert_eq!(
            others_taken(&t, &most, &[], Basis::Epoch, &CpuSet::new()),
            [0]
        );
    }

    #[test]
    fn a_count_rises_at_three_quarters_and_falls_below_a_half() {
        let t = topology::machine("2n:1l:2c:1t").expect("spec");
        let at = |x: f64, before: &[CpuId]| {
            others_taken(
                &t,
                &busy(&[x, 0.0, 0.0, 0.0]),
                &[],
                Basis::Epoch,
                &CpuSet::from(before),
            )
            .len()
        };
        assert_eq!(at(0.6, &[]), 0);
        assert_eq!(at(0.8, &[]), 1);
        assert_eq!(at(0.6, &[1]), 1, "held while it hovers");
        assert_eq!(at(0.4, &[1]), 0);
        assert_eq!(at(0.4, &[2]), 0, "another cache's count is not this one's");
    }

    #[test]
    fn with_one_cache_there_is_no_other_place_and_nothing_is_taken() {
        let t = topology::machine("1n:1l:2c:1t").expect("spec");
        let b = busy(&[1.0, 1.0]);
        assert!(others_taken(
            &t,
            &b,
            &[span(1.0, &[0, 1], &[1])],
            Basis::Epoch,
            &CpuSet::new()
        )
        .is_empty());
    }

    #[test]
    fn offline_cpus_are_neither_room_nor_taken() {
        let t = topology::machine("2n:1l:2c:1t").expect("spec");
        let mut b = busy(&[1.0, 1.0, 0.0, 0.0]);
        b.remove(&3);
        assert_eq!(
            others_taken(&t, &b, &[], Basis::Epoch, &CpuSet::new()),
            [0, 1]
        );
    }
}
