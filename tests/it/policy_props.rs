//! Properties every policy must keep on any valid snapshot: one placement per process,
//! only CPUs that exist and that the process is allowed on, no panic, determinism, and
//! no needless sharing of a CPU while others sit idle.

use numasched::model::{CpuSet, Process, Snapshot};
use numasched::policy;
use numasched::topology::{self, Topology};
use proptest::prelude::*;

fn machine() -> impl Strategy<Value = Topology> {
    (1u32..4, 1u32..3, 1u32..4, 1u32..3).prop_map(|(n, l, c, t)| {
        topology::spec::parse(&format!("{n}n:{l}l:{c}c:{t}t")).expect("spec")
    })
}

fn snapshot() -> impl Strategy<Value = Snapshot> {
    snapshot_with(true)
}

/// Random snapshots; `pins` allows foreign pins (`allowed_cpus`).
fn snapshot_with(pins: bool) -> impl Strategy<Value = Snapshot> {
    machine().prop_flat_map(move |topo| {
        let cpus = topo.num_cpus();
        let nodes = topo.nodes().len() as u32;
        let proc_ = (
            0.0f64..40.0,
            proptest::option::of(1.0f64..1.6),
            0..nodes,
            1u32..4,
            0.0f64..3.0,
            proptest::option::of(proptest::collection::vec(0..cpus as u32, 1..4)),
            any::<bool>(),
        );
        let topo2 = topo.clone();
        proptest::collection::vec(proc_, 0..(cpus * 2 + 2)).prop_map(move |ps| Snapshot {
            topology: topo2.clone(),
            processes: ps
                .into_iter()
                .enumerate()
                .map(|(i, (mpki, np, home, threads, demand, pin, has_mem))| {
                    let mut p = Process::new(100 + i as u32, "prop");
                    p.mpki = Some(mpki);
                    p.numa_penalty = np;
                    p.threads = threads;
                    p.cpu_demand = demand.min(f64::from(threads));
                    if has_mem {
                        p.memory_bytes.insert(home, 1 << 28);
                    }
                    p.allowed_cpus = if pins { pin.map(CpuSet::from) } else { None };
                    p
                })
                .collect(),
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, max_global_rejects: 100_000, ..ProptestConfig::default() })]

    #[test]
    fn every_policy_gives_valid_plans(s in snapshot()) {
        prop_assert!(s.validate().is_ok());
        for name in policy::NAMES {
            let pol = policy::by_name(name).unwrap();
            let plan = pol.plan(&s);
            prop_assert_eq!(plan.placements.len(), s.processes.len(), "{}", name);
            for (p, pl) in s.processes.iter().zip(&plan.placements) {
                prop_assert_eq!(pl.pid, p.pid);
                prop_assert!(!pl.reason.is_empty(), "{} gave no reason", name);
                for c in &pl.cpus {
                    prop_assert!(s.topology.cpu(*c).is_some(), "{}: CPU {} does not exist", name, c);
                    if let Some(allowed) = &p.allowed_cpus {
                        prop_assert!(allowed.contains(*c), "{}: pid {} outside its pin", name, p.pid);
                    }
                }
            }
            prop_assert_eq!(&plan, &pol.plan(&s), "{} is not deterministic", name);
        }
    }

    #[test]
    fn nmass_never_stacks_while_cpus_are_idle(s in snapshot_with(false)) {
        let slots: usize = s.processes.iter().map(|p| p.slots()).sum();
        prop_assume!(slots <= s.topology.num_cpus());
        for name in ["maxlocal", "nmass", "auto", "linux"] {
            let plan = policy::by_name(name).unwrap().plan(&s);
            let mut used = std::collections::HashSet::new();
            for pl in &plan.placements {
                prop_assert_eq!(pl.cpus.len(), s.processes.iter().find(|p| p.pid == pl.pid).unwrap().slots());
                for c in &pl.cpus {
                    prop_assert!(used.insert(*c), "{}: CPU {} given twice with room to spare: {:#?}", name, c, plan.placements.iter().map(|p| (p.pid, p.cpus.clone(), p.reason.clone())).collect::<Vec<_>>());
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Every process `auto` moves gets CPUs in the LLC its reason names, also when the
    /// machine is overcommitted. (A swap there found no *free* CPU in the target LLC
    /// and left the process with no CPUs, i.e. where it was, while its reason said it
    /// had moved: in the held-out suite, seed 7 case r1, two processes ended up 26×
    /// slower than alone.)
    #[test]
    fn auto_places_every_process_where_its_reason_says(s in snapshot_with(false)) {
        // Every policy but numad (which leaves small processes to the kernel by
        // design) gives every process CPUs.
        for name in policy::NAMES.iter().filter(|n| **n != "numad") {
            let plan = policy::by_name(name).unwrap().plan(&s);
            for pl in &plan.placements {
                prop_assert!(!pl.cpus.is_empty(), "{}: pid {} left unplaced: {}", name, pl.pid, pl.reason);
            }
        }
        let plan = policy::by_name("auto").unwrap().plan(&s);
        for pl in &plan.placements {
            if let Some(rest) = pl.reason.strip_prefix("LLC ") {
                let named: usize = rest.split(' ').next().unwrap().parse().unwrap();
                for c in &pl.cpus {
                    let llc = s.topology.cpu(*c).unwrap().llc;
                    prop_assert_eq!(llc, named, "pid {}: {:?} {}", pl.pid, &pl.cpus, &pl.reason);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A process alone on the machine is never given fewer CPUs than it has busy
    /// threads, up to all the machine has. (Every policy put a 16-thread stream on
    /// the 8-CPU nehalem-e5520 on its home node's 4 CPUs while the other 4 sat idle:
    /// 12.5% slower than unmanaged in the model, and the same squeeze live.)
    #[test]
    fn a_lone_process_gets_a_cpu_per_busy_thread(
        topo in machine(),
        threads in 1u32..40,
        home in 0u32..3,
        mpki in 0.0f64..40.0,
    ) {
        let nodes = topo.nodes().len() as u32;
        let mut p = Process::new(100, "wide");
        p.mpki = Some(mpki);
        p.numa_penalty = Some(1.3);
        p.threads = threads;
        p.cpu_demand = threads as f64;
        p.memory_bytes.insert(home % nodes, 1 << 28);
        let want = p.slots().min(topo.num_cpus());
        let s = Snapshot { topology: topo, processes: vec![p], others_pinned: Default::default(), others_taken: Default::default(), others_demand: Default::default() };
        for name in policy::NAMES.iter().filter(|n| **n != "numad") {
            let plan = policy::by_name(name).unwrap().plan(&s);
            let got = plan.placements[0].cpus.len();
            prop_assert!(got >= want, "{}: {} CPUs for {} busy threads on {} CPUs: {}",
                name, got, want, s.topology.num_cpus(), plan.placements[0].reason);
        }
    }
}
