//! One full observation pass over a fake procfs of 2,000 processes (target < 50 ms):
//! the daemon scans once per epoch, so a pass must stay a small part of it.
//!
//! The tree is on tmpfs (`/dev/shm`, else the temp directory), so this measures our
//! parsing plus in-memory file reads; on a live system the kernel's own cost of generating
//! numa_maps (a page-table walk per mapping) comes on top and grows with RSS.

use std::collections::HashSet;

use criterion::{criterion_group, criterion_main, Criterion};
use numasched::observe::fakeproc::{FakeProc, FakeProcess, TICKS};
use numasched::observe::{ReadOptions, ScanConfig, Scanner};
use numasched::topology;

/// 2,000 processes: 1–4 threads, 2–40 numa_maps lines spread over two nodes, a tenth
/// of them kernel threads (skipped after stat), like a busy server's /proc.
fn populate(f: &FakeProc, n: u32) {
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
    }
}

fn bench(c: &mut Criterion) {
    // tmpfs where there is one: procfs is in memory too, and a disk filesystem's
    // directory lookups would dominate the figure.
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let f = FakeProc::new(&dir.path().join("proc")).unwrap();
    populate(&f, 2000);
    let topo = topology::machine("2n:1l:2c:1t").unwrap();
    let cfg = ScanConfig {
        proc_root: f.root().to_path_buf(),
        exclude: HashSet::new(),
        read: ReadOptions::default(),
        ticks_per_second: TICKS,
    };
    // Everything (what the brief's target is about); then without the sched file, as
    // on machines where NUMA balancing is off (Sensors::read_options); then stat and
    // status only, the floor of a pass.
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
        let mut scanner = Scanner::new(ScanConfig {
            read,
            ..cfg.clone()
        });
        let first = scanner.scan(&topo).unwrap();
        assert_eq!(first.snapshot.processes.len(), 1800);
        assert!(first.problems.is_empty());
        c.bench_function(&format!("observe pass, 2000 processes, {name}"), |b| {
            b.iter(|| scanner.scan(&topo).unwrap())
        });
    }
    // The daemon's usual case: the filter keeps the few processes worth managing
    // (here one in ten) and only those get the costly reads.
    let mut scanner = Scanner::new(cfg.clone()).with_filter(Box::new(|c| c.stat.pid % 80 == 0));
    let first = scanner.scan(&topo).unwrap();
    assert_eq!(first.snapshot.processes.len(), 200);
    c.bench_function(
        "observe pass, 2000 processes, all files, filter keeps 1 in 10",
        |b| b.iter(|| scanner.scan(&topo).unwrap()),
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
