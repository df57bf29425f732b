//! The open store and the checks a file passes before it is used as one. Opening is
//! where a store is refused rather than risked: a file that is damaged, someone else's
//! database or from a newer numasched is reported and left as it was, because it may
//! hold the only copy of what was learned.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use numasched_model::files::one_line;

use super::error::{classify, corrupt};
use super::files::{self, locate};
use super::schema::{migrate, SCHEMA_VERSION};
use super::StoreError;

/// How long to wait for another process (the daemon, a second CLI) holding the write
/// lock before reporting [`StoreError::Locked`]. Writes are tiny, so a longer wait means
/// something is stuck.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// An open profile store.
#[derive(Debug)]
pub struct Store {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
    /// The copy written at open, if one was.
    backup: Option<PathBuf>,
    /// Why no copy could be written at open, for the caller to log.
    backup_warning: Option<String>,
}

impl Store {
    /// Opens the store at `path`, creating it (and its directory, private to the owner)
    /// if missing. An existing file that is not a valid store is reported, never
    /// replaced: it may hold a user's only copy of their profiles. A symbolic link at
    /// the file or at one of SQLite's companion files is refused, not followed.
    ///
    /// Once the store has passed its checks it is copied to `<path>.bak`, so that a
    /// file damaged later (a disk error, a crash of the filesystem) can be recovered
    /// from the state at its last healthy open; the error for a corrupt file then names
    /// the copy. A copy that cannot be written (no space, say) does not fail the open:
    /// see [`Store::backup_warning`]. An empty store is not copied, so that a fresh
    /// store started after a corrupt one never overwrites the copy of the old one.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Store::open_inner(path, true)
    }

    /// [`Store::open`] without the copy, for one-shot readers (`plan`) that promise to
    /// leave no trace beyond what opening requires.
    pub fn open_without_backup(path: &Path) -> Result<Store, StoreError> {
        Store::open_inner(path, false)
    }

    fn open_inner(path: &Path, backup: bool) -> Result<Store, StoreError> {
        let real = locate(path)?;
        let path = path.to_path_buf();
        // NOFOLLOW also covers a link planted between the check in `locate` and here.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let conn = Connection::open_with_flags(&real, flags).map_err(|e| classify(&path, e))?;
        let mut store = Store {
            conn,
            path,
            backup: None,
            backup_warning: None,
        };
        store.init()?;
        if backup {
            match store.write_backup(&real) {
                Ok(copy) => store.backup = copy,
                Err(w) => store.backup_warning = Some(w),
            }
        }
        Ok(store)
    }

    /// The copy written when the store was opened; `None` when the store was empty or
    /// the copy failed.
    pub fn backup(&self) -> Option<&Path> {
        self.backup.as_deref()
    }

    /// One line saying why no copy could be written at open (the store itself works).
    pub fn backup_warning(&self) -> Option<&str> {
        self.backup_warning.as_deref()
    }

    /// Writes the copy at `<real>.bak` (see [`files::write_backup`]); `real` is the
    /// path SQLite opened.
    fn write_backup(&self, real: &Path) -> Result<Option<PathBuf>, String> {
        files::write_backup(&self.conn, &self.path, real)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn err(&self, e: rusqlite::Error) -> StoreError {
        classify(&self.path, e)
    }

    fn init(&mut self) -> Result<(), StoreError> {
        let path = self.path.clone();
        let c = &self.conn;
        let e = |e| classify(&path, e);
        c.busy_timeout(BUSY_TIMEOUT).map_err(e)?;
        // Reading the header is the first time SQLite looks at the file: a file that is
        // not SQLite fails here with NOTADB.
        let version: i32 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(e)?;
        let check: String = c
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(e)?;
        if check != "ok" {
            return Err(corrupt(&path, one_line(&check)));
        }
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path,
                found: version,
            });
        }
        if version == 0 {
            let tables: Vec<String> = c
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                .and_then(|mut s| {
                    s.query_map([], |r| r.get::<_, String>(0))?
                        .collect::<Result<_, _>>()
                })
                .map_err(e)?;
            if !tables.is_empty() {
                return Err(StoreError::Foreign {
                    path,
                    tables: tables.join(", "),
                });
            }
        }
        if c.is_readonly(rusqlite::MAIN_DB).map_err(e)? {
            return Err(StoreError::NotWritable {
                path,
                what: "the file is read-only".into(),
            });
        }
        // WAL: the daemon writes every epoch while `profile list` reads; readers then
        // never block the writer, and a crash mid-write cannot corrupt the file.
        let mode: String = c
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(e)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::NotWritable {
                path,
                what: format!("cannot switch to WAL journaling (got {mode})"),
            });
        }
        migrate(&mut self.conn, version).map_err(|e| classify(&self.path, e))
    }
}

/// Faults a test puts on a store's connection, to get SQLite's own errors for a full
/// disk or a read-only file on the next write (connection settings: the file and other
/// connections are unaffected).
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// SQLITE_FULL as soon as the file would need another page.
    Full,
    /// SQLITE_READONLY on any write.
    ReadOnly,
    /// Lifts either.
    Lifted,
}

#[cfg(test)]
impl Store {
    pub(crate) fn inject(&self, fault: Fault) {
        let c = &self.conn;
        let unlimited = i64::from(u32::MAX) - 1;
        let (max_pages, query_only) = match fault {
            Fault::Full => (
                c.query_row("PRAGMA page_count", [], |r| r.get::<_, i64>(0))
                    .expect("page_count"),
                false,
            ),
            Fault::ReadOnly => (unlimited, true),
            Fault::Lifted => (unlimited, false),
        };
        let _now_max: i64 = c
            .query_row(&format!("PRAGMA max_page_count = {max_pages}"), [], |r| {
                r.get(0)
            })
            .expect("max_page_count");
        c.pragma_update(None, "query_only", query_only)
            .expect("query_only");
    }
}
