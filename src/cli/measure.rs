//! `numasched profile measure -- CMD ARGS…`: finds out how much a program suffers when
//! its memory is remote, on a machine with no hardware counters, by running it. Runs
//! alternate between memory bound to the CPUs' own node and memory bound to a remote
//! node, the CPUs the same (see `characterise::bench` for how the child is placed and
//! `model::character::measured` for the arithmetic); the result goes to the profile
//! store, where the daemon and `plan` find it by the program's name.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;

use crate::characterise::bench::{self, Placement};
use crate::characterise::store::{Measurement, Store};
use crate::model::character::measured::{MeasuredPenalty, MIN_RUN_S};
use crate::observe::counters::{mpki, CounterSample};
use crate::topology::{sysfs, NodeId, Topology};

#[derive(Debug, Args)]
pub struct MeasureArgs {
    /// Runs of each kind (local, remote; and pressured with --llc-pressure).
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(2..=100))]
    pub runs: u32,
    /// The node whose CPUs it runs on, and whose memory is local [default: the first
    /// node with CPUs and memory].
    #[arg(long, allow_hyphen_values = true, value_name = "NODE", value_parser = crate::flags::node_id())]
    pub local: Option<NodeId>,
    /// The node its memory is bound to in the remote runs [default: the nearest other
    /// node with memory].
    #[arg(long, allow_hyphen_values = true, value_name = "NODE", value_parser = crate::flags::node_id())]
    pub remote: Option<NodeId>,
    /// The name to record it under, as the daemon knows processes (/proc/PID/comm)
    /// [default: the command's file name, cut to the kernel's 15 bytes].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Also run it beside a memory stream on one CPU of its LLC (memory local), for
    /// its sensitivity to a neighbour that thrashes the cache; that CPU is then left
    /// out of every run.
    #[arg(long)]
    pub llc_pressure: bool,
    /// Print the result as JSON, with every run's time and where its memory was.
    #[arg(long)]
    pub json: bool,
    /// The sysfs root to read the machine from.
    #[arg(long, value_name = "DIR", default_value = "/sys", hide = true)]
    pub sysfs_root: PathBuf,
    /// The command and its arguments (its output is discarded; its stderr is shown if
    /// it fails).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

/// Which runs a session makes, where.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    pub local: NodeId,
    pub remote: NodeId,
    pub cpus: Vec<u32>,
    /// The co-runner's CPU, with --llc-pressure.
    pub pressure_cpu: Option<u32>,
}

/// Picks and checks the nodes: every refusal is one line that says why.
pub fn setup(
    topo: &Topology,
    local: Option<NodeId>,
    remote: Option<NodeId>,
    llc_pressure: bool,
) -> Result<Setup, String> {
    let with_memory: Vec<NodeId> = topo
        .nodes()
        .iter()
        .filter(|n| n.memory_bytes > 0)
        .map(|n| n.id)
        .collect();
    if with_memory.len() < 2 {
        return Err(format!(
            "this machine has {} node with memory ({}): no memory is remote from any CPU, \
             so there is no NUMA penalty to measure",
            with_memory.len(),
            with_memory
                .first()
                .map_or("none".into(), |n| format!("node {n}"))
        ));
    }
    let node = |id: NodeId, flag: &str| {
        topo.node_index(id)
            .map(|i| &topo.nodes()[i])
            .ok_or_else(|| {
                let have: Vec<String> = topo.nodes().iter().map(|n| n.id.to_string()).collect();
                format!(
                    "{flag} {id}: no such node (this machine has nodes {})",
                    have.join(", ")
                )
            })
    };
    let local = match local {
        Some(id) => {
            let n = node(id, "--local")?;
            if n.cpus.is_empty() {
                return Err(format!("--local {id}: node {id} has no CPUs to run on"));
            }
            if n.memory_bytes == 0 {
                return Err(format!("--local {id}: node {id} has no memory to be local"));
            }
            id
        }
        None => topo
            .nodes()
            .iter()
            .find(|n| !n.cpus.is_empty() && n.memory_bytes > 0)
            .map(|n| n.id)
            .ok_or("no node has both CPUs and memory: nothing can run with local memory")?,
    };
    let li = topo.node_index(local).unwrap_or(0);
    let remote = match remote {
        Some(id) => {
            let n = node(id, "--remote")?;
            if id == local {
                return Err(format!(
                    "--remote {id}: the same node as --local; remote memory must be elsewhere"
                ));
            }
            if n.memory_bytes == 0 {
                return Err(format!("--remote {id}: node {id} has no memory"));
            }
            id
        }
        None => topo
            .nodes_by_distance(li)
            .into_iter()
            .map(|i| &topo.nodes()[i])
            .find(|n| n.id != local && n.memory_bytes > 0)
            .map(|n| n.id)
            .ok_or("no other node has memory")?,
    };
    let mut cpus = topo.nodes()[li].cpus.as_slice().to_vec();
    let pressure_cpu = if llc_pressure {
        // The co-runner shares the LLC of the node's first CPU.
        let first = topo.cpu(cpus[0]).map(|c| c.llc).unwrap_or(0);
        let llc = &topo.llcs()[first].cpus;
        if llc.len() < 2 {
            return Err(format!(
                "--llc-pressure: node {local}'s LLC has one CPU, none to spare for the \
                 co-runner"
            ));
        }
        let last = *llc.as_slice().last().unwrap_or(&cpus[0]);
        cpus.retain(|&c| c != last);
        Some(last)
    } else {
        None
    };
    Ok(Setup {
        local,
        remote,
        cpus,
        pressure_cpu,
    })
}

/// The name a process of `argv[0]` has in /proc/PID/comm: its file name, cut to the
/// kernel's 15 bytes.
pub fn comm_of(program: &str) -> String {
    let base = Path::new(program)
        .file_name()
        .map_or(program.into(), |f| f.to_string_lossy().into_owned());
    let mut cut = base.len().min(15);
    while !base.is_char_boundary(cut) {
        cut -= 1;
    }
    base[..cut].to_string()
}

#[derive(Debug, Serialize)]
struct RunRecord {
    kind: &'static str,
    seconds: f64,
    memory_node: NodeId,
    /// Its resident bytes per node at the last look while it ran.
    node_bytes: std::collections::BTreeMap<NodeId, u64>,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    program: &'a str,
    db: &'a Path,
    cpus: &'a [u32],
    #[serde(flatten)]
    measurement: &'a Measurement,
    runs: &'a [RunRecord],
}

/// Runs a session and records it in the store at `db`; `now` (Unix seconds) dates it.
pub fn run(args: MeasureArgs, db: &Path, now: i64) -> anyhow::Result<()> {
    let topo = sysfs::read(&args.sysfs_root)
        .with_context(|| format!("{}: reading the machine", args.sysfs_root.display()))?;
    let setup =
        setup(&topo, args.local, args.remote, args.llc_pressure).map_err(anyhow::Error::msg)?;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| comm_of(&args.command[0]));
    if name.trim().is_empty() {
        bail!("--name: must not be empty");
    }
    // Opened first: a store that cannot be written is said before minutes of runs.
    let mut store = Store::open(db)?;
    let cmdline = args.command.join(" ");
    let place = |node: NodeId| Placement {
        cpus: setup.cpus.clone(),
        memory_node: node,
    };
    let mut records: Vec<RunRecord> = Vec::new();
    let (mut local, mut remote, mut pressured) = (Vec::new(), Vec::new(), Vec::new());
    let mut local_counts = Vec::new();
    let mut kinds = vec![("local", setup.local), ("remote", setup.remote)];
    if setup.pressure_cpu.is_some() {
        kinds.push(("pressured", setup.local));
    }
    for round in 1..=args.runs {
        for &(kind, node) in &kinds {
            let co = match (kind, setup.pressure_cpu) {
                ("pressured", Some(cpu)) => Some(co_runner(cpu, setup.local)?),
                _ => None,
            };
            let r = bench::run(&args.command, &place(node), Path::new("/proc"));
            if let Some(mut c) = co {
                let _ = c.kill();
                let _ = c.wait();
            }
            let r = r.map_err(|e| {
                anyhow::anyhow!(
                    "{}: could not start it on CPUs {} with memory on node {node}: {e}",
                    args.command[0],
                    crate::topology::cpulist::format(&setup.cpus)
                )
            })?;
            if !r.status.success() {
                return Err(failed(&cmdline, kind, round, &r));
            }
            if kind == "local" && round == 1 && r.seconds < MIN_RUN_S {
                bail!(
                    "{cmdline}: too short to measure ({:.2} s, under {MIN_RUN_S} s): run it \
                     for longer",
                    r.seconds
                );
            }
            match kind {
                "local" => {
                    local.push(r.seconds);
                    local_counts.push(r.counts);
                }
                "remote" => remote.push(r.seconds),
                _ => pressured.push(r.seconds),
            }
            if !args.json {
                eprintln!(
                    "run {round}/{} {kind:<9} memory on node {node}: {:.2} s{}",
                    args.runs,
                    r.seconds,
                    share_on(&r.node_bytes, node).map_or(String::new(), |f| format!(
                        ", {:.0}% of its pages there",
                        100.0 * f
                    ))
                );
            }
            records.push(RunRecord {
                kind,
                seconds: r.seconds,
                memory_node: node,
                node_bytes: r.node_bytes,
            });
        }
    }
    let result = MeasuredPenalty::from_runs(
        &local,
        &remote,
        (!pressured.is_empty()).then_some(&pressured[..]),
    )
    .map_err(anyhow::Error::msg)?;
    let m = Measurement {
        result,
        local_node: setup.local,
        remote_node: setup.remote,
        local_s: local,
        remote_s: remote,
        pressured_s: pressured,
        machine: machine(&topo),
        command: cmdline,
        measured_at: now,
        mpki: mpki_of(&local_counts),
    };
    store.put_measurement(&name, &m)?;
    if args.json {
        let report = Report {
            program: &name,
            db,
            cpus: &setup.cpus,
            measurement: &m,
            runs: &records,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&report).context("encoding the result")?
        );
    } else {
        println!("{}", summary(&name, &m, args.runs, db));
    }
    Ok(())
}

/// MPKI over the local runs (memory local, no co-runner: the program's own miss rate),
/// from their summed counts; none unless every one of them was counted.
fn mpki_of(counts: &[Option<CounterSample>]) -> Option<f64> {
    let all: Option<Vec<CounterSample>> = counts.iter().copied().collect();
    let all = all.filter(|a| !a.is_empty())?;
    let misses = all
        .iter()
        .map(|c| c.llc_misses)
        .fold(0u64, u64::saturating_add);
    let instructions = all
        .iter()
        .map(|c| c.instructions)
        .fold(0u64, u64::saturating_add);
    mpki(misses, instructions)
}

/// The one line a session ends with.
fn summary(name: &str, m: &Measurement, runs: u32, db: &Path) -> String {
    let cache = m.result.cache_slowdown.map_or(String::new(), |c| {
        format!(", {:+.0}% beside an LLC stream", 100.0 * c)
    });
    let mpki = m.mpki.map_or_else(
        || ", no hardware counters for MPKI".to_string(),
        |v| format!(", MPKI {v:.2}"),
    );
    format!(
        "{name}: {}{mpki} (CPUs of node {}, memory on node {} against node {}, {runs} runs \
         each{cache}); recorded in {}",
        m.result.describe(),
        m.local_node,
        m.local_node,
        m.remote_node,
        db.display()
    )
}

/// A run that failed: its status, and the end of its stderr on lines of their own.
fn failed(cmdline: &str, kind: &str, round: u32, r: &bench::Run) -> anyhow::Error {
    let mut msg = format!(
        "{cmdline}: {} after {:.1} s ({kind} run {round}); nothing recorded",
        describe_status(&r.status),
        r.seconds
    );
    let tail: Vec<&str> = r.stderr_tail.lines().rev().take(5).collect();
    if !tail.is_empty() {
        msg.push_str("\nits stderr ended:");
        for l in tail.into_iter().rev() {
            msg.push_str(&format!("\n  {l}"));
        }
    }
    anyhow::Error::msg(msg)
}

/// The share of the resident bytes on `node`, `None` before any look.
fn share_on(bytes: &std::collections::BTreeMap<NodeId, u64>, node: NodeId) -> Option<f64> {
    let total: u64 = bytes.values().sum();
    (total > 0).then(|| *bytes.get(&node).unwrap_or(&0) as f64 / total as f64)
}

fn describe_status(s: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "ended abnormally".into(),
    }
}

/// A memory stream on `cpu` with its memory on `node`, for as long as it is needed.
fn co_runner(cpu: u32, node: NodeId) -> anyhow::Result<std::process::Child> {
    let exe = std::env::current_exe().context("finding numasched's own binary")?;
    let argv: Vec<String> = vec![
        exe.to_string_lossy().into_owned(),
        "workload".into(),
        "stream".into(),
        "--seconds".into(),
        "86400".into(),
    ];
    bench::spawn(
        &argv,
        &Placement {
            cpus: vec![cpu],
            memory_node: node,
        },
        true,
    )
    .context("starting the LLC co-runner")
}

/// The host's name and the machine's shape, to tell later which machine measured it.
fn machine(topo: &Topology) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    format!(
        "{host}: {} nodes, {} CPUs, {} LLCs",
        topo.nodes().len(),
        topo.num_cpus(),
        topo.llcs().len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology;

    /// MPKI is summed misses over summed instructions of the local runs, and none
    /// unless every local run was counted (a VM counts none).
    #[test]
    fn mpki_comes_from_every_local_run_or_none() {
        let c = |misses, instructions| {
            Some(CounterSample {
                instructions,
                cycles: 0,
                llc_misses: misses,
            })
        };
        let v = mpki_of(&[c(10, 1000), c(30, 3000)]).expect("counted");
        assert!((v - 10.0).abs() < 1e-12, "{v}");
        assert_eq!(mpki_of(&[c(10, 1000), None]), None);
        assert_eq!(mpki_of(&[]), None);
    }

    #[test]
    fn one_memory_node_is_refused_in_one_line() {
        let t = topology::machine("1n:1l:4c:1t").unwrap();
        let e = setup(&t, None, None, false).unwrap_err();
        assert!(e.contains("no NUMA penalty to measure"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn defaults_are_the_first_node_and_its_nearest_with_memory() {
        let t = topology::machine("nehalem-e5520").unwrap();
        let s = setup(&t, None, None, false).unwrap();
        assert_eq!((s.local, s.remote), (0, 1));
        assert_eq!(s.cpus, t.nodes()[0].cpus.as_slice().to_vec());
        let s = setup(&t, Some(1), None, true).unwrap();
        assert_eq!((s.local, s.remote), (1, 0));
        let co = s.pressure_cpu.unwrap();
        assert!(!s.cpus.contains(&co));
        assert!(t.nodes()[1].cpus.contains(co));
    }

    #[test]
    fn bad_nodes_say_which_and_why() {
        let t = topology::machine("nehalem-e5520").unwrap();
        let e = setup(&t, Some(7), None, false).unwrap_err();
        assert!(e.starts_with("--local 7: no such node"), "{e}");
        let e = setup(&t, Some(0), Some(0), false).unwrap_err();
        assert!(e.contains("the same node"), "{e}");
        let e = setup(&t, None, Some(9), false).unwrap_err();
        assert!(e.starts_with("--remote 9: no such node"), "{e}");
    }

    #[test]
    fn the_name_is_what_comm_will_say() {
        assert_eq!(comm_of("/usr/bin/stress-ng"), "stress-ng");
        assert_eq!(comm_of("./a-very-long-program-name"), "a-very-long-pro");
    }
}
