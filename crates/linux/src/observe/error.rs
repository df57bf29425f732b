//! One error type for the observe layer. Every variant that comes from a file carries
//! its path (and the line, where there is one), so a single log line tells the operator
//! what to look at, as `below` does for its procfs reader.

use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: io::Error },
    /// Not fatal for a scan: an unprivileged daemon cannot read other users' numa_maps.
    #[error("{path}: permission denied")]
    PermissionDenied { path: PathBuf },
    #[error("{}: {what}", located(path, *line))]
    Parse {
        path: PathBuf,
        /// 1-based; `None` when the problem is the file as a whole.
        line: Option<usize>,
        what: String,
    },
}

fn located(path: &Path, line: Option<usize>) -> String {
    match line {
        Some(l) => format!("{}:{l}", path.display()),
        None => path.display().to_string(),
    }
}

impl ObserveError {
    pub fn path(&self) -> &Path {
        match self {
            ObserveError::Io { path, .. }
            | ObserveError::PermissionDenied { path }
            | ObserveError::Parse { path, .. } => path,
        }
    }

    pub(crate) fn parse(path: &Path, line: Option<usize>, what: impl Into<String>) -> Self {
        ObserveError::Parse {
            path: path.to_path_buf(),
            line,
            what: what.into(),
        }
    }
}

/// What an I/O failure on a /proc file means for the process behind it.
pub(crate) enum IoOutcome {
    /// ENOENT or ESRCH: the process (or thread) exited; a normal event mid-scan.
    Gone,
    Failed(ObserveError),
}

/// Sorts an I/O error into "the process went away" and real failures.
pub(crate) fn classify(path: &Path, err: io::Error) -> IoOutcome {
    if err.kind() == io::ErrorKind::NotFound || err.raw_os_error() == Some(libc::ESRCH) {
        IoOutcome::Gone
    } else if err.kind() == io::ErrorKind::PermissionDenied {
        IoOutcome::Failed(ObserveError::PermissionDenied {
            path: path.to_path_buf(),
        })
    } else {
        IoOutcome::Failed(ObserveError::Io {
            path: path.to_path_buf(),
            err,
        })
    }
}
