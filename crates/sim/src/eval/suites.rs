//! The evaluation suites: which machine, which workloads, which allocation maps.
//!
//! `nmass` is the evaluation of Majo & Gross (ISMM 2011) on their Nehalem machine;
//! `membus` the bus study of Tudu et al. on the Xeon E5345; `cmload` the scaling study
//! of Kang et al. (2 to 64 processes, half compute-bound, half streaming). `random`
//! draws cases from a seed on machines and mixes no policy was designed on, optionally
//! with characterisation noise; seeds outside [`TRAINING_SEEDS`] are the held-out ones.

use numasched_model::topology::{self, Topology};
use numasched_model::{Process, Snapshot};

use super::runner::Case;

/// What the suites need to know of a program to build a snapshot (from its profile).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgramFacts {
    pub mpki: f64,
    pub numa_penalty: f64,
    pub footprint_bytes: u64,
    pub bandwidth_gbps: f64,
    pub cache_reuse: f64,
}

/// Facts of a program on a machine (its solo bandwidth depends on the machine).
pub type Lookup<'a> = &'a dyn Fn(&Topology, &str) -> Option<ProgramFacts>;

#[derive(Debug, Clone)]
pub struct Suite {
    pub name: &'static str,
    pub machine: String,
    /// Policies run when `--policies` does not say.
    pub policies: Vec<String>,
    pub cases: Vec<Case>,
    /// Whether policies may move pages (at a modelled cost).
    pub migration: bool,
    /// The seed a `random` suite's cases were drawn from.
    pub seed: Option<u64>,
}

/// Seeds of `random` that were read while `auto`'s mechanisms were fixed
/// (docs/evaluation.md says which and why): results on them are training results, and
/// only other seeds may be called held out.
pub const TRAINING_SEEDS: std::ops::RangeInclusive<u64> = 1..=80;

/// Whether results on `seed` are held out, in words for reports.
pub fn seed_label(seed: u64) -> String {
    if TRAINING_SEEDS.contains(&seed) {
        format!(
            "seed {seed} is a training seed ({}–{} were read while auto was fixed): \
             not a held-out result",
            TRAINING_SEEDS.start(),
            TRAINING_SEEDS.end()
        )
    } else {
        format!(
            "seed {seed} is outside the training seeds {}–{}: held out, unless it was \
             read after these results",
            TRAINING_SEEDS.start(),
            TRAINING_SEEDS.end()
        )
    }
}

pub const NAMES: &[&str] = &[
    "nmass",
    "nmass-migrate",
    "membus",
    "cmload",
    "random",
    "random-migrate",
];

/// Workloads of the published N-MASS evaluation (M = memory-bound, C = compute-bound).
pub const NMASS_WORKLOADS: &[(&str, &[&str])] = &[
    ("WL1", &["soplex", "sphinx3", "gamess", "namd"]),
    ("WL2", &["soplex", "mcf", "gamess", "gobmk"]),
    ("WL3", &["mcf", "libquantum", "povray", "gamess"]),
    ("WL4", &["mcf", "omnetpp", "h264ref", "namd"]),
    ("WL5", &["milc", "libquantum", "povray", "perlbench"]),
    ("WL6", &["sphinx3", "gcc", "namd", "gamess"]),
    ("WL7", &["lbm", "milc", "sphinx3", "gobmk"]),
    ("WL8", &["lbm", "milc", "mcf", "namd"]),
    ("WL9", &["mcf", "milc", "soplex", "lbm"]),
    (
        "WL10",
        &[
            "lbm",
            "milc",
            "mcf",
            "namd",
            "gobmk",
            "perlbench",
            "h264ref",
            "povray",
        ],
    ),
    (
        "WL11",
        &[
            "mcf",
            "milc",
            "soplex",
            "lbm",
            "gobmk",
            "perlbench",
            "namd",
            "povray",
        ],
    ),
];

/// The 8 maps of a 4-process workload on 2 nodes up to symmetry: 50% homed on node 0,
/// 75%, and 100%.
pub const MAPS_4: &[&str] = &[
    "1100", "1010", "1001", "1000", "0100", "0010", "0001", "0000",
];

/// For 8 processes: all on one node, balanced maps (memory-bound and compute-bound
/// programs split in different ways), and 75% maps.
pub const MAPS_8: &[&str] = &[
    "11110000", "00001111", "11001100", "10101010", "11000000", "00110000", "00000011", "00000000",
];

/// With page migration: what moving memory adds to placement alone.
pub const MIGRATE_POLICIES: &[&str] = &[
    "linux",
    "autonuma",
    "maxlocal",
    "nmass",
    "numad",
    "oracle",
    "auto",
    "auto-migrate",
];

pub const NMASS_POLICIES: &[&str] = &[
    "linux",
    "autonuma",
    "maxlocal",
    "nmass",
    "nmass-regression",
    "membus",
    "cmload",
    "numad",
    "oracle",
    "auto",
];

/// The names of a policy list, as a suite carries them.
pub fn names(policies: &[&str]) -> Vec<String> {
    policies.iter().map(|p| p.to_string()).collect()
}

/// Whether suite `name` is drawn from a seed (`random`, `random-migrate`): the only
/// suites a [`RandomOptions`] (`--seed`, `--cases`, `--noise`) changes.
pub fn is_random(name: &str) -> bool {
    matches!(name, "random" | "random-migrate")
}

/// Builds a suite by name, on its own machine or on `machine`; `random` and
/// `random-migrate` with the default draw. Unknown programs in the lookup are reported
/// by name.
pub fn suite(name: &str, machine: Option<Topology>, lookup: Lookup) -> Result<Suite, String> {
    suite_with(name, &RandomOptions::default(), machine, lookup)
}

/// [`suite`], with `draw` for the suites [`is_random`] names (its `migration` is set by
/// the name: `random-migrate`); the other suites have no draw and ignore it.
pub fn suite_with(
    name: &str,
    draw: &RandomOptions,
    machine: Option<Topology>,
    lookup: Lookup,
) -> Result<Suite, String> {
    if is_random(name) {
        let opts = RandomOptions {
            migration: name == "random-migrate",
            ..draw.clone()
        };
        return random(&opts, machine, lookup);
    }
    let on = |own: &str| match &machine {
        Some(t) => Ok(t.clone()),
        None => resolve(own),
    };
    match name {
        "nmass" => nmass(on("nehalem-e5520")?, lookup),
        "nmass-migrate" => {
            let mut s = nmass(on("nehalem-e5520")?, lookup)?;
            s.name = "nmass-migrate";
            s.policies = names(MIGRATE_POLICIES);
            s.migration = true;
            for c in &mut s.cases {
                c.suite = s.name.to_string();
            }
            Ok(s)
        }
        "membus" => membus(on("xeon-e5345")?, lookup),
        "cmload" => cmload(on("2n:1l:4c:1t")?, lookup),
        other => Err(format!(
            "unknown suite '{other}' (known: {})",
            NAMES.join(", ")
        )),
    }
}

fn nmass(topo: Topology, lookup: Lookup) -> Result<Suite, String> {
    let mut cases = Vec::new();
    for (wl, programs) in NMASS_WORKLOADS {
        let maps = if programs.len() == 4 { MAPS_4 } else { MAPS_8 };
        for map in maps {
            cases.push(case("nmass", wl, map, &topo, programs, lookup)?);
        }
    }
    Ok(Suite {
        name: "nmass",
        machine: topo.name().unwrap_or("custom").to_string(),
        policies: names(NMASS_POLICIES),
        cases,
        migration: false,
        seed: None,
    })
}

fn membus(topo: Topology, lookup: Lookup) -> Result<Suite, String> {
    let programs = [
        "lbm", "lbm", "soplex", "soplex", "gromacs", "gromacs", "hmmer", "hmmer",
    ];
    Ok(Suite {
        name: "membus",
        machine: topo.name().unwrap_or("custom").to_string(),
        policies: names(&["linux", "autonuma", "membus", "membus-rr", "auto", "oracle"]),
        cases: vec![
            case("membus", "bus8", "00000000", &topo, &programs, lookup)?,
            // As published (Tudu Table 3): the 8 tasks on one core of each die, so two
            // share every core and the scheduler picks who shares each bus when.
            case(
                "membus",
                "bus8-4cores",
                "00000000",
                &one_core_per_llc(&topo)?,
                &programs,
                lookup,
            )?,
        ],
        migration: false,
        seed: None,
    })
}

/// The machine with only the first CPU of each LLC online, as Tudu et al. ran their
/// time-sharing evaluation on one core per die. Keeps the machine's name, so the
/// model keeps its parameters (the buses are the same; idle cores draw nothing).
pub fn one_core_per_llc(topo: &Topology) -> Result<Topology, String> {
    let mut desc = topo.to_desc();
    for node in &mut desc.nodes {
        node.cpus.clear();
        for llc in &mut node.llcs {
            llc.cpus.truncate(1);
            llc.cores.clear();
        }
    }
    Topology::from_desc(desc).map_err(|e| {
        format!(
            "one core per LLC of {}: {e}",
            topo.name().unwrap_or("the machine")
        )
    })
}

fn cmload(topo: Topology, lookup: Lookup) -> Result<Suite, String> {
    let mut cases = Vec::new();
    for n in [2usize, 4, 8, 16, 32, 64] {
        let programs: Vec<&str> = (0..n)
            .map(|i| if i % 2 == 0 { "compute" } else { "stream" })
            .collect();
        // Memory where first touch would put it under an even spread, and the skewed
        // case where everything was allocated on node 0.
        let spread: String = (0..n)
            .map(|i| if (i / 2) % 2 == 0 { '0' } else { '1' })
            .collect();
        let skewed = "0".repeat(n);
        for map in [spread, skewed] {
            cases.push(case(
                "cmload",
                &format!("n{n}"),
                &map,
                &topo,
                &programs,
                lookup,
            )?);
        }
    }
    Ok(Suite {
        name: "cmload",
        machine: topo.name().unwrap_or("custom").to_string(),
        policies: names(&["linux", "autonuma", "cmload", "auto", "oracle"]),
        cases,
        migration: false,
        seed: None,
    })
}

/// Policies of the random suite: the two baselines, the published algorithm, ours and
/// the oracle (the slow current-placement policies are left to `--policies`).
pub const RANDOM_POLICIES: &[&str] = &["linux", "autonuma", "nmass", "auto", "oracle"];

/// `random-migrate`: auto-migrate judged against autonuma, both free to move pages.
pub const RANDOM_MIGRATE_POLICIES: &[&str] = &[
    "linux",
    "autonuma",
    "nmass",
    "auto",
    "auto-migrate",
    "oracle",
];

/// Machines `random` draws from: every preset, and spec strings with SMT, several LLCs
/// per node and 2 to 8 nodes.
pub const RANDOM_MACHINES: &[&str] = &[
    "nehalem-e5520",
    "xeon-e5345",
    "epyc-7742-2s",
    "xeon-8380-2s-snc2",
    "2n:2l:4c:2t",
    "4n:2l:2c:2t",
    "8n:2l:1c:2t",
    "3n:3l:2c:2t",
    "2n:4l:2c:2t",
    "4n:1l:4c:1t",
    "2n:1l:8c:1t",
];

/// Programs `random` draws from (the built-in profiles); `stream` and `compute` may be
/// multi-threaded.
pub const RANDOM_PROGRAMS: &[&str] = &[
    "mcf",
    "lbm",
    "libquantum",
    "milc",
    "soplex",
    "omnetpp",
    "sphinx3",
    "gcc",
    "h264ref",
    "gobmk",
    "perlbench",
    "namd",
    "gamess",
    "povray",
    "gromacs",
    "hmmer",
    "stream",
    "compute",
];

/// Most processes in one drawn case: the oracle's search and the 1000 sampled Linux
/// schedules grow with them; big machines are filled with multi-threaded processes.
pub const RANDOM_MAX_PROCESSES: usize = 16;

/// What `eval --suite random` draws.
#[derive(Debug, Clone, PartialEq)]
pub struct RandomOptions {
    pub seed: u64,
    pub cases: usize,
    /// Characterisation error in per cent: the policies see MPKI and bandwidth off by up
    /// to ±noise%, the NUMA penalty's excess over 1 off by as much, and no cache reuse;
    /// the model still runs the true programs.
    pub noise_pct: f64,
    /// `random-migrate`: the same cases, but policies may also move pages (at a
    /// modelled cost), and they are judged as on `nmass-migrate` (auto-migrate against
    /// autonuma, which then moves pages as well as tasks).
    pub migration: bool,
}

impl Default for RandomOptions {
    fn default() -> Self {
        RandomOptions {
            seed: 1,
            cases: 20,
            noise_pct: 0.0,
            migration: false,
        }
    }
}

/// SplitMix64: small, deterministic, and the same on every platform.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x6a09_e667_f3bc_c908)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (0 when n is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Uniform in [-1, 1].
    pub fn signed_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// The random suite: `opts.cases` cases drawn from `opts.seed`, each on a machine of
/// [`RANDOM_MACHINES`] (or on `machine`), with 4 to min(2 × CPUs,
/// [`RANDOM_MAX_PROCESSES`]) processes of [`RANDOM_PROGRAMS`] (`stream` and `compute`
/// with 1 to 8 threads, never more threads than 2 × CPUs in all) and memory homes drawn
/// a third of the time all on one node, a third 75% on one node, a third at random.
/// Noise is drawn from its own stream, so a seed gives the same cases at every noise
/// level. Deterministic.
pub fn random(
    opts: &RandomOptions,
    machine: Option<Topology>,
    lookup: Lookup,
) -> Result<Suite, String> {
    let fixed = machine;
    let name = if opts.migration {
        "random-migrate"
    } else {
        "random"
    };
    let mut machines: Vec<Topology> = Vec::new();
    if fixed.is_none() {
        for m in RANDOM_MACHINES {
            machines.push(resolve(m)?);
        }
    }
    let mut cases = Vec::with_capacity(opts.cases);
    for k in 0..opts.cases {
        let mut rng = Rng::new(opts.seed.wrapping_mul(0x1_0000_0001).wrapping_add(k as u64));
        let topo = match &fixed {
            Some(t) => t.clone(),
            None => machines[rng.below(machines.len())].clone(),
        };
        let cpus = topo.num_cpus();
        let nodes: Vec<usize> = topo.cpu_nodes().collect();
        let most = (2 * cpus).clamp(4, RANDOM_MAX_PROCESSES);
        let n = 4 + rng.below(most - 3);
        let mut programs: Vec<(&str, u32)> = Vec::with_capacity(n);
        let mut threads_left = (2 * cpus).max(n);
        for i in 0..n {
            let prog = RANDOM_PROGRAMS[rng.below(RANDOM_PROGRAMS.len())];
            let mut threads = 1u32;
            if matches!(prog, "stream" | "compute") && rng.below(2) == 1 {
                threads = [2u32, 4, 8][rng.below(3)];
            }
            // Keep one thread for every process still to come.
            let room = threads_left.saturating_sub(n - i - 1).max(1);
            threads = threads.min(room as u32).max(1);
            threads_left = threads_left.saturating_sub(threads as usize);
            programs.push((prog, threads));
        }
        let home = nodes[rng.below(nodes.len())];
        let mode = rng.below(3);
        let map: String = (0..n)
            .map(|_| {
                let node = match mode {
                    0 => home,
                    1 if rng.below(4) != 0 => home,
                    _ => nodes[rng.below(nodes.len())],
                };
                char::from_digit(node as u32, 36).unwrap_or('0')
            })
            .collect();
        let names: Vec<&str> = programs.iter().map(|(p, _)| *p).collect();
        let mut c = case(name, &format!("r{k}"), &map, &topo, &names, lookup)?;
        let threads: Vec<u32> = programs.iter().map(|&(_, t)| t).collect();
        set_threads(&mut c, &threads);
        if opts.noise_pct > 0.0 {
            let mut noise = Rng::new(!opts.seed ^ (k as u64).wrapping_mul(0x9e37_79b9));
            add_noise(&mut c.snapshot, opts.noise_pct / 100.0, &mut noise);
        }
        cases.push(c);
    }
    Ok(Suite {
        name,
        machine: fixed
            .as_ref()
            .map(|t| t.name().unwrap_or("custom").to_string())
            .unwrap_or_else(|| "machines drawn per case".to_string()),
        policies: names(if opts.migration {
            RANDOM_MIGRATE_POLICIES
        } else {
            RANDOM_POLICIES
        }),
        cases,
        migration: opts.migration,
        seed: Some(opts.seed),
    })
}

/// Characterisation error: what the policies see of each process, off by up
/// to ±`rel` — MPKI and bandwidth multiplied by 1 ± rel, the NUMA penalty's excess over 1
/// likewise — and cache reuse unknown. Memory placement (`numa_maps`) is exact.
pub fn add_noise(snapshot: &mut Snapshot, rel: f64, rng: &mut Rng) {
    for p in &mut snapshot.processes {
        let mut jitter = |x: f64| (x * (1.0 + rel * rng.signed_unit())).max(0.0);
        p.mpki = p.mpki.map(&mut jitter);
        p.bandwidth_gbps = p.bandwidth_gbps.map(&mut jitter);
        p.numa_penalty = p.numa_penalty.map(|np| 1.0 + jitter(np - 1.0));
        p.cache_reuse = None;
    }
}

fn resolve(name: &str) -> Result<Topology, String> {
    topology::machine(name).map_err(|e| e.to_string())
}

/// A snapshot of `programs` with their memory homed by `map` (one digit per program:
/// the node index), none of them placed yet.
pub fn case(
    suite: &str,
    workload: &str,
    map: &str,
    topo: &Topology,
    programs: &[&str],
    lookup: Lookup,
) -> Result<Case, String> {
    if map.chars().count() != programs.len() {
        return Err(format!(
            "map '{map}' has {} homes for {} programs",
            map.chars().count(),
            programs.len()
        ));
    }
    let homes = map
        .chars()
        .map(|home| {
            home.to_digit(10)
                .map(|d| d as usize)
                .filter(|&d| d < topo.nodes().len())
                .ok_or_else(|| {
                    format!(
                        "suite {suite}, {workload} map '{map}': no node '{home}' on {} \
                         ({}); the suite needs a machine with 2",
                        match topo.name() {
                            Some(topology::THIS) | None => "this machine",
                            Some(n) => n,
                        },
                        numasched_model::plural::count(topo.nodes().len(), "node")
                    )
                })
        })
        .collect::<Result<Vec<usize>, String>>()?;
    case_at(suite, workload, map, topo, programs, &homes, lookup)
}

/// [`case`] with the homes as node indices, for machines of more than ten nodes;
/// `map` only labels the case.
pub fn case_at(
    suite: &str,
    workload: &str,
    map: &str,
    topo: &Topology,
    programs: &[&str],
    homes: &[usize],
    lookup: Lookup,
) -> Result<Case, String> {
    if homes.len() != programs.len() {
        return Err(format!(
            "map '{map}' has {} homes for {} programs",
            homes.len(),
            programs.len()
        ));
    }
    let mut processes = Vec::with_capacity(programs.len());
    for (i, (prog, &home)) in programs.iter().zip(homes).enumerate() {
        let facts = lookup(topo, prog).ok_or_else(|| format!("unknown program '{prog}'"))?;
        let node = topo
            .nodes()
            .get(home)
            .ok_or_else(|| format!("map '{map}': no node index {home} on this machine"))?;
        let mut p = Process::new(1000 + i as u32, prog);
        p.mpki = Some(facts.mpki);
        p.numa_penalty = Some(facts.numa_penalty);
        p.bandwidth_gbps = Some(facts.bandwidth_gbps);
        p.cache_reuse = Some(facts.cache_reuse);
        p.memory_bytes.insert(node.id, facts.footprint_bytes);
        processes.push(p);
    }
    Ok(Case {
        suite: suite.to_string(),
        workload: workload.to_string(),
        map: map.to_string(),
        snapshot: Snapshot {
            topology: topo.clone(),
            processes,
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        },
    })
}

/// Gives each process of `c` its thread count (in program order); a process with N
/// threads wants N CPUs.
pub fn set_threads(c: &mut Case, threads: &[u32]) {
    for (p, &t) in c.snapshot.processes.iter_mut().zip(threads) {
        p.threads = t;
        p.cpu_demand = t as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report may call a seed held out only outside the training seeds.
    #[test]
    fn only_seeds_outside_the_training_range_are_called_held_out() {
        for (seed, held_out) in [
            (1, false),
            (60, false),
            (80, false),
            (81, true),
            (101, true),
        ] {
            let label = seed_label(seed);
            assert_eq!(label.contains("held out"), held_out, "{seed}: {label}");
            assert_eq!(label.contains("is a training seed"), !held_out, "{label}");
        }
    }

    fn facts(_: &Topology, _: &str) -> Option<ProgramFacts> {
        Some(ProgramFacts {
            mpki: 10.0,
            numa_penalty: 1.2,
            footprint_bytes: 1 << 30,
            bandwidth_gbps: 2.0,
            cache_reuse: 0.5,
        })
    }

    #[test]
    fn nmass_suite_has_every_workload_and_map() {
        let s = suite("nmass", None, &facts).unwrap();
        assert_eq!(s.cases.len(), 9 * 8 + 2 * MAPS_8.len());
        let wl9 = s
            .cases
            .iter()
            .find(|c| c.workload == "WL9" && c.map == "1100")
            .unwrap();
        let homes: Vec<_> = wl9
            .snapshot
            .processes
            .iter()
            .map(|p| p.home_node())
            .collect();
        assert_eq!(homes, vec![Some(1), Some(1), Some(0), Some(0)]);
    }

    #[test]
    fn maps_of_four_cover_all_sixteen_up_to_symmetry() {
        // Every 4-digit map or its mirror (0↔1) is in the list.
        for m in 0..16u32 {
            let s: String = (0..4)
                .map(|b| if m >> (3 - b) & 1 == 1 { '1' } else { '0' })
                .collect();
            let mirror: String = s
                .chars()
                .map(|c| if c == '0' { '1' } else { '0' })
                .collect();
            assert!(
                MAPS_4.contains(&s.as_str()) || MAPS_4.contains(&mirror.as_str()),
                "{s}"
            );
        }
    }

    #[test]
    fn random_cases_are_deterministic_per_seed_and_within_bounds() {
        let opts = RandomOptions {
            seed: 7,
            cases: 12,
            noise_pct: 0.0,
            ..RandomOptions::default()
        };
        let a = random(&opts, None, &facts).unwrap();
        let b = random(&opts, None, &facts).unwrap();
        let key = |s: &Suite| -> Vec<(String, Snapshot)> {
            s.cases
                .iter()
                .map(|c| (c.map.clone(), c.snapshot.clone()))
                .collect()
        };
        assert_eq!(key(&a), key(&b));
        let other = random(
            &RandomOptions {
                seed: 8,
                ..opts.clone()
            },
            None,
            &facts,
        )
        .unwrap();
        assert_ne!(key(&a), key(&other));
        let mut machines = std::collections::BTreeSet::new();
        for c in &a.cases {
            let s = &c.snapshot;
            let cpus = s.topology.num_cpus();
            let n = s.processes.len();
            assert!(
                n >= 4 && n <= (2 * cpus).clamp(4, RANDOM_MAX_PROCESSES),
                "{n}"
            );
            let threads: u32 = s.processes.iter().map(|p| p.threads).sum();
            assert!(threads as usize <= (2 * cpus).max(n), "{threads} on {cpus}");
            for p in &s.processes {
                assert!(p.threads == 1 || ["stream", "compute"].contains(&p.program.as_str()));
                assert_eq!(p.cpu_demand, p.threads as f64);
                assert_eq!(p.memory_bytes.len(), 1);
            }
            machines.insert(s.topology.name().unwrap_or("?").to_string());
        }
        assert!(machines.len() >= 4, "{machines:?}");
        // --machine puts every case on it.
        let on = random(&opts, Some(resolve("2n:2l:4c:2t").unwrap()), &facts).unwrap();
        assert!(on
            .cases
            .iter()
            .all(|c| c.snapshot.topology.name() == Some("2n:2l:4c:2t")));
    }

    #[test]
    fn noise_changes_only_the_characterisation_and_not_the_draw() {
        let clean = RandomOptions {
            seed: 3,
            cases: 6,
            noise_pct: 0.0,
            ..RandomOptions::default()
        };
        let moving = RandomOptions {
            migration: true,
            ..clean.clone()
        };
        // random-migrate draws the very cases of random; only what may move differs.
        let m = random(&moving, None, &facts).unwrap();
        let r = random(&clean, None, &facts).unwrap();
        assert!(m.migration && !r.migration);
        assert_eq!(m.name, "random-migrate");
        assert!(m.policies.iter().any(|p| p == "auto-migrate"));
        assert!(!r.policies.iter().any(|p| p == "auto-migrate"));
        for (a, b) in m.cases.iter().zip(&r.cases) {
            assert_eq!(a.snapshot, b.snapshot);
            assert_eq!(a.suite, "random-migrate");
        }
        let noisy = RandomOptions {
            noise_pct: 25.0,
            ..clean.clone()
        };
        let a = random(&clean, None, &facts).unwrap();
        let b = random(&noisy, None, &facts).unwrap();
        let mut changed = 0;
        for (x, y) in a.cases.iter().zip(&b.cases) {
            assert_eq!(x.map, y.map);
            assert_eq!(x.snapshot.topology, y.snapshot.topology);
            for (p, q) in x.snapshot.processes.iter().zip(&y.snapshot.processes) {
                assert_eq!(
                    (&p.program, p.threads, &p.memory_bytes, p.cpu_demand),
                    (&q.program, q.threads, &q.memory_bytes, q.cpu_demand)
                );
                let rel = |a: Option<f64>, b: Option<f64>| (b.unwrap() / a.unwrap() - 1.0).abs();
                assert!(rel(p.mpki, q.mpki) <= 0.25 + 1e-12);
                assert!(rel(p.bandwidth_gbps, q.bandwidth_gbps) <= 0.25 + 1e-12);
                let excess = |x: Option<f64>| x.unwrap() - 1.0;
                assert!(
                    (excess(q.numa_penalty) / excess(p.numa_penalty) - 1.0).abs() <= 0.25 + 1e-12
                );
                assert_eq!(q.cache_reuse, None);
                changed += usize::from(p.mpki != q.mpki);
            }
        }
        assert!(changed > 0);
    }

    /// The suites module alone says which suites are drawn: `suite_with` gives them the
    /// draw (migration from the name) and every other suite ignores it.
    #[test]
    fn only_the_random_suites_take_a_draw() {
        let drawn: Vec<&str> = NAMES.iter().copied().filter(|n| is_random(n)).collect();
        assert_eq!(drawn, ["random", "random-migrate"]);
        let draw = RandomOptions {
            seed: 9,
            cases: 3,
            noise_pct: 10.0,
            migration: false,
        };
        for (name, migration) in [("random", false), ("random-migrate", true)] {
            let s = suite_with(name, &draw, None, &facts).unwrap();
            let want = random(
                &RandomOptions {
                    migration,
                    ..draw.clone()
                },
                None,
                &facts,
            )
            .unwrap();
            assert_eq!((s.name, s.migration, s.cases.len()), (name, migration, 3));
            let snaps = |s: &Suite| -> Vec<Snapshot> {
                s.cases.iter().map(|c| c.snapshot.clone()).collect()
            };
            assert_eq!(snaps(&s), snaps(&want));
            // `suite` is the default draw.
            let plain = suite(name, None, &facts).unwrap();
            assert_eq!(plain.cases.len(), RandomOptions::default().cases);
        }
        let with = suite_with("membus", &draw, None, &facts).unwrap();
        let without = suite("membus", None, &facts).unwrap();
        assert_eq!(with.cases.len(), without.cases.len());
        assert_eq!(with.cases[0].snapshot, without.cases[0].snapshot);
        assert!(suite_with("spec2017", &draw, None, &facts)
            .unwrap_err()
            .contains("unknown suite"));
    }

    #[test]
    fn bad_names_are_reported() {
        assert!(suite("spec2017", None, &facts)
            .unwrap_err()
            .contains("unknown suite"));
        let none = |_: &Topology, _: &str| None;
        assert!(suite("nmass", None, &none)
            .unwrap_err()
            .contains("unknown program"));
        let topo = topology::machine("nehalem-e5520").unwrap();
        assert!(case("s", "w", "02", &topo, &["a", "b"], &facts)
            .unwrap_err()
            .contains("no node"));
        assert!(case("s", "w", "0", &topo, &["a", "b"], &facts)
            .unwrap_err()
            .contains("1 homes"));
    }
}
