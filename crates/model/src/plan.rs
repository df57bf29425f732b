//! What a policy decides: a CPU set per process, optional page moves, and for each
//! decision one line of why, so an operator can audit the scheduler.

use serde::{Deserialize, Serialize};

use crate::cpuset::CpuSet;
use crate::snapshot::Snapshot;
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
    pub cpus: CpuSet,
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
    pub fn new(
        topo: &Topology,
        pid: u32,
        cpus: impl IntoIterator<Item = CpuId>,
        reason: String,
    ) -> Placement {
        let cpus: CpuSet = cpus.into_iter().collect();
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
            cpus: CpuSet::new(),
            nodes: Vec::new(),
            reason,
        }
    }
}

impl Plan {
    /// The placement of `pid`, found by identity rather than by position: readers
    /// that walk a snapshot must not rely on a plan listing its processes in the same
    /// order.
    pub fn placement(&self, pid: u32) -> Option<&Placement> {
        self.placements.iter().find(|pl| pl.pid == pid)
    }

    pub fn new(policy: &str, placements: Vec<Placement>) -> Plan {
        Plan {
            policy: policy.to_string(),
            placements,
            page_moves: Vec::new(),
            proven_optimal: None,
        }
    }
}

/// Page moves that bring every process's memory to the node it is placed on (processes
/// placed within one node only), largest first. Policies that migrate filter these by
/// what each move is worth; the simulator's oracle uses them as the "memory follows"
/// variant of a placement.
pub fn follow_memory(snapshot: &Snapshot, plan: &Plan) -> Vec<PageMove> {
    let mut moves = Vec::new();
    for (p, pl) in snapshot.processes.iter().zip(&plan.placements) {
        let [to] = pl.nodes.as_slice() else { continue };
        // Pages under an explicit memory policy stay where their owner put them (the
        // actuator leaves those mappings out); which node holds them is not known,
        // so each node keeps the same share.
        let movable = 1.0 - (p.policy_bytes as f64 / p.rss_bytes().max(1) as f64).min(1.0);
        for (&from, &bytes) in &p.memory_bytes {
            let bytes = (bytes as f64 * movable).round() as u64;
            if from != *to && bytes > 0 {
                moves.push(PageMove {
                    pid: p.pid,
                    from_node: from,
                    to_node: *to,
                    bytes,
                    reason: format!("memory follows the process to node {to}"),
                });
            }
        }
    }
    moves.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.pid.cmp(&b.pid)));
    moves
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::nehalem_workload;

    /// What a memory policy holds does not follow: all of it held, nothing moves;
    /// half, half.
    #[test]
    fn memory_under_an_explicit_policy_stays() {
        let mut s = nehalem_workload(&["mcf"], "0");
        let plan = Plan::new(
            "t",
            vec![Placement::new(&s.topology, 100, vec![4], "t".into())],
        );
        let all = s.processes[0].rss_bytes();
        s.processes[0].policy_bytes = all;
        assert!(follow_memory(&s, &plan).is_empty());
        s.processes[0].policy_bytes = all / 2;
        let moves = follow_memory(&s, &plan);
        assert_eq!(moves.len(), 1);
        assert_eq!(moves[0].bytes, all / 2);
    }

    #[test]
    fn memory_follows_only_processes_placed_away_from_it() {
        let s = nehalem_workload(&["mcf", "milc", "soplex"], "000");
        let place = |pid: u32, cpus: Vec<u32>| Placement::new(&s.topology, pid, cpus, "t".into());
        let plan = Plan::new(
            "t",
            vec![
                place(100, vec![4]),
                place(101, vec![0]),
                place(102, vec![3, 4]), // spans both nodes: left alone
            ],
        );
        let moves = follow_memory(&s, &plan);
        assert_eq!(moves.len(), 1);
        assert_eq!(
            (moves[0].pid, moves[0].from_node, moves[0].to_node),
            (100, 0, 1)
        );
        assert_eq!(moves[0].bytes, 1 << 30);
    }
}
