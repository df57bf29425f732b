//! Cost of one call to the performance model, which `eval`, `sim` and the oracle make
//! thousands of times per suite: the same programs on the Nehalem (the N-MASS suite's
//! machine) and on the E5345 (bus controllers and per-core turns), 4 and 8 processes,
//! memory on node 0, one process per core.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use numasched::sim::{params_for, simulate, ProfileSet, SimProcess};
use numasched::topology;

const PROGRAMS: [&str; 8] = [
    "mcf",
    "lbm",
    "soplex",
    "milc",
    "omnetpp",
    "gromacs",
    "libquantum",
    "hmmer",
];

fn procs(n: usize) -> Vec<SimProcess> {
    let set = ProfileSet::builtin();
    PROGRAMS[..n]
        .iter()
        .enumerate()
        .map(|(cpu, name)| SimProcess {
            profile: set.get(name).cloned().expect("built-in profile"),
            memory: vec![(0, 1.0)],
            cpus: vec![cpu],
            run_share: None,
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("simulate");
    for machine in ["nehalem-e5520", "xeon-e5345"] {
        let topo = topology::machine(machine).expect("preset");
        let params = params_for(&topo);
        for n in [4, 8] {
            let procs = procs(n);
            group.bench_with_input(BenchmarkId::new(machine, n), &procs, |b, procs| {
                b.iter(|| simulate(black_box(&topo), &params, black_box(procs)))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
