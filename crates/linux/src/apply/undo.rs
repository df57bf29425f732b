//! Putting back what the journal remembers: on exit, on SIGTERM/SIGINT, and when a
//! process stops being managed.
//!
//! Safety rules:
//! - A journal entry is only ever applied to the process it was taken from: the start
//!   time is re-read right before acting, and an entry whose pid now belongs to a
//!   different process is dropped, never "restored" onto the newcomer.
//! - A process or thread that exited is not an error (ESRCH/ENOENT): its entry is
//!   simply forgotten.
//! - A thread whose affinity is no longer exactly the set numasched gave it (or that
//!   set as the process's cpuset narrowed it) was re-pinned by someone else since, and
//!   keeps their choice; a thread numasched never set is restored only if it carries
//!   exactly numasched's set (it inherited it).
//! - Threads created after numasched changed the process inherited numasched's set;
//!   they get the process's original affinity back too.
//! - Failures other than "gone" keep the entry, so the caller can try again.

use numasched_model::plural::count;
use std::fmt;

use super::journal::Journal;
use super::kernel::{Identity, Kernel, KernelError};
use numasched_model::CpuSet;

/// What restoring one process came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// Original affinity given back to `threads` threads; `foreign` threads had been
    /// re-pinned by someone else and were left alone.
    Done { threads: usize, foreign: usize },
    /// The process exited; nothing to do.
    Gone,
    /// The pid belongs to another process now; the entry was dropped untouched.
    Reused,
    /// Nothing was journaled for this pid.
    NotJournaled,
    /// Some threads could not be restored; the entry is kept for another try.
    Failed(Vec<KernelError>),
}

impl fmt::Display for Restored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Restored::Done {
                threads,
                foreign: 0,
            } => write!(f, "restored {}", count(*threads, "thread")),
            Restored::Done { threads, foreign } => write!(
                f,
                "restored {}, left {foreign} re-pinned by someone else",
                count(*threads, "thread")
            ),
            Restored::Gone => f.write_str("exited; forgotten"),
            Restored::Reused => f.write_str("pid now belongs to another process; forgotten"),
            Restored::NotJournaled => f.write_str("nothing to restore"),
            Restored::Failed(errs) => {
                write!(f, "restore failed ({})", count(errs.len(), "error"))?;
                if let Some(e) = errs.first() {
                    write!(f, ": {e}")?;
                }
                Ok(())
            }
        }
    }
}

/// Gives `pid` back its original affinity and forgets it (see the module rules).
pub fn restore<K: Kernel + ?Sized>(kernel: &K, journal: &mut Journal, pid: u32) -> Restored {
    let Some(entry) = journal.entry(pid).cloned() else {
        return Restored::NotJournaled;
    };
    match kernel.identity(pid) {
        Ok(id) if id.start_time != entry.start_time => {
            journal.forget(pid);
            return Restored::Reused;
        }
        Ok(_) => {}
        Err(e) if e.is_gone() => {
            journal.forget(pid);
            return Restored::Gone;
        }
        Err(e) => return Restored::Failed(vec![e]),
    }
    let tids = match kernel.threads(pid) {
        Ok(t) => t,
        Err(e) if e.is_gone() => {
            journal.forget(pid);
            return Restored::Gone;
        }
        Err(e) => return Restored::Failed(vec![e]),
    };
    let mut errors = Vec::new();
    let (mut threads, mut foreign) = (0, 0);
    // Read once, and only where a set differs from numasched's: what a cpuset made of it.
    let mut cpuset: Option<Option<CpuSet>> = None;
    for tid in tids {
        if entry.foreign.contains(&tid) {
            foreign += 1;
            continue;
        }
        if let Some(applied) = &entry.applied {
            // A thread numasched set may have been narrowed further by the kernel (a
            // cpuset); one it never set (started since, or pinned by the application
            // before numasched came) is numasched's only if it carries exactly the
            // set numasched gave the others. A journal read back after a crash may
            // name the set a pass was about to give (`pending`): the crash may have
            // come before that pass made it, or after.
            let recorded = entry.threads.contains_key(&tid);
            match kernel.affinity(pid, tid) {
                Ok(now) if now == *applied || entry.pending.as_ref() == Some(&now) => {}
                Ok(now) if recorded => {
                    let c = cpuset.get_or_insert_with(|| kernel.cpuset_cpus(pid).ok().flatten());
                    if !still_ours(&now, applied, c.as_ref()) {
                        foreign += 1;
                        continue;
                    }
                }
                Ok(_) => {
                    foreign += 1;
                    continue;
                }
                Err(e) if e.is_gone() => continue,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            }
        }
        match kernel.set_affinity(pid, tid, entry.original_of(tid)) {
            Ok(()) => threads += 1,
            Err(e) if e.is_gone() => {}
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        journal.forget(pid);
        Restored::Done { threads, foreign }
    } else {
        Restored::Failed(errors)
    }
}

/// Journals every descendant of a changed process that still carries the set
/// numasched gave its parent (it forked after placement, and fork copies the
/// affinity), so that it is restored with the parent, on every exit path and after
/// a crash, whether or not it is ever managed itself. Its original is the parent's
/// original. A child that set its own affinity is its own, and is left out. Runs
/// every epoch; grandchildren are found through children adopted earlier in the
/// same walk. `roots`, when given, are the journaled processes known to have forked
/// (the proc connector said so): the walk starts from them alone, not from every
/// journaled process. Returns how many processes were adopted.
pub fn adopt_descendants<K: Kernel + ?Sized>(
    kernel: &K,
    journal: &mut Journal,
    roots: Option<&[u32]>,
    protected: impl Fn(u32) -> bool,
) -> Vec<u32> {
    let mut adopted = Vec::new();
    let mut queue: Vec<u32> = match roots {
        Some(r) => r
            .iter()
            .copied()
            .filter(|&p| journal.entry(p).is_some())
            .collect(),
        None => journal.pids(),
    };
    let mut seen: std::collections::HashSet<u32> = queue.iter().copied().collect();
    while let Some(parent) = queue.pop() {
        let Some(entry) = journal.entry(parent).filter(|e| e.applied.is_some()) else {
            continue;
        };
        // What the kids are matched against, copied out (not the whole entry, whose
        // thread map may be large): the journal is written to below.
        let given: Vec<CpuSet> = entry.given().cloned().collect();
        let (original, start) = (entry.original.clone(), entry.start_time);
        // A pid now another process's (reused since the entry was made): its children
        // are not the journaled process's, and what they carry is not numasched's.
        if kernel
            .identity(parent)
            .map_or(true, |id| id.start_time != start)
        {
            continue;
        }
        let Ok(kids) = kernel.children(parent) else {
            continue;
        };
        for kid in kids {
            if !seen.insert(kid) || protected(kid) {
                continue;
            }
            if journal.entry(kid).is_some() {
                queue.push(kid);
                continue;
            }
            let Ok(id) = kernel.identity(kid) else {
                continue;
            };
            if !adopt(kernel, journal, kid, &id, &given, &original) {
                continue;
            }
            adopted.push(kid);
            queue.push(kid);
        }
    }
    adopted
}

/// Journals `kid` (whose identity is `id`) as adopted when it carries one of the
/// sets in `given`, with `original` to go back to: the threads carrying that set
/// are numasched's doing, any other is the kid's own. Kernel threads and kids that
/// carry none of them are left out (false).
pub(crate) fn adopt<K: Kernel + ?Sized>(
    kernel: &K,
    journal: &mut Journal,
    kid: u32,
    id: &Identity,
    given: &[CpuSet],
    original: &CpuSet,
) -> bool {
    if id.kernel_thread {
        return false;
    }
    let Ok(tids) = kernel.threads(kid) else {
        return false;
    };
    // The set it carries, if numasched gave it to the parent (now or before the
    // fork: the parent may have been given another since).
    let sets: Vec<(u32, CpuSet)> = tids
        .iter()
        .filter_map(|&t| kernel.affinity(kid, t).ok().map(|c| (t, c)))
        .collect();
    let Some(applied) = sets
        .iter()
        .map(|(_, c)| c)
        .find(|c| given.contains(c))
        .cloned()
    else {
        return false;
    };
    journal.begin(kid, id.start_time, original);
    for (t, _) in sets.iter().filter(|(_, c)| *c == applied) {
        journal.remember_thread(kid, id.start_time, *t, original);
    }
    journal.set_applied(kid, id.start_time, &applied);
    journal.set_adopted(kid, id.start_time, true);
    true
}

/// Whether thread `tid`, which numasched set to `applied`, was re-pinned on its own
/// since: it no longer carries the set while another thread of the process still
/// does. (A cpuset that shrank narrows every thread alike and is not a re-pin; nor is
/// a process whose threads all moved, which the caller judges as a whole.)
/// Whether a thread numasched set still carries numasched's doing: exactly the set it
/// wrote, or that set as the process's cpuset has narrowed it since. Anything else was
/// chosen by someone else (`taskset -p`, the program itself), even a subset of
/// numasched's set: issue 41 found a process numasched had widened back to its
/// original, then pinned by an administrator to one CPU of it, reset at SIGTERM.
pub fn still_ours(now: &CpuSet, applied: &CpuSet, cpuset: Option<&CpuSet>) -> bool {
    now == applied
        || cpuset.is_some_and(|c| {
            let narrowed = applied.intersection(c);
            !narrowed.is_empty() && *now == narrowed
        })
}

pub fn re_pinned_alone(
    tid: u32,
    now: &CpuSet,
    threads: &[(u32, CpuSet)],
    applied: &CpuSet,
) -> bool {
    now != applied && threads.iter().any(|(t, c)| *t != tid && c == applied)
}

/// Restores every journaled process, for shutdown; one result per pid.
pub fn restore_all<K: Kernel + ?Sized>(kernel: &K, journal: &mut Journal) -> Vec<(u32, Restored)> {
    journal
        .pids()
        .into_iter()
        .map(|pid| (pid, restore(kernel, journal, pid)))
        .collect()
}

/// Drops the entries of processes that exited or whose pid was reused, touching
/// nothing; returns the pids dropped. Errors other than "gone" keep the entry.
/// `alive` answers for the processes the caller has just seen (their start time),
/// which need no identity read of their own.
pub fn forget_gone<K: Kernel + ?Sized>(
    kernel: &K,
    journal: &mut Journal,
    alive: impl Fn(u32) -> Option<u64>,
) -> Vec<u32> {
    let mut dropped = Vec::new();
    for pid in journal.pids() {
        let recorded = journal.entry(pid).map(|e| e.start_time);
        if recorded.is_some() && alive(pid) == recorded {
            continue;
        }
        let stale = match (kernel.identity(pid), journal.entry(pid)) {
            (Ok(id), Some(e)) => id.start_time != e.start_time,
            (Err(e), _) => e.is_gone(),
            (_, None) => false,
        };
        if stale {
            journal.forget(pid);
            dropped.push(pid);
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::fake::{FakeKernel, Fault};
    use crate::apply::kernel::{ErrorKind, Op};

    /// A journal as the actuator leaves it after pinning `pid`'s threads to CPU 0.
    fn pinned(k: &FakeKernel, pid: u32, start: u64, threads: u32) -> Journal {
        let mut j = Journal::new();
        pin(k, &mut j, pid, start, threads);
        j
    }

    fn pin(k: &FakeKernel, j: &mut Journal, pid: u32, start: u64, threads: u32) {
        j.begin(pid, start, &CpuSet::from([0, 1]));
        for tid in pid..pid + threads {
            j.remember_thread(pid, start, tid, &CpuSet::from([0, 1]));
            k.set_affinity(pid, tid, &CpuSet::from([0])).unwrap();
        }
        j.set_applied(pid, start, &CpuSet::from([0]));
    }

    #[test]
    fn restores_every_thread_including_late_ones() {
        let k = FakeKernel::new(&[0, 1]);
        k.add(10, 100, 2, &[0, 1]);
        let mut j = pinned(&k, 10, 100, 2);
        // A thread created after the change inherited CPU 0.
        k.inject(Op::ListThreads, 10, Fault::SpawnThread { tid: 50 });
        let r = restore(&k, &mut j, 10);
        assert_eq!(
            r,
            Restored::Done {
                threads: 3,
                foreign: 0
            }
        );
        for tid in [10, 11, 50] {
            assert_eq!(k.affinity_of(10, tid), Some(vec![0, 1].into()), "tid {tid}");
        }
        assert!(j.is_empty());
        assert_eq!(restore(&k, &mut j, 10), Restored::NotJournaled);
    }

    /// Killed in a pass that re-placed it: the journal on disk names the set the pass
    /// was to give (the intents) beside the one it had; whichever the process carries
    /// goes back. Found by a CI run: a load re-narrowed from [0, 1] to [1] in the pass
    /// the kill came in stayed on [1], the journal naming only [0, 1].
    #[test]
    fn a_crash_in_a_re_placing_pass_is_undone_whether_or_not_the_set_was_made() {
        for made in [false, true] {
            let k = FakeKernel::new(&[0, 1]);
            k.add(10, 100, 2, &[0, 1]);
            let mut j = pinned(&k, 10, 100, 2);
            j.set_pending(10, 100, &CpuSet::from([1]));
            if made {
                for tid in [10, 11] {
                    k.set_affinity(10, tid, &CpuSet::from([1])).unwrap();
                }
            }
            let r = restore(&k, &mut j, 10);
            assert_eq!(
                r,
                Restored::Done {
                    threads: 2,
                    foreign: 0
                },
                "made: {made}"
            );
            for tid in [10, 11] {
                assert_eq!(k.affinity_of(10, tid), Some(vec![0, 1].into()), "tid {tid}");
            }
        }
    }

    #[test]
    fn never_restores_onto_a_reused_pid() {
        let k = FakeKernel::new(&[0, 1]);
        k.add(10, 100, 1, &[0, 1]);
        let mut j = pinned(&k, 10, 100, 1);
        k.remove(10);
        k.add(10, 555, 1, &[1]);
        let before = k.calls().len();
        assert_eq!(restore(&k, &mut j, 10), Restored::Reused);
        assert_eq!(k.calls().len(), before, "nothing set on the newcomer");
        assert_eq!(k.affinity_of(10, 10), Some(vec![1].into()));
        assert!(j.is_empty());
    }

    #[test]
    fn gone_processes_and_threads_are_normal() {
        let k = FakeKernel::new(&[0, 1]);
        k.add(10, 100, 2, &[0, 1]);
        k.add(20, 200, 1, &[0, 1]);
        let mut j = pinned(&k, 10, 100, 2);
        pin(&k, &mut j, 20, 200, 1);
        // Thread 11 exits between listing and restoring; process 20 exits before.
        k.inject(Op::SetAffinity, 10, Fault::EndThread { tid: 11 });
        k.inject(Op::Identity, 20, Fault::Exit);
        let all = restore_all(&k, &mut j);
        assert_eq!(
            all,
            vec![
                (
                    10,
                    Restored::Done {
                        threads: 1,
                        foreign: 0
                    }
                ),
                (20, Restored::Gone)
            ]
        );
        assert!(j.is_empty());
    }

    /// Issue 41: numasched gave a process back its whole original set (applied = 0-3);
    /// an administrator then pinned it to CPU 1 (`taskset -pc 1`, one thread, and with
    /// `-a`, every thread). That is a subset of numasched's set, and undo used to take
    /// it for numasched's and reset it to 0-3.
    #[test]
    fn a_pin_inside_numascheds_set_is_someone_elses_and_stays() {
        for threads in [1, 2] {
            let k = FakeKernel::new(&[0, 1, 2, 3]);
            k.add(10, 100, threads, &[0, 1, 2, 3]);
            let mut j = Journal::new();
            let all = CpuSet::from([0, 1, 2, 3]);
            j.begin(10, 100, &all);
            for tid in 10..10 + threads {
                j.remember_thread(10, 100, tid, &all);
                k.set_affinity(10, tid, &all).unwrap();
            }
            j.set_applied(10, 100, &all);
            for tid in 10..10 + threads {
                k.set_affinity(10, tid, &CpuSet::from([1])).unwrap();
            }
            let r = restore(&k, &mut j, 10);
            assert_eq!(
                r,
                Restored::Done {
                    threads: 0,
                    foreign: threads as usize
                },
                "{threads} thread(s)"
            );
            for tid in 10..10 + threads {
                assert_eq!(k.affinity_of(10, tid), Some(vec![1].into()));
            }
        }
    }

    /// A cpuset that shrank under numasched narrows every thread to applied ∩ cpuset:
    /// still numasched's doing, and given back (the kernel keeps it inside the cpuset).
    #[test]
    fn a_set_a_cpuset_narrowed_is_still_numascheds() {
        let k = FakeKernel::new(&[0, 1, 2, 3]);
        k.add(10, 100, 2, &[0, 1, 2, 3]);
        let mut j = Journal::new();
        j.begin(10, 100, &CpuSet::from([0, 1, 2, 3]));
        for tid in [10, 11] {
            j.remember_thread(10, 100, tid, &CpuSet::from([0, 1, 2, 3]));
            k.set_affinity(10, tid, &CpuSet::from([0, 1])).unwrap();
        }
        j.set_applied(10, 100, &CpuSet::from([0, 1]));
        k.with_proc(10, |p| p.cpuset = Some(CpuSet::from([1, 2, 3])));
        for tid in [10, 11] {
            k.set_affinity(10, tid, &CpuSet::from([1])).unwrap();
        }
        let r = restore(&k, &mut j, 10);
        assert_eq!(
            r,
            Restored::Done {
                threads: 2,
                foreign: 0
            }
        );
        assert_eq!(k.affinity_of(10, 10), Some(vec![1, 2, 3].into()));
    }

    #[test]
    fn failures_keep_the_entry_and_foreign_pins_are_left() {
        let k = FakeKernel::new(&[0, 1]);
        k.add(10, 100, 2, &[0, 1]);
        let mut j = pinned(&k, 10, 100, 2);
        k.inject(
            Op::SetAffinity,
            10,
            Fault::Fail(ErrorKind::PermissionDenied),
        );
        let r = restore(&k, &mut j, 10);
        assert!(matches!(&r, Restored::Failed(e) if e[0].kind == ErrorKind::PermissionDenied));
        assert!(r.to_string().contains("EPERM"), "{r}");
        assert_eq!(j.len(), 1);
        // An administrator re-pins thread 11 to CPU 1; the retry leaves it there.
        k.set_affinity(10, 11, &CpuSet::from([1])).unwrap();
        assert_eq!(
            restore(&k, &mut j, 10),
            Restored::Done {
                threads: 1,
                foreign: 1
            }
        );
        assert_eq!(k.affinity_of(10, 11), Some(vec![1].into()));
        assert_eq!(k.affinity_of(10, 10), Some(vec![0, 1].into()));
    }

    #[test]
    fn forget_gone_drops_exited_and_reused_only() {
        let k = FakeKernel::new(&[0, 1]);
        let mut j = Journal::new();
        for (pid, st) in [(10, 1), (20, 2), (30, 3)] {
            k.add(pid, st, 1, &[0, 1]);
            j.begin(pid, st, &CpuSet::from([0, 1]));
        }
        k.remove(20);
        k.remove(30);
        k.add(30, 99, 1, &[0, 1]);
        assert_eq!(forget_gone(&k, &mut j, |_| None), vec![20, 30]);
        assert_eq!(j.pids(), vec![10]);
        assert!(k.calls().is_empty());
    }

    #[test]
    fn forget_gone_believes_the_caller_only_for_the_same_start_time() {
        let k = FakeKernel::new(&[0, 1]);
        let mut j = Journal::new();
        for (pid, st) in [(10, 1), (20, 2)] {
            k.add(pid, st, 1, &[0, 1]);
            j.begin(pid, st, &CpuSet::from([0, 1]));
        }
        k.remove(10);
        k.remove(20);
        // 10 was just seen with its start time: not asked (the fake, which lost it,
        // would have said gone); 20 was seen under another start time: asked, gone.
        let seen = |pid| match pid {
            10 => Some(1),
            20 => Some(9),
            _ => None,
        };
        assert_eq!(forget_gone(&k, &mut j, seen), vec![20]);
        assert_eq!(j.pids(), vec![10]);
    }
}
