//! The machine as the policies see it: nodes → LLC domains → cores → hardware threads.
//!
//! Two shapes of the same thing live here. [`TopologyDesc`] is the nested, serialisable
//! form (what `topo --json` prints and snapshots carry); [`Topology`] is the validated form
//! with flat, index-linked tables so that policies can go from a CPU to its core, LLC and
//! node in O(1) inside hot loops. Every source (sysfs, presets, spec strings, snapshot
//! JSON) builds a `TopologyDesc` and goes through [`Topology::from_desc`], so there is one
//! place that decides what a well-formed machine is.

use std::collections::BTreeSet;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::error::TopologyError;
use crate::cpuset::CpuSet;

/// Linux CPU number (as in `/sys/devices/system/cpu/cpuN`).
pub type CpuId = u32;
/// Linux NUMA node number; may be sparse.
pub type NodeId = u32;

/// Distance the kernel reports from a node to itself (ACPI SLIT convention).
pub const LOCAL_DISTANCE: u32 = 10;

/// Nested description of a machine. CPU lists inside nodes are derived and only
/// checked on input; `cores` and `package` are optional so hand-written snapshots
/// can stay short.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopologyDesc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub nodes: Vec<NodeDesc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeDesc {
    pub id: NodeId,
    /// Derived from the LLCs on output; when given on input it must agree with them.
    #[serde(default)]
    pub cpus: Vec<CpuId>,
    pub memory_bytes: u64,
    /// Distance to every node, in the order of `nodes` (ascending id), as in sysfs.
    pub distances: Vec<u32>,
    #[serde(default)]
    pub llcs: Vec<LlcDesc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlcDesc {
    pub cpus: Vec<CpuId>,
    pub size_bytes: u64,
    /// Hardware-thread groups (SMT siblings). Empty means every CPU is its own core.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cores: Vec<Vec<CpuId>>,
    /// Physical package (socket). Defaults to the node id: packages matter for
    /// bus and interconnect sharing, not for locality.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub id: NodeId,
    pub memory_bytes: u64,
    /// Indexed by node *index* (position in [`Topology::nodes`]), not by id.
    pub distances: Vec<u32>,
    /// Indices into [`Topology::llcs`]. Empty for memory-only nodes.
    pub llcs: Range<usize>,
    pub cpus: CpuSet,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Llc {
    pub index: usize,
    /// Index into [`Topology::nodes`].
    pub node: usize,
    pub package: u32,
    pub size_bytes: u64,
    /// Indices into [`Topology::cores`].
    pub cores: Range<usize>,
    pub cpus: CpuSet,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Core {
    pub index: usize,
    pub llc: usize,
    pub cpus: CpuSet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpu {
    pub id: CpuId,
    /// Position in [`Topology::cpus`]; policies index per-CPU tables with it.
    pub index: usize,
    pub core: usize,
    pub llc: usize,
    pub node: usize,
}

/// A validated machine. Construct it with [`Topology::from_desc`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "TopologyDesc", into = "TopologyDesc")]
pub struct Topology {
    name: Option<String>,
    nodes: Vec<Node>,
    llcs: Vec<Llc>,
    cores: Vec<Core>,
    /// Sorted by CPU id, grouped so that `cpus[i].index == i`.
    cpus: Vec<Cpu>,
    /// CPU id → index in `cpus`; `usize::MAX` for ids that do not exist.
    by_id: Vec<usize>,
    /// Cached [`Topology::nearest_remote_distance`]: policies ask for it per process.
    nearest_remote: Option<u32>,
    /// CPU indices per LLC and per node, for hot loops that index per-CPU tables.
    llc_cpu_idx: Vec<Vec<usize>>,
    node_cpu_idx: Vec<Vec<usize>>,
    /// Node id → node index; `usize::MAX` for ids that do not exist.
    node_by_id: Vec<usize>,
}

/// Largest CPU or node id accepted: far above Linux's NR_CPUS (8192) and
/// MAX_NUMNODES (1024), small enough that id-indexed tables stay cheap.
pub const MAX_ID: u32 = 1 << 16;

fn invalid(what: String) -> TopologyError {
    TopologyError::Invalid(what)
}

/// Distance rows are in ascending-id order (sysfs order), so nodes must be listed that
/// way too, each id once.
fn check_node_order(node_descs: &[NodeDesc]) -> Result<(), TopologyError> {
    if node_descs.windows(2).any(|w| w[0].id >= w[1].id) {
        let mut ids: Vec<_> = node_descs.iter().map(|n| n.id).collect();
        ids.sort_unstable();
        if ids.windows(2).any(|w| w[0] == w[1]) {
            return Err(invalid("node ids are not unique".into()));
        }
        return Err(invalid(format!(
            "nodes must be listed in ascending id order, got {:?}",
            node_descs.iter().map(|n| n.id).collect::<Vec<_>>()
        )));
    }
    Ok(())
}

/// No node or CPU id above [`MAX_ID`]. Lookup tables are indexed by id: an absurd id
/// (from a hand-written or corrupt snapshot) would ask for gigabytes before anything
/// else could fail.
fn check_id_bounds(node_descs: &[NodeDesc]) -> Result<(), TopologyError> {
    let too_big = |id: u32| id > MAX_ID;
    if let Some(nd) = node_descs.iter().find(|nd| too_big(nd.id)) {
        return Err(invalid(format!(
            "node id {} is implausibly large (at most {MAX_ID})",
            nd.id
        )));
    }
    if let Some(c) = node_descs
        .iter()
        .flat_map(|nd| nd.llcs.iter().flat_map(|l| l.cpus.iter()))
        .find(|c| too_big(**c))
    {
        return Err(invalid(format!(
            "CPU id {c} is implausibly large (at most {MAX_ID})"
        )));
    }
    Ok(())
}

/// Node `ni` of `n` has a distance to every node, the smallest (and not zero) to
/// itself.
fn check_distances(ni: usize, nd: &NodeDesc, n: usize) -> Result<(), TopologyError> {
    if nd.distances.len() != n {
        return Err(invalid(format!(
            "node {}: distance row has {} entries for {} nodes",
            nd.id,
            nd.distances.len(),
            n
        )));
    }
    if nd.distances[ni] == 0 || nd.distances.iter().any(|&d| d < nd.distances[ni]) {
        return Err(invalid(format!(
            "node {}: distance to itself ({}) must be the smallest and non-zero, row {:?}",
            nd.id, nd.distances[ni], nd.distances
        )));
    }
    Ok(())
}

/// The cores (hardware-thread groups, each sorted, in order) of LLC `li` of node
/// `node`, whose sorted CPUs are `llc_cpus`: one per CPU when none are given, otherwise
/// the given ones, which must partition the CPUs.
fn core_groups(
    node: NodeId,
    li: usize,
    ld: &LlcDesc,
    llc_cpus: &[CpuId],
) -> Result<Vec<Vec<CpuId>>, TopologyError> {
    if ld.cores.is_empty() {
        return Ok(llc_cpus.iter().map(|&c| vec![c]).collect());
    }
    let mut flat: Vec<CpuId> = ld.cores.iter().flatten().copied().collect();
    flat.sort_unstable();
    if flat != llc_cpus || ld.cores.iter().any(|g| g.is_empty()) {
        return Err(invalid(format!(
            "node {node} LLC {li}: cores {:?} do not partition its CPUs {:?}",
            ld.cores, llc_cpus
        )));
    }
    let mut g = ld.cores.clone();
    for c in &mut g {
        c.sort_unstable();
    }
    g.sort_unstable();
    Ok(g)
}

/// The flat tables of [`Topology`], built node by node from the description.
#[derive(Default)]
struct Tables {
    nodes: Vec<Node>,
    llcs: Vec<Llc>,
    cores: Vec<Core>,
    /// Every CPU id added so far, so that one listed twice is caught.
    seen: BTreeSet<CpuId>,
}

impl Tables {
    /// Adds node `ni` with its LLCs and cores; its CPUs are those of its LLCs, and the
    /// ones it lists, if any, must be the same.
    fn add_node(&mut self, ni: usize, nd: &NodeDesc) -> Result<(), TopologyError> {
        let llc_start = self.llcs.len();
        for (li, ld) in nd.llcs.iter().enumerate() {
            self.add_llc(ni, nd.id, li, ld)?;
        }
        let mut node_cpus: Vec<CpuId> = self.llcs[llc_start..]
            .iter()
            .flat_map(|l| l.cpus.iter().copied())
            .collect();
        node_cpus.sort_unstable();
        if !nd.cpus.is_empty() {
            let mut given = nd.cpus.clone();
            given.sort_unstable();
            if given != node_cpus {
                return Err(invalid(format!(
                    "node {}: cpus {:?} disagree with its LLCs' CPUs {:?}",
                    nd.id, given, node_cpus
                )));
            }
        }
        self.nodes.push(Node {
            id: nd.id,
            memory_bytes: nd.memory_bytes,
            distances: nd.distances.clone(),
            llcs: llc_start..self.llcs.len(),
            cpus: node_cpus.into(),
        });
        Ok(())
    }

    /// Adds LLC `li` of node index `ni` (id `node`) and its cores.
    fn add_llc(
        &mut self,
        ni: usize,
        node: NodeId,
        li: usize,
        ld: &LlcDesc,
    ) -> Result<(), TopologyError> {
        if ld.cpus.is_empty() {
            return Err(invalid(format!("node {node} LLC {li}: no CPUs")));
        }
        let mut llc_cpus = ld.cpus.clone();
        llc_cpus.sort_unstable();
        let groups = core_groups(node, li, ld, &llc_cpus)?;
        for &c in &llc_cpus {
            if !self.seen.insert(c) {
                return Err(invalid(format!("CPU {c} appears more than once")));
            }
        }
        let llc_index = self.llcs.len();
        let core_start = self.cores.len();
        for g in groups {
            self.cores.push(Core {
                index: self.cores.len(),
                llc: llc_index,
                cpus: g.into(),
            });
        }
        self.llcs.push(Llc {
            index: llc_index,
            node: ni,
            package: ld.package.unwrap_or(node),
            size_bytes: ld.size_bytes,
            cores: core_start..self.cores.len(),
            cpus: llc_cpus.into(),
        });
        Ok(())
    }
}

/// The CPUs sorted by id with their indices, and the id → index table.
fn cpu_table(cores: &[Core], llcs: &[Llc]) -> (Vec<Cpu>, Vec<usize>) {
    let mut cpus: Vec<Cpu> = cores
        .iter()
        .flat_map(|core| {
            let llc = core.llc;
            let node = llcs[llc].node;
            core.cpus.iter().map(move |&id| Cpu {
                id,
                index: 0,
                core: core.index,
                llc,
                node,
            })
        })
        .collect();
    cpus.sort_unstable_by_key(|c| c.id);
    let max_id = cpus.last().map(|c| c.id).unwrap_or(0) as usize;
    let mut by_id = vec![usize::MAX; max_id + 1];
    for (i, c) in cpus.iter_mut().enumerate() {
        c.index = i;
        by_id[c.id as usize] = i;
    }
    (cpus, by_id)
}

impl Topology {
    pub fn from_desc(desc: TopologyDesc) -> Result<Topology, TopologyError> {
        let TopologyDesc {
            name,
            nodes: node_descs,
        } = desc;
        if node_descs.is_empty() {
            return Err(invalid("the machine has no nodes".into()));
        }
        check_node_order(&node_descs)?;
        check_id_bounds(&node_descs)?;
        let n = node_descs.len();
        let mut tables = Tables {
            nodes: Vec::with_capacity(n),
            ..Tables::default()
        };
        for (ni, nd) in node_descs.iter().enumerate() {
            check_distances(ni, nd, n)?;
            tables.add_node(ni, nd)?;
        }
        if tables.seen.is_empty() {
            return Err(invalid("the machine has no CPUs".into()));
        }
        let Tables {
            nodes, llcs, cores, ..
        } = tables;
        let (cpus, by_id) = cpu_table(&cores, &llcs);
        Ok(Topology {
            name,
            nodes,
            llcs,
            cores,
            cpus,
            by_id,
            nearest_remote: None,
            llc_cpu_idx: Vec::new(),
            node_cpu_idx: Vec::new(),
            node_by_id: Vec::new(),
        }
        .with_caches())
    }

    fn with_caches(mut self) -> Topology {
        self.llc_cpu_idx = vec![Vec::new(); self.llcs.len()];
        self.node_cpu_idx = vec![Vec::new(); self.nodes.len()];
        for c in &self.cpus {
            self.llc_cpu_idx[c.llc].push(c.index);
            self.node_cpu_idx[c.node].push(c.index);
        }
        let max_node = self.nodes.iter().map(|n| n.id).max().unwrap_or(0) as usize;
        self.node_by_id = vec![usize::MAX; max_node + 1];
        for (i, n) in self.nodes.iter().enumerate() {
            self.node_by_id[n.id as usize] = i;
        }
        let mut best: Option<u32> = None;
        for (i, n) in self.nodes.iter().enumerate() {
            for (j, &d) in n.distances.iter().enumerate() {
                if i != j {
                    best = Some(best.map_or(d, |b| b.min(d)));
                }
            }
        }
        self.nearest_remote = best;
        self
    }

    pub fn to_desc(&self) -> TopologyDesc {
        TopologyDesc {
            name: self.name.clone(),
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeDesc {
                    id: n.id,
                    cpus: n.cpus.to_vec(),
                    memory_bytes: n.memory_bytes,
                    distances: n.distances.clone(),
                    llcs: self.llcs[n.llcs.clone()]
                        .iter()
                        .map(|l| {
                            let cores = &self.cores[l.cores.clone()];
                            let smt = cores.iter().any(|c| c.cpus.len() > 1);
                            LlcDesc {
                                cpus: l.cpus.to_vec(),
                                size_bytes: l.size_bytes,
                                cores: if smt {
                                    cores.iter().map(|c| c.cpus.to_vec()).collect()
                                } else {
                                    Vec::new()
                                },
                                package: (l.package != n.id).then_some(l.package),
                            }
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    /// The same machine under a name: the live machine read from sysfs has none, and
    /// evaluation reports label their rows with it.
    pub fn with_name(mut self, name: &str) -> Topology {
        self.name = Some(name.to_string());
        self
    }
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    pub fn llcs(&self) -> &[Llc] {
        &self.llcs
    }
    pub fn cores(&self) -> &[Core] {
        &self.cores
    }
    pub fn cpus(&self) -> &[Cpu] {
        &self.cpus
    }
    pub fn num_cpus(&self) -> usize {
        self.cpus.len()
    }
    pub fn cpu(&self, id: CpuId) -> Option<&Cpu> {
        match self.by_id.get(id as usize) {
            Some(&i) if i != usize::MAX => Some(&self.cpus[i]),
            _ => None,
        }
    }
    /// Position of node `id` in [`Topology::nodes`].
    pub fn node_index(&self, id: NodeId) -> Option<usize> {
        match self.node_by_id.get(id as usize) {
            Some(&i) if i != usize::MAX => Some(i),
            _ => None,
        }
    }
    /// CPU indices (positions in [`Topology::cpus`]) of LLC `llc`, ascending.
    pub fn llc_cpu_indices(&self, llc: usize) -> &[usize] {
        &self.llc_cpu_idx[llc]
    }
    /// CPU indices of node index `node`, ascending.
    pub fn node_cpu_indices(&self, node: usize) -> &[usize] {
        &self.node_cpu_idx[node]
    }
    /// SLIT distance between two node *indices*.
    pub fn distance(&self, from: usize, to: usize) -> u32 {
        self.nodes[from].distances[to]
    }
    /// The smallest distance between two different nodes: the "one hop" that a NUMA
    /// penalty measured on a two-node machine corresponds to. `None` on one node.
    pub fn nearest_remote_distance(&self) -> Option<u32> {
        self.nearest_remote
    }
    /// Node indices ordered by distance from `from` (itself first), ties by id.
    pub fn nodes_by_distance(&self, from: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by_key(|&j| (j != from, self.distance(from, j), self.nodes[j].id));
        order
    }
    pub fn total_memory(&self) -> u64 {
        self.nodes.iter().map(|n| n.memory_bytes).sum()
    }
    /// Every CPU of the machine: the set an unpinned process may use.
    pub fn all_cpus(&self) -> CpuSet {
        self.cpus.iter().map(|c| c.id).collect()
    }
    /// Nodes that have CPUs (memory-only nodes excluded), as indices.
    pub fn cpu_nodes(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(|&i| !self.nodes[i].llcs.is_empty())
    }
    /// Whether the machine has SMT siblings anywhere.
    pub fn has_smt(&self) -> bool {
        self.cores.iter().any(|c| c.cpus.len() > 1)
    }
}

impl TryFrom<TopologyDesc> for Topology {
    type Error = TopologyError;
    fn try_from(d: TopologyDesc) -> Result<Self, Self::Error> {
        Topology::from_desc(d)
    }
}

impl From<Topology> for TopologyDesc {
    fn from(t: Topology) -> Self {
        t.to_desc()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_node() -> TopologyDesc {
        TopologyDesc {
            name: None,
            nodes: vec![
                NodeDesc {
                    id: 0,
                    cpus: vec![],
                    memory_bytes: 1 << 30,
                    distances: vec![10, 21],
                    llcs: vec![LlcDesc {
                        cpus: vec![0, 1, 4, 5],
                        size_bytes: 8 << 20,
                        cores: vec![vec![0, 4], vec![1, 5]],
                        package: None,
                    }],
                },
                NodeDesc {
                    id: 3,
                    cpus: vec![],
                    memory_bytes: 1 << 30,
                    distances: vec![21, 10],
                    llcs: vec![LlcDesc {
                        cpus: vec![2, 3],
                        size_bytes: 8 << 20,
                        cores: vec![],
                        package: None,
                    }],
                },
            ],
        }
    }

    #[test]
    fn indexes_link_cpu_to_core_llc_node() {
        let t = Topology::from_desc(two_node()).unwrap();
        assert_eq!(t.num_cpus(), 6);
        let c4 = t.cpu(4).unwrap();
        assert_eq!(t.cores()[c4.core].cpus, vec![0, 4]);
        assert_eq!(t.nodes()[c4.node].id, 0);
        assert_eq!(t.nodes()[t.cpu(3).unwrap().node].id, 3);
        assert!(t.cpu(6).is_none());
        assert_eq!(t.node_index(3), Some(1));
        assert_eq!(t.nearest_remote_distance(), Some(21));
        assert!(t.has_smt());
    }

    #[test]
    fn json_round_trip_keeps_the_machine() {
        let t = Topology::from_desc(two_node()).unwrap();
        let json = serde_json::to_string(&t).unwrap();
        assert!(json.contains("\"cpus\":[0,1,4,5]"));
        let back: Topology = serde_json::from_str(&json).unwrap();
        assert_eq!(t, back);
    }

    #[test]
    fn rejects_duplicate_cpus_and_bad_distance_rows() {
        let mut d = two_node();
        d.nodes[1].llcs[0].cpus = vec![2, 4];
        assert!(Topology::from_desc(d)
            .unwrap_err()
            .to_string()
            .contains("CPU 4"));
        let mut d = two_node();
        d.nodes[0].distances = vec![10];
        assert!(Topology::from_desc(d)
            .unwrap_err()
            .to_string()
            .contains("distance row"));
        let mut d = two_node();
        d.nodes[0].distances = vec![30, 21];
        assert!(Topology::from_desc(d).is_err());
        let mut d = two_node();
        d.nodes[0].llcs[0].cores = vec![vec![0, 4], vec![1]];
        assert!(Topology::from_desc(d)
            .unwrap_err()
            .to_string()
            .contains("partition"));
    }

    #[test]
    fn memory_only_nodes_are_allowed() {
        let mut d = two_node();
        d.nodes[1].llcs.clear();
        let t = Topology::from_desc(d).unwrap();
        assert_eq!(t.cpu_nodes().collect::<Vec<_>>(), vec![0]);
        assert_eq!(t.nodes()[1].cpus, Vec::<CpuId>::new());
    }

    #[test]
    fn absurd_ids_are_refused_before_anything_is_allocated() {
        let base = crate::topology::spec::parse("2n:1l:2c:1t")
            .expect("spec")
            .to_desc();
        let mut d = base.clone();
        d.nodes[1].llcs[0].cpus.push(u32::MAX);
        let e = Topology::from_desc(d).expect_err("huge CPU id").to_string();
        assert!(e.contains("CPU id 4294967295 is implausibly large"), "{e}");
        let mut d = base;
        d.nodes[1].id = u32::MAX;
        let e = Topology::from_desc(d)
            .expect_err("huge node id")
            .to_string();
        assert!(e.contains("node id 4294967295 is implausibly large"), "{e}");
    }
}
