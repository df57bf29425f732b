//! A token bucket for page migration bandwidth: migration is rate-limited.
//!
//! Moving pages costs memory bandwidth and stalls the process being moved, so the
//! actuator spends at most `rate` bytes per second on it, with bursts up to `burst`.
//! Time is a value the caller passes in (seconds on any monotonic clock), never read
//! inside: the limiter is then exactly testable and replayable.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenBucket {
    /// Bytes per second.
    rate: f64,
    /// Most bytes that may accumulate.
    burst: f64,
    /// Bytes available now; negative after an oversized move (debt paid off over time).
    tokens: f64,
    /// Clock value of the last refill; `None` until the first.
    last: Option<f64>,
}

impl TokenBucket {
    /// A full bucket. `rate` and `burst` are clamped to finite values ≥ 0.
    pub fn new(rate_bytes_per_s: f64, burst_bytes: f64) -> TokenBucket {
        let clean = |v: f64| if v.is_finite() && v > 0.0 { v } else { 0.0 };
        let burst = clean(burst_bytes);
        TokenBucket {
            rate: clean(rate_bytes_per_s),
            burst,
            tokens: burst,
            last: None,
        }
    }

    /// Adds what accrued since the last call. A clock that goes backwards or is not a
    /// number adds nothing (and never removes tokens).
    pub fn advance(&mut self, now_s: f64) {
        if !now_s.is_finite() {
            return;
        }
        match self.last {
            Some(last) if now_s > last => {
                self.tokens = (self.tokens + (now_s - last) * self.rate).min(self.burst);
                self.last = Some(now_s);
            }
            Some(_) => {}
            None => self.last = Some(now_s),
        }
    }

    pub fn available(&self) -> f64 {
        self.tokens
    }

    /// Takes `bytes` if they are available. A move larger than the whole burst is let
    /// through when the bucket is full, leaving it in debt, so it happens eventually
    /// and the long-run rate still holds.
    pub fn try_take(&mut self, bytes: u64) -> bool {
        let b = bytes as f64;
        let full = self.burst > 0.0 && self.tokens >= self.burst;
        if b <= self.tokens || (b > self.burst && full) {
            self.tokens -= b;
            true
        } else {
            false
        }
    }
}

impl TokenBucket {
    /// Spends `bytes` already used (a chunk's pages that moved), whatever is left:
    /// the caller checked there was room for a chunk first, so the debt is at most
    /// one chunk.
    pub fn spend(&mut self, bytes: u64) {
        self.tokens -= bytes as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refills_at_the_rate_up_to_the_burst() {
        let mut b = TokenBucket::new(100.0, 200.0);
        b.advance(0.0);
        assert!(b.try_take(150));
        assert!(!b.try_take(100));
        b.advance(0.5); // +50 → 100
        assert!(b.try_take(100));
        b.advance(100.0); // capped at the burst
        assert_eq!(b.available(), 200.0);
        b.advance(50.0); // backwards: nothing
        assert_eq!(b.available(), 200.0);
        b.advance(f64::NAN);
        assert_eq!(b.available(), 200.0);
    }

    #[test]
    fn oversized_moves_go_from_a_full_bucket_into_debt() {
        let mut b = TokenBucket::new(100.0, 100.0);
        b.advance(0.0);
        assert!(b.try_take(300));
        assert_eq!(b.available(), -200.0);
        b.advance(2.0);
        assert!(!b.try_take(1));
        b.advance(3.0);
        assert!(b.try_take(100));
        assert!(!TokenBucket::new(0.0, 0.0).try_take(1));
    }
}
