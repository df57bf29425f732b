//! The machine: where CPUs, caches and memory are, and how far apart.
//!
//! Modelled after scx_utils' Topology → Node → LLC → Core → CPU, with the addition of a
//! node distance matrix and per-node memory, which a NUMA placement needs.

pub mod cpulist;
mod error;
mod model;
pub mod presets;
pub mod spec;
pub mod sysfs;

pub use error::TopologyError;
pub use model::{
    Core, Cpu, CpuId, Llc, LlcDesc, Node, NodeDesc, NodeId, Topology, TopologyDesc, LOCAL_DISTANCE,
};

/// What `--machine` of `sim` and `eval` calls the machine they run on (read from
/// sysfs, which [`machine`] does not do).
pub const THIS: &str = "this";

/// Resolves `--machine`: a preset name first, then a spec string.
pub fn machine(name: &str) -> Result<Topology, TopologyError> {
    if let Some(t) = presets::get(name) {
        return Ok(t);
    }
    if name.contains(':') {
        return spec::parse(name);
    }
    Err(TopologyError::UnknownMachine {
        name: name.to_string(),
        presets: presets::NAMES.join(", "),
    })
}
