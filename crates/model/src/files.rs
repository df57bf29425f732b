//! Files an operator names (configuration, journal, profile store, exports): they must
//! be regular files or not exist yet, and are read with a size limit. A device, FIFO or
//! socket at such a path is refused before anything is read or created beside it:
//! `--config /dev/zero` would be read until memory runs out, a FIFO would block the
//! start forever, and `--db /dev/null` would make SQLite create `/dev/null-journal`.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A parser's message on one line: errors about an operator's files are one line each
/// (a log line, a terminal line), whatever the parser wrapped or quoted.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A deserializer's message in the words of the file's reader, not of the program's
/// types: serde says what it expected by the Rust type (`expected u32`, `expected
/// struct TopologyDesc`), which means nothing to whoever wrote the file.
pub fn plain_types(msg: &str) -> String {
    // Sized types say their bound: "expected a whole number ≥ 0" for 99999999999
    // read as if the number were negative (issue 41).
    const WORDS: [(&[&str], &str); 8] = [
        (&["u8"], "a whole number from 0 to 255"),
        (&["u16"], "a whole number from 0 to 65535"),
        (&["u32"], "a whole number from 0 to 4294967295"),
        (
            &["u64", "usize"],
            "a whole number from 0 to 18446744073709551615",
        ),
        (&["i32"], "a whole number from -2147483648 to 2147483647"),
        (&["i8", "i16", "i64", "isize"], "a whole number"),
        (&["f32", "f64"], "a number"),
        (&["a sequence"], "a list"),
    ];
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(at) = rest.find("expected ") {
        let (head, tail) = rest.split_at(at + "expected ".len());
        out.push_str(head);
        rest = tail;
        // A type name ends at the first character that is not part of an identifier.
        let end = |t: &str| {
            t.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(t.len())
        };
        if let Some(name) = rest.strip_prefix("struct ") {
            out.push_str("an object (a table in TOML)");
            rest = &name[end(name)..];
            continue;
        }
        for (names, plain) in WORDS {
            // `u32` but not `u32x`: the name must end where the word does.
            let whole = |n: &&str| rest.starts_with(n) && end(&rest[n.len()..]) == 0;
            if let Some(n) = names.iter().copied().find(whole) {
                out.push_str(plain);
                rest = &rest[n.len()..];
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{}: is {kind}, not a regular file", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{}: {size} bytes, more than the {limit} a {what} may have", path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
        what: &'static str,
    },
    #[error("{}: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
}

impl FileError {
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            FileError::NotRegular { path, .. }
            | FileError::TooLarge { path, .. }
            | FileError::Io { path, .. } => path,
        }
    }

    /// The message without the path, for errors that name the path themselves.
    pub fn without_path(&self) -> String {
        match self {
            FileError::NotRegular { kind, .. } => format!("is {kind}, not a regular file"),
            FileError::TooLarge {
                size, limit, what, ..
            } => format!("{size} bytes, more than the {limit} a {what} may have"),
            FileError::Io { err, .. } => err.to_string(),
        }
    }

    /// As an I/O error without the path, for error types that carry the path beside
    /// an `io::Error`.
    pub fn into_io(self) -> std::io::Error {
        match self {
            FileError::Io { err, .. } => err,
            other => std::io::Error::other(other.without_path()),
        }
    }

    /// The path does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io { err, .. } if err.kind() == std::io::ErrorKind::NotFound)
    }
}

fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// `Ok(true)` for a regular file (following symlinks), `Ok(false)` when nothing is
/// there, an error for anything else.
pub fn regular_or_absent(path: &Path) -> Result<bool, FileError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(true),
        Ok(m) => Err(FileError::NotRegular {
            path: path.into(),
            kind: kind_of(m.file_type()),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(FileError::Io {
            path: path.into(),
            err,
        }),
    }
}

/// The text of a regular file of at most `limit` bytes. Opened without blocking (a
/// FIFO's open would wait for a writer) and checked on the open descriptor, so a file
/// swapped for a device between a check and the read is still refused.
pub fn read_text(path: &Path, limit: u64, what: &'static str) -> Result<String, FileError> {
    let io = |err| FileError::Io {
        path: path.into(),
        err,
    };
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(FileError::NotRegular {
            path: path.into(),
            kind: kind_of(meta.file_type()),
        });
    }
    let too_large = |size| FileError::TooLarge {
        path: path.into(),
        size,
        limit,
        what,
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    // The file may grow after the check: never read more than the limit.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text ({e})"),
        ))
    })
}

/// The directory [`create_dir_of`] would create for `path` (`None`: it exists), or
/// the error it would give, without creating anything: for checks made before a
/// program writes anything.
pub fn dir_to_create<'a>(path: &'a Path, default: &Path) -> Result<Option<&'a Path>, FileError> {
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(None);
    };
    if dir.is_dir() {
        return Ok(None);
    }
    if path == default {
        return Ok(Some(dir));
    }
    if let Some(above) = dir.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !above.is_dir() {
            return Err(FileError::Io {
                path: path.into(),
                err: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!(
                        "{} does not exist; only the file's own directory is created, \
                         not the ones above it (a mistyped path?)",
                        above.display()
                    ),
                ),
            });
        }
    }
    Ok(Some(dir))
}

/// Creates the directory a file named by an operator is to be written in, when it is
/// missing: that one directory, with `mode`, and nothing above it, so a mistyped path
/// (`/var/lbi/numasched/journal.json`) is refused rather than made into a tree without
/// a word. `default` is the program's own default for this file, which is no typo:
/// its directories are all made, since a minimal root (an initramfs, a bare
/// container) may have no `/var/lib`. Returns the directory when it was created, for
/// the caller to say so.
pub fn create_dir_of(path: &Path, mode: u32, default: &Path) -> Result<Option<PathBuf>, FileError> {
    use std::os::unix::fs::DirBuilderExt;
    let Some(dir) = dir_to_create(path, default)? else {
        return Ok(None);
    };
    match std::fs::DirBuilder::new()
        .mode(mode)
        .recursive(path == default)
        .create(dir)
    {
        Ok(()) => Ok(Some(dir.to_path_buf())),
        // Another process made it in between: as good.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(None),
        Err(e) => Err(FileError::Io {
            path: path.into(),
            err: std::io::Error::new(e.kind(), format!("creating {}: {e}", dir.display())),
        }),
    }
}

/// A directory [`create_dir_of`] made, removed again when dropped if it is empty by
/// then: a start refused after making it, or a clean stop, leaves no directory the
/// machine did not have. One that holds anything (a journal a refusal left for the
/// operator, a profile store) stays.
#[derive(Debug, Default)]
pub struct MadeDir(Option<PathBuf>);

impl MadeDir {
    pub fn new(made: Option<PathBuf>) -> MadeDir {
        MadeDir(made)
    }
}

impl Drop for MadeDir {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            // Fails, as it should, on a directory that is not empty.
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Why a file that steers what this process does with its rights (the daemon's journal
/// and config, read as root) may not be believed, if it may not: only one owned by this
/// user or by root, that no one else may write, in a directory owned by this user or
/// root that no one else may write. The sticky bit (as on /tmp) makes an open directory
/// fine: others can add a file there but not replace one of ours, and one they add is
/// theirs. `dir` is the directory's metadata where it could be read, `me` this
/// process's effective uid.
pub fn untrusted(
    path: &Path,
    file: &std::fs::Metadata,
    dir: Option<&std::fs::Metadata>,
    me: u32,
) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let ours = |uid: u32| uid == me || uid == 0;
    if !ours(file.uid()) {
        return Some(format!(
            "it is owned by uid {}, neither root nor this process's user (uid {me})",
            file.uid()
        ));
    }
    if file.mode() & 0o022 != 0 {
        return Some(format!(
            "others may write it (mode {:o})",
            file.mode() & 0o7777
        ));
    }
    let dir = dir?;
    let shown = path
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    if !ours(dir.uid()) {
        return Some(format!(
            "its directory {shown} is owned by uid {}, who could swap the file",
            dir.uid()
        ));
    }
    if dir.mode() & 0o022 != 0 && dir.mode() & 0o1000 == 0 {
        return Some(format!(
            "others may write its directory {shown} (mode {:o}) and swap the file",
            dir.mode() & 0o7777
        ));
    }
    None
}

/// The directory holding `path`, as `untrusted` judges it (`.` for a bare name).
pub fn dir_meta(path: &Path) -> Option<std::fs::Metadata> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    std::fs::metadata(dir.unwrap_or(Path::new("."))).ok()
}

/// The 1-based line of byte `offset` in `text`: parsers report spans, operators read
/// lines. Counted in bytes, so no offset can split a char.
pub fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    1 + text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_named_as_a_file_writer_knows_them() {
        assert_eq!(
            plain_types("invalid type: floating point `1.5`, expected u32"),
            "invalid type: floating point `1.5`, expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            plain_types("invalid type: sequence, expected struct TopologyDesc at line 1"),
            "invalid type: sequence, expected an object (a table in TOML) at line 1"
        );
        assert_eq!(
            plain_types("invalid type: string \"x\", expected f64"),
            "invalid type: string \"x\", expected a number"
        );
        assert_eq!(
            plain_types("invalid type: map, expected a sequence"),
            "invalid type: map, expected a list"
        );
        // Not a type: left as it was.
        assert_eq!(
            plain_types("unknown field `u32x`, expected one of `a`, `u32y`"),
            "unknown field `u32x`, expected one of `a`, `u32y`"
        );
        assert_eq!(plain_types("expected u32x"), "expected u32x");
        assert_eq!(plain_types("nothing"), "nothing");
    }

    #[test]
    fn only_the_files_own_directory_is_created() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("state/journal.json");
        let none = Path::new("/nonexistent/default");
        let made = create_dir_of(&f, 0o700, none).expect("one level");
        assert_eq!(made.as_deref(), Some(dir.path().join("state").as_path()));
        let mode = std::fs::metadata(dir.path().join("state"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(create_dir_of(&f, 0o700, none).expect("exists"), None);
        let typo = dir.path().join("stat/numasched/journal.json");
        let e = create_dir_of(&typo, 0o700, none).expect_err("two levels");
        let msg = e.to_string();
        assert!(
            msg.starts_with(&typo.display().to_string())
                && msg.contains("stat does not exist")
                && !msg.contains('\n'),
            "{msg}"
        );
        assert!(!dir.path().join("stat").exists(), "nothing made");
        assert_eq!(
            create_dir_of(Path::new("journal.json"), 0o700, none).expect("cwd"),
            None
        );
        // The program's own default is no typo: a root without /var/lib gets it all.
        let default = dir.path().join("var/lib/numasched/journal.json");
        assert!(dir_to_create(&default, &default).is_ok());
        create_dir_of(&default, 0o700, &default).expect("the default's whole tree");
        assert!(dir.path().join("var/lib/numasched").is_dir());
    }

    #[test]
    fn regular_files_are_read_and_others_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("a.toml");
        std::fs::write(&f, "x = 1\n").expect("write");
        assert_eq!(read_text(&f, 100, "config").expect("read"), "x = 1\n");
        assert!(regular_or_absent(&f).expect("regular"));
        assert!(!regular_or_absent(&dir.path().join("none")).expect("absent"));
        let e = read_text(Path::new("/dev/zero"), 100, "config").expect_err("device");
        assert!(e.to_string().contains("a character device"), "{e}");
        let e = regular_or_absent(Path::new("/dev/null")).expect_err("device");
        assert!(
            e.to_string()
                .starts_with("/dev/null: is a character device"),
            "{e}"
        );
        let e = read_text(dir.path(), 100, "config").expect_err("directory");
        assert!(e.to_string().contains("a directory"), "{e}");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        let st = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(st.success());
        let e = read_text(&fifo, 100, "journal").expect_err("fifo");
        assert!(e.to_string().contains("a FIFO"), "{e}");
    }

    #[test]
    fn a_file_over_the_limit_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("big");
        std::fs::write(&f, vec![b'a'; 101]).expect("write");
        let e = read_text(&f, 100, "journal").expect_err("too large");
        assert!(
            e.to_string().contains("101 bytes, more than the 100"),
            "{e}"
        );
    }
}
