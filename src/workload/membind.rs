//! Binding the workload's memory to one node, so a test can create a process whose pages
//! are all in a known place and then watch what the scheduler does about it.
//!
//! The policy is set with `set_mempolicy(MPOL_BIND)` on the main thread *before* any
//! worker is spawned: the policy is per thread and inherited by threads created later,
//! and `/proc/<pid>/numa_maps` shows the main thread's policy. Pages only get a node when
//! first written, so [`first_touch`] writes every page right after allocation.

use anyhow::{bail, Context};

use crate::topology::{NodeId, Topology};

/// `MPOL_DEFAULT` and `MPOL_BIND` from `<linux/mempolicy.h>` (not exported by the libc
/// crate).
const MPOL_DEFAULT: libc::c_int = 0;
const MPOL_BIND: libc::c_int = 2;

/// Drops this thread's memory policy (back to `MPOL_DEFAULT`, allocate where it runs).
/// After `--touch-node` has placed the pages, this leaves a process whose memory sits on
/// one node with no policy saying it must: what a program that first ran there and was
/// moved looks like, and what a scheduler may migrate.
pub fn unbind() -> anyhow::Result<()> {
    // SAFETY: with MPOL_DEFAULT the kernel reads no mask (null, maxnode 0).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            MPOL_DEFAULT,
            std::ptr::null::<libc::c_ulong>(),
            0 as libc::c_ulong,
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        return Err(err).context("--touch-node: set_mempolicy(MPOL_DEFAULT)");
    }
    Ok(())
}

/// Binds all future allocations of this thread (and threads it spawns) to `node`.
/// The node must exist in `topo`; the kernel additionally refuses nodes without memory.
pub fn bind_to_node(topo: &Topology, node: NodeId, flag: &str) -> anyhow::Result<()> {
    if topo.node_index(node).is_none() {
        let have: Vec<String> = topo.nodes().iter().map(|n| n.id.to_string()).collect();
        bail!(
            "{flag} {node}: no such NUMA node (this machine has node(s) {})",
            have.join(", ")
        );
    }
    let bits = libc::c_ulong::BITS as usize;
    let mut mask: Vec<libc::c_ulong> = vec![0; node as usize / bits + 1];
    mask[node as usize / bits] |= 1 << (node as usize % bits);
    // The kernel drops one from maxnode (a historical off-by-one that libnuma also
    // compensates for), so pass one more than the mask's bit count; it then reads exactly
    // `mask.len()` words.
    let maxnode = (mask.len() * bits + 1) as libc::c_ulong;
    // SAFETY: set_mempolicy reads `mask.len()` words from a live, properly aligned
    // buffer (see maxnode above) and touches no other memory of ours.
    let rc = unsafe { libc::syscall(libc::SYS_set_mempolicy, MPOL_BIND, mask.as_ptr(), maxnode) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        return Err(err).with_context(|| format!("{flag} {node}: set_mempolicy(MPOL_BIND)"));
    }
    Ok(())
}

/// Writes one value (back) in every page of `buf`, so that each page is faulted in now,
/// under the current memory policy, rather than lazily wherever the thread happens to run
/// later. Zeroed allocations in particular come from untouched `mmap` pages, and a plain
/// fill of a value the compiler can prove unchanged could be elided; `black_box` cannot.
pub fn first_touch(buf: &mut [f64]) {
    let page = page_size() / std::mem::size_of::<f64>();
    for x in buf.iter_mut().step_by(page.max(1)) {
        *x = std::hint::black_box(*x);
    }
}

fn page_size() -> usize {
    usize::try_from(procfs::page_size()).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology;

    #[test]
    fn unknown_node_is_a_clear_error_before_any_syscall() {
        let topo = topology::machine("1n:1l:2c:1t").expect("spec");
        let err = bind_to_node(&topo, 7, "--membind").expect_err("node 7 does not exist");
        let msg = format!("{err:#}");
        assert!(msg.contains("no such NUMA node"), "{msg}");
        assert!(msg.contains("node(s) 0"), "{msg}");
    }

    #[test]
    fn first_touch_keeps_the_values() {
        let mut v: Vec<f64> = (0..10_000).map(f64::from).collect();
        let before = v.clone();
        first_touch(&mut v);
        assert_eq!(v, before);
    }
}
