//! Learning: how the daemon's observations of a program become its learned numbers.
//!
//! Learning is what lets the daemon place a program well from its first epoch on the
//! next run, instead of waiting to measure it again. Most quantities are a running mean
//! of what was measured ([`Store::learn`]). The NUMA penalty cannot be measured in one
//! epoch, so it is learned from the program's own history: the daemon reports, per
//! epoch, the CPI it saw and the share of the epoch the program ran on its home node
//! ([`Store::observe_epoch`]); epochs that were clearly local or clearly remote are
//! accumulated apart and, once both sides have enough of them, their mean CPIs give
//! `np = CPI_remote / CPI_local` ([`estimate_penalty`]), the definition of Majo & Gross.
//!
//! The arithmetic is kept apart from the SQL (`rows.rs`) so that it can be read, and
//! tested, without a database.

use serde::{Deserialize, Serialize};

use super::error::classify;
use super::facts::check_program;
use super::rows::{delete_learned, put_fact, read_history, read_learned, write_history};
use super::{Fact, Origin, Quantity, Store, StoreError};

/// Thresholds for learning the NUMA penalty from epochs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LearnParams {
    /// An epoch counts as *local* when at least this share of it ran on the home node.
    pub local_at_least: f64,
    /// An epoch counts as *remote* when at most this share of it ran on the home node.
    /// Epochs in between mix both and are not used: they would pull the two means
    /// towards each other and understate the penalty.
    pub remote_at_most: f64,
    /// Epochs needed on each side before a penalty is reported: one epoch's CPI is noisy
    /// (phases, co-runners), a mean over several is not.
    pub min_samples: u64,
    /// Each side's count is halved (with its sum) when it reaches this, so that old
    /// runs fade and the estimate follows a program whose behaviour changed (a new
    /// version, a different input).
    pub max_samples: u64,
}

impl Default for LearnParams {
    fn default() -> Self {
        LearnParams {
            local_at_least: 0.9,
            remote_at_most: 0.1,
            min_samples: 5,
            max_samples: 1000,
        }
    }
}

/// Running CPI sum over the epochs of one side (local or remote).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpiStats {
    /// Epochs counted (after fading, see [`LearnParams::max_samples`]).
    pub n: u64,
    pub sum: f64,
}

impl CpiStats {
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

/// A program's local and remote epochs so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NumaHistory {
    pub local: CpiStats,
    pub remote: CpiStats,
}

impl NumaHistory {
    /// Adds one epoch. Returns `None` (and changes nothing) for an epoch that is neither
    /// clearly local nor clearly remote.
    pub fn observe(
        &self,
        cpi: f64,
        ran_local_fraction: f64,
        p: &LearnParams,
    ) -> Option<NumaHistory> {
        let mut h = *self;
        let side = if ran_local_fraction >= p.local_at_least {
            &mut h.local
        } else if ran_local_fraction <= p.remote_at_most {
            &mut h.remote
        } else {
            return None;
        };
        side.n += 1;
        side.sum += cpi;
        if p.max_samples >= 2 && side.n >= p.max_samples {
            side.n /= 2;
            side.sum /= 2.0;
        }
        Some(h)
    }
}

/// `np = mean CPI remote / mean CPI local` once both sides have `min_samples` epochs.
/// Clamped to ≥ 1: a program cannot run faster away from its memory, so a ratio below
/// 1 is noise (a phase change between the two sets of epochs) and the honest reading is
/// "no measurable penalty".
pub fn estimate_penalty(h: &NumaHistory, min_samples: u64) -> Option<f64> {
    let need = min_samples.max(1);
    if h.local.n < need || h.remote.n < need {
        return None;
    }
    let local = h.local.mean()?;
    let remote = h.remote.mean()?;
    if !(local.is_finite() && remote.is_finite()) || local <= 0.0 {
        return None;
    }
    Some((remote / local).max(1.0))
}

/// An epoch the daemon could not have measured is a bug upstream, not data: refused
/// before it can skew a mean that outlives the run.
fn check_epoch(cpi: f64, ran_local_fraction: f64) -> Result<(), StoreError> {
    if !(cpi.is_finite() && cpi > 0.0) {
        return Err(StoreError::Invalid {
            field: "cpi".into(),
            what: format!("{cpi} must be a finite number > 0"),
        });
    }
    if !(0.0..=1.0).contains(&ran_local_fraction) {
        return Err(StoreError::Invalid {
            field: "ran_local_fraction".into(),
            what: format!("{ran_local_fraction} must be a fraction in [0, 1]"),
        });
    }
    Ok(())
}

impl Store {
    /// Folds one observation of a quantity the daemon measures (MPKI alone, bandwidth,
    /// cache reuse) into the learned running mean.
    pub fn learn(
        &mut self,
        program: &str,
        q: Quantity,
        value: f64,
        now: i64,
    ) -> Result<Fact, StoreError> {
        check_program(program)?;
        q.check(value).map_err(|what| StoreError::Invalid {
            field: q.as_str().into(),
            what,
        })?;
        let tx = self
            .conn
            .transaction()
            .map_err(|e| classify(&self.path, e))?;
        let old = read_learned(&tx, program, q).map_err(|e| classify(&self.path, e))?;
        let (mean, n) = match old {
            Some((m, n)) if n > 0 => {
                let n = n as f64;
                (m + (value - m) / (n + 1.0), n as u64 + 1)
            }
            _ => (value, 1),
        };
        let fact = Fact {
            value: mean,
            samples: n,
            updated: now,
        };
        put_fact(&tx, program, q, Origin::Learned, &fact).map_err(|e| classify(&self.path, e))?;
        tx.commit().map_err(|e| classify(&self.path, e))?;
        Ok(fact)
    }

    /// Records one epoch of `program`: its CPI and the share of the epoch it ran on the
    /// node holding its memory. Returns the learned NUMA penalty once there is one (it is
    /// then also stored as the program's learned `numa_penalty`).
    pub fn observe_epoch(
        &mut self,
        program: &str,
        cpi: f64,
        ran_local_fraction: f64,
        now: i64,
        params: &LearnParams,
    ) -> Result<Option<f64>, StoreError> {
        self.observe_epochs(program, &[(cpi, ran_local_fraction)], now, params)
    }

    /// [`observe_epoch`](Self::observe_epoch) for several epochs of one program in one
    /// transaction: the daemon buffers epochs and writes them in batches, because a
    /// commit per process per second would make the store the daemon's main cost. All
    /// epochs are checked before anything is written.
    pub fn observe_epochs(
        &mut self,
        program: &str,
        epochs: &[(f64, f64)],
        now: i64,
        params: &LearnParams,
    ) -> Result<Option<f64>, StoreError> {
        check_program(program)?;
        for &(cpi, ran_local_fraction) in epochs {
            check_epoch(cpi, ran_local_fraction)?;
        }
        let path = self.path.clone();
        let e = |e| classify(&path, e);
        let tx = self.conn.transaction().map_err(e)?;
        let old = read_history(&tx, program).map_err(e)?.unwrap_or_default();
        let h = epochs.iter().fold(old, |h, &(cpi, frac)| {
            h.observe(cpi, frac, params).unwrap_or(h)
        });
        if h == old {
            return Ok(estimate_penalty(&old, params.min_samples));
        }
        write_history(&tx, program, &h, now).map_err(e)?;
        let np = estimate_penalty(&h, params.min_samples);
        if let Some(np) = np {
            let fact = Fact {
                value: np,
                samples: h.local.n.min(h.remote.n),
                updated: now,
            };
            put_fact(&tx, program, Quantity::NumaPenalty, Origin::Learned, &fact).map_err(e)?;
        }
        tx.commit().map_err(e)?;
        Ok(np)
    }

    /// The local/remote epochs recorded for `program`.
    pub fn numa_history(&self, program: &str) -> Result<Option<NumaHistory>, StoreError> {
        read_history(&self.conn, program).map_err(|e| self.err(e))
    }

    /// Removes what the daemon learned about `program` (for example after an upgrade
    /// changed its behaviour); the user's profile stays.
    pub fn forget_learned(&mut self, program: &str) -> Result<(), StoreError> {
        let path = self.path.clone();
        let e = |e| classify(&path, e);
        let tx = self.conn.transaction().map_err(e)?;
        delete_learned(&tx, program).map_err(e)?;
        tx.commit().map_err(e)
    }
}
