//! The `measurements` table: what `profile measure` concluded about a program, with the
//! run times it concluded it from, so that `profile list --json` can show the evidence
//! and a later session can be compared with it. One row per program: a new session
//! replaces the last (the machine or the program may have changed since).

use numasched_model::character::measured::MeasuredPenalty;
use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::error::{classify, corrupt};
use super::facts::check_given_program;
use super::{Store, StoreError};

/// One `profile measure` session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    #[serde(flatten)]
    pub result: MeasuredPenalty,
    /// The node the CPUs and the local memory were on, and the remote memory's node.
    pub local_node: u32,
    pub remote_node: u32,
    /// Wall seconds of each run, in the order they ran.
    pub local_s: Vec<f64>,
    pub remote_s: Vec<f64>,
    /// Runs beside the LLC co-runner (empty unless `--llc-pressure`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pressured_s: Vec<f64>,
    /// LLC misses per kilo-instruction over the local runs, where the machine has
    /// hardware counters.
    #[serde(default)]
    pub mpki: Option<f64>,
    /// The machine it ran on (host name and topology in one line).
    pub machine: String,
    /// The command line measured.
    pub command: String,
    /// Seconds since the Unix epoch.
    pub measured_at: i64,
}

impl Measurement {
    /// "measured 2026-11-28: penalty 0.42 ± 0.03", what `plan` and `status` say of it.
    pub fn describe(&self) -> String {
        format!(
            "measured {}: {}",
            date_of(self.measured_at),
            self.result.describe()
        )
    }
}

/// YYYY-MM-DD (UTC) of Unix seconds, without a calendar crate (days to civil date,
/// Howard Hinnant's algorithm).
pub fn date_of(secs: i64) -> String {
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn seconds_json(v: &[f64]) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

impl Store {
    /// Records a session, replacing the program's last one.
    pub fn put_measurement(&mut self, program: &str, m: &Measurement) -> Result<(), StoreError> {
        check_given_program(program)?;
        let r = &m.result;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO measurements (program, numa_penalty, spread, uncertain, \
                 cache_slowdown, local_node, remote_node, local_s, remote_s, pressured_s, \
                 machine, command, measured_at, mpki) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                params![
                    program,
                    r.numa_penalty,
                    r.spread,
                    r.uncertain,
                    r.cache_slowdown,
                    m.local_node,
                    m.remote_node,
                    seconds_json(&m.local_s),
                    seconds_json(&m.remote_s),
                    seconds_json(&m.pressured_s),
                    m.machine,
                    m.command,
                    m.measured_at,
                    m.mpki
                ],
            )
            .map_err(|e| classify(&self.path, e))?;
        Ok(())
    }

    /// The program's last session, if any.
    pub fn measurement(&self, program: &str) -> Result<Option<Measurement>, StoreError> {
        type Row = (
            f64,
            f64,
            bool,
            Option<f64>,
            u32,
            u32,
            String,
            String,
            String,
            String,
            String,
            i64,
            Option<f64>,
        );
        let row: Option<Row> = self
            .conn
            .query_row(
                "SELECT numa_penalty, spread, uncertain, cache_slowdown, local_node, remote_node, \
                 local_s, remote_s, pressured_s, machine, command, measured_at, mpki \
                 FROM measurements WHERE program = ?1",
                [program],
                |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                        r.get(7)?,
                        r.get(8)?,
                        r.get(9)?,
                        r.get(10)?,
                        r.get(11)?,
                        r.get(12)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| classify(&self.path, e))?;
        let Some((np, spread, uncertain, cache, ln, rn, ls, rs, ps, machine, command, at, mpki)) =
            row
        else {
            return Ok(None);
        };
        let times = |text: &str| -> Result<Vec<f64>, StoreError> {
            serde_json::from_str(text).map_err(|e| {
                corrupt(
                    &self.path,
                    format!("run times of '{program}' are not a list of seconds: {e}"),
                )
            })
        };
        Ok(Some(Measurement {
            result: MeasuredPenalty {
                numa_penalty: np,
                spread,
                uncertain,
                cache_slowdown: cache,
            },
            local_node: ln,
            remote_node: rn,
            local_s: times(&ls)?,
            remote_s: times(&rs)?,
            pressured_s: times(&ps)?,
            machine,
            command,
            measured_at: at,
            mpki: mpki.filter(|v| v.is_finite() && *v >= 0.0),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(951_782_400), "2000-02-29");
        assert_eq!(date_of(1_795_824_000), "2026-11-28");
    }
}
