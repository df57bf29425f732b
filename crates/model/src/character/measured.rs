//! What `profile measure` concludes from timed runs of one program: its NUMA penalty
//! from runs with every page local against runs with every page on a remote node, with
//! the CPUs the same, and optionally its cache sensitivity from runs beside a program
//! that thrashes the shared LLC.
//!
//! Runs alternate (local, remote, local, …), so a drift of the machine over the session
//! (a neighbour starting, the CPU warming) lands on both sides. Each local/remote pair
//! gives one ratio; the penalty is their mean and its spread their sample standard
//! deviation. The store keeps the penalty as a ratio (remote / local, ≥ 1, what every
//! policy ranks on); people read "42% slower remote", the ratio less one.

use serde::{Deserialize, Serialize};

/// A penalty whose pairs disagree by more than this (the ratio's standard deviation)
/// is not known to ±20%: recorded, but said to be uncertain and ranked below any other
/// source that knows the program.
pub const UNCERTAIN_SPREAD: f64 = 0.20;

/// Shortest local run that is measured: below it, process start and page-table setup
/// are a visible share of the time, and a scheduler tick of noise is 1%.
pub const MIN_RUN_S: f64 = 1.0;

/// The conclusion of one measurement session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredPenalty {
    /// Remote run time / local run time, at least 1 (a remote run that came out faster
    /// is noise around "no penalty", not a program that likes remote memory).
    pub numa_penalty: f64,
    /// Sample standard deviation of the per-pair ratios.
    pub spread: f64,
    /// The spread is over [`UNCERTAIN_SPREAD`].
    pub uncertain: bool,
    /// Run time beside an LLC-thrashing co-runner / local run time, less one; `None`
    /// when not measured.
    pub cache_slowdown: Option<f64>,
}

impl MeasuredPenalty {
    /// From the run times in seconds, in the order they ran. `local` and `remote` must
    /// be the same length, at least 2 (one pair has no spread). `pressured`, when
    /// given, are runs with local memory beside the co-runner.
    pub fn from_runs(
        local: &[f64],
        remote: &[f64],
        pressured: Option<&[f64]>,
    ) -> Result<MeasuredPenalty, String> {
        if local.len() != remote.len() {
            return Err(format!(
                "{} local runs against {} remote ones: runs come in pairs",
                local.len(),
                remote.len()
            ));
        }
        if local.len() < 2 {
            return Err("at least 2 runs of each kind are needed to know the spread".into());
        }
        let all = local
            .iter()
            .chain(remote)
            .chain(pressured.unwrap_or(&[]).iter());
        if let Some(bad) = all.copied().find(|t| !t.is_finite() || *t <= 0.0) {
            return Err(format!("a run time of {bad} s is not a positive duration"));
        }
        let ratios: Vec<f64> = local.iter().zip(remote).map(|(l, r)| r / l).collect();
        let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
        let var =
            ratios.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (ratios.len() - 1) as f64;
        let spread = var.sqrt();
        let cache_slowdown = pressured.filter(|p| !p.is_empty()).map(|p| {
            let local_mean = local.iter().sum::<f64>() / local.len() as f64;
            (p.iter().sum::<f64>() / p.len() as f64) / local_mean - 1.0
        });
        Ok(MeasuredPenalty {
            numa_penalty: mean.max(1.0),
            spread,
            uncertain: spread > UNCERTAIN_SPREAD,
            cache_slowdown,
        })
    }

    /// "penalty 0.42 ± 0.03" (the share slower remote, as people say it), with
    /// "uncertain" where it is.
    pub fn describe(&self) -> String {
        format!(
            "penalty {:.2} ± {:.2}{}",
            self.numa_penalty - 1.0,
            self.spread,
            if self.uncertain {
                " (uncertain: runs varied more than ±0.20)"
            } else {
                ""
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_penalty_is_the_mean_pair_ratio_and_the_spread_their_deviation() {
        let m = MeasuredPenalty::from_runs(&[10.0, 10.0, 10.0], &[14.0, 15.0, 13.0], None).unwrap();
        assert!((m.numa_penalty - 1.4).abs() < 1e-12, "{m:?}");
        assert!((m.spread - 0.1).abs() < 1e-12, "{m:?}");
        assert!(!m.uncertain);
        assert_eq!(m.describe(), "penalty 0.40 ± 0.10");
    }

    #[test]
    fn pairs_cancel_a_drift_that_a_ratio_of_means_would_not_see() {
        // The machine slows by half over the session: each pair still says 1.2.
        let m = MeasuredPenalty::from_runs(&[10.0, 15.0], &[12.0, 18.0], None).unwrap();
        assert!((m.numa_penalty - 1.2).abs() < 1e-12);
        assert!(m.spread < 1e-12);
    }

    #[test]
    fn runs_that_disagree_by_more_than_a_fifth_are_uncertain() {
        let m = MeasuredPenalty::from_runs(&[10.0, 10.0], &[10.0, 14.0], None).unwrap();
        assert!(m.spread > UNCERTAIN_SPREAD, "{m:?}");
        assert!(m.uncertain);
        assert!(m.describe().contains("uncertain"));
        let m = MeasuredPenalty::from_runs(&[10.0, 10.0], &[11.0, 13.0], None).unwrap();
        assert!(m.spread < UNCERTAIN_SPREAD, "{m:?}");
        assert!(!m.uncertain);
    }

    #[test]
    fn remote_faster_than_local_is_no_penalty() {
        let m = MeasuredPenalty::from_runs(&[10.0, 10.0], &[9.9, 9.8], None).unwrap();
        assert_eq!(m.numa_penalty, 1.0);
    }

    #[test]
    fn cache_slowdown_is_against_the_local_runs() {
        let m =
            MeasuredPenalty::from_runs(&[10.0, 10.0], &[12.0, 12.0], Some(&[13.0, 13.0])).unwrap();
        assert!((m.cache_slowdown.unwrap() - 0.3).abs() < 1e-12);
    }

    #[test]
    fn bad_inputs_say_what() {
        let e = MeasuredPenalty::from_runs(&[10.0], &[12.0], None).unwrap_err();
        assert!(e.contains("at least 2"), "{e}");
        let e = MeasuredPenalty::from_runs(&[10.0, 10.0], &[12.0], None).unwrap_err();
        assert!(e.contains("pairs"), "{e}");
        let e = MeasuredPenalty::from_runs(&[10.0, 0.0], &[12.0, 12.0], None).unwrap_err();
        assert!(e.contains("not a positive duration"), "{e}");
    }
}
