//! Named machines from public specifications. They give the simulator and the tests the
//! machines of the published evaluations and modern shapes we do not own.

use super::model::{LlcDesc, Topology, TopologyDesc, LOCAL_DISTANCE};
use super::spec;

/// Preset names, for help texts and error messages.
pub const NAMES: &[&str] = &[
    "nehalem-e5520",
    "xeon-e5345",
    "epyc-7742-2s",
    "xeon-8380-2s-snc2",
];

pub fn get(name: &str) -> Option<Topology> {
    let desc = match name {
        "nehalem-e5520" => nehalem_e5520(),
        "xeon-e5345" => xeon_e5345(),
        "epyc-7742-2s" => epyc_7742_2s(),
        "xeon-8380-2s-snc2" => xeon_8380_2s_snc2(),
        _ => return None,
    };
    // Presets are fixed data checked by the tests below; a failure here is a bug in
    // this file, so it is reported as "unknown" rather than taking the process down.
    Topology::from_desc(desc).ok()
}

/// Intel Xeon E5520 ×2 (Nehalem-EP, Majo & Gross): 4 cores per processor, one 8 MB L3
/// per processor, 12 GB DDR3 split over the two nodes, SMT off.
fn nehalem_e5520() -> TopologyDesc {
    let mut d = spec::build(2, 1, 4, 1, Some("nehalem-e5520".into()));
    for n in &mut d.nodes {
        n.memory_bytes = 6 << 30;
        n.llcs[0].size_bytes = 8 << 20;
    }
    d
}

/// Intel Xeon E5345 ×2 (Clovertown, Tudu et al.): UMA, each package two dual-core dies,
/// each die's two cores share a 4 MB L2 and a bus controller; one FSB per package.
/// Modelled as one node whose LLC domains are the dies, tagged with their package.
fn xeon_e5345() -> TopologyDesc {
    let mut d = spec::build(1, 4, 2, 1, Some("xeon-e5345".into()));
    let node = &mut d.nodes[0];
    node.memory_bytes = 16 << 30;
    for (die, llc) in node.llcs.iter_mut().enumerate() {
        *llc = LlcDesc {
            size_bytes: 4 << 20,
            package: Some(die as u32 / 2),
            ..llc.clone()
        };
    }
    d
}

/// AMD EPYC 7742 ×2 (Rome, Zen 2) in NPS4 mode: 8 nodes, 256 CPUs.
///
/// - 64 cores / 128 threads per socket, as 8 CCDs of 2 CCXs; each CCX is 4 cores sharing
///   a 16 MB L3 (256 MB per socket): AMD's EPYC 7742 product page.
/// - NPS4 makes each quadrant of the I/O die (2 CCDs = 4 CCXs = 16 cores, 2 of the 8
///   DDR4-3200 channels) a NUMA node: AMD's NUMA-topology and tuning guides for the
///   EPYC 7002 series.
/// - SLIT distances 10 / 12 (same socket) / 32 (other socket): what Linux prints on a
///   two-socket Rome in NPS4 (`numactl -H`), as quoted in those guides.
/// - Memory is our assumption, not a spec: one 32 GiB DIMM per channel, so 64 GiB per
///   node, 512 GiB in all.
fn epyc_7742_2s() -> TopologyDesc {
    let mut d = spec::build(8, 4, 4, 2, Some("epyc-7742-2s".into()));
    set_sockets(&mut d, 4, 12, 32);
    for n in &mut d.nodes {
        n.memory_bytes = 64 << 30;
        for llc in &mut n.llcs {
            llc.size_bytes = 16 << 20;
        }
    }
    d
}

/// Intel Xeon Platinum 8380 ×2 (Ice Lake-SP) with sub-NUMA clustering SNC2: 4 nodes,
/// 160 CPUs.
///
/// - 40 cores / 80 threads and 60 MB L3 (1.5 MB per core) per socket, 8 DDR4-3200
///   channels: Intel ARK, Xeon Platinum 8380.
/// - SNC2 splits each socket into two domains of 20 cores and 4 channels, and maps a
///   domain's memory to the L3 slices of that domain, so each node is modelled with
///   30 MB of LLC (Intel's Xeon Scalable SNC documentation). Linux still reports the L3
///   socket-wide; the sysfs reader splits it the same way.
/// - SLIT distances 10 / 11 (other domain, same socket) / 20 (other socket), as Linux
///   prints them on two-socket Ice Lake-SP with SNC2.
/// - Memory is our assumption: one 32 GiB DIMM per channel, 128 GiB per node, 512 GiB
///   in all.
fn xeon_8380_2s_snc2() -> TopologyDesc {
    let mut d = spec::build(4, 1, 20, 2, Some("xeon-8380-2s-snc2".into()));
    set_sockets(&mut d, 2, 11, 20);
    for n in &mut d.nodes {
        n.memory_bytes = 128 << 30;
        n.llcs[0].size_bytes = 30 << 20;
    }
    d
}

/// Groups consecutive nodes into sockets: sets each LLC's package and the distance rows
/// (local, same socket, other socket).
fn set_sockets(d: &mut TopologyDesc, nodes_per_socket: u32, same: u32, other: u32) {
    let socket = |i: usize| i as u32 / nodes_per_socket;
    let count = d.nodes.len();
    for (i, n) in d.nodes.iter_mut().enumerate() {
        n.distances = (0..count)
            .map(|j| match (i == j, socket(i) == socket(j)) {
                (true, _) => LOCAL_DISTANCE,
                (false, true) => same,
                (false, false) => other,
            })
            .collect();
        for llc in &mut n.llcs {
            llc.package = Some(socket(i));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_builds() {
        for name in NAMES {
            assert!(get(name).is_some(), "{name}");
        }
        assert!(get("pentium-pro").is_none());
    }

    #[test]
    fn nehalem_matches_the_paper_machine() {
        let t = get("nehalem-e5520").unwrap();
        assert_eq!(t.nodes().len(), 2);
        assert_eq!(t.llcs().len(), 2);
        assert_eq!(t.nodes()[0].cpus, vec![0, 1, 2, 3]);
        assert_eq!(t.llcs()[1].size_bytes, 8 << 20);
        assert_eq!(t.total_memory(), 12 << 30);
    }

    #[test]
    fn e5345_has_four_dies_on_two_packages() {
        let t = get("xeon-e5345").unwrap();
        assert_eq!(t.nodes().len(), 1);
        let pk: Vec<u32> = t.llcs().iter().map(|l| l.package).collect();
        assert_eq!(pk, vec![0, 0, 1, 1]);
        assert!(t.llcs().iter().all(|l| l.cpus.len() == 2));
    }

    #[test]
    fn epyc_7742_has_eight_nodes_of_four_ccx() {
        let t = get("epyc-7742-2s").unwrap();
        assert_eq!(t.nodes().len(), 8);
        assert_eq!(t.llcs().len(), 32);
        assert_eq!(t.cores().len(), 128);
        assert_eq!(t.num_cpus(), 256);
        assert!(t.has_smt());
        // Linux numbering: first threads 0-127, their siblings 128-255.
        assert_eq!(
            t.nodes()[0].cpus,
            [(0..16).collect::<Vec<u32>>(), (128..144).collect()].concat()
        );
        assert_eq!(t.cores()[t.cpu(5).unwrap().core].cpus, vec![5, 133]);
        assert_eq!(t.llcs()[1].cpus, vec![4, 5, 6, 7, 132, 133, 134, 135]);
        assert!(t.llcs().iter().all(|l| l.size_bytes == 16 << 20));
        assert_eq!(
            t.llcs().iter().map(|l| l.size_bytes).sum::<u64>(),
            512 << 20
        );
        assert_eq!(t.nodes()[0].distances, vec![10, 12, 12, 12, 32, 32, 32, 32]);
        assert_eq!(t.nodes()[5].distances, vec![32, 32, 32, 32, 12, 10, 12, 12]);
        assert_eq!(t.llcs()[15].package, 0);
        assert_eq!(t.llcs()[16].package, 1);
        assert_eq!(t.total_memory(), 512 << 30);
    }

    #[test]
    fn xeon_8380_snc2_has_four_nodes_of_twenty_cores() {
        let t = get("xeon-8380-2s-snc2").unwrap();
        assert_eq!(t.nodes().len(), 4);
        assert_eq!(t.llcs().len(), 4);
        assert_eq!(t.cores().len(), 80);
        assert_eq!(t.num_cpus(), 160);
        assert_eq!(
            t.nodes()[1].cpus,
            [(20..40).collect::<Vec<u32>>(), (100..120).collect()].concat()
        );
        assert_eq!(t.cores()[t.cpu(99).unwrap().core].cpus, vec![19, 99]);
        assert!(t.llcs().iter().all(|l| l.size_bytes == 30 << 20));
        assert_eq!(t.nodes()[0].distances, vec![10, 11, 20, 20]);
        assert_eq!(t.nodes()[3].distances, vec![20, 20, 11, 10]);
        let pk: Vec<u32> = t.llcs().iter().map(|l| l.package).collect();
        assert_eq!(pk, vec![0, 0, 1, 1]);
        assert_eq!(t.total_memory(), 512 << 30);
        assert_eq!(t.nearest_remote_distance(), Some(11));
    }
}
