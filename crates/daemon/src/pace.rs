//! How long the next epoch is: `--interval`, stretched up to [`STRETCH`] times while
//! nothing numasched manages is busy and nothing happens.
//!
//! An epoch re-reads what could have changed. When every managed process is idle and
//! the last epochs planned, moved and released nothing, what could change is that one
//! of them wakes up, and a wakeup waits for a plan anyway: it is sized by a busy epoch
//! before it is placed. So the daemon's own cost on an idle machine is what the
//! interval decides, and the interval can give: numad does the same (`-i 5:15`, a
//! scan interval that grows while nothing moves). Forks and exits are not polled for
//! while the proc connector reports them (`super::forks`), and one of those events
//! about a managed process puts the interval back at once. Without the connector the
//! interval is never stretched: a fork inside a narrow set is found only by an epoch.

use std::time::Duration;

/// Calm epochs in a row before the interval stretches: a load between two bursts
/// (`need::PEAK_S` keeps its peak for 5 s) is not calm, and a process that just went
/// idle has its CPUs given back first.
pub const CALM_EPOCHS: u32 = 3;

/// The most an epoch is stretched, times `--interval`: at the default 1 s an idle
/// process that wakes is seen within 4 s, where numad's default takes up to 15 s.
pub const STRETCH: u32 = 4;

/// The epochs' pace: how many calm epochs came in a row.
#[derive(Debug, Default)]
pub struct Pace {
    calm: u32,
}

impl Pace {
    /// The length of the next epoch, after one that was `calm` (see
    /// `EpochReport::calm`), where `followed` says whether the proc connector reports
    /// forks and exits.
    pub fn next(&mut self, interval: Duration, calm: bool, followed: bool) -> Duration {
        self.calm = if calm && followed {
            self.calm.saturating_add(1)
        } else {
            0
        };
        if self.calm < CALM_EPOCHS {
            return interval;
        }
        // Doubling from the CALM_EPOCHS-th calm epoch on, up to STRETCH.
        let doublings = (self.calm - CALM_EPOCHS + 1).min(STRETCH.ilog2());
        interval.saturating_mul(1 << doublings)
    }

    /// A fork or exit of a managed process was reported: back to the interval.
    /// Whether the epoch under way was stretched, and so must be cut short.
    pub fn woken(&mut self) -> bool {
        let was = self.stretched();
        self.calm = 0;
        was
    }

    /// Whether the current epoch is longer than the interval.
    pub fn stretched(&self) -> bool {
        self.calm >= CALM_EPOCHS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn calm_epochs_stretch_the_interval_by_doubling_up_to_the_limit() {
        let mut p = Pace::default();
        let lengths: Vec<u64> = (0..7).map(|_| p.next(S, true, true).as_secs()).collect();
        assert_eq!(lengths, vec![1, 1, 2, 4, 4, 4, 4]);
        assert!(p.stretched());
    }

    #[test]
    fn anything_happening_puts_the_interval_back_at_once() {
        let mut p = Pace::default();
        for _ in 0..5 {
            p.next(S, true, true);
        }
        assert_eq!(p.next(S, false, true), S, "a busy or eventful epoch");
        assert!(!p.stretched());
        for _ in 0..5 {
            p.next(S, true, true);
        }
        assert!(p.woken(), "it was stretched");
        assert!(!p.woken(), "and is no longer");
        assert!(!p.stretched());
        assert_eq!(p.next(S, true, true), S, "counted again from a fork");
    }

    #[test]
    fn without_the_proc_connector_the_interval_never_stretches() {
        let mut p = Pace::default();
        for _ in 0..10 {
            assert_eq!(p.next(S, true, false), S);
        }
    }
}
