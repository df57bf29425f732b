//! `move_pages` on a thread of its own, so the epoch loop never waits on one call.
//!
//! Chunking bounds what one call moves (1 MiB), not how long it takes: under load a
//! 1 MiB call was seen to take 3.8 s in a TCG guest (the cost is per call, not per
//! page: small calls were no faster). Waiting for it held the whole epoch loop —
//! affinity, status, every other process — for that long. Here the call runs on the
//! mover thread; the caller waits only until its own deadline, and if the call is
//! still running then, it comes back for the answer in a later epoch. One call is in
//! flight at a time, as before: the mover adds no parallel migration, only a loop
//! that does not block.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::kernel_error::{ErrorKind, KernelError, Op};
use numasched_model::topology::NodeId;

/// The answer of a `move_pages` call that may still be running.
#[derive(Debug, Clone, PartialEq)]
pub enum Moving {
    /// Finished: the per-page status (a node, or -errno), or the call's error, and how
    /// long the call itself took, seconds.
    Done(Result<Vec<i32>, KernelError>, f64),
    /// Still running when the caller stopped waiting; ask again later.
    Running,
}

/// One call to make.
pub struct Job {
    pub pid: u32,
    pub addrs: Vec<u64>,
    pub nodes: Vec<NodeId>,
}

/// What makes the call: the syscall in the daemon, anything in tests.
pub type CallFn = fn(u32, &[u64], &[NodeId]) -> Result<Vec<i32>, KernelError>;

struct Channels {
    jobs: Sender<Job>,
    answers: Receiver<(Result<Vec<i32>, KernelError>, f64)>,
    /// A call was handed over and its answer not yet collected.
    in_flight: bool,
}

/// The mover thread, started at the first call (after the daemon dropped its
/// capabilities, so it runs with the same reduced set as the loop).
pub struct Mover {
    call: CallFn,
    channels: Mutex<Option<Channels>>,
}

impl std::fmt::Debug for Mover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mover").finish_non_exhaustive()
    }
}

impl Mover {
    pub fn new(call: CallFn) -> Mover {
        Mover {
            call,
            channels: Mutex::new(None),
        }
    }

    /// Hands `job` to the mover and waits for its answer at most `wait`. A call still
    /// in flight (never collected) is waited for first, within the same `wait`.
    pub fn start(&self, job: Job, wait: Duration) -> Moving {
        let until = Instant::now() + wait;
        let mut guard = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if guard.as_ref().is_some_and(|c| c.in_flight) {
            match Self::wait(guard.as_mut(), until) {
                Moving::Running => return Moving::Running,
                // An answer nobody asked for any more: its migration is gone.
                Moving::Done(..) => {}
            }
        }
        if guard.is_none() {
            *guard = self.spawn();
        }
        let pid = job.pid;
        let sent = guard.as_ref().map(|c| c.jobs.send(job).is_ok());
        if sent != Some(true) {
            // No thread (it could not start, or died): say so as this call's error.
            *guard = None;
            return Moving::Done(
                Err(KernelError::new(
                    Op::MovePages,
                    pid,
                    None,
                    ErrorKind::Other("the page-moving thread is not running".into()),
                )),
                0.0,
            );
        }
        if let Some(c) = guard.as_mut() {
            c.in_flight = true;
        }
        Self::wait(guard.as_mut(), until)
    }

    /// The answer of the call [`start`](Self::start) left running, waiting at most
    /// `wait`; `Running` again if it is still running then.
    pub fn collect(&self, wait: Duration) -> Moving {
        let until = Instant::now() + wait;
        let mut guard = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        Self::wait(guard.as_mut(), until)
    }

    /// Whether a call was handed over and its answer not yet collected.
    pub fn in_flight(&self) -> bool {
        let guard = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        guard.as_ref().is_some_and(|c| c.in_flight)
    }

    fn wait(channels: Option<&mut Channels>, until: Instant) -> Moving {
        let Some(c) = channels.filter(|c| c.in_flight) else {
            return Moving::Done(
                Err(KernelError::new(
                    Op::MovePages,
                    0,
                    None,
                    ErrorKind::Other("no move_pages call in flight".into()),
                )),
                0.0,
            );
        };
        match c
            .answers
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            Ok((r, secs)) => {
                c.in_flight = false;
                Moving::Done(r, secs)
            }
            Err(RecvTimeoutError::Timeout) => Moving::Running,
            Err(RecvTimeoutError::Disconnected) => {
                c.in_flight = false;
                Moving::Done(
                    Err(KernelError::new(
                        Op::MovePages,
                        0,
                        None,
                        ErrorKind::Other("the page-moving thread stopped".into()),
                    )),
                    0.0,
                )
            }
        }
    }

    fn spawn(&self) -> Option<Channels> {
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (answer_tx, answers) = mpsc::channel();
        let call = self.call;
        std::thread::Builder::new()
            .name("numasched-move".into())
            .spawn(move || {
                for job in job_rx {
                    let t0 = Instant::now();
                    let r = call(job.pid, &job.addrs, &job.nodes);
                    if answer_tx.send((r, t0.elapsed().as_secs_f64())).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        Some(Channels {
            jobs,
            answers,
            in_flight: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slow(pid: u32, addrs: &[u64], nodes: &[NodeId]) -> Result<Vec<i32>, KernelError> {
        std::thread::sleep(Duration::from_millis(u64::from(pid)));
        Ok(nodes.iter().take(addrs.len()).map(|&n| n as i32).collect())
    }

    fn job(ms: u32) -> Job {
        Job {
            pid: ms,
            addrs: vec![0, 4096],
            nodes: vec![1, 1],
        }
    }

    /// The point of the mover: a call that takes 600 ms holds the caller only for the
    /// 50 ms it is willing to wait; the answer is there later.
    #[test]
    fn a_slow_call_does_not_hold_the_caller_past_its_wait() {
        let m = Mover::new(slow);
        let t = Instant::now();
        assert_eq!(
            m.start(job(600), Duration::from_millis(50)),
            Moving::Running
        );
        assert!(
            t.elapsed() < Duration::from_millis(400),
            "{:?}",
            t.elapsed()
        );
        assert!(m.in_flight());
        assert_eq!(m.collect(Duration::from_millis(10)), Moving::Running);
        match m.collect(Duration::from_secs(5)) {
            Moving::Done(Ok(status), secs) => {
                assert_eq!(status, vec![1, 1]);
                assert!(secs >= 0.6, "the call's own time: {secs}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!m.in_flight());
    }

    #[test]
    fn a_quick_call_is_answered_at_once_and_calls_go_one_at_a_time() {
        let m = Mover::new(slow);
        assert!(matches!(
            m.start(job(1), Duration::from_secs(5)),
            Moving::Done(Ok(_), _)
        ));
        // A call left running is waited for before the next starts: the next one
        // cannot start within a wait shorter than what is left of the first.
        assert_eq!(
            m.start(job(300), Duration::from_millis(10)),
            Moving::Running
        );
        assert_eq!(m.start(job(1), Duration::from_millis(10)), Moving::Running);
        assert!(matches!(
            m.start(job(1), Duration::from_secs(5)),
            Moving::Done(Ok(_), _)
        ));
    }

    #[test]
    fn collecting_with_nothing_in_flight_is_an_error_not_a_hang() {
        let m = Mover::new(slow);
        let t = Instant::now();
        assert!(matches!(
            m.collect(Duration::from_secs(5)),
            Moving::Done(Err(_), _)
        ));
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
