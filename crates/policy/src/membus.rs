//! Memory-bus-aware co-scheduling, after Tudu, Majo, Gauch, Chen & Gross, "Memory bus
//! aware scheduling": on a 2 × Xeon E5345 two high-bandwidth programs sharing
//! a bus slow each other by ~40%, while a high paired with a low costs the high one 4–7%.
//!
//! Algorithm, per plan:
//! 1. Classify each process *high* or *low* bandwidth: from `bandwidth_gbps` when known
//!    (high ≥ [`MemBusParams::high_bandwidth_gbps`], default 1 GB/s: a SPEC CPU2006
//!    program above it, such as lbm or soplex, saturates a shared FSB controller, one
//!    below it, like gromacs or hmmer, does not), otherwise from MPKI (high ≥
//!    [`MemBusParams::high_mpki`], default 5). Without either it is low, the reading that
//!    never displaces anyone on a guess. A process's *bus weight* is its bandwidth, or its
//!    MPKI scaled so that both thresholds coincide (5 MPKI ≙ 1 GB/s by default).
//! 2. Bus domains are the LLC domains: on the `xeon-e5345` preset these are the dies (two
//!    cores sharing an L2 and a bus controller) and `Llc.package` is the front-side bus.
//!    On a NUMA machine each LLC domain is taken as a bus domain too, with its package
//!    (normally its node) as the shared link.
//! 3. Highs are placed first, heaviest first: each takes a domain with room that carries
//!    the fewest highs, preferring domains near its home node (so on NUMA machines the
//!    home node wins whenever it has a die without a high), then the package and die with
//!    the least bandwidth. So highs never share a die while a die without one has room,
//!    and they alternate over packages; once highs outnumber dies, two highs go to the
//!    die/package with the least total bandwidth.
//! 4. Lows follow, heaviest first, each to the domain with room and the least
//!    bandwidth (nearest home first), which puts one low beside each high when cores are
//!    full, and the heaviest low beside the lightest high.
//! 5. When no CPU is free (more tasks than cores), a task time-shares the least-loaded
//!    CPUs of the domain chosen by the same keys, with load ranked before bandwidth for
//!    lows so that time slices stay fair; highs still spread over domains first.
//!
//! Processes with a foreign pin are planned first, inside their pin, because they have
//! the fewest choices. The published scheduler also rotates tasks through a round-robin
//! list with SIGSTOP/SIGCONT when tasks outnumber cores and re-measures a task's demand
//! alone whenever its memory-instruction share changes by > 4%: both are the daemon's
//! job across epochs, not a plan's.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::alloc::{self, Occupancy};
use crate::{Placement, Plan, Policy, Process, Snapshot};
use numasched_model::topology::Topology;

#[derive(Debug, Clone, PartialEq)]
pub struct MemBusParams {
    /// DRAM bandwidth (GB/s, alone) from which a process counts as high bandwidth.
    pub high_bandwidth_gbps: f64,
    /// MPKI from which a process without a bandwidth figure counts as high bandwidth.
    pub high_mpki: f64,
}

impl Default for MemBusParams {
    fn default() -> Self {
        MemBusParams {
            high_bandwidth_gbps: 1.0,
            high_mpki: 5.0,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct MemBus {
    pub params: MemBusParams,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    High,
    Low,
}

/// How a process loads the memory bus, and the evidence for it (for the reason line).
#[derive(Debug, Clone, PartialEq)]
pub struct BusDemand {
    pub class: Class,
    /// GB/s, or MPKI scaled to GB/s-equivalents.
    pub weight: f64,
    pub evidence: String,
}

impl MemBusParams {
    pub fn classify(&self, p: &Process) -> BusDemand {
        if let Some(bw) = p.bandwidth_gbps.filter(|b| b.is_finite()) {
            let bw = bw.max(0.0);
            return BusDemand {
                class: if bw >= self.high_bandwidth_gbps {
                    Class::High
                } else {
                    Class::Low
                },
                weight: bw,
                evidence: format!("{bw:.2} GB/s"),
            };
        }
        if let Some(m) = p.mpki.filter(|m| m.is_finite()) {
            let m = m.max(0.0);
            let scale = if self.high_mpki > 0.0 {
                self.high_bandwidth_gbps / self.high_mpki
            } else {
                1.0
            };
            return BusDemand {
                class: if m >= self.high_mpki {
                    Class::High
                } else {
                    Class::Low
                },
                weight: m * scale,
                evidence: format!("{m:.1} MPKI"),
            };
        }
        BusDemand {
            class: Class::Low,
            weight: 0.0,
            evidence: "no bandwidth or MPKI known".into(),
        }
    }
}

/// Bandwidth already placed on each bus domain and package.
struct BusState {
    highs: Vec<f64>,
    bw: Vec<f64>,
    pkg_bw: BTreeMap<u32, f64>,
}

fn lexi(a: &[f64], b: &[f64]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.total_cmp(y) {
            Ordering::Equal => continue,
            o => return o,
        }
    }
    Ordering::Equal
}

impl Policy for MemBus {
    fn name(&self) -> &str {
        "membus"
    }

    fn plan(&self, snapshot: &Snapshot) -> Plan {
        let topo = &snapshot.topology;
        let mut occ = Occupancy::for_snapshot(snapshot);
        let mut state = BusState {
            highs: vec![0.0; topo.llcs().len()],
            bw: vec![0.0; topo.llcs().len()],
            pkg_bw: BTreeMap::new(),
        };
        let demands: Vec<BusDemand> = snapshot
            .processes
            .iter()
            .map(|p| self.params.classify(p))
            .collect();
        let mut order: Vec<usize> = (0..snapshot.processes.len()).collect();
        order.sort_by(|&a, &b| {
            let pa = &snapshot.processes[a];
            let pb = &snapshot.processes[b];
            let unpinned = |p: &Process| !is_pinned(topo, p);
            (unpinned(pa), demands[a].class == Class::Low)
                .cmp(&(unpinned(pb), demands[b].class == Class::Low))
                .then(demands[b].weight.total_cmp(&demands[a].weight))
                .then(a.cmp(&b))
        });
        let mut out: Vec<Option<Placement>> = vec![None; snapshot.processes.len()];
        for i in order {
            let p = &snapshot.processes[i];
            out[i] = Some(place(topo, &mut occ, &mut state, p, &demands[i]));
        }
        let placements = out
            .into_iter()
            .zip(&snapshot.processes)
            .map(|(pl, p)| pl.unwrap_or_else(|| Placement::unchanged(p.pid, "not planned".into())))
            .collect();
        Plan::new(self.name(), placements)
    }
}

fn is_pinned(topo: &Topology, p: &Process) -> bool {
    p.allowed_cpus.is_some() && alloc::allowed(topo, p).len() < topo.num_cpus()
}

fn place(
    topo: &Topology,
    occ: &mut Occupancy,
    state: &mut BusState,
    p: &Process,
    d: &BusDemand,
) -> Placement {
    let allowed = alloc::allowed(topo, p);
    if allowed.is_empty() {
        return Placement::unchanged(p.pid, "no allowed CPU exists on this machine".into());
    }
    let slots = p.slots();
    let home = p.home_node().and_then(|n| topo.node_index(n));
    // Allowed CPUs grouped by bus domain, in LLC order.
    let mut domains: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &c in &allowed {
        domains.entry(topo.cpus()[c].llc).or_default().push(c);
    }
    let mut ranked: Vec<(Vec<f64>, usize)> = domains
        .iter()
        .map(|(&llc, cpus)| {
            let free = occ.free_count(cpus.iter().copied());
            // Idle cores first; free SMT siblings of busy cores only after them.
            let fit = if occ.idle_cores(cpus.iter().copied()) >= slots {
                0.0
            } else if free >= slots {
                0.5
            } else if free > 0 {
                1.0
            } else {
                2.0
            };
            let load = cpus.iter().map(|&c| occ.load(c)).sum::<f64>() / cpus.len() as f64;
            let node = topo.llcs()[llc].node;
            let dist = home.map_or(0.0, |h| topo.distance(h, node) as f64);
            let pkg_bw = *state.pkg_bw.get(&topo.llcs()[llc].package).unwrap_or(&0.0);
            let key = match d.class {
                Class::High => vec![fit, state.highs[llc], dist, pkg_bw, state.bw[llc], load],
                Class::Low => {
                    let crowd = if fit > 1.0 { load } else { 0.0 };
                    vec![fit, dist, crowd, state.bw[llc], pkg_bw, load]
                }
            };
            (key, llc)
        })
        .collect();
    ranked.sort_by(|a, b| lexi(&a.0, &b.0).then(a.1.cmp(&b.1)));
    let Some((best_key, best)) = ranked.first().cloned() else {
        return Placement::unchanged(p.pid, "no allowed CPU exists on this machine".into());
    };
    let highs_before = state.highs[best];
    let bw_before = state.bw[best];
    let mut chosen: Vec<usize> = Vec::with_capacity(slots);
    for (_, llc) in &ranked {
        if chosen.len() >= slots {
            break;
        }
        let cpus = &domains[llc];
        chosen.extend(occ.pick(cpus, slots - chosen.len()));
    }
    occ.add(&chosen, p.cpu_demand.min(chosen.len() as f64));
    let share = 1.0 / chosen.len().max(1) as f64;
    for &c in &chosen {
        let llc = topo.cpus()[c].llc;
        if d.class == Class::High {
            state.highs[llc] += share;
        }
        state.bw[llc] += d.weight * share;
        *state.pkg_bw.entry(topo.llcs()[llc].package).or_default() += d.weight * share;
    }
    let llc = &topo.llcs()[best];
    let whence = format!(
        "bus domain LLC {} (package {}, node {})",
        best,
        llc.package,
        topo.nodes()[llc.node].id
    );
    let why = match (d.class, best_key[0] > 1.0) {
        (_, true) => "no free CPU left, so it time-shares the least-loaded CPUs there".to_string(),
        (Class::High, false) if highs_before < 1e-9 => {
            "no other high-bandwidth task on that bus".to_string()
        }
        (Class::High, false) => format!(
            "every bus already carries a high-bandwidth task; this one had the least traffic ({bw_before:.1} GB/s)"
        ),
        (Class::Low, false) if bw_before < 1e-9 => "that bus was idle".to_string(),
        (Class::Low, false) => {
            format!("paired with {bw_before:.1} GB/s of traffic, the lightest bus with room")
        }
    };
    let class = match d.class {
        Class::High => "high bandwidth",
        Class::Low => "low bandwidth",
    };
    Placement::new(
        topo,
        p.pid,
        alloc::ids(topo, &chosen),
        format!("{class} ({}): {whence}; {why}", d.evidence),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::testkit;
    use numasched_model::topology;
    use proptest::prelude::*;

    fn proc_bw(pid: u32, name: &str, bw: f64) -> Process {
        let mut p = Process::new(pid, name);
        p.bandwidth_gbps = Some(bw);
        p
    }

    fn e5345(procs: Vec<Process>) -> Snapshot {
        Snapshot {
            topology: topology::machine("xeon-e5345").unwrap(),
            processes: procs,
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        }
    }

    /// LLC (die) index of each placement's single CPU.
    fn dies(s: &Snapshot, plan: &Plan) -> Vec<usize> {
        plan.placements
            .iter()
            .map(|pl| {
                assert_eq!(pl.cpus.len(), 1, "{pl:?}");
                s.topology.cpu(pl.cpus[0]).unwrap().llc
            })
            .collect()
    }

    fn paper_mix() -> Vec<Process> {
        // Interleaved on purpose, so the result cannot come from snapshot order.
        vec![
            proc_bw(1, "lbm", 4.5),
            proc_bw(2, "gromacs", 0.2),
            proc_bw(3, "soplex", 3.0),
            proc_bw(4, "hmmer", 0.1),
            proc_bw(5, "lbm", 4.5),
            proc_bw(6, "gromacs", 0.2),
            proc_bw(7, "soplex", 3.0),
            proc_bw(8, "hmmer", 0.1),
        ]
    }

    #[test]
    fn classifies_from_bandwidth_then_mpki() {
        let params = MemBusParams::default();
        assert_eq!(params.classify(&proc_bw(1, "lbm", 4.5)).class, Class::High);
        assert_eq!(params.classify(&proc_bw(1, "x", 1.0)).class, Class::High);
        assert_eq!(params.classify(&proc_bw(1, "x", 0.99)).class, Class::Low);
        let mut p = Process::new(1, "mcf");
        p.mpki = Some(5.0);
        let d = params.classify(&p);
        assert_eq!(d.class, Class::High);
        assert!((d.weight - 1.0).abs() < 1e-12, "5 MPKI ≙ 1 GB/s");
        p.mpki = Some(4.9);
        assert_eq!(params.classify(&p).class, Class::Low);
        // Bandwidth wins over MPKI when both are known.
        p.bandwidth_gbps = Some(0.1);
        p.mpki = Some(40.0);
        assert_eq!(params.classify(&p).class, Class::Low);
        let unknown = params.classify(&Process::new(1, "x"));
        assert_eq!((unknown.class, unknown.weight), (Class::Low, 0.0));
    }

    #[test]
    fn paper_workload_pairs_one_high_with_one_low_per_die() {
        let s = e5345(paper_mix());
        let plan = MemBus::default().plan(&s);
        let d = dies(&s, &plan);
        let high = |i: usize| s.processes[i].bandwidth_gbps.unwrap() >= 1.0;
        let mut per_die = [(0, 0); 4];
        let mut per_pkg = [0; 2];
        for (i, &die) in d.iter().enumerate() {
            if high(i) {
                per_die[die].0 += 1;
                per_pkg[s.topology.llcs()[die].package as usize] += 1;
            } else {
                per_die[die].1 += 1;
            }
        }
        assert_eq!(per_die, [(1, 1); 4], "{plan:#?}");
        assert_eq!(per_pkg, [2, 2]);
        // The two lbm copies (heaviest) sit on different packages.
        let pk = |i: usize| s.topology.llcs()[d[i]].package;
        assert_ne!(pk(0), pk(4));
        // All eight cores used, one task each.
        let mut cpus: Vec<u32> = plan.placements.iter().map(|p| p.cpus[0]).collect();
        cpus.sort_unstable();
        assert_eq!(cpus, (0..8).collect::<Vec<_>>());
        assert!(plan.placements[1]
            .reason
            .starts_with("low bandwidth (0.20 GB/s)"));
        assert!(
            plan.placements[1].reason.contains("paired with"),
            "{}",
            plan.placements[1].reason
        );
        assert!(plan.placements[0]
            .reason
            .contains("no other high-bandwidth task"));
    }

    #[test]
    fn mpki_alone_gives_the_same_pairing() {
        let procs = paper_mix()
            .into_iter()
            .map(|mut p| {
                p.mpki = Some(p.bandwidth_gbps.unwrap() * 5.0);
                p.bandwidth_gbps = None;
                p
            })
            .collect();
        let s = e5345(procs);
        let d = dies(&s, &MemBus::default().plan(&s));
        for die in 0..4 {
            let highs = (0..8)
                .filter(|&i| d[i] == die && s.processes[i].mpki.unwrap() >= 5.0)
                .count();
            assert_eq!(highs, 1);
        }
    }

    #[test]
    fn few_highs_get_a_die_to_themselves_on_alternate_packages() {
        let s = e5345(vec![proc_bw(1, "lbm", 4.5), proc_bw(2, "soplex", 3.0)]);
        let d = dies(&s, &MemBus::default().plan(&s));
        assert_ne!(
            s.topology.llcs()[d[0]].package,
            s.topology.llcs()[d[1]].package
        );
    }

    #[test]
    fn all_high_doubles_up_on_the_least_loaded_bus() {
        let procs: Vec<Process> = [5.0, 4.0, 3.0, 2.0, 1.5, 1.2]
            .iter()
            .enumerate()
            .map(|(i, &bw)| proc_bw(i as u32 + 1, "hi", bw))
            .collect();
        let s = e5345(procs);
        let plan = MemBus::default().plan(&s);
        let d = dies(&s, &plan);
        // The four heaviest spread over the four dies.
        let mut first: Vec<usize> = d[..4].to_vec();
        first.sort_unstable();
        assert_eq!(first, vec![0, 1, 2, 3]);
        // Packages tie (5 + 2 = 4 + 3), so the fifth joins the lightest die (2.0); its
        // package is then heavier, so the sixth joins the other package's lighter die (3.0).
        let die_of = |bw: f64| {
            d[s.processes
                .iter()
                .position(|p| p.bandwidth_gbps == Some(bw))
                .unwrap()]
        };
        assert_eq!(d[4], die_of(2.0));
        assert_eq!(d[5], die_of(3.0));
        assert!(plan.placements[4]
            .reason
            .contains("every bus already carries"));
    }

    #[test]
    fn all_low_fills_every_core_once() {
        let procs: Vec<Process> = (1..=8).map(|i| proc_bw(i, "hmmer", 0.1)).collect();
        let s = e5345(procs);
        let plan = MemBus::default().plan(&s);
        let mut cpus: Vec<u32> = plan.placements.iter().map(|p| p.cpus[0]).collect();
        cpus.sort_unstable();
        assert_eq!(cpus, (0..8).collect::<Vec<_>>());
        // Lows spread over idle buses before sharing one.
        let d = dies(&s, &plan);
        let mut first: Vec<usize> = d[..4].to_vec();
        first.sort_unstable();
        assert_eq!(first, vec![0, 1, 2, 3]);
    }

    #[test]
    fn pins_are_respected_and_planned_first() {
        let mut procs = paper_mix();
        // Pin the last lbm to die 0's cores: it must land there, and the other lbm
        // (placed after it) must avoid die 0.
        procs[4].allowed_cpus = Some(vec![0, 1].into());
        procs[1].allowed_cpus = Some(vec![7].into());
        let s = e5345(procs);
        let plan = MemBus::default().plan(&s);
        assert!(plan.placements[4].cpus.iter().all(|c| [0, 1].contains(c)));
        assert_eq!(plan.placements[1].cpus, vec![7]);
        let d = dies(&s, &plan);
        assert_ne!(d[0], d[4]);
        for die in 0..4 {
            let highs = (0..8)
                .filter(|&i| d[i] == die && s.processes[i].bandwidth_gbps.unwrap() >= 1.0)
                .count();
            assert_eq!(highs, 1, "{plan:#?}");
        }
    }

    #[test]
    fn overcommit_time_shares_least_loaded_and_keeps_highs_apart() {
        let mut procs = paper_mix();
        procs.extend(paper_mix().into_iter().map(|mut p| {
            p.pid += 10;
            p
        }));
        let s = e5345(procs);
        let plan = MemBus::default().plan(&s);
        let mut per_cpu = [0; 8];
        let d = dies(&s, &plan);
        let mut highs = [0; 4];
        for (i, pl) in plan.placements.iter().enumerate() {
            per_cpu[pl.cpus[0] as usize] += 1;
            if s.processes[i].bandwidth_gbps.unwrap() >= 1.0 {
                highs[d[i]] += 1;
            }
        }
        assert_eq!(per_cpu, [2; 8], "{plan:#?}");
        assert_eq!(highs, [2; 4]);
        assert!(plan
            .placements
            .iter()
            .any(|p| p.reason.contains("time-shares")));
    }

    #[test]
    fn numa_machine_prefers_home_node() {
        let t = topology::machine("2n:2l:2c:1t").unwrap();
        let mut procs = Vec::new();
        for i in 0..4 {
            let mut p = proc_bw(i + 1, "lbm", 4.0);
            p.memory_bytes.insert(1, 1 << 30);
            procs.push(p);
        }
        let s = Snapshot {
            topology: t,
            processes: procs,
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        };
        let plan = MemBus::default().plan(&s);
        // The first two get node 1's two dies; the others spill to node 0's dies
        // rather than doubling up at home.
        assert_eq!(plan.placements[0].nodes, vec![1]);
        assert_eq!(plan.placements[1].nodes, vec![1]);
        let d = dies(&s, &plan);
        let mut all = d.clone();
        all.sort_unstable();
        assert_eq!(all, vec![0, 1, 2, 3]);
    }

    #[test]
    fn multi_threaded_group_stays_on_one_bus_when_it_fits() {
        let mut p = proc_bw(1, "stream", 6.0);
        p.threads = 2;
        p.cpu_demand = 2.0;
        let s = e5345(vec![proc_bw(9, "lbm", 5.0), p]);
        let plan = MemBus::default().plan(&s);
        let pl = &plan.placements[1];
        assert_eq!(pl.cpus.len(), 2);
        let llcs: Vec<usize> = pl
            .cpus
            .iter()
            .map(|&c| s.topology.cpu(c).unwrap().llc)
            .collect();
        assert_eq!(llcs[0], llcs[1]);
        // The heavier group went first and lbm avoided its package.
        let lbm_llc = s.topology.cpu(plan.placements[0].cpus[0]).unwrap().llc;
        assert_ne!(
            s.topology.llcs()[lbm_llc].package,
            s.topology.llcs()[llcs[0]].package
        );
    }

    #[test]
    fn empty_and_degenerate_snapshots() {
        let s = e5345(vec![]);
        assert!(MemBus::default().plan(&s).placements.is_empty());
        let mut p = Process::new(1, "x");
        p.cpu_demand = 0.0;
        let s = e5345(vec![p]);
        assert_eq!(MemBus::default().plan(&s).placements[0].cpus.len(), 1);
    }

    proptest! {
        #[test]
        fn plans_are_well_formed(raw in testkit::raw_snapshot()) {
            let s = testkit::build(&raw);
            let plan = MemBus::default().plan(&s);
            testkit::check_plan(&s, &plan)?;
            for pl in &plan.placements {
                prop_assert!(!pl.cpus.is_empty());
            }
        }
    }
}
