//! Where a Slurm job's GPUs and NICs are: `gres.conf`'s `Name=gpu` and `Name=nic`
//! lines, read so that a task can be run on its device's NUMA node first
//! (docs/slurm.md).
//!
//! Slurm tells a task which of the node's devices are its own (`SLURM_STEP_GPUS`,
//! `SLURM_JOB_GPUS`, and `SLURM_STEP_NICS`, `SLURM_JOB_NICS` from gres/nic: indices in
//! gres.conf's order of that name) but not where they sit; gres.conf does, with
//! `Cores=` (Slurm's abstract core indices, socket by socket, which is the order of
//! [`Topology::cores`]). A device without `Cores=` is placed by its `numa_node` in
//! sysfs, when its `File=` is a character device that sysfs knows.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use nix::sys::stat::{major, minor};
use numasched_model::topology::{cpulist, NodeId, Topology};

/// One device of gres.conf (a GPU, a NIC), in index order among those of its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub file: Option<String>,
    /// Slurm's abstract core indices, from `Cores=`.
    pub cores: Option<Vec<u32>>,
}

/// The devices named `kind` (`gpu`, `nic`; any case) of gres.conf's text for host
/// `host`, each `File=` expanded (`/dev/nvidia[0-3]`, `[0,2]`), lines for other nodes
/// (`NodeName=` not naming `host`) skipped. A line it cannot read is skipped with a
/// reason, so one typo does not hide every device. `AutoDetect=` lines say nothing of
/// where devices are.
pub fn devices(text: &str, host: &str, kind: &str) -> (Vec<Device>, Vec<String>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut name = None;
        let mut files: Vec<String> = Vec::new();
        let mut cores = None;
        let mut count: Option<usize> = None;
        let mut for_us = true;
        let mut bad = None;
        for word in line.split_whitespace() {
            let Some((k, v)) = word.split_once('=') else {
                continue;
            };
            match k.to_ascii_lowercase().as_str() {
                "name" => name = Some(v.to_ascii_lowercase()),
                "file" => match expand(v) {
                    Some(f) => files = f,
                    None => bad = Some(format!("File={v}")),
                },
                "cores" | "cpus" => match cpulist::parse(v) {
                    Ok(c) => cores = Some(c),
                    Err(e) => bad = Some(format!("{k}={v}: {e}")),
                },
                "count" => count = v.parse().ok(),
                "nodename" => for_us = names(v).iter().any(|h| h == host),
                _ => {}
            }
        }
        if !name
            .as_deref()
            .is_some_and(|n| n.eq_ignore_ascii_case(kind))
            || !for_us
        {
            continue;
        }
        if let Some(why) = bad {
            problems.push(format!("gres.conf line {}: {why}; line skipped", n + 1));
            continue;
        }
        if files.is_empty() {
            for _ in 0..count.unwrap_or(0) {
                out.push(Device {
                    file: None,
                    cores: cores.clone(),
                });
            }
        } else {
            out.extend(files.into_iter().map(|f| Device {
                file: Some(f),
                cores: cores.clone(),
            }));
        }
    }
    (out, problems)
}

/// `prefix[0-3,5]suffix` as its names; a name without brackets as itself.
fn expand(v: &str) -> Option<Vec<String>> {
    let Some(open) = v.find('[') else {
        return Some(vec![v.to_string()]);
    };
    let close = open + v[open..].find(']')?;
    let (pre, list, post) = (&v[..open], &v[open + 1..close], &v[close + 1..]);
    let width = list
        .split([',', '-'])
        .next()
        .filter(|s| s.starts_with('0') && s.len() > 1)
        .map_or(0, str::len);
    let nums = cpulist::parse(list).ok()?;
    Some(
        nums.into_iter()
            .map(|i| format!("{pre}{i:0width$}{post}"))
            .collect(),
    )
}

/// The host names of a `NodeName=` value: `a,b`, `n[1-4]`.
fn names(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in v.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&v[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&v[start..]);
    for p in parts {
        out.extend(expand(p).unwrap_or_else(|| vec![p.to_string()]));
    }
    out
}

/// The number a device's name ends in (`/dev/infiniband/uverbs1`, `mlx4_1`: 1): how
/// Slurm numbers a NIC, in gres.conf's `File=` and in `SLURM_*_NICS`.
pub fn trailing_number(name: &str) -> Option<u32> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    name[name.len() - digits..].parse().ok()
}

/// The NUMA node of `device` on `topo`: the node holding most of its `Cores=`, else the
/// `numa_node` sysfs (under `sysfs_root`) gives its character device.
pub fn node_of(device: &Device, topo: &Topology, sysfs_root: &Path) -> Option<NodeId> {
    if let Some(cores) = &device.cores {
        let mut per: std::collections::BTreeMap<NodeId, usize> = Default::default();
        for &k in cores {
            let Some(core) = topo.cores().get(k as usize) else {
                continue;
            };
            for &c in core.cpus.iter() {
                if let Some(cpu) = topo.cpu(c) {
                    *per.entry(topo.nodes()[cpu.node].id).or_default() += 1;
                }
            }
        }
        // Most CPUs; the lowest node on a tie.
        return per
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|(n, _)| n);
    }
    let meta = std::fs::metadata(device.file.as_ref()?).ok()?;
    if !meta.file_type().is_char_device() {
        return None;
    }
    let (major, minor) = (major(meta.rdev()), minor(meta.rdev()));
    let path = sysfs_root.join(format!("dev/char/{major}:{minor}/device/numa_node"));
    let node: i64 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
    let node = NodeId::try_from(node).ok()?;
    topo.node_index(node).map(|_| node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::topology;

    #[test]
    fn gpu_lines_are_read_in_order_with_their_cores() {
        let text = "# site GPUs\n\
                    AutoDetect=off\n\
                    Name=gpu Type=a100 File=/dev/nvidia[0-1] Cores=0-3\n\
                    NodeName=other Name=gpu File=/dev/nvidia9 Cores=0\n\
                    NodeName=n[1-2],x Name=gpu File=/dev/nvidia2 Cores=4-7 # socket 1\n\
                    Name=nic File=/dev/infiniband/uverbs0 Cores=4-7\n\
                    Name=GPU Count=1\n";
        let (g, problems) = devices(text, "n2", "gpu");
        assert!(problems.is_empty(), "{problems:?}");
        let files: Vec<Option<&str>> = g.iter().map(|g| g.file.as_deref()).collect();
        assert_eq!(
            files,
            [
                Some("/dev/nvidia0"),
                Some("/dev/nvidia1"),
                Some("/dev/nvidia2"),
                None
            ]
        );
        assert_eq!(g[1].cores.as_deref(), Some(&[0, 1, 2, 3][..]));
        assert_eq!(g[2].cores.as_deref(), Some(&[4, 5, 6, 7][..]));
        assert_eq!(g[3].cores, None);
        let (nics, problems) = devices(text, "n2", "nic");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(nics.len(), 1);
        assert_eq!(nics[0].file.as_deref(), Some("/dev/infiniband/uverbs0"));
        assert_eq!(nics[0].cores.as_deref(), Some(&[4, 5, 6, 7][..]));
    }

    #[test]
    fn a_bad_line_is_skipped_and_said() {
        let (g, problems) = devices(
            "Name=gpu File=/dev/a Cores=x\nName=gpu File=/dev/b\n",
            "h",
            "gpu",
        );
        assert_eq!(g.len(), 1);
        assert!(
            problems[0].starts_with("gres.conf line 1: Cores=x"),
            "{problems:?}"
        );
        assert_eq!(expand("/dev/nv[08-10]").expect("ok").len(), 3);
        assert_eq!(expand("/dev/nv[08-10]").expect("ok")[0], "/dev/nv08");
    }

    #[test]
    fn cores_give_the_node() {
        // 2 nodes × 4 cores × 2 threads: abstract core 5 is node 1's second core.
        let t = topology::spec::parse("2n:1l:4c:2t").expect("spec");
        let gpu = |c: &[u32]| Device {
            file: None,
            cores: Some(c.to_vec()),
        };
        let root = Path::new("/nonexistent");
        assert_eq!(node_of(&gpu(&[5]), &t, root), Some(1));
        assert_eq!(node_of(&gpu(&[0, 1, 2, 3]), &t, root), Some(0));
        assert_eq!(
            node_of(&gpu(&[3, 4]), &t, root),
            Some(0),
            "a tie: the lower"
        );
        assert_eq!(node_of(&gpu(&[99]), &t, root), None);
        assert_eq!(
            node_of(
                &Device {
                    file: Some("/dev/null".into()),
                    cores: None
                },
                &t,
                root
            ),
            None,
            "no numa_node for its device"
        );
    }
}
