//! The profile store: what numasched knows about each *program* (not process),
//! kept in an embedded SQLite database so that it survives restarts of the daemon and
//! reboots of the machine. Each number says where it came from — `given` by a user
//! (`numasched profile set` / `import`) or `learned` by the daemon from the program's
//! earlier runs — because the two are trusted differently (see [`super::resolve`]).
//!
//! Nothing here reads the clock: callers pass `now` (seconds since the Unix epoch), so
//! the logic is deterministic under test.
//!
//! The NUMA penalty is learned from the program's own history: the daemon reports, per
//! epoch, the CPI it saw and the share of the epoch the program ran on its home node
//! ([`Store::observe_epoch`]); epochs that were clearly local or clearly remote are
//! accumulated apart and, once both sides have enough of them, their mean CPIs give
//! `np = CPI_remote / CPI_local` ([`estimate_penalty`]), the definition of Majo & Gross.
//!
//! The file is the only place what the daemon learned survives, so it is handled with
//! care: a damaged file is reported and never replaced; each healthy open leaves a copy
//! next to it (`<db>.bak`, see [`Store::open`]) that a damaged store can be recovered
//! from; and no symbolic link at the file or its SQLite companions (`-wal`, `-shm`,
//! `-journal`) is ever followed, since the daemon runs as root and a link planted there
//! would make it create or overwrite a file of the planter's choosing.
//!
//! The file on disk (its path, the links refused there, the copy) is handled in
//! `files.rs`, the tables and their version in `schema.rs`.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension};
use serde::{Deserialize, Serialize};

use numasched_model::files::one_line;
use numasched_model::profile::{Profile, ProfileError, ProfileSet};

mod files;
mod schema;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_files;

pub use files::{backup_path, BACKUP_SUFFIX};
pub use schema::SCHEMA_VERSION;

use files::{locate, recovery_hint, symlink_refusal};
use schema::migrate;

/// Where the daemon keeps the store unless told otherwise (`--db`).
pub const DEFAULT_PATH: &str = "/var/lib/numasched/profiles.db";

/// How long to wait for another process (the daemon, a second CLI) holding the write
/// lock before reporting [`StoreError::Locked`]. Writes are tiny, so a longer wait means
/// something is stuck.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Errors carry the path of the store so that a one-line message is actionable.
/// Underlying errors are part of the message, not a `source`, so that anyhow's `{:#}`
/// does not print them twice (same convention as [`ProfileError`]).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: cannot create or write the profile store ({what}); check permissions or pass --db", path.display())]
    NotWritable { path: PathBuf, what: String },
    #[error("{}: not a valid profile store, the file is corrupt or not SQLite ({what}); it was left untouched — move it aside to start a new store{}", path.display(), recovery_hint(backup.as_deref()))]
    Corrupt {
        path: PathBuf,
        what: String,
        /// The copy made at the last healthy open, when there is one.
        backup: Option<PathBuf>,
    },
    #[error("{}: the profile store cannot grow, the disk or filesystem is full ({what}); free some space", path.display())]
    Full { path: PathBuf, what: String },
    /// `link` is the store's path or one of its companions (`-wal`, `-shm`, `-journal`).
    #[error("{}: {}", path.display(), symlink_refusal(path, link))]
    Symlink { path: PathBuf, link: PathBuf },
    #[error("{}: an SQLite database of something else (tables: {tables}); refusing to use it as the profile store", path.display())]
    Foreign { path: PathBuf, tables: String },
    #[error("{}: the profile store is locked by another process (is the daemon writing?); try again", path.display())]
    Locked { path: PathBuf },
    #[error("{}: written by a newer numasched (schema version {found}, this one knows up to {SCHEMA_VERSION})", path.display())]
    TooNew { path: PathBuf, found: i32 },
    #[error("{}: {what}", path.display())]
    Sqlite { path: PathBuf, what: String },
    /// A value the caller passed is out of range; `field` names it.
    #[error("{field}: {what}")]
    Invalid { field: String, what: String },
    #[error(transparent)]
    File(#[from] ProfileError),
}

/// Who produced a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Supplied by a user: `profile set`, `profile import`.
    Given,
    /// Measured by the daemon on this machine over earlier runs.
    Learned,
}

impl Origin {
    fn as_str(self) -> &'static str {
        match self {
            Origin::Given => "given",
            Origin::Learned => "learned",
        }
    }
    fn parse(s: &str) -> Option<Origin> {
        match s {
            "given" => Some(Origin::Given),
            "learned" => Some(Origin::Learned),
            _ => None,
        }
    }
}

/// The per-program numbers the policies use (`Process` in a snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    Mpki,
    NumaPenalty,
    CacheReuse,
    BandwidthGbps,
}

impl Quantity {
    pub const ALL: [Quantity; 4] = [
        Quantity::Mpki,
        Quantity::NumaPenalty,
        Quantity::CacheReuse,
        Quantity::BandwidthGbps,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Quantity::Mpki => "mpki",
            Quantity::NumaPenalty => "numa_penalty",
            Quantity::CacheReuse => "cache_reuse",
            Quantity::BandwidthGbps => "bandwidth_gbps",
        }
    }

    fn parse(s: &str) -> Option<Quantity> {
        Quantity::ALL.into_iter().find(|q| q.as_str() == s)
    }

    /// Checks a value against what the quantity means; the message says why not.
    pub fn check(self, v: f64) -> Result<(), String> {
        if !v.is_finite() {
            return Err(format!("{v} is not a finite number"));
        }
        match self {
            Quantity::Mpki | Quantity::BandwidthGbps if v < 0.0 => Err(format!("{v} must be ≥ 0")),
            Quantity::NumaPenalty if v < 1.0 => {
                Err(format!("{v} must be ≥ 1 (remote CPI / local CPI)"))
            }
            Quantity::CacheReuse if !(0.0..=1.0).contains(&v) => {
                Err(format!("{v} must be a fraction in [0, 1]"))
            }
            _ => Ok(()),
        }
    }
}

/// One stored number.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    pub value: f64,
    /// Observations behind a learned value; 0 for a given one.
    pub samples: u64,
    /// When it was last written, seconds since the Unix epoch (as passed by the caller).
    pub updated: i64,
}

/// A quantity as known from each origin. Both are kept: a user's profile stays behind a
/// learned value, and comes back if the learned one is cleared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Known {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given: Option<Fact>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned: Option<Fact>,
}

impl Known {
    /// Learned beats given: it was measured here, on this program's real runs.
    pub fn best(&self) -> Option<(f64, Origin)> {
        self.learned
            .map(|f| (f.value, Origin::Learned))
            .or(self.given.map(|f| (f.value, Origin::Given)))
    }

    fn is_empty(&self) -> bool {
        self.given.is_none() && self.learned.is_none()
    }

    fn slot(&mut self, o: Origin) -> &mut Option<Fact> {
        match o {
            Origin::Given => &mut self.given,
            Origin::Learned => &mut self.learned,
        }
    }
}

/// Everything stored about one program.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredProgram {
    pub program: String,
    #[serde(default, skip_serializing_if = "Known::is_empty")]
    pub mpki: Known,
    #[serde(default, skip_serializing_if = "Known::is_empty")]
    pub numa_penalty: Known,
    #[serde(default, skip_serializing_if = "Known::is_empty")]
    pub cache_reuse: Known,
    #[serde(default, skip_serializing_if = "Known::is_empty")]
    pub bandwidth_gbps: Known,
}

impl StoredProgram {
    pub fn get(&self, q: Quantity) -> &Known {
        match q {
            Quantity::Mpki => &self.mpki,
            Quantity::NumaPenalty => &self.numa_penalty,
            Quantity::CacheReuse => &self.cache_reuse,
            Quantity::BandwidthGbps => &self.bandwidth_gbps,
        }
    }

    fn get_mut(&mut self, q: Quantity) -> &mut Known {
        match q {
            Quantity::Mpki => &mut self.mpki,
            Quantity::NumaPenalty => &mut self.numa_penalty,
            Quantity::CacheReuse => &mut self.cache_reuse,
            Quantity::BandwidthGbps => &mut self.bandwidth_gbps,
        }
    }

    /// The store's share of the evidence for [`super::resolve`]; the caller adds what it
    /// measured on this run.
    pub fn evidence(&self) -> numasched_model::character::Evidence {
        let v = |k: &Known, o: Origin| match o {
            Origin::Given => k.given.map(|f| f.value),
            Origin::Learned => k.learned.map(|f| f.value),
        };
        numasched_model::character::Evidence {
            learned_mpki: v(&self.mpki, Origin::Learned),
            learned_np: v(&self.numa_penalty, Origin::Learned),
            profile_mpki: v(&self.mpki, Origin::Given),
            profile_np: v(&self.numa_penalty, Origin::Given),
            ..numasched_model::character::Evidence::default()
        }
    }

    /// The program in the simulator's profile format, each quantity at its best value.
    /// `None` without an MPKI, which that format requires.
    pub fn to_profile(&self) -> Option<Profile> {
        let mpki = self.mpki.best()?.0;
        let mut p = Profile::new(&self.program, mpki, self.numa_penalty.best().map(|b| b.0));
        // The simulator's streaming fraction is the share of misses no cache removes;
        // cache reuse is the rest (as in `sim::eval::bridge`).
        if let Some((r, _)) = self.cache_reuse.best() {
            p.streaming_fraction = complement(r);
        }
        p.bandwidth_gbps = self.bandwidth_gbps.best().map(|b| b.0);
        Some(p)
    }
}

/// What a user states about a program (`profile set`, one profile of an import). `None`
/// = not stated.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GivenProfile {
    pub mpki: Option<f64>,
    pub numa_penalty: Option<f64>,
    pub cache_reuse: Option<f64>,
    pub bandwidth_gbps: Option<f64>,
}

impl GivenProfile {
    fn values(&self) -> [(Quantity, Option<f64>); 4] {
        [
            (Quantity::Mpki, self.mpki),
            (Quantity::NumaPenalty, self.numa_penalty),
            (Quantity::CacheReuse, self.cache_reuse),
            (Quantity::BandwidthGbps, self.bandwidth_gbps),
        ]
    }

    /// Checks every stated value; the error names the field.
    pub fn validate(&self) -> Result<(), StoreError> {
        for (q, v) in self.values() {
            if let Some(v) = v {
                q.check(v).map_err(|what| StoreError::Invalid {
                    field: q.as_str().into(),
                    what,
                })?;
            }
        }
        Ok(())
    }
}

/// Thresholds for learning the NUMA penalty from epochs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LearnParams {
    /// An epoch counts as *local* when at least this share of it ran on the home node.
    pub local_at_least: f64,
    /// An epoch counts as *remote* when at most this share of it ran on the home node.
    /// Epochs in between mix both and are not used: they would pull the two means
    /// towards each other and understate the penalty.
    pub remote_at_most: f64,
    /// Epochs needed on each side before a penalty is reported: one epoch's CPI is noisy
    /// (phases, co-runners), a mean over several is not.
    pub min_samples: u64,
    /// Each side's count is halved (with its sum) when it reaches this, so that old
    /// runs fade and the estimate follows a program whose behaviour changed (a new
    /// version, a different input).
    pub max_samples: u64,
}

impl Default for LearnParams {
    fn default() -> Self {
        LearnParams {
            local_at_least: 0.9,
            remote_at_most: 0.1,
            min_samples: 5,
            max_samples: 1000,
        }
    }
}

/// Running CPI sum over the epochs of one side (local or remote).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpiStats {
    /// Epochs counted (after fading, see [`LearnParams::max_samples`]).
    pub n: u64,
    pub sum: f64,
}

impl CpiStats {
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

/// A program's local and remote epochs so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NumaHistory {
    pub local: CpiStats,
    pub remote: CpiStats,
}

impl NumaHistory {
    /// Adds one epoch. Returns `None` (and changes nothing) for an epoch that is neither
    /// clearly local nor clearly remote.
    pub fn observe(
        &self,
        cpi: f64,
        ran_local_fraction: f64,
        p: &LearnParams,
    ) -> Option<NumaHistory> {
        let mut h = *self;
        let side = if ran_local_fraction >= p.local_at_least {
            &mut h.local
        } else if ran_local_fraction <= p.remote_at_most {
            &mut h.remote
        } else {
            return None;
        };
        side.n += 1;
        side.sum += cpi;
        if p.max_samples >= 2 && side.n >= p.max_samples {
            side.n /= 2;
            side.sum /= 2.0;
        }
        Some(h)
    }
}

/// `np = mean CPI remote / mean CPI local` once both sides have `min_samples` epochs.
/// Clamped to ≥ 1: a program cannot run faster away from its memory, so a ratio below
/// 1 is noise (a phase change between the two sets of epochs) and the honest reading is
/// "no measurable penalty".
pub fn estimate_penalty(h: &NumaHistory, min_samples: u64) -> Option<f64> {
    let need = min_samples.max(1);
    if h.local.n < need || h.remote.n < need {
        return None;
    }
    let local = h.local.mean()?;
    let remote = h.remote.mean()?;
    if !(local.is_finite() && remote.is_finite()) || local <= 0.0 {
        return None;
    }
    Some((remote / local).max(1.0))
}

/// An open profile store.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// The copy written at open, if one was.
    backup: Option<PathBuf>,
    /// Why no copy could be written at open, for the caller to log.
    backup_warning: Option<String>,
}

/// A profile file (the simulator's `[[profiles]]` format), read and checked before any
/// store is opened, so that a bad file creates nothing.
#[derive(Debug, Clone)]
pub struct ProfileFile {
    pub set: ProfileSet,
    /// Programs whose entry states `streaming_fraction` (their cache reuse is given).
    pub stating_reuse: Vec<String>,
}

impl ProfileFile {
    pub fn read(file: &Path) -> Result<ProfileFile, StoreError> {
        let text = numasched_model::files::read_text(
            file,
            numasched_model::profile::MAX_PROFILE_BYTES,
            "profile file",
        )
        .map_err(|e| ProfileError::Io {
            path: file.to_path_buf(),
            err: e.into_io(),
        })?;
        let toml = is_toml(file);
        let set = ProfileSet::parse(&text, toml, file)?;
        let stating_reuse = names_stating(&text, toml, "streaming_fraction");
        Ok(ProfileFile { set, stating_reuse })
    }
}

impl Store {
    /// Opens the store at `path`, creating it (and its directory, private to the owner)
    /// if missing. An existing file that is not a valid store is reported, never
    /// replaced: it may hold a user's only copy of their profiles. A symbolic link at
    /// the file or at one of SQLite's companion files is refused, not followed.
    ///
    /// Once the store has passed its checks it is copied to `<path>.bak`, so that a
    /// file damaged later (a disk error, a crash of the filesystem) can be recovered
    /// from the state at its last healthy open; the error for a corrupt file then names
    /// the copy. A copy that cannot be written (no space, say) does not fail the open:
    /// see [`Store::backup_warning`]. An empty store is not copied, so that a fresh
    /// store started after a corrupt one never overwrites the copy of the old one.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Store::open_inner(path, true)
    }

    /// [`Store::open`] without the copy, for one-shot readers (`plan`) that promise to
    /// leave no trace beyond what opening requires.
    pub fn open_without_backup(path: &Path) -> Result<Store, StoreError> {
        Store::open_inner(path, false)
    }

    fn open_inner(path: &Path, backup: bool) -> Result<Store, StoreError> {
        let real = locate(path)?;
        let path = path.to_path_buf();
        // NOFOLLOW also covers a link planted between the check in `locate` and here.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let conn = Connection::open_with_flags(&real, flags).map_err(|e| classify(&path, e))?;
        let mut store = Store {
            conn,
            path,
            backup: None,
            backup_warning: None,
        };
        store.init()?;
        if backup {
            match store.write_backup(&real) {
                Ok(copy) => store.backup = copy,
                Err(w) => store.backup_warning = Some(w),
            }
        }
        Ok(store)
    }

    /// The copy written when the store was opened; `None` when the store was empty or
    /// the copy failed.
    pub fn backup(&self) -> Option<&Path> {
        self.backup.as_deref()
    }

    /// One line saying why no copy could be written at open (the store itself works).
    pub fn backup_warning(&self) -> Option<&str> {
        self.backup_warning.as_deref()
    }

    /// Writes the copy at `<real>.bak` (see [`files::write_backup`]); `real` is the
    /// path SQLite opened.
    fn write_backup(&self, real: &Path) -> Result<Option<PathBuf>, String> {
        files::write_backup(&self.conn, &self.path, real)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, e: rusqlite::Error) -> StoreError {
        classify(&self.path, e)
    }

    fn init(&mut self) -> Result<(), StoreError> {
        let path = self.path.clone();
        let c = &self.conn;
        let e = |e| classify(&path, e);
        c.busy_timeout(BUSY_TIMEOUT).map_err(e)?;
        // Reading the header is the first time SQLite looks at the file: a file that is
        // not SQLite fails here with NOTADB.
        let version: i32 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(e)?;
        let check: String = c
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(e)?;
        if check != "ok" {
            return Err(corrupt(&path, one_line(&check)));
        }
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path,
                found: version,
            });
        }
        if version == 0 {
            let tables: Vec<String> = c
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                .and_then(|mut s| {
                    s.query_map([], |r| r.get::<_, String>(0))?
                        .collect::<Result<_, _>>()
                })
                .map_err(e)?;
            if !tables.is_empty() {
                return Err(StoreError::Foreign {
                    path,
                    tables: tables.join(", "),
                });
            }
        }
        if c.is_readonly(rusqlite::MAIN_DB).map_err(e)? {
            return Err(StoreError::NotWritable {
                path,
                what: "the file is read-only".into(),
            });
        }
        // WAL: the daemon writes every epoch while `profile list` reads; readers then
        // never block the writer, and a crash mid-write cannot corrupt the file.
        let mode: String = c
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(e)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::NotWritable {
                path,
                what: format!("cannot switch to WAL journaling (got {mode})"),
            });
        }
        migrate(&mut self.conn, version).map_err(|e| classify(&self.path, e))
    }

    /// Sets the values `given` states in the user's profile of `program`; the values it
    /// does not state stay as they were given before (an imported file, by contrast,
    /// replaces its namesake whole). Learned numbers are kept.
    pub fn set_given(
        &mut self,
        program: &str,
        given: &GivenProfile,
        now: i64,
    ) -> Result<(), StoreError> {
        check_program(program)?;
        given.validate()?;
        let tx = self
            .conn
            .transaction()
            .map_err(|e| classify(&self.path, e))?;
        write_given(&tx, program, given, now, Given::Named).map_err(|e| classify(&self.path, e))?;
        tx.commit().map_err(|e| classify(&self.path, e))
    }

    /// One program; `None` when nothing is stored about it.
    pub fn get(&self, program: &str) -> Result<Option<StoredProgram>, StoreError> {
        let mut all = self.load(Some(program))?;
        Ok(all.pop())
    }

    /// Every program, by name.
    pub fn list(&self) -> Result<Vec<StoredProgram>, StoreError> {
        self.load(None)
    }

    fn load(&self, only: Option<&str>) -> Result<Vec<StoredProgram>, StoreError> {
        let sql = "SELECT program, quantity, origin, value, samples, updated FROM facts \
                   WHERE ?1 IS NULL OR program = ?1 ORDER BY program";
        let rows: Vec<(String, String, String, f64, i64, i64)> = self
            .conn
            .prepare_cached(sql)
            .and_then(|mut s| {
                s.query_map([only], |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                    ))
                })?
                .collect()
            })
            .map_err(|e| self.err(e))?;
        let mut out: Vec<StoredProgram> = Vec::new();
        for (program, q, o, value, samples, updated) in rows {
            let (Some(q), Some(o)) = (Quantity::parse(&q), Origin::parse(&o)) else {
                return Err(corrupt(
                    &self.path,
                    format!("unknown quantity or origin '{q}'/'{o}' for '{program}'"),
                ));
            };
            if out.last().is_none_or(|p| p.program != program) {
                out.push(StoredProgram {
                    program,
                    ..StoredProgram::default()
                });
            }
            if let Some(p) = out.last_mut() {
                *p.get_mut(q).slot(o) = Some(Fact {
                    value,
                    samples: samples.max(0) as u64,
                    updated,
                });
            }
        }
        Ok(out)
    }

    /// Folds one observation of a quantity the daemon measures (MPKI alone, bandwidth,
    /// cache reuse) into the learned running mean.
    pub fn learn(
        &mut self,
        program: &str,
        q: Quantity,
        value: f64,
        now: i64,
    ) -> Result<Fact, StoreError> {
        check_program(program)?;
        q.check(value).map_err(|what| StoreError::Invalid {
            field: q.as_str().into(),
            what,
        })?;
        let tx = self
            .conn
            .transaction()
            .map_err(|e| classify(&self.path, e))?;
        let old: Option<(f64, i64)> = tx
            .query_row(
                "SELECT value, samples FROM facts \
                 WHERE program = ?1 AND quantity = ?2 AND origin = 'learned'",
                params![program, q.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| classify(&self.path, e))?;
        let (mean, n) = match old {
            Some((m, n)) if n > 0 => {
                let n = n as f64;
                (m + (value - m) / (n + 1.0), n as u64 + 1)
            }
            _ => (value, 1),
        };
        let fact = Fact {
            value: mean,
            samples: n,
            updated: now,
        };
        put_fact(&tx, program, q, Origin::Learned, &fact).map_err(|e| classify(&self.path, e))?;
        tx.commit().map_err(|e| classify(&self.path, e))?;
        Ok(fact)
    }

    /// Records one epoch of `program`: its CPI and the share of the epoch it ran on the
    /// node holding its memory. Returns the learned NUMA penalty once there is one (it is
    /// then also stored as the program's learned `numa_penalty`).
    pub fn observe_epoch(
        &mut self,
        program: &str,
        cpi: f64,
        ran_local_fraction: f64,
        now: i64,
        params: &LearnParams,
    ) -> Result<Option<f64>, StoreError> {
        self.observe_epochs(program, &[(cpi, ran_local_fraction)], now, params)
    }

    /// [`observe_epoch`](Self::observe_epoch) for several epochs of one program in one
    /// transaction: the daemon buffers epochs and writes them in batches, because a
    /// commit per process per second would make the store the daemon's main cost. All
    /// epochs are checked before anything is written.
    pub fn observe_epochs(
        &mut self,
        program: &str,
        epochs: &[(f64, f64)],
        now: i64,
        params: &LearnParams,
    ) -> Result<Option<f64>, StoreError> {
        check_program(program)?;
        for &(cpi, ran_local_fraction) in epochs {
            if !(cpi.is_finite() && cpi > 0.0) {
                return Err(StoreError::Invalid {
                    field: "cpi".into(),
                    what: format!("{cpi} must be a finite number > 0"),
                });
            }
            if !(0.0..=1.0).contains(&ran_local_fraction) {
                return Err(StoreError::Invalid {
                    field: "ran_local_fraction".into(),
                    what: format!("{ran_local_fraction} must be a fraction in [0, 1]"),
                });
            }
        }
        let path = self.path.clone();
        let e = |e| classify(&path, e);
        let tx = self.conn.transaction().map_err(e)?;
        let old = read_history(&tx, program).map_err(e)?.unwrap_or_default();
        let h = epochs.iter().fold(old, |h, &(cpi, frac)| {
            h.observe(cpi, frac, params).unwrap_or(h)
        });
        if h == old {
            return Ok(estimate_penalty(&old, params.min_samples));
        }
        tx.execute(
            "INSERT OR REPLACE INTO numa_history \
             (program, local_n, local_sum, remote_n, remote_sum, updated) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                program,
                h.local.n as i64,
                h.local.sum,
                h.remote.n as i64,
                h.remote.sum,
                now
            ],
        )
        .map_err(e)?;
        let np = estimate_penalty(&h, params.min_samples);
        if let Some(np) = np {
            let fact = Fact {
                value: np,
                samples: h.local.n.min(h.remote.n),
                updated: now,
            };
            put_fact(&tx, program, Quantity::NumaPenalty, Origin::Learned, &fact).map_err(e)?;
        }
        tx.commit().map_err(e)?;
        Ok(np)
    }

    /// The local/remote epochs recorded for `program`.
    pub fn numa_history(&self, program: &str) -> Result<Option<NumaHistory>, StoreError> {
        read_history(&self.conn, program).map_err(|e| self.err(e))
    }

    /// Removes what the daemon learned about `program` (for example after an upgrade
    /// changed its behaviour); the user's profile stays.
    pub fn forget_learned(&mut self, program: &str) -> Result<(), StoreError> {
        let path = self.path.clone();
        let e = |e| classify(&path, e);
        let tx = self.conn.transaction().map_err(e)?;
        tx.execute(
            "DELETE FROM facts WHERE program = ?1 AND origin = 'learned'",
            [program],
        )
        .map_err(e)?;
        tx.execute("DELETE FROM numa_history WHERE program = ?1", [program])
            .map_err(e)?;
        tx.commit().map_err(e)
    }

    /// Stores every profile of `set` as given, in one transaction (all or nothing).
    /// Only what the profile states is stored: a cache reuse only when `stated_reuse`
    /// says the file gave a streaming fraction, since the format fills in a default the
    /// user never chose.
    pub fn import(
        &mut self,
        set: &ProfileSet,
        stated_reuse: &dyn Fn(&str) -> bool,
        now: i64,
    ) -> Result<usize, StoreError> {
        let path = self.path.clone();
        let e = |e| classify(&path, e);
        let tx = self.conn.transaction().map_err(e)?;
        for p in set.iter() {
            let given = GivenProfile {
                mpki: Some(p.mpki),
                numa_penalty: p.numa_penalty,
                cache_reuse: stated_reuse(&p.name).then_some(complement(p.streaming_fraction)),
                bandwidth_gbps: p.bandwidth_gbps,
            };
            write_given(&tx, &p.name, &given, now, Given::Whole).map_err(e)?;
        }
        tx.commit().map_err(e)?;
        Ok(set.len())
    }

    /// Reads a profile file (TOML for `.toml`, JSON otherwise; the simulator's format)
    /// and imports it. Errors name the file and the field.
    pub fn import_file(&mut self, file: &Path, now: i64) -> Result<usize, StoreError> {
        let parsed = ProfileFile::read(file)?;
        self.import_parsed(&parsed, now)
    }

    /// Imports a file already read (see [`ProfileFile::read`]).
    pub fn import_parsed(&mut self, file: &ProfileFile, now: i64) -> Result<usize, StoreError> {
        let stated = &file.stating_reuse;
        self.import(&file.set, &|name| stated.iter().any(|n| n == name), now)
    }

    /// Every program with an MPKI (the profile format requires one), for
    /// [`render_profiles`]; the names of the others in the second list.
    pub fn export(&self) -> Result<(Vec<StoredProgram>, Vec<String>), StoreError> {
        Ok(self
            .list()?
            .into_iter()
            .partition::<Vec<_>, _>(|p| p.mpki.best().is_some()))
        .map(|(ok, skipped)| (ok, skipped.into_iter().map(|p| p.program).collect()))
    }
}

/// Writes programs in the profile-file format that [`ProfileSet::load`] and
/// [`Store::import_file`] read, each quantity at its best value (learned over given), so
/// the knowledge can seed another machine or the simulator. Only what the store knows is
/// written — not the simulator's defaults for the model's shape parameters — so that an
/// import of the file states exactly what was exported (a written default streaming
/// fraction would come back as a cache reuse nobody measured). Programs without an MPKI
/// are left out.
pub fn render_profiles(programs: &[StoredProgram], toml: bool) -> Result<String, String> {
    #[derive(Serialize)]
    struct Entry<'a> {
        name: &'a str,
        mpki: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        numa_penalty: Option<f64>,
        /// The simulator's name for the misses no cache removes: 1 − cache reuse.
        #[serde(skip_serializing_if = "Option::is_none")]
        streaming_fraction: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        bandwidth_gbps: Option<f64>,
    }
    #[derive(Serialize)]
    struct File<'a> {
        profiles: Vec<Entry<'a>>,
    }
    let best = |k: &Known| k.best().map(|b| b.0);
    let file = File {
        profiles: programs
            .iter()
            .filter_map(|p| {
                Some(Entry {
                    name: &p.program,
                    mpki: best(&p.mpki)?,
                    numa_penalty: best(&p.numa_penalty),
                    streaming_fraction: best(&p.cache_reuse).map(complement),
                    bandwidth_gbps: best(&p.bandwidth_gbps),
                })
            })
            .collect(),
    };
    if toml {
        toml::to_string(&file).map_err(|e| e.to_string())
    } else {
        serde_json::to_string_pretty(&file)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string())
    }
}

/// Same rule as [`ProfileSet::load`].
pub fn is_toml(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
}

/// Names of the profiles in an already-validated file that state `key` themselves.
/// Parsing cannot tell: serde fills in the default.
fn names_stating(text: &str, toml: bool, key: &str) -> Vec<String> {
    let entries: Vec<(Option<String>, bool)> = if toml {
        let Ok(doc) = text.parse::<toml::Table>() else {
            return Vec::new();
        };
        doc.get("profiles")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|p| p.as_table())
                    .map(|t| {
                        (
                            t.get("name").and_then(|n| n.as_str()).map(String::from),
                            t.contains_key(key),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    } else {
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(text) else {
            return Vec::new();
        };
        doc.get("profiles")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|p| p.as_object())
                    .map(|o| {
                        (
                            o.get("name").and_then(|n| n.as_str()).map(String::from),
                            o.contains_key(key),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    entries
        .into_iter()
        .filter_map(|(n, has)| n.filter(|_| has))
        .collect()
}

fn check_program(program: &str) -> Result<(), StoreError> {
    if program.trim().is_empty() {
        return Err(StoreError::Invalid {
            field: "program".into(),
            what: "must not be empty".into(),
        });
    }
    Ok(())
}

/// What a write of given values replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Given {
    /// The values named; the program's other given values stay (`profile set`).
    Named,
    /// The whole given profile (an imported file states the profile).
    Whole,
}

fn write_given(
    c: &Connection,
    program: &str,
    given: &GivenProfile,
    now: i64,
    replaces: Given,
) -> rusqlite::Result<()> {
    match replaces {
        Given::Whole => {
            c.execute(
                "DELETE FROM facts WHERE program = ?1 AND origin = 'given'",
                [program],
            )?;
        }
        Given::Named => {
            for (q, v) in given.values() {
                if v.is_some() {
                    c.execute(
                        "DELETE FROM facts WHERE program = ?1 AND origin = 'given' \
                         AND quantity = ?2",
                        [program, q.as_str()],
                    )?;
                }
            }
        }
    }
    for (q, v) in given.values() {
        if let Some(value) = v {
            let fact = Fact {
                value,
                samples: 0,
                updated: now,
            };
            put_fact(c, program, q, Origin::Given, &fact)?;
        }
    }
    Ok(())
}

fn put_fact(
    c: &Connection,
    program: &str,
    q: Quantity,
    o: Origin,
    f: &Fact,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT OR REPLACE INTO facts (program, quantity, origin, value, samples, updated) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            program,
            q.as_str(),
            o.as_str(),
            f.value,
            f.samples.min(i64::MAX as u64) as i64,
            f.updated
        ],
    )?;
    Ok(())
}

fn read_history(c: &Connection, program: &str) -> rusqlite::Result<Option<NumaHistory>> {
    c.query_row(
        "SELECT local_n, local_sum, remote_n, remote_sum FROM numa_history WHERE program = ?1",
        [program],
        |r| {
            Ok(NumaHistory {
                local: CpiStats {
                    n: r.get::<_, i64>(0)?.max(0) as u64,
                    sum: r.get(1)?,
                },
                remote: CpiStats {
                    n: r.get::<_, i64>(2)?.max(0) as u64,
                    sum: r.get(3)?,
                },
            })
        },
    )
    .optional()
}

/// Turns SQLite's codes into errors an operator can act on.
fn classify(path: &Path, e: rusqlite::Error) -> StoreError {
    let what = one_line(&e.to_string());
    if e.sqlite_error()
        .is_some_and(|f| f.extended_code == rusqlite::ffi::SQLITE_CANTOPEN_SYMLINK)
    {
        return StoreError::Symlink {
            path: path.to_path_buf(),
            link: path.to_path_buf(),
        };
    }
    let path = path.to_path_buf();
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => corrupt(&path, what),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Locked { path },
        Some(ErrorCode::DiskFull) => StoreError::Full { path, what },
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
            StoreError::NotWritable { path, what }
        }
        _ => StoreError::Sqlite { path, what },
    }
}

/// A corrupt store, with its copy when there is one to recover from.
fn corrupt(path: &Path, what: String) -> StoreError {
    let copy = backup_path(path);
    let backup = std::fs::symlink_metadata(&copy)
        .is_ok_and(|m| m.is_file())
        .then_some(copy);
    StoreError::Corrupt {
        path: path.to_path_buf(),
        what,
        backup,
    }
}

/// Faults a test puts on a store's connection, to get SQLite's own errors for a full
/// disk or a read-only file on the next write (connection settings: the file and other
/// connections are unaffected).
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// SQLITE_FULL as soon as the file would need another page.
    Full,
    /// SQLITE_READONLY on any write.
    ReadOnly,
    /// Lifts either.
    Lifted,
}

#[cfg(test)]
impl Store {
    pub(crate) fn inject(&self, fault: Fault) {
        let c = &self.conn;
        let unlimited = i64::from(u32::MAX) - 1;
        let (max_pages, query_only) = match fault {
            Fault::Full => (
                c.query_row("PRAGMA page_count", [], |r| r.get::<_, i64>(0))
                    .expect("page_count"),
                false,
            ),
            Fault::ReadOnly => (unlimited, true),
            Fault::Lifted => (unlimited, false),
        };
        let _now_max: i64 = c
            .query_row(&format!("PRAGMA max_page_count = {max_pages}"), [], |r| {
                r.get(0)
            })
            .expect("max_page_count");
        c.pragma_update(None, "query_only", query_only)
            .expect("query_only");
    }
}

/// `1 − x` for a fraction someone typed: rounded to 12 decimals, so that a reuse of 0.9
/// is written back as a streaming fraction of 0.1, not 0.09999999999999998 (binary
/// floating point cannot hold 0.9 exactly; no measured fraction has 12 digits).
fn complement(x: f64) -> f64 {
    ((1.0 - x) * 1e12).round() / 1e12
}
