//! `numasched profile`: look at and edit the profile store, the per-program numbers the
//! daemon starts from before it has measured anything (and keeps learning into).

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::{Args, Subcommand};

use super::progress::Progress;
use crate::characterise::store::{
    self, GivenProfile, Known, Measurement, Origin, Quantity, Store, StoredProgram,
};
use crate::observe::printable::printable;

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// The profile store [default: /var/lib/numasched/profiles.db].
    #[arg(long, value_name = "PATH", global = true, value_parser = crate::daemon::config::parse_file_path)]
    pub db: Option<PathBuf>,
    #[command(subcommand)]
    pub command: ProfileCommand,
}

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// Show every program in the store, with where each number came from.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Give values of a program's profile (each alone or together; values not named
    /// stay as given before, learned numbers stay).
    Set(SetArgs),
    /// Add the profiles of a file (TOML or JSON, the simulator's profile format). Each
    /// replaces the numbers given before for its program: a value the file leaves out
    /// is no longer given (learned numbers stay). `set` changes single values.
    Import {
        /// `.toml` is read as TOML, anything else as JSON.
        file: PathBuf,
    },
    /// Write the store as a profile file (TOML for `.toml`, else JSON; stdout: JSON).
    Export { file: Option<PathBuf> },
    /// Run a command with its memory local, then remote (alternating, N times each),
    /// and record how much slower remote is: its NUMA penalty, without counters.
    Measure(super::measure::MeasureArgs),
    /// The simulator's built-in program profiles (SPEC CPU2006 and the test loads);
    /// with --load, given to the store, so that a machine without hardware counters
    /// characterises these programs by name.
    Builtin {
        /// Load them into the store. A program you already gave numbers for keeps
        /// yours (and is named) unless --replace; learned numbers stay in any case.
        #[arg(long)]
        load: bool,
        /// With --load: replace the given numbers of programs already in the store.
        #[arg(long, requires = "load")]
        replace: bool,
    },
}

#[derive(Debug, Args)]
pub struct SetArgs {
    /// Program name, as in /proc/PID/comm.
    pub program: String,
    /// LLC misses per 1000 instructions (≥ 0).
    #[arg(long, allow_negative_numbers = true)]
    pub mpki: Option<f64>,
    /// CPI remote / CPI local (≥ 1).
    #[arg(long, allow_negative_numbers = true)]
    pub numa_penalty: Option<f64>,
    /// Share of LLC misses that more cache would remove, in [0, 1].
    #[arg(long, allow_negative_numbers = true)]
    pub cache_reuse: Option<f64>,
    /// DRAM bandwidth drawn alone, GB/s (≥ 0).
    #[arg(long, allow_negative_numbers = true)]
    pub bandwidth_gbps: Option<f64>,
}

/// Bytes the kernel keeps of a command name (TASK_COMM_LEN − 1): the daemon knows a
/// process by that name, so a longer one is never matched.
const COMM_BYTES: usize = 15;

/// Warnings about profile names an import prints before counting the rest.
const MAX_WARNINGS: usize = 10;

/// Why a stored name will match no running process, if it cannot. The profile is still
/// kept: `profile export` feeds `eval`, where any name is fine. Escaped names (`\x1b`,
/// as `status` shows a control character) can be longer than what they stand for, so
/// they are let be.
fn comm_warning(name: &str) -> Option<String> {
    if name.chars().any(char::is_control) {
        return Some(format!(
            "'{}' holds control characters, and the daemon knows a process by its name \
             with them written out as shown here, so no running process matches it",
            printable(name)
        ));
    }
    if name.len() <= COMM_BYTES || name.contains('\\') {
        return None;
    }
    let mut cut = COMM_BYTES;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    Some(format!(
        "'{name}' is {} bytes and the kernel keeps {COMM_BYTES} of a command name, so no \
         running process is named that; the daemon would look for '{}'",
        name.len(),
        &name[..cut]
    ))
}

/// `profile import`, in one transaction.
fn import(file: &std::path::Path, path: &std::path::Path) -> anyhow::Result<()> {
    // Read and checked first: a file that cannot be imported creates nothing.
    let mut progress = Progress::start();
    let parsed = store::ProfileFile::read(file)?;
    let total = parsed.set.len();
    let mut store = open_to_write(path)?;
    let mut replaced = 0;
    for (i, p) in parsed.set.iter().enumerate() {
        progress.report(|| format!("import: {i} of {total} profiles compared"));
        if store.get(&p.name)?.is_some_and(|s| s.any_given()) {
            replaced += 1;
        }
    }
    let n = store.import_parsed(&parsed, now(), &mut |i| {
        progress.report(|| format!("import: {i} of {total} profiles written"))
    })?;
    eprintln!(
        "imported {n} profiles from {} ({replaced} of them replaced numbers given before)",
        file.display()
    );
    // A few, then a count: a file of 100,000 long names is not 100,000 lines.
    let warnings: Vec<String> = parsed
        .set
        .iter()
        .filter_map(|p| comm_warning(&p.name))
        .collect();
    for w in warnings.iter().take(MAX_WARNINGS) {
        eprintln!("numasched: warning: {w}");
    }
    if warnings.len() > MAX_WARNINGS {
        eprintln!(
            "numasched: warning: and {} more profiles whose names no running process has",
            warnings.len() - MAX_WARNINGS
        );
    }
    Ok(())
}

/// The store for a command that changes it: opened with the copy a healthy store
/// leaves beside itself (`<db>.bak`), whose failure is worth a line but not an error.
/// Commands that only read (`list`, `export`) open it without, and so change nothing.
fn open_to_write(path: &std::path::Path) -> Result<Store, store::StoreError> {
    let s = Store::open(path)?;
    if let Some(w) = s.backup_warning() {
        eprintln!("numasched: warning: {w}");
    }
    Ok(s)
}

pub fn run(args: ProfileArgs) -> anyhow::Result<()> {
    let path = args
        .db
        .unwrap_or_else(|| PathBuf::from(store::DEFAULT_PATH));
    match args.command {
        ProfileCommand::Measure(a) => {
            let name = a
                .name
                .clone()
                .unwrap_or_else(|| super::measure::comm_of(&a.command[0]));
            super::measure::run(a, &path, now())?;
            if let Some(w) = comm_warning(&name) {
                eprintln!("numasched: warning: {w}");
            }
        }
        ProfileCommand::Set(a) => {
            let given = GivenProfile {
                mpki: a.mpki,
                numa_penalty: a.numa_penalty,
                cache_reuse: a.cache_reuse,
                bandwidth_gbps: a.bandwidth_gbps,
            };
            // Validate before touching the file: a typo must not create a store.
            given.validate()?;
            if given == GivenProfile::default() {
                anyhow::bail!(
                    "profile set {}: name at least one of --mpki, --numa-penalty, \
                     --cache-reuse, --bandwidth-gbps",
                    a.program
                );
            }
            open_to_write(&path)?.set_given(&a.program, &given, now())?;
            if let Some(w) = comm_warning(&a.program) {
                eprintln!("numasched: warning: {w}");
            }
        }
        ProfileCommand::List { json } => {
            let programs = match existing(&path)? {
                Stored::Nothing => Vec::new(),
                Stored::Something => Store::open_without_backup(&path)?.list()?,
            };
            if json {
                let text = serde_json::to_string_pretty(&programs).context("encoding the list")?;
                println!("{text}");
            } else {
                print!("{}", render(&programs));
            }
        }
        ProfileCommand::Import { file } => import(&file, &path)?,
        ProfileCommand::Builtin { load: false, .. } => print!("{}", render_builtin()),
        ProfileCommand::Builtin {
            load: true,
            replace,
        } => {
            let mut store = open_to_write(&path)?;
            // Numbers the user gave are theirs: a built-in does not overwrite them
            // unasked.
            let mut kept = Vec::new();
            let mut load = Vec::new();
            for p in crate::sim::ProfileSet::builtin().iter() {
                let given = store.get(&p.name)?.is_some_and(|s| s.any_given());
                if given && !replace {
                    kept.push(p.name.clone());
                } else {
                    load.push(p.clone());
                }
            }
            let set = crate::sim::ProfileSet::new(load);
            let n = store.import(&set, &|_| true, now(), &mut |_| {})?;
            eprintln!("loaded {n} built-in profiles into {}", path.display());
            if !kept.is_empty() {
                eprintln!(
                    "kept the numbers you gave for {} (--replace to overwrite them)",
                    printable(&kept.join(", "))
                );
            }
        }
        ProfileCommand::Export { file } => {
            let (programs, skipped) = match existing(&path)? {
                Stored::Nothing => (Vec::new(), Vec::new()),
                Stored::Something => Store::open_without_backup(&path)?.export()?,
            };
            for name in &skipped {
                eprintln!(
                    "numasched: {}: skipped, no MPKI known (the profile format needs one)",
                    printable(name)
                );
            }
            match file {
                Some(f) => {
                    let text = store::render_profiles(&programs, store::is_toml(&f))
                        .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
                    std::fs::write(&f, text).with_context(|| f.display().to_string())?;
                }
                None => {
                    let text =
                        store::render_profiles(&programs, false).map_err(anyhow::Error::msg)?;
                    print!("{text}");
                }
            }
        }
    }
    Ok(())
}

/// Commands that only read a store refuse a path with none, instead of creating an
/// empty one where a typo pointed: nothing is written by `list` or `export`.
/// What a store file a reading command was pointed at holds.
enum Stored {
    /// An empty file: no programs, and nothing a reader should write into it (opening
    /// it as a store would write the schema, 12 KiB, into a file the user only read).
    Nothing,
    Something,
}

fn existing(path: &std::path::Path) -> anyhow::Result<Stored> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() && m.len() == 0 => Ok(Stored::Nothing),
        // A directory, a device, a FIFO: said as such (the store's own message is
        // about creating and writing, which a reading command does not do). A
        // symlink is left to the store, which refuses it with its reason.
        Ok(m) if !m.is_file() && !m.file_type().is_symlink() => {
            crate::files::regular_or_absent(path)?;
            Ok(Stored::Something)
        }
        Ok(_) => Ok(Stored::Something),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            if dir.is_dir() {
                anyhow::bail!(
                    "{}: no profile store here (`profile set` or `profile import` creates one)",
                    path.display()
                )
            }
            anyhow::bail!("{}: no such directory", dir.display())
        }
        Err(e) => anyhow::bail!("{}: {e}", path.display()),
    }
}

/// Seconds since the epoch; a clock before 1970 is recorded as 0 rather than failing.
fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs().min(i64::MAX as u64) as i64)
        .unwrap_or(0)
}

/// One row per program; each cell is the value in use and where it came from
/// (`*` = learned, with its sample count).
pub fn render(programs: &[StoredProgram]) -> String {
    let mut rows = vec![header()];
    for p in programs {
        // A name given by `profile set` or a file is the user's text, not /proc's
        // (already escaped by the scanner): it may hold escape sequences.
        let mut row = vec![printable(&p.program).into_owned()];
        for q in Quantity::ALL {
            row.push(match (q, &p.measured) {
                (Quantity::NumaPenalty, Some(m)) if ranks_first(p, m) => measured_cell(m),
                // Counted by `profile measure`, it ranks before a learned MPKI.
                (
                    Quantity::Mpki,
                    Some(Measurement {
                        mpki: Some(v),
                        measured_at,
                        ..
                    }),
                ) => format!("{v:.3} (measured {})", store::date_of(*measured_at)),
                _ => cell(p.get(q)),
            });
        }
        rows.push(row);
    }
    let mut out = table(&rows);
    if programs.is_empty() {
        out.push_str("(no programs stored)\n");
    }
    out
}

/// The built-in profiles in the same columns as the store's listing.
fn render_builtin() -> String {
    let num = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"));
    let mut rows = vec![header()];
    for p in crate::sim::ProfileSet::builtin().iter() {
        rows.push(vec![
            p.name.clone(),
            num(Some(p.mpki)),
            num(p.numa_penalty),
            num(Some(1.0 - p.streaming_fraction)),
            num(p.bandwidth_gbps),
        ]);
    }
    table(&rows)
}

fn header() -> Vec<String> {
    [
        "program",
        "mpki",
        "numa_penalty",
        "cache_reuse",
        "bandwidth_gbps",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Rows as left-aligned columns two spaces apart.
fn table(rows: &[Vec<String>]) -> String {
    // Padded to at most MAX_COLUMN: a longer cell (a name stored before names were
    // bounded) is printed whole and unpadded rather than overflowing the padding.
    const MAX_COLUMN: usize = 64;
    let widths: Vec<usize> = (0..5)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
                .min(MAX_COLUMN)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Whether the daemon takes the penalty from the measurement: one whose runs agreed
/// comes before what it learned and what was given; an uncertain one only fills a gap
/// (`numasched_model::character::resolve`).
fn ranks_first(p: &StoredProgram, m: &Measurement) -> bool {
    !m.result.uncertain || p.numa_penalty.best().is_none()
}

fn measured_cell(m: &Measurement) -> String {
    format!(
        "{:.3} ± {:.3} (measured {}{})",
        m.result.numa_penalty,
        m.result.spread,
        store::date_of(m.measured_at),
        if m.result.uncertain {
            ", uncertain"
        } else {
            ""
        }
    )
}

fn cell(k: &Known) -> String {
    match (k.best(), k.learned) {
        (Some((v, Origin::Learned)), Some(f)) => format!("{v:.3} (learned, {} samples)", f.samples),
        (Some((v, _)), _) => format!("{v:.3} (given)"),
        (None, _) => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name stored before names were bounded (import accepted 70,000 characters)
    /// overflowed `format!`'s padding width and panicked.
    #[test]
    fn a_very_long_stored_name_lists_without_panicking() {
        let long = StoredProgram {
            program: "x".repeat(70_000),
            ..StoredProgram::default()
        };
        let short = StoredProgram {
            program: "mcf".into(),
            ..StoredProgram::default()
        };
        let out = render(&[long, short]);
        assert!(
            out.lines().any(|l| l.starts_with("mcf ")),
            "{}",
            &out[..200]
        );
        assert!(out.lines().all(|l| l.len() < 71_000));
    }
}
