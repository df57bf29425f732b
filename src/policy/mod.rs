//! Placement policies: pure functions from a [`Snapshot`] to a [`Plan`].
//!
//! No policy reads a file, a clock or a global; that is what lets the daemon, `plan`, the
//! simulator and the tests run the very same code. Each policy module's doc names the
//! algorithm and where it comes from.

pub mod alloc;
pub mod locality;
pub mod plan;
pub mod snapshot;

pub use plan::{PageMove, Placement, Plan};
pub use snapshot::{Process, Snapshot, SnapshotError};

/// A placement policy. Implementations hold only their parameters.
pub trait Policy: Send + Sync {
    fn name(&self) -> &str;
    fn plan(&self, snapshot: &Snapshot) -> Plan;
}

/// Names accepted by `--policy`.
pub const NAMES: &[&str] = &[];

#[derive(Debug, thiserror::Error)]
#[error("unknown policy '{0}' (known: {known})", known = NAMES.join(", "))]
pub struct UnknownPolicy(pub String);

/// Builds a policy by name with its default parameters.
pub fn by_name(name: &str) -> Result<Box<dyn Policy>, UnknownPolicy> {
    Err(UnknownPolicy(name.to_string()))
}
