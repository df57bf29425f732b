//! `numasched plan`: run a policy once and print the plan, changing nothing. Without
//! `--snapshot` it observes the live machine (one pass of the daemon's pipeline, dry,
//! writing nothing, not even the profile store) and says which sensors are missing;
//! with `--snapshot` it replays a saved snapshot, which is how bugs get reported and
//! tests pin behaviour down. `plan --json` of the live machine includes the snapshot,
//! so the same decision can be replayed later: `--snapshot` takes that output as it is.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::manage::SelectArgs;
use super::progress::Heartbeat;
use crate::daemon::assemble::{self, Use};
use crate::daemon::config::parse_policy;
use crate::daemon::logging;
use crate::model::character::PenaltySource;
use crate::model::{Process, Snapshot};
use crate::observe::printable::printable;
use crate::policy::{self, Policy as _};
use crate::sim::eval::{from_model, runner::Runner};
use crate::sim::{self, ProfileSet};
use crate::topology::cpulist;
use numasched_model::plural::count;

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Snapshot to plan for (JSON: topology + processes, or what `plan --json` wrote);
    /// without it, this machine now.
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// Placement policy: auto (default), auto-migrate, autonuma, linux, maxlocal, nmass,
    /// nmass-regression, membus, cmload, numad; or oracle with --snapshot (a search with
    /// the simulator's model as objective).
    #[arg(long, value_name = "P")]
    pub policy: Option<String>,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
    /// Which live processes to plan for (with --snapshot only --pin applies; the
    /// others are refused).
    #[command(flatten)]
    pub select: SelectArgs,
}

pub fn run(args: PlanArgs) -> anyhow::Result<()> {
    let Some(path) = &args.snapshot else {
        return live(&args);
    };
    if let Some(flag) = args.select.live_only_given().first() {
        anyhow::bail!(
            "{flag} has no effect with --snapshot: it chooses among live processes, and a \
             snapshot plans every process it holds"
        );
    }
    let heartbeat = Heartbeat::start(format!("reading {}", path.display()));
    let snapshot = Snapshot::load(path)?;
    let name = args.policy.as_deref().unwrap_or("auto");
    // The oracle needs an objective: the simulator's model of this snapshot's machine,
    // with the built-in program profiles (unknown programs use their own MPKI and
    // penalty from the snapshot).
    let inner = if name == "oracle" {
        // Its search costs time with every process (2,000 took 76 s on a 2-core VM):
        // as many as `sim` and a workload take.
        let most = crate::sim::eval::workloads::MAX_PROGRAMS;
        if snapshot.processes.len() > most {
            anyhow::bail!(
                "--policy oracle: {}: {} processes, more than the {most} the oracle searches \
                 over (as `sim --programs`)",
                path.display(),
                snapshot.processes.len()
            );
        }
        let params = sim::params_for(&snapshot.topology);
        let mut runner = Runner::new(from_model::time_model(params, ProfileSet::builtin(), None));
        runner.pin = args.select.pin.unwrap_or_default();
        runner.oracle()
    } else {
        policy::by_name(name)?
    };
    // As the daemon would apply it: at `--pin` granularity, idle processes unplaced.
    let policy = policy::Granular::new(inner, args.select.pin.unwrap_or_default());
    heartbeat.now(format!(
        "planning {}",
        count(snapshot.processes.len(), "process")
    ));
    let plan = policy.plan(&snapshot);
    // Tens of thousands of placements take seconds to write on a busy machine: the
    // heartbeat keeps saying so until the last line is out.
    heartbeat.now(format!(
        "writing the plan of {}",
        count(snapshot.processes.len(), "process")
    ));
    if args.json {
        let text = serde_json::to_string_pretty(&plan).context("encoding the plan")?;
        println!("{text}");
        return Ok(());
    }
    print_plan(&snapshot, &plan, &|p| (p.character().source, None));
    drop(heartbeat);
    Ok(())
}

/// One dry pass of the live pipeline.
fn live(args: &PlanArgs) -> anyhow::Result<()> {
    let mut opts = args.select.options()?;
    if let Some(p) = &args.policy {
        if p == "oracle" {
            anyhow::bail!("--policy oracle plans saved snapshots only (pass --snapshot FILE)");
        }
        opts.policy = parse_policy(p).map_err(anyhow::Error::msg)?;
    }
    opts.dry_run = true;
    logging::init(opts.log_format, "warn");
    let mut built = assemble::assemble(&opts, &args.select.roots(), None, Use::PlanOnly)?;
    let (snapshot, plan) = built.observe_once()?;
    let views = built.engine.views();
    let uncharacterised: Vec<u32> = views
        .iter()
        .filter(|v| v.source == PenaltySource::Unknown)
        .map(|v| v.pid)
        .collect();
    let missing = built.sensors.missing();
    if args.json {
        let out = serde_json::json!({
            "sensors": built.sensors,
            "missing_sensors": missing.iter().map(|(n, why)| serde_json::json!({"sensor": n, "why": why})).collect::<Vec<_>>(),
            "uncharacterised": uncharacterised,
            "processes": views,
            "snapshot": snapshot,
            "plan": plan,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).context("encoding the plan")?
        );
        return Ok(());
    }
    println!("{}", sensors_line(&built.sensors));
    // Where each penalty came from is the characteriser's (a profile matched by name,
    // say), not the snapshot's, which carries only the number.
    let source = |p: &Process| {
        let v = views.iter().find(|v| v.pid == p.pid);
        (
            v.map_or(PenaltySource::Unknown, |v| v.source),
            v.and_then(|v| v.basis.clone()),
        )
    };
    print_plan(&snapshot, &plan, &source);
    if plan.placements.is_empty() {
        // An empty table alone reads as a fault; say which thresholds left it empty.
        let rss = if opts.select.min_rss > 0 {
            format!(" and --min-rss {} bytes", opts.select.min_rss)
        } else {
            String::new()
        };
        println!(
            "no process selected: none uses --min-cpu {} CPUs{rss} and passes the \
             include/exclude rules (a lower --min-cpu plans lighter ones)",
            opts.select.min_cpu
        );
    }
    if !uncharacterised.is_empty() {
        let pids: Vec<String> = uncharacterised.iter().map(u32::to_string).collect();
        println!(
            "not characterised (no counters, no profile; placed for locality only): {}",
            pids.join(", ")
        );
    }
    println!("dry run: nothing was changed");
    Ok(())
}

/// Terminal lines are kept within this many columns; a reason wraps under its row.
const WIDTH: usize = 100;

/// Which sensors are in use, in one short line (`plan --json` carries why not).
fn sensors_line(s: &crate::observe::Sensors) -> String {
    let yes = |b: bool| if b { "yes" } else { "no" };
    format!(
        "sensors: hardware counters {}, resctrl {}, NUMA hinting faults {}, numa_maps {} \
         (why: plan --json)",
        yes(s.hardware_counters.available),
        yes(s.resctrl.available),
        yes(s.numa_hinting_faults.available),
        yes(s.numa_maps.available),
    )
}

/// The plan as a table; `source` says where a process's NUMA penalty came from (and,
/// for a `measured` one, what the measurement found).
fn print_plan(
    snapshot: &Snapshot,
    plan: &crate::model::Plan,
    source: &dyn Fn(&Process) -> (PenaltySource, Option<String>),
) {
    let n = plan.placements.len();
    println!(
        "policy {} on {n} process{}",
        plan.policy,
        if n == 1 { "" } else { "es" }
    );
    println!(
        "{:>8}  {:<16} {:>5} {:>5} {:<10}  {:<11} {:<11} nodes",
        "pid", "program", "cpus", "np", "source", "ran on", "planned"
    );
    for p in &snapshot.processes {
        let Some(pl) = plan.placement(p.pid) else {
            continue;
        };
        let list = |v: &[u32]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                cpulist::format(v)
            }
        };
        let np = p
            .numa_penalty
            .map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
        let planned = if pl.cpus.is_empty() {
            "(as now)".to_string()
        } else {
            list(&pl.cpus)
        };
        println!(
            "{:>8}  {:<16} {:>5.2} {:>5} {:<10}  {:<11} {:<11} {}",
            pl.pid,
            // A saved snapshot's names are anyone's text: escapes are shown, not sent.
            clip(&printable(&p.program), 16),
            p.cpu_demand,
            np,
            source(p).0.name(),
            clip(&list(&p.current_cpus), 11),
            clip(&planned, 11),
            list(&pl.nodes)
        );
        for line in wrap(&printable(&pl.reason), WIDTH - 10) {
            println!("          {line}");
        }
        if let Some(b) = source(p).1 {
            println!("          np {b}");
        }
        // Said apart from the reason, which may not mention it: a process someone
        // else pinned is planned inside that pin and never widened past it.
        if let Some(pin) = &p.allowed_cpus {
            println!("          pinned by someone else to {pin}: planned inside it");
        }
    }
    println!(
        "cpus: CPUs' worth it needs (busy, and waiting for a CPU; seconds old: all its \
         threads,\n      until measured); np: NUMA penalty (run time remote/local); ran on: \
         last CPUs"
    );
    println!("{}", PenaltySource::LEGEND);
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
}

/// `s` cut to `n` characters, the last one `~` when cut.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
    out.push('~');
    out
}

/// Words of `text` in lines of at most `width` characters (a longer word stands alone).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}
