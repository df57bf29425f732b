//! `numasched run [options] -- CMD ARGS...`: start a command, manage it and every
//! process it starts, and exit with its exit status once everything numasched changed
//! has been put back. Signals sent to numasched are passed on to the command.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;
use clap::Args;

use super::manage::ManageArgs;
use crate::daemon::assemble::{self, Use};
use crate::daemon::service::{self, Ended, Listeners, Until};
use crate::daemon::{logging, paths, run_journals};

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub manage: ManageArgs,
    /// Log what numasched does (INFO) on stderr; by default only warnings and errors,
    /// and NUMASCHED_LOG (e.g. `debug`) overrides both.
    #[arg(short, long)]
    pub verbose: bool,
    /// Serve a control socket here while the command runs (none by default).
    #[arg(long, value_name = "PATH", value_parser = crate::daemon::config::parse_file_path)]
    pub socket: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

/// Returns the command's exit code (128 + signal if a signal ended it, 127 if it was not
/// found and 126 if it could not be started, as shells do).
pub fn run(args: RunArgs) -> anyhow::Result<i32> {
    let mut opts = args.manage.options()?;
    // Its own journal, not the service's (a config file's `journal` is the service's):
    // a run beside the daemon or another run shares nothing with them.
    if args.manage.journal.is_none() {
        opts.journal = run_journals::path_for(&run_journals::dir(), std::process::id());
    }
    logging::init(opts.log_format, if args.verbose { "info" } else { "warn" });
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given after --")?;
    // Before the command starts: a socket or address in use fails the run with nothing
    // started.
    paths::refuse_bad(&opts, args.socket.as_deref())?;
    let listeners = Listeners::bind(args.socket.as_deref(), opts.metrics)?;
    let mut child = match Command::new(program).args(rest).spawn() {
        Ok(c) => c,
        Err(e) => {
            // As a shell does: 127 for a command not found, 126 for one not executable,
            // so scripts tell numasched's failure from the command's.
            eprintln!("numasched: cannot start {program:?}: {e}");
            return Ok(match e.kind() {
                std::io::ErrorKind::NotFound => 127,
                _ => 126,
            });
        }
    };
    service::survive_failed_writes();
    let built = match assemble::assemble(
        &opts,
        &args.manage.select.roots(),
        Some(child.id()),
        Use::Manage,
    ) {
        Ok(b) => b,
        Err(e) => {
            // Nothing was changed yet; do not leave the command running unmanaged.
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    super::daemon::announce(&built, &opts, "run");
    match service::serve(built, &opts, listeners, Until::Exit(child))? {
        Ended::Exited(status) => Ok(status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(1)),
        Ended::Signal(sig) => Ok(128 + sig),
    }
}
