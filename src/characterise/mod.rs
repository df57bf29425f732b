//! How a process uses the memory system: its LLC pressure (MPKI) and how much it suffers
//! away from its memory (NUMA penalty). Sensors feed this; policies only read it.

pub mod regression;

use serde::{Deserialize, Serialize};

/// Where a process's NUMA penalty came from, so operators can tell a measurement from a
/// guess (shown by `plan`, `status` and `top`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PenaltySource {
    /// Given in the snapshot: measured offline or taken from the profile store.
    Given,
    /// Estimated from MPKI by the linear fit of Majo & Gross.
    Regression,
    /// Nothing known: the process is treated as compute-bound (np = 1, MPKI = 0).
    Unknown,
}

/// The numbers every policy ranks on, with defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Character {
    pub mpki: f64,
    pub numa_penalty: f64,
    pub source: PenaltySource,
}

impl Character {
    /// Fills in what a snapshot left open: a missing penalty comes from the regression
    /// when MPKI is known; with neither, the process looks compute-bound, which is the
    /// safe reading (it is never pushed away from anything on a guess).
    pub fn resolve(mpki: Option<f64>, numa_penalty: Option<f64>) -> Character {
        match (mpki, numa_penalty) {
            (m, Some(np)) => Character {
                mpki: m.unwrap_or(0.0),
                numa_penalty: np,
                source: PenaltySource::Given,
            },
            (Some(m), None) => Character {
                mpki: m,
                numa_penalty: regression::numa_penalty(m),
                source: PenaltySource::Regression,
            },
            (None, None) => Character {
                mpki: 0.0,
                numa_penalty: 1.0,
                source: PenaltySource::Unknown,
            },
        }
    }
}
