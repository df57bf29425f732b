//! The sysfs reader against checked-in machine shapes (`tests/fixtures/sysfs`, made by
//! `generate.py` there) and against this machine's own `/sys`.

use std::path::{Path, PathBuf};

use numasched::topology::{sysfs, Topology, TopologyError};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name)
}

fn read(name: &str) -> Topology {
    sysfs::read(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn llc_cpus(t: &Topology) -> Vec<Vec<u32>> {
    t.llcs().iter().map(|l| l.cpus.to_vec()).collect()
}

#[test]
fn nehalem_two_nodes_one_l3_each() {
    let t = read("nehalem-2n");
    assert_eq!(t.nodes().len(), 2);
    assert_eq!(t.nodes()[0].cpus, vec![0, 1, 2, 3]);
    assert_eq!(t.nodes()[1].cpus, vec![4, 5, 6, 7]);
    assert_eq!(llc_cpus(&t), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
    assert!(t.llcs().iter().all(|l| l.size_bytes == 8 << 20));
    assert_eq!(t.cores().len(), 8);
    assert!(!t.has_smt());
    assert_eq!(t.nodes()[0].memory_bytes, 6 << 30);
    assert_eq!(t.distance(0, 1), 21);
    assert_eq!(
        t.llcs().iter().map(|l| l.package).collect::<Vec<_>>(),
        vec![0, 1]
    );
}

#[test]
fn epyc_nodes_hold_two_ccx_with_smt() {
    let t = read("epyc-nps4-small");
    assert_eq!(t.nodes().len(), 4);
    assert_eq!(t.llcs().len(), 8);
    assert_eq!(t.cores().len(), 16);
    assert_eq!(t.num_cpus(), 32);
    assert!(t.has_smt());
    assert_eq!(t.nodes()[1].cpus, vec![4, 5, 6, 7, 20, 21, 22, 23]);
    let node1: Vec<_> = t.llcs()[t.nodes()[1].llcs.clone()]
        .iter()
        .map(|l| l.cpus.clone())
        .collect();
    assert_eq!(node1, vec![vec![4, 5, 20, 21], vec![6, 7, 22, 23]]);
    assert!(t.llcs().iter().all(|l| l.size_bytes == 16 << 20));
    assert_eq!(t.cores()[t.cpu(21).unwrap().core].cpus, vec![5, 21]);
    assert_eq!(t.nodes()[0].distances, vec![10, 12, 32, 32]);
    let packages: Vec<u32> = t.llcs().iter().map(|l| l.package).collect();
    assert_eq!(packages, vec![0, 0, 0, 0, 1, 1, 1, 1]);
    assert_eq!(t.total_memory(), 32 << 30);
}

#[test]
fn sparse_ids_offline_cpu_and_memory_only_node() {
    let t = read("sparse-offline");
    let ids: Vec<u32> = t.nodes().iter().map(|n| n.id).collect();
    assert_eq!(ids, vec![0, 2, 3]);
    // cpu3 is offline: listed by node0 and its L3 but absent from the machine.
    assert!(t.cpu(3).is_none());
    assert_eq!(t.nodes()[0].cpus, vec![0, 1, 2]);
    assert_eq!(llc_cpus(&t), vec![vec![0, 1, 2], vec![4, 5]]);
    // The offline CPU does not take a share of the cache.
    assert_eq!(t.llcs()[0].size_bytes, 8 << 20);
    let mem_only = &t.nodes()[2];
    assert!(mem_only.cpus.is_empty() && mem_only.llcs.is_empty());
    assert_eq!(mem_only.memory_bytes, 16 << 30);
    assert_eq!(t.cpu_nodes().collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(t.distance(0, 2), 14);
    assert_eq!(t.nodes()[t.cpu(5).unwrap().node].id, 2);
}

#[test]
fn an_llc_spanning_two_nodes_is_split_by_node() {
    let t = read("snc2-spanning-llc");
    assert_eq!(llc_cpus(&t), vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]]);
    assert!(t.llcs().iter().all(|l| l.size_bytes == 15 << 20));
    assert!(t.llcs().iter().all(|l| l.package == 0));
    assert_eq!(t.cores()[t.cpu(6).unwrap().core].cpus, vec![2, 6]);
}

#[test]
fn no_node_directory_means_one_node_and_no_cache_means_core_sized_llcs() {
    let t = read("no-numa");
    assert_eq!(t.nodes().len(), 1);
    assert_eq!(t.nodes()[0].id, 0);
    assert_eq!(t.nodes()[0].distances, vec![10]);
    assert_eq!(t.nodes()[0].memory_bytes, 0);
    assert_eq!(llc_cpus(&t), vec![vec![0, 2], vec![1, 3]]);
    assert!(t.llcs().iter().all(|l| l.size_bytes == 0));
    assert!(t.has_smt());
}

#[test]
fn serialised_form_reads_back_equal() {
    for name in ["epyc-nps4-small", "sparse-offline", "no-numa"] {
        let t = read(name);
        let back: Topology = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(t, back, "{name}");
    }
}

/// Each broken fixture must fail with a one-line error naming the broken file and what
/// is wrong with it.
#[test]
fn odd_files_name_the_file_and_the_problem() {
    let cases = [
        ("distance-not-a-number", "node/node1/distance", "'1O'"),
        ("distance-short-row", "node/node0/distance", "expected 2"),
        ("distance-missing", "node/node1/distance", "No such file"),
        ("cache-size-banana", "cpu1/cache/index3/size", "banana"),
        ("cache-type-unknown", "cpu0/cache/index2/type", "Sideways"),
        (
            "cache-level-not-a-number",
            "cpu0/cache/index3/level",
            "three",
        ),
        ("node-cpulist-bad-range", "node/node0/cpulist", "0-x"),
        ("meminfo-no-memtotal", "node/node1/meminfo", "MemTotal"),
        ("meminfo-not-a-number", "node/node0/meminfo", "lots"),
        (
            "siblings-without-self",
            "cpu0/topology/thread_siblings_list",
            "cpu0 itself",
        ),
        (
            "package-not-a-number",
            "cpu1/topology/physical_package_id",
            "'one'",
        ),
        ("cpu-online-missing", "system/cpu/online", "No such file"),
        ("cpu-in-no-node", "system/cpu/online", "CPU 1"),
        ("cpu-in-two-nodes", "node/node1/cpulist", "CPU 0"),
        (
            "llc-lists-disagree",
            "cpu0/cache/index3/shared_cpu_list",
            "cpu1's is 1",
        ),
    ];
    for (case, file, needle) in cases {
        let root = fixture(&format!("odd/{case}"));
        let err = match sysfs::read(&root) {
            Ok(_) => panic!("{case}: read succeeded"),
            Err(e) => e,
        };
        assert!(
            matches!(err, TopologyError::Io { .. } | TopologyError::Parse { .. }),
            "{case}: {err:?}"
        );
        let msg = err.to_string();
        assert!(!msg.contains('\n'), "{case}: {msg}");
        assert!(msg.contains(&root.display().to_string()), "{case}: {msg}");
        assert!(msg.contains(file), "{case}: {msg}");
        assert!(msg.contains(needle), "{case}: {msg}");
    }
}

#[test]
fn a_missing_root_is_an_io_error() {
    let err = sysfs::read(Path::new("/nonexistent/sysfs")).unwrap_err();
    assert!(err
        .to_string()
        .starts_with("/nonexistent/sysfs/devices/system/cpu/online"));
}

/// This machine's real sysfs: its shape differs between hosts, so only check that it
/// reads and is plausible.
#[test]
fn reads_the_real_sys() {
    if !Path::new("/sys/devices/system/cpu/online").exists() {
        eprintln!("no /sys here; skipping");
        return;
    }
    let t = sysfs::read(Path::new("/sys")).unwrap();
    assert!(t.num_cpus() >= 1);
    assert!(!t.nodes().is_empty());
    assert!(t
        .cpus()
        .iter()
        .all(|c| t.nodes()[c.node].cpus.contains(c.id)));
}
