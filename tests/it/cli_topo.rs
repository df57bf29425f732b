//! `numasched topo` end to end: the JSON contract, sysfs fixtures, and one-line errors
//! that name what is wrong.

use serde_json::Value;

use crate::common;
use common::numasched;

fn topo_json(args: &[&str]) -> Value {
    let mut all = vec!["topo", "--json"];
    all.extend_from_slice(args);
    let (code, out, err) = numasched(&all);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).expect("json")
}

fn ids(v: &Value) -> Vec<u64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_u64().expect("number"))
        .collect()
}

#[test]
fn preset_json_follows_the_contract() {
    let v = topo_json(&["--machine", "nehalem-e5520"]);
    let nodes = v["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 2);
    let n0 = &nodes[0];
    assert_eq!(n0["id"], 0);
    assert_eq!(ids(&n0["cpus"]), vec![0, 1, 2, 3]);
    assert_eq!(n0["memory_bytes"], 6442450944u64);
    assert_eq!(ids(&n0["distances"]), vec![10, 21]);
    let llcs = n0["llcs"].as_array().expect("llcs");
    assert_eq!(llcs.len(), 1);
    assert_eq!(ids(&llcs[0]["cpus"]), vec![0, 1, 2, 3]);
    assert_eq!(llcs[0]["size_bytes"], 8388608);
    assert_eq!(nodes[1]["id"], 1);
    assert_eq!(ids(&nodes[1]["distances"]), vec![21, 10]);
}

#[test]
fn every_preset_and_a_spec_string_print() {
    for m in numasched::topology::presets::NAMES
        .iter()
        .copied()
        .chain(["2n:2l:2c:2t"])
    {
        let v = topo_json(&["--machine", m]);
        assert!(!v["nodes"].as_array().expect("nodes").is_empty(), "{m}");
        let (code, out, err) = numasched(&["topo", "--machine", m]);
        assert_eq!(code, 0, "{m}: {err}");
        assert!(out.contains("distances:"), "{m}: {out}");
    }
}

#[test]
fn json_reads_back_as_the_same_machine() {
    let v = topo_json(&["--machine", "epyc-7742-2s"]);
    let t: numasched::topology::Topology = serde_json::from_value(v).expect("topology");
    assert_eq!(Some(t), numasched::topology::presets::get("epyc-7742-2s"));
}

#[test]
fn sysfs_fixture_json_and_table() {
    let root = "tests/fixtures/sysfs/sparse-offline";
    let v = topo_json(&["--sysfs-root", root]);
    let nodes = v["nodes"].as_array().expect("nodes");
    let node_ids: Vec<u64> = nodes.iter().map(|n| n["id"].as_u64().unwrap()).collect();
    assert_eq!(node_ids, vec![0, 2, 3]);
    assert_eq!(ids(&nodes[0]["cpus"]), vec![0, 1, 2]);
    assert!(nodes[2]["llcs"].as_array().unwrap().is_empty());

    let (code, out, err) = numasched(&["topo", "--sysfs-root", root]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("sysfs at {root}: 3 nodes, 5 CPUs")),
        "{out}"
    );
    let row = out
        .lines()
        .find(|l| l.starts_with("2 "))
        .expect("node 2 row");
    assert!(row.contains("4-5") && row.contains("4 MiB"), "{row}");
}

#[test]
fn epyc_fixture_has_two_ccx_per_node() {
    let v = topo_json(&["--sysfs-root", "tests/fixtures/sysfs/epyc-nps4-small"]);
    let n1 = &v["nodes"][1];
    assert_eq!(ids(&n1["distances"]), vec![12, 10, 32, 32]);
    let llcs = n1["llcs"].as_array().expect("llcs");
    assert_eq!(llcs.len(), 2);
    assert_eq!(ids(&llcs[0]["cpus"]), vec![4, 5, 20, 21]);
    assert_eq!(llcs[0]["size_bytes"], 16 << 20);
}

#[test]
fn the_real_machine_prints() {
    if !std::path::Path::new("/sys/devices/system/cpu/online").exists() {
        return;
    }
    let (code, out, err) = numasched(&["topo"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("sysfs at /sys: "), "{out}");
}

/// Runs a failing invocation and checks the error contract: exit 1, one line, no panic,
/// and the line names what is wrong.
fn fails_with(args: &[&str], needles: &[&str]) {
    let (code, out, err) = numasched(args);
    assert_eq!(code, 1, "{args:?}: {err}");
    assert!(out.is_empty(), "{args:?}: {out}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(err.starts_with("numasched: "), "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: missing '{n}' in {err}");
    }
}

#[test]
fn unknown_preset_is_one_line() {
    fails_with(
        &["topo", "--machine", "pentium-pro"],
        &["pentium-pro", "epyc-7742-2s"],
    );
}

#[test]
fn malformed_spec_is_one_line() {
    fails_with(
        &["topo", "--machine", "4n:2x:4c:2t"],
        &["4n:2x:4c:2t", "field 2"],
    );
}

#[test]
fn odd_sysfs_files_are_one_line_naming_the_file() {
    let odd = "tests/fixtures/sysfs/odd";
    for (case, file, what) in [
        ("distance-not-a-number", "node/node1/distance", "'1O'"),
        ("cache-size-banana", "cpu/cpu1/cache/index3/size", "banana"),
        ("meminfo-no-memtotal", "node/node1/meminfo", "MemTotal"),
        ("cpu-online-missing", "cpu/online", "No such file"),
    ] {
        let root = format!("{odd}/{case}");
        let file = format!("{root}/devices/system/{file}");
        fails_with(&["topo", "--sysfs-root", &root], &[&file, what]);
        fails_with(&["topo", "--json", "--sysfs-root", &root], &[&file, what]);
    }
}

/// A root that is missing, or a file, is named itself, not the first file under it.
#[test]
fn a_missing_sysfs_root_names_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let missing = missing.to_str().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let file = file.to_str().unwrap();
    for (root, what) in [(missing, "no such directory"), (file, "not a directory")] {
        let needle = format!("{root}: {what} (the sysfs root)");
        fails_with(&["topo", "--sysfs-root", root], &[&needle]);
        fails_with(
            &["topo", "--machine", "this", "--sysfs-root", root],
            &[&needle],
        );
        fails_with(
            &[
                "sim",
                "--machine",
                "this",
                "--sysfs-root",
                root,
                "--programs",
                "mcf",
                "--homes",
                "0",
            ],
            &[&needle],
        );
    }
}

/// A root is where `this` is read; with a preset or spec string it would be ignored,
/// so it is refused, as `sim` and `eval` refuse it.
#[test]
fn sysfs_root_with_a_preset_is_one_line() {
    fails_with(
        &["topo", "--machine", "nehalem-e5520", "--sysfs-root", "/sys"],
        &[
            "--sysfs-root applies to the machine 'this' only",
            "nehalem-e5520",
        ],
    );
}

/// `--machine this` means what it means to `sim` and `eval`: this machine from sysfs,
/// under --sysfs-root when given; the same output as no --machine.
#[test]
fn machine_this_is_the_sysfs_machine() {
    let root = "tests/fixtures/sysfs/sparse-offline";
    let plain = topo_json(&["--sysfs-root", root]);
    let this = topo_json(&["--machine", "this", "--sysfs-root", root]);
    assert_eq!(this, plain);
    let (code, out, err) = numasched(&["topo", "--machine", "this", "--sysfs-root", root]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("sysfs at {root}: 3 nodes, 5 CPUs")),
        "{out}"
    );
    // Read errors name the file, as without --machine.
    let odd = "tests/fixtures/sysfs/odd/cpu-online-missing";
    fails_with(
        &["topo", "--machine", "this", "--sysfs-root", odd],
        &[&format!("{odd}/devices/system/cpu/online")],
    );
    if std::path::Path::new("/sys/devices/system/cpu/online").exists() {
        let (code, out, err) = numasched(&["topo", "--machine", "this"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.starts_with("sysfs at /sys: "), "{out}");
    }
}
