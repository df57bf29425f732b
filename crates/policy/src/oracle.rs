//! The best possible placement, found by search, so every other policy can be read as a
//! fraction of it.
//!
//! The search is over which LLC domain each process runs in: under the models we use,
//! cores within one LLC are interchangeable (idle cores are taken before SMT siblings,
//! see [`super::alloc`]), so this is the whole space that matters. Each candidate is
//! scored as applied at the granularity given ([`Oracle::applied_at`]), the rule every
//! policy's plan is held to: at `llc` every CPU of the chosen LLC, hard-pinned the whole
//! LLC where its CPUs would be time-shared. Scored as single-CPU picks, the search chose
//! which programs take turns on a CPU by the order it picked them in, which no applied
//! plan can set (the simulator deals time-shared CPUs at random, `timeshare.rs`), and
//! lost placements the whole-LLC sets would have scored better. With at most
//! `exhaustive_limit` assignments every one is evaluated and the answer is proven best
//! for the objective; beyond that a bounded local search (moves and swaps, started
//! from the plans of the other policies) returns the best it found, marked unproven.
//! The objective is a parameter (lower is better): the simulator passes its
//! performance model, tests pass toy ones.

use crate::alloc::{self, Occupancy};
use crate::granularity::{as_applied, Pin};
use crate::{linux::Linux, maxlocal::MaxLocal, nmass::Nmass, Policy};
use numasched_model::plan::{Placement, Plan};
use numasched_model::snapshot::Snapshot;

/// Cost of a plan for a snapshot; lower is better.
pub type Objective = dyn Fn(&Snapshot, &Plan) -> f64 + Send + Sync;

/// One reason per placement of the chosen plan, in plan order, in terms an operator
/// reads (the simulator's: each process's predicted slowdown), where the objective's
/// bare number would mean nothing to them.
pub type Explain = dyn Fn(&Snapshot, &Plan) -> Vec<String> + Send + Sync;

pub struct Oracle {
    objective: Box<Objective>,
    explain: Option<Box<Explain>>,
    /// The granularity plans are applied at, if the objective should score them so.
    pin: Option<Pin>,
    /// Largest number of assignments searched exhaustively.
    pub exhaustive_limit: u64,
    /// Objective evaluations the local search may spend.
    pub search_budget: usize,
}

impl std::fmt::Debug for Oracle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oracle")
            .field("exhaustive_limit", &self.exhaustive_limit)
            .field("search_budget", &self.search_budget)
            .finish_non_exhaustive()
    }
}

impl Oracle {
    pub fn new(objective: Box<Objective>) -> Oracle {
        Oracle {
            objective,
            explain: None,
            pin: None,
            exhaustive_limit: 100_000,
            search_budget: 20_000,
        }
    }

    /// Reasons for the searched placements from `explain` instead of the cost.
    pub fn explained(mut self, explain: Box<Explain>) -> Oracle {
        self.explain = Some(explain);
        self
    }

    /// Every plan searched is scored, and the one chosen returned, as applied at `pin`
    /// ([`as_applied`]), the rule every policy's plan is held to.
    pub fn applied_at(mut self, pin: Pin) -> Oracle {
        self.pin = Some(pin);
        self
    }
}

impl Policy for Oracle {
    fn name(&self) -> &str {
        "oracle"
    }

    fn plan(&self, snapshot: &Snapshot) -> Plan {
        let space = Space::new(snapshot, self.pin);
        let mut best: Option<(f64, Vec<usize>)> = None;
        let consider = |assign: &[usize], best: &mut Option<(f64, Vec<usize>)>| {
            let cost = (self.objective)(snapshot, &space.plan(assign));
            if cost.is_finite() && best.as_ref().is_none_or(|(b, _)| cost < *b - 1e-12) {
                *best = Some((cost, assign.to_vec()));
            }
        };
        let proven = if space.size() <= self.exhaustive_limit {
            let mut cur = Vec::with_capacity(space.movable.len());
            let mut used = vec![0; space.capacity.len()];
            space.each(&mut cur, &mut used, &mut |a| consider(a, &mut best));
            true
        } else {
            let seeds: Vec<Vec<usize>> = [
                Nmass::default().plan(snapshot),
                MaxLocal.plan(snapshot),
                Linux.plan(snapshot),
            ]
            .iter()
            .filter_map(|p| space.assignment_of(p))
            .collect();
            let mut budget = self.search_budget;
            for seed in seeds {
                consider(&seed, &mut best);
                let mut cur = seed;
                let mut cur_cost = (self.objective)(snapshot, &space.plan(&cur));
                while budget > 0 {
                    let Some((c, next)) = space.best_neighbour(&cur, &mut budget, |a| {
                        (self.objective)(snapshot, &space.plan(a))
                    }) else {
                        break;
                    };
                    if c >= cur_cost - 1e-12 {
                        break;
                    }
                    cur = next;
                    cur_cost = c;
                }
                consider(&cur, &mut best);
            }
            false
        };
        let mut plan = match best {
            Some((cost, assign)) => {
                let mut plan = space.unapplied(&assign);
                let what = if proven { "best" } else { "best found" };
                let told = self
                    .explain
                    .as_ref()
                    .map(|e| e(snapshot, &space.plan(&assign)));
                for (i, pl) in plan.placements.iter_mut().enumerate() {
                    if !pl.reason.is_empty() {
                        continue;
                    }
                    pl.reason = match told.as_ref().and_then(|t| t.get(i)) {
                        Some(why) => format!("{what} placement searched: {why}"),
                        None => format!("{what} placement for the objective (cost {cost:.4})"),
                    };
                }
                space.applied(plan)
            }
            None => Nmass::default().plan(snapshot),
        };
        plan.policy = self.name().to_string();
        // Groups kept where N-MASS put them were not searched, so nothing is proven then.
        plan.proven_optimal = Some(proven && space.movable.len() == snapshot.processes.len());
        plan
    }
}

/// The search space: movable processes × LLC domains with capacities.
struct Space<'s> {
    snapshot: &'s Snapshot,
    /// Single-CPU, unpinned-or-loosely-pinned processes the search places.
    movable: Vec<usize>,
    /// For each movable process, the LLCs its pin allows.
    options: Vec<Vec<usize>>,
    /// Processes per LLC, so overcommitted machines still spread.
    capacity: Vec<usize>,
    /// The rest (multi-threaded groups) are placed as N-MASS would and kept fixed.
    fixed: Plan,
    /// The granularity every plan is applied at, if given.
    pin: Option<Pin>,
}

impl<'s> Space<'s> {
    fn new(snapshot: &'s Snapshot, pin: Option<Pin>) -> Space<'s> {
        let topo = &snapshot.topology;
        let fixed = Nmass::default().plan(snapshot);
        let movable: Vec<usize> = (0..snapshot.processes.len())
            .filter(|&i| snapshot.processes[i].slots() == 1)
            .collect();
        let options: Vec<Vec<usize>> = movable
            .iter()
            .map(|&i| {
                let allowed = alloc::allowed(topo, &snapshot.processes[i]);
                let mut llcs: Vec<usize> = allowed.iter().map(|&c| topo.cpus()[c].llc).collect();
                llcs.sort_unstable();
                llcs.dedup();
                llcs
            })
            .collect();
        let fixed_cpus: usize = (0..snapshot.processes.len())
            .filter(|i| !movable.contains(i))
            .map(|i| fixed.placements[i].cpus.len())
            .sum();
        let cpus = topo.num_cpus().saturating_sub(fixed_cpus).max(1);
        let per_cpu = movable.len().div_ceil(cpus).max(1);
        let capacity = topo.llcs().iter().map(|l| l.cpus.len() * per_cpu).collect();
        Space {
            snapshot,
            movable,
            options,
            capacity,
            fixed,
            pin,
        }
    }

    /// Upper bound of the number of assignments (ignoring capacity).
    fn size(&self) -> u64 {
        self.options
            .iter()
            .fold(1u64, |acc, o| acc.saturating_mul(o.len().max(1) as u64))
    }

    fn each(&self, cur: &mut Vec<usize>, used: &mut [usize], f: &mut dyn FnMut(&[usize])) {
        let k = cur.len();
        if k == self.movable.len() {
            f(cur);
            return;
        }
        for &l in &self.options[k] {
            if used[l] < self.capacity[l] {
                used[l] += 1;
                cur.push(l);
                self.each(cur, used, f);
                cur.pop();
                used[l] -= 1;
            }
        }
    }

    /// An LLC assignment as the plan the objective scores: [`Self::unapplied`], as
    /// applied at the space's granularity.
    fn plan(&self, assign: &[usize]) -> Plan {
        self.applied(self.unapplied(assign))
    }

    fn applied(&self, plan: Plan) -> Plan {
        match self.pin {
            Some(pin) => as_applied(self.snapshot, plan, pin),
            None => plan,
        }
    }

    /// Turns an LLC assignment into a plan: fixed groups first, then each movable
    /// process on the least loaded allowed CPU of its LLC.
    fn unapplied(&self, assign: &[usize]) -> Plan {
        let topo = &self.snapshot.topology;
        let mut occ = Occupancy::for_snapshot(self.snapshot);
        let mut plan = self.fixed.clone();
        for (i, p) in self.snapshot.processes.iter().enumerate() {
            if !self.movable.contains(&i) {
                let cpus: Vec<usize> = plan.placements[i]
                    .cpus
                    .iter()
                    .filter_map(|&c| topo.cpu(c).map(|c| c.index))
                    .collect();
                occ.add(&cpus, p.cpu_demand);
            }
        }
        for (k, &i) in self.movable.iter().enumerate() {
            let p = &self.snapshot.processes[i];
            let cands: Vec<usize> = alloc::allowed(topo, p)
                .into_iter()
                .filter(|&c| topo.cpus()[c].llc == assign[k])
                .collect();
            let cpus = occ.pick(&cands, 1);
            occ.add(&cpus, p.cpu_demand);
            plan.placements[i] =
                Placement::new(topo, p.pid, alloc::ids(topo, &cpus), String::new());
        }
        plan
    }

    /// The LLC assignment a plan makes, if it puts every movable process in one LLC.
    fn assignment_of(&self, plan: &Plan) -> Option<Vec<usize>> {
        let topo = &self.snapshot.topology;
        let mut used = vec![0; self.capacity.len()];
        let mut out = Vec::with_capacity(self.movable.len());
        for &i in &self.movable {
            let llc = topo.cpu(*plan.placements.get(i)?.cpus.first()?)?.llc;
            used[llc] += 1;
            out.push(llc);
        }
        used.iter()
            .zip(&self.capacity)
            .all(|(u, c)| u <= c)
            .then_some(out)
    }

    /// Best single move or pairwise swap from `cur`, spending evaluations from `budget`.
    fn best_neighbour(
        &self,
        cur: &[usize],
        budget: &mut usize,
        mut cost: impl FnMut(&[usize]) -> f64,
    ) -> Option<(f64, Vec<usize>)> {
        let mut used = vec![0; self.capacity.len()];
        for &l in cur {
            used[l] += 1;
        }
        let mut best: Option<(f64, Vec<usize>)> = None;
        let mut try_one = |cand: Vec<usize>, budget: &mut usize| -> bool {
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            let c = cost(&cand);
            if c.is_finite() && best.as_ref().is_none_or(|(b, _)| c < *b) {
                best = Some((c, cand));
            }
            true
        };
        for k in 0..cur.len() {
            for &l in &self.options[k] {
                if l != cur[k] && used[l] < self.capacity[l] {
                    let mut cand = cur.to_vec();
                    cand[k] = l;
                    if !try_one(cand, budget) {
                        return best;
                    }
                }
            }
            for j in k + 1..cur.len() {
                if cur[j] != cur[k]
                    && self.options[k].contains(&cur[j])
                    && self.options[j].contains(&cur[k])
                {
                    let mut cand = cur.to_vec();
                    cand.swap(k, j);
                    if !try_one(cand, budget) {
                        return best;
                    }
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::testkit::{nehalem_workload, node_of_plan};

    /// Toy objective: how many processes run away from their home node.
    fn remote_count(s: &Snapshot, p: &Plan) -> f64 {
        s.processes
            .iter()
            .zip(&p.placements)
            .filter(|(proc_, pl)| pl.nodes.first() != proc_.home_node().as_ref())
            .count() as f64
    }

    /// Toy objective that rewards spreading: Σ over LLCs of (processes in it)².
    fn crowding(s: &Snapshot, p: &Plan) -> f64 {
        let mut per = vec![0.0; s.topology.llcs().len()];
        for pl in &p.placements {
            per[s.topology.cpu(pl.cpus[0]).unwrap().llc] += 1.0;
        }
        per.iter().map(|x| x * x).sum()
    }

    #[test]
    fn exhaustive_search_finds_and_proves_the_optimum() {
        let s = nehalem_workload(&["mcf", "milc", "soplex", "lbm"], "1100");
        let plan = Oracle::new(Box::new(remote_count)).plan(&s);
        assert_eq!(plan.proven_optimal, Some(true));
        assert_eq!(remote_count(&s, &plan), 0.0);
        assert_eq!(node_of_plan(&s, &plan), vec![1, 1, 0, 0]);

        let s = nehalem_workload(&["mcf", "milc", "soplex", "lbm"], "0000");
        let plan = Oracle::new(Box::new(crowding)).plan(&s);
        assert_eq!(crowding(&s, &plan), 8.0);
    }

    #[test]
    fn large_cases_use_bounded_search_and_say_so() {
        let names = vec!["mcf"; 24];
        let s = nehalem_workload(&names, &"0".repeat(24));
        let mut oracle = Oracle::new(Box::new(crowding));
        oracle.search_budget = 2_000;
        let plan = oracle.plan(&s);
        assert_eq!(plan.proven_optimal, Some(false));
        assert_eq!(plan.placements.len(), 24);
        // 24 processes over 2 LLCs: 12 each is best for the crowding objective.
        assert_eq!(crowding(&s, &plan), 288.0);
    }

    #[test]
    fn pins_limit_the_search() {
        let mut s = nehalem_workload(&["mcf", "milc"], "00");
        s.processes[0].allowed_cpus = Some(vec![4, 5].into());
        let plan = Oracle::new(Box::new(remote_count)).plan(&s);
        assert!([4, 5].contains(&plan.placements[0].cpus[0]));
        assert_eq!(remote_count(&s, &plan), 1.0);
    }

    /// Every plan the objective scores, and the one returned, is the plan as applied:
    /// at `llc` whole LLCs; hard-pinned, whole LLCs where CPUs would be time-shared. A
    /// single-CPU pick there decides which programs take turns on a CPU, an order no
    /// policy's applied plan can set.
    #[test]
    fn plans_are_scored_and_returned_as_applied() {
        // Ten single-threaded programs on the Nehalem's 8 CPUs: CPUs are time-shared.
        let names = vec!["mcf"; 10];
        let s = nehalem_workload(&names, &"0".repeat(10));
        let applied = |s: &Snapshot, p: &Plan, pin: Pin| {
            p.placements.iter().all(|pl| {
                let llc = s.topology.cpu(pl.cpus[0]).unwrap().llc;
                let whole = pl.cpus
                    == s.topology.llcs()[llc]
                        .cpus
                        .iter()
                        .copied()
                        .collect::<numasched_model::CpuSet>();
                let alone = pl.cpus.len() == 1
                    && p.placements
                        .iter()
                        .filter(|o| o.cpus.contains(pl.cpus[0]))
                        .count()
                        == 1;
                whole || (pin == Pin::Cpu && alone)
            })
        };
        for pin in [Pin::Llc, Pin::Cpu] {
            let plan = Oracle::new(Box::new(move |s: &Snapshot, p: &Plan| {
                assert!(
                    applied(s, p, pin),
                    "scored a plan not as applied at {pin}: {p:?}"
                );
                crowding(s, p)
            }))
            .applied_at(pin)
            .plan(&s);
            assert!(applied(&s, &plan, pin), "{pin}: {plan:?}");
            assert_eq!(crowding(&s, &plan), 50.0);
        }
        // Unapplied, the search sees the single CPUs it picked.
        let plan = Oracle::new(Box::new(crowding)).plan(&s);
        assert!(plan.placements.iter().all(|pl| pl.cpus.len() == 1));
    }
}
