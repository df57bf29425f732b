//! The compute-only load: a hash recurrence kept in registers, so its rate depends on the
//! CPU it runs on and on CPU sharing, not on where its (non-existent) memory lives. It is
//! the control for the stream load.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Iterations between checks of the stop flag: ~1 ms, so stop is prompt and the counter
/// update is negligible.
const CHUNK: u64 = 1 << 20;

/// Runs until `stop`, adding iterations done to `counter` after every chunk.
pub fn run(seed: u64, counter: &AtomicU64, stop: &AtomicBool) {
    let mut x = black_box(seed | 1);
    while !stop.load(Ordering::Relaxed) {
        x = chunk(x, CHUNK);
        counter.fetch_add(CHUNK, Ordering::Relaxed);
    }
    black_box(x);
}

/// Like [`run`], but busy for `busy` then asleep for `idle`, over and over: a bursty
/// program, whose demand swings between one CPU and none.
pub fn run_duty(
    seed: u64,
    counter: &AtomicU64,
    stop: &AtomicBool,
    busy: std::time::Duration,
    idle: std::time::Duration,
) {
    let mut x = black_box(seed | 1);
    while !stop.load(Ordering::Relaxed) {
        let until = std::time::Instant::now() + busy;
        while std::time::Instant::now() < until && !stop.load(Ordering::Relaxed) {
            x = chunk(x, CHUNK);
            counter.fetch_add(CHUNK, Ordering::Relaxed);
        }
        if !super::stop::pause(idle, stop) {
            break;
        }
    }
    black_box(x);
}

/// `n` steps of a splitmix-style mixer: a multiply-xorshift chain whose every step
/// depends on the previous one, so the compiler can neither vectorise nor fold it, and
/// `black_box` on the result keeps it from being removed.
fn chunk(mut x: u64, n: u64) -> u64 {
    for i in 0..n {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15 ^ i);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 31;
    }
    black_box(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_is_deterministic_and_mixes() {
        assert_eq!(chunk(1, 1000), chunk(1, 1000));
        assert_ne!(chunk(1, 1000), chunk(2, 1000));
    }

    #[test]
    fn stops_immediately_when_asked() {
        let counter = AtomicU64::new(0);
        let stop = AtomicBool::new(true);
        run(1, &counter, &stop);
        assert_eq!(counter.load(Ordering::Relaxed), 0);
    }
}
