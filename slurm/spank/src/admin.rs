//! The job's AdminComment, set with `scontrol update` where the site asked for
//! it (`admin_comment=yes`): what an administrator reads in `scontrol show job`
//! and, with accounting, `sacct -o AdminComment`.
//!
//! Through scontrol rather than libslurm's `slurm_update_job`: its message
//! struct changes from release to release, and a plugin built against one
//! layout would write garbage into another's. slurmstepd runs as root, whom
//! slurmctld lets update any job.

use std::fmt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// How long scontrol may take before it is killed: the step is over, but
/// slurmstepd does not finish it while we wait.
const PATIENCE: Duration = Duration::from_secs(3);

#[derive(Debug)]
pub enum CommentError {
    Spawn(std::io::Error),
    Failed(String),
    Timeout,
}

impl fmt::Display for CommentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommentError::Spawn(e) => write!(f, "cannot run scontrol: {e}"),
            CommentError::Failed(why) => write!(f, "scontrol update failed: {why}"),
            CommentError::Timeout => {
                write!(
                    f,
                    "scontrol took more than {} s; killed",
                    PATIENCE.as_secs()
                )
            }
        }
    }
}

/// The scontrol to run: Debian's, else the first on slurmstepd's PATH.
fn scontrol() -> &'static str {
    if Path::new("/usr/bin/scontrol").exists() {
        "/usr/bin/scontrol"
    } else {
        "scontrol"
    }
}

/// Sets job `job`'s AdminComment to `comment` (one argument to scontrol, so no
/// shell ever sees it).
pub fn set_comment(job: u32, comment: &str) -> Result<(), CommentError> {
    let mut child = Command::new(scontrol())
        .arg("update")
        .arg(format!("JobId={job}"))
        .arg(format!("AdminComment={comment}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(CommentError::Spawn)?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                let err = err.trim();
                return Err(CommentError::Failed(if err.is_empty() {
                    status.to_string()
                } else {
                    err.to_string()
                }));
            }
            Ok(None) if start.elapsed() < PATIENCE => sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(CommentError::Timeout);
            }
            Err(e) => return Err(CommentError::Spawn(e)),
        }
    }
}
