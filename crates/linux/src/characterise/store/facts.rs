//! What the store holds about a program, in the terms its callers use. Every number
//! keeps who produced it, because a user's word and the daemon's measurement are
//! trusted differently (see [`numasched_model::character::resolve`]) and a user's
//! profile must survive a learned value written over it.

use serde::{Deserialize, Serialize};

use super::StoreError;

/// Who produced a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Supplied by a user: `profile set`, `profile import`.
    Given,
    /// Measured by the daemon on this machine over earlier runs.
    Learned,
}

impl Origin {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Origin::Given => "given",
            Origin::Learned => "learned",
        }
    }
    pub(super) fn parse(s: &str) -> Option<Origin> {
        match s {
            "given" => Some(Origin::Given),
            "learned" => Some(Origin::Learned),
            _ => None,
        }
    }
}

/// The per-program numbers the policies use (`Process` in a snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    Mpki,
    NumaPenalty,
    CacheReuse,
    BandwidthGbps,
}

impl Quantity {
    pub const ALL: [Quantity; 4] = [
        Quantity::Mpki,
        Quantity::NumaPenalty,
        Quantity::CacheReuse,
        Quantity::BandwidthGbps,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Quantity::Mpki => "mpki",
            Quantity::NumaPenalty => "numa_penalty",
            Quantity::CacheReuse => "cache_reuse",
            Quantity::BandwidthGbps => "bandwidth_gbps",
        }
    }

    pub(super) fn parse(s: &str) -> Option<Quantity> {
        Quantity::ALL.into_iter().find(|q| q.as_str() == s)
    }

    /// Checks a value against what the quantity means; the message says why not.
    pub fn check(self, v: f64) -> Result<(), String> {
        if !v.is_finite() {
            return Err(format!("{v} is not a finite number"));
        }
        match self {
            Quantity::Mpki | Quantity::BandwidthGbps if v < 0.0 => Err(format!("{v} must be ≥ 0")),
            Quantity::NumaPenalty if v < 1.0 => {
                Err(format!("{v} must be ≥ 1 (remote CPI / local CPI)"))
            }
            Quantity::CacheReuse if !(0.0..=1.0).contains(&v) => {
                Err(format!("{v} must be a fraction in [0, 1]"))
            }
            _ => Ok(()),
        }
    }
}

/// One stored number.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    pub value: f64,
    /// Observations behind a learned value; 0 for a given one.
    pub samples: u64,
    /// When it was last written, seconds since the Unix epoch (as passed by the caller).
    pub updated: i64,
}

/// A quantity as known from each origin. Both are kept: a user's profile stays behind a
/// learned value, and comes back if the learned one is cleared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Known {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given: Option<Fact>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned: Option<Fact>,
}

impl Known {
    /// Learned beats given: it was measured here, on this program's real runs.
    pub fn best(&self) -> Option<(f64, Origin)> {
        self.learned
            .map(|f| (f.value, Origin::Learned))
            .or(self.given.map(|f| (f.value, Origin::Given)))
    }

    fn is_empty(&self) -> bool {
        self.given.is_none() && self.learned.is_none()
    }

    pub(super) fn slot(&mut self, o: Origin) -> &mut Option<Fact> {
        match o {
            Origin::Given => &mut self.given,
            Origin::Learned => &mut self.learned,
        }
    }
}

/// Everything stored about one program.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredProgram {
    pub program: String,
    #[serde(default, skip_serializing_if = "Known::is_empty")]
    pub mpki: Known,
    #[serde(default, skip_serializing_if = "Known::is_empty")]
    pub numa_penalty: Known,
    #[serde(default, skip_serializing_if = "Known::is_empty")]
    pub cache_reuse: Known,
    #[serde(default, skip_serializing_if = "Known::is_empty")]
    pub bandwidth_gbps: Known,
    /// The last `profile measure` session of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<super::Measurement>,
}

impl StoredProgram {
    /// Whether a user gave any of its numbers (which an import or a built-in replaces).
    pub fn any_given(&self) -> bool {
        Quantity::ALL
            .into_iter()
            .any(|q| self.get(q).given.is_some())
    }

    pub fn get(&self, q: Quantity) -> &Known {
        match q {
            Quantity::Mpki => &self.mpki,
            Quantity::NumaPenalty => &self.numa_penalty,
            Quantity::CacheReuse => &self.cache_reuse,
            Quantity::BandwidthGbps => &self.bandwidth_gbps,
        }
    }

    pub(super) fn get_mut(&mut self, q: Quantity) -> &mut Known {
        match q {
            Quantity::Mpki => &mut self.mpki,
            Quantity::NumaPenalty => &mut self.numa_penalty,
            Quantity::CacheReuse => &mut self.cache_reuse,
            Quantity::BandwidthGbps => &mut self.bandwidth_gbps,
        }
    }

    /// The store's share of the evidence for [`numasched_model::character::resolve`];
    /// the caller adds what it measured on this run.
    pub fn evidence(&self) -> numasched_model::character::Evidence {
        let v = |k: &Known, o: Origin| match o {
            Origin::Given => k.given.map(|f| f.value),
            Origin::Learned => k.learned.map(|f| f.value),
        };
        numasched_model::character::Evidence {
            learned_mpki: v(&self.mpki, Origin::Learned),
            learned_np: v(&self.numa_penalty, Origin::Learned),
            profile_mpki: v(&self.mpki, Origin::Given),
            profile_np: v(&self.numa_penalty, Origin::Given),
            bench_np: self.measured.as_ref().map(|m| m.result.numa_penalty),
            bench_mpki: self.measured.as_ref().and_then(|m| m.mpki),
            bench_uncertain: self.measured.as_ref().is_some_and(|m| m.result.uncertain),
            ..numasched_model::character::Evidence::default()
        }
    }
}

/// What a user states about a program (`profile set`, one profile of an import). `None`
/// = not stated.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GivenProfile {
    pub mpki: Option<f64>,
    pub numa_penalty: Option<f64>,
    pub cache_reuse: Option<f64>,
    pub bandwidth_gbps: Option<f64>,
}

impl GivenProfile {
    pub(super) fn values(&self) -> [(Quantity, Option<f64>); 4] {
        [
            (Quantity::Mpki, self.mpki),
            (Quantity::NumaPenalty, self.numa_penalty),
            (Quantity::CacheReuse, self.cache_reuse),
            (Quantity::BandwidthGbps, self.bandwidth_gbps),
        ]
    }

    /// Checks every stated value; the error names the field.
    pub fn validate(&self) -> Result<(), StoreError> {
        for (q, v) in self.values() {
            if let Some(v) = v {
                q.check(v).map_err(|what| StoreError::Invalid {
                    field: q.as_str().into(),
                    what,
                })?;
            }
        }
        Ok(())
    }
}

/// A blank name would file the numbers under a program no process ever matches.
pub(super) fn check_program(program: &str) -> Result<(), StoreError> {
    if program.trim().is_empty() {
        return Err(StoreError::Invalid {
            field: "program".into(),
            what: "must not be empty".into(),
        });
    }
    Ok(())
}

/// A name a user gives (`profile set`, `profile measure`) is also bounded: names the
/// daemon learns under come from /proc's 15-byte command names, escaped.
pub(super) fn check_given_program(program: &str) -> Result<(), StoreError> {
    check_program(program)?;
    let max = numasched_model::profile::MAX_NAME_BYTES;
    if program.len() > max {
        return Err(StoreError::Invalid {
            field: "program".into(),
            what: format!(
                "is {} bytes, more than the {max} a name may have",
                program.len()
            ),
        });
    }
    Ok(())
}
