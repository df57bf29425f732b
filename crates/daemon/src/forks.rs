//! Between epochs: forks and exits of the processes the journal names, from the
//! kernel's proc connector ([`numasched_linux::observe::proc_events`]).
//!
//! A child forked inside a set numasched narrowed carries that set; until the journal
//! names it, a crash would leave it narrowed for good. A placed parent's exit leaves
//! its children to init with a set chosen for the parent. Polled, both wait for the
//! next epoch (up to `--interval`); here the connector's thread wakes the loop, which
//! runs [`Engine::follow_forks`](super::engine::Engine::follow_forks) at once.
//!
//! Only events of journaled processes (and of children just seen forking from one)
//! wake the loop, and passes are spaced by [`Follower::next_pass_at`]: at least
//! [`MIN_GAP`] apart, within a budget of CPU time that refills at a fifth of a CPU
//! ([`SHARE`]) and holds at most [`BURST`], so a fork bomb under a placed parent costs
//! the daemon at most a fifth of a CPU, however fast it forks, while a burst of a few
//! hundred children goes through at once.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::time::{clock_gettime, ClockId};
use numasched_linux::apply::bucket::TokenBucket;
use numasched_linux::observe::proc_events::{Event, ProcEvents};
use tracing::warn;

use super::status_board::Wake;

/// Shortest time between two passes.
pub const MIN_GAP: Duration = Duration::from_millis(10);

/// The share of a CPU that passes may take over time. CPU time, not wall time: on a
/// busy machine the wall time of a pass is mostly waiting for a CPU, which costs
/// nobody anything.
const SHARE: f64 = 0.2;

/// The CPU time passes may take at once, beyond [`SHARE`]: a burst of 200 children
/// costs about 40 ms to journal (0.2 ms each, docs/overhead.md). Spacing each pass by
/// four times its own cost instead kept the same long-run share but made the later
/// children of a burst, and any fork just after an epoch (whose whole cost counted),
/// wait 100 ms and more.
const BURST: Duration = Duration::from_millis(50);

/// Fork times kept for passes to come, at most: a fork bomb grows nothing without bound.
const FORKS_KEPT: usize = 4096;

/// Forks older than this that no pass journaled are forgotten (the child did not
/// carry numasched's set, or exited).
const FORK_MEMORY_NS: u64 = 2_000_000_000;

#[derive(Debug, Clone, Copy)]
struct Fork {
    parent: u32,
    /// CLOCK_MONOTONIC nanoseconds.
    at_ns: u64,
    /// It has called for a pass already: a child no pass journals (it exited, or
    /// set its own CPUs) calls for no more.
    woke: bool,
}

/// CPU time of the calling thread: what a pass costs.
pub fn thread_cpu_time() -> Duration {
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).map_or(Duration::ZERO, Duration::from)
}

/// What the connector's thread and the loop share.
#[derive(Default)]
pub struct Follower {
    /// Journaled processes, and children seen forking from them since the last pass.
    watched: Mutex<HashSet<u32>>,
    /// The last moments' forks by child, every process's: a parent may be placed by
    /// the epoch running as its child forks.
    forks: Mutex<HashMap<u32, Fork>>,
    /// A wake is on its way or a pass is due; the thread sends no more until cleared.
    pending: AtomicBool,
    /// When the last pass ended, and the CPU time passes may still take.
    budget: Mutex<Option<Budget>>,
    /// Children a pass journaled before this thread had read their fork (the walk
    /// reads /proc, which can be ahead of the connector's queue), with when.
    early: Mutex<HashMap<u32, u64>>,
}

/// CPU time for passes: nanoseconds in a bucket that refills at [`SHARE`] of a CPU.
struct Budget {
    /// The clock's zero for the bucket, which counts in seconds.
    origin: Instant,
    /// When the last pass (or epoch) ended.
    end: Instant,
    cpu_ns: TokenBucket,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Follower {
    /// Starts the thread reading `events`; it ends when the loop's channel closes, or
    /// on a read error other than lost events (then polling alone remains, and the
    /// log says so).
    pub fn start(events: ProcEvents, tx: Sender<Wake>) -> std::io::Result<Arc<Follower>> {
        let follower = Arc::new(Follower::default());
        let f = follower.clone();
        std::thread::Builder::new()
            .name("numasched-forks".into())
            .spawn(move || f.run(events, tx))?;
        Ok(follower)
    }

    fn run(&self, events: ProcEvents, tx: Sender<Wake>) {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let wake = match events.read(&mut buf) {
                Ok(evs) => self.take(&evs),
                // The kernel dropped events: some fork may be among them.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => true,
                Err(e) => {
                    warn!("proc connector: {e}; forks are found by each epoch's poll from now on");
                    return;
                }
            };
            if wake && !self.pending.swap(true, Ordering::SeqCst) && tx.send(Wake::Tasks).is_err() {
                return;
            }
        }
    }

    /// Notes the forks and exits among `events` that concern watched processes;
    /// whether any did.
    pub fn take(&self, events: &[Event]) -> bool {
        let mut hit = false;
        let mut watched = lock(&self.watched);
        for e in events.iter().filter(|e| e.is_process()) {
            match *e {
                Event::Fork {
                    parent_tgid,
                    child_tgid,
                    at_ns,
                    ..
                } => {
                    // Every fork is remembered for a moment: its parent may be placed
                    // by the epoch running now, which has not told us yet.
                    let mut forks = lock(&self.forks);
                    if forks.len() >= FORKS_KEPT {
                        forks.retain(|_, f| at_ns.saturating_sub(f.at_ns) < FORK_MEMORY_NS);
                    }
                    let woke = watched.contains(&parent_tgid);
                    if forks.len() < FORKS_KEPT {
                        let fork = Fork {
                            parent: parent_tgid,
                            at_ns,
                            woke,
                        };
                        forks.insert(child_tgid, fork);
                    }
                    if woke {
                        // Its own children are followed too, before a pass journals it.
                        watched.insert(child_tgid);
                        hit = true;
                    }
                }
                Event::Exit { tgid, .. } if watched.contains(&tgid) => hit = true,
                _ => {}
            }
        }
        hit
    }

    /// A pass begins: events from now on call for another one. Returns the processes
    /// whose children are still to be journaled, where its walk starts.
    pub fn begin(&self) -> Vec<u32> {
        self.pending.store(false, Ordering::SeqCst);
        let watched = lock(&self.watched);
        let mut parents: Vec<u32> = lock(&self.forks)
            .values()
            .map(|f| f.parent)
            .filter(|p| watched.contains(p))
            .collect();
        parents.sort_unstable();
        parents.dedup();
        parents
    }

    /// A pass (or an epoch, which follows forks too) ended at `now`, costing `cost`,
    /// with `journaled` the processes the journal names now. Returns how long after
    /// its fork each of `adopted` was journaled, where the fork was seen.
    pub fn end(
        &self,
        now: Instant,
        cost: Duration,
        journaled: Vec<u32>,
        adopted: &[u32],
        now_ns: u64,
    ) -> Vec<(u32, Duration)> {
        {
            let mut budget = lock(&self.budget);
            let b = budget.get_or_insert_with(|| Budget {
                origin: now,
                end: now,
                cpu_ns: TokenBucket::new(SHARE * 1e9, BURST.as_nanos() as f64),
            });
            b.cpu_ns
                .advance(now.saturating_duration_since(b.origin).as_secs_f64());
            b.cpu_ns
                .spend(u64::try_from(cost.as_nanos()).unwrap_or(u64::MAX));
            b.end = now;
        }
        // Locks in the order the thread takes them: watched, then forks.
        let mut watched = lock(&self.watched);
        *watched = journaled.into_iter().collect();
        let mut forks = lock(&self.forks);
        // A child of a process placed since its fork was read, and not journaled yet:
        // a pass is due now, not at the next epoch. Once per fork.
        for (child, f) in forks.iter_mut() {
            if !f.woke && watched.contains(&f.parent) && !watched.contains(child) {
                f.woke = true;
                self.pending.store(true, Ordering::SeqCst);
            }
        }
        let mut early = lock(&self.early);
        early.extend(adopted.iter().map(|&pid| (pid, now_ns)));
        let mut late: Vec<(u32, Duration)> = early
            .iter()
            .filter_map(|(pid, done)| {
                let f = forks.remove(pid)?;
                Some((*pid, Duration::from_nanos(done.saturating_sub(f.at_ns))))
            })
            .collect();
        late.sort_unstable();
        for (pid, _) in &late {
            early.remove(pid);
        }
        forks.retain(|_, f| now_ns.saturating_sub(f.at_ns) < FORK_MEMORY_NS);
        early.retain(|_, done| now_ns.saturating_sub(*done) < FORK_MEMORY_NS);
        late
    }

    /// The earliest a pass may start: [`MIN_GAP`] after the last ended, and once the
    /// CPU budget is out of debt.
    pub fn next_pass_at(&self) -> Option<Instant> {
        lock(&self.budget).as_ref().map(|b| {
            let debt_ns = (-b.cpu_ns.available()).max(0.0);
            b.end + MIN_GAP.max(Duration::from_secs_f64(debt_ns / (SHARE * 1e9)))
        })
    }

    /// Whether a pass is due (a wake was sent and not yet served).
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fork(parent: u32, child: u32, at_ns: u64) -> Event {
        Event::Fork {
            parent_tgid: parent,
            child_pid: child,
            child_tgid: child,
            at_ns,
        }
    }

    #[test]
    fn a_fork_read_before_its_parent_was_placed_makes_a_pass_due() {
        let f = Follower::default();
        let t = Instant::now();
        f.end(t, Duration::ZERO, vec![], &[], 0);
        assert!(!f.take(&[fork(100, 200, 5)]), "100 is not placed yet");
        assert!(!f.pending());
        // The epoch running meanwhile placed 100.
        f.end(t, Duration::ZERO, vec![100], &[], 10);
        assert!(f.pending());
        assert_eq!(f.begin(), vec![100]);
        let late = f.end(t, Duration::ZERO, vec![100, 200], &[200], 25);
        assert_eq!(late, vec![(200, Duration::from_nanos(20))]);
        assert!(!f.pending());
    }

    #[test]
    fn a_child_no_pass_journals_calls_for_one_pass_only() {
        let f = Follower::default();
        let t = Instant::now();
        f.end(t, Duration::ZERO, vec![], &[], 0);
        // Forked before its parent was placed; it exits before any pass.
        f.take(&[fork(100, 200, 5)]);
        f.end(t, Duration::ZERO, vec![100], &[], 10);
        assert!(f.pending());
        f.begin();
        f.end(t, Duration::ZERO, vec![100], &[], 20);
        assert!(!f.pending(), "a second pass for the same fork");
        // Forked from a placed parent: the fork's own wake was its one pass.
        assert!(f.take(&[fork(100, 300, 30)]));
        f.begin();
        f.end(t, Duration::ZERO, vec![100], &[], 40);
        assert!(!f.pending());
    }

    #[test]
    fn only_forks_and_exits_of_watched_processes_wake_the_loop() {
        let f = Follower::default();
        let t = Instant::now();
        f.end(t, Duration::ZERO, vec![100], &[], 0);
        assert!(!f.take(&[fork(7, 8, 1)]), "an unrelated fork");
        let thread = Event::Fork {
            parent_tgid: 100,
            child_pid: 101,
            child_tgid: 100,
            at_ns: 1,
        };
        assert!(!f.take(&[thread]), "a new thread of a watched process");
        assert!(f.take(&[fork(100, 200, 5)]), "a child of a watched process");
        assert!(
            f.take(&[fork(200, 300, 6)]),
            "its grandchild, before any pass"
        );
        let exit = |pid| Event::Exit {
            pid,
            tgid: pid,
            at_ns: 9,
        };
        assert!(!f.take(&[exit(8)]));
        assert!(
            f.take(&[exit(100)]),
            "a watched parent's exit orphans its children"
        );
        assert_eq!(
            f.begin(),
            vec![100, 200],
            "the walk starts from the parents"
        );
        // The pass journaled 200 and 300: each is reported with its delay since the fork.
        let late = f.end(
            t,
            Duration::ZERO,
            vec![100, 200, 300],
            &[200, 300],
            1_000_005,
        );
        assert_eq!(
            late,
            vec![
                (200, Duration::from_nanos(1_000_000)),
                (300, Duration::from_nanos(999_999))
            ]
        );
    }

    #[test]
    fn a_child_journaled_before_its_fork_was_read_is_reported_once_the_fork_is() {
        let f = Follower::default();
        let t = Instant::now();
        f.end(t, Duration::ZERO, vec![100], &[], 0);
        // The walk found 200 in /proc before the thread read its fork.
        assert!(f
            .end(t, Duration::ZERO, vec![100, 200], &[200], 50)
            .is_empty());
        assert!(f.take(&[fork(100, 200, 20)]));
        let late = f.end(t, Duration::ZERO, vec![100, 200], &[], 90);
        assert_eq!(late, vec![(200, Duration::from_nanos(30))]);
        assert!(
            f.end(t, Duration::ZERO, vec![100, 200], &[], 95).is_empty(),
            "once"
        );
    }

    #[test]
    fn a_burst_goes_at_once_and_debt_is_paid_at_a_fifth_of_a_cpu() {
        let f = Follower::default();
        assert_eq!(f.next_pass_at(), None, "the first pass waits for nothing");
        let t = Instant::now();
        f.end(t, Duration::from_millis(5), vec![], &[], 0);
        assert_eq!(f.next_pass_at(), Some(t + MIN_GAP), "within the burst");
        let t = t + MIN_GAP;
        f.end(t, Duration::from_millis(65), vec![], &[], 0);
        // 50 ms of burst, 2 ms refilled in the 10 ms between, 70 spent: 18 ms of
        // debt, paid off at 0.2 ms a ms.
        let at = f.next_pass_at().expect("a pass ended");
        let wait = at - t;
        assert!((wait.as_secs_f64() - 0.090).abs() < 1e-6, "{wait:?}");
    }

    /// However fast a fork bomb wakes it, passes that start as soon as allowed take at
    /// most a fifth of a CPU beyond the burst.
    #[test]
    fn passes_back_to_back_take_a_fifth_of_a_cpu() {
        let f = Follower::default();
        let t0 = Instant::now();
        let mut now = t0;
        let mut spent = Duration::ZERO;
        let pass = Duration::from_millis(3);
        while now - t0 < Duration::from_secs(10) {
            now += pass;
            f.end(now, pass, vec![], &[], 0);
            spent += pass;
            now = f.next_pass_at().expect("ended").max(now);
        }
        let elapsed = (now - t0).as_secs_f64();
        let share = spent.as_secs_f64() / elapsed;
        assert!(
            share <= SHARE + BURST.as_secs_f64() / elapsed + 1e-9,
            "{share}"
        );
        assert!(share > 0.15, "{share}: a fork bomb is still followed");
    }

    #[test]
    fn forks_no_pass_journaled_are_forgotten_and_their_number_is_bounded() {
        let f = Follower::default();
        f.end(Instant::now(), Duration::ZERO, vec![1], &[], 0);
        let many: Vec<Event> = (0..FORKS_KEPT as u32 + 100)
            .map(|c| fork(1, 10 + c, 0))
            .collect();
        assert!(f.take(&many));
        assert_eq!(lock(&f.forks).len(), FORKS_KEPT);
        // Old ones make room for new ones.
        assert!(f.take(&[fork(1, 9, FORK_MEMORY_NS)]));
        assert_eq!(lock(&f.forks).len(), 1);
        f.end(
            Instant::now(),
            Duration::ZERO,
            vec![1],
            &[],
            2 * FORK_MEMORY_NS,
        );
        assert!(lock(&f.forks).is_empty());
    }
}
