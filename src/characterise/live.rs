//! Characterising the processes of a live observation: the daemon's and `plan`'s
//! bridge from what was observed to the MPKI and NUMA penalty policies rank on.
//!
//! Per process and epoch: hardware counters (when the machine has them) give this
//! epoch's MPKI and CPI; the profile store gives what was learned from the program's
//! earlier runs and what the user supplied; [`super::resolve`] picks each number from
//! the best source. What the counters measure is also *learned*: CPI on local versus
//! remote epochs becomes the program's NUMA penalty (SPEC §1.1's definition), MPKI a
//! running mean. Writes are buffered and flushed per program every
//! [`LiveConfig::flush_every`] epochs, so a daemon managing hundreds of processes does
//! not commit to SQLite hundreds of times a second.
//!
//! Without counters and without a profile a process cannot be characterised; it is
//! then planned for locality alone (its memory from numa_maps, or from the kernel's
//! NUMA hinting faults when numa_maps is unreadable), and reported as such.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::store::{LearnParams, Quantity, Store};
use super::{resolve, Evidence, PenaltySource};
use crate::observe::resctrl::{bandwidth_by_process, Resctrl};
use crate::observe::{CounterError, CounterSource, Observation, ProcInfo};
use crate::policy::{Process, Snapshot};

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
    pub pid: u32,
    pub mpki: Option<f64>,
    pub numa_penalty: Option<f64>,
    pub source: PenaltySource,
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
    profiles: HashMap<String, (Evidence, u64)>,
    pending: HashMap<String, Pending>,
    attached: HashSet<(u32, u64)>,
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
        for (p, info) in obs.snapshot.processes.iter_mut().zip(&obs.details) {
            let bw = bandwidth.get(&p.pid);
            if let Some(b) = bw {
                p.bandwidth_gbps = Some(b.gbps);
            }
            let memory_from = memory_source(p, info, topo);
            let sample = self.sample(p, info, &mut notes);
            let mut ev = self.stored(&p.program, &mut notes);
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
                pid: p.pid,
                mpki: p.mpki,
                numa_penalty: p.numa_penalty,
                source: c.source,
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

    /// Writes every buffered sample (also called on shutdown).
    pub fn flush(&mut self, now: i64, notes: &mut Notes) {
        let Some(store) = self.store.as_mut() else {
            self.pending.clear();
            return;
        };
        for (program, p) in self.pending.drain() {
            if p.mpki_n > 0 {
                let mean = p.mpki_sum / p.mpki_n as f64;
                if let Err(e) = store.learn(&program, Quantity::Mpki, mean, now) {
                    notes.store_errors.push(e.to_string());
                }
            }
            if !p.epochs.is_empty() {
                match store.observe_epochs(&program, &p.epochs, now, &self.config.learn_params) {
                    Ok(_) => {
                        // Re-read next epoch: a penalty may just have been learned.
                        self.profiles.remove(&program);
                    }
                    Err(e) => notes.store_errors.push(e.to_string()),
                }
            }
        }
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
        for info in &obs.details {
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
        let live: HashSet<(u32, u64)> = snapshot
            .processes
            .iter()
            .map(|p| (p.pid, p.start_time))
            .collect();
        for key in self.attached.difference(&live).copied().collect::<Vec<_>>() {
            counters.detach(key.0);
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
        let key = (p.pid, p.start_time);
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

    /// Learned and given evidence for a program, cached for `refresh_every` epochs.
    fn stored(&mut self, program: &str, notes: &mut Notes) -> Evidence {
        let Some(store) = self.store.as_ref() else {
            return Evidence::default();
        };
        if let Some((ev, at)) = self.profiles.get(program) {
            if self.epoch.saturating_sub(*at) < self.config.refresh_every {
                return *ev;
            }
        }
        let ev = match store.get(program) {
            Ok(Some(p)) => p.evidence(),
            Ok(None) => Evidence::default(),
            Err(e) => {
                notes.store_errors.push(e.to_string());
                Evidence::default()
            }
        };
        self.profiles.insert(program.to_string(), (ev, self.epoch));
        ev
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
        if let Some(m) = mpki.filter(|m| m.is_finite() && *m >= 0.0) {
            p.mpki_sum += m;
            p.mpki_n += 1;
        }
        if let (Some(c), Some(f)) = (cpi.filter(|c| c.is_finite() && *c > 0.0), local_fraction) {
            p.epochs.push((c, f));
        }
    }
}

/// Fills a process's per-node memory from its NUMA hinting faults when numa_maps gave
/// nothing: the faults are a sample of the pages it touches, so its RSS is split in
/// their proportions. Says where the memory picture came from.
fn memory_source(
    p: &mut Process,
    info: &ProcInfo,
    topo: &crate::topology::Topology,
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
fn local_fraction(p: &Process, topo: &crate::topology::Topology) -> Option<f64> {
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
mod tests {
    use super::*;
    use crate::observe::fakeproc::{FakeProc, FakeProcess};
    use crate::observe::{CounterSample, ScanConfig, Scanner};
    use crate::topology::Topology;
    use std::sync::{Arc, Mutex};

    /// Counters whose deltas the test sets per pid.
    #[derive(Clone, Default)]
    struct Scripted(Arc<Mutex<HashMap<u32, CounterSample>>>);

    impl CounterSource for Scripted {
        fn attach(&mut self, _: u32, _: u64, _: &[u32]) -> Result<(), CounterError> {
            Ok(())
        }
        fn detach(&mut self, pid: u32) {
            self.0.lock().expect("lock").remove(&pid);
        }
        fn delta(&mut self, pid: u32) -> Result<CounterSample, CounterError> {
            self.0
                .lock()
                .expect("lock")
                .get(&pid)
                .copied()
                .ok_or(CounterError::Gone { pid })
        }
        fn attached(&self) -> usize {
            0
        }
    }

    fn topo() -> Topology {
        crate::topology::spec::parse("2n:1l:2c:1t").expect("spec")
    }

    fn scan(fake: &FakeProc) -> Observation {
        let mut s = Scanner::new(ScanConfig {
            proc_root: fake.root().to_path_buf(),
            exclude: Default::default(),
            ..ScanConfig::default()
        });
        s.scan(&topo()).expect("scan")
    }

    #[test]
    fn counters_then_store_then_regression_then_unknown() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = FakeProc::new(&dir.path().join("proc")).expect("fake");
        fake.add(&FakeProcess::new(100, "measured").pages(&[(0, 100)]))
            .expect("add");
        fake.add(&FakeProcess::new(101, "profiled").pages(&[(0, 100)]))
            .expect("add");
        fake.add(&FakeProcess::new(102, "stranger").pages(&[(1, 100)]))
            .expect("add");
        let mut store = Store::open(&dir.path().join("p.db")).expect("store");
        store
            .set_given(
                "profiled",
                &super::super::store::GivenProfile {
                    mpki: Some(20.0),
                    numa_penalty: Some(1.4),
                    ..Default::default()
                },
                1,
            )
            .expect("set");
        let counts = Scripted::default();
        counts.0.lock().expect("lock").insert(
            100,
            CounterSample {
                instructions: 1_000_000,
                cycles: 2_000_000,
                llc_misses: 10_000,
            },
        );
        let mut live = Live::new(LiveConfig::default(), Some(Box::new(counts)), Some(store));
        let mut obs = scan(&fake);
        let (first, _) = live.characterise(&mut obs, 10);
        assert_eq!(first[0].source, PenaltySource::Unknown, "attach only");
        let mut obs = scan(&fake);
        let (c, notes) = live.characterise(&mut obs, 11);
        assert!(notes.store_errors.is_empty() && notes.counter_errors.is_empty());
        assert_eq!(c[0].source, PenaltySource::Regression);
        assert_eq!(c[0].mpki, Some(10.0));
        assert_eq!(c[0].cpi, Some(2.0));
        assert_eq!(obs.snapshot.processes[0].mpki, Some(10.0));
        assert_eq!(c[1].source, PenaltySource::Profile);
        assert_eq!(obs.snapshot.processes[1].numa_penalty, Some(1.4));
        assert_eq!(c[2].source, PenaltySource::Unknown);
        assert_eq!(obs.snapshot.processes[2].mpki, None);
        assert_eq!(c[2].memory_from, "numa_maps");
    }

    #[test]
    fn learned_samples_reach_the_store_in_batches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = FakeProc::new(&dir.path().join("proc")).expect("fake");
        fake.add(
            &FakeProcess::new(100, "milc")
                .threads_on(&[0])
                .pages(&[(0, 100)]),
        )
        .expect("add");
        let db = dir.path().join("p.db");
        let counts = Scripted::default();
        counts.0.lock().expect("lock").insert(
            100,
            CounterSample {
                instructions: 1000,
                cycles: 1000,
                llc_misses: 20,
            },
        );
        let mut live = Live::new(
            LiveConfig {
                flush_every: 4,
                ..LiveConfig::default()
            },
            Some(Box::new(counts)),
            Some(Store::open(&db).expect("store")),
        );
        for now in 0..3 {
            let mut obs = scan(&fake);
            live.characterise(&mut obs, now);
        }
        let peek = Store::open(&db).expect("reopen");
        assert!(peek.get("milc").expect("get").is_none(), "not yet flushed");
        let mut obs = scan(&fake);
        live.characterise(&mut obs, 3);
        let h = peek.numa_history("milc").expect("history").expect("some");
        assert_eq!(h.local.n, 3, "three local epochs with counts, one batch");
        let p = peek.get("milc").expect("get").expect("some");
        assert_eq!(p.mpki.best().map(|(v, _)| v), Some(20.0));
    }

    #[test]
    fn hinting_faults_stand_in_for_unreadable_numa_maps() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = FakeProc::new(&dir.path().join("proc")).expect("fake");
        let mut p = FakeProcess::new(100, "x").threads_on(&[2]);
        p.rss_pages = 1000; // resident, but numa_maps (empty here) says nothing
        fake.add(&p).expect("add");
        fake.write(
            100,
            "sched",
            "numa_faults node=0 task_private=30 task_shared=0 group_private=0 group_shared=0\n\
             numa_faults node=1 task_private=90 task_shared=0 group_private=0 group_shared=0\n",
        )
        .expect("write");
        let mut obs = scan(&fake);
        assert!(obs.snapshot.processes[0].memory_bytes.is_empty());
        let mut live = Live::new(LiveConfig::default(), None, None);
        let (c, _) = live.characterise(&mut obs, 1);
        let p = &obs.snapshot.processes[0];
        assert_eq!(c[0].memory_from, "hinting faults");
        assert_eq!(p.home_node(), Some(1));
        let m = &p.memory_bytes;
        assert_eq!(m[&1], 3 * m[&0], "split 1:3 like the faults");
        assert_eq!(c[0].local_fraction, Some(1.0), "runs on CPU 2, node 1");
    }

    #[test]
    fn resctrl_bandwidth_reaches_the_snapshot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = FakeProc::new(&dir.path().join("proc")).expect("fake");
        fake.add(&FakeProcess::new(100, "lbm").pages(&[(0, 100)]))
            .expect("add");
        let rc = dir.path().join("resctrl");
        let group = rc.join("mon_groups/lbm");
        let domain = group.join("mon_data/mon_L3_00");
        std::fs::create_dir_all(&domain).expect("mkdir");
        std::fs::create_dir_all(rc.join("info")).expect("mkdir");
        std::fs::write(rc.join("tasks"), "1\n").expect("write");
        std::fs::write(group.join("tasks"), "100\n").expect("write");
        let counters = |total: u64, local: u64| {
            std::fs::write(domain.join("mbm_total_bytes"), total.to_string()).expect("w");
            std::fs::write(domain.join("mbm_local_bytes"), local.to_string()).expect("w");
        };
        counters(0, 0);
        let mut live = Live::new(LiveConfig::default(), None, None).with_resctrl(Resctrl::new(&rc));
        let mut obs = scan(&fake);
        let (c, notes) = live.characterise(&mut obs, 1);
        assert!(
            notes.counter_errors.is_empty(),
            "{:?}",
            notes.counter_errors
        );
        assert_eq!(c[0].bandwidth_gbps, None, "a rate needs two readings");
        fake.set_uptime(102.0).expect("uptime");
        counters(8_000_000_000, 6_000_000_000); // 8 GB in 2 s, a quarter remote
        let mut obs = scan(&fake);
        let (c, _) = live.characterise(&mut obs, 2);
        assert_eq!(c[0].bandwidth_gbps, Some(4.0));
        assert_eq!(c[0].remote_fraction, Some(0.25));
        assert_eq!(obs.snapshot.processes[0].bandwidth_gbps, Some(4.0));
    }
}
