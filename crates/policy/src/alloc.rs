//! CPU occupancy shared by every policy: which CPUs are taken and how heavily, so each
//! policy only decides *where* (which node, which LLC) and this decides *which CPUs*.
//!
//! The rule is the one the kernel's idle selection follows: an idle core beats an idle
//! SMT sibling of a busy core, which beats a loaded CPU; ties go to the lowest CPU
//! number so plans are deterministic.

use numasched_model::snapshot::{Process, Snapshot};
use numasched_model::topology::Topology;
use numasched_model::CpuSet;

/// Load below which a CPU counts as free.
const FREE: f64 = 1e-9;

/// Slowdown of each of two busy threads sharing one physical core (SMT), against each
/// alone on a core: both run at about 60% of their solo speed, i.e. the pair gets about
/// 1.2 times the throughput of one thread, the usual figure for Hyper-Threading
/// (15-30% more throughput).
pub const SMT_SLOWDOWN: f64 = 1.0 / 0.6 - 1.0;

#[derive(Debug, Clone)]
pub struct Occupancy<'t> {
    topo: &'t Topology,
    cpu_load: Vec<f64>,
    core_load: Vec<f64>,
    /// Free CPUs per LLC, kept in step with `cpu_load` so "is there room here?" is O(1).
    free_per_llc: Vec<usize>,
    /// Idle physical cores per LLC, kept in step with `core_load` likewise.
    idle_cores_per_llc: Vec<usize>,
    /// Load per LLC, the sum of its CPUs' `cpu_load`, likewise.
    load_per_llc: Vec<f64>,
}

impl<'t> Occupancy<'t> {
    pub fn new(topo: &'t Topology) -> Occupancy<'t> {
        Occupancy {
            topo,
            cpu_load: vec![0.0; topo.num_cpus()],
            core_load: vec![0.0; topo.cores().len()],
            free_per_llc: (0..topo.llcs().len())
                .map(|l| topo.llc_cpu_indices(l).len())
                .collect(),
            idle_cores_per_llc: (0..topo.llcs().len())
                .map(|l| {
                    let mut cores: Vec<usize> = topo
                        .llc_cpu_indices(l)
                        .iter()
                        .map(|&c| topo.cpus()[c].core)
                        .collect();
                    cores.sort_unstable();
                    cores.dedup();
                    cores.len()
                })
                .collect(),
            load_per_llc: vec![0.0; topo.llcs().len()],
        }
    }

    /// The machine as a snapshot leaves it to its processes: each CPU others' work
    /// holds (`others_taken`) carries a CPU's worth of load, so that no policy counts
    /// it as room. (A node filled with pinned unmanaged work was "free" to every
    /// policy, which confined a managed process there to share it.)
    pub fn for_snapshot(snapshot: &'t Snapshot) -> Occupancy<'t> {
        let topo = &snapshot.topology;
        let mut occ = Occupancy::new(topo);
        let taken: Vec<usize> = snapshot
            .others_taken
            .iter()
            .filter_map(|&c| topo.cpu(c).map(|c| c.index))
            .collect();
        for c in taken {
            occ.add(&[c], 1.0);
        }
        occ
    }

    pub fn topology(&self) -> &'t Topology {
        self.topo
    }

    /// Demand placed on a CPU (by index).
    pub fn load(&self, cpu: usize) -> f64 {
        self.cpu_load[cpu]
    }

    pub fn is_free(&self, cpu: usize) -> bool {
        self.cpu_load[cpu] < FREE
    }

    /// Free CPUs in LLC `llc`.
    pub fn free_in_llc(&self, llc: usize) -> usize {
        self.free_per_llc[llc]
    }

    /// Demand placed on LLC `llc`, in O(1).
    pub fn llc_load(&self, llc: usize) -> f64 {
        self.load_per_llc[llc]
    }

    /// Physical cores with nothing on any of their CPUs, counted among `candidates`:
    /// room where a thread runs without sharing a pipeline. A free SMT sibling of a busy
    /// core is not such room (both threads then run at roughly 60% speed).
    pub fn idle_cores(&self, candidates: impl IntoIterator<Item = usize>) -> usize {
        let mut seen: Vec<usize> = Vec::new();
        for c in candidates {
            let core = self.topo.cpus()[c].core;
            if self.core_load[core] < FREE && !seen.contains(&core) {
                seen.push(core);
            }
        }
        seen.len()
    }

    /// How much of a process's work on `cpus` (carrying `demand` spread evenly, as
    /// [`add`](Self::add) put it) runs beside other work on the same physical cores: per
    /// CPU, the smaller of its own load and the rest of its core's load, summed. 1.0 for
    /// one busy thread beside another busy thread.
    pub fn core_overlap(&self, cpus: &[usize], demand: f64) -> f64 {
        if cpus.is_empty() {
            return 0.0;
        }
        let own = demand.abs().max(FREE * 10.0) / cpus.len() as f64;
        cpus.iter()
            .map(|&c| {
                let core = self.topo.cpus()[c].core;
                let mine = own
                    * cpus
                        .iter()
                        .filter(|&&d| self.topo.cpus()[d].core == core)
                        .count() as f64;
                let others = (self.core_load[core] - mine).max(0.0);
                own.min(others)
            })
            .sum()
    }

    /// Idle physical cores in LLC `llc`: [`idle_cores`](Self::idle_cores) of all its
    /// CPUs, in O(1) (the planners ask it for every process and LLC they try).
    pub fn idle_cores_in_llc(&self, llc: usize) -> usize {
        self.idle_cores_per_llc[llc]
    }

    /// Free CPUs among `candidates`.
    pub fn free_count(&self, candidates: impl IntoIterator<Item = usize>) -> usize {
        candidates.into_iter().filter(|&c| self.is_free(c)).count()
    }

    /// Chooses `n` CPUs among `candidates` (indices), least loaded first, spreading over
    /// physical cores. Returns fewer when there are fewer candidates.
    pub fn pick(&self, candidates: &[usize], n: usize) -> Vec<usize> {
        let mut cpu_load: Vec<(usize, f64)> =
            candidates.iter().map(|&c| (c, self.cpu_load[c])).collect();
        let mut core_extra: Vec<(usize, f64)> = Vec::new();
        let mut chosen = Vec::with_capacity(n.min(candidates.len()));
        while chosen.len() < n {
            let mut best: Option<(usize, (f64, f64, usize))> = None;
            for (slot, &(c, load)) in cpu_load.iter().enumerate() {
                if chosen.contains(&c) {
                    continue;
                }
                let core = self.topo.cpus()[c].core;
                let extra: f64 = core_extra
                    .iter()
                    .filter(|(k, _)| *k == core)
                    .map(|(_, v)| v)
                    .sum();
                let key = (load, self.core_load[core] + extra, c);
                if best.is_none_or(|(_, b)| key < b) {
                    best = Some((slot, key));
                }
            }
            let Some((slot, _)) = best else { break };
            let c = cpu_load[slot].0;
            chosen.push(c);
            cpu_load[slot].1 += 1.0;
            core_extra.push((self.topo.cpus()[c].core, 1.0));
        }
        chosen
    }

    /// Records `demand` CPUs' worth of work spread evenly over `cpus`.
    pub fn add(&mut self, cpus: &[usize], demand: f64) {
        self.adjust(cpus, demand);
    }

    pub fn remove(&mut self, cpus: &[usize], demand: f64) {
        self.adjust(cpus, -demand);
    }

    fn adjust(&mut self, cpus: &[usize], demand: f64) {
        if cpus.is_empty() {
            return;
        }
        // A busy process occupies its CPUs even when its measured demand is tiny;
        // otherwise two "idle" processes could be stacked while cores sit empty.
        let share = demand.signum() * demand.abs().max(FREE * 10.0) / cpus.len() as f64;
        for &c in cpus {
            let was_free = self.is_free(c);
            let before = self.cpu_load[c];
            self.cpu_load[c] = (before + share).max(0.0);
            let llc = self.topo.cpus()[c].llc;
            self.load_per_llc[llc] += self.cpu_load[c] - before;
            match (was_free, self.is_free(c)) {
                (true, false) => self.free_per_llc[llc] -= 1,
                (false, true) => self.free_per_llc[llc] += 1,
                _ => {}
            }
            let core = self.topo.cpus()[c].core;
            let core_was_idle = self.core_load[core] < FREE;
            self.core_load[core] = (self.core_load[core] + share).max(0.0);
            match (core_was_idle, self.core_load[core] < FREE) {
                (true, false) => self.idle_cores_per_llc[llc] -= 1,
                (false, true) => self.idle_cores_per_llc[llc] += 1,
                _ => {}
            }
        }
    }
}

/// CPU indices a process may use: its foreign pin, or the whole machine.
pub fn allowed(topo: &Topology, p: &Process) -> Vec<usize> {
    match &p.allowed_cpus {
        Some(ids) => indices(topo, ids),
        None => (0..topo.num_cpus()).collect(),
    }
}

/// CPU indices of the CPU ids that exist, ascending and without repeats.
pub fn indices(topo: &Topology, ids: &[u32]) -> Vec<usize> {
    let mut v: Vec<usize> = ids
        .iter()
        .filter_map(|&c| topo.cpu(c))
        .map(|c| c.index)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The same set as [`allowed`], as a membership test that costs nothing for the common
/// unpinned process (hot loops filter every LLC's CPUs through it).
#[derive(Debug, Clone)]
pub struct AllowedMask(Option<Vec<bool>>);

impl AllowedMask {
    pub fn of(topo: &Topology, p: &Process) -> AllowedMask {
        AllowedMask(p.allowed_cpus.as_ref().map(|_| {
            let mut m = vec![false; topo.num_cpus()];
            for c in allowed(topo, p) {
                m[c] = true;
            }
            m
        }))
    }

    pub fn is_all(&self) -> bool {
        self.0.is_none()
    }

    pub fn contains(&self, cpu: usize) -> bool {
        self.0.as_ref().is_none_or(|m| m[cpu])
    }

    /// The allowed members of `cpus`.
    pub fn filter<'a>(&'a self, cpus: &'a [usize]) -> impl Iterator<Item = usize> + 'a {
        cpus.iter().copied().filter(move |&c| self.contains(c))
    }
}

/// Converts CPU indices back to Linux CPU ids.
pub fn ids(topo: &Topology, cpus: &[usize]) -> CpuSet {
    cpus.iter().map(|&c| topo.cpus()[c].id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::topology;

    #[test]
    fn idle_cores_before_smt_siblings() {
        let t = topology::machine("1n:1l:2c:2t").unwrap(); // cores {0,2} {1,3}
        let mut occ = Occupancy::new(&t);
        let all: Vec<usize> = (0..4).collect();
        let first = occ.pick(&all, 1);
        assert_eq!(ids(&t, &first), vec![0]);
        occ.add(&first, 1.0);
        // CPU 2 is idle but shares a core with 0; CPU 1 is on an idle core.
        assert_eq!(ids(&t, &occ.pick(&all, 1)), vec![1]);
        assert_eq!(ids(&t, &Occupancy::new(&t).pick(&all, 2)), vec![0, 1]);
    }

    /// The O(1) counts and load per LLC agree with counting, through adds and removes of every
    /// size (a process's share spread over CPUs of several cores and LLCs).
    #[test]
    fn the_idle_core_count_and_load_per_llc_keep_step() {
        let t = topology::machine("2n:2l:2c:2t").unwrap();
        let mut occ = Occupancy::new(&t);
        let check = |occ: &Occupancy| {
            for l in 0..t.llcs().len() {
                let counted = occ.idle_cores(t.llc_cpu_indices(l).iter().copied());
                assert_eq!(occ.idle_cores_in_llc(l), counted, "LLC {l}");
                let load: f64 = t.llc_cpu_indices(l).iter().map(|&c| occ.load(c)).sum();
                assert!(
                    (occ.llc_load(l) - load).abs() < 1e-9,
                    "LLC {l}: load {load}"
                );
            }
        };
        check(&occ);
        let mut placed: Vec<(Vec<usize>, f64)> = Vec::new();
        let mut x: u64 = 7;
        for step in 0..200 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if step % 3 == 2 && !placed.is_empty() {
                let (cpus, d) = placed.remove((x >> 33) as usize % placed.len());
                occ.remove(&cpus, d);
            } else {
                let n = 1 + (x >> 40) as usize % 3;
                let cpus: Vec<usize> = (0..n).map(|k| ((x >> (8 * k)) as usize) % 16).collect();
                let d = [0.0, 0.3, 1.0, 2.0][(x >> 20) as usize % 4];
                occ.add(&cpus, d);
                placed.push((cpus, d));
            }
            check(&occ);
        }
    }

    #[test]
    fn a_free_sibling_of_a_busy_core_is_not_an_idle_core() {
        let t = topology::machine("1n:1l:2c:2t").unwrap(); // cores {0,2} {1,3}
        let mut occ = Occupancy::new(&t);
        let all: Vec<usize> = (0..4).collect();
        assert_eq!(occ.idle_cores(all.iter().copied()), 2);
        occ.add(&[0], 1.0);
        assert_eq!(occ.free_count(all.iter().copied()), 3);
        assert_eq!(occ.idle_cores(all.iter().copied()), 1);
        assert_eq!(occ.idle_cores([2]), 0, "CPU 2's core is busy through CPU 0");
    }

    #[test]
    fn overcommit_goes_to_the_least_loaded() {
        let t = topology::machine("1n:1l:2c:1t").unwrap();
        let mut occ = Occupancy::new(&t);
        occ.add(&[0], 1.0);
        occ.add(&[1], 0.5);
        assert_eq!(occ.free_count([0, 1]), 0);
        assert_eq!(occ.pick(&[0, 1], 1), vec![1]);
        occ.remove(&[1], 0.5);
        assert!(occ.is_free(1));
    }
}
