//! Planning time of the placement policies against process count, on the
//! `8n:2l:8c:2t` machine of the placement-engine issue (8 nodes, 256 CPUs). The daemon
//! re-plans at most once per 1 s epoch, so the budget is "negligible against 1 s":
//! the target is 512 processes in under 1 ms.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use numasched::model::{Process, Snapshot};
use numasched::policy;
use numasched::topology;

/// A deterministic mix: a third memory-bound (MPKI 5–35), the rest compute-bound,
/// homes spread unevenly (node k gets ~1/(k+1) of the processes).
fn snapshot(n: usize) -> Snapshot {
    let topology = topology::machine("8n:2l:8c:2t").expect("spec");
    let mut x: u64 = 0x1234_5678;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let processes = (0..n)
        .map(|i| {
            let mut p = Process::new(1000 + i as u32, "bench");
            let r = next();
            let memory_bound = r % 3 == 0;
            let mpki = if memory_bound {
                5.0 + (r % 31) as f64
            } else {
                (r % 10) as f64 / 10.0
            };
            p.mpki = Some(mpki);
            p.numa_penalty = Some(1.0 + mpki / 100.0);
            let home = (next() % 8).min(next() % 8) as u32;
            p.memory_bytes.insert(home, 256 << 20);
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

fn planning(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan");
    for n in [64usize, 512, 4096] {
        let snap = snapshot(n);
        for name in ["nmass", "auto"] {
            let policy = policy::by_name(name).expect("policy");
            group.bench_with_input(BenchmarkId::new(name, n), &snap, |b, s| {
                b.iter(|| black_box(policy.plan(black_box(s))))
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = planning
}
criterion_main!(benches);
