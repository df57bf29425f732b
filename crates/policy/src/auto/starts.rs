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
/// starts count them alike. Reasons are written for where the search ends, so the
/// start's own `why` is left as it was.
pub(super) fn kernel<'s>(local: &Layout<'s>) -> Layout<'s> {
    let snap = local.snapshot;
    let topo = local.topology();
    let mut k = local.clone();
    let mut movable: Vec<usize> = (0..k.cpus.len())
        .filter(|&i| local.llc_of(i).is_some())
        .collect();
    for &i in &movable {
        k.occ.remove(&k.cpus[i], snap.processes[i].cpu_demand);
    }
    movable.sort_by_key(|&i| snap.processes[i].pid);
    for i in movable {
        let p = &snap.processes[i];
        let cpus = least_loaded(&k.occ, &alloc::allowed(topo, p), k.cpus[i].len());
        k.occ.add(&cpus, p.cpu_demand);
        k.cpus[i] = cpus;
    }
    k
}
