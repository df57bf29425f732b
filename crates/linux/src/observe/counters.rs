//! Per-process hardware counters: instructions, cycles and LLC misses per epoch, from
//! which MPKI (the characterisation's main input) follows.
//!
//! [`CounterSource`] is the seam: the daemon asks for deltas per process and does not
//! care where they come from; tests substitute a fake. [`PerfCounters`] is the
//! `perf_event_open` implementation.
//!
//! # How the perf implementation counts a process
//!
//! One counter group (instructions, cycles, LLC read misses, read together so that the
//! ratios come from the same time window) per *thread* present at [`attach`] time,
//! each opened with `inherit`, so threads those threads create later are counted in
//! their creator's group. A single group on the main thread with `inherit` would miss
//! every thread that already existed when the daemon started, which for a running
//! multi-threaded server is all of them. The cost is three file descriptors per thread,
//! so the daemon should attach only to the processes it manages. Counters of a thread
//! that exits keep their final value, so the per-process sums only grow. Values are
//! scaled by `time_enabled / time_running` when the PMU multiplexes.
//!
//! [`attach`]: CounterSource::attach

use std::collections::HashMap;
use std::io;
use std::time::Duration;

use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Hardware};
use perf_event::{Builder, Counter, Group};

/// Counts over one epoch.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CounterSample {
    pub instructions: u64,
    pub cycles: u64,
    pub llc_misses: u64,
}

impl CounterSample {
    /// LLC misses per thousand instructions; `None` without instructions (idle epoch).
    pub fn mpki(&self) -> Option<f64> {
        mpki(self.llc_misses, self.instructions)
    }

    pub fn cpi(&self) -> Option<f64> {
        (self.instructions > 0).then(|| self.cycles as f64 / self.instructions as f64)
    }
}

/// MPKI = LLC misses / instructions × 1000.
pub fn mpki(llc_misses: u64, instructions: u64) -> Option<f64> {
    (instructions > 0).then(|| llc_misses as f64 / instructions as f64 * 1000.0)
}

#[derive(Debug, thiserror::Error)]
pub enum CounterError {
    /// The CPU or hypervisor exposes no such event: expected on most VMs.
    #[error("hardware counters not supported: {0}")]
    Unsupported(io::Error),
    #[error("perf_event_open not permitted: {0} (see /proc/sys/kernel/perf_event_paranoid, CAP_PERFMON)")]
    PermissionDenied(io::Error),
    /// The process exited; as normal as in the procfs scan.
    #[error("process {pid} is gone")]
    Gone { pid: u32 },
    #[error("process {pid} is not attached")]
    NotAttached { pid: u32 },
    #[error("process {pid}: {err}")]
    Io { pid: u32, err: io::Error },
}

impl CounterError {
    fn from_open(pid: u32, err: io::Error) -> CounterError {
        match err.raw_os_error() {
            Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV) => CounterError::Unsupported(err),
            Some(libc::EACCES | libc::EPERM) => CounterError::PermissionDenied(err),
            Some(libc::ESRCH) => CounterError::Gone { pid },
            _ => CounterError::Io { pid, err },
        }
    }
}

/// Where per-process counts come from.
pub trait CounterSource {
    /// Starts counting a process. `tids` are its threads now (see the module doc for
    /// why they are needed); `start_time` tells a reused pid from the old process, which
    /// is detached and replaced. Attaching an attached process is a no-op.
    fn attach(&mut self, pid: u32, start_time: u64, tids: &[u32]) -> Result<(), CounterError>;
    /// Stops counting and releases what the process held.
    fn detach(&mut self, pid: u32);
    /// Counts since the previous `delta` (or `attach`), over all its threads.
    fn delta(&mut self, pid: u32) -> Result<CounterSample, CounterError>;
    fn attached(&self) -> usize;
}

struct ThreadGroup {
    group: Group,
    instructions: Counter,
    cycles: Counter,
    llc_misses: Counter,
}

impl ThreadGroup {
    fn open(tid: u32) -> io::Result<ThreadGroup> {
        let pid =
            libc::pid_t::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
        let mut group = Group::builder()
            .observe_pid(pid)
            .any_cpu()
            .inherit(true)
            .build_group()?;
        let member = |event: Builder<'static>| -> Builder<'static> {
            let mut b = event;
            b.observe_pid(pid)
                .any_cpu()
                .inherit(true)
                .exclude_kernel(true)
                .exclude_hv(true);
            b
        };
        let llc = Cache {
            which: CacheId::LL,
            operation: CacheOp::READ,
            result: CacheResult::MISS,
        };
        let instructions = group.add(&member(Builder::new(Hardware::INSTRUCTIONS)))?;
        let cycles = group.add(&member(Builder::new(Hardware::CPU_CYCLES)))?;
        let llc_misses = group.add(&member(Builder::new(llc)))?;
        group.enable()?;
        Ok(ThreadGroup {
            group,
            instructions,
            cycles,
            llc_misses,
        })
    }

    /// Totals since opening, scaled for multiplexing.
    fn read(&mut self) -> io::Result<CounterSample> {
        let data = self.group.read()?;
        let enabled = data.time_enabled().unwrap_or(Duration::ZERO).as_nanos();
        let running = data.time_running().unwrap_or(Duration::ZERO).as_nanos();
        let scale = |c: &Counter| {
            let v = data.get(c).map(|e| e.value()).unwrap_or(0);
            if running == 0 || running >= enabled {
                v
            } else {
                u64::try_from(u128::from(v) * enabled / running).unwrap_or(u64::MAX)
            }
        };
        Ok(CounterSample {
            instructions: scale(&self.instructions),
            cycles: scale(&self.cycles),
            llc_misses: scale(&self.llc_misses),
        })
    }
}

struct Attached {
    start_time: u64,
    threads: Vec<ThreadGroup>,
    last: CounterSample,
}

/// Hardware counters through `perf_event_open` (the perf-event2 crate).
#[derive(Default)]
pub struct PerfCounters {
    procs: HashMap<u32, Attached>,
}

impl PerfCounters {
    pub fn new() -> PerfCounters {
        PerfCounters::default()
    }

    /// Whether counters can be opened at all, tried on the calling process.
    pub fn probe() -> Result<(), CounterError> {
        let me = std::process::id();
        ThreadGroup::open(me)
            .map(|_| ())
            .map_err(|e| CounterError::from_open(me, e))
    }

    fn totals(threads: &mut [ThreadGroup], pid: u32) -> Result<CounterSample, CounterError> {
        let mut sum = CounterSample::default();
        for t in threads {
            let s = t.read().map_err(|err| CounterError::Io { pid, err })?;
            sum.instructions = sum.instructions.saturating_add(s.instructions);
            sum.cycles = sum.cycles.saturating_add(s.cycles);
            sum.llc_misses = sum.llc_misses.saturating_add(s.llc_misses);
        }
        Ok(sum)
    }
}

impl CounterSource for PerfCounters {
    fn attach(&mut self, pid: u32, start_time: u64, tids: &[u32]) -> Result<(), CounterError> {
        if let Some(a) = self.procs.get(&pid) {
            if a.start_time == start_time {
                return Ok(());
            }
            self.procs.remove(&pid);
        }
        let mut threads = Vec::with_capacity(tids.len());
        for &tid in tids {
            match ThreadGroup::open(tid) {
                Ok(g) => threads.push(g),
                // A thread that exited since the scan listed it.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => return Err(CounterError::from_open(pid, e)),
            }
        }
        if threads.is_empty() {
            return Err(CounterError::Gone { pid });
        }
        let last = PerfCounters::totals(&mut threads, pid)?;
        self.procs.insert(
            pid,
            Attached {
                start_time,
                threads,
                last,
            },
        );
        Ok(())
    }

    fn detach(&mut self, pid: u32) {
        self.procs.remove(&pid);
    }

    fn delta(&mut self, pid: u32) -> Result<CounterSample, CounterError> {
        let a = self
            .procs
            .get_mut(&pid)
            .ok_or(CounterError::NotAttached { pid })?;
        let now = PerfCounters::totals(&mut a.threads, pid)?;
        let d = CounterSample {
            instructions: now.instructions.saturating_sub(a.last.instructions),
            cycles: now.cycles.saturating_sub(a.last.cycles),
            llc_misses: now.llc_misses.saturating_sub(a.last.llc_misses),
        };
        a.last = now;
        Ok(d)
    }

    fn attached(&self) -> usize {
        self.procs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpki_is_misses_per_kilo_instruction() {
        assert_eq!(mpki(30, 1000), Some(30.0));
        assert_eq!(mpki(5, 0), None);
        let s = CounterSample {
            instructions: 2_000_000,
            cycles: 3_000_000,
            llc_misses: 10_000,
        };
        assert_eq!(s.mpki(), Some(5.0));
        assert_eq!(s.cpi(), Some(1.5));
    }

    /// A scripted source: what the daemon's epoch loop will look like against the trait.
    struct Scripted {
        totals: HashMap<u32, Vec<CounterSample>>,
        seen: HashMap<u32, usize>,
    }

    impl CounterSource for Scripted {
        fn attach(&mut self, pid: u32, _: u64, _: &[u32]) -> Result<(), CounterError> {
            self.seen.insert(pid, 0);
            Ok(())
        }
        fn detach(&mut self, pid: u32) {
            self.seen.remove(&pid);
        }
        fn delta(&mut self, pid: u32) -> Result<CounterSample, CounterError> {
            let i = self
                .seen
                .get_mut(&pid)
                .ok_or(CounterError::NotAttached { pid })?;
            *i += 1;
            self.totals[&pid]
                .get(*i - 1)
                .copied()
                .ok_or(CounterError::Gone { pid })
        }
        fn attached(&self) -> usize {
            self.seen.len()
        }
    }

    #[test]
    fn epoch_loop_over_the_trait() {
        let sample = |i, m| CounterSample {
            instructions: i,
            cycles: i,
            llc_misses: m,
        };
        let mut src: Box<dyn CounterSource> = Box::new(Scripted {
            totals: HashMap::from([(7, vec![sample(1000, 20), sample(0, 0)])]),
            seen: HashMap::new(),
        });
        assert!(matches!(
            src.delta(7),
            Err(CounterError::NotAttached { pid: 7 })
        ));
        src.attach(7, 1, &[7]).unwrap();
        assert_eq!(src.delta(7).unwrap().mpki(), Some(20.0));
        assert_eq!(src.delta(7).unwrap().mpki(), None, "idle epoch");
        assert!(matches!(src.delta(7), Err(CounterError::Gone { .. })));
        src.detach(7);
        assert_eq!(src.attached(), 0);
    }

    /// On machines without a PMU (this project's VMs) opening fails cleanly with
    /// `Unsupported` or `PermissionDenied`; where counters exist, they count.
    #[test]
    fn perf_counters_open_or_say_why_not() {
        let me = std::process::id();
        let mut pc = PerfCounters::new();
        match pc.attach(me, 0, &[me]) {
            Ok(()) => {
                let mut x = 0u64;
                for i in 0..1_000_000u64 {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                }
                let d = pc.delta(me).unwrap();
                assert!(d.instructions > 0, "{d:?}");
                assert!(PerfCounters::probe().is_ok());
            }
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        CounterError::Unsupported(_) | CounterError::PermissionDenied(_)
                    ),
                    "{e}"
                );
                assert!(!e.to_string().is_empty());
                assert_eq!(pc.attached(), 0);
                assert!(PerfCounters::probe().is_err());
                assert!(matches!(
                    pc.delta(me),
                    Err(CounterError::NotAttached { .. })
                ));
            }
        }
    }
}
