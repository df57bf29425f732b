//! Named machines from public specifications. They give the simulator and the tests the
//! machines of the published evaluations (SPEC §5) and modern shapes we do not own.

use super::model::{LlcDesc, Topology, TopologyDesc};
use super::spec;

/// Preset names, for help texts and error messages.
pub const NAMES: &[&str] = &["nehalem-e5520", "xeon-e5345"];

pub fn get(name: &str) -> Option<Topology> {
    let desc = match name {
        "nehalem-e5520" => nehalem_e5520(),
        "xeon-e5345" => xeon_e5345(),
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
}
