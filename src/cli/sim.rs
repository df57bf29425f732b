//! `numasched sim`: one scenario on the performance model — a machine, programs, where
//! their memory lives and where they run (given, or chosen by a policy) — and what each
//! program's speed would be.

use crate::model::CpuSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;

use crate::model::{Placement, Plan, Snapshot};
use crate::policy::alloc::{self, Occupancy};
use crate::policy::{linux::Linux, Policy};
use crate::sim::eval::runner::{effective, with_current, Runner, ORACLE, ROTATION};
use crate::sim::eval::{from_model, measured::TimeModel, suites, workloads};
use crate::sim::{self, ProfileSet};
use crate::topology::{cpulist, CpuId, NodeId, Topology};
use numasched_model::plural::count;

use super::progress::Progress;

#[derive(Debug, Args)]
pub struct SimArgs {
    /// Machine: a preset (nehalem-e5520, xeon-e5345, ...), a spec like 2n:1l:4c:1t, or
    /// `this` (this machine, read from sysfs).
    #[arg(long, value_name = "M")]
    pub machine: String,
    /// Where `--machine this` is read from [default: /sys].
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,
    /// Programs, comma-separated (built-in profiles or --profiles).
    #[arg(long, value_delimiter = ',', required = true, value_name = "A,B,..")]
    pub programs: Vec<String>,
    /// Node id holding each program's memory, in program order.
    #[arg(long, value_delimiter = ',', required = true, value_name = "N,N,..",
          allow_hyphen_values = true, value_parser = super::node_id())]
    pub homes: Vec<NodeId>,
    /// A node per program; the simulator picks idle cores in it.
    #[arg(long, value_delimiter = ',', value_name = "N,N,..", group = "where",
          allow_hyphen_values = true, value_parser = super::node_id())]
    pub placement: Option<Vec<NodeId>>,
    /// An exact CPU per program.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "C,C,..",
        group = "where",
        allow_hyphen_values = true,
        value_parser = crate::flags::cpu_id
    )]
    pub cores: Option<Vec<CpuId>>,
    /// Let a placement policy decide.
    #[arg(long, value_name = "P", group = "where")]
    pub policy: Option<String>,
    /// Granularity the policy's plan is applied at, as the daemon's --pin (llc, node,
    /// core, cpu) [default: llc].
    #[arg(long, value_name = "UNIT", value_parser = crate::daemon::config::parse_pin)]
    pub pin: Option<crate::policy::Pin>,
    /// Extra program profiles (TOML or JSON).
    #[arg(long, value_name = "FILE")]
    pub profiles: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct Report {
    machine: String,
    policy: Option<String>,
    processes: Vec<ProcReport>,
    avg_slowdown: f64,
    performance: f64,
    unfairness: f64,
    /// Every shared resource some traffic crosses (idle ones are left out), with its
    /// utilisation, so bus and link figures can be checked: nodes and packages by id,
    /// LLCs by their place in the topology (`topo` lists them so).
    resources: Vec<sim::ResourceLoad>,
}

#[derive(Debug, Serialize)]
struct ProcReport {
    program: String,
    home: NodeId,
    node: NodeId,
    /// Where the model's load balancer settled its (first) thread inside `cpus`.
    cpu: CpuId,
    /// The CPU set it is given, as applied (`--pin` granularity).
    cpus: CpuSet,
    /// Effective MPKI with the cache share it gets.
    mpki: f64,
    slowdown: f64,
    speed: f64,
    ipc: f64,
    local_fraction: f64,
    /// DRAM traffic it causes, fills and writebacks, GB/s.
    bandwidth_gbps: f64,
    /// Mean miss latency with queueing, ns.
    latency_ns: f64,
    reason: String,
}

pub fn run(args: SimArgs) -> anyhow::Result<()> {
    let topo = super::topo::machine(&args.machine, args.sysfs_root.as_deref())?;
    let profiles = load_profiles(args.profiles.as_ref())?;
    let params = sim::params_for(&topo);
    let homes = checked_homes(&args, &topo, &profiles)?;
    let map = workloads::map_label(&args.homes);
    let programs: Vec<&str> = args.programs.iter().map(String::as_str).collect();
    let case = suites::case_at("sim", "sim", &map, &topo, &programs, &homes, &|t, p| {
        from_model::facts(t, &params, &profiles, p)
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let snapshot = case.snapshot;
    let plan = if let Some(nodes) = &args.placement {
        on_nodes(&snapshot, nodes)?
    } else if let Some(cores) = &args.cores {
        on_cores(&snapshot, cores)?
    } else if let Some(name) = &args.policy {
        by_policy(
            &snapshot,
            name,
            &params,
            &profiles,
            args.pin.unwrap_or_default(),
        )?
    } else {
        bail!("say where the programs run: --placement, --cores or --policy");
    };
    let procs = sim::from_snapshot(&snapshot, &plan, &profiles)?;
    let out = sim::simulate(&topo, &params, &procs);
    let report = Report {
        machine: args.machine.clone(),
        policy: args.policy.clone(),
        processes: snapshot
            .processes
            .iter()
            .zip(&out.processes)
            .zip(&procs)
            .map(|((p, o), sp)| {
                let as_now = Placement::unchanged(p.pid, String::new());
                let pl = plan.placement(p.pid).unwrap_or(&as_now);
                let cpu = sp.cpus.first().map_or_else(
                    || pl.cpus.first().copied().unwrap_or_default(),
                    |&i| topo.cpus()[i].id,
                );
                ProcReport {
                    program: p.program.clone(),
                    home: p.home_node().unwrap_or_default(),
                    node: pl.nodes.first().copied().unwrap_or_default(),
                    cpu,
                    cpus: pl.cpus.clone(),
                    mpki: o.effective_mpki,
                    slowdown: o.slowdown,
                    speed: o.speed,
                    ipc: o.ipc,
                    local_fraction: o.local_fraction,
                    bandwidth_gbps: o.bandwidth_gbps,
                    latency_ns: o.latency_ns,
                    reason: pl.reason.clone(),
                }
            })
            .collect(),
        avg_slowdown: out.avg_slowdown,
        performance: out.performance,
        unfairness: out.unfairness,
        resources: out.resources.clone(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{:<12} {:>4} {:>4} {:>4} {:>7} {:>8} {:>6} {:>6} {:>6} {:>6}",
        "program", "home", "node", "cpu", "mpki", "slowdown", "ipc", "local", "GB/s", "lat ns"
    );
    for p in &report.processes {
        println!(
            "{:<12} {:>4} {:>4} {:>4} {:>7.2} {:>7.1}% {:>6.3} {:>5.0}% {:>6.2} {:>6.0}",
            p.program,
            p.home,
            p.node,
            p.cpu,
            p.mpki,
            100.0 * p.slowdown,
            p.ipc,
            100.0 * p.local_fraction,
            p.bandwidth_gbps,
            p.latency_ns
        );
    }
    for r in &report.resources {
        println!(
            "{}: {:.2} GB/s, utilisation {:.2}, +{:.1} ns a miss",
            resource_name(&r.kind),
            r.gbps,
            r.utilisation,
            r.delay_ns
        );
    }
    println!(
        "average slowdown {:.1}%, performance {:.3}, unfairness {:.3}",
        100.0 * report.avg_slowdown,
        report.performance,
        report.unfairness
    );
    Ok(())
}

fn resource_name(k: &sim::ResourceKind) -> String {
    use sim::ResourceKind as K;
    match *k {
        K::MemoryController { node } => format!("memory controller of node {node}"),
        K::PackageLink { from, to } => format!("link {from} -> {to}"),
        K::NodeLink { from, to } => format!("link node {from} -> {to}"),
        K::LlcPort { llc } => format!("port of LLC {llc}"),
        K::PackageBus { package } => format!("bus of package {package}"),
        K::BusController { llc } => format!("bus controller of LLC {llc}"),
    }
}

/// Built-in profiles, overridden and extended by a file.
pub fn load_profiles(path: Option<&PathBuf>) -> anyhow::Result<ProfileSet> {
    let builtin = ProfileSet::builtin();
    Ok(match path {
        Some(p) => builtin.merge(ProfileSet::load(p)?),
        None => builtin,
    })
}

/// The flags checked against each other and the machine before anything is simulated;
/// each program's home as a node index.
fn checked_homes(
    args: &SimArgs,
    topo: &Topology,
    profiles: &ProfileSet,
) -> anyhow::Result<Vec<usize>> {
    if args.programs.len() > workloads::MAX_PROGRAMS {
        bail!(
            "--programs: {} programs, more than the {} a scenario may have (as a workload \
             of `eval --workloads`)",
            args.programs.len(),
            workloads::MAX_PROGRAMS
        );
    }
    if args.homes.len() != args.programs.len() {
        bail!(
            "--homes names {} for {}",
            count(args.homes.len(), "node"),
            count(args.programs.len(), "program")
        );
    }
    if args.pin.is_some() && args.policy.is_none() {
        bail!("--pin applies to a policy's plan (--policy); --placement and --cores say the CPUs");
    }
    if let Some(p) = args.programs.iter().find(|p| profiles.get(p).is_none()) {
        let known: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
        bail!(
            "--programs: unknown program '{p}' (known: {}; --profiles adds others)",
            known.join(", ")
        );
    }
    args.homes
        .iter()
        .map(|&h| node_index(topo, h, "--homes"))
        .collect()
}

fn node_index(topo: &Topology, id: NodeId, flag: &str) -> anyhow::Result<usize> {
    topo.node_index(id).with_context(|| {
        let ids: Vec<u32> = topo.nodes().iter().map(|n| n.id).collect();
        format!(
            "{flag}: node {id} does not exist (nodes {})",
            cpulist::format(&ids)
        )
    })
}

fn on_nodes(s: &Snapshot, nodes: &[NodeId]) -> anyhow::Result<Plan> {
    let topo = &s.topology;
    if nodes.len() != s.processes.len() {
        bail!(
            "--placement names {} for {}",
            count(nodes.len(), "node"),
            count(s.processes.len(), "program")
        );
    }
    let mut occ = Occupancy::new(topo);
    let mut placements = Vec::new();
    for (p, &n) in s.processes.iter().zip(nodes) {
        let ni = node_index(topo, n, "--placement")?;
        let cands = topo.node_cpu_indices(ni).to_vec();
        if cands.is_empty() {
            bail!("--placement: node {n} has no CPUs");
        }
        let cpus = occ.pick(&cands, 1);
        occ.add(&cpus, 1.0);
        placements.push(Placement::new(
            topo,
            p.pid,
            alloc::ids(topo, &cpus),
            format!("placed on node {n} by --placement"),
        ));
    }
    Ok(Plan::new("given", placements))
}

fn on_cores(s: &Snapshot, cores: &[CpuId]) -> anyhow::Result<Plan> {
    let topo = &s.topology;
    if cores.len() != s.processes.len() {
        bail!(
            "--cores names {} for {}",
            count(cores.len(), "CPU"),
            count(s.processes.len(), "program")
        );
    }
    let mut placements = Vec::new();
    for (p, &c) in s.processes.iter().zip(cores) {
        if topo.cpu(c).is_none() {
            let ids: Vec<u32> = topo.cpus().iter().map(|c| c.id).collect();
            bail!(
                "--cores: CPU {c} does not exist (CPUs {})",
                cpulist::format(&ids)
            );
        }
        placements.push(Placement::new(
            topo,
            p.pid,
            vec![c],
            format!("pinned to CPU {c} by --cores"),
        ));
    }
    Ok(Plan::new("given", placements))
}

/// A policy's plan, started — for policies that only adjust — from the placement the
/// kernel's load balancer would have made, and as it would be applied.
fn by_policy(
    s: &Snapshot,
    name: &str,
    params: &sim::MachineParams,
    profiles: &ProfileSet,
    pin: crate::policy::Pin,
) -> anyhow::Result<Plan> {
    if name == ROTATION {
        bail!(
            "--policy {ROTATION}: a schedule over time slices, not one placement, so `sim` \
             cannot show it; `numasched eval --suite membus` scores it"
        );
    }
    // The oracle's search evaluates the model up to 20,000 times (64 programs on two
    // nodes took 14 s on a 2-core VM): past 2 s, a line says how far it is.
    let model = from_model::time_model(params.clone(), profiles.clone(), None);
    let progress = Mutex::new((Progress::start(), 0u64));
    let counted: Arc<TimeModel> = Arc::new(move |s: &Snapshot, p: &Plan| {
        if let Ok(mut g) = progress.lock() {
            g.1 += 1;
            let n = g.1;
            g.0.report(|| format!("sim: {n} placements evaluated"));
        }
        model(s, p)
    });
    let mut runner = Runner::new(counted);
    runner.pin = pin;
    // `sim` shows the oracle's placement too, so the list of what it knows says so.
    let pol = runner.policy(name).map_err(|e| {
        anyhow::anyhow!(
            "unknown policy '{}' (known: {}, {ORACLE})",
            e.0,
            crate::policy::NAMES.join(", ")
        )
    })?;
    let snap = if pol.uses_current_placement() {
        with_current(s, &Linux.plan(s))
    } else {
        s.clone()
    };
    Ok(effective(&snap, &pol.plan(&snap)))
}
