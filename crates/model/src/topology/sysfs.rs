//! The live machine, read from sysfs under a root directory so that tests can point it
//! at checked-in fixtures (`tests/fixtures/sysfs/<shape>`).
//!
//! The approach follows scx_utils: collect per-CPU facts (core siblings, package, last
//! level cache) for every *online* CPU, then group CPUs into cores and LLCs keyed by node
//! and package, so a cache that the kernel reports as spanning two nodes (Intel's
//! sub-NUMA clustering reports the L3 socket-wide) becomes one LLC per node — placement
//! reasons per node, and an LLC that crossed nodes would make "stay on the LLC" and
//! "stay local" contradict each other.
//!
//! Choices where sysfs is silent or absent, all deliberate:
//! - **No `node` directory** (kernel without NUMA): one node 0 holding every online CPU,
//!   with `memory_bytes = 0`, meaning "unknown". `/proc/meminfo` is outside the sysfs root,
//!   and reading it would make the result depend on more than `root`; a caller on the
//!   live machine that needs the size can fill it in.
//! - **A CPU without cache information** (no `cache` directory, or only instruction
//!   caches): its core is its LLC, with size 0 ("unknown"). That claims no sharing we
//!   have no evidence of; grouping the whole node would make the policies see contention
//!   that may not exist.
//! - **A cache reported across nodes or packages** is split, each part keeping a share
//!   of the size in proportion to its online CPUs (see `split_size`).
//! - **Cache `size` missing** (the kernel omits attributes it does not know, e.g. on
//!   device-tree machines): size 0. A cache index without `level` or `type` is skipped.
//! - **`physical_package_id` missing or negative** (-1 on some architectures and VMs):
//!   the package defaults to the node id, as in [`LlcDesc::package`].
//! - **Node list**: `node/online`, else `node/possible` or `node/has_cpu` (keeping ids
//!   that have a directory), else the `nodeN` directories themselves.
//!
//! Everything else that is missing, malformed or inconsistent is an error naming the file
//! and what is wrong with it; nothing here panics on file content.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::cpulist;
use super::error::TopologyError;
use super::model::{CpuId, LlcDesc, NodeDesc, NodeId, Topology, TopologyDesc, LOCAL_DISTANCE};

/// Reads the machine under `root` (`/sys` on the live system).
pub fn read(root: &Path) -> Result<Topology, TopologyError> {
    let cpu_dir = root.join("devices/system/cpu");
    let node_dir = root.join("devices/system/node");
    let online_path = cpu_dir.join("online");
    let online: BTreeSet<CpuId> = read_list(&online_path)?.into_iter().collect();
    if online.is_empty() {
        return Err(parse_err(&online_path, "no CPU is online"));
    }

    let nodes = if exists(&node_dir)? {
        read_nodes(&node_dir, &online)?
    } else {
        vec![RawNode {
            id: 0,
            cpus: online.iter().copied().collect(),
            memory_bytes: 0,
            distances: vec![LOCAL_DISTANCE],
        }]
    };
    let mut node_of: BTreeMap<CpuId, usize> = BTreeMap::new();
    for (ni, n) in nodes.iter().enumerate() {
        for &c in &n.cpus {
            if let Some(other) = node_of.insert(c, ni) {
                return Err(parse_err(
                    &node_dir.join(format!("node{}/cpulist", n.id)),
                    format!("CPU {c} is also in node {}", nodes[other].id),
                ));
            }
        }
    }
    if let Some(c) = online.iter().find(|c| !node_of.contains_key(c)) {
        return Err(parse_err(
            &online_path,
            format!("CPU {c} is online but in no node's cpulist"),
        ));
    }

    let mut facts: BTreeMap<CpuId, CpuFacts> = BTreeMap::new();
    for (&c, &ni) in &node_of {
        facts.insert(c, read_cpu(&cpu_dir, c, nodes[ni].id)?);
    }
    let groups = group(&facts, &node_of)?;

    let node_descs = nodes
        .into_iter()
        .enumerate()
        .map(|(ni, n)| NodeDesc {
            id: n.id,
            cpus: n.cpus,
            memory_bytes: n.memory_bytes,
            distances: n.distances,
            llcs: groups
                .iter()
                .filter(|g| g.node == ni)
                .map(|g| LlcDesc {
                    cpus: g.cpus.clone(),
                    size_bytes: g.size_bytes,
                    cores: g.cores.clone(),
                    package: Some(g.package),
                })
                .collect(),
        })
        .collect();
    Topology::from_desc(TopologyDesc {
        name: None,
        nodes: node_descs,
    })
    // What the model rejects (a distance row out of order) came from the node files.
    .map_err(|e| match e {
        TopologyError::Invalid(what) => parse_err(&node_dir, what),
        e => e,
    })
}

struct RawNode {
    id: NodeId,
    /// Online CPUs of the node, sorted.
    cpus: Vec<CpuId>,
    memory_bytes: u64,
    distances: Vec<u32>,
}

fn read_nodes(node_dir: &Path, online: &BTreeSet<CpuId>) -> Result<Vec<RawNode>, TopologyError> {
    let ids = node_ids(node_dir)?;
    let mut nodes = Vec::with_capacity(ids.len());
    for &id in &ids {
        let dir = node_dir.join(format!("node{id}"));
        let cpus = read_list(&dir.join("cpulist"))?
            .into_iter()
            .filter(|c| online.contains(c))
            .collect();
        let distances = read_distances(&dir.join("distance"), ids.len())?;
        let memory_bytes = read_mem_total(&dir.join("meminfo"))?;
        nodes.push(RawNode {
            id,
            cpus,
            memory_bytes,
            distances,
        });
    }
    Ok(nodes)
}

fn node_ids(node_dir: &Path) -> Result<Vec<NodeId>, TopologyError> {
    for file in ["online", "possible", "has_cpu"] {
        let path = node_dir.join(file);
        let Some(text) = read_optional(&path)? else {
            continue;
        };
        let ids = cpulist::parse(&text).map_err(|e| parse_err(&path, e))?;
        // `online` ids must all exist (a missing directory is reported when it is read);
        // `possible` lists ids that may never come online.
        let mut kept = Vec::with_capacity(ids.len());
        for id in ids {
            if file == "online" || exists(&node_dir.join(format!("node{id}")))? {
                kept.push(id);
            }
        }
        if kept.is_empty() {
            return Err(parse_err(&path, "lists no node"));
        }
        return Ok(kept);
    }
    let entries = fs::read_dir(node_dir).map_err(|e| io_err(node_dir, e))?;
    let mut ids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_err(node_dir, e))?;
        if let Some(id) = numbered(&entry.file_name().to_string_lossy(), "node") {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    if ids.is_empty() {
        return Err(parse_err(
            node_dir,
            "has no node list and no nodeN directory",
        ));
    }
    Ok(ids)
}

fn read_distances(path: &Path, expected: usize) -> Result<Vec<u32>, TopologyError> {
    let text = read_text(path)?;
    let row = text
        .split_whitespace()
        .map(|w| {
            w.parse::<u32>()
                .map_err(|_| parse_err(path, format!("'{w}' in the distance row is not a number")))
        })
        .collect::<Result<Vec<u32>, _>>()?;
    if row.len() != expected {
        return Err(parse_err(
            path,
            format!(
                "distance row has {} numbers, expected {expected} (one per node)",
                row.len()
            ),
        ));
    }
    Ok(row)
}

/// `Node 0 MemTotal:  5728460 kB` → bytes.
fn read_mem_total(path: &Path) -> Result<u64, TopologyError> {
    let text = read_text(path)?;
    for line in text.lines() {
        let mut words = line.split_whitespace().skip_while(|w| *w != "MemTotal:");
        if words.next().is_none() {
            continue;
        }
        let value = words.next().unwrap_or("");
        let unit = words.next().unwrap_or("");
        let kb: u64 = value
            .parse()
            .map_err(|_| parse_err(path, format!("MemTotal '{value}' is not a number")))?;
        if unit != "kB" {
            return Err(parse_err(path, format!("MemTotal unit '{unit}' is not kB")));
        }
        return kb
            .checked_mul(1024)
            .ok_or_else(|| parse_err(path, format!("MemTotal {kb} kB is too large")));
    }
    Err(parse_err(path, "has no MemTotal line"))
}

/// What one online CPU says about itself.
struct CpuFacts {
    /// Hardware threads of its core, as listed (unfiltered).
    siblings: Vec<CpuId>,
    siblings_path: PathBuf,
    package: u32,
    llc: Option<CacheFacts>,
}

struct CacheFacts {
    cpus: Vec<CpuId>,
    size_bytes: u64,
    path: PathBuf,
}

fn read_cpu(cpu_dir: &Path, cpu: CpuId, node: NodeId) -> Result<CpuFacts, TopologyError> {
    let dir = cpu_dir.join(format!("cpu{cpu}"));
    let topo = dir.join("topology");
    let mut siblings = None;
    for file in ["thread_siblings_list", "core_cpus_list"] {
        let path = topo.join(file);
        if let Some(text) = read_optional(&path)? {
            let list = cpulist::parse(&text).map_err(|e| parse_err(&path, e))?;
            siblings = Some((list, path));
            break;
        }
    }
    let Some((siblings, siblings_path)) = siblings else {
        return Err(parse_err(
            &topo,
            "online CPU has neither thread_siblings_list nor core_cpus_list",
        ));
    };
    let package_path = topo.join("physical_package_id");
    let package = match read_optional(&package_path)? {
        None => node,
        Some(text) => {
            let v: i64 = text.trim().parse().map_err(|_| {
                parse_err(
                    &package_path,
                    format!("'{}' is not a package number", text.trim().escape_debug()),
                )
            })?;
            if v < 0 {
                node
            } else {
                u32::try_from(v)
                    .map_err(|_| parse_err(&package_path, format!("package {v} is too large")))?
            }
        }
    };
    let llc = read_llc(&dir.join("cache"))?;
    Ok(CpuFacts {
        siblings,
        siblings_path,
        package,
        llc,
    })
}

/// The highest-level data or unified cache of a CPU; unified wins a tie with data.
fn read_llc(cache_dir: &Path) -> Result<Option<CacheFacts>, TopologyError> {
    if !exists(cache_dir)? {
        return Ok(None);
    }
    let entries = fs::read_dir(cache_dir).map_err(|e| io_err(cache_dir, e))?;
    let mut best: Option<((u32, bool), PathBuf)> = None;
    for entry in entries {
        let entry = entry.map_err(|e| io_err(cache_dir, e))?;
        if numbered(&entry.file_name().to_string_lossy(), "index").is_none() {
            continue;
        }
        let dir = entry.path();
        let type_path = dir.join("type");
        let Some(kind) = read_optional(&type_path)? else {
            continue;
        };
        let unified = match kind.trim() {
            "Instruction" => continue,
            "Data" => false,
            "Unified" => true,
            other => {
                return Err(parse_err(
                    &type_path,
                    format!("unknown cache type '{}'", other.escape_debug()),
                ))
            }
        };
        let level_path = dir.join("level");
        let Some(level) = read_optional(&level_path)? else {
            continue;
        };
        let level: u32 = level.trim().parse().map_err(|_| {
            parse_err(
                &level_path,
                format!(
                    "cache level '{}' is not a number",
                    level.trim().escape_debug()
                ),
            )
        })?;
        let rank = (level, unified);
        if best.as_ref().is_none_or(|(r, _)| rank > *r) {
            best = Some((rank, dir));
        }
    }
    let Some((_, dir)) = best else {
        return Ok(None);
    };
    let path = dir.join("shared_cpu_list");
    let cpus = read_list(&path)?;
    let size_path = dir.join("size");
    let size_bytes = match read_optional(&size_path)? {
        None => 0,
        Some(text) => parse_size(&text).map_err(|e| parse_err(&size_path, e))?,
    };
    Ok(Some(CacheFacts {
        cpus,
        size_bytes,
        path,
    }))
}

/// Cache sizes as the kernel prints them (`32K`, `8192K`) and as other tools write them
/// (`32M`, `1G`, plain bytes).
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(digits_end);
    let bad = || {
        format!(
            "cache size '{}' is not a size like 32K or 8M",
            t.escape_debug()
        )
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let mult: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => return Err(bad()),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("cache size '{}' is too large", t.escape_debug()))
}

/// One LLC domain of the result.
struct Group {
    node: usize,
    package: u32,
    cpus: Vec<CpuId>,
    size_bytes: u64,
    cores: Vec<Vec<CpuId>>,
}

/// Partitions the online CPUs into LLCs and cores. A CPU's LLC (core) is what its own
/// file lists, restricted to online CPUs of the same node and package; every CPU so
/// listed must list the same set back, else the files contradict each other.
fn group(
    facts: &BTreeMap<CpuId, CpuFacts>,
    node_of: &BTreeMap<CpuId, usize>,
) -> Result<Vec<Group>, TopologyError> {
    let same_place = |c: CpuId, list: &[CpuId]| -> Vec<CpuId> {
        let (node, pkg) = (node_of.get(&c), facts.get(&c).map(|f| f.package));
        list.iter()
            .copied()
            .filter(|d| node_of.get(d) == node && facts.get(d).map(|f| f.package) == pkg)
            .collect()
    };
    let mut core_of: BTreeMap<CpuId, Vec<CpuId>> = BTreeMap::new();
    let mut llc_of: BTreeMap<CpuId, (Vec<CpuId>, u64)> = BTreeMap::new();
    for (&c, f) in facts {
        let core = same_place(c, &f.siblings);
        if !core.contains(&c) {
            return Err(parse_err(
                &f.siblings_path,
                format!("does not list cpu{c} itself"),
            ));
        }
        let (llc, size) = match &f.llc {
            Some(cache) => {
                let llc = same_place(c, &cache.cpus);
                if !llc.contains(&c) {
                    return Err(parse_err(
                        &cache.path,
                        format!("does not list cpu{c} itself"),
                    ));
                }
                if let Some(d) = core.iter().find(|d| !llc.contains(d)) {
                    return Err(parse_err(
                        &f.siblings_path,
                        format!(
                            "sibling cpu{d} is not in cpu{c}'s last-level cache ({})",
                            cpulist::format(&llc)
                        ),
                    ));
                }
                (llc.clone(), split_size(cache, &llc, facts))
            }
            None => (core.clone(), 0),
        };
        core_of.insert(c, core);
        llc_of.insert(c, (llc, size));
    }

    for (&c, f) in facts {
        let core = &core_of[&c];
        for d in core {
            if core_of.get(d) != Some(core) {
                return Err(parse_err(
                    &f.siblings_path,
                    format!(
                        "lists cpu{d} as a sibling, but cpu{d}'s siblings are {}",
                        core_of.get(d).map_or(String::new(), |v| cpulist::format(v))
                    ),
                ));
            }
        }
        let (llc, size) = &llc_of[&c];
        for d in llc {
            let Some((theirs, their_size)) = llc_of.get(d) else {
                continue; // unreachable: members are online CPUs, which all have facts
            };
            let path = f.llc.as_ref().map_or(&f.siblings_path, |l| &l.path);
            if theirs != llc {
                return Err(parse_err(
                    path,
                    format!(
                        "cpu{c}'s last-level cache is {} but cpu{d}'s is {}",
                        cpulist::format(llc),
                        cpulist::format(theirs)
                    ),
                ));
            }
            if their_size != size {
                return Err(parse_err(
                    path,
                    format!(
                        "cpu{c}'s last-level cache is {size} bytes but cpu{d}'s is {their_size}"
                    ),
                ));
            }
        }
    }

    // CPUs ascend, so each LLC is created at its lowest CPU and LLCs come out in order.
    let mut groups: Vec<Group> = Vec::new();
    let mut done: BTreeSet<CpuId> = BTreeSet::new();
    for (&c, f) in facts {
        if done.contains(&c) {
            continue;
        }
        let (cpus, size_bytes) = llc_of[&c].clone();
        let mut cores: Vec<Vec<CpuId>> = Vec::new();
        for d in &cpus {
            if let Some(core) = core_of.get(d) {
                if core.first() == Some(d) {
                    cores.push(core.clone());
                }
            }
        }
        done.extend(cpus.iter().copied());
        groups.push(Group {
            node: node_of[&c],
            package: f.package,
            cpus,
            size_bytes,
            cores,
        });
    }
    Ok(groups)
}

/// The share of a cache that falls to the part of it inside one node and package, in
/// proportion to the online CPUs there. Under Intel SNC the L3 is sliced by address, so
/// each sub-NUMA domain really gets its share; elsewhere this keeps the machine's total
/// cache the same however it is split, which is what capacity models sum over.
fn split_size(cache: &CacheFacts, part: &[CpuId], facts: &BTreeMap<CpuId, CpuFacts>) -> u64 {
    let online = cache.cpus.iter().filter(|c| facts.contains_key(c)).count();
    if online <= part.len() {
        return cache.size_bytes;
    }
    // u128 so that a large size times a CPU count cannot overflow; the quotient is at
    // most `size_bytes`, so it fits back into u64.
    let share = u128::from(cache.size_bytes) * part.len() as u128 / online as u128;
    u64::try_from(share).unwrap_or(cache.size_bytes)
}

/// `node12` → 12 for prefix `node`; anything else (`node`, `nodes`, `node1x`) → None.
fn numbered(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok()
}

fn read_text(path: &Path) -> Result<String, TopologyError> {
    fs::read_to_string(path).map_err(|e| io_err(path, e))
}

/// `None` when the file does not exist; any other failure is an error.
fn read_optional(path: &Path) -> Result<Option<String>, TopologyError> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path, e)),
    }
}

fn read_list(path: &Path) -> Result<Vec<u32>, TopologyError> {
    cpulist::parse(&read_text(path)?).map_err(|e| parse_err(path, e))
}

fn exists(path: &Path) -> Result<bool, TopologyError> {
    match fs::metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err(path, e)),
    }
}

fn io_err(path: &Path, err: io::Error) -> TopologyError {
    TopologyError::Io {
        path: path.to_path_buf(),
        err,
    }
}

fn parse_err(path: &Path, what: impl Into<String>) -> TopologyError {
    TopologyError::Parse {
        path: path.to_path_buf(),
        what: what.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_kernel_and_human_units() {
        assert_eq!(parse_size("8192K\n"), Ok(8 << 20));
        assert_eq!(parse_size("32M"), Ok(32 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("banana").unwrap_err().contains("banana"));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn numbered_entries_only() {
        assert_eq!(numbered("node12", "node"), Some(12));
        assert_eq!(numbered("node", "node"), None);
        assert_eq!(numbered("node1x", "node"), None);
        assert_eq!(numbered("index3", "index"), Some(3));
        assert_eq!(numbered("uevent", "index"), None);
    }
}
