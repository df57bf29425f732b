//! The evaluation suites: which machine, which workloads, which allocation maps.
//!
//! `nmass` is the evaluation of Majo & Gross (ISMM 2011) on their Nehalem machine;
//! `membus` the bus study of Tudu et al. on the Xeon E5345; `cmload` the scaling study
//! of Kang et al. (2 to 64 processes, half compute-bound, half streaming).

use crate::policy::{Process, Snapshot};
use crate::topology::{self, Topology};

use super::runner::Case;

/// What the suites need to know of a program to build a snapshot (from its profile).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgramFacts {
    pub mpki: f64,
    pub numa_penalty: f64,
    pub footprint_bytes: u64,
    pub bandwidth_gbps: f64,
    pub cache_reuse: f64,
}

/// Facts of a program on a machine (its solo bandwidth depends on the machine).
pub type Lookup<'a> = &'a dyn Fn(&Topology, &str) -> Option<ProgramFacts>;

#[derive(Debug, Clone)]
pub struct Suite {
    pub name: &'static str,
    pub machine: String,
    pub policies: &'static [&'static str],
    pub cases: Vec<Case>,
    /// Whether policies may move pages (at a modelled cost).
    pub migration: bool,
}

pub const NAMES: &[&str] = &["nmass", "nmass-migrate", "membus", "cmload"];

/// Workloads of the published N-MASS evaluation (M = memory-bound, C = compute-bound).
pub const NMASS_WORKLOADS: &[(&str, &[&str])] = &[
    ("WL1", &["soplex", "sphinx3", "gamess", "namd"]),
    ("WL2", &["soplex", "mcf", "gamess", "gobmk"]),
    ("WL3", &["mcf", "libquantum", "povray", "gamess"]),
    ("WL4", &["mcf", "omnetpp", "h264ref", "namd"]),
    ("WL5", &["milc", "libquantum", "povray", "perlbench"]),
    ("WL6", &["sphinx3", "gcc", "namd", "gamess"]),
    ("WL7", &["lbm", "milc", "sphinx3", "gobmk"]),
    ("WL8", &["lbm", "milc", "mcf", "namd"]),
    ("WL9", &["mcf", "milc", "soplex", "lbm"]),
    (
        "WL10",
        &[
            "lbm",
            "milc",
            "mcf",
            "namd",
            "gobmk",
            "perlbench",
            "h264ref",
            "povray",
        ],
    ),
    (
        "WL11",
        &[
            "mcf",
            "milc",
            "soplex",
            "lbm",
            "gobmk",
            "perlbench",
            "namd",
            "povray",
        ],
    ),
];

/// The 8 maps of a 4-process workload on 2 nodes up to symmetry: 50% homed on node 0,
/// 75%, and 100%.
pub const MAPS_4: &[&str] = &[
    "1100", "1010", "1001", "1000", "0100", "0010", "0001", "0000",
];

/// For 8 processes: all on one node, balanced maps (memory-bound and compute-bound
/// programs split in different ways), and 75% maps.
pub const MAPS_8: &[&str] = &[
    "11110000", "00001111", "11001100", "10101010", "11000000", "00110000", "00000011", "00000000",
];

/// With page migration: what moving memory adds to placement alone.
pub const MIGRATE_POLICIES: &[&str] = &[
    "linux",
    "maxlocal",
    "nmass",
    "numad",
    "oracle",
    "auto",
    "auto-migrate",
];

pub const NMASS_POLICIES: &[&str] = &[
    "linux",
    "maxlocal",
    "nmass",
    "nmass-regression",
    "membus",
    "cmload",
    "numad",
    "oracle",
    "auto",
];

/// Builds a suite by name, on its own machine or on `machine` (preset or spec string).
/// Unknown programs in the lookup are reported by name.
pub fn suite(name: &str, machine: Option<&str>, lookup: Lookup) -> Result<Suite, String> {
    let on = |own: &str| resolve(machine.unwrap_or(own));
    match name {
        "nmass" => nmass(on("nehalem-e5520")?, lookup),
        "nmass-migrate" => {
            let mut s = nmass(on("nehalem-e5520")?, lookup)?;
            s.name = "nmass-migrate";
            s.policies = MIGRATE_POLICIES;
            s.migration = true;
            for c in &mut s.cases {
                c.suite = s.name.to_string();
            }
            Ok(s)
        }
        "membus" => membus(on("xeon-e5345")?, lookup),
        "cmload" => cmload(on("2n:1l:4c:1t")?, lookup),
        other => Err(format!(
            "unknown suite '{other}' (known: {})",
            NAMES.join(", ")
        )),
    }
}

fn nmass(topo: Topology, lookup: Lookup) -> Result<Suite, String> {
    let mut cases = Vec::new();
    for (wl, programs) in NMASS_WORKLOADS {
        let maps = if programs.len() == 4 { MAPS_4 } else { MAPS_8 };
        for map in maps {
            cases.push(case("nmass", wl, map, &topo, programs, lookup)?);
        }
    }
    Ok(Suite {
        name: "nmass",
        machine: topo.name().unwrap_or("custom").to_string(),
        policies: NMASS_POLICIES,
        cases,
        migration: false,
    })
}

fn membus(topo: Topology, lookup: Lookup) -> Result<Suite, String> {
    let programs = [
        "lbm", "lbm", "soplex", "soplex", "gromacs", "gromacs", "hmmer", "hmmer",
    ];
    Ok(Suite {
        name: "membus",
        machine: topo.name().unwrap_or("custom").to_string(),
        policies: &["linux", "membus", "auto", "oracle"],
        cases: vec![case(
            "membus", "bus8", "00000000", &topo, &programs, lookup,
        )?],
        migration: false,
    })
}

fn cmload(topo: Topology, lookup: Lookup) -> Result<Suite, String> {
    let mut cases = Vec::new();
    for n in [2usize, 4, 8, 16, 32, 64] {
        let programs: Vec<&str> = (0..n)
            .map(|i| if i % 2 == 0 { "compute" } else { "stream" })
            .collect();
        // Memory where first touch would put it under an even spread, and the skewed
        // case where everything was allocated on node 0.
        let spread: String = (0..n)
            .map(|i| if (i / 2) % 2 == 0 { '0' } else { '1' })
            .collect();
        let skewed = "0".repeat(n);
        for map in [spread, skewed] {
            cases.push(case(
                "cmload",
                &format!("n{n}"),
                &map,
                &topo,
                &programs,
                lookup,
            )?);
        }
    }
    Ok(Suite {
        name: "cmload",
        machine: topo.name().unwrap_or("custom").to_string(),
        policies: &["linux", "cmload", "auto", "oracle"],
        cases,
        migration: false,
    })
}

fn resolve(name: &str) -> Result<Topology, String> {
    topology::machine(name).map_err(|e| e.to_string())
}

/// A snapshot of `programs` with their memory homed by `map` (one digit per program:
/// the node index), none of them placed yet.
pub fn case(
    suite: &str,
    workload: &str,
    map: &str,
    topo: &Topology,
    programs: &[&str],
    lookup: Lookup,
) -> Result<Case, String> {
    if map.len() != programs.len() {
        return Err(format!(
            "map '{map}' has {} homes for {} programs",
            map.len(),
            programs.len()
        ));
    }
    let mut processes = Vec::with_capacity(programs.len());
    for (i, (prog, home)) in programs.iter().zip(map.chars()).enumerate() {
        let facts = lookup(topo, prog).ok_or_else(|| format!("unknown program '{prog}'"))?;
        let node = home
            .to_digit(10)
            .and_then(|d| topo.nodes().get(d as usize))
            .ok_or_else(|| format!("map '{map}': no node '{home}' on this machine"))?;
        let mut p = Process::new(1000 + i as u32, prog);
        p.mpki = Some(facts.mpki);
        p.numa_penalty = Some(facts.numa_penalty);
        p.bandwidth_gbps = Some(facts.bandwidth_gbps);
        p.cache_reuse = Some(facts.cache_reuse);
        p.memory_bytes.insert(node.id, facts.footprint_bytes);
        processes.push(p);
    }
    Ok(Case {
        suite: suite.to_string(),
        workload: workload.to_string(),
        map: map.to_string(),
        snapshot: Snapshot {
            topology: topo.clone(),
            processes,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(_: &Topology, _: &str) -> Option<ProgramFacts> {
        Some(ProgramFacts {
            mpki: 10.0,
            numa_penalty: 1.2,
            footprint_bytes: 1 << 30,
            bandwidth_gbps: 2.0,
            cache_reuse: 0.5,
        })
    }

    #[test]
    fn nmass_suite_has_every_workload_and_map() {
        let s = suite("nmass", None, &facts).unwrap();
        assert_eq!(s.cases.len(), 9 * 8 + 2 * MAPS_8.len());
        let wl9 = s
            .cases
            .iter()
            .find(|c| c.workload == "WL9" && c.map == "1100")
            .unwrap();
        let homes: Vec<_> = wl9
            .snapshot
            .processes
            .iter()
            .map(|p| p.home_node())
            .collect();
        assert_eq!(homes, vec![Some(1), Some(1), Some(0), Some(0)]);
    }

    #[test]
    fn maps_of_four_cover_all_sixteen_up_to_symmetry() {
        // Every 4-digit map or its mirror (0↔1) is in the list.
        for m in 0..16u32 {
            let s: String = (0..4)
                .map(|b| if m >> (3 - b) & 1 == 1 { '1' } else { '0' })
                .collect();
            let mirror: String = s
                .chars()
                .map(|c| if c == '0' { '1' } else { '0' })
                .collect();
            assert!(
                MAPS_4.contains(&s.as_str()) || MAPS_4.contains(&mirror.as_str()),
                "{s}"
            );
        }
    }

    #[test]
    fn bad_names_are_reported() {
        assert!(suite("spec2017", None, &facts)
            .unwrap_err()
            .contains("unknown suite"));
        let none = |_: &Topology, _: &str| None;
        assert!(suite("nmass", None, &none)
            .unwrap_err()
            .contains("unknown program"));
        let topo = topology::machine("nehalem-e5520").unwrap();
        assert!(case("s", "w", "02", &topo, &["a", "b"], &facts)
            .unwrap_err()
            .contains("no node"));
        assert!(case("s", "w", "0", &topo, &["a", "b"], &facts)
            .unwrap_err()
            .contains("1 homes"));
    }
}
