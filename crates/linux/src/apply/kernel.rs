//! The seam between the actuator and the running kernel.
//!
//! Everything numasched does to the system goes through [`Kernel`]: a handful of calls,
//! each a thin wrapper over one syscall or one /proc read, so that the actuator's
//! decisions can be tested against `FakeKernel` (module `fake`, tests only) with any
//! fault injected between any two calls. [`LinuxKernel`] is the real thing.
//!
//! Its errors are [`KernelError`]s (module `kernel_error`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use super::kernel_error::{ErrorKind, KernelError, Op};
pub use super::mover::Moving;
use super::mover::{Job, Mover};
pub use super::regions::Region;
use crate::observe::ProcDir;
use numasched_model::topology::NodeId;
use numasched_model::CpuSet;

/// Who a pid is right now: enough to tell a process from a later one with the same pid
/// and to keep away from kernel threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Clock ticks after boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
    pub kernel_thread: bool,
    /// Session id (`/proc/<pid>/stat` field 6); see [`super::orphans`].
    #[serde(default)]
    pub session: u32,
}

/// The operations the apply layer needs from the kernel. Methods take `&self`: the
/// kernel is shared state either way, and fakes keep theirs behind a `RefCell`.
pub trait Kernel {
    /// The thread ids of a process, ascending.
    fn threads(&self, pid: u32) -> Result<Vec<u32>, KernelError>;
    /// Start time and kind, read right before acting to re-check identity.
    fn identity(&self, pid: u32) -> Result<Identity, KernelError>;
    /// The CPUs thread `tid` (of process `pid`, for errors) may run on, ascending.
    fn affinity(&self, pid: u32, tid: u32) -> Result<CpuSet, KernelError>;
    /// Restricts thread `tid` to `cpus` (non-empty).
    fn set_affinity(&self, pid: u32, tid: u32, cpus: &CpuSet) -> Result<(), KernelError>;
    /// Moves all of the process's pages on `from` nodes to `to` nodes
    /// (`migrate_pages(2)`); returns how many pages could not be moved.
    fn migrate_pages(&self, pid: u32, from: &[NodeId], to: &[NodeId]) -> Result<u64, KernelError>;
    /// Moves the pages at `addrs` (page-aligned addresses in the process) to `nodes[i]`
    /// (`move_pages(2)`, `MPOL_MF_MOVE`); returns the per-page status (node or -errno).
    fn move_pages(
        &self,
        pid: u32,
        addrs: &[u64],
        nodes: &[NodeId],
    ) -> Result<Vec<i32>, KernelError>;
    /// The mappings page migration may move, with their pages per node
    /// (`/proc/<pid>/maps` joined with `numa_maps`).
    fn regions(&self, pid: u32) -> Result<Vec<Region>, KernelError>;
    /// The nodes the process may have memory on (`Mems_allowed_list`, its cpuset's
    /// `cpuset.mems`), read right before pages move.
    fn mems_allowed(&self, pid: u32) -> Result<Vec<NodeId>, KernelError>;
    /// [`move_pages`](Self::move_pages) without holding the caller past `until` (on
    /// [`now`](Self::now)'s clock): a call still running then goes on, and its answer
    /// is collected with [`moving`](Self::moving). One call at a time. The default
    /// makes the call in place.
    fn start_move_pages(
        &self,
        pid: u32,
        addrs: Vec<u64>,
        nodes: Vec<NodeId>,
        until: f64,
    ) -> Moving {
        let _ = until;
        let t0 = self.now();
        let r = self.move_pages(pid, &addrs, &nodes);
        Moving::Done(r, (self.now() - t0).max(0.0))
    }
    /// The answer of the call [`start_move_pages`](Self::start_move_pages) left
    /// running, waiting until `until` at most.
    fn moving(&self, until: f64) -> Moving {
        let _ = until;
        Moving::Done(
            Err(KernelError::new(
                Op::MovePages,
                0,
                None,
                ErrorKind::Other("no move_pages call in flight".into()),
            )),
            0.0,
        )
    }
    /// Seconds on a monotonic clock: how much of an epoch a migration step has used.
    fn now(&self) -> f64;
    /// The processes forked by any thread of `pid` that still run, ascending.
    fn children(&self, pid: u32) -> Result<Vec<u32>, KernelError>;
    /// The CPUs the process's cpuset allows (cgroup v2 `cpuset.cpus.effective`), or
    /// `None` where that cannot be told: what tells a set the kernel narrowed from one
    /// someone else chose. The default knows none.
    fn cpuset_cpus(&self, pid: u32) -> Result<Option<CpuSet>, KernelError> {
        let _ = pid;
        Ok(None)
    }
}

/// Where cgroup v2 is mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The real kernel. Thread listing and identity come from a procfs root that tests may
/// redirect; affinity and migration are direct syscalls.
#[derive(Debug, Clone)]
pub struct LinuxKernel {
    proc_root: PathBuf,
    /// The origin of [`Kernel::now`].
    started: std::time::Instant,
    /// Where `move_pages` runs when the caller must not wait on it.
    mover: Arc<Mover>,
}

impl Default for LinuxKernel {
    fn default() -> Self {
        LinuxKernel::new()
    }
}

/// Bits per `unsigned long`, the unit of the kernel's CPU and node masks.
const WORD_BITS: usize = libc::c_ulong::BITS as usize;
/// `MPOL_MF_MOVE` from include/uapi/linux/mempolicy.h: move pages mapped only by this
/// process (moving shared pages, `MPOL_MF_MOVE_ALL`, needs CAP_SYS_NICE and disturbs
/// other processes).
const MPOL_MF_MOVE: libc::c_int = 1 << 1;
/// Largest CPU mask tried when the kernel says a mask is too small (EINVAL):
/// 64 Ki CPUs, far beyond any `CONFIG_NR_CPUS`.
const MAX_MASK_WORDS: usize = (1 << 16) / WORD_BITS;

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A bitmask of `ids` in kernel words; `None` if an id is absurdly large.
fn mask_of(ids: &[u32], min_words: usize) -> Option<Vec<libc::c_ulong>> {
    let max = ids.iter().copied().max().unwrap_or(0) as usize;
    if max >= MAX_MASK_WORDS * WORD_BITS {
        return None;
    }
    let mut words = vec![0 as libc::c_ulong; (max / WORD_BITS + 1).max(min_words)];
    for &id in ids {
        let id = id as usize;
        words[id / WORD_BITS] |= 1 << (id % WORD_BITS);
    }
    Some(words)
}

fn ids_of(words: &[libc::c_ulong]) -> Vec<u32> {
    let mut out = Vec::new();
    for (w, &bits) in words.iter().enumerate() {
        for b in 0..WORD_BITS {
            if bits & (1 << b) != 0 {
                out.push((w * WORD_BITS + b) as u32);
            }
        }
    }
    out
}

impl LinuxKernel {
    pub fn new() -> LinuxKernel {
        LinuxKernel::with_proc_root(Path::new("/proc"))
    }

    /// How long to wait from now until `until` on [`Kernel::now`]'s clock.
    fn wait_until(&self, until: f64) -> std::time::Duration {
        std::time::Duration::from_secs_f64((until - self.now()).clamp(0.0, 3600.0))
    }

    /// Reads threads and identity under `proc_root` instead of `/proc`.
    pub fn with_proc_root(proc_root: &Path) -> LinuxKernel {
        LinuxKernel {
            proc_root: proc_root.to_path_buf(),
            started: std::time::Instant::now(),
            mover: Arc::new(Mover::new(move_pages_now)),
        }
    }
}

/// `move_pages(2)` with `MPOL_MF_MOVE`, made by whichever thread calls it.
fn move_pages_now(pid: u32, addrs: &[u64], nodes: &[NodeId]) -> Result<Vec<i32>, KernelError> {
    let fail = |kind| KernelError::new(Op::MovePages, pid, None, kind);
    let p = libc::pid_t::try_from(pid).map_err(|_| fail(ErrorKind::Invalid))?;
    if addrs.len() != nodes.len() {
        return Err(fail(ErrorKind::Invalid));
    }
    let pages: Vec<*mut libc::c_void> = addrs.iter().map(|&a| a as usize as *mut _).collect();
    let targets: Vec<libc::c_int> = nodes
        .iter()
        .map(|&n| libc::c_int::try_from(n))
        .collect::<Result<_, _>>()
        .map_err(|_| fail(ErrorKind::Invalid))?;
    let mut status = vec![0 as libc::c_int; addrs.len()];
    // SAFETY: `pages`, `targets` and `status` each hold exactly `addrs.len()`
    // elements, the count passed; the kernel reads the first two and writes only
    // `status`. The page addresses are interpreted in the target process's address
    // space, never dereferenced in ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            p,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            targets.as_ptr(),
            status.as_mut_ptr(),
            MPOL_MF_MOVE,
        )
    };
    if r < 0 {
        let e = errno();
        // A process on its way out has no memory left to move: the kernel finds no mm
        // and says EINVAL, which here means what ESRCH means (a Slurm task cancelled
        // while its pages moved, in the QEMU bed).
        if e == libc::EINVAL && memory_gone(Path::new("/proc"), pid) {
            return Err(fail(ErrorKind::Gone));
        }
        return Err(fail(ErrorKind::from_errno(e)));
    }
    Ok(status)
}

/// Whether process `pid` has no memory any more: gone, or exiting past the point
/// where the kernel released its address space (statm all zeros, as for a kernel
/// thread).
fn memory_gone(proc_root: &Path, pid: u32) -> bool {
    match std::fs::read_to_string(proc_root.join(pid.to_string()).join("statm")) {
        Ok(text) => text
            .split_whitespace()
            .next()
            .is_none_or(|size| size == "0"),
        Err(_) => true,
    }
}

impl Kernel for LinuxKernel {
    fn threads(&self, pid: u32) -> Result<Vec<u32>, KernelError> {
        let err =
            |e: &io::Error| KernelError::new(Op::ListThreads, pid, None, ErrorKind::from_io(e));
        let dir = self.proc_root.join(pid.to_string()).join("task");
        let mut tids = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| err(&e))? {
            let entry = entry.map_err(|e| err(&e))?;
            if let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
                tids.push(tid);
            }
        }
        if tids.is_empty() {
            // Every thread exited between opening and reading: the process is gone.
            return Err(KernelError::new(
                Op::ListThreads,
                pid,
                None,
                ErrorKind::Gone,
            ));
        }
        tids.sort_unstable();
        Ok(tids)
    }

    fn identity(&self, pid: u32) -> Result<Identity, KernelError> {
        let fail = |kind| KernelError::new(Op::Identity, pid, None, kind);
        let other = |e: crate::observe::ObserveError| match e {
            crate::observe::ObserveError::PermissionDenied { .. } => {
                fail(ErrorKind::PermissionDenied)
            }
            e => fail(ErrorKind::Other(e.to_string())),
        };
        let dir = ProcDir::open(&self.proc_root, pid)
            .map_err(other)?
            .ok_or_else(|| fail(ErrorKind::Gone))?;
        let stat = dir
            .stat()
            .map_err(other)?
            .ok_or_else(|| fail(ErrorKind::Gone))?;
        Ok(Identity {
            start_time: stat.start_time,
            kernel_thread: stat.is_kernel_thread(),
            session: stat.session,
        })
    }

    fn affinity(&self, pid: u32, tid: u32) -> Result<CpuSet, KernelError> {
        let fail = |kind| KernelError::new(Op::GetAffinity, pid, Some(tid), kind);
        let t = libc::pid_t::try_from(tid).map_err(|_| fail(ErrorKind::Invalid))?;
        // The kernel refuses (EINVAL) a buffer smaller than its own mask
        // (nr_cpu_ids bits, rounded up to words): grow until it fits.
        let mut words = 16usize; // 1024 CPUs, glibc's cpu_set_t
        loop {
            let mut buf = vec![0 as libc::c_ulong; words];
            let len = words * std::mem::size_of::<libc::c_ulong>();
            // SAFETY: `buf` is a live, writable allocation of exactly `len` bytes; the
            // kernel writes at most `len` bytes into it and returns how many it wrote.
            let r = unsafe { libc::syscall(libc::SYS_sched_getaffinity, t, len, buf.as_mut_ptr()) };
            if r >= 0 {
                let written = (r as usize).min(len) / std::mem::size_of::<libc::c_ulong>();
                buf.truncate(written);
                return Ok(ids_of(&buf).into());
            }
            let e = errno();
            if e == libc::EINVAL && words < MAX_MASK_WORDS {
                words *= 2;
                continue;
            }
            return Err(fail(ErrorKind::from_errno(e)));
        }
    }

    fn set_affinity(&self, pid: u32, tid: u32, cpus: &CpuSet) -> Result<(), KernelError> {
        let fail = |kind| KernelError::new(Op::SetAffinity, pid, Some(tid), kind);
        let t = libc::pid_t::try_from(tid).map_err(|_| fail(ErrorKind::Invalid))?;
        if cpus.is_empty() {
            return Err(fail(ErrorKind::Invalid));
        }
        let mask = mask_of(cpus, 1).ok_or_else(|| fail(ErrorKind::Invalid))?;
        let len = mask.len() * std::mem::size_of::<libc::c_ulong>();
        // SAFETY: `mask` is a live allocation of exactly `len` bytes that the kernel
        // only reads.
        let r = unsafe { libc::syscall(libc::SYS_sched_setaffinity, t, len, mask.as_ptr()) };
        if r < 0 {
            return Err(fail(ErrorKind::from_errno(errno())));
        }
        Ok(())
    }

    fn migrate_pages(&self, pid: u32, from: &[NodeId], to: &[NodeId]) -> Result<u64, KernelError> {
        let fail = |kind| KernelError::new(Op::MigratePages, pid, None, kind);
        let p = libc::pid_t::try_from(pid).map_err(|_| fail(ErrorKind::Invalid))?;
        let words = mask_of(from, 1)
            .zip(mask_of(to, 1))
            .map(|(a, b)| a.len().max(b.len()))
            .ok_or_else(|| fail(ErrorKind::Invalid))?;
        let (old, new) = match (mask_of(from, words), mask_of(to, words)) {
            (Some(a), Some(b)) => (a, b),
            _ => return Err(fail(ErrorKind::Invalid)),
        };
        // The kernel reads `maxnode - 1` bits (a historical off-by-one in get_nodes),
        // so one more than the bits we pass makes it read exactly our words.
        let maxnode = (words * WORD_BITS + 1) as libc::c_ulong;
        // SAFETY: `old` and `new` are live allocations of `words` unsigned longs each,
        // which is all the kernel reads for this `maxnode`; it writes to neither.
        let r = unsafe {
            libc::syscall(
                libc::SYS_migrate_pages,
                p,
                maxnode,
                old.as_ptr(),
                new.as_ptr(),
            )
        };
        if r < 0 {
            return Err(fail(ErrorKind::from_errno(errno())));
        }
        Ok(r as u64)
    }

    fn move_pages(
        &self,
        pid: u32,
        addrs: &[u64],
        nodes: &[NodeId],
    ) -> Result<Vec<i32>, KernelError> {
        move_pages_now(pid, addrs, nodes)
    }

    fn start_move_pages(
        &self,
        pid: u32,
        addrs: Vec<u64>,
        nodes: Vec<NodeId>,
        until: f64,
    ) -> Moving {
        let wait = self.wait_until(until);
        self.mover.start(Job { pid, addrs, nodes }, wait)
    }

    fn moving(&self, until: f64) -> Moving {
        self.mover.collect(self.wait_until(until))
    }

    fn regions(&self, pid: u32) -> Result<Vec<Region>, KernelError> {
        let fail = |kind| KernelError::new(Op::ReadRegions, pid, None, kind);
        let dir = self.proc_root.join(pid.to_string());
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name)).map_err(|e| fail(ErrorKind::from_io(&e)))
        };
        let maps = read("maps")?;
        let numa = read("numa_maps")?;
        Ok(super::regions::join(&maps, &numa))
    }

    fn mems_allowed(&self, pid: u32) -> Result<Vec<NodeId>, KernelError> {
        let fail = |kind| KernelError::new(Op::ReadMems, pid, None, kind);
        let dir = ProcDir::open(&self.proc_root, pid)
            .map_err(|e| fail(ErrorKind::Other(e.to_string())))?
            .ok_or_else(|| fail(ErrorKind::Gone))?;
        let status = dir
            .status()
            .map_err(|e| fail(ErrorKind::Other(e.to_string())))?
            .ok_or_else(|| fail(ErrorKind::Gone))?;
        status
            .mems_allowed
            .ok_or_else(|| fail(ErrorKind::Other("no Mems_allowed_list in status".into())))
    }

    fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// From the process's cgroup v2 path (`/proc/<pid>/cgroup`, line `0::`), the
    /// nearest `cpuset.cpus.effective` at or above it under /sys/fs/cgroup (a cgroup
    /// without the cpuset controller has the file at its nearest ancestor with it).
    /// `None` on cgroup v1 or where no such file is readable.
    fn cpuset_cpus(&self, pid: u32) -> Result<Option<CpuSet>, KernelError> {
        let path = self.proc_root.join(pid.to_string()).join("cgroup");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(KernelError::new(Op::ReadCpuset, pid, None, ErrorKind::Gone))
            }
            Err(_) => return Ok(None),
        };
        let Some(rel) = text.lines().find_map(|l| l.strip_prefix("0::")) else {
            return Ok(None);
        };
        let mut dir = Path::new(CGROUP_ROOT).join(rel.trim_start_matches('/'));
        loop {
            let file = dir.join("cpuset.cpus.effective");
            if let Ok(list) = std::fs::read_to_string(&file) {
                return Ok(CpuSet::parse(list.trim()).ok().filter(|c| !c.is_empty()));
            }
            if dir == Path::new(CGROUP_ROOT) || !dir.pop() {
                return Ok(None);
            }
        }
    }

    /// From `/proc/<pid>/task/<tid>/children` (CONFIG_PROC_CHILDREN): one small read
    /// per thread, where walking all of /proc for parents would read every process.
    fn children(&self, pid: u32) -> Result<Vec<u32>, KernelError> {
        let fail =
            |e: &io::Error| KernelError::new(Op::ListChildren, pid, None, ErrorKind::from_io(e));
        let mut kids = Vec::new();
        for tid in self.threads(pid)? {
            let path = self
                .proc_root
                .join(pid.to_string())
                .join("task")
                .join(tid.to_string())
                .join("children");
            match std::fs::read_to_string(&path) {
                Ok(text) => kids.extend(
                    text.split_whitespace()
                        .filter_map(|t| t.parse::<u32>().ok()),
                ),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(fail(&e)),
            }
        }
        kids.sort_unstable();
        kids.dedup();
        Ok(kids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_round_trip() {
        let m = mask_of(&[0, 3, 64, 130], 1).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(ids_of(&m), vec![0, 3, 64, 130]);
        assert_eq!(mask_of(&[1], 4).unwrap().len(), 4);
        assert!(mask_of(&[u32::MAX], 1).is_none());
    }

    #[test]
    fn errnos_sort_into_kinds() {
        assert_eq!(ErrorKind::from_errno(libc::ESRCH), ErrorKind::Gone);
        // EINVAL from move_pages means "gone" only where the memory is.
        assert!(!memory_gone(Path::new("/proc"), std::process::id()));
        let dir = tempfile::tempdir().expect("tmp");
        assert!(memory_gone(dir.path(), 4242), "no such process");
        std::fs::create_dir_all(dir.path().join("4242")).expect("mkdir");
        std::fs::write(dir.path().join("4242/statm"), "0 0 0 0 0 0 0\n").expect("statm");
        assert!(memory_gone(dir.path(), 4242), "exiting: no mm");
        assert_eq!(ErrorKind::from_errno(libc::ENOENT), ErrorKind::Gone);
        assert_eq!(
            ErrorKind::from_errno(libc::EPERM),
            ErrorKind::PermissionDenied
        );
        assert_eq!(ErrorKind::from_errno(libc::EINVAL), ErrorKind::Invalid);
        assert!(matches!(
            ErrorKind::from_errno(libc::ENOMEM),
            ErrorKind::Other(_)
        ));
        let e = KernelError::new(Op::SetAffinity, 5, Some(6), ErrorKind::Invalid);
        assert_eq!(
            e.to_string(),
            "sched_setaffinity on pid 5 tid 6: invalid argument (EINVAL)"
        );
    }

    #[test]
    fn reads_own_affinity_and_identity() {
        let k = LinuxKernel::new();
        let me = std::process::id();
        let cpus = k.affinity(me, me).unwrap();
        assert!(!cpus.is_empty());
        let tids = k.threads(me).unwrap();
        assert!(tids.contains(&me));
        let id = k.identity(me).unwrap();
        assert!(!id.kernel_thread);
        assert!(k.identity(u32::MAX >> 1).unwrap_err().is_gone());
    }

    #[test]
    fn page_migration_syscalls_accept_our_masks() {
        // Node 0 exists on every Linux machine: moving our own pages from it to it is
        // a no-op that still exercises the mask layout the kernel reads.
        let k = LinuxKernel::new();
        let me = std::process::id();
        match k.migrate_pages(me, &[0], &[0]) {
            Ok(left) => assert_eq!(left, 0),
            // Kernels built without CONFIG_NUMA.
            Err(e) => assert!(matches!(e.kind, ErrorKind::Other(_)), "{e}"),
        }
        let page = Box::new([0u8; 4096]);
        let addr = (page.as_ptr() as u64) & !4095;
        if let Ok(status) = k.move_pages(me, &[addr], &[0]) {
            assert_eq!(status.len(), 1);
        }
        assert_eq!(
            k.move_pages(me, &[1], &[]).unwrap_err().kind,
            ErrorKind::Invalid
        );
    }
}
