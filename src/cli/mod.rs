//! The `numasched` command line. Each subcommand lives in its own module; this one only
//! parses and dispatches, and turns every error into one line on stderr.

use clap::{Parser, Subcommand};

pub mod eval;
pub mod plan;
pub mod profile;
pub mod sim;
pub mod topo;

#[derive(Debug, Parser)]
#[command(
    name = "numasched",
    version,
    about = "NUMA- and cache-aware process placement"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a placement policy on a snapshot and print the plan; changes nothing.
    Plan(plan::PlanArgs),
    /// Show the machine model: this machine from sysfs, a preset or a spec string.
    Topo(topo::TopoArgs),
    /// Simulate one scenario on the performance model.
    Sim(sim::SimArgs),
    /// Run an evaluation suite: every policy against Linux and the oracle.
    Eval(eval::EvalArgs),
    /// List, set, import and export the per-program profile store.
    Profile(profile::ProfileArgs),
    /// Run a built-in test load (memory stream or cpu loop) that reports its own rate.
    Workload(crate::workload::WorkloadArgs),
}

/// Runs the CLI and returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("numasched: {e:#}");
            1
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Plan(a) => plan::run(a),
        Command::Topo(a) => topo::run(a),
        Command::Sim(a) => sim::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Profile(a) => profile::run(a),
        Command::Workload(a) => crate::workload::run(a),
    }
}
