//! numasched: NUMA- and cache-contention-aware placement of processes.
//!
//! The pipeline, one folder per stage: [`topology`] (the machine) → [`observe`] (what
//! /proc and the sensors say) → [`characterise`] (what each process does to the memory
//! system) → [`policy`] (pure snapshot → plan) → [`apply`] (the only code that changes
//! anything). [`daemon`] runs that pipeline every epoch on the live machine, [`sim`]
//! runs the same policies on modelled machines, and [`cli`] is the command line over
//! all of it. [`workload`] is a test load to run under the scheduler, outside the
//! pipeline.

// The workspace's lints (`[workspace.lints]` in Cargo.toml), for the library alone; the
// thresholds and the test exemption are in clippy.toml.
#![deny(
    clippy::unwrap_used,
    clippy::undocumented_unsafe_blocks,
    clippy::too_many_lines
)]

pub mod cli;
pub mod flags;
pub mod workload;

// The layers below, as crates of their own (docs/architecture.md), under the names the
// pipeline gives them.
pub use numasched_daemon as daemon;
pub use numasched_linux::{apply, characterise, observe};
pub use numasched_model as model;
pub use numasched_model::{files, topology};
pub use numasched_policy as policy;
pub use numasched_sim as sim;
