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

/// For long calls that cannot report their own progress (reading and planning a large
/// snapshot): past 2 s from the start, a line once a second says what is going on now
/// and for how long, from a thread of its own, until dropped. One for the whole
/// command, its label changed as it goes, so that two steps of 1.9 s each still show.
pub struct Heartbeat {
    what: std::sync::Arc<std::sync::Mutex<String>>,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    pub fn start(what: String) -> Heartbeat {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let started = Instant::now();
        let what = std::sync::Arc::new(std::sync::Mutex::new(what));
        let shown = std::sync::Arc::clone(&what);
        let thread = std::thread::Builder::new()
            .name("numasched-progress".into())
            .spawn(move || {
                let mut wait = QUIET;
                // Ends when told to or when the sender is gone.
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(wait)
                {
                    let now = match shown.lock() {
                        Ok(g) => g.clone(),
                        Err(poisoned) => poisoned.into_inner().clone(),
                    };
                    eprintln!("numasched: {now} ({} s)", started.elapsed().as_secs());
                    wait = EVERY;
                }
            })
            .ok();
        Heartbeat {
            what,
            stop: Some(stop),
            thread,
        }
    }

    /// What the next lines say is going on.
    pub fn now(&self, what: String) {
        match self.what.lock() {
            Ok(mut g) => *g = what,
            Err(poisoned) => *poisoned.into_inner() = what,
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
