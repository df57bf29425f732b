//! How the scanner reads: the roots, the exclusions, and how many passes each costly
//! read stays good. Its own module because both the scan and its cache of earlier
//! reads follow it, and neither should have to name the other for it.

use std::collections::HashSet;
use std::path::PathBuf;

use super::proc::ReadOptions;

/// What to read and how long earlier reads stay good.
///
/// The `*_max_age` fields count passes: a part read in pass *n* is reused up to pass
/// *n + age − 1* and read again in pass *n + age* at the latest (a first read comes
/// due sooner, to spread re-reads over passes), so 1 (and 0, taken as 1) reads it
/// every pass, as scanners did before they remembered anything. Larger ages make a
/// steady-state pass cheaper at the price of data up to that many passes old in the
/// cases stat cannot reveal (see [`cache`](super::cache)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanConfig {
    pub proc_root: PathBuf,
    /// Never observed: the daemon itself, and whatever the configuration excludes.
    pub exclude: HashSet<u32>,
    pub read: ReadOptions,
    /// USER_HZ, the unit of CPU times and start times in stat.
    pub ticks_per_second: u64,
    /// status (allowed CPUs and nodes). Default 5: reading it costs about 1.4 stat
    /// reads, which every pass would nearly double the cost of an idle process; a
    /// foreign pin is still seen within 5 passes, at once if the process runs.
    pub status_max_age: u32,
    /// `task/*/stat` of a multi-threaded process that used no CPU tick and kept its
    /// thread count since the read (a busy one is read every pass). Default 30,
    /// times `idle_age_factor` (180 passes by default), which always applies, as
    /// only an idle process's list is kept: the test is cumulative, so only threads
    /// that ran under 10 ms in all those passes go unseen, while re-reading idle ones
    /// every 5 passes cost 40 % of a steady-state pass, and every 30 still over a
    /// third of one over 1,000 idle processes of 1-4 threads (`epoch` bench,
    /// 2026-11-28: 6.1-9.0 ms a pass, 3.9 ms with the extension).
    pub threads_max_age: u32,
    /// numa_maps and sched, the costliest files. Default 10: memory placement moves
    /// slowly unless RSS does, which `numa_maps_rss_change_pct` catches.
    pub numa_maps_max_age: u32,
    /// Read numa_maps again as soon as RSS moved by more than this percentage of what
    /// it was at the last read (0: any change). Default 10.
    pub numa_maps_rss_change_pct: u32,
    /// A process that used no CPU tick since a part was read keeps that part this
    /// many times longer (status, `task/*/stat` and numa_maps; 1 = no extension).
    /// Default 6. An idle process moves no memory of its own and its placement costs
    /// nothing while it sleeps; a pin someone sets on it meanwhile is still caught by
    /// the apply layer, which reads the live affinity before every change. The saving
    /// is most of the daemon's cost on a machine of mostly idle processes.
    pub idle_age_factor: u32,
    /// Most passes between two stat reads of an idle process (1: every pass).
    /// Default 8. A process that used no CPU tick, and kept its RSS and thread count,
    /// since some read has stat read every 2nd, 4th, ... pass, the period being at
    /// most a quarter of the passes it has been idle, up to this; the passes between
    /// describe it as last read, idle. stat is most of an idle process's cost and
    /// says nothing new while it sleeps. The price: a process waking from a long
    /// sleep shows its demand up to 7 passes late (then as a rate since its last
    /// read); an exit shows at once (the pid listing is read every pass); a reused
    /// pid is taken for the old process until its next stat read (the apply layer
    /// checks identity before every change).
    pub idle_stat_max_every: u32,
    /// How long the first pass waits, after reading the processes, for a sample of
    /// `/proc/stat` taken before them to span [`MIN_TICKS`], so that the first plan
    /// already sees which CPUs others' work holds (a daemon started beside a program
    /// pinned to a node placed a load there, then could not tell its own share from
    /// the program's). Default 0.12 s a step, up to 4 steps; 0 skips it (the first plan
    /// then counts every CPU as room).
    ///
    /// [`MIN_TICKS`]: super::cpu_time::MIN_TICKS
    pub first_cpu_span: std::time::Duration,
}

impl Default for ScanConfig {
    fn default() -> Self {
        ScanConfig {
            proc_root: PathBuf::from("/proc"),
            exclude: HashSet::from([std::process::id()]),
            read: ReadOptions::default(),
            ticks_per_second: procfs::ticks_per_second().max(1),
            status_max_age: 5,
            threads_max_age: 30,
            numa_maps_max_age: 10,
            numa_maps_rss_change_pct: 10,
            idle_age_factor: 6,
            idle_stat_max_every: 8,
            first_cpu_span: std::time::Duration::from_millis(120),
        }
    }
}

impl ScanConfig {
    /// Reads every file every pass (ages of 1): no result depends on an earlier pass
    /// except `cpu_demand`.
    pub fn every_pass(mut self) -> ScanConfig {
        self.status_max_age = 1;
        self.threads_max_age = 1;
        self.numa_maps_max_age = 1;
        self.idle_age_factor = 1;
        self.idle_stat_max_every = 1;
        self
    }
}
