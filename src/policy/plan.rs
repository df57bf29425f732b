//! What a policy decides: a CPU set per process, optional page moves, and for each
//! decision one line of why, so an operator can audit the scheduler.

use serde::{Deserialize, Serialize};

use crate::topology::{CpuId, NodeId, Topology};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub policy: String,
    /// One per snapshot process, in snapshot order.
    pub placements: Vec<Placement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub page_moves: Vec<PageMove>,
    /// Set by searching policies: whether the plan is known to be the best one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proven_optimal: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    pub pid: u32,
    /// CPUs the process's threads may run on. Empty = leave the process alone.
    pub cpus: Vec<CpuId>,
    /// Nodes those CPUs belong to (derived, for reading).
    #[serde(default)]
    pub nodes: Vec<NodeId>,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageMove {
    pub pid: u32,
    pub from_node: NodeId,
    pub to_node: NodeId,
    pub bytes: u64,
    pub reason: String,
}

impl Placement {
    pub fn new(topo: &Topology, pid: u32, mut cpus: Vec<CpuId>, reason: String) -> Placement {
        cpus.sort_unstable();
        cpus.dedup();
        let mut nodes: Vec<NodeId> = cpus
            .iter()
            .filter_map(|&c| topo.cpu(c).map(|cpu| topo.nodes()[cpu.node].id))
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        Placement {
            pid,
            cpus,
            nodes,
            reason,
        }
    }

    /// Leaves the process where it is.
    pub fn unchanged(pid: u32, reason: String) -> Placement {
        Placement {
            pid,
            cpus: Vec::new(),
            nodes: Vec::new(),
            reason,
        }
    }
}

impl Plan {
    pub fn new(policy: &str, placements: Vec<Placement>) -> Plan {
        Plan {
            policy: policy.to_string(),
            placements,
            page_moves: Vec::new(),
            proven_optimal: None,
        }
    }
}
