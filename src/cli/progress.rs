//! A progress line for commands whose input can make them run long (`profile import`
//! of a large file): nothing for the first 2 s, so that a quick run prints nothing
//! extra, then one line on standard error at most once a second. Standard error,
//! because standard output may be a result someone pipes.

use std::time::{Duration, Instant};

/// Silence before the first line.
const QUIET: Duration = Duration::from_secs(2);
/// Least time between two lines.
const EVERY: Duration = Duration::from_secs(1);

pub struct Progress {
    started: Instant,
    last: Option<Instant>,
}

impl Progress {
    /// Counts from now.
    pub fn start() -> Progress {
        Progress {
            started: Instant::now(),
            last: None,
        }
    }

    /// Prints `line()` if it is time to: the message is only built when it is.
    pub fn report(&mut self, line: impl FnOnce() -> String) {
        let now = Instant::now();
        if now.duration_since(self.started) < QUIET
            || self.last.is_some_and(|t| now.duration_since(t) < EVERY)
        {
            return;
        }
        self.last = Some(now);
        eprintln!("numasched: {}", line());
    }
}

/// For one long call that cannot report its own progress (planning a large snapshot):
/// past 2 s, a line once a second says what is still going on and for how long, from
/// a thread of its own, until dropped.
pub struct Heartbeat {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    pub fn start(what: String) -> Heartbeat {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let started = Instant::now();
        let thread = std::thread::Builder::new()
            .name("numasched-progress".into())
            .spawn(move || {
                let mut wait = QUIET;
                // Ends when told to or when the sender is gone.
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(wait)
                {
                    eprintln!("numasched: {what} ({} s)", started.elapsed().as_secs());
                    wait = EVERY;
                }
            })
            .ok();
        Heartbeat {
            stop: Some(stop),
            thread,
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
