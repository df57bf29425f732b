//! `numasched eval`: a whole suite on the performance model, every policy against the
//! default scheduler and the oracle, as a terminal table, JSON, CSV and an HTML report.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::policy::Policy;
use crate::sim::eval::report::{self, Results};
use crate::sim::eval::{bridge, html, suites};

use super::sim::load_profiles;

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Suite: nmass, nmass-migrate, membus, cmload or random (held-out cases drawn
    /// from --seed).
    #[arg(long, value_name = "S")]
    pub suite: String,
    /// Machine to run the suite on instead of its own (preset or spec string); for
    /// random, every case on it instead of one drawn per case.
    #[arg(long, value_name = "M")]
    pub machine: Option<String>,
    /// random: the seed cases are drawn from.
    #[arg(long, default_value_t = 1, value_name = "S", allow_hyphen_values = true,
          value_parser = clap::builder::RangedI64ValueParser::<u64>::new().range(0..))]
    pub seed: u64,
    /// random: how many cases to draw.
    #[arg(long, default_value_t = 20, value_name = "N", allow_hyphen_values = true,
          value_parser = clap::builder::RangedI64ValueParser::<usize>::new().range(1..=100_000))]
    pub cases: usize,
    /// random: characterisation error the policies see, per cent (MPKI and bandwidth
    /// ±P%, NUMA penalty error, cache reuse unknown); the model scores the true programs.
    #[arg(long, default_value_t = 0.0, value_name = "P", allow_hyphen_values = true,
          value_parser = parse_noise)]
    pub noise: f64,
    /// Policies, comma-separated (default: the suite's).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub policies: Option<Vec<String>>,
    /// Directory for results.json, results.csv, table.txt and report.html.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write the JSON results here.
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
    // Where the results go is checked before the work: a typo costs a second, not a run.
    if let Some(dir) = &args.out {
        writable_dir(dir)?;
    }
    if let Some(path) = &args.json {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        writable_dir(parent.unwrap_or(Path::new(".")))?;
    }
    let profiles = load_profiles(args.profiles.as_ref())?;
    let lookup = |topo: &crate::topology::Topology, p: &str| {
        bridge::facts(topo, &crate::sim::params_for(topo), &profiles, p)
    };
    if args.suite != "random" && (args.noise != 0.0 || args.cases != 20 || args.seed != 1) {
        anyhow::bail!("--seed, --cases and --noise apply to --suite random only");
    }
    let suite = if args.suite == "random" {
        let opts = suites::RandomOptions {
            seed: args.seed,
            cases: args.cases,
            noise_pct: args.noise,
        };
        suites::random(&opts, args.machine.as_deref(), &lookup)
    } else {
        suites::suite(&args.suite, args.machine.as_deref(), &lookup)
    }
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut runner = bridge::runner_for(&suite, profiles).context("the suite has no cases")?;
    runner.pin = args.pin;
    let names: Vec<String> = match &args.policies {
        Some(list) => list.clone(),
        None => suite.policies.iter().map(|s| s.to_string()).collect(),
    };
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
    let rows = runner.run_all(&suite.cases, &policies, args.jobs, &|case, p| {
        bar.set_message(format!("{} {} {p}", case.workload, case.map));
        bar.inc(1);
    });
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let table = report::table(&rows);
    if args.verbose {
        println!("{table}");
    }
    print!("{}", report::summary_table(&rows, colour()));
    println!(
        "suite {} on {}: {} entries in {elapsed:.1} s{}",
        suite.name,
        suite.machine,
        rows.len(),
        if args.verbose || args.out.is_some() {
            ""
        } else {
            " (per case: --verbose, or table.txt with --out)"
        }
    );
    let results = Results {
        results: &rows,
        summaries: report::summaries(&rows),
    };
    let json = serde_json::to_string_pretty(&results).context("encoding results")?;
    if let Some(path) = &args.json {
        write(path, &json)?;
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
        write(&dir.join("results.json"), &json)?;
        write(&dir.join("results.csv"), &report::csv(&rows))?;
        write(&dir.join("table.txt"), &table)?;
        let notes = format!(
            "Simulated with numasched's performance model (docs/model.md); {} entries, \
             computed in {elapsed:.1} s.",
            rows.len()
        );
        let page = dir.join("report.html");
        write(
            &page,
            &html::page(suite.name, &suite.machine, &rows, &notes),
        )?;
        println!(
            "wrote results.json, results.csv, table.txt to {}",
            dir.display()
        );
        println!("report: {}", page.display());
    }
    Ok(())
}

/// Creates `dir` if needed and proves a file can be made in it.
fn writable_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let probe = dir.join(format!(".numasched-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .with_context(|| format!("{}: cannot write there", dir.display()))?;
    std::fs::remove_file(&probe).with_context(|| format!("{}: cannot remove", probe.display()))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("{}: cannot write", path.display()))
}
