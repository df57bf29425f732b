//! The store's file on disk, as opposed to what it holds: where it is, the links that
//! must not be followed there, and the copy left beside it.
//!
//! These live apart because the file's place needs care of its own. The store sits in
//! a root-owned state directory written by a daemon running as root, so a symbolic link
//! planted at the file, at one of SQLite's companions (`-wal`, `-shm`, `-journal`) or
//! at the copy would make the daemon create or overwrite a file of the planter's
//! choosing: no link at any of those names is ever followed, and a state directory
//! created here is private to its owner (0700). And since the file is the only place
//! what the daemon learned survives, a healthy store leaves a whole copy (`<db>.bak`)
//! that a damaged one can be recovered from; the error for a corrupt store names it
//! ([`recovery_hint`]).

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use numasched_model::files::one_line;

use super::StoreError;

/// Where the daemon keeps the store unless told otherwise (`--db`).
pub const DEFAULT_PATH: &str = "/var/lib/numasched/profiles.db";

/// Appended to the store's path for the copy made at each healthy open.
pub const BACKUP_SUFFIX: &str = ".bak";

/// The files SQLite keeps beside the store (besides the store itself, suffix ""). Each
/// is opened by name, so a link planted at any of them would redirect SQLite's writes.
const COMPANIONS: [&str; 4] = ["", "-wal", "-shm", "-journal"];

/// Writes `<real>.bak` through a temporary file renamed over it, so that the copy
/// is always whole: a crash or a full disk half-way leaves the previous copy. The
/// temporary is locked while it is written, so that two processes opening the
/// store at once (the daemon starting while `profile set` runs) cannot rename each
/// other's half-written file into place. Returns `None` when there was nothing to
/// copy or another process was writing the copy at the same moment. `conn` is the
/// store's open connection, `path` its path as given (named in messages) and `real` the
/// path SQLite opened (see [`locate`]).
pub(super) fn write_backup(
    conn: &Connection,
    path: &Path,
    real: &Path,
) -> Result<Option<PathBuf>, String> {
    let shown = backup_path(path);
    let fail = |what: String| {
        format!(
            "{}: no copy of the profile store written ({what}); the previous copy, if any, is kept",
            shown.display()
        )
    };
    let sql = |e: rusqlite::Error| fail(one_line(&e.to_string()));
    let rows: i64 = conn
        .query_row(
            "SELECT (SELECT count(*) FROM facts) + (SELECT count(*) FROM numa_history)",
            [],
            |r| r.get(0),
        )
        .map_err(sql)?;
    if rows == 0 {
        return Ok(None);
    }
    let bak = backup_path(real);
    if is_symlink(&bak) {
        return Err(fail(
            "it is a symbolic link and was not followed".to_string(),
        ));
    }
    let tmp = with_suffix(&bak, ".tmp");
    if is_symlink(&tmp) {
        // Removing a link removes the link, never its target.
        std::fs::remove_file(&tmp)
            .map_err(|e| fail(format!("removing the link {}: {e}", tmp.display())))?;
    }
    let io = |what: &str, e: std::io::Error| fail(format!("{what} {}: {e}", tmp.display()));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(|e| io("opening", e))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
        Err(e) => return Err(io("locking", e.into())),
    }
    // The lock holder before us may have renamed this very file into place: then
    // the name now holds another file, or none, and the copy is fresh anyway.
    let ours = file.metadata().map_err(|e| io("reading", e))?;
    match std::fs::symlink_metadata(&tmp) {
        Ok(m) if m.dev() == ours.dev() && m.ino() == ours.ino() => {}
        _ => return Ok(None),
    }
    let written = (|| {
        // A leftover of an interrupted copy: VACUUM INTO needs an empty file.
        file.set_len(0).map_err(|e| io("emptying", e))?;
        match std::fs::remove_file(with_suffix(&tmp, "-journal")) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("removing the journal of", e)),
        }
        let target = tmp
            .to_str()
            .ok_or_else(|| fail(format!("{} is not UTF-8", tmp.display())))?;
        conn.execute("VACUUM INTO ?1", [target]).map_err(sql)?;
        file.sync_all().map_err(|e| io("syncing", e))?;
        std::fs::rename(&tmp, &bak).map_err(|e| io("renaming", e))?;
        Ok(())
    })();
    if let Err(e) = written {
        // Not left behind: on a full disk it holds space the store needs.
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename is durable once the directory is; a failure here only risks the
    // copy, which a later open writes again.
    if let Some(dir) = bak.parent() {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(Some(shown))
}

/// The damaged file's `-wal` must go too: SQLite would replay it onto the copy.
pub(super) fn recovery_hint(backup: Option<&Path>) -> String {
    backup.map_or_else(String::new, |b| {
        format!(
            "; the copy made at its last healthy open is {}: move the damaged file and its -wal and -shm files aside, then copy that one into place to recover the learned profiles",
            b.display()
        )
    })
}

pub(super) fn symlink_refusal(path: &Path, link: &Path) -> String {
    // The same link for SQLite's own refusal too: the directory was resolved before
    // SQLite saw the path, so a link it meets is one that appeared since.
    let what = if link == path {
        "the path is a symbolic link".to_string()
    } else {
        format!("{} is a symbolic link", link.display())
    };
    format!("{what} and was not followed; refusing to open the profile store through it — replace the link with a regular file or pass --db")
}

/// Where the copy of the store at `path` is kept.
pub fn backup_path(path: &Path) -> PathBuf {
    with_suffix(path, BACKUP_SUFFIX)
}

pub(super) fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = OsString::from(path.as_os_str());
    s.push(suffix);
    PathBuf::from(s)
}

pub(super) fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Creates the store's own directory when missing (not the ones above it) and returns the path SQLite is to open:
/// the directory resolved (an administrator may well have linked the state directory
/// to another disk, and SQLite's NOFOLLOW refuses links anywhere on the path), the
/// file name itself not. Refuses when the file or a companion is a link.
pub(super) fn locate(path: &Path) -> Result<PathBuf, StoreError> {
    let not_writable = |what: String| StoreError::NotWritable {
        path: path.to_path_buf(),
        what,
    };
    let name = path
        .file_name()
        .ok_or_else(|| not_writable("the path does not name a file".into()))?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // Private: the profiles say what runs on the machine, and a directory others can
    // write to is where links get planted.
    numasched_model::files::create_dir_of(path, 0o700, Path::new(DEFAULT_PATH))
        .map_err(|e| not_writable(e.without_path()))?;
    let real_dir = std::fs::canonicalize(dir)
        .map_err(|e| not_writable(format!("resolving {}: {e}", dir.display())))?;
    let real = real_dir.join(name);
    // A device or FIFO is no store, and SQLite would create its `-journal` beside it
    // (`--db /dev/null` left /dev/null-journal, world-writable, in /dev).
    if let Err(e) = numasched_model::files::regular_or_absent(&real) {
        if !is_symlink(&real) {
            return Err(not_writable(e.to_string()));
        }
    }
    for suffix in COMPANIONS {
        if is_symlink(&with_suffix(&real, suffix)) {
            return Err(StoreError::Symlink {
                path: path.to_path_buf(),
                link: with_suffix(path, suffix),
            });
        }
    }
    trusted_or_new(path, &real, &real_dir)?;
    Ok(real)
}

/// A store found is used only if root or this user owns it, no one else may write
/// it, and its directory is as safe (`numasched_model::files::untrusted`): what it
/// says decides where a root daemon runs other users' processes. A missing one is
/// created here, readable by its owner only, so that SQLite (which creates it with
/// the umask, group-writable under 002) never makes a store the next open refuses.
fn trusted_or_new(path: &Path, real: &Path, real_dir: &Path) -> Result<(), StoreError> {
    match std::fs::symlink_metadata(real) {
        Ok(meta) if meta.is_file() => {
            let dir = std::fs::metadata(real_dir).ok();
            let me = nix::unistd::geteuid().as_raw();
            match numasched_model::files::untrusted(real, &meta, dir.as_ref(), me) {
                Some(why) => Err(StoreError::Untrusted {
                    path: path.to_path_buf(),
                    why,
                }),
                None => Ok(()),
            }
        }
        // A link is refused by SQLite's NOFOLLOW, with its own message.
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(real)
            {
                Ok(_) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                Err(e) => Err(StoreError::NotWritable {
                    path: path.to_path_buf(),
                    what: e.to_string(),
                }),
            }
        }
        Err(e) => Err(StoreError::NotWritable {
            path: path.to_path_buf(),
            what: e.to_string(),
        }),
    }
}
