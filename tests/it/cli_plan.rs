//! `numasched plan` end to end: the binary, a snapshot file, the output contract and
//! the one-line errors.

use crate::common;
use common::numasched;

const WL9: &str = "examples/snapshots/wl9-all-on-node0.json";

#[test]
fn plan_json_follows_the_published_nmass_decision() {
    let (code, out, err) = numasched(&["plan", "--snapshot", WL9, "--policy", "nmass", "--json"]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(plan["policy"], "nmass");
    let placements = plan["placements"].as_array().expect("placements");
    assert_eq!(placements.len(), 4);
    let nodes: Vec<u64> = placements
        .iter()
        .map(|p| p["nodes"][0].as_u64().unwrap())
        .collect();
    assert_eq!(
        nodes,
        vec![1, 0, 0, 0],
        "mcf goes remote, the rest stay local"
    );
    assert!(placements
        .iter()
        .all(|p| !p["reason"].as_str().unwrap().is_empty()));
}

#[test]
fn a_snapshot_plan_refuses_flags_that_choose_live_processes() {
    for flag in [
        &["--min-cpu", "5"][..],
        &["--exclude-pid", "1000"],
        &["--no-db"],
    ] {
        let mut args = vec!["plan", "--snapshot", WL9];
        args.extend_from_slice(flag);
        let (code, out, err) = numasched(&args);
        assert_eq!(code, 1, "{flag:?}: {out}");
        assert!(
            err.contains(&format!("{} has no effect with --snapshot", flag[0])),
            "{err}"
        );
    }
    // --pin is how the plan is applied, and applies.
    let (code, _, err) = numasched(&["plan", "--snapshot", WL9, "--pin", "cpu"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn oracle_searches_with_the_model_and_says_it_is_proven() {
    let (code, out, err) = numasched(&["plan", "--snapshot", WL9, "--policy", "oracle", "--json"]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(plan["policy"], "oracle");
    assert_eq!(plan["proven_optimal"], true);
    let nodes: Vec<u64> = plan["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["nodes"][0].as_u64().unwrap())
        .collect();
    // Four memory-bound programs homed on node 0: the best placement uses both nodes.
    assert!(nodes.contains(&0) && nodes.contains(&1), "{nodes:?}");
}

#[test]
fn plan_table_has_a_reason_per_process() {
    let (code, out, _) = numasched(&["plan", "--snapshot", WL9]);
    assert_eq!(code, 0);
    assert!(out.starts_with("policy auto on 4 processes"), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    for prog in ["mcf", "milc", "soplex", "lbm"] {
        // The row, then its reason wrapped beneath it.
        let row = lines
            .iter()
            .position(|l| l.split_whitespace().nth(1) == Some(prog))
            .unwrap_or_else(|| panic!("{prog}: {out}"));
        assert!(
            lines.get(row + 1).is_some_and(|l| l.contains("node")),
            "{prog}: {out}"
        );
    }
    assert!(lines.iter().all(|l| l.chars().count() <= 100), "{out}");
    assert!(
        out.contains("np: NUMA penalty"),
        "the columns are explained: {out}"
    );
}

#[test]
fn plan_table_says_which_process_someone_else_pinned() {
    let mut snap: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(WL9).expect("example")).expect("json");
    snap["processes"][2]["allowed_cpus"] = serde_json::json!([0, 1]);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("pinned.json");
    std::fs::write(&file, snap.to_string()).expect("write");
    let (code, out, err) = numasched(&["plan", "--snapshot", &file.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    let marked: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("pinned by someone else"))
        .collect();
    assert_eq!(
        marked,
        ["          pinned by someone else to 0-1: planned inside it"],
        "{out}"
    );
    // Under its own process (soplex), after the reason.
    let lines: Vec<&str> = out.lines().collect();
    let row = lines
        .iter()
        .position(|l| l.split_whitespace().nth(1) == Some("soplex"))
        .expect("soplex's row");
    let mark = lines
        .iter()
        .position(|l| l.contains("pinned by someone else"))
        .expect("the mark");
    assert!(
        mark > row
            && lines[row + 1..mark]
                .iter()
                .all(|l| l.starts_with("          ")),
        "{out}"
    );
}

#[test]
fn every_policy_name_plans_the_example() {
    for policy in numasched::policy::NAMES {
        let (code, out, err) =
            numasched(&["plan", "--snapshot", WL9, "--policy", policy, "--json"]);
        assert_eq!(code, 0, "{policy}: {err}");
        let plan: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(
            plan["placements"].as_array().map(|a| a.len()),
            Some(4),
            "{policy}"
        );
    }
}

fn assert_one_line_error(code: i32, err: &str, needles: &[&str]) {
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "missing '{n}' in: {err}");
    }
}

#[test]
fn bad_input_gets_one_line_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let (code, _, err) = numasched(&["plan", "--snapshot", WL9, "--policy", "bogus"]);
    assert_one_line_error(code, &err, &["unknown policy 'bogus'", "nmass"]);

    let (code, _, err) = numasched(&["plan", "--snapshot", "/nonexistent/snap.json"]);
    assert_one_line_error(code, &err, &["/nonexistent/snap.json"]);

    let f = write("trunc.json", "{\"topology\": {\"nodes\": [");
    let (code, _, err) = numasched(&["plan", "--snapshot", &f]);
    assert_one_line_error(code, &err, &["trunc.json", "line 1"]);

    let text = std::fs::read_to_string(WL9)
        .unwrap()
        .replace("1.35", "0.35");
    let f = write("np.json", &text);
    let (code, _, err) = numasched(&["plan", "--snapshot", &f]);
    assert_one_line_error(code, &err, &["np.json", "processes[1].numa_penalty"]);

    let text = std::fs::read_to_string(WL9)
        .unwrap()
        .replace("\"mpki\"", "\"mpky\"");
    let f = write("field.json", &text);
    let (code, _, err) = numasched(&["plan", "--snapshot", &f]);
    assert_one_line_error(code, &err, &["field.json", "mpky"]);
}

/// What live `plan --json` writes (the snapshot beside the plan and the sensors) is
/// taken back by `plan --snapshot` and plans the same; an error inside its snapshot
/// names the field under `snapshot.`.
#[test]
fn plan_json_output_replays_as_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let snap: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(WL9).unwrap()).unwrap();
    let (code, plan, err) = numasched(&["plan", "--snapshot", WL9, "--policy", "nmass", "--json"]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
    let live = serde_json::json!({
        "missing_sensors": [{"sensor": "resctrl", "why": "kernel without resctrl"}],
        "plan": plan,
        "processes": [],
        "sensors": [],
        "snapshot": snap,
        "uncharacterised": [],
    });
    let f = dir.path().join("live.json");
    std::fs::write(&f, serde_json::to_string_pretty(&live).unwrap()).unwrap();
    let f = f.to_string_lossy().into_owned();
    let (code, out, err) = numasched(&["plan", "--snapshot", &f, "--policy", "nmass", "--json"]);
    assert_eq!(code, 0, "{err}");
    let again: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(again, plan);

    let mut bad = live.clone();
    bad["snapshot"]["processes"][1]["numa_penalty"] = serde_json::json!(0.35);
    let g = dir.path().join("bad.json");
    std::fs::write(&g, serde_json::to_string_pretty(&bad).unwrap()).unwrap();
    let g = g.to_string_lossy().into_owned();
    let (code, _, err) = numasched(&["plan", "--snapshot", &g]);
    assert_one_line_error(
        code,
        &err,
        &["bad.json", "snapshot.processes[1].numa_penalty"],
    );

    let mut typo = live;
    typo["snapshot"]["processes"][0]["mpky"] = serde_json::json!(1.0);
    let h = dir.path().join("typo.json");
    std::fs::write(&h, serde_json::to_string_pretty(&typo).unwrap()).unwrap();
    let h = h.to_string_lossy().into_owned();
    let (code, _, err) = numasched(&["plan", "--snapshot", &h]);
    assert_one_line_error(code, &err, &["typo.json", "mpky"]);
}

/// The help of every command that takes `--policy` names every policy: the list there
/// is written out, so it must not drift from the one the code accepts.
#[test]
fn policy_help_lists_every_policy() {
    for cmd in ["plan", "daemon", "run"] {
        let (code, out, err) = numasched(&[cmd, "--help"]);
        assert_eq!(code, 0, "{cmd}: {err}");
        let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
        // The --policy entry: from its flag to the next flag.
        let at = flat.find("--policy <P>").expect("a --policy flag");
        let text = &flat[at + "--policy <P>".len()..];
        let text = &text[..text.find(" --").unwrap_or(text.len())];
        let words: Vec<&str> = text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .collect();
        for name in numasched::policy::NAMES {
            assert!(
                words.contains(&name),
                "{cmd} --help does not name {name}: {text}"
            );
        }
    }
    let (code, _, err) = numasched(&["plan", "--policy", "membus-rr"]);
    assert_ne!(code, 0);
    assert!(err.contains("runs only in the simulator"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// A live plan reads the profile store it is given and creates none; a path that holds
/// none is a typo, refused, rather than a plan where every process reads as unknown.
#[test]
fn a_live_plan_refuses_a_profile_store_that_is_not_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("nope/profiles.db");
    let (code, out, err) = numasched(&["plan", "--db", db.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(&format!("{}: no profile store there", db.display())),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!dir.path().join("nope").exists(), "nothing created");
}

/// Issue 39: four busy programs nothing is known of (no counters, no profile), run on
/// node 0 while all their memory is on idle node 1. Where the evidence is that plain,
/// auto and maxlocal move them to node 1, at every `--pin`; `linux` changes nothing.
/// numad binds each to one node with its memory there, one per scan as numad does (its
/// plan is re-run with each move applied): the first to node 1, then, by numad's own
/// score (free memory weighs 4 to free CPU's 1), the next to node 0 with its pages
/// moved, as numad's bind does.
#[test]
fn without_counters_busy_loads_go_where_their_memory_is() {
    const LOCALITY: &str = "examples/snapshots/locality-no-counters.json";
    let node1: Vec<u64> = vec![4, 5, 6, 7];
    for pin in ["llc", "node", "core", "cpu"] {
        for policy in ["auto", "maxlocal", "numad"] {
            let text = std::fs::read_to_string(LOCALITY).expect("snapshot");
            let mut snap: serde_json::Value = serde_json::from_str(&text).expect("json");
            let scans = if policy == "numad" { 4 } else { 1 };
            // Per process, what the last scan that placed it said.
            let mut placed: std::collections::BTreeMap<u64, serde_json::Value> = Default::default();
            for _ in 0..scans {
                let dir = tempfile::tempdir().expect("tempdir");
                let file = dir.path().join("s.json");
                std::fs::write(&file, snap.to_string()).expect("write");
                let path = file.to_str().expect("path");
                let (code, out, err) = numasched(&[
                    "plan",
                    "--snapshot",
                    path,
                    "--policy",
                    policy,
                    "--pin",
                    pin,
                    "--json",
                ]);
                assert_eq!(code, 0, "{policy} {pin}: {err}");
                let plan: serde_json::Value = serde_json::from_str(&out).expect("plan json");
                let placements = plan["placements"].as_array().expect("placements");
                // What a scan applied is where the process runs at the next one.
                for (p, pl) in snap["processes"]
                    .as_array_mut()
                    .expect("processes")
                    .iter_mut()
                    .zip(placements)
                {
                    if !pl["cpus"].as_array().expect("cpus").is_empty() {
                        p["current_cpus"] = pl["cpus"].clone();
                        placed.insert(pl["pid"].as_u64().expect("pid"), pl.clone());
                    }
                }
            }
            assert_eq!(placed.len(), 4, "{policy} {pin}: {placed:?}");
            for pl in placed.values() {
                let cpus: Vec<u64> = pl["cpus"]
                    .as_array()
                    .expect("cpus")
                    .iter()
                    .filter_map(|c| c.as_u64())
                    .collect();
                let reason = pl["reason"].as_str().unwrap_or("");
                if policy == "numad" {
                    let node0 = [0, 1, 2, 3];
                    assert!(
                        cpus.iter().all(|c| node1.contains(c))
                            || (cpus.iter().all(|c| node0.contains(c))
                                && (reason.contains("moved there by this plan")
                                    || reason.contains("of memory there"))),
                        "numad --pin {pin}: pid {} planned {cpus:?}: {reason}",
                        pl["pid"]
                    );
                    continue;
                }
                assert!(
                    !cpus.is_empty() && cpus.iter().all(|c| node1.contains(c)),
                    "{policy} --pin {pin}: pid {} planned {cpus:?}: {reason}",
                    pl["pid"]
                );
                if pin == "llc" || pin == "node" {
                    assert_eq!(cpus, node1, "{policy} {pin}: all of node 1 ({reason})");
                    assert!(reason.contains("on node 1, which has room"), "{reason}");
                }
            }
        }
    }
    let (code, out, err) = numasched(&[
        "plan",
        "--snapshot",
        LOCALITY,
        "--policy",
        "linux",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&out).expect("json");
    for pl in plan["placements"].as_array().expect("placements") {
        assert_eq!(
            pl["cpus"].as_array().map(Vec::len),
            Some(8),
            "linux narrows nothing: {pl}"
        );
    }
}

/// Issue 41: a saved snapshot's program names went to the terminal raw, escape
/// sequences and all (one could clear the screen or retitle the window).
#[test]
fn snapshot_names_are_shown_escaped_not_sent_to_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let src = format!(
        "{}/examples/snapshots/locality-no-counters.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(src)
        .unwrap()
        .replace("\"app-a\"", "\"evil\\u001b[2J\"");
    let file = dir.path().join("evil.json");
    std::fs::write(&file, text).unwrap();
    let (code, out, err) = numasched(&["plan", "--snapshot", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains('\u{1b}'), "raw escape in: {out}");
    assert!(out.contains("evil"), "{out}");
}

/// Issue 41: a snapshot over the process limit is one line, refused while it is read
/// (it used to be read whole, twice, and then a tree of it: 222 MB for 100,001); the
/// oracle takes no more processes than its search is bounded for.
#[test]
fn a_snapshot_over_the_limits_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let example: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("examples/snapshots/locality-no-counters.json").unwrap(),
    )
    .unwrap();
    let topology = example["topology"].to_string();
    let file = |n: usize| {
        let procs: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    r#"{{"pid":{},"program":"p","threads":1,"cpu_demand":1.0,"current_cpus":[{}]}}"#,
                    10 + i,
                    i % 8
                )
            })
            .collect();
        let path = dir.path().join(format!("{n}.json"));
        std::fs::write(
            &path,
            format!(
                r#"{{"topology":{topology},"processes":[{}]}}"#,
                procs.join(",")
            ),
        )
        .unwrap();
        path
    };
    let over = file(50_001);
    let (code, _, err) = numasched(&["plan", "--snapshot", over.to_str().unwrap()]);
    assert_one_line_error(code, &err, &["50001.json", "more than 50000 processes"]);
    let many = file(65);
    let (code, _, err) = numasched(&[
        "plan",
        "--snapshot",
        many.to_str().unwrap(),
        "--policy",
        "oracle",
    ]);
    assert_one_line_error(code, &err, &["65 processes, more than the 64"]);
    let (code, _, err) = numasched(&["plan", "--snapshot", many.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // As many as are taken: planned, and past 2 s from the start a line says what it
    // is still at, reading, planning or writing the plan (a test build takes several
    // seconds; where the whole run took under 4 s the line may rightly not come, or not
    // yet have been printed when the work ended). Writing 50,000 placements came after
    // the last line could be printed, and on a busy machine took the run past 4 s.
    let most = file(50_000);
    let started = std::time::Instant::now();
    let (code, _, err) = numasched(&["plan", "--snapshot", most.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    if started.elapsed() >= std::time::Duration::from_secs(4) {
        assert!(
            err.lines()
                .any(|l| l.starts_with("numasched: planning 50000 processes (")
                    || l.starts_with("numasched: writing the plan of 50000 processes (")
                    || l.starts_with(&format!("numasched: reading {}", most.display()))),
            "{err}"
        );
    }
    // Issue 41: any input taken is planned in under 200 MB.
    for extra in [&[][..], &["--json"][..]] {
        let mut args = vec!["plan", "--snapshot", most.to_str().unwrap()];
        args.extend_from_slice(extra);
        let (code, kib) = common::numasched_peak_kib(&args);
        assert_eq!(code, 0);
        assert!(kib < 200 * 1024, "{args:?}: peak {kib} KiB");
    }
}

/// What `plan --snapshot F --json` writes is a plan without its snapshot: fed back, it
/// is one line saying so and what replays, not "unknown field `policy`".
#[test]
fn a_bare_plan_given_as_a_snapshot_says_what_to_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = numasched(&[
        "plan",
        "--snapshot",
        "examples/snapshots/locality-no-counters.json",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let bare = dir.path().join("plan.json");
    std::fs::write(&bare, out).unwrap();
    let (code, _, err) = numasched(&["plan", "--snapshot", bare.to_str().unwrap()]);
    assert_one_line_error(
        code,
        &err,
        &["plan.json: a plan", "not a snapshot", "live `plan --json`"],
    );
}

/// A live plan whose thresholds leave nothing says so and which thresholds, rather
/// than print an empty table (nothing on this machine uses 1,000 CPUs).
#[test]
fn a_live_plan_that_selects_nothing_says_why() {
    let (code, out, err) = numasched(&["plan", "--no-db", "--min-cpu", "1000"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("on 0 processes"), "{out}");
    assert!(
        out.contains("no process selected: none uses --min-cpu 1000 CPUs"),
        "{out}"
    );
}
