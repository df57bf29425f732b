//! The files an operator names for the daemon (`journal`, `db`, `socket`), checked
//! before it writes anything. Each is checked again where it is used; checking all of
//! them first means a bad one is refused before the others were touched (a `db` that
//! is a directory was found only after the journal had been written), and `config
//! check` runs the same checks, so a file it passes names paths the daemon takes.

use std::path::Path;

use numasched_model::files;

use super::config::{Options, DEFAULT_SOCKET};
use super::{recovery, socket};
use numasched_linux::characterise::store;

/// What to do about a store path that is refused.
pub const DB_HINT: &str = "pass --db PATH, or --no-db to run without one";

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
                journal(&opts.journal),
                "pass --journal PATH, or --no-journal to run without crash recovery",
            ),
        );
    }
    if !opts.no_db {
        add("db", hint(store_path(&opts.db), DB_HINT));
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

fn journal(path: &Path) -> Result<(), String> {
    recovery::JournalFile::new(path)
        .check()
        .map_err(|e| e.to_string())?;
    reachable(path, "the journal", recovery::DEFAULT_PATH)
}

/// What is there and is no file. A store that cannot be looked at (a user's `plan`
/// under root's 0700 state directory) is left to the use itself, which runs without
/// it; a symlink is followed (the store is only opened, never replaced by rename).
pub fn store_file(path: &Path) -> Result<(), String> {
    match files::regular_or_absent(path) {
        Err(e @ files::FileError::NotRegular { .. }) => Err(format!(
            "{}: cannot use it as the profile store: {}",
            path.display(),
            e.without_path()
        )),
        _ => Ok(()),
    }
}

fn store_path(path: &Path) -> Result<(), String> {
    store_file(path)?;
    reachable(path, "the profile store", store::DEFAULT_PATH)
}

fn socket_path(path: &Path) -> Result<(), String> {
    socket::check_path(path).map_err(|e| e.to_string())?;
    reachable(path, "the control socket", DEFAULT_SOCKET)
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
