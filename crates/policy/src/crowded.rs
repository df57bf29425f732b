//! Hard pins kept off CPUs that others' pinned work keeps busy.
//!
//! A policy places the processes it is shown, and counts a CPU none of them holds as
//! free. It may not be: an unmanaged process pinned there, interrupts (the snapshot's
//! `others_pinned`). At the soft granularities the kernel balances inside the set and
//! finds the idle CPU itself. Pinned to exactly its CPUs a process cannot, and shares
//! them for good: a `taskset -c 0` neighbour halved a managed load that `--pin cpu`
//! put on CPU 0 of an otherwise idle machine.
//!
//! Only work the kernel cannot move counts (the snapshot holds no other): work free to
//! move the kernel moves off a pinned process's CPU, which loses nothing to it that it
//! would not lose unmanaged. A CPU is *crowded* when others' pinned work there exceeds
//! the least of its LLC by [`CROWDED`]: work pinned evenly over a cache (interrupts
//! spread over it, a program confined to it) is no reason to prefer one of its CPUs.
//! Under hard pinning
//! - each planned CPU that is crowded is swapped for a CPU of the same LLC that no
//!   placement holds and that others leave idler by at least [`CROWDED`]: what the
//!   policy chose (the cache, the node) stays, only the CPU inside it changes;
//! - a crowded CPU that stays planned (nothing idler is free in its LLC) time-shares,
//!   like one the plan gives to two processes (see [`crate::granularity`]).
//!
//! Without a measurement (the simulator, a first scan) nothing changes.

use std::collections::BTreeMap;

use super::{Placement, Plan, Snapshot};
use numasched_model::topology::{CpuId, Topology};
use numasched_model::CpuSet;

/// CPUs' worth of others' pinned work, above the least of its LLC, from which a CPU
/// counts as crowded: a pinned thread there loses about as much, worth a move inside
/// the same cache. (Beside a busy neighbour a pinned load reads 0.5: the two share the
/// CPU.)
pub const CROWDED: f64 = 0.2;

/// How far others' work on `cpu` exceeds the least on a CPU of its LLC: the share of
/// it the kernel has not spread, so cannot (see the module doc).
pub fn excess(topo: &Topology, others: &BTreeMap<CpuId, f64>, cpu: CpuId) -> f64 {
    let Some(llc) = topo.cpu(cpu).map(|c| c.llc) else {
        return 0.0;
    };
    let least = topo.llcs()[llc]
        .cpus
        .iter()
        .map(|&d| others_on(others, d))
        .fold(f64::INFINITY, f64::min);
    (others_on(others, cpu) - least).max(0.0)
}

/// Whether `cpu` is crowded (see [`CROWDED`]).
pub fn is_crowded(topo: &Topology, others: &BTreeMap<CpuId, f64>, cpu: CpuId) -> bool {
    excess(topo, others, cpu) >= CROWDED
}

/// Others' work on `cpu`, CPUs' worth.
pub fn others_on(others: &BTreeMap<CpuId, f64>, cpu: CpuId) -> f64 {
    others.get(&cpu).copied().unwrap_or(0.0)
}

/// The plan with each crowded planned CPU moved to an idler free one of its LLC (see
/// the module doc).
pub fn away_from_others(topo: &Topology, snapshot: &Snapshot, plan: Plan) -> Plan {
    let others = &snapshot.others_pinned;
    if others.is_empty() {
        return plan;
    }
    let load = |c: CpuId| others_on(others, c);
    // Held by some placement (a CPU moved from stays held: crowded, it is no one's
    // better choice).
    let mut held: CpuSet = plan
        .placements
        .iter()
        .flat_map(|pl| pl.cpus.iter().copied())
        .collect();
    let placements = plan
        .placements
        .into_iter()
        .map(|pl| {
            let Some(p) = snapshot.processes.iter().find(|p| p.pid == pl.pid) else {
                return pl;
            };
            let allowed = p.may_run_on(topo);
            let mut cpus = pl.cpus.clone();
            let mut moves = Vec::new();
            for &c in pl.cpus.iter() {
                if !is_crowded(topo, others, c) {
                    continue;
                }
                let Some(llc) = topo.cpu(c).map(|cpu| cpu.llc) else {
                    continue;
                };
                let idler = topo.llcs()[llc]
                    .cpus
                    .iter()
                    .copied()
                    .filter(|&d| {
                        allowed.contains(d) && !held.contains(d) && load(d) + CROWDED <= load(c)
                    })
                    .min_by(|a, b| load(*a).total_cmp(&load(*b)).then(a.cmp(b)));
                if let Some(d) = idler {
                    held.insert(d);
                    cpus = cpus.difference(&CpuSet::from(vec![c]));
                    cpus.insert(d);
                    moves.push(format!(
                        "CPU {c} busy with others' pinned work ({:.1} CPUs): CPU {d} instead",
                        load(c)
                    ));
                }
            }
            if moves.is_empty() {
                return pl;
            }
            let reason = format!("{}; {}", pl.reason, moves.join("; "));
            Placement::new(topo, pl.pid, cpus, reason)
        })
        .collect();
    Plan { placements, ..plan }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::{topology, Process};

    fn snap(others: &[(CpuId, f64)], procs: Vec<Process>) -> Snapshot {
        Snapshot {
            topology: topology::machine("1n:1l:4c:1t").expect("spec"),
            processes: procs,
            others_pinned: others.iter().copied().collect(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        }
    }

    fn plan(s: &Snapshot, cpus: &[(u32, &[CpuId])]) -> Plan {
        let placements = cpus
            .iter()
            .map(|(pid, c)| Placement::new(&s.topology, *pid, c.iter().copied(), "planned".into()))
            .collect();
        Plan::new("test", placements)
    }

    fn cpus_of(p: &Plan, pid: u32) -> Vec<CpuId> {
        let pl = p
            .placements
            .iter()
            .find(|pl| pl.pid == pid)
            .expect("placed");
        pl.cpus.iter().copied().collect()
    }

    #[test]
    fn a_pin_on_a_cpu_others_keep_busy_moves_to_an_idle_one_of_its_llc() {
        let s = snap(
            &[(0, 1.0), (2, 0.7)],
            vec![Process::new(10, "a"), Process::new(11, "b")],
        );
        let out = away_from_others(&s.topology, &s, plan(&s, &[(10, &[0]), (11, &[1])]));
        assert_eq!(cpus_of(&out, 10), vec![3], "CPU 2 is busy too; 1 is held");
        assert_eq!(cpus_of(&out, 11), vec![1]);
        assert!(out.placements[0]
            .reason
            .contains("CPU 0 busy with others' pinned work (1.0 CPUs)"));
    }

    #[test]
    fn nothing_measured_nothing_idler_or_not_allowed_leaves_the_plan_as_it_is() {
        let procs = || vec![Process::new(10, "a")];
        let none = snap(&[], procs());
        let p = plan(&none, &[(10, &[0])]);
        assert_eq!(away_from_others(&none.topology, &none, p.clone()), p);
        // Every other CPU as busy, or less busy by less than CROWDED.
        let s = snap(&[(0, 1.0), (1, 0.85), (2, 0.9), (3, 1.0)], procs());
        let p = plan(&s, &[(10, &[0])]);
        assert_eq!(away_from_others(&s.topology, &s, p.clone()), p);
        // Someone else pinned it to CPUs 0 and 1.
        let mut pinned = Process::new(10, "a");
        pinned.allowed_cpus = Some(vec![0, 1].into());
        let s = snap(&[(0, 1.0), (1, 0.9)], vec![pinned]);
        let p = plan(&s, &[(10, &[0])]);
        assert_eq!(away_from_others(&s.topology, &s, p.clone()), p);
    }

    #[test]
    fn work_the_kernel_spread_evenly_crowds_no_cpu() {
        // Others' busy processes free to move: the kernel balances them, so every CPU
        // reads about the same, and a pin beside them costs nothing unmanaged would
        // not. (The test suite running beside the daemon's tests is such load.)
        let s = snap(
            &[(0, 0.8), (1, 0.7), (2, 0.8), (3, 0.75)],
            vec![Process::new(10, "a")],
        );
        assert!((0..4).all(|c| !is_crowded(&s.topology, &s.others_pinned, c)));
        let p = plan(&s, &[(10, &[0])]);
        assert_eq!(away_from_others(&s.topology, &s, p.clone()), p);
        // One CPU holding more than the rest by CROWDED: pinned there.
        let s = snap(&[(0, 1.0), (1, 0.7), (2, 0.7), (3, 0.7)], vec![]);
        assert!(is_crowded(&s.topology, &s.others_pinned, 0));
        assert!(!is_crowded(&s.topology, &s.others_pinned, 1));
    }

    #[test]
    fn a_move_stays_inside_the_llc_the_policy_chose() {
        let s = Snapshot {
            topology: topology::machine("2n:1l:2c:1t").expect("spec"),
            processes: vec![Process::new(10, "a")],
            others_pinned: [(2, 1.0), (3, 1.0)].into_iter().collect(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let p = plan(&s, &[(10, &[2])]);
        assert_eq!(
            away_from_others(&s.topology, &s, p.clone()),
            p,
            "CPUs 0-1 are another LLC"
        );
    }
}
