//! Helpers for tests that run real processes on this machine: children that are
//! always reaped, affinity read back from /proc, polling with a deadline.
#![allow(dead_code)] // each test binary uses its own subset

use numasched::model::CpuSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use numasched::apply::{Kernel, LinuxKernel};
use numasched::topology::cpulist;

/// Kills and reaps its child when dropped, even when an assertion fails.
pub struct Guard(pub Option<Child>);

impl Guard {
    pub fn spawn(cmd: &mut Command) -> Option<Guard> {
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        // A binary this test copied a moment ago can fail to exec with ETXTBSY: a
        // child that another test thread forked while the copy was open for writing
        // holds that descriptor until its own exec. It passes; try again briefly.
        let mut tries = 0;
        loop {
            match cmd.spawn() {
                Ok(c) => return Some(Guard(Some(c))),
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => {
                    eprintln!("skipped: cannot start {cmd:?}: {e}");
                    return None;
                }
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.0.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("child still held")
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether CPUs 0 and 1 are ours to use; prints why not.
pub fn two_cpus() -> bool {
    let me = std::process::id();
    match LinuxKernel::new().affinity(me, me) {
        Ok(cpus) if cpus.contains(0) && cpus.contains(1) => true,
        Ok(cpus) => {
            eprintln!(
                "skipped: needs CPUs 0 and 1, this process may use {}",
                cpulist::format(&cpus)
            );
            false
        }
        Err(e) => {
            eprintln!("skipped: cannot read own affinity: {e}");
            false
        }
    }
}

pub fn allowed_of(path: &str) -> Option<CpuSet> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with("Cpus_allowed_list:"))?;
    CpuSet::parse(line.split_once(':')?.1).ok()
}

/// One placement test at a time. Each needs the machine to itself: another test's
/// loads are, to its daemon, others' work, and where that test's daemon pinned them the
/// kernel cannot move them, so hard pins rightly keep away (see
/// `numasched_policy::crowded`) and what the test expects of a quiet machine does not
/// happen.
/// Across test processes too (two `cargo test --test live` at once, or the live
/// tests of two checkouts), by an flock on a file in the temporary directory.
static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The machine, held for one test: this process's lock, then every process's.
pub struct Alone {
    _machine: nix::fcntl::Flock<std::fs::File>,
    _here: std::sync::MutexGuard<'static, ()>,
}

/// [`two_cpus`], with the machine held for the caller until the guard drops.
pub fn two_cpus_alone() -> Option<Alone> {
    let here = MACHINE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let path = std::env::temp_dir().join("numasched-live-tests.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .expect("the live tests' lock file");
    let machine = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .expect("lock the live tests' lock file");
    two_cpus().then_some(Alone {
        _machine: machine,
        _here: here,
    })
}

/// The affinity of a live process, from its status file.
pub fn allowed(pid: u32) -> CpuSet {
    allowed_of(&format!("/proc/{pid}/status")).expect("process's status")
}

/// Polls until `f` holds, for at most `secs` seconds.
pub fn wait_secs(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Polls until `f` holds, for at most 5 s.
pub fn wait_for(f: impl FnMut() -> bool) -> bool {
    wait_secs(5, f)
}

/// A system binary under a name of our own, so that the daemon's `--include-comm` can
/// select exactly this test's processes. A symlink, not a copy: the kernel takes
/// `comm` from the name exec'd, and a copy would be a file open for writing that a
/// child forked by another test thread could hold at exec time (ETXTBSY).
pub fn named_copy(dir: &Path, system: &str, name: &str) -> PathBuf {
    let src = ["/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(system))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{system} not found in /usr/bin or /bin"));
    let dst = dir.join(name);
    if !dst.exists() {
        std::os::unix::fs::symlink(&src, &dst).expect("link the binary");
    }
    dst
}

/// A busy `numasched workload cpu` running 60 s under the name `name` (a symlink in
/// `dir`, so that `--include-comm` selects exactly it), with `extra` arguments.
pub fn busy(dir: &Path, name: &str, extra: &[&str]) -> Guard {
    let bin = dir.join(name);
    if !bin.exists() {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_numasched"), &bin).expect("link numasched");
    }
    Guard::spawn(
        Command::new(bin)
            .args(["workload", "cpu", "--seconds", "60"])
            .args(extra),
    )
    .expect("start a busy load")
}

/// The allowed CPUs of every thread of a live process.
pub fn thread_affinities(pid: u32) -> Vec<CpuSet> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| allowed_of(&format!("{}/status", e.path().display())))
        .collect()
}
