//! Program profiles: what a program does to the memory system, in quantities one can
//! measure with `perf stat` on the reference machine (Majo & Gross's Nehalem E5520).
//!
//! A profile keeps the two published numbers (solo MPKI with the reference LLC, NUMA
//! penalty) and a few shape parameters; the model derives the rest from them (see
//! [`Profile::derived`] and `docs/model.md`): np = CPI_remote / CPI_local fixes how much
//! of the solo CPI is memory stall, and with the solo CPI that fixes the stall per miss.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::character::regression;
use crate::files::one_line;

pub mod curve;
pub use curve::MissCurve;

/// Reference machine of the built-in numbers: Xeon E5520, 2.26 GHz, 8 MiB L3, ~50 ns
/// local and ~90 ns remote DRAM (Majo & Gross).
pub const REF_CLOCK_GHZ: f64 = 2.26;
pub const REF_LOCAL_NS: f64 = 50.0;
pub const REF_REMOTE_NS: f64 = 90.0;
pub const REF_LLC_BYTES: u64 = 8 << 20;
/// A program always keeps about its most recently used lines, one private L2's worth
/// (256 KiB on Nehalem), however hard its co-runners press on the shared cache; the
/// miss curve is not extrapolated below it.
pub const MIN_CACHE_BYTES: f64 = 256.0 * 1024.0;
/// Largest share of the solo CPI that may be memory stall. np above
/// `1 + MAX_STALL · (REF_REMOTE_NS/REF_LOCAL_NS − 1)` (1.76) cannot be explained by
/// latency alone on the reference machine.
pub const MAX_STALL: f64 = 0.95;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    Memory,
    Compute,
}

/// One program's memory behaviour on the reference machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    /// Derived from MPKI (≥ 1 = memory-bound, the paper's split) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<Class>,
    /// LLC misses per 1000 instructions, alone, with `reference_llc_bytes` of LLC.
    pub mpki: f64,
    /// CPI_remote / CPI_local measured alone on the reference machine. Defaults to the
    /// Majo & Gross regression on MPKI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_penalty: Option<f64>,
    /// Solo, local CPI on the reference machine. Defaults to a core CPI of
    /// [`DEFAULT_CORE_CPI`] plus the memory stall implied by np.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpi: Option<f64>,
    /// Exponent β of the miss curve `mpki ∝ cache^−β` for the reusable part of the
    /// misses; 0.5 is the √2 rule (Hartstein et al., 2006).
    #[serde(default = "default_beta")]
    pub cache_sensitivity: f64,
    /// Fraction of the solo misses that no cache size removes (streaming, compulsory).
    #[serde(default = "default_streaming")]
    pub streaming_fraction: f64,
    /// Every line the program brings in at several cache sizes, relative to `mpki`
    /// (`[bytes, ratio]` pairs, measured with the prefetchers off; [`curve`]). Where
    /// given it replaces the power law of `cache_sensitivity` and `streaming_fraction`
    /// in the model; those two stay what the policies are told of the program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miss_curve: Option<MissCurve>,
    /// The misses the core waits for with the prefetchers on, at several cache sizes,
    /// relative to `mpki`; with `miss_curve`, how the stall per line changes with the
    /// cache a program holds ([`curve`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand_curve: Option<MissCurve>,
    /// Beyond this much cache the program has nothing more to keep; `None` = larger than
    /// any LLC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    /// Dirty lines written back per miss (extra DRAM and link traffic, no stall).
    #[serde(default = "default_writeback")]
    pub writeback_ratio: f64,
    /// LLC size with which `mpki` was measured.
    #[serde(default = "default_ref_llc")]
    pub reference_llc_bytes: u64,
    /// Resident memory. It does not change the speed model; it decides what memory-size
    /// policies (numad's thresholds, Kang's memory intensity) and page migration see.
    /// `None` = the harness default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// DRAM bandwidth the program draws alone, GB/s, as measured where the profile was
    /// taken. The model derives its own traffic from MPKI and CPI and does not read it;
    /// it is here so that the profile store's files (`numasched profile export`) can carry
    /// what the memory-bus policy ranks on in the same format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_gbps: Option<f64>,
}

/// Most misses one core keeps in flight: Nehalem has 10 L1 miss buffers (Intel
/// optimisation manual); with hardware prefetch a stream behaves about the same.
pub const MAX_MLP: f64 = 10.0;
/// Lowest core CPI: a 4-wide core.
pub const MIN_CORE_CPI: f64 = 0.25;

/// Core CPI (perfect LLC) assumed for profiles that give no CPI: an estimate typical of
/// integer SPEC programs on Nehalem.
pub const DEFAULT_CORE_CPI: f64 = 0.8;

fn default_beta() -> f64 {
    0.5
}
fn default_streaming() -> f64 {
    0.1
}
fn default_writeback() -> f64 {
    0.3
}
fn default_ref_llc() -> u64 {
    REF_LLC_BYTES
}

/// What the model needs per profile, computed once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Derived {
    /// Memory-stall fraction of the solo local CPI on the reference machine.
    pub stall_fraction: f64,
    /// CPI with every miss free, cycles per instruction.
    pub core_cpi: f64,
    /// Stall cycles per miss per cycle of miss latency: 1 / memory-level parallelism.
    pub stall_per_latency: f64,
}

impl Profile {
    /// A profile with the defaults for everything but the two published numbers.
    pub fn new(name: &str, mpki: f64, numa_penalty: Option<f64>) -> Profile {
        Profile {
            name: name.to_string(),
            class: None,
            mpki,
            numa_penalty,
            cpi: None,
            cache_sensitivity: default_beta(),
            streaming_fraction: default_streaming(),
            miss_curve: None,
            demand_curve: None,
            working_set_bytes: None,
            writeback_ratio: default_writeback(),
            reference_llc_bytes: REF_LLC_BYTES,
            rss_bytes: None,
            bandwidth_gbps: None,
        }
    }

    pub fn class(&self) -> Class {
        self.class.unwrap_or(if self.mpki >= regression::MIN_MPKI {
            Class::Memory
        } else {
            Class::Compute
        })
    }

    pub fn numa_penalty(&self) -> f64 {
        self.numa_penalty
            .unwrap_or_else(|| regression::numa_penalty(self.mpki))
    }

    /// Solves np = (c0 + m·L_r/MLP) / (c0 + m·L_l/MLP) for the stall share
    /// s = (np − 1) · L_l / (L_r − L_l), then the stall per miss from s and the CPI.
    /// Out-of-range inputs (from snapshots, which are not validated as profiles) are
    /// clamped so the model stays defined.
    pub fn derived(&self) -> Derived {
        let m = finite_or(self.mpki, 0.0).max(0.0) / 1000.0;
        let np = finite_or(self.numa_penalty(), 1.0).max(1.0);
        let s = if m > 0.0 {
            ((np - 1.0) * REF_LOCAL_NS / (REF_REMOTE_NS - REF_LOCAL_NS)).clamp(0.0, MAX_STALL)
        } else {
            0.0
        };
        let cpi = match self.cpi {
            Some(c) if c.is_finite() && c > 0.0 => c,
            _ => DEFAULT_CORE_CPI / (1.0 - s),
        };
        let latency_cycles = REF_LOCAL_NS * REF_CLOCK_GHZ;
        // A miss cannot stall for longer than its own latency (MLP ≥ 1), and no core
        // overlaps more than MAX_MLP misses.
        let stall_per_latency = if m > 0.0 {
            (s * cpi / (m * latency_cycles)).clamp(1.0 / MAX_MLP, 1.0)
        } else {
            0.0
        };
        let stall = stall_per_latency * m * latency_cycles;
        let core_cpi = (cpi - stall).max(MIN_CORE_CPI);
        Derived {
            stall_fraction: stall / (core_cpi + stall),
            core_cpi,
            stall_per_latency,
        }
    }

    /// Misses per instruction with `cache_bytes` of LLC: `mpki_ref` times the measured
    /// `miss_curve` where there is one, else `mpki_ref · (φ + (1 − φ) · (c / c_ref)^−β)`;
    /// c clamped to [[`MIN_CACHE_BYTES`], working set].
    pub fn misses_per_instruction(&self, cache_bytes: f64) -> f64 {
        let m = finite_or(self.mpki, 0.0).max(0.0) / 1000.0;
        if m == 0.0 {
            return 0.0;
        }
        let c = self.clamped_cache(cache_bytes);
        if let Some(curve) = &self.miss_curve {
            return m * curve.ratio(c);
        }
        let c_ref = (self.reference_llc_bytes as f64).max(MIN_CACHE_BYTES);
        let phi = finite_or(self.streaming_fraction, 0.0).clamp(0.0, 1.0);
        let beta = finite_or(self.cache_sensitivity, 0.0).max(0.0);
        m * (phi + (1.0 - phi) * (c / c_ref).powf(-beta))
    }

    /// How much more (or less) each line stalls the core with `cache_bytes` of LLC than
    /// with the reference LLC: the share of lines the prefetchers did not bring in time
    /// (`demand_curve` over `miss_curve`) there, over that share at the reference. 1
    /// without both curves.
    pub fn stall_scale(&self, cache_bytes: f64) -> f64 {
        let (Some(fills), Some(demand)) = (&self.miss_curve, &self.demand_curve) else {
            return 1.0;
        };
        // The core cannot wait for more lines than are brought in: a curve pair that
        // crosses is read as no prefetching there.
        let share = |c: f64| (demand.ratio(c) / fills.ratio(c)).min(1.0);
        let c_ref = (self.reference_llc_bytes as f64).max(MIN_CACHE_BYTES);
        let scale = share(self.clamped_cache(cache_bytes)) / share(c_ref);
        if scale.is_finite() && scale > 0.0 {
            scale
        } else {
            1.0
        }
    }

    fn clamped_cache(&self, cache_bytes: f64) -> f64 {
        let c = finite_or(cache_bytes, MIN_CACHE_BYTES).max(MIN_CACHE_BYTES);
        match self.working_set_bytes {
            Some(ws) => c.min((ws as f64).max(MIN_CACHE_BYTES)),
            None => c,
        }
    }

    /// Checks a user-supplied profile; returns the field and what is wrong with it.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.name.trim().is_empty() {
            return Err(("name", "must not be empty".into()));
        }
        if self.name.len() > MAX_NAME_BYTES {
            return Err((
                "name",
                format!(
                    "is {} bytes, more than the {MAX_NAME_BYTES} a program name may have",
                    self.name.len()
                ),
            ));
        }
        let nonneg = |f: &'static str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err((f, format!("{v} must be a finite number ≥ 0")))
            }
        };
        nonneg("mpki", self.mpki)?;
        nonneg("cache_sensitivity", self.cache_sensitivity)?;
        if let Some(bw) = self.bandwidth_gbps {
            nonneg("bandwidth_gbps", bw)?;
        }
        if self.cache_sensitivity > 3.0 {
            return Err((
                "cache_sensitivity",
                format!("{} must be ≤ 3", self.cache_sensitivity),
            ));
        }
        for (f, v) in [
            ("streaming_fraction", self.streaming_fraction),
            ("writeback_ratio", self.writeback_ratio),
        ] {
            if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
                return Err((f, format!("{v} must be in [0, 1]")));
            }
        }
        if let Some(np) = self.numa_penalty {
            let max = 1.0 + MAX_STALL * (REF_REMOTE_NS / REF_LOCAL_NS - 1.0);
            if !np.is_finite() || np < 1.0 {
                return Err((
                    "numa_penalty",
                    format!("{np} must be ≥ 1 (remote CPI / local CPI)"),
                ));
            }
            if np > max {
                return Err((
                    "numa_penalty",
                    format!("{np} is more than remote latency alone explains (≤ {max:.2})"),
                ));
            }
        }
        if let Some(c) = self.cpi {
            if !c.is_finite() || c <= 0.0 {
                return Err(("cpi", format!("{c} must be a finite number > 0")));
            }
        }
        if self.reference_llc_bytes == 0 {
            return Err(("reference_llc_bytes", "must be > 0".into()));
        }
        for (f, curve) in [
            ("miss_curve", &self.miss_curve),
            ("demand_curve", &self.demand_curve),
        ] {
            if let Some(c) = curve {
                c.validate().map_err(|what| (f, what))?;
            }
        }
        if self.demand_curve.is_some() && self.miss_curve.is_none() {
            return Err((
                "demand_curve",
                "needs a miss_curve: the stall per line is the share of one in the other".into(),
            ));
        }
        if self.rss_bytes == Some(0) {
            return Err(("rss_bytes", "must be > 0".into()));
        }
        if self.working_set_bytes == Some(0) {
            return Err(("working_set_bytes", "must be > 0".into()));
        }
        Ok(())
    }
}

fn finite_or(v: f64, d: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        d
    }
}

/// A named collection of profiles, looked up by program name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileSet {
    profiles: Vec<Profile>,
    by_name: BTreeMap<String, usize>,
}

/// Longest program name a profile may have, in bytes. The kernel keeps 15 of a
/// command name; 255 leaves room for any name a user means, and bounds what a table of
/// profiles pads to (`profile list` once panicked on a 70,000-character name).
pub const MAX_NAME_BYTES: usize = 255;

/// Largest profile file read: thousands of programs fit in a few hundred KiB.
pub const MAX_PROFILE_BYTES: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    // The I/O error is part of the message, not a `source`: anyhow's `{:#}` would
    // print it twice ("...: No such file (os error 2): No such file (os error 2)").
    #[error("{}: cannot read the profile file: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
    /// One line: file, line (where the parser knows it), field path, what is wrong.
    #[error("{}: {}{field}: {what}", path.display(), at_line(*line))]
    Field {
        path: PathBuf,
        line: Option<usize>,
        field: String,
        what: String,
    },
}

/// `line N: ` where the parser knows the line, nothing where it does not (JSON, and
/// checks made after parsing).
fn at_line(line: Option<usize>) -> String {
    line.map_or(String::new(), |l| format!("line {l}: "))
}

/// Most profiles one file may hold. A store of every program a site runs is thousands;
/// this bounds what reading a file costs (100,000 took 2 s and 123 MB to import on a
/// 2-core VM; 300,000 took 341 MB) and is checked while reading, before the rest is.
pub const MAX_PROFILES: usize = 100_000;

/// The file layout: `[[profiles]]` tables in TOML, `{"profiles": [...]}` in JSON.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    #[serde(deserialize_with = "at_most_max_profiles")]
    profiles: Vec<Profile>,
}

/// The profiles of a file, refused at the first beyond [`MAX_PROFILES`].
fn at_most_max_profiles<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Profile>, D::Error> {
    crate::bounded::at_most(
        d,
        MAX_PROFILES,
        "profiles",
        " (split it and import each part)",
    )
}

impl ProfileSet {
    pub fn new(profiles: Vec<Profile>) -> ProfileSet {
        let mut set = ProfileSet::default();
        for p in profiles {
            set.insert(p);
        }
        set
    }

    /// The programs of Majo & Gross's evaluation, gromacs and hmmer, `stream` and `compute`.
    pub fn builtin() -> ProfileSet {
        ProfileSet::new(builtin_profiles())
    }

    /// Adds or replaces (by name).
    pub fn insert(&mut self, p: Profile) {
        match self.by_name.get(&p.name) {
            Some(&i) => self.profiles[i] = p,
            None => {
                self.by_name.insert(p.name.clone(), self.profiles.len());
                self.profiles.push(p);
            }
        }
    }

    /// `other`'s profiles replace ours of the same name.
    pub fn merge(mut self, other: ProfileSet) -> ProfileSet {
        for p in other.profiles {
            self.insert(p);
        }
        self
    }

    pub fn get(&self, name: &str) -> Option<&Profile> {
        self.by_name.get(name).map(|&i| &self.profiles[i])
    }

    pub fn iter(&self) -> impl Iterator<Item = &Profile> {
        self.profiles.iter()
    }

    pub fn len(&self) -> usize {
        self.profiles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty()
    }

    /// Reads a TOML (`.toml`) or JSON (any other extension) profile file.
    pub fn load(path: &Path) -> Result<ProfileSet, ProfileError> {
        let text =
            crate::files::read_text(path, MAX_PROFILE_BYTES, "profile file").map_err(|e| {
                ProfileError::Io {
                    path: path.to_path_buf(),
                    err: e.into_io(),
                }
            })?;
        let toml = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
        ProfileSet::parse(&text, toml, path)
    }

    /// Parses file contents; `origin` only labels errors.
    pub fn parse(text: &str, toml: bool, origin: &Path) -> Result<ProfileSet, ProfileError> {
        let line = |span: Option<std::ops::Range<usize>>| {
            span.map(|s| crate::files::line_of(text, s.start))
        };
        let field_at = |line: Option<usize>, field: String, mut what: String| {
            // The profile store and `profile set` say cache reuse; files carry its
            // complement, as `profile export` writes them.
            if field.ends_with(".cache_reuse") && what.starts_with("unknown field") {
                what = "unknown field `cache_reuse`: a profile file gives \
                        streaming_fraction = 1 - cache_reuse instead (as `numasched profile \
                        export` writes it)"
                    .to_string();
            }
            ProfileError::Field {
                path: origin.to_path_buf(),
                line,
                field,
                what: crate::files::plain_types(&one_line(&what)),
            }
        };
        let field_err = |field: String, what: String| field_at(None, field, what);
        let file: ProfileFile = if toml {
            let de = toml::Deserializer::parse(text).map_err(|e| {
                field_at(line(e.span()), "(document)".into(), e.message().to_string())
            })?;
            serde_path_to_error::deserialize(de).map_err(|e| {
                let at = line(e.inner().span());
                field_at(at, path_name(e.path()), e.inner().message().to_string())
            })?
        } else {
            let mut de = serde_json::Deserializer::from_str(text);
            serde_path_to_error::deserialize(&mut de).map_err(|e| {
                let mut what = e.inner().to_string();
                // Only the extension says TOML: a TOML file named otherwise fails as
                // JSON at its first line, which names no reason.
                if e.inner().is_syntax() && toml::from_str::<toml::Table>(text).is_ok() {
                    what.push_str(" (read as JSON; it is TOML: name the file *.toml)");
                }
                field_err(path_name(e.path()), what)
            })?
        };
        let mut seen = BTreeMap::new();
        for (i, p) in file.profiles.iter().enumerate() {
            p.validate()
                .map_err(|(f, what)| field_err(format!("profiles[{i}].{f}"), what))?;
            if let Some(first) = seen.insert(p.name.clone(), i) {
                return Err(field_err(
                    format!("profiles[{i}].name"),
                    format!("'{}' is already defined by profiles[{first}]", p.name),
                ));
            }
        }
        Ok(ProfileSet::new(file.profiles))
    }
}

fn path_name(p: &serde_path_to_error::Path) -> String {
    let s = p.to_string();
    if s == "." || s.is_empty() {
        "(document)".into()
    } else {
        s
    }
}

/// `(name, mpki, np, cpi, β, φ, writeback)`. MPKI and np: Majo & Gross's table (Nehalem
/// E5520). CPI, β, φ and writeback ratio are estimates: CPI from published SPEC CPU2006
/// characterisations of Nehalem-class cores; β and φ from the shapes of the published
/// miss-ratio-versus-cache-size curves (Jaleel, "Memory characterization of workloads
/// using instrumentation-driven simulation", 2007): flat for the streaming programs, steep
/// for omnetpp and sphinx3; writeback from whether the program rewrites its data.
type Row = (&'static str, f64, f64, f64, f64, f64, f64);
/// The first rows of [`TABLE`] are Majo & Gross's measured programs; the rest are
/// estimates (the bus study's low-bandwidth partners, our own kernels).
const PUBLISHED_ROWS: usize = 14;
const TABLE: &[Row] = &[
    ("mcf", 30.0, 1.15, 4.0, 0.5, 0.1, 0.2),
    ("lbm", 22.0, 1.30, 1.2, 0.1, 0.8, 0.9),
    ("libquantum", 24.0, 1.46, 1.0, 0.1, 0.9, 0.5),
    ("milc", 20.0, 1.35, 1.5, 0.3, 0.6, 0.4),
    ("soplex", 18.0, 1.32, 1.3, 0.5, 0.2, 0.2),
    ("omnetpp", 12.0, 1.22, 1.6, 0.7, 0.1, 0.3),
    ("sphinx3", 10.0, 1.20, 1.1, 0.7, 0.1, 0.1),
    ("gcc", 1.5, 1.05, 1.0, 0.5, 0.2, 0.3),
    ("h264ref", 0.8, 1.03, 0.7, 0.5, 0.1, 0.3),
    ("gobmk", 0.6, 1.02, 0.9, 0.5, 0.1, 0.3),
    ("perlbench", 0.5, 1.02, 0.75, 0.5, 0.1, 0.3),
    ("namd", 0.2, 1.01, 0.6, 0.5, 0.1, 0.3),
    ("gamess", 0.05, 1.00, 0.5, 0.5, 0.1, 0.3),
    ("povray", 0.05, 1.00, 0.6, 0.5, 0.1, 0.3),
    // The low-bandwidth partners of the bus study (Tudu et al.); estimates.
    ("gromacs", 0.3, 1.01, 0.65, 0.5, 0.1, 0.3),
    ("hmmer", 0.2, 1.01, 0.55, 0.5, 0.1, 0.3),
    // STREAM triad, SSE2: per 8 elements ~24 instructions and 3 line fills (b, c, and
    // a's read-for-ownership) + 1 writeback → ~125 fills/kilo-instruction, taken as 100
    // with loop overhead; CPI chosen so one Nehalem core draws ~12 GB/s, as single-thread
    // STREAM does; np an estimate for a bandwidth-bound kernel.
    ("stream", 100.0, 1.55, 1.6, 0.0, 1.0, 0.33),
    // A register-resident kernel: no misses, never remote-sensitive.
    ("compute", 0.0, 1.00, 0.5, 0.5, 0.1, 0.0),
];

/// The NUMA penalties Majo & Gross measured on the reference machine (run remote
/// against local, machine otherwise idle): the population a penalty nobody measured is
/// drawn from ([`crate::character::prior`]).
pub fn published_penalties() -> impl Iterator<Item = f64> {
    TABLE[..PUBLISHED_ROWS].iter().map(|row| row.2)
}

fn builtin_profiles() -> Vec<Profile> {
    TABLE
        .iter()
        .map(|&(name, mpki, np, cpi, beta, phi, wb)| Profile {
            cpi: Some(cpi),
            cache_sensitivity: beta,
            streaming_fraction: phi,
            writeback_ratio: wb,
            rss_bytes: kernel_rss(name),
            ..Profile::new(name, mpki, Some(np))
        })
        .collect()
}

/// Resident memory of our own kernels, which we define: the streaming kernel's three
/// arrays are sized far beyond any LLC (like STREAM's rule of 4× the caches), the compute
/// kernel keeps its data in registers and a small heap. The SPEC programs have no
/// built-in figure: the harness gives them its default.
fn kernel_rss(name: &str) -> Option<u64> {
    match name {
        "stream" => Some(2 << 30),
        "compute" => Some(64 << 20),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_valid_and_complete() {
        let set = ProfileSet::builtin();
        for p in set.iter() {
            p.validate().unwrap();
        }
        for name in [
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
        ] {
            assert!(set.get(name).is_some(), "{name}");
        }
        assert_eq!(set.get("lbm").unwrap().class(), Class::Memory);
        assert_eq!(set.get("gcc").unwrap().class(), Class::Memory);
        assert_eq!(set.get("namd").unwrap().class(), Class::Compute);
    }

    #[test]
    fn np_fixes_the_stall_share() {
        let p = ProfileSet::builtin().get("milc").unwrap().derived();
        // s = 0.35 · 50 / 40
        assert!((p.stall_fraction - 0.4375).abs() < 1e-12);
        // Reconstruct np at reference latencies: (c0 + k·L_r) / (c0 + k·L_l).
        let m = 0.020;
        let stall = |l: f64| m * p.stall_per_latency * l * REF_CLOCK_GHZ;
        let np = (p.core_cpi + stall(REF_REMOTE_NS)) / (p.core_cpi + stall(REF_LOCAL_NS));
        assert!((np - 1.35).abs() < 1e-12, "{np}");
        assert!((p.core_cpi + stall(REF_LOCAL_NS) - 1.5).abs() < 1e-12);
    }

    #[test]
    fn miss_curve_rises_as_the_share_shrinks_and_is_clamped() {
        let set = ProfileSet::builtin();
        let soplex = set.get("soplex").unwrap();
        let full = soplex.misses_per_instruction(8.0 * 1048576.0);
        assert!((full - 0.018).abs() < 1e-12);
        let half = soplex.misses_per_instruction(4.0 * 1048576.0);
        assert!(half > full);
        assert_eq!(
            soplex.misses_per_instruction(0.0),
            soplex.misses_per_instruction(MIN_CACHE_BYTES)
        );
        let stream = set.get("stream").unwrap();
        assert_eq!(
            stream.misses_per_instruction(1e5),
            stream.misses_per_instruction(1e9)
        );
        let mut ws = soplex.clone();
        ws.working_set_bytes = Some(4 << 20);
        assert_eq!(
            ws.misses_per_instruction(16e6),
            ws.misses_per_instruction((4 << 20) as f64)
        );
    }

    #[test]
    fn crossing_curves_mean_no_prefetching_there() {
        // At 8 MiB the prefetchers hide half the lines; at 2 MiB the demand curve says
        // twice as many lines are waited for as brought in, which cannot be: every
        // line is waited for, twice the stall per line of the reference, not four.
        let p = Profile {
            miss_curve: Some(MissCurve::new(vec![[2097152.0, 1.0], [8388608.0, 1.0]])),
            demand_curve: Some(MissCurve::new(vec![[2097152.0, 2.0], [8388608.0, 0.5]])),
            ..Profile::new("x", 10.0, Some(1.2))
        };
        assert!((p.stall_scale(8388608.0) - 1.0).abs() < 1e-12);
        assert!((p.stall_scale(2097152.0) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn default_cpi_follows_the_core_cpi() {
        let p = Profile::new("x", 10.0, Some(1.2));
        let d = p.derived();
        assert!((d.core_cpi - DEFAULT_CORE_CPI).abs() < 1e-12);
        let zero = Profile::new("z", 0.0, Some(1.3)).derived();
        assert_eq!(zero.stall_fraction, 0.0);
        assert_eq!(zero.stall_per_latency, 0.0);
    }

    #[test]
    fn files_load_in_both_formats_and_merge() {
        let toml = "[[profiles]]\nname = \"app\"\nmpki = 12.5\nnuma_penalty = 1.2\n";
        let set = ProfileSet::parse(toml, true, Path::new("p.toml")).unwrap();
        assert_eq!(set.get("app").unwrap().mpki, 12.5);
        let json = r#"{"profiles":[{"name":"mcf","mpki":5,"cache_sensitivity":0.2}]}"#;
        let set2 = ProfileSet::parse(json, false, Path::new("p.json")).unwrap();
        let merged = ProfileSet::builtin().merge(set).merge(set2);
        assert_eq!(merged.get("mcf").unwrap().mpki, 5.0);
        assert!(merged.get("app").is_some());
        assert_eq!(merged.len(), ProfileSet::builtin().len() + 1);
    }

    #[test]
    fn a_name_longer_than_255_bytes_is_refused_naming_the_limit() {
        let long = "x".repeat(MAX_NAME_BYTES + 1);
        let e = err(&format!("[[profiles]]\nname='{long}'\nmpki=1\n"), true);
        assert!(e.contains("more than the 255"), "{e}");
        let ok = "x".repeat(MAX_NAME_BYTES);
        ProfileSet::parse(
            &format!("[[profiles]]\nname='{ok}'\nmpki=1\n"),
            true,
            Path::new("f"),
        )
        .expect("255 bytes are fine");
    }

    #[test]
    fn a_file_of_more_than_max_profiles_is_refused_naming_the_limit() {
        let file = |n: usize, toml: bool| {
            if toml {
                (0..n)
                    .map(|i| format!("[[profiles]]\nname='p{i}'\nmpki=1\n"))
                    .collect::<String>()
            } else {
                let entries: Vec<String> = (0..n)
                    .map(|i| format!(r#"{{"name":"p{i}","mpki":1}}"#))
                    .collect();
                format!(r#"{{"profiles":[{}]}}"#, entries.join(","))
            }
        };
        for toml in [false, true] {
            let e = err(&file(MAX_PROFILES + 1, toml), toml);
            assert!(e.contains("more than 100000 profiles"), "{e}");
            let set = ProfileSet::parse(&file(MAX_PROFILES, toml), toml, Path::new("f"))
                .expect("the limit itself is fine");
            assert_eq!(set.len(), MAX_PROFILES);
        }
    }

    fn err(text: &str, toml: bool) -> String {
        let e = ProfileSet::parse(text, toml, Path::new("bad.f"))
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n'), "multi-line: {e}");
        assert!(e.starts_with("bad.f: "), "{e}");
        e
    }

    #[test]
    fn bad_fields_are_named_on_one_line() {
        let e = err(
            "[[profiles]]\nname='a'\nmpki=1\n[[profiles]]\nname='b'\nmpki=-2\n",
            true,
        );
        assert!(e.contains("profiles[1].mpki: -2 must be"), "{e}");
        let e = err("[[profiles]]\nname='a'\nmpki=1\nmpkii=3\n", true);
        assert!(e.contains("profiles[0]") && e.contains("mpkii"), "{e}");
        let e = err("[[profiles]]\nname='a'\nmpki='x'\n", true);
        assert!(e.contains("profiles[0].mpki"), "{e}");
        let e = err(
            r#"{"profiles":[{"name":"a","mpki":1,"numa_penalty":0.9}]}"#,
            false,
        );
        assert!(
            e.contains("profiles[0].numa_penalty: 0.9 must be ≥ 1"),
            "{e}"
        );
        let e = err(r#"{"profiles":[{"name":"a","mpki":1,"foo":1}]}"#, false);
        assert!(e.contains("profiles[0]") && e.contains("foo"), "{e}");
        let e = err(
            r#"{"profiles":[{"name":"a","mpki":1},{"name":"a","mpki":2}]}"#,
            false,
        );
        assert!(e.contains("profiles[1].name"), "{e}");
        let e = err("[[profiles]\n", true);
        assert!(e.contains("(document)"), "{e}");
        let e = err("{", false);
        assert!(e.starts_with("bad.f: ") && !e.contains("TOML"), "{e}");
        let e = err("[[profiles]]\nname = 'a'\nmpki = 1\n", false);
        assert!(e.contains("it is TOML: name the file *.toml"), "{e}");
        let e = ProfileSet::load(Path::new("/nonexistent/p.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent/p.toml: "), "{e}");
    }
}
