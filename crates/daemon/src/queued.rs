//! CPUs others' work holds, as a confined process's run queue shows it.
//!
//! The busy-time estimate (`numasched_linux::observe::others`) cannot see work that
//! arrives on a node where numasched already confined a process: every CPU there reads
//! busy, and the process's own share hides how many threads queue behind it (a program
//! pinned to node 0's two CPUs beside a managed load confined there leaves the load two
//! thirds of a CPU and reads as one CPU of others' work, so the load keeps its "free"
//! CPU). The load's run-queue delay shows what it lost. Where it waits for a CPU two
//! epochs running (see `need`'s `lasting`) while its own threads fit its set, and what
//! it still runs is less than it would run away from its memory (its share of the time
//! under 1 / NUMA penalty, the prior's where it is unknown), the set holds too
//! little room for it: so many more CPUs of it are taken that the managed processes
//! confined there, but for it, still fit. The policy then moves it to a node with room
//! if one has, and keeps it where it is otherwise; a process that loses less by
//! waiting than it would by running remote stays.
//!
//! Not where numasched packed the set itself (the managed processes confined to it
//! need more CPUs than it has: they wait for each other), and not on a machine of one
//! LLC (there is no other place). Pure: the engine passes what it read.

use numasched_model::snapshot::Process;
use numasched_model::topology::Topology;
use numasched_model::CpuSet;

/// Threads' worth of waiting below which a set is not judged: a thread that waits a
/// quarter of the time for a CPU has lost more than a typical remote penalty costs.
pub const WAITING: f64 = 0.25;

/// One managed process that numasched confined to a set narrower than it may use.
#[derive(Debug, Clone, PartialEq)]
pub struct Narrowed {
    /// The set numasched gave it.
    pub set: CpuSet,
    /// CPUs' worth it ran over the last epoch.
    pub used: f64,
    /// Threads that waited for a CPU, on average, in each of the last two epochs (the
    /// lesser: one epoch of it is as often a burst, or the daemon's own scan).
    pub waiting: f64,
    /// CPUs it is sized for.
    pub slots: usize,
    /// Its run time remote over local, as the policies rank it.
    pub numa_penalty: f64,
}

impl Narrowed {
    /// `p`, confined to `set`, having run `used` CPUs' worth over the last epoch while
    /// `waiting` threads' worth of it queued in each of the last two. Its penalty is the one the policies rank
    /// it by: for a process nothing characterised, the prior. (It was 1, "leaving costs
    /// it nothing", so a blind load that queued behind the daemon's own scan was sent
    /// away from its memory, which the policy then brought it back to.)
    pub fn of(p: &Process, topo: &Topology, set: CpuSet, used: f64, waiting: f64) -> Narrowed {
        Narrowed {
            set,
            used,
            waiting,
            slots: p.slots(),
            numa_penalty: p.character_on(topo).numa_penalty,
        }
    }
}

/// `taken` (the busy-time estimate) with the CPUs the run queues show held added.
pub fn held(topo: &Topology, taken: &CpuSet, confined: &[Narrowed]) -> CpuSet {
    let mut out = taken.clone();
    if topo.llcs().len() < 2 {
        return out;
    }
    for p in confined {
        if p.waiting < WAITING || p.slots > p.set.len() {
            continue;
        }
        let progress = p.used / (p.used + p.waiting);
        if progress >= 1.0 / p.numa_penalty.max(1.0) {
            continue;
        }
        let beside: usize = confined
            .iter()
            .filter(|q| !std::ptr::eq(*q, p) && q.set.iter().any(|c| p.set.contains(*c)))
            .map(|q| q.slots)
            .sum();
        if beside + p.slots > p.set.len() {
            continue;
        }
        // Room left for the others confined here, none for it.
        let want = p.set.len() - beside;
        let mut have = p.set.iter().filter(|c| out.contains(**c)).count();
        for &c in p.set.iter() {
            if have >= want {
                break;
            }
            if out.insert(c) {
                have += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::topology;

    fn narrowed(set: &[u32], used: f64, waiting: f64, np: f64) -> Narrowed {
        Narrowed {
            set: CpuSet::from(set),
            used,
            waiting,
            slots: 1,
            numa_penalty: np,
        }
    }

    /// The case the busy time cannot show: two pinned threads on node 0's two CPUs
    /// and the managed load confined there run two thirds of the time each.
    #[test]
    fn a_load_queueing_behind_others_on_its_node_finds_it_held() {
        let t = topology::machine("2n:1l:2c:1t").expect("spec");
        let estimate = CpuSet::from(vec![0]);
        let load = narrowed(&[0, 1], 0.67, 0.33, 1.4);
        assert_eq!(held(&t, &estimate, std::slice::from_ref(&load)), [0, 1]);
        // A load that would lose more remote than it loses waiting stays.
        let far = Narrowed {
            numa_penalty: 1.6,
            ..load.clone()
        };
        assert_eq!(held(&t, &estimate, &[far]), [0]);
        // No penalty (1): leaving costs it nothing.
        let none = Narrowed {
            numa_penalty: 1.0,
            ..load.clone()
        };
        assert_eq!(held(&t, &estimate, &[none]), [0, 1]);
        // Waiting a little is noise.
        assert_eq!(
            held(&t, &estimate, &[narrowed(&[0, 1], 0.9, 0.1, 1.4)]),
            [0]
        );
    }

    #[test]
    fn a_set_numasched_packed_itself_is_not_held_by_others() {
        let t = topology::machine("2n:1l:2c:1t").expect("spec");
        // Three managed loads planned onto two CPUs wait for each other.
        let three: Vec<Narrowed> = (0..3).map(|_| narrowed(&[0, 1], 0.67, 0.33, 1.4)).collect();
        assert!(held(&t, &CpuSet::new(), &three).is_empty());
        // Two fit: the one that waits leaves room for the other.
        let two = [
            narrowed(&[0, 1], 0.5, 0.5, 1.4),
            narrowed(&[0, 1], 1.0, 0.0, 1.4),
        ];
        assert_eq!(held(&t, &CpuSet::new(), &two).len(), 1);
    }

    /// What is unknown is ranked by the prior, as the policies rank it: a blind load
    /// that loses less by waiting than the prior says it would lose away stays.
    #[test]
    fn an_uncharacterised_load_weighs_waiting_against_the_prior() {
        let t = topology::machine("2n:1l:4c:1t").expect("spec");
        let prior = numasched_model::character::prior::Prior::for_topology(&t).numa_penalty;
        assert!(
            prior > 1.05,
            "a two-node machine has a remote penalty: {prior}"
        );
        let mut blind = Process::new(7, "blind");
        blind.threads = 4;
        blind.cpu_demand = 4.0;
        let node0 = || CpuSet::from(vec![0, 1, 2, 3]);
        let n = Narrowed::of(&blind, &t, node0(), 4.0, 0.0);
        assert_eq!((n.numa_penalty, n.slots), (prior, 4));
        // Four threads waiting just over the threshold between them, so that they
        // still run just over 1 / prior of the time.
        let waiting = WAITING * 1.01;
        let used = waiting / (prior - 1.0) * 1.05;
        assert!(used < 4.0, "the case fits four threads: {used}");
        let load = Narrowed::of(&blind, &t, node0(), used, waiting);
        assert!(held(&t, &CpuSet::new(), &[load]).is_empty());
        // Known to lose nothing away, the same load leaves.
        let mut indifferent = blind.clone();
        indifferent.numa_penalty = Some(1.0);
        let load = Narrowed::of(&indifferent, &t, node0(), used, waiting);
        assert!(!held(&t, &CpuSet::new(), &[load]).is_empty());
    }

    #[test]
    fn with_one_cache_there_is_nowhere_else() {
        let t = topology::machine("1n:1l:2c:1t").expect("spec");
        let load = narrowed(&[0, 1], 0.5, 0.5, 1.4);
        assert!(held(&t, &CpuSet::new(), &[load]).is_empty());
    }
}
