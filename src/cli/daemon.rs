//! `numasched daemon`: manage the machine's processes every epoch until SIGTERM/SIGINT,
//! then restore every affinity it changed.

use std::path::PathBuf;

use clap::Args;
use tracing::{info, warn};

use super::manage::ManageArgs;
use crate::daemon::assemble::{self, Built, Use};
use crate::daemon::service::{self, Until};
use crate::daemon::{logging, Options};

#[derive(Debug, Args)]
pub struct DaemonArgs {
    #[command(flatten)]
    pub manage: ManageArgs,
    /// Control socket for `numasched status` [default: /run/numasched/numasched.sock].
    #[arg(long, value_name = "PATH", value_parser = crate::daemon::config::parse_file_path)]
    pub socket: Option<PathBuf>,
    /// Serve no control socket: `status` and `top` cannot reach the daemon then.
    #[arg(long, conflicts_with = "socket")]
    pub no_socket: bool,
}

pub fn run(args: DaemonArgs) -> anyhow::Result<()> {
    let mut opts = args.manage.options()?;
    // Flags win over the file: `--socket` asks for a socket even where the file says
    // `no_socket`, and `--no-socket` turns off one the file names.
    if let Some(s) = &args.socket {
        opts.socket = s.clone();
        opts.no_socket = false;
    }
    opts.no_socket |= args.no_socket;
    logging::init(opts.log_format, "info");
    let built = assemble::assemble(&opts, &args.manage.select.roots(), None, Use::Manage)?;
    announce(&built, &opts, "daemon");
    let socket = (!opts.no_socket).then_some(opts.socket.as_path());
    service::serve(built, &opts, socket, Until::Signal)?;
    Ok(())
}

/// The start-up lines: what runs, which sensors it has and what it lacks.
pub fn announce(built: &Built, opts: &Options, what: &str) {
    info!(
        policy = %built.policy,
        interval_s = opts.interval.as_secs_f64(),
        dry_run = opts.dry_run,
        migrate_pages = opts.migrate_pages,
        store = %built.store.as_ref().map_or("none".into(), |p| p.display().to_string()),
        "numasched {what} starting"
    );
    info!("{}", built.sensors.summary());
    if !built.sensors.hardware_counters.available {
        info!("no hardware counters: MPKI and NUMA penalty come from the profile store; processes without a profile are placed for locality only");
    }
    if opts.migrate_pages && built.engine.actuator().config().kernel_balancing {
        info!("kernel NUMA balancing is on (kernel.numa_balancing=1): it moves pages toward the node a process runs on, so numasched leaves those moves to it and migrates only where the kernel does not (docs/operations.md)");
    }
    if !opts.dry_run && !nix::unistd::geteuid().is_root() {
        warn!("not running as root: processes of other users cannot be placed (EPERM) and are reported as failed");
    }
}
