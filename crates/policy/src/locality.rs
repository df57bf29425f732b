//! Remote-execution cost, generalised from the two-node case.
//!
//! A NUMA penalty `np` is measured over one hop (on a two-node box: remote vs local).
//! On bigger machines memory can be several hops away and spread over several nodes, so
//! the penalty of running on node `at` is taken as the page-weighted mean over the nodes
//! holding the memory of `1 + (np − 1) · hops`, where `hops = (d(mem, at) − 10) /
//! (d_near − 10)` scales the SLIT distance by the nearest remote distance of the machine.
//! On a two-node machine with all memory on one node this is exactly `np` when remote and
//! 1 when local, i.e. the published model.

use numasched_model::snapshot::Process;
use numasched_model::topology::{Topology, LOCAL_DISTANCE};

/// Slowdown factor (≥ 1) for `p` running on node index `at`.
pub fn remote_factor(topo: &Topology, p: &Process, np: f64, at: usize) -> f64 {
    let total = p.rss_bytes();
    if total == 0 || np <= 1.0 {
        return 1.0;
    }
    let near = topo.nearest_remote_distance().unwrap_or(LOCAL_DISTANCE * 2);
    let hop = (near.saturating_sub(LOCAL_DISTANCE)).max(1) as f64;
    let mut factor = 0.0;
    for (&node, &bytes) in &p.memory_bytes {
        let Some(ni) = topo.node_index(node) else {
            continue;
        };
        let d = topo.distance(ni, at).saturating_sub(topo.distance(at, at));
        let hops = d as f64 / hop;
        factor += bytes as f64 / total as f64 * (1.0 + (np - 1.0) * hops);
    }
    factor.max(1.0)
}

/// Fraction of `p`'s resident memory on node index `at`.
pub fn local_fraction(topo: &Topology, p: &Process, at: usize) -> f64 {
    let total = p.rss_bytes();
    if total == 0 {
        return 1.0;
    }
    let id = topo.nodes()[at].id;
    *p.memory_bytes.get(&id).unwrap_or(&0) as f64 / total as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::topology;

    #[test]
    fn two_nodes_reduce_to_the_published_penalty() {
        let t = topology::machine("nehalem-e5520").unwrap();
        let mut p = Process::new(1, "milc");
        p.memory_bytes.insert(0, 1 << 30);
        assert_eq!(remote_factor(&t, &p, 1.35, 0), 1.0);
        assert!((remote_factor(&t, &p, 1.35, 1) - 1.35).abs() < 1e-12);
        p.memory_bytes.insert(1, 1 << 30);
        assert!((remote_factor(&t, &p, 1.35, 1) - 1.175).abs() < 1e-12);
    }

    #[test]
    fn farther_nodes_cost_more() {
        let mut d = topology::spec::build(3, 1, 2, 1, None);
        d.nodes[0].distances = vec![10, 16, 32];
        d.nodes[1].distances = vec![16, 10, 16];
        d.nodes[2].distances = vec![32, 16, 10];
        let t = topology::Topology::from_desc(d).unwrap();
        let mut p = Process::new(1, "x");
        p.memory_bytes.insert(0, 1);
        let near = remote_factor(&t, &p, 1.3, 1);
        let far = remote_factor(&t, &p, 1.3, 2);
        assert!((near - 1.3).abs() < 1e-12);
        assert!(far > near);
    }
}
