//! The few lines of `/proc/<pid>/status` placement needs.
//!
//! procfs's `ProcStatus` insists on some thirty fields (Uid, SigQ, CapBnd, ...) and fails
//! the process when one is missing; we need five and parse them here, so a kernel that
//! drops or renames an unrelated line costs nothing.

use std::path::Path;

use super::error::ObserveError;
use numasched_model::topology::{cpulist, NodeId};
use numasched_model::CpuSet;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcStatus {
    pub ppid: Option<u32>,
    pub threads: Option<u32>,
    /// The CPUs its main thread may run on (other threads may differ; see `proc`).
    pub cpus_allowed: Option<CpuSet>,
    pub mems_allowed: Option<Vec<NodeId>>,
    /// `Kthread:` (Linux 6.4+); older kernels only say so through the stat flags.
    pub kthread: Option<bool>,
}

pub fn parse(text: &str, path: &Path) -> Result<ProcStatus, ObserveError> {
    let mut s = ProcStatus::default();
    for (i, line) in text.lines().enumerate() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let bad = |what: String| ObserveError::parse(path, Some(i + 1), what);
        let int = |v: &str| {
            v.parse::<u32>()
                .map_err(|_| bad(format!("{key}: {v:?} is not a number")))
        };
        match key {
            "PPid" => s.ppid = Some(int(value)?),
            "Threads" => s.threads = Some(int(value)?),
            "Kthread" => s.kthread = Some(int(value)? != 0),
            "Cpus_allowed_list" => {
                s.cpus_allowed = Some(CpuSet::parse(value).map_err(|e| bad(format!("{key}: {e}")))?)
            }
            "Mems_allowed_list" => {
                s.mems_allowed =
                    Some(cpulist::parse(value).map_err(|e| bad(format!("{key}: {e}")))?)
            }
            _ => {}
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_we_use() {
        let t = "Name:\tbash\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t7\nPid:\t7\nPPid:\t1\n\
                 Threads:\t3\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1,4\n\
                 Mems_allowed:\t00000001\nMems_allowed_list:\t0\nKthread:\t0\n";
        let s = parse(t, Path::new("status")).unwrap();
        assert_eq!(s.ppid, Some(1));
        assert_eq!(s.threads, Some(3));
        assert_eq!(s.cpus_allowed, Some(vec![0, 1, 4].into()));
        assert_eq!(s.mems_allowed, Some(vec![0]));
        assert_eq!(s.kthread, Some(false));
    }

    #[test]
    fn missing_lines_are_unknown_and_bad_ones_are_located() {
        assert_eq!(parse("", Path::new("s")).unwrap(), ProcStatus::default());
        let e = parse(
            "Name: x\nCpus_allowed_list:\t3-1\n",
            Path::new("/proc/9/status"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("/proc/9/status:2: Cpus_allowed_list"), "{e}");
        let e = parse("Threads: many\n", Path::new("s"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("s:1: Threads"), "{e}");
    }
}
