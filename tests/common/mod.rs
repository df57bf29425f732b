//! Shared by the integration tests that run the built binary.

pub mod daemon;
pub mod live;

use std::process::Command;

#[allow(dead_code)] // not every test binary runs the CLI
/// Runs `numasched ARGS` from the repository root; returns exit code, stdout, stderr.
pub fn numasched(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_numasched"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run numasched");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[allow(dead_code)] // not every test binary measures memory
#[allow(clippy::zombie_processes)] // waited for by wait4, which std's Child cannot do
/// Runs `numasched ARGS` like [`numasched`], with output discarded; returns the exit
/// code and the process's peak resident memory in KiB (wait4's ru_maxrss, which is
/// this child's own, not that of every child the test binary waited for).
pub fn numasched_peak_kib(args: &[&str]) -> (i32, u64) {
    use std::process::Stdio;
    let child = Command::new(env!("CARGO_BIN_EXE_numasched"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run numasched");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet waited for; both pointers are valid.
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(got, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, u64::try_from(usage.ru_maxrss).unwrap_or(0))
}
