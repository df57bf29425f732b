//! The vocabulary every stage of numasched shares, below all of them: the machine
//! ([`topology`]), what is running on it ([`Snapshot`], one [`Process`] record per
//! process, keyed by [`ProcessKey`]), how each process uses the memory system
//! ([`Character`]; a program's [`profile`], the file format users, the profile store and
//! the simulator exchange), and where a policy wants it ([`Plan`]).
//!
//! It names no stage. Observation fills a snapshot, policies read one and return a plan,
//! the actuator and the simulator carry a plan out; none of them has to know the others
//! for the types alone. [`files`] reads the files an operator names (a snapshot, a
//! topology) with the limits and one-line errors every reader needs, and [`size`]
//! parses the byte sizes they write (the config file and the command line alike);
//! [`plural`] writes the counts every message has.

#![forbid(unsafe_code)]

pub mod bounded;
pub mod character;
pub mod cpuset;
pub mod files;
pub mod plan;
pub mod plural;
pub mod profile;
pub mod size;
pub mod snapshot;
#[cfg(any(test, feature = "testing"))]
pub mod testkit;
pub mod topology;

pub use character::{Character, PenaltySource};
pub use cpuset::CpuSet;
pub use plan::{follow_memory, PageMove, Placement, Plan};
pub use snapshot::{Process, ProcessKey, Snapshot, SnapshotError};
