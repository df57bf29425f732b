//! Not moving what does not need to move. A re-plan often gives a process another core
//! of the same LLC than the one it has: for the policies that is the same decision
//! (same cache, same node, same distance to its memory), for the process it is a
//! migration that costs a cold L1/L2 for nothing. So when the new plan puts a process
//! on the same LLCs with as many CPUs as numasched last gave it, it keeps its CPUs —
//! unless keeping them would crowd a CPU beyond what the plan put there (its old CPU
//! went to someone else in the plan), in which case it takes the plan's.
//!
//! Pure: the daemon passes what it last applied per pid.

use std::collections::{BTreeSet, HashMap, HashSet};

use numasched_model::topology::{CpuId, Topology};
use numasched_model::CpuSet;
use numasched_model::Plan;

fn llcs(topo: &Topology, cpus: &[CpuId]) -> Option<BTreeSet<usize>> {
    cpus.iter()
        .map(|c| topo.cpu(*c).map(|cpu| cpu.llc))
        .collect()
}

fn load(placements: impl Iterator<Item = CpuSet>) -> HashMap<CpuId, usize> {
    let mut m = HashMap::new();
    for cpus in placements {
        for c in cpus {
            *m.entry(c).or_insert(0) += 1;
        }
    }
    m
}

/// Rewrites `plan` so processes keep their applied CPUs where that is equivalent (see
/// the module doc). Returns the pids kept.
pub fn stabilise(plan: &mut Plan, applied: &HashMap<u32, CpuSet>, topo: &Topology) -> Vec<u32> {
    let mut keep: HashSet<u32> = plan
        .placements
        .iter()
        .filter(|pl| !pl.cpus.is_empty())
        .filter_map(|pl| {
            let old = applied.get(&pl.pid)?;
            let same = old.len() == pl.cpus.len()
                && *old != pl.cpus
                && llcs(topo, old).is_some_and(|o| Some(o) == llcs(topo, &pl.cpus));
            same.then_some(pl.pid)
        })
        .collect();
    let planned = load(plan.placements.iter().map(|pl| pl.cpus.clone()));
    loop {
        let chosen = |pid: u32, cpus: &CpuSet| -> CpuSet {
            if keep.contains(&pid) {
                applied.get(&pid).cloned().unwrap_or_default()
            } else {
                cpus.clone()
            }
        };
        let now = load(plan.placements.iter().map(|pl| chosen(pl.pid, &pl.cpus)));
        let crowded: HashSet<CpuId> = now
            .iter()
            .filter(|(c, n)| **n > planned.get(c).copied().unwrap_or(0))
            .map(|(c, _)| *c)
            .collect();
        let before = keep.len();
        keep.retain(|pid| {
            applied
                .get(pid)
                .is_some_and(|old| !old.iter().any(|c| crowded.contains(c)))
        });
        if keep.len() == before {
            break;
        }
    }
    let mut kept = Vec::new();
    for pl in &mut plan.placements {
        if keep.contains(&pl.pid) {
            if let Some(old) = applied.get(&pl.pid) {
                pl.reason = format!(
                    "{}; kept on CPUs {} (same LLC as planned {})",
                    pl.reason, old, pl.cpus
                );
                pl.cpus = old.clone();
                kept.push(pl.pid);
            }
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::Placement;
    use proptest::prelude::*;

    fn topo() -> Topology {
        // Two nodes, one LLC each, CPUs 0-3 and 4-7.
        numasched_model::topology::spec::parse("2n:1l:4c:1t").expect("spec")
    }

    fn plan(t: &Topology, v: &[(u32, CpuSet)]) -> Plan {
        Plan::new(
            "t",
            v.iter()
                .map(|(pid, cpus)| Placement::new(t, *pid, cpus.clone(), "planned".into()))
                .collect(),
        )
    }

    #[test]
    fn a_core_swap_inside_an_llc_is_not_carried_out() {
        let t = topo();
        let mut p = plan(&t, &[(1, vec![1].into()), (2, vec![0].into())]);
        let applied = HashMap::from([(1, vec![0].into()), (2, vec![1].into())]);
        let kept = stabilise(&mut p, &applied, &t);
        assert_eq!(kept, vec![1, 2]);
        assert_eq!(p.placements[0].cpus, vec![0]);
        assert_eq!(p.placements[1].cpus, vec![1]);
        assert!(p.placements[0].reason.contains("kept on CPUs 0"));
    }

    #[test]
    fn a_move_to_another_llc_is_carried_out() {
        let t = topo();
        let mut p = plan(&t, &[(1, vec![4].into())]);
        let applied = HashMap::from([(1, vec![0].into())]);
        assert!(stabilise(&mut p, &applied, &t).is_empty());
        assert_eq!(p.placements[0].cpus, vec![4]);
    }

    #[test]
    fn an_old_cpu_given_to_a_newcomer_is_given_up() {
        let t = topo();
        // 1 had CPU 0; the plan gives CPU 0 to newcomer 3 and CPU 2 to 1.
        let mut p = plan(&t, &[(1, vec![2].into()), (3, vec![0].into())]);
        let applied = HashMap::from([(1, vec![0].into())]);
        assert!(stabilise(&mut p, &applied, &t).is_empty());
        assert_eq!(p.placements[0].cpus, vec![2]);
    }

    proptest! {
        /// Whatever was applied before, the result never puts more processes on a CPU
        /// than the plan did, and every process stays on the LLCs the plan chose.
        #[test]
        fn never_crowds_and_never_changes_llcs(
            planned in proptest::collection::vec(0u32..8, 1..8),
            old in proptest::collection::vec(proptest::option::of(0u32..8), 1..8),
        ) {
            let t = topo();
            let v: Vec<(u32, CpuSet)> =
                planned.iter().enumerate().map(|(i, c)| (i as u32, CpuSet::from([*c]))).collect();
            let applied: HashMap<u32, CpuSet> = old
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.map(|c| (i as u32, CpuSet::from([c]))))
                .collect();
            let before = plan(&t, &v);
            let mut after = before.clone();
            stabilise(&mut after, &applied, &t);
            let lb = load(before.placements.iter().map(|p| p.cpus.clone()));
            let la = load(after.placements.iter().map(|p| p.cpus.clone()));
            for (c, n) in &la {
                prop_assert!(*n <= lb.get(c).copied().unwrap_or(0));
            }
            for (a, b) in after.placements.iter().zip(&before.placements) {
                prop_assert_eq!(llcs(&t, &a.cpus), llcs(&t, &b.cpus));
            }
        }
    }
}
