//! The integration tests that need no real process of their own to act on: the command
//! line, the daemon on a fake machine, the simulator and its findings, parsers, the
//! packaging and the layering. One binary, one module per subject, linked once.

#[path = "../common/mod.rs"]
mod common;

mod bad_files;
mod cli_ops;
mod cli_plan;
mod cli_profile;
mod cli_sim_eval;
mod cli_top;
mod cli_topo;
mod cli_workload;
mod daemon_engine;
mod daemon_metrics;
mod daemon_privileges;
mod docs_links;
mod eval_findings;
mod fidelity;
mod layering;
mod observe_scan;
mod packaging;
mod parsers_props;
mod policy_props;
mod sim_model;
mod topology_sysfs;
