//! `numasched plan`: run a policy once and print the plan, changing nothing. With
//! `--snapshot` it replays a saved snapshot, which is how bugs get reported and tests
//! pin behaviour down.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::policy::{self, Snapshot};
use crate::sim::eval::{bridge, runner::Runner};
use crate::sim::{self, ProfileSet};
use crate::topology::cpulist;

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Snapshot to plan for (JSON: topology + processes).
    #[arg(long, value_name = "FILE")]
    pub snapshot: PathBuf,
    /// Placement policy (any of `policy::NAMES`, or `oracle` to search with the
    /// simulator's model as objective).
    #[arg(long, default_value = "auto", value_name = "P")]
    pub policy: String,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: PlanArgs) -> anyhow::Result<()> {
    let snapshot = Snapshot::load(&args.snapshot)?;
    // The oracle needs an objective: the simulator's model of this snapshot's machine,
    // with the built-in program profiles (unknown programs use their own MPKI and
    // penalty from the snapshot).
    let policy = if args.policy == "oracle" {
        let params = sim::params_for(&snapshot.topology);
        Runner::new(bridge::time_model(params, ProfileSet::builtin(), None)).oracle()
    } else {
        policy::by_name(&args.policy)?
    };
    let plan = policy.plan(&snapshot);
    if args.json {
        let text = serde_json::to_string_pretty(&plan).context("encoding the plan")?;
        println!("{text}");
        return Ok(());
    }
    println!(
        "policy {} on {} processes",
        plan.policy,
        plan.placements.len()
    );
    println!(
        "{:>8}  {:<16} {:<12} {:<6} reason",
        "pid", "program", "cpus", "nodes"
    );
    for (p, pl) in snapshot.processes.iter().zip(&plan.placements) {
        let cpus = if pl.cpus.is_empty() {
            "-".to_string()
        } else {
            cpulist::format(&pl.cpus)
        };
        let nodes = if pl.nodes.is_empty() {
            "-".to_string()
        } else {
            cpulist::format(&pl.nodes)
        };
        println!(
            "{:>8}  {:<16} {:<12} {:<6} {}",
            pl.pid, p.program, cpus, nodes, pl.reason
        );
    }
    for m in &plan.page_moves {
        println!(
            "move {} MiB of pid {} from node {} to node {}: {}",
            m.bytes >> 20,
            m.pid,
            m.from_node,
            m.to_node,
            m.reason
        );
    }
    if let Some(proven) = plan.proven_optimal {
        println!(
            "proven optimal: {}",
            if proven { "yes" } else { "no (bounded search)" }
        );
    }
    Ok(())
}
