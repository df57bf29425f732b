//! The memory-bound load: the STREAM triad `a[i] = b[i] + q*c[i]` over arrays far larger
//! than the last-level cache, so its rate is set by memory bandwidth and by the distance
//! to the node holding its pages — exactly what a NUMA placement changes.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use anyhow::bail;

use super::membind::first_touch;
use super::rate::TRIAD_BYTES_PER_ELEMENT;

/// Elements per chunk between stop checks and counter updates: 768 KiB of traffic,
/// well under a millisecond, so stop is prompt.
const CHUNK: usize = 32 * 1024;

/// One worker's three arrays. Allocation is separate from running so every worker can
/// report out-of-memory as an error before the clock starts.
pub struct Triad {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
}

impl Triad {
    /// Allocates and first-touches three arrays whose total size is `size_bytes`.
    pub fn new(size_bytes: u64) -> anyhow::Result<Triad> {
        let n = (size_bytes / TRIAD_BYTES_PER_ELEMENT) as usize;
        if n == 0 {
            bail!(
                "--size {size_bytes}: too small for the triad (need at least {TRIAD_BYTES_PER_ELEMENT} bytes)"
            );
        }
        Ok(Triad {
            a: alloc(n, 0.0)?,
            b: alloc(n, 1.0)?,
            c: alloc(n, 2.0)?,
        })
    }

    /// Runs passes of the triad until `stop`, adding bytes moved to `counter` per chunk.
    pub fn run(&mut self, counter: &AtomicU64, stop: &AtomicBool) {
        let q = black_box(3.0f64);
        loop {
            for ((a, b), c) in self
                .a
                .chunks_mut(CHUNK)
                .zip(self.b.chunks(CHUNK))
                .zip(self.c.chunks(CHUNK))
            {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                triad(a, b, c, q);
                counter.fetch_add(a.len() as u64 * TRIAD_BYTES_PER_ELEMENT, Ordering::Relaxed);
            }
        }
    }
}

fn triad(a: &mut [f64], b: &[f64], c: &[f64], q: f64) {
    for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
        *a = b + q * c;
    }
    // Keep the stores: nothing reads `a`, and the optimiser must not drop them.
    black_box(a.as_mut_ptr());
}

/// Allocates without aborting on out-of-memory, fills, and touches every page.
fn alloc(n: usize, value: f64) -> anyhow::Result<Vec<f64>> {
    let mut v: Vec<f64> = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        bail!(
            "cannot allocate {} MiB for the stream arrays",
            (n * 8) >> 20
        );
    }
    v.resize(n, value);
    first_touch(&mut v);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triad_computes_b_plus_q_c() {
        let mut a = vec![0.0; 4];
        triad(&mut a, &[1.0, 2.0, 3.0, 4.0], &[1.0, 1.0, 2.0, 0.5], 3.0);
        assert_eq!(a, vec![4.0, 5.0, 9.0, 5.5]);
    }

    #[test]
    fn counts_24_bytes_per_element() {
        let mut t = Triad::new(24 * 100).expect("alloc");
        let counter = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| t.run(&counter, &stop));
            while counter.load(Ordering::Relaxed) == 0 {
                std::thread::yield_now();
            }
            stop.store(true, Ordering::Relaxed);
        });
        let bytes = counter.load(Ordering::Relaxed);
        assert!(bytes > 0);
        assert_eq!(bytes % (24 * 100), 0, "whole passes of 100 elements");
    }

    #[test]
    fn too_small_is_an_error() {
        assert!(Triad::new(10).is_err());
    }
}
