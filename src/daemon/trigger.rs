//! When to re-plan. N-MASS re-plans when a process's MPKI moves by more than 20% from
//! the previous epoch (Majo & Gross, SPEC §1.1); numasched also re-plans when managed
//! processes arrive or leave, and when a process's memory moved to another node (its
//! home changed, so what "local" means changed).
//!
//! Hysteresis, so nothing thrashes: the MPKI baseline is the value *at the last plan*,
//! not the previous epoch, so a slow drift is noticed but noise around a level is not;
//! changes below an absolute floor do not count (0.2 → 0.3 MPKI is +50% of nothing);
//! and re-plans are at least `min_interval` apart — whatever triggered inside it waits
//! and is taken at the end of the interval, so a churning machine is re-planned at a
//! bounded rate. Pure: the caller passes the clock.

use std::collections::HashMap;

use crate::policy::Snapshot;
use crate::topology::NodeId;

use super::select::Key;

/// MPKI changes smaller than this (absolute) never trigger a re-plan.
pub const MPKI_FLOOR: f64 = 1.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TriggerParams {
    /// Relative MPKI change that triggers (0.2 = 20%).
    pub mpki_change: f64,
    /// Seconds between two re-plans at least.
    pub min_interval: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Baseline {
    mpki: Option<f64>,
    home: Option<NodeId>,
}

/// What was true at the last plan.
#[derive(Debug, Default)]
pub struct Trigger {
    at_plan: HashMap<Key, Baseline>,
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
    pub fn decide(&self, snapshot: &Snapshot, now: f64, p: &TriggerParams) -> Decision {
        let reasons = self.reasons(snapshot, p);
        if reasons.is_empty() {
            return Decision::Quiet;
        }
        match self.last_plan {
            Some(t) if now - t < p.min_interval => Decision::Wait(reasons),
            _ => Decision::Replan(reasons),
        }
    }

    /// Remembers the snapshot a plan was made from.
    pub fn planned(&mut self, snapshot: &Snapshot, now: f64) {
        self.last_plan = Some(now);
        self.at_plan = snapshot
            .processes
            .iter()
            .map(|p| {
                (
                    (p.pid, p.start_time),
                    Baseline {
                        mpki: p.mpki,
                        home: p.home_node(),
                    },
                )
            })
            .collect();
    }

    fn reasons(&self, snapshot: &Snapshot, p: &TriggerParams) -> Vec<String> {
        if self.last_plan.is_none() {
            return vec!["first epoch".into()];
        }
        let mut out = Vec::new();
        let mut arrived = Vec::new();
        let mut seen = 0;
        for proc in &snapshot.processes {
            let Some(b) = self.at_plan.get(&(proc.pid, proc.start_time)) else {
                arrived.push(proc.pid);
                continue;
            };
            seen += 1;
            if mpki_moved(b.mpki, proc.mpki, p.mpki_change) {
                out.push(format!(
                    "pid {} MPKI {} -> {}",
                    proc.pid,
                    show(b.mpki),
                    show(proc.mpki)
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
        let left = self.at_plan.len() - seen;
        if !arrived.is_empty() {
            out.insert(0, format!("{} arrived ({})", arrived.len(), pids(&arrived)));
        }
        if left > 0 {
            out.insert(0, format!("{left} left"));
        }
        out
    }
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
    use crate::policy::Process;

    fn snap(procs: &[(u32, Option<f64>, NodeId)]) -> Snapshot {
        Snapshot {
            topology: crate::topology::spec::parse("2n:1l:2c:1t").expect("spec"),
            processes: procs
                .iter()
                .map(|&(pid, mpki, home)| {
                    let mut p = Process::new(pid, "x");
                    p.mpki = mpki;
                    p.memory_bytes.insert(home, 1 << 20);
                    p
                })
                .collect(),
        }
    }

    const P: TriggerParams = TriggerParams {
        mpki_change: 0.2,
        min_interval: 5.0,
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
        assert!(matches!(t.decide(&s, 0.0, &P), Decision::Replan(_)));
        t.planned(&s, 0.0);
        assert_eq!(t.decide(&s, 100.0, &P), Decision::Quiet);
        // Drift: each step under 20%, but measured from the plan it adds up.
        let drift = snap(&[(1, Some(11.5), 0), (2, None, 1)]);
        assert_eq!(t.decide(&drift, 100.0, &P), Decision::Quiet);
        let drift = snap(&[(1, Some(12.5), 0), (2, None, 1)]);
        assert!(
            matches!(t.decide(&drift, 100.0, &P), Decision::Replan(r) if r[0].contains("pid 1 MPKI 10.0 -> 12.5"))
        );
    }

    #[test]
    fn arrivals_departures_and_moved_memory_trigger() {
        let mut t = Trigger::default();
        let s = snap(&[(1, Some(10.0), 0), (2, None, 1)]);
        t.planned(&s, 0.0);
        let Decision::Replan(r) = t.decide(&snap(&[(1, Some(10.0), 0)]), 10.0, &P) else {
            panic!("departure must re-plan")
        };
        assert_eq!(r, vec!["1 left"]);
        let Decision::Replan(r) = t.decide(
            &snap(&[(1, Some(10.0), 0), (2, None, 1), (3, None, 0)]),
            10.0,
            &P,
        ) else {
            panic!("arrival must re-plan")
        };
        assert_eq!(r, vec!["1 arrived (3)"]);
        let Decision::Replan(r) = t.decide(&snap(&[(1, Some(10.0), 1), (2, None, 1)]), 10.0, &P)
        else {
            panic!("moved memory must re-plan")
        };
        assert_eq!(r, vec!["pid 1 memory moved to node 1"]);
    }

    #[test]
    fn changes_inside_the_interval_wait() {
        let mut t = Trigger::default();
        let s = snap(&[(1, Some(10.0), 0)]);
        t.planned(&s, 100.0);
        let churn = snap(&[(1, Some(10.0), 0), (9, None, 0)]);
        assert!(matches!(t.decide(&churn, 102.0, &P), Decision::Wait(_)));
        assert!(matches!(t.decide(&churn, 105.0, &P), Decision::Replan(_)));
    }
}
