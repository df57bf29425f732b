//! `numasched` SPANK plugin: lets a Slurm user choose how much the numasched
//! daemon may do to their job (`--numasched=off|advise|manage`), and tells the
//! daemon which pids belong to which job step.
//!
//! Two channels, on purpose:
//! * `NUMASCHED=<mode>` in every task's environment. The daemon reads it from
//!   `/proc/<pid>/environ`, so it works even if the daemon was down when the
//!   job started, and survives a daemon restart.
//! * A `job-task {...}` line per task start/exit on the daemon's control
//!   socket, so the daemon learns of a task at once instead of at its next
//!   /proc scan, together with the job id, step and allocation, which /proc
//!   does not tell. Best effort only: any failure is logged at debug level and
//!   the job runs as if the plugin were absent. The daemon answers a task's
//!   exit with what it did for the step; at the step's last task on the node
//!   the plugin writes that line to the job's stderr (and, with
//!   `admin_comment=yes`, into the job's AdminComment).
//!
//! plugstack.conf (use `optional`: a `required` plugin whose init fails stops
//! slurmd, and no job should depend on numasched):
//!
//! ```text
//! optional /usr/lib/x86_64-linux-gnu/slurm-wlm/libnumasched_spank.so socket=/run/numasched/numasched.sock
//! ```

pub mod admin;
pub mod config;
pub mod notify;
pub mod proto;
pub mod slurm;

#[cfg(not(test))]
mod plugin;
