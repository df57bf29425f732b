//! The observe layer against fake procfs trees (staged exactly) and once against the
//! real `/proc` of the machine running the tests.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use numasched::observe::fakeproc::{FakeProcess, FakeProcfs, FakeThread, TICKS};
use numasched::observe::{
    read_process, DemandBasis, ObserveError, ProcDir, ReadOptions, ScanConfig, Scanner,
};
use numasched::topology::{self, Topology};

/// Two nodes with ids 0 and 2 (sparse, as on machines with a node offline), CPUs 0-1
/// on node 0 and 2-3 on node 2.
fn machine() -> Topology {
    let mut d = topology::machine("2n:1l:2c:1t").unwrap().to_desc();
    d.nodes[1].id = 2;
    Topology::from_desc(d).unwrap()
}

fn config(root: &Path) -> ScanConfig {
    ScanConfig {
        proc_root: root.to_path_buf(),
        exclude: HashSet::new(),
        read: ReadOptions::default(),
        ticks_per_second: TICKS,
        ..ScanConfig::default()
    }
}

fn fake() -> (tempfile::TempDir, FakeProcfs) {
    let dir = tempfile::tempdir().unwrap();
    let f = FakeProcfs::new(&dir.path().join("proc")).unwrap();
    (dir, f)
}

#[test]
fn builds_a_valid_snapshot_and_rates_cpu_between_passes() {
    let (_d, f) = fake();
    let topo = machine();
    // Started 10 s after boot, 45 s of CPU in 90 s of life: half a CPU on average.
    let mut db = FakeProcess::new(100, "postgres");
    db.start_time = 10 * TICKS;
    db.cpu_ticks = 45 * TICKS;
    let db = db.threads_on(&[1, 2, 2]).pages(&[(0, 1000), (2, 24)]);
    f.add(&db).unwrap();
    let mut sh = FakeProcess::new(200, "bash");
    sh.ppid = 100;
    f.add(&sh).unwrap();

    let mut scanner = Scanner::new(config(f.root()));
    let obs = scanner.scan(&topo).unwrap();
    assert_eq!(obs.demand_basis, DemandBasis::Lifetime);
    assert!(obs.problems.is_empty(), "{:?}", obs.problems);
    obs.snapshot.validate().unwrap();
    let p = &obs.snapshot.processes[0];
    assert_eq!(
        (p.pid, p.program.as_str(), p.start_time),
        (100, "postgres", 1000)
    );
    assert_eq!(p.threads, 3);
    assert!((p.cpu_demand - 0.5).abs() < 1e-9, "{}", p.cpu_demand);
    assert_eq!(
        p.memory_bytes,
        BTreeMap::from([(0, 1000 * 4096), (2, 24 * 4096)])
    );
    assert_eq!(p.current_cpus, vec![1, 2]);
    assert_eq!(p.allowed_cpus, None, "0-7 covers the machine: not a pin");
    assert_eq!(p.parent, Some(1));
    assert_eq!(
        obs.info(&obs.snapshot.processes[0]).unwrap().tids(),
        vec![100, 101, 102]
    );
    assert_eq!(
        obs.info(&obs.snapshot.processes[0]).unwrap().rss_bytes,
        1024 * 4096
    );
    assert_eq!(obs.snapshot.processes[1].parent, Some(100));
    assert_eq!(obs.snapshot.processes[1].cpu_demand, 0.0);

    // 10 s later postgres used 15 s of CPU: 1.5 CPUs over the interval.
    let mut db2 = db.clone();
    db2.cpu_ticks += 15 * TICKS;
    f.add(&db2).unwrap();
    f.set_uptime(110.0).unwrap();
    let obs = scanner.scan(&topo).unwrap();
    assert_eq!(obs.demand_basis, DemandBasis::Interval(10.0));
    assert!((obs.snapshot.processes[0].cpu_demand - 1.5).abs() < 1e-9);
}

#[test]
fn pid_reuse_is_a_new_process() {
    let (_d, f) = fake();
    let mut old = FakeProcess::new(300, "old");
    old.cpu_ticks = 50 * TICKS;
    f.add(&old).unwrap();
    let mut scanner = Scanner::new(config(f.root()));
    scanner.scan(&machine()).unwrap();
    // Same pid, born at 99 s, 0.5 s of CPU: a delta against the old process's 50 s
    // would be nonsense (and negative).
    let mut new = FakeProcess::new(300, "new");
    new.start_time = 99 * TICKS;
    new.cpu_ticks = TICKS / 2;
    f.add(&new).unwrap();
    f.set_uptime(101.0).unwrap();
    let obs = scanner.scan(&machine()).unwrap();
    let p = &obs.snapshot.processes[0];
    assert_eq!((p.program.as_str(), p.start_time), ("new", 99 * TICKS));
    assert!((p.cpu_demand - 0.25).abs() < 1e-9, "{}", p.cpu_demand);
}

#[test]
fn kernel_threads_and_excluded_pids_are_left_out() {
    let (_d, f) = fake();
    f.add(&FakeProcess::kernel_thread(2, "kthreadd")).unwrap();
    let mut k = FakeProcess::kernel_thread(15, "kworker/0:1");
    k.ppid = 2;
    f.add(&k).unwrap();
    let mut flagged = FakeProcess::new(16, "oddkthread");
    flagged.flags = 0x0020_0000;
    f.add(&flagged).unwrap();
    f.add(&FakeProcess::new(500, "numasched")).unwrap();
    f.add(&FakeProcess::new(501, "app")).unwrap();
    let mut cfg = config(f.root());
    cfg.exclude.insert(500);
    let obs = Scanner::new(cfg).scan(&machine()).unwrap();
    let pids: Vec<u32> = obs.snapshot.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, vec![501]);
    assert_eq!((obs.kernel_threads, obs.excluded), (3, 1));
}

#[test]
fn foreign_pins_are_kept() {
    let (_d, f) = fake();
    let mut pinned = FakeProcess::new(10, "pinned");
    pinned.cpus_allowed = "1-2".into();
    f.add(&pinned).unwrap();
    let mut exact = FakeProcess::new(11, "everywhere");
    exact.cpus_allowed = "0-3".into();
    f.add(&exact).unwrap();
    let mut offline = FakeProcess::new(12, "offline-only");
    offline.cpus_allowed = "60-61".into();
    f.add(&offline).unwrap();
    let mut partly = FakeProcess::new(13, "partly");
    partly.cpus_allowed = "3,60".into();
    f.add(&partly).unwrap();
    let obs = Scanner::new(config(f.root())).scan(&machine()).unwrap();
    obs.snapshot.validate().unwrap();
    let allowed: Vec<_> = obs
        .snapshot
        .processes
        .iter()
        .map(|p| (p.pid, p.allowed_cpus.clone()))
        .collect();
    assert_eq!(
        allowed,
        vec![
            (10, Some(vec![1, 2].into())),
            (11, None),
            (13, Some(vec![3].into()))
        ]
    );
    assert_eq!(
        obs.excluded, 1,
        "pinned outside the machine: nothing to plan"
    );
}

#[test]
fn memory_on_unknown_nodes_and_cpus_off_the_machine_are_dropped() {
    let (_d, f) = fake();
    let p = FakeProcess::new(10, "x")
        .threads_on(&[3, 9])
        .pages(&[(0, 1), (5, 7), (2, 0)]);
    f.add(&p).unwrap();
    let obs = Scanner::new(config(f.root())).scan(&machine()).unwrap();
    obs.snapshot.validate().unwrap();
    let s = &obs.snapshot.processes[0];
    assert_eq!(s.memory_bytes, BTreeMap::from([(0, 4096)]));
    assert_eq!(s.current_cpus, vec![3]);
    // The detail keeps what the kernel said.
    let nm = obs
        .info(&obs.snapshot.processes[0])
        .unwrap()
        .numa_maps
        .as_ref()
        .unwrap();
    assert_eq!(nm.node_bytes.get(&5), Some(&(7 * 4096)));
}

#[test]
fn vanishing_processes_are_counted_not_fatal() {
    let (_d, f) = fake();
    f.add(&FakeProcess::new(10, "stays")).unwrap();
    // Listed, then gone before stat: an empty directory.
    std::fs::create_dir_all(f.root().join("11")).unwrap();
    // Gone after stat: status no longer there.
    f.add(&FakeProcess::new(12, "half")).unwrap();
    f.delete(12, "status").unwrap();
    // One thread exits between the task listing and its stat.
    let p = FakeProcess::new(13, "threads").threads_on(&[0, 1, 1]);
    f.add(&p).unwrap();
    f.delete(13, "task/14/stat").unwrap();
    let obs = Scanner::new(config(f.root())).scan(&machine()).unwrap();
    assert!(obs.problems.is_empty(), "{:?}", obs.problems);
    let pids: Vec<u32> = obs.snapshot.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, vec![10, 13]);
    assert_eq!(obs.vanished, 2);
    assert_eq!(
        obs.info(&obs.snapshot.processes[1]).unwrap().tids(),
        vec![13, 15]
    );
    assert_eq!(obs.snapshot.processes[1].threads, 2);

    // Gone while being read: every read through the handle sees it go.
    f.add(&FakeProcess::new(20, "brief")).unwrap();
    let dir = ProcDir::open(f.root(), 20).unwrap().unwrap();
    let stat = dir.stat().unwrap().unwrap();
    f.remove(20).unwrap();
    assert!(dir
        .read_rest(stat, &ReadOptions::default())
        .unwrap()
        .is_none());
    assert!(read_process(f.root(), 20, &ReadOptions::default())
        .unwrap()
        .is_none());
    assert!(ProcDir::open(f.root(), 20).unwrap().is_none());
}

#[test]
fn malformed_files_are_reported_with_their_path() {
    let (_d, f) = fake();
    for pid in [10, 11, 12, 13, 14] {
        f.add(&FakeProcess::new(pid, "p").pages(&[(0, 1)])).unwrap();
    }
    f.write(11, "stat", "11 (p) S 1 garbage\n").unwrap();
    f.write(12, "numa_maps", "7f00 default N0=1\nnot-hex default N0=2\n")
        .unwrap();
    f.write(13, "status", "Cpus_allowed_list:\t5-2\n").unwrap();
    f.write(14, "sched", "numa_faults node=x\n").unwrap();
    let obs = Scanner::new(config(f.root())).scan(&machine()).unwrap();
    assert_eq!(obs.snapshot.processes.len(), 1, "the healthy one survives");
    let root = f.root().display().to_string();
    let msgs: Vec<String> = obs.problems.iter().map(ObserveError::to_string).collect();
    let expect = [
        format!("{root}/11/stat: "),
        format!("{root}/12/numa_maps:2: "),
        format!("{root}/13/status:1: "),
        format!("{root}/14/sched:1: "),
    ];
    assert_eq!(msgs.len(), expect.len(), "{msgs:#?}");
    for (m, e) in msgs.iter().zip(&expect) {
        assert!(m.starts_with(e.as_str()), "{m} should start with {e}");
    }
    assert_eq!(obs.problems[1].path(), f.root().join("12/numa_maps"));
}

#[test]
fn a_broken_root_is_the_only_fatal_error() {
    let (_d, f) = fake();
    f.set_uptime(f64::NAN).unwrap();
    let e = Scanner::new(config(f.root())).scan(&machine()).unwrap_err();
    assert!(e.to_string().contains("uptime"), "{e}");
    let e = Scanner::new(config(Path::new("/nonexistent/proc")))
        .scan(&machine())
        .unwrap_err();
    assert!(e.to_string().starts_with("/nonexistent/proc/uptime"), "{e}");
}

#[test]
fn the_filter_runs_before_the_costly_reads() {
    let (_d, f) = fake();
    let mut busy = FakeProcess::new(10, "busy");
    busy.cpu_ticks = 80 * TICKS;
    f.add(&busy).unwrap();
    f.add(&FakeProcess::new(11, "idle")).unwrap();
    // Would be a problem if read.
    f.write(11, "numa_maps", "garbage\n").unwrap();
    let mut scanner = Scanner::new(config(f.root())).with_filter(Box::new(|c| {
        c.cpu_demand >= 0.1 && !c.stat.comm.starts_with("ssh")
    }));
    let obs = scanner.scan(&machine()).unwrap();
    assert!(obs.problems.is_empty(), "{:?}", obs.problems);
    assert_eq!(obs.snapshot.processes.len(), 1);
    assert_eq!(obs.excluded, 1);
}

#[test]
fn hinting_faults_and_optional_files() {
    let (_d, f) = fake();
    let mut p = FakeProcess::new(10, "x");
    p.sched = Some(
        "x (10, #threads: 1)\nnuma_faults node=0 task_private=3 task_shared=1 group_private=0 group_shared=0\n\
         numa_faults node=2 task_private=9 task_shared=0 group_private=0 group_shared=0\n"
            .into(),
    );
    f.add(&p).unwrap();
    let mut q = FakeProcess::new(11, "no-sched-file");
    q.sched = None;
    f.add(&q).unwrap();
    let obs = Scanner::new(config(f.root())).scan(&machine()).unwrap();
    assert_eq!(obs.snapshot.processes.len(), 2);
    let faults = &obs.info(&obs.snapshot.processes[0]).unwrap().numa_faults;
    assert_eq!(faults[&0].task_total(), 4);
    assert_eq!(faults[&2].task_private, 9);
    assert!(obs
        .info(&obs.snapshot.processes[1])
        .unwrap()
        .numa_faults
        .is_empty());
}

/// The real `/proc`: the test process finds itself. Nothing machine-specific is
/// asserted beyond that.
#[test]
fn real_proc_finds_this_process() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let cpus = topology::cpulist::parse(&online).unwrap_or_default();
    let n = cpus.iter().max().map_or(1, |m| m + 1);
    let topo = topology::machine(&format!("1n:1l:{n}c:1t")).unwrap();
    let cfg = ScanConfig {
        exclude: HashSet::new(),
        ..ScanConfig::default()
    };
    let mut scanner = Scanner::new(cfg);
    let obs = scanner.scan(&topo).unwrap();
    let me = std::process::id();
    let i = obs
        .snapshot
        .processes
        .iter()
        .position(|p| p.pid == me)
        .expect("the scan finds the test process");
    let p = &obs.snapshot.processes[i];
    assert!(p.threads >= 1);
    assert!(p.start_time > 0);
    assert!(obs
        .info(&obs.snapshot.processes[i])
        .unwrap()
        .tids()
        .contains(&me));
    assert!(obs.info(&obs.snapshot.processes[i]).unwrap().rss_bytes > 0);
    assert!(obs.kernel_threads > 0 || obs.snapshot.processes.iter().all(|p| p.pid != 2));
    // A second pass rates CPU over the interval.
    let obs = scanner.scan(&topo).unwrap();
    assert!(matches!(obs.demand_basis, DemandBasis::Interval(_)));
    println!(
        "{} processes, {} kernel threads, {} vanished, {} incomplete, problems: {:?}",
        obs.snapshot.processes.len(),
        obs.kernel_threads,
        obs.vanished,
        obs.incomplete,
        obs.problems
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    );
}

/// Details go with their process by identity: a stage that drops a process from the
/// snapshot alone (as Slurm confinement does) cannot shift the next process onto its
/// neighbour's details, which a pairing by position did.
#[test]
fn details_follow_their_process_when_the_snapshot_drops_one() {
    let (_d, f) = fake();
    for (pid, pages) in [(100u32, 10u64), (200, 20), (300, 30)] {
        f.add(&FakeProcess::new(pid, "p").pages(&[(0, pages)]))
            .unwrap();
    }
    let mut scanner = Scanner::new(config(f.root()));
    let mut obs = scanner.scan(&machine()).unwrap();
    obs.snapshot.processes.retain(|p| p.pid != 200);
    let pairs: Vec<(u32, u32)> = obs.with_info().map(|(p, i)| (p.pid, i.pid())).collect();
    assert_eq!(pairs, vec![(100, 100), (300, 300)]);
    obs.retain(|k| k.pid != 300);
    assert_eq!(obs.snapshot.processes.len(), 1);
    assert!(
        obs.details.keys().all(|k| k.pid != 300),
        "retain drops the details too"
    );
}

/// A shell's short commands do its work in children it waits for, each gone before a
/// scan could see it: their CPU time (stat's cutime) ran in the shell's set and is the
/// shell's, not others' work crowding its CPU (which moved a fork-heavy script between
/// CPUs every epoch under `--pin cpu`). Children's time from before the first read is
/// no rate.
#[test]
fn a_processs_waited_for_children_are_not_others_work() {
    let (_d, f) = fake();
    let topo = machine();
    let mut sh = FakeProcess::new(100, "sh");
    sh.start_time = 10 * TICKS;
    sh.cpus_allowed = "1".into();
    sh.child_ticks = 50 * TICKS;
    f.add(&sh.clone().threads_on(&[1])).unwrap();
    f.set_cpu_times(&[(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)])
        .unwrap();
    let mut scanner = Scanner::new(config(f.root()));
    let first = scanner.scan(&topo).unwrap();
    let key = first.snapshot.processes[0].key();
    assert_eq!(first.details[&key].children_demand, 0.0, "no rate yet");
    // One second: CPU 1 busy, a fifth of it the shell's, the rest its children's.
    f.set_uptime(101.0).unwrap();
    sh.cpu_ticks = TICKS / 5;
    sh.child_ticks += TICKS * 4 / 5;
    f.update(&sh.clone().threads_on(&[1])).unwrap();
    f.set_cpu_times(&[(0, 0, 100), (1, 100, 0), (2, 0, 100), (3, 0, 100)])
        .unwrap();
    let obs = scanner.scan(&topo).unwrap();
    assert!(obs.problems.is_empty(), "{:?}", obs.problems);
    assert!((obs.details[&key].children_demand - 0.8).abs() < 1e-9);
    assert!(
        obs.snapshot.others_pinned.is_empty(),
        "{:?}",
        obs.snapshot.others_pinned
    );
}

/// A scanner that selects the processes named `load`, after a first pass with every
/// CPU of [`machine`] idle.
fn loads_scanned(f: &FakeProcfs, topo: &Topology) -> Scanner {
    f.set_cpu_times(&[(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)])
        .unwrap();
    let mut scanner =
        Scanner::new(config(f.root())).with_filter(Box::new(|c| c.stat.comm == "load"));
    scanner.scan(topo).unwrap();
    scanner
}

/// A virtual CPU its host deschedules loses the ticks it would have counted, busy or
/// not: two loads alone on node 2's CPUs ran 0.6 of a CPU each in a second of wall
/// time, and those CPUs counted 60 ticks each, all busy. Others' work there is none.
/// As shares of the ticks counted the CPUs read wholly busy, and the 0.4 left on each
/// read as a CPU of others' work (the QEMU bed's `blind` on its 2-node guest, which
/// then sent a load off its memory and back, epoch after epoch).
#[test]
fn lost_ticks_of_a_virtual_cpu_are_not_others_work() {
    let (_d, f) = fake();
    let topo = machine();
    let load = |pid: u32, cpu: u32, ticks: u64| {
        let mut p = FakeProcess::new(pid, "load");
        p.start_time = 10 * TICKS;
        p.cpus_allowed = "2-3".into();
        p.cpu_ticks = ticks;
        p.threads_on(&[cpu])
    };
    f.add(&load(100, 2, 10 * TICKS)).unwrap();
    f.add(&load(200, 3, 10 * TICKS)).unwrap();
    let mut scanner = loads_scanned(&f, &topo);
    f.set_uptime(101.0).unwrap();
    let lost = TICKS * 6 / 10;
    f.update(&load(100, 2, 10 * TICKS + lost)).unwrap();
    f.update(&load(200, 3, 10 * TICKS + lost)).unwrap();
    f.set_cpu_times(&[(0, 0, TICKS), (1, 0, TICKS), (2, lost, 0), (3, lost, 0)])
        .unwrap();
    let obs = scanner.scan(&topo).unwrap();
    assert!(obs.problems.is_empty(), "{:?}", obs.problems);
    assert!(
        obs.snapshot.others_taken.is_empty(),
        "{}",
        obs.snapshot.others_taken
    );
}

/// Others' work per cache counts a managed process's work where its threads that ran
/// this epoch are, not where a sleeping helper was last seen. Two loads free to run
/// anywhere run on node 2, each with a report thread asleep since it last ran on node
/// 0, while node 0 ran half a CPU of others' work on each CPU: with half of each load
/// put on its helper's old CPU, the loads' own work read as a CPU of others' on node 2,
/// which a plan would then keep their neighbours off.
#[test]
fn a_managed_process_works_where_its_busy_threads_ran_not_where_a_sleeper_was() {
    let (_d, f) = fake();
    let topo = machine();
    let load = |pid: u32, worker_cpu: u32, helper_cpu: u32, ticks: u64| {
        let mut p = FakeProcess::new(pid, "load");
        p.start_time = 10 * TICKS;
        p.cpus_allowed = "0-3".into();
        p.cpu_ticks = ticks;
        p.threads = vec![
            FakeThread {
                tid: pid,
                cpu: helper_cpu,
                cpu_ticks: 0,
            },
            FakeThread {
                tid: pid + 1,
                cpu: worker_cpu,
                cpu_ticks: ticks,
            },
        ];
        p
    };
    let other = |ticks: u64| {
        let mut p = FakeProcess::new(300, "other");
        p.start_time = 10 * TICKS;
        p.cpu_ticks = ticks;
        p.threads_on(&[0])
    };
    f.add(&load(100, 2, 0, 10 * TICKS)).unwrap();
    f.add(&load(200, 3, 1, 10 * TICKS)).unwrap();
    f.add(&other(10 * TICKS)).unwrap();
    let mut scanner = loads_scanned(&f, &topo);
    // One second: each worker ran its CPU of node 2 whole; the helpers slept; node
    // 0's CPUs were each half busy with others' work.
    f.set_uptime(101.0).unwrap();
    f.update(&load(100, 2, 0, 11 * TICKS)).unwrap();
    f.update(&load(200, 3, 1, 11 * TICKS)).unwrap();
    f.update(&other(11 * TICKS)).unwrap();
    f.set_cpu_times(&[(0, 50, 50), (1, 50, 50), (2, 100, 0), (3, 100, 0)])
        .unwrap();
    let obs = scanner.scan(&topo).unwrap();
    assert!(obs.problems.is_empty(), "{:?}", obs.problems);
    let taken = &obs.snapshot.others_taken;
    assert!(
        !taken.contains(2) && !taken.contains(3),
        "node 2 is the loads' own: {taken}"
    );
    assert_eq!(
        taken.len(),
        1,
        "a CPU's worth of others' work on node 0: {taken}"
    );
}

/// A load narrowed to node 2 this epoch ran a little on CPU 0 before it: its demand is
/// scaled by the ticks counted where it may run now, not by CPU 0's, which its host
/// descheduled (a quarter of its ticks counted). Scaled by both, the load read 1.76
/// CPUs on CPU 2 and hid the 0.9 of a CPU that others' work kept CPU 3 busy.
#[test]
fn a_narrowed_loads_work_is_scaled_by_the_ticks_counted_where_it_may_run() {
    let (_d, f) = fake();
    let topo = machine();
    let load = |ticks: u64, helper_ticks: u64| {
        let mut p = FakeProcess::new(100, "load");
        p.start_time = 10 * TICKS;
        p.cpus_allowed = "2-3".into();
        p.cpu_ticks = ticks + helper_ticks;
        p.threads = vec![
            FakeThread {
                tid: 100,
                cpu: 0,
                cpu_ticks: helper_ticks,
            },
            FakeThread {
                tid: 101,
                cpu: 2,
                cpu_ticks: ticks,
            },
        ];
        p
    };
    f.add(&load(10 * TICKS, TICKS)).unwrap();
    let mut scanner = loads_scanned(&f, &topo);
    // One second: the worker ran CPU 2 whole, the helper a tenth of a second on CPU 0
    // before the narrowing; CPU 0 counted 25 ticks, CPU 3 was 0.9 busy.
    f.set_uptime(101.0).unwrap();
    f.update(&load(11 * TICKS, TICKS + TICKS / 10)).unwrap();
    f.set_cpu_times(&[(0, 10, 15), (1, 0, 100), (2, 100, 0), (3, 90, 10)])
        .unwrap();
    let obs = scanner.scan(&topo).unwrap();
    assert!(obs.problems.is_empty(), "{:?}", obs.problems);
    let taken = &obs.snapshot.others_taken;
    assert!(
        taken.iter().any(|c| *c == 2 || *c == 3),
        "others' work keeps one of node 2's CPUs: {taken}"
    );
}

/// A program whose main thread only waits for its worker (most do) waits in the
/// worker's schedstat: summed over its threads, its work pinned to CPU 0 is what it
/// ran and what the worker waited, a whole CPU, not the half that the main thread's
/// schedstat alone said (three loads on two CPUs read as two).
#[test]
fn an_unselected_programs_waiting_is_its_workers_too() {
    let (_d, f) = fake();
    let topo = machine();
    let ours = FakeProcess::new(100, "ours");
    let mut two = FakeProcess::new(300, "two");
    two.start_time = 10 * TICKS;
    two.cpus_allowed = "0".into();
    two.cpu_ticks = 45 * TICKS;
    let two = two.threads_on(&[0, 0]);
    f.add(&ours).unwrap();
    f.add(&two).unwrap();
    let waits = |f: &FakeProcfs, main: u64, worker: u64| {
        f.write(300, "schedstat", &format!("0 {main} 0\n")).unwrap();
        f.write(300, "task/300/schedstat", &format!("0 {main} 0\n"))
            .unwrap();
        f.write(300, "task/301/schedstat", &format!("0 {worker} 0\n"))
            .unwrap();
    };
    waits(&f, 0, 45_000_000_000);
    f.set_cpu_times(&[(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)])
        .unwrap();
    let mut scanner =
        Scanner::new(config(f.root())).with_filter(Box::new(|c| c.stat.comm == "ours"));
    scanner.scan(&topo).unwrap();
    // One second: the worker ran half of it and waited the other half.
    f.set_uptime(101.0).unwrap();
    let mut two = two;
    two.cpu_ticks += TICKS / 2;
    let two = two.threads_on(&[0, 0]);
    f.update(&two).unwrap();
    waits(&f, 0, 45_500_000_000);
    f.set_cpu_times(&[(0, 100, 0), (1, 0, 100), (2, 0, 100), (3, 0, 100)])
        .unwrap();
    let obs = scanner.scan(&topo).unwrap();
    assert!(obs.problems.is_empty(), "{:?}", obs.problems);
    let pinned = &obs.snapshot.others_pinned;
    assert!((pinned[&0] - 1.0).abs() < 1e-9, "{pinned:?}");
    let demand = &obs.snapshot.others_demand;
    assert!((demand[&0] - 1.0).abs() < 1e-9, "{demand:?}");
}

/// Others' pinned work per CPU: each CPU's interrupt time between passes (`stat`), and
/// of each busy process the scan does not select what its affinity keeps on its CPUs,
/// run or waited for (its threads' `schedstat`).
/// Work free to move counts nowhere however busy it keeps a CPU: here a free neighbour
/// on CPU 1, where a pinned pair on CPU 0 pushed it (the no_harm bench's case). A span
/// under MIN_TICKS (a very short epoch) is not read: the last finding stands.
#[test]
fn others_pinned_work_is_interrupts_and_what_unselected_affinities_keep_on_a_cpu() {
    let (_d, f) = fake();
    let topo = machine();
    let mut ours = FakeProcess::new(100, "ours");
    ours.start_time = 10 * TICKS;
    ours.cpus_allowed = "0".into();
    let mut pinned = FakeProcess::new(200, "pinned");
    pinned.start_time = 10 * TICKS;
    pinned.cpus_allowed = "0".into();
    let mut free = FakeProcess::new(201, "free");
    free.start_time = 10 * TICKS;
    let mut idle_pinned = FakeProcess::new(202, "idle-pinned");
    idle_pinned.cpus_allowed = "2".into();
    let all = |f: &FakeProcfs, a: &FakeProcess, b: &FakeProcess, c: &FakeProcess| {
        f.update(&a.clone().threads_on(&[0])).unwrap();
        f.update(&b.clone().threads_on(&[0])).unwrap();
        f.update(&c.clone().threads_on(&[1])).unwrap();
    };
    for p in [&ours, &pinned, &free, &idle_pinned] {
        f.add(p).unwrap();
    }
    // Busy from the start (90 s), half running, half waiting.
    pinned.cpu_ticks = 45 * TICKS;
    f.update(&pinned).unwrap();
    f.write(200, "schedstat", "45000000000 45000000000 9000\n")
        .unwrap();
    f.set_cpu_times(&[(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)])
        .unwrap();
    let mut scanner =
        Scanner::new(config(f.root())).with_filter(Box::new(|c| c.stat.comm == "ours"));
    let first = scanner.scan(&topo).unwrap();
    assert!(
        first.snapshot.others_pinned.is_empty(),
        "nothing to difference yet"
    );
    // One second: ours and the pinned one share CPU 0, each waiting while the other
    // runs (the pinned one would take all of it: that is what it takes from a load
    // pinned beside it); the free one runs alone on CPU 1; CPU 3 serves interrupts
    // for a twentieth of it.
    f.set_uptime(101.0).unwrap();
    f.write(200, "schedstat", "45500000000 45500000000 9050\n")
        .unwrap();
    // Started half a second ago, pinned to CPU 2 and runnable, it has not run yet: it
    // waited all its life.
    let mut young = FakeProcess::new(203, "young");
    young.start_time = 10050;
    young.state = 'R';
    young.cpus_allowed = "2".into();
    f.add(&young).unwrap();
    f.write(203, "schedstat", "0 400000000 0\n").unwrap();
    ours.cpu_ticks = TICKS / 2;
    pinned.cpu_ticks += TICKS / 2;
    free.cpu_ticks = TICKS;
    all(&f, &ours, &pinned, &free);
    f.set_cpu_times_with_irq(&[
        (0, 100, 0, 0),
        (1, 100, 0, 0),
        (2, 0, 100, 0),
        (3, 5, 95, 5),
    ])
    .unwrap();
    let obs = scanner.scan(&topo).unwrap();
    assert!(obs.problems.is_empty(), "{:?}", obs.problems);
    assert_eq!(obs.excluded, 4);
    let others = &obs.snapshot.others_pinned;
    assert_eq!(
        others.keys().copied().collect::<Vec<_>>(),
        vec![0, 2, 3],
        "{others:?}"
    );
    assert!((others[&0] - 1.0).abs() < 1e-9 && (others[&3] - 0.05).abs() < 1e-9);
    assert!((others[&2] - 0.8).abs() < 1e-9, "{others:?}");
    // 20 ms later: too short to read; the last finding stands.
    f.set_uptime(101.02).unwrap();
    f.set_cpu_times_with_irq(&[
        (0, 102, 0, 0),
        (1, 102, 0, 0),
        (2, 0, 102, 0),
        (3, 5, 97, 5),
    ])
    .unwrap();
    assert_eq!(&scanner.scan(&topo).unwrap().snapshot.others_pinned, others);
    // Someone widened the pinned one's affinity: its work is free to move now.
    f.set_uptime(102.0).unwrap();
    ours.cpu_ticks += TICKS / 2;
    pinned.cpu_ticks += TICKS / 2;
    pinned.cpus_allowed = "0-3".into();
    f.add(&pinned).unwrap();
    free.cpu_ticks += TICKS;
    all(&f, &ours, &pinned, &free);
    f.set_cpu_times_with_irq(&[
        (0, 200, 0, 0),
        (1, 200, 0, 0),
        (2, 0, 200, 0),
        (3, 5, 195, 5),
    ])
    .unwrap();
    let obs = scanner.scan(&topo).unwrap();
    assert!(
        obs.snapshot.others_pinned.is_empty(),
        "{:?}",
        obs.snapshot.others_pinned
    );
}
