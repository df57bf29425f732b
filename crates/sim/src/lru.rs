//! How an LRU-managed shared cache divides itself among the programs on it: Che's
//! characteristic-time approximation (Che, Tung and Wang, IEEE JSAC 2002), in the
//! footprint form of Xiang et al. (HOTL, ASPLOS 2013).
//!
//! Under LRU a line stays in the cache for about the same time T after its last use,
//! whoever owns it. An occupant therefore holds its footprint over T: the bytes it
//! brings in within T. Its footprint grows at its miss rate at the footprint reached, so
//! the time to fill `c` bytes is `t(c) = ∫₀ᶜ dc' / M(c')`, and T is where the footprints
//! add up to the cache. A program whose misses fall as it gets more cache fills more
//! slowly than its current miss rate says, and keeps more than a share proportional to
//! insertions (which would let a streaming co-runner's dead lines crowd it out); with
//! flat miss curves both rules agree.

use super::roots::false_position;

/// One occupant's fill time on a grid of cache sizes at one instruction per ns:
/// `(bytes, ns)`, increasing in both. At `r` instructions per ns it fills `r` times as
/// fast, so the curve is built once per occupant and scaled in every sweep.
pub(crate) struct FillCurve {
    points: Vec<(f64, f64)>,
}

/// Grid steps per doubling of cache size; with the power-law miss curves the trapezoid
/// rule on this grid is within 0.1% of the integral.
const STEPS_PER_OCTAVE: f64 = 4.0;
/// Smallest grid size, as a fraction of the cache: below it the miss curves are flat
/// (their 256 KiB floor is above it for any LLC up to 64 MiB).
const SMALLEST: f64 = 1.0 / 256.0;

impl FillCurve {
    /// The fill curve of an occupant with `misses(c)` misses per instruction when it
    /// holds `c` bytes, up to `capacity` bytes. `None` when it does not miss: it never
    /// brings a line in, so it holds nothing at any T.
    pub(crate) fn new(capacity: f64, misses: impl Fn(f64) -> f64) -> Option<FillCurve> {
        let steps = (1.0 / SMALLEST).log2() * STEPS_PER_OCTAVE;
        let n = steps.round() as usize;
        let mut points = Vec::with_capacity(n + 2);
        let first = capacity * SMALLEST;
        let m0 = misses(first);
        if !(m0 > 0.0 && m0.is_finite()) {
            return None;
        }
        points.push((0.0, 0.0));
        let mut t = first / m0;
        points.push((first, t));
        let (mut prev_c, mut prev_inv) = (first, 1.0 / m0);
        for k in 1..=n {
            let c = first * 2f64.powf(k as f64 / STEPS_PER_OCTAVE);
            let m = misses(c);
            if !(m > 0.0 && m.is_finite()) {
                return None;
            }
            let inv = 1.0 / m;
            t += (c - prev_c) * (inv + prev_inv) / 2.0;
            points.push((c, t));
            (prev_c, prev_inv) = (c, inv);
        }
        Some(FillCurve { points })
    }

    /// Bytes it holds when lines live `t` ns: its footprint, capped at the cache.
    fn footprint(&self, t: f64) -> f64 {
        let i = self.points.partition_point(|&(_, ti)| ti < t);
        if i == 0 {
            return 0.0;
        }
        let Some(&(c1, t1)) = self.points.get(i) else {
            return self.points.last().map_or(0.0, |&(c, _)| c);
        };
        let (c0, t0) = self.points[i - 1];
        if t1 > t0 {
            c0 + (c1 - c0) * (t - t0) / (t1 - t0)
        } else {
            c1
        }
    }

    fn full(&self) -> f64 {
        self.points.last().map_or(0.0, |&(_, t)| t)
    }
}

/// The share of the cache each occupant holds, given its fill curve (none: it does not
/// miss) and its instruction rate (instructions/ns). Shares add up to 1 unless nobody
/// misses, in which case they are even.
pub(crate) fn shares(capacity: f64, occupants: &[(Option<&FillCurve>, f64)]) -> Vec<f64> {
    let live: Vec<(&FillCurve, f64)> = occupants
        .iter()
        .filter_map(|&(c, rate)| {
            c.filter(|_| rate > 0.0 && rate.is_finite())
                .map(|c| (c, rate))
        })
        .collect();
    if live.is_empty() {
        let even = 1.0 / occupants.len().max(1) as f64;
        return vec![even; occupants.len()];
    }
    let held = |t: f64| -> f64 { live.iter().map(|&(c, r)| c.footprint(t * r)).sum() };
    // T lies below the longest time any one of them takes to fill the cache alone.
    let hi = live.iter().map(|&(c, r)| c.full() / r).fold(0.0, f64::max);
    let excess = |t: f64| capacity - held(t);
    let t = false_position(
        &excess,
        (0.0, capacity),
        (hi, excess(hi)),
        100,
        |e, _, lo, hi| e.abs() <= 1e-12 * capacity || (hi - lo) <= 1e-14 * hi,
    );
    let total = held(t);
    occupants
        .iter()
        .map(|&(c, rate)| match c {
            Some(c) if total > 0.0 && rate > 0.0 && rate.is_finite() => {
                c.footprint(t * rate) / total
            }
            _ => 0.0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: f64 = 1048576.0;

    fn power(m: f64, beta: f64) -> impl Fn(f64) -> f64 {
        move |c: f64| m * (c.max(256.0 * 1024.0) / (8.0 * MB)).powf(-beta)
    }

    #[test]
    fn flat_curves_share_in_proportion_to_misses() {
        let a = FillCurve::new(4.0 * MB, |_| 3.0);
        let b = FillCurve::new(4.0 * MB, |_| 1.0);
        let s = shares(4.0 * MB, &[(a.as_ref(), 1.0), (b.as_ref(), 1.0)]);
        assert!((s[0] - 0.75).abs() < 1e-6, "{s:?}");
        assert!((s[1] - 0.25).abs() < 1e-6, "{s:?}");
    }

    #[test]
    fn one_occupant_holds_everything() {
        let c = FillCurve::new(4.0 * MB, power(2.0, 0.5));
        let s = shares(4.0 * MB, &[(c.as_ref(), 0.7)]);
        assert!((s[0] - 1.0).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn a_cache_friendly_program_keeps_more_than_its_insertions_say() {
        // Beside a stream missing three times as fast at the split reached, a program
        // with β = 0.5 keeps more than the quarter insertion-proportional sharing gives.
        let cap = 4.0 * MB;
        let friendly = power(1.0, 0.5);
        let f = FillCurve::new(cap, &friendly);
        let stream = FillCurve::new(cap, |_| friendly(cap / 4.0));
        let s = shares(cap, &[(f.as_ref(), 1.0), (stream.as_ref(), 3.0)]);
        assert!(s[0] > 0.3, "{s:?}");
        assert!((s[0] + s[1] - 1.0).abs() < 1e-9);
    }

    #[test]
    fn fill_time_matches_the_integral() {
        // Flat below the 256 KiB floor, then c^β/m: t(c) = floor/m(floor) +
        // ∫ (c'/c_ref)^β / m dc' over [floor, c].
        let cap = 8.0 * MB;
        let curve = FillCurve::new(cap, power(1.0, 0.5)).unwrap();
        let floor = 256.0 * 1024.0;
        let integral = |c: f64| (c.powf(1.5) / 1.5) / (8.0 * MB).powf(0.5);
        let exact = floor * (floor / (8.0 * MB)).powf(0.5) + integral(cap) - integral(floor);
        assert!(
            (curve.full() / exact - 1.0).abs() < 1e-3,
            "{} {exact}",
            curve.full()
        );
    }

    #[test]
    fn a_program_that_never_misses_holds_nothing() {
        let none = FillCurve::new(4.0 * MB, |_| 0.0);
        let some = FillCurve::new(4.0 * MB, |_| 1.0);
        let s = shares(4.0 * MB, &[(none.as_ref(), 1.0), (some.as_ref(), 1.0)]);
        assert_eq!(s[0], 0.0);
        assert!((s[1] - 1.0).abs() < 1e-9);
    }
}
