//! What a plan's CPUs become when applied: the unit of placement.
//!
//! N-MASS decides which cache and which memory node a process shares, not which core it
//! runs on (Majo & Gross). Pinning each process to the one CPU a policy happened to
//! pick takes the kernel's load balancing away inside that cache: a thread created
//! later inherits a single CPU, a stopped neighbour leaves its CPU idle while two
//! threads queue on another. So by default ([`Pin::Llc`]) a process is given every CPU
//! of the LLC domains the policy chose for it, intersected with any pin someone else
//! set, and the kernel balances inside them. `core` and `cpu` are the hard pinning an
//! operator may ask for.
//!
//! [`Granular`] wraps any policy and also decides who the policy sees:
//! - processes using almost no CPU are not planned at all: they keep (or get back)
//!   every CPU they are allowed, and take no CPU from a busy process;
//! - at the soft granularities (LLC, node), a process nothing is known of (no MPKI,
//!   no NUMA penalty) is confined only where the evidence is plain: most of a
//!   sizeable memory on the node(s) the policy chose, with room there (CPUs no other
//!   placement or others' work holds). It is then given the whole node(s), as numad
//!   binds, since locality is all that is known of it; anywhere else it is left to
//!   the kernel ([`locality_only`]);
//! - a policy that leaves placement to the kernel (`linux`) changes nothing: every
//!   process may run wherever it is allowed;
//! - the rest are handed to the policy busiest first, so where it breaks ties by
//!   order, CPU demand decides who gets a free CPU, not the pid;
//! - with hard pinning, placements that would only trade CPUs inside an LLC stay
//!   where they run ([`sticky`]), and a planned CPU that others' work keeps busy is
//!   swapped for an idle one of its LLC ([`crowded`]);
//! - with hard pinning, processes on an LLC where the plan makes some time-share a
//!   CPU (with each other, or with others' work) get the whole LLC instead: pinned
//!   2-to-a-CPU beside one alone on the next CPU, three equal loads on two CPUs would
//!   run at 100/50/50 where the kernel gives each two thirds. Likewise where work
//!   the kernel cannot move holds some of the LLC's CPUs and the planned threads and
//!   others' work, free to move or not (`others_demand`), outnumber its CPUs: the
//!   free work's one place to wait is then beside the pinned process.
//!
//! Pure, like every policy: the daemon, `plan`, the simulator and tests share it.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{crowded, sticky, Placement, Plan, Policy, Process, Snapshot};
use numasched_model::character::prior::Prior;
use numasched_model::topology::{CpuId, Topology};
use numasched_model::CpuSet;

/// CPUs' worth of demand below which a process counts as idle and is not placed.
/// One tenth of a CPU: a shell, a sleeping server, a monitoring agent.
pub const IDLE_DEMAND: f64 = 0.1;

/// What a planned CPU widens to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pin {
    /// Every CPU of the chosen LLC domains (the default).
    #[default]
    Llc,
    /// Every CPU of the chosen nodes.
    Node,
    /// Every hardware thread of the chosen cores (hard pinning).
    Core,
    /// Exactly the chosen CPUs (hard pinning).
    Cpu,
}

pub const PIN_NAMES: &[&str] = &["llc", "node", "core", "cpu"];

impl FromStr for Pin {
    type Err = String;
    fn from_str(s: &str) -> Result<Pin, String> {
        match s {
            "llc" => Ok(Pin::Llc),
            "node" => Ok(Pin::Node),
            "core" => Ok(Pin::Core),
            "cpu" => Ok(Pin::Cpu),
            _ => Err(format!(
                "unknown pin granularity '{s}' (known: {})",
                PIN_NAMES.join(", ")
            )),
        }
    }
}

impl fmt::Display for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pin::Llc => "llc",
            Pin::Node => "node",
            Pin::Core => "core",
            Pin::Cpu => "cpu",
        })
    }
}

/// A policy whose plans are applied at [`Pin`] granularity (see the module doc).
pub struct Granular {
    pub inner: Box<dyn Policy>,
    pub pin: Pin,
    /// Processes under this demand (CPUs' worth) are idle: not planned.
    pub idle_below: f64,
}

impl Granular {
    pub fn new(inner: Box<dyn Policy>, pin: Pin) -> Granular {
        Granular {
            inner,
            pin,
            idle_below: IDLE_DEMAND,
        }
    }
}

impl Policy for Granular {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn uses_current_placement(&self) -> bool {
        self.inner.uses_current_placement()
    }

    fn plan(&self, snapshot: &Snapshot) -> Plan {
        let topo = &snapshot.topology;
        if self.inner.leaves_to_kernel() {
            return kernel_plan(self.inner.name(), snapshot);
        }
        let (busy, idle): (Vec<&Process>, Vec<&Process>) = snapshot
            .processes
            .iter()
            .partition(|p| p.cpu_demand >= self.idle_below);
        let mut busy: Vec<Process> = busy.into_iter().cloned().collect();
        // Stable: equal demands keep the snapshot's order.
        busy.sort_by(|a, b| b.cpu_demand.total_cmp(&a.cpu_demand));
        let seen = Snapshot {
            topology: topo.clone(),
            processes: busy,
            others_pinned: snapshot.others_pinned.clone(),
            others_taken: snapshot.others_taken.clone(),
            others_demand: snapshot.others_demand.clone(),
        };
        let mut inner = if seen.processes.is_empty() {
            Plan::new(self.inner.name(), Vec::new())
        } else {
            self.inner.plan(&seen)
        };
        if hard(self.pin) {
            inner = sticky::stay_put(topo, &seen, inner);
            inner = crowded::away_from_others(topo, &seen, inner);
        }
        let shared = time_shared_llcs(topo, &inner, snapshot);
        let mut placements = Vec::with_capacity(snapshot.processes.len());
        // Processes left to the kernel for lack of evidence: their pages stay too.
        let mut unplaced = BTreeSet::new();
        for p in &snapshot.processes {
            let planned = inner.placements.iter().find(|pl| pl.pid == p.pid);
            let pl = match planned {
                // Left as it is (numad's one move per scan): as it is.
                Some(pl) if pl.cpus.is_empty() => pl.clone(),
                Some(pl) if !hard(self.pin) && uncharacterised(p) => {
                    locality_only(&seen, &inner, p, pl).unwrap_or_else(|why| {
                        unplaced.insert(p.pid);
                        unknown_placement(topo, p, &why)
                    })
                }
                Some(pl) => applied_one(topo, p, pl, self.pin, &shared),
                None if idle.iter().any(|i| i.pid == p.pid) => idle_placement(topo, p),
                None => Placement::unchanged(p.pid, "not planned".into()),
            };
            placements.push(pl);
        }
        Plan {
            policy: inner.policy,
            placements,
            page_moves: inner
                .page_moves
                .into_iter()
                .filter(|m| !unplaced.contains(&m.pid))
                .collect(),
            proven_optimal: inner.proven_optimal,
        }
    }
}

/// `plan` as it runs when applied at `pin`: each placement widened to its unit, and at
/// the hard granularities to its whole LLC where the plan makes CPUs time-share there
/// (see [`time_shared_llcs`]). The part of [`Granular`] that is about the unit alone,
/// for a search that must score plans as they will run (the simulator's oracle).
pub fn as_applied(snapshot: &Snapshot, plan: Plan, pin: Pin) -> Plan {
    let topo = &snapshot.topology;
    let shared = if hard(pin) {
        time_shared_llcs(topo, &plan, snapshot)
    } else {
        BTreeSet::new()
    };
    let placements = plan
        .placements
        .iter()
        .map(
            |pl| match snapshot.processes.iter().find(|p| p.pid == pl.pid) {
                Some(p) if !pl.cpus.is_empty() => applied_one(topo, p, pl, pin, &shared),
                _ => pl.clone(),
            },
        )
        .collect();
    Plan { placements, ..plan }
}

/// One placement as applied at `pin`, `shared` being the LLCs whose CPUs the plan
/// makes time-share (empty at the soft granularities).
fn applied_one(
    topo: &Topology,
    p: &Process,
    pl: &Placement,
    pin: Pin,
    shared: &BTreeSet<usize>,
) -> Placement {
    if hard(pin) && on_llcs(topo, &pl.cpus, shared) {
        let mut w = widen(topo, p, pl, Pin::Llc);
        w.reason
            .push_str(" (its LLC time-shares CPUs: all of it, for fair shares)");
        w
    } else {
        widen(topo, p, pl, pin)
    }
}

fn hard(pin: Pin) -> bool {
    matches!(pin, Pin::Core | Pin::Cpu)
}

/// LLCs with a CPU the plan gives to more than one process, or to one while others'
/// work the kernel cannot move keeps it busy (see [`crowded`]), or overbooked: where
/// such work sits on some of its CPUs and not others, and the planned threads and
/// others' work, free to move or not, outnumber its CPUs by [`OVERBOOKED`]. Work free
/// to move must then wait somewhere, and the pinned work leaves it one place to go:
/// beside the hard-pinned process, which the kernel can no longer move away from it
/// (the no_harm bench's load pinned beside a `taskset -c 0` one read 0.956 of its
/// unmanaged rate). Where nothing is pinned the free work spreads evenly, and the
/// pin costs nothing the kernel's own balancing would not.
fn time_shared_llcs(topo: &Topology, plan: &Plan, snapshot: &Snapshot) -> BTreeSet<usize> {
    let mut seen = BTreeSet::new();
    let mut shared = BTreeSet::new();
    let mut planned = vec![0usize; topo.llcs().len()];
    for c in plan.placements.iter().flat_map(|pl| pl.cpus.iter()) {
        let Some(llc) = topo.cpu(*c).map(|cpu| cpu.llc) else {
            continue;
        };
        planned[llc] += 1;
        if !seen.insert(*c) || crowded::is_crowded(topo, &snapshot.others_pinned, *c) {
            shared.insert(llc);
        }
    }
    for (l, llc) in topo.llcs().iter().enumerate() {
        if planned[l] == 0
            || !llc
                .cpus
                .iter()
                .any(|c| crowded::is_crowded(topo, &snapshot.others_pinned, *c))
        {
            continue;
        }
        let others: f64 = llc
            .cpus
            .iter()
            .filter_map(|c| snapshot.others_demand.get(c))
            .sum();
        if planned[l] as f64 + others > llc.cpus.len() as f64 + OVERBOOKED {
            shared.insert(l);
        }
    }
    shared
}

/// Threads' worth by which the threads on a cache may outnumber its CPUs before a hard
/// pin there counts as time-sharing: half a thread waiting, above what a main thread's
/// wait and a sampling epoch blur.
pub const OVERBOOKED: f64 = 0.5;

fn on_llcs(topo: &Topology, cpus: &[CpuId], llcs: &BTreeSet<usize>) -> bool {
    cpus.iter()
        .any(|c| topo.cpu(*c).is_some_and(|cpu| llcs.contains(&cpu.llc)))
}

/// An idle process gets every CPU it may use: whatever narrower set it had from an
/// earlier plan is given back, and it takes no CPU from anyone.
fn idle_placement(topo: &Topology, p: &Process) -> Placement {
    Placement::new(
        topo,
        p.pid,
        p.may_run_on(topo),
        format!(
            "idle ({:.2} CPUs): not placed, may run on every CPU it is allowed",
            p.cpu_demand
        ),
    )
}

/// Nothing is known of how the process uses memory: no MPKI, no NUMA penalty (no
/// counters, no profile, nothing learned). Its penalty is not zero, though (the prior,
/// [`Prior`]), and where it stands is plain: which nodes hold its pages. So the one
/// thing numad and the kernel's NUMA balancing would do is done: where the policy put
/// it on the node(s) holding most of a memory large enough to matter, with room there,
/// it is given all of those nodes. Nothing else is (not an LLC: what it does to a
/// cache is unknown), so elsewhere it is left to the kernel. Hard pinning is an
/// operator's explicit choice and pins as planned.
fn uncharacterised(p: &Process) -> bool {
    p.mpki.is_none() && p.numa_penalty.is_none()
}

/// Memory below which locality is not worth a confinement: twice the largest LLC (a
/// footprint that fits in cache barely touches memory), and at least 64 MiB.
fn locality_floor(topo: &Topology) -> u64 {
    let llc = topo.llcs().iter().map(|l| l.size_bytes).max().unwrap_or(0);
    (2 * llc).max(64 << 20)
}

/// The placement of an uncharacterised process on the nodes holding its memory, or why
/// not (see [`uncharacterised`]).
fn locality_only(
    seen: &Snapshot,
    plan: &Plan,
    p: &Process,
    pl: &Placement,
) -> Result<Placement, String> {
    let topo = &seen.topology;
    let rss = p.rss_bytes();
    let floor = locality_floor(topo);
    if rss < floor {
        return Err(format!(
            "its {} MiB of memory is under {} MiB, too little for locality to matter",
            rss >> 20,
            floor >> 20
        ));
    }
    // Pages the plan itself moves there count as there (numad's bind moves them).
    let moved: u64 = plan
        .page_moves
        .iter()
        .filter(|m| {
            m.pid == p.pid && pl.nodes.contains(&m.to_node) && !pl.nodes.contains(&m.from_node)
        })
        .map(|m| m.bytes)
        .sum();
    let there: u64 = pl
        .nodes
        .iter()
        .filter_map(|n| p.memory_bytes.get(n))
        .sum::<u64>()
        + moved;
    let nodes = node_list(&pl.nodes);
    if 2 * there <= rss {
        return Err(format!(
            "the policy placed it away from most of its memory ({} of {} MiB on \
             node {nodes})",
            there >> 20,
            rss >> 20
        ));
    }
    let shared = pl.cpus.iter().any(|c| {
        seen.others_taken.contains(*c)
            || plan
                .placements
                .iter()
                .any(|o| o.pid != p.pid && o.cpus.contains(*c))
    });
    if shared {
        return Err(format!(
            "node {nodes}, where its memory is, has no CPU free of other work"
        ));
    }
    let prior = Prior::for_topology(topo);
    let ran: Vec<_> = topo
        .nodes()
        .iter()
        .filter(|n| n.cpus.iter().any(|c| p.current_cpus.contains(*c)))
        .map(|n| n.id)
        .collect();
    let was = if ran.is_empty() || ran == pl.nodes {
        String::new()
    } else {
        format!(", moved from node {}", node_list(&ran))
    };
    let follows = if moved > 0 {
        format!(" ({} MiB of it moved there by this plan)", moved >> 20)
    } else {
        String::new()
    };
    let mut out = widen(topo, p, pl, Pin::Node);
    out.reason = format!(
        "not characterised, assumed {}: {} of its {} MiB is on node {nodes}{follows}, \
         which has room: placed there{was}, on all of its CPUs, as numad would",
        prior.describe(),
        there.min(rss) >> 20,
        rss >> 20
    );
    Ok(out)
}

fn node_list(nodes: &[numasched_model::topology::NodeId]) -> String {
    nodes
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn unknown_placement(topo: &Topology, p: &Process, why: &str) -> Placement {
    Placement::new(
        topo,
        p.pid,
        p.may_run_on(topo),
        format!(
            "not characterised (no MPKI or NUMA penalty from counters, a profile or \
             learning) and {why}: left to the kernel, may run on every CPU it is allowed"
        ),
    )
}

/// The plan of a policy that leaves placement to the kernel: nothing narrowed, nothing
/// moved.
fn kernel_plan(policy: &str, snapshot: &Snapshot) -> Plan {
    let topo = &snapshot.topology;
    let placements = snapshot
        .processes
        .iter()
        .map(|p| {
            Placement::new(
                topo,
                p.pid,
                p.may_run_on(topo),
                format!(
                    "{policy}: left to the kernel's scheduler, may run on every CPU it is allowed"
                ),
            )
        })
        .collect();
    Plan::new(policy, placements)
}

/// The placement as applied at granularity `pin`: the planned CPUs widened to their
/// LLCs, nodes or cores, inside the process's foreign pin.
pub fn widen(topo: &Topology, p: &Process, pl: &Placement, pin: Pin) -> Placement {
    if pl.cpus.is_empty() || pin == Pin::Cpu {
        return pl.clone();
    }
    let mut units = BTreeSet::new();
    for &c in &pl.cpus {
        if let Some(cpu) = topo.cpu(c) {
            units.insert(match pin {
                Pin::Llc => cpu.llc,
                Pin::Node => cpu.node,
                Pin::Core | Pin::Cpu => cpu.core,
            });
        }
    }
    let members = |u: usize| -> &[CpuId] {
        match pin {
            Pin::Llc => &topo.llcs()[u].cpus,
            Pin::Node => &topo.nodes()[u].cpus,
            Pin::Core | Pin::Cpu => &topo.cores()[u].cpus,
        }
    };
    let allowed = p.may_run_on(topo);
    let widened: CpuSet = units
        .iter()
        .flat_map(|&u| members(u).iter().copied())
        .filter(|&c| allowed.contains(c))
        .collect();
    // Planned CPUs are kept even outside the units' members as read (they are the
    // policy's own choice, inside the pin by construction).
    let cpus = widened.union(&pl.cpus);
    if cpus == pl.cpus {
        return pl.clone();
    }
    let what = match pin {
        Pin::Llc => "its LLC",
        Pin::Node => "its node",
        Pin::Core | Pin::Cpu => "its core",
    };
    let reason = format!(
        "{}; planned CPUs {}, given all of {what} ({})",
        pl.reason, pl.cpus, cpus
    );
    Placement::new(topo, pl.pid, cpus, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::by_name;
    use numasched_model::topology;

    fn snap(spec: &str, procs: Vec<Process>) -> Snapshot {
        Snapshot {
            topology: topology::machine(spec).expect("spec"),
            processes: procs,
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        }
    }

    fn busy(pid: u32, demand: f64, home: u32) -> Process {
        let mut p = Process::new(pid, "load");
        p.cpu_demand = demand;
        p.threads = demand.ceil().max(1.0) as u32;
        p.memory_bytes.insert(home, 1 << 30);
        p
    }

    fn planned(plan: &Plan, pid: u32) -> &Placement {
        plan.placements
            .iter()
            .find(|pl| pl.pid == pid)
            .expect("placement")
    }

    #[test]
    fn on_one_llc_every_process_keeps_the_whole_machine() {
        // One node, one LLC, two CPUs: no placement can help, so none narrows.
        let s = snap(
            "1n:1l:2c:1t",
            vec![busy(10, 1.0, 0), busy(11, 1.0, 0), busy(12, 1.0, 0)],
        );
        for name in crate::NAMES {
            let g = Granular::new(by_name(name).expect("policy"), Pin::Llc);
            let plan = g.plan(&s);
            for pl in &plan.placements {
                assert!(
                    pl.cpus.is_empty() || pl.cpus == vec![0, 1],
                    "{name}: pid {} got {:?}",
                    pl.pid,
                    pl.cpus
                );
            }
        }
    }

    /// A program numasched does not manage, pinned to node 0's CPUs: a load whose
    /// memory is there must not be confined to them while node 1 idles (the kernel,
    /// left alone, runs it there). Every policy but cmload, whose published rule keeps
    /// a process with local memory on its node whatever the CPU load (Kang et al.).
    #[test]
    fn no_policy_confines_a_load_to_a_node_others_work_holds() {
        let mut s = snap("2n:1l:2c:1t", vec![busy(10, 1.0, 0)]);
        s.processes[0].current_cpus = vec![0].into();
        s.processes[0].mpki = Some(10.0);
        s.processes[0].numa_penalty = Some(1.3);
        s.others_taken = vec![0, 1].into();
        for name in crate::NAMES.iter().filter(|n| **n != "cmload") {
            for pin in [Pin::Llc, Pin::Cpu] {
                let plan = Granular::new(by_name(name).expect("policy"), pin).plan(&s);
                let pl = planned(&plan, 10);
                // Unconfined (the whole machine) is no harm either.
                assert!(
                    pl.cpus.iter().any(|&c| c >= 2),
                    "{name} {pin}: {:?} ({})",
                    pl.cpus,
                    pl.reason
                );
            }
        }
    }

    /// A `taskset -c 0` neighbour numasched does not manage: a hard pin must not put a
    /// load beside it while CPU 1 idles (0.5× for good, found on a 2-CPU machine).
    #[test]
    fn a_hard_pin_keeps_off_a_cpu_others_keep_busy_or_shares_the_llc() {
        let mut one = snap("1n:1l:2c:1t", vec![busy(10, 1.0, 0)]);
        one.others_pinned = [(0, 1.0)].into_iter().collect();
        let mut two = snap("1n:1l:2c:1t", vec![busy(10, 1.0, 0), busy(11, 1.0, 0)]);
        two.others_pinned = one.others_pinned.clone();
        for name in crate::NAMES {
            for pin in [Pin::Cpu, Pin::Core] {
                let g = Granular::new(by_name(name).expect("policy"), pin);
                let cpus = planned(&g.plan(&one), 10).cpus.clone();
                assert!(
                    cpus.is_empty() || !cpus.contains(0) || cpus.len() == 2,
                    "{name} {pin}: alone, put beside others' work on {cpus}"
                );
                for pl in &g.plan(&two).placements {
                    assert!(
                        pl.cpus.is_empty() || pl.cpus.len() == 2,
                        "{name} {pin}: 3 loads on 2 CPUs, pid {} pinned to {}",
                        pl.pid,
                        pl.cpus
                    );
                }
            }
        }
    }

    /// Issue 12: a process nothing is known of is not confined at the soft
    /// granularities (no predicted gain to weigh against a cost no model sees, such as
    /// two busy threads on one LLC's CPUs); known ones are; hard pinning pins both.
    #[test]
    fn a_process_nothing_is_known_of_is_not_confined_at_llc_or_node() {
        let mut known = busy(10, 2.0, 1);
        known.mpki = Some(20.0);
        known.numa_penalty = Some(1.4);
        let unknown = busy(11, 2.0, 1);
        let s = snap("2n:1l:2c:1t", vec![known, unknown]);
        for pin in [Pin::Llc, Pin::Node] {
            let plan = Granular::new(by_name("nmass").expect("policy"), pin).plan(&s);
            assert_eq!(
                planned(&plan, 10).cpus,
                vec![2, 3],
                "{pin}: known, on its home"
            );
            let pl = planned(&plan, 11);
            assert_eq!(pl.cpus, vec![0, 1, 2, 3], "{pin}: unknown, everywhere");
            assert!(pl.reason.contains("not characterised"), "{}", pl.reason);
        }
        let plan = Granular::new(by_name("nmass").expect("policy"), Pin::Cpu).plan(&s);
        assert!(
            planned(&plan, 11).cpus.len() <= 2,
            "hard pinning still pins"
        );
    }

    /// Issue 39: what is plain without counters is acted on, and nothing else.
    #[test]
    fn an_uncharacterised_load_goes_to_its_memory_only_where_that_is_plain() {
        // Memory on node 1, running on node 0, node 1 free: all of node 1.
        let mut away = busy(10, 1.0, 1);
        away.current_cpus = vec![0].into();
        let s = snap("2n:2l:2c:1t", vec![away.clone()]);
        for name in ["auto", "maxlocal", "nmass", "numad", "membus", "cmload"] {
            for pin in [Pin::Llc, Pin::Node] {
                let plan = Granular::new(by_name(name).expect("policy"), pin).plan(&s);
                let pl = planned(&plan, 10);
                assert_eq!(pl.cpus, vec![4, 5, 6, 7], "{name} {pin}: {}", pl.reason);
                assert!(pl.reason.contains("assumed np ~"), "{}", pl.reason);
            }
        }
        let not_placed = |s: &Snapshot, what: &str| {
            let plan = Granular::new(by_name("maxlocal").expect("policy"), Pin::Llc).plan(s);
            let pl = planned(&plan, 10);
            assert_eq!(pl.cpus.len(), 8, "{what}: {}", pl.reason);
            assert!(
                pl.reason.contains("left to the kernel"),
                "{what}: {}",
                pl.reason
            );
        };
        // A small footprint: locality does not matter.
        let mut small = away.clone();
        small.memory_bytes.insert(1, 8 << 20);
        not_placed(&snap("2n:2l:2c:1t", vec![small]), "8 MiB");
        // Memory split evenly: no node holds most of it.
        let mut split = away.clone();
        split.memory_bytes.insert(0, 1 << 30);
        not_placed(&snap("2n:2l:2c:1t", vec![split]), "split");
        // Node 1 held by others' work: never confined beside it.
        let mut held = snap("2n:2l:2c:1t", vec![away]);
        held.others_taken = vec![4, 5, 6, 7].into();
        not_placed(&held, "node 1 held");
    }

    #[test]
    fn linux_changes_nothing() {
        let mut pinned = busy(11, 1.0, 0);
        pinned.allowed_cpus = Some(vec![2, 3].into());
        let s = snap("2n:1l:2c:1t", vec![busy(10, 1.0, 1), pinned]);
        for pin in [Pin::Llc, Pin::Cpu] {
            let plan = Granular::new(by_name("linux").expect("policy"), pin).plan(&s);
            assert_eq!(planned(&plan, 10).cpus, vec![0, 1, 2, 3]);
            assert_eq!(planned(&plan, 11).cpus, vec![2, 3], "inside its own pin");
            assert!(plan.page_moves.is_empty());
        }
    }

    #[test]
    fn llc_node_core_and_cpu_widen_as_named() {
        // 2 nodes x 2 LLCs x 2 cores x 2 threads: CPU 0's core is {0, 8}? Read it.
        let t = topology::machine("2n:2l:2c:2t").expect("spec");
        let cpu0 = t.cpu(0).expect("cpu 0");
        let llc: Vec<CpuId> = t.llcs()[cpu0.llc].cpus.to_vec();
        let node: Vec<CpuId> = t.nodes()[cpu0.node].cpus.to_vec();
        let core: Vec<CpuId> = t.cores()[cpu0.core].cpus.to_vec();
        let p = busy(5, 1.0, 0);
        let pl = Placement::new(&t, 5, vec![0], "r".into());
        let sorted = |mut v: Vec<CpuId>| {
            v.sort_unstable();
            v
        };
        assert_eq!(widen(&t, &p, &pl, Pin::Llc).cpus, sorted(llc));
        assert_eq!(widen(&t, &p, &pl, Pin::Node).cpus, sorted(node));
        assert_eq!(widen(&t, &p, &pl, Pin::Core).cpus, sorted(core));
        assert_eq!(widen(&t, &p, &pl, Pin::Cpu).cpus, vec![0]);
        assert!(widen(&t, &p, &pl, Pin::Llc)
            .reason
            .contains("planned CPUs 0"));
    }

    #[test]
    fn a_foreign_pin_bounds_the_widened_set() {
        let t = topology::machine("1n:1l:4c:1t").expect("spec");
        let mut p = busy(5, 1.0, 0);
        p.allowed_cpus = Some(vec![1, 2].into());
        let pl = Placement::new(&t, 5, vec![1], "r".into());
        assert_eq!(widen(&t, &p, &pl, Pin::Llc).cpus, vec![1, 2]);
    }

    #[test]
    fn idle_processes_take_no_cpu_from_a_busy_one() {
        // Two idle shells with lower pids than the one busy process, one free CPU's
        // worth of room per node: the busy process must be the one placed.
        let mut sh1 = busy(2, 0.0005, 0);
        sh1.program = "sh".into();
        let mut sh2 = busy(3, 0.0005, 0);
        sh2.program = "sh".into();
        let s = snap("2n:1l:1c:1t", vec![sh1, sh2, busy(9, 1.0, 0)]);
        for name in ["nmass", "maxlocal", "auto"] {
            let g = Granular::new(by_name(name).expect("policy"), Pin::Cpu);
            let plan = g.plan(&s);
            assert_eq!(plan.placements.len(), 3, "one placement per process");
            assert_eq!(planned(&plan, 9).cpus, vec![0], "{name}: busy goes local");
            for pid in [2, 3] {
                let pl = planned(&plan, pid);
                assert_eq!(pl.cpus, vec![0, 1], "{name}: idle keeps every CPU");
                assert!(pl.reason.starts_with("idle"), "{}", pl.reason);
            }
        }
    }

    #[test]
    fn hard_pinned_time_sharers_get_their_llc() {
        // Three equal loads on two CPUs of one LLC: pinned, two would share one CPU
        // beside one alone; each gets both CPUs instead and the kernel shares fairly.
        let s = snap(
            "1n:1l:2c:1t",
            vec![busy(1, 1.0, 0), busy(2, 1.0, 0), busy(3, 1.0, 0)],
        );
        let g = Granular::new(by_name("nmass").expect("policy"), Pin::Cpu);
        let plan = g.plan(&s);
        for pl in &plan.placements {
            assert_eq!(pl.cpus, vec![0, 1], "pid {}: {}", pl.pid, pl.reason);
        }
        // Two loads on two CPUs stay hard-pinned.
        let s = snap("1n:1l:2c:1t", vec![busy(1, 1.0, 0), busy(2, 1.0, 0)]);
        let plan = g.plan(&s);
        assert!(plan.placements.iter().all(|pl| pl.cpus.len() == 1));
    }

    #[test]
    fn a_hard_pin_beside_others_work_free_to_move_gets_the_llc_when_threads_outnumber_cpus() {
        // The no_harm bench's case: a managed load, a `taskset -c 0` load and one free
        // to move on two CPUs. Pinned to CPU 1 the managed load left the free one
        // nowhere better to go, and it stayed beside it (0.956 of the unmanaged rate).
        let mut s = snap("1n:1l:2c:1t", vec![busy(1, 1.0, 0)]);
        s.others_pinned = [(0, 1.0)].into_iter().collect();
        s.others_demand = [(0, 1.5), (1, 0.5)].into_iter().collect();
        let g = Granular::new(by_name("auto").expect("policy"), Pin::Cpu);
        let pl = planned(&g.plan(&s), 1).clone();
        assert_eq!(pl.cpus, vec![0, 1], "{}", pl.reason);
        // Beside the pinned load alone, the free CPU is its own: pinned there.
        s.others_demand = [(0, 1.0)].into_iter().collect();
        let pl = planned(&g.plan(&s), 1).clone();
        assert_eq!(pl.cpus, vec![1], "{}", pl.reason);
        // Others' crumbs (a shell, the test runner) are no reason to give it up.
        s.others_demand = [(0, 1.2), (1, 0.2)].into_iter().collect();
        let pl = planned(&g.plan(&s), 1).clone();
        assert_eq!(pl.cpus, vec![1], "{}", pl.reason);
        // Nothing pinned: two loads free to move spread over both CPUs whatever the
        // pin (a build beside the daemon), so the pin stays.
        s.others_pinned = Default::default();
        s.others_demand = [(0, 1.0), (1, 1.0)].into_iter().collect();
        let pl = planned(&g.plan(&s), 1).clone();
        assert_eq!(pl.cpus.len(), 1, "{}", pl.reason);
    }

    #[test]
    fn demand_not_pid_decides_who_gets_the_free_cpu() {
        // Node 0 has one CPU; both processes live there. The busier one (higher pid)
        // stays local, the lighter one runs remotely.
        let s = snap("2n:1l:1c:1t", vec![busy(1, 0.3, 0), busy(2, 1.0, 0)]);
        let g = Granular::new(by_name("maxlocal").expect("policy"), Pin::Cpu);
        let plan = g.plan(&s);
        assert_eq!(planned(&plan, 2).cpus, vec![0]);
        assert_eq!(planned(&plan, 1).cpus, vec![1]);
        // Placements stay in snapshot order.
        assert_eq!(plan.placements[0].pid, 1);
    }
}
