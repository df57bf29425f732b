use super::*;
use crate::characterise::store::{Fault, NumaHistory, StoredProgram};
use crate::observe::fakeproc::{FakeProcess, FakeProcfs};
use crate::observe::{CounterSample, ScanConfig, Scanner};
use numasched_model::topology::Topology;
use std::sync::{Arc, Mutex};

/// Counters whose deltas the test sets per pid.
#[derive(Clone, Default)]
struct Scripted(Arc<Mutex<HashMap<u32, CounterSample>>>);

impl CounterSource for Scripted {
    fn attach(&mut self, _: u32, _: u64, _: &[u32]) -> Result<(), CounterError> {
        Ok(())
    }
    fn detach(&mut self, pid: u32) {
        self.0.lock().expect("lock").remove(&pid);
    }
    fn delta(&mut self, pid: u32) -> Result<CounterSample, CounterError> {
        self.0
            .lock()
            .expect("lock")
            .get(&pid)
            .copied()
            .ok_or(CounterError::Gone { pid })
    }
    fn attached(&self) -> usize {
        0
    }
}

impl Scripted {
    /// Counts `pid` gives every epoch from now on.
    fn set(&self, pid: u32, instructions: u64, cycles: u64, llc_misses: u64) {
        let sample = CounterSample {
            instructions,
            cycles,
            llc_misses,
        };
        self.0.lock().expect("lock").insert(pid, sample);
    }
}

fn topo() -> Topology {
    numasched_model::topology::spec::parse("2n:1l:2c:1t").expect("spec")
}

fn scan(fake: &FakeProcfs) -> Observation {
    let mut s = Scanner::new(ScanConfig {
        proc_root: fake.root().to_path_buf(),
        exclude: Default::default(),
        ..ScanConfig::default()
    });
    s.scan(&topo()).expect("scan")
}

#[test]
fn counters_then_store_then_regression_then_unknown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeProcfs::new(&dir.path().join("proc")).expect("fake");
    fake.add(&FakeProcess::new(100, "measured").pages(&[(0, 100)]))
        .expect("add");
    fake.add(&FakeProcess::new(101, "profiled").pages(&[(0, 100)]))
        .expect("add");
    fake.add(&FakeProcess::new(102, "stranger").pages(&[(1, 100)]))
        .expect("add");
    let mut store = Store::open(&dir.path().join("p.db")).expect("store");
    store
        .set_given(
            "profiled",
            &super::super::store::GivenProfile {
                mpki: Some(20.0),
                numa_penalty: Some(1.4),
                ..Default::default()
            },
            1,
        )
        .expect("set");
    let counts = Scripted::default();
    counts.set(100, 1_000_000, 2_000_000, 10_000);
    let mut live = Live::new(LiveConfig::default(), Some(Box::new(counts)), Some(store));
    let mut obs = scan(&fake);
    let (first, _) = live.characterise(&mut obs, 10);
    assert_eq!(first[0].source, PenaltySource::Unknown, "attach only");
    let mut obs = scan(&fake);
    let (c, notes) = live.characterise(&mut obs, 11);
    assert!(notes.store_errors.is_empty() && notes.counter_errors.is_empty());
    assert_eq!(c[0].source, PenaltySource::Regression);
    assert_eq!(c[0].mpki, Some(10.0));
    assert_eq!(c[0].cpi, Some(2.0));
    assert_eq!(obs.snapshot.processes[0].mpki, Some(10.0));
    assert_eq!(c[1].source, PenaltySource::Profile);
    assert_eq!(obs.snapshot.processes[1].numa_penalty, Some(1.4));
    assert_eq!(c[2].source, PenaltySource::Unknown);
    assert_eq!(obs.snapshot.processes[2].mpki, None);
    assert_eq!(c[2].memory_from, "numa_maps");
}

#[test]
fn learned_samples_reach_the_store_in_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeProcfs::new(&dir.path().join("proc")).expect("fake");
    fake.add(
        &FakeProcess::new(100, "milc")
            .threads_on(&[0])
            .pages(&[(0, 100)]),
    )
    .expect("add");
    let db = dir.path().join("p.db");
    let counts = Scripted::default();
    counts.set(100, 1000, 1000, 20);
    let mut live = Live::new(
        LiveConfig {
            flush_every: 4,
            ..LiveConfig::default()
        },
        Some(Box::new(counts)),
        Some(Store::open(&db).expect("store")),
    );
    for now in 0..3 {
        let mut obs = scan(&fake);
        live.characterise(&mut obs, now);
    }
    let peek = Store::open(&db).expect("reopen");
    assert!(peek.get("milc").expect("get").is_none(), "not yet flushed");
    let mut obs = scan(&fake);
    live.characterise(&mut obs, 3);
    let h = peek.numa_history("milc").expect("history").expect("some");
    assert_eq!(h.local.n, 3, "three local epochs with counts, one batch");
    let p = peek.get("milc").expect("get").expect("some");
    assert_eq!(p.mpki.best().map(|(v, _)| v), Some(20.0));
}

/// One process of `program` with its memory and its thread on node 0 (every epoch
/// local), CPI 1 and MPKI 20 by its counters.
fn local_process(root: &std::path::Path, program: &str) -> (FakeProcfs, Scripted) {
    let fake = FakeProcfs::new(&root.join("proc")).expect("fake");
    fake.add(
        &FakeProcess::new(100, program)
            .threads_on(&[0])
            .pages(&[(0, 100)]),
    )
    .expect("add");
    let counts = Scripted::default();
    counts.set(100, 1000, 1000, 20);
    (fake, counts)
}

/// Flushes only when the test says so.
fn manual_flush() -> LiveConfig {
    LiveConfig {
        flush_every: u64::MAX,
        ..LiveConfig::default()
    }
}

fn epochs(live: &mut Live, fake: &FakeProcfs, times: std::ops::Range<i64>) {
    for now in times {
        let mut obs = scan(fake);
        live.characterise(&mut obs, now);
    }
}

fn pending_epochs(live: &Live, program: &str) -> usize {
    live.pending.get(program).map_or(0, |p| p.epochs.len())
}

/// What another process reading the store sees.
fn stored(db: &std::path::Path, program: &str) -> (Vec<StoredProgram>, Option<NumaHistory>) {
    let s = Store::open_without_backup(db).expect("reopen");
    (
        s.list().expect("list"),
        s.numa_history(program).expect("history"),
    )
}

/// A write that fails keeps its samples; the stored profiles stay as they were;
/// once the fault is gone the next flush writes the kept samples with the new.
fn a_failed_flush_is_retried(fault: Fault, program: &str, learn_first: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (fake, counts) = local_process(dir.path(), program);
    let db = dir.path().join("p.db");
    let mut store = Store::open(&db).expect("store");
    store
        .set_given(
            "profiled",
            &super::super::store::GivenProfile {
                mpki: Some(5.0),
                ..Default::default()
            },
            1,
        )
        .expect("set");
    let mut live = Live::new(manual_flush(), Some(Box::new(counts)), Some(store));
    let mut written = 0;
    if learn_first {
        epochs(&mut live, &fake, 0..4); // attach, then 3 samples
        let mut notes = Notes::default();
        live.flush(4, &mut notes);
        assert!(notes.store_errors.is_empty(), "{:?}", notes.store_errors);
        written = 3;
    }
    let before = stored(&db, program);
    assert_eq!(before.1.map(|h| h.local.n), learn_first.then_some(3));

    live.store.as_ref().expect("store").inject(fault);
    epochs(&mut live, &fake, 5..9);
    let failed = pending_epochs(&live, program);
    assert!(failed >= 3, "{failed}");
    let mut notes = Notes::default();
    live.flush(9, &mut notes);
    assert_eq!(notes.store_errors.len(), 1, "{:?}", notes.store_errors);
    let msg = &notes.store_errors[0];
    assert!(msg.starts_with(&db.display().to_string()), "{msg}");
    assert!(!msg.contains('\n'));
    let kind = if fault == Fault::Full {
        "full"
    } else {
        "readonly"
    };
    assert!(msg.contains(kind), "{msg}");
    assert!(
        msg.contains("kept the unwritten samples of 1 program "),
        "{msg}"
    );
    assert_eq!(pending_epochs(&live, program), failed, "kept");
    assert_eq!(stored(&db, program), before, "nothing stored changed");

    live.store.as_ref().expect("store").inject(Fault::Lifted);
    epochs(&mut live, &fake, 10..12);
    assert_eq!(pending_epochs(&live, program), failed + 2, "merged");
    let mut notes = Notes::default();
    live.flush(12, &mut notes);
    assert!(notes.store_errors.is_empty(), "{:?}", notes.store_errors);
    assert!(live.pending.is_empty());
    let (programs, history) = stored(&db, program);
    let h = history.expect("history");
    assert_eq!(
        h.local.n as usize,
        written + failed + 2,
        "the failed batch too"
    );
    let p = programs
        .iter()
        .find(|p| p.program == program)
        .expect("learned");
    let mpki = p.mpki.learned.expect("mpki");
    assert_eq!(mpki.value, 20.0);
    assert_eq!(mpki.samples, if learn_first { 2 } else { 1 });
    assert_eq!(mpki.updated, 12);
    assert!(programs.iter().any(|p| p.program == "profiled"));
}

#[test]
fn a_read_only_store_keeps_the_samples_for_the_next_flush() {
    a_failed_flush_is_retried(Fault::ReadOnly, "milc", true);
}

#[test]
fn a_full_store_keeps_the_samples_for_the_next_flush() {
    // A program name longer than a page holds needs a new (overflow) page, which
    // the full store cannot give; a short one would fit in the pages it has.
    a_failed_flush_is_retried(Fault::Full, &"m".repeat(3000), false);
}

#[test]
fn the_last_flush_says_what_a_refusing_store_loses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("p.db");
    let store = Store::open(&db).expect("store");
    store.inject(Fault::ReadOnly);
    let mut live = Live::new(manual_flush(), None, Some(store));
    live.epoch += 1;
    live.buffer("milc", Some(20.0), Some(1.0), Some(1.0));
    let mut notes = Notes::default();
    live.flush_final(1, &mut notes);
    assert_eq!(notes.store_errors.len(), 1, "{:?}", notes.store_errors);
    let note = &notes.store_errors[0];
    assert!(note.starts_with(&db.display().to_string()), "{note}");
    assert!(
        note.contains("the daemon is stopping, so the unwritten samples of 1 program are lost"),
        "{note}"
    );
    assert!(!note.contains("another try"), "{note}");
    assert!(live.pending.is_empty());
}

#[test]
fn a_store_that_never_recovers_holds_bounded_samples() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("p.db");
    let store = Store::open(&db).expect("store");
    store.inject(Fault::ReadOnly);
    let mut live = Live::new(manual_flush(), None, Some(store));
    let extra = 100;
    for i in 0..MAX_PENDING_EPOCHS + extra {
        live.epoch += 1;
        live.buffer("milc", Some(20.0), Some(1.0 + i as f64), Some(1.0));
    }
    let mut notes = Notes::default();
    live.flush(1, &mut notes);
    assert_eq!(notes.store_errors.len(), 2, "{:?}", notes.store_errors);
    let dropped = &notes.store_errors[1];
    assert!(dropped.starts_with(&db.display().to_string()), "{dropped}");
    assert!(
        dropped.contains(&format!("dropped the {extra} oldest")),
        "{dropped}"
    );
    let kept = &live.pending["milc"].epochs;
    assert_eq!(kept.len(), MAX_PENDING_EPOCHS);
    assert_eq!(kept[0].0, 1.0 + extra as f64, "the newest are kept");

    // Programs too: the ones seen least recently go first.
    for i in 0..MAX_PENDING_PROGRAMS {
        live.epoch += 1;
        live.buffer(&format!("p{i}"), Some(1.0), None, None);
    }
    let mut notes = Notes::default();
    live.flush(2, &mut notes);
    // One try, one note for all: the first refusal stalls the rest of the flush.
    assert_eq!(notes.store_errors.len(), 2, "{:?}", notes.store_errors);
    let all = format!("of {} programs in memory", MAX_PENDING_PROGRAMS + 1);
    assert!(
        notes.store_errors[0].contains(&all),
        "{:?}",
        notes.store_errors
    );
    assert_eq!(live.pending.len(), MAX_PENDING_PROGRAMS);
    assert!(!live.pending.contains_key("milc"));
    // Its CPI epochs, and its MPKI readings (a sum, never trimmed).
    let all_of_milc = MAX_PENDING_EPOCHS + (MAX_PENDING_EPOCHS + extra);
    assert!(
        notes.store_errors[1].contains(&format!("dropped the {all_of_milc} oldest")),
        "{:?}",
        notes.store_errors
    );

    live.store.as_ref().expect("store").inject(Fault::Lifted);
    let mut notes = Notes::default();
    live.flush(3, &mut notes);
    assert!(notes.store_errors.is_empty(), "{:?}", notes.store_errors);
    assert!(live.pending.is_empty());
    let peek = Store::open_without_backup(&db).expect("reopen");
    assert_eq!(peek.list().expect("list").len(), MAX_PENDING_PROGRAMS);
}

#[test]
fn a_locked_store_is_waited_for_once_per_flush_not_per_program() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("p.db");
    let store = Store::open(&db).expect("store");
    let mut live = Live::new(manual_flush(), None, Some(store));
    for program in ["a", "b", "c"] {
        live.epoch += 1;
        live.buffer(program, Some(1.0), Some(1.0), Some(1.0));
    }
    let other = rusqlite::Connection::open(&db).expect("open");
    other.execute_batch("BEGIN IMMEDIATE").expect("lock");
    let started = std::time::Instant::now();
    let mut notes = Notes::default();
    live.flush(1, &mut notes);
    let waited = started.elapsed();
    // Six writes would wait 2 s each; the first refusal stalls the rest.
    assert!(waited < std::time::Duration::from_secs(5), "{waited:?}");
    assert_eq!(notes.store_errors.len(), 1, "{:?}", notes.store_errors);
    let msg = &notes.store_errors[0];
    assert!(msg.starts_with(&db.display().to_string()), "{msg}");
    assert!(
        msg.contains("locked") && msg.contains("of 3 programs"),
        "{msg}"
    );
    assert_eq!(live.pending.len(), 3);

    other.execute_batch("ROLLBACK").expect("unlock");
    let mut notes = Notes::default();
    live.flush(2, &mut notes);
    assert!(notes.store_errors.is_empty(), "{:?}", notes.store_errors);
    let peek = Store::open_without_backup(&db).expect("reopen");
    assert_eq!(peek.list().expect("list").len(), 3);
}

/// Unmounts on drop, so a failing test does not leave the mount behind.
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let ok = std::process::Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.0)
                .status();
        }
    }
}

#[test]
fn a_full_filesystem_fails_the_flush_and_the_retry_succeeds() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: mounting a small tmpfs needs root");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).expect("mkdir");
    match std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&mnt)
        .output()
    {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            eprintln!(
                "skipped: cannot mount a tmpfs here: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("skipped: cannot run mount: {e}");
            return;
        }
    }
    // Declared after `dir` and before the store: dropped after the store is closed.
    let _unmount = Unmount(mnt.clone());
    let (fake, counts) = local_process(dir.path(), "milc");
    let db = mnt.join("p.db");
    let store = Store::open(&db).expect("store");
    let mut live = Live::new(manual_flush(), Some(Box::new(counts)), Some(store));
    epochs(&mut live, &fake, 0..3);
    let mut notes = Notes::default();
    live.flush(3, &mut notes);
    assert!(notes.store_errors.is_empty(), "{:?}", notes.store_errors);
    let before = stored(&db, "milc");

    let filler = mnt.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).expect("filler");
        let block = [0u8; 4096];
        while f.write_all(&block).is_ok() {}
    }
    epochs(&mut live, &fake, 4..7);
    let mut notes = Notes::default();
    live.flush(7, &mut notes);
    assert_eq!(notes.store_errors.len(), 1, "{:?}", notes.store_errors);
    let msg = &notes.store_errors[0];
    assert!(msg.starts_with(&db.display().to_string()), "{msg}");
    assert!(!msg.contains('\n'));
    assert!(msg.contains("full"), "{msg}");
    assert_eq!(pending_epochs(&live, "milc"), 3);

    std::fs::remove_file(&filler).expect("rm filler");
    assert_eq!(stored(&db, "milc"), before, "nothing stored changed");
    let mut notes = Notes::default();
    live.flush(8, &mut notes);
    assert!(notes.store_errors.is_empty(), "{:?}", notes.store_errors);
    let h = stored(&db, "milc").1.expect("history");
    assert_eq!(h.local.n, 5);
    drop(live);
}

#[test]
fn hinting_faults_stand_in_for_unreadable_numa_maps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeProcfs::new(&dir.path().join("proc")).expect("fake");
    let mut p = FakeProcess::new(100, "x").threads_on(&[2]);
    p.rss_pages = 1000; // resident, but numa_maps (empty here) says nothing
    fake.add(&p).expect("add");
    fake.write(
        100,
        "sched",
        "numa_faults node=0 task_private=30 task_shared=0 group_private=0 group_shared=0\n\
         numa_faults node=1 task_private=90 task_shared=0 group_private=0 group_shared=0\n",
    )
    .expect("write");
    let mut obs = scan(&fake);
    assert!(obs.snapshot.processes[0].memory_bytes.is_empty());
    let mut live = Live::new(LiveConfig::default(), None, None);
    let (c, _) = live.characterise(&mut obs, 1);
    let p = &obs.snapshot.processes[0];
    assert_eq!(c[0].memory_from, "hinting faults");
    assert_eq!(p.home_node(), Some(1));
    let m = &p.memory_bytes;
    assert_eq!(m[&1], 3 * m[&0], "split 1:3 like the faults");
    assert_eq!(c[0].local_fraction, Some(1.0), "runs on CPU 2, node 1");
}

#[test]
fn resctrl_bandwidth_reaches_the_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeProcfs::new(&dir.path().join("proc")).expect("fake");
    fake.add(&FakeProcess::new(100, "lbm").pages(&[(0, 100)]))
        .expect("add");
    let rc = dir.path().join("resctrl");
    let group = rc.join("mon_groups/lbm");
    let domain = group.join("mon_data/mon_L3_00");
    std::fs::create_dir_all(&domain).expect("mkdir");
    std::fs::create_dir_all(rc.join("info")).expect("mkdir");
    std::fs::write(rc.join("tasks"), "1\n").expect("write");
    std::fs::write(group.join("tasks"), "100\n").expect("write");
    let counters = |total: u64, local: u64| {
        std::fs::write(domain.join("mbm_total_bytes"), total.to_string()).expect("w");
        std::fs::write(domain.join("mbm_local_bytes"), local.to_string()).expect("w");
    };
    counters(0, 0);
    let mut live = Live::new(LiveConfig::default(), None, None).with_resctrl(Resctrl::new(&rc));
    let mut obs = scan(&fake);
    let (c, notes) = live.characterise(&mut obs, 1);
    assert!(
        notes.counter_errors.is_empty(),
        "{:?}",
        notes.counter_errors
    );
    assert_eq!(c[0].bandwidth_gbps, None, "a rate needs two readings");
    fake.set_uptime(102.0).expect("uptime");
    counters(8_000_000_000, 6_000_000_000); // 8 GB in 2 s, a quarter remote
    let mut obs = scan(&fake);
    let (c, _) = live.characterise(&mut obs, 2);
    assert_eq!(c[0].bandwidth_gbps, Some(4.0));
    assert_eq!(c[0].remote_fraction, Some(0.25));
    assert_eq!(obs.snapshot.processes[0].bandwidth_gbps, Some(4.0));
}
