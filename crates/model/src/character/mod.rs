//! How a process uses the memory system: its LLC pressure (MPKI) and how much it suffers
//! away from its memory (NUMA penalty). Sensors (numasched's `characterise` stage) feed
//! this; policies only read it, which is why it lives below both.

pub mod measured;
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
    /// Measured by `profile measure`: the program run with its memory local and remote.
    Measured,
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
            PenaltySource::Measured => "measured",
            PenaltySource::Learned => "learned",
            PenaltySource::Profile => "profile",
            PenaltySource::Regression => "regression",
            PenaltySource::Unknown => "unknown",
        }
    }

    /// One line for a table's legend, what each name means (under 100 columns).
    pub const LEGEND: &'static str =
        "source of np: given (counters), measured (profile measure), learned, profile, regression";
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
    /// Measured by `profile measure`, and whether its runs agreed to ±20%.
    pub bench_np: Option<f64>,
    /// MPKI counted by `profile measure` over its local runs, where counters exist.
    pub bench_mpki: Option<f64>,
    pub bench_uncertain: bool,
}

/// Picks each number from the best source that has it: measured > `profile measure` >
/// learned > user profile > (for the penalty) an uncertain `profile measure` > the
/// MPKI regression > unknown. A measurement on this machine now beats what was true of
/// earlier runs; a controlled experiment (the same CPUs, all memory local, then all
/// remote) beats what the daemon infers from how local the program happened to be;
/// the program's own history beats a profile, which may come from another machine; an
/// experiment whose runs disagreed still beats a guess; the regression is a weak fit
/// (R² ≈ 0.64) and only fills the gap. Values that are not finite, or a penalty below 1, are
/// treated as absent so a bad sample cannot shadow a good lower-priority source.
pub fn resolve(e: &Evidence) -> Character {
    let ok_mpki = |v: Option<f64>| v.filter(|m| m.is_finite() && *m >= 0.0);
    let ok_np = |v: Option<f64>| v.filter(|np| np.is_finite() && *np >= 1.0);
    let mpki = ok_mpki(e.measured_mpki)
        .or(ok_mpki(e.bench_mpki))
        .or(ok_mpki(e.learned_mpki))
        .or(ok_mpki(e.profile_mpki));
    let bench = |uncertain: bool| e.bench_np.filter(|_| e.bench_uncertain == uncertain);
    let penalty = [
        (e.measured_np, PenaltySource::Given),
        (bench(false), PenaltySource::Measured),
        (e.learned_np, PenaltySource::Learned),
        (e.profile_np, PenaltySource::Profile),
        (bench(true), PenaltySource::Measured),
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
            ..Evidence::default()
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
    fn a_measured_profile_ranks_by_whether_its_runs_agreed() {
        let e = Evidence {
            learned_np: Some(1.3),
            profile_np: Some(1.2),
            bench_np: Some(1.5),
            ..Evidence::default()
        };
        let c = resolve(&e);
        assert_eq!((c.numa_penalty, c.source), (1.5, PenaltySource::Measured));
        let on_run = resolve(&Evidence {
            measured_np: Some(1.1),
            ..e
        });
        assert_eq!(on_run.source, PenaltySource::Given);
        let uncertain = Evidence {
            bench_uncertain: true,
            ..e
        };
        assert_eq!(resolve(&uncertain).source, PenaltySource::Learned);
        let only = resolve(&Evidence {
            bench_np: Some(1.5),
            bench_uncertain: true,
            profile_mpki: Some(20.0),
            ..Evidence::default()
        });
        assert_eq!(
            (only.numa_penalty, only.source),
            (1.5, PenaltySource::Measured)
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
