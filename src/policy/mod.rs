//! Placement policies: pure functions from a [`Snapshot`] to a [`Plan`].
//!
//! No policy reads a file, a clock or a global; that is what lets the daemon, `plan`, the
//! simulator and the tests run the very same code. Each policy module's doc names the
//! algorithm and where it comes from.

pub mod alloc;
pub mod auto;
pub mod autonuma;
pub mod cmload;
pub mod granularity;
pub mod linux;
pub mod locality;
pub mod maxlocal;
pub mod membus;
pub mod nmass;
pub mod numad;
pub mod oracle;
pub mod plan;
pub mod rotation;
pub mod snapshot;
#[cfg(test)]
pub(crate) mod testkit;

pub use granularity::{Granular, Pin};
pub use plan::{follow_memory, PageMove, Placement, Plan};
pub use snapshot::{Process, ProcessKey, Snapshot, SnapshotError};

/// A placement policy. Implementations hold only their parameters.
pub trait Policy: Send + Sync {
    fn name(&self) -> &str;
    fn plan(&self, snapshot: &Snapshot) -> Plan;
    /// Whether the plan depends on where processes run now (`current_cpus`). Policies
    /// that only nudge (numad, load balancing) do; the simulator then evaluates them
    /// from every starting placement the kernel could have left, not from one.
    fn uses_current_placement(&self) -> bool {
        false
    }
}

/// Names accepted by `--policy`.
pub const NAMES: &[&str] = &[
    "auto",
    "auto-migrate",
    "autonuma",
    "linux",
    "maxlocal",
    "nmass",
    "nmass-regression",
    "membus",
    "cmload",
    "numad",
];

#[derive(Debug, thiserror::Error)]
#[error("unknown policy '{0}' (known: {known})", known = NAMES.join(", "))]
pub struct UnknownPolicy(pub String);

/// Builds a policy by name with its default parameters.
pub fn by_name(name: &str) -> Result<Box<dyn Policy>, UnknownPolicy> {
    Ok(match name {
        "auto" => Box::new(auto::Auto::default()),
        "auto-migrate" => Box::new(auto::Auto {
            params: auto::AutoParams {
                migrate: true,
                ..Default::default()
            },
        }),
        "autonuma" => Box::new(autonuma::AutoNuma::default()),
        "linux" => Box::new(linux::Linux),
        "maxlocal" => Box::new(maxlocal::MaxLocal),
        "nmass" => Box::new(nmass::Nmass::default()),
        "nmass-regression" => Box::new(nmass::Nmass {
            params: nmass::NmassParams {
                regression_penalty: true,
                ..Default::default()
            },
        }),
        "membus" => Box::new(membus::MemBus::default()),
        "cmload" => Box::new(cmload::CmLoad::default()),
        "numad" => Box::new(numad::Numad::default()),
        _ => return Err(UnknownPolicy(name.to_string())),
    })
}
