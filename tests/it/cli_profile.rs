//! `numasched profile` end to end: the binary against a store in a temp dir (`--db`),
//! the JSON listing, one-line errors, and export/import round trips.

use std::path::Path;

use crate::common;
use common::numasched;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// `updated` is the wall clock of each write; everything else must survive a round trip.
fn strip_updated(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.remove("updated");
            m.values_mut().for_each(strip_updated);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_updated),
        _ => {}
    }
}

fn strip(mut v: serde_json::Value) -> serde_json::Value {
    strip_updated(&mut v);
    v
}

fn list_json(db: &str) -> serde_json::Value {
    let (code, out, err) = numasched(&["profile", "list", "--json", "--db", db]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("json")
}

#[test]
fn set_then_list_json_shows_it_with_its_origin() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let (code, _, err) = numasched(&[
        "profile",
        "set",
        "mcf",
        "--mpki",
        "30",
        "--numa-penalty",
        "1.15",
        "--cache-reuse",
        "0.9",
        "--bandwidth-gbps",
        "3.5",
        "--db",
        s(&db),
    ]);
    assert_eq!(code, 0, "{err}");
    let v = list_json(s(&db));
    let progs = v.as_array().expect("array");
    assert_eq!(progs.len(), 1);
    assert_eq!(progs[0]["program"], "mcf");
    assert_eq!(progs[0]["mpki"]["given"]["value"], 30.0);
    assert_eq!(progs[0]["numa_penalty"]["given"]["value"], 1.15);
    assert_eq!(progs[0]["cache_reuse"]["given"]["value"], 0.9);
    assert_eq!(progs[0]["bandwidth_gbps"]["given"]["value"], 3.5);
    // --db also works before the subcommand, and the table names the program.
    let (code, out, err) = numasched(&["profile", "--db", s(&db), "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("mcf") && out.contains("(given)"), "{out}");
}

/// A name longer than the kernel keeps of a command name is stored (eval may use it)
/// with one warning line saying what the daemon would look for; a short one is silent.
#[test]
fn a_name_no_process_can_have_is_stored_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let (code, _, err) = numasched(&[
        "profile",
        "set",
        "my-long-program-name",
        "--mpki",
        "3",
        "--db",
        s(&db),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("numasched: warning: 'my-long-program-name' is 20 bytes")
            && err.contains("would look for 'my-long-program'"),
        "{err}"
    );
    assert_eq!(list_json(s(&db))[0]["program"], "my-long-program-name");
    let (code, _, err) = numasched(&[
        "profile",
        "set",
        "my-long-program",
        "--mpki",
        "3",
        "--db",
        s(&db),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn invalid_set_is_one_line_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    for (flag, value, field) in [
        ("--numa-penalty", "0.8", "numa_penalty"),
        ("--cache-reuse", "1.2", "cache_reuse"),
        ("--bandwidth-gbps", "-1", "bandwidth_gbps"),
        ("--numa-penalty", "NaN", "numa_penalty"),
    ] {
        let (code, _, err) = numasched(&[
            "profile",
            "set",
            "x",
            "--mpki",
            "1",
            flag,
            value,
            "--db",
            s(&db),
        ]);
        assert_eq!(code, 1, "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(field), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(!db.exists());
}

#[test]
fn import_with_a_bad_field_names_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let file = dir.path().join("bad.json");
    std::fs::write(
        &file,
        r#"{"profiles":[{"name":"a","mpki":1},{"name":"b","mpki":2,"bandwidth_gbps":"fast"}]}"#,
    )
    .unwrap();
    let (code, out, err) = numasched(&["profile", "import", s(&file), "--db", s(&db)]);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty());
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(s(&file)), "{err}");
    assert!(err.contains("profiles[1].bandwidth_gbps"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!db.exists(), "a failed import creates no store");
}

#[test]
fn reading_commands_create_nothing_and_name_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("typo.db");
    for cmd in ["list", "export"] {
        let (code, out, err) = numasched(&["profile", "--db", s(&db), cmd]);
        assert_eq!(code, 1, "{cmd}: {err}");
        assert!(out.is_empty(), "{cmd}: {out}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains("no profile store here"), "{err}");
    }
    let (code, _, err) = numasched(&["profile", "--db", "/nonexistent/dir/p.db", "list"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("/nonexistent/dir: no such directory"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "nothing created: {left:?}");
    // An empty file is an empty store: read, not written (it became a 12 KiB store).
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, "").unwrap();
    for cmd in ["list", "export"] {
        let (code, _, err) = numasched(&["profile", "--db", s(&empty), cmd]);
        assert_eq!(code, 0, "{cmd}: {err}");
        assert_eq!(
            std::fs::metadata(&empty).unwrap().len(),
            0,
            "{cmd} wrote the store"
        );
    }
    let (_, out, _) = numasched(&["profile", "--db", s(&empty), "list"]);
    assert!(out.contains("(no programs stored)"), "{out}");
}

#[test]
fn a_corrupt_store_is_one_line_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let junk = "not a database\n".repeat(200);
    std::fs::write(&db, &junk).unwrap();
    let (code, _, err) = numasched(&["profile", "list", "--db", s(&db)]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(s(&db)) && err.contains("corrupt"), "{err}");
    assert_eq!(std::fs::read_to_string(&db).unwrap(), junk);
}

#[test]
fn export_then_import_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    for args in [
        &["lbm", "--mpki", "22", "--bandwidth-gbps", "9.5"][..],
        &[
            "mcf",
            "--mpki",
            "30",
            "--numa-penalty",
            "1.15",
            "--cache-reuse",
            "0.75",
        ][..],
        &["gcc", "--mpki", "1.5"][..],
    ] {
        let mut full = vec!["profile", "set"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["--db", s(&a)]);
        let (code, _, err) = numasched(&full);
        assert_eq!(code, 0, "{err}");
    }
    let original = strip(list_json(s(&a)));
    for name in ["out.toml", "out.json"] {
        let file = dir.path().join(name);
        let (code, _, err) = numasched(&["profile", "export", s(&file), "--db", s(&a)]);
        assert_eq!(code, 0, "{err}");
        let b = dir.path().join(format!("{name}.db"));
        let (code, _, err) = numasched(&["profile", "import", s(&file), "--db", s(&b)]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(strip(list_json(s(&b))), original, "{name}");
    }
    // To stdout: JSON the simulator's loader accepts.
    let (code, out, err) = numasched(&["profile", "export", "--db", s(&a)]);
    assert_eq!(code, 0, "{err}");
    let file = dir.path().join("stdout.json");
    std::fs::write(&file, out).unwrap();
    let set = numasched::model::profile::ProfileSet::load(&file).expect("loads");
    assert_eq!(set.len(), 3);
}

/// Writers leave the copy a damaged store can be recovered from; readers change
/// nothing on disk, not even the copy.
#[test]
fn set_leaves_a_copy_and_list_and_export_touch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let bak = dir.path().join("p.db.bak");
    let (code, _, err) = numasched(&["profile", "set", "mcf", "--mpki", "30", "--db", s(&db)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !bak.exists(),
        "the store was empty when opened: nothing to copy"
    );
    let (code, _, err) = numasched(&["profile", "set", "lbm", "--mpki", "40", "--db", s(&db)]);
    assert_eq!(code, 0, "{err}");
    let copy = std::fs::read(&bak).expect("a copy after a healthy open with content");
    std::fs::remove_file(&bak).unwrap();
    let out = dir.path().join("out.json");
    for args in [
        vec!["profile", "list", "--db", s(&db)],
        vec!["profile", "export", s(&out), "--db", s(&db)],
    ] {
        let (code, _, err) = numasched(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(!bak.exists(), "{args:?} wrote a copy");
    }
    assert!(!copy.is_empty());
}

#[test]
fn builtin_profiles_are_listed_and_load_into_the_store() {
    let (code, out, err) = numasched(&["profile", "builtin"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().any(|l| l.starts_with("mcf ")), "{out}");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let (code, _, err) = numasched(&["profile", "--db", s(&db), "builtin", "--load"]);
    assert_eq!(code, 0, "{err}");
    let listed = list_json(s(&db));
    let mcf = listed
        .as_array()
        .expect("list")
        .iter()
        .find(|p| p["program"] == "mcf")
        .expect("mcf loaded");
    assert_eq!(mcf["mpki"]["given"]["value"], 30.0, "{mcf}");
}

#[test]
fn loading_the_builtins_keeps_numbers_the_user_gave_unless_told_to_replace() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let args = [
        "profile",
        "--db",
        s(&db),
        "set",
        "mcf",
        "--numa-penalty",
        "1.2",
    ];
    assert_eq!(numasched(&args).0, 0);
    let penalty = |program: &str| {
        let listed = list_json(s(&db));
        let p = listed
            .as_array()
            .expect("list")
            .iter()
            .find(|p| p["program"] == program);
        p.map(|p| p["numa_penalty"]["given"]["value"].clone())
    };
    let (code, _, err) = numasched(&["profile", "--db", s(&db), "builtin", "--load"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("kept the numbers you gave for mcf"), "{err}");
    assert_eq!(penalty("mcf"), Some(serde_json::json!(1.2)));
    assert_eq!(
        penalty("lbm"),
        Some(serde_json::json!(1.3)),
        "the others load"
    );
    let load = ["profile", "--db", s(&db), "builtin", "--load", "--replace"];
    let (code, _, err) = numasched(&load);
    assert_eq!(code, 0, "{err}");
    assert_eq!(penalty("mcf"), Some(serde_json::json!(1.15)));
}

#[test]
fn one_value_is_set_alone_and_the_others_stay() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let set = |args: &[&str]| {
        let mut v = vec!["profile", "--db", s(&db), "set", "mcf"];
        v.extend_from_slice(args);
        numasched(&v)
    };
    assert_eq!(set(&["--numa-penalty", "1.2"]).0, 0);
    assert_eq!(set(&["--mpki", "30"]).0, 0);
    let listed = list_json(s(&db));
    assert_eq!(listed[0]["numa_penalty"]["given"]["value"], 1.2, "{listed}");
    assert_eq!(listed[0]["mpki"]["given"]["value"], 30.0, "{listed}");
    let (code, _, err) = set(&[]);
    assert_eq!(code, 1);
    assert!(err.contains("name at least one of --mpki"), "{err}");
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/sysfs/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `profile measure` refusals, each one line naming what is wrong. The runs that get
/// as far as starting the command use the 2-node fixture's node 0 (CPUs 0-3, of which
/// this machine has at least CPU 0) with memory bound to node 0, which every machine
/// has; a real remote run needs a NUMA machine (the QEMU scenario `measure`).
#[test]
fn measure_refuses_what_it_cannot_measure_and_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let measure = |root: &str, extra: &[&str]| {
        let mut args = vec!["profile", "measure", "--db", s(&db), "--sysfs-root", root];
        args.extend_from_slice(extra);
        numasched(&args)
    };
    let one = fixture("no-numa");
    let (code, _, err) = measure(&one, &["--", "true"]);
    assert_eq!(code, 1);
    assert!(err.contains("no NUMA penalty to measure"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let sparse = fixture("sparse-offline");
    let (code, _, err) = measure(&sparse, &["--local", "3", "--", "true"]);
    assert_eq!(code, 1);
    assert!(err.contains("--local 3: node 3 has no CPUs"), "{err}");

    let two = fixture("nehalem-2n");
    let (code, _, err) = measure(
        &two,
        &["--", "sh", "-c", "echo first >&2; echo boom >&2; exit 3"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("exited with status 3"), "{err}");
    assert!(err.contains("nothing recorded"), "{err}");
    assert!(err.contains("boom"), "its stderr's tail is shown: {err}");

    let (code, _, err) = measure(&two, &["--", "true"]);
    assert_eq!(code, 1);
    assert!(err.contains("too short to measure"), "{err}");
    assert!(err.contains("run it for longer"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let v = list_json(s(&db));
    assert_eq!(v, serde_json::json!([]), "nothing recorded");
}

#[test]
fn a_name_over_255_bytes_is_refused_by_set_and_import_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let long = "y".repeat(256);
    let (code, _, err) = numasched(&["profile", "set", &long, "--mpki", "1", "--db", s(&db)]);
    assert_eq!(code, 1);
    assert!(err.contains("more than the 255"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let file = dir.path().join("long.toml");
    std::fs::write(&file, format!("[[profiles]]\nname = '{long}'\nmpki = 1\n")).unwrap();
    let (code, _, err) = numasched(&["profile", "import", s(&file), "--db", s(&db)]);
    assert_eq!(code, 1);
    assert!(err.contains("more than the 255"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// Issue 41: a file over the limit is one line naming it and creates nothing; a large
/// file under it imports twice (the second replacing the first: each program was
/// looked up with a scan of the whole store, which took minutes), and its warnings
/// about names no process has are a few lines and a count, not one per profile.
#[test]
fn a_large_import_is_bounded_and_its_warnings_counted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let file = |n: usize| {
        let entries: Vec<String> = (0..n)
            .map(|i| format!(r#"{{"name":"a-long-program-name-{i}","mpki":1}}"#))
            .collect();
        let path = dir.path().join(format!("{n}.json"));
        std::fs::write(&path, format!(r#"{{"profiles":[{}]}}"#, entries.join(","))).unwrap();
        path
    };
    let over = file(100_001);
    let (code, _, err) = numasched(&["profile", "import", s(&over), "--db", s(&db)]);
    assert_eq!(code, 1);
    assert!(err.contains("more than 100000 profiles"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!db.exists(), "a refused file creates no store");
    // As many as are taken: imported in under 200 MB, and again over them.
    let most = file(100_000);
    let big = dir.path().join("big.db");
    for _ in 0..2 {
        let (code, kib) =
            common::numasched_peak_kib(&["profile", "import", s(&most), "--db", s(&big)]);
        assert_eq!(code, 0);
        assert!(kib < 200 * 1024, "peak {kib} KiB");
    }

    let many = file(20_000);
    for round in 0..2 {
        let (code, _, err) = numasched(&["profile", "import", s(&many), "--db", s(&db)]);
        assert_eq!(code, 0, "{err}");
        let replaced = if round == 0 { 0 } else { 20_000 };
        assert!(
            err.contains(&format!(
                "imported 20000 profiles from {} ({replaced} of them",
                s(&many)
            )),
            "{err}"
        );
        let warnings = err.lines().filter(|l| l.contains("warning:")).count();
        assert_eq!(warnings, 11, "ten and a count: {err}");
        assert!(err.contains("and 19990 more profiles"), "{err}");
    }
}
