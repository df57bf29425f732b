//! The pids of a procfs root, listed again only when the set can have changed.
//!
//! Listing `/proc` makes the kernel walk every thread group and instantiate a dentry
//! for each: on a machine of mostly idle processes it was the largest single cost of
//! a pass once idle processes' stat was read seldom. `<proc>/loadavg` ends with the
//! number of threads in the system and the last pid allocated. If neither moved since
//! the last listing, no task was created (every creation allocates a pid and moves
//! the cursor) and none was released (the count could only have fallen), so the
//! listing would be the same, and the last one is used.
//!
//! The cursor is that of the reader's pid namespace, which is the procfs root's only
//! when the daemon sees itself in it; otherwise (a host's /proc mounted in a
//! container, a test's fake root without the file) every pass lists. A cursor that
//! wraps all the way round to the same value within one pass with the thread count
//! back where it was would go unseen for that pass; the next creation or exit moves
//! the stamp again.

use std::io::Read;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, RawDir};

use super::error::ObserveError;

/// Bytes of directory entries one `getdents64` call may return.
const DIR_BUF: usize = 32 * 1024;

/// Threads in the system and the last pid allocated, as `loadavg` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    threads: u64,
    last_pid: u64,
}

pub(crate) struct PidLister {
    root: PathBuf,
    loadavg: PathBuf,
    /// Kept for all passes (see [`list_pids`]).
    buf: Vec<MaybeUninit<u8>>,
    /// Whether the stamp speaks for `root` (see the module doc); asked once.
    own_namespace: Option<bool>,
    /// The last listing, handed back by the caller ([`PidLister::keep`]), and the
    /// stamp read before it. Moved out and back rather than copied: a copy per pass
    /// is a mid-sized allocation, which the allocator serves slowly.
    last: Option<(Stamp, Vec<u32>)>,
    stamp: Option<Stamp>,
    /// Passes that listed the directory (the others reused the last listing).
    pub listings: u64,
    /// Whether the last pass reused the listing before it.
    reused: bool,
}

impl PidLister {
    pub fn new(root: &Path) -> PidLister {
        PidLister {
            root: root.to_path_buf(),
            loadavg: root.join("loadavg"),
            buf: vec![MaybeUninit::uninit(); DIR_BUF],
            own_namespace: None,
            last: None,
            stamp: None,
            listings: 0,
            reused: false,
        }
    }

    /// The numeric entries of the root, ascending. Fails only if the root cannot be
    /// listed. Give the list back with [`PidLister::keep`] for the next pass to
    /// reuse.
    pub fn pids(&mut self) -> Result<Vec<u32>, ObserveError> {
        // Read before listing: a task created or released after this read moves the
        // next pass's stamp, whether or not this listing caught it.
        let stamp = self.stamp();
        self.stamp = stamp;
        let last = self.last.take();
        if let (Some(now), Some((then, _))) = (stamp, &last) {
            if now == *then {
                self.reused = true;
                return Ok(last.map(|(_, p)| p).unwrap_or_default());
            }
        }
        self.reused = false;
        let hint = last.as_ref().map_or(512, |(_, p)| p.len() + 64);
        let pids = list_pids(&self.root, &mut self.buf, hint)?;
        self.listings += 1;
        Ok(pids)
    }

    /// Whether the last [`PidLister::pids`] knew that no task was created and none
    /// was released since the call before it (it reused that call's listing).
    pub fn reused(&self) -> bool {
        self.reused
    }

    /// Hands back the list [`PidLister::pids`] gave, to be reused while nothing is
    /// created or released.
    pub fn keep(&mut self, pids: Vec<u32>) {
        self.last = self.stamp.map(|s| (s, pids));
    }

    fn stamp(&mut self) -> Option<Stamp> {
        let own = *self
            .own_namespace
            .get_or_insert_with(|| sees_itself(&self.root));
        if !own {
            return None;
        }
        // A stack buffer: loadavg is one short line.
        let mut buf = [0u8; 128];
        let n = std::fs::File::open(&self.loadavg)
            .and_then(|mut f| f.read(&mut buf))
            .ok()?;
        parse_loadavg(std::str::from_utf8(&buf[..n]).ok()?)
    }
}

/// `<root>/self` names this process's own pid: the root is a procfs of the
/// daemon's pid namespace.
fn sees_itself(root: &Path) -> bool {
    std::fs::read_link(root.join("self"))
        .is_ok_and(|t| t.as_os_str() == std::process::id().to_string().as_str())
}

/// `0.20 0.22 0.58 1/581 23921`: the thread count after the slash, the last pid.
fn parse_loadavg(text: &str) -> Option<Stamp> {
    let mut f = text.split_whitespace().skip(3);
    let threads = f.next()?.split_once('/')?.1.parse().ok()?;
    let last_pid = f.next()?.parse().ok()?;
    Some(Stamp { threads, last_pid })
}

/// Numeric entries of `root`, ascending, read through `buf`.
///
/// Not `read_dir`: its `opendir` allocates a 32 KiB buffer each time, whose malloc
/// and free (with the consolidation a free that size sets off) cost more than the
/// `getdents64` calls themselves.
fn list_pids(
    root: &Path,
    buf: &mut [MaybeUninit<u8>],
    hint: usize,
) -> Result<Vec<u32>, ObserveError> {
    let io = |err: rustix::io::Errno| ObserveError::Io {
        path: root.to_path_buf(),
        err: err.into(),
    };
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = rustix::fs::open(root, flags, Mode::empty()).map_err(io)?;
    let mut dir = RawDir::new(fd, buf);
    let mut pids = Vec::with_capacity(hint);
    while let Some(entry) = dir.next() {
        let entry = entry.map_err(io)?;
        if let Some(pid) = entry
            .file_name()
            .to_str()
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
        {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    Ok(pids)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake root that the lister takes for the daemon's own: `self` names this
    /// process, `loadavg` says what the test wants.
    fn root() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(std::process::id().to_string(), d.path().join("self")).unwrap();
        d
    }

    fn add(d: &Path, pid: u32) {
        std::fs::create_dir(d.join(pid.to_string())).unwrap();
    }

    fn loadavg(d: &Path, threads: u32, last: u32) {
        let text = format!("0.00 0.01 0.05 1/{threads} {last}\n");
        std::fs::write(d.join("loadavg"), text).unwrap();
    }

    #[test]
    fn an_unmoved_stamp_reuses_the_listing_and_a_moved_one_lists() {
        let d = root();
        add(d.path(), 10);
        loadavg(d.path(), 100, 500);
        let mut l = PidLister::new(d.path());
        let pass = |l: &mut PidLister| {
            let pids = l.pids().unwrap();
            l.keep(pids.clone());
            pids
        };
        assert_eq!(pass(&mut l), [10]);
        // Created behind the stamp's back (a real kernel would have moved it):
        // proof that the second pass did not list.
        add(d.path(), 11);
        assert_eq!(pass(&mut l), [10]);
        assert_eq!(l.listings, 1);
        assert!(l.reused(), "nothing came or went");
        loadavg(d.path(), 101, 501);
        assert_eq!(pass(&mut l), [10, 11]);
        assert!(!l.reused());
        // An exit alone (thread count down, cursor still) lists too.
        std::fs::remove_dir(d.path().join("10")).unwrap();
        loadavg(d.path(), 100, 501);
        assert_eq!(pass(&mut l), [11]);
        assert!(!l.reused(), "a task went");
        assert_eq!(l.listings, 3);
        // A list not handed back (the last one, reused here) is listed afresh.
        l.pids().unwrap();
        assert_eq!(l.listings, 3);
        assert_eq!(l.pids().unwrap(), [11]);
        assert_eq!(l.listings, 4);
    }

    #[test]
    fn without_a_stamp_or_outside_its_namespace_every_pass_lists() {
        // No loadavg (as in the fake procfs of other tests).
        let d = root();
        add(d.path(), 10);
        let mut l = PidLister::new(d.path());
        for _ in 0..2 {
            let p = l.pids().unwrap();
            l.keep(p);
        }
        assert_eq!(l.listings, 2);
        assert!(!l.reused(), "cannot know");
        // A loadavg, but `self` is someone else: another pid namespace's procfs.
        let d = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("1", d.path().join("self")).unwrap();
        loadavg(d.path(), 100, 500);
        let mut l = PidLister::new(d.path());
        for _ in 0..2 {
            let p = l.pids().unwrap();
            l.keep(p);
        }
        assert_eq!(l.listings, 2);
    }

    #[test]
    fn loadavg_parsing_takes_the_thread_count_and_last_pid_or_nothing() {
        assert_eq!(
            parse_loadavg("0.20 0.22 0.58 1/581 23921\n"),
            Some(Stamp {
                threads: 581,
                last_pid: 23921
            })
        );
        for bad in [
            "",
            "0.20 0.22 0.58 1581 23921",
            "0.2 0.2 0.5 1/x 3",
            "0 0 0 1/2",
        ] {
            assert_eq!(parse_loadavg(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_real_proc_is_our_own_and_lists_ourselves() {
        let mut l = PidLister::new(Path::new("/proc"));
        let pids = l.pids().unwrap();
        assert!(pids.contains(&std::process::id()));
        assert_eq!(l.own_namespace, Some(true));
    }

    #[test]
    fn a_missing_root_is_an_error_naming_it() {
        let mut l = PidLister::new(Path::new("/nonexistent/proc"));
        let e = l.pids().unwrap_err().to_string();
        assert!(e.contains("/nonexistent/proc"), "{e}");
    }
}
