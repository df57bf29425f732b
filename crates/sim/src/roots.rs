//! Root finding for the solver's one-dimensional equations (a queue's delay, an LRU
//! share), used by the model and by the LRU partition alike.

/// The root of `f` in a bracket where `f(lo) > 0 > f(hi)`, by false position with the
/// Illinois modification (the stale end's value is halved when the same end moves
/// twice, so convergence stays superlinear); `done(f(w), w, lo, hi)` ends the search.
pub(crate) fn false_position(
    f: &impl Fn(f64) -> f64,
    (mut lo, mut f_lo): (f64, f64),
    (mut hi, mut f_hi): (f64, f64),
    max_steps: usize,
    done: impl Fn(f64, f64, f64, f64) -> bool,
) -> f64 {
    let mut side = 0i8;
    let mut w = lo;
    for _ in 0..max_steps {
        w = (lo * f_hi - hi * f_lo) / (f_hi - f_lo);
        if !(w > lo && w < hi) {
            w = 0.5 * (lo + hi);
        }
        let fw = f(w);
        if done(fw, w, lo, hi) {
            break;
        }
        if fw > 0.0 {
            lo = w;
            f_lo = fw;
            if side == 1 {
                f_hi /= 2.0;
            }
            side = 1;
        } else {
            hi = w;
            f_hi = fw;
            if side == -1 {
                f_lo /= 2.0;
            }
            side = -1;
        }
    }
    w
}
