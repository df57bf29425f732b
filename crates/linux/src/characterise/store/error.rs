//! The store's errors, and SQLite's codes turned into them. An operator meets these at
//! the command line or in the daemon's log, usually with nothing else to go on, so each
//! names the file and says what to do about it rather than echoing SQLite.

use std::path::{Path, PathBuf};

use rusqlite::ErrorCode;

use numasched_model::files::one_line;
use numasched_model::profile::ProfileError;

use super::files::{backup_path, recovery_hint, symlink_refusal};
use super::schema::SCHEMA_VERSION;

/// Errors carry the path of the store so that a one-line message is actionable.
/// Underlying errors are part of the message, not a `source`, so that anyhow's `{:#}`
/// does not print them twice (same convention as [`ProfileError`]).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: cannot create or write the profile store ({what}); check permissions or pass --db", path.display())]
    NotWritable { path: PathBuf, what: String },
    #[error("{}: not a valid profile store, the file is corrupt or not SQLite ({what}); it was left untouched — move it aside to start a new store{}", path.display(), recovery_hint(backup.as_deref()))]
    Corrupt {
        path: PathBuf,
        what: String,
        /// The copy made at the last healthy open, when there is one.
        backup: Option<PathBuf>,
    },
    #[error("{}: the profile store cannot grow, the disk or filesystem is full ({what}); free some space", path.display())]
    Full { path: PathBuf, what: String },
    /// `link` is the store's path or one of its companions (`-wal`, `-shm`, `-journal`).
    #[error("{}: {}", path.display(), symlink_refusal(path, link))]
    Symlink { path: PathBuf, link: PathBuf },
    #[error("{}: an SQLite database of something else (tables: {tables}); refusing to use it as the profile store", path.display())]
    Foreign { path: PathBuf, tables: String },
    #[error("{}: not trusted as the profile store: {why}; make it root's or yours and not writable by others (chmod go-w), or pass --db", path.display())]
    Untrusted { path: PathBuf, why: String },
    #[error("{}: the profile store is locked by another process (is the daemon writing?); try again", path.display())]
    Locked { path: PathBuf },
    #[error("{}: written by a newer numasched (schema version {found}, this one knows up to {SCHEMA_VERSION})", path.display())]
    TooNew { path: PathBuf, found: i32 },
    #[error("{}: {what}", path.display())]
    Sqlite { path: PathBuf, what: String },
    /// A value the caller passed is out of range; `field` names it.
    #[error("{field}: {what}")]
    Invalid { field: String, what: String },
    #[error(transparent)]
    File(#[from] ProfileError),
}

/// Turns SQLite's codes into errors an operator can act on.
pub(super) fn classify(path: &Path, e: rusqlite::Error) -> StoreError {
    let what = one_line(&e.to_string());
    if e.sqlite_error()
        .is_some_and(|f| f.extended_code == rusqlite::ffi::SQLITE_CANTOPEN_SYMLINK)
    {
        return StoreError::Symlink {
            path: path.to_path_buf(),
            link: path.to_path_buf(),
        };
    }
    let path = path.to_path_buf();
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => corrupt(&path, what),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Locked { path },
        Some(ErrorCode::DiskFull) => StoreError::Full { path, what },
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
            StoreError::NotWritable { path, what }
        }
        _ => StoreError::Sqlite { path, what },
    }
}

/// A corrupt store, with its copy when there is one to recover from.
pub(super) fn corrupt(path: &Path, what: String) -> StoreError {
    let copy = backup_path(path);
    let backup = std::fs::symlink_metadata(&copy)
        .is_ok_and(|m| m.is_file())
        .then_some(copy);
    StoreError::Corrupt {
        path: path.to_path_buf(),
        what,
        backup,
    }
}
