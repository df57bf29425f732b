//! The pipeline's layering (docs/architecture.md). Between crates the build enforces
//! it: `numasched-model` (the shared vocabulary) names nothing above it,
//! `numasched-policy` only the model, `numasched-sim` the model and the policies,
//! `numasched-linux` only the model, `numasched-daemon` the Linux side and the
//! policies. These tests keep it so: each lower crate's manifest may list only the
//! dependencies below, so a policy or the simulator that gains procfs, a kernel call
//! or a database fails here; the policies' source stays pure (no files, clocks,
//! environment, processes or global state, which is what lets the daemon, `plan`, the
//! simulator and the tests share one implementation); and inside `numasched-linux` and
//! the `numasched` crate, which stage module may name which (`crate::<module>`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What each lower crate may depend on. The model, the policies and the simulator lack
/// anything from the Linux side (procfs, nix, perf-event2, rusqlite, `numasched-linux`)
/// on purpose; the Linux side lacks the policies and the simulator, the daemon lacks
/// the simulator, and no crate lists the `numasched` crate above them all.
const CRATE_DEPS: &[(&str, &[&str])] = &[
    (
        "crates/model",
        &[
            "libc",
            "proptest",
            "serde",
            "serde_json",
            "serde_path_to_error",
            "thiserror",
            "toml",
        ],
    ),
    ("crates/policy", &["numasched-model", "serde", "thiserror"]),
    (
        "crates/linux",
        &[
            "numasched-model",
            "libc",
            "nix",
            "perf-event2",
            "procfs",
            "rusqlite",
            "rustix",
            "serde",
            "serde_json",
            "thiserror",
            "toml",
        ],
    ),
    (
        "crates/daemon",
        &[
            "numasched-linux",
            "numasched-model",
            "numasched-policy",
            "anyhow",
            "caps",
            "glob",
            "humantime",
            "libc",
            "nix",
            "rustix",
            "serde",
            "serde_json",
            "signal-hook",
            "thiserror",
            "toml",
            "tracing",
            "tracing-subscriber",
        ],
    ),
    (
        "crates/sim",
        &[
            "numasched-model",
            "numasched-policy",
            "serde",
            "serde_json",
            "serde_path_to_error",
            "thiserror",
            "toml",
        ],
    ),
];

/// The stage modules of `numasched-linux` and of the `numasched` crate, and the names
/// the `numasched` crate gives the crates below (`crate::model`, `crate::daemon`, ...).
const MODULES: &[&str] = &[
    "observe",
    "characterise",
    "apply",
    "daemon",
    "sim",
    "cli",
    "workload",
    "flags",
    "model",
    "topology",
    "files",
    "policy",
];

/// What each stage module may name (`crate::<module>`): the model everywhere, and the
/// stages before it in the pipeline. Edges marked as debt point the wrong way and are
/// listed in docs/architecture.md; a new one fails here.
const ALLOWED: &[(&str, &[&str])] = &[
    ("observe", &["model", "topology", "files"]),
    ("characterise", &["model", "topology", "files", "observe"]),
    // apply opens a process's procfs entries through observe's handles.
    ("apply", &["model", "topology", "observe"]),
    ("flags", &[]),
    // The test loads share the flags' value parsers with cli, not cli itself.
    ("workload", &["model", "topology", "flags"]),
];

/// Names a policy must never use: I/O, clocks, the environment, other processes,
/// global mutable state, `unsafe`.
const IMPURE: &[&str] = &[
    "std::fs",
    "std::time",
    "Instant",
    "SystemTime",
    "std::env",
    "std::process",
    "std::net",
    "static mut",
    "thread_local",
    "OnceLock",
    "Mutex",
    "unsafe {",
    "unsafe fn",
    "unsafe impl",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A stage module's sources: in the `numasched` crate or in `numasched-linux`.
fn files_of(module: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for src in [repo().join("src"), repo().join("crates/linux/src")] {
        let file = src.join(format!("{module}.rs"));
        if file.is_file() {
            out.push(file);
        }
        sources(&src.join(module), &mut out);
    }
    assert!(!out.is_empty(), "no source for module {module}");
    out.sort();
    out
}

/// The modules a file names as `crate::<module>`.
fn named(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if MODULES.contains(&name.as_str()) {
            out.insert(name);
        }
    }
    out
}

#[test]
fn every_module_names_only_what_it_may() {
    let mut bad = Vec::new();
    for (module, allowed) in ALLOWED {
        for f in files_of(module) {
            let text = std::fs::read_to_string(&f).expect("source readable");
            for n in named(&text) {
                if n != *module && !allowed.contains(&n.as_str()) {
                    bad.push(format!("{} names crate::{n}", f.display()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "layering broken:\n{}", bad.join("\n"));
}

#[test]
fn policies_are_pure() {
    let mut bad = Vec::new();
    let mut files = Vec::new();
    sources(&repo().join("crates/policy/src"), &mut files);
    assert!(!files.is_empty(), "no policy source found");
    let root = std::fs::read_to_string(repo().join("crates/policy/src/lib.rs")).expect("lib.rs");
    assert!(
        root.contains("#![forbid(unsafe_code)]"),
        "policy crate allows unsafe"
    );
    for f in files {
        let text = std::fs::read_to_string(&f).expect("source readable");
        for word in IMPURE {
            if text.contains(word) {
                bad.push(format!("{}: {word}", f.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "a policy does I/O or keeps state:\n{}",
        bad.join("\n")
    );
}

/// The `[dependencies]` a manifest lists (not its dev-dependencies: test doubles).
fn dependencies(manifest: &str) -> BTreeSet<String> {
    let doc: toml::Table = manifest.parse().expect("manifest is TOML");
    doc.get("dependencies")
        .and_then(|d| d.as_table())
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn lower_crates_depend_only_on_what_is_below_them() {
    let mut bad = Vec::new();
    for (dir, allowed) in CRATE_DEPS {
        let path = repo().join(dir).join("Cargo.toml");
        let text = std::fs::read_to_string(&path).expect("manifest readable");
        for dep in dependencies(&text) {
            if !allowed.contains(&dep.as_str()) {
                bad.push(format!("{} depends on {dep}", path.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "a lower crate reaches up:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_workspace_builds_and_tests_every_layer() {
    let text = std::fs::read_to_string(repo().join("Cargo.toml")).expect("manifest readable");
    let doc: toml::Table = text.parse().expect("manifest is TOML");
    let list = |key: &str| -> Vec<String> {
        doc["workspace"][key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    for (dir, _) in CRATE_DEPS {
        assert!(
            list("members").iter().any(|m| m == dir),
            "{dir} not a member"
        );
        // Without this, `cargo test` at the top would skip the crate's own tests.
        assert!(
            list("default-members").iter().any(|m| m == dir),
            "{dir} not a default member"
        );
    }
}

/// Test doubles (the `testing` feature of the model and the Linux side) are for tests and
/// benchmarks: no crate's `[dependencies]` turns the feature on, so the release binary
/// has no fake kernel in it.
#[test]
fn test_doubles_stay_out_of_the_release_build() {
    let mut bad = Vec::new();
    for dir in [
        ".",
        "crates/model",
        "crates/policy",
        "crates/sim",
        "crates/linux",
    ] {
        let path = repo().join(dir).join("Cargo.toml");
        let text = std::fs::read_to_string(&path).expect("manifest readable");
        let doc: toml::Table = text.parse().expect("manifest is TOML");
        let Some(deps) = doc.get("dependencies").and_then(|d| d.as_table()) else {
            continue;
        };
        for (name, spec) in deps {
            let features = spec.get("features").and_then(|f| f.as_array());
            if features.is_some_and(|f| f.iter().any(|x| x.as_str() == Some("testing"))) {
                bad.push(format!("{}: {name} with feature testing", path.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "test doubles in a release build:\n{}",
        bad.join("\n")
    );
    for (file, module) in [
        ("crates/linux/src/apply/mod.rs", "pub mod fake;"),
        ("crates/linux/src/observe/mod.rs", "pub mod fakeproc;"),
        ("crates/model/src/lib.rs", "pub mod testkit;"),
    ] {
        let text = std::fs::read_to_string(repo().join(file)).expect("source readable");
        let gated = format!("#[cfg(any(test, feature = \"testing\"))]\n{module}");
        assert!(
            text.contains(&gated),
            "{file}: {module} is not behind the testing feature"
        );
    }
}

/// Clippy reads the nearest clippy.toml only: the policy crate's own (which forbids
/// I/O and clocks) must carry the workspace's limits too.
#[test]
fn the_policy_crate_keeps_the_workspace_limits() {
    let read = |p: &str| std::fs::read_to_string(repo().join(p)).expect("clippy.toml readable");
    let (top, policy) = (read("clippy.toml"), read("crates/policy/clippy.toml"));
    for line in top
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains('='))
    {
        assert!(
            policy.lines().any(|l| l == line),
            "policy clippy.toml lacks {line:?}"
        );
    }
    for must in [
        "disallowed-methods",
        "std::fs::read",
        "std::time::Instant::now",
    ] {
        assert!(policy.contains(must), "policy clippy.toml lacks {must}");
    }
}

#[test]
fn the_checks_can_fail() {
    let grown = "[dependencies]\nnumasched-model = { path = \"../model\" }\nprocfs = \"0.18\"\n\n[dev-dependencies]\nproptest = \"1\"\n";
    let deps: Vec<String> = dependencies(grown).into_iter().collect();
    assert_eq!(deps, ["numasched-model", "procfs"]);
    let text = "use crate::daemon::Engine;\nlet x = crate::topology::machine(\"a\");";
    let got: Vec<String> = named(text).into_iter().collect();
    assert_eq!(got, ["daemon", "topology"]);
    assert!(named("crate::topologyx and crate::daemons").is_empty());
}

/// The sibling modules a file's code names as `super::<name>` (or `crate::<name>` at
/// a crate root), outside its tests (where `super::` is the file itself).
fn siblings_named(file: &Path, text: &str) -> BTreeSet<String> {
    let dir = module_dir(file).expect("a file has a directory");
    let dir = dir.as_path();
    let at_root = dir.ends_with("src");
    // Code only: not its tests, and not comments (a doc link is no dependency).
    let code: String = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or(text)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let code = code.as_str();
    let mut out = BTreeSet::new();
    let prefixes: &[&str] = if at_root {
        &["super::", "crate::"]
    } else {
        &["super::"]
    };
    for prefix in prefixes {
        for (at, _) in code.match_indices(prefix) {
            let rest = &code[at + prefix.len()..];
            // `super::{a, b::C}` names a and b; `super::a::C` names a.
            let names: Vec<String> = match rest.strip_prefix('{') {
                Some(group) => top_level_items(group)
                    .into_iter()
                    .map(|item| leading_ident(item.trim_start()))
                    .collect(),
                None => vec![leading_ident(rest)],
            };
            for name in names {
                let is_sibling = dir.join(format!("{name}.rs")).is_file()
                    || dir.join(&name).join("mod.rs").is_file();
                if !name.is_empty() && is_sibling {
                    out.insert(name);
                }
            }
        }
    }
    out
}

fn leading_ident(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The comma-separated items of a `{...}` group whose opening brace is already
/// consumed, nested groups kept whole.
fn top_level_items(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
}

/// No modules of a crate name each other in a ring, of two or of more: a type both
/// need lives below both (daemon/clock.rs, observe/scan_config.rs, sim/process.rs
/// were made for this). Siblings are modules of one directory; a ring through a parent
/// (`mod.rs`, `lib.rs`) is not looked for, as a parent re-exports its children.
#[test]
fn no_modules_name_each_other_in_a_ring() {
    let mut files = Vec::new();
    sources(&repo().join("src"), &mut files);
    sources(&repo().join("crates"), &mut files);
    // Per directory, each module and the siblings it names.
    let mut graphs: BTreeMap<PathBuf, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for f in &files {
        let stem = module_name(f);
        if stem == "lib" || stem == "main" || f.ends_with("src/mod.rs") {
            continue;
        }
        let (Some(dir), false) = (module_dir(f), stem.is_empty()) else {
            continue;
        };
        let text = std::fs::read_to_string(f).expect("source readable");
        let named = siblings_named(f, &text);
        graphs
            .entry(dir)
            .or_default()
            .entry(stem)
            .or_default()
            .extend(named);
    }
    let mut bad = Vec::new();
    for (dir, graph) in &graphs {
        for ring in rings(graph) {
            bad.push(format!("{}: {}", dir.display(), ring.join(" -> ")));
        }
    }
    assert!(bad.is_empty(), "module rings:\n{}", bad.join("\n"));
}

/// A module's name: its file's stem, or its directory's for a `mod.rs`.
fn module_name(file: &Path) -> String {
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if stem == "mod" {
        let dir = file.parent().and_then(Path::file_name);
        dir.and_then(|d| d.to_str()).unwrap_or_default().to_string()
    } else {
        stem.to_string()
    }
}

/// The directory whose modules a module is a sibling of.
fn module_dir(file: &Path) -> Option<PathBuf> {
    let dir = file.parent()?;
    if file.file_stem().and_then(|s| s.to_str()) == Some("mod") {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

/// Each ring of the graph once, as the path from its least module back to it.
fn rings(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut found: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    let mut out = Vec::new();
    for start in graph.keys() {
        // Breadth first from `start`, keeping the way back, until `start` is named.
        let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start.as_str()]);
        let mut closing = None;
        while let Some(m) = queue.pop_front() {
            for next in graph.get(m).into_iter().flatten() {
                if next == start {
                    closing = Some(m);
                    break;
                }
                if !came_from.contains_key(next.as_str()) {
                    came_from.insert(next, m);
                    queue.push_back(next);
                }
            }
            if closing.is_some() {
                break;
            }
        }
        let Some(mut m) = closing else { continue };
        let mut ring = vec![m.to_string()];
        while m != start {
            m = came_from[m];
            ring.push(m.to_string());
        }
        ring.reverse();
        let members: BTreeSet<String> = ring.iter().cloned().collect();
        if found.insert(members) {
            ring.push(start.clone());
            out.push(ring);
        }
    }
    out
}

#[test]
fn a_ring_of_three_is_found_once() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", &["b"][..]),
        ("b", &["c"]),
        ("c", &["a"]),
        ("d", &["a"]),
    ]
    .into_iter()
    .map(|(m, n)| (m.to_string(), n.iter().map(|s| s.to_string()).collect()))
    .collect();
    assert_eq!(rings(&graph), vec![vec!["a", "b", "c", "a"]]);
    let items = top_level_items("a, b::{C, D}, e}; use x;");
    assert_eq!(items, vec!["a", " b::{C, D}", " e"]);
}
