//! The status `status`, `top` and the metrics read, built when someone asks.
//!
//! Only the epoch loop may build a [`DaemonStatus`]: it owns the engine. Building one every
//! epoch (a view of every managed process, with the nodes' memory read from sysfs)
//! was a tenth of an idle daemon's cost while, most of the time, nobody reads it. So
//! a reader that finds the status older than the last epoch wakes the loop and waits
//! for it; the loop builds it between epochs, at most once per epoch however many
//! readers ask, and the readers of that epoch share it.

use std::sync::mpsc::Sender;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::status::DaemonStatus;

/// What wakes the epoch loop between epochs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    Signal(i32),
    /// A reader wants the status of the last epoch.
    Status,
    /// A journaled process forked or exited (see [`super::forks`]).
    Tasks,
}

/// A board of [`DaemonStatus`]es; generic only so that tests can post numbers.
pub struct Board<T = DaemonStatus> {
    state: Mutex<State<T>>,
    built: Condvar,
}

struct State<T> {
    status: Option<T>,
    /// The epoch `status` is of, and the last epoch that ran.
    of_epoch: u64,
    epoch: u64,
    /// A request sent and not answered yet: later readers wait for the same one.
    asked: bool,
    loop_wake: Option<Sender<Wake>>,
}

impl<T: Clone> Board<T> {
    /// A board whose readers wake the loop through `wake`.
    pub fn new(wake: Sender<Wake>) -> Board<T> {
        Board {
            state: Mutex::new(State {
                status: None,
                of_epoch: 0,
                epoch: 0,
                asked: false,
                loop_wake: Some(wake),
            }),
            built: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The loop: epoch `n` ran; the status on the board is older now.
    pub fn epoch_done(&self, n: u64) {
        self.lock().epoch = n;
    }

    /// The last epoch that ran (0: none yet), for a reader that got no status to
    /// tell "starting" from "busy".
    pub fn epochs(&self) -> u64 {
        self.lock().epoch
    }

    /// The loop: the status on the board no longer says what the loop does (a fork
    /// ended a stretched pace), so the next reader waits for a new one.
    pub fn outdated(&self) {
        let mut s = self.lock();
        s.of_epoch = s.of_epoch.min(s.epoch.saturating_sub(1));
    }

    /// The loop: whether a reader waits for a status newer than the board's.
    pub fn wanted(&self) -> bool {
        let s = self.lock();
        s.epoch > 0 && (s.status.is_none() || s.of_epoch < s.epoch)
    }

    /// The loop (or a test): `status` is that of the last epoch.
    pub fn put(&self, status: T) {
        let mut s = self.lock();
        s.of_epoch = s.epoch;
        s.status = Some(status);
        s.asked = false;
        self.built.notify_all();
    }

    /// The status of the last epoch, waiting up to `patience` for the loop to build
    /// it; an older one if the loop is busy longer (an epoch in progress), `None`
    /// before the first epoch.
    pub fn current(&self, patience: Duration) -> Option<T> {
        let deadline = Instant::now() + patience;
        let mut s = self.lock();
        while s.epoch > 0 && (s.status.is_none() || s.of_epoch < s.epoch) {
            if !s.asked {
                let sent = s
                    .loop_wake
                    .as_ref()
                    .is_some_and(|w| w.send(Wake::Status).is_ok());
                if !sent {
                    break;
                }
                s.asked = true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = self
                .built
                .wait_timeout(s, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        s.status.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::sync::Arc;

    use super::*;

    #[test]
    fn nothing_before_the_first_epoch_and_nobody_woken() {
        let (tx, rx) = mpsc::channel();
        let b = Board::<u64>::new(tx);
        assert!(b.current(Duration::from_millis(10)).is_none());
        assert!(rx.try_recv().is_err());
        assert!(!b.wanted());
        assert_eq!(b.epochs(), 0);
    }

    #[test]
    fn an_outdated_status_is_built_again_before_it_is_read() {
        let (tx, rx) = mpsc::channel();
        let b = Board::<u64>::new(tx);
        b.epoch_done(1);
        b.put(7);
        assert!(!b.wanted());
        b.outdated();
        assert!(b.wanted());
        // The loop is not answering: the reader gets the old one, having asked.
        assert_eq!(b.current(Duration::from_millis(10)), Some(7));
        assert_eq!(rx.try_recv(), Ok(Wake::Status));
        b.put(8);
        assert!(!b.wanted());
        assert_eq!(b.current(Duration::from_millis(10)), Some(8));
    }

    #[test]
    fn a_reader_wakes_the_loop_once_and_readers_share_what_it_builds() {
        let (tx, rx) = mpsc::channel();
        let b = Arc::new(Board::<u64>::new(tx));
        b.epoch_done(1);
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let b = Arc::clone(&b);
                std::thread::spawn(move || b.current(Duration::from_secs(10)))
            })
            .collect();
        // The loop: one request however many readers, answered once.
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(Wake::Status));
        assert!(b.wanted());
        b.put(1);
        for r in readers {
            assert_eq!(r.join().unwrap(), Some(1));
        }
        assert!(rx.try_recv().is_err(), "one wake for all readers");
        assert!(!b.wanted());
        // Same epoch: served from the board, the loop not woken.
        assert_eq!(b.current(Duration::ZERO), Some(1));
        assert!(rx.try_recv().is_err());
        // A new epoch makes it stale; a loop that does not answer in time leaves the
        // reader with the older one (and with none on a board never answered).
        b.epoch_done(2);
        assert_eq!(b.current(Duration::from_millis(20)), Some(1));
        assert_eq!(rx.try_recv(), Ok(Wake::Status));
        let (tx, _rx) = mpsc::channel();
        let busy = Board::<u64>::new(tx);
        busy.epoch_done(3);
        assert_eq!(busy.current(Duration::from_millis(20)), None);
        assert_eq!(busy.epochs(), 3);
    }
}
