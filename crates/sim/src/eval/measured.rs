//! What the harness measures with: the performance model as a function of a snapshot
//! and a plan, and what one policy's measurement on one case gives. Below both the
//! runner and the time-sliced schedules (`slices`), which each measure with them.

use numasched_model::{Plan, Snapshot};

/// Per-process run time, normalised to running alone and local on the idle machine
/// (1.0 = no slowdown), for a snapshot run under a plan. Deterministic.
pub type TimeModel = dyn Fn(&Snapshot, &Plan) -> Vec<f64> + Send + Sync;

/// Times of one policy on one case before they are turned into a row.
pub struct Measured {
    pub times: Vec<f64>,
    pub proven_optimal: Option<bool>,
    pub evaluated: usize,
}
