//! The small part of Slurm's C SPANK API (`<slurm/spank.h>`) this plugin
//! uses, declared by hand, with safe wrappers.
//!
//! Hand-written instead of the `slurm-spank` crate: its current release
//! (0.4.x) calls `spank_prepend_task_argv`, which Slurm 22.05's spank.h does
//! not have, so it does not compile on Debian 12; and its design cannot do two
//! things this plugin needs (refuse a bad option value from the option
//! callback, and export only the callbacks we implement). The numbers that
//! depend on the Slurm release come from the installed headers via build.rs.
//!
//! The functions are resolved when slurmd/slurmstepd/srun/sbatch dlopen()
//! the plugin (they export them), so nothing is linked at build time.

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_int};

include!(concat!(env!("OUT_DIR"), "/slurm_consts.rs"));

/// `ESPANK_SUCCESS` from slurm_errno.h (every other code is an error).
pub const ESPANK_SUCCESS: c_int = 0;

/// Opaque `struct spank_handle`.
#[repr(C)]
pub struct SpankHandle {
    _opaque: [u8; 0],
}

/// `spank_t`.
pub type Spank = *mut SpankHandle;

/// `spank_opt_cb_f`: called with the option's `val`, its argument, and
/// whether we are in slurmstepd (1) or srun/sbatch/salloc (0).
pub type OptionCallback = unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;

/// `struct spank_option`; Slurm copies it (and its strings) on registration.
#[repr(C)]
pub struct SpankOption {
    pub name: *const c_char,
    pub arginfo: *const c_char,
    pub usage: *const c_char,
    pub has_arg: c_int,
    pub val: c_int,
    pub cb: Option<OptionCallback>,
}

extern "C" {
    fn spank_context() -> c_int;
    fn spank_option_register(spank: Spank, opt: *mut SpankOption) -> c_int;
    fn spank_get_item(spank: Spank, item: c_int, ...) -> c_int;
    fn spank_setenv(
        spank: Spank,
        var: *const c_char,
        val: *const c_char,
        overwrite: c_int,
    ) -> c_int;
    fn spank_getenv(spank: Spank, var: *const c_char, buf: *mut c_char, len: c_int) -> c_int;
    fn spank_strerror(err: c_int) -> *const c_char;
    fn slurm_error(format: *const c_char, ...);
    fn slurm_info(format: *const c_char, ...);
    fn slurm_verbose(format: *const c_char, ...);
    fn slurm_debug(format: *const c_char, ...);
}

/// Where a callback runs (`spank_context_t`), reduced to what we act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// srun.
    Local,
    /// slurmstepd: the job's tasks.
    Remote,
    /// sbatch / salloc.
    Allocator,
    /// slurmd itself (init at daemon start-up).
    Slurmd,
    /// Anything else (job script context, or an error).
    Other,
}

/// The context this process loaded the plugin in.
pub fn context() -> Context {
    // SAFETY: no arguments; valid in every callback.
    match unsafe { spank_context() } {
        S_CTX_LOCAL => Context::Local,
        S_CTX_REMOTE => Context::Remote,
        S_CTX_ALLOCATOR => Context::Allocator,
        S_CTX_SLURMD => Context::Slurmd,
        _ => Context::Other,
    }
}

/// Slurm log levels we use. In srun/sbatch, `Error` and `Info` reach the
/// user's terminal; in slurmstepd everything goes to slurmd's log file,
/// filtered by `SlurmdDebug`.
#[derive(Debug, Clone, Copy)]
pub enum Level {
    Error,
    Info,
    Verbose,
    Debug,
}

/// Log `msg` through Slurm, prefixed with the plugin's name (all SPANK
/// plugins share one log). Passed as a "%s" argument so a '%' in the message
/// is never read as a format directive.
pub fn log(level: Level, msg: &str) {
    let text = format!("numasched: {msg}").replace('\0', "\\0");
    let Ok(text) = CString::new(text) else {
        return;
    };
    let fmt = c"%s".as_ptr();
    // SAFETY: both pointers are valid NUL-terminated strings for the call;
    // "%s" consumes exactly the one vararg given.
    unsafe {
        match level {
            Level::Error => slurm_error(fmt, text.as_ptr()),
            Level::Info => slurm_info(fmt, text.as_ptr()),
            Level::Verbose => slurm_verbose(fmt, text.as_ptr()),
            Level::Debug => slurm_debug(fmt, text.as_ptr()),
        }
    }
}

/// A non-success `spank_err_t`, shown with Slurm's own text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpankError(pub c_int);

impl fmt::Display for SpankError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: spank_strerror returns a static string (or NULL).
        let text = unsafe { spank_strerror(self.0) };
        if text.is_null() {
            write!(f, "spank error {}", self.0)
        } else {
            // SAFETY: non-NULL, static, NUL-terminated.
            let text = unsafe { CStr::from_ptr(text) };
            write!(f, "{} ({})", text.to_string_lossy(), self.0)
        }
    }
}

impl std::error::Error for SpankError {}

fn check(rc: c_int) -> Result<(), SpankError> {
    if rc == ESPANK_SUCCESS {
        Ok(())
    } else {
        Err(SpankError(rc))
    }
}

/// The `spank_t` a callback was given; valid only during that callback.
#[derive(Clone, Copy)]
pub struct Handle(Spank);

impl Handle {
    /// Wrap the handle passed to a `slurm_spank_*` callback.
    pub fn new(spank: Spank) -> Self {
        Handle(spank)
    }

    /// `spank_option_register`: only valid from `slurm_spank_init`.
    pub fn register_option(&self, opt: &SpankOption) -> Result<(), SpankError> {
        // Slurm copies the struct and its strings (_spank_option_copy) and
        // does not write through the pointer, despite the non-const type.
        let ptr = opt as *const SpankOption as *mut SpankOption;
        // SAFETY: valid handle from the current callback; valid struct.
        check(unsafe { spank_option_register(self.0, ptr) })
    }

    /// A `uint32_t *` item such as S_JOB_ID or S_JOB_STEPID.
    pub fn get_u32(&self, item: c_int) -> Result<u32, SpankError> {
        let mut v: u32 = 0;
        // SAFETY: the caller passes only items documented as (uint32_t *).
        check(unsafe { spank_get_item(self.0, item, &mut v as *mut u32) })?;
        Ok(v)
    }

    /// S_TASK_PID (`pid_t *`); ESPANK_NOT_TASK outside a task callback and
    /// in the extern step's post-fork, which has no task.
    pub fn task_pid(&self) -> Result<libc::pid_t, SpankError> {
        let mut v: libc::pid_t = 0;
        // SAFETY: S_TASK_PID takes (pid_t *).
        check(unsafe { spank_get_item(self.0, S_TASK_PID, &mut v as *mut libc::pid_t) })?;
        Ok(v)
    }

    /// S_JOB_ALLOC_CORES (`char **`): the job's cores on this node in Slurm
    /// list format ("0-3,8"). These are Slurm's *abstract* core indices
    /// (task/cgroup maps them to OS CPUs with xcpuinfo_abs_to_mac), and the
    /// pointer is NULL if slurmstepd could not decode the credential.
    pub fn job_alloc_cores(&self) -> Result<Option<String>, SpankError> {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: S_JOB_ALLOC_CORES takes (char **); the string is owned by
        // slurmstepd and outlives this call; we copy it.
        check(unsafe { spank_get_item(self.0, S_JOB_ALLOC_CORES, &mut p as *mut *const c_char) })?;
        if p.is_null() {
            return Ok(None);
        }
        // SAFETY: non-NULL NUL-terminated string from Slurm.
        Ok(Some(
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned(),
        ))
    }

    /// `spank_getenv` from the job's environment (remote context); `None` where
    /// the variable is unset, or unreadable (too long for a mode, not UTF-8).
    pub fn getenv(&self, name: &CStr) -> Option<String> {
        let mut buf = [0 as c_char; 64];
        // SAFETY: valid handle, NUL-terminated name, a buffer of the length given;
        // Slurm writes at most that many bytes, NUL included.
        let rc =
            unsafe { spank_getenv(self.0, name.as_ptr(), buf.as_mut_ptr(), buf.len() as c_int) };
        check(rc).ok()?;
        // SAFETY: on success the buffer holds a NUL-terminated string.
        let value = unsafe { CStr::from_ptr(buf.as_ptr()) };
        value.to_str().ok().map(str::to_owned)
    }

    /// `spank_setenv` on the job's environment (remote context), which
    /// slurmstepd passes to execve for the task being launched.
    pub fn setenv(&self, name: &CStr, value: &CStr, overwrite: bool) -> Result<(), SpankError> {
        // SAFETY: valid handle and NUL-terminated strings.
        check(unsafe {
            spank_setenv(
                self.0,
                name.as_ptr(),
                value.as_ptr(),
                c_int::from(overwrite),
            )
        })
    }
}

/// The plugin's arguments from plugstack.conf. Slurm passes `argv == NULL`
/// when there are none, which must not become a slice. Non-UTF-8 arguments
/// are kept lossily so the config parser can name them in its error.
///
/// # Safety
/// `argv` must be NULL or point to `argc` valid C strings, as Slurm passes
/// them to a callback.
pub unsafe fn plugin_args(argc: c_int, argv: *const *const c_char) -> Vec<String> {
    let n = usize::try_from(argc).unwrap_or(0);
    if argv.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: non-NULL, with `argc` entries per the contract above.
    let args = unsafe { std::slice::from_raw_parts(argv, n) };
    args.iter()
        .filter(|a| !a.is_null())
        // SAFETY: each entry is a NUL-terminated string from Slurm.
        .map(|&a| unsafe { CStr::from_ptr(a) }.to_string_lossy().into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_handle_null_and_strings() {
        assert!(unsafe { plugin_args(0, std::ptr::null()) }.is_empty());
        assert!(unsafe { plugin_args(3, std::ptr::null()) }.is_empty());
        let a = c"socket=/x";
        let b = c"other";
        let v = [a.as_ptr(), b.as_ptr()];
        assert_eq!(
            unsafe { plugin_args(2, v.as_ptr()) },
            ["socket=/x", "other"]
        );
    }

    #[test]
    fn constants_match_slurm_headers() {
        assert_eq!(SLURM_BATCH_SCRIPT, 0xffff_fffb);
        assert_eq!(SLURM_EXTERN_CONT, 0xffff_fffc);
        assert_eq!(SLURM_INTERACTIVE_STEP, 0xffff_fffa);
        assert_eq!((S_JOB_ID, S_JOB_STEPID, S_TASK_PID), (2, 3, 14));
        assert_eq!(
            (S_CTX_LOCAL, S_CTX_REMOTE, S_CTX_ALLOCATOR, S_CTX_SLURMD),
            (1, 2, 3, 4)
        );
    }
}
