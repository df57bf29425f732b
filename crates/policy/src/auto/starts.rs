//! Where `auto`'s search starts besides the maximum-local mapping. From that alone it
//! stops where no single step gains, even where the kernel's plain CPU balancing is
//! better by its own estimate; fair.c's `task_numa_migrate` likewise weighs every
//! candidate against leaving the task where the load balancer has it. So the search
//! also starts from that balancing, and the lower total estimate wins.

use crate::alloc;
use crate::linux::least_loaded;
use crate::maxlocal::Layout;

/// The kernel's own placement as a start: each process `local` keeps in one LLC is
/// placed again as the load balancer would, by CPU load alone, in pid order (least
/// loaded node, then LLC, then CPUs: [`crate::linux`]), with as many CPUs as `local`
/// gave it. The rest (groups wider than a cache) stay as `local` has them, so both
/// starts count them alike.
pub(super) fn kernel<'s>(local: &Layout<'s>) -> Layout<'s> {
    let snap = local.snapshot;
    let topo = local.topology();
    let mut k = local.clone();
    let mut movable: Vec<usize> = (0..k.cpus.len())
        .filter(|&i| local.llc_of(i).is_some())
        .collect();
    for &i in &movable {
        let demand = snap.processes[i].cpu_demand;
        let old = std::mem::take(&mut k.cpus[i]);
        k.occ.remove(&old, demand);
        k.cpus[i] = old;
    }
    movable.sort_by_key(|&i| snap.processes[i].pid);
    for i in movable {
        let p = &snap.processes[i];
        let size = k.cpus[i].len();
        let cpus = least_loaded(&k.occ, &alloc::allowed(topo, p), size);
        k.occ.add(&cpus, p.cpu_demand);
        let node = cpus.first().map(|&c| topo.nodes()[topo.cpus()[c].node].id);
        k.why[i] = match node {
            Some(n) => format!("node {n}, where CPU load alone puts it (the kernel's balancing)"),
            None => "no CPU allowed".to_string(),
        };
        k.cpus[i] = cpus;
    }
    k
}
