//! The live scheduler: the epoch loop that ties observe → characterise → policy →
//! apply together on a real machine, and what surrounds it.
//!
//! - [`config`]: options from the TOML file and the command line, validated once.
//! - [`glob`]: the name and cgroup patterns, compiled once.
//! - [`select`]: which processes are managed (names, pids, cgroups, thresholds, or the
//!   process tree of `run`).
//! - [`trigger`]: when to re-plan (MPKI moved > 20%, arrivals, departures), with
//!   hysteresis, at once when numasched's own set holds a process back; [`need`]: how
//!   many CPUs a process needs (peak demand, run-queue delay); [`stabilise`]: not moving a process between equivalent cores;
//!   [`pins`]: numasched's own narrowing is not someone else's pin.
//! - [`paths`]: the journal, store and socket paths, checked before anything is written.
//! - [`recovery`]: the journal on disk, so a restart after SIGKILL undoes what the
//!   killed daemon changed.
//! - [`engine`]: one epoch, on any kernel and procfs (tests use fakes).
//! - [`forks`]: between epochs, forks and exits of placed processes from the kernel's
//!   proc connector, followed at once and rate-limited.
//! - [`assemble`]: the engine on the live system; [`service`]: the loop, signals and
//!   shutdown; [`socket`] and [`status`]: what `numasched status` asks and gets.
//! - [`nodes`]: the per-node picture (load, memory, LLC pressure) of `status`.
//! - [`metrics`]: the same status for Prometheus (`--metrics ADDR`, off by default).
//! - [`logging`]: structured logs through `tracing`.
//! - [`privileges`]: once started, every capability the epochs do not use is dropped.

pub mod assemble;
pub mod clock;
pub mod config;
pub mod conns;
pub mod engine;
pub mod forks;
pub mod glob;
pub mod job_gres;
pub mod jobs;
pub mod logging;
pub mod metrics;
pub mod need;
pub mod nodes;
pub mod pace;
pub mod paths;
pub mod pins;
pub mod privileges;
pub mod queued;
pub mod recovery;
pub mod run_journals;
pub mod select;
pub mod service;
pub mod socket;
pub mod stabilise;
pub mod status;
pub mod status_board;
pub mod step_reports;
pub mod trigger;

pub use config::Options;
pub use engine::{Engine, EngineConfig, EpochReport, Stages};
pub use status::DaemonStatus;
