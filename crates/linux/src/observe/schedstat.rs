//! Run-queue delay: how long a process's threads were runnable but waiting for a CPU.
//!
//! `/proc/<pid>/task/<tid>/schedstat` is three numbers: time on a CPU (ns), time
//! waiting on a run queue (ns), and timeslices run. The waiting time, summed over the
//! threads and taken as a rate, is how many more CPUs' worth the process would have
//! used had there been room: the sign that a CPU set numasched gave it is too small
//! (a new thread inherited one CPU, demand grew). CPU demand alone cannot show it: a
//! process squeezed onto one CPU measures exactly one CPU's worth of demand.

use std::path::Path;

use super::error::ObserveError;

/// Waiting time summed over a process's threads, as read at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunDelay {
    /// Nanoseconds spent runnable but not running, all threads, since each started.
    pub wait_ns: u64,
    /// Threads read.
    pub threads: u32,
    /// Threads running or runnable (state `R`) at the moment of reading: more of them
    /// than CPUs in the set is what tells a set that is too small from co-runners
    /// that merely keep a single thread waiting.
    pub runnable: u32,
}

/// The wait time (second field) of one `schedstat` file.
pub fn parse(text: &str, path: &Path) -> Result<u64, ObserveError> {
    let mut fields = text.split_ascii_whitespace();
    let (Some(_run), Some(wait)) = (fields.next(), fields.next()) else {
        return Err(ObserveError::parse(
            path,
            Some(1),
            "expected 'run_ns wait_ns slices'",
        ));
    };
    wait.parse::<u64>().map_err(|_| {
        ObserveError::parse(
            path,
            Some(1),
            format!("wait time '{}' is not a number", wait.escape_debug()),
        )
    })
}

/// Waiting time per second of wall time between two readings of the same process:
/// the average number of its threads that were waiting for a CPU.
pub fn waiting_threads(before: RunDelay, after: RunDelay, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    // Threads that exited take their waiting time with them: never negative.
    after.wait_ns.saturating_sub(before.wait_ns) as f64 / 1e9 / seconds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_second_field() {
        let p = Path::new("/proc/7/task/7/schedstat");
        assert_eq!(parse("123 456 7\n", p).expect("parse"), 456);
        let e = parse("123\n", p).expect_err("short").to_string();
        assert!(e.starts_with("/proc/7/task/7/schedstat:1:"), "{e}");
        let e = parse("1 x\u{1b}[2J 3\n", p).expect_err("bad").to_string();
        assert!(!e.contains('\u{1b}'), "escaped: {e}");
    }

    #[test]
    fn rate_is_waiting_threads_and_never_negative() {
        let a = RunDelay {
            wait_ns: 1_000_000_000,
            threads: 2,
            runnable: 2,
        };
        let b = RunDelay {
            wait_ns: 3_000_000_000,
            threads: 2,
            runnable: 2,
        };
        assert!((waiting_threads(a, b, 2.0) - 1.0).abs() < 1e-9);
        assert_eq!(waiting_threads(b, a, 2.0), 0.0);
        assert_eq!(waiting_threads(a, b, 0.0), 0.0);
    }

    #[test]
    fn reads_this_process_from_the_real_proc() {
        let dir = crate::observe::ProcDir::open(Path::new("/proc"), std::process::id())
            .expect("open")
            .expect("we exist");
        let d = dir.run_delay().expect("read").expect("alive");
        assert!(d.threads >= 1);
        assert!(d.runnable >= 1, "this thread is running: {d:?}");
    }
}
