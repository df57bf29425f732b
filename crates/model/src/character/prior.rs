//! What to assume of a process nobody has characterised: a prior NUMA penalty.
//!
//! Without counters, a profile or a learned history, the penalty is unknown, but it is
//! not zero: a busy program with its memory on another node loses something there, and
//! every tool an operator already has (numad, the kernel's NUMA balancing) acts on that.
//! The prior is the median of the penalties Majo & Gross measured on their reference
//! machine (SPEC CPU2006 on a Xeon E5520, SLIT distance 21 between its two nodes), with
//! the interquartile range as its uncertainty, scaled to this machine by its nearest
//! remote SLIT distance: a penalty is taken to grow with the distance above local, as the
//! policies' remote factor already assumes for measured ones. SLIT tables are coarse, so
//! the scale is bounded.

use crate::profile::published_penalties;
use crate::topology::{Topology, LOCAL_DISTANCE};

/// SLIT distance between the reference machine's two nodes (what Linux prints on a
/// two-socket Nehalem).
pub const REFERENCE_REMOTE_DISTANCE: u32 = 21;

/// Bounds on the distance scale: a SLIT of 11 is not a tenth of 21's penalty, nor one
/// of 60 five times it (firmware tables are rounded and sometimes made up).
const SCALE_BOUNDS: (f64, f64) = (0.25, 3.0);

/// A penalty nobody measured: its central value and the range it is likely in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prior {
    /// Median of the population, scaled to this machine (≥ 1).
    pub numa_penalty: f64,
    /// First and third quartiles, likewise scaled.
    pub low: f64,
    pub high: f64,
    /// Programs the population holds.
    pub population: usize,
}

impl Prior {
    /// The prior on `topo` (one hop at its nearest remote distance).
    pub fn for_topology(topo: &Topology) -> Prior {
        Prior::scaled(topo.nearest_remote_distance())
    }

    /// The prior for a machine whose nearest remote node is `near` (None: one node,
    /// where nothing is remote and the penalty does not matter; the reference scale).
    pub fn scaled(near: Option<u32>) -> Prior {
        let scale = near.map_or(1.0, |d| {
            let above = d.saturating_sub(LOCAL_DISTANCE) as f64;
            let reference = (REFERENCE_REMOTE_DISTANCE - LOCAL_DISTANCE) as f64;
            (above / reference).clamp(SCALE_BOUNDS.0, SCALE_BOUNDS.1)
        });
        let mut v: Vec<f64> = published_penalties().collect();
        v.sort_by(f64::total_cmp);
        let at = |q: f64| 1.0 + (quantile(&v, q) - 1.0).max(0.0) * scale;
        Prior {
            numa_penalty: at(0.5),
            low: at(0.25),
            high: at(0.75),
            population: v.len(),
        }
    }

    /// How it reads in a reason: "np ~1.10, likely 1.02–1.28 (the median of 14
    /// measured programs)".
    pub fn describe(&self) -> String {
        format!(
            "np ~{:.2}, likely {:.2}–{:.2} (the median of {} measured programs)",
            self.numa_penalty, self.low, self.high, self.population
        )
    }
}

/// Linear-interpolated quantile of sorted `v` (non-empty).
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 1.0;
    }
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_the_reference_distance_it_is_the_published_median() {
        let p = Prior::scaled(Some(REFERENCE_REMOTE_DISTANCE));
        // Majo & Gross's 14 penalties: the middle two are gcc's 1.05 and mcf's 1.15.
        assert_eq!(p.population, 14);
        assert!((p.numa_penalty - 1.10).abs() < 1e-9, "{p:?}");
        assert!(p.low >= 1.0 && p.low < p.numa_penalty && p.high > p.numa_penalty);
        assert!(p.describe().contains("np ~1.10"), "{}", p.describe());
    }

    #[test]
    fn it_grows_with_distance_within_bounds() {
        let near = Prior::scaled(Some(16));
        let reference = Prior::scaled(Some(21));
        let far = Prior::scaled(Some(32));
        assert!(near.numa_penalty < reference.numa_penalty);
        assert!(far.numa_penalty > reference.numa_penalty);
        // A nonsense table (remote = local) still gives a penalty above 1, bounded.
        let flat = Prior::scaled(Some(10));
        assert!(flat.numa_penalty > 1.0 && flat.numa_penalty < near.numa_penalty);
        let huge = Prior::scaled(Some(255));
        assert!(huge.numa_penalty <= 1.0 + 0.1 * SCALE_BOUNDS.1 + 1e-9);
    }

    #[test]
    fn quantiles_interpolate() {
        assert_eq!(quantile(&[1.0, 2.0, 3.0], 0.5), 2.0);
        assert_eq!(quantile(&[1.0, 2.0], 0.5), 1.5);
        assert_eq!(quantile(&[], 0.5), 1.0);
    }
}
