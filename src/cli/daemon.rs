//! `numasched daemon`: manage the machine's processes every epoch until SIGTERM/SIGINT,
//! then restore every affinity it changed.

use std::path::PathBuf;

use clap::Args;
use tracing::{info, warn};

use super::manage::ManageArgs;
use crate::daemon::assemble::{self, Built, Use};
use crate::daemon::service::{self, Listeners, Until};
use crate::daemon::{logging, paths, Options};

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
    service::survive_failed_writes();
    logging::init(opts.log_format, "info");
    let socket = (!opts.no_socket).then_some(opts.socket.as_path());
    paths::refuse_bad(&opts, socket)?;
    let listeners = Listeners::bind(socket, opts.metrics)?;
    let built = assemble::assemble(&opts, &args.manage.select.roots(), None, Use::Manage)?;
    announce(&built, &opts, "daemon");
    service::serve(built, &opts, listeners, Until::Signal)?;
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
    let cpus = built.engine.topology().num_cpus();
    for w in selection_warnings(opts, cpus)
        .into_iter()
        .chain(opts.timing_doubts())
    {
        warn!("{w}");
    }
    if !opts.dry_run && !nix::unistd::geteuid().is_root() {
        warn!("not running as root: processes of other users cannot be placed (EPERM) and are reported as failed");
    }
}

/// Selection rules that are valid but select nothing they seem to: said once at start,
/// since the daemon then runs on and manages nothing without a word.
fn selection_warnings(opts: &Options, cpus: usize) -> Vec<String> {
    let mut out = Vec::new();
    for pid in &opts.select.include_pid {
        if *pid == 1 || *pid == std::process::id() {
            out.push(format!(
                "include_pid {pid}: {} is never managed",
                if *pid == 1 {
                    "init"
                } else {
                    "numasched itself"
                }
            ));
        }
    }
    if opts.select.min_cpu > cpus as f64 {
        out.push(format!(
            "min_cpu {}: more than the machine's {cpus} CPUs, so no process qualifies",
            opts.select.min_cpu
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_that_can_select_nothing_are_named() {
        let mut o = Options::default();
        assert!(selection_warnings(&o, 2).is_empty());
        o.select.include_pid = vec![1, 42];
        o.select.min_cpu = 2.5;
        let w = selection_warnings(&o, 2);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("init is never managed"), "{w:?}");
        assert!(w[1].contains("machine's 2 CPUs"), "{w:?}");
        o.select.min_cpu = 2.0;
        assert_eq!(
            selection_warnings(&o, 2).len(),
            1,
            "exactly every CPU can qualify"
        );
    }
}
