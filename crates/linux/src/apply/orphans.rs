//! Children left in numasched's set by a parent that exited. Fork copies affinity,
//! so a child of a placed process carries the parent's set; once the parent (or the
//! short-lived process between them, as in `( cmd & )`) exits, the kernel hands the
//! child to init, and the walk from journaled parents ([`undo::adopt_descendants`])
//! no longer reaches it. Left alone it keeps, for the rest of its life and past
//! numasched's stop, a set chosen for a process that is gone: a pin that outlived
//! its reason.
//!
//! Orphans are met as new children of pid 1; a subreaper other than init is not
//! watched. A child already journaled as adopted is numasched's by the journal. Any
//! other is taken as numasched's only when all of these hold, so that a pin of the
//! same CPUs by someone else is not mistaken for one: it carries exactly a set
//! numasched gave a journaled process (alive, or gone for at most
//! [`DEPARTED_S`] seconds), it shares that process's session (an orphan keeps
//! its session unless it calls setsid; a service init starts leads its own), and it
//! started after that process did.

use std::collections::{BTreeMap, BTreeSet};

use super::journal::Journal;
use super::kernel::Kernel;
use super::undo;
use numasched_model::CpuSet;

/// Seconds a journaled process's lineage is kept after its entry is dropped: the
/// process between it and an orphan may outlive it by a moment. Time, not passes:
/// at `--interval 10ms` five passes were 50 ms, and a shell that outlived its placed
/// parent by more left its children narrowed for good.
pub const DEPARTED_S: f64 = 5.0;

/// What an orphan of a journaled process is recognised by.
#[derive(Debug, Clone)]
struct Lineage {
    start_time: u64,
    session: u32,
    given: Vec<CpuSet>,
    original: CpuSet,
    /// When its entry was first seen gone from the journal (the caller's clock).
    gone_since: Option<f64>,
}

/// The lineages of journaled processes and the children of init seen last pass.
#[derive(Debug, Default)]
pub struct Orphans {
    lineages: BTreeMap<u32, Lineage>,
    init_kids: BTreeSet<u32>,
}

impl Orphans {
    /// The new children of init that are numasched's orphans (see the module
    /// documentation), each journaled as adopted with the original of the process
    /// it inherited its set from, so the caller restores it the usual way. One call
    /// per pass: the lineages are brought up to date with the journal first, even
    /// when the caller knows no task came or went (`tasks_changed: false`) and
    /// there is nothing to search for, so a process placed now is known by its
    /// session before it exits. `now` is the caller's monotonic clock, in seconds.
    pub fn find<K: Kernel + ?Sized>(
        &mut self,
        kernel: &K,
        journal: &mut Journal,
        protected: impl Fn(u32) -> bool,
        tasks_changed: bool,
        now: f64,
    ) -> Vec<u32> {
        self.refresh(kernel, journal, now);
        if !tasks_changed {
            return Vec::new();
        }
        self.search(kernel, journal, protected)
    }

    /// Brings the lineages up to date with the journal. The session of a process
    /// journaled since the last pass is read once (one stat read) and kept in its
    /// entry, so a daemon that restarts knows it after the process is gone; one that
    /// exited before it could be read has no lineage, and its orphans are left as
    /// they are.
    fn refresh<K: Kernel + ?Sized>(&mut self, kernel: &K, journal: &mut Journal, now: f64) {
        for (pid, l) in &mut self.lineages {
            if journal.get(*pid, l.start_time).is_none() {
                l.gone_since.get_or_insert(now);
            } else {
                l.gone_since = None;
            }
        }
        self.lineages
            .retain(|_, l| l.gone_since.is_none_or(|t| now - t <= DEPARTED_S));
        for pid in journal.pids() {
            // An adopted child's orphans are its placed ancestor's: its lineage
            // would only cost a read per child of a busy fork loop.
            let Some(e) = journal
                .entry(pid)
                .filter(|e| e.applied.is_some() && !e.adopted)
            else {
                continue;
            };
            if let Some(l) = self.lineages.get_mut(&pid) {
                if l.start_time == e.start_time {
                    // Most passes change nothing: no copy then.
                    if !l.given.iter().eq(e.given()) {
                        l.given = e.given().cloned().collect();
                    }
                    continue;
                }
            }
            let lineage = |session| Lineage {
                start_time: e.start_time,
                session,
                given: e.given().cloned().collect(),
                original: e.original.clone(),
                gone_since: None,
            };
            if let Some(session) = e.session {
                self.lineages.insert(pid, lineage(session));
                continue;
            }
            let start = e.start_time;
            match kernel.identity(pid) {
                Ok(id) if id.start_time == start => {
                    self.lineages.insert(pid, lineage(id.session));
                    journal.set_session(pid, start, id.session);
                }
                _ => {}
            }
        }
    }

    /// The new children of init recognised as orphans, against the lineages as
    /// they are.
    fn search<K: Kernel + ?Sized>(
        &mut self,
        kernel: &K,
        journal: &mut Journal,
        protected: impl Fn(u32) -> bool,
    ) -> Vec<u32> {
        let Ok(kids) = kernel.children(1) else {
            return Vec::new();
        };
        let kids: BTreeSet<u32> = kids.into_iter().collect();
        let new: Vec<u32> = kids.difference(&self.init_kids).copied().collect();
        self.init_kids = kids;
        let mut found = Vec::new();
        for kid in new {
            // Nothing to recognise it by: not even a stat read.
            if protected(kid) || (self.lineages.is_empty() && journal.entry(kid).is_none()) {
                continue;
            }
            let Ok(id) = kernel.identity(kid) else {
                continue;
            };
            if let Some(e) = journal.entry(kid) {
                if e.adopted && e.start_time == id.start_time {
                    found.push(kid);
                }
                continue;
            }
            // A session leader set up its own session: a service, or a daemon that
            // detached on purpose; what it carries is not taken for numasched's.
            if id.session == kid || id.kernel_thread {
                continue;
            }
            let giver = self.lineages.values().find(|l| {
                l.session == id.session
                    && l.start_time <= id.start_time
                    && kernel.threads(kid).is_ok_and(|tids| {
                        tids.iter()
                            .any(|&t| kernel.affinity(kid, t).is_ok_and(|c| l.given.contains(&c)))
                    })
            });
            let Some(l) = giver else {
                continue;
            };
            let (given, original) = (l.given.clone(), l.original.clone());
            if undo::adopt(kernel, journal, kid, &id, &given, &original) {
                found.push(kid);
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::fake::FakeKernel;

    const ALL: [u32; 4] = [0, 1, 2, 3];

    /// init (pid 1), a shell (10, its own session) and a process numasched placed on
    /// CPU 0 (20, forked by the shell) whose entry is journaled.
    fn machine() -> (FakeKernel, Journal) {
        let k = FakeKernel::new(&ALL);
        k.add(1, 1, 1, &ALL);
        k.add(10, 50, 1, &ALL);
        k.fork(10, 20, 100);
        let mut j = Journal::new();
        j.begin(20, 100, &CpuSet::from(&ALL[..]));
        j.remember_thread(20, 100, 20, &CpuSet::from(&ALL[..]));
        j.set_applied(20, 100, &CpuSet::from(vec![0]));
        k.with_proc(20, |p| p.threads.insert(20, CpuSet::from(vec![0])));
        (k, j)
    }

    fn orphans(k: &FakeKernel, j: &mut Journal, o: &mut Orphans) -> Vec<u32> {
        orphans_at(k, j, o, 0.0)
    }

    fn orphans_at(k: &FakeKernel, j: &mut Journal, o: &mut Orphans, now: f64) -> Vec<u32> {
        o.find(k, j, |pid| pid <= 2, true, now)
    }

    #[test]
    fn a_child_whose_placed_parent_exited_is_found_with_the_parents_original() {
        let (k, mut j) = machine();
        let mut o = Orphans::default();
        assert!(orphans(&k, &mut j, &mut o).is_empty());
        // Kept in the journal, for a daemon that restarts after 20 is gone.
        assert_eq!(j.get(20, 100).and_then(|e| e.session), Some(10));
        k.fork(20, 30, 200);
        k.exit(20);
        assert_eq!(orphans(&k, &mut j, &mut o), vec![30]);
        let e = j.get(30, 200).expect("journaled");
        assert!(e.adopted);
        assert_eq!(e.original, CpuSet::from(&ALL[..]));
        assert_eq!(e.applied, Some(CpuSet::from(vec![0])));
        assert!(orphans(&k, &mut j, &mut o).is_empty(), "once");
    }

    #[test]
    fn a_grandchild_left_by_a_short_lived_middle_process_is_found() {
        // `( cmd & )`: the middle process is never journaled; the placed one lives on.
        let (k, mut j) = machine();
        let mut o = Orphans::default();
        orphans(&k, &mut j, &mut o);
        k.fork(20, 30, 200);
        k.fork(30, 31, 201);
        k.exit(30);
        assert_eq!(orphans(&k, &mut j, &mut o), vec![31]);
    }

    #[test]
    fn an_orphan_is_still_found_a_few_passes_after_its_giver_left_the_journal() {
        let (k, mut j) = machine();
        let mut o = Orphans::default();
        orphans(&k, &mut j, &mut o);
        k.fork(20, 30, 200);
        k.exit(20);
        j.forget(20);
        // Seen gone at 1 s; however many passes run in between (10 ms epochs).
        for pass in 0..400 {
            o.refresh(&k, &mut j, 1.0 + f64::from(pass) * 0.01);
        }
        assert_eq!(orphans_at(&k, &mut j, &mut o, 1.0 + DEPARTED_S), vec![30]);
    }

    #[test]
    fn an_orphan_after_its_giver_is_long_gone_is_left_alone() {
        let (k, mut j) = machine();
        let mut o = Orphans::default();
        orphans(&k, &mut j, &mut o);
        k.exit(20);
        j.forget(20);
        o.refresh(&k, &mut j, 1.0);
        k.add(30, 300, 1, &[0]);
        k.with_proc(30, |p| p.session = 10);
        k.with_proc(1, |p| p.children.push(30));
        assert!(orphans_at(&k, &mut j, &mut o, 1.1 + DEPARTED_S).is_empty());
    }

    #[test]
    fn what_is_not_numascheds_doing_is_left_alone() {
        let (k, mut j) = machine();
        let mut o = Orphans::default();
        orphans(&k, &mut j, &mut o);
        let zero = CpuSet::from(vec![0]);
        // 40: a service init started on CPU 0 (a session of its own).
        k.add(40, 400, 1, &[0]);
        // 41: in the placed process's session and set, but older than it.
        k.add(41, 90, 1, &[0]);
        k.with_proc(41, |p| p.session = 10);
        // 42: the placed process's session, started after it, pinned elsewhere.
        k.add(42, 420, 1, &[1]);
        k.with_proc(42, |p| p.session = 10);
        // 43: its set and start, another session.
        k.add(43, 430, 1, &[0]);
        k.with_proc(43, |p| p.session = 99);
        for pid in [40, 41, 42, 43] {
            k.with_proc(1, |p| p.children.push(pid));
        }
        assert!(orphans(&k, &mut j, &mut o).is_empty());
        for pid in [40, 41, 43] {
            assert_eq!(k.affinity_of(pid, pid), Some(zero.clone()));
            assert!(j.entry(pid).is_none());
        }
    }

    #[test]
    fn an_adopted_child_handed_to_init_is_found_by_its_entry() {
        let (k, mut j) = machine();
        let mut o = Orphans::default();
        k.fork(20, 30, 200);
        assert_eq!(
            undo::adopt_descendants(&k, &mut j, None, |p| p <= 2).len(),
            1
        );
        orphans(&k, &mut j, &mut o);
        k.exit(20);
        assert_eq!(orphans(&k, &mut j, &mut o), vec![30]);
    }
}
