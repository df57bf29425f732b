//! A Slurm task's GPUs (or, without GPUs, its NICs), as NUMA nodes: where to run it
//! first.
//!
//! A job given a GPU (`--gres=gpu:1`) feeds it from host memory over the PCIe link of
//! one socket; run on the other socket, every transfer crosses the interconnect. The
//! same holds for a NIC (`--gres=nic:1`, Slurm's gres/nic): its DMA lands in memory on
//! one socket. Slurm binds the allocation to the device's cores where the job fits in
//! them, but a job given more CPUs than that (or a whole node) is left to run anywhere
//! in it. So where a task's allocation has CPUs on its devices' nodes enough for its
//! threads, it is kept there ([`crate::jobs::Jobs::confine`]); gres.conf says which
//! node that is ([`numasched_linux::observe::gres`]). A task with both follows its
//! GPUs: they move far more data than a NIC.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use numasched_linux::observe::gres;
use numasched_linux::observe::slurm::TaskEnv;
use numasched_model::topology::{NodeId, Topology};

/// The kinds of device a task is run beside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GresKind {
    Gpu,
    Nic,
}

impl GresKind {
    /// gres.conf's `Name=`.
    pub fn name(self) -> &'static str {
        match self {
            GresKind::Gpu => "gpu",
            GresKind::Nic => "nic",
        }
    }

    /// As a person says it.
    pub fn label(self) -> &'static str {
        match self {
            GresKind::Gpu => "GPU",
            GresKind::Nic => "NIC",
        }
    }
}

/// What a task asked of the node's GPUs or NICs (from its environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GresAsk {
    pub kind: GresKind,
    /// Indices in gres.conf's order of that kind.
    pub indices: Vec<u32>,
    pub gres_conf: PathBuf,
    /// The Slurm node name gres.conf's `NodeName=` is matched against.
    pub node: String,
}

impl GresAsk {
    /// The GPUs of a task's environment, or its NICs where it was given no GPU, in
    /// the gres.conf beside its slurm.conf, for its node.
    pub fn of(env: &TaskEnv) -> Option<GresAsk> {
        let (kind, indices) = if !env.gpus.is_empty() {
            (GresKind::Gpu, &env.gpus)
        } else if !env.nics.is_empty() {
            (GresKind::Nic, &env.nics)
        } else {
            return None;
        };
        Some(GresAsk {
            kind,
            indices: indices.clone(),
            gres_conf: env.gres_conf(),
            node: env.node_name.clone().unwrap_or_else(host_name),
        })
    }
}

/// gres.conf files read in one pass, by path, node and kind: every task of a job reads
/// the same one.
#[derive(Default)]
pub struct GresFiles {
    read: HashMap<(PathBuf, String, GresKind), Result<Vec<gres::Device>, String>>,
}

/// Longest gres.conf read: a site's is a few lines per GPU.
const MAX_GRES_CONF: u64 = 1 << 20;

impl GresFiles {
    /// The nodes of `ask`'s devices on `topo`, ascending; `Err` says why none is known
    /// (a gres.conf that cannot be read, a device it does not list or place).
    pub fn nodes(&mut self, topo: &Topology, ask: &GresAsk) -> Result<Vec<NodeId>, String> {
        let path = &ask.gres_conf;
        let label = ask.kind.label();
        let devices = self
            .read
            .entry((path.clone(), ask.node.clone(), ask.kind))
            .or_insert_with(|| read(path, &ask.node, ask.kind))
            .as_ref()
            .map_err(Clone::clone)?;
        let mut nodes = Vec::new();
        for &i in &ask.indices {
            let device = match ask.kind {
                // gres/nic names a NIC by the number its File= ends in (`mlx4_1` for
                // /dev/infiniband/uverbs1), a GPU by its place among the GPU lines.
                GresKind::Nic => devices
                    .iter()
                    .find(|d| d.file.as_deref().and_then(gres::trailing_number) == Some(i))
                    .or_else(|| devices.get(i as usize).filter(|d| d.file.is_none())),
                GresKind::Gpu => devices.get(i as usize),
            };
            let device = device.ok_or_else(|| {
                format!(
                    "{}: no {label} {i} for node {} (it lists {})",
                    path.display(),
                    ask.node,
                    devices.len()
                )
            })?;
            let node = gres::node_of(device, topo, Path::new("/sys")).ok_or_else(|| {
                format!(
                    "{}: {label} {i} has no Cores= and its device says no NUMA node",
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
fn read(path: &Path, node: &str, kind: GresKind) -> Result<Vec<gres::Device>, String> {
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
    let (devices, problems) = gres::devices(&text, node, kind.name());
    match problems.first() {
        Some(p) if devices.is_empty() => Err(format!("{}: {p}", path.display())),
        _ => Ok(devices),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::topology;

    #[test]
    fn a_tasks_devices_are_placed_by_gres_conf_and_problems_say_where() {
        let dir = tempfile::tempdir().expect("tmp");
        let conf = dir.path().join("gres.conf");
        std::fs::write(
            &conf,
            "Name=gpu File=/dev/nsgpu[0-1] Cores=0-1\nName=gpu File=/dev/nsgpu2 Cores=2-3\n\
             Name=nic File=/dev/nsnic3 Cores=2-3\n",
        )
        .expect("write");
        let t = topology::spec::parse("2n:1l:2c:1t").expect("spec");
        let ask = |indices: Vec<u32>, gres_conf: PathBuf| GresAsk {
            kind: GresKind::Gpu,
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
        // A NIC is named by its file's number: /dev/nsnic3 is NIC 3, on node 1.
        let nic = |i: u32| GresAsk {
            kind: GresKind::Nic,
            ..ask(vec![i], conf.clone())
        };
        assert_eq!(files.nodes(&t, &nic(3)), Ok(vec![1]));
        let e = files.nodes(&t, &nic(0)).expect_err("no NIC 0");
        assert!(e.contains("no NIC 0 for node n1 (it lists 1)"), "{e}");
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
