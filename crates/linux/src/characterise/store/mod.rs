//! The profile store: what numasched knows about each *program* (not process),
//! kept in an embedded SQLite database so that it survives restarts of the daemon and
//! reboots of the machine. Without it every run would start blind, placing a program
//! as if nothing were known until its counters had been read for a while. Each number
//! says where it came from — `given` by a user (`numasched profile set` / `import`) or
//! `learned` by the daemon from the program's earlier runs — because the two are
//! trusted differently (see [`numasched_model::character::resolve`]). What
//! `profile measure` found by running a program local and remote is kept apart, with
//! the run times behind it (`measurements.rs`).
//!
//! Nothing here reads the clock: callers pass `now` (seconds since the Unix epoch), so
//! the logic is deterministic under test.
//!
//! The file is the only place what the daemon learned survives, so it is handled with
//! care: a damaged file is reported and never replaced; each healthy open leaves a copy
//! next to it (`<db>.bak`, see [`Store::open`]) that a damaged store can be recovered
//! from; and no symbolic link at the file or its SQLite companions (`-wal`, `-shm`,
//! `-journal`) is ever followed, since the daemon runs as root and a link planted there
//! would make it create or overwrite a file of the planter's choosing.
//!
//! One job per file: the numbers and who gave them in `facts.rs`; opening the file as
//! a store in `open.rs`; the SQL over its tables in `rows.rs`, their layout and version
//! in `schema.rs`; how observations become learned numbers in `learn.rs`; profile files
//! in and out in `interchange.rs`; the file on disk (its path, the links refused there,
//! the copy) in `files.rs`; and the errors an operator sees in `error.rs`.

mod error;
mod facts;
mod files;
mod interchange;
mod learn;
mod measurements;
mod open;
mod rows;
mod schema;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_files;

pub use error::StoreError;
pub use facts::{Fact, GivenProfile, Known, Origin, Quantity, StoredProgram};
pub use files::{backup_path, BACKUP_SUFFIX, DEFAULT_PATH};
pub use interchange::{is_toml, render_profiles, ProfileFile};
pub use learn::{estimate_penalty, CpiStats, LearnParams, NumaHistory};
pub use measurements::{date_of, Measurement};
#[cfg(test)]
pub(crate) use open::Fault;
pub use open::Store;
pub use schema::SCHEMA_VERSION;
