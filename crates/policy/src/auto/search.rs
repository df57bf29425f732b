//! The search `auto` runs from each start: single moves and swaps, each costed in O(1)
//! from per-LLC and per-link aggregates, first improvement until a pass changes nothing.

use super::AutoParams;
use crate::alloc::{AllowedMask, SMT_SLOWDOWN};
use crate::locality::remote_factor;
use crate::maxlocal::Layout;

/// Aggregates that let a move be costed in O(1).
pub(super) struct Search<'p> {
    params: &'p AutoParams,
    nodes: usize,
    /// Node index of each LLC, and each node's LLCs.
    llc_node: Vec<usize>,
    node_llcs: Vec<std::ops::Range<usize>>,
    /// Per process: its LLC while it lives in one (movable), else `None`.
    pub(super) llc: Vec<Option<usize>>,
    home: Vec<Option<usize>>,
    sens: Vec<f64>,
    reuse: Vec<f64>,
    misses: Vec<f64>,
    /// Remote factor f of process i on node index n, at `[i * nodes + n]`.
    factor: Vec<f64>,
    /// Per LLC: Σ c (all processes), Σ sens and Σ sens·c (movable ones).
    pressure: Vec<f64>,
    sens_sum: Vec<f64>,
    sens_c: Vec<f64>,
    /// Per LLC, for capacity contention: Σ sens·r and Σ sens·r·c (movable ones).
    sens_r: Vec<f64>,
    sens_rc: Vec<f64>,
    /// Per LLC: the bus it shares with the package's other LLCs, where it has one
    /// ([`buses`]); per bus, its LLCs.
    bus: Vec<Option<usize>>,
    bus_llcs: Vec<Vec<usize>>,
    /// Per (home, run) node pair: Σ misses, Σ sens, Σ sens·misses of remote processes.
    link: Vec<f64>,
    link_sens: Vec<f64>,
    link_sens_m: Vec<f64>,
    /// Per node, its memory controller: Σ sens of the movable processes homed there
    /// and Σ misses of every process homed there (both fixed: memory does not move);
    /// per LLC, Σ sens and Σ misses of the movable processes running on it with their
    /// memory local. See [`Self::controller_term`].
    ctrl_sens: Vec<f64>,
    ctrl_misses: Vec<f64>,
    local_sens: Vec<f64>,
    local_misses: Vec<f64>,
    /// Per process: its busy threads (`Process::busy_threads`).
    demand: Vec<f64>,
    /// Per LLC: its CPUs, the busy threads on it (ours, and the CPUs others' work
    /// holds) and how many processes share it (a group over several LLCs counts in
    /// each by its share), for the time-sharing term.
    cap: Vec<f64>,
    load: Vec<f64>,
    sharers: Vec<f64>,
    /// Per LLC: [`Self::timeshare_term`], kept as `load` and `sharers` change (every
    /// candidate move reads two).
    shared: Vec<f64>,
}

/// κm: a memory controller's misses weigh this much against the LLC's and the link's:
/// it saturates at about twice the pressure the interconnect does (on the Nehalem
/// THRESHOLD was measured on, 25.6 GB/s of DDR3 against 11.7 GB/s of QPI each way).
/// Derived; the LLC's own weight, 1, was tried too, on training seeds 1–60, and lost
/// (docs/evaluation.md).
const CONTROLLER_WEIGHT: f64 = 0.5;

/// Least fall of the estimate that counts as a gain: below it, rounding.
const EPS: f64 = 1e-9;

impl<'p> Search<'p> {
    pub(super) fn new(layout: &Layout, params: &'p AutoParams) -> Search<'p> {
        let topo = layout.topology();
        let snap = layout.snapshot;
        let n = layout.cpus.len();
        let nodes = topo.nodes().len();
        let llcs = topo.llcs().len();
        let (bus, bus_llcs) = buses(topo);
        let weight = |i: usize| {
            let p = &snap.processes[i];
            p.cpu_demand.min(p.slots() as f64)
        };
        let mut s = Search {
            params,
            nodes,
            llc_node: topo.llcs().iter().map(|l| l.node).collect(),
            node_llcs: topo.nodes().iter().map(|n| n.llcs.clone()).collect(),
            llc: (0..n).map(|i| layout.llc_of(i)).collect(),
            home: snap
                .processes
                .iter()
                .map(|p| p.home_node().and_then(|h| topo.node_index(h)))
                .collect(),
            sens: layout.np.iter().map(|np| (np - 1.0).max(0.0)).collect(),
            reuse: snap
                .processes
                .iter()
                .map(|p| p.cache_reuse.unwrap_or(params.default_reuse))
                .collect(),
            misses: (0..n).map(|i| layout.mpki[i] * weight(i)).collect(),
            factor: snap
                .processes
                .iter()
                .enumerate()
                .flat_map(|(i, p)| (0..nodes).map(move |at| (i, p, at)))
                .map(|(i, p, at)| remote_factor(topo, p, layout.np[i], at))
                .collect(),
            pressure: vec![0.0; llcs],
            sens_sum: vec![0.0; llcs],
            sens_c: vec![0.0; llcs],
            sens_r: vec![0.0; llcs],
            sens_rc: vec![0.0; llcs],
            bus,
            bus_llcs,
            link: vec![0.0; nodes * nodes],
            link_sens: vec![0.0; nodes * nodes],
            link_sens_m: vec![0.0; nodes * nodes],
            ctrl_sens: vec![0.0; nodes],
            ctrl_misses: vec![0.0; nodes],
            local_sens: vec![0.0; llcs],
            local_misses: vec![0.0; llcs],
            // Whole threads: sampling noise (1.05 CPUs' worth) must not make a full
            // LLC look oversubscribed and send a process away from its memory.
            demand: snap
                .processes
                .iter()
                .map(|p| p.busy_threads() as f64)
                .collect(),
            cap: (0..llcs)
                .map(|l| topo.llc_cpu_indices(l).len() as f64)
                .collect(),
            load: vec![0.0; llcs],
            sharers: vec![0.0; llcs],
            shared: vec![0.0; llcs],
        };
        // Others' work in whole CPUs, as every policy counts room: a fraction of a CPU
        // of interrupts is not a thread to take turns with.
        for c in snap.others_taken.iter().filter_map(|&c| topo.cpu(c)) {
            s.load[c.llc] += 1.0;
        }
        for i in 0..n {
            if let Some(h) = s.home[i] {
                s.ctrl_misses[h] += s.misses[i];
                if s.llc[i].is_some() {
                    s.ctrl_sens[h] += s.sens[i];
                }
            }
            match s.llc[i] {
                Some(l) => s.enter(i, l, 1.0),
                None => {
                    // Groups spread over several LLCs press on each, and stay put.
                    let k = layout.cpus[i].len().max(1) as f64;
                    for &cpu in &layout.cpus[i] {
                        let c = topo.cpus()[cpu];
                        s.pressure[c.llc] += s.misses[i] * s.f(i, c.node) / k;
                    }
                    // Their threads are given whole LLCs and the kernel balances them
                    // over those: their work is spread by the LLCs' sizes.
                    let mut spanned: Vec<usize> =
                        layout.cpus[i].iter().map(|&c| topo.cpus()[c].llc).collect();
                    spanned.sort_unstable();
                    spanned.dedup();
                    let total: f64 = spanned.iter().map(|&l| s.cap[l]).sum();
                    for &l in &spanned {
                        let share = s.cap[l] / total.max(1.0);
                        s.load[l] += s.demand[i] * share;
                        s.sharers[l] += share;
                    }
                }
            }
        }
        for l in 0..llcs {
            s.reshare(l);
        }
        s
    }

    fn reshare(&mut self, l: usize) {
        self.shared[l] = self.sharers[l] * timeshare_per_thread(self.load[l], self.cap[l]);
    }

    /// What time-sharing costs the processes on LLC `l`, summed over them: see
    /// [`timeshare_per_thread`].
    fn timeshare_term(&self, l: usize) -> f64 {
        self.shared[l]
    }

    pub(super) fn timeshare_cost(&self, i: usize) -> f64 {
        self.llc[i].map_or(0.0, |l| timeshare_per_thread(self.load[l], self.cap[l]))
    }

    /// Whether LLC `l` has more work than CPUs.
    fn oversubscribed(&self, l: usize) -> bool {
        self.load[l] > self.cap[l] + 1e-6
    }

    fn f(&self, i: usize, node: usize) -> f64 {
        self.factor[i * self.nodes + node]
    }

    /// Adds (`sign` = 1) or removes (−1) process `i` on LLC `l`.
    fn enter(&mut self, i: usize, l: usize, sign: f64) {
        let node = self.llc_node[l];
        let c = self.misses[i] * self.f(i, node);
        self.pressure[l] += sign * c;
        self.sens_sum[l] += sign * self.sens[i];
        self.sens_c[l] += sign * self.sens[i] * c;
        let r = self.reuse[i];
        self.sens_r[l] += sign * self.sens[i] * r;
        self.sens_rc[l] += sign * self.sens[i] * r * c;
        if let Some(k) = self.link_key(i, node) {
            self.link[k] += sign * self.misses[i];
            self.link_sens[k] += sign * self.sens[i];
            self.link_sens_m[k] += sign * self.sens[i] * self.misses[i];
        }
        if self.home[i] == Some(node) {
            self.local_sens[l] += sign * self.sens[i];
            self.local_misses[l] += sign * self.misses[i];
        }
        self.load[l] += sign * self.demand[i];
        self.sharers[l] += sign;
        self.reshare(l);
    }

    fn link_key(&self, i: usize, node: usize) -> Option<usize> {
        match self.home[i] {
            Some(h) if h != node => Some(h * self.nodes + node),
            _ => None,
        }
    }

    fn scale(&self) -> f64 {
        self.params.contention_weight / self.params.threshold
    }

    /// Σ over the LLC's processes of sens · (pressure of the others), and likewise for
    /// a link: the pairwise form `S·P − Σ sens·c` of the contention terms.
    fn llc_term(&self, l: usize) -> f64 {
        let bandwidth = self.sens_sum[l] * self.pressure[l] - self.sens_c[l];
        let capacity = self.sens_r[l] * self.pressure[l] - self.sens_rc[l];
        bandwidth
            + self.params.capacity_weight / self.params.contention_weight.max(1e-12) * capacity
    }

    /// Pairs on one bus but different LLCs, in the same pairwise form: Σ sens · the
    /// others' pressure over the bus, less what the LLCs' own terms count.
    fn bus_term(&self, b: usize) -> f64 {
        let (mut sens, mut pressure, mut within) = (0.0, 0.0, 0.0);
        for &l in &self.bus_llcs[b] {
            sens += self.sens_sum[l];
            pressure += self.pressure[l];
            within += self.sens_sum[l] * self.pressure[l];
        }
        sens * pressure - within
    }

    /// The pressure of the processes on `l`'s bus outside `l`.
    fn bus_neighbours(&self, l: usize) -> f64 {
        self.bus[l].map_or(0.0, |b| {
            self.bus_llcs[b]
                .iter()
                .filter(|&&m| m != l)
                .map(|&m| self.pressure[m])
                .sum()
        })
    }

    /// Memory node `h`'s controller serves every miss to its memory, wherever the
    /// process runs: Σ over the processes homed at `h` of sens · the misses of the others
    /// homed there that no other term counts. Those beside it on its LLC running
    /// locally are in [`Self::llc_term`], those remote on the same link in
    /// [`Self::link_term`]; the rest — a process run away from its memory, to the ones
    /// left at home, and the other way round — were invisible: a stream moved off a
    /// node kept loading that node's controller, and the search counted it as gone.
    /// Pairwise, `S·M` less each group's own `S_g·M_g` (each process is in one group:
    /// local on its LLC, or remote on its link).
    fn controller_term(&self, h: usize) -> f64 {
        let mut within: f64 = self.node_llcs[h]
            .clone()
            .map(|l| self.local_sens[l] * self.local_misses[l])
            .sum();
        for n in (0..self.nodes).filter(|&n| n != h) {
            let k = h * self.nodes + n;
            within += self.link_sens[k] * self.link[k];
        }
        CONTROLLER_WEIGHT * (self.ctrl_sens[h] * self.ctrl_misses[h] - within)
    }

    /// (Σ sens, Σ misses) of the group process `i` belongs to on LLC `l` for
    /// [`Self::controller_term`], without `i` itself.
    fn controller_group(&self, i: usize, l: usize) -> Option<(f64, f64)> {
        let h = self.home[i]?;
        let node = self.llc_node[l];
        let (gs, gm) = if node == h {
            (self.local_sens[l], self.local_misses[l])
        } else {
            let k = h * self.nodes + node;
            (self.link_sens[k], self.link[k])
        };
        let inside = self.llc[i] == Some(l)
            || (node != h && self.llc[i].is_some_and(|a| self.llc_node[a] == node));
        Some(if inside {
            (gs - self.sens[i], gm - self.misses[i])
        } else {
            (gs, gm)
        })
    }

    fn link_term(&self, k: usize) -> f64 {
        self.link_sens[k] * self.link[k] - self.link_sens_m[k]
    }

    pub(super) fn remote_cost(&self, i: usize) -> f64 {
        self.llc[i].map_or(0.0, |l| self.f(i, self.llc_node[l]) - 1.0)
    }

    pub(super) fn contention_cost(&self, i: usize) -> f64 {
        let Some(l) = self.llc[i] else { return 0.0 };
        let node = self.llc_node[l];
        let own = self.misses[i] * self.f(i, node);
        let mut others = self.pressure[l] - own + self.bus_neighbours(l);
        if let Some(k) = self.link_key(i, node) {
            others += self.link[k] - self.misses[i];
        }
        if let (Some(h), Some((_, group))) = (self.home[i], self.controller_group(i, l)) {
            others += CONTROLLER_WEIGHT * (self.ctrl_misses[h] - self.misses[i] - group);
        }
        let capacity = self.reuse[i] * (self.pressure[l] - own);
        let ratio = self.params.capacity_weight / self.params.contention_weight.max(1e-12);
        self.scale() * self.sens[i] * (others + ratio * capacity).max(0.0)
    }

    /// Everything the estimate says process `i` loses where `layout` has it, on the
    /// scale each step of the search is judged on: remote execution, contention and
    /// time-sharing, plus what sharing a core with another busy thread costs it
    /// ([`SMT_SLOWDOWN`]), which the search weighs only move by move. A group spread
    /// over several caches counts the mean over its CPUs. Summed over the processes it
    /// compares where two starts ended.
    pub(super) fn process_cost(&self, layout: &Layout, i: usize) -> f64 {
        let cpus = &layout.cpus[i];
        if cpus.is_empty() {
            return 0.0;
        }
        let placed = match self.llc[i] {
            Some(_) => self.remote_cost(i) + self.contention_cost(i) + self.timeshare_cost(i),
            None => {
                let topo = layout.topology();
                let k = cpus.len() as f64;
                cpus.iter()
                    .map(|&c| {
                        let cpu = topo.cpus()[c];
                        let f = self.f(i, cpu.node);
                        let own = self.misses[i] * f / k;
                        let others = (self.pressure[cpu.llc] - own).max(0.0);
                        (f - 1.0)
                            + self.scale() * self.sens[i] * others
                            + timeshare_per_thread(self.load[cpu.llc], self.cap[cpu.llc])
                    })
                    .sum::<f64>()
                    / k
            }
        };
        placed + SMT_SLOWDOWN * core_shared(layout, i)
    }

    /// [`Self::process_cost`] summed over every process.
    pub(super) fn total_cost(&self, layout: &Layout) -> f64 {
        (0..self.llc.len())
            .map(|i| self.process_cost(layout, i))
            .sum()
    }

    /// Cost of the parts of the objective that moving `procs` between `llcs` can change.
    fn local_cost(&self, procs: &Few<2>, llcs: &Few<4>) -> f64 {
        let mut links = Few::<8>::default();
        let mut buses = Few::<4>::default();
        for &l in llcs.items() {
            if let Some(b) = self.bus[l] {
                buses.insert(b);
            }
        }
        for &i in procs.items() {
            for &l in llcs.items() {
                if let Some(k) = self.link_key(i, self.llc_node[l]) {
                    links.insert(k);
                }
            }
        }
        let remote: f64 = procs.items().iter().map(|&i| self.remote_cost(i)).sum();
        let llc: f64 = llcs.items().iter().map(|&l| self.llc_term(l)).sum();
        let link: f64 = links.items().iter().map(|&k| self.link_term(k)).sum();
        let bus: f64 = buses.items().iter().map(|&b| self.bus_term(b)).sum();
        let mut homes = Few::<2>::default();
        for &i in procs.items() {
            if let Some(h) = self.home[i] {
                homes.insert(h);
            }
        }
        let ctrl: f64 = homes.items().iter().map(|&h| self.controller_term(h)).sum();
        let shared: f64 = llcs.items().iter().map(|&l| self.timeshare_term(l)).sum();
        remote + self.scale() * (llc + link + bus + ctrl) + shared
    }

    /// Moves each of `moves` (process, destination) and returns the change of cost.
    /// Allocation-free: it runs for every candidate of every pass.
    fn apply(&mut self, moves: &[(usize, usize)]) -> f64 {
        let mut procs = Few::<2>::default();
        let mut llcs = Few::<4>::default();
        for &(i, to) in moves {
            procs.insert(i);
            if let Some(from) = self.llc[i] {
                llcs.insert(from);
            }
            llcs.insert(to);
        }
        let before = self.local_cost(&procs, &llcs);
        self.shift(moves);
        self.local_cost(&procs, &llcs) - before
    }

    /// The change of cost if process `i` went from LLC `from` to `to`, in closed form:
    /// each pairwise term `S·P − Σ s·c` changes by `−S·c − s·P + 2·s·c` when a process
    /// (s, c) leaves and by `S·c + s·P` when it joins, so a candidate is costed
    /// without touching the aggregates. Equal to [`Self::apply`] of the move up to
    /// rounding; `None` where an LLC has a bus, whose term spans several LLCs (then
    /// `apply` costs it).
    fn move_delta(&self, i: usize, from: usize, to: usize) -> Option<f64> {
        if from == to {
            return Some(0.0);
        }
        if self.bus[from].is_some() || self.bus[to].is_some() {
            return None;
        }
        let (na, nb) = (self.llc_node[from], self.llc_node[to]);
        let (fa, fb) = (self.f(i, na), self.f(i, nb));
        let (s, r, m) = (self.sens[i], self.reuse[i], self.misses[i]);
        let (ca, cb) = (m * fa, m * fb);
        let ratio = self.params.capacity_weight / self.params.contention_weight.max(1e-12);
        // Leaving `from`: bandwidth, then capacity (x = s·r; a neighbour evicts by c).
        let x = s * r;
        let leave = -self.sens_sum[from] * ca - s * self.pressure[from]
            + 2.0 * s * ca
            + ratio * (-self.sens_r[from] * ca - x * self.pressure[from] + 2.0 * x * ca);
        let join = self.sens_sum[to] * cb
            + s * self.pressure[to]
            + ratio * (self.sens_r[to] * cb + x * self.pressure[to]);
        let mut contention = leave + join;
        let (ka, kb) = (self.link_key(i, na), self.link_key(i, nb));
        if ka != kb {
            if let Some(k) = ka {
                contention += -self.link_sens[k] * m - s * self.link[k] + 2.0 * s * m;
            }
            if let Some(k) = kb {
                contention += self.link_sens[k] * m + s * self.link[k];
            }
        }
        // The controller's groups: leaving one changes its S_g·M_g by −s·M_g − m·S_g +
        // s·m (with i counted in it), joining another by s·M_g + m·S_g + s·m.
        if let (Some((sa, ma)), Some((sb, mb))) =
            (self.controller_group(i, from), self.controller_group(i, to))
        {
            let same = na == nb && Some(na) != self.home[i];
            if !same {
                let left = -s * ma - m * sa - s * m;
                let joined = s * mb + m * sb + s * m;
                contention -= CONTROLLER_WEIGHT * (left + joined);
            }
        }
        let d = self.demand[i];
        let share =
            |l: usize, load: f64, sharers: f64| sharers * timeshare_per_thread(load, self.cap[l]);
        let shared = share(from, self.load[from] - d, self.sharers[from] - 1.0)
            + share(to, self.load[to] + d, self.sharers[to] + 1.0)
            - self.timeshare_term(from)
            - self.timeshare_term(to);
        Some((fb - fa) + self.scale() * contention + shared)
    }

    /// The change of cost if `i` went from LLC `a` to `b` and `j` from `b` to `a`:
    /// `i`'s move in closed form, then `j`'s on the aggregates with `i` moved (shifted
    /// there and back, O(1) each). Where an LLC has a bus, by applying both.
    fn swap_delta(&mut self, i: usize, a: usize, j: usize, b: usize) -> f64 {
        let Some(first) = self.move_delta(i, a, b) else {
            let d = self.apply(&[(i, b), (j, a)]);
            self.shift(&[(i, a), (j, b)]);
            return d;
        };
        self.shift(&[(i, b)]);
        let second = self.move_delta(j, b, a);
        self.shift(&[(i, a)]);
        // No bus on `a` or `b` (the first would have declined), so the second is known.
        first + second.unwrap_or(0.0)
    }

    /// Moves without costing: to take a trial step back.
    fn shift(&mut self, moves: &[(usize, usize)]) {
        for &(i, to) in moves {
            if let Some(from) = self.llc[i] {
                self.enter(i, from, -1.0);
            }
            self.enter(i, to, 1.0);
            self.llc[i] = Some(to);
        }
    }

    /// Runs the search, moving CPUs in `layout` to follow every accepted step.
    pub(super) fn improve(&mut self, layout: &mut Layout) {
        let n = self.llc.len();
        let n_llc = self.pressure.len();
        let masks: Vec<AllowedMask> = layout
            .snapshot
            .processes
            .iter()
            .map(|p| AllowedMask::of(layout.topology(), p))
            .collect();
        let topo = layout.topology();
        let home_llcs: Vec<std::ops::Range<usize>> = self
            .home
            .iter()
            .map(|h| h.map_or(0..0, |h| topo.nodes()[h].llcs.clone()))
            .collect();
        // Only where busy threads outnumber the CPUs must anyone take turns. Elsewhere a
        // crowded-looking LLC is the estimate's doing (a group spread over several LLCs
        // counts in each by its size, while the kernel runs its threads on idle CPUs
        // first): a move out of it may take free SMT siblings, never busy CPUs, which
        // would make the time-sharing it counts (the property test
        // `nmass_never_stacks_while_cpus_are_idle`).
        let taking_turns = layout.snapshot.wanted_cpus() > topo.num_cpus();
        for _ in 0..self.params.max_passes {
            let mut improved = false;
            // Where a process could usefully go: back to its home node, or to one of the
            // quietest caches with an idle core (a single move needs one; the quietest
            // of all can be full of compute-bound threads that put no pressure on it).
            // Probing only those keeps a pass O(processes) on machines with dozens of
            // LLCs; on two-node machines it is every LLC anyway.
            let cool = self.coolest_where(self.params.swap_candidates.max(1), |l| {
                layout.occ.idle_cores_in_llc(l) > 0
            });
            let spare = self.least_loaded(self.params.swap_candidates.max(1));
            // Single moves to an LLC with free CPUs for the whole group, or, for a
            // process whose LLC has more work than CPUs, to one with less work per CPU.
            for i in 0..n {
                let Some(from) = self.llc[i] else { continue };
                let crowded = self.oversubscribed(from);
                // Leaving a time-shared LLC frees no core: the time-sharing term counts
                // what it saves.
                let relief = if crowded {
                    0.0
                } else {
                    smt_relief(layout, &masks[i], i, from)
                };
                let mut best: Option<(f64, usize)> = None;
                let mut dests = Few::<16>::default();
                let spare_if_crowded = spare.iter().copied().filter(|_| crowded);
                for l in home_llcs[i]
                    .clone()
                    .chain(cool.iter().copied())
                    .chain(spare_if_crowded)
                {
                    dests.insert(l);
                }
                let size = layout.cpus[i].len();
                for &to in dests.items() {
                    if to == from {
                        continue;
                    }
                    let idle = room(layout, &masks[i], to);
                    if idle < size
                        && !(crowded && (taking_turns || free_cpus(layout, &masks[i], to) >= size))
                    {
                        continue;
                    }
                    let sibling = self.sibling_cost(layout, &masks[i], to, size, idle);
                    let moved = match self.move_delta(i, from, to) {
                        Some(d) => d,
                        None => {
                            let d = self.apply(&[(i, to)]);
                            self.shift(&[(i, from)]);
                            d
                        }
                    };
                    let delta = moved + sibling - relief;
                    if delta < -EPS && best.is_none_or(|(d, _)| delta < d) {
                        best = Some((delta, to));
                    }
                }
                if let Some((_, to)) = best {
                    self.apply(&[(i, to)]);
                    relocate(layout, &masks, &[(i, to)]);
                    improved = true;
                }
            }
            // Swaps: the heaviest of a hotter LLC with the lightest of a cooler one.
            let k = self.params.swap_candidates;
            let mut members = self.members_by_misses(n_llc);
            let k_llcs = self.params.swap_candidates.max(1);
            let cool = self.coolest(k_llcs);
            let mut hot = self.coolest(n_llc);
            hot.reverse();
            hot.truncate(k_llcs);
            for &a in &hot {
                for &b in &cool {
                    if a == b || self.pressure[a] <= self.pressure[b] {
                        continue;
                    }
                    let mut best: Option<(f64, usize, usize)> = None;
                    for &i in members[a].iter().rev().take(k) {
                        for &j in members[b].iter().take(k) {
                            let Some(delta) = self.swap_gain(layout, &masks, (i, a), (j, b)) else {
                                continue;
                            };
                            if best.is_none_or(|(d, _, _)| delta < d) {
                                best = Some((delta, i, j));
                            }
                        }
                    }
                    if let Some((_, i, j)) = best {
                        self.take_swap(layout, &masks, &mut members, (i, a), (j, b));
                        improved = true;
                    }
                }
            }
            // The widest neighbourhood last, only where the others found nothing
            // (variable neighbourhood descent): it probes every process away from its
            // memory, and run in every pass it doubled the planning bench's time at 512
            // processes (1.4 times as long this way, where its swaps let the search go
            // on improving to the pass limit).
            if !improved {
                improved = self.swap_home(layout, &masks, &home_llcs, &mut members);
            }
            if !improved {
                break;
            }
        }
    }

    /// Swaps that bring a process home: one running away from its memory with one on an
    /// LLC of its home node, those whose own memory is where the first runs tried first
    /// (both come home), then the lightest. The kernel weighs the same exchange
    /// (`task_numa_compare`, a swap with a task on the preferred node). Swaps by pressure
    /// miss it where two LLCs are equally loaded, and single moves where every CPU is
    /// taken: a symmetric mix on a full machine kept a stream of each node's on the other
    /// (`cmload`, 32 processes on 8 CPUs). Taken only where the estimate falls.
    fn swap_home(
        &mut self,
        layout: &mut Layout,
        masks: &[AllowedMask],
        home_llcs: &[std::ops::Range<usize>],
        members: &mut [Vec<usize>],
    ) -> bool {
        let k = self.params.swap_candidates;
        let mut improved = false;
        for (i, homes) in home_llcs.iter().enumerate() {
            let (Some(a), Some(h)) = (self.llc[i], self.home[i]) else {
                continue;
            };
            let here = self.llc_node[a];
            if here == h {
                continue;
            }
            let mut best: Option<(f64, usize, usize)> = None;
            for b in homes.clone() {
                let coming = members[b]
                    .iter()
                    .copied()
                    .filter(|&j| self.home[j] == Some(here))
                    .take(k);
                let light = members[b]
                    .iter()
                    .copied()
                    .filter(|&j| self.home[j] != Some(here))
                    .take(k);
                let mut cands = Few::<16>::default();
                for j in coming.chain(light) {
                    cands.insert(j);
                }
                for &j in cands.items() {
                    let Some(delta) = self.swap_gain(layout, masks, (i, a), (j, b)) else {
                        continue;
                    };
                    if best.is_none_or(|(d, _, _)| delta < d) {
                        best = Some((delta, j, b));
                    }
                }
            }
            if let Some((_, j, b)) = best {
                self.take_swap(layout, masks, members, (i, a), (j, b));
                improved = true;
            }
        }
        improved
    }

    /// What swapping process `i` on LLC `a` with `j` on LLC `b` would lower the
    /// estimate by (a negative change), if both fit where the other was and it does.
    fn swap_gain(
        &mut self,
        layout: &Layout,
        masks: &[AllowedMask],
        (i, a): (usize, usize),
        (j, b): (usize, usize),
    ) -> Option<f64> {
        if layout.cpus[i].len() != layout.cpus[j].len()
            || !fits_after_swap(layout, masks, i, j, b)
            || !fits_after_swap(layout, masks, j, i, a)
        {
            return None;
        }
        let delta = self.swap_delta(i, a, j, b);
        (delta < -EPS).then_some(delta)
    }

    /// Swaps `i` on `a` with `j` on `b`, in the estimate, the layout and the LLCs'
    /// member lists (kept in order of misses).
    fn take_swap(
        &mut self,
        layout: &mut Layout,
        masks: &[AllowedMask],
        members: &mut [Vec<usize>],
        (i, a): (usize, usize),
        (j, b): (usize, usize),
    ) {
        self.apply(&[(i, b), (j, a)]);
        relocate(layout, masks, &[(i, b), (j, a)]);
        for (l, out, inn) in [(a, i, j), (b, j, i)] {
            members[l].retain(|&x| x != out);
            members[l].push(inn);
            self.sort_by_misses(&mut members[l]);
        }
    }

    /// What a move of `size` threads into LLC `to`, which has `idle` idle cores for
    /// it, costs on SMT cores: each thread that takes the free sibling of a busy core
    /// slows both ([`SMT_SLOWDOWN`]), which no other term sees. Threads that land on
    /// busy CPUs are time-sharing, which [`Self::timeshare_term`] counts.
    fn sibling_cost(
        &self,
        layout: &Layout,
        mask: &AllowedMask,
        to: usize,
        size: usize,
        idle: usize,
    ) -> f64 {
        let topo = layout.topology();
        let per_core = topo.num_cpus() / topo.cores().len().max(1);
        if idle >= size || per_core < 2 {
            return 0.0;
        }
        let free = free_cpus(layout, mask, to);
        let siblings = free.saturating_sub(idle * per_core);
        2.0 * SMT_SLOWDOWN * (size - idle).min(siblings) as f64
    }

    /// The `k` LLCs with the least work per CPU.
    fn least_loaded(&self, k: usize) -> Vec<usize> {
        let per_cpu = |l: usize| self.load[l] / self.cap[l].max(1.0);
        let mut v: Vec<usize> = (0..self.load.len()).collect();
        v.sort_by(|&a, &b| per_cpu(a).total_cmp(&per_cpu(b)).then(a.cmp(&b)));
        v.truncate(k);
        v
    }

    /// The `k` LLCs with the least pressure.
    fn coolest(&self, k: usize) -> Vec<usize> {
        self.coolest_where(k, |_| true)
    }

    /// The `k` LLCs with the least pressure among those `keep` accepts.
    fn coolest_where(&self, k: usize, keep: impl Fn(usize) -> bool) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.pressure.len()).filter(|&l| keep(l)).collect();
        v.sort_by(|&a, &b| {
            self.pressure[a]
                .total_cmp(&self.pressure[b])
                .then(a.cmp(&b))
        });
        v.truncate(k);
        v
    }

    /// Movable processes per LLC, lightest misses first.
    fn members_by_misses(&self, n_llc: usize) -> Vec<Vec<usize>> {
        let mut m: Vec<Vec<usize>> = vec![Vec::new(); n_llc];
        for (i, l) in self.llc.iter().enumerate() {
            if let Some(l) = l {
                m[*l].push(i);
            }
        }
        for v in &mut m {
            self.sort_by_misses(v);
        }
        m
    }

    fn sort_by_misses(&self, v: &mut [usize]) {
        v.sort_by(|&x, &y| self.misses[x].total_cmp(&self.misses[y]).then(x.cmp(&y)));
    }
}

/// The buses between caches and memory that the topology shows: where one node's
/// memory is reached from several packages (a UMA machine of several sockets, as on
/// front-side-bus Xeons), each package's LLCs share that package's path to it, and
/// two streaming programs on one package queue there even on different LLCs. Where a
/// package holds its node's memory controller (every NUMA machine), or has one LLC,
/// the LLC term already counts what is shared: no bus. Per LLC its bus, if any; per
/// bus its LLCs.
fn buses(topo: &numasched_model::topology::Topology) -> (Vec<Option<usize>>, Vec<Vec<usize>>) {
    let llcs = topo.llcs();
    let mut bus = vec![None; llcs.len()];
    let mut bus_llcs: Vec<Vec<usize>> = Vec::new();
    for node in topo.nodes() {
        let mut packages: Vec<u32> = node.llcs.clone().map(|l| llcs[l].package).collect();
        packages.sort_unstable();
        packages.dedup();
        if packages.len() < 2 {
            continue;
        }
        for g in packages {
            let members: Vec<usize> = node
                .llcs
                .clone()
                .filter(|&l| llcs[l].package == g)
                .collect();
            if members.len() < 2 {
                continue;
            }
            for &l in &members {
                bus[l] = Some(bus_llcs.len());
            }
            bus_llcs.push(members);
        }
    }
    (bus, bus_llcs)
}

/// How much longer, on average, each thread of `load` CPUs' worth of work runs on
/// `cpus` CPUs than alone. The kernel keeps whole threads on CPUs: with `q` threads
/// on every CPU and `r` CPUs holding one more, the threads' run times add up to
/// `cpus·q² + r·(2q + 1)` against `load` alone (3 threads on 2 CPUs: one runs alone
/// and two take turns, 5 against 3, where an even split would say 4.5). Interpolated
/// between whole threads, so it is convex in the load and a move that only shuffles
/// which CPU runs an odd thread gains nothing.
pub(super) fn timeshare_per_thread(load: f64, cpus: f64) -> f64 {
    let cpus = cpus.max(1.0);
    if load <= cpus {
        return 0.0;
    }
    let q = (load / cpus).floor();
    let r = load - q * cpus;
    (cpus * q * q + r * (2.0 * q + 1.0)) / load - 1.0
}

/// A handful of distinct indices on the stack.
#[derive(Debug, Clone, Copy)]
struct Few<const N: usize> {
    items: [usize; N],
    len: usize,
}

impl<const N: usize> Default for Few<N> {
    fn default() -> Self {
        Few {
            items: [0; N],
            len: 0,
        }
    }
}

impl<const N: usize> Few<N> {
    fn insert(&mut self, x: usize) {
        if !self.items().contains(&x) && self.len < N {
            self.items[self.len] = x;
            self.len += 1;
        }
    }

    fn items(&self) -> &[usize] {
        &self.items[..self.len]
    }
}

/// What process `i` and the threads beside it on its cores would gain from a core of
/// its own: both stop sharing a pipeline ([`SMT_SLOWDOWN`] each, for SMT siblings; two
/// threads time-sharing one CPU lose more, so this errs low there). Counted only when
/// its LLC has no idle core it may use (otherwise the kernel, balancing inside the LLC,
/// or the CPU pick already gives it one). A single move goes only to an LLC with idle
/// cores for it ([`room`]), so this is what every such move saves besides what the
/// cost function sees. Without it, the maximum-local start that fills a node's SMT
/// siblings before using another node stayed: on `4n:2l:2c:2t`, four compute-bound
/// processes on one LLC's two cores ran 1.67 times as long as alone while whole nodes
/// idled, because leaving cost them 1-5% of remote execution and gained nothing the
/// cost could see.
pub(super) fn smt_relief(layout: &Layout, mask: &AllowedMask, i: usize, llc: usize) -> f64 {
    if room(layout, mask, llc) > 0 {
        return 0.0;
    }
    let demand = layout.snapshot.processes[i].cpu_demand;
    2.0 * SMT_SLOWDOWN * layout.occ.core_overlap(&layout.cpus[i], demand)
}

/// How many of process `i`'s threads share a physical core with other busy work: per
/// CPU of its own, the smaller of its thread there and the load on that core's other
/// CPUs (not its own). Threads taking turns on one CPU are time-sharing, counted apart.
fn core_shared(layout: &Layout, i: usize) -> f64 {
    let topo = layout.topology();
    let cpus = &layout.cpus[i];
    let demand = layout.snapshot.processes[i].cpu_demand;
    let own = (demand / cpus.len().max(1) as f64).min(1.0);
    cpus.iter()
        .map(|&c| {
            let core = &topo.cores()[topo.cpus()[c].core];
            let beside: f64 = core
                .cpus
                .iter()
                .filter_map(|&id| topo.cpu(id))
                .filter(|d| !cpus.contains(&d.index))
                .map(|d| layout.occ.load(d.index).min(1.0))
                .sum();
            own.min(beside)
        })
        .sum()
}

/// Idle cores the process may use in `llc`: a move is only worth considering to a
/// thread of its own. The cost function has no SMT term, so a free sibling of a busy
/// core would look like room and cost both threads ~40% (a sphinx3 moved beside a
/// perlbench while whole cores of another LLC idled).
fn room(layout: &Layout, mask: &AllowedMask, llc: usize) -> usize {
    if mask.is_all() {
        return layout.occ.idle_cores_in_llc(llc);
    }
    layout
        .occ
        .idle_cores(mask.filter(layout.topology().llc_cpu_indices(llc)))
}

/// Free CPUs of LLC `llc` the process may use, SMT siblings of busy cores included.
fn free_cpus(layout: &Layout, mask: &AllowedMask, llc: usize) -> usize {
    layout
        .occ
        .free_count(mask.filter(layout.topology().llc_cpu_indices(llc)))
}

/// The CPUs of LLC `llc` the process may use. Its new CPUs are picked from them least
/// loaded first, so free ones when there are: on an overcommitted machine a swap
/// frees no CPU (the others time-sharing it stay), and looking for free CPUs only
/// left the process with none, that is where it was, while its reason said it moved.
fn llc_cpus(layout: &Layout, mask: &AllowedMask, llc: usize) -> Vec<usize> {
    mask.filter(layout.topology().llc_cpu_indices(llc))
        .collect()
}

/// Whether process `i` would find its CPUs in LLC `to` once `j` has left it.
fn fits_after_swap(layout: &Layout, masks: &[AllowedMask], i: usize, j: usize, to: usize) -> bool {
    let mut free = room(layout, &masks[i], to);
    free += layout.cpus[j]
        .iter()
        .filter(|&&c| masks[i].contains(c))
        .count();
    free >= layout.cpus[i].len()
}

/// Gives the moved processes CPUs in their new LLCs (all leave first, so swaps fit).
fn relocate(layout: &mut Layout, masks: &[AllowedMask], moves: &[(usize, usize)]) {
    let demand = |layout: &Layout, i: usize| layout.snapshot.processes[i].cpu_demand;
    let mut sizes = Vec::with_capacity(moves.len());
    for &(i, _) in moves {
        let old = std::mem::take(&mut layout.cpus[i]);
        layout.occ.remove(&old, demand(layout, i));
        sizes.push(old.len());
    }
    for (&(i, to), size) in moves.iter().zip(sizes) {
        let cands = llc_cpus(layout, &masks[i], to);
        let cpus = layout.occ.pick(&cands, size);
        layout.occ.add(&cpus, demand(layout, i));
        layout.cpus[i] = cpus;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nmass::THRESHOLD_MPKI as THRESHOLD;
    use numasched_model::snapshot::Snapshot;
    use numasched_model::testkit::proc_on;
    use proptest::prelude::*;

    proptest! {
        /// The closed form a single move (and a swap) is costed by agrees with
        /// applying it and costing the aggregates before and after, for every process
        /// and every destination (every process of another LLC), on machines with and without SMT, with several LLCs per
        /// node and more busy threads than CPUs.
        #[test]
        fn closed_form_costs_are_the_applied_ones(
            spec in prop::sample::select(vec!["2n:2l:4c:1t", "4n:2l:2c:2t", "3n:3l:2c:2t", "2n:1l:4c:1t"]),
            procs in prop::collection::vec(
                (0.0f64..40.0, 1.0f64..2.0, 0.0f64..1.0, 0usize..4, 1u32..4, 0.2f64..3.0),
                1..24,
            ),
        ) {
            let topology = numasched_model::topology::spec::parse(spec).expect("spec");
            let nodes: Vec<u32> = topology.nodes().iter().map(|n| n.id).collect();
            let processes = procs
                .iter()
                .enumerate()
                .map(|(k, &(mpki, np, reuse, home, threads, demand))| {
                    let mut p = proc_on(100 + k as u32, "p", nodes[home % nodes.len()], mpki, np);
                    p.cache_reuse = Some(reuse);
                    p.threads = threads;
                    p.cpu_demand = demand.min(threads as f64);
                    p
                })
                .collect();
            let snap = Snapshot {
                topology,
                processes,
                others_pinned: Default::default(),
                others_taken: Default::default(),
                others_demand: Default::default(),
            };
            let params = AutoParams::default();
            let layout = crate::maxlocal::place(&snap);
            let mut search = Search::new(&layout, &params);
            for i in 0..search.llc.len() {
                let Some(from) = search.llc[i] else { continue };
                for to in 0..search.pressure.len() {
                    if to == from {
                        continue;
                    }
                    let closed = search.move_delta(i, from, to).expect("no bus here");
                    let applied = search.apply(&[(i, to)]);
                    search.shift(&[(i, from)]);
                    prop_assert!(
                        (closed - applied).abs() <= 1e-9 * (1.0 + applied.abs()),
                        "process {i} from LLC {from} to {to}: {closed} against {applied}"
                    );
                }
                prop_assert_eq!(search.move_delta(i, from, from), Some(0.0));
                // Swaps with every process of another LLC, likewise.
                for j in 0..search.llc.len() {
                    let Some(other) = search.llc[j] else { continue };
                    if other == from {
                        continue;
                    }
                    let closed = search.swap_delta(i, from, j, other);
                    let applied = search.apply(&[(i, other), (j, from)]);
                    search.shift(&[(i, from), (j, other)]);
                    prop_assert!(
                        (closed - applied).abs() <= 1e-9 * (1.0 + applied.abs()),
                        "swap of {i} (LLC {from}) and {j} (LLC {other}): {closed} against {applied}"
                    );
                }
            }
        }
    }

    /// Where LLCs share a front-side bus, whose term spans several of them, the closed
    /// form declines and the move is costed by applying it.
    #[test]
    fn a_move_on_a_bus_is_costed_by_applying_it() {
        let topology = numasched_model::topology::machine("xeon-e5345").expect("preset");
        let snap = Snapshot {
            topology,
            processes: vec![proc_on(100, "lbm", 0, 30.0, 1.0)],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let params = AutoParams::default();
        let layout = crate::maxlocal::place(&snap);
        let search = Search::new(&layout, &params);
        let from = search.llc[0].expect("placed in one LLC");
        assert!(search.bus[from].is_some(), "the E5345's LLCs share a bus");
        let to = (from + 1) % search.pressure.len();
        assert_eq!(search.move_delta(0, from, to), None);
    }

    /// `snap`'s processes with process k on CPU index `cpus[k]`.
    fn at<'s>(snap: &'s Snapshot, cpus: &[usize]) -> Layout<'s> {
        let mut layout = crate::maxlocal::place(snap);
        for (i, &c) in cpus.iter().enumerate() {
            let demand = snap.processes[i].cpu_demand;
            let old = std::mem::replace(&mut layout.cpus[i], vec![c]);
            layout.occ.remove(&old, demand);
            layout.occ.add(&[c], demand);
        }
        layout
    }

    fn two_nodes(processes: Vec<numasched_model::snapshot::Process>) -> Snapshot {
        Snapshot {
            topology: numasched_model::topology::spec::parse("2n:1l:4c:1t").expect("spec"),
            processes,
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        }
    }

    /// A stream run away from its memory still loads the controller of the node its
    /// memory is on: a process running there, local, loses to it as it would beside
    /// it, at [`CONTROLLER_WEIGHT`]; with the stream's memory on the stream's own node,
    /// it loses nothing. Before, both read zero (training seed 60 r2: the search sent a
    /// stream away from node 1 and counted its traffic as gone, and the processes left on
    /// node 1 ran 1.2-1.8 times as long as the model's best placement gave them).
    #[test]
    fn a_stream_run_elsewhere_still_loads_its_home_controller() {
        let lone = |stream_home| {
            let mut p = proc_on(100, "latency", 1, 20.0, 1.35);
            p.cache_reuse = Some(0.4);
            let mut stream = proc_on(101, "stream", stream_home, 100.0, 1.55);
            stream.cache_reuse = Some(0.0);
            let snap = two_nodes(vec![p, stream]);
            let layout = at(&snap, &[4, 0]);
            let params = AutoParams::default();
            let search = Search::new(&layout, &params);
            assert_eq!(search.llc[0], Some(1), "the first on node 1");
            search.contention_cost(0)
        };
        // Half the 100 MPKI, for a penalty of 1.35.
        let expected = 0.5 * 0.35 * 100.0 / THRESHOLD;
        assert!(
            (lone(1) - expected).abs() < 1e-9,
            "{} against {expected}",
            lone(1)
        );
        assert_eq!(lone(0), 0.0);
    }

    /// Under LRU a co-runner takes cache in proportion to the lines it brings in, not to
    /// how much it reuses them: a stream that gains nothing from the cache still evicts a
    /// neighbour's working set. Before, the capacity term weighed each co-runner by its
    /// own reuse, so a stream cost a reusing neighbour bandwidth only (training seed 30
    /// r3: sphinx3 beside a 7-thread stream, 15 times as long as alone in the model,
    /// estimated at 3.8).
    #[test]
    fn a_stream_costs_a_reusing_neighbour_its_cache() {
        let mut p = proc_on(100, "reuser", 0, 10.0, 1.2);
        p.cache_reuse = Some(0.9);
        let mut stream = proc_on(101, "stream", 0, 100.0, 1.55);
        stream.cache_reuse = Some(0.0);
        let snap = two_nodes(vec![p, stream]);
        let layout = at(&snap, &[0, 1]);
        let params = AutoParams::default();
        let search = Search::new(&layout, &params);
        let bandwidth = 0.2 * 100.0 / THRESHOLD;
        let capacity = params.capacity_weight * 0.2 * 0.9 * 100.0 / THRESHOLD;
        let got = search.contention_cost(0);
        assert!((got - bandwidth - capacity).abs() < 1e-9, "{got}");
        // The stream itself reuses nothing: the reuser's misses cost it bandwidth only.
        let theirs = search.contention_cost(1);
        assert!((theirs - 0.55 * 10.0 / THRESHOLD).abs() < 1e-9, "{theirs}");
    }
}
