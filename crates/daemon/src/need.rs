//! How many CPUs each managed process needs, so that a CPU set numasched gave it is
//! never what holds it back.
//!
//! One epoch's average demand is the wrong size for a set: a load that just started,
//! a bursty one caught idle, a process whose second thread starts after placement.
//! So a process is sized from
//! - its *peak* demand over the last few epochs (a burst keeps its CPUs between
//!   bursts), and
//! - its run-queue delay ([`schedstat`], read for busy processes numasched placed,
//!   and for children carrying a narrow set numasched gave their parent):
//!   threads that were runnable but waited for a CPU are demand that sharing hid,
//!   counted with what it ran once it has lasted two epochs. When numasched narrowed it, with more
//!   runnable threads than CPUs in its set, that is the sign of a throttled process,
//!   and it makes the trigger re-plan at once. (One runnable thread that waits is
//!   waiting for co-runners, which a wider set of its own would not change.)
//!
//! The first reading of a process is its lifetime average (the scanner has nothing
//! earlier): a load that just started can read well above what it keeps busy, so it
//! is replaced, not kept in the peak, once a measured epoch arrives.
//!
//! A process that is stopped (SIGSTOP, a debugger) needs nothing; one that stopped or
//! went idle while holding a narrowed set has CPUs to give back, which is also a reason
//! to re-plan at once. Pure: the engine passes what it read.
//!
//! [`schedstat`]: numasched_linux::observe::schedstat

use numasched_model::plural::count;
use std::collections::{HashMap, VecDeque};

use numasched_linux::observe::schedstat::{waiting_threads, RunDelay};
use numasched_model::snapshot::SLOT_SLACK;
use numasched_policy::granularity::IDLE_DEMAND;

use numasched_model::ProcessKey;

/// Seconds of demand the peak is taken over: a load busy 1 s in 2 keeps its CPUs,
/// and a process that really quietened returns them within this long. In seconds, not
/// epochs, so that a short `--interval` does not shorten it (at 0.2 s epochs, five
/// epochs would take a set back between two bursts a second apart).
pub const PEAK_S: f64 = 5.0;

/// Readings the peak is taken over at least: at long intervals (10 s) the last busy
/// epoch still counts in the next one.
pub const PEAK_MIN_READINGS: usize = 2;

/// A process younger than this has a lifetime average too short to size it by.
pub const YOUNG_S: f64 = 5.0;

/// Average waiting threads that count as throttled: half a thread waiting all the time.
pub const THROTTLED_WAITING: f64 = 0.5;

/// Share of its set a process must keep busy, or be waiting for, to be throttled by
/// it: a process that leaves its CPUs idle and does not wait for them is not held back
/// by their number (its threads wake in turn). Waiting counts with running: threads
/// that wait because others run on the CPUs numasched confined it to would, unmanaged,
/// have run on the other CPUs (a shared machine, where its set is busy with others'
/// work, is exactly where a narrow set hurts).
pub const SATURATED: f64 = 0.8;

/// What was read about one process this epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// CPUs' worth measured over the last epoch.
    pub demand: f64,
    /// Threads alive now (stat's count, always fresh).
    pub threads: u32,
    /// Stopped or traced (state `T`/`t`).
    pub stopped: bool,
    /// CPUs numasched gave it when narrower than what it may use; `None` otherwise.
    pub narrowed_to: Option<usize>,
    /// Run-queue delay, read only for narrowed processes.
    pub delay: Option<RunDelay>,
    /// Seconds since the process started.
    pub age_s: f64,
}

/// The answer for one process.
#[derive(Debug, Clone, PartialEq)]
pub struct Need {
    /// CPUs' worth to plan it for.
    pub demand: f64,
    /// Threads that waited for a CPU, on average, over the last epoch (narrowed only).
    pub waiting: f64,
    /// What of it waited in the reading before too: the waiting that says a set is
    /// held by others' work (`super::queued`). One epoch of it is as often a burst, the
    /// daemon's own scan run on the set's CPUs, or a guest's vCPU descheduled.
    pub lasting: f64,
    /// Why it must be re-planned now, if it must.
    pub urgent: Option<String>,
}

#[derive(Debug, Default)]
struct Track {
    /// (when read, CPUs' worth) over the peak window.
    demands: VecDeque<(f64, f64)>,
    delay: Option<(RunDelay, f64)>,
    stopped: bool,
    /// Its peak demand was at least [`IDLE_DEMAND`] last epoch: going idle is a change
    /// only after having been busy.
    busy: bool,
    /// Readings so far (saturating): the first is a lifetime average.
    seen: u8,
    /// Threads at the last reading.
    threads: u32,
    /// Waiting the last reading would have counted as demand (see `hidden` below).
    hidden: f64,
    /// Threads' worth that waited at the last reading.
    waited: f64,
}

/// Per managed process, the recent past that sizing needs.
#[derive(Debug, Default)]
pub struct Needs {
    tracks: HashMap<ProcessKey, Track>,
}

impl Needs {
    /// Sizes one process from this epoch's reading at `now` (seconds, monotonic).
    pub fn update(&mut self, key: ProcessKey, r: Reading, now: f64) -> Need {
        let t = self.tracks.entry(key).or_default();
        let was_stopped = std::mem::replace(&mut t.stopped, r.stopped);
        let waiting = match (r.delay, t.delay) {
            (Some(d), Some((before, at))) => waiting_threads(before, d, now - at),
            _ => 0.0,
        };
        t.delay = r.delay.map(|d| (d, now));
        let lasting = waiting.min(std::mem::replace(&mut t.waited, waiting));
        if r.stopped {
            t.demands.clear();
            t.hidden = 0.0;
            let urgent = (!was_stopped && r.narrowed_to.is_some())
                .then(|| format!("pid {} stopped; its CPUs are free", key.pid));
            return Need {
                demand: 0.0,
                waiting: 0.0,
                lasting: 0.0,
                urgent,
            };
        }
        t.seen = t.seen.saturating_add(1);
        if t.seen == 2 {
            t.demands.clear();
        }
        // Threads that waited for a CPU wanted it: what they waited for is demand that
        // sharing hid, and counting it keeps a set from shrinking back to what a busy
        // machine let the process use.
        //
        // The first reading is a lifetime average, and of a process that started
        // seconds ago it says little (its workers may not run yet): a young busy one
        // is given room for every thread until an epoch has been measured, rather
        // than a set its workers would outgrow at once.
        // (One runnable thread that waits is waiting for co-runners: a wider set
        // would not let it run more, so its wait is no demand.)
        //
        // Only what waited in two readings running counts: one epoch of waiting is
        // as often a co-runner's burst, a report thread woken beside the worker, or a
        // guest's vCPU descheduled, and a tenth of a thread on top of a busy one is a
        // second CPU, which on a node of two sends a neighbour off its memory.
        // A set that really holds a process back is seen sooner by the throttled rule
        // below, which this does not touch.
        let hidden_now = match r.delay {
            Some(d) if d.runnable > 1 => waiting,
            _ => 0.0,
        };
        let hidden = hidden_now.min(std::mem::replace(&mut t.hidden, hidden_now));
        let first = if t.seen == 1 && r.demand >= IDLE_DEMAND && r.age_s < YOUNG_S {
            f64::from(r.threads.max(1))
        } else {
            r.demand + hidden
        };
        t.demands
            .push_back((now, first.min(f64::from(r.threads.max(1)))));
        while t.demands.len() > PEAK_MIN_READINGS
            && t.demands.front().is_some_and(|(at, _)| now - at >= PEAK_S)
        {
            t.demands.pop_front();
        }
        let grew = r.threads > std::mem::replace(&mut t.threads, r.threads) && t.seen > 1;
        let peak = t.demands.iter().map(|(_, d)| *d).fold(0.0, f64::max);
        let was_busy = std::mem::replace(&mut t.busy, peak >= IDLE_DEMAND);
        let threads = f64::from(r.threads.max(1));
        let mut need = Need {
            demand: peak.min(threads),
            waiting,
            lasting,
            urgent: None,
        };
        if let Some(cpus) = r.narrowed_to {
            let runnable = r.delay.map_or(0, |d| d.runnable) as usize;
            let wanted = (r.demand + waiting).max(runnable as f64).min(threads);
            let saturated = r.demand + waiting >= SATURATED * cpus as f64;
            let met = t.seen == 1;
            if (grew || met) && runnable > cpus {
                // A thread started inside the set, or the process was met inside one
                // (a child forked with the set numasched gave its parent), and there
                // are more runnable threads than CPUs now: do not wait an epoch of
                // run-queue delay to see it.
                need.demand = need.demand.max(runnable as f64).min(threads);
                if let Some((_, last)) = t.demands.back_mut() {
                    *last = last.max(need.demand);
                }
                let what = if grew {
                    "started a thread"
                } else {
                    "met inside a narrow set"
                };
                need.urgent = Some(format!(
                    "pid {} {what}: {runnable} runnable on {}",
                    key.pid,
                    count(cpus, "CPU")
                ));
            } else if waiting >= THROTTLED_WAITING
                && saturated
                && runnable > cpus
                && slots(wanted) > cpus
            {
                need.demand = need.demand.max(wanted);
                // Kept for the peak window, so the wider set is not taken back at once.
                if let Some((_, last)) = t.demands.back_mut() {
                    *last = last.max(wanted);
                }
                need.urgent = Some(format!(
                    "pid {} throttled by its {}: {:.1} CPUs busy, {waiting:.1} threads \
                     waiting",
                    key.pid,
                    count(cpus, "CPU"),
                    r.demand
                ));
            } else if was_busy && peak < IDLE_DEMAND && cpus > 0 {
                need.urgent = Some(format!("pid {} went idle; its CPUs are free", key.pid));
            }
        }
        need
    }

    /// Forgets processes no longer managed.
    pub fn retain(&mut self, keep: impl Fn(&ProcessKey) -> bool) {
        self.tracks.retain(|k, _| keep(k));
    }
}

/// CPUs a demand keeps busy, as [`Process::slots`](numasched_model::Process::slots)
/// counts them.
fn slots(demand: f64) -> usize {
    (demand - SLOT_SLACK).ceil().max(1.0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pk(pid: u32, start_time: u64) -> ProcessKey {
        ProcessKey { pid, start_time }
    }

    fn reading(demand: f64, threads: u32) -> Reading {
        Reading {
            demand,
            threads,
            stopped: false,
            narrowed_to: None,
            delay: None,
            age_s: 1.0,
        }
    }

    fn one_runnable(wait_s: f64) -> Option<RunDelay> {
        Some(RunDelay {
            wait_ns: (wait_s * 1e9) as u64,
            threads: 1,
            runnable: 1,
        })
    }

    fn delay(wait_s: f64) -> Option<RunDelay> {
        Some(RunDelay {
            wait_ns: (wait_s * 1e9) as u64,
            threads: 2,
            runnable: 2,
        })
    }

    #[test]
    fn a_burst_keeps_its_cpus_for_the_peak_window() {
        let mut n = Needs::default();
        let k = pk(10, 1);
        n.update(k, reading(1.0, 2), 0.0);
        assert_eq!(n.update(k, reading(2.0, 2), 1.0).demand, 2.0);
        for e in 0..4 {
            let d = n.update(k, reading(0.0, 2), 2.0 + e as f64).demand;
            assert_eq!(d, 2.0, "epoch {e} after the burst");
        }
        assert_eq!(n.update(k, reading(0.0, 2), 9.0).demand, 0.0);
    }

    /// The window is seconds, whatever the interval: at 0.2 s epochs a burst keeps
    /// its CPUs for 5 s (five epochs would be 1 s), and at 10 s epochs for the next
    /// epoch.
    #[test]
    fn the_peak_window_is_seconds_at_any_interval() {
        let mut n = Needs::default();
        let k = pk(10, 1);
        n.update(k, reading(1.0, 2), 0.0);
        assert_eq!(n.update(k, reading(2.0, 2), 0.2).demand, 2.0);
        for e in 2..25 {
            let at = 0.2 * e as f64;
            assert_eq!(n.update(k, reading(0.0, 2), at).demand, 2.0, "at {at} s");
        }
        assert_eq!(n.update(k, reading(0.0, 2), 5.4).demand, 0.0);

        let k = pk(11, 1);
        n.update(k, reading(1.0, 2), 0.0);
        assert_eq!(n.update(k, reading(2.0, 2), 10.0).demand, 2.0);
        assert_eq!(n.update(k, reading(0.0, 2), 20.0).demand, 2.0);
        assert_eq!(n.update(k, reading(0.0, 2), 30.0).demand, 0.0);
    }

    #[test]
    fn the_first_lifetime_reading_gives_way_to_the_first_measured_epoch() {
        let mut n = Needs::default();
        let k = pk(10, 1);
        // A busy process's lifetime reading: room for every thread until measured.
        assert_eq!(n.update(k, reading(1.8, 2), 0.0).demand, 2.0);
        assert_eq!(n.update(k, reading(1.0, 2), 1.0).demand, 1.0);
        // An idle one's is taken as it is, and so is an old one's.
        assert_eq!(n.update(pk(11, 1), reading(0.01, 8), 0.0).demand, 0.01);
        let mut old = reading(1.2, 8);
        old.age_s = 3600.0;
        assert_eq!(n.update(pk(12, 1), old, 0.0).demand, 1.2);
    }

    #[test]
    fn one_runnable_thread_waiting_for_co_runners_is_not_throttled() {
        // A busy worker beside a sleeping main thread, sharing its CPU with another
        // process: it waits, but a second CPU of its own would not be used.
        let mut n = Needs::default();
        let mut r = reading(0.5, 2);
        r.narrowed_to = Some(1);
        let one = |wait_s: f64| {
            Some(RunDelay {
                wait_ns: (wait_s * 1e9) as u64,
                threads: 2,
                runnable: 1,
            })
        };
        r.delay = one(0.0);
        n.update(pk(1, 1), r, 0.0);
        r.delay = one(0.9);
        let need = n.update(pk(1, 1), r, 1.0);
        assert!(need.urgent.is_none(), "{need:?}");
    }

    #[test]
    fn a_process_that_leaves_its_set_idle_is_not_throttled() {
        let mut n = Needs::default();
        let mut r = reading(0.3, 2);
        r.narrowed_to = Some(1);
        r.delay = delay(0.0);
        n.update(pk(1, 1), r, 0.0);
        r.delay = delay(0.2);
        assert!(n.update(pk(1, 1), r, 1.0).urgent.is_none());
    }

    /// Two busy threads confined to one CPU that others keep busy too: it runs 0.4 of
    /// a CPU and 1.5 threads wait. Unmanaged it would also run on the other CPU, so its
    /// set is what holds it back, however little of it it gets.
    #[test]
    fn a_set_shared_with_others_throttles_a_process_that_waits_for_it() {
        let mut n = Needs::default();
        let mut r = reading(0.4, 2);
        r.narrowed_to = Some(1);
        r.delay = delay(0.0);
        n.update(pk(1, 1), r, 0.0);
        r.delay = delay(1.5);
        let need = n.update(pk(1, 1), r, 1.0);
        assert!(need.urgent.is_some(), "{need:?}");
        assert!(need.demand >= 1.5, "{need:?}");
    }

    #[test]
    fn a_widened_set_is_kept_for_the_peak_window() {
        let mut n = Needs::default();
        let k = pk(10, 1);
        let mut r = reading(1.0, 2);
        r.narrowed_to = Some(1);
        r.delay = delay(0.0);
        n.update(k, r, 0.0);
        n.update(k, r, 0.5);
        r.delay = delay(1.0);
        assert_eq!(n.update(k, r, 1.5).demand, 2.0);
        // Widened now: no longer narrowed, one CPU's worth measured (the kernel is
        // still spreading it): the set is not taken back.
        r.narrowed_to = None;
        r.delay = None;
        assert_eq!(n.update(k, r, 2.5).demand, 2.0);
    }

    /// The 4n `blind` flake: a one-worker load on a node of two CPUs, its report
    /// thread runnable beside it once while the guest was busy. One epoch's wait
    /// made it "need 2 CPUs", and the re-plan sent its neighbour off its memory.
    /// Waiting that lasts counts; one epoch of it does not.
    #[test]
    fn one_epoch_of_waiting_is_no_demand_but_two_are() {
        let mut n = Needs::default();
        let k = pk(10, 1);
        let mut r = reading(1.0, 2);
        r.narrowed_to = Some(2);
        r.delay = delay(0.0);
        n.update(k, r, 0.0);
        assert_eq!(n.update(k, r, 1.0).demand, 1.0);
        r.delay = delay(0.2);
        let spike = n.update(k, r, 2.0);
        assert_eq!(spike.demand, 1.0, "{spike:?}");
        assert!(spike.urgent.is_none(), "{spike:?}");
        assert!(spike.waiting > 0.19 && spike.lasting == 0.0, "{spike:?}");
        r.delay = delay(0.4);
        let lasting = n.update(k, r, 3.0);
        assert!((lasting.demand - 1.2).abs() < 1e-9, "{lasting:?}");
        assert!((lasting.lasting - 0.2).abs() < 1e-9, "{lasting:?}");
        // It stops waiting: nothing lasts.
        let calm = n.update(k, r, 4.0);
        assert_eq!((calm.waiting, calm.lasting), (0.0, 0.0), "{calm:?}");
    }

    #[test]
    fn demand_is_capped_by_threads() {
        let mut n = Needs::default();
        assert_eq!(n.update(pk(1, 1), reading(1.5, 1), 1.0).demand, 1.0);
    }

    #[test]
    fn a_late_second_thread_on_one_cpu_is_throttled() {
        let mut n = Needs::default();
        let k = pk(10, 1);
        let mut r = reading(1.0, 2);
        // Sized before it was planned, then narrowed to one CPU.
        n.update(k, r, -1.0);
        r.narrowed_to = Some(1);
        r.delay = delay(0.0);
        assert!(n.update(k, r, 0.0).urgent.is_none());
        // One second later: one CPU busy, a second thread waited the whole second.
        r.delay = delay(1.0);
        let need = n.update(k, r, 1.0);
        assert!((need.waiting - 1.0).abs() < 1e-9);
        assert_eq!(need.demand, 2.0);
        assert!(need
            .urgent
            .as_deref()
            .is_some_and(|u| u.contains("throttled")));
    }

    /// A narrowed process that starts a thread, with more runnable threads than CPUs
    /// at once, is re-planned in that epoch, without an epoch of waiting first.
    #[test]
    fn a_thread_started_inside_a_narrow_set_is_urgent_at_once() {
        let mut n = Needs::default();
        let k = pk(10, 1);
        let mut r = reading(1.0, 2);
        r.narrowed_to = Some(1);
        let runnable = |k: u32| {
            Some(RunDelay {
                wait_ns: 0,
                threads: 3,
                runnable: k,
            })
        };
        r.delay = runnable(1);
        n.update(k, r, 0.0);
        n.update(k, r, 1.0);
        r.threads = 3;
        r.delay = runnable(2);
        let need = n.update(k, r, 2.0);
        assert!(
            need.urgent
                .as_deref()
                .is_some_and(|u| u.contains("started a thread")),
            "{need:?}"
        );
        assert!(need.demand >= 2.0, "{need:?}");
    }

    /// A child forked inside the set numasched gave its parent, met with more runnable
    /// threads than that set's CPUs, is re-planned at once (it ran 2 threads on one
    /// CPU beside its busy parent until the next plan: 0.64 of its rate unmanaged).
    #[test]
    fn a_process_met_inside_a_narrow_set_with_more_runnable_threads_is_urgent() {
        let mut n = Needs::default();
        let mut r = reading(0.7, 3);
        r.narrowed_to = Some(1);
        r.delay = delay(0.0);
        let need = n.update(pk(10, 1), r, 0.0);
        assert!(
            need.urgent
                .as_deref()
                .is_some_and(|u| u.contains("met inside a narrow set: 2 runnable on 1 CPU")),
            "{need:?}"
        );
        assert!(need.demand >= 2.0, "{need:?}");
        // One runnable thread met in one CPU has what it can use.
        let mut r = reading(0.7, 3);
        r.narrowed_to = Some(1);
        r.delay = one_runnable(0.0);
        assert_eq!(n.update(pk(11, 1), r, 0.0).urgent, None);
    }

    #[test]
    fn waiting_a_single_thread_cannot_fix_is_not_throttling() {
        // Three single-threaded loads on two CPUs wait for each other; a wider set
        // would not let one thread use more than one CPU.
        let mut n = Needs::default();
        let mut r = reading(0.6, 1);
        r.narrowed_to = Some(1);
        r.delay = one_runnable(0.0);
        n.update(pk(1, 1), r, 0.0);
        r.delay = one_runnable(0.4);
        let need = n.update(pk(1, 1), r, 1.0);
        assert!(need.urgent.is_none(), "{need:?}");
        // It ran 0.6 of a CPU and waited 0.4 with one thread runnable: waiting for
        // co-runners, no demand of its own beyond what it ran.
        assert_eq!(need.demand, 0.6, "{need:?}");
    }

    #[test]
    fn stopping_frees_the_cpus_once() {
        let mut n = Needs::default();
        let k = pk(10, 1);
        let mut r = reading(1.0, 1);
        r.narrowed_to = Some(1);
        n.update(k, r, 0.0);
        r.stopped = true;
        let need = n.update(k, r, 1.0);
        assert_eq!(need.demand, 0.0);
        assert!(need
            .urgent
            .as_deref()
            .is_some_and(|u| u.contains("stopped")));
        // Still stopped, and no longer narrowed after the re-plan: nothing new.
        r.narrowed_to = None;
        assert!(n.update(k, r, 2.0).urgent.is_none());
        // Continued: demand counts again from scratch.
        r.stopped = false;
        assert_eq!(n.update(k, r, 3.0).demand, 1.0);
    }

    #[test]
    fn a_narrowed_process_going_idle_gives_its_cpus_back_once() {
        let mut n = Needs::default();
        let k = pk(10, 1);
        let mut r = reading(1.0, 1);
        r.narrowed_to = Some(1);
        assert!(n.update(k, r, 0.0).urgent.is_none());
        assert!(n.update(k, r, 0.5).urgent.is_none());
        r.demand = 0.0;
        for e in 1..5 {
            assert!(n.update(k, r, e as f64).urgent.is_none(), "peak still busy");
        }
        let need = n.update(k, r, 9.0);
        assert!(need.urgent.as_deref().is_some_and(|u| u.contains("idle")));
        assert!(n.update(k, r, 10.0).urgent.is_none(), "said once");
    }
}
