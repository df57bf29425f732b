//! Errors of the kernel seam: which operation on which pid/tid failed, with the errno
//! sorted into what it means for the caller: [`ErrorKind::Gone`] (ESRCH/ENOENT, a
//! normal event: processes exit at any moment), [`ErrorKind::PermissionDenied`],
//! [`ErrorKind::Invalid`] (most often a cpuset that forbids every CPU asked for), or
//! anything else. Their own module because the page mover's thread reports them too,
//! and the kernel seam uses that thread.

use std::fmt;
use std::io;

use serde::{Deserialize, Serialize};

/// Which kernel operation an error comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    ListThreads,
    Identity,
    GetAffinity,
    SetAffinity,
    MigratePages,
    MovePages,
    ReadRegions,
    ReadMems,
    ReadCpuset,
    ListChildren,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::ListThreads => "list threads",
            Op::Identity => "read identity",
            Op::GetAffinity => "sched_getaffinity",
            Op::SetAffinity => "sched_setaffinity",
            Op::MigratePages => "migrate_pages",
            Op::MovePages => "move_pages",
            Op::ReadRegions => "read maps and numa_maps",
            Op::ReadMems => "read Mems_allowed",
            Op::ReadCpuset => "read its cpuset",
            Op::ListChildren => "list children",
        })
    }
}

/// What went wrong, in the terms the actuator acts on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// ESRCH/ENOENT: the process or thread exited. Normal; never worth more than a note.
    #[error("no such process (exited)")]
    Gone,
    /// EPERM: not allowed (capabilities, or another user's process without them).
    #[error("permission denied (EPERM)")]
    PermissionDenied,
    /// EINVAL: e.g. the CPU set is empty after the kernel intersects it with the
    /// process's cpuset, or names CPUs that do not exist.
    #[error("invalid argument (EINVAL)")]
    Invalid,
    /// EBUSY: the kernel will not move this task (a SCHED_DEADLINE task, whose
    /// affinity must cover its root domain, or a per-CPU kernel thread).
    #[error("the kernel refuses to move it (EBUSY; e.g. a SCHED_DEADLINE task)")]
    Busy,
    /// Anything else, as the OS or parser described it.
    #[error("{0}")]
    Other(String),
}

impl ErrorKind {
    pub fn from_errno(errno: i32) -> ErrorKind {
        match errno {
            libc::ESRCH | libc::ENOENT => ErrorKind::Gone,
            libc::EPERM => ErrorKind::PermissionDenied,
            libc::EINVAL => ErrorKind::Invalid,
            libc::EBUSY => ErrorKind::Busy,
            e => ErrorKind::Other(io::Error::from_raw_os_error(e).to_string()),
        }
    }

    pub fn from_io(err: &io::Error) -> ErrorKind {
        match err.raw_os_error() {
            Some(e) => ErrorKind::from_errno(e),
            None if err.kind() == io::ErrorKind::NotFound => ErrorKind::Gone,
            None if err.kind() == io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
            None => ErrorKind::Other(err.to_string()),
        }
    }
}

/// A failed kernel operation: which one, on what, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{op} on {}: {kind}", target(*pid, *tid))]
pub struct KernelError {
    pub op: Op,
    pub pid: u32,
    /// The thread, for per-thread operations.
    pub tid: Option<u32>,
    pub kind: ErrorKind,
}

fn target(pid: u32, tid: Option<u32>) -> String {
    match tid {
        Some(t) if t != pid => format!("pid {pid} tid {t}"),
        _ => format!("pid {pid}"),
    }
}

impl KernelError {
    pub fn new(op: Op, pid: u32, tid: Option<u32>, kind: ErrorKind) -> KernelError {
        KernelError { op, pid, tid, kind }
    }

    pub fn is_gone(&self) -> bool {
        self.kind == ErrorKind::Gone
    }

    /// The kernel refuses this change for this task, and would again next epoch
    /// (EBUSY, EINVAL): retrying only repeats the failure.
    pub fn is_refusal(&self) -> bool {
        matches!(self.kind, ErrorKind::Busy | ErrorKind::Invalid)
    }
}
