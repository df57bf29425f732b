//! The simulator's performance model as the harness needs it: per-process run times of
//! a plan, and the facts a suite puts into its snapshots, both from the same profiles.

use std::sync::{Arc, Mutex};

use crate::{
    from_snapshot, simulate_with_solo, solo_rate, MachineParams, Profile, ProfileSet, SimProcess,
};
use numasched_model::topology::Topology;
use numasched_model::{Plan, Snapshot};

use super::runner::{Runner, TimeModel};
use super::suites::{ProgramFacts, Suite};

/// Resident memory of a program whose profile gives none. Above numad's 300 MB
/// threshold, so numad manages such programs.
pub const FOOTPRINT_BYTES: u64 = 1 << 30;

/// What moving pages costs, as a one-off against the length of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MigrationCost {
    /// Copy rate, GB/s. An estimate for `move_pages` of 4 KiB pages (page-table work
    /// dominates; huge pages copy several times faster).
    pub gbps: f64,
    /// Solo run length the one-off cost is spread over, seconds (SPEC CPU2006 reference
    /// runs take minutes on the Nehalem).
    pub run_seconds: f64,
}

impl Default for MigrationCost {
    fn default() -> Self {
        MigrationCost {
            gbps: 1.0,
            run_seconds: 300.0,
        }
    }
}

/// Normalised run time per process (slowdown + 1), solo rates memoised per profile.
/// A plan the model cannot run (unknown CPU, unplaced process) gets infinite times, so
/// it can never look good. With `migration`, page moves in the plan cost time: the
/// process waits while its pages are copied, and everyone with memory on either end
/// loses the share of that controller's bandwidth the copy took, for as long as it
/// lasts. Without it, page moves are free (steady state after migration).
pub fn time_model(
    params: MachineParams,
    profiles: ProfileSet,
    migration: Option<MigrationCost>,
) -> Arc<TimeModel> {
    let solos: Mutex<Vec<(Topology, Profile, f64)>> = Mutex::new(Vec::new());
    Arc::new(move |snapshot: &Snapshot, plan: &Plan| {
        let n = snapshot.processes.len();
        let Ok(procs) = from_snapshot(snapshot, plan, &profiles) else {
            return vec![f64::INFINITY; n];
        };
        let rates = solo_rates(&solos, &snapshot.topology, &params, &procs);
        let mut times: Vec<f64> = simulate_with_solo(&snapshot.topology, &params, &procs, &rates)
            .processes
            .iter()
            .map(|p| p.slowdown + 1.0)
            .collect();
        if let Some(cost) = migration {
            add_migration_cost(snapshot, plan, &params, cost, &mut times);
        }
        times
    })
}

/// [`time_model`] for cases on any machine: each snapshot is run with its own
/// machine's parameters ([`crate::params_for`]), as the `random` suite needs.
pub fn time_model_per_machine(
    profiles: ProfileSet,
    migration: Option<MigrationCost>,
) -> Arc<TimeModel> {
    type Models = Vec<(Topology, Arc<TimeModel>)>;
    let models: Mutex<Models> = Mutex::new(Vec::new());
    Arc::new(move |snapshot: &Snapshot, plan: &Plan| {
        let model = {
            let mut known = match models.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            match known.iter().find(|(t, _)| t == &snapshot.topology) {
                Some((_, m)) => Arc::clone(m),
                None => {
                    let m = time_model(
                        crate::params_for(&snapshot.topology),
                        profiles.clone(),
                        migration,
                    );
                    known.push((snapshot.topology.clone(), Arc::clone(&m)));
                    m
                }
            }
        };
        model(snapshot, plan)
    })
}

fn add_migration_cost(
    snapshot: &Snapshot,
    plan: &Plan,
    params: &MachineParams,
    cost: MigrationCost,
    times: &mut [f64],
) {
    for m in &plan.page_moves {
        let seconds = m.bytes as f64 / (cost.gbps * 1e9);
        let share = (cost.gbps / params.mc_gbps).min(1.0);
        for (i, p) in snapshot.processes.iter().enumerate() {
            if p.pid == m.pid {
                times[i] += seconds / cost.run_seconds;
            } else if p.memory_bytes.contains_key(&m.from_node)
                || p.memory_bytes.contains_key(&m.to_node)
            {
                times[i] += seconds * share / cost.run_seconds;
            }
        }
    }
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

/// The runner for a suite: the model of its machine, with migration costed (and
/// allowed) where the suite lets pages move.
pub fn runner_for(suite: &Suite, profiles: ProfileSet) -> Option<Runner> {
    suite.cases.first()?;
    Some(runner_with(profiles, suite.migration))
}

/// The runner on any machine: page migration costed (and allowed) with `migration`,
/// and the kernel's balancing copying and charged at the same rate, over the same run.
pub fn runner_with(profiles: ProfileSet, migration: bool) -> Runner {
    let cost = migration.then(MigrationCost::default);
    let mut runner = Runner::new(time_model_per_machine(profiles, cost));
    runner.allow_migration = migration;
    let copy = MigrationCost::default().gbps;
    runner.autonuma.copy_gbps = copy;
    runner.autonuma.horizon_s = MigrationCost::default().run_seconds;
    runner.copy_share =
        Arc::new(move |t: &Topology| (copy / crate::params_for(t).mc_gbps).min(1.0));
    runner
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
        run_share: None,
    };
    let out = crate::simulate(topo, params, std::slice::from_ref(&solo));
    Some(ProgramFacts {
        mpki: profile.mpki,
        numa_penalty: profile.numa_penalty(),
        footprint_bytes: profile.rss_bytes.unwrap_or(FOOTPRINT_BYTES),
        bandwidth_gbps: out.processes.first()?.bandwidth_gbps,
        cache_reuse: (1.0 - profile.streaming_fraction).clamp(0.0, 1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::suites::case;
    use crate::params_for;
    use numasched_model::topology;
    use numasched_model::{follow_memory, Placement};

    /// With noise, the policies see a different characterisation, but the
    /// model scores the true programs: the same plan gets the same times, so Linux and
    /// the kernel's balancing (which read no characterisation) are unchanged. (The
    /// oracle's bounded search is seeded from the characterisation on large cases.)
    #[test]
    fn noise_reaches_the_policies_and_not_the_model() {
        use crate::eval::suites::{random, RandomOptions};
        let profiles = ProfileSet::builtin();
        let lookup = |t: &Topology, p: &str| facts(t, &params_for(t), &profiles, p);
        let opts = |noise_pct| RandomOptions {
            seed: 11,
            cases: 2,
            noise_pct,
            ..RandomOptions::default()
        };
        let nehalem = || Some(topology::machine("nehalem-e5520").unwrap());
        let clean = random(&opts(0.0), nehalem(), &lookup).unwrap();
        let noisy = random(&opts(25.0), nehalem(), &lookup).unwrap();
        let runner = runner_for(&clean, profiles.clone()).unwrap();
        let names = ["linux", "autonuma", "oracle", "auto"];
        let pols: Vec<_> = names.iter().map(|n| runner.policy(n).unwrap()).collect();
        let a = runner.run_all(&clean.cases, &pols, 1, &|_, _| {});
        let b = runner.run_all(&noisy.cases, &pols, 1, &|_, _| {});
        for (x, y) in a.iter().zip(&b) {
            if x.policy == "linux" || x.policy == "autonuma" {
                assert_eq!(x.times, y.times, "{} {}", x.policy, x.workload);
            }
        }
        // And the snapshots differ in what the policies read.
        assert_ne!(clean.cases[0].snapshot, noisy.cases[0].snapshot);
        let plan = runner
            .policy("auto")
            .unwrap()
            .plan(&clean.cases[0].snapshot);
        let model = time_model(
            params_for(&clean.cases[0].snapshot.topology),
            profiles,
            None,
        );
        assert_eq!(
            model(&clean.cases[0].snapshot, &plan),
            model(&noisy.cases[0].snapshot, &plan)
        );
    }

    #[test]
    fn migration_costs_the_mover_most_and_bystanders_a_little() {
        let topo = topology::machine("nehalem-e5520").unwrap();
        let params = params_for(&topo);
        let profiles = ProfileSet::builtin();
        let c = case("t", "w", "00", &topo, &["mcf", "gamess"], &|t, p| {
            facts(t, &params, &profiles, p)
        })
        .unwrap();
        let s = &c.snapshot;
        let plan = Plan::new(
            "t",
            vec![
                Placement::new(&topo, s.processes[0].pid, vec![4], "t".into()),
                Placement::new(&topo, s.processes[1].pid, vec![0], "t".into()),
            ],
        );
        let mut moved = plan.clone();
        moved.page_moves = follow_memory(s, &plan);
        assert_eq!(moved.page_moves.len(), 1);
        let free = time_model(params.clone(), profiles.clone(), None);
        let costly = time_model(params, profiles, Some(MigrationCost::default()));
        let (a, b) = (free(s, &moved), costly(s, &moved));
        // 1 GiB at 1 GB/s over 300 s: +1.07/300 for mcf, a bandwidth share for gamess.
        assert!(
            (b[0] - a[0] - 1.073_741_824 / 300.0).abs() < 1e-9,
            "{a:?} {b:?}"
        );
        assert!(b[1] > a[1] && b[1] - a[1] < b[0] - a[0]);
        // Without page moves the cost model adds nothing.
        assert_eq!(free(s, &plan), costly(s, &plan));
    }
}
