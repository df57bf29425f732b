//! The evaluation as one self-contained HTML page: what the suite is and how to read
//! it, the summary, and charts in the manner of the published figures (improvement over
//! Linux per workload and allocation map, each program's best and worst, performance
//! and unfairness per program, every policy as a fraction of the oracle). No scripts
//! and no external files, so the report can be mailed or archived as is.

use std::fmt::Write;

use super::charts::{colour, esc, grouped_bars, span, spreads, Axis, Fill, Group, Series, Spread};
use super::report::{machine_per_case, policies, program_extremes, summaries, Summary};
use super::runner::{Row, LINUX, ORACLE};

const STYLE: &str = "body{font-family:sans-serif;margin:16px 24px;max-width:1400px}\
    table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;\
    text-align:right;white-space:nowrap}th{background:#f4f4f4;white-space:normal;\
    text-align:center}td.entry{text-align:left;white-space:normal;\
    overflow-wrap:anywhere}td.name{text-align:left}.frac{color:#555}.note{font-size:90%;color:#444}\
    .chart{margin:4px 0 18px}.chart svg{display:block;max-width:100%;height:auto}\
    .sw{display:inline-block;width:12px;height:12px;margin:0 4px 0 0;\
    vertical-align:middle}dt{font-weight:bold}dd{margin:0 0 6px 16px}";

/// What each built-in suite is, for the report's opening.
fn about(suite: &str) -> &'static str {
    match suite {
        "nmass" => {
            "The N-MASS evaluation of Majo &amp; Gross (ISMM 2011): eleven workloads of \
             SPEC CPU2006 programs on a two-socket Nehalem, each under every allocation \
             map. Memory stays where the map puts it; only CPU placement changes."
        }
        "nmass-migrate" => {
            "The N-MASS workloads with page migration allowed: a policy may also move a \
             process's memory (at 1 GB/s, amortised over a 300 s run, the copy's bandwidth \
             charged to the processes sharing either memory controller)."
        }
        "membus" => {
            "The memory-bus study of Tudu et al.: lbm, soplex, gromacs and hmmer ×2 on a \
             two-package Xeon E5345, whose two dies per package share one front-side bus: \
             on all 8 cores (bus8), and as published, time-shared on one core of each die \
             (bus8-4cores). membus-rr is the published scheduler's rotation: per 200 ms \
             slice the tasks at the head of a round-robin list run, a high-bandwidth one \
             beside a low one on each bus. The figures that matter are performance (mean \
             solo time / time) and unfairness (coefficient of variation of the programs' \
             speeds)."
        }
        "cmload" => {
            "The memory-aware CPU allocation study of Kang et al.: 2 to 64 processes, half \
             compute-bound and half STREAM-like, on a two-node machine with memory spread or \
             all on node 0."
        }
        "random" => {
            "Cases drawn from a seed: machines from every preset and spec strings with \
             SMT, several LLCs per node and up to 8 nodes; 4 to 16 processes (single- and \
             multi-threaded, sometimes more than CPUs); memory homes biased toward one \
             node. The note at the end says whether this seed is a training seed or a \
             held-out one."
        }
        "random-migrate" => {
            "The random suite's cases with page migration allowed, costed as in \
             nmass-migrate: auto-migrate is judged against autonuma, which then moves \
             pages as well as tasks."
        }
        "workloads" => {
            "Your own mixes, from the workloads file given to <code>numasched eval \
             --workloads</code>: each workload under each memory map the file gives \
             (its digits are the home node ids), on the machine it names."
        }
        _ => "A suite of simulated workloads.",
    }
}

const GLOSSARY: &str = "<dl>\
    <dt>allocation map</dt><dd>One digit per program, in workload order: the node that \
    holds its memory. <code>1100</code> puts the first two programs' memory on node 1 \
    and the others' on node 0; <code>0000</code> puts all of it on node 0.</dd>\
    <dt>improvement over Linux</dt><dd>Mean over the workload's programs of \
    1 − T<sub>policy</sub> / T<sub>Linux</sub>, where T<sub>Linux</sub> is the mean \
    over the CPU-balanced schedules Linux's load balancer settles on. Above zero: \
    faster than Linux.</dd>\
    <dt>improvement over autonuma</dt><dd>The same against <code>autonuma</code>, a \
    model of the kernel's automatic NUMA balancing (tasks move toward their memory, \
    pages follow their tasks at the kernel's scan rates, hinting faults and copies \
    charged), started from the same schedules and scored over the whole run, \
    convergence included.</dd>\
    <dt>fraction of the oracle</dt><dd>The mean normalised run time (1 + average \
    slowdown) of the best placement known divided by the policy's (1 = as good as the \
    oracle): the oracle's search over all \
    placements, proven best where it is exhaustive; where its search is bounded (many \
    processes, multi-threaded groups) and a policy's placement scores higher, that \
    placement, and the oracle's row is marked not proven. A schedule that changes \
    every slice (<code>membus-rr</code>) is no placement and can pass 1.</dd>\
    <dt>performance, unfairness</dt><dd>Performance is the mean over programs of \
    T<sub>alone</sub> / T (1 = every program as fast as alone on the idle machine); \
    unfairness is the coefficient of variation of those speeds (0 = all slowed \
    alike).</dd></dl>";

/// The report of one suite run on `machine`.
pub fn page(suite: &str, machine: &str, rows: &[Row], notes: &str) -> String {
    let title = format!("numasched eval: suite {suite} on {machine}");
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>{STYLE}</style></head><body><h1>{t}</h1><p>{a}</p><p>{n}</p>\
         <h2>How to read it</h2>{GLOSSARY}",
        t = esc(&title),
        a = about(suite),
        n = esc(notes)
    );
    let pols: Vec<String> = policies(rows).into_iter().filter(|p| p != LINUX).collect();
    summary_table(&mut out, rows);
    if case_per_workload(suite, rows) {
        case_summary(&mut out, rows);
    } else {
        improvement_charts(&mut out, rows, &pols);
    }
    speed_charts(&mut out, rows);
    extremes_charts(&mut out, rows, &pols);
    oracle_chart(&mut out, rows);
    out.push_str("</body></html>\n");
    out
}

/// One row per policy. The headings are grouped (a figure's name over its mean and
/// minimum) so the table fits a 1280-pixel window with the autonuma columns; each
/// heading's title and the note under the table say the rest.
fn summary_table(out: &mut String, rows: &[Row]) {
    let sums = summaries(rows);
    out.push_str(
        "<h2>Summary</h2><table class=\"summary\"><tr><th rowspan=\"2\">policy</th>\
         <th colspan=\"2\" title=\"improvement over Linux: mean and lowest over the \
         entries\">improvement over Linux</th>\
         <th colspan=\"2\" title=\"improvement over autonuma (the kernel's NUMA \
         balancing): mean and lowest over the entries\">improvement over autonuma</th>\
         <th colspan=\"3\" title=\"fraction of the oracle: mean and lowest over the \
         entries, and the entry with the lowest\">fraction of the oracle</th>\
         <th rowspan=\"2\" title=\"mean over the entries of the mean speed (T alone / T)\">\
         performance</th>\
         <th rowspan=\"2\" title=\"mean over the entries of the coefficient of variation \
         of the speeds\">unfairness</th></tr>\
         <tr><th title=\"mean improvement over Linux\">mean</th>\
         <th title=\"lowest improvement over Linux\">min</th>\
         <th title=\"mean improvement over autonuma\">mean</th>\
         <th title=\"lowest improvement over autonuma\">min</th>\
         <th title=\"mean fraction of the oracle\">mean</th>\
         <th title=\"lowest fraction of the oracle\">min</th>\
         <th title=\"the entry with the lowest fraction of the oracle, as workload/map\">\
         worst entry</th></tr>",
    );
    for s in &sums {
        let _ = write!(
            out,
            "<tr><td>{}{}</td><td>{:+.2}%</td><td>{:+.2}%</td><td>{:+.2}%</td><td>{:+.2}%</td>\
             <td>{:.3}</td><td>{:.3}</td>\
             <td class=\"entry\">{}</td><td>{:.3}</td><td>{:.3}</td></tr>",
            swatch(&s.policy),
            esc(&s.policy),
            100.0 * s.mean_improvement_vs_linux,
            100.0 * s.min_improvement_vs_linux,
            100.0 * s.mean_improvement_vs_autonuma,
            100.0 * s.min_improvement_vs_autonuma,
            s.mean_fraction_of_oracle,
            s.min_fraction_of_oracle,
            esc(&s.worst_entry),
            s.mean_performance,
            s.mean_unfairness
        );
    }
    out.push_str("</table>");
    let entries = sums.first().map_or(0, |s| s.entries);
    let _ = write!(
        out,
        "<p class=\"note\">Mean and min: the mean and the lowest over the {entries} \
         entries (workload × map) of each policy; worst entry: the one furthest from the \
         oracle, as workload/map. Performance and unfairness: means over the entries.</p>"
    );
}

fn improvement_charts(out: &mut String, rows: &[Row], pols: &[String]) {
    out.push_str(
        "<h2>Improvement over Linux per workload and allocation map</h2>\
         <p>All charts of this section share one scale.",
    );
    // Random suites draw a machine per case: then each heading names it, as the
    // per-case table does.
    let per_case = machine_per_case(rows);
    if per_case {
        out.push_str(" Each heading names the machine its case ran on.");
    }
    // A multi-threaded program's thread count reads apart from a repeat count.
    let threaded = rows.iter().find_map(|r| {
        r.programs
            .iter()
            .zip(&r.threads)
            .find(|(_, &t)| t > 1)
            .map(|(p, &t)| (esc(p), t))
    });
    if let Some((p, t)) = threaded {
        let _ = write!(
            out,
            " In the headings, <code>{p}×{t}</code> is one {p} process of {t} threads \
             and <code>{p} ×2</code> two {p} processes."
        );
    }
    out.push_str("</p>");
    let range = span(
        rows.iter()
            .filter(|r| r.policy != LINUX)
            .map(|r| 100.0 * r.improvement_vs_linux),
        0.0,
        1.0,
    );
    let series: Vec<Series> = pols.iter().map(|p| Series::new(p)).collect();
    let mut workloads: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if !workloads.contains(&(r.suite.as_str(), r.workload.as_str())) {
            workloads.push((&r.suite, &r.workload));
        }
    }
    for (suite, wl) in workloads {
        let mine: Vec<&Row> = rows
            .iter()
            .filter(|r| r.suite == suite && r.workload == wl)
            .collect();
        let mut maps: Vec<&str> = Vec::new();
        for r in &mine {
            if !maps.contains(&r.map.as_str()) {
                maps.push(&r.map);
            }
        }
        let groups: Vec<Group> = maps
            .iter()
            .map(|m| {
                let values = pols
                    .iter()
                    .map(|p| {
                        mine.iter()
                            .find(|r| r.map == *m && &r.policy == p)
                            .map(|r| 100.0 * r.improvement_vs_linux)
                    })
                    .collect();
                Group::new(m, values)
            })
            .collect();
        let _ = write!(out, "<h3>{}</h3>", esc(&case_heading(&mine, per_case)));
        chart(out, &groups, &series, &improvement_axis(&range));
    }
}

/// Whether each workload is a case of its own, on one map: the random suites, or a
/// workloads file of many. Then one chart summarises the cases and a table gives each,
/// rather than a small chart per case.
fn case_per_workload(suite: &str, rows: &[Row]) -> bool {
    if suite.starts_with("random") {
        return true;
    }
    let mut entries: Vec<(&str, &str, &str)> = Vec::new();
    for r in rows {
        let e = (r.suite.as_str(), r.workload.as_str(), r.map.as_str());
        if !entries.contains(&e) {
            entries.push(e);
        }
    }
    let one_map_each = entries
        .iter()
        .enumerate()
        .all(|(i, e)| !entries[..i].iter().any(|f| (f.0, f.1) == (e.0, e.1)));
    one_map_each && entries.len() > 6
}

/// Where an axis of fractions of the oracle starts: just below the lowest, on a step of
/// 0.05, so that differences near 1 show.
fn oracle_base(values: impl IntoIterator<Item = f64>) -> f64 {
    let lowest = values.into_iter().fold(1.0f64, f64::min);
    (((lowest - 0.02) * 20.0).floor() / 20.0).min(0.95)
}

/// One chart over all the cases (per policy: mean, range and every case, of the
/// improvement over Linux and of the fraction of the oracle), then a table of them.
fn case_summary(out: &mut String, rows: &[Row]) {
    let all = policies(rows);
    let entries: Vec<&Row> = rows.iter().filter(|r| r.policy == all[0]).collect();
    // Where a workload has several maps, a case is named by both.
    let with_map = entries.iter().enumerate().any(|(i, e)| {
        entries[..i]
            .iter()
            .any(|f| (&f.suite, &f.workload) == (&e.suite, &e.workload))
    });
    let name = |r: &Row| match with_map {
        true => format!("{}/{}", r.workload, r.map),
        false => r.workload.clone(),
    };
    let spread_of = |pick: &dyn Fn(&Row) -> f64| -> Vec<Spread> {
        all.iter()
            .map(|p| Spread {
                label: p.clone(),
                colour: colour(p),
                points: rows
                    .iter()
                    .filter(|r| &r.policy == p)
                    .map(|r| (name(r), pick(r)))
                    .collect(),
            })
            .collect()
    };
    let improvement = spread_of(&|r| 100.0 * r.improvement_vs_linux);
    let fraction = spread_of(&|r| r.fraction_of_oracle);
    let base = oracle_base(rows.iter().map(|r| r.fraction_of_oracle));
    let title = format!("fraction of the oracle (axis from {base:.2})");
    let axes = [
        improvement_axis(&span(
            improvement
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1)),
            0.0,
            1.0,
        )),
        Axis {
            title: &title,
            range: span([1.0], base, 0.05),
            base,
            format: &|v| format!("{v:.2}"),
        },
    ];
    let _ = write!(
        out,
        "<h2>Improvement over Linux and fraction of the oracle over the {n} cases</h2>\
         <p>A column per policy, in its colour: the bar reaches the mean over the cases, \
         the line runs from the lowest to the highest, and each dot is one case (hover \
         on it for the case and its value). The table under the chart gives every \
         case.</p><div class=\"chart\">{}</div>",
        spreads(&[(&axes[0], &improvement), (&axes[1], &fraction)]),
        n = entries.len()
    );
    case_table(out, rows, &entries, &name);
}

/// A row per case: its name, machine (where cases ran on different machines), programs
/// and map, then a column per policy with its improvement over Linux and, under it, its
/// fraction of the oracle (one column per policy, so the table fits however many).
fn case_table(out: &mut String, rows: &[Row], entries: &[&Row], name: &dyn Fn(&Row) -> String) {
    let all = policies(rows);
    let per_case = machine_per_case(rows);
    let _ = write!(
        out,
        "<h3>Every case</h3><p>In each policy's column: its improvement over Linux, and \
         under it its fraction of the oracle.</p><table class=\"cases\"><tr><th>case</th>{}\
         <th>programs</th><th>map</th>",
        if per_case { "<th>machine</th>" } else { "" },
    );
    for p in &all {
        let _ = write!(out, "<th>{}{}</th>", swatch(p), esc(p));
    }
    out.push_str("</tr>");
    for e in entries {
        let _ = write!(out, "<tr><td class=\"name\">{}</td>", esc(&name(e)));
        if per_case {
            let _ = write!(out, "<td class=\"name\">{}</td>", esc(&e.machine));
        }
        let _ = write!(
            out,
            "<td class=\"entry\">{}</td><td class=\"name\">{}</td>",
            esc(&program_list(&e.programs, &e.threads)),
            esc(&e.map)
        );
        for p in &all {
            let r = rows.iter().find(|r| {
                &r.policy == p && r.suite == e.suite && r.workload == e.workload && r.map == e.map
            });
            match r {
                Some(r) => write!(
                    out,
                    "<td>{:+.2}%<br><span class=\"frac\">{:.3}</span></td>",
                    100.0 * r.improvement_vs_linux,
                    r.fraction_of_oracle
                ),
                None => write!(out, "<td></td>"),
            }
            .ok();
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

/// Each program's speed (solo time / time, averaged over the entries it is in) under
/// every policy, then each policy's performance and unfairness.
fn speed_charts(out: &mut String, rows: &[Row]) {
    let all = policies(rows);
    let mut programs: Vec<&str> = Vec::new();
    for r in rows {
        for p in &r.programs {
            if !programs.contains(&p.as_str()) {
                programs.push(p);
            }
        }
    }
    let groups: Vec<Group> = programs
        .iter()
        .map(|prog| {
            let values = all
                .iter()
                .map(|pol| {
                    let speeds: Vec<f64> = rows
                        .iter()
                        .filter(|r| &r.policy == pol)
                        .flat_map(|r| r.programs.iter().zip(&r.times))
                        .filter(|(name, t)| name.as_str() == *prog && **t > 0.0)
                        .map(|(_, t)| 1.0 / t)
                        .collect();
                    (!speeds.is_empty()).then(|| speeds.iter().sum::<f64>() / speeds.len() as f64)
                })
                .collect();
            Group::new(prog, values)
        })
        .collect();
    let series: Vec<Series> = all.iter().map(|p| Series::new(p)).collect();
    out.push_str(
        "<h2>Performance and unfairness</h2><p>Each program's speed (alone / shared run \
         time, 1 = as fast as alone) under every policy, Linux included, averaged over \
         the entries it appears in.</p>",
    );
    chart(
        out,
        &groups,
        &series,
        &Axis {
            title: "speed (T alone / T)",
            range: span(
                groups
                    .iter()
                    .flat_map(|g| g.values.iter().flatten().copied()),
                0.0,
                0.1,
            ),
            base: 0.0,
            format: &|v| format!("{v:.2}"),
        },
    );
    for (title, pick) in [
        (
            "performance (mean speed)",
            (|s: &Summary| s.mean_performance) as fn(&Summary) -> f64,
        ),
        ("unfairness (CV of speeds)", |s: &Summary| s.mean_unfairness),
    ] {
        // One bar per policy, in the policy's colour.
        let groups: Vec<Group> = summaries(rows)
            .iter()
            .map(|s| Group {
                colour: Some(colour(&s.policy)),
                ..Group::new(&s.policy, vec![Some(pick(s))])
            })
            .collect();
        let _ = write!(out, "<h3>{title}</h3>");
        chart(
            out,
            &groups,
            &[Series::new(title)],
            &Axis {
                title,
                range: span(groups.iter().flat_map(|g| g.values[0]), 0.0, 0.1),
                base: 0.0,
                format: &|v| format!("{v:.3}"),
            },
        );
    }
}

/// Per program: name, best and worst improvement over Linux.
type Extremes = Vec<(String, f64, f64)>;

fn extremes_charts(out: &mut String, rows: &[Row], pols: &[String]) {
    out.push_str(
        "<h2>Per program: best and worst improvement over Linux</h2>\
         <p>Over all entries a program appears in; all charts share one scale. Each \
         policy in its colour: the best solid, the worst hatched.</p>",
    );
    let per: Vec<(&String, Extremes)> = pols
        .iter()
        .filter(|p| p.as_str() != ORACLE)
        .map(|p| (p, program_extremes(rows, p)))
        .filter(|(_, ex)| !ex.is_empty())
        .collect();
    let range = span(
        per.iter()
            .flat_map(|(_, ex)| ex.iter().flat_map(|e| [100.0 * e.1, 100.0 * e.2])),
        0.0,
        1.0,
    );
    for (p, ex) in per {
        // The policy's colour: its best solid, its worst hatched.
        let series = [
            Series::styled(&format!("{p} best"), colour(p), Fill::Solid),
            Series::styled(&format!("{p} worst"), colour(p), Fill::Hatched),
        ];
        let groups: Vec<Group> = ex
            .iter()
            .map(|(name, best, worst)| {
                Group::new(name, vec![Some(100.0 * best), Some(100.0 * worst)])
            })
            .collect();
        let _ = write!(out, "<h3>{}{}</h3>", swatch(p), esc(p));
        chart(out, &groups, &series, &improvement_axis(&range));
    }
}

fn oracle_chart(out: &mut String, rows: &[Row]) {
    out.push_str(
        "<h2>Fraction of the oracle</h2><p>Each policy in its colour: the mean over the \
         entries solid, the lowest hatched.</p>",
    );
    let groups: Vec<Group> = summaries(rows)
        .into_iter()
        .filter(|s| s.policy != ORACLE)
        .map(|s| Group {
            colour: Some(colour(&s.policy)),
            ..Group::new(
                &s.policy,
                vec![
                    Some(s.mean_fraction_of_oracle),
                    Some(s.min_fraction_of_oracle),
                ],
            )
        })
        .collect();
    // Fractions live near 1: the axis starts just below the lowest, a step of 0.05,
    // so differences show; the axis title says so.
    let base = oracle_base(
        groups
            .iter()
            .flat_map(|g| g.values.iter().flatten().copied()),
    );
    let title = format!("fraction of the oracle (axis from {base:.2})");
    chart(
        out,
        &groups,
        &[
            Series::styled("mean", colour(ORACLE), Fill::Solid),
            Series::styled("minimum", colour(ORACLE), Fill::Hatched),
        ],
        &Axis {
            title: &title,
            range: span([1.0], base, 0.05),
            base,
            format: &|v| format!("{v:.2}"),
        },
    );
}

/// A per-case chart's heading: the workload, its machine where cases ran on different
/// machines, and its programs ("r5 on epyc-7742-2s (h264ref ×2, stream×8, lbm)").
fn case_heading(rows: &[&Row], per_case: bool) -> String {
    let Some(first) = rows.first() else {
        return String::new();
    };
    let on = if per_case {
        format!(" on {}", first.machine)
    } else {
        String::new()
    };
    format!(
        "{}{on} ({})",
        first.workload,
        program_list(&first.programs, &first.threads)
    )
}

/// "mcf lbm" as is; a multi-threaded program with its thread count ("stream×8"); a
/// list with repeats by name and count ("compute ×16, stream ×16").
fn program_list(programs: &[String], threads: &[u32]) -> String {
    let names: Vec<String> = programs
        .iter()
        .enumerate()
        .map(|(i, p)| match threads.get(i).copied().unwrap_or(1) {
            t if t > 1 => format!("{p}×{t}"),
            _ => p.clone(),
        })
        .collect();
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for p in &names {
        match counts.iter_mut().find(|(n, _)| n == p) {
            Some((_, k)) => *k += 1,
            None => counts.push((p, 1)),
        }
    }
    if counts.len() == names.len() {
        return names.join(" ");
    }
    counts
        .iter()
        .map(|(n, k)| {
            if *k > 1 {
                format!("{n} ×{k}")
            } else {
                n.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The axis of every improvement-over-Linux chart, on the shared `range`.
fn improvement_axis(range: &std::ops::Range<f64>) -> Axis<'static> {
    Axis {
        title: "improvement over Linux, %",
        range: range.clone(),
        base: 0.0,
        format: &|v| format!("{v:+.1}%"),
    }
}

fn chart(out: &mut String, groups: &[Group], series: &[Series], axis: &Axis) {
    out.push_str("<div class=\"chart\">");
    out.push_str(&grouped_bars(groups, series, axis));
    out.push_str("</div>");
}

fn swatch(name: &str) -> String {
    let c = colour(name);
    format!(
        "<span class=\"sw\" style=\"background:#{:02x}{:02x}{:02x}\"></span>",
        c.0, c.1, c.2
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_is_self_contained_and_escaped() {
        let row = |policy: &str| Row {
            suite: "s".into(),
            workload: "W<1>".into(),
            map: "00".into(),
            machine: "m".into(),
            policy: policy.into(),
            programs: vec!["a".into()],
            threads: vec![1],
            times: vec![1.0],
            avg_slowdown: 0.0,
            performance: 1.0,
            unfairness: 0.0,
            improvement_vs_linux: 0.05,
            improvement_vs_autonuma: 0.01,
            workload_vs_autonuma: 0.01,
            program_improvements: vec![0.05],
            fraction_of_oracle: 0.99,
            proven_optimal: None,
            placements_evaluated: 1,
        };
        let html = page("nmass", "m", &[row("linux"), row("nmass")], "n");
        assert!(html.contains("W&lt;1&gt;"));
        assert!(!html.contains("<script"));
        assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
        assert!(html.matches("<svg").count() >= 5);
        assert!(
            html.contains("allocation map"),
            "the map notation is explained"
        );
        assert!(!html.contains("chart not drawn"), "every chart drawn");
        // The summary keeps every figure under grouped headings (so it fits 1280 px).
        for h in [
            "improvement over Linux</th>",
            "improvement over autonuma</th>",
            "fraction of the oracle</th>",
            "worst entry</th>",
            "performance</th>",
            "unfairness</th>",
        ] {
            assert!(html.contains(h), "{h}");
        }
        let summary = &html[html.find("<h2>Summary").unwrap()..html.find("</table>").unwrap()];
        assert_eq!(summary.matches("<th").count(), 13, "{summary}");
        assert_eq!(summary.matches("<td").count(), 2 * 10, "{summary}");
    }

    #[test]
    fn repeated_programs_are_counted() {
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(program_list(&v(&["mcf", "lbm"]), &[1, 1]), "mcf lbm");
        assert_eq!(
            program_list(
                &v(&["compute", "stream", "compute", "stream", "lbm"]),
                &[1; 5]
            ),
            "compute ×2, stream ×2, lbm"
        );
        // Threads are part of what repeats: two 8-thread streams, one single-threaded.
        assert_eq!(
            program_list(&v(&["stream", "mcf", "stream", "stream"]), &[8, 1, 8, 1]),
            "stream×8 ×2, mcf, stream"
        );
    }

    /// Random suites draw a machine per case and multi-threaded programs: each per-case
    /// heading names the case's machine and the thread counts, as the per-case table
    /// names the machine; one machine for every case is named once, in the title.
    #[test]
    fn case_headings_name_the_machine_and_the_threads() {
        let row = |workload: &str, machine: &str, policy: &str| Row {
            suite: "random".into(),
            workload: workload.into(),
            map: "00".into(),
            machine: machine.into(),
            policy: policy.into(),
            programs: vec!["stream".into(), "mcf".into()],
            threads: vec![8, 1],
            times: vec![1.0, 1.0],
            avg_slowdown: 0.0,
            performance: 1.0,
            unfairness: 0.0,
            improvement_vs_linux: 0.0,
            improvement_vs_autonuma: 0.0,
            workload_vs_autonuma: 0.0,
            program_improvements: vec![0.0, 0.0],
            fraction_of_oracle: 1.0,
            proven_optimal: None,
            placements_evaluated: 1,
        };
        let rows: Vec<Row> = [("r0", "epyc-7742-2s"), ("r1", "2n:2l:2c:2t")]
            .iter()
            .flat_map(|(w, m)| [row(w, m, "linux"), row(w, m, "auto")])
            .collect();
        // A few cases, as a workloads file gives: a chart per case, under its heading.
        let html = page("workloads", "machines drawn per case", &rows, "n");
        assert!(
            html.contains("<h3>r0 on epyc-7742-2s (stream×8 mcf)</h3>"),
            "{html}"
        );
        assert!(
            html.contains("<h3>r1 on 2n:2l:2c:2t (stream×8 mcf)</h3>"),
            "{html}"
        );
        // A random suite: one chart over the cases, and a row per case in the table.
        let html = page("random", "machines drawn per case", &rows, "n");
        assert!(!html.contains("<h3>r0"), "{html}");
        assert!(
            html.contains(
                "<td class=\"name\">r0</td><td class=\"name\">epyc-7742-2s</td>\
                 <td class=\"entry\">stream×8 mcf</td>"
            ),
            "{html}"
        );
        assert!(
            html.contains("<td class=\"name\">r1</td><td class=\"name\">2n:2l:2c:2t</td>"),
            "{html}"
        );
        // The same machine for every case: named in the title, not in each heading or
        // row.
        let same: Vec<Row> = rows
            .iter()
            .map(|r| Row {
                machine: "nehalem-e5520".into(),
                ..r.clone()
            })
            .collect();
        let html = page("workloads", "nehalem-e5520", &same, "n");
        assert!(html.contains("<h3>r0 (stream×8 mcf)</h3>"), "{html}");
        let html = page("random", "nehalem-e5520", &same, "n");
        assert!(
            html.contains("<td class=\"name\">r0</td><td class=\"entry\">stream×8 mcf</td>"),
            "{html}"
        );
    }
}
