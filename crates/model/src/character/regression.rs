//! NUMA penalty estimated from MPKI (Majo & Gross, ISMM 2011): on the Nehalem E5520 the
//! fit over memory-bound SPEC CPU2006 programs (MPKI ≥ 1, one outlier removed) was
//! `np ≈ 1.05 + 0.015 · MPKI` with R² ≈ 0.64. Below MPKI 1 a program barely touches
//! DRAM and np ≈ 1. Weak, so it is only the fallback when nothing was measured.

pub const INTERCEPT: f64 = 1.05;
pub const SLOPE: f64 = 0.015;
/// Below this MPKI the fit does not apply and the penalty is taken as 1.
pub const MIN_MPKI: f64 = 1.0;

pub fn numa_penalty(mpki: f64) -> f64 {
    if !mpki.is_finite() || mpki < MIN_MPKI {
        1.0
    } else {
        INTERCEPT + SLOPE * mpki
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_published_fit() {
        assert_eq!(numa_penalty(0.5), 1.0);
        assert!((numa_penalty(20.0) - 1.35).abs() < 1e-12);
        assert!((numa_penalty(1.0) - 1.065).abs() < 1e-12);
        assert_eq!(numa_penalty(f64::NAN), 1.0);
    }
}
