//! Test helpers: snapshots of the published evaluation on the Nehalem machine.

use crate::policy::plan::Plan;
use crate::policy::snapshot::{Process, Snapshot};
use crate::topology::{self, NodeId};

/// MPKI and NUMA penalty of the programs used in policy tests (SPEC §5 table).
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
