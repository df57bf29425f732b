//! Evaluation results as text: the terminal table, CSV, JSON, and per-policy summaries.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use super::runner::{Row, LINUX};

/// The JSON contract: `{"results":[...]}`, one entry per workload × map × policy.
#[derive(Debug, Serialize)]
pub struct Results<'a> {
    pub results: &'a [Row],
    pub summaries: Vec<Summary>,
}

/// A policy's figures over one suite.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub suite: String,
    pub policy: String,
    pub entries: usize,
    pub mean_improvement_vs_linux: f64,
    pub min_improvement_vs_linux: f64,
    pub mean_improvement_vs_autonuma: f64,
    pub min_improvement_vs_autonuma: f64,
    /// The same against autonuma on the workload's average slowdown
    /// ([`Row::workload_vs_autonuma`]).
    pub mean_workload_vs_autonuma: f64,
    pub min_workload_vs_autonuma: f64,
    /// Entries more than [`BEHIND`] below autonuma per program, and on the workload.
    pub behind_autonuma: usize,
    pub workload_behind_autonuma: usize,
    pub mean_fraction_of_oracle: f64,
    pub min_fraction_of_oracle: f64,
    /// The entry with the lowest fraction of the oracle, as "WL9/0000".
    pub worst_entry: String,
    pub mean_performance: f64,
    pub mean_unfairness: f64,
    /// Mean over entries of the programs' mean normalised run time (1 = alone, local).
    pub mean_run_time: f64,
}

/// How far below autonuma an entry must be to count as behind it: issue 39's margin.
pub const BEHIND: f64 = 0.005;

pub fn summaries(rows: &[Row]) -> Vec<Summary> {
    let mut groups: BTreeMap<(String, String), Vec<&Row>> = BTreeMap::new();
    let mut order: Vec<(String, String)> = Vec::new();
    for r in rows {
        let key = (r.suite.clone(), r.policy.clone());
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(r);
    }
    order
        .into_iter()
        .map(|key| {
            let g = &groups[&key];
            let n = g.len() as f64;
            let mean = |f: &dyn Fn(&Row) -> f64| g.iter().map(|r| f(r)).sum::<f64>() / n;
            let min =
                |f: &dyn Fn(&Row) -> f64| g.iter().map(|r| f(r)).fold(f64::INFINITY, f64::min);
            let worst = g
                .iter()
                .min_by(|a, b| a.fraction_of_oracle.total_cmp(&b.fraction_of_oracle))
                .map(|r| format!("{}/{}", r.workload, r.map))
                .unwrap_or_default();
            Summary {
                suite: key.0.clone(),
                policy: key.1.clone(),
                entries: g.len(),
                mean_improvement_vs_linux: mean(&|r| r.improvement_vs_linux),
                min_improvement_vs_linux: min(&|r| r.improvement_vs_linux),
                mean_improvement_vs_autonuma: mean(&|r| r.improvement_vs_autonuma),
                min_improvement_vs_autonuma: min(&|r| r.improvement_vs_autonuma),
                mean_workload_vs_autonuma: mean(&|r| r.workload_vs_autonuma),
                min_workload_vs_autonuma: min(&|r| r.workload_vs_autonuma),
                behind_autonuma: g
                    .iter()
                    .filter(|r| r.improvement_vs_autonuma < -BEHIND)
                    .count(),
                workload_behind_autonuma: g
                    .iter()
                    .filter(|r| r.workload_vs_autonuma < -BEHIND)
                    .count(),
                mean_fraction_of_oracle: mean(&|r| r.fraction_of_oracle),
                min_fraction_of_oracle: min(&|r| r.fraction_of_oracle),
                worst_entry: worst,
                mean_performance: mean(&|r| r.performance),
                mean_unfairness: mean(&|r| r.unfairness),
                mean_run_time: mean(&|r| 1.0 + r.avg_slowdown),
            }
        })
        .collect()
}

/// Policies in the order they first appear.
pub fn policies(rows: &[Row]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.contains(&r.policy) {
            out.push(r.policy.clone());
        }
    }
    out
}

/// Whether the cases ran on different machines (the random suites draw one per case,
/// a workloads file names one per workload): then the per-case table and the report's
/// per-case headings name each case's machine; otherwise the suite's line names it once.
pub fn machine_per_case(rows: &[Row]) -> bool {
    rows.first()
        .is_some_and(|first| rows.iter().any(|r| r.machine != first.machine))
}

/// The allocation map notation in one line, for the terminal summary and `table.txt`
/// (the HTML report's glossary says it at length).
pub const MAP_NOTE: &str =
    "map: one digit per program, the node holding its memory (1100: the first two on node 1)";

/// Terminal table: one line per workload × map, a column per policy with its
/// improvement over Linux and, in brackets, its fraction of the oracle.
pub fn table(rows: &[Row]) -> String {
    let pols = policies(rows);
    let mut out = String::new();
    let mut cases: Vec<(String, String, String)> = Vec::new();
    for r in rows {
        let k = (r.suite.clone(), r.workload.clone(), r.map.clone());
        if !cases.contains(&k) {
            cases.push(k);
        }
    }
    let _ = writeln!(out, "{MAP_NOTE}");
    // As wide as the longest workload name and map: a workloads file's names may be
    // long, and random cases have up to 16 programs.
    let w = cases.iter().map(|(_, wl, _)| wl.len()).fold(9, usize::max);
    let mw = cases.iter().map(|(_, _, m)| m.len()).fold(9, usize::max);
    // Random suites draw a machine per case: then each line names its machine.
    let machine_of = |(suite, wl, map): &(String, String, String)| {
        rows.iter()
            .find(|r| &r.suite == suite && &r.workload == wl && &r.map == map)
            .map_or("", |r| r.machine.as_str())
    };
    let per_case = machine_per_case(rows);
    let hw = if per_case {
        cases
            .iter()
            .map(|c| machine_of(c).len())
            .fold(7, usize::max)
    } else {
        0
    };
    let _ = writeln!(out, "improvement over linux (fraction of oracle)");
    let _ = write!(out, "{:<10} {:<w$} {:<mw$}", "suite", "workload", "map");
    if per_case {
        let _ = write!(out, " {:<hw$}", "machine");
    }
    for p in &pols {
        let _ = write!(out, " {p:>18}");
    }
    out.push('\n');
    for case in &cases {
        let (suite, wl, map) = case;
        let _ = write!(out, "{suite:<10} {wl:<w$} {map:<mw$}");
        if per_case {
            let _ = write!(out, " {:<hw$}", machine_of(case));
        }
        for p in &pols {
            let cell = rows
                .iter()
                .find(|r| &r.suite == suite && &r.workload == wl && &r.map == map && &r.policy == p)
                .map(|r| {
                    format!(
                        "{:+6.1}% ({:.3})",
                        100.0 * r.improvement_vs_linux,
                        r.fraction_of_oracle
                    )
                })
                .unwrap_or_default();
            let _ = write!(out, " {cell:>18}");
        }
        out.push('\n');
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "{:<13} {:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>8}  worst entry",
        "suite",
        "policy",
        "mean impr",
        "min impr",
        "mean v.an",
        "min v.an",
        "mean frac",
        "min frac",
        "perf",
        "unfair",
        "run time"
    );
    for s in summaries(rows) {
        let _ = writeln!(
            out,
            "{:<13} {:<16} {:>+8.2}% {:>+8.2}% {:>+8.2}% {:>+8.2}% {:>9.3} {:>9.3} {:>7.3} {:>7.3} \
             {:>8.3}  {}",
            s.suite,
            s.policy,
            100.0 * s.mean_improvement_vs_linux,
            100.0 * s.min_improvement_vs_linux,
            100.0 * s.mean_improvement_vs_autonuma,
            100.0 * s.min_improvement_vs_autonuma,
            s.mean_fraction_of_oracle,
            s.min_fraction_of_oracle,
            s.mean_performance,
            s.mean_unfairness,
            s.mean_run_time,
            s.worst_entry
        );
    }
    out
}

/// The terminal summary: one row per policy, within 100 columns (the suite is named in
/// the line after it, so the worst entry keeps its map): mean and
/// lowest improvement over `linux` and over `autonuma` (the kernel's NUMA balancing),
/// mean and lowest fraction of the oracle, and the entry furthest from it. With
/// `colour`, gains are green and losses red (ANSI; the caller decides, from the
/// terminal and `NO_COLOR`).
pub fn summary_table(rows: &[Row], colour: bool) -> String {
    let paint = |x: f64, text: String| match (colour, x) {
        (true, x) if x > 0.0005 => format!("\x1b[32m{text}\x1b[0m"),
        (true, x) if x < -0.0005 => format!("\x1b[31m{text}\x1b[0m"),
        _ => text,
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<16} {:>9} {:>8} {:>11} {:>8} {:>9} {:>6}  worst entry",
        "policy", "vs linux", "(min)", "vs autonuma", "(min)", "of oracle", "(min)"
    );
    let all = summaries(rows);
    for s in &all {
        let pct = |x: f64, w: usize| paint(x, format!("{:>+w$.2}%", 100.0 * x, w = w - 1));
        let worst = clip(&s.worst_entry, 25);
        let _ = writeln!(
            out,
            "{:<16} {} {} {} {} {:>9.3} {:>6.3}  {worst}",
            clip(&s.policy, 16),
            pct(s.mean_improvement_vs_linux, 9),
            pct(s.min_improvement_vs_linux, 8),
            pct(s.mean_improvement_vs_autonuma, 11),
            pct(s.min_improvement_vs_autonuma, 8),
            s.mean_fraction_of_oracle,
            s.min_fraction_of_oracle,
        );
    }
    // Where the two measures disagree, both (see `Row::workload_vs_autonuma`): a header
    // and the policies wrapped within 100 columns.
    let differ: Vec<String> = all
        .iter()
        .filter(|s| s.behind_autonuma != s.workload_behind_autonuma)
        .map(|s| {
            format!(
                "{} {} / {}",
                s.policy, s.behind_autonuma, s.workload_behind_autonuma
            )
        })
        .collect();
    if !differ.is_empty() {
        let _ = writeln!(
            out,
            "entries more than 0.5% behind autonuma, per program / on the workload's average \
             slowdown:"
        );
        let mut line = String::from(" ");
        for (k, item) in differ.iter().enumerate() {
            let sep = if k + 1 < differ.len() { "," } else { "" };
            if line.len() + 1 + item.len() + sep.len() > 100 {
                let _ = writeln!(out, "{line}");
                line = String::from(" ");
            }
            let _ = write!(line, " {item}{sep}");
        }
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "{MAP_NOTE}");
    out
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

pub fn csv(rows: &[Row]) -> String {
    let mut out = String::from(
        "suite,workload,map,policy,programs,avg_slowdown,performance,unfairness,\
         improvement_vs_linux,improvement_vs_autonuma,fraction_of_oracle,proven_optimal,\
         program_improvements\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6},{},{}",
            r.suite,
            r.workload,
            r.map,
            r.policy,
            r.programs.join(";"),
            r.avg_slowdown,
            r.performance,
            r.unfairness,
            r.improvement_vs_linux,
            r.improvement_vs_autonuma,
            r.fraction_of_oracle,
            r.proven_optimal.map(|b| b.to_string()).unwrap_or_default(),
            r.program_improvements
                .iter()
                .map(|x| format!("{x:.6}"))
                .collect::<Vec<_>>()
                .join(";")
        );
    }
    out
}

/// Per program name, the best and worst improvement over Linux a policy reached.
pub fn program_extremes(rows: &[Row], policy: &str) -> Vec<(String, f64, f64)> {
    let mut m: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.policy == policy && r.policy != LINUX)
    {
        for (p, &x) in r.programs.iter().zip(&r.program_improvements) {
            let e = m
                .entry(p.clone())
                .or_insert((f64::INFINITY, f64::NEG_INFINITY));
            e.0 = e.0.min(x);
            e.1 = e.1.max(x);
        }
    }
    m.into_iter().map(|(k, (lo, hi))| (k, hi, lo)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(policy: &str, map: &str, impr: f64, frac: f64) -> Row {
        Row {
            suite: "s".into(),
            workload: "W".into(),
            map: map.into(),
            machine: "m".into(),
            policy: policy.into(),
            programs: vec!["a".into(), "b".into()],
            threads: vec![1, 1],
            times: vec![1.0, 1.0],
            avg_slowdown: 0.0,
            performance: 1.0,
            unfairness: 0.0,
            improvement_vs_linux: impr,
            improvement_vs_autonuma: impr / 2.0,
            program_improvements: vec![impr - 0.01, impr + 0.01],
            workload_vs_autonuma: impr,
            fraction_of_oracle: frac,
            proven_optimal: None,
            placements_evaluated: 1,
        }
    }

    #[test]
    fn summaries_find_means_minima_and_the_worst_entry() {
        let rows = vec![row("p", "00", 0.1, 0.9), row("p", "01", -0.1, 0.99)];
        let s = &summaries(&rows)[0];
        assert!((s.mean_improvement_vs_linux - 0.0).abs() < 1e-12);
        assert_eq!(s.min_improvement_vs_linux, -0.1);
        assert_eq!(s.min_fraction_of_oracle, 0.9);
        assert_eq!(s.worst_entry, "W/00");
    }

    #[test]
    fn the_summary_says_where_the_two_measures_against_autonuma_disagree() {
        // Per program −1% (behind), on the workload +1% (ahead).
        let mut behind = row("p", "00", -0.02, 0.9);
        behind.workload_vs_autonuma = 0.01;
        let rows = vec![behind, row("q", "00", 0.02, 1.0)];
        let s = &summaries(&rows);
        assert_eq!(
            (s[0].behind_autonuma, s[0].workload_behind_autonuma),
            (1, 0)
        );
        let text = summary_table(&rows, false);
        assert!(
            text.contains(
                "entries more than 0.5% behind autonuma, per program / on the workload's \
                 average slowdown:\n  p 1 / 0\n"
            ),
            "{text}"
        );
        assert!(!text.contains(" q "), "{text}");
        // Many policies wrap within 100 columns.
        let many: Vec<Row> = (0..30)
            .map(|k| {
                let mut r = row(&format!("policy-{k}"), "00", -0.02, 0.9);
                r.workload_vs_autonuma = 0.01;
                r
            })
            .collect();
        let text = summary_table(&many, false);
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        assert!(text.contains("policy-29 1 / 0\n"), "{text}");
    }

    #[test]
    fn csv_has_a_line_per_row_and_table_a_column_per_policy() {
        let rows = vec![row("p", "00", 0.1, 0.9), row("q", "00", 0.2, 1.0)];
        assert_eq!(csv(&rows).lines().count(), 3);
        let t = table(&rows);
        assert!(
            t.contains("+10.0% (0.900)") && t.contains("+20.0% (1.000)"),
            "{t}"
        );
        let ex = program_extremes(&rows, "p");
        assert_eq!(ex.len(), 2);
        assert!((ex[0].1 - 0.09).abs() < 1e-12);
    }
}
