//! The pipeline's layering, checked on the source until the build can enforce it with
//! crates (docs/architecture.md): which module may name which, and that policies stay
//! pure functions (no files, clocks, environment, processes or global state), which
//! is what lets the daemon, `plan`, the simulator and the tests share one
//! implementation.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const MODULES: &[&str] = &[
    "topology",
    "observe",
    "characterise",
    "policy",
    "apply",
    "daemon",
    "sim",
    "cli",
    "workload",
    "files",
];

/// What each module may name (`crate::<module>`). Edges marked as debt point the wrong
/// way and are listed in docs/architecture.md; a new one fails here.
const ALLOWED: &[(&str, &[&str])] = &[
    ("topology", &[]),
    ("files", &[]),
    // Debt: its arguments are cli's types.
    ("workload", &["topology", "cli"]),
    // Debt: `Character` lives in characterise; snapshot files are read with `files`.
    ("policy", &["topology", "characterise", "files"]),
    // Debt: the profile interchange format is the simulator's, and its regression is
    // characterise's.
    ("sim", &["topology", "policy", "characterise", "files"]),
    // Debt: `Snapshot` and `Process` live in policy.
    ("observe", &["topology", "policy", "files"]),
    (
        "characterise",
        &["topology", "observe", "policy", "sim", "files"],
    ),
    // Debt: apply reads procfs through observe's handles.
    ("apply", &["topology", "observe", "policy"]),
    (
        "daemon",
        &[
            "topology",
            "observe",
            "characterise",
            "policy",
            "apply",
            "files",
            "workload",
        ],
    ),
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
    "unsafe",
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

fn files_of(module: &str) -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let file = src.join(format!("{module}.rs"));
    if file.is_file() {
        out.push(file);
    }
    sources(&src.join(module), &mut out);
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
    for f in files_of("policy") {
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

#[test]
fn the_checks_can_fail() {
    let text = "use crate::daemon::Engine;\nlet x = crate::topology::machine(\"a\");";
    let got: Vec<String> = named(text).into_iter().collect();
    assert_eq!(got, ["daemon", "topology"]);
    assert!(named("crate::topologyx and crate::daemons").is_empty());
}
