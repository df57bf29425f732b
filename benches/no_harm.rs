//! Do no harm, measured: the same loads run unmanaged and under `numasched run`, side by
//! side in alternating order, and the managed rate divided by the unmanaged one. Issue
//! 12's target on the 2-CPU development machine: every ratio ≥ 0.97, and with three
//! loads on two CPUs the fastest load at most 1.1× the slowest.
//!
//! Not a criterion benchmark: each sample is a run of several seconds of other
//! processes, whose own reports (`workload cpu --json`) give the rates.
//!
//!     cargo bench --bench no_harm                    # 3 pairs of 6 s runs per case
//!     NS_BENCH_PAIRS=5 NS_BENCH_SECS=10 cargo bench --bench no_harm
//!     cargo bench --bench no_harm -- late            # only cases whose name has "late"
//!
//! Every case runs unmanaged, managed with the default `--pin llc`, and managed with
//! `--pin cpu` (hard pinning, where a wrong set is most harmful); the order rotates
//! each round so that drift of a shared machine falls on all three alike. Reported per
//! case: the median over rounds of the loads' summed rate, the managed/unmanaged ratio
//! of those medians, the median fastest/slowest rate among the loads, and per load its
//! median rate against its own unmanaged median (the worst-off load, and each load on a
//! line of its own where there are several: `a`, `b`, … managed, `y`, `z` not). Results
//! also go to `target/no_harm.json`.

#[path = "live/mod.rs"]
mod live;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use live::env_or;

const BIN: &str = env!("CARGO_BIN_EXE_numasched");

/// A load mix as a shell script: `$W` is the numasched binary, `$O` a directory each
/// load writes its JSON report into, `$S` the run length in seconds. `beside` runs
/// alongside, never managed (an operator's own `taskset` job), its loads reporting
/// into `$O` too: numasched must not harm them either.
struct Case {
    name: &'static str,
    script: &'static str,
    beside: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "1 cpu load",
        beside: "",
        script: r#"$W workload cpu --seconds $S --json >$O/a"#,
    },
    Case {
        name: "2 cpu loads",
        beside: "",
        script: r#"$W workload cpu --seconds $S --json >$O/a & $W workload cpu --seconds $S --json >$O/b & wait"#,
    },
    Case {
        name: "3 cpu loads (3 on 2 CPUs)",
        beside: "",
        script: r#"for x in a b c; do $W workload cpu --seconds $S --json >$O/$x & done; wait"#,
    },
    Case {
        name: "4 cpu loads",
        beside: "",
        script: r#"for x in a b c d; do $W workload cpu --seconds $S --json >$O/$x & done; wait"#,
    },
    Case {
        name: "2-thread load",
        beside: "",
        script: r#"$W workload cpu --threads 2 --seconds $S --json >$O/a"#,
    },
    Case {
        name: "late second thread (1.5 s)",
        beside: "",
        script: r#"$W workload cpu --threads 2 --late 1.5 --seconds $S --json >$O/a"#,
    },
    Case {
        name: "late child (1.5 s)",
        beside: "",
        script: r#"$W workload cpu --seconds $S --json >$O/a & sleep 1.5; $W workload cpu --seconds $(awk "BEGIN{print $S-1.5}") --json >$O/b; wait"#,
    },
    Case {
        name: "bursty (1 s busy, 1 s idle) + steady",
        beside: "",
        script: r#"$W workload cpu --duty 1:1 --seconds $S --json >$O/a & $W workload cpu --seconds $S --json >$O/b & wait"#,
    },
    Case {
        name: "3 loads, one SIGSTOPped 2 s",
        beside: "",
        script: r#"$W workload cpu --seconds $S --json >$O/a & $W workload cpu --seconds $S --json >$O/b & $W workload cpu --seconds $S --json >$O/c & p=$!; sleep 1.5; kill -STOP $p; sleep 2; kill -CONT $p; wait"#,
    },
    Case {
        name: "1 cpu load beside a taskset -c 0 one",
        beside: r#"taskset -c 0 $W workload cpu --seconds $S --json >$O/z"#,
        script: r#"$W workload cpu --seconds $S --json >$O/a"#,
    },
    Case {
        // Every CPU busy with others' work, one CPU's pinned and the other's free to
        // move: no CPU stands out, and a hard pin beside the pinned one would halve the
        // load where the kernel shares both CPUs three ways.
        name: "1 cpu load beside a taskset -c 0 one and a free one",
        beside: r#"taskset -c 0 $W workload cpu --seconds $S --json >$O/z & $W workload cpu --seconds $S --json >$O/y & wait"#,
        script: r#"$W workload cpu --seconds $S --json >$O/a"#,
    },
    Case {
        // Hard pinning confines the busy shell (about 5 s in, when its young process's
        // room ends under `run`); its child starts inside that set.
        name: "2-thread child of a busy shell (6 s)",
        beside: "",
        script: r#"exec bash -c 'spin() { local end=$((SECONDS + $1)); while [ $SECONDS -lt $end ]; do :; done; }; spin 6; $W workload cpu --threads 2 --seconds $S --json >$O/a & spin $S; wait'"#,
    },
    Case {
        // The same child started with `( cmd & )`: handed to init, out of the run's
        // tree, in the shell's set. The shell waits for its report (10 s at most).
        name: "2-thread orphan of a busy shell (6 s)",
        beside: "",
        script: r#"exec bash -c 'spin() { local end=$((SECONDS + $1)); while [ $SECONDS -lt $end ]; do :; done; }; spin 6; ( $W workload cpu --threads 2 --seconds $S --json >$O/a & ); spin $S; for i in $(seq 100); do grep -q summary $O/a && break; sleep 0.1; done'"#,
    },
];

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Unmanaged,
    Llc,
    Cpu,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Unmanaged => "unmanaged",
            Mode::Llc => "pin llc",
            Mode::Cpu => "pin cpu",
        }
    }
}

/// One run: the rate of each load (iterations/s, from its summary), by the name of the
/// report it wrote (`a`, `b`, …), in name order.
fn run_once(case: &Case, mode: Mode, secs: u64) -> Vec<(String, f64)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = match mode {
        Mode::Unmanaged => Command::new("sh"),
        Mode::Llc | Mode::Cpu => {
            let mut c = Command::new(BIN);
            c.args(["run", "--no-db", "--pin"])
                .arg(if mode == Mode::Cpu { "cpu" } else { "llc" })
                .args(["--", "sh"]);
            c
        }
    };
    let beside = (!case.beside.is_empty()).then(|| {
        let child = loads(
            Command::new("sh").args(["-c", case.beside]),
            dir.path(),
            secs,
        )
        .spawn()
        .expect("start the unmanaged loads");
        // Running before numasched looks, as a neighbour would be.
        std::thread::sleep(std::time::Duration::from_millis(300));
        child
    });
    let status = loads(cmd.args(["-c", case.script]), dir.path(), secs)
        .status()
        .expect("start the case");
    assert!(
        status.success(),
        "{} ({}): {status:?}",
        case.name,
        mode.label()
    );
    if let Some(mut b) = beside {
        let status = b.wait().expect("wait for the unmanaged loads");
        assert!(status.success(), "{} (beside): {status:?}", case.name);
    }
    rates(dir.path())
}

/// A case's shell with what its scripts read: the binary, the report directory, the
/// run length.
fn loads<'c>(cmd: &'c mut Command, reports: &Path, secs: u64) -> &'c mut Command {
    cmd.env("W", BIN)
        .env("O", reports)
        .env("S", secs.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
}

fn rates(dir: &Path) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read the reports") {
        let e = e.expect("entry");
        let name = e.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(e.path()).expect("a report");
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            if v["event"] == "summary" {
                out.push((name.clone(), v["rate"].as_f64().expect("rate")));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn spread(r: &[f64]) -> f64 {
    let max = r.iter().copied().fold(0.0, f64::max);
    let min = r.iter().copied().fold(f64::INFINITY, f64::min);
    if min > 0.0 {
        max / min
    } else {
        f64::INFINITY
    }
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} CPUs, {model}")
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let pairs = env_or("NS_BENCH_PAIRS", 3).max(1) as usize;
    let secs = env_or("NS_BENCH_SECS", 6).max(3);
    let modes = [Mode::Unmanaged, Mode::Llc, Mode::Cpu];
    println!(
        "no_harm on {}: {pairs} round(s) of {secs} s runs per case and mode",
        machine()
    );
    println!(
        "{:<52} {:>9} {:>7} {:>7} | {:>9} {:>9} {:>9} | {:>9} {:>7}",
        "case", "unmanaged", "llc", "cpu", "fast/slow", "llc", "cpu", "worst llc", "cpu"
    );
    let mut json = Vec::new();
    let mut worst = f64::INFINITY;
    let mut worst_load = f64::INFINITY;
    for case in CASES {
        if !filter.is_empty() && !filter.iter().any(|f| case.name.contains(f.as_str())) {
            continue;
        }
        // Per mode: summed rate and fastest/slowest of every round, and each load's
        // rate (by its report's name) of every round.
        let mut sums: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
        let mut spreads: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
        let mut loads: Vec<BTreeMap<String, Vec<f64>>> = vec![BTreeMap::new(); modes.len()];
        for round in 0..pairs {
            for k in 0..modes.len() {
                let m = (k + round) % modes.len();
                let r = run_once(case, modes[m], secs);
                let rates: Vec<f64> = r.iter().map(|x| x.1).collect();
                sums[m].push(rates.iter().sum());
                spreads[m].push(spread(&rates));
                for (name, rate) in r {
                    loads[m].entry(name).or_default().push(rate);
                }
            }
        }
        let total: Vec<f64> = sums.into_iter().map(median).collect();
        let fs: Vec<f64> = spreads.into_iter().map(median).collect();
        let ratio = |m: usize| total[m] / total[0];
        worst = worst.min(ratio(1)).min(ratio(2));
        // Do no harm is per process: each load's median managed rate against its own
        // median unmanaged rate, and the worst-off load per mode.
        let per_load: BTreeMap<&String, [f64; 3]> = loads[0]
            .iter()
            .map(|(name, unmanaged)| {
                let of = |m: usize| loads[m].get(name).cloned().map_or(0.0, median);
                let base = median(unmanaged.clone());
                (name, [base, of(1) / base, of(2) / base])
            })
            .collect();
        let worst_of = |m: usize| {
            per_load
                .values()
                .map(|r| r[m])
                .fold(f64::INFINITY, f64::min)
        };
        worst_load = worst_load.min(worst_of(1)).min(worst_of(2));
        println!(
            "{:<52} {:>8.0}M {:>7.3} {:>7.3} | {:>9.2} {:>9.2} {:>9.2} | {:>9.3} {:>7.3}",
            case.name,
            total[0] / 1e6,
            ratio(1),
            ratio(2),
            fs[0],
            fs[1],
            fs[2],
            worst_of(1),
            worst_of(2)
        );
        // Which load is worst off decides whose harm it is: the managed one (reports
        // `a`, `b`, …) or a neighbour left to the kernel (`y`, `z`).
        if per_load.len() > 1 {
            let each: Vec<String> = per_load
                .iter()
                .map(|(name, r)| format!("{name} {:.3} {:.3}", r[1], r[2]))
                .collect();
            println!("    per load (llc cpu): {}", each.join("; "));
        }
        json.push(serde_json::json!({
            "case": case.name,
            "unmanaged_rate": total[0],
            "pin_llc_rate": total[1],
            "pin_cpu_rate": total[2],
            "ratio_pin_llc": ratio(1),
            "ratio_pin_cpu": ratio(2),
            "fastest_over_slowest": { "unmanaged": fs[0], "pin_llc": fs[1], "pin_cpu": fs[2] },
            "per_load": per_load.iter().map(|(name, r)| serde_json::json!({
                "load": name,
                "unmanaged_rate": r[0],
                "ratio_pin_llc": r[1],
                "ratio_pin_cpu": r[2],
            })).collect::<Vec<_>>(),
        }));
    }
    println!(
        "lowest managed/unmanaged ratio: {worst:.3} (target ≥ 0.97); rates are the median \
         over rounds of the loads' summed iterations/s"
    );
    println!(
        "lowest managed/unmanaged ratio of one load: {worst_load:.3} (the `worst` columns: \
         each load's median rate against its own unmanaged median)"
    );
    let doc = serde_json::json!({ "machine": machine(), "rounds": pairs, "seconds": secs, "cases": json });
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/no_harm.json");
    if let Err(e) = std::fs::write(
        &path,
        serde_json::to_string_pretty(&doc).unwrap_or_default(),
    ) {
        eprintln!("no_harm: cannot write {}: {e}", path.display());
    }
}
