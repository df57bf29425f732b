//! Carrying out a plan: CPU affinity for every thread, then rate-limited page moves.
//!
//! Order of checks for each placement, each cheaper and more fundamental than the next:
//! the plan leaves it alone → protected pid (0, 1, 2, numasched itself, configured
//! exclusions) → still the process the snapshot saw (pid + start time, read right
//! now) → not a kernel thread → inside any foreign pin (the snapshot's `allowed_cpus`,
//! the live affinity before the first change, the original affinity after it) and not
//! re-pinned by someone else since numasched placed it → journal each thread's
//! original affinity → set it. Threads created while the pass runs are caught by
//! re-listing; threads created later inherit the set and are re-checked next pass.

use numasched_model::plural::count;
use std::collections::HashMap;

use super::bucket::TokenBucket;
use super::journal::{Entry, Journal};
use super::kernel::{Kernel, KernelError};
use super::migrate::{Migration, Migrations, STEP_SECONDS};
use super::orphans::Orphans;
use super::report::{Action, ApplyReport, Line, Subject};
use super::undo::{self, Restored};
use numasched_model::plan::{PageMove, Placement, Plan};
use numasched_model::snapshot::{Process, ProcessKey, Snapshot};
use numasched_model::topology::{cpulist, NodeId, Topology};
use numasched_model::CpuSet;

/// Rounds of "list threads, set the new ones" per process and pass: enough for a
/// process that is spawning threads while being placed to converge, bounded so a
/// thread bomb cannot hold the pass.
const THREAD_ROUNDS: usize = 3;

/// What a dry run would have done to a process whose threads have `current`.
fn dry_run_line(pid: u32, target: &CpuSet, current: &[(u32, CpuSet)]) -> Line {
    let total = current.len();
    let would = current.iter().filter(|(_, c)| c != target).count();
    let (action, detail) = if would == 0 {
        (
            Action::Unchanged,
            format!("already there ({})", count(total, "thread")),
        )
    } else {
        (
            Action::DryRun,
            format!("would set {would} of {}", count(total, "thread")),
        )
    };
    line(pid, target, action, detail)
}

/// The line for a process whose threads were set (`pass`), with `errors` the kernel
/// gave on the way (none of them a refusal).
fn outcome_line(
    pid: u32,
    target: &CpuSet,
    pass: &ThreadPass,
    errors: &[KernelError],
    reason: &str,
) -> Line {
    let (changed, total, foreign_threads) = (pass.changed, pass.seen.len(), pass.foreign_threads);
    match errors.first() {
        Some(e) => line(
            pid,
            target,
            Action::Failed,
            format!(
                "set {changed} of {}; {}, first: {e}",
                count(total, "thread"),
                count(errors.len(), "error")
            ),
        ),
        None if changed == 0 => line(
            pid,
            target,
            Action::Unchanged,
            format!("already there ({})", count(total, "thread")),
        ),
        None if foreign_threads > 0 => line(
            pid,
            target,
            Action::Done,
            format!(
                "set {changed} of {}, left {foreign_threads} pinned by the application: {}",
                count(total, "thread"),
                reason
            ),
        ),
        None => line(
            pid,
            target,
            Action::Done,
            format!("set {changed} of {}: {}", count(total, "thread"), reason),
        ),
    }
}

/// Each thread's id and affinity.
type ThreadAffinities = Vec<(u32, CpuSet)>;

/// What one pass over a process's threads did.
struct ThreadPass {
    changed: usize,
    /// Threads left alone because the application pinned them itself.
    foreign_threads: usize,
    /// Threads changed in this pass, with what they had.
    undo_now: Vec<(u32, CpuSet)>,
    /// Every thread met.
    seen: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ActuatorConfig {
    /// Plan and report, change nothing.
    pub dry_run: bool,
    /// Carry out the plan's page moves.
    pub migrate_pages: bool,
    /// Page migration budget, MB (10^6 bytes) per second.
    pub migrate_mb_per_s: f64,
    /// Largest burst of migration, MB.
    pub migrate_burst_mb: f64,
    /// Pids never touched, in addition to 0, 1, 2 and numasched's own.
    pub exclude: Vec<u32>,
    /// The kernel's automatic NUMA balancing is on (`kernel.numa_balancing=1`): it
    /// moves a process's pages toward the node it runs on by itself, so numasched
    /// leaves those moves to it rather than copying the same pages twice.
    pub kernel_balancing: bool,
}

impl Default for ActuatorConfig {
    fn default() -> Self {
        ActuatorConfig {
            dry_run: false,
            migrate_pages: false,
            migrate_mb_per_s: 64.0,
            migrate_burst_mb: 64.0,
            exclude: Vec::new(),
            kernel_balancing: false,
        }
    }
}

/// See the module documentation.
pub struct Actuator<K: Kernel> {
    kernel: K,
    config: ActuatorConfig,
    journal: Journal,
    bucket: TokenBucket,
    migrations: Migrations,
    self_pid: u32,
    /// Processes whose move the kernel refused (EBUSY, EINVAL), with
    /// why: left as they were for the rest of their life, and reported once.
    refused: HashMap<ProcessKey, String>,
    /// Longest time one pass spent in `move_pages` calls, seconds: what the epoch loop
    /// was held for by migration, reported so the bound can be checked live.
    longest_step_s: f64,
    /// The step clock of the last `apply_at`, with its time: a `continue_migrations`
    /// at the same time (the same epoch) goes on within it rather than starting another.
    pass: Option<(f64, StepClock)>,
    /// Children left in numasched's set by a parent that exited.
    orphans: Orphans,
    /// The clock of the last [`Self::follow_forks`], for the search at shutdown.
    last_now: f64,
}

/// What keeping up with forks and exits did: the descendants newly journaled (still
/// journaled at the end), and the orphans given back with how that went.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Followed {
    pub adopted: Vec<u32>,
    pub restored: Vec<(u32, Restored)>,
}

/// One pass's migration time: a deadline all its moves share, and what they spent.
#[derive(Debug, Clone, Copy)]
struct StepClock {
    deadline: f64,
    spent_s: f64,
}

/// Never touched: 0, 1, 2 (kthreadd), numasched itself and the configured exclusions.
fn is_protected(pid: u32, self_pid: u32, exclude: &[u32]) -> bool {
    pid <= 2 || pid == self_pid || exclude.contains(&pid)
}

fn line(pid: u32, cpus: &CpuSet, action: Action, detail: impl Into<String>) -> Line {
    Line {
        pid,
        subject: Subject::Affinity { cpus: cpus.clone() },
        action,
        detail: detail.into(),
    }
}

impl<K: Kernel> Actuator<K> {
    pub fn new(kernel: K, config: ActuatorConfig) -> Actuator<K> {
        Actuator::with_journal(kernel, config, Journal::new())
    }

    /// Resumes with a journal kept from an earlier run (crash recovery).
    pub fn with_journal(kernel: K, config: ActuatorConfig, journal: Journal) -> Actuator<K> {
        let bucket = TokenBucket::new(config.migrate_mb_per_s * 1e6, config.migrate_burst_mb * 1e6);
        Actuator {
            kernel,
            config,
            journal,
            bucket,
            migrations: Migrations::default(),
            self_pid: std::process::id(),
            refused: HashMap::new(),
            longest_step_s: 0.0,
            pass: None,
            orphans: Orphans::default(),
            last_now: 0.0,
        }
    }

    pub fn kernel(&self) -> &K {
        &self.kernel
    }

    pub fn config(&self) -> &ActuatorConfig {
        &self.config
    }

    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Tells the migration rate limiter the time: seconds on any monotonic clock.
    pub fn advance_clock(&mut self, now_s: f64) {
        self.bucket.advance(now_s);
    }

    /// [`advance_clock`](Self::advance_clock) then [`apply`](Self::apply).
    pub fn apply_at(&mut self, plan: &Plan, snapshot: &Snapshot, now_s: f64) -> ApplyReport {
        self.advance_clock(now_s);
        let (report, clock) = self.apply_within(plan, snapshot);
        self.pass = Some((now_s, clock));
        report
    }

    /// Carries out `plan`, made from `snapshot`, as far as it safely can. Never stops
    /// early: every placement and page move gets its line in the report.
    pub fn apply(&mut self, plan: &Plan, snapshot: &Snapshot) -> ApplyReport {
        self.apply_within(plan, snapshot).0
    }

    fn apply_within(&mut self, plan: &Plan, snapshot: &Snapshot) -> (ApplyReport, StepClock) {
        let machine = snapshot.topology.all_cpus();
        let mut report = ApplyReport {
            dry_run: self.config.dry_run,
            ..ApplyReport::default()
        };
        for pl in &plan.placements {
            let proc = snapshot.processes.iter().find(|p| p.pid == pl.pid);
            report.placements.push(self.place(pl, proc, &machine));
        }
        // A move under way to a node the process no longer runs on stops where the
        // plan sends its memory to the node it runs on now (not where its memory may
        // not follow: a cpuset's mems kept it elsewhere, and the move toward them goes
        // on).
        if !self.config.dry_run {
            let topo = &snapshot.topology;
            let retargets: Vec<(u32, NodeId)> = plan
                .page_moves
                .iter()
                .filter(|mv| set_on(&report, topo, mv.pid) == Some(mv.to_node))
                .map(|mv| (mv.pid, mv.to_node))
                .collect();
            for (pid, node) in retargets {
                report.moves.extend(self.migrations.retarget(pid, node));
            }
        }
        // Dry runs spend from a copy, so the report shows this pass's rate limit
        // without costing later real passes anything.
        let mut bucket = self.bucket.clone();
        let mut clock = self.step_clock();
        for mv in &plan.page_moves {
            let line = self.move_pages(mv, snapshot, &report, &mut bucket, &mut clock);
            report.moves.push(line);
        }
        self.longest_step_s = self.longest_step_s.max(clock.spent_s);
        if !self.config.dry_run {
            self.bucket = bucket;
        }
        (report, clock)
    }

    fn step_clock(&self) -> StepClock {
        StepClock {
            deadline: self.kernel.now() + STEP_SECONDS,
            spent_s: 0.0,
        }
    }

    /// Steps every migration in progress within `clock`, adding the time it took.
    fn step_migrations(&mut self, bucket: &mut TokenBucket, clock: &mut StepClock) -> Vec<Line> {
        let t0 = self.kernel.now();
        let lines = self.migrations.step(&self.kernel, bucket, clock.deadline);
        clock.spent_s += (self.kernel.now() - t0).max(0.0);
        lines
    }

    /// The longest time one pass has spent moving pages, seconds.
    pub fn longest_migration_step_s(&self) -> f64 {
        self.longest_step_s
    }

    /// The longest single `move_pages` call, seconds: a step may overrun
    /// [`STEP_SECONDS`] by at most one call.
    pub fn longest_migration_call_s(&self) -> f64 {
        self.migrations.longest_call_s()
    }

    /// Page moves in progress.
    pub fn migrations(&self) -> &Migrations {
        &self.migrations
    }

    /// Moves the next chunks of every migration in progress, within the rate limit and
    /// [`STEP_SECONDS`](super::migrate::STEP_SECONDS) of loop time; called every
    /// epoch, re-planned or not. After an `apply_at` at the same `now_s` it goes on
    /// within that pass's step, so moves in progress advance in an epoch that re-planned
    /// without the epoch spending more than one step.
    pub fn continue_migrations(&mut self, now_s: f64) -> Vec<Line> {
        let pass = self.pass.take();
        if self.migrations.is_empty() || self.config.dry_run {
            return Vec::new();
        }
        let mut clock = match pass {
            Some((t, clock)) if t == now_s => clock,
            _ => {
                self.advance_clock(now_s);
                self.step_clock()
            }
        };
        let mut bucket = self.bucket.clone();
        let lines = self.step_migrations(&mut bucket, &mut clock);
        self.bucket = bucket;
        self.longest_step_s = self.longest_step_s.max(clock.spent_s);
        lines
    }

    /// Restores one process's original affinity (it stops being managed), and that
    /// of the descendants that were journaled only because they inherited its set.
    pub fn restore(&mut self, pid: u32) -> Restored {
        self.migrations.forget(pid);
        let kids = self.kernel.children(pid).unwrap_or_default();
        let r = undo::restore(&self.kernel, &mut self.journal, pid);
        for kid in kids {
            if self.journal.entry(kid).is_some_and(|e| e.adopted) {
                let _ = self.restore(kid);
            }
        }
        r
    }

    /// Restores everything, for shutdown. Children forked since the last epoch's
    /// walk carry numasched's set too, and so may orphans handed to init since: they
    /// are found first, and go back with the rest. Orphans before the walk, so
    /// what an orphan forked since is found from it.
    pub fn restore_all(&mut self) -> Vec<(u32, Restored)> {
        let protected = self.protection();
        let now = self.last_now;
        self.orphans
            .find(&self.kernel, &mut self.journal, protected, true, now);
        self.adopt_descendants();
        undo::restore_all(&self.kernel, &mut self.journal)
    }

    /// Keeps up with the forks and exits since the last epoch, once per epoch:
    /// journals the descendants that carry a set numasched gave their parent (see
    /// [`Self::adopt_descendants`]), and restores the children a parent numasched
    /// placed left behind when it exited (see [`orphans`](super::orphans)), with
    /// whatever they forked since; one result per orphan. `tasks_changed: false`,
    /// when the caller knows no task was created or exited since the last call,
    /// skips both walks: with no fork there is no new child, and with no exit no
    /// orphan. (The walk reads at least two files per journaled process, the search
    /// one per thread of init.) `between`: a pass between epochs, started by forks of
    /// these journaled processes (or exits) the proc connector reported; the walk
    /// starts from them alone.
    /// `now`: the caller's monotonic clock, in seconds.
    pub fn follow_forks(
        &mut self,
        tasks_changed: bool,
        between: Option<&[u32]>,
        now: f64,
    ) -> Followed {
        let mut followed = Followed::default();
        self.last_now = now;
        if self.config.dry_run {
            return followed;
        }
        if tasks_changed {
            let protected = self.protection();
            followed.adopted =
                undo::adopt_descendants(&self.kernel, &mut self.journal, between, protected);
        }
        let protected = self.protection();
        let found = self.orphans.find(
            &self.kernel,
            &mut self.journal,
            protected,
            tasks_changed,
            now,
        );
        if found.is_empty() {
            return followed;
        }
        followed.adopted.extend(self.adopt_descendants());
        followed.restored = found
            .into_iter()
            .map(|pid| (pid, self.restore(pid)))
            .collect();
        // What went back with an orphan is no longer journaled.
        let journal = &self.journal;
        followed.adopted.retain(|&p| journal.entry(p).is_some());
        followed
    }

    /// Pids never touched: 0, 1, 2, numasched itself and the configured exclusions.
    fn protection(&self) -> impl Fn(u32) -> bool {
        let (self_pid, exclude) = (self.self_pid, self.config.exclude.clone());
        move |pid| is_protected(pid, self_pid, &exclude)
    }

    /// Forgets processes that exited or whose pid was reused; those in `seen` (just
    /// observed) with the start time journalled are taken as alive without asking.
    pub fn forget_gone(&mut self, seen: &Snapshot) -> Vec<u32> {
        let alive: HashMap<u32, u64> = seen
            .processes
            .iter()
            .map(|p| (p.pid, p.start_time))
            .collect();
        self.refused
            .retain(|k, _| alive.get(&k.pid) == Some(&k.start_time));
        undo::forget_gone(&self.kernel, &mut self.journal, |pid| {
            alive.get(&pid).copied()
        })
    }

    /// Journals the descendants that carry a set numasched gave their parent (see
    /// [`undo::adopt_descendants`]). Runs in every epoch a task came or went in (see
    /// [`Self::follow_forks`]) and before every restore.
    pub fn adopt_descendants(&mut self) -> Vec<u32> {
        if self.config.dry_run {
            return Vec::new();
        }
        let protected = self.protection();
        undo::adopt_descendants(&self.kernel, &mut self.journal, None, protected)
    }

    /// The parent's original affinity when `p`'s affinity (`main`) is exactly what
    /// numasched gave its parent: it inherited numasched's set by forking.
    fn inherited_original(&self, p: &Process, main: &CpuSet) -> Option<CpuSet> {
        p.parent
            .and_then(|pp| self.journal.entry(pp))
            .filter(|e| e.gave(main))
            .map(|e| e.original.clone())
    }

    /// The journal as it will stand once `plan` is carried out, as far as originals
    /// go: every process the plan may change and the journal does not hold yet gets
    /// an entry with its current affinity (or the parent's original, if inherited)
    /// and the plan's CPUs as `applied`. Persisted *before* applying, it lets a
    /// restart after a crash in the middle of a pass undo changes the journal had not
    /// caught up with; for a change that never happened the entry restores nothing
    /// (the affinity is not inside `applied`, so it is left as it is).
    pub fn intents(&self, plan: &Plan, snapshot: &Snapshot) -> Journal {
        let mut j = self.journal.clone();
        if self.config.dry_run {
            return j;
        }
        for pl in &plan.placements {
            if pl.cpus.is_empty() || self.protected(pl.pid) {
                continue;
            }
            let Some(p) = snapshot.processes.iter().find(|p| p.pid == pl.pid) else {
                continue;
            };
            if j.get(p.pid, p.start_time).is_some() {
                // Re-placed: the set it is about to get is numasched's too, so that
                // a crash after the change and before the journal that follows it is
                // still undone.
                j.set_pending(p.pid, p.start_time, &pl.cpus);
                continue;
            }
            let Ok(tids) = self.kernel.threads(p.pid) else {
                continue;
            };
            let current: Vec<(u32, CpuSet)> = tids
                .into_iter()
                .filter_map(|t| self.kernel.affinity(p.pid, t).ok().map(|c| (t, c)))
                .collect();
            let Some((_, main)) = current
                .iter()
                .find(|(t, _)| *t == p.pid)
                .or_else(|| current.first())
            else {
                continue;
            };
            let inherited = self.inherited_original(p, main);
            let original = inherited.clone().unwrap_or_else(|| main.clone());
            j.begin(p.pid, p.start_time, &original);
            for (tid, c) in &current {
                let orig = inherited.as_ref().unwrap_or(c);
                j.remember_thread(p.pid, p.start_time, *tid, orig);
            }
            j.set_applied(p.pid, p.start_time, &pl.cpus);
        }
        j
    }

    fn protected(&self, pid: u32) -> bool {
        is_protected(pid, self.self_pid, &self.config.exclude)
    }

    /// Re-reads the identity; `Err` is the line to report when it is not the process
    /// the snapshot saw.
    fn check_identity(&mut self, p: &Process, cpus: &CpuSet) -> Result<(), Line> {
        let pid = p.pid;
        match self.kernel.identity(pid) {
            Ok(id) => {
                if self
                    .journal
                    .entry(pid)
                    .is_some_and(|e| e.start_time != id.start_time)
                {
                    // The journaled process is gone; its pid went to another.
                    self.journal.forget(pid);
                }
                if id.start_time != p.start_time {
                    Err(line(
                        pid,
                        cpus,
                        Action::Skipped,
                        format!(
                            "pid reused: start time {} now, {} in the snapshot",
                            id.start_time, p.start_time
                        ),
                    ))
                } else if id.kernel_thread {
                    Err(line(pid, cpus, Action::Skipped, "kernel thread"))
                } else {
                    Ok(())
                }
            }
            Err(e) => Err(self.error_line(pid, cpus, &e)),
        }
    }

    fn error_line(&self, pid: u32, cpus: &CpuSet, e: &KernelError) -> Line {
        if e.is_gone() {
            line(pid, cpus, Action::Gone, "exited")
        } else {
            line(pid, cpus, Action::Failed, e.to_string())
        }
    }

    /// Carries out one placement: first whether it may be (a pure check of the plan
    /// against the snapshot and the journal), then, thread by thread, the change.
    fn place(&mut self, pl: &Placement, proc: Option<&Process>, machine: &CpuSet) -> Line {
        match self.admit(pl, proc) {
            Ok(p) => self.carry_out(pl, p, machine),
            Err(refusal) => refusal,
        }
    }

    /// The process `pl` may change, or the line saying why not: nothing planned, a
    /// protected or vanished pid, one the kernel refused before, or a pin someone
    /// else set that the plan would leave. Reads only the process's identity.
    fn admit<'p>(
        &mut self,
        pl: &Placement,
        proc: Option<&'p Process>,
    ) -> Result<&'p Process, Line> {
        let pid = pl.pid;
        let target = &pl.cpus;
        if target.is_empty() {
            return Err(line(pid, target, Action::LeftAlone, pl.reason.clone()));
        }
        if self.protected(pid) {
            return Err(line(
                pid,
                target,
                Action::Skipped,
                "protected pid (init, kthreadd, numasched or excluded)",
            ));
        }
        let Some(p) = proc else {
            return Err(line(pid, target, Action::Skipped, "not in the snapshot"));
        };
        self.check_identity(p, target)?;
        if let Some(why) = self.refused.get(&p.key()) {
            return Err(line(
                pid,
                target,
                Action::LeftAlone,
                format!("left as it is: the kernel refused to move it ({why})"),
            ));
        }
        // A pin in the snapshot that is not numasched's own is someone else's.
        if let Some(allowed) = &p.allowed_cpus {
            let ours = self
                .journal
                .get(pid, p.start_time)
                .and_then(|e| e.applied.as_ref())
                .is_some_and(|a| a == allowed);
            if !ours && !target.is_subset(allowed) {
                return Err(line(
                    pid,
                    target,
                    Action::Refused,
                    format!("outside CPUs {allowed} pinned by someone else"),
                ));
            }
        }
        Ok(p)
    }

    /// Sets `pl` on every thread of admitted process `p`, journaling first, unless a
    /// pin found on the threads themselves (re-pinned since, or inherited from a
    /// parent numasched narrowed) says otherwise.
    fn carry_out(&mut self, pl: &Placement, p: &Process, machine: &CpuSet) -> Line {
        let (pid, start) = (pl.pid, p.start_time);
        let target = pl.cpus.clone();
        let entry = self.journal.get(pid, start).cloned();

        // Current affinity of every thread, read before changing anything.
        let (current, mut errors) = match self.read_threads(pid, start) {
            Ok(v) => v,
            Err(e) => return self.error_line(pid, &target, &e),
        };
        let Some((_, main)) = current
            .iter()
            .find(|(t, _)| *t == pid)
            .or_else(|| current.first())
            .cloned()
        else {
            return match errors.first() {
                Some(e) => line(pid, &target, Action::Failed, e.to_string()),
                None => line(pid, &target, Action::Gone, "exited"),
            };
        };

        // A child forked after numasched narrowed its parent inherited numasched's
        // set: that is not a pin of someone else's, and what it must get back is the
        // parent's original affinity, not the set it inherited.
        let inherited = if entry.is_none() {
            self.inherited_original(p, &main)
        } else {
            None
        };
        if let Some(orig) = &inherited {
            if !machine.is_subset(orig) && !target.is_subset(orig) {
                return line(
                    pid,
                    &target,
                    Action::Refused,
                    format!("outside its parent's original pin {orig}"),
                );
            }
        }

        if let Some(refusal) = self.pinned_elsewhere(
            pid,
            &target,
            entry.as_ref(),
            inherited.is_some(),
            (&main, &current),
            machine,
        ) {
            return refusal;
        }

        if self.config.dry_run {
            return dry_run_line(pid, &target, &current);
        }

        // Journal before the first change; threads new since an earlier pass
        // inherited numasched's set, so the process's original is theirs.
        let existed = entry.is_some();
        let original = self
            .journal
            .begin(pid, start, inherited.as_ref().unwrap_or(&main))
            .original
            .clone();
        let pass = self.set_threads(
            pid,
            start,
            &target,
            &current,
            entry.as_ref(),
            inherited.is_some(),
            (&main, &original),
            &mut errors,
        );
        let total = pass.seen.len();
        if let Some(e) = errors.iter().find(|e| e.is_refusal()) {
            return self.leave_alone(pid, start, existed, &target, &pass.undo_now, e, total);
        }
        // Only a set that was made is numasched's: one that failed everywhere leaves
        // nothing to own, and a process that had no entry keeps none.
        if pass.changed > 0 {
            self.journal.set_applied(pid, start, &target);
            self.journal.set_adopted(pid, start, false);
        } else if !existed {
            // Nothing changed (already there, or failed): nothing of numasched's to
            // undo, and an entry would "restore" whatever affinity it has now over
            // what someone else sets later.
            self.journal.forget(pid);
        }
        outcome_line(pid, &target, &pass, &errors, &pl.reason)
    }

    /// Every live thread of `pid` with its affinity, and the errors of threads whose
    /// affinity could not be read (threads that exited meanwhile are left out); the
    /// journal forgets threads that are gone. `Err` when the thread list itself fails.
    fn read_threads(
        &mut self,
        pid: u32,
        start: u64,
    ) -> Result<(ThreadAffinities, Vec<KernelError>), KernelError> {
        let tids = self.kernel.threads(pid)?;
        // Records of threads that exited since are of no more use.
        self.journal.retain_threads(pid, start, &tids);
        let mut current = Vec::with_capacity(tids.len());
        let mut errors: Vec<KernelError> = Vec::new();
        for tid in tids {
            match self.kernel.affinity(pid, tid) {
                Ok(c) => current.push((tid, c)),
                Err(e) if e.is_gone() => {}
                Err(e) => errors.push(e),
            }
        }
        Ok((current, errors))
    }

    /// Why `target` must not be set on `pid` because someone else pinned it: re-pinned
    /// since numasched set it (then numasched lets go of it, putting back the threads
    /// that still carry its set), or `target` leaves the original pin. `main_current`
    /// is the main thread's affinity and every thread's, read this pass.
    fn pinned_elsewhere(
        &mut self,
        pid: u32,
        target: &CpuSet,
        entry: Option<&Entry>,
        inherited: bool,
        (main, current): (&CpuSet, &[(u32, CpuSet)]),
        machine: &CpuSet,
    ) -> Option<Line> {
        let fmt = cpulist::format;
        match entry {
            Some(e) => {
                if let Some(applied) = &e.applied {
                    // Not numasched's set (nor that set as a cpuset narrowed it), or
                    // narrowed while another thread still carries the set whole (a
                    // cpuset narrows them all).
                    let cpuset = if main == applied {
                        None
                    } else {
                        self.kernel.cpuset_cpus(pid).ok().flatten()
                    };
                    let narrowed_alone = undo::re_pinned_alone(pid, main, current, applied);
                    if !undo::still_ours(main, applied, cpuset.as_ref()) || narrowed_alone {
                        // Someone re-pinned it after numasched did: their choice now.
                        // Threads they did not touch (`taskset -p` sets the main
                        // thread only) still carry numasched's set: those go back,
                        // the re-pinned ones stay as they were set.
                        let r = undo::restore(&self.kernel, &mut self.journal, pid);
                        self.journal.forget(pid);
                        return Some(line(
                            pid,
                            target,
                            Action::Yielded,
                            format!(
                                "re-pinned to {} by someone else; no longer managed ({r})",
                                fmt(main)
                            ),
                        ));
                    }
                }
                if !machine.is_subset(&e.original) && !target.is_subset(&e.original) {
                    return Some(line(
                        pid,
                        target,
                        Action::Refused,
                        format!("outside its original pin {}", fmt(&e.original)),
                    ));
                }
            }
            None if inherited => {}
            None => {
                if !machine.is_subset(main) && !target.is_subset(main) {
                    return Some(line(
                        pid,
                        target,
                        Action::Refused,
                        format!("outside CPUs {} pinned by someone else", fmt(main)),
                    ));
                }
            }
        }
        None
    }

    /// Sets `target` on every thread of `pid` that is numasched's to set, in up to
    /// [`THREAD_ROUNDS`] rounds (threads created while it ran are met in the next),
    /// journalling each thread's original first. `current` is every thread's affinity
    /// read before anything changed, `entry` the process's journal entry from before
    /// this pass, `inherited` whether it carries a parent's set from numasched, and
    /// `main_original` the main thread's affinity and the process's original.
    #[allow(clippy::too_many_arguments)]
    fn set_threads(
        &mut self,
        pid: u32,
        start: u64,
        target: &CpuSet,
        current: &[(u32, CpuSet)],
        entry: Option<&Entry>,
        inherited: bool,
        (main, original): (&CpuSet, &CpuSet),
        errors: &mut Vec<KernelError>,
    ) -> ThreadPass {
        let existed = entry.is_some();
        let mut changed = 0;
        let mut foreign_threads = 0;
        // Threads changed in this pass, with what they had: undone if the kernel
        // refuses part of the process.
        let mut undo_now: Vec<(u32, CpuSet)> = Vec::new();
        let mut seen: Vec<u32> = Vec::new();
        for round in 0..THREAD_ROUNDS {
            let batch: Vec<(u32, CpuSet)> = if round == 0 {
                current.to_vec()
            } else {
                // Threads created while this pass ran.
                let tids = match self.kernel.threads(pid) {
                    Ok(t) => t,
                    Err(_) => break,
                };
                tids.into_iter()
                    .filter(|t| !seen.contains(t))
                    .filter_map(|t| self.kernel.affinity(pid, t).ok().map(|c| (t, c)))
                    .collect()
            };
            if batch.is_empty() {
                break;
            }
            for (tid, cur) in batch {
                seen.push(tid);
                // A thread the application pinned itself (its affinity differs from
                // the main thread's, at numasched's first pass) is its own: left as it
                // is, and never "restored".
                // Later, a thread numasched has no record of (created since) is taken
                // over only if it carries numasched's set, which it inherited; with any
                // other set the application chose it. Once the application's, always.
                // A thread numasched set and that no longer carries that set, while
                // a sibling still does, was re-pinned alone since (the application
                // pinned it, or `taskset -p` on its tid): theirs from now.
                let recorded = entry.is_some_and(|e| e.threads.contains_key(&tid));
                let known_foreign = entry.is_some_and(|e| e.foreign.contains(&tid));
                let applied = entry.and_then(|e| e.applied.as_ref());
                let foreign = if known_foreign {
                    true
                } else if round == 0 && !existed && !inherited {
                    cur != *main
                } else if round == 0 && existed && !recorded {
                    applied.is_some_and(|a| *a != cur)
                } else if round == 0 && existed {
                    applied.is_some_and(|a| undo::re_pinned_alone(tid, &cur, current, a))
                } else {
                    false
                };
                if foreign {
                    self.journal.mark_foreign(pid, start, tid);
                    foreign_threads += 1;
                    continue;
                }
                let orig = if round > 0 || (existed && !recorded) || inherited {
                    original
                } else {
                    &cur
                };
                self.journal.remember_thread(pid, start, tid, orig);
                if cur == *target {
                    continue;
                }
                match self.kernel.set_affinity(pid, tid, target) {
                    Ok(()) => {
                        changed += 1;
                        undo_now.push((tid, cur));
                    }
                    Err(e) if e.is_gone() => {}
                    Err(e) => errors.push(e),
                }
            }
        }
        ThreadPass {
            changed,
            foreign_threads,
            undo_now,
            seen,
        }
    }

    /// The kernel refused to move some thread of `pid`: puts back the threads this pass
    /// changed (and, if numasched had changed the process before, all of it), so the
    /// process is not left half-moved, and remembers not to try again.
    #[allow(clippy::too_many_arguments)]
    fn leave_alone(
        &mut self,
        pid: u32,
        start: u64,
        existed: bool,
        target: &CpuSet,
        changed: &[(u32, CpuSet)],
        cause: &KernelError,
        total: usize,
    ) -> Line {
        let mut undone = 0;
        for (tid, before) in changed {
            if self.kernel.set_affinity(pid, *tid, before).is_ok() {
                undone += 1;
            }
        }
        if existed {
            let _ = undo::restore(&self.kernel, &mut self.journal, pid);
        } else {
            self.journal.forget(pid);
        }
        let why = cause.to_string();
        self.refused.insert(
            ProcessKey {
                pid,
                start_time: start,
            },
            why.clone(),
        );
        line(
            pid,
            target,
            Action::Failed,
            format!(
                "{why}; {undone} of {} set back, and the process is left as it was from \
                 now on",
                count(total, "thread")
            ),
        )
    }

    fn move_pages(
        &mut self,
        mv: &PageMove,
        snapshot: &Snapshot,
        report: &ApplyReport,
        bucket: &mut TokenBucket,
        clock: &mut StepClock,
    ) -> Line {
        let pid = mv.pid;
        let mk = |action, detail: String| Line {
            pid,
            subject: Subject::Pages {
                from: mv.from_node,
                to: mv.to_node,
                bytes: mv.bytes,
            },
            action,
            detail,
        };
        if !self.config.migrate_pages {
            return mk(Action::Skipped, "page migration disabled".into());
        }
        if self.protected(pid) {
            return mk(Action::Skipped, "protected pid".into());
        }
        // Memory follows the CPUs: not where the placement was refused or failed.
        if let Some(l) = report.placement(pid) {
            if !matches!(
                l.action,
                Action::Done | Action::Unchanged | Action::DryRun | Action::LeftAlone
            ) {
                return mk(
                    Action::Skipped,
                    format!("its placement was not applied ({})", l.detail),
                );
            }
        }
        let Some(p) = snapshot.processes.iter().find(|p| p.pid == pid) else {
            return mk(Action::Skipped, "not in the snapshot".into());
        };
        if let Err(l) = self.check_identity(p, &CpuSet::new()) {
            return mk(l.action, l.detail);
        }
        if self.config.kernel_balancing && placed_on(report, snapshot, p) == Some(mv.to_node) {
            return mk(
                Action::Skipped,
                format!(
                    "kernel NUMA balancing (kernel.numa_balancing=1) moves its pages toward \
                     node {} itself",
                    mv.to_node
                ),
            );
        }
        if let Some(m) = self.migrations.get(pid) {
            return mk(
                Action::Deferred,
                format!(
                    "a move to node {} is in progress ({:.1} MB so far)",
                    m.to,
                    m.moved_bytes as f64 / 1e6
                ),
            );
        }
        match self.kernel.mems_allowed(pid) {
            Ok(mems) if mems.is_empty() => {
                return mk(Action::Failed, "its Mems_allowed is empty".into());
            }
            Ok(mems) if !mems.contains(&mv.to_node) => {
                return mk(
                    Action::Refused,
                    format!(
                        "node {} is outside its Mems_allowed ({})",
                        mv.to_node,
                        cpulist::format(&mems)
                    ),
                );
            }
            Ok(_) => {}
            Err(e) => {
                return mk(
                    self.error_line(pid, &CpuSet::new(), &e).action,
                    e.to_string(),
                )
            }
        }
        if bucket.available() <= 0.0 {
            return mk(
                Action::Deferred,
                format!(
                    "rate limit: no budget left of {:.1} MB/s",
                    self.config.migrate_mb_per_s
                ),
            );
        }
        if self.config.dry_run {
            return mk(Action::DryRun, format!("would migrate: {}", mv.reason));
        }
        let regions = match self.kernel.regions(pid) {
            Ok(r) => r,
            Err(e) => {
                return mk(
                    self.error_line(pid, &CpuSet::new(), &e).action,
                    e.to_string(),
                )
            }
        };
        let Some(m) = Migration::new(
            pid,
            p.start_time,
            mv.from_node,
            mv.to_node,
            mv.bytes,
            mv.reason.clone(),
            &regions,
        ) else {
            return mk(
                Action::Unchanged,
                format!("no movable pages left on node {}", mv.from_node),
            );
        };
        self.migrations.start(m);
        // The first chunks go now, in this pass's budget.
        let mut lines = self.step_migrations(bucket, clock);
        match lines.iter().position(|l| l.pid == pid) {
            Some(i) => lines.swap_remove(i),
            None => mk(Action::Deferred, "started".into()),
        }
    }
}

/// The one node `p` runs on after this pass: that of the CPUs its placement set, or of
/// the CPUs it ran on when the plan left it alone; `None` when they span nodes.
fn placed_on(report: &ApplyReport, snapshot: &Snapshot, p: &Process) -> Option<NodeId> {
    let topo = &snapshot.topology;
    set_on(report, topo, p.pid).or_else(|| node_of(topo, &p.current_cpus))
}

/// The one node of the affinity this pass gave `pid` (or kept), if it gave one.
fn set_on(report: &ApplyReport, topo: &Topology, pid: u32) -> Option<NodeId> {
    match report.placement(pid).map(|l| (&l.subject, l.action)) {
        Some((Subject::Affinity { cpus }, Action::Done | Action::Unchanged)) => node_of(topo, cpus),
        _ => None,
    }
}

/// The node all of `cpus` are on; `None` when they span nodes (or are none).
fn node_of(topo: &Topology, cpus: &CpuSet) -> Option<NodeId> {
    let mut nodes = cpus
        .iter()
        .filter_map(|&c| topo.cpu(c).map(|cpu| topo.nodes()[cpu.node].id));
    let first = nodes.next()?;
    nodes.all(|n| n == first).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::fake::{Call, FakeKernel, Fault};
    use crate::apply::kernel::{ErrorKind, Op};
    use numasched_model::topology::{self, CpuId};

    /// Two CPUs (0, 1), one node; processes 100.. with start time = pid.
    fn snap(pids: &[u32]) -> Snapshot {
        Snapshot {
            topology: topology::machine("1n:1l:2c:1t").unwrap(),
            processes: pids
                .iter()
                .map(|&pid| {
                    let mut p = Process::new(pid, "t");
                    p.start_time = pid as u64;
                    p
                })
                .collect(),
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        }
    }

    /// [`snap`] on a machine of three CPUs.
    fn snap3(pids: &[u32]) -> Snapshot {
        Snapshot {
            topology: topology::machine("1n:1l:3c:1t").unwrap(),
            ..snap(pids)
        }
    }

    fn plan(places: &[(u32, &[CpuId])]) -> Plan {
        Plan::new(
            "test",
            places
                .iter()
                .map(|&(pid, cpus)| Placement {
                    pid,
                    cpus: CpuSet::from(cpus),
                    nodes: vec![0],
                    reason: "test".into(),
                })
                .collect(),
        )
    }

    fn kernel(procs: &[(u32, u32)]) -> FakeKernel {
        let k = FakeKernel::new(&[0, 1]);
        for &(pid, threads) in procs {
            k.add(pid, pid as u64, threads, &[0, 1]);
        }
        k
    }

    fn actuator(k: FakeKernel) -> Actuator<FakeKernel> {
        Actuator::new(k, ActuatorConfig::default())
    }

    fn action(r: &ApplyReport, pid: u32) -> Action {
        r.placement(pid).unwrap().action
    }

    #[test]
    fn a_child_that_inherited_numascheds_set_gets_its_parents_original_back() {
        let k = kernel(&[(100, 1)]);
        let mut a = actuator(k);
        let s = snap(&[100]);
        assert_eq!(
            action(&a.apply(&plan(&[(100, &[0])]), &s), 100),
            Action::Done
        );
        // The parent forks after being narrowed to CPU 0: the child starts there.
        a.kernel().add(101, 101, 1, &[0]);
        let mut s = snap(&[100, 101]);
        s.processes[1].parent = Some(100);
        let r = a.apply(&plan(&[(100, &[0]), (101, &[1])]), &s);
        assert_eq!(action(&r, 101), Action::Done, "not someone else's pin");
        assert_eq!(a.kernel().affinity_of(101, 101), Some(vec![1].into()));
        a.restore_all();
        assert_eq!(a.kernel().affinity_of(101, 101), Some(vec![0, 1].into()));
        assert_eq!(a.kernel().affinity_of(100, 100), Some(vec![0, 1].into()));
    }

    #[test]
    fn intents_hold_what_a_pass_will_change_before_it_changes_it() {
        let k = kernel(&[(100, 2), (101, 1)]);
        let a = actuator(k);
        let j = a.intents(&plan(&[(100, &[1]), (101, &[])]), &snap(&[100, 101]));
        let e = j.get(100, 100).expect("intent journaled");
        assert_eq!(e.original, vec![0, 1]);
        assert_eq!(e.threads.len(), 2);
        assert_eq!(e.applied, Some(vec![1].into()));
        assert!(j.entry(101).is_none(), "left alone: nothing to undo");
        assert!(
            a.journal().is_empty(),
            "the actuator's own journal is untouched"
        );
        assert!(a.kernel().calls().is_empty(), "intents change nothing");
    }

    /// A process already placed and re-placed: the intents name the set it is to get
    /// beside the one it has; the actuator's own journal does not.
    #[test]
    fn intents_hold_a_re_placement_before_it_is_made() {
        let k = kernel(&[(100, 1)]);
        let mut a = actuator(k);
        a.apply(&plan(&[(100, &[1])]), &snap(&[100]));
        let j = a.intents(&plan(&[(100, &[0])]), &snap(&[100]));
        let e = j.get(100, 100).expect("journaled");
        assert_eq!(e.applied, Some(vec![1].into()));
        assert_eq!(e.pending, Some(vec![0].into()));
        assert_eq!(a.journal().get(100, 100).expect("own").pending, None);
        assert_eq!(a.kernel().affinity_of(100, 100), Some(vec![1].into()));
        // Staying where it is needs nothing pending.
        let same = a.intents(&plan(&[(100, &[1])]), &snap(&[100]));
        assert_eq!(same.get(100, 100).expect("journaled").pending, None);
    }

    #[test]
    fn a_child_narrowed_by_someone_else_is_still_pinned() {
        let k = kernel(&[(100, 1)]);
        let mut a = actuator(k);
        a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        // taskset -c 1 on the child: not what numasched gave the parent.
        a.kernel().add(101, 101, 1, &[1]);
        let mut s = snap(&[100, 101]);
        s.processes[1].parent = Some(100);
        let r = a.apply(&plan(&[(100, &[0]), (101, &[0])]), &s);
        assert_eq!(action(&r, 101), Action::Refused);
        assert_eq!(a.kernel().affinity_of(101, 101), Some(vec![1].into()));
    }

    #[test]
    fn sets_every_thread_journals_and_restores() {
        let mut a = actuator(kernel(&[(100, 3)]));
        let r = a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        assert_eq!(action(&r, 100), Action::Done, "{r}");
        for tid in 100..103 {
            assert_eq!(a.kernel().affinity_of(100, tid), Some(vec![0].into()));
        }
        let e = a.journal().get(100, 100).unwrap();
        assert_eq!(e.threads.len(), 3);
        assert_eq!(e.original_of(101), &[0, 1]);
        // A second pass changes nothing and keeps the originals.
        let r = a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        assert_eq!(action(&r, 100), Action::Unchanged, "{r}");
        assert_eq!(a.journal().get(100, 100).unwrap().original_of(100), &[0, 1]);
        assert_eq!(
            a.restore(100),
            Restored::Done {
                threads: 3,
                foreign: 0
            }
        );
        for tid in 100..103 {
            assert_eq!(a.kernel().affinity_of(100, tid), Some(vec![0, 1].into()));
        }
    }

    #[test]
    fn threads_appearing_mid_pass_and_later_are_placed_and_restored() {
        let mut a = actuator(kernel(&[(100, 2)]));
        // Created while the first thread is being set: inherits the old affinity.
        a.kernel()
            .inject(Op::SetAffinity, 100, Fault::SpawnThread { tid: 150 });
        let r = a.apply(&plan(&[(100, &[1])]), &snap(&[100]));
        assert_eq!(action(&r, 100), Action::Done, "{r}");
        assert_eq!(
            a.kernel().affinity_of(100, 150),
            Some(vec![1].into()),
            "{r}"
        );
        // Created between passes from a placed thread: inherits numasched's set; the
        // next pass records the process's original for it, not the inherited set.
        a.kernel()
            .inject(Op::Identity, 100, Fault::SpawnThread { tid: 160 });
        let r = a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        assert_eq!(action(&r, 100), Action::Done, "{r}");
        let e = a.journal().get(100, 100).unwrap();
        assert_eq!(e.original_of(160), &[0, 1]);
        a.restore_all();
        for tid in [100, 101, 150, 160] {
            assert_eq!(a.kernel().affinity_of(100, tid), Some(vec![0, 1].into()));
        }
    }

    #[test]
    fn eperm_and_einval_fail_one_process_not_the_pass() {
        let k = kernel(&[(100, 1), (200, 1), (300, 1)]);
        k.inject_always(
            Op::SetAffinity,
            100,
            Fault::Fail(ErrorKind::PermissionDenied),
        );
        // A cpuset that allows only CPU 1: the kernel answers EINVAL for CPU 0.
        k.with_proc(200, |p| p.cpuset = Some(vec![1].into()));
        let mut a = actuator(k);
        let r = a.apply(
            &plan(&[(100, &[0]), (200, &[0]), (300, &[0])]),
            &snap(&[100, 200, 300]),
        );
        let l = r.placement(100).unwrap();
        assert_eq!(l.action, Action::Failed);
        assert!(
            l.detail.contains("EPERM") && l.detail.contains("pid 100"),
            "{l}"
        );
        let l = r.placement(200).unwrap();
        assert_eq!(l.action, Action::Failed);
        assert!(l.detail.contains("EINVAL"), "{l}");
        assert_eq!(action(&r, 300), Action::Done);
        assert_eq!(r.to_string().lines().count(), 3);
        // The failed ones' threads are still where they were.
        assert_eq!(a.kernel().affinity_of(100, 100), Some(vec![0, 1].into()));
        assert_eq!(a.kernel().affinity_of(200, 200), Some(vec![0, 1].into()));
    }

    /// Issue 17: children forked after placement inherited numasched's set and were
    /// never journaled, so SIGTERM, release and crash recovery left them narrowed.
    #[test]
    fn children_forked_after_placement_are_journaled_and_go_back_with_the_parent() {
        let k = kernel(&[(100, 1)]);
        let mut a = actuator(k);
        a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        a.kernel().fork(100, 150, 150); // carries {0}
        a.kernel().fork(150, 160, 160); // a grandchild, also {0}
        a.kernel().fork(100, 170, 170);
        a.kernel()
            .with_proc(170, |p| p.threads.insert(170, vec![1].into())); // its own choice
        assert_eq!(a.adopt_descendants().len(), 2);
        let e = a.journal().get(150, 150).expect("child journaled");
        assert!(e.adopted);
        assert_eq!(e.original, vec![0, 1], "the parent's original");
        assert!(a.journal().get(160, 160).is_some(), "grandchild journaled");
        assert!(
            a.journal().get(170, 170).is_none(),
            "its own pin is not ours"
        );
        assert!(a.adopt_descendants().is_empty(), "once");
        // Released: the parent and what inherited its set go back; the other stays.
        a.restore(100);
        assert_eq!(a.kernel().affinity_of(100, 100), Some(vec![0, 1].into()));
        assert_eq!(a.kernel().affinity_of(150, 150), Some(vec![0, 1].into()));
        assert_eq!(a.kernel().affinity_of(160, 160), Some(vec![0, 1].into()));
        assert_eq!(a.kernel().affinity_of(170, 170), Some(vec![1].into()));
        assert!(a.journal().is_empty(), "{:?}", a.journal());
    }

    /// An epoch in which no task came or went skips the walks for children and
    /// orphans (there can be none new), but still learns the session of a process
    /// placed in it: once that process exits, its orphans are known by it.
    #[test]
    fn an_epoch_without_forks_or_exits_skips_the_walks_but_learns_sessions() {
        let k = kernel(&[(1, 1), (100, 1)]);
        let mut a = actuator(k);
        a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        assert_eq!(a.follow_forks(false, None, 0.0), Followed::default());
        assert_eq!(a.journal().get(100, 100).and_then(|e| e.session), Some(100));
        a.kernel().fork(100, 150, 150); // carries {0}
        a.kernel().exit(100);
        // The caller's word: nothing came or went, so nothing is looked for.
        assert_eq!(a.follow_forks(false, None, 0.0), Followed::default());
        assert!(a.journal().get(150, 150).is_none());
        let f = a.follow_forks(true, None, 0.0);
        assert!(f.adopted.is_empty(), "150 went back with the orphan: {f:?}");
        let r = f.restored;
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].0, 150);
        assert_eq!(a.kernel().affinity_of(150, 150), Some(vec![0, 1].into()));
    }

    /// At stop, an orphan handed to init since the last epoch goes back, and so
    /// does what it forked meanwhile (found from the orphan, as its placed parent
    /// is gone).
    #[test]
    fn at_stop_an_orphans_own_child_goes_back_too() {
        let k = kernel(&[(1, 1), (100, 1)]);
        let mut a = actuator(k);
        a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        assert_eq!(a.follow_forks(true, None, 0.0), Followed::default());
        a.kernel().fork(100, 150, 150); // carries {0}
        a.kernel().exit(100);
        a.kernel().fork(150, 160, 160); // so does its child
        a.restore_all();
        assert_eq!(a.kernel().affinity_of(150, 150), Some(vec![0, 1].into()));
        assert_eq!(a.kernel().affinity_of(160, 160), Some(vec![0, 1].into()));
        assert!(a.journal().is_empty(), "{:?}", a.journal());
    }

    /// A child forked while its parent had numasched's set {0}, met only after the
    /// parent was given {1}: it carries a set numasched gave, not a pin of someone
    /// else's. It was refused as one ("outside CPUs 0 pinned by someone else") and
    /// kept on one CPU after the parent left (a trial: 0.5 of its unmanaged rate).
    #[test]
    fn a_child_carrying_the_parents_earlier_set_is_numascheds_to_place_and_undo() {
        let k = kernel(&[(100, 1)]);
        let mut a = actuator(k);
        a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        a.kernel().fork(100, 150, 150); // carries {0}
        a.apply(&plan(&[(100, &[1])]), &snap(&[100]));
        let mut s = snap(&[100, 150]);
        s.processes[1].parent = Some(100);
        let r = a.apply(&plan(&[(100, &[1]), (150, &[1])]), &s);
        assert_eq!(action(&r, 150), Action::Done, "{r}");
        let e = a.journal().get(150, 150).expect("journaled");
        assert_eq!(e.original, vec![0, 1], "the parent's original");
        a.restore_all();
        assert_eq!(a.kernel().affinity_of(150, 150), Some(vec![0, 1].into()));

        // Adopted too when no plan places it: it goes back with the parent.
        let k = kernel(&[(100, 1)]);
        let mut a = actuator(k);
        a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        a.kernel().fork(100, 150, 150);
        a.apply(&plan(&[(100, &[1])]), &snap(&[100]));
        assert_eq!(a.adopt_descendants().len(), 1);
        a.restore(100);
        assert_eq!(a.kernel().affinity_of(150, 150), Some(vec![0, 1].into()));
    }

    /// Issue 17: pins judged per thread. A thread the application pinned to CPU 1
    /// itself is neither moved with the rest nor "restored" to the process's original.
    #[test]
    fn a_thread_the_application_pinned_is_its_own() {
        let k = kernel(&[(100, 3)]);
        k.with_proc(100, |p| p.threads.insert(102, vec![1].into()));
        let mut a = actuator(k);
        let r = a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        let l = r.placement(100).unwrap();
        assert_eq!(l.action, Action::Done);
        assert!(l.detail.contains("left 1 pinned by the application"), "{l}");
        assert_eq!(a.kernel().affinity_of(100, 101), Some(vec![0].into()));
        assert_eq!(
            a.kernel().affinity_of(100, 102),
            Some(vec![1].into()),
            "not moved"
        );
        // Nor by a later re-plan.
        a.apply(&plan(&[(100, &[1])]), &snap(&[100]));
        assert_eq!(a.kernel().affinity_of(100, 101), Some(vec![1].into()));
        a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        assert_eq!(
            a.kernel().affinity_of(100, 102),
            Some(vec![1].into()),
            "not moved later"
        );
        a.restore_all();
        assert_eq!(a.kernel().affinity_of(100, 101), Some(vec![0, 1].into()));
        assert_eq!(
            a.kernel().affinity_of(100, 102),
            Some(vec![1].into()),
            "not widened"
        );
    }

    /// Issue 17: a thread that pinned itself after numasched placed the process (to a
    /// CPU inside numasched's set or outside it) is the application's from then on:
    /// a re-plan does not move it, and stopping does not widen it.
    #[test]
    fn a_thread_that_pins_itself_after_placement_is_its_own() {
        let k = FakeKernel::new(&[0, 1, 2]);
        k.add(100, 100, 3, &[0, 1, 2]);
        let mut a = actuator(k);
        let s = snap3(&[100]);
        a.apply(&plan(&[(100, &[0, 1])]), &s);
        assert_eq!(a.kernel().affinity_of(100, 102), Some(vec![0, 1].into()));
        a.kernel()
            .with_proc(100, |p| p.threads.insert(101, vec![1].into()));
        a.kernel()
            .with_proc(100, |p| p.threads.insert(102, vec![2].into()));
        let r = a.apply(&plan(&[(100, &[2])]), &s);
        assert_eq!(action(&r, 100), Action::Done, "{r}");
        assert_eq!(
            a.kernel().affinity_of(100, 100),
            Some(vec![2].into()),
            "ours, moved"
        );
        assert_eq!(
            a.kernel().affinity_of(100, 101),
            Some(vec![1].into()),
            "theirs"
        );
        assert_eq!(
            a.kernel().affinity_of(100, 102),
            Some(vec![2].into()),
            "theirs"
        );
        a.restore_all();
        assert_eq!(a.kernel().affinity_of(100, 100), Some(vec![0, 1, 2].into()));
        assert_eq!(
            a.kernel().affinity_of(100, 101),
            Some(vec![1].into()),
            "not widened"
        );
        assert_eq!(
            a.kernel().affinity_of(100, 102),
            Some(vec![2].into()),
            "not widened"
        );
    }

    /// Issue 17: `taskset -p -c 0 PID` inside numasched's own set {0, 1} narrows the
    /// main thread alone (a cpuset would narrow every thread): the administrator's.
    #[test]
    fn a_main_thread_narrowed_inside_numascheds_set_is_theirs() {
        let k = FakeKernel::new(&[0, 1, 2]);
        k.add(100, 100, 2, &[0, 1, 2]);
        let mut a = actuator(k);
        let s = snap3(&[100]);
        a.apply(&plan(&[(100, &[0, 1])]), &s);
        a.kernel()
            .with_proc(100, |p| p.threads.insert(100, vec![0].into()));
        let r = a.apply(&plan(&[(100, &[2])]), &s);
        assert_eq!(action(&r, 100), Action::Yielded, "{r}");
        assert_eq!(
            a.kernel().affinity_of(100, 100),
            Some(vec![0].into()),
            "theirs"
        );
        assert_eq!(
            a.kernel().affinity_of(100, 101),
            Some(vec![0, 1, 2].into()),
            "back"
        );
    }

    /// Issue 41: a single-threaded process numasched narrowed to 0-1, then pinned by an
    /// administrator to CPU 0 (inside numasched's set, every thread alike, no cpuset):
    /// the next pass must leave it there, not take it for a cpuset's narrowing and set
    /// numasched's plan over it.
    #[test]
    fn a_pin_inside_numascheds_set_on_every_thread_is_theirs() {
        let k = FakeKernel::new(&[0, 1, 2]);
        k.add(100, 100, 1, &[0, 1, 2]);
        let mut a = actuator(k);
        let s = snap3(&[100]);
        a.apply(&plan(&[(100, &[0, 1])]), &s);
        a.kernel()
            .with_proc(100, |p| p.threads.insert(100, vec![0].into()));
        let r = a.apply(&plan(&[(100, &[2])]), &s);
        assert_eq!(action(&r, 100), Action::Yielded, "{r}");
        assert_eq!(a.kernel().affinity_of(100, 100), Some(vec![0].into()));
        a.restore_all();
        assert_eq!(a.kernel().affinity_of(100, 100), Some(vec![0].into()));
    }

    /// Issue 17: `taskset -p -c 0-1 PID` re-pins the main thread only; the daemon
    /// dropped the process and left its busy worker on CPU 0 for good. The worker goes
    /// back; the main thread keeps what the administrator set.
    #[test]
    fn a_main_thread_re_pinned_by_someone_else_gives_the_others_back() {
        let k = FakeKernel::new(&[0, 1, 2]);
        k.add(100, 100, 2, &[0, 1, 2]);
        let mut a = actuator(k);
        let s = snap3(&[100]);
        a.apply(&plan(&[(100, &[0])]), &s);
        a.kernel()
            .with_proc(100, |p| p.threads.insert(100, vec![1, 2].into()));
        let r = a.apply(&plan(&[(100, &[2])]), &s);
        assert_eq!(action(&r, 100), Action::Yielded, "{r}");
        assert_eq!(
            a.kernel().affinity_of(100, 100),
            Some(vec![1, 2].into()),
            "theirs"
        );
        assert_eq!(
            a.kernel().affinity_of(100, 101),
            Some(vec![0, 1, 2].into()),
            "ours, back"
        );
        assert!(a.journal().is_empty());
    }

    /// Issue 17: with the main thread under SCHED_DEADLINE (EBUSY) the worker was
    /// narrowed, the set journaled as applied, and later "restored" from numasched's own
    /// set. Now the worker is set back at once, nothing is journaled, and the process is
    /// not tried again.
    #[test]
    fn a_kernel_refusal_sets_back_what_the_pass_changed_and_is_not_retried() {
        let k = kernel(&[(100, 2)]);
        k.inject(Op::SetAffinity, 100, Fault::Fail(ErrorKind::Busy));
        let mut a = actuator(k);
        let s = snap(&[100]);
        let r = a.apply(&plan(&[(100, &[0])]), &s);
        let l = r.placement(100).unwrap();
        assert_eq!(l.action, Action::Failed);
        assert!(
            l.detail.contains("EBUSY") && l.detail.contains("set back"),
            "{l}"
        );
        assert_eq!(a.kernel().affinity_of(100, 100), Some(vec![0, 1].into()));
        assert_eq!(
            a.kernel().affinity_of(100, 101),
            Some(vec![0, 1].into()),
            "worker set back"
        );
        assert!(a.journal().is_empty(), "{:?}", a.journal());
        let calls = a.kernel().calls().len();
        let r = a.apply(&plan(&[(100, &[1])]), &s);
        assert_eq!(action(&r, 100), Action::LeftAlone, "{r}");
        assert_eq!(a.kernel().calls().len(), calls, "not tried again");
    }

    /// A set that failed on every thread (EPERM) leaves no journal entry claiming it
    /// was applied.
    #[test]
    fn a_set_that_failed_is_not_recorded_as_applied() {
        let k = kernel(&[(100, 1)]);
        k.inject_always(
            Op::SetAffinity,
            100,
            Fault::Fail(ErrorKind::PermissionDenied),
        );
        let mut a = actuator(k);
        let r = a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        assert_eq!(action(&r, 100), Action::Failed);
        assert!(a.journal().get(100, 100).is_none(), "{:?}", a.journal());
    }

    /// Records of threads that exited are dropped at the next pass (issue 17: 87
    /// records for 4 live threads after 26 re-plans).
    #[test]
    fn records_of_exited_threads_are_pruned() {
        let k = kernel(&[(100, 3)]);
        let mut a = actuator(k);
        let s = snap(&[100]);
        a.apply(&plan(&[(100, &[0])]), &s);
        assert_eq!(a.journal().get(100, 100).unwrap().threads.len(), 3);
        a.kernel().with_proc(100, |p| p.threads.remove(&102));
        a.apply(&plan(&[(100, &[1])]), &s);
        let e = a.journal().get(100, 100).unwrap();
        assert_eq!(
            e.threads.keys().copied().collect::<Vec<_>>(),
            vec![100, 101]
        );
    }

    #[test]
    fn processes_and_threads_exiting_mid_apply_are_normal() {
        let k = kernel(&[(100, 1), (200, 3), (300, 1), (400, 1)]);
        k.inject(Op::ListThreads, 100, Fault::Exit);
        k.inject_after(Op::SetAffinity, 200, 1, Fault::EndThread { tid: 201 });
        k.inject(Op::SetAffinity, 300, Fault::Exit);
        k.inject(Op::Identity, 400, Fault::Exit);
        let mut a = actuator(k);
        let r = a.apply(
            &plan(&[(100, &[0]), (200, &[0]), (300, &[0]), (400, &[0])]),
            &snap(&[100, 200, 300, 400]),
        );
        assert_eq!(action(&r, 100), Action::Gone, "{r}");
        assert_eq!(action(&r, 200), Action::Done, "{r}");
        assert_eq!(action(&r, 300), Action::Unchanged, "{r}");
        assert_eq!(action(&r, 400), Action::Gone, "{r}");
        assert_eq!(r.count(Action::Failed), 0, "{r}");
        // 300 exited before anything changed: nothing of it is journaled.
        assert!(a.journal().get(300, 300).is_none());
        assert!(a.forget_gone(&snap(&[])).is_empty());
    }

    #[test]
    fn pid_reuse_is_never_touched() {
        let k = kernel(&[(100, 1)]);
        k.inject(Op::Identity, 100, Fault::Reuse { start_time: 7 });
        let mut a = actuator(k);
        let r = a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        let l = r.placement(100).unwrap();
        assert_eq!(l.action, Action::Skipped);
        assert!(l.detail.contains("pid reused"), "{l}");
        assert!(a.kernel().calls().is_empty());
        assert!(a.journal().is_empty());

        // Reuse after numasched placed the old process: its entry is dropped, and a
        // restore does not touch the newcomer.
        let mut a = actuator(kernel(&[(100, 1)]));
        a.apply(&plan(&[(100, &[0])]), &snap(&[100]));
        a.kernel().remove(100);
        a.kernel().add(100, 8, 1, &[1]);
        let before = a.kernel().calls().len();
        assert_eq!(a.restore(100), Restored::Reused);
        assert_eq!(a.kernel().calls().len(), before);
        assert_eq!(a.kernel().affinity_of(100, 100), Some(vec![1].into()));
    }

    #[test]
    fn foreign_pins_are_kept() {
        // The snapshot saw a pin to CPU 1; the plan wants CPU 0.
        let mut s = snap(&[100, 200, 300]);
        s.processes[0].allowed_cpus = Some(vec![1].into());
        let k = kernel(&[(100, 1), (200, 1), (300, 1)]);
        k.with_proc(100, |p| p.threads.insert(100, vec![1].into()));
        // Pinned after the snapshot was taken: only the live affinity says so.
        k.with_proc(200, |p| p.threads.insert(200, vec![1].into()));
        let mut a = actuator(k);
        let r = a.apply(&plan(&[(100, &[0]), (200, &[0]), (300, &[1])]), &s);
        for pid in [100, 200] {
            let l = r.placement(pid).unwrap();
            assert_eq!(l.action, Action::Refused, "{l}");
            assert!(l.detail.contains("pinned by someone else"), "{l}");
            assert_eq!(a.kernel().affinity_of(pid, pid), Some(vec![1].into()));
        }
        // Inside a pin is fine.
        let r = a.apply(&plan(&[(100, &[1])]), &s);
        assert_eq!(action(&r, 100), Action::Unchanged, "{r}");

        // Numasched's own pin, seen by the next snapshot, is not foreign...
        let mut s2 = snap(&[300]);
        s2.processes[0].allowed_cpus = Some(vec![1].into());
        let r = a.apply(&plan(&[(300, &[0])]), &s2);
        assert_eq!(action(&r, 300), Action::Done, "{r}");
        // ...but a re-pin by someone else afterwards ends management.
        a.kernel()
            .set_affinity(300, 300, &CpuSet::from([1]))
            .unwrap();
        let r = a.apply(&plan(&[(300, &[0])]), &snap(&[300]));
        let l = r.placement(300).unwrap();
        assert_eq!(l.action, Action::Yielded, "{l}");
        assert!(l.detail.contains("re-pinned"), "{l}");
        assert!(a.journal().get(300, 300).is_none());
        assert_eq!(a.kernel().affinity_of(300, 300), Some(vec![1].into()));
    }

    #[test]
    fn protected_and_unknown_pids_are_skipped() {
        let me = std::process::id();
        let k = kernel(&[(1, 1), (me, 1), (500, 1), (600, 1)]);
        let mut a = Actuator::new(
            k,
            ActuatorConfig {
                exclude: vec![500],
                ..ActuatorConfig::default()
            },
        );
        a.kernel().with_proc(600, |p| p.kernel_thread = true);
        let r = a.apply(
            &plan(&[(1, &[0]), (me, &[0]), (500, &[0]), (600, &[0]), (700, &[0])]),
            &snap(&[1, me, 500, 600]),
        );
        assert_eq!(r.count(Action::Skipped), 5, "{r}");
        assert!(a.kernel().calls().is_empty());
    }

    #[test]
    fn dry_run_changes_nothing() {
        let k = kernel(&[(100, 2), (200, 1)]);
        k.with_proc(100, |p| p.memory.insert(1, 10 << 20));
        let mut a = Actuator::new(
            k,
            ActuatorConfig {
                dry_run: true,
                migrate_pages: true,
                ..ActuatorConfig::default()
            },
        );
        let mut p = plan(&[(100, &[0]), (200, &[0, 1])]);
        p.page_moves.push(PageMove {
            pid: 100,
            from_node: 1,
            to_node: 0,
            bytes: 10 << 20,
            reason: "follow".into(),
        });
        let r = a.apply_at(&p, &snap(&[100, 200]), 0.0);
        assert!(r.dry_run);
        assert_eq!(action(&r, 100), Action::DryRun, "{r}");
        assert!(r.placement(100).unwrap().detail.contains("2 of 2"), "{r}");
        assert_eq!(action(&r, 200), Action::Unchanged, "{r}");
        assert_eq!(r.moves[0].action, Action::DryRun, "{r}");
        assert!(a.kernel().calls().is_empty());
        assert!(a.journal().is_empty());
        assert_eq!(a.kernel().affinity_of(100, 100), Some(vec![0, 1].into()));
    }

    #[test]
    fn page_moves_only_when_enabled_and_within_the_rate() {
        use crate::apply::fake::FAKE_PAGE;
        use crate::apply::migrate::CHUNK_BYTES;
        let mv = |pid, mb: u64| PageMove {
            pid,
            from_node: 1,
            to_node: 0,
            bytes: mb * 1_000_000,
            reason: "follow".into(),
        };
        let mut p = plan(&[(100, &[0]), (200, &[0])]);
        p.page_moves = vec![mv(100, 30), mv(200, 30)];
        let s = snap(&[100, 200]);
        let pages = 30_000_000 / FAKE_PAGE; // 30 MB each, on node 1
        let with_pages = || {
            let k = kernel(&[(100, 1), (200, 1)]);
            k.pages(100, 1, pages);
            k.pages(200, 1, pages);
            k
        };

        let mut off = actuator(with_pages());
        let r = off.apply_at(&p, &s, 0.0);
        assert_eq!(r.moves[0].action, Action::Skipped);
        assert!(r.moves[0].detail.contains("disabled"));
        assert!(off
            .kernel()
            .calls()
            .iter()
            .all(|c| !matches!(c, Call::MovePages { .. })));

        // 10 MB/s, 40 MB burst: the first 30 MB go in this pass, the second process
        // gets what is left (about 10 MB) and goes on in later epochs.
        let mut a = Actuator::new(
            with_pages(),
            ActuatorConfig {
                migrate_pages: true,
                migrate_mb_per_s: 10.0,
                migrate_burst_mb: 40.0,
                ..ActuatorConfig::default()
            },
        );
        let on = |a: &Actuator<FakeKernel>, pid: u32, node: u32| {
            a.kernel()
                .with_proc(pid, |p| p.memory.get(&node).copied().unwrap_or(0))
                .unwrap_or(0)
        };
        let r = a.apply_at(&p, &s, 100.0);
        assert_eq!(r.moves[0].action, Action::Done, "{r}");
        assert_eq!(on(&a, 100, 1), 0, "all of 100's pages moved");
        assert_eq!(r.moves[1].action, Action::Deferred, "{r}");
        let first = on(&a, 200, 0);
        assert!(first > 0 && first <= 10_000_000 + CHUNK_BYTES, "{first}");
        // The bucket never goes further into debt than one chunk.
        assert!(a.bucket.available() > -(CHUNK_BYTES as f64));
        // Each later epoch moves at most what 1 s of rate added (plus one chunk).
        let mut t = 101.0;
        let mut before = first;
        while a.migrations().get(200).is_some() {
            let lines = a.continue_migrations(t);
            let now = on(&a, 200, 0);
            assert!(now - before <= 10_000_000 + CHUNK_BYTES, "{lines:?}");
            before = now;
            t += 1.0;
            assert!(t < 120.0, "never finished");
        }
        assert_eq!(on(&a, 200, 1), 0, "all of 200's pages moved in the end");

        // A refused placement takes its page moves with it.
        let mut s2 = s.clone();
        s2.processes[0].allowed_cpus = Some(vec![1].into());
        let r = a.apply_at(&p, &s2, 1000.0);
        assert_eq!(r.moves[0].action, Action::Skipped, "{r}");
        assert!(r.moves[0].detail.contains("not applied"), "{r}");
    }

    /// An actuator with page migration on, a process 100 with `mb` MB on node 1.
    fn migrating(mb: u64) -> Actuator<FakeKernel> {
        let k = kernel(&[(100, 1)]);
        k.pages(100, 1, mb * 1_000_000 / crate::apply::fake::FAKE_PAGE);
        moving_pages(k)
    }

    /// An actuator on `k` with page migration on and no rate limit to speak of.
    fn moving_pages(k: FakeKernel) -> Actuator<FakeKernel> {
        Actuator::new(
            k,
            ActuatorConfig {
                migrate_pages: true,
                migrate_mb_per_s: 10_000.0,
                migrate_burst_mb: 10_000.0,
                ..ActuatorConfig::default()
            },
        )
    }

    fn move_to_0(mb: u64) -> Plan {
        let mut p = plan(&[(100, &[0])]);
        p.page_moves.push(PageMove {
            pid: 100,
            from_node: 1,
            to_node: 0,
            bytes: mb * 1_000_000,
            reason: "follow".into(),
        });
        p
    }

    #[test]
    fn a_large_move_never_holds_an_epoch_longer_than_the_step() {
        use crate::apply::migrate::CHUNK_BYTES;
        // 1 ms per page on the fake clock: 256 pages (a chunk) take 0.256 s, longer
        // than an epoch's 0.1 s step; without the bound, 339 MB would take hours.
        let mut a = migrating(339);
        a.kernel().set_move_cost(0.001);
        let r = a.apply_at(&move_to_0(339), &snap(&[100]), 0.0);
        assert_eq!(r.moves[0].action, Action::Deferred, "{r}");
        assert!(r.moves[0].detail.contains("still running"), "{r}");
        let chunks = |a: &Actuator<FakeKernel>| {
            a.kernel()
                .calls()
                .iter()
                .filter(|c| matches!(c, Call::MovePages { .. }))
                .count()
        };
        assert_eq!(
            chunks(&a),
            1,
            "one chunk, left running when the time was up"
        );
        assert_eq!(a.migrations().get(100).expect("on").moved_bytes, 0);
        // The rest of the epoch passes; the next one collects the answer and starts
        // the next chunk, which again outlasts the step.
        a.kernel().tick(0.9);
        a.continue_migrations(1.0);
        assert_eq!(chunks(&a), 2, "one more the next epoch");
        let m = a.migrations().get(100).expect("in progress");
        assert_eq!(m.moved_bytes, CHUNK_BYTES);
        // The longest call, as `status` reports it, is the call's own time; the loop
        // was held for the step only (it held the loop for the whole call before the
        // calls moved to the mover thread).
        assert!((a.longest_migration_call_s() - 0.256).abs() < 1e-9);
        let held = a.longest_migration_step_s();
        assert!(held <= STEP_SECONDS + 1e-9, "held {held} s");
    }

    #[test]
    fn a_move_advances_every_epoch_even_when_its_checks_outlast_the_step() {
        use crate::apply::migrate::CHUNK_BYTES;
        // Each /proc read takes 60 ms (a loaded guest): a step's identity and
        // Mems_allowed checks alone outlast its 0.1 s. It must still move a chunk an
        // epoch; it used to move nothing, epoch after epoch.
        let mut a = migrating(8);
        a.kernel().set_read_cost(0.06);
        a.apply_at(&move_to_0(8), &snap(&[100]), 0.0);
        let moved = |a: &Actuator<FakeKernel>| a.migrations().get(100).map(|m| m.moved_bytes);
        let mut before = moved(&a).expect("in progress");
        let mut t = 1.0;
        while let Some(now) = moved(&a) {
            assert!(now >= before, "{now} < {before}");
            a.kernel().tick(0.9);
            a.continue_migrations(t);
            match moved(&a) {
                Some(after) => assert!(after >= now + CHUNK_BYTES, "epoch {t}: {now} -> {after}"),
                None => break,
            }
            before = now;
            t += 1.0;
            assert!(t < 20.0, "8 MB not moved in 20 epochs");
        }
        let left = a
            .kernel()
            .with_proc(100, |p| p.memory.get(&1).copied().unwrap_or(0))
            .unwrap_or(0);
        assert_eq!(left, 0, "all of it moved");
    }

    #[test]
    fn moves_go_on_in_an_epoch_that_re_plans_without_a_second_step() {
        let mut a = migrating(64);
        a.kernel().set_move_cost(0.0002); // 51 ms a MiB
                                          // The epoch that starts the move spends one step, carrying on included.
        a.apply_at(&move_to_0(64), &snap(&[100]), 0.0);
        a.continue_migrations(0.0);
        let first = a.kernel().now();
        assert!(first < 0.1 + 0.052, "one step, held {first} s");
        let before = a.migrations().get(100).expect("in progress").moved_bytes;
        // The next epoch re-plans with no new page move, then carries on.
        let t = a.kernel().now();
        a.apply_at(&plan(&[(100, &[0])]), &snap(&[100]), 1.0);
        a.continue_migrations(1.0);
        let held = a.kernel().now() - t;
        let after = a.migrations().get(100).expect("in progress").moved_bytes;
        assert!(after > before, "no progress in an epoch that re-planned");
        assert!(held < 0.1 + 0.026, "one step, held {held} s");
    }

    #[test]
    fn moves_started_in_one_pass_share_one_step() {
        // Four processes, each with 8 MB to move at 51 ms a MiB: one step of 0.1 s in
        // all, not one per process started (which held this pass for over 0.4 s).
        let pids = [100, 101, 102, 103];
        let k = kernel(&[(100, 1), (101, 1), (102, 1), (103, 1)]);
        for &pid in &pids {
            k.pages(pid, 1, 8_000_000 / crate::apply::fake::FAKE_PAGE);
        }
        k.set_move_cost(0.0002);
        let mut a = moving_pages(k);
        let mut p = plan(&[(100, &[0]), (101, &[0]), (102, &[0]), (103, &[0])]);
        for &pid in &pids {
            p.page_moves.push(PageMove {
                pid,
                from_node: 1,
                to_node: 0,
                bytes: 8_000_000,
                reason: "follow".into(),
            });
        }
        a.apply_at(&p, &snap(&pids), 0.0);
        let moved: u64 = pids
            .iter()
            .filter_map(|&pid| a.migrations().get(pid))
            .map(|m| m.moved_bytes)
            .sum();
        // 0.1 s at 0.2 ms a 4 KiB page is 2 MB.
        assert!(moved > 0 && moved <= 2_100_000, "{moved} bytes in one pass");
        let held = a.longest_migration_step_s();
        assert!(held <= STEP_SECONDS + 1e-9, "held the pass {held} s");
    }

    /// A process re-placed on another node while its pages were still on the way to
    /// the first: the old move stops where it is (what it moved stays) and the new
    /// one, to where it runs now, starts in the same pass. Before, the old move went
    /// on to the end and the new one was deferred, its memory all remote.
    #[test]
    fn a_move_under_way_follows_the_process_to_its_new_node() {
        let s = Snapshot {
            topology: topology::machine("3n:1l:1c:1t").unwrap(),
            ..snap(&[100])
        };
        let k = FakeKernel::new(&[0, 1, 2]);
        k.add(100, 100, 1, &[0, 1, 2]);
        k.pages(100, 1, 40_000_000 / crate::apply::fake::FAKE_PAGE);
        k.set_move_cost(0.0002); // 51 ms a MiB: 40 MB take many epochs
        let mut a = moving_pages(k);
        let to = |cpu: CpuId, node: NodeId| {
            let mut p = plan(&[(100, &[cpu])]);
            p.placements[0].nodes = vec![node];
            p.page_moves.push(PageMove {
                pid: 100,
                from_node: 1,
                to_node: node,
                bytes: 40_000_000,
                reason: format!("memory follows the process to node {node}"),
            });
            p
        };
        let on = |a: &Actuator<FakeKernel>, node: NodeId| {
            a.kernel()
                .with_proc(100, |p| p.memory.get(&node).copied().unwrap_or(0))
                .unwrap_or(0)
        };
        a.apply_at(&to(2, 2), &s, 0.0);
        a.kernel().tick(0.9);
        a.continue_migrations(1.0);
        assert_eq!(a.migrations().get(100).map(|m| m.to), Some(2));
        let on_2 = on(&a, 2);
        assert!(on_2 > 0, "the first move made progress");

        // Re-placed where its memory may not follow (no move there in the plan): the
        // move under way goes on.
        a.kernel().tick(0.9);
        let mut stay = to(0, 0);
        stay.page_moves.clear();
        let r = a.apply_at(&stay, &s, 2.0);
        assert!(r.moves.is_empty(), "{r}");
        assert_eq!(a.migrations().get(100).map(|m| m.to), Some(2));

        a.kernel().tick(0.9);
        let r = a.apply_at(&to(0, 0), &s, 3.0);
        let stopped = r
            .moves
            .iter()
            .find(|l| matches!(l.subject, Subject::Pages { to: 2, .. }))
            .unwrap_or_else(|| panic!("no line about the move to node 2: {r}"));
        assert_eq!(stopped.action, Action::Skipped, "{r}");
        assert!(stopped.detail.contains("now runs on node 0"), "{r}");
        assert_eq!(a.migrations().get(100).map(|m| m.to), Some(0), "{r}");

        let mut t = 4.0;
        while a.migrations().get(100).is_some() {
            a.kernel().tick(0.9);
            a.continue_migrations(t);
            t += 1.0;
            assert!(t < 200.0, "never finished");
        }
        assert_eq!(on(&a, 1), 0, "everything left on node 1 went to node 0");
        let on_2_after = on(&a, 2);
        // A call of the old move may still have been running when it stopped.
        assert!(
            on_2_after <= on_2 + crate::apply::migrate::CHUNK_BYTES,
            "node 2 kept receiving pages: {on_2} -> {on_2_after}"
        );
        assert!(on(&a, 0) > 0);
    }

    #[test]
    fn exit_mid_migration_is_gone_and_forgotten() {
        let mut a = migrating(8);
        // 51 ms a chunk: the first epoch moves one and leaves the second running; the
        // next collects it and the process exits at the third.
        a.kernel().set_move_cost(0.0002);
        a.kernel().inject_after(Op::MovePages, 100, 2, Fault::Exit);
        let r = a.apply_at(&move_to_0(8), &snap(&[100]), 0.0);
        assert_eq!(r.moves[0].action, Action::Deferred, "{r}");
        a.kernel().tick(0.9);
        let lines = a.continue_migrations(1.0);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].action, Action::Gone, "{lines:?}");
        assert!(a.migrations().is_empty());
    }

    #[test]
    fn pages_never_go_outside_mems_allowed_even_when_it_changes() {
        // Refused at the start when the target is outside Mems_allowed.
        let mut a = migrating(4);
        a.kernel().with_proc(100, |p| p.mems = Some(vec![1]));
        let r = a.apply_at(&move_to_0(4), &snap(&[100]), 0.0);
        assert_eq!(r.moves[0].action, Action::Refused, "{r}");
        assert!(
            r.moves[0].detail.contains("outside its Mems_allowed (1)"),
            "{r}"
        );
        assert!(a
            .kernel()
            .calls()
            .iter()
            .all(|c| !matches!(c, Call::MovePages { .. })));
        // Empty: one line, nothing moved.
        a.kernel().with_proc(100, |p| p.mems = Some(vec![]));
        let r = a.apply_at(&move_to_0(4), &snap(&[100]), 10.0);
        assert_eq!(r.moves[0].action, Action::Failed, "{r}");
        assert!(r.moves[0].detail.contains("Mems_allowed is empty"), "{r}");
        // Changed mid-migration: dropped with what moved kept, nothing more moves.
        let mut a = migrating(8);
        a.kernel().set_move_cost(0.0002);
        let r = a.apply_at(&move_to_0(8), &snap(&[100]), 0.0);
        assert_eq!(r.moves[0].action, Action::Deferred, "{r}");
        a.kernel().with_proc(100, |p| p.mems = Some(vec![1]));
        let before = a.kernel().calls().len();
        let lines = a.continue_migrations(1.0);
        assert_eq!(lines[0].action, Action::Refused, "{lines:?}");
        assert!(lines[0]
            .detail
            .contains("not in its Mems_allowed (1) any more"));
        assert_eq!(
            a.kernel().calls().len(),
            before,
            "no page moved after the change"
        );
        assert!(a.migrations().is_empty());
    }

    #[test]
    fn with_kernel_balancing_on_the_kernel_moves_pages_toward_the_running_node() {
        let k = kernel(&[(100, 1)]);
        k.pages(100, 1, 1000);
        let mut a = Actuator::new(
            k,
            ActuatorConfig {
                migrate_pages: true,
                kernel_balancing: true,
                ..ActuatorConfig::default()
            },
        );
        let r = a.apply_at(&move_to_0(4), &snap(&[100]), 0.0);
        assert_eq!(r.moves[0].action, Action::Skipped, "{r}");
        assert!(r.moves[0].detail.contains("kernel NUMA balancing"), "{r}");
    }

    #[test]
    fn gone_page_moves_and_left_alone_placements() {
        let k = kernel(&[(100, 1)]);
        k.pages(100, 1, 10);
        k.inject(Op::MovePages, 100, Fault::Exit);
        let mut a = Actuator::new(
            k,
            ActuatorConfig {
                migrate_pages: true,
                ..ActuatorConfig::default()
            },
        );
        let mut p = plan(&[(100, &[])]);
        p.page_moves.push(PageMove {
            pid: 100,
            from_node: 1,
            to_node: 0,
            bytes: 1,
            reason: "x".into(),
        });
        let r = a.apply_at(&p, &snap(&[100]), 0.0);
        assert_eq!(action(&r, 100), Action::LeftAlone, "{r}");
        assert_eq!(r.moves[0].action, Action::Gone, "{r}");
    }
}
