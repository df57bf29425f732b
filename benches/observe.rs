//! Observation passes over a fake procfs (target < 50 ms for 2,000 processes; a daemon
//! watching 500 idle ones should spend under 5 ms of its 1 s epoch): the daemon scans
//! once per epoch, so a pass must stay a small part of it.
//!
//! The tree is on tmpfs (`/dev/shm`, else the temp directory), so this measures our
//! parsing plus in-memory file reads; on a live system the kernel's own cost of generating
//! numa_maps (a page-table walk per mapping) comes on top and grows with RSS, which makes
//! the steady-state saving larger there, not smaller.

use std::collections::HashSet;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use numasched::observe::fakeproc::{FakeProcess, FakeProcfs, TICKS};
use numasched::observe::{ReadOptions, ScanConfig, Scanner};
use numasched::topology::{self, Topology};

/// `n` processes: 1–4 threads, 2–40 numa_maps lines spread over two nodes, a tenth
/// of them kernel threads (skipped after stat), like a busy server's /proc. Returns
/// the user processes, for benchmarks that change them.
fn populate(f: &FakeProcfs, n: u32) -> Vec<FakeProcess> {
    let mut user = Vec::new();
    for i in 0..n {
        let pid = 1000 + i * 8;
        if i % 10 == 0 {
            f.add(&FakeProcess::kernel_thread(pid, "kworker/u8:1"))
                .unwrap();
            continue;
        }
        let mut p = FakeProcess::new(pid, &format!("proc-{i}"));
        p.cpu_ticks = u64::from(i) * 7 % 5000;
        p.start_time = u64::from(i % 90) * TICKS;
        let threads = 1 + (i % 4) as usize;
        let cpus: Vec<u32> = (0..threads)
            .map(|t| ((i as usize + t) % 4) as u32)
            .collect();
        let lines = 1 + (i % 20) as u64;
        let pages: Vec<(u32, u64)> = (0..lines * 2)
            .map(|l| ((l % 2) as u32, 10 + (l * 37 + u64::from(i)) % 4000))
            .collect();
        let p = p.threads_on(&cpus).pages(&pages);
        f.add(&p).unwrap();
        user.push(p);
    }
    user
}

/// A fake /proc of `n` processes on tmpfs where there is one: procfs is in memory
/// too, and a disk filesystem's directory lookups would dominate the figure.
fn tree(n: u32) -> (tempfile::TempDir, FakeProcfs, Vec<FakeProcess>) {
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let f = FakeProcfs::new(&dir.path().join("proc")).unwrap();
    let user = populate(&f, n);
    (dir, f, user)
}

fn config(f: &FakeProcfs) -> ScanConfig {
    ScanConfig {
        proc_root: f.root().to_path_buf(),
        exclude: HashSet::new(),
        read: ReadOptions::default(),
        ticks_per_second: TICKS,
        // What is timed is reading the processes, not the daemon's first sample of
        // /proc/stat (a sleep).
        first_cpu_span: std::time::Duration::ZERO,
        ..ScanConfig::default()
    }
}

/// A scanner that has made its first pass, as the daemon's has after one epoch.
fn warmed(cfg: ScanConfig, topo: &Topology, expect: usize) -> Scanner {
    let mut scanner = Scanner::new(cfg);
    let first = scanner.scan(topo).unwrap();
    assert_eq!(first.snapshot.processes.len(), expect);
    assert!(first.problems.is_empty());
    scanner
}

/// Every file every pass (ages of 1), as before the scanner remembered anything:
/// everything, then without the sched file (machines where NUMA balancing is off,
/// Sensors::read_options), then stat and status only, the floor of such a pass.
fn every_pass(c: &mut Criterion, cfg: &ScanConfig, topo: &Topology) {
    let variants = [
        ("all files", ReadOptions::default()),
        (
            "no sched",
            ReadOptions {
                sched: false,
                ..ReadOptions::default()
            },
        ),
        (
            "stat+status only",
            ReadOptions {
                threads: false,
                numa_maps: false,
                sched: false,
                status: true,
            },
        ),
    ];
    for (name, read) in variants {
        let cfg = ScanConfig {
            read,
            ..cfg.clone().every_pass()
        };
        let mut scanner = warmed(cfg, topo, 1800);
        c.bench_function(
            &format!("observe pass, 2000 processes, every pass, {name}"),
            |b| b.iter(|| scanner.scan(topo).unwrap()),
        );
    }
}

fn bench(c: &mut Criterion) {
    let (_dir, f, mut user) = tree(2000);
    let topo = topology::machine("2n:1l:2c:1t").unwrap();
    let cfg = config(&f);
    every_pass(c, &cfg, &topo);
    // The default ages. The first pass reads everything, whatever the ages.
    c.bench_function("observe pass, 2000 processes, first pass", |b| {
        b.iter(|| Scanner::new(cfg.clone()).scan(&topo).unwrap())
    });
    // Later passes over an unchanged tree: stat always, the rest only as it ages out
    // (status every 5th pass, numa_maps every 10th; averaged in).
    let mut scanner = warmed(cfg.clone(), &topo, 1800);
    c.bench_function("observe pass, 2000 processes, steady state", |b| {
        b.iter(|| scanner.scan(&topo).unwrap())
    });
    // Every process used CPU since the last pass (RSS unchanged): multi-threaded ones
    // have their task directory read again. Rewriting the stat files is not timed.
    let mut scanner = warmed(cfg.clone(), &topo, 1800);
    c.bench_function(
        "observe pass, 2000 processes, steady state, all busy",
        |b| {
            b.iter_batched(
                || {
                    for p in &mut user {
                        p.cpu_ticks += 1;
                        f.write(p.pid, "stat", &p.stat_line()).unwrap();
                    }
                },
                |()| scanner.scan(&topo).unwrap(),
                BatchSize::PerIteration,
            )
        },
    );
    // The daemon's usual case: the filter keeps the few processes worth managing
    // (here one in ten) and only those get the costly reads.
    let mut scanner = Scanner::new(cfg.clone()).with_filter(Box::new(|c| c.stat.pid % 80 == 0));
    let first = scanner.scan(&topo).unwrap();
    assert_eq!(first.snapshot.processes.len(), 200);
    c.bench_function(
        "observe pass, 2000 processes, steady state, filter keeps 1 in 10",
        |b| b.iter(|| scanner.scan(&topo).unwrap()),
    );
    // A small idle machine: the < 0.5 % of a core (5 ms per 1 s epoch) budget.
    let (_dir500, f500, _) = tree(500);
    let mut scanner = warmed(config(&f500), &topo, 450);
    c.bench_function("observe pass, 500 processes, steady state", |b| {
        b.iter(|| scanner.scan(&topo).unwrap())
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
