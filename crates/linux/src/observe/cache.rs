//! What the [`Scanner`](super::Scanner) remembers of each process between passes, so
//! that a steady-state pass reads little more than stat.
//!
//! stat is read every pass: it is the cheapest file and says whether anything else
//! may have changed. The costly file groups are read again only when stat or their
//! age says so:
//!
//! | part | read again when |
//! |---|---|
//! | status (allowed CPUs, nodes) | due by `status_max_age`, or the main thread last ran on a CPU outside the remembered allowed set |
//! | `task/*/stat` (multi-threaded) | its CPU ticks or thread count changed since, or due by `threads_max_age` (`idle_age_factor` times longer, as it is idle then) |
//! | numa_maps and sched | RSS moved by more than `numa_maps_rss_change_pct` % since, or due by `numa_maps_max_age` |
//!
//! What this gives up, each bounded by the part's maximum age:
//!
//! - A foreign pin is not in stat. It shows at once only if the main thread has since
//!   run outside the remembered set (a running task is moved off a CPU it loses
//!   straight away); a pin that still includes its CPU, or of a sleeping process, is
//!   seen when status is next due.
//! - Threads that ran under one clock tick in all since they were read can have moved
//!   CPU, or been replaced one for one, unseen. Only their last CPUs and tids are
//!   reported, which matter little for a process that close to idle.
//! - Memory moved between nodes without changing RSS (NUMA balancing, `migrate_pages`)
//!   is seen when numa_maps is next due. The daemon's own moves need not wait:
//!   [`Scanner::invalidate`](super::Scanner::invalidate) makes the next pass read
//!   afresh what they changed: status and threads after an affinity, numa_maps after
//!   a page move.
//!
//! The first reads of the processes met in one pass (all of them, in the scanner's
//! first) come due up to one age early, spread by their place in that pass, so that
//! later passes share the re-reads instead of one pass in every age taking them all.
//!
//! Identity is (pid, start time): a reused pid finds no entry and is read whole. The
//! scanner builds a new cache each pass from the entries of the processes it saw, so
//! entries of exited processes go with the old one.

use std::collections::HashMap;

use super::error::ObserveError;
use super::proc::{sole_thread, Affinity, Memory, ProcDir, ReadOptions, Source, Stat, ThreadStat};
use super::scan_config::ScanConfig;
use numasched_model::CpuSet;

/// Costly file groups (status; `task/*/stat`; numa_maps with sched) of one pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub read: usize,
    pub reused: usize,
}

impl Tally {
    pub fn add(&mut self, other: Tally) {
        self.read += other.read;
        self.reused += other.reused;
    }
}

/// A part as read, with what stat said then: the baseline later passes compare with.
#[derive(Debug, Clone)]
struct Kept<T> {
    value: T,
    /// The pass that reads it again whatever stat says (of a busy process).
    due: u64,
    /// Passes between two reads, for the idle extension.
    age: u64,
    cpu_ticks: u64,
    rss_pages: u64,
    num_threads: u32,
    /// The CPU the main thread last ran on, as stat said at the read.
    processor: Option<u32>,
    /// `<proc>/uptime` of the pass that read it: what a later read's CPU times are a
    /// rate over.
    read_uptime: f64,
}

impl<T> Kept<T> {
    fn new(value: T, stat: &Stat, due: u64, age: u32, uptime: f64) -> Kept<T> {
        Kept {
            value,
            due,
            age: u64::from(age.max(1)),
            cpu_ticks: stat.cpu_ticks,
            rss_pages: stat.rss_pages,
            num_threads: stat.num_threads,
            processor: stat.processor,
            read_uptime: uptime,
        }
    }

    /// The pass it is read again in: `due`, or for a process that stayed idle since
    /// the read, `idle_age_factor` ages after it was read (see [`ScanConfig`]).
    fn until(&self, idle: bool, factor: u32) -> u64 {
        // An age of 1 means every pass, idle or not.
        if idle && self.age > 1 {
            self.due + self.age * u64::from(factor.max(1) - 1)
        } else {
            self.due
        }
    }

    fn expired(&self, pass: u64, stat: &Stat, factor: u32) -> bool {
        self.expired_at(pass, stat.cpu_ticks, factor)
    }

    /// Whether it is stale in `pass` for a process whose stat said `cpu_ticks`.
    fn expired_at(&self, pass: u64, cpu_ticks: u64, factor: u32) -> bool {
        pass >= self.until(cpu_ticks == self.cpu_ticks, factor)
    }
}

/// Whether a part is to be read in `pass`: never read, or kept and stale.
fn to_read<T>(kept: &Option<Kept<T>>, pass: u64, cpu_ticks: u64, factor: u32) -> bool {
    kept.as_ref()
        .is_none_or(|k| k.expired_at(pass, cpu_ticks, factor))
}

/// When a part read in `pass` is due again: `max_age` passes later (0 counts as 1,
/// i.e. every pass). A first read comes due up to `max_age - 1` passes early, by the
/// entry's `phase`: the processes a scanner meets in its first pass would otherwise
/// all come due in the same later pass, making it as costly as the first (for 2,000
/// processes, a pass above the 50 ms target every `numa_maps_max_age` epochs),
/// where spread out each pass takes its share.
fn due(pass: u64, max_age: u32, first: bool, phase: u64) -> u64 {
    let age = u64::from(max_age.max(1));
    let early = if first { phase % age } else { 0 };
    pass + age - early
}

/// What someone changed about a process that stat does not show, so that the cache
/// must not answer for it until read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changed {
    /// Its threads' affinity: status (`Cpus_allowed_list`) and where threads run.
    Affinity,
    /// Where its pages are (numa_maps); RSS stays the same.
    Pages,
}

/// Everything remembered about one process.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    start_time: u64,
    /// stat's CPU ticks when last read: the base of the next read's `cpu_demand`.
    pub cpu_ticks: u64,
    /// stat's children's CPU ticks when last read, likewise.
    pub child_ticks: u64,
    /// `<proc>/uptime` of the pass that last read stat: what `cpu_ticks` is a rate
    /// over when stat is read again, however many passes later.
    pub read_uptime: f64,
    /// stat as last read: what a pass that does not read it describes the process by.
    stat: Stat,
    /// The pass of the last stat read that found CPU ticks used, or RSS or the thread
    /// count changed, since the one before (or that met the process): idle since.
    /// `u64::MAX` after [`Entry::invalidate`]: not known to be idle at all.
    idle_from: u64,
    /// What the last pass's stat and filter said, to guess before reading stat
    /// whether this pass will need more than stat ([`Entry::likely_stat_only`]).
    num_threads: u32,
    busy: bool,
    kernel_thread: bool,
    pub wanted: bool,
    /// Its threads' run-queue wait (ns), the uptime it was read at, and whether every
    /// thread's was summed (or the main thread's alone), when last read as a busy
    /// process the scan does not select: the base of its next rate.
    pub waited: Option<(u64, f64, bool)>,
    /// Its place in the pass that met it: see [`due`].
    phase: u64,
    affinity: Option<Kept<Affinity>>,
    threads: Option<Kept<Vec<ThreadStat>>>,
    memory: Option<Kept<Memory>>,
}

impl Entry {
    pub fn new(stat: &Stat, phase: usize, uptime: f64, pass: u64) -> Entry {
        Entry {
            phase: phase as u64,
            start_time: stat.start_time,
            cpu_ticks: stat.cpu_ticks,
            child_ticks: stat.child_ticks,
            read_uptime: uptime,
            stat: stat.clone(),
            idle_from: pass,
            num_threads: stat.num_threads,
            busy: false,
            kernel_thread: stat.is_kernel_thread(),
            wanted: true,
            waited: None,
            affinity: None,
            threads: None,
            memory: None,
        }
    }

    pub fn start_time(&self) -> u64 {
        self.start_time
    }

    /// Takes in stat as read in `pass` at `uptime` (after `cpu_demand` was computed
    /// from the last read).
    pub fn saw(&mut self, stat: &Stat, uptime: f64, pass: u64) {
        self.busy = stat.cpu_ticks != self.cpu_ticks;
        let moved = stat.rss_pages != self.stat.rss_pages || stat.num_threads != self.num_threads;
        if self.busy || moved || self.idle_from == u64::MAX {
            self.idle_from = pass;
        }
        self.cpu_ticks = stat.cpu_ticks;
        self.child_ticks = stat.child_ticks;
        self.num_threads = stat.num_threads;
        self.read_uptime = uptime;
        self.stat.clone_from(stat);
    }

    /// Forgets what `changed` made stale, keeping the CPU ticks (a rate needs them)
    /// and the rest, and reads stat next pass whatever its idleness.
    fn invalidate(&mut self, changed: Changed) {
        match changed {
            // Threads carry the CPU each last ran on, which a new affinity moves.
            Changed::Affinity => {
                self.affinity = None;
                self.threads = None;
            }
            Changed::Pages => self.memory = None,
        }
        self.idle_from = u64::MAX;
    }

    /// stat as last read, if this pass may take it instead of reading it: the
    /// process has been idle long enough for its stat period ([`stat_period`]) to
    /// exceed 1, and this is not one of its passes to be read (spread by phase).
    pub fn unread_stat(&self, pass: u64, max_every: u32) -> Option<&Stat> {
        let period = stat_period(pass.saturating_sub(self.idle_from), max_every);
        let skip = period > 1 && (pass + self.phase) % period != 0;
        skip.then_some(&self.stat)
    }

    /// A guess, before stat, that this pass will need nothing else: a kernel thread,
    /// a process the filter turned away last time, or one with nothing due by age
    /// whose threads (if it has several) were idle. A wrong guess costs one stat read.
    pub fn likely_stat_only(&self, pass: u64, cfg: &ScanConfig) -> bool {
        if self.kernel_thread || !self.wanted {
            return true;
        }
        let opts = &cfg.read;
        // Idleness guessed from the last pass's ticks; stat then decides.
        let (ticks, f) = (self.cpu_ticks, cfg.idle_age_factor);
        let threads_stale =
            self.num_threads > 1 && (self.busy || to_read(&self.threads, pass, ticks, f));
        !(opts.status && to_read(&self.affinity, pass, ticks, f)
            || opts.threads && threads_stale
            || wants_memory(opts) && to_read(&self.memory, pass, ticks, f))
    }

    fn affinity_good(&self, stat: &Stat, pass: u64, factor: u32) -> bool {
        self.affinity
            .as_ref()
            .is_some_and(|k| !k.expired(pass, stat, factor) && !strayed(stat, k))
    }

    /// A list kept is good only while no thread ran a tick and none came or went
    /// (`threads_idle`), so it is always an idle process's: it keeps the list
    /// `idle_age_factor` times `threads_max_age`, as it keeps status and numa_maps.
    fn threads_good(&self, stat: &Stat, pass: u64, factor: u32) -> bool {
        sole_thread(stat).is_some()
            || self
                .threads
                .as_ref()
                .is_some_and(|k| !k.expired(pass, stat, factor) && threads_idle(k, stat))
    }

    fn memory_good(&self, stat: &Stat, pass: u64, cfg: &ScanConfig) -> bool {
        self.memory.as_ref().is_some_and(|k| {
            !k.expired(pass, stat, cfg.idle_age_factor)
                && !rss_moved(k.rss_pages, stat.rss_pages, cfg.numa_maps_rss_change_pct)
        })
    }

    /// Nothing `cfg.read` asks for needs reading: the process can be described from
    /// stat and this entry alone.
    pub fn all_good(&self, stat: &Stat, pass: u64, cfg: &ScanConfig) -> bool {
        let opts = &cfg.read;
        (!opts.status || self.affinity_good(stat, pass, cfg.idle_age_factor))
            && (!opts.threads || self.threads_good(stat, pass, cfg.idle_age_factor))
            && (!wants_memory(opts) || self.memory_good(stat, pass, cfg))
    }
}

/// Passes between two stat reads of a process idle for `idle` passes: the largest
/// power of two up to `max_every` that is at most a quarter of `idle`. A process is
/// thus never taken for idle on evidence older than a quarter of its idle time (8
/// passes idle: every other pass; 32 and more: every 8th with the default), which
/// keeps the ones that pause briefly fresh and reads the long sleepers, most of a
/// machine's processes, seldom.
fn stat_period(idle: u64, max_every: u32) -> u64 {
    let max = u64::from(max_every.max(1));
    let mut period = 1;
    while period * 2 <= max && period * 2 * 4 <= idle {
        period *= 2;
    }
    period
}

fn wants_memory(opts: &ReadOptions) -> bool {
    opts.numa_maps || opts.sched
}

/// The entries of one pass, by pid.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    entries: HashMap<u32, Entry>,
}

impl Cache {
    pub fn with_capacity(n: usize) -> Cache {
        Cache {
            entries: HashMap::with_capacity(n),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Takes out what is remembered of the process `stat` describes; `None` for a
    /// process not seen before, including a newcomer on a reused pid.
    pub fn take(&mut self, stat: &Stat) -> Option<Entry> {
        let e = self.entries.remove(&stat.pid)?;
        (e.start_time == stat.start_time).then_some(e)
    }

    pub fn peek(&self, pid: u32) -> Option<&Entry> {
        self.entries.get(&pid)
    }

    pub fn put(&mut self, pid: u32, entry: Entry) {
        self.entries.insert(pid, entry);
    }

    /// Adds the entries of another part of the same pass.
    pub fn extend(&mut self, other: Cache) {
        self.entries.extend(other.entries);
    }

    pub fn invalidate(&mut self, pid: u32, changed: Changed) {
        if let Some(e) = self.entries.get_mut(&pid) {
            e.invalidate(changed);
        }
    }
}

/// The main thread has since run on a CPU the remembered status does not allow:
/// status is out of date, whatever its age.
///
/// Only a move counts. A sleeping task keeps the CPU it last ran on in stat after its
/// affinity changed (it is moved when it next wakes), so a process pinned away from
/// that CPU (by this daemon, typically) shows a CPU outside its set until it runs;
/// taking that for news re-read its status every pass, the better part of an idle
/// process's cost.
fn strayed(stat: &Stat, k: &Kept<Affinity>) -> bool {
    match (&k.value.cpus_allowed, stat.processor) {
        (Some(allowed), Some(cpu)) => {
            k.processor != Some(cpu) && allowed.binary_search(&cpu).is_err()
        }
        _ => false,
    }
}

/// No thread ran a whole clock tick and none came or went since `k` was read, so
/// where each last ran is as it was.
fn threads_idle<T>(k: &Kept<T>, stat: &Stat) -> bool {
    k.cpu_ticks == stat.cpu_ticks && k.num_threads == stat.num_threads
}

/// RSS moved by more than `pct` % of what it was; from zero, any growth counts.
fn rss_moved(then: u64, now: u64, pct: u32) -> bool {
    u128::from(then.abs_diff(now)) * 100 > u128::from(then) * u128::from(pct)
}

/// A [`Source`] that answers from `entry` where the part is still good and reads
/// (and remembers) it otherwise. Without a handle (`dir: None`) it must not need to
/// read: the caller checked [`Entry::all_good`] first.
pub(crate) struct Cached<'a> {
    pub dir: Option<&'a ProcDir>,
    pub entry: &'a mut Entry,
    pub pass: u64,
    pub config: &'a ScanConfig,
    pub tally: &'a mut Tally,
    /// `<proc>/uptime` of this pass.
    pub uptime: f64,
    /// CPUs' worth by which the threads read afresh in this pass ran faster than one
    /// CPU each since their last read (see [`thread_overrun`]); 0 when they were not.
    pub thread_overrun: f64,
    /// CPUs of the threads that ran since their last read (see [`ran_on`]); `None`
    /// when they were not read afresh against an earlier list.
    pub ran_on: Option<CpuSet>,
}

/// A remembered part, counted as reused.
fn reuse<T: Clone>(kept: &Option<Kept<T>>, tally: &mut Tally) -> Option<T> {
    tally.reused += 1;
    kept.as_ref().map(|k| k.value.clone())
}

impl Cached<'_> {
    /// Reads a part through the handle; as if the process were gone without one
    /// (which `all_good` rules out), rather than describe it from stale data.
    fn read<T: Clone>(
        &mut self,
        stat: &Stat,
        read: impl FnOnce(&ProcDir) -> Result<Option<T>, ObserveError>,
        slot: impl FnOnce(&mut Entry) -> &mut Option<Kept<T>>,
        max_age: u32,
    ) -> Result<Option<T>, ObserveError> {
        debug_assert!(self.dir.is_some(), "a costly read without a handle");
        let Some(v) = self.dir.map(read).transpose()?.flatten() else {
            return Ok(None);
        };
        self.tally.read += 1;
        let phase = self.entry.phase;
        let slot = slot(self.entry);
        let due = due(self.pass, max_age, slot.is_none(), phase);
        *slot = Some(Kept::new(v.clone(), stat, due, max_age, self.uptime));
        Ok(Some(v))
    }
}

impl Source for Cached<'_> {
    fn affinity(&mut self, stat: &Stat) -> Result<Option<Affinity>, ObserveError> {
        if self
            .entry
            .affinity_good(stat, self.pass, self.config.idle_age_factor)
        {
            return Ok(reuse(&self.entry.affinity, self.tally));
        }
        let age = self.config.status_max_age;
        self.read(stat, ProcDir::affinity, |e| &mut e.affinity, age)
    }

    fn threads(&mut self, stat: &Stat) -> Result<Option<Vec<ThreadStat>>, ObserveError> {
        if let Some(t) = sole_thread(stat) {
            // Nothing read, nothing to remember; a stale list must not come back if
            // the process grows to the same thread count again.
            self.entry.threads = None;
            return Ok(Some(vec![t]));
        }
        if self
            .entry
            .threads_good(stat, self.pass, self.config.idle_age_factor)
        {
            return Ok(reuse(&self.entry.threads, self.tally));
        }
        let age = self.config.threads_max_age;
        let before = self.entry.threads.take();
        let read = self.read(stat, ProcDir::threads, |e| &mut e.threads, age);
        match (&self.entry.threads, before) {
            (Some(now), Some(then)) => {
                let secs = now.read_uptime - then.read_uptime;
                let tps = self.config.ticks_per_second.max(1) as f64;
                self.thread_overrun = thread_overrun(&then.value, &now.value, secs, tps);
                self.ran_on = Some(ran_on(&then.value, &now.value));
            }
            // Not read after all (gone, or an error): the old list stays the baseline.
            (None, before) => self.entry.threads = before,
            (Some(_), None) => {}
        }
        read
    }

    fn memory(&mut self, stat: &Stat, opts: &ReadOptions) -> Result<Option<Memory>, ObserveError> {
        if self.entry.memory_good(stat, self.pass, self.config) {
            return Ok(reuse(&self.entry.memory, self.tally));
        }
        let age = self.config.numa_maps_max_age;
        self.read(stat, |d| d.memory(opts), |e| &mut e.memory, age)
    }
}

/// The CPUs of the threads in `now` that ran since `then` (both sorted by tid): a
/// thread new since counts if it ran at all.
///
/// Where a process's threads were last seen is where its work is only for those that
/// ran: a report thread asleep for seconds still names the CPU it last ran on. Half of
/// a two-thread load's demand was put there (others' estimate spreads a demand evenly
/// over the CPUs its threads were seen on), and the load's own CPU read as others'
/// work.
pub(crate) fn ran_on(then: &[ThreadStat], now: &[ThreadStat]) -> CpuSet {
    let mut old = then.iter().peekable();
    let mut out = CpuSet::new();
    for t in now {
        while old.next_if(|o| o.tid < t.tid).is_some() {}
        let before = old.next_if(|o| o.tid == t.tid).map_or(0, |o| o.cpu_ticks);
        if let Some(cpu) = t.processor.filter(|_| t.cpu_ticks > before) {
            out.insert(cpu);
        }
    }
    out
}

/// CPUs' worth by which threads seen in both lists ran more than one CPU each over
/// `secs` (both sorted by tid).
///
/// No thread runs on two CPUs at once, so time beyond one CPU per thread is skew
/// between the clock CPU time is counted on and the uptime it is a rate over. In a
/// QEMU guest a process with one busy thread and an idle helper read 1.04-1.10 CPUs
/// an epoch, now and then more: enough to be planned two CPUs and to displace another
/// process. Taken off the process's demand, the skew of its busy threads no longer
/// earns it a CPU none of its threads could use.
pub(crate) fn thread_overrun(then: &[ThreadStat], now: &[ThreadStat], secs: f64, tps: f64) -> f64 {
    if secs <= 0.0 || !secs.is_finite() {
        return 0.0;
    }
    let mut over = 0.0;
    let mut old = then.iter().peekable();
    for t in now {
        while old.next_if(|o| o.tid < t.tid).is_some() {}
        if let Some(o) = old.next_if(|o| o.tid == t.tid) {
            let rate = t.cpu_ticks.saturating_sub(o.cpu_ticks) as f64 / tps / secs;
            over += (rate - 1.0).max(0.0);
        }
    }
    over
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};

    use super::*;
    use crate::observe::fakeproc::{FakeProcess, FakeProcfs, TICKS};
    use crate::observe::{Observation, Scanner};
    use numasched_model::topology::{self, Topology};

    fn machine() -> Topology {
        topology::machine("2n:1l:2c:1t").unwrap()
    }

    fn fake() -> (tempfile::TempDir, FakeProcfs) {
        // tmpfs where there is one: the churn test writes thousands of files.
        let dir = tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .unwrap();
        let f = FakeProcfs::new(&dir.path().join("proc")).unwrap();
        (dir, f)
    }

    /// Ages as configured, without the idle extension (tested on its own).
    fn config(f: &FakeProcfs) -> ScanConfig {
        ScanConfig {
            proc_root: f.root().to_path_buf(),
            exclude: HashSet::new(),
            ticks_per_second: TICKS,
            idle_age_factor: 1,
            idle_stat_max_every: 1,
            ..ScanConfig::default()
        }
    }

    #[test]
    fn an_idle_process_keeps_its_parts_longer_and_a_busy_one_does_not() {
        let (_d, f) = fake();
        f.add(&FakeProcess::new(10, "idle").pages(&[(0, 1000)]))
            .unwrap();
        let mut busy = FakeProcess::new(11, "busy").pages(&[(0, 1000)]);
        f.add(&busy).unwrap();
        let mut cfg = config(&f);
        cfg.numa_maps_max_age = 2;
        cfg.idle_age_factor = 3;
        let mut s = Scanner::new(cfg);
        s.scan(&machine()).unwrap();
        move_pages(&f, 10, &[(1, 1000)]);
        move_pages(&f, 11, &[(1, 1000)]);
        let node_of = |obs: &Observation, pid: u32| {
            obs.snapshot
                .processes
                .iter()
                .find(|p| p.pid == pid)
                .and_then(|p| p.home_node())
        };
        // Passes 2..=6: the busy one is re-read within its age of 2, the idle one
        // only after 3 ages (6 passes) from its first read.
        let mut idle_seen = Vec::new();
        for pass in 2..=7 {
            busy.cpu_ticks += TICKS;
            f.write(11, "stat", &busy.stat_line()).unwrap();
            let obs = s.scan(&machine()).unwrap();
            if pass >= 3 {
                assert_eq!(node_of(&obs, 11), Some(1), "busy, pass {pass}");
            }
            idle_seen.push(node_of(&obs, 10));
        }
        assert_eq!(
            &idle_seen[..3],
            &[Some(0), Some(0), Some(0)],
            "{idle_seen:?}"
        );
        assert_eq!(idle_seen.last(), Some(&Some(1)), "{idle_seen:?}");
    }

    /// The thread list is kept as long as status and numa_maps: it is only ever
    /// kept for a process whose threads ran no tick, i.e. an idle one.
    #[test]
    fn an_idle_process_keeps_its_thread_list_longer_too() {
        let (_d, f) = fake();
        let p = FakeProcess::new(10, "pool");
        f.add(&p.clone().threads_on(&[0, 1])).unwrap();
        let mut cfg = config(&f);
        cfg.threads_max_age = 2;
        cfg.idle_age_factor = 3;
        let mut s = Scanner::new(cfg);
        s.scan(&machine()).unwrap();
        // Its threads last ran elsewhere, without a tick: only a read shows it.
        f.add(&p.threads_on(&[2, 3])).unwrap();
        let mut seen = Vec::new();
        for _pass in 2..=7 {
            let obs = s.scan(&machine()).unwrap();
            seen.push(obs.snapshot.processes[0].current_cpus.to_vec());
        }
        // Read in pass 1: due in pass 3 by age, in pass 3 + 2 × (3 − 1) = 7 idle.
        assert_eq!(&seen[..5], &vec![vec![0, 1]; 5][..], "{seen:?}");
        assert_eq!(seen[5], vec![2, 3], "{seen:?}");
    }

    /// Pages per node as the snapshot reports them, of the only process.
    fn pages(obs: &Observation) -> BTreeMap<u32, u64> {
        assert_eq!(obs.snapshot.processes.len(), 1, "{:?}", obs.problems);
        let m = &obs.snapshot.processes[0].memory_bytes;
        m.iter().map(|(n, b)| (*n, b / 4096)).collect()
    }

    /// Replaces the numa_maps file only: RSS in stat stays as it was.
    fn move_pages(f: &FakeProcfs, pid: u32, to: &[(u32, u64)]) {
        let text = FakeProcess::new(pid, "x").pages(to).numa_maps;
        f.write(pid, "numa_maps", &text).unwrap();
    }

    #[test]
    fn numa_maps_is_reused_while_rss_holds_still() {
        let (_d, f) = fake();
        f.add(&FakeProcess::new(10, "db").pages(&[(0, 1000)]))
            .unwrap();
        let mut s = Scanner::new(config(&f));
        let first = s.scan(&machine()).unwrap();
        assert_eq!(pages(&first), BTreeMap::from([(0, 1000)]));
        assert_eq!((first.costly_reads, first.reused), (2, 0), "status, memory");
        move_pages(&f, 10, &[(1, 1000)]);
        let second = s.scan(&machine()).unwrap();
        assert_eq!(
            pages(&second),
            BTreeMap::from([(0, 1000)]),
            "not read again"
        );
        assert_eq!((second.costly_reads, second.reused), (0, 2));
    }

    #[test]
    fn rss_moving_past_the_threshold_rereads_numa_maps() {
        let (_d, f) = fake();
        f.add(&FakeProcess::new(10, "db").pages(&[(0, 1000)]))
            .unwrap();
        let mut s = Scanner::new(config(&f));
        s.scan(&machine()).unwrap();
        // 9.9 % above what it was when numa_maps was read: still good, even though the
        // previous pass saw 1050 (the baseline is the read, not the last pass).
        for rss in [1050, 1099] {
            f.add(&FakeProcess::new(10, "db").pages(&[(0, 1000), (1, rss - 1000)]))
                .unwrap();
            assert_eq!(
                pages(&s.scan(&machine()).unwrap()),
                BTreeMap::from([(0, 1000)])
            );
        }
        f.add(&FakeProcess::new(10, "db").pages(&[(0, 1000), (1, 101)]))
            .unwrap();
        let obs = s.scan(&machine()).unwrap();
        assert_eq!(pages(&obs), BTreeMap::from([(0, 1000), (1, 101)]));
        assert_eq!(obs.costly_reads, 1, "numa_maps only; status is still good");
        // Shrinking counts too.
        f.add(&FakeProcess::new(10, "db").pages(&[(1, 900)]))
            .unwrap();
        assert_eq!(
            pages(&s.scan(&machine()).unwrap()),
            BTreeMap::from([(1, 900)])
        );
    }

    #[test]
    fn parts_are_reread_when_they_age_out() {
        let (_d, f) = fake();
        f.add(&FakeProcess::new(10, "db").pages(&[(0, 1000)]))
            .unwrap();
        let mut cfg = config(&f);
        cfg.numa_maps_max_age = 3;
        cfg.status_max_age = 2;
        let mut s = Scanner::new(cfg);
        s.scan(&machine()).unwrap();
        move_pages(&f, 10, &[(1, 1000)]);
        // A foreign pin that keeps the CPU the process is on: stat cannot tell.
        let mut pinned = FakeProcess::new(10, "db").pages(&[(0, 1000)]);
        pinned.cpus_allowed = "0-1".into();
        f.write(10, "status", &pinned.status_text()).unwrap();
        let allowed = |o: &Observation| o.snapshot.processes[0].allowed_cpus.clone();
        let pass2 = s.scan(&machine()).unwrap();
        assert_eq!((pages(&pass2)[&0], allowed(&pass2)), (1000, None));
        let pass3 = s.scan(&machine()).unwrap();
        assert_eq!(
            allowed(&pass3),
            Some(vec![0, 1].into()),
            "status: 2 passes old"
        );
        assert_eq!(pages(&pass3), BTreeMap::from([(0, 1000)]));
        let pass4 = s.scan(&machine()).unwrap();
        assert_eq!(pages(&pass4), BTreeMap::from([(1, 1000)]), "3 passes old");
    }

    #[test]
    fn invalidating_rereads_only_what_changed() {
        let (_d, f) = fake();
        let mut p = FakeProcess::new(10, "db").pages(&[(0, 1000)]);
        p.cpus_allowed = "0-3".into();
        f.add(&p).unwrap();
        let mut cfg = config(&f);
        cfg.status_max_age = 100;
        cfg.threads_max_age = 100;
        cfg.numa_maps_max_age = 100;
        let mut s = Scanner::new(cfg);
        s.scan(&machine()).unwrap();
        // Both changed behind the cache's back, in ways stat does not show (the main
        // thread stays on CPU 0, inside both sets).
        p.cpus_allowed = "0-1".into();
        f.write(10, "status", &p.status_text()).unwrap();
        move_pages(&f, 10, &[(1, 1000)]);
        let allowed = |o: &Observation| o.snapshot.processes[0].allowed_cpus.clone();
        // A placement: status is read again, numa_maps is not.
        s.invalidate(10, Changed::Affinity);
        let obs = s.scan(&machine()).unwrap();
        assert_eq!(allowed(&obs), Some(vec![0, 1].into()));
        assert_eq!(pages(&obs), BTreeMap::from([(0, 1000)]), "numa_maps kept");
        // A page move: numa_maps is read again.
        p.cpus_allowed = "0".into();
        f.write(10, "status", &p.status_text()).unwrap();
        s.invalidate(10, Changed::Pages);
        let obs = s.scan(&machine()).unwrap();
        assert_eq!(pages(&obs), BTreeMap::from([(1, 1000)]));
        assert_eq!(allowed(&obs), Some(vec![0, 1].into()), "status kept");
    }

    #[test]
    fn a_main_thread_outside_the_remembered_set_rereads_status_at_once() {
        let (_d, f) = fake();
        let mut p = FakeProcess::new(10, "db");
        p.cpus_allowed = "0-1".into();
        f.add(&p).unwrap();
        let mut s = Scanner::new(config(&f));
        s.scan(&machine()).unwrap();
        // Re-pinned to 2-3: the kernel moved it off CPU 0 straight away.
        p.cpus_allowed = "2-3".into();
        let p = p.threads_on(&[2]);
        f.add(&p).unwrap();
        let obs = s.scan(&machine()).unwrap();
        assert_eq!(
            obs.snapshot.processes[0].allowed_cpus,
            Some(vec![2, 3].into())
        );
    }

    #[test]
    fn a_sleeping_process_left_on_a_cpu_outside_its_set_is_not_reread() {
        let (_d, f) = fake();
        // Pinned to 2-3 while asleep: stat still names CPU 0, where it last ran.
        let mut p = FakeProcess::new(10, "sleeper").threads_on(&[0]);
        p.cpus_allowed = "2-3".into();
        f.add(&p).unwrap();
        let mut s = Scanner::new(config(&f));
        s.scan(&machine()).unwrap();
        // Passes later, before status is due by age: all from the cache.
        let obs = s.scan(&machine()).unwrap();
        assert_eq!(obs.costly_reads, 0, "nothing moved, nothing re-read");
        assert_eq!(
            obs.snapshot.processes[0].allowed_cpus,
            Some(vec![2, 3].into())
        );
        // It wakes on CPU 1, outside the set read: a pin changed meanwhile.
        p.cpus_allowed = "1".into();
        f.add(&p.threads_on(&[1])).unwrap();
        let obs = s.scan(&machine()).unwrap();
        assert_eq!(obs.snapshot.processes[0].allowed_cpus, Some(vec![1].into()));
    }

    #[test]
    fn idle_threads_are_reused_and_busy_ones_reread() {
        let (_d, f) = fake();
        let mut p = FakeProcess::new(10, "app");
        p.cpu_ticks = 100;
        f.add(&p.clone().threads_on(&[0, 1])).unwrap();
        let mut s = Scanner::new(config(&f));
        let cpus = |o: &Observation| o.snapshot.processes[0].current_cpus.clone();
        assert_eq!(cpus(&s.scan(&machine()).unwrap()), vec![0, 1]);
        // Thread 11 moved to CPU 3 without a tick of CPU time: not looked at.
        let moved = p.clone().threads_on(&[0, 3]);
        f.add(&moved).unwrap();
        let obs = s.scan(&machine()).unwrap();
        assert_eq!((cpus(&obs), obs.reused), (vec![0, 1].into(), 3));
        // It ran: the task directory is read again.
        p.cpu_ticks = 101;
        f.add(&p.threads_on(&[0, 3])).unwrap();
        let obs = s.scan(&machine()).unwrap();
        assert_eq!((cpus(&obs), obs.costly_reads), (vec![0, 3].into(), 1));
    }

    #[test]
    fn a_reused_pid_is_read_afresh() {
        let (_d, f) = fake();
        f.add(&FakeProcess::new(10, "old").pages(&[(0, 1000)]))
            .unwrap();
        let mut s = Scanner::new(config(&f));
        s.scan(&machine()).unwrap();
        // Same pid and RSS, born later: nothing of the old process may carry over.
        let mut new = FakeProcess::new(10, "new").pages(&[(1, 1000)]);
        new.start_time = 5000;
        new.cpus_allowed = "3".into();
        f.add(&new).unwrap();
        let obs = s.scan(&machine()).unwrap();
        assert_eq!(pages(&obs), BTreeMap::from([(1, 1000)]));
        assert_eq!(obs.snapshot.processes[0].allowed_cpus, Some(vec![3].into()));
        assert_eq!((obs.costly_reads, obs.reused), (2, 0));
    }

    #[test]
    fn entries_of_vanished_processes_are_dropped() {
        let (_d, f) = fake();
        f.add(&FakeProcess::new(10, "stays")).unwrap();
        f.add(&FakeProcess::new(11, "goes")).unwrap();
        let mut s = Scanner::new(config(&f));
        s.scan(&machine()).unwrap();
        assert_eq!(s.cached(), 2);
        f.remove(11).unwrap();
        s.scan(&machine()).unwrap();
        assert_eq!(s.cached(), 1);
    }

    #[test]
    fn churn_does_not_grow_the_cache() {
        let (_d, f) = fake();
        let mut s = Scanner::new(config(&f));
        // 5,000 short-lived processes, 50 alive at a time.
        for round in 0..100u32 {
            let pids: Vec<u32> = (0..50).map(|i| 1000 + round * 50 + i).collect();
            for &pid in &pids {
                f.add(&FakeProcess::new(pid, "short")).unwrap();
            }
            let obs = s.scan(&machine()).unwrap();
            assert_eq!(obs.snapshot.processes.len(), 50);
            assert_eq!(s.cached(), 50, "round {round}");
            for pid in pids {
                f.remove(pid).unwrap();
            }
        }
        s.scan(&machine()).unwrap();
        assert_eq!(s.cached(), 0);
    }

    #[test]
    fn a_first_pass_over_many_processes_is_whole_ordered_and_remembered() {
        // Enough processes for several reader threads wherever there are cores.
        let (_d, f) = fake();
        let n = 1000u32;
        for i in 0..n {
            let pid = 100 + i * 3;
            let p = if i % 10 == 0 {
                FakeProcess::kernel_thread(pid, "kworker")
            } else {
                FakeProcess::new(pid, "p").pages(&[(i % 2, u64::from(i) + 1)])
            };
            f.add(&p).unwrap();
        }
        let mut cfg = config(&f);
        // Ages longer than the pass is wide: no first read comes due early.
        cfg.status_max_age = 2000;
        cfg.numa_maps_max_age = 2000;
        let mut s = Scanner::new(cfg);
        let obs = s.scan(&machine()).unwrap();
        assert_eq!(
            (obs.kernel_threads, obs.snapshot.processes.len()),
            (100, 900)
        );
        let pids: Vec<u32> = obs.snapshot.processes.iter().map(|p| p.pid).collect();
        let want: Vec<u32> = (0..n)
            .filter(|i| i % 10 != 0)
            .map(|i| 100 + i * 3)
            .collect();
        assert_eq!(pids, want, "pid order, none lost or doubled");
        for (p, info) in obs.with_info() {
            let i = (p.pid - 100) / 3;
            let page = procfs::page_size();
            assert_eq!(p.pid, info.pid());
            assert_eq!(
                p.memory_bytes,
                BTreeMap::from([(i % 2, (u64::from(i) + 1) * page)]),
                "pid {}",
                p.pid
            );
        }
        // Every reader's entries were kept: the next pass reads nothing costly.
        assert_eq!(s.cached(), n as usize);
        let again = s.scan(&machine()).unwrap();
        assert_eq!(
            (again.costly_reads, again.snapshot.processes.len()),
            (0, 900)
        );
    }

    #[test]
    fn an_age_of_one_or_zero_reads_every_pass() {
        for age in [0, 1] {
            let (_d, f) = fake();
            let mut p = FakeProcess::new(10, "db").pages(&[(0, 1000)]);
            f.add(&p.clone().threads_on(&[0, 1])).unwrap();
            let mut cfg = config(&f);
            cfg.status_max_age = age;
            cfg.threads_max_age = age;
            cfg.numa_maps_max_age = age;
            let mut s = Scanner::new(cfg);
            s.scan(&machine()).unwrap();
            p.cpus_allowed = "0-1".into();
            f.add(&p.threads_on(&[0, 2])).unwrap();
            move_pages(&f, 10, &[(1, 1000)]);
            let obs = s.scan(&machine()).unwrap();
            let got = &obs.snapshot.processes[0];
            assert_eq!(pages(&obs), BTreeMap::from([(1, 1000)]), "age {age}");
            assert_eq!(got.allowed_cpus, Some(vec![0, 1].into()), "age {age}");
            assert_eq!(got.current_cpus, vec![0, 2], "age {age}");
            assert_eq!((obs.costly_reads, obs.reused), (3, 0), "age {age}");
        }
    }

    /// Demand of a two-thread process over a second, its threads' CPU time having
    /// grown by `busy` and `helper` ticks (the process's by their sum).
    fn two_thread_demand(busy: u64, helper: u64) -> f64 {
        let (_d, f) = fake();
        let mut p = FakeProcess::new(10, "load").threads_on(&[0, 1]);
        f.set_uptime(100.0).unwrap();
        f.add(&p).unwrap();
        let mut s = Scanner::new(config(&f));
        s.scan(&machine()).unwrap();
        p.threads[0].cpu_ticks += busy;
        p.threads[1].cpu_ticks += helper;
        p.cpu_ticks += busy + helper;
        f.add(&p).unwrap();
        f.set_uptime(101.0).unwrap();
        let obs = s.scan(&machine()).unwrap();
        obs.snapshot.processes[0].cpu_demand
    }

    #[test]
    fn a_thread_never_counts_for_more_than_one_cpu() {
        // Clock skew: one busy thread read 1.2 CPUs, its idle helper nothing. The
        // process's own stat says 1.2, which would earn it a second CPU.
        let d = two_thread_demand(120 * TICKS / 100, 0);
        assert!((d - 1.0).abs() < 1e-9, "{d}");
        // The helper's own use still counts, and nothing is taken off a thread that
        // stayed within one CPU.
        let d = two_thread_demand(120 * TICKS / 100, 30 * TICKS / 100);
        assert!((d - 1.3).abs() < 1e-9, "{d}");
        let d = two_thread_demand(90 * TICKS / 100, 80 * TICKS / 100);
        assert!((d - 1.7).abs() < 1e-9, "{d}");
    }

    #[test]
    fn thread_overrun_matches_threads_by_tid() {
        let t = |tid, cpu_ticks| ThreadStat {
            tid,
            cpu_ticks,
            processor: None,
        };
        // tid 2 exited, tid 4 is new: only 1 and 3 have a rate; 3 ran 1.5 CPUs.
        let then = [t(1, 0), t(2, 0), t(3, 100)];
        let now = [t(1, 50), t(3, 250), t(4, 900)];
        let over = thread_overrun(&then, &now, 1.0, 100.0);
        assert!((over - 0.5).abs() < 1e-9, "{over}");
        assert_eq!(thread_overrun(&then, &now, 0.0, 100.0), 0.0);
    }

    #[test]
    fn every_pass_is_ages_of_one() {
        let c = ScanConfig::default().every_pass();
        let ages = [c.status_max_age, c.threads_max_age, c.numa_maps_max_age];
        assert_eq!(ages, [1, 1, 1]);
    }

    #[test]
    fn invalidating_pages_rereads_them_but_keeps_the_cpu_rate() {
        let (_d, f) = fake();
        let mut p = FakeProcess::new(10, "db").pages(&[(0, 1000)]);
        p.cpu_ticks = 50 * TICKS;
        f.add(&p).unwrap();
        let mut s = Scanner::new(config(&f));
        s.scan(&machine()).unwrap();
        // The daemon moved its memory: RSS is the same, so only invalidate tells.
        move_pages(&f, 10, &[(1, 1000)]);
        p.cpu_ticks += TICKS;
        f.write(10, "stat", &p.stat_line()).unwrap();
        f.set_uptime(110.0).unwrap();
        s.invalidate(10, Changed::Pages);
        let obs = s.scan(&machine()).unwrap();
        assert_eq!(pages(&obs), BTreeMap::from([(1, 1000)]));
        let demand = obs.snapshot.processes[0].cpu_demand;
        assert!(
            (demand - 0.1).abs() < 1e-9,
            "1 s over 10 s, not lifetime: {demand}"
        );
    }

    #[test]
    fn a_process_the_filter_turned_away_is_read_whole_once_wanted() {
        let (_d, f) = fake();
        let mut p = FakeProcess::new(10, "db").pages(&[(0, 1000)]);
        f.add(&p).unwrap();
        let mut s = Scanner::new(config(&f)).with_filter(Box::new(|c| c.cpu_demand > 0.05));
        let idle = s.scan(&machine()).unwrap();
        assert_eq!((idle.excluded, idle.costly_reads), (1, 0));
        assert_eq!(s.scan(&machine()).unwrap().excluded, 1, "still idle");
        // It turns busy: 1 s of CPU over 10 s, rated against the remembered ticks.
        p.cpu_ticks += TICKS;
        f.add(&p).unwrap();
        f.set_uptime(110.0).unwrap();
        let obs = s.scan(&machine()).unwrap();
        assert_eq!(pages(&obs), BTreeMap::from([(0, 1000)]));
        assert_eq!((obs.costly_reads, obs.reused), (2, 0));
        let demand = obs.snapshot.processes[0].cpu_demand;
        assert!((demand - 0.1).abs() < 1e-9, "{demand}");
    }

    /// Passes of one process under `cfg`, uptime one second apart from 101 s; its
    /// CPU demand in each, after `before(pass)` changed the files.
    fn demands(
        f: &FakeProcfs,
        cfg: ScanConfig,
        passes: u64,
        mut before: impl FnMut(u64),
    ) -> Vec<f64> {
        let mut s = Scanner::new(cfg);
        (1..=passes)
            .map(|pass| {
                before(pass);
                f.set_uptime(100.0 + pass as f64).unwrap();
                let obs = s.scan(&machine()).unwrap();
                assert_eq!(obs.snapshot.processes.len(), 1, "described in pass {pass}");
                obs.snapshot.processes[0].cpu_demand
            })
            .collect()
    }

    #[test]
    fn a_long_idle_process_has_stat_read_seldom_and_its_waking_seen_as_a_rate() {
        let (_d, f) = fake();
        let mut p = FakeProcess::new(10, "sleeper");
        p.cpu_ticks = 50 * TICKS;
        f.add(&p).unwrap();
        let mut cfg = config(&f);
        cfg.idle_stat_max_every = 4;
        // Nothing else due meanwhile (a due part is read with stat).
        cfg.status_max_age = 100;
        cfg.numa_maps_max_age = 100;
        // Met in pass 1 (phase 0). Idle 16 passes by pass 17: read every 4th pass,
        // the 20th last. It wakes before pass 21 with 2 s of CPU: passes 21-23 do
        // not read stat and say idle, pass 24 rates the 2 s over the 4 s since pass
        // 20; pass 25 reads again (busy at 24) and finds nothing new.
        let seen = demands(&f, cfg, 25, |pass| {
            if pass == 21 {
                p.cpu_ticks += 2 * TICKS;
                f.write(10, "stat", &p.stat_line()).unwrap();
            }
        });
        assert_eq!(&seen[20..], &[0.0, 0.0, 0.0, 0.5, 0.0], "{seen:?}");
    }

    #[test]
    fn a_short_pause_or_a_max_of_one_keeps_stat_read_every_pass() {
        for (max_every, busy_until) in [(8, 10), (1, 1)] {
            let (_d, f) = fake();
            let mut p = FakeProcess::new(10, "worker");
            f.add(&p).unwrap();
            let mut cfg = config(&f);
            cfg.idle_stat_max_every = max_every;
            // Busy until `busy_until`, then idle, then 1 s of CPU before pass 16:
            // idle 5 passes (or none may be skipped): seen at once.
            let seen = demands(&f, cfg, 16, |pass| {
                if pass <= busy_until || pass == 16 {
                    p.cpu_ticks += TICKS;
                    f.write(10, "stat", &p.stat_line()).unwrap();
                }
            });
            assert_eq!(seen[15], 1.0, "max {max_every}: {seen:?}");
        }
    }

    #[test]
    fn stat_period_is_a_quarter_of_the_idle_time_in_powers_of_two_up_to_the_max() {
        let periods: Vec<u64> = [0, 7, 8, 15, 16, 31, 32, 1000]
            .iter()
            .map(|&idle| stat_period(idle, 8))
            .collect();
        assert_eq!(periods, [1, 1, 2, 2, 4, 4, 8, 8]);
        assert_eq!(stat_period(1000, 1), 1);
        assert_eq!(stat_period(1000, 0), 1);
        assert_eq!(stat_period(1000, 6), 4, "powers of two only");
    }

    #[test]
    fn an_exited_idle_process_is_gone_the_next_pass_and_invalidate_reads_stat() {
        let (_d, f) = fake();
        f.add(&FakeProcess::new(10, "a")).unwrap();
        f.add(&FakeProcess::new(11, "b")).unwrap();
        let mut cfg = config(&f);
        cfg.idle_stat_max_every = 2;
        cfg.status_max_age = 100;
        cfg.numa_maps_max_age = 100;
        let mut s = Scanner::new(cfg);
        for _ in 0..12 {
            s.scan(&machine()).unwrap();
        }
        // Pass 13: idle 12 passes, both on every other pass; 10 exits.
        f.remove(10).unwrap();
        let obs = s.scan(&machine()).unwrap();
        let pids: Vec<u32> = obs.snapshot.processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids, vec![11], "the listing is read every pass");
        // 11 (phase 1) is read in odd passes: a new comm (as by exec) shows in pass
        // 15, not 14; in pass 16 only because of invalidate.
        let renamed = |comm: &str| {
            let mut b = FakeProcess::new(11, comm);
            b.start_time = FakeProcess::new(11, "b").start_time;
            f.write(11, "stat", &b.stat_line()).unwrap();
        };
        let program = |s: &mut Scanner| {
            s.scan(&machine()).unwrap().snapshot.processes[0]
                .program
                .clone()
        };
        renamed("b2");
        assert_eq!(program(&mut s), "b", "pass 14 does not read it");
        assert_eq!(program(&mut s), "b2", "pass 15 does");
        renamed("b3");
        s.invalidate(11, Changed::Affinity);
        assert_eq!(program(&mut s), "b3", "pass 16, invalidated");
    }

    #[test]
    fn first_rereads_are_spread_over_the_age() {
        let (_d, f) = fake();
        for pid in 10..20 {
            f.add(&FakeProcess::new(pid, "p").pages(&[(0, 10)]))
                .unwrap();
        }
        let mut cfg = config(&f);
        cfg.numa_maps_max_age = 5;
        cfg.status_max_age = 100;
        let mut s = Scanner::new(cfg);
        assert_eq!(s.scan(&machine()).unwrap().costly_reads, 20);
        // Not all ten in pass 6: two a pass, and the same again one age later.
        let reads: Vec<usize> = (2..=11)
            .map(|_| s.scan(&machine()).unwrap().costly_reads)
            .collect();
        assert_eq!(reads, vec![2; 10]);
    }

    #[test]
    fn rss_moved_is_relative_to_the_read() {
        assert!(!rss_moved(0, 0, 10));
        assert!(rss_moved(0, 1, 10), "from nothing, any growth");
        assert!(!rss_moved(100, 110, 10));
        assert!(rss_moved(100, 111, 10));
        assert!(rss_moved(100, 89, 10));
        assert!(rss_moved(100, 101, 0));
        assert!(!rss_moved(u64::MAX, u64::MAX - 1, 10), "no overflow");
    }
}
