//! From a policy's world (snapshot + plan) to the simulator's, so that the oracle and the
//! evaluation can score any plan with the model.

use std::sync::Mutex;

use super::machine::MachineParams;
use super::model::{simulate_with_solo, solo_rate};
use super::process::SimProcess;
use numasched_model::profile::{Profile, ProfileSet};
use numasched_model::topology::{CpuId, NodeId, Topology};
use numasched_model::{Plan, Snapshot};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error("process {pid}: CPU {cpu} does not exist on this machine")]
    UnknownCpu { pid: u32, cpu: CpuId },
    #[error("process {pid}: node {node} does not exist on this machine")]
    UnknownNode { pid: u32, node: NodeId },
    #[error("process {pid}: neither the plan nor the snapshot says where it runs")]
    Unplaced { pid: u32 },
}

/// The processes of `snapshot` as `plan` would run them.
///
/// - CPUs: the plan's placement for the pid, or where the process runs now when the
///   placement is empty or missing. A process gets one thread per CPU it keeps busy
///   ([`Process::slots`](numasched_model::Process::slots)); when its set has more CPUs than
///   threads, the threads go where Linux's load balancer would settle them: each, in turn,
///   to the least-loaded CPU of its set, preferring idle cores to busy SMT siblings, the
///   most constrained processes first. Where they fill some CPUs of a set twice and
///   others once, which threads take turns is dealt at random, and each process runs at
///   its expected share ([`crate::timeshare`]). Deterministic.
/// - Memory: `memory_bytes` per node, after the plan's page moves (migration cost is not
///   modelled: this is the steady state after it).
/// - Profile: the set's profile for the program name; otherwise one built from the
///   process's own MPKI and NUMA penalty with default shape parameters.
pub fn from_snapshot(
    snapshot: &Snapshot,
    plan: &Plan,
    profiles: &ProfileSet,
) -> Result<Vec<SimProcess>, SimError> {
    let topo = &snapshot.topology;
    let mut sets: Vec<(usize, Vec<usize>, usize)> = Vec::new(); // (process, cpu set, threads)
    for (i, p) in snapshot.processes.iter().enumerate() {
        let placed = plan
            .placements
            .iter()
            .find(|pl| pl.pid == p.pid)
            .map(|pl| pl.cpus.as_slice())
            .filter(|c| !c.is_empty());
        let ids = placed.unwrap_or(&p.current_cpus);
        if ids.is_empty() {
            return Err(SimError::Unplaced { pid: p.pid });
        }
        let mut set = Vec::with_capacity(ids.len());
        for &id in ids {
            let cpu = topo.cpu(id).ok_or(SimError::UnknownCpu {
                pid: p.pid,
                cpu: id,
            })?;
            set.push(cpu.index);
        }
        set.sort_unstable();
        set.dedup();
        sets.push((i, set, p.slots()));
    }
    let cpus = balance(topo, &mut sets);
    let shares = dealt_shares(topo, &sets, &cpus);
    let mut out = Vec::with_capacity(snapshot.processes.len());
    for (i, p) in snapshot.processes.iter().enumerate() {
        let mut memory: Vec<(usize, f64)> = Vec::new();
        for (&node, &bytes) in &p.memory_bytes {
            let ni = topo
                .node_index(node)
                .ok_or(SimError::UnknownNode { pid: p.pid, node })?;
            memory.push((ni, bytes as f64));
        }
        for mv in plan.page_moves.iter().filter(|m| m.pid == p.pid) {
            let unknown = |node| SimError::UnknownNode { pid: p.pid, node };
            let from = topo.node_index(mv.from_node).ok_or(unknown(mv.from_node))?;
            let to = topo.node_index(mv.to_node).ok_or(unknown(mv.to_node))?;
            let Some(src) = memory.iter_mut().find(|(n, _)| *n == from) else {
                continue;
            };
            let moved = (mv.bytes as f64).min(src.1);
            src.1 -= moved;
            match memory.iter_mut().find(|(n, _)| *n == to) {
                Some(dst) => dst.1 += moved,
                None => memory.push((to, moved)),
            }
        }
        let profile = profiles.get(&p.program).cloned().unwrap_or_else(|| {
            let c = p.character();
            Profile::new(&p.program, c.mpki, Some(c.numa_penalty))
        });
        out.push(SimProcess {
            profile,
            memory,
            cpus: cpus[i].clone(),
            run_share: shares[i],
        });
    }
    Ok(out)
}

/// Places each process's threads on CPUs of its set, as a load balancer would.
fn balance(topo: &Topology, sets: &mut [(usize, Vec<usize>, usize)]) -> Vec<Vec<usize>> {
    let mut load = vec![0usize; topo.num_cpus()];
    let mut core_load = vec![0usize; topo.cores().len()];
    let mut out = vec![Vec::new(); sets.len()];
    let mut order: Vec<usize> = (0..sets.len()).collect();
    order.sort_by_key(|&k| (sets[k].1.len(), sets[k].0));
    for k in order {
        let (i, set, threads) = &sets[k];
        if set.len() == *threads {
            // Pinned one-to-one: nothing to balance.
            for &c in set {
                load[c] += 1;
                core_load[topo.cpus()[c].core] += 1;
            }
            out[*i] = set.clone();
            continue;
        }
        for _ in 0..*threads {
            let Some(&c) = set
                .iter()
                .min_by_key(|&&c| (load[c], core_load[topo.cpus()[c].core], c))
            else {
                break;
            };
            load[c] += 1;
            core_load[topo.cpus()[c].core] += 1;
            out[*i].push(c);
        }
    }
    out
}

/// Per process, its threads' expected share of a CPU where processes given the same
/// set take turns on some of its CPUs and not on others ([`crate::timeshare`]): the
/// CPUs `balance` filled for the set, dealt among its processes' threads at random.
fn dealt_shares(
    topo: &Topology,
    sets: &[(usize, Vec<usize>, usize)],
    cpus: &[Vec<usize>],
) -> Vec<Option<f64>> {
    let mut load = vec![0usize; topo.num_cpus()];
    for c in cpus.iter().flatten() {
        if let Some(l) = load.get_mut(*c) {
            *l += 1;
        }
    }
    let share = |c: &usize| 1.0 / load.get(*c).copied().unwrap_or(1).max(1) as f64;
    // Processes given the same set share one pool; the deal depends only on the pool and
    // how many threads a process has, so each (pool, k) is summed once.
    let mut pools: Vec<(&[usize], Vec<usize>)> = Vec::new();
    for (i, set, _) in sets {
        match pools.iter_mut().find(|(s, _)| *s == set.as_slice()) {
            Some((_, members)) => members.push(*i),
            None => pools.push((set, vec![*i])),
        }
    }
    let mut out = vec![None; cpus.len()];
    for (_, members) in &pools {
        let slots: Vec<f64> = members
            .iter()
            .flat_map(|&j| cpus[j].iter().map(share))
            .collect();
        let mut by_threads: Vec<(usize, Option<f64>)> = Vec::new();
        for &i in members {
            let k = cpus[i].len();
            out[i] = match by_threads.iter().find(|(t, _)| *t == k) {
                Some(&(_, s)) => s,
                None => {
                    let s = crate::timeshare::expected_share(&slots, k);
                    by_threads.push((k, s));
                    s
                }
            };
        }
    }
    out
}

/// The machine the solo rates were computed on, and per profile its solo rate.
type SoloCache = (Option<Topology>, Vec<(Profile, f64)>);

/// The oracle's objective: the model's average slowdown of `plan` on `snapshot`, lower
/// is better. A plan that cannot be simulated (unknown CPU or node, a process with
/// nowhere to run) scores +∞. Solo runs are memoised per machine and profile, so the
/// returned closure is cheap to call in search loops and safe to share across threads.
pub fn objective(
    params: MachineParams,
    profiles: ProfileSet,
) -> impl Fn(&Snapshot, &Plan) -> f64 + Send + Sync {
    let cache: Mutex<SoloCache> = Mutex::new((None, Vec::new()));
    move |snapshot: &Snapshot, plan: &Plan| {
        let Ok(procs) = from_snapshot(snapshot, plan, &profiles) else {
            return f64::INFINITY;
        };
        let topo = &snapshot.topology;
        let solos = {
            let mut guard = match cache.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            let (machine, known) = &mut *guard;
            if machine.as_ref() != Some(topo) {
                *machine = Some(topo.clone());
                known.clear();
            }
            procs
                .iter()
                .map(|p| match known.iter().find(|(q, _)| *q == p.profile) {
                    Some(&(_, r)) => r,
                    None => {
                        let r = solo_rate(topo, &params, &p.profile);
                        known.push((p.profile.clone(), r));
                        r
                    }
                })
                .collect::<Vec<f64>>()
        };
        simulate_with_solo(topo, &params, &procs, &solos).avg_slowdown
    }
}
