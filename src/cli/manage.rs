//! The options shared by `daemon`, `run` and live `plan`. Every flag is optional so
//! that the config file can supply it and an explicit flag wins (issue 6's rule:
//! command line over file over defaults).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use crate::daemon::assemble::LiveRoots;
use crate::daemon::config::{
    self, parse_bytes, parse_duration, parse_non_negative, parse_outsiders, parse_pin,
    parse_policy, parse_positive, FileConfig, Glob, LogFormat, Options, Outsiders,
};

/// What `daemon` and `run` take beyond [`SelectArgs`].
#[derive(Debug, Clone, Default, Args)]
pub struct ManageArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    /// Placement policy: auto (default), auto-migrate, autonuma, linux, maxlocal, nmass,
    /// nmass-regression, membus, cmload, numad.
    #[arg(long, value_name = "P", value_parser = parse_policy)]
    pub policy: Option<crate::policy::PolicyKind>,
    /// Epoch length, e.g. 1s, 500ms; up to 4 times longer while every managed process is idle [default: 1s].
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION", value_parser = parse_duration)]
    pub interval: Option<Duration>,
    /// Plan and report every epoch, change nothing (what a killed daemon left in the
    /// journal is still put back at start).
    #[arg(long)]
    pub dry_run: bool,
    /// Migrate pages (move_pages/migrate_pages) where the policy expects a gain.
    #[arg(long)]
    pub migrate_pages: bool,
    /// Page migration budget in MB/s [default: 64].
    #[arg(long, allow_hyphen_values = true, value_name = "MB_PER_S", value_parser = parse_positive)]
    pub migrate_rate: Option<f64>,
    /// Relative MPKI change that triggers a re-plan [default: 0.2].
    #[arg(long, allow_hyphen_values = true, value_name = "FRACTION", value_parser = parse_positive)]
    pub mpki_change: Option<f64>,
    /// Shortest time between re-plans [default: 5s].
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION", value_parser = parse_duration)]
    pub min_replan_interval: Option<Duration>,
    /// How long a process stays below the thresholds before it is released, e.g. 30s,
    /// 2m [default: 30s].
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION", value_parser = parse_duration)]
    pub release_after: Option<Duration>,
    /// Log format on stderr [default: text].
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormatArg>,
    /// On a Slurm node, how processes outside every job are kept off the jobs' CPUs:
    /// hard, always while a CPU no job holds is left; soft, only where the CPUs left
    /// hold all of its busy threads [default: hard].
    #[arg(long, value_name = "RULE", value_parser = parse_outsiders)]
    pub slurm_outsiders: Option<Outsiders>,
    /// Journal of original affinities, restored after a crash
    /// [default: /var/lib/numasched/journal.json].
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with = "no_journal",
        value_parser = crate::daemon::config::parse_file_path
    )]
    pub journal: Option<PathBuf>,
    /// UNSAFE: run without the journal. A crash, OOM kill or kill -9 then leaves every
    /// affinity numasched set as it was; only a clean stop restores them.
    #[arg(long)]
    pub no_journal: bool,
    /// Serve Prometheus metrics over HTTP (GET /metrics) at IP:PORT, e.g.
    /// 127.0.0.1:9477; it must name an interface (0.0.0.0 is refused), and an empty
    /// value is off [default: off].
    #[arg(long, value_name = "ADDR", value_parser = config::parse_metrics_flag)]
    pub metrics: Option<config::MetricsAddr>,
}

/// Which processes, where the store is, where the system is read: shared by `daemon`,
/// `run` and live `plan`.
#[derive(Debug, Clone, Default, Args)]
pub struct SelectArgs {
    /// Config file (TOML) [default: /etc/numasched/numasched.toml if it exists].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Manage only processes whose command name matches (glob; repeatable).
    #[arg(long, value_name = "GLOB", value_parser = Glob::parse)]
    pub include_comm: Vec<Glob>,
    /// Never manage processes whose command name matches (glob; repeatable).
    #[arg(long, value_name = "GLOB", value_parser = Glob::parse)]
    pub exclude_comm: Vec<Glob>,
    /// Manage this pid (repeatable).
    #[arg(long, allow_hyphen_values = true, value_name = "PID", value_parser = super::pid())]
    pub include_pid: Vec<u32>,
    /// Never touch this pid (repeatable).
    #[arg(long, allow_hyphen_values = true, value_name = "PID", value_parser = super::pid())]
    pub exclude_pid: Vec<u32>,
    /// Manage only processes in a cgroup matching this path glob (repeatable).
    #[arg(long, value_name = "GLOB", value_parser = Glob::parse)]
    pub include_cgroup: Vec<Glob>,
    /// Never manage processes in a cgroup matching this path glob (repeatable).
    #[arg(long, value_name = "GLOB", value_parser = Glob::parse)]
    pub exclude_cgroup: Vec<Glob>,
    /// CPUs' worth of CPU use needed to be managed [default: 0.25].
    #[arg(long, allow_hyphen_values = true, value_name = "CPUS", value_parser = parse_non_negative)]
    pub min_cpu: Option<f64>,
    /// Resident memory needed to be managed, e.g. 64M [default: 0].
    #[arg(long, allow_hyphen_values = true, value_name = "BYTES", value_parser = parse_bytes)]
    pub min_rss: Option<u64>,
    /// What a process is given: every CPU of the LLCs (or nodes) chosen for it, or
    /// hard pinning to the chosen cores or CPUs (llc, node, core, cpu) [default: llc].
    #[arg(long, value_name = "UNIT", value_parser = parse_pin)]
    pub pin: Option<crate::policy::Pin>,
    /// Profile store [default: /var/lib/numasched/profiles.db].
    #[arg(long, value_name = "PATH", value_parser = crate::daemon::config::parse_file_path)]
    pub db: Option<PathBuf>,
    /// Run without the profile store.
    #[arg(long)]
    pub no_db: bool,
    /// procfs root (for tests and containers).
    #[arg(long, value_name = "DIR", hide = true)]
    pub proc_root: Option<PathBuf>,
    /// sysfs root (for tests and containers).
    #[arg(long, value_name = "DIR", hide = true)]
    pub sys_root: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormatArg {
    Text,
    Json,
}

macro_rules! set {
    ($field:expr, $v:expr) => {
        if let Some(v) = $v.clone() {
            $field = v;
        }
    };
}

impl ManageArgs {
    /// The file (explicit, or the default one if present) under the flags.
    pub fn options(&self) -> anyhow::Result<Options> {
        let mut o = self.select.options()?;
        set!(o.policy, self.policy);
        set!(o.interval, self.interval);
        set!(o.migrate_rate, self.migrate_rate);
        set!(o.mpki_change, self.mpki_change);
        set!(o.min_replan_interval, self.min_replan_interval);
        set!(o.release_after, self.release_after);
        set!(o.journal, self.journal);
        set!(o.slurm_outsiders, self.slurm_outsiders);
        if let Some(config::MetricsAddr(a)) = self.metrics {
            o.metrics = a;
        }
        if let Some(f) = self.log_format {
            o.log_format = match f {
                LogFormatArg::Text => LogFormat::Text,
                LogFormatArg::Json => LogFormat::Json,
            };
        }
        o.dry_run |= self.dry_run;
        o.migrate_pages |= self.migrate_pages;
        o.no_journal |= self.no_journal;
        Ok(o)
    }
}

impl SelectArgs {
    /// The flags given that only choose among live processes (all but `--pin`), by
    /// name: a command that plans a saved snapshot refuses them rather than ignore them.
    pub fn live_only_given(&self) -> Vec<&'static str> {
        let given = [
            ("--config", self.config.is_some()),
            ("--include-comm", !self.include_comm.is_empty()),
            ("--exclude-comm", !self.exclude_comm.is_empty()),
            ("--include-pid", !self.include_pid.is_empty()),
            ("--exclude-pid", !self.exclude_pid.is_empty()),
            ("--include-cgroup", !self.include_cgroup.is_empty()),
            ("--exclude-cgroup", !self.exclude_cgroup.is_empty()),
            ("--min-cpu", self.min_cpu.is_some()),
            ("--min-rss", self.min_rss.is_some()),
            ("--db", self.db.is_some()),
            ("--no-db", self.no_db),
            ("--proc-root", self.proc_root.is_some()),
            ("--sys-root", self.sys_root.is_some()),
        ];
        given.into_iter().filter(|g| g.1).map(|g| g.0).collect()
    }

    /// The file (explicit, or the default one if present) under these flags.
    pub fn options(&self) -> anyhow::Result<Options> {
        // As `config check` reads it: every problem of the file, not only the first.
        let load = |p: &Path| {
            crate::cli::config::check::check(p)
                .map_err(|problems| anyhow::anyhow!(problems.join("\n")))
        };
        let mut o = match &self.config {
            Some(p) => load(p)?,
            None if Path::new(config::DEFAULT_CONFIG).exists() => {
                load(Path::new(config::DEFAULT_CONFIG))?
            }
            None => FileConfig::default().into_options(),
        };
        set!(o.select.min_cpu, self.min_cpu);
        set!(o.select.min_rss, self.min_rss);
        set!(o.pin, self.pin);
        set!(o.db, self.db);
        o.no_db |= self.no_db;
        let lists = [
            (&mut o.select.include_comm, &self.include_comm),
            (&mut o.select.exclude_comm, &self.exclude_comm),
            (&mut o.select.include_cgroup, &self.include_cgroup),
            (&mut o.select.exclude_cgroup, &self.exclude_cgroup),
        ];
        for (field, flag) in lists {
            if !flag.is_empty() {
                *field = flag.clone();
            }
        }
        if !self.include_pid.is_empty() {
            o.select.include_pid = self.include_pid.clone();
        }
        if !self.exclude_pid.is_empty() {
            o.select.exclude_pid = self.exclude_pid.clone();
        }
        Ok(o)
    }

    pub fn roots(&self) -> LiveRoots {
        let d = LiveRoots::default();
        LiveRoots {
            proc: self.proc_root.clone().unwrap_or(d.proc),
            sys: self.sys_root.clone().unwrap_or(d.sys),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::net::SocketAddr;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        m: ManageArgs,
    }

    #[test]
    fn flags_win_over_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("c.toml");
        std::fs::write(
            &file,
            "policy = \"nmass\"\ninterval = \"2s\"\nmin_cpu = 0.5\nexclude_comm = [\"a\"]\n",
        )
        .expect("write");
        let f = file.display().to_string();
        let t = T::parse_from([
            "t",
            "--config",
            &f,
            "--interval",
            "250ms",
            "--exclude-comm",
            "b",
        ]);
        let o = t.m.options().expect("options");
        assert_eq!(o.policy.name(), "nmass", "from the file");
        assert_eq!(o.interval, Duration::from_millis(250), "flag wins");
        assert_eq!(o.select.min_cpu, 0.5);
        assert_eq!(o.select.exclude_comm, vec!["b"]);
        assert_eq!(o.metrics, None, "metrics are off unless asked for");
        let t = T::parse_from(["t", "--config", &f, "--metrics", "127.0.0.1:9477"]);
        let o = t.m.options().expect("options");
        assert_eq!(o.metrics, Some(SocketAddr::from(([127, 0, 0, 1], 9477))));
        // As --help says: empty is off, and wins over the file's address.
        std::fs::write(&f, "metrics = \"127.0.0.1:9477\"\n").expect("write");
        let t = T::parse_from(["t", "--config", &f, "--metrics", ""]);
        assert_eq!(t.m.options().expect("options").metrics, None);
        assert!(T::try_parse_from(["t", "--metrics", "0.0.0.0:1"]).is_err());
    }

    #[derive(Parser)]
    struct S {
        #[command(flatten)]
        s: SelectArgs,
    }

    /// `live_only_given` names the selection flags by hand. This walks every flag clap
    /// knows of `SelectArgs`, gives it alone, and checks the list names it, so a flag
    /// added later cannot be silently ignored by `plan --snapshot`. Only `--pin`
    /// applies to a snapshot too.
    #[test]
    fn every_selection_flag_but_pin_is_named_as_live_only() {
        use clap::CommandFactory;
        let cmd = S::command();
        let mut seen = 0;
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if long == "help" {
                continue;
            }
            let flag = format!("--{long}");
            let mut argv = vec!["t".to_string(), flag.clone()];
            if arg.get_action().takes_values() {
                let names = arg.get_value_names().unwrap_or_default();
                let value = match names.first().map(|n| n.as_str()) {
                    Some("GLOB") => "a*",
                    Some("PID" | "CPUS" | "BYTES") => "1",
                    Some("UNIT") => "llc",
                    Some("FILE" | "PATH" | "DIR") => "x",
                    other => panic!("{flag}: no sample value for {other:?}; add one here"),
                };
                argv.push(value.to_string());
            }
            let parsed = S::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let named = parsed.s.live_only_given();
            if long == "pin" {
                assert!(named.is_empty(), "{flag} applies to snapshots: {named:?}");
            } else {
                assert_eq!(named, vec![flag.as_str()], "{argv:?}");
            }
            seen += 1;
        }
        assert!(seen >= 14, "only {seen} flags seen");
    }

    #[test]
    fn bad_flags_are_refused_by_the_parser() {
        for args in [
            vec!["t", "--policy", "fastest"],
            vec!["t", "--interval", "-1s"],
            vec!["t", "--migrate-rate", "0"],
            vec!["t", "--min-cpu", "lots"],
            vec!["t", "--include-comm", "[x"],
            vec!["t", "--metrics", "0.0.0.0:9477"],
            vec!["t", "--metrics", "9477"],
        ] {
            assert!(T::try_parse_from(&args).is_err(), "{args:?}");
        }
    }
}
