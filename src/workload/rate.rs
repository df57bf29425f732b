//! Rate arithmetic and the report lines, kept apart from the timing loop so the numbers
//! can be unit-tested without running anything.
//!
//! Conventions: the cpu workload counts loop iterations; the stream workload counts bytes
//! the way STREAM does for the triad — 24 bytes per element per pass (read `b[i]`, read
//! `c[i]`, write `a[i]`, 8 bytes each), not counting write-allocate reads of `a`. GB is
//! 10^9 bytes, as in STREAM's output.

use numasched_model::plural::count;
use serde::Serialize;

/// Bytes moved per element of one triad pass: two f64 reads and one f64 write.
pub const TRIAD_BYTES_PER_ELEMENT: u64 = 24;

/// Units of work per second; zero when no time has passed, so the first report of an
/// unlucky scheduling slice never prints infinity or NaN.
pub fn rate(work: u64, seconds: f64) -> f64 {
    if seconds > 0.0 && seconds.is_finite() {
        work as f64 / seconds
    } else {
        0.0
    }
}

/// Bytes per second → GB/s (10^9).
pub fn gb_per_s(bytes_per_s: f64) -> f64 {
    bytes_per_s / 1e9
}

/// What a workload counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    Iterations,
    Bytes,
}

/// One JSON Lines record. `event` tells consumers which fields to expect: `start` (the
/// parameters actually used, after defaults), `progress` (one per report interval, rate
/// over that interval) and `summary` (totals over the whole run).
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub event: &'static str,
    pub workload: &'static str,
    pub pid: u32,
    pub threads: usize,
    pub unit: Unit,
    /// Seconds since the workers were all ready.
    pub elapsed_s: f64,
    /// Work done since start (iterations or bytes).
    pub total: u64,
    /// Work per second: over the last interval for `progress`, over the run for `summary`.
    pub rate: f64,
    /// `rate` in GB/s; stream only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gb_per_s: Option<f64>,
    /// Bytes per thread of the three arrays; stream only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    pub membind: Option<u32>,
    /// `deadline` or `signal`; summary only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<&'static str>,
}

impl Event {
    /// The human-readable form of the same record.
    pub fn text(&self) -> String {
        let amount = match self.unit {
            Unit::Iterations => format!("{:.1} M iterations", self.total as f64 / 1e6),
            Unit::Bytes => format!("{:.2} GB moved", self.total as f64 / 1e9),
        };
        let rate = match self.unit {
            Unit::Iterations => format!("{:.1} M iter/s", self.rate / 1e6),
            Unit::Bytes => format!("{:.2} GB/s", gb_per_s(self.rate)),
        };
        let bind = match self.membind {
            Some(n) => format!(", memory bound to node {n}"),
            None => String::new(),
        };
        match self.event {
            "start" => {
                let size = match self.size_bytes {
                    Some(b) => format!(", {} MiB per thread", b >> 20),
                    None => String::new(),
                };
                format!(
                    "workload {} started: pid {}, {}{size}{bind}",
                    self.workload,
                    self.pid,
                    count(self.threads, "thread")
                )
            }
            "summary" => format!(
                "summary: {} {:.2}s, {amount}, {rate} average, {}{bind}, stopped by {}",
                self.workload,
                self.elapsed_s,
                count(self.threads, "thread"),
                self.stopped_by.unwrap_or("deadline")
            ),
            _ => format!("{:8.2}s  {amount:>20}  {rate:>14}", self.elapsed_s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_work_over_time() {
        assert_eq!(rate(1000, 2.0), 500.0);
        assert_eq!(rate(0, 1.0), 0.0);
    }

    #[test]
    fn rate_without_time_is_zero_not_infinite() {
        assert_eq!(rate(1000, 0.0), 0.0);
        assert_eq!(rate(1000, -1.0), 0.0);
        assert_eq!(rate(1000, f64::NAN), 0.0);
    }

    #[test]
    fn triad_bytes_to_gb_per_s() {
        // 250M elements in 2 s: 6 GB moved, 3 GB/s.
        let bytes = 250_000_000 * TRIAD_BYTES_PER_ELEMENT;
        assert_eq!(bytes, 6_000_000_000);
        assert!((gb_per_s(rate(bytes, 2.0)) - 3.0).abs() < 1e-12);
    }

    #[test]
    fn json_carries_the_stream_fields_only_for_stream() {
        let mut e = Event {
            event: "progress",
            workload: "cpu",
            pid: 1,
            threads: 1,
            unit: Unit::Iterations,
            elapsed_s: 1.0,
            total: 10,
            rate: 10.0,
            gb_per_s: None,
            size_bytes: None,
            membind: None,
            stopped_by: None,
        };
        let v = serde_json::to_value(&e).expect("json");
        assert!(v.get("gb_per_s").is_none());
        assert_eq!(v["unit"], "iterations");
        e.unit = Unit::Bytes;
        e.gb_per_s = Some(1.5);
        let v = serde_json::to_value(&e).expect("json");
        assert_eq!(v["gb_per_s"], 1.5);
        assert_eq!(v["unit"], "bytes");
    }
}
