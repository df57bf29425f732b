//! NUMA hinting faults from `/proc/<pid>/sched`.
//!
//! With CONFIG_NUMA_BALANCING the kernel appends one line per online node
//! (`print_numa_stats()` in kernel/sched/debug.c):
//!
//! ```text
//! numa_faults node=0 task_private=12 task_shared=0 group_private=0 group_shared=0
//! ```
//!
//! The counts are a decaying sample of the pages the task touched on each node, taken
//! by the balancer's page-table scans; they stay at zero while `numa_balancing` is off.
//! Only the task's own (main thread's) faults are printed.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::ObserveError;
use numasched_model::topology::NodeId;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaFaults {
    pub task_private: u64,
    pub task_shared: u64,
    pub group_private: u64,
    pub group_shared: u64,
}

impl NumaFaults {
    pub fn task_total(&self) -> u64 {
        self.task_private.saturating_add(self.task_shared)
    }
}

/// Faults per node; empty when the kernel prints none (no NUMA balancing support).
pub fn parse(text: &str, path: &Path) -> Result<BTreeMap<NodeId, NumaFaults>, ObserveError> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("numa_faults ") else {
            continue;
        };
        let bad = |what: String| ObserveError::parse(path, Some(i + 1), what);
        let mut node = None;
        let mut f = NumaFaults::default();
        for tok in rest.split_ascii_whitespace() {
            let Some((key, value)) = tok.split_once('=') else {
                continue;
            };
            let slot = match key {
                "node" => {
                    node = Some(
                        value
                            .parse::<NodeId>()
                            .map_err(|_| bad(format!("node={value:?} is not a node id")))?,
                    );
                    continue;
                }
                "task_private" => &mut f.task_private,
                "task_shared" => &mut f.task_shared,
                "group_private" => &mut f.group_private,
                "group_shared" => &mut f.group_shared,
                _ => continue,
            };
            *slot = value
                .parse()
                .map_err(|_| bad(format!("{key}={value:?} is not a count")))?;
        }
        let node = node.ok_or_else(|| bad("numa_faults line without node=".into()))?;
        out.insert(node, f);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REAL: &str = "\
cat (7545, #threads: 1)
-------------------------------------------------------------------
se.exec_start                                :       7476797.599171
mm->numa_scan_seq                            :                    0
numa_preferred_nid                           :                   -1
total_numa_faults                            :                    0
current_node=0, numa_group_id=0
numa_faults node=0 task_private=10 task_shared=2 group_private=0 group_shared=0
numa_faults node=2 task_private=5 task_shared=0 group_private=7 group_shared=1
";

    #[test]
    fn reads_faults_per_node() {
        let f = parse(REAL, Path::new("sched")).unwrap();
        assert_eq!(f.keys().copied().collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(f[&0].task_total(), 12);
        assert_eq!(f[&2].group_private, 7);
        assert!(parse("policy : 0\n", Path::new("s")).unwrap().is_empty());
    }

    #[test]
    fn malformed_lines_are_located() {
        let e = parse(
            "x\nnuma_faults node=a task_private=1\n",
            Path::new("/proc/3/sched"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("/proc/3/sched:2: node="), "{e}");
        let e = parse("numa_faults task_private=1\n", Path::new("s"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("without node"), "{e}");
    }
}
