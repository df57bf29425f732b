//! The per-node picture `status`, `top` and the metrics show: how busy each node's
//! CPUs are with managed work, how much of its memory those processes hold, and the
//! N-MASS LLC pressure on its caches. Computed from the managed processes only (what
//! numasched places), so it reads as "numasched's view", not as system totals; the
//! node's memory in use comes from sysfs, read by the caller.

use super::status::{NodeView, ProcessView};
use numasched_model::topology::{NodeId, Topology};

/// One view per node, in topology order.
pub fn node_views(topo: &Topology, procs: &[ProcessView]) -> Vec<NodeView> {
    let mut out: Vec<NodeView> = topo
        .nodes()
        .iter()
        .map(|n| NodeView {
            node: n.id,
            cpus: n.cpus.clone(),
            load: 0.0,
            managed_memory_bytes: 0,
            memory_total_bytes: n.memory_bytes,
            memory_used_bytes: None,
            llc_pressure: 0.0,
        })
        .collect();
    for p in procs {
        for (node, bytes) in &p.memory_bytes {
            if let Some(i) = topo.node_index(*node) {
                out[i].managed_memory_bytes += bytes;
            }
        }
        let on: Vec<usize> = p
            .current_cpus
            .iter()
            .filter_map(|c| topo.cpu(*c).map(|cpu| cpu.node))
            .collect();
        if on.is_empty() {
            continue;
        }
        let share = 1.0 / on.len() as f64;
        let home = home_of(p);
        let mpki = p.mpki.unwrap_or(0.0);
        let np = p.numa_penalty.unwrap_or(1.0);
        for i in on {
            out[i].load += p.cpu_demand * share;
            let remote = home.is_some_and(|h| h != topo.nodes()[i].id);
            out[i].llc_pressure += share * if remote { mpki * np } else { mpki };
        }
    }
    // Each demand is CPU time over an epoch read a moment apart from the others, so
    // two busy loops on two CPUs can sum to a little more than 2 (the metrics
    // integration test read more than the machine's CPUs once on a busy run). A node
    // runs at most its CPUs' worth.
    for n in &mut out {
        n.load = n.load.min(n.cpus.len() as f64);
    }
    out
}

fn home_of(p: &ProcessView) -> Option<NodeId> {
    p.memory_bytes
        .iter()
        .filter(|(_, b)| **b > 0)
        .max_by_key(|(n, b)| (**b, std::cmp::Reverse(**n)))
        .map(|(n, _)| *n)
}

/// `MemUsed` of `<sys>/devices/system/node/node<N>/meminfo`, in bytes.
pub fn memory_used(sys: &std::path::Path, node: NodeId) -> Option<u64> {
    let path = sys.join(format!("devices/system/node/node{node}/meminfo"));
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.contains("MemUsed:"))?;
    let kb: u64 = line.split_whitespace().rev().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::character::PenaltySource;
    use numasched_model::topology::CpuId;
    use numasched_model::CpuSet;
    use std::collections::BTreeMap;

    fn view(cpus: &[CpuId], home: NodeId, mpki: f64, np: f64) -> ProcessView {
        ProcessView {
            pid: 1,
            start_time: 0,
            program: "p".into(),
            threads: 1,
            cpu_demand: 1.0,
            memory_bytes: BTreeMap::from([(home, 1 << 20)]),
            memory_from: "numa_maps".into(),
            local_fraction: None,
            mpki: Some(mpki),
            numa_penalty: Some(np),
            source: PenaltySource::Profile,
            basis: None,
            bandwidth_gbps: None,
            current_cpus: cpus.into(),
            planned_cpus: CpuSet::new(),
            reason: String::new(),
            allowed_cpus: None,
            placement_changes: 0,
            waiting: 0.0,
            job: None,
        }
    }

    #[test]
    fn load_memory_and_remote_weighted_pressure_per_node() {
        let t = numasched_model::topology::spec::parse("2n:1l:2c:1t").expect("spec");
        let v = node_views(
            &t,
            &[
                view(&[0], 0, 10.0, 1.5),
                view(&[2], 0, 20.0, 1.5),
                view(&[1, 3], 1, 4.0, 1.2),
            ],
        );
        assert_eq!(v.len(), 2);
        assert!((v[0].load - 1.5).abs() < 1e-12);
        assert!((v[1].load - 1.5).abs() < 1e-12);
        assert_eq!(v[0].managed_memory_bytes, 2 << 20);
        assert_eq!(v[1].managed_memory_bytes, 1 << 20);
        // Node 0: 10 local + half of 4 × 1.2 remote; node 1: 20 × 1.5 remote + 2 local.
        assert!(
            (v[0].llc_pressure - (10.0 + 2.4)).abs() < 1e-9,
            "{}",
            v[0].llc_pressure
        );
        assert!(
            (v[1].llc_pressure - (30.0 + 2.0)).abs() < 1e-9,
            "{}",
            v[1].llc_pressure
        );
    }

    #[test]
    fn a_node_is_never_busier_than_its_cpus() {
        let t = numasched_model::topology::spec::parse("2n:1l:2c:1t").expect("spec");
        let mut a = view(&[0], 0, 1.0, 1.0);
        let mut b = view(&[1], 0, 1.0, 1.0);
        a.cpu_demand = 1.02;
        b.cpu_demand = 1.01;
        let v = node_views(&t, &[a, b]);
        assert_eq!(v[0].load, 2.0);
    }

    #[test]
    fn memused_is_read_from_the_nodes_meminfo() {
        let dir = tempfile::tempdir().expect("tempdir");
        let n = dir.path().join("devices/system/node/node1");
        std::fs::create_dir_all(&n).expect("mkdir");
        std::fs::write(
            n.join("meminfo"),
            "Node 1 MemTotal:  8000 kB\nNode 1 MemUsed:   2000 kB\n",
        )
        .expect("write");
        assert_eq!(memory_used(dir.path(), 1), Some(2000 * 1024));
        assert_eq!(memory_used(dir.path(), 0), None);
    }
}
