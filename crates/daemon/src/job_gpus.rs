//! A Slurm task's GPUs, as NUMA nodes: where to run it first.
//!
//! A job given a GPU (`--gres=gpu:1`) feeds it from host memory over the PCIe link of
//! one socket; run on the other socket, every transfer crosses the interconnect. Slurm
//! binds the allocation to the GPU's cores where the job fits in them, but a job given
//! more CPUs than that (or a whole node) is left to run anywhere in it. So where a
//! task's allocation has CPUs on its GPUs' nodes enough for its threads, it is kept
//! there ([`crate::jobs::Jobs::confine`]); gres.conf says which node that is
//! ([`numasched_linux::observe::gres`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use numasched_linux::observe::gres;
use numasched_model::topology::{NodeId, Topology};

/// What a task asked of the node's GPUs (from its environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuAsk {
    /// Indices in gres.conf's order.
    pub indices: Vec<u32>,
    pub gres_conf: PathBuf,
    /// The Slurm node name gres.conf's `NodeName=` is matched against.
    pub node: String,
}

/// gres.conf files read in one pass, by path: every task of a job reads the same one.
#[derive(Default)]
pub struct GresFiles {
    read: HashMap<(PathBuf, String), Result<Vec<gres::Gpu>, String>>,
}

/// Longest gres.conf read: a site's is a few lines per GPU.
const MAX_GRES_CONF: u64 = 1 << 20;

impl GresFiles {
    /// The nodes of `ask`'s GPUs on `topo`, ascending; `Err` says why none is known
    /// (a gres.conf that cannot be read, a GPU it does not list or place).
    pub fn nodes(&mut self, topo: &Topology, ask: &GpuAsk) -> Result<Vec<NodeId>, String> {
        let path = &ask.gres_conf;
        let gpus = self
            .read
            .entry((path.clone(), ask.node.clone()))
            .or_insert_with(|| read(path, &ask.node))
            .as_ref()
            .map_err(Clone::clone)?;
        let mut nodes = Vec::new();
        for &i in &ask.indices {
            let gpu = gpus.get(i as usize).ok_or_else(|| {
                format!(
                    "{}: no GPU {i} for node {} (it lists {})",
                    path.display(),
                    ask.node,
                    gpus.len()
                )
            })?;
            let node = gres::node_of(gpu, topo, Path::new("/sys")).ok_or_else(|| {
                format!(
                    "{}: GPU {i} has no Cores= and its device says no NUMA node",
                    path.display()
                )
            })?;
            nodes.push(node);
        }
        nodes.sort_unstable();
        nodes.dedup();
        Ok(nodes)
    }
}

/// This host's name up to its first dot, as Slurm names a node by default: what
/// gres.conf's `NodeName=` is matched against when the task's environment does not
/// say (`SLURMD_NODENAME`).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().split('.').next().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// Reads gres.conf, if root (or this daemon's user) owns it and nobody else may write
/// it: its path comes from a task's environment (`SLURM_CONF`), which the job's user
/// chooses, and the daemon must not place by a file that user wrote.
fn read(path: &Path, node: &str) -> Result<Vec<gres::Gpu>, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let me = nix::unistd::geteuid().as_raw();
    if (meta.uid() != 0 && meta.uid() != me) || meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{}: owned by uid {} with mode {:o}; a gres.conf must be root's and \
             writable by no one else",
            path.display(),
            meta.uid(),
            meta.mode() & 0o7777
        ));
    }
    let text = numasched_model::files::read_text(path, MAX_GRES_CONF, "gres.conf")
        .map_err(|e| e.to_string())?;
    let (gpus, problems) = gres::gpus(&text, node);
    match problems.first() {
        Some(p) if gpus.is_empty() => Err(format!("{}: {p}", path.display())),
        _ => Ok(gpus),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::topology;

    #[test]
    fn a_tasks_gpus_are_placed_by_gres_conf_and_problems_say_where() {
        let dir = tempfile::tempdir().expect("tmp");
        let conf = dir.path().join("gres.conf");
        std::fs::write(
            &conf,
            "Name=gpu File=/dev/nsgpu[0-1] Cores=0-1\nName=gpu File=/dev/nsgpu2 Cores=2-3\n",
        )
        .expect("write");
        let t = topology::spec::parse("2n:1l:2c:1t").expect("spec");
        let ask = |indices: Vec<u32>, gres_conf: PathBuf| GpuAsk {
            indices,
            gres_conf,
            node: "n1".into(),
        };
        let mut files = GresFiles::default();
        assert_eq!(files.nodes(&t, &ask(vec![2], conf.clone())), Ok(vec![1]));
        assert_eq!(
            files.nodes(&t, &ask(vec![1, 0, 2], conf.clone())),
            Ok(vec![0, 1])
        );
        let e = files
            .nodes(&t, &ask(vec![3], conf.clone()))
            .expect_err("no GPU 3");
        assert!(
            e.contains("gres.conf: no GPU 3 for node n1 (it lists 3)"),
            "{e}"
        );
        let missing = dir.path().join("none/gres.conf");
        let e = files
            .nodes(&t, &ask(vec![0], missing))
            .expect_err("no file");
        assert!(e.contains("none/gres.conf"), "{e}");
        // One that others may write is not believed.
        let open = dir.path().join("open/gres.conf");
        std::fs::create_dir_all(open.parent().expect("dir")).expect("mkdir");
        std::fs::write(&open, "Name=gpu File=/dev/nsgpu0 Cores=2-3\n").expect("write");
        std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .expect("chmod");
        let e = files
            .nodes(&t, &ask(vec![0], open))
            .expect_err("writable by all");
        assert!(e.contains("writable by no one else"), "{e}");
    }
}
