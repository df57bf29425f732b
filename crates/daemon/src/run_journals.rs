//! `run`'s journals: one per run, `run-<pid>.json` in the invoking user's runtime
//! directory, so a `run` never shares the service's journal (which it would have to
//! wait for, or could not write as a user) nor another run's. A run killed before its
//! clean stop leaves its journal there, unlocked; the next run in that directory undoes
//! what it names, as a daemon's start undoes what its own journal holds.

use std::path::{Path, PathBuf};

const PREFIX: &str = "run-";
const SUFFIX: &str = ".json";

/// Where this user's runs keep their journals: `$XDG_RUNTIME_DIR/numasched` when that
/// directory is this user's, else `/run/numasched-runs` for root (not the service's
/// `/run/numasched`, which systemd removes when the service stops), else
/// `/run/user/<uid>/numasched` where that exists, else `numasched-<uid>` in the
/// temporary directory. Only the last component is created (by the journal's own
/// write), so a runtime directory that is not there is an error, not a new tree.
pub fn dir() -> PathBuf {
    let uid = nix::unistd::geteuid();
    let own = |d: &Path| {
        use std::os::unix::fs::MetadataExt;
        d.is_absolute() && std::fs::metadata(d).is_ok_and(|m| m.is_dir() && m.uid() == uid.as_raw())
    };
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        // sudo keeps the caller's: root writing into a user's directory is refused.
        if own(&d) {
            return d.join("numasched");
        }
    }
    if uid.is_root() {
        return PathBuf::from("/run/numasched-runs");
    }
    let user = PathBuf::from(format!("/run/user/{uid}"));
    if own(&user) {
        return user.join("numasched");
    }
    std::env::temp_dir().join(format!("numasched-{uid}"))
}

/// The journal of the run with process id `pid`.
pub fn path_for(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{PREFIX}{pid}{SUFFIX}"))
}

/// Whether `path` is named as a run's journal.
pub fn is_run_journal(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix(PREFIX))
        .and_then(|n| n.strip_suffix(SUFFIX))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// The other runs' journals beside `own`, oldest name first: what runs that did not
/// stop cleanly may have left (a live run's is among them; its lock tells it apart).
pub fn others(own: &Path) -> Vec<PathBuf> {
    let Some(dir) = own.parent() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p != own && is_run_journal(p))
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_run_pid_json_names_are_runs_journals() {
        let d = Path::new("/run/numasched-runs");
        assert!(is_run_journal(&path_for(d, 4242)));
        for name in [
            "run-.json",
            "run-12.json.lock",
            "run-1x.json",
            "journal.json",
            "run-3.jsonx",
        ] {
            assert!(!is_run_journal(&d.join(name)), "{name}");
        }
    }

    #[test]
    fn others_lists_the_other_runs_journals_and_nothing_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in [
            "run-1.json",
            "run-2.json",
            "run-2.json.lock",
            "journal.json",
            "run-9.json",
        ] {
            std::fs::write(dir.path().join(name), "").expect("write");
        }
        let own = path_for(dir.path(), 9);
        let names: Vec<String> = others(&own)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["run-1.json", "run-2.json"]);
    }
}
