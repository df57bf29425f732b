//! `numasched eval`: a whole suite on the performance model, every policy against the
//! default scheduler and the oracle, as a terminal table, JSON, CSV and an HTML report.
//! The suite is a built-in one (`--suite`) or an operator's file (`--workloads`).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::policy::Policy;
use crate::sim::eval::report::{self, Results};
use crate::sim::eval::suites::{seed_label, ProgramFacts, Suite};
use crate::sim::eval::workloads::{self, Workloads};
use crate::sim::eval::{from_model, html, runner, suites};
use crate::sim::ProfileSet;
use crate::topology::{Topology, THIS};

use super::progress::Progress;
use super::sim::load_profiles;
use super::topo;

// One of --suite and --workloads is needed; both together are refused by `run` in one
// line rather than by clap's usage text.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").args(["suite", "workloads"]).required(true).multiple(true)))]
pub struct EvalArgs {
    /// Suite: nmass, nmass-migrate, membus, cmload, random (cases drawn from --seed;
    /// seeds 1–80 are training seeds, others held out) or random-migrate (the same
    /// cases, pages may move too).
    #[arg(long, value_name = "S")]
    pub suite: Option<String>,
    /// Run your own mixes instead of a suite: a TOML file with `machine`, optional
    /// `migration`, `policies` and `profiles`, and [[workload]] tables of `name`,
    /// `programs`, optional `threads` and `homes` (home node id per program, or a list
    /// of such maps). Example: docs/workloads-example.toml.
    #[arg(long, value_name = "FILE")]
    pub workloads: Option<PathBuf>,
    /// Machine to run the suite on instead of its own (preset, spec string, or `this`:
    /// this machine, read from sysfs); for random, every case on it instead of one
    /// drawn per case.
    #[arg(long, value_name = "M")]
    pub machine: Option<String>,
    /// Where `--machine this` (or a workloads file's `machine = "this"`) is read from
    /// [default: /sys].
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,
    // --seed, --cases and --noise have no clap default, so that one given where it has
    // no effect (a fixed suite, a workloads file) is refused even at its default value.
    /// random: the seed cases are drawn from [default: 1].
    #[arg(long, value_name = "S", allow_hyphen_values = true,
          value_parser = clap::builder::RangedI64ValueParser::<u64>::new().range(0..))]
    pub seed: Option<u64>,
    /// random: how many cases to draw, at most 1000 [default: 20].
    #[arg(long, value_name = "N", allow_hyphen_values = true,
          value_parser = clap::builder::RangedI64ValueParser::<usize>::new().range(1..=workloads::MAX_WORKLOADS as i64))]
    pub cases: Option<usize>,
    /// random: characterisation error the policies see, per cent (MPKI and bandwidth
    /// ±P%, NUMA penalty error, cache reuse unknown); the model scores the true programs
    /// [default: 0].
    #[arg(long, value_name = "P", allow_hyphen_values = true, value_parser = parse_noise)]
    pub noise: Option<f64>,
    /// Policies, comma-separated (default: the suite's).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub policies: Option<Vec<String>>,
    /// Directory for results.json, results.csv, table.txt and report.html (created,
    /// with its parents, before the run).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write the JSON results here; `-` writes them to standard output, and the
    /// summary then goes to standard error.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Extra program profiles (TOML or JSON).
    #[arg(long, value_name = "FILE")]
    pub profiles: Option<PathBuf>,
    /// Worker threads.
    #[arg(long, default_value_t = 2, value_name = "N", allow_hyphen_values = true,
          value_parser = clap::builder::RangedI64ValueParser::<usize>::new().range(1..=1024))]
    pub jobs: usize,
    /// Granularity plans are applied at, as the daemon's --pin (llc, node, core, cpu).
    #[arg(long, value_name = "UNIT", default_value = "llc", value_parser = crate::daemon::config::parse_pin)]
    pub pin: crate::policy::Pin,
    /// Also print the per-case table (always written to table.txt with --out).
    #[arg(long, short)]
    pub verbose: bool,
}

/// A noise level in per cent: finite, 0 to 100.
fn parse_noise(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("{v} is not between 0 and 100"));
    }
    Ok(v)
}

/// Colour on a terminal unless `NO_COLOR` is set (https://no-color.org).
fn colour() -> bool {
    use std::io::IsTerminal;
    crate::daemon::logging::colour(std::io::stdout().is_terminal())
}

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    // Flags that cannot work together are refused before anything is created.
    if args.suite.is_some() && args.workloads.is_some() {
        anyhow::bail!("--workloads and --suite cannot be used together: the file is the suite")
    }
    check_draw_flags(&args)?;
    let wanted = match &args.policies {
        Some(list) => Some(
            workloads::check_policies(list)
                .map_err(|(_, what)| anyhow::anyhow!("--policies: {what}"))?,
        ),
        None => None,
    };
    // Where the results go is checked before the work: a typo costs a second, not a run.
    if let Some(dir) = &args.out {
        if dir.exists() && !dir.is_dir() {
            anyhow::bail!("--out: {}: exists and is not a directory", dir.display());
        }
        writable_dir("--out", dir)?;
    }
    let json_out = args.json.as_deref().filter(|p| *p != Path::new("-"));
    if let Some(path) = json_out {
        if path.is_dir() {
            anyhow::bail!("--json: {}: is a directory (name a file)", path.display());
        }
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        writable_dir("--json", dir.unwrap_or(Path::new(".")))?;
    }
    // With the JSON on standard output, what a person reads goes to standard error.
    let mut human: Box<dyn Write> = if args.json.is_some() && json_out.is_none() {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };
    let (suite, profiles) = match (&args.suite, &args.workloads) {
        (_, Some(path)) => from_file(path, &args)?,
        (Some(name), None) => built_in(name, &args)?,
        (None, None) => anyhow::bail!("say what to run: --suite S or --workloads FILE"),
    };
    let mut runner = from_model::runner_for(&suite, profiles).context("the suite has no cases")?;
    runner.pin = args.pin;
    let names: Vec<String> = wanted.unwrap_or_else(|| suite.policies.clone());
    let policies: Vec<Box<dyn Policy>> = names
        .iter()
        .map(|n| runner.policy(n))
        .collect::<Result<_, _>>()?;

    let bar = ProgressBar::new((suite.cases.len() * policies.len()) as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:40}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(format!("eval {}", suite.name));
    // The bar draws only on a terminal; elsewhere (a log, CI) a line past 2 s says
    // how far it is.
    let total = suite.cases.len() * policies.len();
    let lines = (!std::io::stderr().is_terminal()).then(|| Mutex::new((Progress::start(), 0)));
    let rows = runner.run_all(&suite.cases, &policies, args.jobs, &|case, p| {
        bar.set_message(format!("{} {} {p}", case.workload, case.map));
        bar.inc(1);
        if let Some(mut g) = lines.as_ref().and_then(|l| l.lock().ok()) {
            g.1 += 1;
            let done = g.1;
            g.0.report(|| format!("eval {}: {done} of {total} runs", suite.name));
        }
    });
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let table = report::table(&rows);
    if args.verbose {
        // The summary below ends with the map note; say it once.
        let cases = table
            .strip_prefix(report::MAP_NOTE)
            .map_or(table.as_str(), |t| t.trim_start_matches('\n'));
        writeln!(human, "{cases}")?;
    }
    write!(human, "{}", report::summary_table(&rows, colour()))?;
    let mut done = format!(
        "suite {} on {}: {} {} in {elapsed:.1} s",
        suite.name,
        suite.machine,
        rows.len(),
        if rows.len() == 1 { "entry" } else { "entries" }
    );
    if !(args.verbose || args.out.is_some()) {
        // On its own line where it would run past a terminal's 100 columns.
        let hint = "per case: --verbose, or table.txt with --out";
        let sep = if done.len() + hint.len() + 3 > 100 {
            "\n"
        } else {
            " "
        };
        done = format!("{done}{sep}({hint})");
    }
    writeln!(human, "{done}")?;
    if let Some(seed) = suite.seed {
        writeln!(human, "{}", seed_label(seed))?;
    }
    // On a machine with one node and one LLC every placement shares the same cache
    // and memory: say so, rather than leave ten identical columns unexplained.
    if !suite.cases.is_empty()
        && suite.cases.iter().all(|c| {
            let t = &c.snapshot.topology;
            t.nodes().len() == 1 && t.llcs().len() == 1
        })
    {
        writeln!(
            human,
            "note: {} has one node and one LLC: no placement changes what a process shares \
             or where its memory is, so placing policies can only match linux",
            if suite.machine == THIS {
                "this machine"
            } else {
                suite.machine.as_str()
            }
        )?;
    }
    let written = Written {
        json: json_out,
        json_to_stdout: args.json.is_some() && json_out.is_none(),
        dir: args.out.as_deref(),
    };
    written.write(&mut human, &rows, &table, &suite, elapsed)
}

/// Where the results go besides the terminal: `--json` (a file, or standard output) and
/// `--out`'s directory.
struct Written<'a> {
    json: Option<&'a Path>,
    json_to_stdout: bool,
    dir: Option<&'a Path>,
}

impl Written<'_> {
    fn write(
        &self,
        human: &mut dyn Write,
        rows: &[runner::Row],
        table: &str,
        suite: &Suite,
        elapsed: f64,
    ) -> anyhow::Result<()> {
        let results = Results {
            results: rows,
            summaries: report::summaries(rows),
        };
        let json = serde_json::to_string_pretty(&results).context("encoding results")?;
        match self.json {
            Some(path) => {
                write(path, &json)?;
                writeln!(human, "wrote the JSON results to {}", path.display())?;
            }
            None if self.json_to_stdout => println!("{json}"),
            None => {}
        }
        if let Some(dir) = self.dir {
            write(&dir.join("results.json"), &json)?;
            write(&dir.join("results.csv"), &report::csv(rows))?;
            write(&dir.join("table.txt"), table)?;
            let mut notes = format!(
                "Simulated with numasched's performance model (docs/model.md); {} entries, \
                 computed in {elapsed:.1} s.",
                rows.len()
            );
            if let Some(seed) = suite.seed {
                notes.push_str(&format!(" Cases from --seed {seed}: {}.", seed_label(seed)));
            }
            let page = dir.join("report.html");
            write(&page, &html::page(suite.name, &suite.machine, rows, &notes))?;
            writeln!(
                human,
                "wrote results.json, results.csv, table.txt to {}",
                dir.display()
            )?;
            writeln!(human, "report: {}", page.display())?;
        }
        Ok(())
    }
}

/// A built-in suite, on `--machine` if given.
fn built_in(name: &str, args: &EvalArgs) -> anyhow::Result<(Suite, ProfileSet)> {
    let machine = match &args.machine {
        Some(m) => Some(topo::machine(m, args.sysfs_root.as_deref())?),
        None if args.sysfs_root.is_some() => {
            anyhow::bail!("--sysfs-root applies to --machine {THIS} only")
        }
        None => None,
    };
    let profiles = load_profiles(args.profiles.as_ref())?;
    let lookup = facts_of(&profiles);
    let defaults = suites::RandomOptions::default();
    let draw = suites::RandomOptions {
        seed: args.seed.unwrap_or(defaults.seed),
        cases: args.cases.unwrap_or(defaults.cases),
        noise_pct: args.noise.unwrap_or(defaults.noise_pct),
        ..defaults
    };
    let suite = suites::suite_with(name, &draw, machine, &lookup);
    drop(lookup);
    Ok((suite.map_err(|e| anyhow::anyhow!("{e}"))?, profiles))
}

/// `--seed`, `--cases` and `--noise` shape the cases a random suite draws: given with any
/// other suite or with a workloads file they would do nothing, so they are refused, even
/// at their default values.
fn check_draw_flags(args: &EvalArgs) -> anyhow::Result<()> {
    let given: Vec<&str> = [
        ("--seed", args.seed.is_some()),
        ("--cases", args.cases.is_some()),
        ("--noise", args.noise.is_some()),
    ]
    .into_iter()
    .filter_map(|(flag, set)| set.then_some(flag))
    .collect();
    let with = match (&args.suite, &args.workloads) {
        // An unknown suite is reported as such by `suites::suite_with`.
        (Some(name), _) if suites::is_random(name) || !suites::NAMES.contains(&name.as_str()) => {
            return Ok(())
        }
        (Some(name), _) => format!("--suite {name}"),
        (None, _) => "--workloads".to_string(),
    };
    let (flags, verb) = match given.split_last() {
        Some((last, [])) => (last.to_string(), "has"),
        Some((last, rest)) => (format!("{} and {last}", rest.join(", ")), "have"),
        None => return Ok(()),
    };
    anyhow::bail!(
        "{flags} {verb} no effect with {with} (--seed, --cases and --noise apply to --suite \
         random and random-migrate only)"
    )
}

/// The operator's suite from a workloads file: on `--machine` or the file's machine,
/// with the built-in profiles, the file's `profiles` over them, and `--profiles` over
/// both (the command line wins, as everywhere).
fn from_file(path: &Path, args: &EvalArgs) -> anyhow::Result<(Suite, ProfileSet)> {
    let file = Workloads::load(path)?;
    let root = args.sysfs_root.as_deref();
    let topo = match (&args.machine, &file.machine) {
        (Some(m), _) => topo::machine(m, root)?,
        (None, Some(m)) => topo::machine(m, root).map_err(|e| file.machine_error(e))?,
        (None, None) => Err(file.machine_error(format!(
            "not given: set machine = \"PRESET\", a spec string or \"{THIS}\", or pass --machine"
        )))?,
    };
    let mut profiles = ProfileSet::builtin();
    if let Some(p) = &file.profiles {
        profiles = profiles.merge(ProfileSet::load(p).map_err(|e| file.profiles_error(e))?);
    }
    if let Some(p) = &args.profiles {
        profiles = profiles.merge(ProfileSet::load(p)?);
    }
    let known: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
    let suite = file.suite(&topo, &facts_of(&profiles), &known)?;
    Ok((suite, profiles))
}

/// What the suites know of a program on a machine: its profile and a solo run there.
fn facts_of(profiles: &ProfileSet) -> impl Fn(&Topology, &str) -> Option<ProgramFacts> + '_ {
    |t, p| from_model::facts(t, &crate::sim::params_for(t), profiles, p)
}

/// Creates `dir` if needed, with the directories above it (`--out target/eval` on a
/// fresh clone whose build went elsewhere has no `target`), and proves a file can be
/// made in it. `what` names the flag that gave it, for the error.
fn writable_dir(what: &str, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{what}: {}: cannot create", dir.display()))?;
    let probe = dir.join(format!(".numasched-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .with_context(|| format!("{what}: {}: cannot write there", dir.display()))?;
    std::fs::remove_file(&probe).with_context(|| format!("{}: cannot remove", probe.display()))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("{}: cannot write", path.display()))
}
