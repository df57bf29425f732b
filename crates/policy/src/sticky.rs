//! Hard pins that only trade places stay where they are.
//!
//! A policy picks which cache each process shares; which CPU of it a process gets is
//! often the order it was met in. Two processes each pinned to one CPU of a cache, met
//! in the other order (after a restart, whose recovery gave them back every CPU and
//! left their threads where they ran), were planned onto each other's CPUs: two
//! moves, two cold caches, for the same placement. So under hard pinning, where two
//! placements of one LLC each want exactly the CPUs the other's process runs on, they
//! swap: the same CPUs are used, the same caches shared, and nothing moves.

use super::{Placement, Plan, Snapshot};
use numasched_model::topology::Topology;
use numasched_model::CpuSet;

/// The plan with placements that merely trade CPUs inside an LLC swapped back.
pub fn stay_put(topo: &Topology, snapshot: &Snapshot, plan: Plan) -> Plan {
    let mut placements = plan.placements;
    let current = |pid: u32| -> Option<&CpuSet> {
        snapshot
            .processes
            .iter()
            .find(|p| p.pid == pid)
            .map(|p| &p.current_cpus)
    };
    for i in 0..placements.len() {
        let Some(here) = current(placements[i].pid).filter(|c| !c.is_empty()) else {
            continue;
        };
        if *here == placements[i].cpus || !one_llc(topo, here, &placements[i].cpus) {
            continue;
        }
        let Some(j) = (0..placements.len()).find(|&j| {
            j != i
                && placements[j].cpus == *here
                && current(placements[j].pid) == Some(&placements[i].cpus)
        }) else {
            continue;
        };
        let (a, b) = (placements[i].cpus.clone(), placements[j].cpus.clone());
        placements[i] = Placement::new(topo, placements[i].pid, b, placements[i].reason.clone());
        placements[j] = Placement::new(topo, placements[j].pid, a, placements[j].reason.clone());
    }
    Plan { placements, ..plan }
}

/// Whether both sets lie in one and the same LLC.
fn one_llc(topo: &Topology, a: &CpuSet, b: &CpuSet) -> bool {
    let mut llcs = a
        .iter()
        .chain(b.iter())
        .map(|c| topo.cpu(*c).map(|c| c.llc));
    let Some(Some(first)) = llcs.next() else {
        return false;
    };
    llcs.all(|l| l == Some(first))
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::{topology, Process};

    fn at(pid: u32, cpus: &[u32]) -> Process {
        let mut p = Process::new(pid, "load");
        p.current_cpus = cpus.to_vec().into();
        p
    }

    fn snap(procs: Vec<Process>) -> Snapshot {
        Snapshot {
            topology: topology::machine("2n:1l:2c:1t").expect("spec"),
            processes: procs,
            others_busy: Default::default(),
        }
    }

    fn plan(s: &Snapshot, cpus: &[(u32, &[u32])]) -> Plan {
        Plan::new(
            "test",
            cpus.iter()
                .map(|(pid, c)| Placement::new(&s.topology, *pid, c.iter().copied(), "r".into()))
                .collect(),
        )
    }

    #[test]
    fn two_pins_that_would_trade_places_stay() {
        let s = snap(vec![at(10, &[1]), at(11, &[0])]);
        let out = stay_put(&s.topology, &s, plan(&s, &[(10, &[0]), (11, &[1])]));
        assert_eq!(out, plan(&s, &[(10, &[1]), (11, &[0])]));
    }

    #[test]
    fn real_moves_are_left_as_planned() {
        // Across caches (the policy's choice), onto a CPU no one runs on, or where the
        // other does not run on the first one's CPUs: not a mere trade.
        for (procs, planned) in [
            (
                vec![at(10, &[2]), at(11, &[0])],
                [(10, &[0][..]), (11, &[2][..])],
            ),
            (
                vec![at(10, &[1]), at(11, &[3])],
                [(10, &[0][..]), (11, &[1][..])],
            ),
            (
                vec![at(10, &[1]), at(11, &[])],
                [(10, &[0][..]), (11, &[1][..])],
            ),
        ] {
            let s = snap(procs);
            let p = plan(&s, &planned);
            assert_eq!(stay_put(&s.topology, &s, p.clone()), p);
        }
    }
}
