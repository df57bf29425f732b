//! The daemon's epoch engine on a fake procfs and a fake kernel: when it re-plans
//! (first epoch, MPKI moved > 20% from the last plan, arrivals, departures, never
//! faster than the hysteresis interval), and how managed processes leave (exit, pid
//! reuse, no longer selected, quiet too long) without anything left changed.

use numasched::model::CpuSet;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use numasched::apply::fake::FAKE_PAGE;
use numasched::apply::{Action, Actuator, ActuatorConfig, FakeKernel, Restored};
use numasched::characterise::live::{Live, LiveConfig};
use numasched::daemon::config::{Glob, Selection};
use numasched::daemon::jobs::Jobs;
use numasched::daemon::recovery::JournalFile;
use numasched::daemon::select::Selector;
use numasched::daemon::trigger::TriggerParams;
use numasched::daemon::{Engine, EngineConfig, EpochReport, Stages};
use numasched::observe::fakeproc::{FakeProcess, FakeProcfs};
use numasched::observe::slurm::{JobMode, SlurmReader};
use numasched::observe::{CounterError, CounterSample, CounterSource, ScanConfig, Scanner};
use numasched::topology::{spec, CpuId};

/// Counters whose per-epoch deltas the test sets: MPKI = misses per 1000 instructions.
#[derive(Clone, Default)]
struct Scripted(Arc<Mutex<HashMap<u32, CounterSample>>>);

impl Scripted {
    fn mpki(&self, pid: u32, mpki: f64) {
        self.0.lock().expect("lock").insert(
            pid,
            CounterSample {
                instructions: 1_000_000,
                cycles: 1_000_000,
                llc_misses: (mpki * 1000.0) as u64,
            },
        );
    }
}

impl CounterSource for Scripted {
    fn attach(&mut self, _: u32, _: u64, _: &[u32]) -> Result<(), CounterError> {
        Ok(())
    }
    fn detach(&mut self, _: u32) {}
    fn delta(&mut self, pid: u32) -> Result<CounterSample, CounterError> {
        Ok(self
            .0
            .lock()
            .expect("lock")
            .get(&pid)
            .copied()
            .unwrap_or_default())
    }
    fn attached(&self) -> usize {
        0
    }
}

const ALL: [CpuId; 4] = [0, 1, 2, 3];

struct Bed {
    _dir: tempfile::TempDir,
    fake: FakeProcfs,
    counts: Scripted,
    engine: Engine<FakeKernel>,
    uptime: f64,
}

fn bed(select: Selection, min_interval: f64, release_after: f64) -> Bed {
    bed_with(select, min_interval, release_after, false)
}

/// `slurm`: Slurm jobs are looked for, their cgroups under `<dir>/sys/fs/cgroup`.
fn bed_with(select: Selection, min_interval: f64, release_after: f64, slurm: bool) -> Bed {
    let policy = numasched::policy::by_name("nmass").expect("policy");
    bed_scanning(
        select,
        min_interval,
        release_after,
        slurm,
        true,
        policy,
        Default::default(),
    )
}

/// A bed whose policy is `name` as the daemon runs it: at `--pin llc`.
fn bed_as_daemon(name: &str) -> Bed {
    let policy = Box::new(numasched::policy::Granular::new(
        numasched::policy::by_name(name).expect("policy"),
        numasched::policy::Pin::Llc,
    ));
    bed_scanning(
        everyone(),
        0.0,
        30.0,
        false,
        true,
        policy,
        Default::default(),
    )
}

/// `every_pass`: the scanner reads every file every pass; otherwise it keeps what it
/// read for as long as the daemon's defaults let it (status for 5 passes).
fn bed_scanning(
    select: Selection,
    min_interval: f64,
    release_after: f64,
    slurm: bool,
    every_pass: bool,
    policy: Box<dyn numasched::policy::Policy>,
    actuator: ActuatorConfig,
) -> Bed {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeProcfs::new(&dir.path().join("proc")).expect("fake procfs");
    let journal = dir.path().join("journal.json");
    let topology = spec::parse("2n:1l:2c:1t").expect("spec");
    let counts = Scripted::default();
    let config = ScanConfig {
        proc_root: fake.root().to_path_buf(),
        exclude: Default::default(),
        ..ScanConfig::default()
    };
    let scanner = Scanner::new(if every_pass {
        config.every_pass()
    } else {
        config
    });
    let selector = Selector::new(&select, fake.root());
    let engine = Engine::new(
        EngineConfig {
            trigger: TriggerParams {
                mpki_change: 0.2,
                min_interval,
                hard_pins: true,
            },
            release_after,
            min_cpu: select.min_cpu,
            min_rss: select.min_rss,
        },
        Stages {
            topology,
            scanner,
            selector,
            live: Live::new(
                LiveConfig {
                    learn: false,
                    ..LiveConfig::default()
                },
                Some(Box::new(counts.clone())),
                None,
            ),
            policy,
            actuator: Actuator::new(FakeKernel::new(&ALL).shown_in(fake.root()), actuator),
            tree: None,
            journal_file: Some(JournalFile::new(&journal)),
            jobs: slurm.then(|| {
                Jobs::new(SlurmReader::new(
                    fake.root(),
                    &dir.path().join("sys/fs/cgroup"),
                ))
            }),
        },
    );
    Bed {
        _dir: dir,
        fake,
        counts,
        engine,
        uptime: 100.0,
    }
}

fn everyone() -> Selection {
    Selection::default()
}

impl Bed {
    /// A process on the fake machine (procfs and kernel alike), homed on `node`.
    fn add(&self, pid: u32, comm: &str, node: u32, start: u64) {
        let mut p = FakeProcess::new(pid, comm).pages(&[(node, 1000)]);
        p.start_time = start;
        p.cpus_allowed = CpuSet::from(ALL).to_string();
        self.engine.actuator().kernel().spawn(&p).expect("spawn");
    }

    fn epoch(&mut self, now: f64) -> EpochReport {
        self.uptime += 1.0;
        self.fake.set_uptime(self.uptime).expect("uptime");
        self.engine.epoch(now, 0).expect("epoch")
    }

    /// Puts `pid` in Slurm job step `step`'s cgroup (v1 layout), whose cpuset is
    /// `cpus`/`mems`, with `env` (NUL-separated) as its environment.
    fn in_job(&self, pid: u32, job: u32, cpus: &str, mems: &str, env: &str) {
        let path = format!("slurm_n/uid_0/job_{job}/step_0");
        let step = self._dir.path().join("sys/fs/cgroup/cpuset").join(&path);
        for d in [step.clone(), step.parent().expect("job").to_path_buf()] {
            std::fs::create_dir_all(&d).expect("mkdir");
            std::fs::write(d.join("cpuset.cpus"), cpus).expect("cpus");
            std::fs::write(d.join("cpuset.mems"), mems).expect("mems");
        }
        self.fake
            .write(pid, "cgroup", &format!("4:cpuset:/{path}/task_0\n"))
            .expect("cgroup");
        self.fake.write(pid, "environ", env).expect("environ");
    }

    fn affinity(&self, pid: u32) -> Option<CpuSet> {
        self.engine.actuator().kernel().affinity_of(pid, pid)
    }
}

fn replanned(r: &EpochReport) -> bool {
    r.apply.is_some()
}

#[test]
fn plans_first_then_on_mpki_moves_and_never_faster_than_the_interval() {
    let mut b = bed(everyone(), 5.0, 30.0);
    b.add(100, "mcf", 0, 1000);
    b.add(101, "milc", 1, 1000);
    b.counts.mpki(100, 10.0);
    b.counts.mpki(101, 20.0);

    let r = b.epoch(0.0);
    assert_eq!(r.replan, vec!["first epoch"]);
    assert_eq!(r.apply.as_ref().map(|a| a.count(Action::Done)), Some(2));
    // Counters give MPKI from the second epoch: a change, but inside the interval.
    let r = b.epoch(1.0);
    assert!(!replanned(&r));
    assert!(
        r.waiting
            .iter()
            .any(|w| w.contains("pid 100 MPKI ? -> 10.0")),
        "{:?}",
        r.waiting
    );
    let r = b.epoch(5.0);
    assert!(replanned(&r), "taken at the end of the interval");
    assert!(!replanned(&b.epoch(20.0)), "nothing changed");

    b.counts.mpki(100, 11.5); // +15%: noise
    assert!(!replanned(&b.epoch(30.0)));
    b.counts.mpki(100, 13.0); // +30% from the plan
    let r = b.epoch(40.0);
    assert_eq!(r.replan, vec!["pid 100 MPKI 10.0 -> 13.0"]);
    assert_eq!(b.engine.managed(), 2);
}

#[test]
fn a_process_that_came_after_the_plan_says_so_until_the_next() {
    let mut b = bed(everyone(), 5.0, 30.0);
    b.add(100, "mcf", 0, 1000);
    assert!(replanned(&b.epoch(0.0)));
    b.add(101, "milc", 1, 1000);
    assert!(!replanned(&b.epoch(1.0)), "inside the interval");
    let view = |b: &Bed, pid: u32| {
        b.engine
            .views()
            .into_iter()
            .find(|v| v.pid == pid)
            .expect("managed")
    };
    let new = view(&b, 101);
    assert!(new.planned_cpus.is_empty());
    assert!(
        new.reason.starts_with("new since the last plan"),
        "{}",
        new.reason
    );
    assert!(!view(&b, 100).reason.starts_with("new"), "planned");
    assert!(replanned(&b.epoch(5.0)));
    assert!(!view(&b, 101).reason.starts_with("new"));
}

#[test]
fn each_process_ends_up_local_and_is_restored_on_shutdown() {
    let mut b = bed(everyone(), 0.0, 30.0);
    b.add(100, "mcf", 0, 1000);
    b.add(101, "milc", 1, 1000);
    b.epoch(0.0);
    let node_of = |c: CpuId| if c < 2 { 0 } else { 1 };
    let a = b.affinity(100).expect("placed");
    assert!(a.iter().all(|c| node_of(*c) == 0), "{a:?}");
    let a = b.affinity(101).expect("placed");
    assert!(a.iter().all(|c| node_of(*c) == 1), "{a:?}");
    let journal = JournalFile::new(&b._dir.path().join("journal.json"));
    let on_disk = journal.load().expect("load").expect("written while placed");
    assert_eq!(on_disk.len(), 2, "both originals on disk");
    let (restored, err) = b.engine.restore_all();
    assert!(err.is_none(), "{err:?}");
    assert_eq!(restored.len(), 2);
    assert!(!journal.path().exists(), "a clean stop leaves no journal");
    assert_eq!(b.affinity(100), Some(CpuSet::from(ALL)));
    assert_eq!(b.affinity(101), Some(CpuSet::from(ALL)));
}

/// Issue 39: `daemon --policy linux` leaves placement to the kernel: whatever runs
/// where, with its memory wherever and its MPKI known, no thread's affinity is
/// touched and nothing is journaled.
#[test]
fn the_linux_policy_changes_nothing() {
    let mut b = bed_as_daemon("linux");
    for (pid, comm, node) in [(100, "mcf", 0), (101, "milc", 1), (102, "app", 1)] {
        let mut p = FakeProcess::new(pid, comm).pages(&[(node, 1 << 18)]);
        p.start_time = 1000;
        p.cpu_ticks = 100 * 200; // busy over its life: admitted on the first pass
        p.cpus_allowed = CpuSet::from(ALL).to_string();
        b.engine.actuator().kernel().spawn(&p).expect("spawn");
    }
    b.counts.mpki(100, 30.0);
    b.counts.mpki(101, 20.0);
    for k in 0..3 {
        b.epoch(k as f64);
    }
    for pid in [100, 101, 102] {
        assert_eq!(b.affinity(pid), Some(CpuSet::from(ALL)), "pid {pid}");
    }
    let journal = JournalFile::new(&b._dir.path().join("journal.json"));
    assert!(
        journal.load().expect("load").is_none_or(|j| j.is_empty()),
        "nothing to undo"
    );
}

#[test]
fn an_exit_between_observe_and_apply_is_no_error() {
    let mut b = bed(everyone(), 0.0, 30.0);
    b.add(100, "mcf", 0, 1000);
    b.add(101, "milc", 1, 1000);
    b.engine.actuator().kernel().remove(101); // gone after the scan read it
    let r = b.epoch(0.0);
    let apply = r.apply.expect("planned");
    assert_eq!(apply.count(Action::Failed), 0);
    assert_eq!(apply.placement(101).map(|l| l.action), Some(Action::Gone));
    assert_eq!(apply.placement(100).map(|l| l.action), Some(Action::Done));
    // Next epoch it is gone from procfs too: a departure, nothing to restore.
    b.fake.remove(101).expect("remove");
    let r = b.epoch(1.0);
    assert_eq!(r.replan, vec!["1 left"]);
    assert!(
        r.released.is_empty(),
        "it was never changed: {:?}",
        r.released
    );
    let mut s = test_status();
    b.engine.fill_status(&mut s);
    assert_eq!(s.errors_total, 0);
}

#[test]
fn a_reused_pid_is_a_new_process_and_the_old_entry_is_never_restored_onto_it() {
    let mut b = bed(everyone(), 0.0, 30.0);
    b.add(100, "mcf", 1, 1000);
    b.epoch(0.0);
    assert_ne!(b.affinity(100), Some(CpuSet::from(ALL)), "placed");
    // mcf exits; a new process gets pid 100, with its own affinity.
    b.add(100, "newcomer", 0, 5000);
    b.engine.actuator().kernel().add(100, 5000, 1, &[0, 1]);
    let r = b.epoch(1.0);
    let (pid, _, how) = r.released.first().expect("old process released");
    assert_eq!((*pid, how), (100, &Restored::Reused));
    assert_eq!(r.arrived, vec![100]);
    // The newcomer is planned afresh, inside its own (narrower) affinity.
    let line = r
        .apply
        .as_ref()
        .and_then(|a| a.placement(100))
        .expect("placed");
    assert_eq!(line.action, Action::Done, "{line}");
    let a = b.affinity(100).expect("alive");
    assert!(a.iter().all(|c| *c < 2), "{a:?}");
}

#[test]
fn a_process_that_no_longer_matches_is_restored_at_once() {
    let sel = Selection {
        include_comm: vec![Glob::parse("alpha*").expect("glob")],
        ..Selection::default()
    };
    let mut b = bed(sel, 0.0, 30.0);
    b.add(100, "alpha", 1, 1000);
    b.add(101, "other", 1, 1000);
    let r = b.epoch(0.0);
    assert_eq!(r.managed, 1);
    assert_ne!(b.affinity(100), Some(CpuSet::from(ALL)));
    assert_eq!(
        b.affinity(101),
        Some(CpuSet::from(ALL)),
        "never selected, never touched"
    );
    // It exec'd another program: same pid and start time, another name.
    let mut p = FakeProcess::new(100, "beta").pages(&[(1, 1000)]);
    p.start_time = 1000;
    b.fake.add(&p).expect("rewrite");
    let r = b.epoch(1.0);
    assert_eq!(r.managed, 0);
    assert!(
        matches!(r.released[0].2, Restored::Done { .. }),
        "{:?}",
        r.released
    );
    assert_eq!(b.affinity(100), Some(CpuSet::from(ALL)));
}

#[test]
fn a_quiet_process_is_released_after_release_after_seconds_not_before() {
    let sel = Selection {
        min_cpu: 0.5,
        ..Selection::default()
    };
    let mut b = bed(sel, 0.0, 3.0);
    let mut p = FakeProcess::new(100, "mcf").pages(&[(1, 1000)]);
    p.cpu_ticks = 100 * 200; // busy over its life: admitted on the first pass
    b.fake.add(&p).expect("add");
    b.engine.actuator().kernel().add(100, 1000, 1, &ALL);
    assert_eq!(b.epoch(0.0).managed, 1);
    assert_ne!(b.affinity(100), Some(CpuSet::from(ALL)));
    // Its CPU time stops growing: quiet from now on.
    assert_eq!(b.epoch(1.0).managed, 1, "one quiet epoch");
    assert_eq!(b.epoch(2.0).managed, 1, "two");
    let r = b.epoch(3.0);
    assert_eq!(r.managed, 0, "released on the third");
    assert!(r.released[0].1.contains("quiet"));
    assert_eq!(b.affinity(100), Some(CpuSet::from(ALL)), "restored");
    // And not re-admitted while it stays quiet.
    assert_eq!(b.epoch(4.0).managed, 0);
}

/// Issue 41: the window is time, not epochs. Epochs stretch to 4 s while every
/// managed process is idle, and counted in epochs a 10-epoch window was 40 s.
#[test]
fn the_release_window_is_counted_in_seconds_when_epochs_stretch() {
    let sel = Selection {
        min_cpu: 0.5,
        ..Selection::default()
    };
    let mut b = bed(sel, 0.0, 10.0);
    let mut p = FakeProcess::new(100, "mcf").pages(&[(1, 1000)]);
    p.cpu_ticks = 100 * 200;
    b.fake.add(&p).expect("add");
    b.engine.actuator().kernel().add(100, 1000, 1, &ALL);
    assert_eq!(b.epoch(0.0).managed, 1);
    assert_eq!(b.epoch(4.0).managed, 1, "quiet for 4 s");
    assert_eq!(b.epoch(8.0).managed, 1, "for 8 s");
    let r = b.epoch(12.0);
    assert_eq!(r.managed, 0, "released after 12 s, its third quiet epoch");
    assert_eq!(b.affinity(100), Some(CpuSet::from(ALL)), "restored");
}

fn test_status() -> numasched::daemon::DaemonStatus {
    numasched::daemon::DaemonStatus {
        errors_total: 99,
        ..numasched::daemon::DaemonStatus::new(numasched::observe::Sensors::detect_with(
            &numasched::observe::sensors::Roots {
                proc: "/nonexistent".into(),
                sys: "/nonexistent".into(),
                probe_pid: 1,
            },
            Ok(()),
        ))
    }
}

#[test]
fn a_placed_process_is_not_frozen_by_its_own_narrowed_affinity() {
    let mut b = bed(everyone(), 0.0, 30.0);
    b.add(100, "mcf", 1, 1000);
    b.epoch(0.0);
    let placed = b.affinity(100).expect("placed");
    assert!(
        placed.iter().all(|c| *c >= 2),
        "local on node 1: {placed:?}"
    );
    // /proc now shows numasched's narrowing, and the memory moved to node 0 (and grew,
    // so the scan re-reads numa_maps at once rather than at its next refresh).
    let mut p = FakeProcess::new(100, "mcf").pages(&[(0, 1500)]);
    p.start_time = 1000;
    p.cpus_allowed = numasched::topology::cpulist::format(&placed);
    b.fake.add(&p).expect("rewrite");
    let r = b.epoch(1.0);
    assert_eq!(r.replan, vec!["pid 100 memory moved to node 0"]);
    let now = b.affinity(100).expect("alive");
    assert!(
        now.iter().all(|c| *c < 2),
        "followed its memory to node 0: {now:?}"
    );
}

/// The scan keeps a process's status (its allowed CPUs) for a few passes. When the
/// daemon moves a process, the status it kept shows the set the daemon gave before;
/// read against the journal's newer set, that looked like someone else's pin, and the
/// next epoch planned the process back inside its old set (a two-thread load narrowed
/// to one CPU, `tests/live/no_harm_live.rs`, under load). What the daemon changes is read
/// afresh the next pass.
#[test]
fn a_process_the_daemon_moved_is_not_held_to_the_set_it_had_before() {
    let nmass = numasched::policy::by_name("nmass").expect("policy");
    let mut b = bed_scanning(
        everyone(),
        0.0,
        30.0,
        false,
        false,
        nmass,
        Default::default(),
    );
    b.add(100, "mcf", 1, 1000);
    b.epoch(0.0);
    let first = b.affinity(100).expect("placed");
    assert!(first.iter().all(|c| *c >= 2), "local on node 1: {first:?}");
    // /proc shows what the fake kernel has; the process is busy (a tick every epoch),
    // so the scan reads its status every 5 passes and keeps it in between.
    let show = |b: &Bed, e: u64, node: u32, pages: u64| {
        let mut p = FakeProcess::new(100, "mcf").pages(&[(node, pages)]);
        p.start_time = 1000;
        p.cpu_ticks = 100 * e;
        p.threads[0].cpu_ticks = 100 * e;
        b.fake.update(&p).expect("rewrite");
    };
    let status = |b: &Bed| std::fs::read_to_string(b.fake.root().join("100/status")).unwrap();
    assert!(
        status(&b).contains(&format!("Cpus_allowed_list:\t{first}\n")),
        "the kernel's set is what /proc shows: {}",
        status(&b)
    );
    for e in 1..8 {
        show(&b, e, 1, 1000);
        b.epoch(e as f64);
        assert_eq!(b.affinity(100).as_ref(), Some(&first), "epoch {e}");
    }
    // Its memory moves to node 0 (and grows, so numa_maps is read at once): the
    // daemon follows it, and the kernel's affinity is the new set.
    show(&b, 8, 0, 1500);
    let r = b.epoch(8.0);
    assert_eq!(r.replan, vec!["pid 100 memory moved to node 0"]);
    let second = b.affinity(100).expect("alive");
    assert!(
        second.iter().all(|c| *c < 2),
        "followed its memory: {second:?}"
    );
    for e in 9..20 {
        show(&b, e, 0, 1500);
        let r = b.epoch(e as f64);
        assert!(r.replan.is_empty(), "epoch {e}: {:?}", r.replan);
        assert_eq!(b.affinity(100).as_ref(), Some(&second), "epoch {e}");
    }
}

/// Page moves are planned only when the daemon re-plans. One a plan deferred because
/// a move of the same process was under way (here: memory it allocated on node 1
/// after that move began, outside the walk) must go once that move is over, though
/// nothing else calls for a re-plan: a 4-node guest's load ended its window with all
/// its memory on the node it had left (CI 2026-12-01).
#[test]
fn page_moves_deferred_behind_a_move_under_way_go_when_it_ends() {
    let policy = numasched::policy::by_name("auto-migrate").expect("policy");
    let migrate = ActuatorConfig {
        migrate_pages: true,
        migrate_mb_per_s: 10_000.0,
        migrate_burst_mb: 10_000.0,
        ..ActuatorConfig::default()
    };
    let mut b = bed_scanning(everyone(), 0.0, 30.0, false, true, policy, migrate);
    fn kernel(b: &Bed) -> &FakeKernel {
        b.engine.actuator().kernel()
    }
    // /proc shows what the fake kernel holds, the process busy (a CPU each epoch).
    let show = |b: &Bed, e: u64| {
        kernel(b).tick(1.0);
        let pages = |node| {
            kernel(b)
                .with_proc(100, |p| p.memory.get(&node).copied().unwrap_or(0))
                .unwrap_or(0)
                / FAKE_PAGE
        };
        let mut p = FakeProcess::new(100, "mcf").pages(&[(0, pages(0)), (1, pages(1))]);
        p.start_time = 1000;
        p.state = 'R';
        p.cpu_ticks = 100 * (200 + e);
        p.threads[0].cpu_ticks = p.cpu_ticks;
        p.cpus_allowed = b.affinity(100).map_or("0-3".into(), |c| c.to_string());
        b.fake.update(&p).expect("rewrite");
    };
    let mut p = FakeProcess::new(100, "mcf").pages(&[(0, 20_000), (1, 2_000)]);
    p.start_time = 1000;
    p.cpu_ticks = 100 * 200;
    p.cpus_allowed = "0-3".into();
    kernel(&b).spawn(&p).expect("spawn");
    kernel(&b).pages(100, 0, 20_000);
    kernel(&b).pages(100, 1, 2_000);
    kernel(&b).set_move_cost(0.0002); // 500 pages an epoch's step
    b.counts.mpki(100, 20.0);
    let on_1 = |b: &Bed| {
        kernel(b)
            .with_proc(100, |p| p.memory.get(&1).copied().unwrap_or(0))
            .unwrap_or(0)
    };

    let r = b.epoch(0.0);
    let placed = b.affinity(100).expect("placed");
    assert!(
        placed.iter().all(|c| *c < 2),
        "on node 0, where its memory is: {placed}"
    );
    assert!(kernel(&b).with_proc(100, |_| ()).is_some());
    assert!(
        b.engine.actuator().migrations().get(100).is_some(),
        "a move began: {:?}",
        r.apply
    );
    // It allocates more on node 1, and its MPKI moves (the daemon re-plans): the
    // plan's move of those pages waits behind the move under way.
    kernel(&b).pages(100, 1, 1_000);
    show(&b, 1);
    b.counts.mpki(100, 30.0);
    let r = b.epoch(1.0);
    assert!(!r.replan.is_empty());
    let deferred = r.apply.as_ref().map(|a| {
        a.moves
            .iter()
            .any(|l| l.pid == 100 && l.action == Action::Deferred)
    });
    assert_eq!(deferred, Some(true), "{:?}", r.apply);
    let mut e = 2;
    while b.engine.actuator().migrations().get(100).is_some() {
        show(&b, e);
        b.epoch(e as f64);
        e += 1;
        assert!(e < 40, "the first move never ended");
    }
    // Nothing else changes: the deferred move goes all the same.
    let left = on_1(&b);
    assert!(
        left > 0,
        "the late pages were outside the first move's walk"
    );
    for _ in 0..20 {
        show(&b, e);
        b.epoch(e as f64);
        e += 1;
    }
    assert_eq!(
        on_1(&b),
        0,
        "{left} bytes were left on node 1, away from the process"
    );
}

/// Fault injection through the observe seam (issue 7): a process whose /proc files
/// turn unreadable or garbled mid-run is reported once per epoch, left out of the
/// plan and put back as it was (it is no longer observed, so no longer managed);
/// procfs unreadable as a whole fails that epoch, not the engine, and changes
/// nothing; once the files read again the processes are managed again, and a
/// shutdown restores everything.
#[test]
fn unreadable_or_garbled_proc_files_change_nothing_that_is_not_restored() {
    let mut b = bed(everyone(), 0.0, 30.0);
    b.add(100, "mcf", 0, 1000);
    b.add(101, "milc", 1, 1000);
    b.add(102, "lbm", 1, 1000);
    b.epoch(0.0);
    for pid in [100, 101, 102] {
        assert_ne!(b.affinity(pid), Some(CpuSet::from(ALL)), "pid {pid} placed");
    }

    // numa_maps of 100 becomes unreadable (a directory: reads fail with EISDIR);
    // the stat of 101 is garbled.
    let maps = b.fake.root().join("100/numa_maps");
    std::fs::remove_file(&maps).expect("rm numa_maps");
    std::fs::create_dir(&maps).expect("numa_maps as a directory");
    b.fake
        .write(101, "stat", "101 (milc) R garbage\n")
        .expect("garble stat");
    let r = b.epoch(1.0);
    let problems = r.problems.join("\n");
    assert!(problems.contains("100/numa_maps"), "{problems}");
    assert!(problems.contains("101/stat"), "{problems}");
    assert_eq!(r.problems.len(), 2, "{problems}");
    assert!(
        r.problems.iter().all(|p| !p.contains('\n')),
        "one line each: {problems}"
    );
    for pid in [100, 101] {
        assert_eq!(
            b.affinity(pid),
            Some(CpuSet::from(ALL)),
            "pid {pid} put back"
        );
        assert!(
            r.released.iter().any(|(p, _, _)| *p == pid),
            "{:?}",
            r.released
        );
    }
    let healthy = b.affinity(102).expect("alive");
    assert!(
        healthy != ALL && healthy.iter().all(|c| *c >= 2),
        "the healthy one stays managed, on its node 1: {healthy:?}"
    );
    let placed_102 = Some(healthy);

    // procfs unreadable as a whole: the epoch fails, nothing changes.
    let root = b.fake.root().to_path_buf();
    let aside = root.with_extension("aside");
    std::fs::rename(&root, &aside).expect("hide procfs");
    let e = b.engine.epoch(2.0, 0).expect_err("no procfs");
    assert!(e.to_string().contains(&*root.to_string_lossy()), "{e}");
    assert_eq!(b.affinity(102), placed_102);
    std::fs::rename(&aside, &root).expect("procfs back");

    // Readable again: managed again.
    std::fs::remove_dir(&maps).expect("rm dir");
    b.add(100, "mcf", 0, 1000);
    b.add(101, "milc", 1, 1000);
    let r = b.epoch(3.0);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let mut arrived = r.arrived.clone();
    arrived.sort_unstable();
    assert_eq!(arrived, vec![100, 101]);
    for pid in [100, 101] {
        assert_ne!(
            b.affinity(pid),
            Some(CpuSet::from(ALL)),
            "pid {pid} placed again"
        );
    }

    let (restored, err) = b.engine.restore_all();
    assert!(err.is_none(), "{err:?}");
    assert_eq!(restored.len(), 3);
    for pid in [100, 101, 102] {
        assert_eq!(
            b.affinity(pid),
            Some(CpuSet::from(ALL)),
            "pid {pid} restored"
        );
    }
}

#[test]
fn a_stop_or_an_exit_of_a_placed_process_re_plans_at_once() {
    // An interval of 100 s: only a harm may re-plan inside it.
    let mut b = bed(everyone(), 100.0, 30.0);
    b.add(100, "mcf", 0, 1000);
    b.add(101, "milc", 0, 1000);
    b.add(102, "lbm", 0, 1000);
    assert!(replanned(&b.epoch(0.0)));
    assert!(!replanned(&b.epoch(1.0)), "nothing changed");
    // SIGSTOP: its CPU is free for the others now, not in 100 s.
    let mut p = FakeProcess::new(100, "mcf").pages(&[(0, 1000)]);
    p.start_time = 1000;
    p.state = 'T';
    b.fake.add(&p).expect("rewrite");
    let r = b.epoch(2.0);
    assert!(
        r.replan.iter().any(|w| w.contains("pid 100 stopped")),
        "{:?}",
        r.replan
    );
    assert!(!replanned(&b.epoch(3.0)), "said once");
    // An exit frees its CPU the same way.
    b.fake.remove(101).expect("remove");
    b.engine.actuator().kernel().remove(101);
    let r = b.epoch(4.0);
    assert!(
        r.replan
            .iter()
            .any(|w| w.contains("pid 101: no longer selected; its CPUs are free")),
        "{:?}",
        r.replan
    );
}

/// An epoch may be followed by a longer one (`daemon::pace`) only when it planned
/// nothing and nothing managed is busy: a process that turns busy ends the calm in the
/// epoch that sees it.
#[test]
fn an_epoch_is_calm_only_when_nothing_happened_and_nothing_managed_is_busy() {
    let mut b = bed(everyone(), 5.0, 30.0);
    b.add(100, "mcf", 0, 1000);
    assert!(!b.epoch(0.0).calm, "the first plan");
    let r = b.epoch(1.0);
    assert!(r.calm, "idle and unchanged: {:?} {:?}", r.replan, r.waiting);
    // One busy second (at the scanner's clock ticks per second).
    let tps = numasched::observe::ScanConfig::default().ticks_per_second;
    let mut p = FakeProcess::new(100, "mcf").pages(&[(0, 1000)]);
    p.start_time = 1000;
    p.cpu_ticks = tps;
    p.state = 'R';
    b.fake.update(&p).expect("busy");
    let r = b.epoch(2.0);
    assert!(!r.calm, "busy");
    p.cpu_ticks += tps;
    b.fake.update(&p).expect("still busy");
    assert!(!b.epoch(3.0).calm, "busy, with nothing else to do");
}

/// Job 1 holds node 1's CPUs, and its task's memory is on node 0, where it may not go;
/// job 2 holds CPU 1 and opted out; a process outside every job has its memory on
/// node 1, but only CPU 0 is no job's.
fn three_jobs(slurm: bool) -> Bed {
    let mut b = bed_with(everyone(), 0.0, 30.0, slurm);
    b.add(10, "job1task", 0, 1);
    b.in_job(10, 1, "2-3", "1", "PATH=/bin\0");
    b.add(11, "job2task", 0, 1);
    b.in_job(11, 2, "1", "0", "NUMASCHED=off\0");
    b.add(12, "outsider", 1, 1);
    let r = b.epoch(0.0);
    assert!(replanned(&r), "{r:?}");
    b
}

#[test]
fn slurm_jobs_are_placed_inside_their_allocation_and_off_is_left_alone() {
    // Without the jobs stage the plan follows memory, into job 2's and out of job 1's
    // CPUs: what the stage must prevent.
    let blind = three_jobs(false);
    let placed = |b: &Bed, pid| b.affinity(pid).expect("known");
    assert!(placed(&blind, 10).iter().any(|c| [0, 1].contains(c)));
    assert_ne!(placed(&blind, 11), ALL.to_vec());

    let b = three_jobs(true);
    assert!(
        placed(&b, 10).iter().all(|c| [2, 3].contains(c)),
        "inside job 1's cpuset: {:?}",
        placed(&b, 10)
    );
    assert_eq!(placed(&b, 11), ALL.to_vec(), "off: never touched");
    assert_eq!(placed(&b, 12), vec![0], "kept off the jobs' CPUs");
    let mut s = test_status();
    b.engine.fill_status(&mut s);
    let steps: Vec<(String, JobMode, usize)> = s
        .jobs
        .iter()
        .map(|j| (j.step.clone(), j.mode, j.managed))
        .collect();
    assert_eq!(
        steps,
        vec![
            ("1.0".to_string(), JobMode::Manage, 1),
            ("2.0".to_string(), JobMode::Off, 0)
        ]
    );
    let job_of = |pid| {
        s.processes
            .iter()
            .find(|p| p.pid == pid)
            .and_then(|p| p.job.clone())
    };
    assert_eq!(job_of(10), Some("1.0".into()));
    assert_eq!(job_of(12), None);
    assert!(s.render().contains("[job 1.0]"), "{}", s.render());
}

#[test]
fn an_advise_job_is_planned_and_shown_but_never_changed() {
    let mut b = bed_with(everyone(), 0.0, 30.0, true);
    b.add(20, "advised", 1, 1);
    b.in_job(20, 3, "0-3", "0-1", "NUMASCHED=advise\0");
    let r = b.epoch(0.0);
    assert!(replanned(&r));
    assert_eq!(b.affinity(20), Some(CpuSet::from(ALL)), "advice only");
    assert!(
        r.advice
            .iter()
            .any(|a| a.starts_with("pid 20: would place on CPUs")),
        "{:?}",
        r.advice
    );
    let mut s = test_status();
    b.engine.fill_status(&mut s);
    let p = s.processes.iter().find(|p| p.pid == 20).expect("shown");
    assert!(
        !p.planned_cpus.is_empty() && p.planned_cpus.len() < ALL.len(),
        "the advice is shown: {p:?}"
    );
    assert!(
        s.decisions
            .iter()
            .any(|d| d.action == "advised" && d.pid == 20),
        "{:?}",
        s.decisions
    );
    assert!(
        s.decisions.iter().all(|d| d.action != "done"),
        "{:?}",
        s.decisions
    );
}

#[test]
fn a_wish_that_is_no_mode_is_reported_and_the_job_left_alone() {
    let mut b = bed_with(everyone(), 0.0, 30.0, true);
    b.add(30, "typo", 0, 1);
    b.in_job(30, 4, "0-3", "0-1", "NUMASCHED=of\0");
    let r = b.epoch(0.0);
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains("NUMASCHED=") && p.contains("4.0")),
        "{:?}",
        r.problems
    );
    assert_eq!(b.affinity(30), Some(CpuSet::from(ALL)));
    assert_eq!(r.managed, 0);
}

#[test]
fn an_outsider_the_free_cpus_cannot_hold_is_restored_and_left_to_the_kernel() {
    let mut b = bed_with(everyone(), 0.0, 30.0, true);
    b.add(40, "outsider", 0, 1);
    let r = b.epoch(0.0);
    assert!(replanned(&r));
    let placed = b.affinity(40).expect("known");
    assert!(
        placed.len() < ALL.len(),
        "placed while no job runs: {placed:?}"
    );
    // A job takes every CPU: nowhere to keep the outsider off it.
    b.add(41, "jobtask", 0, 1);
    b.in_job(41, 5, "0-3", "0-1", "PATH=/bin\0");
    b.epoch(1.0); // one pass without room does not decide
    let r = b.epoch(1.5);
    assert!(
        r.released
            .iter()
            .any(|(pid, why, _)| *pid == 40 && why.contains("left to the kernel")),
        "{:?}",
        r.released
    );
    assert_eq!(
        b.affinity(40),
        Some(CpuSet::from(ALL)),
        "its own affinity back"
    );
    let r = b.epoch(2.5);
    assert!(
        !r.arrived.contains(&40),
        "not taken back while the jobs stay: {r:?}"
    );
    assert_eq!(b.affinity(40), Some(CpuSet::from(ALL)));
}
