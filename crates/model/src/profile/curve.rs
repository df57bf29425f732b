//! Measured miss curves: how a program's LLC misses change with the cache it has, read
//! off a machine where the cache was cut down way by way, instead of the power law's
//! two shape parameters.
//!
//! A curve is a few `[bytes, ratio]` points: the misses per instruction with `bytes`
//! of cache over the profile's `mpki` (with the reference LLC). Between points it is
//! interpolated on log-log axes, as miss curves are drawn and as a power law is a line;
//! below the smallest point it keeps the first segment's slope where misses fall as
//! the cache grows (a program loses what it reuses as its share shrinks further), and
//! is flat otherwise; above the largest it stays flat (nothing measured says what more
//! cache would save).
//!
//! Two curves may be given: `miss_curve`, every line the program brings in (measured
//! with the hardware prefetchers off, so each line needed is one miss), which sets its
//! traffic; and `demand_curve`, the misses left with the prefetchers on, which the core
//! waits for. Where a co-runner takes cache, prefetched lines are evicted before their
//! use and turn into demand misses, and the demand curve rises faster than the other
//! (or slower, where the prefetcher gains on a smaller working set); the model scales
//! the stall per line by the demand share at the cache a program holds against the
//! share at the reference.

use serde::{Deserialize, Serialize};

/// Most points a curve may have: a measurement gives a handful.
pub const MAX_POINTS: usize = 64;

/// `[bytes, ratio]` points, bytes rising, ratio ≥ 0 relative to the profile's `mpki`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MissCurve(Vec<[f64; 2]>);

impl MissCurve {
    pub fn new(points: Vec<[f64; 2]>) -> MissCurve {
        MissCurve(points)
    }

    pub fn points(&self) -> &[[f64; 2]] {
        &self.0
    }

    /// What is wrong with the points, if anything, for a one-line error.
    pub fn validate(&self) -> Result<(), String> {
        if self.0.len() < 2 {
            return Err(format!(
                "has {} point(s); a curve needs at least 2 [bytes, ratio] pairs",
                self.0.len()
            ));
        }
        if self.0.len() > MAX_POINTS {
            return Err(format!(
                "has {} points, more than the {MAX_POINTS} a curve may have",
                self.0.len()
            ));
        }
        for (i, &[bytes, ratio]) in self.0.iter().enumerate() {
            if !(bytes.is_finite() && bytes > 0.0) {
                return Err(format!("[{i}]: {bytes} bytes must be a finite number > 0"));
            }
            if !(ratio.is_finite() && ratio > 0.0) {
                return Err(format!("[{i}]: ratio {ratio} must be a finite number > 0"));
            }
            if i > 0 && bytes <= self.0[i - 1][0] {
                return Err(format!(
                    "[{i}]: {bytes} bytes must be more than the point before ({})",
                    self.0[i - 1][0]
                ));
            }
        }
        Ok(())
    }

    /// The ratio at `bytes` of cache (see the module doc for the ends). A curve that
    /// fails [`MissCurve::validate`] (snapshots are not validated as profiles) reads
    /// as 1 wherever its points do not make sense.
    pub fn ratio(&self, bytes: f64) -> f64 {
        let pts = &self.0;
        let usable = pts.len() >= 2
            && pts
                .iter()
                .all(|&[b, r]| b.is_finite() && b > 0.0 && r.is_finite() && r > 0.0)
            && pts.windows(2).all(|w| w[1][0] > w[0][0]);
        if !(usable && bytes.is_finite() && bytes > 0.0) {
            return 1.0;
        }
        let x = bytes.ln();
        let at = |i: usize| (pts[i][0].ln(), pts[i][1].ln());
        let line = |(x0, y0): (f64, f64), (x1, y1): (f64, f64)| {
            let slope = (y1 - y0) / (x1 - x0);
            (y0 + slope * (x - x0), slope)
        };
        let last = pts.len() - 1;
        if x >= at(last).0 {
            return pts[last][1];
        }
        if x <= at(0).0 {
            let (y, slope) = line(at(0), at(1));
            // Misses that fall as the cache grows rise below the first point; a first
            // segment that rises (measurement noise) is not carried beyond it.
            return if slope < 0.0 { y.exp() } else { pts[0][1] };
        }
        let i = pts.partition_point(|p| p[0].ln() <= x).clamp(1, last);
        line(at(i - 1), at(i)).0.exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = 1048576.0;

    #[test]
    fn interpolates_on_log_log_axes_and_keeps_the_ends() {
        let c = MissCurve::new(vec![[2.0 * MIB, 2.0], [8.0 * MIB, 1.0], [32.0 * MIB, 0.5]]);
        c.validate().unwrap();
        assert!((c.ratio(8.0 * MIB) - 1.0).abs() < 1e-12);
        // Half-way in log bytes is half-way in log ratio: √2.
        assert!((c.ratio(4.0 * MIB) - 2f64.sqrt()).abs() < 1e-12);
        // Flat above the last point; the first segment's slope below the first.
        assert_eq!(c.ratio(1e12), 0.5);
        assert!((c.ratio(0.5 * MIB) - 4.0).abs() < 1e-9);
        // A first segment that rises is not carried below it.
        let up = MissCurve::new(vec![[2.0 * MIB, 0.9], [8.0 * MIB, 1.0]]);
        assert_eq!(up.ratio(MIB), 0.9);
    }

    #[test]
    fn bad_points_are_named_and_never_panic() {
        for (pts, what) in [
            (vec![[MIB, 1.0]], "at least 2"),
            (vec![[MIB, 1.0], [MIB, 0.5]], "more than the point before"),
            (vec![[0.0, 1.0], [MIB, 0.5]], "bytes must be"),
            (vec![[MIB, f64::NAN], [2.0 * MIB, 0.5]], "ratio NaN"),
        ] {
            let c = MissCurve::new(pts);
            let e = c.validate().unwrap_err();
            assert!(e.contains(what), "{e}");
            assert_eq!(c.ratio(4.0 * MIB), 1.0);
        }
    }
}
