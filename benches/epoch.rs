//! Overhead at scale (issue 7), as criterion benchmarks:
//! - `epoch/steady/N`: one steady-state epoch of the daemon's engine (scan,
//!   characterise, trigger; nothing changed, so no re-plan) over a fake procfs of N
//!   processes on tmpfs, against a fake kernel;
//! - `plan/<policy>/<machine>`: planning time against machine size, from 2 to 16 nodes
//!   and up to 512 CPUs, with half as many processes as CPUs.
//!
//! Figures and ratios are in docs/overhead.md.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use numasched::apply::{Actuator, ActuatorConfig, FakeKernel};
use numasched::characterise::live::{Live, LiveConfig};
use numasched::daemon::config::Selection;
use numasched::daemon::select::Selector;
use numasched::daemon::trigger::TriggerParams;
use numasched::daemon::{Engine, EngineConfig, Stages};
use numasched::model::{Process, Snapshot};
use numasched::observe::fakeproc::{FakeProcess, FakeProcfs};
use numasched::observe::{ScanConfig, Scanner};
use numasched::policy;
use numasched::topology::{self, Topology};

fn engine(n: usize, dir: &std::path::Path) -> Engine<FakeKernel> {
    let fake = FakeProcfs::new(&dir.join("proc")).expect("fake procfs");
    let topo = topology::machine("2n:2l:8c:2t").expect("spec");
    let cpus: Vec<u32> = topo.cpus().iter().map(|c| c.id).collect();
    let kernel = FakeKernel::new(&cpus);
    let allowed = numasched::model::CpuSet::from(cpus.clone()).to_string();
    for i in 0..n {
        let pid = 1000 + i as u32;
        let threads = 1 + (i % 4) as u32;
        let cpu = cpus[i % cpus.len()];
        let mut p = FakeProcess::new(pid, "bench")
            .threads_on(&vec![cpu; threads as usize])
            .pages(&[((i % 2) as u32, 1000 + i as u64)]);
        // What the fake kernel says it may use, as a real /proc would: the fake's
        // default (CPUs 0-7) read as a foreign pin the kernel did not have, and the
        // daemon re-planned every few epochs to follow it one way and the other.
        p.cpus_allowed = allowed.clone();
        fake.add(&p).expect("add");
        kernel.add(pid, p.start_time, threads, &cpus);
    }
    let scanner = Scanner::new(ScanConfig {
        proc_root: fake.root().to_path_buf(),
        exclude: Default::default(),
        ..ScanConfig::default()
    });
    let select = Selection::default();
    Engine::new(
        EngineConfig {
            trigger: TriggerParams {
                mpki_change: 0.2,
                min_interval: 5.0,
                hard_pins: true,
            },
            release_after: 30.0,
            min_cpu: 0.0,
            min_rss: 0,
        },
        Stages {
            topology: topo,
            scanner,
            selector: Selector::new(&select, fake.root()),
            live: Live::new(
                LiveConfig {
                    learn: false,
                    ..LiveConfig::default()
                },
                None,
                None,
            ),
            // Wrapped as the daemon wraps every policy (`assemble`): applied at
            // `--pin` granularity, idle processes left unplaced. The bare policy
            // pinned these idle processes for good, a state the daemon never reaches,
            // and each epoch read their run-queue delay.
            policy: Box::new(policy::Granular::new(
                policy::by_name("nmass").expect("policy"),
                policy::Pin::default(),
            )),
            actuator: Actuator::new(kernel, ActuatorConfig::default()),
            tree: None,
            journal_file: None,
            jobs: None,
        },
    )
}

fn epochs(c: &mut Criterion) {
    let mut group = c.benchmark_group("epoch/steady");
    for n in [100usize, 1000, 5000] {
        let dir = tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .expect("tempdir");
        let mut e = engine(n, dir.path());
        // The first epochs place everything; from then on nothing changes.
        for t in 0..12 {
            e.epoch(f64::from(t), 0).expect("epoch");
        }
        let mut t = 100.0;
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                t += 1.0;
                black_box(e.epoch(t, 0).expect("epoch"))
            })
        });
    }
    group.finish();
}

/// Half as many processes as CPUs, a third memory-bound, homes spread over the nodes.
fn snapshot(topology: Topology) -> Snapshot {
    let nodes: Vec<u32> = topology.nodes().iter().map(|n| n.id).collect();
    let n = topology.num_cpus() / 2;
    let processes = (0..n)
        .map(|i| {
            let mut p = Process::new(1000 + i as u32, "bench");
            let mpki = if i % 3 == 0 {
                5.0 + (i % 31) as f64
            } else {
                0.5
            };
            p.mpki = Some(mpki);
            p.numa_penalty = Some(1.0 + mpki / 100.0);
            p.memory_bytes
                .insert(nodes[(i * 7) % nodes.len()], 256 << 20);
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

fn machines(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan");
    for spec in [
        "2n:1l:4c:1t",
        "2n:2l:8c:2t",
        "4n:2l:8c:2t",
        "8n:2l:8c:2t",
        "16n:2l:8c:2t",
    ] {
        let snap = snapshot(topology::machine(spec).expect("spec"));
        for name in ["nmass", "auto"] {
            let policy = policy::by_name(name).expect("policy");
            group.bench_with_input(BenchmarkId::new(name, spec), &snap, |b, s| {
                b.iter(|| black_box(policy.plan(black_box(s))))
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(std::time::Duration::from_secs(2));
    targets = epochs, machines
}
criterion_main!(benches);
