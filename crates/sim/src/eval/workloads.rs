//! `eval --workloads FILE`: an operator's own mixes as a suite, so the question "what
//! would numasched do for *my* programs on *this* machine" is answered by the same
//! runner and reports as the published suites, not by a one-off `sim` per placement.
//!
//! The file (TOML; `docs/workloads-example.toml` is a complete one):
//!
//! ```toml
//! machine = "nehalem-e5520"    # a preset, a spec string like "2n:2l:4c:2t", or "this"
//! migration = false            # true: pages may move too (policies as nmass-migrate)
//! policies = ["linux", "autonuma", "nmass", "auto", "oracle"]   # optional
//! profiles = "my-programs.toml" # optional, [[profiles]] file beside this one
//!
//! [[workload]]
//! name = "db-and-batch"
//! programs = ["mcf", "lbm", "stream", "namd"]
//! threads = [1, 1, 4, 1]       # optional, 1 each by default
//! homes = [[0, 0, 1, 1], [0, 0, 0, 0]]  # node id per program: one map, or several
//! ```
//!
//! Parsing checks everything that does not depend on the machine or the profiles, so
//! a typo is reported before a sysfs read or a profile file; [`Workloads::suite`]
//! checks program names and node ids. Every error is one line naming the file and,
//! where there is one, the line and key.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::suites::{self, Lookup, Suite, MIGRATE_POLICIES, NMASS_POLICIES};
use numasched_model::topology::{cpulist, NodeId, Topology, THIS};

/// Largest workloads file read: a real one is a few KiB.
pub const MAX_BYTES: u64 = 1 << 20;
/// Most programs in one workload: as many as the largest `cmload` case, beyond which
/// the oracle and the sampled Linux schedules take minutes per case.
pub const MAX_PROGRAMS: usize = 64;
/// Most threads of one program.
pub const MAX_THREADS: u32 = 1024;
/// Longest workload name: it is a column of the terminal table and of the CSV.
pub const MAX_NAME: usize = 32;
/// Most `[[workload]]` tables in one file, as many cases as `eval --cases` may draw:
/// each runs every policy, so this bounds a run's time (30 random cases took 40 s on
/// a 2-core VM; 1,000 take about 20 minutes).
pub const MAX_WORKLOADS: usize = 1000;

/// One line: the file, where in it (line and key, when known), what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{}: {place}{what}", path.display())]
pub struct WorkloadsError {
    path: PathBuf,
    place: String,
    what: String,
}

/// A parsed workloads file, not yet tied to a machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Workloads {
    pub path: PathBuf,
    /// The file's `machine`; `--machine` overrides it, and may stand in for it.
    pub machine: Option<String>,
    pub migration: bool,
    /// The file's `policies`, if it names any; `--policies` overrides them.
    pub policies: Option<Vec<String>>,
    /// The file's `profiles`, relative to the workloads file's directory.
    pub profiles: Option<PathBuf>,
    workloads: Vec<Workload>,
    machine_line: Option<usize>,
    profiles_line: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
struct Workload {
    name: String,
    programs: Vec<String>,
    threads: Vec<u32>,
    /// Home node id per program, one list per allocation map.
    maps: Vec<Vec<NodeId>>,
    programs_line: usize,
    homes_line: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDef {
    machine: Option<Spanned<String>>,
    #[serde(default)]
    migration: bool,
    policies: Option<Spanned<Vec<String>>>,
    profiles: Option<Spanned<String>>,
    #[serde(default)]
    workload: Vec<WorkloadDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadDef {
    name: Spanned<String>,
    programs: Spanned<Vec<String>>,
    threads: Option<Spanned<Vec<u32>>>,
    homes: Spanned<Homes>,
}

/// `homes`: one map (`[0, 0, 1, 1]`) or several (`[[0, 0, 1, 1], [0, 0, 0, 0]]`).
#[derive(Deserialize)]
#[serde(try_from = "toml::Value")]
struct Homes(Vec<Vec<NodeId>>);

impl TryFrom<toml::Value> for Homes {
    type Error = String;
    fn try_from(v: toml::Value) -> Result<Self, String> {
        let want = "a node id per program ([0, 1]) or a list of such maps ([[0, 1], [1, 1]])";
        let toml::Value::Array(items) = v else {
            return Err(format!("expected {want}, found {}", v.type_str()));
        };
        let lists = items.iter().filter(|i| i.is_array()).count();
        if lists > 0 && lists < items.len() {
            return Err(format!("expected {want}, not a mix of the two"));
        }
        if lists > 0 {
            let maps = items.iter().map(|m| match m {
                toml::Value::Array(ids) => node_ids(ids),
                _ => Err(format!("expected {want}")),
            });
            return maps.collect::<Result<_, _>>().map(Homes);
        }
        node_ids(&items).map(|ids| Homes(vec![ids]))
    }
}

/// Node ids as `sim --homes` takes them: below the kernel's 1024 nodes.
fn node_ids(items: &[toml::Value]) -> Result<Vec<NodeId>, String> {
    items
        .iter()
        .map(|v| {
            v.as_integer()
                .and_then(|i| NodeId::try_from(i).ok())
                .filter(|&i| i < 1024)
                .ok_or_else(|| format!("{v} is not a node id (0 to 1023)"))
        })
        .collect()
}

impl Workloads {
    /// Reads and checks the file at `path` (a regular file of at most [`MAX_BYTES`]).
    pub fn load(path: &Path) -> Result<Workloads, WorkloadsError> {
        let text =
            numasched_model::files::read_text(path, MAX_BYTES, "workloads file").map_err(|e| {
                error(
                    path,
                    None,
                    "",
                    format!("cannot read the workloads file: {}", e.without_path()),
                )
            })?;
        Workloads::parse(&text, path)
    }

    /// Parses and checks file contents; `path` labels errors and anchors `profiles`.
    pub fn parse(text: &str, path: &Path) -> Result<Workloads, WorkloadsError> {
        let line = |span: std::ops::Range<usize>| numasched_model::files::line_of(text, span.start);
        let de = toml::Deserializer::parse(text)
            .map_err(|e| error(path, e.span().map(line), "", e.message()))?;
        let file: FileDef = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = key_name(e.path());
            error(path, e.inner().span().map(line), &key, e.inner().message())
        })?;
        let at = |span, key: &str, what: String| error(path, Some(line(span)), key, what);

        if file.workload.is_empty() {
            return Err(error(
                path,
                None,
                "",
                "no [[workload]] table: nothing to evaluate",
            ));
        }
        if file.workload.len() > MAX_WORKLOADS {
            return Err(error(
                path,
                None,
                "workload",
                format!(
                    "{} [[workload]] tables, more than the {MAX_WORKLOADS} a file may have",
                    file.workload.len()
                ),
            ));
        }
        let policies = match &file.policies {
            Some(list) => Some(check_policies(list.get_ref()).map_err(|(i, what)| {
                let field = i.map_or("policies".to_string(), |i| format!("policies[{i}]"));
                at(list.span(), &field, what)
            })?),
            None => None,
        };
        let profiles = match &file.profiles {
            Some(p) if p.get_ref().is_empty() => {
                return Err(at(p.span(), "profiles", "is empty".into()));
            }
            Some(p) => {
                let dir = path.parent().unwrap_or(Path::new(""));
                Some(dir.join(p.get_ref()))
            }
            None => None,
        };
        let mut workloads: Vec<Workload> = Vec::with_capacity(file.workload.len());
        let mut named: std::collections::HashMap<String, usize> = Default::default();
        for (i, w) in file.workload.into_iter().enumerate() {
            let key = |k: &str| format!("workload[{i}].{k}");
            let name = w.name.get_ref();
            if let Some(first) = named.insert(name.clone(), i) {
                let what = format!("'{name}' is already the name of workload[{first}]");
                return Err(at(w.name.span(), &key("name"), what));
            }
            let w = workload(w, &line).map_err(|(span, k, what)| at(span, &key(&k), what))?;
            workloads.push(w);
        }
        Ok(Workloads {
            path: path.to_path_buf(),
            machine: file.machine.as_ref().map(|m| m.get_ref().clone()),
            migration: file.migration,
            policies,
            profiles,
            workloads,
            machine_line: file.machine.as_ref().map(|m| line(m.span())),
            profiles_line: file.profiles.as_ref().map(|p| line(p.span())),
        })
    }

    /// An error about the file's `machine` (absent, unknown, or sysfs unreadable for
    /// `this`).
    pub fn machine_error(&self, what: impl Display) -> WorkloadsError {
        error(&self.path, self.machine_line, "machine", what)
    }

    /// An error about the file's `profiles` (unreadable or invalid profile file).
    pub fn profiles_error(&self, what: impl Display) -> WorkloadsError {
        error(&self.path, self.profiles_line, "profiles", what)
    }

    /// The suite `workloads` on `topo`: a case per workload and map, in file order.
    /// `lookup` knows the programs; `known` names them for the error about one it does
    /// not.
    pub fn suite(
        &self,
        topo: &Topology,
        lookup: Lookup,
        known: &[&str],
    ) -> Result<Suite, WorkloadsError> {
        let machine = topo.name().unwrap_or("custom").to_string();
        let mut cases = Vec::new();
        for (i, w) in self.workloads.iter().enumerate() {
            let at = |line, key: String, what: String| error(&self.path, Some(line), &key, what);
            for (j, p) in w.programs.iter().enumerate() {
                if lookup(topo, p).is_none() {
                    let what = format!("unknown program '{p}' (known: {})", brief(known));
                    return Err(at(
                        w.programs_line,
                        format!("workload[{i}].programs[{j}]"),
                        what,
                    ));
                }
            }
            for (m, map) in w.maps.iter().enumerate() {
                let key = |j: usize| match w.maps.len() {
                    1 => format!("workload[{i}].homes[{j}]"),
                    _ => format!("workload[{i}].homes[{m}][{j}]"),
                };
                let mut homes = Vec::with_capacity(map.len());
                for (j, &id) in map.iter().enumerate() {
                    let index = topo.node_index(id).ok_or_else(|| {
                        let ids: Vec<NodeId> = topo.nodes().iter().map(|n| n.id).collect();
                        let on = match machine.as_str() {
                            THIS => "this machine".to_string(),
                            m => m.to_string(),
                        };
                        let what = format!(
                            "node {id} does not exist on {on} (nodes {})",
                            cpulist::format(&ids)
                        );
                        at(w.homes_line, key(j), what)
                    })?;
                    homes.push(index);
                }
                let programs: Vec<&str> = w.programs.iter().map(String::as_str).collect();
                let label = map_label(map);
                let mut case =
                    suites::case_at(NAME, &w.name, &label, topo, &programs, &homes, lookup)
                        .map_err(|what| at(w.homes_line, format!("workload[{i}]"), what))?;
                suites::set_threads(&mut case, &w.threads);
                cases.push(case);
            }
        }
        let policies = match &self.policies {
            Some(p) => p.clone(),
            None if self.migration => suites::names(MIGRATE_POLICIES),
            None => suites::names(NMASS_POLICIES),
        };
        Ok(Suite {
            name: NAME,
            machine,
            policies,
            cases,
            migration: self.migration,
            seed: None,
        })
    }
}

/// What is wrong with one `[[workload]]` table: where (span), which key under it, what.
type TableError = (std::ops::Range<usize>, String, String);

/// Checks one `[[workload]]` table on its own (unique names are the caller's).
fn workload(
    w: WorkloadDef,
    line: &dyn Fn(std::ops::Range<usize>) -> usize,
) -> Result<Workload, TableError> {
    check_name(w.name.get_ref()).map_err(|what| (w.name.span(), "name".into(), what))?;
    let programs = w.programs.get_ref().clone();
    if programs.is_empty() || programs.len() > MAX_PROGRAMS {
        let what = format!(
            "{} programs; a workload has 1 to {MAX_PROGRAMS}",
            programs.len()
        );
        return Err((w.programs.span(), "programs".into(), what));
    }
    let threads = match &w.threads {
        Some(t) => {
            check_threads(t.get_ref(), programs.len())
                .map_err(|(k, what)| (t.span(), format!("threads{k}"), what))?;
            t.get_ref().clone()
        }
        None => vec![1; programs.len()],
    };
    let homes_span = w.homes.span();
    let maps = w.homes.into_inner().0;
    check_maps(&maps, programs.len())
        .map_err(|(k, what)| (homes_span.clone(), format!("homes{k}"), what))?;
    Ok(Workload {
        name: w.name.into_inner(),
        programs,
        threads,
        maps,
        programs_line: line(w.programs.span()),
        homes_line: line(homes_span),
    })
}

/// The suite's name in results and reports.
pub const NAME: &str = "workloads";

fn error(path: &Path, line: Option<usize>, key: &str, what: impl Display) -> WorkloadsError {
    let mut place = String::new();
    if let Some(l) = line {
        place.push_str(&format!("line {l}: "));
    }
    if !key.is_empty() {
        place.push_str(&format!("{key}: "));
    }
    WorkloadsError {
        path: path.to_path_buf(),
        place,
        what: numasched_model::files::plain_types(&numasched_model::files::one_line(
            &what.to_string(),
        )),
    }
}

/// serde's key path without the private keys `Spanned` deserialises through.
fn key_name(p: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for seg in p.iter() {
        use serde_path_to_error::Segment;
        match seg {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if key.starts_with("$__") {
                    continue;
                }
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Unknown => {}
        }
    }
    out
}

/// Names of policies: known (the `--policy` names and the oracle), each once; the error
/// gives the index of the bad entry, or none when the list as a whole is wrong. Also
/// checks `eval --policies`.
pub fn check_policies(list: &[String]) -> Result<Vec<String>, (Option<usize>, String)> {
    if list.is_empty() {
        return Err((
            None,
            "the list is empty; leave it out for the default".into(),
        ));
    }
    for (i, p) in list.iter().enumerate() {
        if !numasched_policy::EVAL_ONLY.contains(&p.as_str())
            && !numasched_policy::NAMES.contains(&p.as_str())
        {
            let known = format!(
                "{}, {}",
                numasched_policy::NAMES.join(", "),
                numasched_policy::EVAL_ONLY.join(", ")
            );
            return Err((Some(i), format!("unknown policy '{p}' (known: {known})")));
        }
        if list[..i].contains(p) {
            return Err((Some(i), format!("'{p}' is listed twice")));
        }
    }
    Ok(list.to_vec())
}

/// A workload name is a column of the table and the CSV: short, no separators.
fn check_name(name: &str) -> Result<(), String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_.+".contains(c);
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(ok) {
        return Err(format!(
            "'{name}' is not a workload name: 1 to {MAX_NAME} letters, digits and - _ . +"
        ));
    }
    Ok(())
}

/// `threads`: one count per program, each 1 to [`MAX_THREADS`]; the error's key suffix
/// names the entry.
fn check_threads(threads: &[u32], programs: usize) -> Result<(), (String, String)> {
    if threads.len() != programs {
        let what = format!("{} entries for {programs} programs", threads.len());
        return Err((String::new(), what));
    }
    match threads.iter().position(|t| !(1..=MAX_THREADS).contains(t)) {
        Some(j) => Err((
            format!("[{j}]"),
            format!("{} threads; 1 to {MAX_THREADS}", threads[j]),
        )),
        None => Ok(()),
    }
}

/// Each map has a home per program, and no map is given twice (it would be the same
/// case twice).
fn check_maps(maps: &[Vec<NodeId>], programs: usize) -> Result<(), (String, String)> {
    let index = |m: usize| match maps.len() {
        1 => String::new(),
        _ => format!("[{m}]"),
    };
    let mut seen: BTreeMap<&[NodeId], usize> = BTreeMap::new();
    for (m, map) in maps.iter().enumerate() {
        if map.len() != programs {
            let what = format!("{} homes for {programs} programs", map.len());
            return Err((index(m), what));
        }
        if let Some(first) = seen.insert(map, m) {
            return Err((index(m), format!("the same map as homes[{first}]")));
        }
    }
    Ok(())
}

/// The allocation map as the results show it: the home node ids, one digit each as in
/// the published suites, dot-separated where an id has more than one digit.
pub fn map_label(map: &[NodeId]) -> String {
    let ids: Vec<String> = map.iter().map(|id| id.to_string()).collect();
    if map.iter().all(|&id| id < 10) {
        ids.concat()
    } else {
        ids.join(".")
    }
}

/// Up to twenty names, and how many more there are.
fn brief(names: &[&str]) -> String {
    const SHOWN: usize = 20;
    let mut s = names
        .iter()
        .take(SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::suites::ProgramFacts;
    use numasched_model::topology;

    fn facts(_: &Topology, p: &str) -> Option<ProgramFacts> {
        (p != "nosuch").then_some(ProgramFacts {
            mpki: 10.0,
            numa_penalty: 1.2,
            footprint_bytes: 1 << 30,
            bandwidth_gbps: 2.0,
            cache_reuse: 0.5,
        })
    }

    fn parse(text: &str) -> Result<Workloads, WorkloadsError> {
        Workloads::parse(text, Path::new("/etc/mixes.toml"))
    }

    const ONE: &str = "machine = \"nehalem-e5520\"\n\n[[workload]]\nname = \"w\"\n\
                       programs = [\"mcf\", \"lbm\"]\nhomes = [0, 1]\n";

    #[test]
    fn the_shipped_example_parses_into_a_case_per_workload_and_map() {
        let text = include_str!("../../../../docs/workloads-example.toml");
        let w = parse(text).expect("the example parses");
        assert_eq!(w.machine.as_deref(), Some("nehalem-e5520"));
        assert!(!w.migration);
        let topo = topology::machine("nehalem-e5520").unwrap();
        let s = w.suite(&topo, &facts, &[]).expect("suite");
        assert_eq!(s.name, "workloads");
        assert_eq!(s.machine, "nehalem-e5520");
        assert_eq!(Some(&s.policies), w.policies.as_ref());
        let keys: Vec<(&str, &str)> = s
            .cases
            .iter()
            .map(|c| (c.workload.as_str(), c.map.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                ("db-and-batch", "0011"),
                ("db-and-batch", "0000"),
                ("web", "1001")
            ]
        );
        let first = &s.cases[0].snapshot.processes;
        let threads: Vec<u32> = first.iter().map(|p| p.threads).collect();
        assert_eq!(threads, [1, 1, 2, 1]);
        assert_eq!(first[2].cpu_demand, 2.0);
        let homes: Vec<_> = first.iter().map(|p| p.home_node()).collect();
        assert_eq!(homes, [Some(0), Some(0), Some(1), Some(1)]);
        assert!(s.cases.iter().all(|c| c.suite == "workloads"));
    }

    #[test]
    fn migration_picks_the_default_policies_and_the_file_can_name_its_own() {
        let topo = topology::machine("nehalem-e5520").unwrap();
        let plain = parse(ONE).unwrap().suite(&topo, &facts, &[]).unwrap();
        assert_eq!(plain.policies, suites::names(NMASS_POLICIES));
        assert!(!plain.migration);
        let text = format!("migration = true\n{ONE}");
        let moving = parse(&text).unwrap().suite(&topo, &facts, &[]).unwrap();
        assert_eq!(moving.policies, suites::names(MIGRATE_POLICIES));
        assert!(moving.migration);
        let text = format!("policies = [\"linux\", \"oracle\"]\n{ONE}");
        let own = parse(&text).unwrap().suite(&topo, &facts, &[]).unwrap();
        assert_eq!(own.policies, ["linux", "oracle"]);
        // Without a machine the file still parses: --machine must then name one.
        let bare = parse(&ONE.replace("machine = \"nehalem-e5520\"", "")).unwrap();
        assert_eq!(bare.machine, None);
        let e = bare.machine_error("not given").to_string();
        assert_eq!(e, "/etc/mixes.toml: machine: not given");
    }

    #[test]
    fn profiles_are_found_beside_the_file() {
        let w = parse(&format!("profiles = \"mine.toml\"\n{ONE}")).unwrap();
        assert_eq!(w.profiles, Some(PathBuf::from("/etc/mine.toml")));
        let e = w.profiles_error("gone").to_string();
        assert_eq!(e, "/etc/mixes.toml: line 1: profiles: gone");
    }

    /// Issue 41: a file of more workloads than a run is bounded by is one line naming
    /// the limit; the limit itself is read (names checked for repeats in one pass).
    #[test]
    fn more_workloads_than_the_limit_are_refused_naming_it() {
        let file = |n: usize| {
            let mut text = String::from("machine = \"nehalem-e5520\"\n");
            for i in 0..n {
                text.push_str(&format!(
                    "[[workload]]\nname = \"w{i}\"\nprograms = [\"mcf\"]\nhomes = [0]\n"
                ));
            }
            text
        };
        let e = parse(&file(MAX_WORKLOADS + 1)).unwrap_err().to_string();
        assert!(
            e.contains("1001 [[workload]] tables, more than the 1000"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
        let w = parse(&file(MAX_WORKLOADS)).expect("the limit itself is fine");
        assert_eq!(w.workloads.len(), MAX_WORKLOADS);
    }

    /// Every mistake is one line with the file, the line and the key.
    #[test]
    fn bad_files_name_file_line_and_key() {
        let w = |body: &str| format!("machine = \"nehalem-e5520\"\n[[workload]]\n{body}");
        for (text, needle) in [
            (
                w("name = \"w\"\nprograms = [\"mcf\"\nhomes = [0]"),
                "line 5: missing comma",
            ),
            ("machine = \"x\"\n".to_string(), "no [[workload]] table"),
            (
                w("name = \"w\"\nprograms = [\"mcf\"]\nhomes = [0]\nthread = [1]"),
                "line 6: workload[0].thread: unknown field `thread`",
            ),
            (
                w("name = \"w\"\nhomes = [0]"),
                "workload[0]: missing field `programs`",
            ),
            (
                w("name = \"a b\"\nprograms = [\"mcf\"]\nhomes = [0]"),
                "line 3: workload[0].name: 'a b' is not a workload name",
            ),
            (
                w("name = \"w\"\nprograms = []\nhomes = []"),
                "line 4: workload[0].programs: 0 programs; a workload has 1 to 64",
            ),
            (
                w("name = \"w\"\nprograms = [\"mcf\", \"lbm\"]\nhomes = [0]"),
                "line 5: workload[0].homes: 1 homes for 2 programs",
            ),
            (
                w("name = \"w\"\nprograms = [\"mcf\"]\nhomes = [[0], [1, 1]]"),
                "line 5: workload[0].homes[1]: 2 homes for 1 programs",
            ),
            (
                w("name = \"w\"\nprograms = [\"mcf\"]\nhomes = [[0], [0]]"),
                "line 5: workload[0].homes[1]: the same map as homes[0]",
            ),
            (
                w("name = \"w\"\nprograms = [\"mcf\"]\nhomes = [-1]"),
                "line 5: workload[0].homes: -1 is not a node id",
            ),
            (
                w("name = \"w\"\nprograms = [\"mcf\"]\nhomes = [[0], 1]"),
                "not a mix of the two",
            ),
            (
                w("name = \"w\"\nprograms = [\"mcf\"]\nhomes = \"0\""),
                "workload[0].homes: expected a node id per program",
            ),
            (
                w("name = \"w\"\nprograms = [\"mcf\"]\nthreads = [0]\nhomes = [0]"),
                "line 5: workload[0].threads[0]: 0 threads; 1 to 1024",
            ),
            (
                w("name = \"w\"\nprograms = [\"mcf\"]\nthreads = [1, 1]\nhomes = [0]"),
                "line 5: workload[0].threads: 2 entries for 1 programs",
            ),
            (
                format!("{ONE}[[workload]]\nname = \"w\"\nprograms = [\"mcf\"]\nhomes = [0]\n"),
                "line 8: workload[1].name: 'w' is already the name of workload[0]",
            ),
            (
                format!("policies = [\"linux\", \"fast\"]\n{ONE}"),
                "line 1: policies[1]: unknown policy 'fast'",
            ),
            (
                format!("policies = [\"auto\", \"auto\"]\n{ONE}"),
                "policies[1]: 'auto' is listed twice",
            ),
            (
                format!("policies = []\n{ONE}"),
                "line 1: policies: the list is empty; leave it out for the default",
            ),
            (
                format!("migration = 1\n{ONE}"),
                "line 1: migration: invalid type: integer `1`, expected a boolean",
            ),
            (format!("speed = 1\n{ONE}"), "line 1: speed: unknown field"),
        ] {
            let e = parse(&text).expect_err(&text).to_string();
            assert!(e.starts_with("/etc/mixes.toml: "), "{text:?}: {e}");
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{text:?}: not one line: {e}");
        }
    }

    #[test]
    fn programs_and_nodes_are_checked_against_the_profiles_and_the_machine() {
        let topo = topology::machine("nehalem-e5520").unwrap();
        let text = ONE.replace("\"lbm\"", "\"nosuch\"");
        let e = parse(&text)
            .unwrap()
            .suite(&topo, &facts, &["mcf", "lbm"])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "/etc/mixes.toml: line 5: workload[0].programs[1]: unknown program 'nosuch' \
             (known: mcf, lbm)"
        );
        let text = ONE.replace("[0, 1]", "[[0, 0], [0, 2]]");
        let e = parse(&text)
            .unwrap()
            .suite(&topo, &facts, &[])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "/etc/mixes.toml: line 6: workload[0].homes[1][1]: node 2 does not exist on \
             nehalem-e5520 (nodes 0-1)"
        );
    }

    /// Homes are node ids, as `numasched topo` and `sim --homes` show them, not
    /// indices: on a machine with sparse ids they differ.
    #[test]
    fn homes_are_node_ids_on_sparse_machines() {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/sysfs/sparse-offline");
        let topo = topology::sysfs::read(&root).unwrap().with_name(THIS);
        let text = ONE.replace("[0, 1]", "[2, 3]");
        let s = parse(&text).unwrap().suite(&topo, &facts, &[]).unwrap();
        let homes: Vec<_> = s.cases[0]
            .snapshot
            .processes
            .iter()
            .map(|p| p.home_node())
            .collect();
        assert_eq!(homes, [Some(2), Some(3)]);
        assert_eq!(s.cases[0].map, "23");
        let e = parse(ONE).unwrap().suite(&topo, &facts, &[]).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("node 1 does not exist on this machine (nodes 0,2-3)"),
            "{e}"
        );
    }

    #[test]
    fn maps_with_two_digit_node_ids_are_dotted() {
        assert_eq!(map_label(&[0, 1, 1]), "011");
        assert_eq!(map_label(&[0, 12, 3]), "0.12.3");
    }

    #[test]
    fn known_programs_are_listed_briefly() {
        let many: Vec<String> = (0..25).map(|i| format!("p{i}")).collect();
        let names: Vec<&str> = many.iter().map(String::as_str).collect();
        let s = brief(&names);
        assert!(
            s.starts_with("p0, p1,") && s.ends_with("p19 and 5 more"),
            "{s}"
        );
    }
}
