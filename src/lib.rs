//! numasched: NUMA- and cache-contention-aware placement of processes.
//!
//! The pipeline, one folder per stage: [`topology`] (the machine) → [`characterise`]
//! (what each process does to the memory system) → [`policy`] (pure snapshot → plan) →
//! apply; [`cli`] is the command line over all of it. [`workload`] is a test load to run
//! under the scheduler, outside the pipeline.

pub mod apply;
pub mod characterise;
pub mod cli;
pub mod observe;
pub mod policy;
pub mod sim;
pub mod topology;
pub mod workload;
