//! The `numasched` command line. Each subcommand lives in its own module; this one only
//! parses and dispatches, and turns every error into one line on stderr.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub mod advise;
pub mod completions;
pub mod config;
pub mod daemon;
pub mod eval;
pub mod man;
pub mod manage;
pub mod measure;
pub mod plan;
pub mod profile;
pub mod progress;
pub mod run;
pub mod sim;
pub mod status;
pub mod top;
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
    /// Manage this machine's processes every epoch until SIGTERM/SIGINT.
    Daemon(daemon::DaemonArgs),
    /// Start a command, manage it and its children, exit with its status.
    Run(run::RunArgs),
    /// Ask the running daemon what it manages and why.
    Status(status::StatusArgs),
    /// Live view of nodes and processes (attached to the daemon, or standalone).
    Top(top::TopArgs),
    /// Plan for this machine now (or a saved snapshot) and print why; changes nothing.
    Plan(plan::PlanArgs),
    /// Which nodes a new job of N CPUs (and SIZE memory) should go to now.
    Advise(advise::AdviseArgs),
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
    /// Check a config file, or print a complete example with every default.
    Config(config::ConfigArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// Print or write the man pages.
    Man(man::ManArgs),
}

pub use crate::flags::{node_id, pid};

/// Runs the CLI and returns the process exit code.
pub fn main() -> i32 {
    let cli = match command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            // --help and --version: clap's own text, whole.
            let _ = e.print();
            return 0;
        }
        Err(e) => {
            eprintln!("{}", one_line(&e.render().to_string()));
            return 2;
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // Several problems (a config file's, the daemon's paths) are one line each.
            for line in format!("{e:#}").lines() {
                eprintln!("numasched: {line}");
            }
            1
        }
    }
}

/// The command line with what only the running binary knows filled in: `sim --help`
/// lists the machines and programs it can name. Used for parsing, man pages and
/// completions alike, so all three say the same.
pub fn command() -> clap::Command {
    let programs: Vec<String> = crate::sim::ProfileSet::builtin()
        .iter()
        .map(|p| p.name.clone())
        .collect();
    let machines = crate::topology::presets::NAMES.join(", ");
    Cli::command()
        .mut_subcommand("run", |c| {
            c.mut_arg("journal", |a| {
                a.help(
                    "Journal of original affinities, restored after a crash [default: \
                     run-PID.json in $XDG_RUNTIME_DIR/numasched, or /run/numasched-runs \
                     for root: one per run, and the next run undoes what a killed one left]",
                )
            })
        })
        .mut_subcommand("sim", |c| {
            c.after_help(format!(
                "Machines: {machines}, a spec Nn:Ll:Cc:Tt (nodes, LLCs per node, cores per LLC, \
             threads per core; e.g. 2n:1l:4c:1t), or `this`.\nPrograms (built in): {}.",
                programs.join(", ")
            ))
        })
}

/// A usage error as one line, like every other error numasched prints: clap's first
/// paragraph (what is wrong) with its tip, without the usage and "--help" lines.
fn one_line(rendered: &str) -> String {
    let mut paragraphs = rendered.split("\n\n");
    let mut line = paragraphs
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for tip in paragraphs.flat_map(str::lines).map(str::trim) {
        if let Some(t) = tip.strip_prefix("tip: ") {
            line.push_str(&format!(" ({t})"));
        }
    }
    line
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    let done = |r: anyhow::Result<()>| r.map(|()| 0);
    match cli.command {
        Command::Daemon(a) => done(daemon::run(a)),
        Command::Run(a) => run::run(a),
        Command::Status(a) => done(status::run(a)),
        Command::Top(a) => done(top::run(a)),
        Command::Plan(a) => done(plan::run(a)),
        Command::Advise(a) => advise::run(a),
        Command::Topo(a) => done(topo::run(a)),
        Command::Sim(a) => done(sim::run(a)),
        Command::Eval(a) => done(eval::run(a)),
        Command::Profile(a) => done(profile::run(a)),
        Command::Workload(a) => done(crate::workload::run(a)),
        Command::Config(a) => config::run(a),
        Command::Completions(a) => done(completions::run(a)),
        Command::Man(a) => done(man::run(a)),
    }
}

#[cfg(test)]
mod tests {
    use std::any::TypeId;

    use clap::CommandFactory;

    /// Every flag that takes a number (or a duration) lets a negative value reach its
    /// own check, which names the flag and the range; without this clap says
    /// "unexpected argument '-1' found" and prints its usage.
    #[test]
    fn every_numeric_flag_takes_a_leading_minus_to_its_own_check() {
        let numeric = [
            TypeId::of::<u8>(),
            TypeId::of::<u16>(),
            TypeId::of::<u32>(),
            TypeId::of::<u64>(),
            TypeId::of::<usize>(),
            TypeId::of::<i32>(),
            TypeId::of::<i64>(),
            TypeId::of::<f64>(),
            TypeId::of::<std::time::Duration>(),
            TypeId::of::<(f64, f64)>(),
        ];
        let mut todo = vec![(String::from("numasched"), super::Cli::command())];
        let mut missed = Vec::new();
        let mut checked = 0;
        while let Some((path, mut cmd)) = todo.pop() {
            cmd.build();
            for arg in cmd.get_arguments().filter(|a| a.get_long().is_some()) {
                let id = arg.get_value_parser().type_id();
                if !numeric.iter().any(|t| id == *t) {
                    continue;
                }
                checked += 1;
                if !(arg.is_allow_hyphen_values_set() || arg.is_allow_negative_numbers_set()) {
                    missed.push(format!("{path} --{}", arg.get_long().unwrap_or_default()));
                }
            }
            for sub in cmd.get_subcommands() {
                todo.push((format!("{path} {}", sub.get_name()), sub.clone()));
            }
        }
        assert!(checked > 20, "only {checked} numeric flags found");
        assert!(missed.is_empty(), "{missed:#?}");
    }
}
