//! The simulator's performance model of a NUMA multicore machine.
//!
//! Given a machine ([`Topology`](numasched_model::topology::Topology) +
//! [`MachineParams`]), program [`Profile`]s, where each program's memory lives and where
//! its threads run, it computes every program's steady-state speed and its slowdown
//! against running alone and local.
//! It is the objective the oracle minimises and the ground truth of `sim`/`eval`, so its
//! gains must come from physics: LLC capacity sharing, queueing at memory controllers,
//! interconnect links and buses, remote latency, and time-sharing. The equations and where
//! every number comes from are in `docs/model.md`.
//!
//! A crate of its own on the model and the policies alone: it runs the very policies
//! the daemon runs, and nothing in it can reach the live machine.

#![forbid(unsafe_code)]

pub mod eval;
pub mod fidelity;
mod lru;
pub mod machine;
mod model;
mod network;
mod process;
mod roots;
mod snapshot;
mod timeshare;

pub use machine::{params_for, MachineParams};
pub use model::{simulate, simulate_with_solo, solo_rate, Outcome, ProcessOutcome, ResourceLoad};
pub use network::{LinkEnd, ResourceKind};
pub use process::SimProcess;
// Program profiles are model vocabulary (the profile store reads and writes them too);
// what `simulate` takes, so they are named here as well.
pub use numasched_model::profile::{Class, Profile, ProfileError, ProfileSet};
pub use snapshot::{from_snapshot, objective, SimError};
