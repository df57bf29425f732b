//! The epoch loop of `numasched daemon` and `numasched run`: an epoch, then a wait
//! that a signal cuts short, until SIGTERM/SIGINT (daemon) or the command's exit
//! (run); then everything numasched changed is put back.
//!
//! Signals are turned into messages by signal-hook's iterator thread, so the loop
//! waits on a channel with a timeout instead of sleeping: SIGTERM ends a 1 s epoch at
//! once, and `run` notices its command's exit through SIGCHLD without polling.
//!
//! Once its listeners are bound, the loop drops every capability it does not need
//! ([`super::privileges`]); the command of `run` was started before, and keeps the
//! caller's.

use std::collections::HashSet;
use std::process::{Child, ExitStatus};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::Signals;
use tracing::{debug, info, warn};

use super::assemble::Built;
use super::clock::unix_now;
use super::config::Options;
use super::engine::EpochReport;
use super::forks::{thread_cpu_time, Follower};
use super::metrics::{BoundMetrics, MetricsServer};
use super::pace::Pace;
use super::privileges;
use super::socket::{Bound, Server, Shared};
use super::status_board::{Board, Wake};
use numasched_linux::apply::{Action, Restored};
use numasched_linux::observe::proc_events::monotonic_ns;

/// What ends the loop.
pub enum Until {
    /// SIGTERM or SIGINT.
    Signal,
    /// The command of `run` exits (signals are forwarded to it).
    Exit(Child),
}

/// How the loop ended.
pub enum Ended {
    Signal(i32),
    Exited(ExitStatus),
}

/// Logs only what is new since the last epoch, so a process whose files stay broken
/// is reported once, not every second.
#[derive(Default)]
struct Dedup {
    last: HashSet<String>,
}

impl Dedup {
    fn fresh(&mut self, lines: &[String]) -> Vec<String> {
        let now: HashSet<String> = lines.iter().cloned().collect();
        let fresh = lines
            .iter()
            .filter(|l| !self.last.contains(*l))
            .cloned()
            .collect();
        self.last = now;
        fresh
    }
}

/// The control socket and the metrics address, bound but not yet answered.
pub struct Listeners {
    socket: Option<Bound>,
    metrics: Option<BoundMetrics>,
}

impl Listeners {
    /// Binds both before anything else is done at start: a second daemon on the same
    /// socket or address is refused here, before it has logged a start, recovered a
    /// journal or opened (and copied) a store.
    pub fn bind(
        socket: Option<&std::path::Path>,
        metrics: Option<std::net::SocketAddr>,
    ) -> anyhow::Result<Listeners> {
        let socket = socket.map(Server::bind).transpose()?;
        let metrics = metrics.map(MetricsServer::bind).transpose()?;
        Ok(Listeners { socket, metrics })
    }
}

/// Ignores SIGPIPE and SIGXFSZ, before the daemon (or `run`) writes anything. A reader
/// of its log that goes away (`daemon 2>&1 | head`, a closed terminal) or a log or
/// journal over the file-size limit (`ulimit -f`) would otherwise end it by their
/// default actions, every narrowed process left as it was. Ignored, the write fails
/// instead, and a log line that cannot be written is dropped. SIG_IGN survives exec,
/// so `run` calls this after its command has started.
pub fn survive_failed_writes() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    for sig in [Signal::SIGPIPE, Signal::SIGXFSZ] {
        // SAFETY: SIG_IGN installs no handler code; nothing else here sets these.
        if let Err(e) = unsafe { signal(sig, SigHandler::SigIgn) } {
            tracing::warn!("could not ignore {sig}: {e}");
        }
    }
}

/// Runs the loop; returns how it ended after restoring everything.
pub fn serve(
    mut built: Built,
    opts: &Options,
    listeners: Listeners,
    mut until: Until,
) -> anyhow::Result<Ended> {
    // SIGUSR1/2 are caught too: their default action ends the process without the
    // restore, leaving every narrowed process as it was (only the next start's
    // recovery would undo it).
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGUSR1, SIGUSR2])?;
    let (tx, rx) = mpsc::channel();
    let tx_forks = tx.clone();
    let shared: Shared = Arc::new(Board::new(tx.clone()));
    let Listeners { socket, metrics } = listeners;
    // Start-up is done: what may need more (binding, the journal's recovery) is behind
    // us. Before any thread starts, since each thread keeps its own capabilities.
    privileges::drop_unneeded().log();
    if let Err(e) = built.engine.check_journal() {
        // Nothing was changed yet; `run`'s command is not left running unmanaged.
        if let Until::Exit(child) = &mut until {
            let _ = child.kill();
            let _ = child.wait();
        }
        anyhow::bail!(
            "{e}; after start the daemon keeps no CAP_DAC_OVERRIDE, so the journal's \
             directory must be writable by its user through its own permissions"
        );
    }
    std::thread::Builder::new()
        .name("numasched-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if tx.send(Wake::Signal(sig)).is_err() {
                    break;
                }
            }
        })?;
    let _server = match socket {
        Some(bound) => {
            let s = bound.serve(shared.clone(), built.engine.jobs())?;
            info!(socket = %s.path().display(), "control socket ready");
            Some(s)
        }
        None => None,
    };
    let _metrics = match metrics {
        Some(bound) => {
            let m = bound.serve(shared.clone())?;
            if m.addr().ip().is_loopback() {
                info!(address = %m.addr(), "metrics served at /metrics");
            } else {
                warn!(address = %m.addr(), "metrics served at /metrics on a non-loopback address: anyone who can reach it sees which programs run here");
            }
            Some(m)
        }
        None => None,
    };
    let follower = start_follower(&mut built, tx_forks);
    let started = unix_now();
    let clock = Instant::now();
    let mut problems = Dedup::default();
    let mut notes = Dedup::default();
    // Passes between epochs have their own, or an empty pass would make the epoch's
    // standing problems look new again.
    let mut pass_notes = Dedup::default();
    let mut lost_lock: Option<std::path::PathBuf> = None;
    let mut pace = Pace::default();
    let ended = 'epochs: loop {
        let t0 = Instant::now();
        if let Some(f) = &follower {
            f.begin();
        }
        let calm = match built
            .engine
            .epoch(clock.elapsed().as_secs_f64(), unix_now())
        {
            Ok(rep) => {
                log_epoch(&rep, &mut problems, &mut notes, t0.elapsed());
                if let Some(f) = &follower {
                    // The epoch's cost does not space the passes: that is the
                    // interval's job.
                    log_followed(f, &built, Duration::ZERO, &rep.adopted, false);
                }
                rep.calm
            }
            // procfs itself unreadable: nothing to decide on; try again next epoch.
            Err(e) => {
                warn!("observation failed: {e}");
                false
            }
        };
        shared.epoch_done(built.engine.epochs());
        if let Some(lock) = built.journal_lock.as_ref().filter(|l| !l.still_named()) {
            lost_lock = Some(lock.path().to_path_buf());
            break None;
        }
        let took = t0.elapsed();
        built.engine.took(took.as_secs_f64() * 1e3);
        if let Until::Exit(child) = &mut until {
            if let Some(status) = child.try_wait()? {
                break Some(Ended::Exited(status));
            }
        }
        let mut deadline = t0 + pace.next(opts.interval, calm, follower.is_some());
        let mut stretched = pace.stretched().then_some((deadline - t0).as_secs_f64());
        loop {
            // A fork or exit to follow waits for the pass's spacing, never past the
            // epoch, which follows them itself.
            let due = follower
                .as_ref()
                .filter(|f| f.pending())
                .map(|f| f.next_pass_at().unwrap_or(t0).max(t0));
            let until_next = due.map_or(deadline, |d| d.min(deadline));
            let mut publish = || publish(&shared, &built, opts, started, took, stretched);
            match wait(&rx, until_next, &mut until, &mut publish)? {
                Waited::Ended(e) => break 'epochs Some(e),
                Waited::Tasks => {
                    // A managed process forked or exited: the epoch is the interval
                    // again, so that what follows is planned as soon as it would be,
                    // and status says so from now on.
                    if pace.woken() {
                        (deadline, stretched) = (deadline.min(t0 + opts.interval), None);
                        shared.outdated();
                    }
                    continue;
                }
                Waited::Deadline if Instant::now() >= deadline => break,
                Waited::Deadline => {}
            }
            if let Some(f) = follower.as_ref().filter(|f| f.pending()) {
                follow_pass(f, &mut built, clock, &mut pass_notes);
            }
        }
    };
    shutdown(&mut built);
    match (ended, lost_lock) {
        (Some(e), _) => Ok(e),
        (None, lock) => anyhow::bail!(
            "{}: the journal's lock file was removed or replaced while running, so another              daemon could take the journal; stopped managing and put back what this one              changed",
            lock.unwrap_or_default().display()
        ),
    }
}

/// What ended a wait.
enum Waited {
    Deadline,
    /// The connector reported a fork or exit to follow.
    Tasks,
    /// The loop must end.
    Ended(Ended),
}

/// The proc connector's thread, where the daemon subscribed (see [`super::forks`]).
fn start_follower(built: &mut Built, tx: mpsc::Sender<Wake>) -> Option<Arc<Follower>> {
    let events = built.proc_events.take()?;
    match Follower::start(events, tx) {
        Ok(f) => Some(f),
        Err(e) => {
            warn!("proc connector: cannot start its thread ({e}); forks are found by each epoch's poll");
            None
        }
    }
}

/// A pass between epochs: the forks and exits the connector reported, followed now.
/// `clock`: the loop's, which the epochs read too.
fn follow_pass(f: &Follower, built: &mut Built, clock: Instant, notes: &mut Dedup) {
    let now = clock.elapsed().as_secs_f64();
    let (t, cpu) = (Instant::now(), thread_cpu_time());
    let parents = f.begin();
    let mut rep = EpochReport::default();
    let adopted = built
        .engine
        .follow_forks(true, Some(&parents), now, unix_now(), &mut rep);
    log_released(&rep, notes);
    debug!(
        journaled = adopted.len(),
        given_back = rep.released.len(),
        ms = t.elapsed().as_secs_f64() * 1e3,
        "forks and exits followed between epochs"
    );
    log_followed(
        f,
        built,
        thread_cpu_time().saturating_sub(cpu),
        &adopted,
        true,
    );
}

/// Logs how long after its fork each child was journaled (at debug: a fork bomb
/// would flood the log otherwise), and hands the pass's end to the follower.
/// `between`: by a pass between epochs, which the connector started.
fn log_followed(f: &Follower, built: &Built, cost: Duration, adopted: &[u32], between: bool) {
    let journaled = built.engine.journaled();
    for (pid, late) in f.end(Instant::now(), cost, journaled, adopted, monotonic_ns()) {
        debug!(
            pid,
            ms = late.as_secs_f64() * 1e3,
            between,
            "fork followed: journaled with the set its parent was given"
        );
    }
}

/// Waits until `deadline`, handling signals and building the status when a reader
/// asks (`publish`).
fn wait(
    rx: &mpsc::Receiver<Wake>,
    deadline: Instant,
    until: &mut Until,
    publish: &mut dyn FnMut(),
) -> anyhow::Result<Waited> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Waited::Deadline);
        }
        let sig = match rx.recv_timeout(left) {
            Ok(Wake::Signal(s)) => s,
            Ok(Wake::Status) => {
                publish();
                continue;
            }
            Ok(Wake::Tasks) => return Ok(Waited::Tasks),
            Err(RecvTimeoutError::Timeout) => return Ok(Waited::Deadline),
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(left);
                return Ok(Waited::Deadline);
            }
        };
        match (sig, &mut *until) {
            (SIGTERM | SIGINT, Until::Signal) => {
                info!(signal = sig, "stopping");
                return Ok(Waited::Ended(Ended::Signal(sig)));
            }
            (SIGTERM | SIGINT | SIGHUP | SIGUSR1 | SIGUSR2, Until::Exit(child)) => {
                // The command decides what a signal means; numasched stays until it
                // exits, to restore what it changed.
                debug!(
                    signal = sig,
                    pid = child.id(),
                    "forwarding signal to the command"
                );
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::try_from(sig).ok(),
                );
            }
            (SIGCHLD, Until::Exit(child)) => {
                if let Some(status) = child.try_wait()? {
                    return Ok(Waited::Ended(Ended::Exited(status)));
                }
            }
            (SIGHUP, Until::Signal) => {
                info!("SIGHUP: configuration reload is not supported; restart to apply changes")
            }
            (SIGUSR1 | SIGUSR2, Until::Signal) => {
                info!(
                    signal = sig,
                    "signal ignored: the daemon has no use for it (SIGTERM stops it and restores)"
                )
            }
            _ => {}
        }
    }
}

fn shutdown(built: &mut Built) {
    let (restored, err) = built.engine.restore_all();
    if let Some(e) = err {
        warn!("{e}");
    }
    let mut done = 0;
    for (pid, r) in &restored {
        match r {
            Restored::Done { .. } => {
                done += 1;
                info!(pid, "{r}");
            }
            Restored::Failed(_) => warn!(pid, "{r}"),
            _ => debug!(pid, "{r}"),
        }
    }
    for e in built.engine.flush(unix_now()) {
        warn!("{e}");
    }
    if built.engine.actuator().config().dry_run {
        info!("stopped; a dry run changed no affinity, so there was nothing to restore");
    } else {
        info!(restored = done, "stopped; original affinities restored");
    }
}

fn log_epoch(rep: &EpochReport, problems: &mut Dedup, notes: &mut Dedup, took: Duration) {
    debug!(
        epoch = rep.epoch,
        managed = rep.managed,
        arrived = rep.arrived.len(),
        ms = took.as_secs_f64() * 1e3,
        "epoch"
    );
    for p in problems.fresh(&rep.problems) {
        warn!("{p}");
    }
    log_released(rep, notes);
    for pid in &rep.uncharacterised {
        info!(
            pid,
            "no hardware counters and no profile: placed for locality only"
        );
    }
    for a in &rep.advice {
        info!("{a}");
    }
    if !rep.waiting.is_empty() {
        debug!(reasons = %rep.waiting.join("; "), "re-plan waits for the hysteresis interval");
    }
    for line in &rep.migrations {
        match line.action {
            Action::Deferred | Action::Gone => debug!("{line}"),
            Action::Failed => warn!("{line}"),
            _ => info!("{line}"),
        }
    }
    let Some(apply) = &rep.apply else { return };
    info!(
        reasons = %rep.replan.join("; "),
        placements = apply.placements.len(),
        changed = apply.count(Action::Done),
        unchanged = apply.count(Action::Unchanged),
        refused = apply.count(Action::Refused),
        yielded = apply.count(Action::Yielded),
        failed = apply.count(Action::Failed),
        "re-planned"
    );
    for line in apply.placements.iter().chain(&apply.moves) {
        match line.action {
            Action::Unchanged | Action::LeftAlone | Action::Gone => debug!("{line}"),
            Action::Failed => warn!("{line}"),
            _ => info!("{line}"),
        }
    }
}

/// What an epoch, or a pass following forks, gave back and could not write.
fn log_released(rep: &EpochReport, notes: &mut Dedup) {
    for n in notes.fresh(&rep.notes) {
        warn!("{n}");
    }
    for (pid, why, r) in &rep.released {
        info!(pid, "released ({why}): {r}");
    }
}

/// Builds the status for the readers waiting on the board, unless an earlier wake
/// of the same epoch already did.
fn publish(
    shared: &Shared,
    built: &Built,
    opts: &Options,
    started: i64,
    took: Duration,
    stretched_s: Option<f64>,
) {
    if !shared.wanted() {
        return;
    }
    let mut s = built.status(
        opts.interval.as_secs_f64(),
        opts.dry_run,
        opts.migrate_pages,
        started,
        took,
    );
    s.stretched_s = stretched_s;
    shared.put(s);
}
