//! The store in and out of profile files (the simulator's `[[profiles]]` format), so
//! that what one machine learned can seed another or the simulator, and a user can hand
//! the daemon profiles written elsewhere. The format names some things differently (a
//! streaming fraction rather than a cache reuse) and fills in defaults a user never
//! chose; the conversions here keep both from leaking into the store.

use std::collections::BTreeSet;
use std::path::Path;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use numasched_model::profile::{Profile, ProfileError, ProfileSet};

use super::{GivenProfile, Known, Store, StoreError, StoredProgram};

/// A profile file (the simulator's `[[profiles]]` format), read and checked before any
/// store is opened, so that a bad file creates nothing.
#[derive(Debug, Clone)]
pub struct ProfileFile {
    pub set: ProfileSet,
    /// Programs whose entry states `streaming_fraction` (their cache reuse is given).
    pub stating_reuse: BTreeSet<String>,
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
        let stating_reuse = names_stating_reuse(&text, toml);
        Ok(ProfileFile { set, stating_reuse })
    }
}

impl Store {
    /// Stores every profile of `set` as given, in one transaction (all or nothing).
    /// Only what the profile states is stored: a cache reuse only when `stated_reuse`
    /// says the file gave a streaming fraction, since the format fills in a default the
    /// user never chose.
    pub fn import(
        &mut self,
        set: &ProfileSet,
        stated_reuse: &dyn Fn(&str) -> bool,
        now: i64,
        progress: &mut dyn FnMut(usize),
    ) -> Result<usize, StoreError> {
        let profiles = set.iter().enumerate().map(|(i, p)| {
            progress(i);
            let given = GivenProfile {
                mpki: Some(p.mpki),
                numa_penalty: p.numa_penalty,
                cache_reuse: stated_reuse(&p.name).then_some(complement(p.streaming_fraction)),
                bandwidth_gbps: p.bandwidth_gbps,
            };
            (p.name.as_str(), given)
        });
        self.replace_given(profiles, now)?;
        Ok(set.len())
    }

    /// Reads a profile file (TOML for `.toml`, JSON otherwise; the simulator's format)
    /// and imports it. Errors name the file and the field.
    pub fn import_file(&mut self, file: &Path, now: i64) -> Result<usize, StoreError> {
        let parsed = ProfileFile::read(file)?;
        self.import_parsed(&parsed, now, &mut |_| {})
    }

    /// Imports a file already read (see [`ProfileFile::read`]); `progress` is told the
    /// index of each profile as it is written.
    pub fn import_parsed(
        &mut self,
        file: &ProfileFile,
        now: i64,
        progress: &mut dyn FnMut(usize),
    ) -> Result<usize, StoreError> {
        let stated = &file.stating_reuse;
        self.import(&file.set, &|name| stated.contains(name), now, progress)
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

impl StoredProgram {
    /// The program in the simulator's profile format, each quantity at its best value.
    /// `None` without an MPKI, which that format requires.
    pub fn to_profile(&self) -> Option<Profile> {
        let mpki = self.mpki.best()?.0;
        let mut p = Profile::new(&self.program, mpki, self.numa_penalty.best().map(|b| b.0));
        // The simulator's streaming fraction is the share of misses no cache removes;
        // cache reuse is the rest (as in `sim::eval::from_model`).
        if let Some((r, _)) = self.cache_reuse.best() {
            p.streaming_fraction = complement(r);
        }
        p.bandwidth_gbps = self.bandwidth_gbps.best().map(|b| b.0);
        Some(p)
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

/// Names of the profiles in an already-validated file that state a streaming fraction
/// themselves. Parsing cannot tell: serde fills in the default. Read typed, so this
/// second pass over a large file holds names, not a tree of every value in it.
fn names_stating_reuse(text: &str, toml: bool) -> BTreeSet<String> {
    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        profiles: Vec<Entry>,
    }
    #[derive(Deserialize)]
    struct Entry {
        name: Option<String>,
        streaming_fraction: Option<IgnoredAny>,
    }
    let file: Option<File> = if toml {
        toml::from_str(text).ok()
    } else {
        serde_json::from_str(text).ok()
    };
    file.map(|f| f.profiles)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.streaming_fraction.is_some())
        .filter_map(|e| e.name)
        .collect()
}

/// `1 − x` for a fraction someone typed: rounded to 12 decimals, so that a reuse of 0.9
/// is written back as a streaming fraction of 0.1, not 0.09999999999999998 (binary
/// floating point cannot hold 0.9 exactly; no measured fraction has 12 digits).
fn complement(x: f64) -> f64 {
    ((1.0 - x) * 1e12).round() / 1e12
}
