//! The store's tables and their layout version: what [`Store::open`](super::Store::open)
//! creates in a new file and brings an older one up to.

use rusqlite::Connection;

/// Layout version, kept in `PRAGMA user_version`. Bump it with a migration in
/// [`migrate`] whenever the tables change; a file from a newer numasched is refused
/// rather than misread.
pub const SCHEMA_VERSION: i32 = 3;

/// Brings a store from `from` to [`SCHEMA_VERSION`], in one transaction.
pub(super) fn migrate(conn: &mut Connection, from: i32) -> rusqlite::Result<()> {
    if from >= SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction()?;
    if from < 1 {
        tx.execute_batch(
            "CREATE TABLE facts (
                 program  TEXT NOT NULL,
                 quantity TEXT NOT NULL
                     CHECK (quantity IN ('mpki', 'numa_penalty', 'cache_reuse', 'bandwidth_gbps')),
                 origin   TEXT NOT NULL CHECK (origin IN ('given', 'learned')),
                 value    REAL NOT NULL,
                 samples  INTEGER NOT NULL,
                 updated  INTEGER NOT NULL,
                 PRIMARY KEY (program, quantity, origin)
             ) WITHOUT ROWID;
             CREATE TABLE numa_history (
                 program    TEXT PRIMARY KEY,
                 local_n    INTEGER NOT NULL,
                 local_sum  REAL NOT NULL,
                 remote_n   INTEGER NOT NULL,
                 remote_sum REAL NOT NULL,
                 updated    INTEGER NOT NULL
             ) WITHOUT ROWID;",
        )?;
    }
    if from < 2 {
        // `profile measure`: one row per program, the last session's conclusion and
        // the run times behind it (JSON arrays of seconds, in the order they ran).
        tx.execute_batch(
            "CREATE TABLE measurements (
                 program        TEXT PRIMARY KEY,
                 numa_penalty   REAL NOT NULL CHECK (numa_penalty >= 1),
                 spread         REAL NOT NULL CHECK (spread >= 0),
                 uncertain      INTEGER NOT NULL CHECK (uncertain IN (0, 1)),
                 cache_slowdown REAL,
                 local_node     INTEGER NOT NULL,
                 remote_node    INTEGER NOT NULL,
                 local_s        TEXT NOT NULL,
                 remote_s       TEXT NOT NULL,
                 pressured_s    TEXT NOT NULL,
                 machine        TEXT NOT NULL,
                 command        TEXT NOT NULL,
                 measured_at    INTEGER NOT NULL
             ) WITHOUT ROWID;",
        )?;
    }
    if from < 3 {
        // MPKI counted over the local runs, where the machine has counters (NULL
        // where it has none).
        tx.execute_batch("ALTER TABLE measurements ADD COLUMN mpki REAL;")?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()
}
