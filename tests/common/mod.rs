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
