//! `numasched topo`: show the machine the policies would see — this one (from sysfs), a
//! preset, or a spec string — so an operator can check the model before trusting it.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use crate::topology::{self, cpulist, sysfs, Topology, TopologyError, THIS};

#[derive(Debug, Args)]
pub struct TopoArgs {
    /// Show a preset or a spec string like 4n:2l:4c:2t instead of this machine; `this`
    /// is this machine, read from sysfs (the default), as for sim and eval.
    #[arg(long, value_name = "PRESET|SPEC|this")]
    pub machine: Option<String>,
    /// Read this machine (no --machine, or --machine this) from this sysfs root
    /// [default: /sys].
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,
    /// Print the topology as JSON (the form snapshots carry).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: TopoArgs) -> anyhow::Result<()> {
    let (topo, source) = match args.machine.as_deref() {
        // `machine` refuses a root given with a preset or spec string, as sim and eval do.
        Some(name) if name != THIS => (
            machine(name, args.sysfs_root.as_deref())?,
            format!("machine {name}"),
        ),
        // `this` is the machine read with no --machine, shown the same way.
        Some(_) | None => {
            let root = args.sysfs_root.as_deref().unwrap_or(Path::new("/sys"));
            (read_sysfs(root)?, format!("sysfs at {}", root.display()))
        }
    };
    if args.json {
        let text = serde_json::to_string_pretty(&topo).context("encoding the topology")?;
        println!("{text}");
    } else {
        print!("{}", render(&topo, &source));
    }
    Ok(())
}

/// `--machine` where the live machine is allowed: a preset, a spec string, or `this`,
/// read from sysfs under `root` (/sys unless given) as `topo` reads it. `this` is named,
/// not left unnamed, so reports say where their rows came from. A root given with any
/// other machine is refused rather than silently ignored.
pub fn machine(name: &str, root: Option<&Path>) -> anyhow::Result<Topology> {
    if name == THIS {
        let topo = read_sysfs(root.unwrap_or(Path::new("/sys")))?;
        return Ok(topo.with_name(THIS));
    }
    if root.is_some() {
        anyhow::bail!("--sysfs-root applies to the machine '{THIS}' only, not to '{name}'");
    }
    Ok(topology::machine(name)?)
}

/// Sysfs errors already name their file; only a machine that reads fine but does not
/// hold together needs the root to say where it came from. A root that is not there at
/// all is named itself: the first file under it that fails to open would point at
/// the wrong thing.
fn read_sysfs(root: &Path) -> anyhow::Result<Topology> {
    if !root.is_dir() {
        let what = if root.exists() {
            "not a directory"
        } else {
            "no such directory"
        };
        anyhow::bail!("{}: {what} (the sysfs root)", root.display());
    }
    sysfs::read(root).map_err(|e| match e {
        TopologyError::Invalid(_) => anyhow::anyhow!("{}: {e}", root.display()),
        e => e.into(),
    })
}

/// The human table: one row per LLC, node columns filled on a node's first row.
pub fn render(t: &Topology, source: &str) -> String {
    let mut out = String::new();
    let total_mem = if t.total_memory() == 0 {
        "memory unknown".to_string()
    } else {
        format!("{} memory", gib(t.total_memory()))
    };
    out.push_str(&format!(
        "{source}: {}, {} in {}, {}, SMT {}, {total_mem}\n\n",
        count(t.nodes().len(), "node"),
        count(t.num_cpus(), "CPU"),
        count(t.cores().len(), "core"),
        count(t.llcs().len(), "LLC"),
        yes_no(t.has_smt()),
    ));

    let mut rows: Vec<[String; 8]> = vec![[
        "node", "memory", "cpus", "smt", "llc", "package", "size", "llc cpus",
    ]
    .map(String::from)];
    for n in t.nodes() {
        let memory = if n.memory_bytes == 0 {
            "?".to_string()
        } else {
            gib(n.memory_bytes)
        };
        let llcs = &t.llcs()[n.llcs.clone()];
        let smt = llcs
            .iter()
            .any(|l| t.cores()[l.cores.clone()].iter().any(|c| c.cpus.len() > 1));
        let node_cols = [
            n.id.to_string(),
            memory,
            list_or_dash(&n.cpus),
            if llcs.is_empty() {
                "-".to_string()
            } else {
                yes_no(smt).to_string()
            },
        ];
        if llcs.is_empty() {
            let [id, mem, cpus, smt] = node_cols;
            let dash = || "-".to_string();
            rows.push([id, mem, cpus, smt, dash(), dash(), dash(), dash()]);
            continue;
        }
        for (i, l) in llcs.iter().enumerate() {
            let [id, mem, cpus, smt] = if i == 0 {
                node_cols.clone()
            } else {
                Default::default()
            };
            rows.push([
                id,
                mem,
                cpus,
                smt,
                l.index.to_string(),
                l.package.to_string(),
                size(l.size_bytes),
                l.cpus.to_string(),
            ]);
        }
    }
    let mut widths = [0usize; 8];
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }

    out.push_str("\ndistances:\n");
    let w = t
        .nodes()
        .iter()
        .flat_map(|n| n.distances.iter().map(|d| d.to_string().len()))
        .chain(t.nodes().iter().map(|n| n.id.to_string().len()))
        .max()
        .unwrap_or(1)
        .max("node".len());
    let header: Vec<String> = t.nodes().iter().map(|n| format!("{:>w$}", n.id)).collect();
    out.push_str(&format!("{:>w$}  {}\n", "node", header.join("  ")));
    for n in t.nodes() {
        let row: Vec<String> = n.distances.iter().map(|d| format!("{d:>w$}")).collect();
        out.push_str(&format!("{:>w$}  {}\n", n.id, row.join("  ")));
    }
    out
}

fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn list_or_dash(ids: &[u32]) -> String {
    if ids.is_empty() {
        "-".to_string()
    } else {
        cpulist::format(ids)
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// Cache sizes: exact units when they divide evenly (the usual case), else one decimal;
/// 0 is how sysfs-less sources say "unknown".
fn size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    if bytes == 0 {
        return "?".to_string();
    }
    for (unit, name) in UNITS {
        if bytes >= unit {
            return if bytes % unit == 0 {
                format!("{} {name}", bytes / unit)
            } else {
                format!("{:.1} {name}", bytes as f64 / unit as f64)
            };
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_naturally() {
        assert_eq!(size(8 << 20), "8 MiB");
        assert_eq!(size(15 << 19), "7.5 MiB");
        assert_eq!(size(32 << 10), "32 KiB");
        assert_eq!(size(1 << 30), "1 GiB");
        assert_eq!(size(100), "100 B");
        assert_eq!(size(0), "?");
    }

    #[test]
    fn table_lists_every_llc_and_the_distance_matrix() {
        let t = topology::machine("epyc-7742-2s").unwrap();
        let text = render(&t, "machine epyc-7742-2s");
        assert!(text.starts_with("machine epyc-7742-2s: 8 nodes, 256 CPUs in 128 cores, 32 LLCs, SMT yes, 512.0 GiB memory\n"), "{text}");
        assert!(text.contains("0-15,128-143"), "{text}");
        assert!(text.contains("16 MiB  4-7,132-135"), "{text}");
        assert_eq!(text.matches("16 MiB").count(), 32);
        let dist = text.split("distances:\n").nth(1).unwrap();
        assert_eq!(dist.lines().count(), 9);
        assert!(dist
            .lines()
            .nth(1)
            .unwrap()
            .ends_with("10    12    12    12    32    32    32    32"));
    }

    #[test]
    fn memory_only_nodes_show_dashes() {
        let mut d = topology::spec::build(2, 1, 2, 1, None);
        d.nodes[1].llcs.clear();
        let t = Topology::from_desc(d).unwrap();
        let text = render(&t, "test");
        let row: Vec<&str> = text
            .lines()
            .find(|l| l.starts_with("1 "))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(row, ["1", "16.0", "GiB", "-", "-", "-", "-", "-", "-"]);
    }
}
