//! Turns a machine and a set of running threads into the queueing network the solver
//! works on: the shared resources (memory controllers, interconnect links, LLC ports,
//! package buses), and for every thread the resources its misses load and the unloaded
//! latency they pay.

use serde::{Deserialize, Serialize};

use super::machine::MachineParams;
use super::process::SimProcess;
use numasched_model::topology::{NodeId, Topology};

/// A shared element that misses queue at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ResourceKind {
    /// The DRAM behind a node (node id, as the topology and every report name nodes).
    MemoryController { node: NodeId },
    /// Interconnect between two packages, one direction.
    PackageLink { from: LinkEnd, to: LinkEnd },
    /// Fabric between two nodes of one package, one direction (node ids).
    NodeLink { from: NodeId, to: NodeId },
    /// The port of one LLC domain towards memory (LLC index).
    LlcPort { llc: usize },
    /// The bus shared by one package's LLC domains (package id): all of its bus
    /// controllers together.
    PackageBus { package: u32 },
    /// One LLC domain's bus controller, the agent through which its cores reach the
    /// package bus (LLC index). The bus serves the controllers in turn (round robin), so
    /// each gets a max-min fair share, and a controller its cores the same way; only
    /// threads time-sharing one core queue behind each other, first come, first served.
    BusController { llc: usize },
}

/// What an interconnect link joins: a package, or a node without CPUs (memory only),
/// which hangs off the interconnect like a package of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkEnd {
    Package(u32),
    MemoryNode(NodeId),
}

impl std::fmt::Display for LinkEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkEnd::Package(p) => write!(f, "package {p}"),
            LinkEnd::MemoryNode(n) => write!(f, "memory node {n}"),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Resource {
    pub kind: ResourceKind,
    /// Sustainable bandwidth, GB/s (= bytes/ns).
    pub capacity: f64,
    /// Queueing delay per unit of ρ/(1−ρ), ns: burst service time / 2 (M/D/1).
    pub delay_scale: f64,
    /// For a bus controller: the package bus it is an agent of (index into
    /// `Network::buses`). Its capacity is then its max-min fair share of that bus, given
    /// what the other agents draw, and changes as they do.
    pub bus: Option<usize>,
}

/// A bus arbitrated round robin between agents (bus controllers).
#[derive(Debug, Clone)]
pub(crate) struct Bus {
    pub kind: ResourceKind,
    /// Sustainable bandwidth of the whole bus, GB/s.
    pub capacity: f64,
    /// Resource indices of its agents.
    pub agents: Vec<usize>,
}

/// One resource on a thread's path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Use {
    pub resource: usize,
    /// Bytes this thread moves through the resource per miss (reads and writebacks).
    pub bytes_per_miss: f64,
    /// Fraction of this thread's read misses whose latency includes this queue.
    pub latency_weight: f64,
}

/// One thread of one process on one CPU.
#[derive(Debug, Clone)]
pub(crate) struct Thread {
    pub process: usize,
    pub llc: usize,
    /// The core it runs on: a die's bus controller takes its cores' requests in turn.
    pub core: usize,
    /// Fraction of the time it holds its CPU (1/k with k threads on the CPU).
    pub run_share: f64,
    /// Factor on core CPI from busy SMT siblings (≥ 1).
    pub smt_stretch: f64,
    /// Unloaded miss latency averaged over where its memory is, ns.
    pub base_latency: f64,
    /// Fraction of its memory on the node it runs on.
    pub local_fraction: f64,
    pub uses: Vec<Use>,
    /// Index of its LLC occupant (process × LLC).
    pub occupant: usize,
}

/// The threads of one process on one LLC, which compete for it as one working set.
#[derive(Debug, Clone)]
pub(crate) struct Occupant {
    pub llc: usize,
    /// Threads of the process on that LLC weighted by run share (≥ 1 for the per-thread
    /// view: each concurrent thread sees its part of the occupant's share).
    pub concurrency: f64,
}

pub(crate) struct Network {
    pub resources: Vec<Resource>,
    pub buses: Vec<Bus>,
    pub threads: Vec<Thread>,
    pub occupants: Vec<Occupant>,
    /// Threads per process (valid CPUs only).
    pub thread_count: Vec<usize>,
    /// Capacity of every LLC of the machine, bytes.
    pub llc_bytes: Vec<f64>,
}

struct Builder<'a> {
    topo: &'a Topology,
    params: &'a MachineParams,
    resources: Vec<Resource>,
    buses: Vec<Bus>,
}

impl Builder<'_> {
    fn resource(&mut self, kind: ResourceKind, peak_gbps: f64, efficiency: f64) -> usize {
        if let Some(i) = self.resources.iter().position(|r| r.kind == kind) {
            return i;
        }
        let capacity = peak_gbps * efficiency;
        let burst_service = self.params.burst_lines * self.params.line_bytes / capacity;
        self.resources.push(Resource {
            kind,
            capacity,
            delay_scale: burst_service / 2.0,
            bus: None,
        });
        self.resources.len() - 1
    }

    /// The bus controller of LLC domain `llc` as an agent of its package's bus.
    fn bus_agent(&mut self, llc: usize, package: u32, peak_gbps: f64) -> usize {
        let kind = ResourceKind::BusController { llc };
        if let Some(i) = self.resources.iter().position(|r| r.kind == kind) {
            return i;
        }
        let eff = self.params.bus_efficiency;
        let r = self.resource(kind, peak_gbps, eff);
        let bus_kind = ResourceKind::PackageBus { package };
        let bus = match self.buses.iter().position(|b| b.kind == bus_kind) {
            Some(i) => i,
            None => {
                self.buses.push(Bus {
                    kind: bus_kind,
                    capacity: peak_gbps * eff,
                    agents: Vec::new(),
                });
                self.buses.len() - 1
            }
        };
        self.buses[bus].agents.push(r);
        self.resources[r].bus = Some(bus);
        r
    }

    fn link_end(&self, node: usize) -> LinkEnd {
        let n = &self.topo.nodes()[node];
        if n.llcs.is_empty() {
            LinkEnd::MemoryNode(n.id)
        } else {
            LinkEnd::Package(self.topo.llcs()[n.llcs.start].package)
        }
    }

    /// The link a line takes from node `from` to node `to`, if it is a bottleneck.
    fn link(&mut self, from: usize, to: usize) -> Option<usize> {
        let (pf, pt) = (self.link_end(from), self.link_end(to));
        let p = self.params;
        if pf != pt {
            let gbps = p.inter_package_gbps?;
            let eff = p.link_efficiency;
            Some(self.resource(ResourceKind::PackageLink { from: pf, to: pt }, gbps, eff))
        } else {
            let gbps = p.intra_package_gbps?;
            let eff = p.link_efficiency;
            let (from, to) = (self.topo.nodes()[from].id, self.topo.nodes()[to].id);
            Some(self.resource(ResourceKind::NodeLink { from, to }, gbps, eff))
        }
    }
}

fn add_use(uses: &mut Vec<Use>, resource: usize, bytes: f64, weight: f64) {
    if let Some(u) = uses.iter_mut().find(|u| u.resource == resource) {
        u.bytes_per_miss += bytes;
        u.latency_weight += weight;
    } else {
        uses.push(Use {
            resource,
            bytes_per_miss: bytes,
            latency_weight: weight,
        });
    }
}

/// Valid (node, fraction) pairs, normalised; empty when nothing usable was given.
fn memory_map(topo: &Topology, memory: &[(usize, f64)]) -> Vec<(usize, f64)> {
    let n = topo.nodes().len();
    let mut map: Vec<(usize, f64)> = Vec::new();
    for &(node, f) in memory {
        if node < n && f.is_finite() && f > 0.0 {
            match map.iter_mut().find(|(m, _)| *m == node) {
                Some(e) => e.1 += f,
                None => map.push((node, f)),
            }
        }
    }
    let total: f64 = map.iter().map(|e| e.1).sum();
    for e in &mut map {
        e.1 /= total;
    }
    map
}

/// The occupant of process `pi` on LLC `llc`, created on its first thread there.
fn occupant_for(
    occupants: &mut Vec<Occupant>,
    occupant_of: &mut Vec<(usize, usize, usize)>,
    pi: usize,
    llc: usize,
) -> usize {
    if let Some(&(_, _, o)) = occupant_of
        .iter()
        .find(|(op, ol, _)| *op == pi && *ol == llc)
    {
        return o;
    }
    occupants.push(Occupant {
        llc,
        concurrency: 0.0,
    });
    occupant_of.push((pi, llc, occupants.len() - 1));
    occupants.len() - 1
}

pub(crate) fn build(topo: &Topology, params: &MachineParams, procs: &[SimProcess]) -> Network {
    let mut b = Builder {
        topo,
        params,
        resources: Vec::new(),
        buses: Vec::new(),
    };
    // Memory controllers first, so resource i is node i's controller.
    for node in topo.nodes() {
        b.resource(
            ResourceKind::MemoryController { node: node.id },
            params.mc_gbps,
            params.dram_efficiency,
        );
    }
    let ncpu = topo.num_cpus();
    let mut load = vec![0usize; ncpu];
    for p in procs {
        for &c in &p.cpus {
            if c < ncpu {
                load[c] += 1;
            }
        }
    }
    let mut threads = Vec::new();
    let mut occupants: Vec<Occupant> = Vec::new();
    let mut occupant_of: Vec<(usize, usize, usize)> = Vec::new(); // (process, llc, occupant)
    let mut thread_count = vec![0usize; procs.len()];
    let line = params.line_bytes;
    for (pi, p) in procs.iter().enumerate() {
        let memory = memory_map(topo, &p.memory);
        let wb = p.profile.writeback_ratio.clamp(0.0, 1.0);
        let wb = if wb.is_finite() { wb } else { 0.0 };
        for &c in &p.cpus {
            if c >= ncpu {
                continue;
            }
            thread_count[pi] += 1;
            let cpu = topo.cpus()[c];
            let run_share = p.run_share.unwrap_or(1.0 / load[c] as f64);
            let siblings_busy = topo.cores()[cpu.core].cpus.iter().any(|&id| {
                topo.cpu(id)
                    .is_some_and(|s| s.index != c && load[s.index] > 0)
            });
            let smt_stretch = if siblings_busy {
                1.0 / params.smt_share
            } else {
                1.0
            };
            // First touch: memory nobody placed lives where the thread runs.
            let homes = if memory.is_empty() {
                vec![(cpu.node, 1.0)]
            } else {
                memory.clone()
            };
            let mut uses = Vec::new();
            let mut base_latency = 0.0;
            let mut local_fraction = 0.0;
            for &(home, frac) in &homes {
                base_latency += frac * params.latency_at_distance(topo.distance(cpu.node, home));
                add_use(&mut uses, home, (1.0 + wb) * line * frac, frac);
                if home == cpu.node {
                    local_fraction += frac;
                } else {
                    if let Some(r) = b.link(home, cpu.node) {
                        add_use(&mut uses, r, line * frac, frac);
                    }
                    if let Some(r) = b.link(cpu.node, home) {
                        add_use(&mut uses, r, wb * line * frac, 0.0);
                    }
                }
            }
            if let Some(gbps) = params.llc_port_gbps {
                let r = b.resource(
                    ResourceKind::LlcPort { llc: cpu.llc },
                    gbps,
                    params.bus_efficiency,
                );
                add_use(&mut uses, r, (1.0 + wb) * line, 1.0);
            }
            if let Some(gbps) = params.package_bus_gbps {
                let package = topo.llcs()[cpu.llc].package;
                let r = b.bus_agent(cpu.llc, package, gbps);
                add_use(&mut uses, r, (1.0 + wb) * line, 1.0);
            }
            let occupant = occupant_for(&mut occupants, &mut occupant_of, pi, cpu.llc);
            occupants[occupant].concurrency += run_share;
            threads.push(Thread {
                process: pi,
                llc: cpu.llc,
                core: cpu.core,
                run_share,
                smt_stretch,
                base_latency,
                local_fraction,
                uses,
                occupant,
            });
        }
    }
    for o in &mut occupants {
        o.concurrency = o.concurrency.max(1.0);
    }
    Network {
        resources: b.resources,
        buses: b.buses,
        threads,
        occupants,
        thread_count,
        llc_bytes: topo.llcs().iter().map(|l| l.size_bytes as f64).collect(),
    }
}
