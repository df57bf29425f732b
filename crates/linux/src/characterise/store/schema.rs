//! The store's tables and their layout version: what [`Store::open`](super::Store::open)
//! creates in a new file and brings an older one up to.

use rusqlite::Connection;

/// Layout version, kept in `PRAGMA user_version`. Bump it with a migration in
/// [`migrate`] whenever the tables change; a file from a newer numasched is refused
/// rather than misread.
pub const SCHEMA_VERSION: i32 = 1;

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
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()
}
