//! N-MASS: NUMA-Multicore-Aware Scheduling Scheme (Majo & Gross, ISMM 2011).
//!
//! Start from the maximum-local mapping ([`super::maxlocal`]), then refine for cache
//! contention. The LLC pressure of a cache is the sum of the MPKI of the processes on
//! it, a remote process counting `MPKI · np`. While pressures are unbalanced, consider
//! moving the lowest-penalty process of a cache (the back of its list) to a free core of
//! another cache; the move costs its `MPKI · np` at the destination. It is made only if
//! the destination has room, the move reduces the imbalance, and the destination stays
//! below THRESHOLD (60 MPKI on the Nehalem E5520, where the QPI link saturated). Of the
//! acceptable moves the cheapest is taken; stop when none is acceptable.
//!
//! Generalisation beyond two single-LLC nodes, which reduces to the paper on that
//! machine:
//! - the caches are all LLC domains; imbalance is the variance of their pressures, so
//!   with two caches "reduces the imbalance" is exactly `|P₀ − P₁|` shrinking;
//! - a move may not overshoot: the destination must end no more pressured than the
//!   source. Otherwise a streaming program could be sent remote only to swap which
//!   cache is the hot one (e.g. 42/10.6 → 20/39.2), paying its NUMA penalty for nothing;
//! - sources are tried from the most pressured cache down, so the hottest cache sheds
//!   load first; destinations may be in the same node (cost `MPKI`, no locality lost)
//!   or remote (cost `MPKI · penalty`, the penalty scaled by SLIT distance, see
//!   [`super::locality`]);
//! - only processes whose CPUs all lie in one LLC are moved, and a group moves only
//!   into an LLC with enough free CPUs for all its threads; pins restrict destinations;
//! - every accepted move strictly lowers the variance, so the loop terminates; a cap on
//!   moves guards against floating-point ties.

use crate::alloc::AllowedMask;
use crate::maxlocal::{self, Layout};
use crate::Policy;
use numasched_model::plan::Plan;
use numasched_model::snapshot::Snapshot;

/// THRESHOLD of the paper: LLC pressure (Σ MPKI) above which the Nehalem's cross-chip
/// interconnect saturated.
pub const THRESHOLD_MPKI: f64 = 60.0;

#[derive(Debug, Clone, PartialEq)]
pub struct NmassParams {
    pub threshold: f64,
    /// Ignore the snapshot's measured penalties and estimate them from MPKI with the
    /// published regression (the paper's "np from MPKI" variant).
    pub regression_penalty: bool,
}

impl Default for NmassParams {
    fn default() -> Self {
        NmassParams {
            threshold: THRESHOLD_MPKI,
            regression_penalty: false,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Nmass {
    pub params: NmassParams,
}

impl Policy for Nmass {
    fn name(&self) -> &str {
        if self.params.regression_penalty {
            "nmass-regression"
        } else {
            "nmass"
        }
    }

    fn plan(&self, snapshot: &Snapshot) -> Plan {
        if self.params.regression_penalty {
            let mut s = snapshot.clone();
            for p in &mut s.processes {
                if p.mpki.is_some() {
                    p.numa_penalty = None;
                }
            }
            return plan_with(&s, &self.params, self.name());
        }
        plan_with(snapshot, &self.params, self.name())
    }
}

fn plan_with(snapshot: &Snapshot, params: &NmassParams, name: &str) -> Plan {
    let mut layout = maxlocal::place(snapshot);
    let mut reasons = layout.why.clone();
    for m in refine(&mut layout, params.threshold) {
        reasons[m.process] = m.describe(&layout);
    }
    layout.into_plan(name, reasons)
}

/// One accepted refinement move.
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    pub process: usize,
    pub from_llc: usize,
    pub to_llc: usize,
    pub before: (f64, f64),
    pub after: (f64, f64),
    pub threshold: f64,
}

impl Move {
    fn describe(&self, layout: &Layout) -> String {
        let topo = layout.topology();
        let node = |llc: usize| topo.nodes()[topo.llcs()[llc].node].id;
        format!(
            "moved for cache contention from LLC {} (node {}) to LLC {} (node {}): \
             pressure {:.1}/{:.1} -> {:.1}/{:.1} MPKI, below threshold {:.0} (np {:.2})",
            self.from_llc,
            node(self.from_llc),
            self.to_llc,
            node(self.to_llc),
            self.before.0,
            self.before.1,
            self.after.0,
            self.after.1,
            self.threshold,
            layout.np[self.process],
        )
    }
}

/// The cache-aware refinement step. Returns the moves made, in order; a process moved
/// twice appears twice (its last entry is where it ended).
///
/// The state (pressures, members per LLC, contribution per process and node) is kept
/// incrementally, so a move costs O(LLCs² + members) rather than a rescan of everyone:
/// the daemon re-plans every epoch and thousands of processes must stay cheap.
pub fn refine(layout: &mut Layout, threshold: f64) -> Vec<Move> {
    let topo = layout.topology();
    let n_llc = topo.llcs().len();
    let mut moves = Vec::new();
    if n_llc < 2 {
        return moves;
    }
    let n = layout.cpus.len();
    let max_moves = 4 * n + 8;
    let masks: Vec<AllowedMask> = layout
        .snapshot
        .processes
        .iter()
        .map(|p| AllowedMask::of(topo, p))
        .collect();
    let contrib: Vec<Vec<f64>> = (0..n)
        .map(|i| {
            (0..topo.nodes().len())
                .map(|at| layout.contribution(i, at))
                .collect()
        })
        .collect();
    let mut pressure = layout.pressures();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n_llc];
    for (i, mask) in masks.iter().enumerate() {
        if let Some(l) = layout.llc_of(i) {
            let pinned_here = !mask.is_all()
                && topo
                    .cpus()
                    .iter()
                    .all(|c| !mask.contains(c.index) || c.llc == l);
            if !pinned_here {
                members[l].push(i);
            }
        }
    }
    let node_of_llc = |l: usize| topo.llcs()[l].node;
    let len = n_llc as f64;
    while moves.len() < max_moves {
        let sum: f64 = pressure.iter().sum();
        let sq: f64 = pressure.iter().map(|x| x * x).sum();
        let variance = sq / len - (sum / len).powi(2);
        let mut sources: Vec<usize> = (0..n_llc).filter(|&l| !members[l].is_empty()).collect();
        sources.sort_by(|&a, &b| pressure[b].total_cmp(&pressure[a]).then(a.cmp(&b)));
        let mut accepted = None;
        for &src in &sources {
            let Some(back) = back_of_list(layout, &members[src]) else {
                continue;
            };
            let slots = layout.cpus[back].len();
            let leave = contrib[back][node_of_llc(src)];
            let mut best: Option<(f64, usize)> = None; // (cost, dst)
            for dst in 0..n_llc {
                if dst == src {
                    continue;
                }
                let cost = contrib[back][node_of_llc(dst)];
                let new_dst = pressure[dst] + cost;
                let new_src = pressure[src] - leave;
                let new_sum = sum - leave + cost;
                let new_sq = sq - pressure[src].powi(2) - pressure[dst].powi(2)
                    + new_src.powi(2)
                    + new_dst.powi(2);
                let new_var = new_sq / len - (new_sum / len).powi(2);
                // The move must relieve the hotter cache, not make the destination the
                // new hot spot (our reading of "reduces the imbalance": with two caches
                // a move that overshoots can shrink |P₀ − P₁| yet only shift the
                // contention while paying the remote penalty for it).
                if new_dst >= threshold || new_dst > new_src + 1e-9 || new_var >= variance - 1e-9 {
                    continue;
                }
                if best.is_some_and(|(c, _)| cost >= c - 1e-12) {
                    continue;
                }
                // Room means idle cores: a free SMT sibling of a busy core would cost
                // both threads more than the contention the move relieves.
                let dst_cpus = masks[back].filter(layout.topology().llc_cpu_indices(dst));
                if layout.occ.idle_cores(dst_cpus) >= slots {
                    best = Some((cost, dst));
                }
            }
            if let Some((cost, dst)) = best {
                accepted = Some(Move {
                    process: back,
                    from_llc: src,
                    to_llc: dst,
                    before: (pressure[src], pressure[dst]),
                    after: (pressure[src] - leave, pressure[dst] + cost),
                    threshold,
                });
                break;
            }
        }
        let Some(m) = accepted else { break };
        let demand = layout.snapshot.processes[m.process].cpu_demand;
        let old = std::mem::take(&mut layout.cpus[m.process]);
        layout.occ.remove(&old, demand);
        let free = free_in_llc(layout, &masks[m.process], m.to_llc);
        let cpus = layout.occ.pick(&free, old.len());
        layout.occ.add(&cpus, demand);
        layout.cpus[m.process] = cpus;
        pressure[m.from_llc] = m.after.0;
        pressure[m.to_llc] = m.after.1;
        members[m.from_llc].retain(|&i| i != m.process);
        members[m.to_llc].push(m.process);
        moves.push(m);
    }
    moves
}

/// The lowest-penalty process among an LLC's movable members (last in the
/// maximum-local order among equals). Processes pinned inside one LLC are never
/// members: they could not leave, and skipping them lets the next one carry the
/// refinement.
fn back_of_list(layout: &Layout, members: &[usize]) -> Option<usize> {
    members.iter().copied().min_by(|&a, &b| {
        layout.np[a]
            .total_cmp(&layout.np[b])
            .then(layout.rank[b].cmp(&layout.rank[a]))
    })
}

fn free_in_llc(layout: &Layout, mask: &AllowedMask, llc: usize) -> Vec<usize> {
    mask.filter(layout.topology().llc_cpu_indices(llc))
        .filter(|&c| layout.occ.is_free(c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::maxlocal::MaxLocal;
    use numasched_model::testkit::{nehalem_workload, node_of_plan, proc_on};
    use numasched_model::topology;

    fn nmass() -> Nmass {
        Nmass::default()
    }

    #[test]
    fn wl9_all_on_node0_moves_mcf_only() {
        // mcf milc soplex lbm, all homed on node 0: pressure 90 vs 0.
        let s = nehalem_workload(&["mcf", "milc", "soplex", "lbm"], "0000");
        let mut layout = maxlocal::place(&s);
        let moves = refine(&mut layout, THRESHOLD_MPKI);
        // mcf (np 1.15, the back of node 0's list) moves: 90/0 -> 60/34.5.
        assert_eq!(moves.len(), 1);
        assert_eq!(moves[0].process, 0);
        assert!((moves[0].after.0 - 60.0).abs() < 1e-9);
        assert!((moves[0].after.1 - 34.5).abs() < 1e-9);
        // Next candidate would be lbm (np 1.30): 34.5 + 28.6 = 63.1 > 60, rejected.
        let plan = nmass().plan(&s);
        assert_eq!(node_of_plan(&s, &plan), vec![1, 0, 0, 0]);
        assert!(plan.placements[0].reason.contains("cache contention"));
    }

    #[test]
    fn threshold_stops_refinement() {
        let s = nehalem_workload(&["mcf", "milc", "soplex", "lbm"], "0000");
        let mut layout = maxlocal::place(&s);
        // With a threshold below mcf's remote cost (34.5) no move is acceptable.
        assert!(refine(&mut layout, 30.0).is_empty());

        // Six MPKI-10 processes (np 1.1) on node 0 of a 2 × 8-core machine: each move
        // costs 11 on node 1. 60/0 → 50/11 → 40/22; a third (30/33) would overshoot.
        let s = Snapshot {
            topology: topology::machine("2n:1l:8c:1t").unwrap(),
            processes: (1..=6).map(|pid| proc_on(pid, "p", 0, 10.0, 1.1)).collect(),
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let moves_with = |t: f64| refine(&mut maxlocal::place(&s), t).len();
        assert_eq!(moves_with(10.0), 0, "11 is above the threshold");
        assert_eq!(moves_with(15.0), 1, "22 is above the threshold");
        assert_eq!(moves_with(THRESHOLD_MPKI), 2);
        assert_eq!(
            moves_with(f64::INFINITY),
            2,
            "the third move would overshoot"
        );
    }

    #[test]
    fn balanced_allocation_is_left_as_maximum_local() {
        for map in ["1100", "1010", "1001"] {
            let s = nehalem_workload(&["mcf", "milc", "soplex", "lbm"], map);
            let ml = MaxLocal.plan(&s);
            let nm = nmass().plan(&s);
            assert_eq!(node_of_plan(&s, &ml), node_of_plan(&s, &nm), "map {map}");
            let mut layout = maxlocal::place(&s);
            assert!(refine(&mut layout, THRESHOLD_MPKI).is_empty(), "map {map}");
        }
    }

    #[test]
    fn compute_bound_imbalance_is_not_worth_a_move() {
        // WL1 (soplex sphinx3 gamess namd) at 75%: soplex alone on node 1 (18) vs
        // sphinx3 + two compute-bound on node 0 (~10.3). Moving anything only swaps
        // the imbalance around, so nothing moves.
        let s = nehalem_workload(&["soplex", "sphinx3", "gamess", "namd"], "1000");
        let mut layout = maxlocal::place(&s);
        assert!(refine(&mut layout, THRESHOLD_MPKI).is_empty());
    }

    #[test]
    fn cheaper_local_llc_beats_remote_node() {
        // Three MPKI-20 processes crowded into LLC 0 of node 0 (node 0 has LLCs 0, 1).
        // Moving one to LLC 1 costs 20 (still local); to node 1 it costs 26 (np 1.3).
        let topo = topology::machine("2n:2l:3c:1t").unwrap();
        let s = Snapshot {
            topology: topo,
            processes: (1..=3).map(|pid| proc_on(pid, "p", 0, 20.0, 1.3)).collect(),
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let mut layout = maxlocal::place(&s);
        for i in 0..3 {
            let old = std::mem::take(&mut layout.cpus[i]);
            layout.occ.remove(&old, 1.0);
        }
        for i in 0..3 {
            layout.cpus[i] = vec![i];
            layout.occ.add(&[i], 1.0);
        }
        let moves = refine(&mut layout, THRESHOLD_MPKI);
        assert_eq!((moves[0].from_llc, moves[0].to_llc), (0, 1));
        assert!((moves[0].after.1 - 20.0).abs() < 1e-9);
        // Nothing follows: to node 1 would leave LLC 0 at 20 and LLC 2 at 26, an
        // overshoot; LLC 0 → 1 again would not lower the imbalance.
        assert_eq!(moves.len(), 1);
    }

    #[test]
    fn pinned_process_is_never_moved_out_of_its_pin() {
        let mut s = nehalem_workload(&["mcf", "milc", "soplex", "lbm"], "0000");
        s.processes[0].allowed_cpus = Some(vec![0, 1, 2, 3].into());
        let plan = nmass().plan(&s);
        assert_eq!(plan.placements[0].nodes, vec![0]);
        // With mcf pinned it is off the list, so lbm (np 1.30) is the back and goes
        // (90/0 -> 68.0/28.6). soplex next would overshoot (50.0/52.4).
        assert_eq!(node_of_plan(&s, &plan), vec![0, 0, 0, 1]);
    }

    #[test]
    fn regression_variant_uses_the_fit() {
        let s = nehalem_workload(&["mcf", "milc", "soplex", "lbm"], "0000");
        let plan = Nmass {
            params: NmassParams {
                regression_penalty: true,
                ..NmassParams::default()
            },
        }
        .plan(&s);
        assert_eq!(plan.policy, "nmass-regression");
        // By the fit, mcf (MPKI 30) has np 1.50, the highest, and stays. soplex
        // (18 → 1.32) is now the back of the list and moves (90/0 → 72/23.8), then
        // milc (20 → 1.35) follows (72/23.8 → 52/50.8).
        assert_eq!(node_of_plan(&s, &plan), vec![0, 1, 1, 0]);
    }

    #[test]
    fn more_processes_than_cores_still_plans_everyone() {
        let names = [
            "mcf", "milc", "soplex", "lbm", "gamess", "namd", "povray", "gobmk", "gcc", "mcf",
        ];
        let s = nehalem_workload(&names, "0000000000");
        let plan = nmass().plan(&s);
        assert_eq!(plan.placements.len(), 10);
        assert!(plan.placements.iter().all(|p| p.cpus.len() == 1));
    }
}
