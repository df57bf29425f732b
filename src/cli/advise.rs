//! `numasched advise --cpus N [--mem SIZE] [--json]`: which nodes a new job of that size
//! should go to now, like `numad -w`, decided by numasched's own policy.
//!
//! The machine is observed once, as `plan` does (one dry pass, nothing written), then a
//! hypothetical process — pid [`ADVISE_PID`], program `advise`, N threads keeping N
//! CPUs busy, no memory placed yet — is added to that snapshot and the policy plans.
//! The processes already there are held on the CPUs they run on (pinned to them for
//! this question), so the answer is where the job fits without moving anything else.
//! Nodes without `--mem` free (sysfs MemTotal − MemUsed) are refused: the job is
//! pinned to the others. The decision itself, [`advise`], is a pure function of the
//! snapshot, the policy and the free memory.

use crate::model::CpuSet;
use std::collections::BTreeMap;

use anyhow::Context;
use clap::Args;
use serde::Serialize;

use super::manage::SelectArgs;
use crate::daemon::assemble::{self, Use};
use crate::daemon::config::parse_policy;
use crate::daemon::{logging, nodes};
use crate::model::{Process, Snapshot};
use crate::policy::granularity::{self, Pin};
use crate::policy::Policy;
use crate::topology::NodeId;

/// The hypothetical job's pid: no real process has it (pids stay below 2^22).
pub const ADVISE_PID: u32 = u32::MAX;

#[derive(Debug, Args)]
pub struct AdviseArgs {
    /// CPUs the new job will keep busy (its threads).
    #[arg(long, allow_hyphen_values = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub cpus: u32,
    /// Memory the job needs, e.g. 4G: nodes with less free are refused.
    #[arg(long, allow_hyphen_values = true, value_name = "SIZE", value_parser = crate::model::size::parse_size)]
    pub mem: Option<u64>,
    /// Placement policy [default: the configured one, auto].
    #[arg(long, value_name = "P", value_parser = parse_policy)]
    pub policy: Option<crate::policy::PolicyKind>,
    /// Print the advice as JSON, with per-node detail.
    #[arg(long)]
    pub json: bool,
    /// Which running processes count as load (as for `plan`).
    #[command(flatten)]
    pub select: SelectArgs,
}

/// What a new job asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub cpus: u32,
    pub mem: Option<u64>,
    /// What the job would be given of the CPUs the policy picks, as the daemon gives
    /// it (`--pin`): under `llc` the whole cache, not the one CPU picked in it.
    pub pin: Pin,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeAdvice {
    pub node: NodeId,
    pub cpus: CpuSet,
    /// CPUs of this node the job was given (empty if none).
    pub given_cpus: CpuSet,
    /// CPUs' worth of demand of the observed processes running here now.
    pub load: f64,
    pub memory_total_bytes: u64,
    /// Free memory now (MemTotal − MemUsed), if sysfs says.
    pub memory_free_bytes: Option<u64>,
    /// Whether the job may go here (enough free memory, has CPUs).
    pub eligible: bool,
    /// Why not, when not eligible.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    pub policy: String,
    pub cpus_requested: u32,
    pub mem_bytes: Option<u64>,
    /// Where to put the job, best first; empty if nowhere fits.
    pub nodes: Vec<NodeId>,
    /// The CPUs the policy gave it.
    pub cpus: CpuSet,
    pub reason: String,
    pub per_node: Vec<NodeAdvice>,
}

/// GiB with one decimal, TiB from 1024 GiB up: `--mem 100T` reads back as `100.0T`.
fn gib(b: u64) -> String {
    let g = b as f64 / (1u64 << 30) as f64;
    if g >= 1024.0 {
        format!("{:.1}T", g / 1024.0)
    } else {
        format!("{g:.1}G")
    }
}

/// The advice for `req` on `snapshot`'s machine, with `free` memory per node (`None`:
/// unknown, not checked). Pure: no I/O.
pub fn advise(
    snapshot: &Snapshot,
    policy: &dyn Policy,
    req: Request,
    free: &BTreeMap<NodeId, Option<u64>>,
) -> Advice {
    let topo = &snapshot.topology;
    let mut load = vec![0.0; topo.nodes().len()];
    for p in &snapshot.processes {
        let on: Vec<usize> = p
            .current_cpus
            .iter()
            .filter_map(|c| topo.cpu(*c).map(|cpu| cpu.node))
            .collect();
        for &i in &on {
            load[i] += p.cpu_demand / on.len() as f64;
        }
    }
    let mut per_node: Vec<NodeAdvice> = topo
        .nodes()
        .iter()
        .zip(&load)
        .map(|(n, &load)| {
            let memory_free_bytes = free.get(&n.id).copied().flatten();
            let refused = if n.cpus.is_empty() {
                Some("no CPUs (memory-only node)".to_string())
            } else {
                match (req.mem, memory_free_bytes) {
                    (Some(want), Some(have)) if have < want => {
                        Some(format!("{} free, the job needs {}", gib(have), gib(want)))
                    }
                    _ => None,
                }
            };
            NodeAdvice {
                node: n.id,
                cpus: n.cpus.clone(),
                given_cpus: CpuSet::new(),
                load,
                memory_total_bytes: n.memory_bytes,
                memory_free_bytes,
                eligible: refused.is_none(),
                refused,
            }
        })
        .collect();
    let mut advice = Advice {
        policy: policy.name().to_string(),
        cpus_requested: req.cpus,
        mem_bytes: req.mem,
        nodes: Vec::new(),
        cpus: CpuSet::new(),
        reason: String::new(),
        per_node: Vec::new(),
    };
    let allowed: CpuSet = per_node
        .iter()
        .filter(|n| n.eligible)
        .flat_map(|n| n.cpus.iter().copied())
        .collect();
    if allowed.is_empty() {
        advice.reason = match req.mem {
            Some(m) => format!("no node has {} free", gib(m)),
            None => "no node has CPUs".into(),
        };
        advice.per_node = per_node;
        return advice;
    }

    // Everything already running stays where it is; the job may use the eligible
    // nodes only.
    let mut snap = snapshot.clone();
    for p in &mut snap.processes {
        if !p.current_cpus.is_empty() {
            p.allowed_cpus = Some(p.current_cpus.clone());
        }
    }
    let mut job = Process::new(ADVISE_PID, "advise");
    job.threads = req.cpus;
    job.cpu_demand = f64::from(req.cpus);
    if allowed.len() < topo.num_cpus() {
        job.allowed_cpus = Some(allowed.clone());
    }
    snap.processes.push(job.clone());
    let plan = policy.plan(&snap);
    let placement = plan.placements.iter().find(|pl| pl.pid == ADVISE_PID);
    let given: CpuSet = placement
        .map(|pl| granularity::widen(topo, &job, pl, req.pin).cpus)
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| allowed.clone());
    for n in &mut per_node {
        n.given_cpus = n.cpus.intersection(&given);
    }
    let mut ranked: Vec<&NodeAdvice> = per_node
        .iter()
        .filter(|n| n.eligible && !n.given_cpus.is_empty())
        .collect();
    // Most of the job first; then the idler node, then the one with more memory free.
    ranked.sort_by(|a, b| {
        b.given_cpus
            .len()
            .cmp(&a.given_cpus.len())
            .then(a.load.total_cmp(&b.load))
            .then(b.memory_free_bytes.cmp(&a.memory_free_bytes))
            .then(a.node.cmp(&b.node))
    });
    advice.nodes = ranked.iter().map(|n| n.node).collect();
    advice.cpus = given;
    let mut reason = placement.map(|pl| pl.reason.clone()).unwrap_or_default();
    if reason.is_empty() {
        reason = "the policy left the job unplaced: any eligible node".into();
    }
    let refused: Vec<String> = per_node
        .iter()
        .filter_map(|n| n.refused.as_ref().map(|r| format!("node {}: {r}", n.node)))
        .collect();
    if !refused.is_empty() {
        reason = format!("{reason}; refused {}", refused.join(", "));
    }
    // A job wider than every CPU it may use would time-share them: say so rather than
    // answer as if it fitted.
    if req.cpus as usize > allowed.len() {
        reason = format!(
            "{reason}; the job's {} CPUs are more than the {} it may use here, so its \
             threads would share them",
            req.cpus,
            allowed.len()
        );
    }
    advice.reason = reason;
    advice.per_node = per_node;
    advice
}

/// Returns 0 with advice, 1 when no node fits the job.
pub fn run(args: AdviseArgs) -> anyhow::Result<i32> {
    let mut opts = args.select.options()?;
    if let Some(p) = &args.policy {
        opts.policy = *p;
    }
    opts.dry_run = true;
    logging::init(opts.log_format, "warn");
    let mut built = assemble::assemble(&opts, &args.select.roots(), None, Use::PlanOnly)?;
    let (snapshot, _) = built.observe_once()?;
    let free: BTreeMap<NodeId, Option<u64>> = snapshot
        .topology
        .nodes()
        .iter()
        .map(|n| {
            let used = nodes::memory_used(&built.sys_root, n.id);
            (n.id, used.map(|u| n.memory_bytes.saturating_sub(u)))
        })
        .collect();
    let policy = built.policy.build();
    let advice = advise(
        &snapshot,
        policy.as_ref(),
        Request {
            cpus: args.cpus,
            mem: args.mem,
            pin: opts.pin,
        },
        &free,
    );
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&advice).context("encoding the advice")?
        );
    } else {
        print!("{}", render(&advice));
    }
    Ok(if advice.nodes.is_empty() { 1 } else { 0 })
}

/// The text form: `nodes: 1,0` first (best first, as `numad -w` prints a node list),
/// then why and the per-node picture.
pub fn render(a: &Advice) -> String {
    use std::fmt::Write as _;
    let list = |v: &[u32]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        }
    };
    let mut s = String::new();
    let _ = writeln!(s, "nodes: {}", list(&a.nodes));
    if !a.cpus.is_empty() {
        let _ = writeln!(s, "cpus: {}", a.cpus);
    }
    let _ = writeln!(s, "policy {}: {}", a.policy, a.reason);
    let _ = writeln!(
        s,
        "{:>4}  {:<10} {:>6} {:>8} {:>8}  note",
        "node", "cpus", "load", "free", "total"
    );
    for n in &a.per_node {
        let note = match (&n.refused, n.given_cpus.is_empty()) {
            (Some(r), _) => format!("refused: {r}"),
            (None, false) => format!("given {}", n.given_cpus),
            (None, true) => String::new(),
        };
        let _ = writeln!(
            s,
            "{:>4}  {:<10} {:>6.2} {:>8} {:>8}  {}",
            n.node,
            if n.cpus.is_empty() {
                "-".into()
            } else {
                n.cpus.to_string()
            },
            n.load,
            n.memory_free_bytes.map_or("-".into(), gib),
            gib(n.memory_total_bytes),
            note
        );
    }
    let _ = writeln!(
        s,
        "load: CPUs' worth its processes need (busy, and waiting for a CPU; one seconds old\n      \
         counts all its threads until measured), so it can exceed its CPUs"
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `2n:1l:4c:1t` with node 0 (CPUs 0-3) fully busy.
    fn busy_node0() -> Snapshot {
        let topology = crate::topology::spec::parse("2n:1l:4c:1t").expect("spec");
        let processes = (0..4)
            .map(|i| {
                let mut p = Process::new(100 + i, "busy");
                p.current_cpus = vec![i].into();
                p.memory_bytes = BTreeMap::from([(0, 1 << 30)]);
                p.mpki = Some(5.0);
                p.numa_penalty = Some(1.3);
                p
            })
            .collect();
        Snapshot {
            topology,
            processes,
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        }
    }

    fn free_gib(n0: u64, n1: u64) -> BTreeMap<NodeId, Option<u64>> {
        BTreeMap::from([(0, Some(n0 << 30)), (1, Some(n1 << 30))])
    }

    #[test]
    fn a_new_job_goes_to_the_idle_node() {
        let s = busy_node0();
        let auto = crate::policy::PolicyKind::Auto.build();
        let a = advise(
            &s,
            auto.as_ref(),
            Request {
                cpus: 1,
                mem: None,
                pin: Pin::Cpu,
            },
            &free_gib(8, 8),
        );
        assert_eq!(a.nodes, vec![1], "{a:#?}");
        assert_eq!(a.cpus.len(), 1);
        assert!(a.cpus[0] >= 4, "{a:#?}");
        assert!((a.per_node[0].load - 4.0).abs() < 1e-9);
        assert!(a.per_node.iter().all(|n| n.eligible));
        assert!(render(&a).starts_with("nodes: 1\n"), "{}", render(&a));
        // As the daemon would give it: under `--pin llc` every CPU of that cache
        // (`advise --cpus 1` said `cpus: 0` on a machine that pins whole LLCs).
        let llc = advise(
            &s,
            auto.as_ref(),
            Request {
                cpus: 1,
                mem: None,
                pin: Pin::Llc,
            },
            &free_gib(8, 8),
        );
        assert_eq!(llc.nodes, vec![1]);
        let cache = s.topology.cpu(a.cpus[0]).expect("cpu").llc;
        assert_eq!(llc.cpus, s.topology.llcs()[cache].cpus, "{llc:#?}");
    }

    #[test]
    fn a_node_without_the_memory_is_refused() {
        let s = busy_node0();
        let auto = crate::policy::PolicyKind::Auto.build();
        let a = advise(
            &s,
            auto.as_ref(),
            Request {
                cpus: 1,
                mem: Some(4 << 30),
                pin: Pin::Cpu,
            },
            &free_gib(8, 2),
        );
        assert_eq!(a.nodes, vec![0], "{a:#?}");
        assert!(!a.per_node[1].eligible);
        assert!(a.per_node[1]
            .refused
            .as_deref()
            .is_some_and(|r| r.contains("2.0G free")));
        assert!(a.cpus.iter().all(|c| *c < 4), "{a:#?}");
        assert!(a.reason.contains("refused node 1"), "{}", a.reason);

        let none = advise(
            &s,
            auto.as_ref(),
            Request {
                cpus: 1,
                mem: Some(16 << 30),
                pin: Pin::Cpu,
            },
            &free_gib(8, 2),
        );
        assert!(none.nodes.is_empty());
        assert!(
            none.reason.contains("no node has 16.0G free"),
            "{}",
            none.reason
        );
    }

    #[test]
    fn a_big_job_spans_nodes_most_of_it_first() {
        let mut s = busy_node0();
        s.processes.truncate(1);
        let auto = crate::policy::PolicyKind::Auto.build();
        let a = advise(
            &s,
            auto.as_ref(),
            Request {
                cpus: 6,
                mem: None,
                pin: Pin::Cpu,
            },
            &free_gib(8, 8),
        );
        assert_eq!(a.cpus.len(), 6, "{a:#?}");
        assert_eq!(a.nodes.len(), 2, "{a:#?}");
        let first = &a.per_node[a.nodes[0] as usize];
        let second = &a.per_node[a.nodes[1] as usize];
        assert!(first.given_cpus.len() >= second.given_cpus.len());
        assert!(!a.cpus.contains(0), "CPU 0 is held by the running process");
        assert!(!a.reason.contains("more than"), "{}", a.reason);
    }

    /// A job wider than the machine still gets an answer (everything it may use), and
    /// the reason says it does not fit, rather than answering as if it did.
    #[test]
    fn a_job_wider_than_the_machine_is_told_so() {
        let mut s = busy_node0();
        s.processes.clear();
        let auto = crate::policy::PolicyKind::Auto.build();
        let a = advise(
            &s,
            auto.as_ref(),
            Request {
                cpus: 1_000_000,
                mem: Some(4 << 30),
                pin: Pin::Cpu,
            },
            &free_gib(8, 2),
        );
        assert_eq!(a.nodes, vec![0], "{a:#?}");
        assert!(
            a.reason
                .contains("the job's 1000000 CPUs are more than the 4 it may use here"),
            "{}",
            a.reason
        );
    }

    #[test]
    fn sizes_of_a_tebibyte_and_more_read_in_t() {
        assert_eq!(gib(100 << 40), "100.0T");
        assert_eq!(gib(1023 << 30), "1023.0G");
        assert_eq!(gib(3 << 29), "1.5G");
    }
}
