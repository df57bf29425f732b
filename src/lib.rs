//! numasched: NUMA- and cache-contention-aware placement of processes.
//!
//! The pipeline, one folder per stage: [`topology`] (the machine) → [`observe`] (what
//! /proc and the sensors say) → [`characterise`] (what each process does to the memory
//! system) → [`policy`] (pure snapshot → plan) → [`apply`] (the only code that changes
//! anything). [`daemon`] runs that pipeline every epoch on the live machine, [`sim`]
//! runs the same policies on modelled machines, and [`cli`] is the command line over
//! all of it. [`workload`] is a test load to run under the scheduler, outside the
//! pipeline.

// Habits the build enforces (thresholds and the test exemption in clippy.toml): no
// unwrap on what can be wrong at run time, every unsafe block says why it is sound,
// and functions short enough to read (`docs/architecture.md`).
#![deny(
    clippy::unwrap_used,
    clippy::undocumented_unsafe_blocks,
    clippy::too_many_lines
)]

pub mod apply;
pub mod characterise;
pub mod cli;
pub mod daemon;
pub mod files;
pub mod observe;
pub mod policy;
pub mod sim;
pub mod topology;
pub mod workload;
