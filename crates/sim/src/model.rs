//! The steady state of a set of programs on a machine, and their slowdowns.
//!
//! Per thread, cycles per instruction are
//! `CPI = core_cpi · smt_stretch + mpi(cache share) · stall_per_latency · latency · f`,
//! where the latency is the unloaded one (local or remote) plus the queueing delay of
//! every shared resource on the miss's path. Three couplings close the loop: a thread's
//! cache share depends on everyone's miss rate on its LLC, queueing delays depend on
//! everyone's traffic, and traffic depends on everyone's CPI. The solver iterates: cache
//! shares are damped, and each resource's delay is solved exactly for the others held
//! fixed (Gauss–Seidel), which converges in a few tens of sweeps (the rare share loop
//! that creeps is extrapolated, `Creep`). Everything runs in a
//! fixed order with no randomness, so results are bit-for-bit reproducible.

use serde::{Deserialize, Serialize};

use super::lru;
use super::machine::{MachineParams, MAX_UTILISATION};
use super::network::{self, Network, ResourceKind};
use super::process::SimProcess;
use super::roots::false_position;
use numasched_model::profile::{Derived, Profile};
use numasched_model::topology::Topology;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessOutcome {
    /// Instructions per cycle while it holds a CPU, averaged over its threads.
    pub ipc: f64,
    /// LLC misses per 1000 instructions with the cache share it gets.
    pub effective_mpki: f64,
    /// Run time / solo run time − 1 (∞ for a process that cannot run).
    pub slowdown: f64,
    /// Solo run time / run time: 1 alone and local, smaller when slowed.
    pub speed: f64,
    /// Fraction of its misses served by the node the missing thread runs on.
    pub local_fraction: f64,
    /// Mean miss latency including queueing, ns.
    pub latency_ns: f64,
    /// DRAM traffic it causes (fills and writebacks), GB/s.
    pub bandwidth_gbps: f64,
    /// Mean fraction of a CPU each thread gets (< 1 when time-shared).
    pub cpu_share: f64,
    /// LLC capacity each thread effectively holds, bytes.
    pub llc_bytes: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceLoad {
    #[serde(flatten)]
    pub kind: ResourceKind,
    /// Traffic through it, GB/s.
    pub gbps: f64,
    /// Traffic / sustainable bandwidth.
    pub utilisation: f64,
    /// Queueing delay it adds to each miss that crosses it, ns.
    pub delay_ns: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub processes: Vec<ProcessOutcome>,
    /// Mean of the processes' slowdowns (the published workload figure; lower is better).
    pub avg_slowdown: f64,
    /// Mean of the processes' speeds (normalised system performance, Tudu et al.).
    pub performance: f64,
    /// Coefficient of variation of the speeds (Tudu et al.'s unfairness).
    pub unfairness: f64,
    /// Every resource some traffic crosses.
    pub resources: Vec<ResourceLoad>,
    /// Solver sweeps used; `converged` is false if it stopped at the limit.
    pub iterations: usize,
    pub converged: bool,
}

/// Solver sweep limit; typical cases converge in 10–40.
const MAX_SWEEPS: usize = 400;
/// Relative change of every CPI and cache share below which the state is steady.
const TOLERANCE: f64 = 1e-9;
/// Weight of the new cache shares in each sweep; shares react to miss rates that react
/// to shares, and half-steps keep that loop from ringing.
const SHARE_DAMPING: f64 = 0.5;
/// Sweeps before a creeping share loop is extrapolated, and the spacing of the three
/// points it is extrapolated from (`Creep`). Cases that converge in the usual few tens
/// of sweeps never reach it, so their results do not change.
const CREEP_AFTER: usize = 100;
const CREEP_SPAN: usize = 20;

/// Steady-state speeds of `procs` on `machine`, against each profile alone on the idle
/// machine with its memory local.
pub fn simulate(machine: &Topology, params: &MachineParams, procs: &[SimProcess]) -> Outcome {
    let mut solos: Vec<(&Profile, f64)> = Vec::new();
    let mut solo_rates = Vec::with_capacity(procs.len());
    for p in procs {
        let rate = match solos.iter().find(|(q, _)| *q == &p.profile) {
            Some(&(_, r)) => r,
            None => {
                let r = solo_rate(machine, params, &p.profile);
                solos.push((&p.profile, r));
                r
            }
        };
        solo_rates.push(rate);
    }
    simulate_with_solo(machine, params, procs, &solo_rates)
}

/// Instructions per ns of one thread of `profile` alone on the idle machine, on the
/// first CPU of the first node with CPUs, with all its memory on that node.
pub fn solo_rate(machine: &Topology, params: &MachineParams, profile: &Profile) -> f64 {
    let Some(node) = machine.cpu_nodes().next() else {
        return 0.0;
    };
    let Some(&cpu) = machine.nodes()[node]
        .cpus
        .first()
        .and_then(|&id| machine.cpu(id))
    else {
        return 0.0;
    };
    let solo = SimProcess {
        profile: profile.clone(),
        memory: vec![(node, 1.0)],
        cpus: vec![cpu.index],
        run_share: None,
    };
    let net = network::build(machine, params, std::slice::from_ref(&solo));
    let state = solve(&net, params, std::slice::from_ref(&solo));
    state.rate.first().copied().unwrap_or(0.0)
}

/// [`simulate`] with the solo rates (instructions per ns, one per process) given, for
/// callers that memoise them across many runs.
pub fn simulate_with_solo(
    machine: &Topology,
    params: &MachineParams,
    procs: &[SimProcess],
    solo_rates: &[f64],
) -> Outcome {
    let net = network::build(machine, params, procs);
    let state = solve(&net, params, procs);
    summarise(&net, &state, procs, solo_rates)
}

struct State {
    /// Per thread: instructions per ns (including its run share), CPI while running,
    /// misses per instruction, miss latency (ns), capacity view (bytes).
    rate: Vec<f64>,
    cpi: Vec<f64>,
    mpi: Vec<f64>,
    latency: Vec<f64>,
    cache: Vec<f64>,
    /// Per resource: queueing delay (ns), traffic (GB/s), and the sustainable
    /// bandwidth it offers (a bus controller's share of its bus varies with the load).
    delay: Vec<f64>,
    traffic: Vec<f64>,
    capacity: Vec<f64>,
    clock_ghz: f64,
    sweeps: usize,
    converged: bool,
}

impl State {
    /// Nothing moving yet: every resource at its full capacity.
    fn new(net: &Network, clock_ghz: f64) -> State {
        let (nt, nr) = (net.threads.len(), net.resources.len());
        State {
            rate: vec![0.0; nt],
            cpi: vec![0.0; nt],
            mpi: vec![0.0; nt],
            latency: vec![0.0; nt],
            cache: vec![0.0; nt],
            delay: vec![0.0; nr],
            traffic: vec![0.0; nr],
            capacity: net.resources.iter().map(|r| r.capacity).collect(),
            clock_ghz,
            sweeps: 0,
            converged: false,
        }
    }
}

fn queue_delay(scale: f64, rho: f64) -> f64 {
    let rho = rho.clamp(0.0, MAX_UTILISATION);
    scale * rho / (1.0 - rho)
}

fn solve(net: &Network, params: &MachineParams, procs: &[SimProcess]) -> State {
    let f = params.clock_ghz;
    let nt = net.threads.len();
    let nr = net.resources.len();
    let derived: Vec<Derived> = procs.iter().map(|p| p.profile.derived()).collect();
    // Occupancy shares of each LLC, initially even among its occupants.
    let mut per_llc = vec![0usize; net.llc_bytes.len()];
    for o in &net.occupants {
        per_llc[o.llc] += 1;
    }
    let mut share: Vec<f64> = net
        .occupants
        .iter()
        .map(|o| 1.0 / per_llc[o.llc] as f64)
        .collect();
    let mut s = State::new(net, f);
    // Per resource, the threads that cross it and the use on their path.
    let mut crossing: Vec<Vec<(usize, usize)>> = vec![Vec::new(); nr];
    for (t, th) in net.threads.iter().enumerate() {
        for (u, us) in th.uses.iter().enumerate() {
            crossing[us.resource].push((t, u));
        }
    }
    let sweep = Sweep {
        net,
        params,
        derived: &derived,
        crossing: &crossing,
    };
    // Per thread: stall cycles per ns of latency (mpi · stall_per_latency · f, times
    // the profile's stall scale at its cache share).
    let mut stall_per_ns = vec![0.0; nt];
    // Per occupant: instructions per ns, unloaded (step 3).
    let mut instr_rate = vec![0.0; net.occupants.len()];
    let mut target = vec![0.0; net.occupants.len()];
    let mut on_llc: Vec<usize> = Vec::new();
    let curves = fill_curves(net, procs, &per_llc);
    let mut prev_cpi = vec![0.0; nt];
    let mut scratch: Vec<(f64, f64, f64)> = Vec::new();
    let mut buf = BusScratch::default();
    // Per thread and resource on its path: the queueing delay its misses see there
    // (the same for every user of a FIFO queue; per user at a bus controller).
    let mut wait: Vec<Vec<f64>> = net
        .threads
        .iter()
        .map(|th| vec![0.0; th.uses.len()])
        .collect();
    let mut creep = Creep::default();
    let llc_of: Vec<usize> = net.occupants.iter().map(|o| o.llc).collect();
    while s.sweeps < MAX_SWEEPS {
        s.sweeps += 1;
        // 1. Miss rates from cache shares; CPI from the current delays.
        for (t, th) in net.threads.iter().enumerate() {
            let d = &derived[th.process];
            let occ = &net.occupants[th.occupant];
            s.cache[t] = share[th.occupant] * net.llc_bytes[th.llc] / occ.concurrency;
            let profile = &procs[th.process].profile;
            s.mpi[t] = profile.misses_per_instruction(s.cache[t]);
            // Lines the prefetchers no longer bring in time stall the core more.
            stall_per_ns[t] = s.mpi[t] * d.stall_per_latency * profile.stall_scale(s.cache[t]) * f;
            let queue: f64 = th
                .uses
                .iter()
                .zip(&wait[t])
                .map(|(u, &w)| u.latency_weight * w)
                .sum();
            s.latency[t] = th.base_latency + queue;
            s.cpi[t] = d.core_cpi * th.smt_stretch + stall_per_ns[t] * s.latency[t];
        }
        // 2. Each resource's delay, solved with the others held: the traffic it sees
        //    falls as its own delay rises, so the fixed point is unique.
        for r in 0..crossing.len() {
            if let Some(bus) = net.resources[r].bus {
                bus_turns(&sweep, r, bus, &stall_per_ns, &mut s, &mut wait, &mut buf);
                continue;
            }
            open_queue(&sweep, r, &stall_per_ns, &mut s, &mut wait, &mut scratch);
        }
        // 3. Cache shares: each occupant holds its LRU footprint (Che's characteristic
        //    time, lru.rs), from its miss curve at its instruction rate. The
        //    rate is taken without queueing, SMT stretch and the prefetchers' loss
        //    (CPU time share and own miss rate included): otherwise a newcomer that
        //    slows a cache-thrashing neighbour would hand its cache to the others, and
        //    a co-runner could make a program faster — a second-order effect we leave
        //    out on purpose. The prefetchers' loss grows as the share shrinks, so with
        //    it the rate would also feed back on itself: a program losing lines would
        //    fill ever more slowly and give up nearly all of its cache.
        instr_rate.iter_mut().for_each(|x| *x = 0.0);
        for (t, th) in net.threads.iter().enumerate() {
            s.rate[t] = th.run_share * f / s.cpi[t];
            let d = &derived[th.process];
            let per_line = s.mpi[t] * d.stall_per_latency * f;
            let unloaded_cpi = d.core_cpi + per_line * th.base_latency;
            instr_rate[th.occupant] += th.run_share * f / unloaded_cpi;
        }
        lru_targets(net, &curves, &instr_rate, &mut on_llc, &mut target);
        let mut moved: f64 = 0.0;
        for o in 0..net.occupants.len() {
            let next = (1.0 - SHARE_DAMPING) * share[o] + SHARE_DAMPING * target[o];
            moved = moved.max((next - share[o]).abs() / share[o].max(1e-12));
            share[o] = next;
        }
        if s.sweeps >= CREEP_AFTER && s.sweeps % CREEP_SPAN == 0 {
            creep.leap(&llc_of, &mut share);
        }
        let changed = s
            .cpi
            .iter()
            .zip(&prev_cpi)
            .map(|(c, p)| ((c - p) / c).abs())
            .fold(0.0, f64::max);
        prev_cpi.copy_from_slice(&s.cpi);
        if changed < TOLERANCE && moved < TOLERANCE {
            s.converged = true;
            break;
        }
    }
    for (traffic, users) in s.traffic.iter_mut().zip(&crossing) {
        *traffic = users
            .iter()
            .map(|&(t, u)| s.rate[t] * s.mpi[t] * net.threads[t].uses[u].bytes_per_miss)
            .sum();
    }
    s
}

/// Shares that still creep after `CREEP_AFTER` sweeps move by a nearly constant ratio
/// per sweep (the share loop's slowest mode, close to 1 where two programs' fill
/// curves nearly balance): left alone they would take thousands of sweeps. Three
/// points `CREEP_SPAN` sweeps apart give that ratio, and Aitken's Δ² jumps to where
/// the geometric creep ends. The jump is taken only when every share moves the same
/// way twice at a ratio below 1, and the ordinary sweeps that follow confirm it: the
/// solver still stops only on its own tolerance.
#[derive(Default)]
struct Creep {
    seen: Vec<Vec<f64>>,
}

impl Creep {
    /// `llc_of[o]` is the cache occupant `o` holds a share of; each cache's shares keep
    /// their sum through the jump.
    fn leap(&mut self, llc_of: &[usize], share: &mut [f64]) {
        self.seen.push(share.to_vec());
        if self.seen.len() < 3 {
            return;
        }
        let (x0, x1) = (&self.seen[0], &self.seen[1]);
        let mut next = share.to_vec();
        for o in 0..share.len() {
            let (d1, d2) = (x1[o] - x0[o], share[o] - x1[o]);
            if d1 == 0.0 && d2 == 0.0 {
                continue;
            }
            let q = d2 / d1;
            if !(0.0..0.999).contains(&q) {
                self.seen.clear();
                return;
            }
            next[o] = (share[o] + d2 * q / (1.0 - q)).clamp(0.0, 1.0);
        }
        for l in 0..llc_of.iter().max().map_or(0, |&m| m + 1) {
            let on = || (0..share.len()).filter(move |&o| llc_of[o] == l);
            let (had, got) = on().fold((0.0, 0.0), |(h, g), o| (h + share[o], g + next[o]));
            if got > 0.0 {
                on().for_each(|o| share[o] = next[o] * had / got);
            }
        }
        self.seen.clear();
    }
}

/// Each occupant's fill curve, for the caches it shares with another (lru.rs);
/// `None` for a cache's only occupant, which holds all of it.
fn fill_curves(
    net: &Network,
    procs: &[SimProcess],
    per_llc: &[usize],
) -> Vec<Option<lru::FillCurve>> {
    let mut owner = vec![None; net.occupants.len()];
    for th in &net.threads {
        owner[th.occupant] = Some(th.process);
    }
    net.occupants
        .iter()
        .zip(&owner)
        .map(|(o, p)| {
            let p = (*p)?;
            if per_llc[o.llc] < 2 {
                return None;
            }
            let profile = &procs[p].profile;
            lru::FillCurve::new(net.llc_bytes[o.llc], |c| {
                profile.misses_per_instruction(c / o.concurrency)
            })
        })
        .collect()
}

/// Step 3: the share of its LLC each occupant would hold at its instruction rate.
fn lru_targets(
    net: &Network,
    curves: &[Option<lru::FillCurve>],
    instr_rate: &[f64],
    on_llc: &mut Vec<usize>,
    target: &mut [f64],
) {
    for (l, &bytes) in net.llc_bytes.iter().enumerate() {
        on_llc.clear();
        on_llc.extend((0..net.occupants.len()).filter(|&o| net.occupants[o].llc == l));
        if on_llc.len() < 2 {
            for &o in on_llc.iter() {
                target[o] = 1.0;
            }
            continue;
        }
        let sharing: Vec<_> = on_llc
            .iter()
            .map(|&o| (curves[o].as_ref(), instr_rate[o]))
            .collect();
        for (&o, x) in on_llc.iter().zip(lru::shares(bytes, &sharing)) {
            target[o] = x;
        }
    }
}

/// What every sweep of `solve` reads and none changes.
struct Sweep<'a> {
    net: &'a Network,
    params: &'a MachineParams,
    derived: &'a [Derived],
    /// Per resource, the threads that cross it and the use on their path.
    crossing: &'a [Vec<(usize, usize)>],
}

/// Buffers the bus step reuses from sweep to sweep.
#[derive(Default)]
struct BusScratch {
    others: Vec<f64>,
    mva: Vec<MvaUser>,
    cores: Vec<usize>,
    picked: Vec<(usize, usize)>,
}

/// Step 2 at an open queue (a memory controller, a link, an LLC port): its delay with
/// the others held, and every crossing thread's CPI moved by the change.
fn open_queue(
    sweep: &Sweep,
    r: usize,
    stall_per_ns: &[f64],
    s: &mut State,
    wait: &mut [Vec<f64>],
    scratch: &mut Vec<(f64, f64, f64)>,
) {
    let (net, f) = (sweep.net, sweep.params.clock_ghz);
    let res = &net.resources[r];
    let users = &sweep.crossing[r];
    scratch.clear();
    for &(t, u) in users {
        let th = &net.threads[t];
        let us = th.uses[u];
        let g = stall_per_ns[t] * us.latency_weight;
        let a = s.cpi[t] - g * s.delay[r];
        // Traffic (GB/s) = run · f / CPI · mpi · bytes/miss.
        let k = th.run_share * f * s.mpi[t] * us.bytes_per_miss;
        if k > 0.0 {
            scratch.push((k, a, g));
        }
    }
    let old = s.delay[r];
    let new = solve_delay(scratch, res.capacity, res.delay_scale);
    if new != old {
        for &(t, u) in users {
            let g = stall_per_ns[t] * net.threads[t].uses[u].latency_weight;
            s.cpi[t] += g * (new - old);
            wait[t][u] = new;
        }
        s.delay[r] = new;
    }
}

/// Step 2 at bus controller `r`, an agent of package bus `bus`: its share of the bus
/// given what the other controllers draw, each core's share of that, and the waits of
/// the threads at each core's turn.
fn bus_turns(
    sweep: &Sweep,
    r: usize,
    bus: usize,
    stall_per_ns: &[f64],
    s: &mut State,
    wait: &mut [Vec<f64>],
    buf: &mut BusScratch,
) {
    let Sweep {
        net,
        params,
        derived,
        crossing,
    } = *sweep;
    let (f, line) = (params.clock_ghz, params.line_bytes);
    let res = &net.resources[r];
    let users = &crossing[r];
    // Round-robin arbitration: this controller may use what the others
    // leave of the bus, and at least an equal share (max-min fairness).
    buf.others.clear();
    for &o in &net.buses[bus].agents {
        if o != r {
            buf.others.push(
                crossing[o]
                    .iter()
                    .map(|&(t, u)| {
                        let th = &net.threads[t];
                        th.run_share * f * s.mpi[t] * th.uses[u].bytes_per_miss / s.cpi[t]
                    })
                    .sum(),
            );
        }
    }
    // Every change of owner costs a turnaround: with round robin, a share
    // 2·(total − largest)/total of the transfers change owner.
    let mine: f64 = users
        .iter()
        .map(|&(t, u)| {
            let th = &net.threads[t];
            th.run_share * f * s.mpi[t] * th.uses[u].bytes_per_miss / s.cpi[t]
        })
        .sum();
    let total = mine + buf.others.iter().sum::<f64>();
    let largest = buf.others.iter().copied().fold(mine, f64::max);
    let switching = if total > 0.0 {
        (2.0 * (total - largest) / total).min(1.0)
    } else {
        0.0
    };
    let raw = net.buses[bus].capacity;
    let whole = raw / (1.0 + switching * params.bus_turnaround_ns * raw / line);
    // A miss that finds its core's turn idle waits only for the transfer in
    // progress for another agent (controller or core): the residual of one line.
    let fsb_others: f64 = buf.others.iter().sum();
    let c = fair_share(whole, &mut buf.others);
    s.capacity[r] = c;
    // The controller takes its cores' requests in turn too: each core may
    // use its max-min fair share of the controller's, and its own threads
    // (time-sharing it) queue first come, first served.
    let draws: Vec<f64> = users
        .iter()
        .map(|&(t, u)| {
            let th = &net.threads[t];
            th.run_share * f * s.mpi[t] * th.uses[u].bytes_per_miss / s.cpi[t]
        })
        .collect();
    buf.cores.clear();
    for &(t, _) in users {
        let k = net.threads[t].core;
        if !buf.cores.contains(&k) {
            buf.cores.push(k);
        }
    }
    let (mut num, mut den) = (0.0, 0.0);
    for &k in &buf.cores {
        let mut siblings = Vec::new();
        for &other in &buf.cores {
            if other != k {
                siblings.push(
                    users
                        .iter()
                        .zip(&draws)
                        .filter(|(&(t, _), _)| net.threads[t].core == other)
                        .map(|(_, &x)| x)
                        .sum::<f64>(),
                );
            }
        }
        let busy = ((fsb_others + siblings.iter().sum::<f64>()) / whole).min(1.0);
        let residual = busy * line / whole / 2.0;
        let ck = fair_share(c, &mut siblings);
        buf.mva.clear();
        buf.picked.clear();
        for &(t, u) in users.iter().filter(|&&(t, _)| net.threads[t].core == k) {
            let th = &net.threads[t];
            let us = th.uses[u];
            let g = stall_per_ns[t] * us.latency_weight;
            let mlp = derived[th.process].stall_per_latency;
            buf.picked.push((t, u));
            buf.mva.push(MvaUser {
                mu: th.run_share * f * s.mpi[t],
                a: s.cpi[t] - g * wait[t][u],
                g,
                population: if mlp > 0.0 { th.run_share / mlp } else { 0.0 },
                service: us.bytes_per_miss / ck,
                unloaded: us.bytes_per_miss / res.capacity,
                arbitration: residual,
            });
        }
        let waits = solve_finite_source(&buf.mva);
        for (&(t, u), (&w, m)) in buf.picked.iter().zip(waits.iter().zip(&buf.mva)) {
            s.cpi[t] += m.g * (w - wait[t][u]);
            wait[t][u] = w;
            let x = m.mu / (m.a + m.g * w);
            num += x * w;
            den += x;
        }
    }
    s.delay[r] = if den > 0.0 { num / den } else { 0.0 };
}

/// One thread at a finite-source queue (a bus controller): its miss rate is
/// `mu / (a + g·W)` (misses/ns) with `W` its queueing delay there; it keeps at most
/// `population` misses in flight (its memory-level parallelism × CPU share); each miss
/// queued at its controller occupies it for `service` ns (its transfers interleaved with
/// the other controllers' at the controller's fair share), `unloaded` ns is its transfer
/// at the bus's full rate (which the unloaded latency counts), and `arbitration` ns the
/// mean wait for another controller's transfer in progress.
struct MvaUser {
    mu: f64,
    a: f64,
    g: f64,
    population: f64,
    service: f64,
    unloaded: f64,
    arbitration: f64,
}

/// Queueing delays at a first-come first-served server whose users are closed sources
/// (cores with a bounded number of misses in flight), by approximate mean value
/// analysis (Schweitzer, 1979): an arriving miss of thread t waits for the work queued
/// by everyone, less its own share 1/N_t (the arrival theorem: it does not see itself),
/// plus the arbitration wait `A⁰` for another controller's transfer:
/// `W_t = A⁰ + Σ_j Q_j S_j − Q_t S_t / N_t`, `Q_j = X_j (W_j + S⁰_j)`.
/// Unlike an open queue, a lone source with enough misses in flight can keep the server
/// busy nearly all the time, and no source queues behind more than the others hold.
/// Solved on the queued work `U = Σ_j Q_j S_j`: per thread the equation is a quadratic
/// in W_t, and U = G(U) is bracketed by [0, the work of every population queued].
fn solve_finite_source(users: &[MvaUser]) -> Vec<f64> {
    let wait_at = |m: &MvaUser, work: f64| -> f64 {
        if m.population <= 0.0 || m.mu <= 0.0 {
            return 0.0;
        }
        // W = A − c (W + S⁰)/(a + gW), A = A⁰ + U, c = mu · S / N.
        let big_a = m.arbitration + work;
        let c = m.mu * m.service / m.population;
        let b = m.a - m.g * big_a + c;
        let k = c * m.unloaded - big_a * m.a;
        let w = if m.g > 1e-300 {
            let disc = (b * b - 4.0 * m.g * k).max(0.0);
            // The positive root, written to avoid cancellation when b > 0.
            if b > 0.0 {
                -2.0 * k / (b + disc.sqrt())
            } else {
                (-b + disc.sqrt()) / (2.0 * m.g)
            }
        } else {
            -k / (m.a + c)
        };
        w.max(0.0)
    };
    let queued = |work: f64| -> f64 {
        users
            .iter()
            .map(|m| {
                let w = wait_at(m, work);
                let x = m.mu / (m.a + m.g * w);
                x * (w + m.unloaded) * m.service
            })
            .sum()
    };
    let lo = 0.0;
    let hi: f64 = users
        .iter()
        .filter(|m| m.mu > 0.0 && m.a > 0.0)
        .map(|m| {
            let bound = if m.g > 1e-300 {
                (m.mu * m.unloaded / m.a).max(m.mu / m.g)
            } else {
                m.mu * (m.unloaded + 1e6) / m.a
            };
            bound * m.service
        })
        .sum();
    if hi <= 0.0 || queued(lo) <= lo {
        return users.iter().map(|m| wait_at(m, 0.0)).collect();
    }
    // f(U) = G(U) − U changes sign on [lo, hi].
    let f = |u: f64| queued(u) - u;
    let (f_lo, f_hi) = (f(lo), f(hi));
    let work = if f_hi >= 0.0 {
        hi
    } else {
        false_position(&f, (lo, f_lo), (hi, f_hi), 200, |fw, w, lo, hi| {
            fw.abs() <= 1e-14 * w.max(f64::MIN_POSITIVE) || hi - lo <= 1e-14 * hi
        })
    };
    users.iter().map(|m| wait_at(m, work)).collect()
}

/// What one agent of a bus of `capacity` may use under max-min fair (round-robin)
/// arbitration when the other agents draw `others`: the water level `s` with
/// `s + Σ min(other, s) = capacity`. At least an equal share, all that the others leave.
fn fair_share(capacity: f64, others: &mut [f64]) -> f64 {
    others.sort_by(|a, b| a.total_cmp(b));
    let mut left = capacity;
    let mut agents = others.len() + 1;
    for &x in others.iter() {
        let level = left / agents as f64;
        if x >= level {
            return level;
        }
        left -= x.max(0.0);
        agents -= 1;
    }
    left
}

/// Delay W of one resource such that W = scale · ρ/(1−ρ) with
/// ρ = Σ k / (a + g·W) / capacity: the traffic of each thread crossing it falls as its
/// CPI `a + g·W` rises. ρ(W) decreases and the queue formula increases, so the root is
/// unique; bracketed false position (Illinois) finds it in a handful of steps.
fn solve_delay(users: &[(f64, f64, f64)], capacity: f64, scale: f64) -> f64 {
    let rho = |w: f64| users.iter().map(|&(k, a, g)| k / (a + g * w)).sum::<f64>() / capacity;
    // h(w) = queue(ρ(w)) − w, decreasing in w.
    let h = |w: f64| queue_delay(scale, rho(w)) - w;
    let lo = 0.0;
    let h_lo = h(lo);
    if h_lo <= 0.0 {
        return 0.0;
    }
    let hi = queue_delay(scale, MAX_UTILISATION);
    let h_hi = h(hi);
    if h_hi >= 0.0 {
        return hi;
    }
    false_position(&h, (lo, h_lo), (hi, h_hi), 100, |hw, _, lo, hi| {
        hw.abs() <= 1e-12 * scale.max(1.0) || (hi - lo) <= 1e-13 * hi
    })
}

/// One process's sums over its threads, for [`summarise`].
#[derive(Default, Clone, Copy)]
struct Acc {
    rate: f64,
    run: f64,
    misses: f64,
    local: f64,
    latency: f64,
    local_plain: f64,
    latency_plain: f64,
    bytes: f64,
    cache: f64,
}

/// The sums of each of `processes` processes over its threads, misses weighting
/// locality and latency (and, for a process without misses, plain sums of them).
fn accumulate(net: &Network, s: &State, processes: usize) -> Vec<Acc> {
    let mut acc = vec![Acc::default(); processes];
    for (t, th) in net.threads.iter().enumerate() {
        let a = &mut acc[th.process];
        let m = s.rate[t] * s.mpi[t];
        a.rate += s.rate[t];
        a.run += th.run_share;
        a.misses += m;
        a.local += m * th.local_fraction;
        a.latency += m * s.latency[t];
        a.local_plain += th.local_fraction;
        a.latency_plain += s.latency[t];
        a.cache += s.cache[t];
        a.bytes += th
            .uses
            .iter()
            .filter(|u| {
                matches!(
                    net.resources[u.resource].kind,
                    ResourceKind::MemoryController { .. }
                )
            })
            .map(|u| m * u.bytes_per_miss)
            .sum::<f64>();
    }
    acc
}

/// The outcome of a process of `threads` threads from its sums `a`, against its solo
/// rate per thread `solo`, at `clock_ghz`.
fn process_outcome(a: &Acc, threads: f64, solo: f64, clock_ghz: f64) -> ProcessOutcome {
    let speed = if threads > 0.0 && solo > 0.0 && a.rate.is_finite() {
        a.rate / (threads * solo)
    } else {
        0.0
    };
    let per_thread = |x: f64| if threads > 0.0 { x / threads } else { 0.0 };
    let (local_fraction, latency_ns) = if a.misses > 0.0 {
        (a.local / a.misses, a.latency / a.misses)
    } else {
        (per_thread(a.local_plain), per_thread(a.latency_plain))
    };
    ProcessOutcome {
        ipc: if a.run > 0.0 {
            a.rate / (a.run * clock_ghz)
        } else {
            0.0
        },
        effective_mpki: if a.rate > 0.0 {
            1000.0 * a.misses / a.rate
        } else {
            0.0
        },
        slowdown: if speed > 0.0 {
            1.0 / speed - 1.0
        } else {
            f64::INFINITY
        },
        speed,
        local_fraction,
        latency_ns,
        bandwidth_gbps: a.bytes,
        cpu_share: per_thread(a.run),
        llc_bytes: per_thread(a.cache),
    }
}

/// The loaded resources, then each arbitrated bus as a whole: the traffic of all its
/// controllers against its sustainable bandwidth, and their traffic-weighted delay.
fn resource_loads(net: &Network, s: &State) -> Vec<ResourceLoad> {
    let mut resources: Vec<ResourceLoad> = net
        .resources
        .iter()
        .enumerate()
        .filter(|&(i, _)| s.traffic[i] > 0.0)
        .map(|(i, r)| ResourceLoad {
            kind: r.kind,
            gbps: s.traffic[i],
            utilisation: s.traffic[i] / s.capacity[i],
            delay_ns: s.delay[i],
        })
        .collect();
    for bus in &net.buses {
        let gbps: f64 = bus.agents.iter().map(|&a| s.traffic[a]).sum();
        if gbps > 0.0 {
            let delay_ns = bus
                .agents
                .iter()
                .map(|&a| s.traffic[a] * s.delay[a])
                .sum::<f64>()
                / gbps;
            resources.push(ResourceLoad {
                kind: bus.kind,
                gbps,
                utilisation: gbps / bus.capacity,
                delay_ns,
            });
        }
    }
    resources
}

/// The outcome of a solved state: per process, over all of them, and per loaded
/// resource.
fn summarise(net: &Network, s: &State, procs: &[SimProcess], solo_rates: &[f64]) -> Outcome {
    let processes: Vec<ProcessOutcome> = accumulate(net, s, procs.len())
        .iter()
        .enumerate()
        .map(|(p, a)| {
            let n = net.thread_count[p] as f64;
            let solo = solo_rates.get(p).copied().unwrap_or(0.0);
            process_outcome(a, n, solo, s.clock_ghz)
        })
        .collect();
    let n = processes.len().max(1) as f64;
    let avg_slowdown = processes.iter().map(|p| p.slowdown).sum::<f64>() / n;
    let performance = processes.iter().map(|p| p.speed).sum::<f64>() / n;
    let var = processes
        .iter()
        .map(|p| (p.speed - performance).powi(2))
        .sum::<f64>()
        / n;
    let unfairness = if performance > 0.0 {
        var.sqrt() / performance
    } else {
        0.0
    };
    Outcome {
        processes,
        avg_slowdown,
        performance,
        unfairness,
        resources: resource_loads(net, s),
        iterations: s.sweeps,
        converged: s.converged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_delay_is_md1_of_bursts() {
        assert_eq!(queue_delay(10.0, 0.0), 0.0);
        assert!((queue_delay(10.0, 0.5) - 10.0).abs() < 1e-12);
        assert!(queue_delay(10.0, 2.0).is_finite());
    }

    #[test]
    fn solved_delay_is_a_fixed_point() {
        // Two threads, 8 GB/s of demand at zero delay on a 10 GB/s resource.
        let users = [(4.0 * 1.0, 1.0, 0.01), (4.0 * 2.0, 2.0, 0.02)];
        let w = solve_delay(&users, 10.0, 20.0);
        let rho = users.iter().map(|&(k, a, g)| k / (a + g * w)).sum::<f64>() / 10.0;
        assert!((queue_delay(20.0, rho) - w).abs() < 1e-6, "{w} vs {rho}");
        // Overload is throttled below capacity, not past it.
        let w = solve_delay(&[(100.0, 1.0, 0.05)], 10.0, 20.0);
        assert!(100.0 / (1.0 + 0.05 * w) < 10.0);
        assert_eq!(solve_delay(&[], 10.0, 20.0), 0.0);
    }

    #[test]
    fn creep_jumps_to_the_end_of_a_geometric_creep_and_keeps_each_cache_whole() {
        // Two occupants of one cache creeping towards 0.7 / 0.3 by a ratio of 0.98 per
        // sweep, seen every 20 sweeps; a third alone on another cache.
        let at = |k: i32| {
            let d = 0.2 * 0.98f64.powi(k);
            vec![0.7 - d, 0.3 + d, 1.0]
        };
        let llc_of = [0, 0, 1];
        let mut creep = Creep::default();
        for k in [0, 20] {
            let mut s = at(k);
            creep.leap(&llc_of, &mut s);
            assert_eq!(s, at(k), "no jump before three points");
        }
        let mut s = at(40);
        creep.leap(&llc_of, &mut s);
        assert!(
            (s[0] - 0.7).abs() < 1e-9 && (s[1] - 0.3).abs() < 1e-9,
            "{s:?}"
        );
        assert_eq!(s[2], 1.0);
        assert!(
            creep.seen.is_empty(),
            "the next jump needs three fresh points"
        );
    }

    #[test]
    fn creep_does_not_jump_where_the_shares_ring_or_grow_apart() {
        let llc_of = [0, 0];
        for points in [
            // Ringing: the second step reverses the first.
            [[0.5, 0.5], [0.6, 0.4], [0.55, 0.45]],
            // Growing steps: no limit to extrapolate to.
            [[0.5, 0.5], [0.51, 0.49], [0.53, 0.47]],
        ] {
            let mut creep = Creep::default();
            let mut s = Vec::new();
            for p in points {
                s = p.to_vec();
                creep.leap(&llc_of, &mut s);
            }
            assert_eq!(s, points[2].to_vec());
            assert!(creep.seen.is_empty());
        }
    }
}
