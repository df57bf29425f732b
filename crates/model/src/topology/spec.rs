//! Synthetic machines from a short spec string, `4n:2l:4c:2t` = 4 nodes × 2 LLCs per
//! node × 4 cores per LLC × 2 hardware threads per core. Used by the simulator,
//! benchmarks and tests to build any shape without a fixture.
//!
//! CPU numbering follows Linux on x86: first thread of every core in node order, then the
//! second threads, so SMT siblings are `c` and `c + cores`. Every node gets 16 GiB and
//! 32 MiB of LLC per domain; distances are 10 locally and 21 between nodes, the values
//! a two-socket Intel server reports.

use super::error::TopologyError;
use super::model::{LlcDesc, NodeDesc, Topology, TopologyDesc, LOCAL_DISTANCE};

const NODE_MEMORY: u64 = 16 << 30;
const LLC_SIZE: u64 = 32 << 20;
const REMOTE_DISTANCE: u32 = 21;
/// Keeps a typo like `400n` from allocating a machine the size of a data centre.
const MAX_CPUS: u64 = 8192;

pub fn parse(spec: &str) -> Result<Topology, TopologyError> {
    let err = |what: String| TopologyError::Spec {
        spec: spec.to_string(),
        what,
    };
    let parts: Vec<&str> = spec.trim().split(':').collect();
    if parts.len() != 4 {
        return Err(err(format!(
            "expected 4 fields NODESn:LLCSl:CORESc:THREADSt, got {}",
            parts.len()
        )));
    }
    let mut vals = [0u32; 4];
    for (i, (part, suffix)) in parts.iter().zip(['n', 'l', 'c', 't']).enumerate() {
        let digits = part
            .strip_suffix(suffix)
            .ok_or_else(|| err(format!("field {} ('{part}') must end in '{suffix}'", i + 1)))?;
        let v: u32 = digits
            .parse()
            .map_err(|_| err(format!("field {} ('{part}') is not a count", i + 1)))?;
        if v == 0 {
            return Err(err(format!(
                "field {} ('{part}') must be at least 1",
                i + 1
            )));
        }
        vals[i] = v;
    }
    let [nodes, llcs, cores, threads] = vals;
    let total = nodes as u64 * llcs as u64 * cores as u64 * threads as u64;
    if total > MAX_CPUS {
        return Err(err(format!(
            "{total} CPUs is more than the {MAX_CPUS} supported"
        )));
    }
    Topology::from_desc(build(
        nodes,
        llcs,
        cores,
        threads,
        Some(spec.trim().to_string()),
    ))
}

/// Builds the description of a regular machine; presets reuse it and adjust sizes.
pub fn build(
    nodes: u32,
    llcs: u32,
    cores: u32,
    threads: u32,
    name: Option<String>,
) -> TopologyDesc {
    let total_cores = nodes * llcs * cores;
    let node_descs = (0..nodes)
        .map(|n| NodeDesc {
            id: n,
            cpus: Vec::new(),
            memory_bytes: NODE_MEMORY,
            distances: (0..nodes)
                .map(|m| {
                    if m == n {
                        LOCAL_DISTANCE
                    } else {
                        REMOTE_DISTANCE
                    }
                })
                .collect(),
            llcs: (0..llcs)
                .map(|l| {
                    let first_core = (n * llcs + l) * cores;
                    let groups: Vec<Vec<u32>> = (0..cores)
                        .map(|c| {
                            (0..threads)
                                .map(|t| first_core + c + t * total_cores)
                                .collect()
                        })
                        .collect();
                    LlcDesc {
                        cpus: groups.iter().flatten().copied().collect(),
                        size_bytes: LLC_SIZE,
                        cores: if threads > 1 { groups } else { Vec::new() },
                        package: None,
                    }
                })
                .collect(),
        })
        .collect();
    TopologyDesc {
        name,
        nodes: node_descs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_named_shape() {
        let t = parse("4n:2l:4c:2t").unwrap();
        assert_eq!(t.nodes().len(), 4);
        assert_eq!(t.llcs().len(), 8);
        assert_eq!(t.cores().len(), 32);
        assert_eq!(t.num_cpus(), 64);
        // SMT siblings are c and c + 32.
        let core = &t.cores()[t.cpu(5).unwrap().core];
        assert_eq!(core.cpus, vec![5, 37]);
        assert_eq!(t.nodes()[1].cpus.len(), 16);
        assert_eq!(t.distance(0, 3), 21);
    }

    #[test]
    fn malformed_specs_say_what_is_wrong() {
        for (s, needle) in [
            ("4n:2l:4c", "4 fields"),
            ("4n:2x:4c:2t", "must end in 'l'"),
            ("4n:2l:0c:2t", "at least 1"),
            ("4n:2l:ac:2t", "not a count"),
            ("512n:8l:8c:2t", "supported"),
        ] {
            let e = parse(s).unwrap_err().to_string();
            assert!(e.contains(needle), "{s}: {e}");
            assert!(e.contains(s), "{s}: {e}");
        }
    }
}
