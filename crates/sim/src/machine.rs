//! The memory system of a machine in physical units: clock, DRAM latencies, and the
//! bandwidth of every element that misses queue at. The topology says *what is shared*;
//! these numbers say *how fast it is*. Values and their sources are listed in
//! `docs/model.md`; estimates are marked there and here.

use serde::{Deserialize, Serialize};

use numasched_model::topology::{Topology, LOCAL_DISTANCE};

/// Physical parameters of a machine's memory system.
///
/// Bandwidths are peak figures from data sheets; each is paired with an efficiency, the
/// fraction of the peak that sustained traffic can reach (bank conflicts, refresh,
/// read/write turnarounds, packet headers). Utilisation is measured against the
/// sustained figure, so queueing delay grows without bound as traffic approaches it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineParams {
    /// Core clock, GHz. Core CPI is in cycles, memory latency in ns; the clock joins them.
    pub clock_ghz: f64,
    /// Bytes per cache line (one miss moves one line).
    pub line_bytes: f64,
    /// Unloaded latency of a miss served by the local node's DRAM, ns.
    pub local_latency_ns: f64,
    /// Unloaded latency of a miss served by a node at SLIT distance `remote_distance`, ns.
    pub remote_latency_ns: f64,
    /// The SLIT distance at which `remote_latency_ns` holds. Other distances interpolate
    /// linearly (SLIT is defined as relative latency × 10, so linear is its own reading).
    pub remote_distance: u32,
    /// Peak DRAM bandwidth behind each node's memory controller, GB/s.
    pub mc_gbps: f64,
    /// Sustainable fraction of `mc_gbps` (STREAM-like traffic / peak).
    pub dram_efficiency: f64,
    /// Peak bandwidth, per direction, of the interconnect between two packages, GB/s.
    /// `None`: unlimited (or a single package).
    pub inter_package_gbps: Option<f64>,
    /// Peak bandwidth, per direction, between two nodes of the same package (SNC,
    /// NPS), GB/s. `None`: the on-die fabric is not a bottleneck.
    pub intra_package_gbps: Option<f64>,
    /// Payload fraction of the interconnects (header flits per line).
    pub link_efficiency: f64,
    /// Peak bandwidth of the port through which one LLC domain reaches memory (the die's
    /// bus interface, a CCX's link to the I/O die), GB/s. `None`: not a bottleneck.
    pub llc_port_gbps: Option<f64>,
    /// Peak bandwidth of the bus shared by all LLC domains of one package (a front-side
    /// bus), GB/s. `None`: not a bottleneck.
    pub package_bus_gbps: Option<f64>,
    /// Sustainable fraction of the port and package bus peaks.
    pub bus_efficiency: f64,
    /// Time lost each time ownership of the package bus passes from one bus controller
    /// to another (an arbitration/turnaround clock), ns. 0: none.
    #[serde(default)]
    pub bus_turnaround_ns: f64,
    /// Mean number of lines a core sends to memory together (outstanding misses and
    /// prefetch streams). Queueing is that of bursts of this many lines, so latency starts
    /// to rise well before a resource is full, as loaded-latency measurements show.
    pub burst_lines: f64,
    /// Pipeline throughput each of two busy SMT siblings gets, relative to running alone.
    pub smt_share: f64,
}

/// Memory traffic one E5345 front-side bus sustains, GB/s (Tudu et al. §2.3).
pub const FSB_SUSTAINED_GBPS: f64 = 3.0;

/// Utilisation at which queueing delay is evaluated at most; keeps the delay finite
/// while the solver passes through overloaded intermediate states.
pub const MAX_UTILISATION: f64 = 0.995;

impl MachineParams {
    /// Documented defaults for a machine we know nothing about: a contemporary
    /// two-socket server (DDR4, ~80 ns local and ~130 ns remote DRAM at SLIT 21). Every
    /// number is an estimate.
    pub fn generic() -> MachineParams {
        MachineParams {
            clock_ghz: 2.5,
            line_bytes: 64.0,
            local_latency_ns: 80.0,
            remote_latency_ns: 130.0,
            remote_distance: 21,
            mc_gbps: 100.0,
            dram_efficiency: 0.7,
            inter_package_gbps: Some(40.0),
            intra_package_gbps: None,
            link_efficiency: 0.85,
            llc_port_gbps: None,
            package_bus_gbps: None,
            bus_efficiency: 0.7,
            bus_turnaround_ns: 0.0,
            burst_lines: 8.0,
            smt_share: 0.6,
        }
    }

    /// Intel Xeon E5520 ×2 (Majo & Gross): 2.26 GHz; per socket an on-chip
    /// controller with three DDR3-1066 channels, 25.6 GB/s; one QPI link at 5.86 GT/s,
    /// 23.44 GB/s both directions together; ~50 ns local and ~90 ns remote DRAM.
    pub fn nehalem_e5520() -> MachineParams {
        MachineParams {
            clock_ghz: 2.26,
            local_latency_ns: 50.0,
            remote_latency_ns: 90.0,
            remote_distance: 21,
            mc_gbps: 25.6,
            // Estimate: STREAM on Nehalem-EP reaches roughly 60-65% of DDR3 peak.
            dram_efficiency: 0.65,
            inter_package_gbps: Some(23.44 / 2.0),
            llc_port_gbps: Some(25.6),
            bus_efficiency: 0.65,
            // A line crosses QPI as 8 data flits and 1 header flit.
            link_efficiency: 8.0 / 9.0,
            ..MachineParams::generic()
        }
    }

    /// Intel Xeon E5345 ×2 (Tudu et al.): UMA, 2.33 GHz; each package's two
    /// dies share one 1333 MT/s × 8 B front-side bus (10.67 GB/s); one memory controller
    /// hub with four FB-DIMM DDR2-667 channels (21.3 GB/s read).
    pub fn xeon_e5345() -> MachineParams {
        MachineParams {
            clock_ghz: 2.33,
            // Estimate: FSB + MCH + FB-DIMM; published Clovertown idle latencies are
            // around 100 ns.
            local_latency_ns: 100.0,
            remote_latency_ns: 100.0,
            remote_distance: 21,
            mc_gbps: 21.3,
            dram_efficiency: 0.65,
            inter_package_gbps: None,
            intra_package_gbps: None,
            // A die's bus controller speaks the FSB protocol at the FSB's rate: it is not
            // a narrower pipe but the agent that arbitrates for the FSB on behalf of its
            // two cores (`ResourceKind::BusController`), so it has no rate of its own.
            llc_port_gbps: None,
            package_bus_gbps: Some(1.333 * 8.0),
            // Measured: one FSB sustains about 3 GB/s of memory traffic (Tudu et al.
            // §2.3: one stream task alone draws 2.88–2.92 GB/s, near the bus's limit),
            // 28% of the 10.67 GB/s peak (address/snoop phases, the MCH's turnarounds).
            bus_efficiency: FSB_SUSTAINED_GBPS / (1.333 * 8.0),
            // One 333 MHz bus clock each time the request bus passes between the two
            // dies' controllers (symmetric agents arbitrate in rotation; a new owner
            // costs a turnaround clock). Estimate from the FSB protocol.
            bus_turnaround_ns: 1.0 / 0.333,
            ..MachineParams::generic()
        }
    }

    /// AMD EPYC 7742 ×2 (Rome), from AMD's public specifications: 2.25 GHz; eight
    /// DDR4-3200 channels per socket (204.8 GB/s) split evenly over the socket's nodes
    /// (NPS setting); four xGMI links between the sockets, ~128 GB/s per direction; each
    /// CCX reaches the I/O die over its CCD's Infinity Fabric link (32 B/clk read at
    /// 1.467 GHz ≈ 47 GB/s per CCD, shared by its two CCXs). Latencies are estimates from
    /// published measurements: ~90 ns local, ~190 ns across sockets.
    pub fn epyc_7742_2s(topology: &Topology) -> MachineParams {
        MachineParams {
            clock_ghz: 2.25,
            local_latency_ns: 90.0,
            remote_latency_ns: 190.0,
            remote_distance: max_distance(topology).unwrap_or(32),
            mc_gbps: 204.8 / nodes_per_package(topology),
            dram_efficiency: 0.7,
            inter_package_gbps: Some(128.0),
            intra_package_gbps: None,
            link_efficiency: 0.8,
            llc_port_gbps: Some(47.0 / 2.0),
            package_bus_gbps: None,
            bus_efficiency: 0.8,
            ..MachineParams::generic()
        }
    }

    /// Intel Xeon Platinum 8380 ×2 (Ice Lake-SP) with sub-NUMA clustering, from Intel's
    /// public specifications: 2.3 GHz; eight DDR4-3200 channels per socket (204.8 GB/s)
    /// split over the clusters; three UPI links at 11.2 GT/s (22.4 GB/s per direction
    /// each). Latencies are estimates from published measurements: ~80 ns local,
    /// ~140 ns across sockets.
    pub fn xeon_8380_2s(topology: &Topology) -> MachineParams {
        MachineParams {
            clock_ghz: 2.3,
            local_latency_ns: 80.0,
            remote_latency_ns: 140.0,
            remote_distance: max_distance(topology).unwrap_or(21),
            mc_gbps: 204.8 / nodes_per_package(topology),
            dram_efficiency: 0.7,
            inter_package_gbps: Some(3.0 * 22.4),
            intra_package_gbps: None,
            link_efficiency: 0.85,
            ..MachineParams::generic()
        }
    }

    /// Checks that every number means something; the simulator relies on it.
    pub fn validate(&self) -> Result<(), String> {
        let pos = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("{name}: {v} must be a finite number > 0"))
            }
        };
        let frac = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 && v <= 1.0 {
                Ok(())
            } else {
                Err(format!("{name}: {v} must be in (0, 1]"))
            }
        };
        pos("clock_ghz", self.clock_ghz)?;
        pos("line_bytes", self.line_bytes)?;
        pos("local_latency_ns", self.local_latency_ns)?;
        pos("mc_gbps", self.mc_gbps)?;
        pos("burst_lines", self.burst_lines)?;
        if !self.remote_latency_ns.is_finite() || self.remote_latency_ns < self.local_latency_ns {
            return Err(format!(
                "remote_latency_ns: {} must be ≥ local_latency_ns",
                self.remote_latency_ns
            ));
        }
        if self.remote_distance <= LOCAL_DISTANCE {
            return Err(format!(
                "remote_distance: {} must be > {LOCAL_DISTANCE}",
                self.remote_distance
            ));
        }
        for (name, v) in [
            ("inter_package_gbps", self.inter_package_gbps),
            ("intra_package_gbps", self.intra_package_gbps),
            ("llc_port_gbps", self.llc_port_gbps),
            ("package_bus_gbps", self.package_bus_gbps),
        ] {
            if let Some(v) = v {
                pos(name, v)?;
            }
        }
        frac("dram_efficiency", self.dram_efficiency)?;
        frac("link_efficiency", self.link_efficiency)?;
        frac("bus_efficiency", self.bus_efficiency)?;
        if !(self.bus_turnaround_ns.is_finite() && self.bus_turnaround_ns >= 0.0) {
            return Err(format!(
                "bus_turnaround_ns: {} must be a finite number ≥ 0",
                self.bus_turnaround_ns
            ));
        }
        frac("smt_share", self.smt_share)?;
        Ok(())
    }

    /// Unloaded latency of a miss from a CPU on a node to memory at SLIT distance `d`.
    pub fn latency_at_distance(&self, d: u32) -> f64 {
        let extra = d.saturating_sub(LOCAL_DISTANCE) as f64
            / (self.remote_distance - LOCAL_DISTANCE).max(1) as f64;
        self.local_latency_ns + (self.remote_latency_ns - self.local_latency_ns) * extra
    }
}

/// Calibrated parameters for the named presets, documented generic ones otherwise. The
/// generic set takes the remote distance from the machine so that its SLIT matrix keeps
/// its meaning.
pub fn params_for(topology: &Topology) -> MachineParams {
    match topology.name() {
        Some("nehalem-e5520") => MachineParams::nehalem_e5520(),
        Some("xeon-e5345") => MachineParams::xeon_e5345(),
        Some("epyc-7742-2s") => MachineParams::epyc_7742_2s(topology),
        Some("xeon-8380-2s-snc2") => MachineParams::xeon_8380_2s(topology),
        _ => MachineParams {
            remote_distance: max_distance(topology).unwrap_or(21),
            ..MachineParams::generic()
        },
    }
}

fn max_distance(t: &Topology) -> Option<u32> {
    let n = t.nodes().len();
    (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
        .map(|(i, j)| t.distance(i, j))
        .max()
        .filter(|&d| d > LOCAL_DISTANCE)
}

/// How many CPU nodes share a package on average, so per-socket memory bandwidth can be
/// divided over NPS/SNC nodes.
fn nodes_per_package(t: &Topology) -> f64 {
    let mut packages: Vec<u32> = t.llcs().iter().map(|l| l.package).collect();
    packages.sort_unstable();
    packages.dedup();
    let cpu_nodes = t.cpu_nodes().count();
    (cpu_nodes.max(1) as f64 / packages.len().max(1) as f64).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::topology;

    #[test]
    fn presets_get_their_own_numbers_and_all_validate() {
        for name in topology::presets::NAMES {
            let t = topology::machine(name).unwrap();
            params_for(&t).validate().unwrap();
        }
        let t = topology::machine("nehalem-e5520").unwrap();
        assert_eq!(params_for(&t).mc_gbps, 25.6);
        let t = topology::machine("4n:2l:4c:2t").unwrap();
        let p = params_for(&t);
        assert_eq!(p, MachineParams::generic());
        p.validate().unwrap();
    }

    #[test]
    fn latency_interpolates_the_slit_distance() {
        let p = MachineParams::nehalem_e5520();
        assert_eq!(p.latency_at_distance(10), 50.0);
        assert_eq!(p.latency_at_distance(21), 90.0);
        assert!(p.latency_at_distance(31) > 90.0);
    }

    #[test]
    fn validation_names_the_bad_field() {
        let mut p = MachineParams::generic();
        p.dram_efficiency = 1.5;
        assert!(p.validate().unwrap_err().starts_with("dram_efficiency"));
        p = MachineParams::generic();
        p.remote_latency_ns = 10.0;
        assert!(p.validate().unwrap_err().starts_with("remote_latency_ns"));
    }
}
