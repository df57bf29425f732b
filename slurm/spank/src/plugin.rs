//! The symbols Slurm looks up in the .so: `plugin_name`, `plugin_type`,
//! `plugin_version` and the `slurm_spank_*` callbacks we implement.
//!
//! Only the callbacks with work to do are exported, on purpose: slurmd
//! starts an extra "spank" slurmstepd for every job if a plugin exports
//! `slurm_spank_job_prolog`/`_epilog`, even empty ones.
//!
//! Left out of unit-test builds: the test executable has no Slurm process
//! to resolve the `spank_*` functions these callbacks call.

use crate::admin;
use crate::config::{Config, Decision};
use crate::notify;
use crate::proto;
use crate::proto::{Event, Mode, TaskEvent};
use crate::slurm::{self, Context, Handle, Level, Spank, SpankOption};
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::Mutex;

/// Name Slurm prints in its messages about this plugin.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static plugin_name: [u8; 10] = *b"numasched\0";

/// Marks the .so as a SPANK plugin (Slurm then checks only major.minor of
/// `plugin_version`).
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static plugin_type: [u8; 6] = *b"spank\0";

/// The Slurm release whose headers we were built against; Slurm refuses to
/// load the plugin into another major.minor release, so rebuild on upgrade.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static plugin_version: u32 = slurm::SLURM_VERSION_NUMBER;

/// The user's `--numasched` value as `mode_code`, 0 when not given. Slurm's
/// option callback has no user-data pointer, hence process-global state; an
/// atomic because it needs no lock that a fork could catch held.
static MODE: AtomicU8 = AtomicU8::new(0);

/// Parsed plugstack.conf arguments; `None` before init, and after bad
/// arguments, which disables the socket channel (the admin's intended socket
/// is unknown) but not the environment channel.
static CONFIG: Mutex<Option<Config>> = Mutex::new(None);

/// Set once an event of this step hit the timeout: a daemon that accepts but
/// does not answer would otherwise delay every remaining task's exec by the
/// whole budget.
static DAEMON_STUCK: AtomicBool = AtomicBool::new(false);

fn mode_code(mode: Option<Mode>) -> u8 {
    match mode {
        None => 0,
        Some(Mode::Off) => 1,
        Some(Mode::Advise) => 2,
        Some(Mode::Manage) => 3,
    }
}

/// The user's `--numasched` value, if any.
fn user_mode() -> Option<Mode> {
    match MODE.load(Ordering::Relaxed) {
        1 => Some(Mode::Off),
        2 => Some(Mode::Advise),
        3 => Some(Mode::Manage),
        _ => None,
    }
}

/// The task's mode under the site's settings (plugstack.conf's `default=` and
/// `allow_opt_out=`), and why the user's word was overruled if it was. srun and
/// sbatch refuse an opt-out the site forbids; one that arrives anyway (a submit
/// host whose plugstack.conf differs, `NUMASCHED=off` exported by hand) is
/// overruled here, in slurmstepd.
fn task_mode(handle: &Handle) -> (Option<Mode>, Option<String>) {
    let cfg = config().unwrap_or_default();
    let env = handle.getenv(c"NUMASCHED");
    match cfg.decide(user_mode(), env.as_deref()) {
        Decision::Use(mode) => (mode, None),
        Decision::Refuse(why) => (cfg.default, Some(why)),
    }
}

fn config() -> Option<Config> {
    // A poisoned lock only means a panic elsewhere; the value is still whole.
    CONFIG.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

fn set_config(cfg: Option<Config>) {
    *CONFIG.lock().unwrap_or_else(|p| p.into_inner()) = cfg;
}

/// Run a callback body, turning a panic into `on_panic`: unwinding into C is
/// an abort, and an aborted slurmstepd takes the user's job with it.
fn guard(callback: &str, on_panic: c_int, body: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        slurm::log(
            Level::Error,
            &format!("internal error (panic) in {callback}"),
        );
        on_panic
    })
}

/// Callback for `--numasched`. Refusing a bad value here (remote == 0: srun,
/// sbatch, salloc, also for `#SBATCH` lines and Slurm's variable for the option,
/// `SLURM_SPANK__SLURM_SPANK_OPTION_numasched_numasched`) makes
/// the command print "Invalid --numasched argument" and exit before anything
/// is submitted; so does an `off` the site forbids (`allow_opt_out=no`). In
/// slurmstepd (remote == 1) an invalid value could only
/// arrive by bypassing that check; it is logged and ignored, so the job runs
/// unmanaged rather than failing over a scheduling hint.
unsafe extern "C" fn option_cb(_val: c_int, optarg: *const c_char, remote: c_int) -> c_int {
    guard("option callback", -1, || {
        let value = if optarg.is_null() {
            String::new()
        } else {
            // SAFETY: Slurm passes the option's NUL-terminated argument.
            unsafe { std::ffi::CStr::from_ptr(optarg) }
                .to_string_lossy()
                .into_owned()
        };
        match value.parse::<Mode>() {
            // The site's word first, where the user can still change the command.
            Ok(mode) if remote == 0 => {
                match config().unwrap_or_default().decide(Some(mode), None) {
                    Decision::Use(_) => {
                        MODE.store(mode_code(Some(mode)), Ordering::Relaxed);
                        0
                    }
                    Decision::Refuse(why) => {
                        MODE.store(0, Ordering::Relaxed);
                        slurm::log(Level::Error, &why);
                        -1
                    }
                }
            }
            Ok(mode) => {
                MODE.store(mode_code(Some(mode)), Ordering::Relaxed);
                0
            }
            Err(e) => {
                MODE.store(0, Ordering::Relaxed);
                if remote != 0 {
                    slurm::log(Level::Error, &format!("{e}; ignoring it"));
                } else {
                    slurm::log(Level::Error, &e.to_string());
                }
                -1
            }
        }
    })
}

/// Registers `--numasched` (in every context that parses or forwards it) and
/// parses the plugstack.conf arguments where they are used.
///
/// # Safety
/// Called by Slurm with a valid handle and `argc`/`argv` from plugstack.conf.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_init(
    spank: Spank,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    guard("slurm_spank_init", -1, || {
        let ctx = slurm::context();
        let handle = Handle::new(spank);
        let mut rc = 0;
        if matches!(ctx, Context::Local | Context::Remote | Context::Allocator) {
            let opt = SpankOption {
                name: c"numasched".as_ptr(),
                arginfo: c"mode".as_ptr(),
                usage: c"numasched NUMA placement for this job: off, advise or manage".as_ptr(),
                has_arg: 1,
                val: 0,
                cb: Some(option_cb),
            };
            if let Err(e) = handle.register_option(&opt) {
                slurm::log(Level::Error, &format!("cannot register --numasched: {e}"));
                rc = -1;
            }
        }
        // slurmd parses them once at start-up, so a typo is in slurmd's log
        // right away; slurmstepd because it is the one that sends; srun, sbatch
        // and salloc for `allow_opt_out`, silently: they should not show an
        // admin's typo to users (slurmd has logged it).
        // SAFETY: argc/argv as Slurm passed them to this callback.
        let args = unsafe { slurm::plugin_args(argc, argv) };
        match Config::parse(args.iter().map(String::as_str)) {
            Ok(cfg) => set_config(Some(cfg)),
            Err(e) => {
                set_config(None);
                if matches!(ctx, Context::Remote | Context::Slurmd) {
                    slurm::log(Level::Error, &e.to_string());
                    rc = -1;
                }
            }
        }
        rc
    })
}

/// Runs in the forked task, as the user, just before execve: the last moment
/// the task's environment can be changed.
///
/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_init(
    spank: Spank,
    _argc: c_int,
    _argv: *const *const c_char,
) -> c_int {
    guard("slurm_spank_task_init", 0, || {
        let handle = Handle::new(spank);
        let (mode, overruled) = task_mode(&handle);
        if let Some(why) = overruled {
            slurm::log(Level::Error, &why);
        }
        if let Some(mode) = mode {
            if let Err(e) = handle.setenv(c"NUMASCHED", mode.as_cstr(), true) {
                // Not fatal: the job still runs, only without the hint.
                slurm::log(
                    Level::Error,
                    &format!("cannot set NUMASCHED={}: {e}", mode.as_str()),
                );
            }
        }
        0
    })
}

/// Runs in slurmstepd, as root, once per task after fork: the task is in its
/// cgroup and pinned but held before exec (it still looks like slurmstepd in
/// /proc). Always returns 0: slurmstepd aborts the launch if this fails.
///
/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_post_fork(
    spank: Spank,
    _argc: c_int,
    _argv: *const *const c_char,
) -> c_int {
    guard("slurm_spank_task_post_fork", 0, || {
        notify_daemon(Handle::new(spank), Event::Start);
        0
    })
}

/// Runs in slurmstepd, as root, after a task was reaped, so the daemon can
/// forget the pid before it is reused. Always returns 0.
///
/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_exit(
    spank: Spank,
    _argc: c_int,
    _argv: *const *const c_char,
) -> c_int {
    guard("slurm_spank_task_exit", 0, || {
        let handle = Handle::new(spank);
        let reply = notify_daemon(Handle::new(spank), Event::Exit);
        // One line per step and node: at the last of this node's tasks, whose
        // exit the daemon answered with what it did for the step.
        let exited = EXITED.fetch_add(1, Ordering::Relaxed) + 1;
        let local = handle.get_u32(slurm::S_JOB_LOCAL_TASK_COUNT).unwrap_or(1);
        if exited >= local {
            if let (Some(reply), Some(cfg)) = (reply, config()) {
                tell_slurm(&handle, &cfg, &reply);
            }
        }
        0
    })
}

/// Tasks of this step whose exit this slurmstepd has seen.
static EXITED: AtomicU32 = AtomicU32::new(0);

/// Says at a step's end what numasched did for it: one line on the job's
/// stderr (slurmstepd's own stderr is the job's, as for its other messages to
/// the user) and, where the site set `admin_comment=yes`, every step of the
/// job on this node in its AdminComment. Failures are logged and nothing else:
/// the job is over and must not fail for this.
fn tell_slurm(handle: &Handle, cfg: &Config, reply: &str) {
    let job = handle.get_u32(slurm::S_JOB_ID).ok();
    // This host's name, not the job's SLURMD_NODENAME: the job's environment is the
    // user's to set, and the AdminComment is the administrator's.
    let node = proto::host_name();
    if cfg.report {
        if let Some(report) = proto::reply_field(reply, "report") {
            let line = proto::report_line(node.as_deref(), &report);
            // SAFETY: writes a buffer we own to fd 2, which slurmstepd keeps open.
            let n = unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
            if n < 0 {
                slurm::log(
                    Level::Debug,
                    &format!(
                        "cannot write the step's report to the job's stderr: {}",
                        std::io::Error::last_os_error()
                    ),
                );
            }
        }
    }
    if let (true, Some(job), Some(all)) = (
        cfg.admin_comment,
        job,
        proto::reply_field(reply, "job_report"),
    ) {
        let comment = proto::admin_comment(node.as_deref(), &all);
        if let Err(e) = admin::set_comment(job, &comment) {
            slurm::log(
                Level::Error,
                &format!("cannot set job {job}'s AdminComment: {e}"),
            );
        }
    }
}

/// Send one event for the current task, and return the daemon's answer.
/// Every failure is logged at debug level and otherwise ignored: the daemon is
/// optional.
fn notify_daemon(handle: Handle, event: Event) -> Option<String> {
    let cfg = config()?;
    if DAEMON_STUCK.load(Ordering::Relaxed) {
        slurm::log(
            Level::Debug,
            "daemon timed out earlier in this step; not waiting for it again",
        );
        return None;
    }
    let (job, step) = match (
        handle.get_u32(slurm::S_JOB_ID),
        handle.get_u32(slurm::S_JOB_STEPID),
    ) {
        (Ok(job), Ok(step)) => (job, step),
        (Err(e), _) | (_, Err(e)) => {
            slurm::log(Level::Debug, &format!("no job/step id, not notifying: {e}"));
            return None;
        }
    };
    // The extern step's post-fork runs without a task (S_TASK_PID gives
    // ESPANK_NOT_TASK) and its only process is Slurm's own sleep: skip it.
    let pid = match handle.task_pid() {
        Ok(pid) if pid > 0 => pid,
        other => {
            slurm::log(
                Level::Debug,
                &format!(
                    "no task pid in step {} ({other:?}), not notifying",
                    crate::proto::step_text(step)
                ),
            );
            return None;
        }
    };
    let cpus = handle
        .job_alloc_cores()
        .ok()
        .flatten()
        .filter(|s| !s.is_empty());
    let line = TaskEvent {
        event,
        job,
        step,
        pid,
        mode: task_mode(&handle).0,
        cpus: cpus.as_deref(),
    }
    .to_line();
    match notify::send_line(&cfg.socket, line.as_bytes(), notify::BUDGET) {
        Ok((took, reply)) => {
            slurm::log(
                Level::Debug,
                &format!("sent in {} us: {}", took.as_micros(), line.trim_end()),
            );
            Some(reply)
        }
        Err(e) => {
            if e.is_timeout() {
                DAEMON_STUCK.store(true, Ordering::Relaxed);
            }
            slurm::log(
                Level::Debug,
                &format!(
                    "daemon not notified via {}: {e}: {}",
                    cfg.socket.display(),
                    line.trim_end()
                ),
            );
            None
        }
    }
}
