//! Page migration in bounded chunks, spread over epochs.
//!
//! One `migrate_pages(2)` call moves a whole process however large it is: 339 MB at a
//! 64 MB/s setting held a QEMU guest's epoch loop for 9 s. So a planned page move
//! becomes a [`Migration`]: the process's movable regions ([`super::regions`]) walked
//! with `move_pages(2)`, a chunk of [`CHUNK_BYTES`] at a time. Each epoch moves at most
//! what the rate bucket holds and at most [`STEP_SECONDS`] of the loop's time, then
//! stops where it is and goes on next epoch. Before each epoch's chunks it checks the
//! process is still the one planned for (pid + start time) and that the target node is
//! still in its `Mems_allowed` (a cpuset's `cpuset.mems` can change at any moment):
//! otherwise the migration is dropped, with one line saying why, and what already moved
//! stays moved (every page a chunk moved is a complete, valid placement).
//!
//! Each call goes through [`Kernel::start_move_pages`], which on Linux runs it on the
//! [`mover`](super::mover) thread: a call still running at the step's deadline is left
//! to finish there and answered in a later epoch, so one slow call (seconds, under
//! load) never holds the loop. No other call starts while one is in flight, and each
//! step starts at least one (when none is in flight and the rate allows), even if its
//! checks took the whole step: a migration always advances.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::bucket::TokenBucket;
use super::kernel::{Kernel, KernelError, Moving};
use super::report::{Action, Line, Subject};
use numasched_model::topology::{cpulist, NodeId};

/// Bytes handed to one `move_pages` call: short enough that one call stays in the
/// milliseconds even under software emulation (1 MiB took ~25 ms in a TCG guest).
pub const CHUNK_BYTES: u64 = 1 << 20;

/// Loop time one epoch may spend moving pages.
pub const STEP_SECONDS: f64 = 0.1;

/// A page move in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Migration {
    pub pid: u32,
    pub start_time: u64,
    pub from: NodeId,
    pub to: NodeId,
    /// Bytes the plan wanted moved.
    pub planned_bytes: u64,
    /// Bytes now on `to` that chunks sent there.
    pub moved_bytes: u64,
    pub reason: String,
    /// (start, end, page bytes) of the regions left to walk, the first one partly.
    regions: Vec<(u64, u64, u64)>,
    /// Epochs it has been stepped in.
    pub epochs: u32,
}

impl Migration {
    /// Regions that hold pages on `from`; `None` when there are none to move.
    pub fn new(
        pid: u32,
        start_time: u64,
        from: NodeId,
        to: NodeId,
        planned_bytes: u64,
        reason: String,
        regions: &[super::kernel::Region],
    ) -> Option<Migration> {
        let walk: Vec<(u64, u64, u64)> = regions
            .iter()
            .filter(|r| r.node_pages.iter().any(|&(n, p)| n == from && p > 0))
            .map(|r| (r.start, r.end, r.page_bytes.max(1)))
            .collect();
        (!walk.is_empty()).then_some(Migration {
            pid,
            start_time,
            from,
            to,
            planned_bytes,
            moved_bytes: 0,
            reason,
            regions: walk,
            epochs: 0,
        })
    }

    pub fn done(&self) -> bool {
        self.regions.is_empty()
    }

    /// Bytes of address space still to walk (an upper bound of what is left to move).
    pub fn left_bytes(&self) -> u64 {
        self.regions.iter().map(|(s, e, _)| e - s).sum()
    }

    /// The next chunk's page addresses, and the walk advanced past them.
    fn next_chunk(&mut self) -> Vec<u64> {
        let Some(&(start, end, page)) = self.regions.first() else {
            return Vec::new();
        };
        let stop = end.min(start.saturating_add(CHUNK_BYTES.max(page)));
        let addrs: Vec<u64> = (start..stop).step_by(page as usize).collect();
        if stop >= end {
            self.regions.remove(0);
        } else {
            self.regions[0].0 = stop;
        }
        addrs
    }
}

/// What stopped a migration for good.
enum End {
    Finished,
    Gone,
    Dropped(Action, String),
}

/// Every migration in progress, keyed by pid (one per process at a time).
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Migrations {
    active: BTreeMap<u32, Migration>,
    /// The longest single `move_pages` call so far, seconds (timed where it ran, on
    /// the mover thread): what the loop would have been held for had it waited.
    #[serde(default)]
    longest_call_s: f64,
    /// The call handed to the kernel and not yet answered: whose, and its page size.
    #[serde(skip)]
    in_flight: Option<InFlight>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct InFlight {
    pid: u32,
    page: u64,
    /// Where it sends pages: a migration retargeted meanwhile does not count them.
    to: NodeId,
}

impl Migrations {
    pub fn get(&self, pid: u32) -> Option<&Migration> {
        self.active.get(&pid)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Migration> {
        self.active.values()
    }

    /// Nothing to move and no call in flight.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.in_flight.is_none()
    }

    /// The longest single `move_pages` call so far, seconds.
    pub fn longest_call_s(&self) -> f64 {
        self.longest_call_s
    }

    /// Starts `m` unless the process has one in progress already.
    pub fn start(&mut self, m: Migration) -> bool {
        if self.active.contains_key(&m.pid) {
            return false;
        }
        self.active.insert(m.pid, m);
        true
    }

    /// Drops the migration of a process no longer managed.
    pub fn forget(&mut self, pid: u32) {
        self.active.remove(&pid);
    }

    /// Stops the migration of `pid` where it is unless it heads to `node`, where the
    /// process now runs: its memory should follow it there, not go on to where it ran
    /// before (a 4-node guest's load re-placed early kept receiving its pages on the
    /// node it had left, all 160 MiB of them, CI 2026-12-01). Pages moved so far stay.
    pub fn retarget(&mut self, pid: u32, node: NodeId) -> Option<Line> {
        let m = self.active.get(&pid).filter(|m| m.to != node)?;
        let line = Line {
            pid,
            subject: Subject::Pages {
                from: m.from,
                to: m.to,
                bytes: m.moved_bytes,
            },
            action: Action::Skipped,
            detail: format!(
                "stopped after {:.1} MB: it now runs on node {node}, where its memory goes \
                 instead",
                m.moved_bytes as f64 / 1e6
            ),
        };
        self.active.remove(&pid);
        Some(line)
    }

    /// Moves pages until `deadline` of `kernel.now()` (one pass shares one deadline,
    /// however many moves it starts) and what `bucket` holds; one line per migration
    /// that finished, was dropped, or is waiting. A call left running by an earlier
    /// step is answered first, and while it runs no other starts.
    pub fn step<K: Kernel + ?Sized>(
        &mut self,
        kernel: &K,
        bucket: &mut TokenBucket,
        deadline: f64,
    ) -> Vec<Line> {
        let mut answer = None;
        if let Some(f) = self.in_flight.take() {
            match kernel.moving(deadline) {
                Moving::Running => self.in_flight = Some(f),
                Moving::Done(r, secs) => {
                    self.longest_call_s = self.longest_call_s.max(secs);
                    // A process forgotten meanwhile: its answer is dropped.
                    answer = Some((f, r));
                }
            }
        }
        let mut lines = Vec::new();
        let mut started = false;
        let pids: Vec<u32> = self.active.keys().copied().collect();
        for pid in pids {
            let Some(m) = self.active.get_mut(&pid) else {
                continue;
            };
            m.epochs += 1;
            let mine = answer
                .take_if(|(f, _)| f.pid == pid && f.to == m.to)
                .map(|(f, r)| (f.page, r));
            let end = if self.in_flight.is_some() {
                None
            } else {
                let mut call = Call {
                    kernel,
                    bucket: &mut *bucket,
                    deadline,
                    longest_s: &mut self.longest_call_s,
                    in_flight: &mut self.in_flight,
                    started: &mut started,
                };
                advance(m, &mut call, mine)
            };
            let running = self.in_flight.is_some_and(|f| f.pid == pid);
            let m = m.clone();
            let mk = |action, detail: String| Line {
                pid,
                subject: Subject::Pages {
                    from: m.from,
                    to: m.to,
                    bytes: m.moved_bytes,
                },
                action,
                detail,
            };
            let mb = |b: u64| b as f64 / 1e6;
            match end {
                None => lines.push(mk(
                    Action::Deferred,
                    format!(
                        "{:.1} MB moved so far, at most {:.1} MB of address space left; \
                         going on next epoch{}",
                        mb(m.moved_bytes),
                        mb(m.left_bytes()),
                        if running {
                            " (a move_pages call of it is still running)"
                        } else {
                            ""
                        }
                    ),
                )),
                Some(End::Finished) => {
                    self.active.remove(&pid);
                    lines.push(mk(
                        Action::Done,
                        format!(
                            "{}; {:.1} MB moved in {} epoch(s)",
                            m.reason,
                            mb(m.moved_bytes),
                            m.epochs
                        ),
                    ));
                }
                Some(End::Gone) => {
                    self.active.remove(&pid);
                    lines.push(mk(Action::Gone, "exited during migration".into()));
                }
                Some(End::Dropped(action, why)) => {
                    self.active.remove(&pid);
                    lines.push(mk(
                        action,
                        format!("{why}; stopped after {:.1} MB", mb(m.moved_bytes)),
                    ));
                }
            }
        }
        lines
    }
}

/// What one step's calls share: the kernel, the rate limit, the deadline, the longest
/// call seen, and the one call that may be in flight.
struct Call<'a, K: Kernel + ?Sized> {
    kernel: &'a K,
    bucket: &'a mut TokenBucket,
    deadline: f64,
    longest_s: &'a mut f64,
    in_flight: &'a mut Option<InFlight>,
    /// A call was started in this step.
    started: &'a mut bool,
}

/// One epoch of one migration; `None` when it must go on next epoch. `answer` is the
/// page size and answer of its call that an earlier step left running.
fn advance<K: Kernel + ?Sized>(
    m: &mut Migration,
    call: &mut Call<'_, K>,
    answer: Option<(u64, Result<Vec<i32>, KernelError>)>,
) -> Option<End> {
    let kernel = call.kernel;
    let dropped = |e: KernelError| {
        if e.is_gone() {
            End::Gone
        } else {
            End::Dropped(Action::Failed, e.to_string())
        }
    };
    match kernel.identity(m.pid) {
        Ok(id) if id.start_time == m.start_time => {}
        Ok(_) => return Some(End::Gone),
        Err(e) => return Some(dropped(e)),
    }
    let mems = match kernel.mems_allowed(m.pid) {
        Ok(mems) => mems,
        Err(e) => return Some(dropped(e)),
    };
    if mems.is_empty() {
        return Some(End::Dropped(
            Action::Failed,
            "its Mems_allowed is empty".into(),
        ));
    }
    if !mems.contains(&m.to) {
        return Some(End::Dropped(
            Action::Refused,
            format!(
                "node {} is not in its Mems_allowed ({}) any more",
                m.to,
                cpulist::format(&mems)
            ),
        ));
    }
    if let Some((page, r)) = answer {
        if let Err(e) = credit(m, r, page, call.bucket) {
            return Some(dropped(e));
        }
    }
    while !m.done() {
        // Past the deadline, a step still starts one call if none has started yet:
        // starting costs the loop nothing (the call runs on the mover thread), and
        // without it a step whose checks alone outlast it (slow /proc reads in a
        // loaded guest) would never move a page, epoch after epoch.
        let late = kernel.now() >= call.deadline && *call.started;
        if late || call.bucket.available() < CHUNK_BYTES as f64 {
            return None;
        }
        let page = m.regions.first().map_or(4096, |r| r.2);
        let addrs = m.next_chunk();
        let targets = vec![m.to; addrs.len()];
        *call.started = true;
        match kernel.start_move_pages(m.pid, addrs, targets, call.deadline) {
            Moving::Running => {
                *call.in_flight = Some(InFlight {
                    pid: m.pid,
                    page,
                    to: m.to,
                });
                return None;
            }
            Moving::Done(r, secs) => {
                *call.longest_s = call.longest_s.max(secs);
                if let Err(e) = credit(m, r, page, call.bucket) {
                    return Some(dropped(e));
                }
            }
        }
    }
    Some(End::Finished)
}

/// Counts what a call moved to `m.to` and spends it from the rate limit.
fn credit(
    m: &mut Migration,
    answer: Result<Vec<i32>, KernelError>,
    page: u64,
    bucket: &mut TokenBucket,
) -> Result<(), KernelError> {
    let status = answer?;
    let there = status.iter().filter(|&&s| s == m.to as i32).count() as u64;
    let bytes = there * page;
    m.moved_bytes += bytes;
    bucket.spend(bytes);
    Ok(())
}
