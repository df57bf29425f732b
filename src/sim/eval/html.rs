//! The evaluation as one self-contained HTML page with SVG charts in the manner of the
//! published figures: improvement over Linux per workload and allocation map, each
//! program's best and worst improvement, and every policy as a fraction of the oracle.
//! No scripts and no external files, so the report can be mailed or archived as is.

use std::fmt::Write;

use super::report::{policies, program_extremes, summaries};
use super::runner::{Row, LINUX, ORACLE};

const COLOURS: &[&str] = &[
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

pub fn page(title: &str, rows: &[Row], notes: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>body{{font-family:sans-serif;max-width:1100px;margin:auto}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px;\
         text-align:right}}svg{{display:block;margin:8px 0}}</style></head><body>\
         <h1>{t}</h1><p>{n}</p>",
        t = esc(title),
        n = esc(notes)
    );
    let pols: Vec<String> = policies(rows).into_iter().filter(|p| p != LINUX).collect();
    out.push_str("<h2>Summary</h2><table><tr><th>suite</th><th>policy</th><th>mean improvement</th><th>min improvement</th><th>mean fraction of oracle</th><th>min fraction</th><th>worst entry</th></tr>");
    for s in summaries(rows) {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:+.2}%</td><td>{:+.2}%</td><td>{:.3}</td><td>{:.3}</td><td>{}</td></tr>",
            esc(&s.suite),
            esc(&s.policy),
            100.0 * s.mean_improvement_vs_linux,
            100.0 * s.min_improvement_vs_linux,
            s.mean_fraction_of_oracle,
            s.min_fraction_of_oracle,
            esc(&s.worst_entry)
        );
    }
    out.push_str("</table>");
    out.push_str(&legend(&pols));

    out.push_str("<h2>Improvement over Linux per workload and allocation map</h2>");
    let mut workloads: Vec<(String, String)> = Vec::new();
    for r in rows {
        let k = (r.suite.clone(), r.workload.clone());
        if !workloads.contains(&k) {
            workloads.push(k);
        }
    }
    for (suite, wl) in &workloads {
        let mine: Vec<&Row> = rows
            .iter()
            .filter(|r| &r.suite == suite && &r.workload == wl)
            .collect();
        let mut maps: Vec<String> = Vec::new();
        for r in &mine {
            if !maps.contains(&r.map) {
                maps.push(r.map.clone());
            }
        }
        let groups: Vec<(String, Vec<f64>)> = maps
            .iter()
            .map(|m| {
                let vals = pols
                    .iter()
                    .map(|p| {
                        mine.iter()
                            .find(|r| &r.map == m && &r.policy == p)
                            .map_or(0.0, |r| 100.0 * r.improvement_vs_linux)
                    })
                    .collect();
                (m.clone(), vals)
            })
            .collect();
        let programs = mine
            .first()
            .map(|r| r.programs.join(" "))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<h3>{} {} ({})</h3>",
            esc(suite),
            esc(wl),
            esc(&programs)
        );
        out.push_str(&bars(&groups, "% improvement over linux", 0.0));
    }

    out.push_str("<h2>Per program: best and worst improvement over Linux</h2>");
    for p in pols.iter().filter(|p| p.as_str() != ORACLE) {
        let ex = program_extremes(rows, p);
        if ex.is_empty() {
            continue;
        }
        let groups: Vec<(String, Vec<f64>)> = ex
            .iter()
            .map(|(name, best, worst)| (name.clone(), vec![100.0 * best, 100.0 * worst]))
            .collect();
        let _ = write!(out, "<h3>{}</h3>", esc(p));
        out.push_str(&legend(&["best".to_string(), "worst".to_string()]));
        out.push_str(&bars(&groups, "% improvement over linux", 0.0));
    }

    out.push_str("<h2>Fraction of the oracle</h2>");
    let groups: Vec<(String, Vec<f64>)> = summaries(rows)
        .into_iter()
        .filter(|s| s.policy != ORACLE)
        .map(|s| {
            (
                format!("{} {}", s.suite, s.policy),
                vec![s.mean_fraction_of_oracle, s.min_fraction_of_oracle],
            )
        })
        .collect();
    out.push_str(&legend(&["mean".to_string(), "minimum".to_string()]));
    // Fractions live near 1: start the axis just below the lowest so differences show.
    let lowest = groups
        .iter()
        .flat_map(|g| g.1.iter().copied())
        .fold(1.0f64, f64::min);
    let base = ((lowest - 0.02) * 20.0).floor() / 20.0;
    out.push_str(&bars(
        &groups,
        "performance / oracle performance",
        base.min(0.95),
    ));
    out.push_str("</body></html>\n");
    out
}

fn legend(names: &[String]) -> String {
    let mut out = String::from("<p>");
    for (i, n) in names.iter().enumerate() {
        let _ = write!(
            out,
            "<span style=\"color:{}\">&#9632;</span> {} &nbsp; ",
            COLOURS[i % COLOURS.len()],
            esc(n)
        );
    }
    out.push_str("</p>");
    out
}

/// Grouped bar chart: one group per label, one bar per series, bars drawn from
/// `base` (0 for signed figures), and an axis labelled at its extremes and at `base`.
fn bars(groups: &[(String, Vec<f64>)], axis: &str, base: f64) -> String {
    let series = groups.iter().map(|g| g.1.len()).max().unwrap_or(0).max(1);
    let bar_w = 10.0;
    let group_w = bar_w * series as f64 + 14.0;
    let (h, top, left) = (180.0, 16.0, 60.0);
    // Room on the right for the last rotated label.
    let width = left + group_w * groups.len() as f64 + 90.0;
    let vals = groups.iter().flat_map(|g| g.1.iter().copied());
    let (mut lo, mut hi) = vals.fold((base, base), |(l, h), v| (l.min(v), h.max(v)));
    if hi - lo < 1e-9 {
        hi = lo + 1.0;
    }
    let pad = (hi - lo) * 0.05;
    lo -= pad;
    hi += pad;
    let y = |v: f64| top + (hi - v) / (hi - lo) * h;
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0}\" height=\"{:.0}\" font-size=\"10\">",
        width,
        h + top + 60.0
    );
    let _ = write!(
        out,
        "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#000\"/>",
        width - 85.0,
        y(base),
        y(base)
    );
    for v in [hi - pad, lo + pad, base] {
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{v:.2}</text>",
            left - 4.0,
            y(v) + 3.0
        );
    }
    let _ = write!(
        out,
        "<text x=\"10\" y=\"{:.1}\" transform=\"rotate(-90 10 {:.1})\" text-anchor=\"middle\">{}</text>",
        top + h / 2.0,
        top + h / 2.0,
        esc(axis)
    );
    for (gi, (label, vals)) in groups.iter().enumerate() {
        let x0 = left + 7.0 + gi as f64 * group_w;
        for (si, &v) in vals.iter().enumerate() {
            let (a, b) = (y(v), y(base));
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}: {v:.3}</title></rect>",
                x0 + si as f64 * bar_w,
                a.min(b),
                bar_w - 1.0,
                (a - b).abs().max(0.5),
                COLOURS[si % COLOURS.len()],
                esc(label)
            );
        }
        let cx = x0 + bar_w * vals.len() as f64 / 2.0;
        let ly = top + h + 12.0;
        let _ = write!(
            out,
            "<text x=\"{cx:.1}\" y=\"{ly:.1}\" transform=\"rotate(40 {cx:.1} {ly:.1})\">{}</text>",
            esc(label)
        );
    }
    out.push_str("</svg>");
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_is_self_contained_and_escaped() {
        let row = Row {
            suite: "s".into(),
            workload: "W<1>".into(),
            map: "00".into(),
            policy: "nmass".into(),
            programs: vec!["a".into()],
            times: vec![1.0],
            avg_slowdown: 0.0,
            performance: 1.0,
            unfairness: 0.0,
            improvement_vs_linux: 0.05,
            program_improvements: vec![0.05],
            fraction_of_oracle: 0.99,
            proven_optimal: None,
            placements_evaluated: 1,
        };
        let html = page("t", &[row], "n");
        assert!(html.contains("W&lt;1&gt;"));
        assert!(!html.contains("<script"));
        assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
        assert!(html.matches("<svg").count() >= 3);
    }
}
