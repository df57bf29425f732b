//! The files an operator names for the daemon (`journal`, `db`, `socket`), checked
//! before it writes anything. Each is checked again where it is used; checking all of
//! them first means a bad one is refused before the others were touched (a `db` that
//! is a directory was found only after the journal had been written), and `config
//! check` runs the same checks, so a file it passes names paths the daemon takes.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use numasched_model::files;

use super::config::{Options, DEFAULT_SOCKET};
use super::recovery;
use numasched_linux::characterise::store;

/// One path the daemon would refuse, with the config key it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: &'static str,
    pub text: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.text)
    }
}

/// Every problem of the paths `opts` names; `socket` is the control socket in use
/// (`run` takes its own, and none at all by default).
pub fn check(opts: &Options, socket: Option<&Path>) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut add = |key, r: Result<(), String>| {
        if let Err(text) = r {
            out.push(Problem { key, text });
        }
    };
    let hint = |r: Result<(), String>, how: &str| r.map_err(|e| format!("{e}; {how}"));
    if !opts.no_journal {
        add(
            "journal",
            hint(
                file(&opts.journal, "the journal", false, recovery::DEFAULT_PATH),
                "pass --journal PATH, or --no-journal to run without crash recovery",
            ),
        );
    }
    if !opts.no_db {
        add(
            "db",
            hint(
                file(&opts.db, "the profile store", true, store::DEFAULT_PATH),
                "pass --db PATH, or --no-db to run without one",
            ),
        );
    }
    if let Some(s) = socket {
        add("socket", hint(socket_path(s), "pass another --socket PATH"));
    }
    out
}

/// [`check`] as the daemon's start uses it: every problem, one line each.
pub fn refuse_bad(opts: &Options, socket: Option<&Path>) -> anyhow::Result<()> {
    let problems = check(opts, socket);
    if problems.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    anyhow::bail!("{}", lines.join("\n"))
}

/// A regular file or nothing, in a directory that exists or can be made.
fn file(path: &Path, what: &str, follow: bool, default: &str) -> Result<(), String> {
    if !follow && is_symlink(path) {
        return Err(format!(
            "{}: is a symlink; refusing to follow it for {what}",
            path.display()
        ));
    }
    // What is there and is no file. A path that cannot be looked at (no permission on
    // its directory) is left to the use itself, which says what it does about it.
    if let Err(e @ files::FileError::NotRegular { .. }) = files::regular_or_absent(path) {
        return Err(format!(
            "{}: cannot use it as {what}: {}",
            path.display(),
            e.without_path()
        ));
    }
    reachable(path, what, default)
}

fn socket_path(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(format!(
            "{}: is a symlink; refusing to follow it for the control socket",
            path.display()
        )),
        Ok(m) if !m.file_type().is_socket() => Err(format!(
            "{}: exists and is not a socket; refusing to replace it with the control socket",
            path.display()
        )),
        _ => reachable(path, "the control socket", DEFAULT_SOCKET),
    }
}

fn reachable(path: &Path, what: &str, default: &str) -> Result<(), String> {
    files::dir_to_create(path, Path::new(default))
        .map(|_| ())
        .map_err(|e| {
            format!(
                "{}: cannot use it as {what}: {}",
                path.display(),
                e.without_path()
            )
        })
}

fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(journal: &Path, db: &Path) -> Options {
        Options {
            journal: journal.into(),
            db: db.into(),
            ..Options::default()
        }
    }

    #[test]
    fn paths_the_daemon_would_refuse_are_each_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ok = opts(&dir.path().join("j.json"), &dir.path().join("state/p.db"));
        assert_eq!(check(&ok, Some(&dir.path().join("run/s.sock"))), Vec::new());
        let bad = opts(Path::new("/dev/null"), dir.path());
        let got = check(&bad, Some(Path::new("/etc/passwd")));
        let keys: Vec<_> = got.iter().map(|p| p.key).collect();
        assert_eq!(keys, ["journal", "db", "socket"], "{got:?}");
        assert!(got[0].text.contains("a character device"), "{}", got[0]);
        assert!(got[1].text.contains("a directory"), "{}", got[1]);
        assert!(got[2].text.contains("not a socket"), "{}", got[2]);
        let typo = opts(&dir.path().join("a/b/j.json"), &dir.path().join("p.db"));
        let got = check(&typo, None);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].text.contains("does not exist"), "{}", got[0]);
        assert!(!dir.path().join("a").exists(), "a check creates nothing");
        let mut off = bad.clone();
        off.no_journal = true;
        off.no_db = true;
        assert_eq!(
            check(&off, None),
            Vec::new(),
            "paths turned off are not checked"
        );
    }

    #[test]
    fn a_symlinked_journal_is_refused_a_symlinked_store_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real");
        std::fs::write(&real, "").expect("write");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("link");
        let got = check(&opts(&link, &link), None);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].key, "journal");
        assert!(got[0].text.contains("symlink"), "{}", got[0]);
    }
}
