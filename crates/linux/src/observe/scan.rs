//! One observation pass over a procfs tree, producing the [`Snapshot`] policies consume.
//!
//! The [`Scanner`] keeps what earlier passes read: the CPU times, so that `cpu_demand`
//! is a rate over the last interval, and the costly files, so that a pass re-reads
//! only what may have changed ([`cache`](super::cache) says when). Per process, stat is
//! read first (cheap): kernel threads, excluded pids and processes the filter rejects
//! stop there, before the costly numa_maps. A process that vanishes at any step is
//! counted and left out; a process whose files cannot be read or parsed is left out
//! and its error kept in [`Observation::problems`]; neither stops the pass.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use super::cache::{Cache, Cached, Changed, Entry, Tally};
use super::cpu_time::{others_demand, others_pinned, CpuTimes, MIN_TICKS};
use super::error::ObserveError;
use super::others::{others_taken, Basis, Span};
use super::pids::PidLister;
use super::proc::{assemble, read_stat_by_path, ProcDir, ProcInfo, Stat};
use super::scan_config::ScanConfig;
use super::schedstat::{waiting_threads, RunDelay};
use numasched_model::topology::{CpuId, NodeId, Topology};
use numasched_model::CpuSet;
use numasched_model::{Process, ProcessKey, Snapshot};

/// What the filter sees: everything known after stat, before the costly reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate<'a> {
    pub stat: &'a Stat,
    /// As it will appear in the snapshot (see [`DemandBasis`]).
    pub cpu_demand: f64,
    pub rss_bytes: u64,
}

/// The daemon's process filter (min CPU, min RSS, name patterns); `true` keeps it.
pub type Filter = Box<dyn Fn(&Candidate<'_>) -> bool + Send + Sync>;

/// How `cpu_demand` was computed in a pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DemandBasis {
    /// First pass: CPU time over the process's whole life. Neither 0 (which would make
    /// every process look idle for one epoch) nor "unknown" (which policies cannot
    /// use); a long-idle process that just turned busy reads low until the next pass.
    Lifetime,
    /// CPU time used since the previous pass over the time between them, in seconds.
    /// Processes started since then are measured over their life; an idle process
    /// whose stat was not read in the last passes ([`ScanConfig::idle_stat_max_every`])
    /// over the time since its last read.
    Interval(f64),
}

/// One pass's result.
#[derive(Debug)]
pub struct Observation {
    pub snapshot: Snapshot,
    /// Everything read about each process of the snapshot, by key: matched to its
    /// process by identity, never by position, so dropping a process from one cannot
    /// pair the next with the wrong details.
    pub details: HashMap<ProcessKey, ProcInfo>,
    /// Processes left out because a file could not be read or made no sense.
    pub problems: Vec<ObserveError>,
    /// Processes kept without their memory or fault information because reading
    /// numa_maps or sched was refused (see [`ProcInfo::denied`]).
    pub incomplete: usize,
    /// Processes that exited between being listed and being read.
    pub vanished: usize,
    pub kernel_threads: usize,
    /// Left out by the exclusion list or the filter, or pinned entirely outside the
    /// topology's CPUs (nothing to plan).
    pub excluded: usize,
    /// Costly file groups (status; `task/*/stat`; numa_maps with sched) read in this
    /// pass, and those taken from earlier passes instead: how much the cache saved.
    pub costly_reads: usize,
    pub reused: usize,
    /// Seconds since boot at the time of the pass (`<proc>/uptime`).
    pub uptime: f64,
    pub demand_basis: DemandBasis,
    /// Others' work in the snapshot is as the first pass read it: over each unselected
    /// process's life, which for one started just before (a `taskset -c 0` load
    /// whose worker had not run yet) reads it idle, its CPU free. It stands until a
    /// later pass spans enough clock ticks to read it again (see `MIN_TICKS`).
    pub others_from_first_pass: bool,
}

impl Observation {
    /// What was read about `p`: `None` only for a process that was not scanned.
    pub fn info(&self, p: &Process) -> Option<&ProcInfo> {
        self.details.get(&p.key())
    }

    /// Each process of the snapshot with what was read about it.
    pub fn with_info(&self) -> impl Iterator<Item = (&Process, &ProcInfo)> {
        let details = &self.details;
        self.snapshot
            .processes
            .iter()
            .filter_map(move |p| Some((p, details.get(&p.key())?)))
    }

    /// Keeps the processes (and their details) for which `keep` holds.
    pub fn retain(&mut self, keep: impl Fn(&ProcessKey) -> bool) {
        self.snapshot.processes.retain(|p| keep(&p.key()));
        self.details.retain(|k, _| keep(k));
    }
}

/// As [`Observation::with_info`], for the stages that fill in the snapshot; a function
/// of the two fields rather than a method, so that the rest of the observation (its
/// topology, its uptime) stays readable during the loop.
pub fn with_info_mut<'a>(
    processes: &'a mut [Process],
    details: &'a HashMap<ProcessKey, ProcInfo>,
) -> impl Iterator<Item = (&'a mut Process, &'a ProcInfo)> {
    processes.iter_mut().filter_map(move |p| {
        let info = details.get(&p.key())?;
        Some((p, info))
    })
}

/// Holds what one pass needs from the earlier ones.
pub struct Scanner {
    config: ScanConfig,
    filter: Option<Filter>,
    /// The processes the previous pass saw.
    cache: Cache,
    previous_uptime: Option<f64>,
    /// Every CPU's times at the start of the span measured, for what others ran on
    /// each, and what was last found.
    /// The last `/proc/stat` reading differenced from, and the uptime it was read at.
    previous_cpu_times: Option<(CpuTimes, f64)>,
    last_others: BTreeMap<CpuId, f64>,
    /// Others' work free to move or not, at the last reading.
    last_demand: BTreeMap<CpuId, f64>,
    /// The CPUs others' work held at the last reading.
    last_taken: CpuSet,
    /// The last reading was the first pass's (see [`Observation::others_from_first_pass`]).
    last_from_first_pass: bool,
    /// An unreadable `/proc/stat` was reported (once: it is no process's problem).
    cpu_times_reported: bool,
    /// Passes so far: the clock the cache's ages are counted on.
    pass: u64,
    lister: PidLister,
}

/// At most this many threads read a first pass ([`Scanner::observe_new`]).
const FIRST_PASS_THREADS: usize = 8;
/// ... and each gets at least this many processes: below that, starting a thread
/// costs more than it saves.
const FIRST_PASS_MIN_PER_THREAD: usize = 128;

/// What a pass knows before it looks at any process.
struct PassContext<'a> {
    topology: &'a Topology,
    machine: CpuSet,
    uptime: f64,
    tps: f64,
}

/// What became of one listed pid.
enum Outcome {
    Kept(Box<(Process, ProcInfo)>),
    Vanished,
    Problem(ObserveError),
    KernelThread,
    /// Not selected: others' work, with what the scan read of it if it was busy.
    Excluded(Option<Unselected>),
}

/// A busy process the scan does not select, as far as others' work that cannot move
/// needs it (see [`others_pinned`]).
struct Unselected {
    /// CPUs' worth it ran or waited to run since its last read: what it would run
    /// given room. (What it ran alone reads a pinned program squeezed by others' work
    /// on its CPU as small, though it takes its share of that CPU from anyone pinned
    /// beside it.) The wait is its main thread's: a lower bound.
    demand: f64,
    /// The CPUs its main thread may run on.
    cpus: CpuSet,
}

/// CPUs' worth from which an unselected process's affinity is read: below it, its work
/// could not crowd a CPU (see `numasched_policy::crowded`) unless several such were
/// pinned to the same one. One runnable as it is read is read too: a young program
/// pinned where others' work keeps its CPU busy may have run less (a tick in its first
/// 100 ms under `stress-ng`) though it wants the whole CPU.
const UNSELECTED_BUSY: f64 = 0.1;

/// Whether an unselected process is busy enough for its affinity to be read.
fn busy_enough(stat: &Stat, ran: f64) -> bool {
    ran >= UNSELECTED_BUSY || stat.state == 'R'
}

impl Scanner {
    pub fn new(config: ScanConfig) -> Scanner {
        Scanner {
            lister: PidLister::new(&config.proc_root),
            config,
            filter: None,
            cache: Cache::default(),
            previous_uptime: None,
            previous_cpu_times: None,
            last_others: BTreeMap::new(),
            last_demand: BTreeMap::new(),
            last_taken: CpuSet::new(),
            last_from_first_pass: false,
            cpu_times_reported: false,
            pass: 0,
        }
    }

    pub fn with_filter(mut self, filter: Filter) -> Scanner {
        self.filter = Some(filter);
        self
    }

    pub fn config(&self) -> &ScanConfig {
        &self.config
    }

    /// Makes the next pass read afresh what `changed` made stale about `pid`. For
    /// whoever changed its affinity or moved its memory: stat shows neither (RSS stays
    /// the same), so the remembered status or numa_maps would otherwise stand until it
    /// ages out. Only that part is read again: a placement does not cost a numa_maps
    /// read, which for a large process is the scan's most costly file.
    pub fn invalidate(&mut self, pid: u32, changed: Changed) {
        self.cache.invalidate(pid, changed);
    }

    /// Whether the last pass knew that no task was created and none exited since the
    /// pass before it (see [`super::pids`]): then no process forked, and none left
    /// children to init, in between. `false` when it could not know.
    pub fn no_task_came_or_went(&self) -> bool {
        self.lister.reused()
    }

    /// Processes remembered from the last pass.
    #[cfg(test)]
    pub(crate) fn cached(&self) -> usize {
        self.cache.len()
    }

    /// One pass. Fails only if the procfs root itself cannot be read.
    pub fn scan(&mut self, topology: &Topology) -> Result<Observation, ObserveError> {
        let root = &self.config.proc_root;
        // The first pass samples the CPUs' busy time across its reading of the
        // processes (see `first_cpu_span`); every later pass, from the one before.
        let first_sample = (self.pass == 0 && !self.config.first_cpu_span.is_zero())
            .then(|| CpuTimes::read(root).ok())
            .flatten();
        let uptime = read_uptime(root)?;
        let cpu_times = CpuTimes::read(root);
        let pids = self.lister.pids()?;
        let basis = match self.previous_uptime {
            Some(prev) => DemandBasis::Interval((uptime - prev).max(0.0)),
            None => DemandBasis::Lifetime,
        };
        let ctx = PassContext {
            topology,
            machine: topology.all_cpus(),
            uptime,
            tps: self.config.ticks_per_second.max(1) as f64,
        };
        let mut obs = empty_observation(topology, uptime, basis);
        self.pass += 1;
        let mut old = std::mem::take(&mut self.cache);
        let mut next = Cache::with_capacity(old.len().max(pids.len()));
        let mut tally = Tally::default();
        let outcomes = if old.len() == 0 {
            self.observe_new(&pids, &ctx, &mut next, &mut tally)
        } else {
            pids.iter()
                .map(|&pid| self.observe(pid, &ctx, &mut old, &mut next, &mut tally))
                .collect()
        };
        let mut unselected = Vec::new();
        obs.snapshot.processes.reserve(outcomes.len());
        obs.details.reserve(outcomes.len());
        for outcome in outcomes {
            match outcome {
                Outcome::Kept(b) => {
                    let (p, info) = *b;
                    obs.incomplete += usize::from(!info.denied.is_empty());
                    obs.details.insert(p.key(), info);
                    obs.snapshot.processes.push(p);
                }
                Outcome::Vanished => obs.vanished += 1,
                Outcome::Problem(e) => obs.problems.push(e),
                Outcome::KernelThread => obs.kernel_threads += 1,
                Outcome::Excluded(busy) => {
                    obs.excluded += 1;
                    unselected.extend(busy);
                }
            }
        }
        self.lister.keep(pids);
        // Whatever was not carried over exited (or was not seen): forgotten here.
        self.cache = next;
        self.previous_uptime = Some(uptime);
        let (cpu_times, cpu_at) = match first_sample {
            // After the processes were read, so that a sample taken at start does not
            // age them (a load seconds old read a tick of CPU more and was sized as
            // young, for all its threads): until the CPUs' clocks moved enough to read
            // a share, as a vCPU's can lag the wall clock, up to four spans; clocks
            // that did not move at all (a file that does not change) are no clocks.
            Some(t) => {
                let root = &self.config.proc_root;
                for slept in 0..=4 {
                    let moved = CpuTimes::read(root).map_or(0, |now| now.ticks_since(&t));
                    if moved >= MIN_TICKS || (moved == 0 && slept > 0) || slept == 4 {
                        break;
                    }
                    std::thread::sleep(self.config.first_cpu_span);
                }
                self.previous_cpu_times = Some((t, uptime));
                let now = CpuTimes::read(root);
                (now, read_uptime(root).unwrap_or(uptime))
            }
            None => (cpu_times, uptime),
        };
        match cpu_times {
            // Too short a span to read a share from (short epochs): the last reading
            // stands, and the next pass measures from the same start.
            Ok(now)
                if self
                    .previous_cpu_times
                    .as_ref()
                    .is_some_and(|(before, _)| now.ticks_since(before) < MIN_TICKS) =>
            {
                obs.snapshot.others_pinned = self.last_others.clone();
                obs.snapshot.others_taken = self.last_taken.clone();
                obs.snapshot.others_demand = self.last_demand.clone();
                obs.others_from_first_pass = self.last_from_first_pass;
            }
            Ok(now) => {
                self.last_from_first_pass = obs.others_from_first_pass;
                if let Some((before, at)) = &self.previous_cpu_times {
                    let counted = now.counted_since(before, cpu_at - at, ctx.tps);
                    let spans = spans(&obs, &topology.all_cpus(), &counted);
                    let busy = now.busy_since(before);
                    self.last_others = others_pinned(
                        &now.irq_since(before),
                        unselected.iter().map(|u| (u.demand, u.cpus.clone())),
                    );
                    let over = match basis {
                        DemandBasis::Interval(_) => Basis::Epoch,
                        DemandBasis::Lifetime => Basis::Lifetime,
                    };
                    self.last_taken = others_taken(topology, &busy, &spans, over, &self.last_taken);
                    self.last_demand =
                        others_demand(unselected.iter().map(|u| (u.demand, u.cpus.clone())));
                    obs.snapshot.others_pinned = self.last_others.clone();
                    obs.snapshot.others_taken = self.last_taken.clone();
                    obs.snapshot.others_demand = self.last_demand.clone();
                }
                self.previous_cpu_times = Some((now, cpu_at));
            }
            Err(e) => {
                // Planning goes on as if every CPU were free of others' work.
                self.previous_cpu_times = None;
                self.last_others.clear();
                self.last_demand.clear();
                self.last_taken = CpuSet::new();
                if !std::mem::replace(&mut self.cpu_times_reported, true) {
                    obs.problems.push(e);
                }
            }
        }
        obs.costly_reads = tally.read;
        obs.reused = tally.reused;
        Ok(obs)
    }

    /// Processes met for the first time (the scanner's first pass, or one after
    /// everything was forgotten), where every file must be read: in up to
    /// [`FIRST_PASS_THREADS`] threads over contiguous runs of `pids`, so the
    /// daemon's start, the one pass that reads everything about everyone, takes a
    /// fraction of the time on a machine with cores to spare. Outcomes come back in
    /// `pids` order, as sequentially.
    fn observe_new(
        &self,
        pids: &[u32],
        ctx: &PassContext<'_>,
        next: &mut Cache,
        tally: &mut Tally,
    ) -> Vec<Outcome> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = cores
            .min(FIRST_PASS_THREADS)
            .min(pids.len() / FIRST_PASS_MIN_PER_THREAD)
            .max(1);
        let run = |chunk: &[u32]| {
            let (mut old, mut next, mut tally) =
                (Cache::default(), Cache::default(), Tally::default());
            let outcomes: Vec<Outcome> = chunk
                .iter()
                .map(|&pid| self.observe(pid, ctx, &mut old, &mut next, &mut tally))
                .collect();
            (outcomes, next, tally)
        };
        if threads == 1 {
            let (outcomes, n, t) = run(pids);
            next.extend(n);
            tally.add(t);
            return outcomes;
        }
        let per = pids.len().div_ceil(threads);
        let parts: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = pids
                .chunks(per)
                .map(|chunk| scope.spawn(move || run(chunk)))
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
        let mut outcomes = Vec::with_capacity(pids.len());
        for part in parts {
            // A panic in a reader thread is a bug; carry it on as the sequential pass
            // would have.
            let (o, n, t) = part.unwrap_or_else(|e| std::panic::resume_unwind(e));
            outcomes.extend(o);
            next.extend(n);
            tally.add(t);
        }
        outcomes
    }

    /// One process: stat, the filter, then the costly parts from the files or `old`.
    /// Its entry moves to `next` if it is still there to be seen next pass.
    fn observe(
        &self,
        pid: u32,
        ctx: &PassContext<'_>,
        old: &mut Cache,
        next: &mut Cache,
        tally: &mut Tally,
    ) -> Outcome {
        if self.config.exclude.contains(&pid) {
            return Outcome::Excluded(None);
        }
        if let Some(done) = self.observe_unread(pid, ctx, old, next, tally) {
            return done;
        }
        if let Some(done) = self.observe_by_stat(pid, ctx, old, next, tally) {
            return done;
        }
        self.observe_through_handle(pid, ctx, old, next, tally)
    }

    /// The cheapest way, for a process idle long enough that this pass need not read
    /// even its stat ([`ScanConfig::idle_stat_max_every`]): described as last read, with
    /// no CPU demand, if nothing else is due. `None`, with `old` as it was, otherwise.
    fn observe_unread(
        &self,
        pid: u32,
        ctx: &PassContext<'_>,
        old: &mut Cache,
        next: &mut Cache,
        tally: &mut Tally,
    ) -> Option<Outcome> {
        let cfg = &self.config;
        let known = old.peek(pid)?;
        let stat = known.unread_stat(self.pass, cfg.idle_stat_max_every)?;
        if known.wanted && !stat.is_kernel_thread() && !known.all_good(stat, self.pass, cfg) {
            return None;
        }
        let stat = stat.clone();
        let entry = old.take(&stat)?;
        if stat.is_kernel_thread() || !entry.wanted {
            let outcome = match stat.is_kernel_thread() {
                true => Outcome::KernelThread,
                false => Outcome::Excluded(None),
            };
            next.put(pid, entry);
            return Some(outcome);
        }
        let idle = Demand::default();
        Some(self.describe(pid, entry, stat, None, idle, ctx, next, tally))
    }

    /// The cheap way, for a process seen before that will likely need nothing but
    /// stat (most of them, once the scanner has seen them): stat read by path and the
    /// rest from the cache, without the handle's open and close, two of the five
    /// syscalls such a process costs otherwise. `None`, with `old` as it was, if
    /// anything turns out to be due: the caller starts over through a handle, so that
    /// no description ever mixes two processes.
    fn observe_by_stat(
        &self,
        pid: u32,
        ctx: &PassContext<'_>,
        old: &mut Cache,
        next: &mut Cache,
        tally: &mut Tally,
    ) -> Option<Outcome> {
        let cfg = &self.config;
        let known = old.peek(pid)?;
        if !known.likely_stat_only(self.pass, cfg) {
            return None;
        }
        let stat = match read_stat_by_path(&cfg.proc_root, pid) {
            Ok(Some(stat)) if stat.start_time == known.start_time() => stat,
            Ok(None) => return Some(Outcome::Vanished),
            // A newcomer on the pid, or an error the handle's read will report.
            _ => return None,
        };
        let mut entry = old.take(&stat)?;
        if stat.is_kernel_thread() {
            entry.saw(&stat, ctx.uptime, self.pass);
            next.put(pid, entry);
            return Some(Outcome::KernelThread);
        }
        let before = Some((entry.cpu_ticks, entry.read_uptime));
        let demand = demand(&stat, before, ctx.uptime, ctx.tps);
        let children = children_demand(&stat, Some(&entry), ctx);
        let wanted = self.wanted(&stat, demand);
        // A busy unselected process's affinity is read through a handle: by path it
        // could be a newcomer's.
        let busy_other = !wanted && busy_enough(&stat, demand);
        if busy_other || (wanted && !entry.all_good(&stat, self.pass, cfg)) {
            old.put(pid, entry);
            return None;
        }
        entry.saw(&stat, ctx.uptime, self.pass);
        entry.wanted = wanted;
        if !wanted {
            next.put(pid, entry);
            return Some(Outcome::Excluded(None));
        }
        let demand = Demand {
            own: demand,
            children,
        };
        Some(self.describe(pid, entry, stat, None, demand, ctx, next, tally))
    }

    /// The full way: a handle on the process, stat through it, then whatever is due.
    fn observe_through_handle(
        &self,
        pid: u32,
        ctx: &PassContext<'_>,
        old: &mut Cache,
        next: &mut Cache,
        tally: &mut Tally,
    ) -> Outcome {
        let cfg = &self.config;
        let (dir, stat) = match open_and_stat(&cfg.proc_root, pid) {
            Ok(Some(v)) => v,
            Ok(None) => return Outcome::Vanished,
            Err(e) => return Outcome::Problem(e),
        };
        let before = old.take(&stat);
        let prev = before.as_ref().map(|e| (e.cpu_ticks, e.read_uptime));
        let children = children_demand(&stat, before.as_ref(), ctx);
        let demand = demand(&stat, prev, ctx.uptime, ctx.tps);
        let mut entry = match before {
            Some(mut e) => {
                e.saw(&stat, ctx.uptime, self.pass);
                e
            }
            None => Entry::new(&stat, next.len(), ctx.uptime, self.pass),
        };
        if stat.is_kernel_thread() {
            next.put(pid, entry);
            return Outcome::KernelThread;
        }
        entry.wanted = self.wanted(&stat, demand);
        if !entry.wanted {
            let busy = busy_enough(&stat, demand)
                .then(|| unselected(&dir, &mut entry, demand, stat.num_threads, ctx))
                .flatten();
            if busy.is_none() {
                entry.waited = None;
            }
            next.put(pid, entry);
            return Outcome::Excluded(busy);
        }
        let demand = Demand {
            own: demand,
            children,
        };
        self.describe(pid, entry, stat, Some(&dir), demand, ctx, next, tally)
    }

    /// The common end of every way: a wanted process described from `stat`, its
    /// entry and, where they are due, files read through `dir` (only the full way has
    /// one; the others checked that nothing is due).
    #[allow(clippy::too_many_arguments)]
    fn describe(
        &self,
        pid: u32,
        mut entry: Entry,
        stat: Stat,
        dir: Option<&ProcDir>,
        demand: Demand,
        ctx: &PassContext<'_>,
        next: &mut Cache,
        tally: &mut Tally,
    ) -> Outcome {
        let mut src = Cached {
            dir,
            entry: &mut entry,
            pass: self.pass,
            config: &self.config,
            tally,
            uptime: ctx.uptime,
            thread_overrun: 0.0,
            ran_on: None,
        };
        let read = assemble(stat, &self.config.read, &mut src).map(|info| {
            info.map(|mut i| {
                i.ran_on = src.ran_on.take();
                i
            })
        });
        let demand = Demand {
            own: (demand.own - src.thread_overrun).max(0.0),
            ..demand
        };
        finish(pid, entry, read, demand, ctx, next)
    }

    /// The daemon's filter, if any, on what stat says.
    fn wanted(&self, stat: &Stat, cpu_demand: f64) -> bool {
        self.filter.as_ref().is_none_or(|f| {
            f(&Candidate {
                stat,
                cpu_demand,
                rss_bytes: stat.rss_pages.saturating_mul(procfs::page_size()),
            })
        })
    }
}

fn empty_observation(topology: &Topology, uptime: f64, basis: DemandBasis) -> Observation {
    Observation {
        snapshot: Snapshot {
            topology: topology.clone(),
            processes: Vec::new(),
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        },
        details: HashMap::new(),
        problems: Vec::new(),
        incomplete: 0,
        vanished: 0,
        kernel_threads: 0,
        excluded: 0,
        costly_reads: 0,
        reused: 0,
        uptime,
        demand_basis: basis,
        others_from_first_pass: basis == DemandBasis::Lifetime,
    }
}

/// The handle every later read goes through, and stat read through it; `Ok(None)`
/// if the process is gone.
fn open_and_stat(root: &Path, pid: u32) -> Result<Option<(ProcDir, Stat)>, ObserveError> {
    let Some(dir) = ProcDir::open(root, pid)? else {
        return Ok(None);
    };
    Ok(dir.stat()?.map(|stat| (dir, stat)))
}

/// The outcome of reading a process's parts; its entry goes on to `next` unless it
/// vanished. A problem is no reason to lose the CPU-time baseline (the parts that
/// were read are good).
fn finish(
    pid: u32,
    entry: Entry,
    read: Result<Option<ProcInfo>, ObserveError>,
    demand: Demand,
    ctx: &PassContext<'_>,
    next: &mut Cache,
) -> Outcome {
    if !matches!(read, Ok(None)) {
        next.put(pid, entry);
    }
    let mut info = match read {
        Ok(Some(info)) => info,
        Ok(None) => return Outcome::Vanished,
        Err(e) => return Outcome::Problem(e),
    };
    if info.kernel_thread {
        return Outcome::KernelThread;
    }
    info.children_demand = demand.children;
    match to_process(&info, demand.own, ctx.topology, &ctx.machine) {
        Some(p) => Outcome::Kept(Box::new((p, info))),
        None => Outcome::Excluded(None),
    }
}

/// The selected processes as the estimate of others' work per cache sees them: each
/// one's demand in shares of the ticks its CPUs counted (`counted`, see
/// [`CpuTimes::counted_since`]), as the CPUs' busy shares are, never more than its
/// threads.
fn spans(obs: &Observation, machine: &CpuSet, counted: &BTreeMap<CpuId, f64>) -> Vec<Span> {
    obs.snapshot
        .processes
        .iter()
        .map(|p| {
            let info = obs.details.get(&p.key());
            let allowed = info.and_then(|i| i.cpus_allowed.as_ref());
            let cpus = match allowed {
                Some(a) => a.intersection(machine),
                None => machine.clone(),
            };
            // Its waited-for children ran in the set it gave them: theirs, counted as
            // others', would take its own CPUs.
            let children = info.map_or(0.0, |i| i.children_demand);
            // Where its threads that ran this epoch are, where that was read; else
            // where its threads were last seen. Inside what it may use now, as where
            // its work is put (`others_taken`) is: a thread that ran on a CPU before a
            // narrowing this epoch will not run there again.
            let ran_on = info
                .and_then(|i| i.ran_on.as_ref())
                .map(|r| r.intersection(&cpus))
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| p.current_cpus.clone());
            let where_ = if ran_on.is_empty() { &cpus } else { &ran_on };
            let known: Vec<f64> = where_
                .iter()
                .filter_map(|c| counted.get(c))
                .copied()
                .collect();
            let share = if known.is_empty() {
                1.0
            } else {
                (known.iter().sum::<f64>() / known.len() as f64).max(MIN_COUNTED)
            };
            Span {
                demand: ((p.cpu_demand + children) / share)
                    .min(f64::from(p.threads.max(1)) + children),
                cpus,
                ran_on,
            }
        })
        .collect()
}

/// The least share of its ticks a CPU is taken to have counted: below it, a reading is
/// a clock that stalled rather than a host that descheduled it.
const MIN_COUNTED: f64 = 0.25;

/// What others' work that cannot move needs of a busy unselected process (`ran`: CPUs'
/// worth since its last read; `entry` already saw this pass's stat, and keeps the wait
/// read here for the next). Nothing if its status cannot be read (gone, or a kernel
/// that hides it), as it is not ours to report on; without schedstat, what it ran.
///
/// Waiting is summed over every thread up to [`OTHERS_THREADS_SUMMED`]: a worker
/// beside a main thread that only waits for it (most programs) waits in its own
/// schedstat, and counting the main thread's alone read three loads on two CPUs as
/// two, so a hard pin beside them never backed off. Beyond that many threads, the
/// main thread's alone, a lower bound, for what one read per thread would cost.
fn unselected(
    dir: &ProcDir,
    entry: &mut Entry,
    ran: f64,
    threads: u32,
    ctx: &PassContext<'_>,
) -> Option<Unselected> {
    let before = entry.waited.take();
    let cpus = dir.status().ok()??.cpus_allowed?.intersection(&ctx.machine);
    let summed = (2..=OTHERS_THREADS_SUMMED).contains(&threads);
    let wait = if summed {
        dir.run_delay().ok().flatten().map(|d| d.wait_ns)
    } else {
        dir.main_thread_wait().ok().flatten()
    };
    entry.waited = wait.map(|w| (w, ctx.uptime, summed));
    // From the last read, or over its lifetime at a first (a lower bound for one that
    // just turned busy) or where the last read summed other threads.
    let (w0, t0) = before
        .filter(|b| b.2 == summed)
        .map_or((0, entry.start_time() as f64 / ctx.tps), |b| (b.0, b.1));
    let at = |wait_ns| RunDelay {
        wait_ns,
        ..RunDelay::default()
    };
    let waited = wait.map_or(0.0, |w| waiting_threads(at(w0), at(w), ctx.uptime - t0));
    (!cpus.is_empty()).then_some(Unselected {
        demand: ran + waited,
        cpus,
    })
}

/// Threads of an unselected busy process whose run-queue waits are summed (one
/// `schedstat` and one `stat` read each): see `unselected`.
pub const OTHERS_THREADS_SUMMED: u32 = 16;

/// CPUs' worth of CPU time a process used since its last read.
#[derive(Debug, Clone, Copy, Default)]
struct Demand {
    /// Its own threads' (see [`demand`]).
    own: f64,
    /// Its waited-for children's (see [`children_demand`]).
    children: f64,
}

/// CPUs' worth of CPU time the children a process waited for used since `before`
/// (its last read): 0 at first sight, as their lifetime total may be from children
/// long gone. Bounded by the machine's CPUs: a long-lived child reaped between reads
/// brings its whole life into one reading, which only makes others' work read low
/// for one pass (the side that costs a hard pin's benefit, never a process's rate).
fn children_demand(stat: &Stat, before: Option<&Entry>, ctx: &PassContext<'_>) -> f64 {
    let Some(e) = before else {
        return 0.0;
    };
    let secs = ctx.uptime - e.read_uptime;
    let d = stat.child_ticks.saturating_sub(e.child_ticks) as f64 / ctx.tps / secs;
    if secs > 0.0 && d.is_finite() {
        d.clamp(0.0, ctx.machine.len() as f64)
    } else {
        0.0
    }
}

/// CPUs' worth of CPU time since `before` (CPU ticks and uptime of the last read; see
/// [`DemandBasis`]); never negative, never more than the process has threads.
fn demand(stat: &Stat, before: Option<(u64, f64)>, uptime: f64, tps: f64) -> f64 {
    let started = stat.start_time as f64 / tps;
    let life = (uptime - started).max(0.0);
    let (ticks, secs) = match before {
        Some((t0, then)) => (stat.cpu_ticks.saturating_sub(t0), (uptime - then).max(0.0)),
        // First sight (new since the last pass, or unreadable then): its whole life.
        None => (stat.cpu_ticks, life),
    };
    if secs <= 0.0 {
        return 0.0;
    }
    let d = ticks as f64 / tps / secs;
    if d.is_finite() {
        d.clamp(0.0, f64::from(stat.num_threads.max(1)))
    } else {
        0.0
    }
}

/// The snapshot's view of a process; `None` if none of the CPUs it may use is in the
/// topology.
fn to_process(
    info: &ProcInfo,
    demand: f64,
    topology: &Topology,
    machine: &CpuSet,
) -> Option<Process> {
    // The name every later stage shows; the raw `comm` is only matched (selection).
    let mut p = Process::new(info.pid(), &super::printable::printable(&info.stat.comm));
    p.start_time = info.stat.start_time;
    let threads = if info.threads.is_empty() {
        info.stat.num_threads
    } else {
        info.threads.len() as u32
    };
    p.threads = threads.max(1);
    // The demand was bounded by stat's thread count, which a thread list read later
    // can undercut: a snapshot's demand is never more than its threads.
    p.cpu_demand = demand.min(f64::from(p.threads));
    p.parent = (info.stat.ppid != 0).then_some(info.stat.ppid);
    // Memory on a node the topology does not know (it was built from another view
    // of the machine) cannot be planned for; it is left out rather than failing the
    // snapshot's validation.
    if let Some(m) = &info.numa_maps {
        p.memory_bytes = m
            .node_bytes
            .iter()
            .filter(|(n, b)| **b > 0 && topology.node_index(**n).is_some())
            .map(|(n, b)| (*n, *b))
            .collect::<BTreeMap<_, _>>();
        p.policy_bytes = m.unscanned_bytes.min(p.rss_bytes());
    }
    // Where its threads last ran: a sample of where it runs now, which is what
    // migration cost is judged against (the allowed set says where it could run).
    p.current_cpus = info
        .last_cpus()
        .into_iter()
        .filter(|c| topology.cpu(*c).is_some())
        .collect();
    // A foreign pin is an allowed set that leaves out some CPU of the machine; the
    // kernel's default set often lists possible-but-offline CPUs too, which is not a
    // pin.
    if let Some(allowed) = &info.cpus_allowed {
        if machine.iter().any(|c| allowed.binary_search(c).is_err()) {
            let inside: CpuSet = allowed
                .iter()
                .copied()
                .filter(|c| topology.cpu(*c).is_some())
                .collect();
            if inside.is_empty() {
                return None;
            }
            p.allowed_cpus = Some(inside);
        }
    }
    // Likewise memory: a cpuset's mems narrower than the machine's nodes.
    if let Some(mems) = &info.mems_allowed {
        let nodes: Vec<NodeId> = topology.nodes().iter().map(|n| n.id).collect();
        if nodes.iter().any(|n| !mems.contains(n)) {
            p.allowed_mems = Some(nodes.into_iter().filter(|n| mems.contains(n)).collect());
        }
    }
    Some(p)
}

fn read_uptime(root: &Path) -> Result<f64, ObserveError> {
    let path = root.join("uptime");
    let text = std::fs::read_to_string(&path).map_err(|err| ObserveError::Io {
        path: path.clone(),
        err,
    })?;
    text.split_whitespace()
        .next()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| {
            ObserveError::parse(
                &path,
                Some(1),
                format!("{:?} is not an uptime", text.trim()),
            )
        })
}
