//! The daemon's options: one struct fed by the TOML config file and the command line,
//! the command line winning, validated once so the epoch loop never meets a bad value.
//!
//! Every key of the file has a flag of the same name (`migrate_rate` ↔
//! `--migrate-rate`). Unknown keys are errors rather than silently ignored, because a
//! misspelt `exclude_comm` that is ignored makes the daemon manage what the operator
//! meant to protect. Values are checked while the file is parsed, so each error names
//! the line it is on.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use super::glob::Glob;
use numasched_policy as policy;

/// Where the daemon looks for its configuration when `--config` is not given.
pub const DEFAULT_CONFIG: &str = "/etc/numasched/numasched.toml";
/// The control socket `status` (and later `top`) talk to.
pub const DEFAULT_SOCKET: &str = "/run/numasched/numasched.sock";

/// The options after merging file and command line and filling defaults.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Options {
    pub policy: policy::PolicyKind,
    /// What a planned CPU widens to when applied: the LLC by default; `core`/`cpu`
    /// are hard pinning.
    pub pin: policy::Pin,
    #[serde(with = "humantime_serde_secs")]
    pub interval: Duration,
    pub dry_run: bool,
    pub migrate_pages: bool,
    /// Page migration budget, MB (10^6 bytes) per second.
    pub migrate_rate: f64,
    pub select: Selection,
    pub db: PathBuf,
    /// Run without the profile store (nothing learned is kept).
    pub no_db: bool,
    /// The journal of original affinities on disk, for crash recovery.
    pub journal: PathBuf,
    /// Run without the journal (`--no-journal`, unsafe: a crash leaves changes).
    pub no_journal: bool,
    pub socket: PathBuf,
    /// Serve no control socket (`--no-socket`): `status` and `top` cannot reach it.
    pub no_socket: bool,
    /// Relative MPKI change of a managed process that triggers a re-plan (Majo & Gross:
    /// 20%).
    pub mpki_change: f64,
    /// Shortest time between two re-plans: arrivals and MPKI swings inside it wait, so
    /// a churning machine is re-planned at most this often (hysteresis).
    #[serde(with = "humantime_serde_secs")]
    pub min_replan_interval: Duration,
    /// How long a managed process may stay below the admission thresholds before it
    /// is released (its affinity restored), so one quiet second does not drop it. In
    /// time, not epochs: epochs stretch while every managed process is idle.
    #[serde(with = "humantime_serde_secs")]
    pub release_after: Duration,
    pub log_format: LogFormat,
    /// Where to serve Prometheus metrics over HTTP (`GET /metrics`); `None`: off.
    pub metrics: Option<SocketAddr>,
    /// How processes outside every Slurm job are kept off the jobs' CPUs.
    pub slurm_outsiders: Outsiders,
}

/// Which processes are managed. Identity rules (names, pids, cgroups) are checked every
/// epoch; the thresholds only for admission (see [`Options::release_after`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Selection {
    /// Command-name globs (`comm`, e.g. `postgres*`); empty = every name.
    pub include_comm: Vec<Glob>,
    pub exclude_comm: Vec<Glob>,
    /// Pids always considered (still subject to the exclusions and thresholds).
    pub include_pid: Vec<u32>,
    pub exclude_pid: Vec<u32>,
    /// Cgroup path globs (the v2 path of `/proc/<pid>/cgroup`, e.g. `/system.slice/*`).
    pub include_cgroup: Vec<Glob>,
    pub exclude_cgroup: Vec<Glob>,
    /// CPUs' worth of CPU time over an epoch needed to be admitted.
    pub min_cpu: f64,
    /// Resident bytes needed to be admitted.
    pub min_rss: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// How a process outside every Slurm job is kept off the CPUs jobs hold (see
/// `crate::jobs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outsiders {
    /// Always, while any CPU is left that no job holds, however busy it is: what
    /// Slurm's core specialisation promises a job.
    #[default]
    Hard,
    /// Only where the CPUs left can hold all of its busy threads; one they cannot is
    /// left to the kernel, which may run it on the jobs' CPUs.
    Soft,
}

/// A closed set of words a flag or config key takes, one per variant: parsed, shown
/// and listed (for `--help` and errors) from one table.
macro_rules! words {
    ($(#[$doc:meta])* $list:ident for $ty:ident, $what:literal: $($variant:ident = $word:literal),+ $(,)?) => {
        $(#[$doc])*
        pub const $list: &[&str] = &[$($word),+];

        impl std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<$ty, String> {
                match s {
                    $($word => Ok($ty::$variant),)+
                    _ => Err(format!(
                        concat!("unknown ", $what, " '{}' (known: {})"),
                        s,
                        $list.join(", ")
                    )),
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(match self {
                    $($ty::$variant => $word,)+
                })
            }
        }
    };
}

words!(
    /// `--slurm-outsiders`'s words.
    OUTSIDERS for Outsiders, "outsiders rule": Hard = "hard", Soft = "soft"
);

/// `--slurm-outsiders`'s value: `hard` or `soft`.
pub fn parse_outsiders(s: &str) -> Result<Outsiders, String> {
    s.parse()
}

words!(
    /// `--log-format`'s words.
    LOG_FORMATS for LogFormat, "log format": Text = "text", Json = "json"
);

impl Default for Options {
    fn default() -> Self {
        Options {
            policy: policy::PolicyKind::Auto,
            pin: policy::Pin::Llc,
            interval: Duration::from_secs(1),
            dry_run: false,
            migrate_pages: false,
            migrate_rate: 64.0,
            select: Selection {
                min_cpu: 0.25,
                ..Selection::default()
            },
            db: PathBuf::from(numasched_linux::characterise::store::DEFAULT_PATH),
            no_db: false,
            journal: PathBuf::from(super::recovery::DEFAULT_PATH),
            no_journal: false,
            socket: PathBuf::from(DEFAULT_SOCKET),
            no_socket: false,
            mpki_change: 0.2,
            min_replan_interval: Duration::from_secs(5),
            release_after: Duration::from_secs(30),
            log_format: LogFormat::Text,
            metrics: None,
            slurm_outsiders: Outsiders::Hard,
        }
    }
}

/// An epoch longer than this is far more likely `interval = 500` meant as milliseconds
/// than a choice: a process is then re-read and re-sized that seldom.
pub const LONG_INTERVAL: Duration = Duration::from_secs(60);

/// Likewise for the re-plan hysteresis: arrivals wait this long to be placed.
pub const LONG_REPLAN_INTERVAL: Duration = Duration::from_secs(600);

impl Options {
    /// Timings that are valid but most likely a unit mistake (a bare number is
    /// seconds): said by `config check` and at the daemon's start, since a daemon that
    /// epochs every 8 minutes looks like one that does nothing.
    pub fn timing_doubts(&self) -> Vec<String> {
        let bare = |d: Duration| {
            let s = d.as_secs_f64();
            format!("a bare number is seconds; \"{s}ms\" is milliseconds")
        };
        let mut out = Vec::new();
        if self.interval >= LONG_INTERVAL {
            out.push(format!(
                "interval is {}: processes are re-read and re-placed only that often ({})",
                humantime::format_duration(self.interval),
                bare(self.interval)
            ));
        }
        if self.min_replan_interval >= LONG_REPLAN_INTERVAL {
            out.push(format!(
                "min_replan_interval is {}: a new process waits up to that long to be \
                 placed ({})",
                humantime::format_duration(self.min_replan_interval),
                bare(self.min_replan_interval)
            ));
        }
        out
    }
}

/// The file as written: every key optional, so the file only states what it changes.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub policy: Option<Word<policy::PolicyKind>>,
    pub pin: Option<Word<policy::Pin>>,
    pub interval: Option<Seconds>,
    pub dry_run: Option<bool>,
    pub migrate_pages: Option<bool>,
    pub migrate_rate: Option<Positive>,
    pub include_comm: Option<Vec<Glob>>,
    pub exclude_comm: Option<Vec<Glob>>,
    pub include_pid: Option<Vec<Pid>>,
    pub exclude_pid: Option<Vec<Pid>>,
    pub include_cgroup: Option<Vec<Glob>>,
    pub exclude_cgroup: Option<Vec<Glob>>,
    pub min_cpu: Option<NonNegative>,
    pub min_rss: Option<Bytes>,
    pub db: Option<FilePath>,
    pub no_db: Option<bool>,
    pub journal: Option<FilePath>,
    pub no_journal: Option<bool>,
    pub socket: Option<FilePath>,
    pub no_socket: Option<bool>,
    pub mpki_change: Option<Positive>,
    pub min_replan_interval: Option<Seconds>,
    pub release_after: Option<Seconds>,
    pub log_format: Option<Word<LogFormat>>,
    pub metrics: Option<MetricsAddr>,
    pub slurm_outsiders: Option<Word<Outsiders>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read the config file: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
    /// Not a regular file, or too large; the message names the path.
    #[error("{}: cannot read the config file: {}", .0.path().display(), .0.without_path())]
    File(#[from] numasched_model::files::FileError),
    /// toml's message already says line and column and shows the line.
    #[error("{}: {}", path.display(), numasched_model::files::plain_types(&one_line(what)))]
    Parse { path: PathBuf, what: String },
    #[error("{key}: {what}")]
    Invalid { key: String, what: String },
    #[error("{}: not trusted as the config file: {why}", path.display())]
    Untrusted { path: PathBuf, why: String },
}

/// toml's errors span several lines (a source excerpt); the daemon's errors are one.
fn one_line(s: &str) -> String {
    let mut parts = s.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = parts.next().unwrap_or_default().to_string();
    // The last line is the message proper ("unknown field `x`, expected ...").
    match parts.next_back() {
        Some(last) if !last.starts_with('|') && !last.starts_with('^') => {
            format!("{first}: {last}")
        }
        _ => first,
    }
}

/// Largest config file read: a real one is a few hundred bytes.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

impl FileConfig {
    /// Reads and checks a config file; errors name the file and the line.
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = numasched_model::files::read_text(path, MAX_CONFIG_BYTES, "config file")?;
        // It names the files the daemon writes as root and which processes it moves.
        let meta = std::fs::metadata(path).map_err(|err| ConfigError::Io {
            path: path.to_path_buf(),
            err,
        })?;
        let dir = numasched_model::files::dir_meta(path);
        let me = nix::unistd::geteuid().as_raw();
        if let Some(why) = numasched_model::files::untrusted(path, &meta, dir.as_ref(), me) {
            return Err(ConfigError::Untrusted {
                path: path.to_path_buf(),
                why,
            });
        }
        FileConfig::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<FileConfig, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            what: e.to_string(),
        })
    }

    /// The file laid over the defaults.
    pub fn into_options(self) -> Options {
        let d = Options::default();
        Options {
            policy: self.policy.map_or(d.policy, |w| w.0),
            pin: self.pin.map_or(d.pin, |w| w.0),
            interval: self.interval.map(|s| s.0).unwrap_or(d.interval),
            dry_run: self.dry_run.unwrap_or(d.dry_run),
            migrate_pages: self.migrate_pages.unwrap_or(d.migrate_pages),
            migrate_rate: self.migrate_rate.map(|p| p.0).unwrap_or(d.migrate_rate),
            select: Selection {
                include_comm: self.include_comm.unwrap_or(d.select.include_comm),
                exclude_comm: self.exclude_comm.unwrap_or(d.select.exclude_comm),
                include_pid: self.include_pid.map_or(d.select.include_pid, |v| {
                    v.into_iter().map(|p| p.0).collect()
                }),
                exclude_pid: self.exclude_pid.map_or(d.select.exclude_pid, |v| {
                    v.into_iter().map(|p| p.0).collect()
                }),
                include_cgroup: self.include_cgroup.unwrap_or(d.select.include_cgroup),
                exclude_cgroup: self.exclude_cgroup.unwrap_or(d.select.exclude_cgroup),
                min_cpu: self.min_cpu.map(|v| v.0).unwrap_or(d.select.min_cpu),
                min_rss: self.min_rss.map(|b| b.0).unwrap_or(d.select.min_rss),
            },
            db: self.db.map_or(d.db, |p| p.0),
            no_db: self.no_db.unwrap_or(d.no_db),
            journal: self.journal.map_or(d.journal, |p| p.0),
            no_journal: self.no_journal.unwrap_or(d.no_journal),
            socket: self.socket.map_or(d.socket, |p| p.0),
            no_socket: self.no_socket.unwrap_or(d.no_socket),
            mpki_change: self.mpki_change.map(|p| p.0).unwrap_or(d.mpki_change),
            min_replan_interval: self
                .min_replan_interval
                .map(|s| s.0)
                .unwrap_or(d.min_replan_interval),
            release_after: self.release_after.map_or(d.release_after, |s| s.0),
            log_format: self.log_format.map_or(d.log_format, |w| w.0),
            metrics: self.metrics.map_or(d.metrics, |m| m.0),
            slurm_outsiders: self.slurm_outsiders.map_or(d.slurm_outsiders, |w| w.0),
        }
    }
}

// Value types that validate while the file is parsed, so toml puts the line number on
// the error. Each accepts the same text as the matching command-line flag.

/// `--pin`'s value: `llc`, `node`, `core` or `cpu`.
pub fn parse_pin(s: &str) -> Result<policy::Pin, String> {
    s.parse()
}

/// `--policy`'s value: a name of [`policy::PolicyKind`].
pub fn parse_policy(s: &str) -> Result<policy::PolicyKind, String> {
    s.parse().map_err(|e: policy::UnknownPolicy| e.to_string())
}

/// A value named by a word, read as its flag reads it (`pin = "cpu"`), with the
/// flag's own message; anything but a string is told the words (`pin = 3` said only
/// "wanted string or table").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Word<T>(pub T);

/// The words a [`Word`] may be.
pub trait Words {
    const WORDS: &'static [&'static str];
}

impl Words for policy::Pin {
    const WORDS: &'static [&'static str] = policy::granularity::PIN_NAMES;
}

impl Words for policy::PolicyKind {
    const WORDS: &'static [&'static str] = &policy::NAMES;
}

impl Words for LogFormat {
    const WORDS: &'static [&'static str] = LOG_FORMATS;
}

impl Words for Outsiders {
    const WORDS: &'static [&'static str] = OUTSIDERS;
}

impl<'de, T> Deserialize<'de> for Word<T>
where
    T: std::str::FromStr + Words,
    T::Err: std::fmt::Display,
{
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match toml::Value::deserialize(d)? {
            toml::Value::String(s) => s.parse().map(Word).map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "expected a word in quotes (known: {}), found {} {other}",
                T::WORDS.join(", "),
                other.type_str()
            ))),
        }
    }
}

/// A pid, as `--include-pid` takes it: 1 up to the kernel's limit. Refused while its
/// own value is read, so that the error names the line of the bad pid, not the line
/// its array starts on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pid(pub u32);

impl<'de> Deserialize<'de> for Pid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Pid, D::Error> {
        use serde::de::{Error, Unexpected};
        struct Number;
        impl serde::de::Visitor<'_> for Number {
            type Value = Pid;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a pid")
            }
            fn visit_i64<E: Error>(self, i: i64) -> Result<Pid, E> {
                let limit = numasched_model::snapshot::PID_MAX_LIMIT;
                u32::try_from(i)
                    .ok()
                    .filter(|p| (1..=limit).contains(p))
                    .map(Pid)
                    .ok_or_else(|| E::custom(format!("{i} is not a pid (1 to {limit})")))
            }
            fn visit_u64<E: Error>(self, u: u64) -> Result<Pid, E> {
                match i64::try_from(u) {
                    Ok(i) => self.visit_i64(i),
                    Err(_) => Err(E::invalid_value(Unexpected::Unsigned(u), &self)),
                }
            }
            fn visit_str<E: Error>(self, _: &str) -> Result<Pid, E> {
                Err(E::custom("expected a pid, found string"))
            }
        }
        d.deserialize_any(Number)
    }
}

/// A path to a file the daemon creates or opens: not empty, which would name no file
/// and only fail later, when the daemon starts.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "PathBuf")]
pub struct FilePath(pub PathBuf);

impl TryFrom<PathBuf> for FilePath {
    type Error = String;
    fn try_from(p: PathBuf) -> Result<Self, String> {
        parse_file_path(&p.to_string_lossy()).map(FilePath)
    }
}

/// A file path flag's value (`--socket`, `--db`, `--journal`): any path but an empty
/// one.
pub fn parse_file_path(s: &str) -> Result<PathBuf, String> {
    if s.trim().is_empty() {
        Err("an empty path names no file".into())
    } else {
        Ok(PathBuf::from(s))
    }
}

/// A duration: `1s`, `500ms`, `2m`, or a plain number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(try_from = "toml::Value")]
pub struct Seconds(pub Duration);

impl TryFrom<toml::Value> for Seconds {
    type Error = String;
    fn try_from(v: toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::String(s) => parse_duration(&s).map(Seconds),
            toml::Value::Integer(i) => parse_duration(&i.to_string()).map(Seconds),
            toml::Value::Float(f) => parse_duration(&f.to_string()).map(Seconds),
            other => Err(format!(
                "expected a duration like \"1s\" or \"500ms\", found {}",
                other.type_str()
            )),
        }
    }
}

/// Parses `1s`, `250ms`, `1m 30s` or a plain number of seconds; at least 10 ms and at
/// most a day, because an epoch outside that is a typo, not a choice.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    // Every error states the range, a negative value's included.
    let range = "must be between 10ms and 24h (e.g. 1s, 500ms, 2m)";
    let t = s.trim();
    let d = match t.parse::<f64>() {
        // Too large for a Duration (1e20 s) is out of range like any other: no panic.
        Ok(secs) if secs.is_finite() && secs >= 0.0 => {
            Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
        }
        Ok(_) => return Err(format!("invalid duration {s:?}: {range}")),
        Err(_) if t.starts_with('-') => return Err(format!("invalid duration {s:?}: {range}")),
        Err(_) => humantime::parse_duration(t)
            .map_err(|e| format!("invalid duration {s:?}: {e}; {range}"))?,
    };
    if d < Duration::from_millis(10) || d > Duration::from_secs(86_400) {
        return Err(format!("invalid duration {s:?}: {range}"));
    }
    Ok(d)
}

/// A finite number > 0.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(try_from = "toml::Value")]
pub struct Positive(pub f64);

impl TryFrom<toml::Value> for Positive {
    type Error = String;
    fn try_from(v: toml::Value) -> Result<Self, String> {
        let x = number(&v)?;
        if x > 0.0 {
            Ok(Positive(x))
        } else {
            Err(format!("{x} must be greater than 0"))
        }
    }
}

/// A finite number ≥ 0.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(try_from = "toml::Value")]
pub struct NonNegative(pub f64);

impl TryFrom<toml::Value> for NonNegative {
    type Error = String;
    fn try_from(v: toml::Value) -> Result<Self, String> {
        let x = number(&v)?;
        if x >= 0.0 {
            Ok(NonNegative(x))
        } else {
            Err(format!("{x} must not be negative"))
        }
    }
}

fn number(v: &toml::Value) -> Result<f64, String> {
    let x = match v {
        toml::Value::Integer(i) => *i as f64,
        toml::Value::Float(f) => *f,
        other => return Err(format!("expected a number, found {}", other.type_str())),
    };
    if x.is_finite() {
        Ok(x)
    } else {
        Err(format!("{x} is not a finite number"))
    }
}

pub fn parse_positive(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!(
            "invalid value {s:?}: expected a number greater than 0"
        )),
    }
}

pub fn parse_non_negative(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!(
            "invalid value {s:?}: expected a number 0 or greater"
        )),
    }
}

/// A byte count as `--min-rss` takes it (`64M`, `1G`, `0`), or an integer of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(try_from = "toml::Value")]
pub struct Bytes(pub u64);

impl TryFrom<toml::Value> for Bytes {
    type Error = String;
    fn try_from(v: toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::String(s) => parse_bytes(&s).map(Bytes),
            toml::Value::Integer(i) => u64::try_from(i)
                .map(Bytes)
                .map_err(|_| format!("{i} must not be negative")),
            other => Err(format!(
                "expected a size like \"64M\", found {}",
                other.type_str()
            )),
        }
    }
}

/// Like `--size` of the workload, but 0 is allowed (no threshold).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    if s.trim() == "0" {
        return Ok(0);
    }
    // The size parser's message asks for more than 0, which is wrong here.
    numasched_model::size::parse_size(s).map_err(|_| {
        format!(
            "invalid size {s:?}: expected bytes, 0 (no threshold) or more, like 64M, 2G or 1048576"
        )
    })
}

/// The metrics address of the file: `"127.0.0.1:9477"`, or `""` for off.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub struct MetricsAddr(pub Option<SocketAddr>);

impl TryFrom<String> for MetricsAddr {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Ok(MetricsAddr(None));
        }
        parse_metrics_addr(&s).map(|a| MetricsAddr(Some(a)))
    }
}

/// `--metrics`: as the file's key, an empty value is off (and wins over the file).
pub fn parse_metrics_flag(s: &str) -> Result<MetricsAddr, String> {
    MetricsAddr::try_from(s.to_string())
}

/// The metrics endpoint's address: an explicit `IP:PORT`. The metrics say which
/// programs run on the machine, so the address must name the interface: a bare port
/// and the unspecified address (`0.0.0.0`, `::`: every interface) are refused. Keep it
/// on `127.0.0.1` unless the operator means to expose it.
pub fn parse_metrics_addr(s: &str) -> Result<SocketAddr, String> {
    let t = s.trim();
    if t.parse::<u16>().is_ok() {
        return Err(format!(
            "invalid metrics address {s:?}: give the interface too, e.g. 127.0.0.1:{t}"
        ));
    }
    let addr: SocketAddr = t.parse().map_err(|_| {
        format!("invalid metrics address {s:?}: expected IP:PORT, e.g. 127.0.0.1:9477")
    })?;
    if addr.ip().is_unspecified() {
        return Err(format!(
            "refusing metrics address {s:?}: it listens on every interface; name one \
             (127.0.0.1:{port} for this machine only, or the address of the interface \
             your Prometheus scrapes)",
            port = addr.port()
        ));
    }
    if addr.port() == 0 {
        return Err(format!("invalid metrics address {s:?}: port 0"));
    }
    Ok(addr)
}

/// Durations in `Options` serialise as seconds (for `status`).
mod humantime_serde_secs {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<FileConfig, ConfigError> {
        FileConfig::parse(text, Path::new("/etc/numasched/numasched.toml"))
    }

    #[test]
    fn every_key_is_read() {
        let c = parse(
            r#"
policy = "nmass"
interval = "500ms"
dry_run = true
migrate_pages = true
migrate_rate = 32
include_comm = ["postgres*", "java"]
exclude_comm = ["sshd"]
include_pid = [10]
exclude_pid = [11, 12]
include_cgroup = ["/batch.slice/*"]
exclude_cgroup = ["/system.slice/*"]
min_cpu = 0.5
min_rss = "64M"
db = "/tmp/p.db"
no_db = false
journal = "/tmp/j.json"
socket = "/tmp/s.sock"
mpki_change = 0.3
min_replan_interval = 10
release_after = 5
log_format = "json"
metrics = "127.0.0.1:9477"
"#,
        )
        .expect("valid");
        let o = c.into_options();
        assert_eq!(o.policy.name(), "nmass");
        assert_eq!(o.interval, Duration::from_millis(500));
        assert!(o.dry_run && o.migrate_pages);
        assert_eq!(o.migrate_rate, 32.0);
        assert_eq!(o.select.include_comm, vec!["postgres*", "java"]);
        assert_eq!(o.select.exclude_pid, vec![11, 12]);
        assert_eq!(o.select.exclude_cgroup, vec!["/system.slice/*"]);
        assert_eq!(o.select.min_cpu, 0.5);
        assert_eq!(o.select.min_rss, 64 << 20);
        assert_eq!(o.socket, PathBuf::from("/tmp/s.sock"));
        assert_eq!(o.journal, PathBuf::from("/tmp/j.json"));
        assert_eq!(o.mpki_change, 0.3);
        assert_eq!(o.min_replan_interval, Duration::from_secs(10));
        assert_eq!(o.release_after, Duration::from_secs(5));
        assert_eq!(o.log_format, LogFormat::Json);
        assert_eq!(o.metrics, Some("127.0.0.1:9477".parse().expect("addr")));
    }

    /// Issue 41: a config file others may write steers a root daemon (which files it
    /// writes, which processes it moves): refused in one line.
    #[test]
    fn a_config_file_others_may_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("numasched.toml");
        std::fs::write(&path, "policy = \"auto\"\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o646)).expect("chmod");
        let e = FileConfig::load(&path)
            .expect_err("world-writable")
            .to_string();
        assert!(e.contains("not trusted as the config file"), "{e}");
        assert!(e.contains("mode 646"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        FileConfig::load(&path).expect("root's, readable by all: fine");
    }

    /// Issue 41: an overflow was reported as "expected a whole number ≥ 0".
    #[test]
    fn a_number_too_large_says_the_bound() {
        let e = parse("release_after = 99999999999\n")
            .expect_err("too large")
            .to_string();
        assert!(e.contains("line 1"), "{e}");
        assert!(e.contains("between 10ms and 24h"), "{e}");
        let e = parse("include_pid = [99999999999]\n")
            .expect_err("too large")
            .to_string();
        assert!(e.contains("not a pid (1 to"), "{e}");
    }

    #[test]
    fn an_empty_file_gives_the_defaults() {
        assert_eq!(parse("").expect("empty").into_options(), Options::default());
    }

    fn error_of(text: &str) -> String {
        parse(text).expect_err("must be refused").to_string()
    }

    #[test]
    fn bad_values_name_the_file_and_line() {
        for (text, line, needle) in [
            ("policy = \"nmas\"", 1, "unknown policy 'nmas'"),
            ("\n\ninterval = \"-1s\"", 3, "invalid duration"),
            ("interval = \"0s\"", 1, "between 10ms and 24h"),
            ("\nmigrate_rate = 0", 2, "greater than 0"),
            ("min_cpu = -1", 1, "must not be negative"),
            ("min_rss = \"lots\"", 1, "invalid size"),
            ("include_comm = [\"[x\"]", 1, "invalid pattern"),
            ("dry_run = \"yes\"", 1, "invalid type"),
            (
                "\n\n\nexclude_com = [\"x\"]",
                4,
                "unknown field `exclude_com`",
            ),
            (
                "log_format = \"xml\"",
                1,
                "unknown log format 'xml' (known: text, json)",
            ),
            (
                "\npin = \"bogus\"",
                2,
                "unknown pin granularity 'bogus' (known: llc, node, core, cpu)",
            ),
            // Not a word at all: the same list, as the flag gives it.
            (
                "pin = 3",
                1,
                "expected a word in quotes (known: llc, node, core, cpu), found integer 3",
            ),
            ("log_format = 2", 1, "(known: text, json), found integer 2"),
            ("policy = [3]", 1, "(known: auto, auto-migrate,"),
            // Pids as `--include-pid` takes them.
            ("include_pid = [0]", 1, "0 is not a pid (1 to 4194304)"),
            ("\nexclude_pid = [12, -1]", 2, "-1 is not a pid"),
            ("include_pid = [4194305]", 1, "4194305 is not a pid"),
            ("include_pid = [\"12\"]", 1, "expected a pid, found string"),
            // A multi-line array: the bad element's line.
            ("include_pid = [\n  12,\n  0,\n]", 3, "0 is not a pid"),
            (
                "exclude_comm = [\n  \"ok\",\n\n  \"[x\",\n]",
                4,
                "invalid pattern",
            ),
            ("include_pid = [12, true]", 1, "expected a pid"),
            ("\nmetrics = \"0.0.0.0:9477\"", 2, "every interface"),
            ("metrics = \"9477\"", 1, "127.0.0.1:9477"),
            ("metrics = 9477", 1, "invalid type"),
        ] {
            let e = error_of(text);
            assert!(
                e.starts_with("/etc/numasched/numasched.toml: "),
                "{text:?}: {e}"
            );
            assert!(e.contains(&format!("line {line}")), "{text:?}: {e}");
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{text:?}: one line, got {e}");
        }
    }

    #[test]
    fn durations_read_as_operators_write_them() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("1ms").is_err());
        assert!(parse_duration("2 days").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("nan").is_err());
    }

    #[test]
    fn long_timings_are_doubted_as_unit_mistakes() {
        assert!(Options::default().timing_doubts().is_empty());
        let o = parse("interval = 500\nmin_replan_interval = 2000")
            .expect("valid")
            .into_options();
        let d = o.timing_doubts();
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].starts_with("interval is 8m 20s"), "{d:?}");
        assert!(d[0].contains("\"500ms\" is milliseconds"), "{d:?}");
        assert!(d[1].starts_with("min_replan_interval is 33m 20s"), "{d:?}");
        // Just under the bounds: a long epoch or hysteresis someone may well want.
        let o = parse("interval = 59.9\nmin_replan_interval = \"9m\"")
            .expect("valid")
            .into_options();
        assert!(o.timing_doubts().is_empty(), "{:?}", o.timing_doubts());
    }

    #[test]
    fn metrics_addresses_must_name_an_interface() {
        assert_eq!(
            parse_metrics_addr("127.0.0.1:9477"),
            Ok(SocketAddr::from(([127, 0, 0, 1], 9477)))
        );
        assert!(parse_metrics_addr("[::1]:9477").is_ok());
        // An explicit non-loopback address is the operator's choice.
        assert!(parse_metrics_addr("10.1.2.3:9477").is_ok());
        for bad in [
            "0.0.0.0:9477",
            "[::]:9477",
            "9477",
            "localhost:9477",
            "127.0.0.1:0",
            "x",
        ] {
            assert!(parse_metrics_addr(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse("metrics = \"\"").expect("off").into_options().metrics,
            None
        );
        assert_eq!(Options::default().metrics, None, "off by default");
    }

    #[test]
    fn sizes_allow_zero_for_no_threshold() {
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        let err = parse_bytes("-1").expect_err("negative");
        assert!(err.contains("0 (no threshold) or more"), "{err}");
    }
}
