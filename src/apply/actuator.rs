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

use super::bucket::TokenBucket;
use super::journal::Journal;
use super::kernel::{Kernel, KernelError};
use super::report::{Action, ApplyReport, Line, Subject};
use super::undo::{self, Restored};
use crate::policy::plan::{PageMove, Placement, Plan};
use crate::policy::snapshot::{Process, Snapshot};
use crate::topology::{cpulist, CpuId};

/// Rounds of "list threads, set the new ones" per process and pass: enough for a
/// process that is spawning threads while being placed to converge, bounded so a
/// thread bomb cannot hold the pass.
const THREAD_ROUNDS: usize = 3;

#[derive(Debug, Clone, PartialEq)]
pub struct ActuatorConfig {
    /// Plan and report, change nothing (SPEC §4).
    pub dry_run: bool,
    /// Carry out the plan's page moves.
    pub migrate_pages: bool,
    /// Page migration budget, MB (10^6 bytes) per second.
    pub migrate_mb_per_s: f64,
    /// Largest burst of migration, MB.
    pub migrate_burst_mb: f64,
    /// Pids never touched, in addition to 0, 1, 2 and numasched's own.
    pub exclude: Vec<u32>,
}

impl Default for ActuatorConfig {
    fn default() -> Self {
        ActuatorConfig {
            dry_run: false,
            migrate_pages: false,
            migrate_mb_per_s: 64.0,
            migrate_burst_mb: 64.0,
            exclude: Vec::new(),
        }
    }
}

/// See the module documentation.
pub struct Actuator<K: Kernel> {
    kernel: K,
    config: ActuatorConfig,
    journal: Journal,
    bucket: TokenBucket,
    self_pid: u32,
}

fn line(pid: u32, cpus: &[CpuId], action: Action, detail: impl Into<String>) -> Line {
    Line {
        pid,
        subject: Subject::Affinity {
            cpus: cpus.to_vec(),
        },
        action,
        detail: detail.into(),
    }
}

fn subset(a: &[CpuId], b: &[CpuId]) -> bool {
    a.iter().all(|c| b.contains(c))
}

fn sorted(v: &[CpuId]) -> Vec<CpuId> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.dedup();
    v
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
            self_pid: std::process::id(),
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
        self.apply(plan, snapshot)
    }

    /// Carries out `plan`, made from `snapshot`, as far as it safely can. Never stops
    /// early: every placement and page move gets its line in the report.
    pub fn apply(&mut self, plan: &Plan, snapshot: &Snapshot) -> ApplyReport {
        let machine: Vec<CpuId> = snapshot.topology.cpus().iter().map(|c| c.id).collect();
        let mut report = ApplyReport {
            dry_run: self.config.dry_run,
            ..ApplyReport::default()
        };
        for pl in &plan.placements {
            let proc = snapshot.processes.iter().find(|p| p.pid == pl.pid);
            report.placements.push(self.place(pl, proc, &machine));
        }
        // Dry runs spend from a copy, so the report shows this pass's rate limit
        // without costing later real passes anything.
        let mut bucket = self.bucket.clone();
        for mv in &plan.page_moves {
            let line = self.move_pages(mv, snapshot, &report, &mut bucket);
            report.moves.push(line);
        }
        if !self.config.dry_run {
            self.bucket = bucket;
        }
        report
    }

    /// Restores one process's original affinity (it stops being managed).
    pub fn restore(&mut self, pid: u32) -> Restored {
        undo::restore(&self.kernel, &mut self.journal, pid)
    }

    /// Restores everything, for shutdown.
    pub fn restore_all(&mut self) -> Vec<(u32, Restored)> {
        undo::restore_all(&self.kernel, &mut self.journal)
    }

    /// Forgets processes that exited or whose pid was reused.
    pub fn forget_gone(&mut self) -> Vec<u32> {
        undo::forget_gone(&self.kernel, &mut self.journal)
    }

    fn protected(&self, pid: u32) -> bool {
        pid <= 2 || pid == self.self_pid || self.config.exclude.contains(&pid)
    }

    /// Re-reads the identity; `Err` is the line to report when it is not the process
    /// the snapshot saw.
    fn check_identity(&mut self, p: &Process, cpus: &[CpuId]) -> Result<(), Line> {
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

    fn error_line(&self, pid: u32, cpus: &[CpuId], e: &KernelError) -> Line {
        if e.is_gone() {
            line(pid, cpus, Action::Gone, "exited")
        } else {
            line(pid, cpus, Action::Failed, e.to_string())
        }
    }

    fn place(&mut self, pl: &Placement, proc: Option<&Process>, machine: &[CpuId]) -> Line {
        let pid = pl.pid;
        let target = sorted(&pl.cpus);
        if target.is_empty() {
            return line(pid, &[], Action::LeftAlone, pl.reason.clone());
        }
        if self.protected(pid) {
            return line(
                pid,
                &target,
                Action::Skipped,
                "protected pid (init, kthreadd, numasched or excluded)",
            );
        }
        let Some(p) = proc else {
            return line(pid, &target, Action::Skipped, "not in the snapshot");
        };
        if let Err(l) = self.check_identity(p, &target) {
            return l;
        }
        let start = p.start_time;
        let entry = self.journal.get(pid, start).cloned();
        let fmt = cpulist::format;

        // A pin in the snapshot that is not numasched's own is someone else's.
        if let Some(allowed) = &p.allowed_cpus {
            let ours = entry
                .as_ref()
                .and_then(|e| e.applied.as_ref())
                .is_some_and(|a| sorted(a) == sorted(allowed));
            if !ours && !subset(&target, allowed) {
                return line(
                    pid,
                    &target,
                    Action::Refused,
                    format!("outside CPUs {} pinned by someone else", fmt(allowed)),
                );
            }
        }

        // Current affinity of every thread, read before changing anything.
        let tids = match self.kernel.threads(pid) {
            Ok(t) => t,
            Err(e) => return self.error_line(pid, &target, &e),
        };
        let mut current = Vec::with_capacity(tids.len());
        let mut errors: Vec<KernelError> = Vec::new();
        for tid in tids {
            match self.kernel.affinity(pid, tid) {
                Ok(c) => current.push((tid, c)),
                Err(e) if e.is_gone() => {}
                Err(e) => errors.push(e),
            }
        }
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

        match &entry {
            Some(e) => {
                if let Some(applied) = &e.applied {
                    if !subset(&main, applied) {
                        // Someone re-pinned it after numasched did: their choice now.
                        self.journal.forget(pid);
                        return line(
                            pid,
                            &target,
                            Action::Refused,
                            format!(
                                "re-pinned to {} by someone else; no longer managed",
                                fmt(&main)
                            ),
                        );
                    }
                }
                if !subset(machine, &e.original) && !subset(&target, &e.original) {
                    return line(
                        pid,
                        &target,
                        Action::Refused,
                        format!("outside its original pin {}", fmt(&e.original)),
                    );
                }
            }
            None => {
                if !subset(machine, &main) && !subset(&target, &main) {
                    return line(
                        pid,
                        &target,
                        Action::Refused,
                        format!("outside CPUs {} pinned by someone else", fmt(&main)),
                    );
                }
            }
        }

        let total = current.len();
        if self.config.dry_run {
            let would = current.iter().filter(|(_, c)| *c != target).count();
            let (action, detail) = if would == 0 {
                (
                    Action::Unchanged,
                    format!("already there ({total} thread(s))"),
                )
            } else {
                (
                    Action::DryRun,
                    format!("would set {would} of {total} thread(s)"),
                )
            };
            return line(pid, &target, action, detail);
        }

        // Journal before the first change; threads new since an earlier pass
        // inherited numasched's set, so the process's original is theirs.
        let existed = entry.is_some();
        let original = self.journal.begin(pid, start, &main).original.clone();
        let mut changed = 0;
        let mut seen: Vec<u32> = Vec::new();
        for round in 0..THREAD_ROUNDS {
            let batch: Vec<(u32, Vec<CpuId>)> = if round == 0 {
                current.clone()
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
                let recorded = entry.as_ref().is_some_and(|e| e.threads.contains_key(&tid));
                let orig = if round > 0 || (existed && !recorded) {
                    &original
                } else {
                    &cur
                };
                self.journal.remember_thread(pid, start, tid, orig);
                if cur == target {
                    continue;
                }
                match self.kernel.set_affinity(pid, tid, &target) {
                    Ok(()) => changed += 1,
                    Err(e) if e.is_gone() => {}
                    Err(e) => errors.push(e),
                }
            }
        }
        self.journal.set_applied(pid, start, &target);
        let total = seen.len();
        match errors.first() {
            Some(e) => line(
                pid,
                &target,
                Action::Failed,
                format!(
                    "set {changed} of {total} thread(s); {} error(s), first: {e}",
                    errors.len()
                ),
            ),
            None if changed == 0 => line(
                pid,
                &target,
                Action::Unchanged,
                format!("already there ({total} thread(s))"),
            ),
            None => line(
                pid,
                &target,
                Action::Done,
                format!("set {changed} of {total} thread(s): {}", pl.reason),
            ),
        }
    }

    fn move_pages(
        &mut self,
        mv: &PageMove,
        snapshot: &Snapshot,
        report: &ApplyReport,
        bucket: &mut TokenBucket,
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
        if let Err(l) = self.check_identity(p, &[]) {
            return mk(l.action, l.detail);
        }
        let available = bucket.available().max(0.0) / 1e6;
        if !bucket.try_take(mv.bytes) {
            return mk(
                Action::Deferred,
                format!(
                    "rate limit: {available:.1} MB of {:.1} MB/s budget left",
                    self.config.migrate_mb_per_s
                ),
            );
        }
        if self.config.dry_run {
            return mk(Action::DryRun, format!("would migrate: {}", mv.reason));
        }
        match self
            .kernel
            .migrate_pages(pid, &[mv.from_node], &[mv.to_node])
        {
            Ok(0) => mk(Action::Done, mv.reason.clone()),
            Ok(left) => mk(
                Action::Done,
                format!("{}; {left} page(s) could not be moved", mv.reason),
            ),
            Err(e) if e.is_gone() => mk(Action::Gone, "exited".into()),
            Err(e) => mk(Action::Failed, e.to_string()),
        }
    }
}
