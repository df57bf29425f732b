//! Crash recovery: the journal of original affinities, kept on disk.
//!
//! A daemon killed with SIGKILL (or an OOM kill, a power-cut of the service manager)
//! cannot restore anything on the way out. So the engine writes, before each pass that
//! may change a process, the journal as it will stand after the pass
//! ([`Actuator::intents`](numasched_linux::apply::Actuator::intents)), and after the pass the
//! journal as it does stand. The next start finds a non-empty file, restores every
//! process in it that is still the same process (pid + start time), and only then
//! begins; a clean stop removes the file.
//!
//! Writes are atomic (a temporary file in the same directory, fsync, rename), the file
//! is 0600, and a symlink at its path is refused rather than followed, so a planted
//! link cannot make a root daemon overwrite another file.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use numasched_model::files::MadeDir;

use numasched_linux::apply::orphans::Orphans;
use numasched_linux::apply::{undo, Journal, Kernel, Restored};

/// Largest journal read back: about 100 bytes per thread, so room for tens of
/// thousands of managed threads.
pub const MAX_JOURNAL_BYTES: u64 = 64 << 20;

/// Where the daemon keeps its journal unless told otherwise (`--journal`).
pub const DEFAULT_PATH: &str = "/var/lib/numasched/journal.json";

#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    #[error("{}: cannot write the journal: {err}", path.display())]
    Write { path: PathBuf, err: std::io::Error },
    #[error("{}: cannot read the journal: {err}", path.display())]
    Read { path: PathBuf, err: std::io::Error },
    #[error("{}: not a numasched journal ({what}); it was left untouched — restore affinities by hand or move it aside", path.display())]
    Corrupt { path: PathBuf, what: String },
    #[error("{}: is a symlink; refusing to follow it for the journal", path.display())]
    Symlink { path: PathBuf },
    #[error("{}: cannot use it as the journal: {}", .0.path().display(), .0.without_path())]
    File(numasched_model::files::FileError),
    #[error("{}: another numasched daemon keeps its journal here; stop it first (two schedulers would undo each other)", path.display())]
    InUse { path: PathBuf },
    #[error("{}: not trusted as the journal: {why}; it was left untouched — check who wrote it, then remove it", path.display())]
    Untrusted { path: PathBuf, why: String },
    #[error("{}: not trusted as the journal's lock: {why}; check who made it, then remove it", path.display())]
    UntrustedLock { path: PathBuf, why: String },
    /// A clean stop could not remove the journal; `emptied` says whether it was
    /// emptied instead (then the next start has nothing to restore).
    #[error("{}: cannot remove the journal: {err}; {}", path.display(), if *emptied {
        "emptied it instead, so the next start restores nothing"
    } else {
        "the next start would restore the affinities it names again: remove it by hand"
    })]
    NotRemoved {
        path: PathBuf,
        err: std::io::Error,
        emptied: bool,
    },
}

/// An exclusive lock on `<journal>.lock`, held while the daemon runs: two daemons
/// writing one journal would each erase the other's originals. The file is removed on
/// the way out, while still locked; a daemon that opened it a moment before and locks
/// it after finds the name no longer leads to the file it locked, and opens again
/// (otherwise it would hold a lock on a file no longer there while a third created a
/// new one and locked that too). A daemon killed leaves the file, empty and unlocked.
#[derive(Debug)]
pub struct JournalLock {
    file: Flock<fs::File>,
    path: PathBuf,
    /// The journal's directory, if this start made it; goes after the lock file.
    _dir: MadeDir,
}

impl JournalLock {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `path` still names the file this process locked. A lock file removed
    /// or replaced under a running daemon is a lock another daemon can take: the
    /// service loop checks every epoch and stops rather than share the journal.
    pub fn still_named(&self) -> bool {
        same_file(&self.file, &self.path)
    }
}

impl Drop for JournalLock {
    fn drop(&mut self) {
        if self.still_named() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

fn same_file(file: &fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[derive(Debug, Clone)]
pub struct JournalFile {
    path: PathBuf,
    /// What the file looked like right after this process last wrote it.
    written: Option<Stamp>,
}

/// Identity and version of the file on disk: a file deleted, replaced or edited since
/// the last write no longer matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let m = fs::symlink_metadata(path).ok()?;
        Some(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
        })
    }
}

impl JournalFile {
    pub fn new(path: &Path) -> JournalFile {
        JournalFile {
            path: path.into(),
            written: None,
        }
    }

    /// The file is still exactly what this process last wrote (not deleted, replaced
    /// or edited since): what it holds can be trusted without writing it again.
    pub fn is_current(&self) -> bool {
        self.written.is_some() && self.written == Stamp::of(&self.path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn refuse_symlink(&self) -> Result<(), RecoveryError> {
        match fs::symlink_metadata(&self.path) {
            Ok(m) if m.file_type().is_symlink() => Err(RecoveryError::Symlink {
                path: self.path.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Refuses a symlink (a planted link must not make a root daemon write another
    /// file) and anything but a regular file or nothing: the journal is read whole,
    /// replaced by rename and removed at a clean stop, none of which may happen to a
    /// device or a FIFO. Looks only, so the start can check every path before it writes
    /// any ([`crate::paths`]).
    pub fn check(&self) -> Result<(), RecoveryError> {
        self.refuse_symlink()?;
        numasched_model::files::regular_or_absent(&self.path)
            .map(|_| ())
            .map_err(RecoveryError::File)
    }

    /// Takes the journal for this process; fails at once if another holds it.
    pub fn lock(&self) -> Result<JournalLock, RecoveryError> {
        let werr = |err| RecoveryError::Write {
            path: self.path.clone(),
            err,
        };
        self.check()?;
        let mut made = self.make_dir()?;
        let mut lock = self.path.clone().into_os_string();
        lock.push(".lock");
        let lock = PathBuf::from(lock);
        // A FIFO there would hold the open below forever (waiting for a reader), a
        // device would be written to: only a regular file, or none, is a lock file.
        // O_NONBLOCK covers one swapped in after this check.
        numasched_model::files::regular_or_absent(&lock).map_err(RecoveryError::File)?;
        // A lock taken on a file another daemon removed as it stopped is no lock:
        // open again (a few times; each removal needs a daemon to stop).
        for _ in 0..8 {
            let opened = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(&lock);
            let file = match opened {
                Ok(f) => f,
                // Its directory went in between: another run that had made it stopped
                // and removed it, empty. Made again, this one's now.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    made = self.make_dir()?;
                    continue;
                }
                Err(e) => return Err(werr(e)),
            };
            let meta = file.metadata().map_err(werr)?;
            if !meta.is_file() {
                return Err(werr(std::io::Error::other("not a regular file")));
            }
            // Whoever holds a lock file can keep every daemon from starting, and one
            // another user made in an open directory is theirs to swap: trusted as
            // the journal is, judged on the file actually opened.
            let dir = numasched_model::files::dir_meta(&lock);
            let me = nix::unistd::geteuid().as_raw();
            if let Some(why) = numasched_model::files::untrusted(&lock, &meta, dir.as_ref(), me) {
                return Err(RecoveryError::UntrustedLock { path: lock, why });
            }
            // flock(2), released when the file is closed (the process exits, even by
            // kill -9), so a crashed daemon never leaves the journal locked.
            let file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(locked) => locked,
                Err((_, Errno::EWOULDBLOCK)) => {
                    return Err(RecoveryError::InUse {
                        path: self.path.clone(),
                    })
                }
                Err((_, errno)) => return Err(werr(std::io::Error::from(errno))),
            };
            if same_file(&file, &lock) {
                return Ok(JournalLock {
                    file,
                    path: lock,
                    _dir: made,
                });
            }
        }
        Err(werr(std::io::Error::other(
            "its lock file was replaced while being locked, eight times in a row",
        )))
    }

    /// Makes the journal's directory when missing; a start or stop that made it
    /// removes it again, once empty.
    fn make_dir(&self) -> Result<MadeDir, RecoveryError> {
        let made =
            numasched_model::files::create_dir_of(&self.path, 0o700, Path::new(DEFAULT_PATH))
                .map_err(RecoveryError::File)?;
        if let Some(dir) = &made {
            tracing::info!(directory = %dir.display(), "created the journal's directory");
        }
        Ok(MadeDir::new(made))
    }

    /// The journal a previous run left, or `None` if there is no file.
    pub fn load(&self) -> Result<Option<Journal>, RecoveryError> {
        self.refuse_symlink()?;
        let text = match numasched_model::files::read_text(&self.path, MAX_JOURNAL_BYTES, "journal")
        {
            Ok(t) => t,
            Err(e) if e.is_not_found() => return Ok(None),
            // Binary garbage is a damaged journal like any other, with the same way out.
            Err(numasched_model::files::FileError::Io { err, .. })
                if err.kind() == std::io::ErrorKind::InvalidData =>
            {
                return Err(RecoveryError::Corrupt {
                    path: self.path.clone(),
                    what: err.to_string(),
                })
            }
            Err(numasched_model::files::FileError::Io { err, .. }) => {
                return Err(RecoveryError::Read {
                    path: self.path.clone(),
                    err,
                })
            }
            Err(e) => return Err(RecoveryError::File(e)),
        };
        let meta = fs::symlink_metadata(&self.path).map_err(|err| RecoveryError::Read {
            path: self.path.clone(),
            err,
        })?;
        let dir = numasched_model::files::dir_meta(&self.path);
        let me = nix::unistd::geteuid().as_raw();
        if let Some(why) = numasched_model::files::untrusted(&self.path, &meta, dir.as_ref(), me) {
            return Err(RecoveryError::Untrusted {
                path: self.path.clone(),
                why,
            });
        }
        // Nothing in it is nothing to restore: refused, it would stop every later
        // start over a file that cannot hold a change (an operator's `: > journal`,
        // a file system that lost what a crash was writing).
        if text.trim().is_empty() {
            tracing::warn!(journal = %self.path.display(), "the journal is empty: nothing to restore");
            return Ok(Some(Journal::new()));
        }
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| RecoveryError::Corrupt {
                path: self.path.clone(),
                what: e.to_string(),
            })
    }

    /// Replaces the file with `journal`, atomically.
    pub fn save(&mut self, journal: &Journal) -> Result<(), RecoveryError> {
        let werr = |err| RecoveryError::Write {
            path: self.path.clone(),
            err,
        };
        self.check()?;
        numasched_model::files::create_dir_of(&self.path, 0o700, Path::new(DEFAULT_PATH))
            .map_err(RecoveryError::File)?;
        let text = serde_json::to_vec(journal)
            .map_err(|e| werr(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let _ = fs::remove_file(&tmp);
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .map_err(werr)?;
        // A write the disk refused (full, over quota, over `ulimit -f`) leaves the
        // journal as it was; a half-written copy beside it would only be litter.
        let written = f.write_all(&text).and_then(|()| f.sync_all());
        drop(f);
        self.written = None;
        if let Err(err) = written.and_then(|()| fs::rename(&tmp, &self.path)) {
            let _ = fs::remove_file(&tmp);
            return Err(werr(err));
        }
        self.written = Stamp::of(&self.path);
        Ok(())
    }

    /// A clean stop: nothing left to undo. A journal that cannot be removed (its
    /// directory made read-only or immutable meanwhile) is emptied in place: left as it
    /// was, the next start would restore what it names over whatever the processes'
    /// owners set since.
    pub fn remove(&mut self) -> Result<(), RecoveryError> {
        self.written = None;
        self.check()?;
        match fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                let emptied = OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&self.path)
                    .and_then(|f| f.sync_all())
                    .is_ok();
                Err(RecoveryError::NotRemoved {
                    path: self.path.clone(),
                    err: e,
                    emptied,
                })
            }
            _ => Ok(()),
        }
    }
}

/// What [`recover`] did: one result per process, and the journal of what could not
/// be restored (the kernel refused), which the starting daemon keeps and tries again.
#[derive(Debug, Default)]
pub struct Recovered {
    pub restored: Vec<(u32, Restored)>,
    pub left: Journal,
}

/// Restores what a previous run left in `file` and rewrites the file with what could
/// not be restored (removing it when nothing is left).
pub fn recover<K: Kernel>(kernel: &K, file: &mut JournalFile) -> Result<Recovered, RecoveryError> {
    let Some(mut journal) = file.load()? else {
        return Ok(Recovered::default());
    };
    // Children forked after the last epoch the killed daemon ran carry its sets too,
    // and so may orphans of its processes that init took meanwhile (their children
    // are found by the walk after).
    let me = std::process::id();
    let protected = |pid| pid <= 2 || pid == me;
    let mut orphans = Orphans::default();
    orphans.find(kernel, &mut journal, protected, true, 0.0);
    undo::adopt_descendants(kernel, &mut journal, None, protected);
    let restored = undo::restore_all(kernel, &mut journal);
    if journal.is_empty() {
        file.remove()?;
    } else {
        file.save(&journal)?;
    }
    Ok(Recovered {
        restored,
        left: journal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_linux::apply::FakeKernel;
    use numasched_model::CpuSet;
    use std::os::unix::fs::PermissionsExt;

    fn journal_of(pid: u32, start: u64, applied: &[u32]) -> Journal {
        let mut j = Journal::new();
        j.begin(pid, start, &CpuSet::from([0, 1, 2, 3]));
        j.remember_thread(pid, start, pid, &CpuSet::from([0, 1, 2, 3]));
        j.set_applied(pid, start, &CpuSet::from(applied));
        j
    }

    /// The killed daemon had placed 100 on CPU 2; 100 exited meanwhile and left a
    /// child to init, still on CPU 2. The journal kept 100's session, so the child
    /// is recognised and goes back too; a service on CPU 2 does not.
    #[test]
    fn an_orphan_left_while_no_daemon_ran_is_restored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = JournalFile::new(&dir.path().join("journal.json"));
        let k = FakeKernel::new(&[0, 1, 2, 3]);
        k.add(1, 1, 1, &[0, 1, 2, 3]);
        k.add(150, 20, 1, &[2]);
        k.with_proc(150, |p| p.session = 10);
        k.add(160, 30, 1, &[2]); // a session of its own
        k.with_proc(1, |p| p.children.extend([150, 160]));
        let mut j = journal_of(100, 7, &[2]);
        j.set_session(100, 7, 10);
        file.save(&j).expect("save");
        let r = recover(&k, &mut file).expect("recover");
        assert_eq!(k.affinity_of(150, 150), Some(vec![0, 1, 2, 3].into()));
        assert_eq!(k.affinity_of(160, 160), Some(vec![2].into()));
        assert!(
            r.restored.iter().any(|(pid, _)| *pid == 150),
            "{:?}",
            r.restored
        );
    }

    #[test]
    fn a_journal_left_by_a_crash_is_restored_and_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = JournalFile::new(&dir.path().join("state/journal.json"));
        let k = FakeKernel::new(&[0, 1, 2, 3]);
        k.add(100, 7, 1, &[2]); // left on CPU 2 by the crashed daemon
        k.add(101, 9, 1, &[3]); // pid reused since: another process
        let mut j = journal_of(100, 7, &[2]);
        j.begin(101, 8, &CpuSet::from([0, 1, 2, 3]));
        j.set_applied(101, 8, &CpuSet::from([3]));
        file.save(&j).expect("save");
        let mode = fs::metadata(file.path())
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let r = recover(&k, &mut file).expect("recover");
        assert_eq!(r.restored.len(), 2);
        assert_eq!(k.affinity_of(100, 100), Some(vec![0, 1, 2, 3].into()));
        assert_eq!(
            k.affinity_of(101, 101),
            Some(vec![3].into()),
            "the newcomer untouched"
        );
        assert!(!file.path().exists(), "nothing left to undo");
        assert!(recover(&k, &mut file).expect("again").restored.is_empty());
    }

    #[test]
    fn what_cannot_be_restored_stays_in_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = JournalFile::new(&dir.path().join("journal.json"));
        let k = FakeKernel::new(&[0, 1, 2, 3]);
        k.add(100, 7, 1, &[2]);
        k.inject_always(
            numasched_linux::apply::Op::SetAffinity,
            100,
            numasched_linux::apply::Fault::Fail(
                numasched_linux::apply::ErrorKind::PermissionDenied,
            ),
        );
        file.save(&journal_of(100, 7, &[2])).expect("save");
        let r = recover(&k, &mut file).expect("recover");
        assert!(matches!(r.restored[0].1, Restored::Failed(_)));
        let left = file.load().expect("load").expect("kept");
        assert!(left.entry(100).is_some());
        assert!(r.left.entry(100).is_some(), "handed to the starting daemon");
    }

    /// An entry whose pid was reused since: the new process's children are not the
    /// journaled one's, and were "restored" to its original set (a trial pinned a
    /// shell's children to one CPU this way).
    #[test]
    fn the_children_of_a_reused_pid_are_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = JournalFile::new(&dir.path().join("journal.json"));
        let k = FakeKernel::new(&[0, 1, 2, 3]);
        // pid 100 now belongs to a process started at 9, its child at 10 runs on
        // exactly the set the journal says numasched gave the old pid 100.
        k.add(100, 9, 1, &[0, 1, 2, 3]);
        k.fork(100, 200, 10);
        let mut j = Journal::new();
        j.begin(100, 7, &CpuSet::from([0]));
        j.remember_thread(100, 7, 100, &CpuSet::from([0]));
        j.set_applied(100, 7, &CpuSet::from([0, 1, 2, 3]));
        file.save(&j).expect("save");
        let r = recover(&k, &mut file).expect("recover");
        assert!(
            r.restored.iter().all(|(pid, _)| *pid != 200),
            "{:?}",
            r.restored
        );
        assert_eq!(k.affinity_of(200, 200), Some(CpuSet::from([0, 1, 2, 3])));
    }

    #[test]
    fn one_journal_one_daemon() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = JournalFile::new(&dir.path().join("journal.json"));
        let held = file.lock().expect("first");
        assert!(matches!(file.lock(), Err(RecoveryError::InUse { .. })));
        drop(held);
        file.lock().expect("free again");
    }

    /// Issue 41: a FIFO at `<journal>.lock` held the start in open(2) forever.
    #[test]
    fn a_fifo_as_the_lock_file_is_refused_not_waited_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = JournalFile::new(&dir.path().join("journal.json"));
        let lock_path = dir.path().join("journal.json.lock");
        nix::unistd::mkfifo(&lock_path, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        let e = file.lock().expect_err("a FIFO is no lock file");
        let msg = e.to_string();
        assert!(msg.contains("journal.json.lock"), "{msg}");
        assert!(msg.contains("FIFO"), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }

    /// Issue 41: the lock file's owner was never checked. One another user made (or
    /// could swap, in a directory open to all) is refused, by name, before any lock.
    #[test]
    fn a_lock_file_someone_else_controls_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let file = JournalFile::new(&dir.path().join("journal.json"));
        let lock_path = dir.path().join("journal.json.lock");
        fs::write(&lock_path, "").expect("write");
        fs::set_permissions(&lock_path, fs::Permissions::from_mode(0o666)).expect("chmod");
        let e = file.lock().expect_err("others may write it").to_string();
        assert!(e.contains("not trusted as the journal's lock"), "{e}");
        assert!(
            e.contains("journal.json.lock") && e.contains("others may write it"),
            "{e}"
        );
        fs::set_permissions(&lock_path, fs::Permissions::from_mode(0o600)).expect("chmod");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = file.lock().expect_err("an open directory").to_string();
        assert!(e.contains("others may write its directory"), "{e}");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).expect("chmod");
        if nix::unistd::geteuid().is_root() {
            nix::unistd::chown(&lock_path, Some(nix::unistd::Uid::from_raw(65534)), None)
                .expect("chown");
            let e = file.lock().expect_err("another user's").to_string();
            assert!(e.contains("owned by uid 65534"), "{e}");
            assert!(lock_path.exists(), "another's file is left where it was");
        }
        fs::remove_file(&lock_path).expect("rm");
        drop(file.lock().expect("a lock file of its own"));
    }

    #[test]
    fn the_lock_file_goes_with_the_lock_but_only_its_own() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = JournalFile::new(&dir.path().join("journal.json"));
        let lock_path = dir.path().join("journal.json.lock");
        // One a killed daemon left: empty and unlocked, taken over.
        fs::write(&lock_path, "").expect("write");
        let held = file.lock().expect("left by a killed daemon");
        drop(held);
        assert!(
            !lock_path.exists(),
            "a stop leaves nothing beside the journal"
        );

        // The name taken over by another file meanwhile: that one is not removed, and
        // the lock holder sees its lock no longer guards the name.
        let held = file.lock().expect("lock");
        fs::remove_file(&lock_path).expect("remove");
        fs::write(&lock_path, "another's").expect("write");
        assert!(!held.still_named());
        drop(held);
        assert_eq!(fs::read_to_string(&lock_path).expect("kept"), "another's");
    }

    /// Issue 41: a journal another user could write made the root daemon pin a
    /// root-owned process at start. Only a file this user owns, that no one else may
    /// write, is believed.
    #[test]
    fn a_journal_others_may_write_is_not_believed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal.json");
        fs::write(&path, "").expect("write");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).expect("chmod");
        let e = JournalFile::new(&path).load().expect_err("world-writable");
        let msg = e.to_string();
        assert!(msg.contains("not trusted as the journal"), "{msg}");
        assert!(msg.contains("mode 666"), "{msg}");
        assert!(!msg.contains('\n'));
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("chmod");
        let meta = fs::symlink_metadata(&path).expect("stat");
        let me = nix::unistd::geteuid().as_raw();
        assert_eq!(
            numasched_model::files::untrusted(&path, &meta, None, me),
            None
        );
        // A directory others may write, without the sticky bit: the file could be
        // swapped; with it (/tmp), others cannot replace this user's file.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = JournalFile::new(&path)
            .load()
            .expect_err("open dir")
            .to_string();
        assert!(e.contains("others may write its directory"), "{e}");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o1777)).expect("chmod");
        JournalFile::new(&path).load().expect("sticky is fine");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).expect("chmod");
        if nix::unistd::geteuid().is_root() {
            // Another user's file: chown to nobody.
            nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(65534)), None)
                .expect("chown");
            let e = JournalFile::new(&path)
                .load()
                .expect_err("not ours")
                .to_string();
            assert!(e.contains("owned by uid 65534"), "{e}");
        }
    }

    /// Issue 41: a binary journal said "cannot read the journal" without the way out.
    #[test]
    fn a_binary_journal_says_how_to_get_past_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal.json");
        fs::write(&path, [0xff, 0xfe, 0x00, 0x80]).expect("write");
        let e = JournalFile::new(&path)
            .load()
            .expect_err("binary")
            .to_string();
        assert!(e.contains("not a numasched journal"), "{e}");
        assert!(e.contains("move it aside"), "{e}");
        assert_eq!(fs::read(&path).expect("kept"), [0xff, 0xfe, 0x00, 0x80]);
    }

    #[test]
    fn symlinks_and_garbage_are_refused_with_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let link = dir.path().join("journal.json");
        let target = dir.path().join("victim");
        fs::write(&target, "precious").expect("write");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let mut file = JournalFile::new(&link);
        assert!(matches!(
            file.save(&Journal::new()),
            Err(RecoveryError::Symlink { .. })
        ));
        assert!(matches!(file.load(), Err(RecoveryError::Symlink { .. })));
        assert_eq!(fs::read_to_string(&target).expect("read"), "precious");
        let bad = JournalFile::new(&dir.path().join("bad.json"));
        fs::write(bad.path(), "{not json").expect("write");
        let e = bad.load().expect_err("corrupt").to_string();
        assert!(
            e.contains("bad.json") && e.contains("not a numasched journal"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        // A key this version does not know may hold what undoing needs: refused.
        fs::write(bad.path(), r#"{"entries":{},"epoch":3}"#).expect("write");
        let e = bad.load().expect_err("unknown key").to_string();
        assert!(e.contains("unknown field `epoch`"), "{e}");
        fs::write(
            bad.path(),
            r#"{"entries":{"7":{"start_time":1,"original":[0],"threads":{},"aplied":[1]}}}"#,
        )
        .expect("write");
        let e = bad.load().expect_err("misspelt key").to_string();
        assert!(e.contains("unknown field `aplied`"), "{e}");
    }

    /// An empty file holds no change to undo: it must not stop the start.
    #[test]
    fn an_empty_journal_is_nothing_to_restore() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = JournalFile::new(&dir.path().join("journal.json"));
        fs::write(file.path(), "").expect("write");
        let k = FakeKernel::new(&[0, 1]);
        let r = recover(&k, &mut file).expect("an empty file is no corrupt journal");
        assert!(r.restored.is_empty() && r.left.is_empty());
        assert!(
            !file.path().exists(),
            "removed like any journal with nothing left"
        );
    }

    /// A journal deleted, or edited, after it was written no longer counts as
    /// current, so the engine writes it again (issue 17: a deleted journal was never
    /// recreated, and a kill -9 then left processes narrowed).
    #[test]
    fn a_deleted_or_edited_journal_is_not_current() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = JournalFile::new(&dir.path().join("journal.json"));
        assert!(!file.is_current(), "never written");
        file.save(&journal_of(100, 7, &[2])).expect("save");
        assert!(file.is_current());
        fs::remove_file(file.path()).expect("delete");
        assert!(!file.is_current());
        file.save(&journal_of(100, 7, &[2])).expect("save");
        fs::write(file.path(), "{}").expect("edit");
        assert!(!file.is_current());
    }

    /// A device, FIFO or directory at the journal's path is never read, replaced or
    /// removed.
    #[test]
    fn a_device_as_journal_is_refused_for_every_use() {
        let mut file = JournalFile::new(Path::new("/dev/null"));
        for e in [
            file.lock().map(|_| ()).expect_err("lock"),
            file.save(&Journal::new()).expect_err("save"),
            file.remove().expect_err("remove"),
        ] {
            assert!(e.to_string().contains("a character device"), "{e}");
        }
        assert!(Path::new("/dev/null").exists());
    }

    /// A journal a clean stop cannot remove (here its directory is made immutable) is
    /// emptied, and the next start finds nothing to restore (issue 41: it was
    /// recovered again, over whatever the owners had set since). Skipped where the
    /// file system or the caller cannot set the immutable flag.
    #[test]
    fn a_journal_that_cannot_be_removed_is_emptied_and_not_recovered_again() {
        struct Immutable<'a>(&'a Path);
        impl Drop for Immutable<'_> {
            fn drop(&mut self) {
                let _ = std::process::Command::new("chattr")
                    .arg("-i")
                    .arg(self.0)
                    .status();
            }
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = JournalFile::new(&dir.path().join("journal.json"));
        file.save(&journal_of(100, 7, &[2])).expect("save");
        let set = std::process::Command::new("chattr")
            .arg("+i")
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status();
        if !set.is_ok_and(|s| s.success()) {
            eprintln!("skipped: chattr +i is not available here");
            return;
        }
        let guard = Immutable(dir.path());
        let e = file.remove().expect_err("the directory is immutable");
        assert!(
            matches!(e, RecoveryError::NotRemoved { emptied: true, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("emptied it instead"), "{e}");
        drop(guard);
        assert_eq!(fs::read(file.path()).expect("still there"), b"");
        let loaded = JournalFile::new(file.path()).load().expect("load");
        assert!(loaded.as_ref().is_none_or(|j| j.is_empty()), "{loaded:?}");
    }

    /// Issue 41: a full disk. The journal as it was stays whole, no half-written copy
    /// is left beside it, and the error names the journal. Needs root to mount a tmpfs
    /// of one page; skipped where that is refused.
    #[test]
    fn a_full_disk_keeps_the_journal_as_it_was_and_leaves_no_copy() {
        struct Mounted<'a>(&'a Path);
        impl Drop for Mounted<'_> {
            fn drop(&mut self) {
                let _ = std::process::Command::new("umount").arg(self.0).status();
            }
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4k,mode=0700", "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status();
        if !mounted.is_ok_and(|s| s.success()) {
            eprintln!("skipped: cannot mount a tmpfs here");
            return;
        }
        let _guard = Mounted(dir.path());
        let mut file = JournalFile::new(&dir.path().join("journal.json"));
        let small = journal_of(100, 7, &[2]);
        file.save(&small).expect("a small journal fits");
        // The rest of the one page the file system holds.
        let _ = fs::write(dir.path().join("filler"), vec![b'x'; 8192]);
        let mut big = Journal::new();
        for pid in 200..400 {
            big.begin(pid, 7, &CpuSet::from([0, 1, 2, 3]));
            big.remember_thread(pid, 7, pid, &CpuSet::from([0, 1, 2, 3]));
            big.set_applied(pid, 7, &CpuSet::from([2]));
        }
        let e = file.save(&big).expect_err("the disk is full");
        assert!(e.to_string().contains("journal.json"), "{e}");
        let names: Vec<String> = fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
        let kept = JournalFile::new(file.path()).load().expect("load");
        assert_eq!(kept, Some(small));
    }
}
