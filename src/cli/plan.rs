//! `numasched plan`: run a policy once and print the plan, changing nothing. With
//! `--snapshot` it replays a saved snapshot, which is how bugs get reported and tests
//! pin behaviour down.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::policy::{self, Snapshot};
use crate::topology::cpulist;

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Snapshot to plan for (JSON: topology + processes).
    #[arg(long, value_name = "FILE")]
    pub snapshot: PathBuf,
    /// Placement policy.
    #[arg(long, default_value = "auto", value_name = "P")]
    pub policy: String,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: PlanArgs) -> anyhow::Result<()> {
    let policy = policy::by_name(&args.policy)?;
    let snapshot = Snapshot::load(&args.snapshot)?;
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
