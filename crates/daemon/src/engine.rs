//! One epoch of the live pipeline: observe → characterise → (re-plan?) → apply.
//!
//! The engine holds the state that links epochs (who is managed, what was last
//! applied, the trigger's baseline) and nothing that waits or sleeps: the caller
//! passes the time. The kernel is a [`Kernel`] and the procfs root a path, so the same
//! engine runs the daemon, `plan`, `run` and tests on a fake procfs with a fake kernel.
//!
//! Managed processes leave in three ways, each restoring what numasched changed: they
//! exit (their journal entry is forgotten), they stop matching the identity rules
//! (exec'd another program, moved cgroup), or they stay below the admission thresholds
//! for `release_after` seconds (seconds, not epochs: an idle machine's epochs stretch).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use super::jobs::{Confined, Jobs};
use super::need::{Need, Needs, Reading};
use super::queued::Narrowed;
use super::recovery::{JournalFile, RecoveryError};
use super::select::{self, Managed, Selector, Tree};
use super::stabilise::stabilise;
use super::status::{DaemonStatus, Decision, ProcessView};
use super::step_reports::TaskSeen;
use super::trigger::{self, Trigger, TriggerParams};
use numasched_linux::apply::report::Subject;
use numasched_linux::apply::{Action, Actuator, ApplyReport, Journal, Kernel, Line, Restored};
use numasched_linux::characterise::live::{Characterised, Live};
use numasched_linux::observe::slurm::JobMode;
use numasched_linux::observe::{
    with_info_mut, Changed, Observation, ObserveError, ProcDir, Scanner,
};
use numasched_model::character::PenaltySource;
use numasched_model::topology::{NodeId, Topology};
use numasched_model::CpuSet;
use numasched_model::{Placement, Plan, Process, ProcessKey, Snapshot};
use numasched_policy::Policy;

/// Decisions kept for `status`.
const DECISIONS_KEPT: usize = 200;

/// Epochs between two sweeps of the journal for processes that exited.
const SWEEP_EVERY: u64 = 10;

pub struct EngineConfig {
    pub trigger: TriggerParams,
    /// Seconds below the admission thresholds before a managed process is released.
    pub release_after: f64,
    pub min_cpu: f64,
    pub min_rss: u64,
}

/// The pipeline's parts, built by the caller (real or fake kernel and procfs).
pub struct Stages<K: Kernel> {
    pub topology: Topology,
    pub scanner: Scanner,
    pub selector: Selector,
    pub live: Live,
    pub policy: Box<dyn Policy>,
    pub actuator: Actuator<K>,
    /// The `run` command's root pid: its process tree replaces the identity rules.
    pub tree: Option<u32>,
    /// Where the journal is kept for crash recovery (none: not kept).
    pub journal_file: Option<JournalFile>,
    /// Slurm's jobs on this node (none: not looked for).
    pub jobs: Option<Jobs>,
}

/// What one epoch did, for the log.
#[derive(Debug, Default)]
pub struct EpochReport {
    pub epoch: u64,
    pub managed: usize,
    pub arrived: Vec<u32>,
    /// Children journaled because they carry a set numasched gave their parent.
    pub adopted: Vec<u32>,
    /// Processes that stopped being managed, and what restoring them came to.
    pub released: Vec<(u32, String, Restored)>,
    /// Why a re-plan was made (empty if none).
    pub replan: Vec<String>,
    /// Why a re-plan is pending but waits for the hysteresis interval.
    pub waiting: Vec<String>,
    pub plan: Option<Plan>,
    /// The snapshot the plan was made from (only when one was made).
    pub snapshot: Option<Snapshot>,
    pub apply: Option<ApplyReport>,
    /// Page migrations carried on from earlier epochs (chunks moved this epoch).
    pub migrations: Vec<numasched_linux::apply::report::Line>,
    /// Observation problems (files that could not be read or parsed).
    pub problems: Vec<String>,
    /// Characterisation problems (store, counters).
    pub notes: Vec<String>,
    /// Newly seen processes that could not be characterised.
    pub uncharacterised: Vec<u32>,
    /// Placements planned for processes whose Slurm job asked for advice only, where
    /// the advice changed.
    pub advice: Vec<String>,
    /// Every managed process idle (by its sized demand) and nothing planned, applied,
    /// adopted, released or migrated: an epoch the next may follow later (see
    /// [`super::pace`]).
    pub calm: bool,
}

/// How long after the first epoch others' work as the first pass read it may stand
/// in for a reading over an epoch, seconds: a pass is too soon to read it again while
/// the CPUs' clocks moved less than a tenth of a second, and clocks that never move
/// (no `/proc/stat` worth reading) must not hold every re-plan back.
const OTHERS_UNREAD_S: f64 = 1.0;

pub struct Engine<K: Kernel> {
    config: EngineConfig,
    topology: Topology,
    scanner: Scanner,
    live: Live,
    policy: Box<dyn Policy>,
    actuator: Actuator<K>,
    managed: Managed,
    tree: Option<Arc<Mutex<Tree>>>,
    trigger: Trigger,
    /// What is kept of each managed process between epochs; gone with the process.
    records: HashMap<ProcessKey, Record>,
    epoch: u64,
    /// When the last epoch ran (the caller's clock).
    last_now: Option<f64>,
    /// When the first epoch ran.
    first_now: Option<f64>,
    replans: u64,
    errors_total: u64,
    decisions: VecDeque<Decision>,
    /// The last epoch's processes and their characterisation, kept (they were made
    /// anyway) for [`Engine::views`] to describe when someone asks.
    last_seen: Vec<Process>,
    last_chars: Vec<Characterised>,
    last_plan: HashMap<ProcessKey, (CpuSet, String)>,
    /// Recent demand and run-queue delay per managed process, for sizing its set.
    needs: Needs,
    /// CPU used and threads waiting per process, as of the last epoch (for `status`:
    /// the snapshot holds the planning demand, which counts waiting and the recent
    /// peak).
    loads: HashMap<ProcessKey, Load>,
    /// The set numasched had given each process at the last epoch: a run-queue delay
    /// is judged only over an epoch spent wholly in the set it is judged for.
    last_sets: HashMap<ProcessKey, CpuSet>,
    /// Harms seen while releasing processes this epoch (their CPUs are free now).
    freed: Vec<String>,
    /// The last plan deferred page moves (a move of the process was under way, or the
    /// rate limit was spent): page moves are planned only at a re-plan, so once no
    /// move is under way the next epoch re-plans, or the memory would stay where the
    /// earlier move left it (a whole 160 MiB load on the node it had left, CI
    /// 2026-12-01).
    moves_waiting: bool,
    /// The longest epoch the caller reported ([`Engine::took`]).
    max_epoch_ms: f64,
    journal_file: Option<JournalFile>,
    /// The journal as last written to `journal_file`.
    saved: Journal,
    jobs: Option<Arc<Jobs>>,
    /// What the last epoch found of Slurm's jobs.
    last_jobs: Confined,
    /// The journal of a daemon running beside this pipeline (`plan` asks while one
    /// manages the machine): its narrowing is numasched's, not a foreign pin.
    daemons_journal: Journal,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<K: Kernel> Engine<K> {
    pub fn new(config: EngineConfig, stages: Stages<K>) -> Engine<K> {
        let managed: Managed = Arc::default();
        let tree = stages
            .tree
            .map(|root| Arc::new(Mutex::new(Tree::new(root))));
        let jobs = stages.jobs.map(Arc::new);
        let filter = select::filter(stages.selector, managed.clone(), tree.clone(), jobs.clone());
        Engine {
            config,
            topology: stages.topology,
            scanner: stages.scanner.with_filter(filter),
            live: stages.live,
            policy: stages.policy,
            actuator: stages.actuator,
            managed,
            tree,
            trigger: Trigger::default(),
            records: HashMap::new(),
            epoch: 0,
            last_now: None,
            first_now: None,
            replans: 0,
            errors_total: 0,
            decisions: VecDeque::new(),
            last_seen: Vec::new(),
            last_chars: Vec::new(),
            last_plan: HashMap::new(),
            needs: Needs::default(),
            loads: HashMap::new(),
            last_sets: HashMap::new(),
            freed: Vec::new(),
            moves_waiting: false,
            max_epoch_ms: 0.0,
            journal_file: stages.journal_file,
            saved: Journal::new(),
            jobs,
            last_jobs: Confined::default(),
            daemons_journal: Journal::new(),
        }
    }

    /// Reads the sets in `journal`, a running daemon's, as numasched's own (see
    /// [`super::pins`]), for a pipeline that only plans beside it.
    pub fn beside_daemon(mut self, journal: Journal) -> Engine<K> {
        self.daemons_journal = journal;
        self
    }

    pub fn actuator(&self) -> &Actuator<K> {
        &self.actuator
    }

    pub fn live(&self) -> &Live {
        &self.live
    }

    /// The Slurm job table, for the control socket to tell what the SPANK plugin says.
    pub fn jobs(&self) -> Option<Arc<Jobs>> {
        self.jobs.clone()
    }

    pub fn policy_name(&self) -> &str {
        self.policy.name()
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Tells the engine how long an epoch took (the caller holds the clock), for the
    /// longest-epoch figure of `status` and the metrics.
    pub fn took(&mut self, ms: f64) {
        if ms > self.max_epoch_ms {
            self.max_epoch_ms = ms;
        }
    }

    /// Epochs begun so far, failed ones included.
    pub fn epochs(&self) -> u64 {
        self.epoch
    }

    /// Every managed process as of the last epoch.
    pub fn views(&self) -> Vec<ProcessView> {
        let mut views = views(
            &self.last_seen,
            &self.last_chars,
            &self.last_plan,
            &self.records,
            &self.loads,
        );
        for v in &mut views {
            let key = ProcessKey {
                pid: v.pid,
                start_time: v.start_time,
            };
            v.job = self.last_jobs.step_of.get(&key).map(ToString::to_string);
        }
        views
    }

    pub fn managed(&self) -> usize {
        lock(&self.managed).len()
    }

    /// One epoch at `now` (seconds on a monotonic clock) and `unix` (wall seconds).
    /// Fails only when procfs itself cannot be read; every per-process problem is a
    /// line of the report.
    pub fn epoch(&mut self, now: f64, unix: i64) -> Result<EpochReport, ObserveError> {
        self.epoch += 1;
        let mut rep = EpochReport {
            epoch: self.epoch,
            ..EpochReport::default()
        };
        if let Some(jobs) = &self.jobs {
            jobs.begin_pass();
        }
        let mut obs = self.scanner.scan(&self.topology)?;
        rep.problems = obs.problems.iter().map(|e| e.to_string()).collect();
        if let Some(jobs) = &self.jobs {
            rep.problems.extend(jobs.take_problems());
        }
        self.errors_total += rep.problems.len() as u64;

        self.release_quiet(&mut obs, now, unix, &mut rep);
        self.last_now = Some(now);
        self.update_managed(&obs, unix, &mut rep);

        let (chars, notes) = self.live.characterise(&mut obs, unix);
        rep.notes = notes
            .store_errors
            .into_iter()
            .chain(notes.counter_errors)
            .collect();
        for c in &chars {
            if c.source == PenaltySource::Unknown {
                let record = self.records.entry(c.key).or_default();
                if !std::mem::replace(&mut record.told_uncharacterised, true) {
                    rep.uncharacterised.push(c.key.pid);
                }
            }
        }

        super::pins::unpin_own(&mut obs.snapshot, self.actuator.journal());
        super::pins::unpin_own(&mut obs.snapshot, &self.daemons_journal);
        let mut urgent = std::mem::take(&mut self.freed);
        let first_now = *self.first_now.get_or_insert(now);
        // A pass too soon after the first to read others' work again: the first plan
        // stands until a reading over an epoch shows where that work is (a hard pin
        // went beside a `taskset -c 0` load the first pass read as idle, live test
        // under stress-ng). What called for a re-plan is kept for that one.
        let unread =
            obs.others_from_first_pass && self.epoch > 1 && now - first_now < OTHERS_UNREAD_S;
        if self.moves_waiting && self.actuator.migrations().is_empty() && !unread {
            urgent.push("page moves the last plan deferred can start now".into());
        }
        urgent.extend(self.size(&mut obs, now));
        obs.snapshot.others_taken = self.held_by_queues(&obs.snapshot);
        // After unpinning (a job's allocation is a limit numasched did not set) and
        // sizing (an outsider is kept off jobs' CPUs only if the rest can hold it).
        if let Some(jobs) = self.jobs.clone() {
            self.last_jobs = jobs.confine(&mut obs.snapshot);
            self.leave_to_the_kernel(&mut obs, unix, &mut rep);
        }
        if unread {
            self.freed.extend(urgent);
            rep.waiting = vec!["others' work not yet measured over an epoch".into()];
        } else {
            self.decide_and_plan(&obs.snapshot, now, unix, urgent, &mut rep);
        }
        // After a re-plan this goes on within the pass's step (one step per epoch).
        self.carry_on_migrating(now, unix, &mut rep);
        if self.epoch % SWEEP_EVERY == 0 {
            self.actuator.forget_gone(&obs.snapshot);
        }
        if let Some(jobs) = self.jobs.clone() {
            let seen = self.job_tasks(&obs.snapshot, &rep);
            jobs.note_tasks(&self.topology, &self.last_jobs.views, seen);
        }
        let tasks_changed = !self.scanner.no_task_came_or_went();
        rep.adopted = self.follow_forks(tasks_changed, None, now, unix, &mut rep);
        rep.calm = calm(&rep, &obs.snapshot);
        self.last_seen = std::mem::take(&mut obs.snapshot.processes);
        self.last_chars = chars;
        Ok(rep)
    }

    /// What this epoch saw of each task of a Slurm job: the set numasched keeps in
    /// force on it (from the journal, the one record of that), where its memory is,
    /// and the pages moved for it so far (every chunk line carries the move's total).
    fn job_tasks(&self, snapshot: &Snapshot, rep: &EpochReport) -> Vec<TaskSeen> {
        // Most machines run no Slurm: nothing to tally then.
        if self.last_jobs.step_of.is_empty() {
            return Vec::new();
        }
        let lines = rep
            .apply
            .iter()
            .flat_map(|a| &a.moves)
            .chain(&rep.migrations);
        let mut moved: HashMap<u32, BTreeMap<(NodeId, NodeId), u64>> = HashMap::new();
        for l in lines {
            if let Subject::Pages { from, to, bytes } = l.subject {
                let b = moved
                    .entry(l.pid)
                    .or_default()
                    .entry((from, to))
                    .or_insert(0);
                *b = (*b).max(bytes);
            }
        }
        for m in self.actuator.migrations().iter() {
            let b = moved
                .entry(m.pid)
                .or_default()
                .entry((m.from, m.to))
                .or_insert(0);
            *b = (*b).max(m.moved_bytes);
        }
        snapshot
            .processes
            .iter()
            .filter_map(|p| {
                let step = self.last_jobs.step_of.get(&p.key())?;
                let label = step.to_string();
                let mode = if self.last_jobs.advise.contains(&p.pid) {
                    JobMode::Advise
                } else {
                    self.last_jobs
                        .views
                        .iter()
                        .find(|v| v.step == label)
                        .map_or(JobMode::Manage, |v| v.mode)
                };
                let placed = self
                    .actuator
                    .journal()
                    .get(p.pid, p.start_time)
                    .and_then(|e| e.applied.clone());
                Some(TaskSeen {
                    key: p.key(),
                    step: step.clone(),
                    mode,
                    cpus: placed.clone().unwrap_or_else(|| p.current_cpus.clone()),
                    placed,
                    memory: p.memory_bytes.clone(),
                    moved: moved.remove(&p.pid).unwrap_or_default(),
                })
            })
            .collect()
    }

    /// The scan's estimate of the CPUs others' work holds, with what the run queues of
    /// the processes numasched confined show (see [`super::queued`]).
    fn held_by_queues(&mut self, snapshot: &Snapshot) -> CpuSet {
        let machine = self.topology.num_cpus();
        let mut narrowed = Vec::new();
        let mut sets = HashMap::new();
        for p in &snapshot.processes {
            let key = p.key();
            let Some(set) = self.records.get(&key).and_then(|r| r.applied.as_ref()) else {
                continue;
            };
            sets.insert(key, set.clone());
            let may_use = p.allowed_cpus.as_ref().map_or(machine, |a| a.len());
            let settled = self.last_sets.get(&key) == Some(set);
            if let (true, true, Some(load)) = (settled, set.len() < may_use, self.loads.get(&key)) {
                narrowed.push(Narrowed::of(
                    p,
                    &self.topology,
                    set.clone(),
                    load.used,
                    load.lasting,
                ));
            }
        }
        self.last_sets = sets;
        super::queued::held(&self.topology, &snapshot.others_taken, &narrowed)
    }

    /// Sizes every managed process from its recent peak demand and, where numasched
    /// narrowed it, its run-queue delay (see [`super::need`]); the snapshot's
    /// `cpu_demand` becomes that size. Returns the harms that must be undone now.
    fn size(&mut self, obs: &mut Observation, now: f64) -> Vec<String> {
        let proc_root = self.scanner.config().proc_root.clone();
        let machine = self.topology.num_cpus();
        let tps = self.scanner.config().ticks_per_second.max(1) as f64;
        let mut urgent = Vec::new();
        self.loads.clear();
        for (p, info) in with_info_mut(&mut obs.snapshot.processes, &obs.details) {
            let key = p.key();
            let may_use = p.allowed_cpus.as_ref().map_or(machine, |a| a.len());
            // What numasched applied to it, or else a narrow set it carries from a
            // parent numasched placed (a child forked since, not yet planned itself:
            // two threads inheriting one CPU wait for it like any narrowed process).
            let carried = || {
                let journal = self.actuator.journal();
                info.cpus_allowed
                    .as_ref()
                    .filter(|&c| super::pins::given(journal, p, c).is_some())
            };
            let applied = self
                .records
                .get(&key)
                .and_then(|r| r.applied.as_ref())
                .or_else(carried);
            let narrowed_to = applied.map(|a| a.len()).filter(|&n| n < may_use);
            // Run-queue delay of the processes numasched narrowed, and of busy
            // multi-threaded ones it placed: what they waited for is demand too.
            let placed_busy = applied.is_some()
                && p.threads.max(info.stat.num_threads) > 1
                && p.cpu_demand >= numasched_policy::granularity::IDLE_DEMAND;
            let delay = if narrowed_to.is_some() || placed_busy {
                ProcDir::open(&proc_root, p.pid)
                    .ok()
                    .flatten()
                    .and_then(|d| d.run_delay().ok().flatten())
            } else {
                None
            };
            let Need {
                demand,
                waiting,
                lasting,
                urgent: why,
            } = self.needs.update(
                key,
                Reading {
                    demand: p.cpu_demand,
                    threads: info.stat.num_threads.max(p.threads),
                    stopped: matches!(info.stat.state, 'T' | 't'),
                    narrowed_to,
                    delay,
                    age_s: (obs.uptime - p.start_time as f64 / tps).max(0.0),
                },
                now,
            );
            self.loads.insert(
                key,
                Load {
                    used: p.cpu_demand,
                    waiting,
                    lasting,
                },
            );
            p.cpu_demand = demand;
            p.threads = p.threads.max(info.stat.num_threads);
            urgent.extend(why);
        }
        let managed = lock(&self.managed).clone();
        self.needs.retain(|k| managed.contains(k));
        urgent
    }

    fn decide_and_plan(
        &mut self,
        snapshot: &Snapshot,
        now: f64,
        unix: i64,
        urgent: Vec<String>,
        rep: &mut EpochReport,
    ) {
        match self
            .trigger
            .decide(snapshot, now, &self.config.trigger, urgent)
        {
            trigger::Decision::Quiet => {}
            trigger::Decision::Wait(r) => rep.waiting = r,
            trigger::Decision::Replan(r) => {
                rep.replan = r;
                self.replan(snapshot, now, unix, rep);
            }
        }
    }

    fn replan(&mut self, snapshot: &Snapshot, now: f64, unix: i64, rep: &mut EpochReport) {
        tracing::debug!(
            pinned = ?snapshot.others_pinned,
            taken = ?snapshot.others_taken,
            demand = ?snapshot.others_demand,
            "others' work the plan sees, CPUs' worth per CPU"
        );
        let mut plan = self.policy.plan(snapshot);
        let applied: HashMap<u32, CpuSet> = snapshot
            .processes
            .iter()
            .filter_map(|p| {
                let a = self.records.get(&p.key())?.applied.as_ref()?;
                Some((p.pid, a.clone()))
            })
            .collect();
        stabilise(&mut plan, &applied, &self.topology);
        let advised = self.advise_only(&mut plan, snapshot, unix, rep);
        // Journal on disk before changing anything: a crash in the pass must be
        // undoable by the next start. If it cannot be written, change nothing.
        let intents = match &self.journal_file {
            Some(_) => Some(self.actuator.intents(&plan, snapshot)),
            None => None,
        };
        let written = intents.map_or(Ok(()), |j| {
            save_if_changed(&mut self.journal_file, &mut self.saved, &j)
        });
        if let Err(e) = written {
            rep.notes.push(format!(
                "{e}; not applying the plan: a crash could not be undone"
            ));
            self.errors_total += 1;
            rep.plan = Some(plan);
            return;
        }
        let report = self.actuator.apply_at(&plan, snapshot, now);
        self.moves_waiting = report.moves.iter().any(|l| l.action == Action::Deferred);
        // Report lines and plan placements name pids: each is this snapshot's process.
        let keys: HashMap<u32, ProcessKey> = snapshot
            .processes
            .iter()
            .map(|p| (p.pid, p.key()))
            .collect();
        for line in &report.placements {
            let Some(&key) = keys.get(&line.pid) else {
                continue;
            };
            match line.action {
                Action::Done | Action::Unchanged => {
                    if let numasched_linux::apply::Subject::Affinity { cpus } = &line.subject {
                        let record = self.records.entry(key).or_default();
                        record.applied = Some(cpus.clone());
                        if line.action == Action::Done {
                            record.changes += 1;
                        }
                    }
                }
                Action::Failed => self.errors_total += 1,
                _ => {}
            }
        }
        for line in report.placements.iter().chain(&report.moves) {
            if !matches!(line.action, Action::Unchanged | Action::LeftAlone) {
                self.decide(unix, line.pid, line.action.word(), line.to_string());
            }
        }
        // What changed here, the next pass reads afresh instead of trusting its cache:
        // pages moved without RSS changing, and an affinity the kernel now has. A kept
        // status would show the set this daemon gave before, which against the
        // journal's newer one reads as someone else's pin and pulls the process back
        // (tests/it/daemon_engine.rs, a process the daemon moved).
        let done = |lines: &[Line]| {
            lines
                .iter()
                .filter(|l| l.action == Action::Done)
                .map(|l| l.pid)
                .collect::<Vec<_>>()
        };
        for pid in done(&report.placements) {
            self.scanner.invalidate(pid, Changed::Affinity);
        }
        for pid in done(&report.moves) {
            self.scanner.invalidate(pid, Changed::Pages);
        }
        self.errors_total += report
            .moves
            .iter()
            .filter(|l| l.action == Action::Failed)
            .count() as u64;
        self.last_plan = plan
            .placements
            .iter()
            // An advised process shows the advice (later entries win).
            .chain(&advised)
            .filter_map(|pl| {
                let key = keys.get(&pl.pid)?;
                Some((*key, (pl.cpus.clone(), pl.reason.clone())))
            })
            .collect();
        self.trigger.planned(snapshot, now);
        self.replans += 1;
        rep.plan = Some(plan);
        rep.snapshot = Some(snapshot.clone());
        rep.apply = Some(report);
    }

    /// Takes the placements and page moves of processes whose Slurm job asked for
    /// advice only out of `plan` (they are left alone) and returns the placements, for
    /// `status` to show; a changed piece of advice is a decision.
    fn advise_only(
        &mut self,
        plan: &mut Plan,
        snapshot: &Snapshot,
        unix: i64,
        rep: &mut EpochReport,
    ) -> Vec<Placement> {
        let advise = std::mem::take(&mut self.last_jobs.advise);
        if advise.is_empty() {
            return Vec::new();
        }
        plan.page_moves.retain(|m| !advise.contains(&m.pid));
        let mut advised = Vec::new();
        for pl in plan
            .placements
            .iter_mut()
            .filter(|pl| advise.contains(&pl.pid))
        {
            let mut leave = pl.clone();
            leave.cpus = CpuSet::new();
            leave.nodes.clear();
            leave.reason = "its Slurm job asked for advice only (NUMASCHED=advise)".into();
            advised.push(std::mem::replace(pl, leave));
        }
        self.last_jobs.advise = advise;
        for pl in &advised {
            let Some(key) = snapshot
                .processes
                .iter()
                .find(|p| p.pid == pl.pid)
                .map(Process::key)
            else {
                continue;
            };
            let before = self.last_plan.get(&key).map(|(cpus, _)| cpus);
            if !pl.cpus.is_empty() && before != Some(&pl.cpus) {
                let text = format!(
                    "pid {}: would place on CPUs {} ({}); not applied: its job asked for advice only",
                    pl.pid,
                    pl.cpus,
                    pl.reason
                );
                rep.advice.push(text.clone());
                self.decide(unix, pl.pid, "advised", text);
            }
        }
        advised
    }

    /// The next chunks of the page moves in progress (see [`numasched_linux::apply::migrate`]).
    fn carry_on_migrating(&mut self, now: f64, unix: i64, rep: &mut EpochReport) {
        let lines = self.actuator.continue_migrations(now);
        for l in &lines {
            // Pages moved without RSS changing: the next pass re-reads where they are.
            self.scanner.invalidate(l.pid, Changed::Pages);
            match l.action {
                Action::Deferred => {}
                Action::Failed => {
                    self.errors_total += 1;
                    self.decide(unix, l.pid, l.action.word(), l.to_string());
                }
                _ => self.decide(unix, l.pid, l.action.word(), l.to_string()),
            }
        }
        rep.migrations = lines;
    }

    /// Releases the outsiders the jobs' stage took out of the snapshot (see
    /// [`Confined::park`]): their own affinity back, the kernel's to place.
    fn leave_to_the_kernel(&mut self, obs: &mut Observation, unix: i64, rep: &mut EpochReport) {
        let park: HashSet<ProcessKey> = self.last_jobs.park.iter().copied().collect();
        if park.is_empty() {
            return;
        }
        obs.retain(|k| !park.contains(k));
        for key in park {
            lock(&self.managed).remove(&key);
            rep.managed = rep.managed.saturating_sub(1);
            self.release(
                key,
                "outside every Slurm job, and the CPUs no job holds cannot hold it: left to the kernel",
                unix,
                rep,
            );
        }
    }

    /// Drops, before planning, processes that stayed below the thresholds too long.
    fn release_quiet(&mut self, obs: &mut Observation, now: f64, unix: i64, rep: &mut EpochReport) {
        if self.tree.is_some() {
            return;
        }
        let (min_cpu, min_rss) = (self.config.min_cpu, self.config.min_rss);
        let managed = lock(&self.managed).clone();
        let mut drop = HashSet::new();
        for (p, info) in obs.with_info() {
            let key = p.key();
            if !managed.contains(&key) {
                continue;
            }
            // A job's task, or an outsider the hard line keeps off the jobs' CPUs,
            // stays while it runs more than an idle process (see `Jobs::admits`).
            let admitted = self
                .jobs
                .as_ref()
                .is_some_and(|j| j.admits(key, p.cpu_demand));
            if (p.cpu_demand >= min_cpu && info.rss_bytes >= min_rss) || admitted {
                if let Some(r) = self.records.get_mut(&key) {
                    r.quiet_since = None;
                }
                continue;
            }
            // Quiet since the last epoch, when it was managed and not yet quiet.
            let since = *self
                .records
                .entry(key)
                .or_default()
                .quiet_since
                .get_or_insert(self.last_now.unwrap_or(now));
            if now - since >= self.config.release_after - 1e-9 {
                drop.insert(key);
            }
        }
        if drop.is_empty() {
            return;
        }
        obs.retain(|k| !drop.contains(k));
        for key in drop {
            lock(&self.managed).remove(&key);
            self.release(key, "quiet: below the admission thresholds", unix, rep);
        }
    }

    /// Newcomers join; processes no longer in the snapshot (exited, or not matching
    /// any more) are released.
    fn update_managed(&mut self, obs: &Observation, unix: i64, rep: &mut EpochReport) {
        let now: HashSet<ProcessKey> = obs.snapshot.processes.iter().map(|p| p.key()).collect();
        let before = std::mem::replace(&mut *lock(&self.managed), now.clone());
        rep.arrived = obs
            .snapshot
            .processes
            .iter()
            .filter(|p| !before.contains(&p.key()))
            .map(|p| p.pid)
            .collect();
        for key in before.difference(&now).copied().collect::<Vec<_>>() {
            self.release(key, "no longer selected", unix, rep);
        }
        rep.managed = now.len();
        if let Some(tree) = &self.tree {
            let alive: HashSet<u32> = now.iter().map(|k| k.pid).collect();
            lock(tree).retain(&alive);
        }
    }

    fn release(&mut self, key: ProcessKey, why: &str, unix: i64, rep: &mut EpochReport) {
        if let Some(cpus) = self.records.remove(&key).and_then(|r| r.applied) {
            if cpus.len() < self.topology.num_cpus() {
                self.freed
                    .push(format!("pid {}: {why}; its CPUs are free", key.pid));
            }
        }
        self.last_plan.remove(&key);
        // Only ever restore the process the journal entry was taken from.
        let journaled = self
            .actuator
            .journal()
            .entry(key.pid)
            .is_some_and(|e| e.start_time == key.start_time);
        if !journaled {
            return;
        }
        let r = self.actuator.restore(key.pid);
        self.report_restored(key.pid, why, r, unix, rep);
    }

    /// Children forked since carry numasched's set: they are journaled before a crash
    /// could leave them narrowed with nothing to undo it. A parent numasched placed
    /// exited and left its children to init: the set they carry was chosen for it, so
    /// it goes. Then the journal is written if it changed. Every epoch ends with this,
    /// and the daemon runs it between epochs when the proc connector reports a fork or
    /// an exit of a journaled process (`between`: the processes that forked). Returns
    /// the pids newly journaled.
    pub fn follow_forks(
        &mut self,
        tasks_changed: bool,
        between: Option<&[u32]>,
        now: f64,
        unix: i64,
        rep: &mut EpochReport,
    ) -> Vec<u32> {
        let followed = self.actuator.follow_forks(tasks_changed, between, now);
        for (pid, r) in followed.restored {
            self.report_restored(pid, "left by a placed parent that exited", r, unix, rep);
        }
        let written = save_if_changed(
            &mut self.journal_file,
            &mut self.saved,
            self.actuator.journal(),
        );
        if let Err(e) = written {
            rep.notes.push(e.to_string());
        }
        followed.adopted
    }

    /// The processes the journal names: the ones whose forks and exits matter between
    /// epochs.
    pub fn journaled(&self) -> Vec<u32> {
        self.actuator.journal().pids()
    }

    /// A restore shows among the decisions (unless there was nothing to restore),
    /// counts when it failed, and goes into the epoch's report.
    fn report_restored(
        &mut self,
        pid: u32,
        why: &str,
        r: Restored,
        unix: i64,
        rep: &mut EpochReport,
    ) {
        if !matches!(
            r,
            Restored::Gone | Restored::NotJournaled | Restored::Reused
        ) {
            self.decide(unix, pid, "restored", format!("pid {pid}: {why}; {r}"));
        }
        if matches!(r, Restored::Failed(_)) {
            self.errors_total += 1;
        }
        rep.released.push((pid, why.to_string(), r));
    }

    fn decide(&mut self, unix: i64, pid: u32, action: &str, text: String) {
        if self.decisions.len() == DECISIONS_KEPT {
            self.decisions.pop_front();
        }
        self.decisions.push_back(Decision {
            unix,
            epoch: self.epoch,
            pid,
            action: action.to_string(),
            text,
        });
    }

    /// Restores every process numasched changed (shutdown), and removes the journal
    /// file if nothing is left to undo.
    pub fn restore_all(&mut self) -> (Vec<(u32, Restored)>, Option<RecoveryError>) {
        for r in self.records.values_mut() {
            r.applied = None;
        }
        let restored = self.actuator.restore_all();
        let journal = self.actuator.journal();
        let err = match (&mut self.journal_file, journal.is_empty()) {
            (Some(f), true) => f.remove().err(),
            _ => save_if_changed(&mut self.journal_file, &mut self.saved, journal).err(),
        };
        (restored, err)
    }

    /// Writes the journal once more. Run after the daemon dropped its capabilities: a
    /// directory that only `CAP_DAC_OVERRIDE` could write to passed the check at start,
    /// and would otherwise be found out at the first change, every change after it
    /// refused for good while the daemon ran on.
    pub fn check_journal(&mut self) -> Result<(), RecoveryError> {
        match &mut self.journal_file {
            Some(f) => f.save(self.actuator.journal()),
            None => Ok(()),
        }
    }

    /// Writes what characterisation buffered (shutdown).
    pub fn flush(&mut self, unix: i64) -> Vec<String> {
        let mut notes = numasched_linux::characterise::live::Notes::default();
        self.live.flush_final(unix, &mut notes);
        notes.store_errors
    }

    /// Fills what the engine knows into the status; the caller adds options,
    /// sensors and times.
    pub fn fill_status(&self, s: &mut DaemonStatus) {
        let views = self.views();
        s.max_epoch_ms = self.max_epoch_ms;
        s.max_migration_step_ms = self.actuator.longest_migration_step_s() * 1e3;
        s.max_migration_call_ms = self.actuator.longest_migration_call_s() * 1e3;
        s.migrations = self
            .actuator
            .migrations()
            .iter()
            .map(|m| super::status::MigrationView {
                pid: m.pid,
                from: m.from,
                to: m.to,
                planned_bytes: m.planned_bytes,
                moved_bytes: m.moved_bytes,
                left_bytes: m.left_bytes(),
                epochs: m.epochs,
            })
            .collect();
        s.nodes_view = super::nodes::node_views(&self.topology, &views);
        s.uncharacterised = views
            .iter()
            .filter(|v| v.source == PenaltySource::Unknown)
            .map(|v| v.pid)
            .collect();
        s.processes = Arc::new(views);
        s.decisions = self.decisions.iter().cloned().collect();
        s.jobs = self.last_jobs.views.clone();
        s.epochs = self.epoch;
        s.replans = self.replans;
        s.errors_total = self.errors_total;
        s.nodes = self.topology.nodes().len();
        s.cpus = self.topology.num_cpus();
    }
}

/// Writes `journal` to the journal file (if there is one) when it differs from what
/// was last written, or when the file is not what was last written (deleted, replaced
/// or edited: a crash would otherwise find nothing, or the wrong thing, to undo).
fn save_if_changed(
    file: &mut Option<JournalFile>,
    saved: &mut Journal,
    journal: &Journal,
) -> Result<(), RecoveryError> {
    let Some(f) = file else {
        return Ok(());
    };
    if journal == saved && (journal.is_empty() || f.is_current()) {
        return Ok(());
    }
    f.save(journal)?;
    *saved = journal.clone();
    Ok(())
}

/// What the engine keeps of one managed process between epochs.
#[derive(Debug, Default)]
struct Record {
    /// CPUs numasched last set.
    applied: Option<CpuSet>,
    /// Below the admission thresholds since then (the caller's clock).
    quiet_since: Option<f64>,
    /// Affinity changes made (for the metrics).
    changes: u64,
    /// Reported as not characterisable (reported once).
    told_uncharacterised: bool,
}

/// See [`EpochReport::calm`]; `snapshot` holds the managed processes, sized.
fn calm(rep: &EpochReport, snapshot: &Snapshot) -> bool {
    rep.replan.is_empty()
        && rep.waiting.is_empty()
        && rep.arrived.is_empty()
        && rep.adopted.is_empty()
        && rep.released.is_empty()
        && rep.migrations.is_empty()
        && rep.advice.is_empty()
        && snapshot
            .processes
            .iter()
            .all(|p| p.cpu_demand < numasched_policy::granularity::IDLE_DEMAND)
}

/// What a process used and waited for over the last epoch.
#[derive(Debug, Clone, Copy)]
struct Load {
    used: f64,
    waiting: f64,
    /// Waiting over two readings (see [`Need::lasting`]).
    lasting: f64,
}

fn views(
    processes: &[Process],
    chars: &[Characterised],
    plan: &HashMap<ProcessKey, (CpuSet, String)>,
    records: &HashMap<ProcessKey, Record>,
    loads: &HashMap<ProcessKey, Load>,
) -> Vec<ProcessView> {
    let chars: HashMap<ProcessKey, &Characterised> = chars.iter().map(|c| (c.key, c)).collect();
    processes
        .iter()
        .filter_map(|p| Some((p, *chars.get(&p.key())?)))
        .map(|(p, c)| {
            let key = p.key();
            // Every process of a snapshot gets a placement and a reason in the plan:
            // one without came after it.
            let (planned, reason) = plan.get(&key).cloned().unwrap_or_else(|| {
                (
                    CpuSet::new(),
                    "new since the last plan; left where the kernel put it until the next"
                        .to_string(),
                )
            });
            let load = loads.get(&key);
            ProcessView {
                pid: p.pid,
                start_time: p.start_time,
                program: p.program.clone(),
                threads: p.threads,
                cpu_demand: load.map_or(p.cpu_demand, |l| l.used),
                memory_bytes: p.memory_bytes.clone(),
                memory_from: c.memory_from.to_string(),
                local_fraction: c.local_fraction,
                mpki: c.mpki,
                numa_penalty: c.numa_penalty,
                source: c.source,
                basis: c.basis.clone(),
                bandwidth_gbps: c.bandwidth_gbps,
                current_cpus: p.current_cpus.clone(),
                planned_cpus: planned,
                reason,
                allowed_cpus: p.allowed_cpus.clone(),
                placement_changes: records.get(&key).map_or(0, |r| r.changes),
                waiting: load.map_or(0.0, |l| l.waiting),
                job: None,
            }
        })
        .collect()
}
