//! Assembling the live pipeline from [`Options`]: the machine from sysfs, sensors
//! detected once, the scanner, characterisation (counters, profile store), the policy
//! and the actuator on the real kernel. Shared by `daemon`, `run` and `plan`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use tracing::{info, warn};

use super::config::Options;
use super::engine::{Engine, EngineConfig, Stages};
use super::jobs::Jobs;
use super::recovery::{self, JournalFile, JournalLock};
use super::run_journals;
use super::select::Selector;
use super::status::DaemonStatus;
use super::trigger::TriggerParams;
use numasched_linux::apply::{Actuator, ActuatorConfig, Journal, Kernel, LinuxKernel};
use numasched_linux::characterise::live::{Live, LiveConfig};
use numasched_linux::characterise::store::Store;
use numasched_linux::observe::proc_events::ProcEvents;
use numasched_linux::observe::resctrl::Resctrl;
use numasched_linux::observe::sensors::{Roots, Sensor};
use numasched_linux::observe::slurm::SlurmReader;
use numasched_linux::observe::{PerfCounters, ScanConfig, Scanner, Sensors};
use numasched_model::topology::sysfs;
use numasched_model::{Plan, Snapshot};
use numasched_policy as policy;

/// Where the live system is read; tests and the QEMU bed may point elsewhere.
#[derive(Debug, Clone)]
pub struct LiveRoots {
    pub proc: PathBuf,
    pub sys: PathBuf,
}

impl Default for LiveRoots {
    fn default() -> Self {
        LiveRoots {
            proc: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
        }
    }
}

/// How the pipeline is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// The daemon or `run`: applies, learns.
    Manage,
    /// `plan`: one dry pass that writes nothing anywhere, not even the store.
    PlanOnly,
}

pub struct Built {
    pub engine: Engine<LinuxKernel>,
    pub sensors: Sensors,
    /// The store in use, if any.
    pub store: Option<PathBuf>,
    /// The policy actually run (`auto` becomes `auto-migrate` with page migration on).
    pub policy: policy::PolicyKind,
    /// Held while the pipeline lives: this process owns the journal file.
    pub journal_lock: Option<JournalLock>,
    /// The sysfs root the machine was read from (for live per-node memory).
    pub sys_root: PathBuf,
    /// Forks and exits as they happen, where the kernel let us subscribe (managing,
    /// as root, on the live /proc); `None`: children are found by each epoch's poll.
    pub proc_events: Option<ProcEvents>,
}

impl Built {
    /// What `status`, `top` and the metrics show, as of the last epoch.
    pub fn status(
        &self,
        interval_s: f64,
        dry_run: bool,
        migrate_pages: bool,
        started_unix: i64,
        last_epoch: std::time::Duration,
    ) -> DaemonStatus {
        let mut s = DaemonStatus {
            started_unix,
            now_unix: super::clock::unix_now(),
            policy: self.policy.to_string(),
            interval_s,
            dry_run,
            migrate_pages,
            store: self.store.as_ref().map(|p| p.display().to_string()),
            last_epoch_ms: last_epoch.as_secs_f64() * 1e3,
            ..DaemonStatus::new(self.sensors.clone())
        };
        self.engine.fill_status(&mut s);
        for n in &mut s.nodes_view {
            n.memory_used_bytes = super::nodes::memory_used(&self.sys_root, n.node);
        }
        s
    }

    /// One dry pass for `plan`, `advise` and the like: the snapshot observed (and
    /// characterised) now, and the plan made from it.
    pub fn observe_once(&mut self) -> anyhow::Result<(Snapshot, Plan)> {
        let rep = self
            .engine
            .epoch(0.0, super::clock::unix_now())
            .context("observing the processes")?;
        let snapshot = rep.snapshot.unwrap_or_else(|| Snapshot {
            topology: self.engine.topology().clone(),
            processes: Vec::new(),
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        });
        let plan = rep
            .plan
            .unwrap_or_else(|| Plan::new(self.policy.name(), Vec::new()));
        Ok((snapshot, plan))
    }
}

/// The policy to run: with page migration on, `auto` is the variant that proposes
/// page moves (and only those whose gain exceeds their cost).
pub fn effective_policy(opts: &Options) -> policy::PolicyKind {
    if opts.migrate_pages && opts.policy == policy::PolicyKind::Auto {
        policy::PolicyKind::AutoMigrate
    } else {
        opts.policy
    }
}

pub fn assemble(
    opts: &Options,
    roots: &LiveRoots,
    tree: Option<u32>,
    usage: Use,
) -> anyhow::Result<Built> {
    own_pid_namespace(&roots.proc, std::process::id())?;
    let topology = sysfs::read(&roots.sys).with_context(|| {
        format!(
            "reading the machine's topology under {}",
            roots.sys.display()
        )
    })?;
    let mut sensors = Sensors::detect_with(
        &Roots {
            proc: roots.proc.clone(),
            sys: roots.sys.clone(),
            probe_pid: std::process::id(),
        },
        PerfCounters::probe(),
    );
    let proc_events = if usage == Use::Manage && !opts.dry_run && roots.proc == Path::new("/proc") {
        let (events, sensor) = subscribe();
        sensors.proc_connector = Some(sensor);
        events
    } else {
        None
    };
    let mut exclude: std::collections::HashSet<u32> =
        opts.select.exclude_pid.iter().copied().collect();
    // init is never managed, nor numasched itself.
    exclude.extend([1, std::process::id()]);
    let scanner = Scanner::new(ScanConfig {
        proc_root: roots.proc.clone(),
        exclude,
        read: sensors.read_options(),
        ..ScanConfig::default()
    });
    let selector = Selector::new(&opts.select, &roots.proc);
    // Which rules are in force after the file and the flags were merged: the first
    // thing to check when a process is (not) managed.
    tracing::debug!(
        selection = %serde_json::to_string(&opts.select).unwrap_or_default(),
        "processes selected by"
    );
    let counters: Option<Box<dyn numasched_linux::observe::CounterSource + Send>> =
        if sensors.hardware_counters.available {
            Some(Box::new(PerfCounters::new()))
        } else {
            None
        };
    let kernel = LinuxKernel::with_proc_root(&roots.proc);
    // The journal before the store: a daemon refused because another holds the journal
    // must not have touched that daemon's store (its copy at open) first.
    let (journal_file, journal_lock, left) = match usage {
        Use::Manage if opts.dry_run => {
            recover_leftovers(opts, &kernel);
            (None, None, Journal::new())
        }
        Use::Manage => match journal_file(opts, &kernel)? {
            Some(Taken { file, lock, left }) => (Some(file), Some(lock), left),
            None => (None, None, Journal::new()),
        },
        Use::PlanOnly => (None, None, Journal::new()),
    };
    let writes = usage == Use::Manage && !opts.dry_run;
    let store = open_store(opts, writes, usage == Use::PlanOnly)?;
    let store_path = store.as_ref().map(|s| s.path().to_path_buf());
    let mut live = Live::new(
        LiveConfig {
            learn: writes,
            ..LiveConfig::default()
        },
        counters,
        store,
    );
    if sensors.resctrl.available {
        live = live.with_resctrl(Resctrl::new(&roots.sys.join("fs/resctrl")));
    }
    let name = effective_policy(opts);
    let policy = Box::new(policy::Granular::new(name.build(), opts.pin));
    // What the recovery could not restore stays numasched's to undo: journaled with
    // the rest and tried again at the stop (or the next start).
    let actuator = Actuator::with_journal(
        kernel,
        ActuatorConfig {
            dry_run: opts.dry_run || usage == Use::PlanOnly,
            migrate_pages: opts.migrate_pages,
            migrate_mb_per_s: opts.migrate_rate,
            // One second's worth: a burst never exceeds what the rate allows per epoch
            // at the default interval.
            migrate_burst_mb: opts.migrate_rate,
            exclude: opts.select.exclude_pid.clone(),
            kernel_balancing: kernel_balancing(&roots.proc),
        },
        left,
    );
    let engine = Engine::new(
        EngineConfig {
            trigger: trigger_params(opts),
            release_after: opts.release_after.as_secs_f64(),
            min_cpu: opts.select.min_cpu,
            min_rss: opts.select.min_rss,
        },
        Stages {
            topology,
            scanner,
            selector,
            live,
            policy,
            actuator,
            tree,
            journal_file,
            jobs: Some(
                Jobs::new(SlurmReader::new(&roots.proc, &roots.sys.join("fs/cgroup")))
                    .with_outsiders(opts.slurm_outsiders),
            ),
        },
    );
    let engine = match usage {
        Use::PlanOnly => engine.beside_daemon(running_daemons_journal(opts)),
        Use::Manage => engine,
    };
    Ok(Built {
        engine,
        sensors,
        store: store_path,
        policy: name,
        journal_lock,
        sys_root: roots.sys.clone(),
        proc_events,
    })
}

/// The proc connector, where the kernel lets us subscribe, and what the sensors line
/// says of it.
fn subscribe() -> (Option<ProcEvents>, Sensor) {
    match ProcEvents::subscribe() {
        Ok(events) => (
            Some(events),
            Sensor::yes("forks and exits of placed processes followed as they happen"),
        ),
        Err(e) => (
            None,
            Sensor::no(format!(
                "subscribing refused ({e}): forks are found by each epoch's poll"
            )),
        ),
    }
}

/// Refuses a `/proc` of another pid namespace. Its pids are not the ones this process's
/// system calls act on: `sched_setaffinity(1234)` would move this namespace's 1234, an
/// unrelated process, while `/proc/1234` describes the other one. `/proc/self` names
/// this process as that procfs numbers it; in its own namespace that is `getpid()`.
/// A procfs of a namespace this process is not in (a container's `/proc` seen from the
/// host) has no `self` for it at all, and is refused too; a root without `self` that is
/// no procfs (a test's fake one) is not checked.
fn own_pid_namespace(proc_root: &std::path::Path, pid: u32) -> anyhow::Result<()> {
    let link = proc_root.join("self");
    let Ok(target) = std::fs::read_link(&link) else {
        if is_procfs(proc_root) {
            anyhow::bail!(
                "{} belongs to another pid namespace (this process is not in it: it has no \
                 `self`): its pids are not the processes numasched would act on; run in the \
                 pid namespace that mounted it (to manage only a container's processes, run \
                 on the host with --include-cgroup)",
                proc_root.display()
            );
        }
        return Ok(());
    };
    let seen = target.to_str().and_then(|t| t.parse::<u32>().ok());
    match seen {
        Some(p) if p == pid => Ok(()),
        Some(p) => anyhow::bail!(
            "{} belongs to another pid namespace (it numbers this process {p}, the kernel \
             {pid}): its pids are not the processes numasched would act on; run in the pid \
             namespace that mounted it, or mount this namespace's own /proc",
            proc_root.display()
        ),
        None => anyhow::bail!(
            "{}: {} points to {:?}, not a pid",
            proc_root.display(),
            link.display(),
            target
        ),
    }
}

/// Whether the kernel's automatic NUMA balancing is on (`kernel.numa_balancing`, 1 or
/// a mode mask with the NUMA_BALANCING_NORMAL bit); unreadable counts as off.
/// Whether `dir` is the root of a procfs mount (`PROC_SUPER_MAGIC`).
fn is_procfs(dir: &std::path::Path) -> bool {
    const PROC_SUPER_MAGIC: i64 = 0x9fa0;
    // `f_type`'s width differs between architectures; the cast is a no-op on x86_64.
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::statfs(dir).is_ok_and(|s| s.f_type as i64 == PROC_SUPER_MAGIC)
}

fn kernel_balancing(proc_root: &std::path::Path) -> bool {
    std::fs::read_to_string(proc_root.join("sys/kernel/numa_balancing"))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .is_some_and(|v| v & 1 == 1)
}

/// Undoes what a crashed earlier run left in the journal, then checks the journal
/// can be written. A journal that cannot be read is an error (what it holds would be
/// lost), and so is one that cannot be written: numasched changes nothing it could
/// not undo after a crash. `--no-journal` runs without one, knowingly.
fn journal_file<K: Kernel>(opts: &Options, kernel: &K) -> anyhow::Result<Option<Taken>> {
    if opts.no_journal {
        warn!("running without a journal (--no-journal): a crash or kill -9 would leave the affinities numasched set");
        return Ok(None);
    }
    let mut taken = take_journal(
        &opts.journal,
        kernel,
        "kept in the journal and tried again at the stop",
    )?;
    if run_journals::is_run_journal(&opts.journal) {
        recover_other_runs(&opts.journal, kernel);
    }
    // Written once here so an unwritable journal stops the start; it holds what the
    // recovery could not restore, which must not be lost to the write.
    if let Err(e) = taken.file.save(&taken.left) {
        anyhow::bail!("{e}; {UNSAFE_HINT}");
    }
    Ok(Some(taken))
}

/// Undoes what runs killed before their clean stop left in their journals beside
/// `own`. A journal whose lock is held is a live run's, and is left to it; what the
/// kernel refuses to restore stays in that journal for the next run.
fn recover_other_runs<K: Kernel>(own: &std::path::Path, kernel: &K) {
    for path in run_journals::others(own) {
        match take_journal(&path, kernel, "left in its journal for the next run") {
            // Dropped at once: recovered, its lock released and removed.
            Ok(_) => {}
            Err(e)
                if e.downcast_ref::<recovery::RecoveryError>()
                    .is_some_and(|r| matches!(r, recovery::RecoveryError::InUse { .. })) => {}
            Err(e) => warn!("{e:#}; an earlier run's journal, left as it is"),
        }
    }
}

const UNSAFE_HINT: &str =
    "fix it, pass --journal PATH, or --no-journal to run without crash recovery";

/// The journal, locked for this daemon, and what the recovery left in it.
struct Taken {
    file: JournalFile,
    lock: JournalLock,
    left: Journal,
}

/// Locks the journal at `path` and restores what a run that did not stop cleanly left
/// in it; `retried` says what becomes of what the kernel refused to restore (the
/// caller's to say: a dry run keeps no journal to try it again from).
fn take_journal<K: Kernel>(
    path: &std::path::Path,
    kernel: &K,
    retried: &str,
) -> anyhow::Result<Taken> {
    let mut file = JournalFile::new(path);
    let lock = match file.lock() {
        Ok(l) => l,
        Err(e @ recovery::RecoveryError::InUse { .. }) => return Err(e.into()),
        Err(e) => anyhow::bail!("{e}; {UNSAFE_HINT}"),
    };
    let recovered = recovery::recover(kernel, &mut file)?;
    if !recovered.restored.is_empty() {
        info!(
            journal = %file.path().display(),
            processes = recovered.restored.len(),
            "recovering from an unclean stop: restoring what the last run changed"
        );
        for (pid, r) in &recovered.restored {
            info!(pid, "recovered: {r}");
        }
    }
    if !recovered.left.is_empty() {
        warn!(
            journal = %file.path().display(),
            processes = recovered.left.len(),
            "some processes could not be restored; {retried}"
        );
    }
    Ok(Taken {
        file,
        lock,
        left: recovered.left,
    })
}

/// A dry run changes nothing, but what a killed daemon left pinned is numasched's own
/// doing with no reason left: it is put back, as any start does, and the dry run's
/// plans then start from the machine as it is unmanaged. The journal is only touched
/// when it holds something and no daemon holds it (a running daemon's entries are its
/// live state, not leftovers); a dry run keeps no journal of its own.
fn recover_leftovers(opts: &Options, kernel: &LinuxKernel) {
    if opts.no_journal {
        return;
    }
    // Read here without the lock only to see whether there is anything to take;
    // `take_journal` reads it again under the lock, as a daemon may have written it
    // in between.
    let file = JournalFile::new(&opts.journal);
    match file.load() {
        Ok(Some(j)) if !j.is_empty() => {}
        Ok(_) => return,
        Err(e) => {
            warn!("{e}; the dry run goes on without restoring what it holds");
            return;
        }
    }
    match take_journal(
        &opts.journal,
        kernel,
        "left in the journal for the next start that manages",
    ) {
        Ok(_) => {}
        Err(e)
            if e.downcast_ref::<recovery::RecoveryError>()
                .is_some_and(|r| matches!(r, recovery::RecoveryError::InUse { .. })) =>
        {
            tracing::debug!(journal = %opts.journal.display(), "the journal belongs to a running daemon: left to it");
        }
        Err(e) => warn!("{e:#}; the dry run goes on without restoring what it holds"),
    }
}

/// What a daemon managing this machine has journaled, read without its lock and
/// without writing, so `plan` tells the daemon's placements from foreign pins. None
/// where there is no daemon or the journal cannot be read (`plan` as a user who may
/// not read root's state directory): its pins then read as foreign, as before.
fn running_daemons_journal(opts: &Options) -> Journal {
    if opts.no_journal {
        return Journal::new();
    }
    match JournalFile::new(&opts.journal).load() {
        Ok(j) => j.unwrap_or_default(),
        Err(e) => {
            tracing::debug!("{e}; a running daemon's placements read as foreign pins");
            Journal::new()
        }
    }
}

/// The daemon keeps running without its store (a full disk, a read-only or corrupt
/// file): it then learns nothing that outlives it, and says so. What is no file at all
/// (a directory, a FIFO, a device) is refused, as for the journal: that is a mistyped
/// path, not a store gone bad. `plan` and a dry run (`writes` false) only read a
/// store that already exists, so they never create one as a side effect, nor the copy
/// a managing run leaves at each start. For `plan` (`only_read`), one named by `--db`
/// that is not there is refused, as a typo would otherwise read as "every process
/// unknown"; a dry run goes on without it, as the managing run it previews would
/// create it.
fn open_store(opts: &Options, writes: bool, only_read: bool) -> anyhow::Result<Option<Store>> {
    if opts.no_db {
        return Ok(None);
    }
    if let Err(e) = super::paths::store_file(&opts.db) {
        anyhow::bail!("{e}; {}", super::paths::DB_HINT);
    }
    if !writes && !opts.db.exists() {
        // The default may well not exist yet; a path the user named is a typo.
        let named =
            opts.db != std::path::Path::new(numasched_linux::characterise::store::DEFAULT_PATH);
        if only_read && named {
            anyhow::bail!(
                "{}: no profile store there (plan and advise only read one; `profile set`, \
                 `profile import` or a managing daemon creates it)",
                opts.db.display()
            );
        }
        return Ok(None);
    }
    let opened = if writes {
        Store::open(&opts.db)
    } else {
        Store::open_without_backup(&opts.db)
    };
    match opened {
        Ok(s) => {
            if let Some(w) = s.backup_warning() {
                warn!("{w}; the store is used without a fresh copy to recover from");
            } else if let Some(copy) = s.backup() {
                info!(copy = %copy.display(), "copied the profile store to recover from");
            }
            Ok(Some(s))
        }
        Err(e) => {
            warn!("{e:#}; continuing without the profile store (nothing learned is kept)");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proc_of_another_pid_namespace_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(
            own_pid_namespace(dir.path(), 42).is_ok(),
            "no self: not checked"
        );
        std::os::unix::fs::symlink("42", dir.path().join("self")).expect("link");
        assert!(own_pid_namespace(dir.path(), 42).is_ok());
        let err = own_pid_namespace(dir.path(), 1).expect_err("another namespace");
        let msg = err.to_string();
        assert!(
            msg.contains("another pid namespace") && msg.contains("42"),
            "{msg}"
        );
        assert!(is_procfs(std::path::Path::new("/proc")));
        own_pid_namespace(std::path::Path::new("/proc"), std::process::id())
            .expect("this namespace's own /proc");
    }

    /// A procfs mounted from a pid namespace this process is not in has no `self` for
    /// it; the check used to take that for a fake procfs and let the daemon act on the
    /// other namespace's pid numbers (seen: it started on such a root and placed).
    #[test]
    fn a_procfs_of_a_namespace_we_are_not_in_is_refused() {
        if !nix::unistd::geteuid().is_root() || !std::path::Path::new("/usr/bin/unshare").exists() {
            eprintln!("skipped: needs root and unshare");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let mnt = dir.path().to_string_lossy().into_owned();
        // A child pid namespace that mounts its own procfs on `mnt` (in our mount
        // namespace) and waits for the check; unmounted below.
        let mut child = std::process::Command::new("unshare")
            .args(["-p", "-f", "--kill-child", "sh", "-c"])
            .arg(format!("mount -t proc proc '{mnt}' && exec sleep 10"))
            .spawn()
            .expect("unshare");
        let unmount = || {
            let _ = std::process::Command::new("umount")
                .args(["-l", &mnt])
                .status();
        };
        let t = std::time::Instant::now();
        while !is_procfs(dir.path()) {
            if t.elapsed() > std::time::Duration::from_secs(5) {
                unmount();
                let _ = child.kill();
                let _ = child.wait();
                eprintln!("skipped: could not mount a procfs of a new pid namespace");
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let got = own_pid_namespace(dir.path(), std::process::id());
        unmount();
        let _ = child.kill();
        let _ = child.wait();
        let msg = got.expect_err("another namespace's procfs").to_string();
        assert!(
            msg.contains("another pid namespace") && !msg.contains('\n'),
            "{msg}"
        );
    }
}

#[cfg(test)]
mod journal_tests {
    use super::*;
    use numasched_linux::apply::{ErrorKind, FakeKernel, Fault, Op};
    use numasched_model::CpuSet;

    /// What the recovery could not restore (the kernel refused) must reach the
    /// starting daemon's actuator and stay on disk: the start's first write of the
    /// journal replaced it with an empty one, and the process stayed narrowed for good.
    #[test]
    fn what_the_recovery_could_not_restore_is_kept_for_the_daemon() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = Options {
            journal: dir.path().join("journal.json"),
            ..Options::default()
        };
        let mut left = Journal::new();
        left.begin(100, 7, &CpuSet::from([0, 1, 2, 3]));
        left.remember_thread(100, 7, 100, &CpuSet::from([0, 1, 2, 3]));
        left.set_applied(100, 7, &CpuSet::from([2]));
        JournalFile::new(&opts.journal).save(&left).expect("save");
        let k = FakeKernel::new(&[0, 1, 2, 3]);
        k.add(100, 7, 1, &[2]);
        k.inject_always(
            Op::SetAffinity,
            100,
            Fault::Fail(ErrorKind::PermissionDenied),
        );
        let taken = journal_file(&opts, &k).expect("start").expect("a journal");
        assert!(taken.left.entry(100).is_some(), "handed to the actuator");
        let on_disk = JournalFile::new(&opts.journal)
            .load()
            .expect("load")
            .expect("a file");
        assert!(
            on_disk.entry(100).is_some(),
            "still on disk after the start"
        );
    }
}

fn trigger_params(opts: &Options) -> TriggerParams {
    use numasched_policy::granularity::Pin;
    TriggerParams {
        mpki_change: opts.mpki_change,
        min_interval: opts.min_replan_interval.as_secs_f64(),
        hard_pins: matches!(opts.pin, Pin::Core | Pin::Cpu),
    }
}
