//! Grouped bar charts as inline SVG, drawn with `plotters`: real axes with ticks and
//! gridlines, a visible zero, one colour per policy in every report, and hover text.
//!
//! Callers give the y range so charts meant to be compared share one scale.

use std::ops::Range;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One bar series: a policy (or "best"/"worst"), its colour the same in every chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub colour: RGBColor,
}

impl Series {
    pub fn new(name: &str) -> Series {
        Series {
            name: name.to_string(),
            colour: colour(name),
        }
    }
}

/// One group of bars on the x axis; `None` where a series has no value.
#[derive(Debug, Clone)]
pub struct Group {
    pub label: String,
    pub values: Vec<Option<f64>>,
    /// Drawn in this colour instead of the series' (one bar per policy, coloured as
    /// the policy).
    pub colour: Option<RGBColor>,
}

impl Group {
    pub fn new(label: &str, values: Vec<Option<f64>>) -> Group {
        Group {
            label: label.to_string(),
            values,
            colour: None,
        }
    }
}

/// Colours of the policies and series numasched reports (Tableau 10), fixed by name so
/// a policy looks the same in every report; other names get one from their hash.
pub fn colour(name: &str) -> RGBColor {
    const NAMED: &[(&str, RGBColor)] = &[
        ("linux", RGBColor(0x79, 0x79, 0x79)),
        ("autonuma", RGBColor(0xba, 0xb0, 0xac)),
        ("maxlocal", RGBColor(0x4e, 0x79, 0xa7)),
        ("nmass", RGBColor(0xf2, 0x8e, 0x2b)),
        ("nmass-regression", RGBColor(0x9c, 0x75, 0x5f)),
        ("nmass-migrate", RGBColor(0xb0, 0x7a, 0xa1)),
        ("membus", RGBColor(0x76, 0xb7, 0xb2)),
        ("cmload", RGBColor(0x59, 0xa1, 0x4f)),
        ("numad", RGBColor(0xed, 0xc9, 0x48)),
        ("oracle", RGBColor(0x33, 0x33, 0x33)),
        ("auto", RGBColor(0xe1, 0x57, 0x59)),
        ("auto-migrate", RGBColor(0xff, 0x9d, 0xa7)),
        ("best", RGBColor(0x59, 0xa1, 0x4f)),
        ("worst", RGBColor(0xe1, 0x57, 0x59)),
        ("mean", RGBColor(0x4e, 0x79, 0xa7)),
        ("minimum", RGBColor(0xf2, 0x8e, 0x2b)),
    ];
    if let Some((_, c)) = NAMED.iter().find(|(n, _)| *n == name) {
        return *c;
    }
    let h = name
        .bytes()
        .fold(2166136261u32, |h, b| (h ^ b as u32).wrapping_mul(16777619));
    RGBColor(
        64 + (h & 0x7f) as u8,
        64 + ((h >> 8) & 0x7f) as u8,
        64 + ((h >> 16) & 0x7f) as u8,
    )
}

/// A y range that holds every value and `floor`, padded by 5% and widened to at least
/// `min_span`, for charts drawn on one shared scale.
pub fn span(values: impl IntoIterator<Item = f64>, floor: f64, min_span: f64) -> Range<f64> {
    let (mut lo, mut hi) = values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold((floor, floor), |(l, h), v| (l.min(v), h.max(v)));
    if hi - lo < min_span {
        hi = lo + min_span;
    }
    let pad = (hi - lo) * 0.05;
    lo -= pad;
    hi += pad;
    lo..hi
}

/// How a chart reads its values.
pub struct Axis<'a> {
    /// The y axis title, with its unit.
    pub title: &'a str,
    pub range: Range<f64>,
    /// Bars start here (0 for signed figures).
    pub base: f64,
    /// Tick label of a value.
    pub format: &'a dyn Fn(f64) -> String,
}

const HEIGHT: u32 = 280;
const LEFT: u32 = 70;
const BOTTOM: u32 = 40;

/// The chart as an `<svg>` element; an error from the drawing library becomes a short
/// note in its place rather than a failed report.
pub fn grouped_bars(groups: &[Group], series: &[Series], axis: &Axis) -> String {
    match draw(groups, series, axis) {
        Ok(svg) => svg,
        Err(e) => format!("<p>(chart not drawn: {})</p>", esc(&e)),
    }
}

fn draw(groups: &[Group], series: &[Series], axis: &Axis) -> Result<String, String> {
    let longest = groups.iter().map(|g| g.label.len()).max().unwrap_or(1) as u32;
    let per_bar = 9;
    let group_px = (per_bar * series.len().max(1) as u32 + 10).max(longest * 7 + 8);
    let width = LEFT + 20 + group_px * groups.len().max(1) as u32;
    let n = groups.len().max(1) as f64;
    let mut svg = String::new();
    let mut hover = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(BOTTOM)
            .y_label_area_size(LEFT - 8)
            .build_cartesian_2d(0.0..n, axis.range.clone())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(8)
            .y_desc(axis.title)
            .y_label_formatter(&|v| (axis.format)(*v))
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .axis_desc_style(("sans-serif", 13))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(|e| e.to_string())?;
        let k = series.len().max(1) as f64;
        let inner = 0.8;
        let w = inner / k;
        let range = axis.range.end - axis.range.start;
        for (gi, g) in groups.iter().enumerate() {
            let x0 = gi as f64 + (1.0 - inner) / 2.0;
            for (si, s) in series.iter().enumerate() {
                let Some(v) = g.values.get(si).copied().flatten() else {
                    continue;
                };
                let (a, b) = (x0 + si as f64 * w, x0 + (si as f64 + 0.85) * w);
                // A value at the base still shows: a bar at least 0.6% of the axis tall.
                let top = if (v - axis.base).abs() < range * 0.006 {
                    axis.base + range * 0.006
                } else {
                    v
                };
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(a, axis.base), (b, top)],
                        g.colour.unwrap_or(s.colour).filled(),
                    )))
                    .map_err(|e| e.to_string())?;
                let (p, q) = (
                    chart.backend_coord(&(a, axis.base.max(top))),
                    chart.backend_coord(&(b, axis.base.min(top))),
                );
                hover.push_str(&format!(
                    "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill-opacity=\"0\">\
                     <title>{}, {}: {}</title></rect>",
                    p.0,
                    p.1,
                    (q.0 - p.0).max(1),
                    (q.1 - p.1).max(1),
                    esc(&s.name),
                    esc(&g.label),
                    esc(&(axis.format)(v))
                ));
            }
        }
        // The base line, drawn over the bars so zero is always visible.
        chart
            .draw_series(LineSeries::new(
                [(0.0, axis.base), (n, axis.base)],
                BLACK.stroke_width(1),
            ))
            .map_err(|e| e.to_string())?;
        let style =
            TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        for (gi, g) in groups.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(gi as f64 + 0.5, axis.range.start));
            root.draw(&Text::new(g.label.clone(), (x, y + 6), style.clone()))
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    let Some(end) = svg.rfind("</svg>") else {
        return Err("the SVG backend wrote no closing tag".into());
    };
    svg.insert_str(end, &hover);
    Ok(svg)
}

/// Text made safe inside HTML and SVG alike (the report and its charts).
pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_has_one_colour_everywhere() {
        assert_eq!(colour("auto"), colour("auto"));
        assert_ne!(colour("auto"), colour("nmass"));
        assert_eq!(colour("some-new-policy"), colour("some-new-policy"));
    }

    #[test]
    fn the_span_holds_every_value_and_the_base() {
        let r = span([-3.0, 7.0], 0.0, 1.0);
        assert!(r.start < -3.0 && r.end > 7.0);
        let r = span([0.97, 0.99], 0.9, 0.05);
        assert!(r.start < 0.9 && r.end > 0.99);
    }

    #[test]
    fn bars_have_hover_text_and_a_zero_bar_shows() {
        let groups = vec![
            Group::new("1100", vec![Some(2.5), Some(0.0)]),
            Group::new("0000", vec![Some(-4.0), None]),
        ];
        let series = [Series::new("nmass"), Series::new("auto")];
        let svg = grouped_bars(
            &groups,
            &series,
            &Axis {
                title: "% improvement over Linux",
                range: span([2.5, -4.0], 0.0, 1.0),
                base: 0.0,
                format: &|v| format!("{v:+.1}%"),
            },
        );
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("<title>auto, 1100: +0.0%</title>"), "{svg}");
        assert!(svg.contains("<title>nmass, 0000: -4.0%</title>"), "{svg}");
        assert_eq!(
            svg.matches("<title>").count(),
            3,
            "no bar for a missing value"
        );
        assert!(svg.contains("% improvement over Linux"));
    }
}
