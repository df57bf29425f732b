//! When to re-plan. N-MASS re-plans when a process's MPKI moves by more than 20% from
//! the previous epoch (Majo & Gross, ISMM 2011); numasched also re-plans when managed
//! processes arrive or leave, when a process's memory moved to another node (its
//! home changed, so what "local" means changed), and when the CPUs it may use changed
//! (a Slurm job began or ended beside it, someone re-pinned it), when others' work
//! takes or leaves CPUs a plan counted as room or not (the snapshot's `others_taken`),
//! and when others' work grows beside pinned work (a hard pin there may now time-share).
//!
//! Hysteresis, so nothing thrashes: the MPKI baseline is the value *at the last plan*,
//! not the previous epoch, so a slow drift is noticed but noise around a level is not;
//! changes below an absolute floor do not count (0.2 → 0.3 MPKI is +50% of nothing);
//! and re-plans are at least `min_interval` apart — whatever triggered inside it waits
//! and is taken at the end of the interval, so a churning machine is re-planned at a
//! bounded rate. Pure: the caller passes the clock.
//!
//! The interval holds back only re-plans that would improve a placement. One that
//! undoes a harm numasched did is made at once: a process that needs more CPUs than
//! the last plan sized it for (demand rose by a whole CPU, a new thread, a throttled
//! set: see [`super::need`]), or CPUs a stopped, idle or exited process no longer
//! uses while others could, and the CPUs of a process that now needs a whole CPU fewer
//! (sized from its recent peak, so the fall has lasted), and others' work the kernel
//! cannot move that arrived on a CPU (a managed process may be pinned there beside it).

use numasched_model::plural::count;
use std::collections::HashMap;

use numasched_model::topology::NodeId;
use numasched_model::CpuSet;
use numasched_model::Snapshot;
use numasched_policy::crowded::is_crowded;
use numasched_policy::granularity::{IDLE_DEMAND, OVERBOOKED};

use numasched_model::ProcessKey;

use crate::need::YOUNG_S;

/// MPKI changes smaller than this (absolute) never trigger a re-plan.
pub const MPKI_FLOOR: f64 = 1.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TriggerParams {
    /// Relative MPKI change that triggers (0.2 = 20%).
    pub mpki_change: f64,
    /// Seconds between two re-plans at least.
    pub min_interval: f64,
    /// Plans pin to cores or CPUs (`--pin core|cpu`), the only granularity at which a
    /// pin can time-share with others' work (see [`Trigger::overbooking`]).
    pub hard_pins: bool,
}

#[derive(Debug, Clone, PartialEq)]
struct Baseline {
    mpki: Option<f64>,
    home: Option<NodeId>,
    /// CPUs it was planned for.
    slots: usize,
    /// Too idle to be placed at all (see [`IDLE_DEMAND`]).
    idle: bool,
    /// Where it was allowed to run (`None`: everywhere).
    allowed: Option<CpuSet>,
    /// When it was first planned for.
    since: f64,
}

/// What was true at the last plan.
#[derive(Debug, Default)]
pub struct Trigger {
    at_plan: HashMap<ProcessKey, Baseline>,
    /// CPUs others' work crowded at the last plan (see [`numasched_policy::crowded`]).
    crowded: CpuSet,
    /// CPUs others' work held at the last plan (the snapshot's `others_taken`).
    taken: CpuSet,
    /// Others' work, free to move or not, per LLC at the last plan (the snapshot's
    /// `others_demand`).
    demand: Vec<f64>,
    last_plan: Option<f64>,
}

/// The trigger's answer for one epoch.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Nothing changed enough.
    Quiet,
    /// Re-plan now, for these reasons.
    Replan(Vec<String>),
    /// Something changed, but the last plan is too recent; asked again next epoch.
    Wait(Vec<String>),
}

impl Trigger {
    /// `urgent` are harms the caller saw (a process stopped or exited holding CPUs
    /// numasched gave it, a throttled set): they re-plan at once, with the rest.
    pub fn decide(
        &self,
        snapshot: &Snapshot,
        now: f64,
        p: &TriggerParams,
        urgent: Vec<String>,
    ) -> Decision {
        let (mut harms, improves) = self.reasons(snapshot, now, p);
        harms.extend(urgent);
        if !harms.is_empty() {
            harms.extend(improves);
            return Decision::Replan(harms);
        }
        if improves.is_empty() {
            return Decision::Quiet;
        }
        match self.last_plan {
            Some(t) if now - t < p.min_interval => Decision::Wait(improves),
            _ => Decision::Replan(improves),
        }
    }

    /// Remembers the snapshot a plan was made from.
    pub fn planned(&mut self, snapshot: &Snapshot, now: f64) {
        self.last_plan = Some(now);
        let (topo, others) = (&snapshot.topology, &snapshot.others_pinned);
        self.crowded = others
            .keys()
            .copied()
            .filter(|&c| is_crowded(topo, others, c))
            .collect();
        self.taken = snapshot.others_taken.clone();
        self.demand = llc_demand(snapshot);
        let before = std::mem::take(&mut self.at_plan);
        self.at_plan = snapshot
            .processes
            .iter()
            .map(|p| {
                (
                    p.key(),
                    Baseline {
                        mpki: p.mpki,
                        home: p.home_node(),
                        slots: slots(p, &snapshot.topology),
                        idle: p.cpu_demand < IDLE_DEMAND,
                        allowed: p.allowed_cpus.clone(),
                        since: before.get(&p.key()).map_or(now, |b| b.since),
                    },
                )
            })
            .collect();
    }

    /// Reasons to re-plan: (undoing a harm, improving).
    fn reasons(
        &self,
        snapshot: &Snapshot,
        now: f64,
        p: &TriggerParams,
    ) -> (Vec<String>, Vec<String>) {
        if self.last_plan.is_none() {
            return (vec!["first epoch".into()], Vec::new());
        }
        let mut harms = Vec::new();
        let mut out = Vec::new();
        let mut arrived = Vec::new();
        let mut seen = 0;
        for proc in &snapshot.processes {
            let Some(b) = self.at_plan.get(&proc.key()) else {
                arrived.push(proc.pid);
                continue;
            };
            seen += 1;
            let slots = slots(proc, &snapshot.topology);
            let idle = proc.cpu_demand < IDLE_DEMAND;
            if idle != b.idle {
                out.push(format!(
                    "pid {} {}",
                    proc.pid,
                    if idle { "went idle" } else { "became busy" }
                ));
            } else if slots > b.slots {
                harms.push(format!(
                    "pid {} needs {}, planned for {}",
                    proc.pid,
                    count(slots, "CPU"),
                    b.slots
                ));
            } else if slots < b.slots {
                // Its set holds CPUs it no longer uses (sizing keeps the peak of the
                // last epochs, so this is a lasting fall, not noise): they go back now.
                // Not for a process planned for under YOUNG_S: its peak is an epoch or
                // two, and a thread it starts next would find itself on one CPU until
                // the epoch after (the late second thread of the no_harm bench). Its
                // CPUs then go back with the next re-plan.
                let reason = format!(
                    "pid {} needs {}, planned for {}: returns the rest",
                    proc.pid,
                    count(slots, "CPU"),
                    b.slots
                );
                if now - b.since >= YOUNG_S {
                    harms.push(reason);
                } else {
                    out.push(reason);
                }
            }
            if mpki_moved(b.mpki, proc.mpki, p.mpki_change) {
                out.push(format!(
                    "pid {} MPKI {} -> {}",
                    proc.pid,
                    show(b.mpki),
                    show(proc.mpki)
                ));
            }
            // Its limits moved (a Slurm job started or ended beside it, someone
            // re-pinned it): the plan may have it where it may no longer be.
            let allowed = proc.allowed_cpus.clone();
            if allowed != b.allowed {
                let show = |a: &Option<CpuSet>| {
                    a.as_ref()
                        .map_or("every CPU".into(), |v| format!("CPUs {v}"))
                };
                out.push(format!(
                    "pid {} may use {} (was {})",
                    proc.pid,
                    show(&allowed),
                    show(&b.allowed)
                ));
            }
            let home = proc.home_node();
            if home.is_some() && home != b.home {
                out.push(format!(
                    "pid {} memory moved to node {}",
                    proc.pid,
                    home.map_or("-".into(), |h| h.to_string())
                ));
            }
        }
        self.crowding(snapshot, &mut harms);
        self.taking(snapshot, &mut out);
        if p.hard_pins {
            self.overbooking(snapshot, &mut out);
        }
        let left = self.at_plan.len() - seen;
        if !arrived.is_empty() {
            out.insert(0, format!("{} arrived ({})", arrived.len(), pids(&arrived)));
        }
        if left > 0 {
            out.insert(0, format!("{left} left"));
        }
        (harms, out)
    }
}

impl Trigger {
    /// Others' work the kernel cannot move arrived on a CPU not crowded at the last
    /// plan: a managed process may be hard-pinned beside it, a harm (it is moved off,
    /// see [`numasched_policy::crowded`]). Once per arrival: a CPU crowded at the last
    /// plan is no news however its load wavers. Work that left is no reason: a pin
    /// moved off it loses nothing by staying where it is, and the next plan made for
    /// another reason sees it gone.
    fn crowding(&self, snapshot: &Snapshot, harms: &mut Vec<String>) {
        let (topo, others) = (&snapshot.topology, &snapshot.others_pinned);
        for (&c, &b) in others {
            if is_crowded(topo, others, c) && !self.crowded.contains(c) {
                harms.push(format!("others' pinned work crowds CPU {c} ({b:.1} CPUs)"));
            }
        }
    }
}

impl Trigger {
    /// Others' work now holds CPUs it did not hold at the last plan, or no longer
    /// holds CPUs it held (see the snapshot's `others_taken`): the plan counted room
    /// that is gone, or kept a process from its node for room that is back (a program
    /// pinned onto a node, or one that left it). An improvement, so it waits for the
    /// interval: the estimate is of a busy machine, where a CPU may come and go with
    /// the sampling, and each change must not re-plan at once. Once per change.
    fn taking(&self, snapshot: &Snapshot, out: &mut Vec<String>) {
        // Counted per cache, not per CPU: which of a cache's equally busy CPUs the
        // estimate names changes with the sampling, and changes nothing a policy does.
        let topo = &snapshot.topology;
        for llc in topo.llcs() {
            let held = |set: &CpuSet| set.iter().filter(|c| llc.cpus.contains(**c)).count();
            let (was, now) = (held(&self.taken), held(&snapshot.others_taken));
            if was != now {
                out.push(format!(
                    "others' work holds {} of LLC {} (node {}), was {was}",
                    count(now, "CPU"),
                    llc.index,
                    topo.nodes()[llc.node].id
                ));
            }
        }
    }
}

impl Trigger {
    /// Others' work grew by [`OVERBOOKED`] or more on an LLC where some of it is pinned
    /// since the last plan: a hard pin there that was no time-sharing may be now
    /// (see `numasched_policy::granularity`), and only a plan looks. What others ran
    /// and waited is read per epoch, so the plan made as a load became busy can have
    /// seen too little of it; where nothing else changed (every CPU already taken),
    /// nothing else would re-plan (a load stayed pinned beside a pinned and a free
    /// neighbour for 14 s, CI 2026-11-30). An improvement, so it waits for the
    /// interval; a fall is no reason, as with crowding.
    fn overbooking(&self, snapshot: &Snapshot, out: &mut Vec<String>) {
        let (topo, others) = (&snapshot.topology, &snapshot.others_pinned);
        for (l, (llc, now)) in topo.llcs().iter().zip(llc_demand(snapshot)).enumerate() {
            let was = self.demand.get(l).copied().unwrap_or(0.0);
            let pinned = llc.cpus.iter().any(|c| is_crowded(topo, others, *c));
            if pinned && now >= was + OVERBOOKED {
                out.push(format!(
                    "others' work on LLC {} (node {}) keeps {now:.1} CPUs busy, was {was:.1}",
                    llc.index,
                    topo.nodes()[llc.node].id
                ));
            }
        }
    }
}

/// Others' work per LLC, free to move or not (the snapshot's `others_demand`).
fn llc_demand(snapshot: &Snapshot) -> Vec<f64> {
    snapshot
        .topology
        .llcs()
        .iter()
        .map(|llc| {
            llc.cpus
                .iter()
                .filter_map(|c| snapshot.others_demand.get(c))
                .sum()
        })
        .collect()
}

/// CPUs a process can keep busy, counted only up to the CPUs it may run on: "needs 3
/// CPUs" on a 2-CPU machine is a need no plan can meet, and no reason to re-plan.
fn slots(p: &numasched_model::Process, topo: &numasched_model::topology::Topology) -> usize {
    p.slots().min(p.may_run_on(topo).len().max(1))
}

fn show(m: Option<f64>) -> String {
    m.map_or("?".into(), |v| format!("{v:.1}"))
}

fn pids(v: &[u32]) -> String {
    const SHOWN: usize = 5;
    let mut s: Vec<String> = v.iter().take(SHOWN).map(u32::to_string).collect();
    if v.len() > SHOWN {
        s.push("...".into());
    }
    s.join(", ")
}

/// Whether MPKI moved by more than `rel` (relative to the old value) and by more than
/// [`MPKI_FLOOR`]; becoming known or unknown counts as a move.
pub fn mpki_moved(old: Option<f64>, new: Option<f64>, rel: f64) -> bool {
    match (old, new) {
        (Some(a), Some(b)) => {
            let d = (b - a).abs();
            d > MPKI_FLOOR && d > rel * a.abs()
        }
        (None, None) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::Process;

    fn snap(procs: &[(u32, Option<f64>, NodeId)]) -> Snapshot {
        Snapshot {
            topology: numasched_model::topology::spec::parse("2n:1l:2c:1t").expect("spec"),
            processes: procs
                .iter()
                .map(|&(pid, mpki, home)| {
                    let mut p = Process::new(pid, "x");
                    p.mpki = mpki;
                    p.memory_bytes.insert(home, 1 << 20);
                    p
                })
                .collect(),
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        }
    }

    const P: TriggerParams = TriggerParams {
        mpki_change: 0.2,
        min_interval: 5.0,
        hard_pins: true,
    };

    #[test]
    fn twenty_percent_of_the_value_at_the_last_plan() {
        assert!(!mpki_moved(Some(10.0), Some(11.9), 0.2));
        assert!(mpki_moved(Some(10.0), Some(12.1), 0.2));
        assert!(mpki_moved(Some(10.0), Some(7.9), 0.2));
        assert!(!mpki_moved(Some(0.2), Some(0.9), 0.2), "under the floor");
        assert!(mpki_moved(None, Some(3.0), 0.2));
        assert!(!mpki_moved(None, None, 0.2));
    }

    #[test]
    fn plans_first_then_only_on_change() {
        let mut t = Trigger::default();
        let s = snap(&[(1, Some(10.0), 0), (2, None, 1)]);
        assert!(matches!(t.decide(&s, 0.0, &P, vec![]), Decision::Replan(_)));
        t.planned(&s, 0.0);
        assert_eq!(t.decide(&s, 100.0, &P, vec![]), Decision::Quiet);
        // Drift: each step under 20%, but measured from the plan it adds up.
        let drift = snap(&[(1, Some(11.5), 0), (2, None, 1)]);
        assert_eq!(t.decide(&drift, 100.0, &P, vec![]), Decision::Quiet);
        let drift = snap(&[(1, Some(12.5), 0), (2, None, 1)]);
        assert!(
            matches!(t.decide(&drift, 100.0, &P, vec![]), Decision::Replan(r) if r[0].contains("pid 1 MPKI 10.0 -> 12.5"))
        );
    }

    #[test]
    fn arrivals_departures_and_moved_memory_trigger() {
        let mut t = Trigger::default();
        let s = snap(&[(1, Some(10.0), 0), (2, None, 1)]);
        t.planned(&s, 0.0);
        let Decision::Replan(r) = t.decide(&snap(&[(1, Some(10.0), 0)]), 10.0, &P, vec![]) else {
            panic!("departure must re-plan")
        };
        assert_eq!(r, vec!["1 left"]);
        let Decision::Replan(r) = t.decide(
            &snap(&[(1, Some(10.0), 0), (2, None, 1), (3, None, 0)]),
            10.0,
            &P,
            vec![],
        ) else {
            panic!("arrival must re-plan")
        };
        assert_eq!(r, vec!["1 arrived (3)"]);
        let Decision::Replan(r) =
            t.decide(&snap(&[(1, Some(10.0), 1), (2, None, 1)]), 10.0, &P, vec![])
        else {
            panic!("moved memory must re-plan")
        };
        assert_eq!(r, vec!["pid 1 memory moved to node 1"]);
    }

    #[test]
    fn a_change_of_the_allowed_cpus_re_plans() {
        let mut t = Trigger::default();
        let s = snap(&[(1, Some(10.0), 0)]);
        t.planned(&s, 100.0);
        let mut fenced = s.clone();
        fenced.processes[0].allowed_cpus = Some(vec![3, 2].into());
        let Decision::Replan(r) = t.decide(&fenced, 110.0, &P, vec![]) else {
            panic!("a new limit must re-plan")
        };
        assert_eq!(r, vec!["pid 1 may use CPUs 2-3 (was every CPU)"]);
        t.planned(&fenced, 110.0);
        let mut same = fenced.clone();
        same.processes[0].allowed_cpus = Some(vec![2, 3].into());
        assert_eq!(
            t.decide(&same, 120.0, &P, vec![]),
            Decision::Quiet,
            "same set"
        );
    }

    #[test]
    fn others_work_arriving_where_the_kernel_cannot_move_it_re_plans_at_once() {
        let mut t = Trigger::default();
        let s = snap(&[(1, Some(10.0), 0)]);
        t.planned(&s, 100.0);
        // Someone's `taskset -c 0` load beside a managed one pinned there: each reads
        // half of CPU 0, and CPU 1 idles.
        let mut beside = s.clone();
        beside.others_pinned = [(0, 0.5), (3, 0.1)].into_iter().collect();
        let Decision::Replan(r) = t.decide(&beside, 101.0, &P, vec![]) else {
            panic!("a pin beside others' work must not wait")
        };
        assert_eq!(r, vec!["others' pinned work crowds CPU 0 (0.5 CPUs)"]);
        t.planned(&beside, 101.0);
        // Still there, hovering, gone, or spread by the kernel over its LLC: no news.
        for others in [
            vec![(0, 0.5)],
            vec![(0, 0.3), (1, 0.05)],
            vec![],
            vec![(0, 0.9), (1, 0.8)],
        ] {
            let mut now = beside.clone();
            now.others_pinned = others.into_iter().collect();
            assert_eq!(
                t.decide(&now, 102.0, &P, vec![]),
                Decision::Quiet,
                "{:?}",
                now.others_pinned
            );
        }
    }

    #[test]
    fn others_work_taking_or_leaving_a_node_re_plans_after_the_interval() {
        let mut t = Trigger::default();
        let s = snap(&[(1, Some(10.0), 0)]);
        t.planned(&s, 100.0);
        // A program pinned onto node 0 (CPUs 0-1).
        let mut taken = s.clone();
        taken.others_taken = vec![0, 1].into();
        let held = vec!["others' work holds 2 CPUs of LLC 0 (node 0), was 0".to_string()];
        assert_eq!(
            t.decide(&taken, 101.0, &P, vec![]),
            Decision::Wait(held.clone())
        );
        assert_eq!(t.decide(&taken, 106.0, &P, vec![]), Decision::Replan(held));
        t.planned(&taken, 106.0);
        assert_eq!(t.decide(&taken, 107.0, &P, vec![]), Decision::Quiet);
        // The other CPU of the same cache: the same room, no news.
        let mut same = taken.clone();
        same.others_taken = vec![0].into();
        t.planned(&same, 107.0);
        same.others_taken = vec![1].into();
        assert_eq!(t.decide(&same, 112.0, &P, vec![]), Decision::Quiet);
        // It left node 0 and took a CPU of node 1.
        let mut moved = taken.clone();
        moved.others_taken = vec![3].into();
        assert_eq!(
            t.decide(&moved, 112.0, &P, vec![]),
            Decision::Replan(vec![
                "others' work holds 0 CPUs of LLC 0 (node 0), was 1".into(),
                "others' work holds 1 CPU of LLC 1 (node 1), was 0".into()
            ])
        );
    }

    #[test]
    fn others_work_growing_beside_pinned_work_re_plans_after_the_interval() {
        let mut t = Trigger::default();
        let mut s = snap(&[(1, Some(10.0), 0)]);
        // A `taskset -c 0` load on CPU 0, and what others ran and waited there.
        s.others_pinned = [(0, 1.0)].into_iter().collect();
        s.others_demand = [(0, 1.0)].into_iter().collect();
        t.planned(&s, 100.0);
        // A free neighbour waits on the same cache: half a CPU more or beyond.
        let mut grown = s.clone();
        grown.others_demand = [(0, 1.2), (1, 0.9)].into_iter().collect();
        let why = vec!["others' work on LLC 0 (node 0) keeps 2.1 CPUs busy, was 1.0".to_string()];
        // At `--pin llc` or `node` nothing is pinned to a CPU, so nothing can time-share.
        let soft = TriggerParams {
            hard_pins: false,
            ..P
        };
        assert_eq!(t.decide(&grown, 106.0, &soft, vec![]), Decision::Quiet);
        assert_eq!(
            t.decide(&grown, 101.0, &P, vec![]),
            Decision::Wait(why.clone())
        );
        assert_eq!(t.decide(&grown, 106.0, &P, vec![]), Decision::Replan(why));
        t.planned(&grown, 106.0);
        // Wavering, or falling: no news.
        for demand in [vec![(0, 1.3), (1, 1.1)], vec![(0, 1.0)], vec![]] {
            let mut now = grown.clone();
            now.others_demand = demand.into_iter().collect();
            assert_eq!(t.decide(&now, 112.0, &P, vec![]), Decision::Quiet);
        }
        // Growing on a cache with nothing pinned: no hard pin there can time-share
        // beside pinned work.
        let mut elsewhere = grown.clone();
        elsewhere.others_demand = [(0, 1.2), (1, 0.9), (2, 1.0), (3, 1.0)]
            .into_iter()
            .collect();
        assert_eq!(t.decide(&elsewhere, 112.0, &P, vec![]), Decision::Quiet);
    }

    #[test]
    fn a_need_beyond_the_cpus_it_may_use_is_no_reason() {
        let mut t = Trigger::default();
        let mut s = snap(&[(1, Some(10.0), 0)]);
        s.processes[0].allowed_cpus = Some(vec![0, 1].into());
        s.processes[0].threads = 2;
        s.processes[0].cpu_demand = 2.0;
        t.planned(&s, 100.0);
        let mut more = s.clone();
        more.processes[0].threads = 3;
        more.processes[0].cpu_demand = 3.0;
        assert_eq!(
            t.decide(&more, 101.0, &P, vec![]),
            Decision::Quiet,
            "it has 2 CPUs"
        );
        more.processes[0].allowed_cpus = None;
        let Decision::Replan(r) = t.decide(&more, 101.0, &P, vec![]) else {
            panic!("4 CPUs here")
        };
        assert!(
            r.contains(&"pid 1 needs 3 CPUs, planned for 2".to_string()),
            "{r:?}"
        );
    }

    #[test]
    fn changes_inside_the_interval_wait() {
        let mut t = Trigger::default();
        let s = snap(&[(1, Some(10.0), 0)]);
        t.planned(&s, 100.0);
        let churn = snap(&[(1, Some(10.0), 0), (9, None, 0)]);
        assert!(matches!(
            t.decide(&churn, 102.0, &P, vec![]),
            Decision::Wait(_)
        ));
        assert!(matches!(
            t.decide(&churn, 105.0, &P, vec![]),
            Decision::Replan(_)
        ));
    }

    #[test]
    fn harms_do_not_wait_for_the_interval_improvements_do() {
        let mut t = Trigger::default();
        let s = snap(&[(1, Some(10.0), 0), (2, Some(10.0), 0)]);
        t.planned(&s, 100.0);
        // A second busy thread: the process needs two CPUs now, one second after.
        let mut grown = s.clone();
        grown.processes[0].threads = 2;
        grown.processes[0].cpu_demand = 2.0;
        let Decision::Replan(r) = t.decide(&grown, 101.0, &P, vec![]) else {
            panic!("a process that needs more CPUs must not wait")
        };
        assert_eq!(r, vec!["pid 1 needs 2 CPUs, planned for 1"]);
        // The caller's harm (a stop) re-plans at once too.
        assert!(matches!(
            t.decide(&s, 101.0, &P, vec!["pid 2 stopped".into()]),
            Decision::Replan(_)
        ));
        // Needing a whole CPU fewer re-plans at once too: its CPUs go back (issue 12).
        t.planned(&grown, 200.0);
        let Decision::Replan(r) = t.decide(&s, 201.0, &P, vec![]) else {
            panic!("CPUs a process no longer uses must not wait")
        };
        assert_eq!(
            r,
            vec!["pid 1 needs 1 CPU, planned for 2: returns the rest"]
        );
        // Unless the process was first planned for under YOUNG_S ago: its peak is an
        // epoch or two, and a thread it starts next would be held to one CPU until the
        // epoch after. Its CPUs go back with the next re-plan, at the interval.
        let mut young = Trigger::default();
        young.planned(&grown, 400.0);
        let Decision::Wait(r) = young.decide(&s, 401.0, &P, vec![]) else {
            panic!("a young process keeps its CPUs until the interval")
        };
        assert_eq!(
            r,
            vec!["pid 1 needs 1 CPU, planned for 2: returns the rest"]
        );
        assert!(matches!(
            young.decide(&s, 400.0 + P.min_interval, &P, vec![]),
            Decision::Replan(_)
        ));
        // An MPKI change only improves: it waits for the interval.
        let mut moved = s.clone();
        moved.processes[1].mpki = Some(20.0);
        t.planned(&s, 300.0);
        assert!(matches!(
            t.decide(&moved, 301.0, &P, vec![]),
            Decision::Wait(_)
        ));
    }
}
