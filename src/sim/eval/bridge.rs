//! The simulator's performance model as the harness needs it: per-process run times of
//! a plan, and the facts a suite puts into its snapshots, both from the same profiles.

use std::sync::{Arc, Mutex};

use crate::policy::{Plan, Snapshot};
use crate::sim::{
    from_snapshot, simulate_with_solo, solo_rate, MachineParams, Profile, ProfileSet, SimProcess,
};
use crate::topology::Topology;

use super::runner::TimeModel;
use super::suites::ProgramFacts;

/// Resident memory each simulated program is given. Above numad's 300 MB threshold, so
/// numad manages them as it would real SPEC runs (most use 0.1–1.7 GB).
pub const FOOTPRINT_BYTES: u64 = 1 << 30;

/// Normalised run time per process (slowdown + 1), solo rates memoised per profile.
/// A plan the model cannot run (unknown CPU, unplaced process) gets infinite times, so
/// it can never look good.
pub fn time_model(params: MachineParams, profiles: ProfileSet) -> Arc<TimeModel> {
    let solos: Mutex<Vec<(Topology, Profile, f64)>> = Mutex::new(Vec::new());
    Arc::new(move |snapshot: &Snapshot, plan: &Plan| {
        let n = snapshot.processes.len();
        let Ok(procs) = from_snapshot(snapshot, plan, &profiles) else {
            return vec![f64::INFINITY; n];
        };
        let rates = solo_rates(&solos, &snapshot.topology, &params, &procs);
        simulate_with_solo(&snapshot.topology, &params, &procs, &rates)
            .processes
            .iter()
            .map(|p| p.slowdown + 1.0)
            .collect()
    })
}

fn solo_rates(
    cache: &Mutex<Vec<(Topology, Profile, f64)>>,
    topo: &Topology,
    params: &MachineParams,
    procs: &[SimProcess],
) -> Vec<f64> {
    let mut known = match cache.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    procs
        .iter()
        .map(|p| {
            if let Some((_, _, r)) = known.iter().find(|(t, q, _)| q == &p.profile && t == topo) {
                return *r;
            }
            let r = solo_rate(topo, params, &p.profile);
            known.push((topo.clone(), p.profile.clone(), r));
            r
        })
        .collect()
}

/// What a suite needs of each program, from its profile and a solo run of the model
/// (for the DRAM bandwidth it draws alone).
pub fn facts(
    topo: &Topology,
    params: &MachineParams,
    profiles: &ProfileSet,
    program: &str,
) -> Option<ProgramFacts> {
    let profile = profiles.get(program)?;
    let node = topo.cpu_nodes().next()?;
    let cpu = topo.cpu(*topo.nodes()[node].cpus.first()?)?;
    let solo = SimProcess {
        profile: profile.clone(),
        memory: vec![(node, 1.0)],
        cpus: vec![cpu.index],
    };
    let out = crate::sim::simulate(topo, params, std::slice::from_ref(&solo));
    Some(ProgramFacts {
        mpki: profile.mpki,
        numa_penalty: profile.numa_penalty(),
        footprint_bytes: FOOTPRINT_BYTES,
        bandwidth_gbps: out.processes.first()?.bandwidth_gbps,
        cache_reuse: (1.0 - profile.streaming_fraction).clamp(0.0, 1.0),
    })
}
