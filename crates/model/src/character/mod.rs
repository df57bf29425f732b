//! How a process uses the memory system: its LLC pressure (MPKI) and how much it suffers
//! away from its memory (NUMA penalty). Sensors (numasched's `characterise` stage) feed
//! this; policies only read it, which is why it lives below both.

pub mod prior;
pub mod regression;

use serde::{Deserialize, Serialize};

/// Where a process's NUMA penalty came from, so operators can tell a measurement from a
/// guess (shown by `plan`, `status` and `top`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PenaltySource {
    /// Given in the snapshot or measured on this run (counters on this machine).
    Given,
    /// Learned by the daemon from the program's own earlier runs, local versus remote.
    Learned,
    /// From a profile a user supplied (`numasched profile set` / `import`).
    Profile,
    /// Estimated from MPKI by the linear fit of Majo & Gross.
    Regression,
    /// Nothing known: the process is treated as compute-bound (np = 1, MPKI = 0).
    Unknown,
}

impl PenaltySource {
    /// The lowercase name shown by `plan`, `status`, `top` and their JSON.
    pub fn name(self) -> &'static str {
        match self {
            PenaltySource::Given => "given",
            PenaltySource::Learned => "learned",
            PenaltySource::Profile => "profile",
            PenaltySource::Regression => "regression",
            PenaltySource::Unknown => "unknown",
        }
    }

    /// One line for a table's legend, what each name means (under 100 columns).
    pub const LEGEND: &'static str =
        "source of np: given (measured/snapshot), learned (past runs), profile (by name), regression (MPKI)";
}

/// The numbers every policy ranks on, with defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Character {
    pub mpki: f64,
    pub numa_penalty: f64,
    pub source: PenaltySource,
}

/// Everything known about one process's character, by where it came from; [`resolve`]
/// picks from it. Each field is `None` when that source has nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Evidence {
    /// MPKI measured on this run (counters) or given in the snapshot.
    pub measured_mpki: Option<f64>,
    /// NUMA penalty measured on this run or given in the snapshot.
    pub measured_np: Option<f64>,
    /// Learned by the daemon from earlier runs of the same program.
    pub learned_mpki: Option<f64>,
    pub learned_np: Option<f64>,
    /// From the user's profile of the program.
    pub profile_mpki: Option<f64>,
    pub profile_np: Option<f64>,
}

/// Picks each number from the best source that has it: measured > learned > user
/// profile > (for the penalty) the MPKI regression > unknown. A measurement on this
/// machine now beats what was true of earlier runs; the program's own history beats a
/// profile, which may come from another machine; the regression is a weak fit (R² ≈
/// 0.64) and only fills the gap. Values that are not finite, or a penalty below 1, are
/// treated as absent so a bad sample cannot shadow a good lower-priority source.
pub fn resolve(e: &Evidence) -> Character {
    let ok_mpki = |v: Option<f64>| v.filter(|m| m.is_finite() && *m >= 0.0);
    let ok_np = |v: Option<f64>| v.filter(|np| np.is_finite() && *np >= 1.0);
    let mpki = ok_mpki(e.measured_mpki)
        .or(ok_mpki(e.learned_mpki))
        .or(ok_mpki(e.profile_mpki));
    let penalty = [
        (e.measured_np, PenaltySource::Given),
        (e.learned_np, PenaltySource::Learned),
        (e.profile_np, PenaltySource::Profile),
    ]
    .into_iter()
    .find_map(|(v, src)| ok_np(v).map(|np| (np, src)));
    match (mpki, penalty) {
        (m, Some((np, source))) => Character {
            mpki: m.unwrap_or(0.0),
            numa_penalty: np,
            source,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_is_measured_learned_profile_regression_unknown() {
        let all = Evidence {
            measured_mpki: Some(10.0),
            measured_np: Some(1.4),
            learned_mpki: Some(20.0),
            learned_np: Some(1.3),
            profile_mpki: Some(30.0),
            profile_np: Some(1.2),
        };
        let c = resolve(&all);
        assert_eq!(
            (c.mpki, c.numa_penalty, c.source),
            (10.0, 1.4, PenaltySource::Given)
        );
        let c = resolve(&Evidence {
            measured_mpki: None,
            measured_np: None,
            ..all
        });
        assert_eq!(
            (c.mpki, c.numa_penalty, c.source),
            (20.0, 1.3, PenaltySource::Learned)
        );
        let c = resolve(&Evidence {
            profile_mpki: Some(30.0),
            profile_np: Some(1.2),
            ..Evidence::default()
        });
        assert_eq!(
            (c.mpki, c.numa_penalty, c.source),
            (30.0, 1.2, PenaltySource::Profile)
        );
        // Live MPKI with only a profile's penalty: each number from its best source.
        let c = resolve(&Evidence {
            measured_mpki: Some(5.0),
            profile_np: Some(1.2),
            ..Evidence::default()
        });
        assert_eq!(
            (c.mpki, c.numa_penalty, c.source),
            (5.0, 1.2, PenaltySource::Profile)
        );
        let c = resolve(&Evidence {
            profile_mpki: Some(20.0),
            ..Evidence::default()
        });
        assert_eq!(c.source, PenaltySource::Regression);
        assert!((c.numa_penalty - 1.35).abs() < 1e-12);
        let c = resolve(&Evidence::default());
        assert_eq!(
            (c.mpki, c.numa_penalty, c.source),
            (0.0, 1.0, PenaltySource::Unknown)
        );
    }

    #[test]
    fn bad_values_do_not_shadow_good_ones() {
        let c = resolve(&Evidence {
            learned_np: Some(f64::NAN),
            profile_np: Some(1.1),
            measured_mpki: Some(f64::INFINITY),
            profile_mpki: Some(3.0),
            ..Evidence::default()
        });
        assert_eq!(
            (c.mpki, c.numa_penalty, c.source),
            (3.0, 1.1, PenaltySource::Profile)
        );
    }

    #[test]
    fn snapshot_resolve_is_unchanged() {
        let c = Character::resolve(Some(20.0), None);
        assert_eq!(c.source, PenaltySource::Regression);
        let c = Character::resolve(None, Some(1.2));
        assert_eq!(
            (c.mpki, c.numa_penalty, c.source),
            (0.0, 1.2, PenaltySource::Given)
        );
        assert_eq!(
            Character::resolve(None, None).source,
            PenaltySource::Unknown
        );
    }
}
