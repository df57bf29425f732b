//! Hard pins stay where the kernel runs their processes.
//!
//! A policy picks which cache each process shares; which CPU of it a process gets is
//! often the order it was met in. Pinned to exactly that CPU, a process is moved
//! there for nothing, and may be moved onto trouble the policy cannot see:
//! - two processes each pinned to one CPU of a cache, met in the other order (after a
//!   restart, whose recovery gave them back every CPU and left their threads where
//!   they ran), were planned onto each other's CPUs: two moves, two cold caches, for
//!   the same placement;
//! - a load the kernel ran on CPU 1, beside a neighbour someone pinned to CPU 0, was
//!   pinned to CPU 0 when its first hard pin was made (0.5x until the next plan saw
//!   the neighbour: a first scan has no measure of others' work).
//!
//! So under hard pinning, inside each LLC, what the policy chose is kept and the CPUs
//! are the ones already in use: two placements that each want exactly the CPUs the
//! other's process runs on swap, and a planned CPU the process does not run on is
//! traded for one it does run on that no placement holds, on a core no other planned
//! CPU uses (a policy that spread threads over cores keeps them spread). The same CPUs
//! are used, the same caches shared, and nothing moves that need not. Where the
//! kernel runs a process is where its balancing found room; a CPU that others' work
//! crowds is still left afterwards ([`crate::crowded`]).

use std::collections::BTreeMap;

use super::{Placement, Plan, Snapshot};
use numasched_model::topology::{CpuId, Topology};
use numasched_model::CpuSet;

/// The plan with each hard pin on the CPUs of its LLC its process already runs on,
/// where the plan leaves them free (see the module doc).
pub fn stay_put(topo: &Topology, snapshot: &Snapshot, plan: Plan) -> Plan {
    let traded = swap_back(topo, snapshot, plan.placements);
    Plan {
        placements: onto_own_cpus(topo, snapshot, traded),
        ..plan
    }
}

/// Placements that merely trade CPUs inside an LLC, swapped back.
fn swap_back(
    topo: &Topology,
    snapshot: &Snapshot,
    mut placements: Vec<Placement>,
) -> Vec<Placement> {
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
    placements
}

/// Each planned CPU its process does not run on, traded for one of the same LLC it
/// does run on, that no placement holds and whose core no other planned CPU uses.
fn onto_own_cpus(
    topo: &Topology,
    snapshot: &Snapshot,
    mut placements: Vec<Placement>,
) -> Vec<Placement> {
    // How many placements hold each CPU (a CPU planned twice is time-shared).
    let mut held: BTreeMap<CpuId, usize> = BTreeMap::new();
    for c in placements.iter().flat_map(|pl| pl.cpus.iter()) {
        *held.entry(*c).or_default() += 1;
    }
    for pl in &mut placements {
        let Some(p) = snapshot.processes.iter().find(|p| p.pid == pl.pid) else {
            continue;
        };
        let runs_on = p.current_cpus.intersection(&p.may_run_on(topo));
        let mut cpus = pl.cpus.clone();
        for &c in pl.cpus.iter().filter(|c| !runs_on.contains(**c)) {
            let Some(llc) = topo.cpu(c).map(|cpu| cpu.llc) else {
                continue;
            };
            // Cores of every planned CPU but the one traded away.
            let busy_core = |core: usize| {
                held.iter().any(|(&h, &n)| {
                    n > 0 && h != c && topo.cpu(h).is_some_and(|cpu| cpu.core == core)
                })
            };
            let Some(&to) = runs_on.iter().find(|&&d| {
                held.get(&d).copied().unwrap_or(0) == 0
                    && topo
                        .cpu(d)
                        .is_some_and(|cpu| cpu.llc == llc && !busy_core(cpu.core))
            }) else {
                continue;
            };
            if let Some(n) = held.get_mut(&c) {
                *n -= 1;
            }
            *held.entry(to).or_default() += 1;
            cpus = cpus.difference(&[c].into()).union(&[to].into());
        }
        if cpus != pl.cpus {
            *pl = Placement::new(topo, pl.pid, cpus, pl.reason.clone());
        }
    }
    placements
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
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
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

    #[test]
    fn a_pin_takes_the_free_cpu_its_process_runs_on() {
        // The kernel ran it on CPU 1 (beside a neighbour pinned to CPU 0, say); the
        // policy, knowing nothing of that, planned CPU 0.
        let s = snap(vec![at(10, &[1])]);
        let out = stay_put(&s.topology, &s, plan(&s, &[(10, &[0])]));
        assert_eq!(out, plan(&s, &[(10, &[1])]));
        // Two CPUs planned, one of them where it runs: only the other is traded.
        let s = snap(vec![at(10, &[1, 3])]);
        let out = stay_put(&s.topology, &s, plan(&s, &[(10, &[0, 2])]));
        assert_eq!(out, plan(&s, &[(10, &[1, 3])]));
    }

    #[test]
    fn a_pin_keeps_off_cpus_held_cores_used_or_pins_refused() {
        // Each planned onto the CPU the other runs on: swapped back (not a move onto
        // a held CPU).
        let s = snap(vec![at(10, &[1]), at(11, &[0])]);
        let p = plan(&s, &[(10, &[0]), (11, &[1])]);
        let out = stay_put(&s.topology, &s, p);
        assert_eq!(out, plan(&s, &[(10, &[1]), (11, &[0])]), "the trade");
        // CPU 1 is planned for 11 (which runs elsewhere): 10 keeps CPU 0.
        let s = snap(vec![at(10, &[1]), at(11, &[2])]);
        let p = plan(&s, &[(10, &[0]), (11, &[1])]);
        assert_eq!(stay_put(&s.topology, &s, p.clone()), p, "CPU 1 is 11's");
        // Two threads per core: CPU 2 is the sibling of CPU 0, which 11 holds.
        let smt = Snapshot {
            topology: topology::machine("1n:1l:2c:2t").expect("spec"),
            processes: vec![at(10, &[2]), at(11, &[0])],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let core = |c: u32| smt.topology.cpu(c).map(|cpu| cpu.core);
        assert_eq!(core(0), core(2), "CPUs 0 and 2 are one core's threads");
        let p = plan(&smt, &[(10, &[1]), (11, &[0])]);
        assert_eq!(
            stay_put(&smt.topology, &smt, p.clone()),
            p,
            "core 0 is 11's"
        );
        // A foreign pin that no longer allows where it ran.
        let mut pinned = at(10, &[1]);
        pinned.allowed_cpus = Some([0].into());
        let s = snap(vec![pinned]);
        let p = plan(&s, &[(10, &[0])]);
        assert_eq!(
            stay_put(&s.topology, &s, p.clone()),
            p,
            "pinned away from 1"
        );
    }
}
