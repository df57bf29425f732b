//! Characterising the processes of a live observation: the daemon's and `plan`'s
//! bridge from what was observed to the MPKI and NUMA penalty policies rank on.
//!
//! Per process and epoch: hardware counters (when the machine has them) give this
//! epoch's MPKI and CPI; the profile store gives what was learned from the program's
//! earlier runs and what the user supplied; [`super::resolve`] picks each number from
//! the best source. What the counters measure is also *learned*: CPI on local versus
//! remote epochs becomes the program's NUMA penalty (Majo & Gross's definition), MPKI a
//! running mean. Writes are buffered and flushed per program every
//! [`LiveConfig::flush_every`] epochs, so a daemon managing hundreds of processes does
//! not commit to SQLite hundreds of times a second. A batch the store refuses (a full
//! disk, a filesystem remounted read-only) is kept and written at a later flush, within
//! [`MAX_PENDING_EPOCHS`] and [`MAX_PENDING_PROGRAMS`].
//!
//! Without counters and without a profile a process cannot be characterised; it is
//! then planned for locality alone (its memory from numa_maps, or from the kernel's
//! NUMA hinting faults when numa_maps is unreadable), and reported as such.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::store::{LearnParams, Quantity, Store, StoreError};
use crate::observe::resctrl::{bandwidth_by_process, Resctrl};
use crate::observe::{with_info_mut, CounterError, CounterSource, Observation, ProcInfo};
use numasched_model::character::{resolve, Evidence, PenaltySource};
use numasched_model::{Process, ProcessKey, Snapshot};

/// Epochs of one program kept while the store cannot be written (a full disk, a
/// filesystem remounted read-only). Ten minutes at the default one-second interval:
/// time for an operator to free space or remount without anything learned being lost,
/// while a store that never recovers costs at most this many samples per program
/// instead of memory growing for as long as the daemon runs. The oldest go first: the
/// store's estimate lets old epochs fade anyway ([`LearnParams::max_samples`]).
pub const MAX_PENDING_EPOCHS: usize = 600;

/// Programs whose unwritten samples are kept, for the same reason: with both bounds a
/// store that never recovers holds about 10 MB at most, however many distinct programs
/// come and go. The programs seen least recently are dropped first.
pub const MAX_PENDING_PROGRAMS: usize = 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct LiveConfig {
    /// Record what counters measure into the store (the daemon does; `plan` does not).
    pub learn: bool,
    /// Epochs between two writes of a program's buffered samples.
    pub flush_every: u64,
    /// Epochs a program's stored profile is trusted before it is read again, so that a
    /// `profile set` while the daemon runs takes effect.
    pub refresh_every: u64,
    pub learn_params: LearnParams,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            learn: true,
            flush_every: 30,
            refresh_every: 60,
            learn_params: LearnParams::default(),
        }
    }
}

/// What is known about one process after characterisation, for logs and `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Characterised {
    #[serde(flatten)]
    pub key: ProcessKey,
    pub mpki: Option<f64>,
    pub numa_penalty: Option<f64>,
    pub source: PenaltySource,
    /// Where a `measured` penalty came from ("measured 2026-11-28: penalty 0.42 ±
    /// 0.03"); `None` for every other source.
    pub basis: Option<String>,
    /// CPI over the last epoch, from counters.
    pub cpi: Option<f64>,
    /// Share of its threads that last ran on the node holding most of its memory.
    pub local_fraction: Option<f64>,
    /// Where its per-node memory came from: `numa_maps`, `hinting faults`, or none.
    pub memory_from: &'static str,
    /// DRAM bandwidth over the last epoch, GB/s, from resctrl MBM (when the process
    /// has a monitoring group of its own).
    pub bandwidth_gbps: Option<f64>,
    /// Share of that bandwidth that went to remote memory.
    pub remote_fraction: Option<f64>,
}

#[derive(Debug, Default)]
struct Pending {
    /// (CPI, local fraction) per epoch.
    epochs: Vec<(f64, f64)>,
    mpki_sum: f64,
    mpki_n: u64,
    /// The last epoch a sample was buffered: which programs to drop first.
    last_epoch: u64,
}

impl Pending {
    fn samples(&self) -> u64 {
        self.epochs.len() as u64 + self.mpki_n
    }
}

/// Problems the caller should log once; none stops characterisation.
#[derive(Debug, Default)]
pub struct Notes {
    pub store_errors: Vec<String>,
    pub counter_errors: Vec<String>,
}

/// See the module documentation.
pub struct Live {
    config: LiveConfig,
    counters: Option<Box<dyn CounterSource + Send>>,
    store: Option<Store>,
    resctrl: Option<Resctrl>,
    /// Program → evidence from the store, and the epoch it was read.
    profiles: HashMap<String, (Evidence, Option<String>, u64)>,
    pending: HashMap<String, Pending>,
    attached: HashSet<ProcessKey>,
    epoch: u64,
}

impl Live {
    pub fn new(
        config: LiveConfig,
        counters: Option<Box<dyn CounterSource + Send>>,
        store: Option<Store>,
    ) -> Live {
        Live {
            config,
            counters,
            store,
            resctrl: None,
            profiles: HashMap::new(),
            pending: HashMap::new(),
            attached: HashSet::new(),
            epoch: 0,
        }
    }

    /// Reads memory bandwidth per process from resctrl monitoring groups.
    pub fn with_resctrl(mut self, resctrl: Resctrl) -> Live {
        self.resctrl = Some(resctrl);
        self
    }

    pub fn has_counters(&self) -> bool {
        self.counters.is_some()
    }

    pub fn has_store(&self) -> bool {
        self.store.is_some()
    }

    /// Fills `mpki` and `numa_penalty` of every process of the observation's snapshot
    /// (and its memory from hinting faults where numa_maps was unreadable); returns one
    /// record per process, in snapshot order. `now` is Unix seconds, for the store.
    pub fn characterise(&mut self, obs: &mut Observation, now: i64) -> (Vec<Characterised>, Notes) {
        self.epoch += 1;
        let mut notes = Notes::default();
        self.detach_gone(&obs.snapshot);
        let mut out = Vec::with_capacity(obs.snapshot.processes.len());
        let bandwidth = self.bandwidth(obs, &mut notes);
        let topo = &obs.snapshot.topology;
        for (p, info) in with_info_mut(&mut obs.snapshot.processes, &obs.details) {
            let bw = bandwidth.get(&p.pid);
            if let Some(b) = bw {
                p.bandwidth_gbps = Some(b.gbps);
            }
            let memory_from = memory_source(p, info, topo);
            let sample = self.sample(p, info, &mut notes);
            let (mut ev, measured) = self.stored(&p.program, &mut notes);
            ev.measured_mpki = sample.and_then(|s| s.mpki()).or(p.mpki);
            ev.measured_np = p.numa_penalty;
            let c = resolve(&ev);
            let known = c.source != PenaltySource::Unknown;
            p.mpki = known.then_some(c.mpki);
            p.numa_penalty = known.then_some(c.numa_penalty);
            let local_fraction = local_fraction(p, topo);
            let cpi = sample.and_then(|s| s.cpi());
            if self.config.learn {
                self.buffer(&p.program, ev.measured_mpki, cpi, local_fraction);
            }
            out.push(Characterised {
                key: p.key(),
                mpki: p.mpki,
                numa_penalty: p.numa_penalty,
                source: c.source,
                basis: measured.filter(|_| c.source == PenaltySource::Measured),
                cpi,
                local_fraction,
                memory_from,
                bandwidth_gbps: bw.map(|b| b.gbps),
                remote_fraction: bw.and_then(|b| b.remote_fraction),
            });
        }
        if self.epoch % self.config.flush_every.max(1) == 0 {
            self.flush(now, &mut notes);
        }
        (out, notes)
    }

    /// Writes every buffered sample (also called on shutdown). A write the store
    /// refuses for a reason that may pass (full, read-only, locked) keeps its samples
    /// for the next flush, merged with those buffered meanwhile; the note says so.
    pub fn flush(&mut self, now: i64, notes: &mut Notes) {
        self.flush_with(now, notes, false);
    }

    /// The last flush, at shutdown: what the store refuses now has no next try, and
    /// the note says it is lost rather than kept.
    pub fn flush_final(&mut self, now: i64, notes: &mut Notes) {
        self.flush_with(now, notes, true);
        self.pending.clear();
    }

    fn flush_with(&mut self, now: i64, notes: &mut Notes, last: bool) {
        let Some(store) = self.store.as_mut() else {
            self.pending.clear();
            return;
        };
        // One note per distinct error, with the number of programs it held back: a
        // full disk fails every program's write the same way.
        let mut held: BTreeMap<String, usize> = BTreeMap::new();
        // Set by a failure every other write would meet too: the rest is then kept
        // untried, rather than, for a locked store, waiting out the lock per program.
        let mut stalled: Option<String> = None;
        for (program, p) in std::mem::take(&mut self.pending) {
            if let Some(e) = &stalled {
                *held.entry(e.clone()).or_default() += 1;
                self.pending.insert(program, p);
                continue;
            }
            let mut keep = Pending {
                last_epoch: p.last_epoch,
                ..Pending::default()
            };
            let mut errors: Vec<String> = Vec::new();
            if p.mpki_n > 0 {
                let mean = p.mpki_sum / p.mpki_n as f64;
                if let Err(e) = store.learn(&program, Quantity::Mpki, mean, now) {
                    if failed_write(e, notes, &mut errors, &mut stalled) {
                        keep.mpki_sum = p.mpki_sum;
                        keep.mpki_n = p.mpki_n;
                    }
                }
            }
            if !p.epochs.is_empty() {
                if stalled.is_some() {
                    keep.epochs = p.epochs;
                } else {
                    match store.observe_epochs(&program, &p.epochs, now, &self.config.learn_params)
                    {
                        Ok(_) => {
                            // Re-read next epoch: a penalty may just have been learned.
                            self.profiles.remove(&program);
                        }
                        Err(e) => {
                            if failed_write(e, notes, &mut errors, &mut stalled) {
                                keep.epochs = p.epochs;
                            }
                        }
                    }
                }
            }
            errors.dedup();
            for e in errors {
                *held.entry(e).or_default() += 1;
            }
            if keep.samples() > 0 {
                self.pending.insert(program, keep);
            }
        }
        for (e, programs) in held {
            let s = if programs == 1 { "" } else { "s" };
            notes.store_errors.push(if last {
                format!("{e}; the daemon is stopping, so the unwritten samples of {programs} program{s} are lost")
            } else {
                format!("{e}; kept the unwritten samples of {programs} program{s} in memory for another try")
            });
        }
        if last {
            return;
        }
        let path = store.path().to_path_buf();
        let dropped = self.bound_pending();
        if dropped > 0 {
            notes.store_errors.push(format!(
                "{}: the profile store has not taken writes for a while; dropped the {dropped} oldest unwritten samples (at most {MAX_PENDING_EPOCHS} epochs for each of {MAX_PENDING_PROGRAMS} programs are kept)",
                path.display()
            ));
        }
    }

    /// Trims what is kept for a store that cannot be written to the bounds; returns
    /// the number of samples dropped.
    fn bound_pending(&mut self) -> u64 {
        let mut dropped = 0;
        for p in self.pending.values_mut() {
            let excess = p.epochs.len().saturating_sub(MAX_PENDING_EPOCHS);
            if excess > 0 {
                p.epochs.drain(..excess);
                dropped += excess as u64;
            }
        }
        let excess = self.pending.len().saturating_sub(MAX_PENDING_PROGRAMS);
        if excess > 0 {
            let mut by_age: Vec<(u64, String)> = self
                .pending
                .iter()
                .map(|(program, p)| (p.last_epoch, program.clone()))
                .collect();
            by_age.sort();
            for (_, program) in by_age.into_iter().take(excess) {
                if let Some(p) = self.pending.remove(&program) {
                    dropped += p.samples();
                }
            }
        }
        dropped
    }

    /// This epoch's bandwidth per pid from resctrl; the time base is the pass's
    /// uptime, a monotonic clock.
    fn bandwidth(
        &mut self,
        obs: &Observation,
        notes: &mut Notes,
    ) -> HashMap<u32, crate::observe::resctrl::ProcessBandwidth> {
        let Some(r) = self.resctrl.as_mut() else {
            return HashMap::new();
        };
        let samples = match r.sample(obs.uptime) {
            Ok(s) => s,
            Err(e) => {
                notes.counter_errors.push(format!("resctrl: {e}"));
                return HashMap::new();
            }
        };
        let mut tgid: HashMap<u32, u32> = HashMap::new();
        for info in obs.details.values() {
            tgid.insert(info.pid(), info.pid());
            for t in &info.threads {
                tgid.insert(t.tid, info.pid());
            }
        }
        bandwidth_by_process(&samples, |tid| tgid.get(&tid).copied())
    }

    fn detach_gone(&mut self, snapshot: &Snapshot) {
        let Some(counters) = self.counters.as_mut() else {
            return;
        };
        let live: HashSet<ProcessKey> = snapshot.processes.iter().map(Process::key).collect();
        for key in self.attached.difference(&live).copied().collect::<Vec<_>>() {
            counters.detach(key.pid);
            self.attached.remove(&key);
        }
    }

    /// This epoch's counts. The first epoch of a process only attaches: a delta needs
    /// two readings.
    fn sample(
        &mut self,
        p: &Process,
        info: &ProcInfo,
        notes: &mut Notes,
    ) -> Option<crate::observe::CounterSample> {
        let counters = self.counters.as_mut()?;
        let key = p.key();
        if !self.attached.contains(&key) {
            match counters.attach(p.pid, p.start_time, &info.tids()) {
                Ok(()) => {
                    self.attached.insert(key);
                }
                Err(CounterError::Gone { .. }) => {}
                Err(e) => notes.counter_errors.push(e.to_string()),
            }
            return None;
        }
        match counters.delta(p.pid) {
            Ok(s) => Some(s),
            Err(CounterError::Gone { .. }) => None,
            Err(e) => {
                notes.counter_errors.push(e.to_string());
                None
            }
        }
    }

    /// Learned, given and measured evidence for a program, cached for `refresh_every`
    /// epochs, with what its `profile measure` session says of itself.
    fn stored(&mut self, program: &str, notes: &mut Notes) -> (Evidence, Option<String>) {
        let Some(store) = self.store.as_ref() else {
            return (Evidence::default(), None);
        };
        if let Some((ev, basis, at)) = self.profiles.get(program) {
            if self.epoch.saturating_sub(*at) < self.config.refresh_every {
                return (*ev, basis.clone());
            }
        }
        let (ev, basis) = match store.get(program) {
            Ok(Some(p)) => (p.evidence(), p.measured.as_ref().map(|m| m.describe())),
            Ok(None) => (Evidence::default(), None),
            Err(e) => {
                notes.store_errors.push(e.to_string());
                (Evidence::default(), None)
            }
        };
        self.profiles
            .insert(program.to_string(), (ev, basis.clone(), self.epoch));
        (ev, basis)
    }

    fn buffer(
        &mut self,
        program: &str,
        mpki: Option<f64>,
        cpi: Option<f64>,
        local_fraction: Option<f64>,
    ) {
        if mpki.is_none() && cpi.is_none() {
            return;
        }
        let p = self.pending.entry(program.to_string()).or_default();
        p.last_epoch = self.epoch;
        if let Some(m) = mpki.filter(|m| m.is_finite() && *m >= 0.0) {
            p.mpki_sum += m;
            p.mpki_n += 1;
        }
        if let (Some(c), Some(f)) = (cpi.filter(|c| c.is_finite() && *c > 0.0), local_fraction) {
            p.epochs.push((c, f));
        }
    }
}

/// Sorts out a write the store refused; `true` when its samples are to be kept for
/// another try. A value the store refuses ([`StoreError::Invalid`]) would be refused
/// again: reported, dropped. Anything else (full, read-only, locked, failing) may pass;
/// a full, read-only or locked store fails every write alike, so it also stalls the
/// rest of the flush.
fn failed_write(
    e: StoreError,
    notes: &mut Notes,
    errors: &mut Vec<String>,
    stalled: &mut Option<String>,
) -> bool {
    let line = e.to_string();
    match e {
        StoreError::Invalid { .. } | StoreError::File(_) => {
            notes.store_errors.push(line);
            false
        }
        StoreError::Full { .. } | StoreError::NotWritable { .. } | StoreError::Locked { .. } => {
            *stalled = Some(line.clone());
            errors.push(line);
            true
        }
        _ => {
            errors.push(line);
            true
        }
    }
}

/// Fills a process's per-node memory from its NUMA hinting faults when numa_maps gave
/// nothing: the faults are a sample of the pages it touches, so its RSS is split in
/// their proportions. Says where the memory picture came from.
fn memory_source(
    p: &mut Process,
    info: &ProcInfo,
    topo: &numasched_model::topology::Topology,
) -> &'static str {
    if !p.memory_bytes.is_empty() {
        return "numa_maps";
    }
    let faults: BTreeMap<_, u64> = info
        .numa_faults
        .iter()
        .filter(|(n, f)| f.task_total() > 0 && topo.node_index(**n).is_some())
        .map(|(n, f)| (*n, f.task_total()))
        .collect();
    let total: u64 = faults.values().sum();
    if total == 0 || info.rss_bytes == 0 {
        return "none";
    }
    p.memory_bytes = faults
        .into_iter()
        .map(|(n, f)| (n, (info.rss_bytes as f64 * f as f64 / total as f64) as u64))
        .collect();
    "hinting faults"
}

/// Share of the process's threads whose last CPU is on its home node.
fn local_fraction(p: &Process, topo: &numasched_model::topology::Topology) -> Option<f64> {
    let home = p.home_node()?;
    if p.current_cpus.is_empty() {
        return None;
    }
    let on_home = p
        .current_cpus
        .iter()
        .filter(|c| {
            topo.cpu(**c)
                .is_some_and(|cpu| topo.nodes()[cpu.node].id == home)
        })
        .count();
    Some(on_home as f64 / p.current_cpus.len() as f64)
}

#[cfg(test)]
mod tests;
