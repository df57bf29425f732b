//! Scores a schedule that changes every slice: Tudu et al.'s round-robin time-sharing
//! ([`numasched_policy::rotation`]), which no single placement can express, because what
//! matters is which tasks share a bus *at the same time*.
//!
//! Each slice runs the chosen tasks one per CPU on the model, with the tasks that wait
//! absent (stopped); a task's work over the run is the sum over its slices of its
//! speed there (solo time / time). Its normalised time is the number of slices over
//! that work, so a task that ran every other slice at full speed counts 2.0, as a task
//! sharing a CPU with one other does in Linux's rows. The cache a task finds cold after
//! waiting is not charged: slices of 200 ms are long against the ~1 ms it takes to
//! refill a 4 MiB L2 (the model's time-sharing makes the same choice).

use std::collections::HashMap;

use numasched_model::topology::CpuId;
use numasched_model::{Placement, Plan, Snapshot};
use numasched_policy::membus::{Class, MemBus, MemBusParams};
use numasched_policy::rotation::{buses, Rotation};
use numasched_policy::Policy;

use super::measured::{Measured, TimeModel};

/// Tudu et al.'s round-robin time-sharing, scored slice by slice: a schedule, not a
/// placement, so the simulator's alone.
pub const ROTATION: &str = numasched_policy::EVAL_ONLY[1];

/// Slices simulated: 8 s of Tudu's 200 ms slices, many turns of any list.
pub const SLICES: usize = 40;

/// The rotation as a [`Policy`] for the runner's lists: its one-shot plan (what `plan`
/// would show) is `membus`'s placement; the runner scores it slice by slice instead.
pub struct Rotating;

impl Policy for Rotating {
    fn name(&self) -> &str {
        ROTATION
    }

    fn plan(&self, snapshot: &Snapshot) -> Plan {
        let mut plan = MemBus::default().plan(snapshot);
        plan.policy = ROTATION.into();
        plan
    }
}

/// Normalised time per process under the rotation, over [`SLICES`] slices.
pub fn measure(model: &TimeModel, snapshot: &Snapshot) -> Measured {
    let n = snapshot.processes.len();
    let params = MemBusParams::default();
    let classes: Vec<Class> = snapshot
        .processes
        .iter()
        .map(|p| params.classify(p).class)
        .collect();
    let buses = buses(&snapshot.topology);
    let mut rotation = Rotation::new(n);
    let mut work = vec![0.0; n];
    let mut memo: HashMap<Vec<(usize, CpuId)>, Vec<f64>> = HashMap::new();
    for _ in 0..SLICES {
        let mut slice = rotation.next_slice(&classes, &buses);
        slice.sort_unstable();
        let times = memo
            .entry(slice.clone())
            .or_insert_with(|| run_slice(model, snapshot, &slice));
        for (&(task, _), t) in slice.iter().zip(times.iter()) {
            work[task] += 1.0 / t;
        }
    }
    Measured {
        times: work
            .into_iter()
            .map(|w| {
                if w > 0.0 {
                    SLICES as f64 / w
                } else {
                    f64::INFINITY
                }
            })
            .collect(),
        proven_optimal: None,
        evaluated: memo.len(),
    }
}

/// The model's times for the tasks of one slice, each alone on its CPU.
fn run_slice(model: &TimeModel, snapshot: &Snapshot, slice: &[(usize, CpuId)]) -> Vec<f64> {
    let topo = &snapshot.topology;
    let running = Snapshot {
        topology: topo.clone(),
        processes: slice
            .iter()
            .map(|&(task, _)| snapshot.processes[task].clone())
            .collect(),
        others_pinned: Default::default(),
        others_taken: Default::default(),
        others_demand: Default::default(),
    };
    let placements = slice
        .iter()
        .map(|&(task, cpu)| {
            let pid = snapshot.processes[task].pid;
            Placement::new(topo, pid, vec![cpu], "its turn".into())
        })
        .collect();
    model(&running, &Plan::new(ROTATION, placements))
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::topology;
    use numasched_model::Process;

    /// A model where a task runs at full speed alone on its bus and at half speed
    /// beside another high-bandwidth task.
    fn toy(s: &Snapshot, plan: &Plan) -> Vec<f64> {
        let pkg = |c: CpuId| s.topology.llcs()[s.topology.cpu(c).unwrap().llc].package;
        s.processes
            .iter()
            .zip(&plan.placements)
            .map(|(p, pl)| {
                let high = |q: &Process| q.bandwidth_gbps.unwrap_or(0.0) >= 1.0;
                let crowded = s.processes.iter().zip(&plan.placements).any(|(q, ql)| {
                    q.pid != p.pid && high(q) && high(p) && pkg(ql.cpus[0]) == pkg(pl.cpus[0])
                });
                if crowded {
                    2.0
                } else {
                    1.0
                }
            })
            .collect()
    }

    fn four_cores_of_e5345(bw: &[f64]) -> Snapshot {
        let full = topology::machine("xeon-e5345").unwrap();
        let topology = crate::eval::suites::one_core_per_llc(&full).unwrap();
        let processes = bw
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                let mut p = Process::new(i as u32 + 1, "t");
                p.bandwidth_gbps = Some(b);
                p
            })
            .collect();
        Snapshot {
            topology,
            processes,
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        }
    }

    #[test]
    fn tasks_that_never_share_a_bus_with_a_high_run_every_other_slice() {
        let s = four_cores_of_e5345(&[3.0, 0.2, 3.0, 0.2, 3.0, 0.2, 3.0, 0.2]);
        let m = measure(&toy, &s);
        for t in &m.times {
            assert!((t - 2.0).abs() < 1e-9, "{:?}", m.times);
        }
        // The slices repeat: few distinct ones were run on the model.
        assert!(m.evaluated <= 4, "{}", m.evaluated);
    }

    #[test]
    fn highs_that_must_share_a_bus_pay_for_it() {
        let s = four_cores_of_e5345(&[3.0; 8]);
        let m = measure(&toy, &s);
        for t in &m.times {
            assert!((t - 4.0).abs() < 1e-9, "{:?}", m.times);
        }
    }
}
