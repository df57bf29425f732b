//! Reading one process from a procfs tree (the real `/proc` or a test's fake one).
//!
//! Every file of a process is opened relative to one directory handle taken at
//! [`ProcDir::open`] (procfs's `Process`, an `O_PATH` fd on `/proc/<pid>`). If the
//! process exits and its pid is reused between two reads, the later reads fail with
//! ENOENT/ESRCH instead of silently describing the newcomer, so a [`ProcInfo`] never
//! mixes two processes. "Gone" is an ordinary answer (`Ok(None)`), not an error: on a
//! busy machine processes exit mid-scan all the time.
//!
//! The one exception, [`read_stat_by_path`], reads stat alone for a caller that knows
//! the process by its start time already and checks it, and reads nothing else on
//! the strength of it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use procfs::FromRead;
use serde::{Deserialize, Serialize};

use super::error::{classify, IoOutcome, ObserveError};
use super::numa_maps::{self, NumaMaps};
use super::sched::{self, NumaFaults};
use super::status::{self, ProcStatus};
use numasched_model::topology::{CpuId, NodeId};
use numasched_model::CpuSet;

/// `PF_KTHREAD` in include/linux/sched.h; set in the flags field of a kernel thread's stat.
const PF_KTHREAD: u32 = 0x0020_0000;

/// The parts of `/proc/<pid>/stat` (or `task/<tid>/stat`) we use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stat {
    pub pid: u32,
    pub comm: String,
    pub state: char,
    pub ppid: u32,
    /// Session id: an orphan keeps its parent's unless it called setsid, which is how
    /// one left behind in numasched's set is told from a service that init started.
    #[serde(default)]
    pub session: u32,
    pub flags: u32,
    /// utime + stime, in clock ticks; for a process it covers all its threads,
    /// including those that already exited.
    pub cpu_ticks: u64,
    /// cutime + cstime, in clock ticks: the CPU time of its children it waited for
    /// (and theirs). A shell's short commands do their work there, each gone before
    /// a scan could see it as a process.
    #[serde(default)]
    pub child_ticks: u64,
    pub num_threads: u32,
    /// Clock ticks after boot; with the pid, the process's identity.
    pub start_time: u64,
    pub rss_pages: u64,
    /// CPU it last ran on.
    pub processor: Option<CpuId>,
    /// Scheduling policy of the main thread (`SCHED_*`); 0 where the line is too short
    /// to say.
    #[serde(default)]
    pub policy: u32,
}

impl Stat {
    /// Kernel threads are never touched. The flag is authoritative; pid 2 and
    /// its children (kthreadd's) cover kernels or tools that lose the flag. Inside a
    /// PID namespace pid 2 can be an ordinary process: skipping it there is the safe
    /// mistake.
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0 || self.pid == 2 || self.ppid == 2
    }

    /// A real-time task (SCHED_FIFO, SCHED_RR, SCHED_DEADLINE) is placed by whoever
    /// made it real-time: its CPUs are part of its timing guarantees (a deadline task
    /// cannot be moved at all, EBUSY), so numasched leaves it alone.
    pub fn is_realtime(&self) -> bool {
        matches!(self.policy, 1 | 2 | 6)
    }
}

/// procfs-core's stat parser slices around the parentheses of `comm` without checking
/// that they are where it expects, and panics on text such as `(x)` or `)(`. Real
/// kernels never produce that, but a broken file must not take the daemon down, so the
/// shape is checked here first, on the same trimmed text the parser will see.
fn stat_shape_ok(t: &str) -> bool {
    match (t.find('('), t.rfind(')')) {
        (Some(open), Some(close)) => {
            open >= 2
                && t.is_char_boundary(open - 1)
                && open < close
                && close + 2 <= t.len()
                && t.is_char_boundary(close + 2)
        }
        _ => false,
    }
}

/// The file as text. Names in procfs (comm, mapped paths) are bytes, not necessarily
/// UTF-8; invalid sequences become U+FFFD. The strict check first: it is the common
/// case and several times faster than the lossy conversion.
fn text_of(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Parses a stat file; `path` only labels errors.
pub fn parse_stat(bytes: &[u8], path: &Path) -> Result<Stat, ObserveError> {
    let text = text_of(bytes);
    let t = text.trim();
    if !stat_shape_ok(t) {
        return Err(ObserveError::parse(
            path,
            None,
            "not a stat line: `pid (comm) state ...` expected",
        ));
    }
    let s = procfs::process::Stat::from_read(t.as_bytes()).map_err(|e| {
        ObserveError::parse(path, None, format!("not a valid stat line ({})", cause(&e)))
    })?;
    let nonneg = |v: i64, what: &str| {
        u32::try_from(v)
            .map_err(|_| ObserveError::parse(path, None, format!("{what} {v} is negative")))
    };
    Ok(Stat {
        pid: nonneg(s.pid.into(), "pid")?,
        comm: s.comm,
        state: s.state,
        ppid: nonneg(s.ppid.into(), "ppid")?,
        // A task exiting while it is read, or whose session leader is outside this
        // pid namespace, can show -1 here: no session, not a broken file (it was
        // logged as a warning and counted as an error for unrelated short-lived
        // processes).
        session: u32::try_from(s.session).unwrap_or(0),
        flags: s.flags,
        cpu_ticks: s.utime.saturating_add(s.stime),
        child_ticks: s
            .cutime
            .max(0)
            .saturating_add(s.cstime.max(0))
            .unsigned_abs(),
        num_threads: nonneg(s.num_threads, "num_threads")?,
        start_time: s.starttime,
        rss_pages: s.rss,
        processor: s.processor.and_then(|c| u32::try_from(c).ok()),
        policy: s.policy.unwrap_or(0),
    })
}

/// The cause in a procfs-core error, on one line. Its messages for a malformed field
/// span lines ("Internal error: bug at <its source file>:<line> (please report this
/// procfs bug)", then the cause): the location is procfs's, not the user's problem,
/// and an error here must stay one line naming our file.
fn cause(e: &impl std::fmt::Display) -> String {
    let text = e.to_string();
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    last.trim()
        .trim_start_matches("Internal Unwrap Error:")
        .trim()
        .to_string()
}

/// One thread's line of `task/<tid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadStat {
    pub tid: u32,
    pub cpu_ticks: u64,
    pub processor: Option<CpuId>,
}

/// Everything read about one process in one pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcInfo {
    pub stat: Stat,
    pub kernel_thread: bool,
    /// Live threads at the time of reading; empty if threads were not read.
    pub threads: Vec<ThreadStat>,
    /// From the main thread's status; `None` if not read or not printed.
    pub cpus_allowed: Option<CpuSet>,
    pub mems_allowed: Option<Vec<NodeId>>,
    pub rss_bytes: u64,
    pub numa_maps: Option<Arc<NumaMaps>>,
    /// Empty when the kernel has no NUMA balancing or sched was not read.
    pub numa_faults: BTreeMap<NodeId, NumaFaults>,
    /// Optional files that could not be read for lack of permission (numa_maps, sched):
    /// the process is still described, without that information. Even root meets
    /// this for a process holding capabilities the reader lacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied: Vec<PathBuf>,
    /// CPUs' worth its waited-for children ran since the last read (see
    /// [`Stat::child_ticks`]); 0 at first sight.
    #[serde(default)]
    pub children_demand: f64,
    /// CPUs of the threads that ran since the last read, where both thread lists were
    /// read; `None` otherwise (see `cache::ran_on`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran_on: Option<CpuSet>,
}

impl ProcInfo {
    /// Stat alone; the other parts empty until read.
    pub fn from_stat(stat: Stat) -> ProcInfo {
        ProcInfo {
            rss_bytes: stat.rss_pages.saturating_mul(procfs::page_size()),
            kernel_thread: stat.is_kernel_thread(),
            stat,
            threads: Vec::new(),
            cpus_allowed: None,
            mems_allowed: None,
            numa_maps: None,
            numa_faults: BTreeMap::new(),
            denied: Vec::new(),
            children_demand: 0.0,
            ran_on: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.stat.pid
    }

    /// CPUs its threads last ran on, ascending; the process's own stat if no thread
    /// was read.
    pub fn last_cpus(&self) -> CpuSet {
        let v: CpuSet = self.threads.iter().filter_map(|t| t.processor).collect();
        if v.is_empty() {
            return self.stat.processor.into_iter().collect();
        }
        v
    }

    pub fn tids(&self) -> Vec<u32> {
        self.threads.iter().map(|t| t.tid).collect()
    }
}

/// What status says about where a process may run: the part of [`ProcInfo`] that
/// changes only when someone changes the process's affinity or cpuset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Affinity {
    pub cpus_allowed: Option<CpuSet>,
    pub mems_allowed: Option<Vec<NodeId>>,
    /// `Kthread: 1` (Linux 6.4+): a kernel thread the stat flags did not reveal.
    pub kthread: bool,
}

/// What numa_maps and sched say: the costly part of [`ProcInfo`], which makes the
/// kernel walk page tables.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Memory {
    pub numa_maps: Option<Arc<NumaMaps>>,
    pub numa_faults: BTreeMap<NodeId, NumaFaults>,
    /// See [`ProcInfo::denied`].
    pub denied: Vec<PathBuf>,
}

/// Which of the costlier files to read. numa_maps makes the kernel walk the page tables
/// of every mapping under the mmap lock, so its cost grows with RSS: a daemon may read
/// it less often than stat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    pub status: bool,
    pub threads: bool,
    pub numa_maps: bool,
    pub sched: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            status: true,
            threads: true,
            numa_maps: true,
            sched: true,
        }
    }
}

/// A handle on `/proc/<pid>` that all reads of one process go through.
pub struct ProcDir {
    proc: procfs::process::Process,
    path: PathBuf,
    pid: u32,
}

fn proc_outcome(path: &Path, err: procfs::ProcError) -> IoOutcome {
    use procfs::ProcError as E;
    match err {
        E::NotFound(_) | E::Incomplete(_) => IoOutcome::Gone,
        E::PermissionDenied(_) => IoOutcome::Failed(ObserveError::PermissionDenied {
            path: path.to_path_buf(),
        }),
        E::Io(e, _) => classify(path, e),
        other => IoOutcome::Failed(ObserveError::parse(path, None, other.to_string())),
    }
}

impl ProcDir {
    /// `Ok(None)` if there is no such process (any more).
    pub fn open(proc_root: &Path, pid: u32) -> Result<Option<ProcDir>, ObserveError> {
        let path = proc_root.join(pid.to_string());
        match procfs::process::Process::new_with_root(path.clone()) {
            Ok(proc) => Ok(Some(ProcDir { proc, path, pid })),
            Err(e) => match proc_outcome(&path, e) {
                IoOutcome::Gone => Ok(None),
                IoOutcome::Failed(e) => Err(e),
            },
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads a file of this process whole; `Ok(None)` if it (or the process) is gone.
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, ObserveError> {
        let path = self.path.join(name);
        let mut file = match self.proc.open_relative(name) {
            Ok(f) => f,
            Err(e) => {
                return match proc_outcome(&path, e) {
                    IoOutcome::Gone => Ok(None),
                    IoOutcome::Failed(e) => Err(e),
                }
            }
        };
        read_whole(&mut file, &path, name.ends_with("stat"))
    }

    /// Whether the process still exists, to tell "gone" from "file not provided by
    /// this kernel" after an ENOENT on an optional file.
    fn alive(&self) -> bool {
        self.proc.open_relative("stat").is_ok()
    }

    pub fn stat(&self) -> Result<Option<Stat>, ObserveError> {
        let Some(bytes) = self.read("stat")? else {
            return Ok(None);
        };
        parse_stat(&bytes, &self.path.join("stat")).map(Some)
    }

    pub fn status(&self) -> Result<Option<ProcStatus>, ObserveError> {
        let Some(bytes) = self.read("status")? else {
            return Ok(None);
        };
        status::parse(&text_of(&bytes), &self.path.join("status")).map(Some)
    }

    pub fn numa_maps(&self) -> Result<Option<NumaMaps>, ObserveError> {
        let Some(bytes) = self.read("numa_maps")? else {
            // A kernel without CONFIG_NUMA has no numa_maps: the process has no
            // per-node memory to report rather than being gone.
            return Ok(self.alive().then(NumaMaps::default));
        };
        numa_maps::parse(&text_of(&bytes), &self.path.join("numa_maps")).map(Some)
    }

    /// NUMA hinting faults per node; `Some(empty)` on kernels without the sched file or
    /// without NUMA balancing.
    pub fn numa_faults(&self) -> Result<Option<BTreeMap<NodeId, NumaFaults>>, ObserveError> {
        let Some(bytes) = self.read("sched")? else {
            return Ok(self.alive().then(BTreeMap::new));
        };
        sched::parse(&text_of(&bytes), &self.path.join("sched")).map(Some)
    }

    /// Thread ids in `task/`, as listed (unsorted); `Ok(None)` if the process is gone.
    fn task_ids(&self) -> Result<Option<Vec<u32>>, ObserveError> {
        let dir = self.path.join("task");
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) => {
                return match classify(&dir, e) {
                    IoOutcome::Gone => Ok(None),
                    IoOutcome::Failed(e) => Err(e),
                }
            }
        };
        let mut tids = Vec::new();
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => match classify(&dir, e) {
                    IoOutcome::Gone => return Ok(None),
                    IoOutcome::Failed(e) => return Err(e),
                },
            };
            if let Some(tid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            {
                tids.push(tid);
            }
        }
        Ok(Some(tids))
    }

    /// One thread's stat; `Ok(None)` if it exited.
    fn thread_stat(&self, tid: u32) -> Result<Option<Stat>, ObserveError> {
        let name = format!("task/{tid}/stat");
        let Some(bytes) = self.read(&name)? else {
            return Ok(None);
        };
        parse_stat(&bytes, &self.path.join(&name)).map(Some)
    }

    /// The live threads. A thread that exits between the listing and its stat is left
    /// out; `Ok(None)` only if the whole process is gone.
    pub fn threads(&self) -> Result<Option<Vec<ThreadStat>>, ObserveError> {
        let Some(tids) = self.task_ids()? else {
            return Ok(None);
        };
        let mut out = Vec::new();
        for tid in tids {
            let Some(s) = self.thread_stat(tid)? else {
                continue;
            };
            out.push(ThreadStat {
                tid,
                cpu_ticks: s.cpu_ticks,
                processor: s.processor,
            });
        }
        if out.is_empty() && !self.alive() {
            return Ok(None);
        }
        out.sort_unstable_by_key(|t| t.tid);
        Ok(Some(out))
    }

    /// Run-queue delay summed over the live threads (see [`schedstat`](super::schedstat));
    /// `Ok(None)` if the process is gone.
    pub fn run_delay(&self) -> Result<Option<super::schedstat::RunDelay>, ObserveError> {
        let Some(tids) = self.task_ids()? else {
            return Ok(None);
        };
        let mut out = super::schedstat::RunDelay::default();
        for tid in tids {
            let name = format!("task/{tid}/schedstat");
            // A thread that exited in between is simply not counted.
            let Some(bytes) = self.read(&name)? else {
                continue;
            };
            let wait = super::schedstat::parse(&text_of(&bytes), &self.path.join(&name))?;
            let Some(stat) = self.thread_stat(tid)? else {
                continue;
            };
            if stat.state == 'R' {
                out.runnable += 1;
            }
            out.wait_ns = out.wait_ns.saturating_add(wait);
            out.threads += 1;
        }
        if out.threads == 0 && !self.alive() {
            return Ok(None);
        }
        Ok(Some(out))
    }

    /// Run-queue delay of the main thread alone (`<pid>/schedstat`), ns since it
    /// started: one read, where summing every thread's costs one per thread.
    /// `Ok(None)` if the process is gone.
    pub fn main_thread_wait(&self) -> Result<Option<u64>, ObserveError> {
        let Some(bytes) = self.read("schedstat")? else {
            return Ok(None);
        };
        super::schedstat::parse(&text_of(&bytes), &self.path.join("schedstat")).map(Some)
    }

    /// What status says about placement.
    pub fn affinity(&self) -> Result<Option<Affinity>, ObserveError> {
        Ok(self.status()?.map(|s| Affinity {
            cpus_allowed: s.cpus_allowed,
            mems_allowed: s.mems_allowed,
            kthread: s.kthread == Some(true),
        }))
    }

    /// The live threads, without the task directory when stat already describes the
    /// only one (see [`sole_thread`]).
    pub fn live_threads(&self, stat: &Stat) -> Result<Option<Vec<ThreadStat>>, ObserveError> {
        match sole_thread(stat) {
            Some(t) => Ok(Some(vec![t])),
            None => self.threads(),
        }
    }

    /// numa_maps and sched, as far as `opts` asks. Permission is refused per file, so
    /// an unreadable one says nothing about the rest of the process: it is recorded
    /// in [`Memory::denied`] and the process is still described.
    pub fn memory(&self, opts: &ReadOptions) -> Result<Option<Memory>, ObserveError> {
        let mut m = Memory::default();
        if opts.numa_maps {
            let Some(maps) = permitted(self.numa_maps(), &mut m.denied)? else {
                return Ok(None);
            };
            m.numa_maps = maps.map(Arc::new);
        }
        if opts.sched {
            let Some(faults) = permitted(self.numa_faults(), &mut m.denied)? else {
                return Ok(None);
            };
            m.numa_faults = faults.unwrap_or_default();
        }
        Ok(Some(m))
    }

    /// Reads the rest of a process whose stat is already known. Kernel threads get
    /// nothing more: nothing about them is ever used.
    pub fn read_rest(
        &self,
        stat: Stat,
        opts: &ReadOptions,
    ) -> Result<Option<ProcInfo>, ObserveError> {
        assemble(stat, opts, &mut Fresh(self))
    }
}

/// The main thread as stat describes it, when it is the only one: the task directory
/// would repeat it at the cost of five syscalls, for the most common kind of process.
/// (A leader that exited before its last thread shows as a zombie and is read fully.)
pub fn sole_thread(stat: &Stat) -> Option<ThreadStat> {
    (stat.num_threads == 1 && stat.state != 'Z').then_some(ThreadStat {
        tid: stat.pid,
        cpu_ticks: stat.cpu_ticks,
        processor: stat.processor,
    })
}

/// An optional file's answer: `Ok(None)` if the process is gone, `Some(None)` if
/// reading it was refused (the path is added to `denied`).
fn permitted<T>(
    read: Result<Option<T>, ObserveError>,
    denied: &mut Vec<PathBuf>,
) -> Result<Option<Option<T>>, ObserveError> {
    match read {
        Ok(v) => Ok(v.map(Some)),
        Err(ObserveError::PermissionDenied { path }) => {
            denied.push(path);
            Ok(Some(None))
        }
        Err(e) => Err(e),
    }
}

/// Where the parts of a [`ProcInfo`] come from: the files themselves ([`Fresh`]), or
/// the scanner's earlier reads where they are still good enough (`cache`). `Ok(None)`
/// from any of them means the process is gone.
pub(crate) trait Source {
    fn affinity(&mut self, stat: &Stat) -> Result<Option<Affinity>, ObserveError>;
    fn threads(&mut self, stat: &Stat) -> Result<Option<Vec<ThreadStat>>, ObserveError>;
    fn memory(&mut self, stat: &Stat, opts: &ReadOptions) -> Result<Option<Memory>, ObserveError>;
}

/// Every part read from its file.
pub(crate) struct Fresh<'a>(pub &'a ProcDir);

impl Source for Fresh<'_> {
    fn affinity(&mut self, _: &Stat) -> Result<Option<Affinity>, ObserveError> {
        self.0.affinity()
    }
    fn threads(&mut self, stat: &Stat) -> Result<Option<Vec<ThreadStat>>, ObserveError> {
        self.0.live_threads(stat)
    }
    fn memory(&mut self, _: &Stat, opts: &ReadOptions) -> Result<Option<Memory>, ObserveError> {
        self.0.memory(opts)
    }
}

/// One process from its stat and the parts `opts` asks for, in the order that lets a
/// kernel thread stop early (status can reveal one the stat flags did not).
pub(crate) fn assemble(
    stat: Stat,
    opts: &ReadOptions,
    src: &mut impl Source,
) -> Result<Option<ProcInfo>, ObserveError> {
    let mut info = ProcInfo::from_stat(stat);
    if info.kernel_thread {
        return Ok(Some(info));
    }
    if opts.status {
        let Some(a) = src.affinity(&info.stat)? else {
            return Ok(None);
        };
        if a.kthread {
            info.kernel_thread = true;
            return Ok(Some(info));
        }
        info.cpus_allowed = a.cpus_allowed;
        info.mems_allowed = a.mems_allowed;
    }
    if opts.threads {
        let Some(t) = src.threads(&info.stat)? else {
            return Ok(None);
        };
        info.threads = t;
    }
    if opts.numa_maps || opts.sched {
        let Some(m) = src.memory(&info.stat, opts)? else {
            return Ok(None);
        };
        info.numa_maps = m.numa_maps;
        info.numa_faults = m.numa_faults;
        info.denied = m.denied;
    }
    Ok(Some(info))
}

/// Reads an open procfs file whole; `Ok(None)` if its process is gone.
///
/// Not `read_to_end`: on a `File` it first asks fstat and lseek for a size hint, two
/// extra syscalls per file that procfs answers with 0 anyway. A `stat` file
/// (`one_line`) is one line printed in one go (`single_open`), so a read that stops
/// short of the buffer after its newline got all of it, and the read that would only
/// confirm the end is skipped: one of the four syscalls a stat file took, and most
/// files a pass reads are stat files.
///
/// Reads go through a 4 KiB buffer on the stack and the file is copied out at its
/// size: a heap buffer of that size per file went through the allocator's slow path
/// (too big for its per-thread cache) and was a tenth of a steady-state pass.
fn read_whole(
    file: &mut std::fs::File,
    path: &Path,
    one_line: bool,
) -> Result<Option<Vec<u8>>, ObserveError> {
    let mut chunk = [0u8; 4096];
    let mut out: Vec<u8> = Vec::new();
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return match classify(path, e) {
                    IoOutcome::Gone => Ok(None),
                    IoOutcome::Failed(e) => Err(e),
                }
            }
        };
        out.extend_from_slice(&chunk[..n]);
        if one_line && n < chunk.len() && out.ends_with(b"\n") {
            break;
        }
    }
    Ok(Some(out))
}

/// A process's stat read by path, without a [`ProcDir`] handle: one open and one
/// close fewer, for a process the caller already knows by its start time. Nothing
/// else may be read on the strength of it: by then the pid could name a newcomer.
pub fn read_stat_by_path(proc_root: &Path, pid: u32) -> Result<Option<Stat>, ObserveError> {
    let path = proc_root.join(pid.to_string()).join("stat");
    let mut file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            return match classify(&path, e) {
                IoOutcome::Gone => Ok(None),
                IoOutcome::Failed(e) => Err(e),
            }
        }
    };
    match read_whole(&mut file, &path, true)? {
        Some(bytes) => parse_stat(&bytes, &path).map(Some),
        None => Ok(None),
    }
}

/// Reads one process. `Ok(None)`: it does not exist, or exited while being read.
pub fn read_process(
    proc_root: &Path,
    pid: u32,
    opts: &ReadOptions,
) -> Result<Option<ProcInfo>, ObserveError> {
    let Some(dir) = ProcDir::open(proc_root, pid)? else {
        return Ok(None);
    };
    let Some(stat) = dir.stat()? else {
        return Ok(None);
    };
    dir.read_rest(stat, opts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STAT: &str = "7545 (my (odd) prog) S 1 7545 7545 0 -1 4194560 98 0 0 0 12 30 0 0 20 0 3 0 \
        746312 8617984 244 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn parses_a_real_looking_stat() {
        let s = parse_stat(STAT.as_bytes(), Path::new("stat")).unwrap();
        assert_eq!(s.pid, 7545);
        assert_eq!(s.comm, "my (odd) prog");
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.cpu_ticks, 42);
        assert_eq!(s.num_threads, 3);
        assert_eq!(s.start_time, 746312);
        assert_eq!(s.rss_pages, 244);
        assert_eq!(s.processor, Some(1));
        assert!(!s.is_kernel_thread());
    }

    /// Session -1 (a task exiting as it is read) is no session, not a broken file: it
    /// was a warning counted in `errors_total` for unrelated short-lived processes.
    #[test]
    fn a_negative_session_reads_as_none() {
        let odd = STAT.replace(" S 1 7545 7545 ", " S 1 7545 -1 ");
        let s = parse_stat(odd.as_bytes(), Path::new("stat")).unwrap();
        assert_eq!(s.session, 0);
        assert_eq!(s.pid, 7545);
    }

    #[test]
    fn kernel_threads_are_recognised() {
        let k = STAT.replace(" 4194560 ", &format!(" {} ", 0x0020_8040));
        assert!(parse_stat(k.as_bytes(), Path::new("s"))
            .unwrap()
            .is_kernel_thread());
        let k = STAT.replace(" S 1 ", " S 2 ");
        assert!(parse_stat(k.as_bytes(), Path::new("s"))
            .unwrap()
            .is_kernel_thread());
    }

    #[test]
    fn malformed_stat_is_an_error_naming_the_file() {
        for bad in [
            "",
            "(x)",
            ")(",
            "1 (x)",
            "12 (x) S",
            "é(x) S 1",
            "1 (x) S a b c",
            "-1 (x) S 1 1 1 0 -1 0",
        ] {
            let e = parse_stat(bad.as_bytes(), Path::new("/proc/5/stat"))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("/proc/5/stat: "), "{bad:?}: {e}");
        }
    }

    proptest! {
        #[test]
        fn random_stat_never_panics(s in "\\PC*") {
            let _ = parse_stat(s.as_bytes(), Path::new("x"));
        }

        #[test]
        fn mangled_stat_never_panics(cut in 0usize..200, junk in "[()a-z0-9 é-]{0,8}") {
            let mut s = STAT.to_string();
            let at = s.char_indices().map(|(i, _)| i).nth(cut).unwrap_or(s.len());
            s.insert_str(at, &junk);
            let _ = parse_stat(s.as_bytes(), Path::new("x"));
            let _ = parse_stat(&s.as_bytes()[..at], Path::new("x"));
        }
    }
}
