//! Test doubles for the crates above (the policies' unit tests use them), built only
//! for tests or under the `testing` feature: snapshots of the published evaluation on
//! the Nehalem machine, and random valid snapshots for property tests (small
//! spec-string machines, optionally with sparse node ids and a memory-only node, and
//! processes with every optional field exercised: pins, parents, multi-threading,
//! memory on any node).

use proptest::prelude::*;

use crate::plan::Plan;
use crate::snapshot::{Process, Snapshot};
use crate::topology::{self, spec, NodeDesc, NodeId, Topology};
/// MPKI and NUMA penalty of the programs used in policy tests (Majo & Gross's table).
fn spec_cpu2006(program: &str) -> (f64, f64) {
    match program {
        "mcf" => (30.0, 1.15),
        "lbm" => (22.0, 1.30),
        "libquantum" => (24.0, 1.46),
        "milc" => (20.0, 1.35),
        "soplex" => (18.0, 1.32),
        "omnetpp" => (12.0, 1.22),
        "sphinx3" => (10.0, 1.20),
        "gcc" => (1.5, 1.05),
        "h264ref" => (0.8, 1.03),
        "gobmk" => (0.6, 1.02),
        "perlbench" => (0.5, 1.02),
        "namd" => (0.2, 1.01),
        "gamess" | "povray" => (0.05, 1.00),
        other => panic!("no test profile for {other}"),
    }
}

/// A busy single-threaded process with 1 GiB on `node`.
pub fn proc_on(pid: u32, program: &str, node: NodeId, mpki: f64, np: f64) -> Process {
    let mut p = Process::new(pid, program);
    p.mpki = Some(mpki);
    p.numa_penalty = Some(np);
    p.memory_bytes.insert(node, 1 << 30);
    p
}

/// Programs on `nehalem-e5520` with an allocation map such as "1100".
pub fn nehalem_workload(programs: &[&str], map: &str) -> Snapshot {
    let topology = topology::machine("nehalem-e5520").expect("preset");
    let processes = programs
        .iter()
        .zip(map.chars())
        .enumerate()
        .map(|(i, (prog, home))| {
            let (mpki, np) = spec_cpu2006(prog);
            proc_on(
                100 + i as u32,
                prog,
                home.to_digit(10).expect("digit"),
                mpki,
                np,
            )
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

/// Node id of each placement's first CPU.
pub fn node_of_plan(s: &Snapshot, plan: &Plan) -> Vec<NodeId> {
    plan.placements
        .iter()
        .map(|p| {
            let cpu = s.topology.cpu(p.cpus[0]).expect("cpu");
            s.topology.nodes()[cpu.node].id
        })
        .collect()
}

/// Raw random numbers for one process; mapped onto the machine by [`build`].
#[derive(Debug, Clone)]
pub struct RawProc {
    threads: u32,
    demand: f64,
    mpki: Option<f64>,
    bandwidth: Option<f64>,
    memory: Vec<(u32, u64)>,
    current: Vec<u32>,
    allowed: Option<Vec<u32>>,
    parent: Option<u32>,
}

fn raw_proc() -> impl Strategy<Value = RawProc> {
    (
        1u32..5,
        0.0f64..4.0,
        proptest::option::of(0.0f64..60.0),
        proptest::option::of(0.0f64..8.0),
        proptest::collection::vec((0u32..8, 0u64..(6u64 << 30)), 0..3),
        proptest::collection::vec(0u32..64, 0..4),
        proptest::option::of(proptest::collection::vec(0u32..64, 1..4)),
        proptest::option::of(0u32..16),
    )
        .prop_map(
            |(threads, demand, mpki, bandwidth, memory, current, allowed, parent)| RawProc {
                threads,
                // A snapshot's demand is at most one CPU per thread.
                demand: demand.min(f64::from(threads)),
                mpki,
                bandwidth,
                memory,
                current,
                allowed,
                parent,
            },
        )
}

/// (nodes, llcs, cores, threads, sparse ids, memory-only node, processes)
pub type RawSnapshot = (u32, u32, u32, u32, bool, bool, Vec<RawProc>);

pub fn raw_snapshot() -> impl Strategy<Value = RawSnapshot> {
    (
        1u32..4,
        1u32..3,
        1u32..4,
        1u32..3,
        any::<bool>(),
        any::<bool>(),
        proptest::collection::vec(raw_proc(), 0..14),
    )
}

/// Turns raw numbers into a snapshot that passes [`Snapshot::validate`].
pub fn build(raw: &RawSnapshot) -> Snapshot {
    let (n, l, c, t, sparse, memonly, procs) = raw;
    let spec_str = format!("{n}n:{l}l:{c}c:{t}t");
    let mut desc = spec::parse(&spec_str)
        .expect("spec strings in range parse")
        .to_desc();
    if *sparse {
        for node in &mut desc.nodes {
            node.id = node.id * 2 + 1;
        }
    }
    if *memonly {
        let id = desc.nodes.last().map_or(0, |x| x.id) + 3;
        for node in &mut desc.nodes {
            node.distances.push(31);
        }
        let count = desc.nodes.len();
        let mut distances = vec![31; count];
        distances.push(10);
        desc.nodes.push(NodeDesc {
            id,
            cpus: Vec::new(),
            memory_bytes: 8 << 30,
            distances,
            llcs: Vec::new(),
        });
    }
    let topo = Topology::from_desc(desc).expect("valid machine");
    let cpu_ids: Vec<u32> = topo.cpus().iter().map(|x| x.id).collect();
    let node_ids: Vec<u32> = topo.nodes().iter().map(|x| x.id).collect();
    let pick_cpu = |i: u32| cpu_ids[i as usize % cpu_ids.len()];
    let processes = procs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut p = Process::new(100 + i as u32, "prog");
            p.threads = r.threads;
            p.cpu_demand = r.demand;
            p.mpki = r.mpki;
            p.bandwidth_gbps = r.bandwidth;
            for &(node, bytes) in &r.memory {
                *p.memory_bytes
                    .entry(node_ids[node as usize % node_ids.len()])
                    .or_default() += bytes;
            }
            p.current_cpus = r.current.iter().map(|&x| pick_cpu(x)).collect();
            p.allowed_cpus = r
                .allowed
                .as_ref()
                .map(|a| a.iter().map(|&x| pick_cpu(x)).collect());
            p.parent = r.parent.map(|x| 100 + x);
            p
        })
        .collect();
    let snap = Snapshot {
        topology: topo,
        processes,
        others_pinned: Default::default(),
        others_taken: Default::default(),
        others_demand: Default::default(),
    };
    assert_eq!(snap.validate(), Ok(()));
    snap
}

/// The invariants every policy's plan must satisfy on any valid snapshot.
pub fn check_plan(snap: &Snapshot, plan: &Plan) -> Result<(), TestCaseError> {
    prop_assert_eq!(plan.placements.len(), snap.processes.len());
    for (p, pl) in snap.processes.iter().zip(&plan.placements) {
        prop_assert_eq!(p.pid, pl.pid);
        prop_assert!(!pl.reason.is_empty());
        for c in &pl.cpus {
            prop_assert!(snap.topology.cpu(*c).is_some(), "CPU {} does not exist", c);
            if let Some(allowed) = &p.allowed_cpus {
                prop_assert!(allowed.contains(*c), "CPU {} outside pin {:?}", c, allowed);
            }
        }
    }
    Ok(())
}
