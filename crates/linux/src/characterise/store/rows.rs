//! The SQL over the store's two tables (`facts`, `numa_history`), and the methods that
//! write what a user gives and read back what is known. Kept in one file so that the
//! tables' layout (`schema.rs`) is spelled out in one place besides the migration;
//! learning and import go through the helpers here.

use rusqlite::{params, Connection, OptionalExtension};

use super::error::{classify, corrupt};
use super::facts::check_given_program;
use super::{
    CpiStats, Fact, GivenProfile, NumaHistory, Origin, Quantity, Store, StoreError, StoredProgram,
};

impl Store {
    /// Sets the values `given` states in the user's profile of `program`; the values it
    /// does not state stay as they were given before (an imported file, by contrast,
    /// replaces its namesake whole). Learned numbers are kept.
    pub fn set_given(
        &mut self,
        program: &str,
        given: &GivenProfile,
        now: i64,
    ) -> Result<(), StoreError> {
        check_given_program(program)?;
        given.validate()?;
        let tx = self
            .conn
            .transaction()
            .map_err(|e| classify(&self.path, e))?;
        write_given(&tx, program, given, now, Given::Named).map_err(|e| classify(&self.path, e))?;
        tx.commit().map_err(|e| classify(&self.path, e))
    }

    /// Replaces the whole given profile of each program, in one transaction, so that an
    /// import is all or nothing.
    pub(super) fn replace_given<'a>(
        &mut self,
        profiles: impl IntoIterator<Item = (&'a str, GivenProfile)>,
        now: i64,
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let e = |e| classify(&path, e);
        let tx = self.conn.transaction().map_err(e)?;
        for (program, given) in profiles {
            write_given(&tx, program, &given, now, Given::Whole).map_err(e)?;
        }
        tx.commit().map_err(e)
    }

    /// One program; `None` when nothing is stored about it.
    pub fn get(&self, program: &str) -> Result<Option<StoredProgram>, StoreError> {
        let mut all = self.load(Some(program))?;
        Ok(all.pop())
    }

    /// Every program, by name.
    pub fn list(&self) -> Result<Vec<StoredProgram>, StoreError> {
        self.load(None)
    }

    fn load(&self, only: Option<&str>) -> Result<Vec<StoredProgram>, StoreError> {
        // One statement for one program and one for all, not `?1 IS NULL OR program =
        // ?1`: SQLite uses no index for that, so each `get` read the whole table (an
        // import of 100,000 profiles into a store holding as many ran over 2 minutes).
        let (facts, measurements) = match only {
            Some(_) => (
                "SELECT program, quantity, origin, value, samples, updated FROM facts \
                 WHERE program = ?1",
                "SELECT program FROM measurements WHERE program = ?1",
            ),
            None => (
                "SELECT program, quantity, origin, value, samples, updated FROM facts \
                 ORDER BY program",
                "SELECT program FROM measurements ORDER BY program",
            ),
        };
        let only = || rusqlite::params_from_iter(only.iter());
        let rows: Vec<(String, String, String, f64, i64, i64)> = self
            .conn
            .prepare_cached(facts)
            .and_then(|mut s| {
                s.query_map(only(), |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                    ))
                })?
                .collect()
            })
            .map_err(|e| self.err(e))?;
        let mut out: Vec<StoredProgram> = Vec::new();
        for (program, q, o, value, samples, updated) in rows {
            let (Some(q), Some(o)) = (Quantity::parse(&q), Origin::parse(&o)) else {
                return Err(corrupt(
                    &self.path,
                    format!("unknown quantity or origin '{q}'/'{o}' for '{program}'"),
                ));
            };
            if out.last().is_none_or(|p| p.program != program) {
                out.push(StoredProgram {
                    program,
                    ..StoredProgram::default()
                });
            }
            if let Some(p) = out.last_mut() {
                *p.get_mut(q).slot(o) = Some(Fact {
                    value,
                    samples: samples.max(0) as u64,
                    updated,
                });
            }
        }
        // A program may be known only by a `profile measure` session.
        let measured: Vec<String> = self
            .conn
            .prepare_cached(measurements)
            .and_then(|mut s| s.query_map(only(), |r| r.get(0))?.collect())
            .map_err(|e| self.err(e))?;
        // Both lists are in the same (byte) order: SQLite's BINARY collation is Rust's.
        for program in measured {
            let m = self.measurement(&program)?;
            match out.binary_search_by(|p| p.program.as_str().cmp(&program)) {
                Ok(i) => out[i].measured = m,
                Err(i) => out.insert(
                    i,
                    StoredProgram {
                        program,
                        measured: m,
                        ..StoredProgram::default()
                    },
                ),
            }
        }
        Ok(out)
    }
}

/// What a write of given values replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Given {
    /// The values named; the program's other given values stay (`profile set`).
    Named,
    /// The whole given profile (an imported file states the profile).
    Whole,
}

pub(super) fn write_given(
    c: &Connection,
    program: &str,
    given: &GivenProfile,
    now: i64,
    replaces: Given,
) -> rusqlite::Result<()> {
    match replaces {
        Given::Whole => {
            c.prepare_cached("DELETE FROM facts WHERE program = ?1 AND origin = 'given'")?
                .execute([program])?;
        }
        Given::Named => {
            for (q, v) in given.values() {
                if v.is_some() {
                    c.prepare_cached(
                        "DELETE FROM facts WHERE program = ?1 AND origin = 'given' \
                         AND quantity = ?2",
                    )?
                    .execute([program, q.as_str()])?;
                }
            }
        }
    }
    for (q, v) in given.values() {
        if let Some(value) = v {
            let fact = Fact {
                value,
                samples: 0,
                updated: now,
            };
            put_fact(c, program, q, Origin::Given, &fact)?;
        }
    }
    Ok(())
}

pub(super) fn put_fact(
    c: &Connection,
    program: &str,
    q: Quantity,
    o: Origin,
    f: &Fact,
) -> rusqlite::Result<()> {
    // Cached: an import writes 100,000s of these in one transaction.
    c.prepare_cached(
        "INSERT OR REPLACE INTO facts (program, quantity, origin, value, samples, updated) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        program,
        q.as_str(),
        o.as_str(),
        f.value,
        f.samples.min(i64::MAX as u64) as i64,
        f.updated
    ])?;
    Ok(())
}

/// The learned mean of `q` and the samples behind it, as stored (samples unchecked).
pub(super) fn read_learned(
    c: &Connection,
    program: &str,
    q: Quantity,
) -> rusqlite::Result<Option<(f64, i64)>> {
    c.query_row(
        "SELECT value, samples FROM facts \
         WHERE program = ?1 AND quantity = ?2 AND origin = 'learned'",
        params![program, q.as_str()],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

/// Both the learned facts and the epochs behind them go: a history left behind would
/// bring the forgotten penalty straight back at the next epoch.
pub(super) fn delete_learned(c: &Connection, program: &str) -> rusqlite::Result<()> {
    c.execute(
        "DELETE FROM facts WHERE program = ?1 AND origin = 'learned'",
        [program],
    )?;
    c.execute("DELETE FROM numa_history WHERE program = ?1", [program])?;
    Ok(())
}

pub(super) fn read_history(c: &Connection, program: &str) -> rusqlite::Result<Option<NumaHistory>> {
    c.query_row(
        "SELECT local_n, local_sum, remote_n, remote_sum FROM numa_history WHERE program = ?1",
        [program],
        |r| {
            Ok(NumaHistory {
                local: CpiStats {
                    n: r.get::<_, i64>(0)?.max(0) as u64,
                    sum: r.get(1)?,
                },
                remote: CpiStats {
                    n: r.get::<_, i64>(2)?.max(0) as u64,
                    sum: r.get(3)?,
                },
            })
        },
    )
    .optional()
}

pub(super) fn write_history(
    c: &Connection,
    program: &str,
    h: &NumaHistory,
    now: i64,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT OR REPLACE INTO numa_history \
         (program, local_n, local_sum, remote_n, remote_sum, updated) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            program,
            h.local.n as i64,
            h.local.sum,
            h.remote.n as i64,
            h.remote.sum,
            now
        ],
    )?;
    Ok(())
}
