//! Charts as inline SVG, drawn by hand so that every size on the page is the one
//! written here: grouped bars on real axes (ticks, gridlines, a visible zero), a legend
//! beside every chart, one colour per policy in every report (a second figure of the
//! same policy is the same colour, hatched) and hover text on every bar and dot.
//!
//! Every chart fits [`WIDTH`] pixels, the content width of the report in a 1280-pixel
//! window: a chart whose bars would be too thin wraps its groups into rows on the same
//! scale. Every text is at least [`MIN_FONT_PX`] pixels. Callers give the y range so
//! charts meant to be compared share one scale.

use std::fmt::Write;
use std::ops::Range;

/// The widest a chart is drawn, in pixels: a 1280-pixel window less the page's margins
/// (2 × 24) and a scrollbar (up to 17), with room to spare.
pub const WIDTH: f64 = 1180.0;
/// The smallest text in a chart (ticks, group labels, legend), in pixels.
pub const MIN_FONT_PX: f64 = 12.0;
const TITLE_PX: f64 = 13.0;
const LEGEND_PX: f64 = 13.0;
/// The plot's height, per row of groups.
const PLOT_H: f64 = 220.0;
/// The plot's height in a chart of spreads (many dots to tell apart).
const SPREAD_H: f64 = 280.0;
const TOP: f64 = 12.0;
/// Bars are never thinner than this (the chart wraps instead) nor wider.
const MIN_BAR: f64 = 5.0;
const MAX_BAR: f64 = 36.0;
/// The share of a group's slot its bars take.
const INNER: f64 = 0.84;
/// A bar less tall than this (a value at or near the base) is drawn as a marker this
/// tall across the base line, so a value equal to Linux's still shows.
const MARKER_H: f64 = 5.0;
/// Rotated group labels are cut to this many characters (the hover text has them whole).
const LABEL_CHARS: usize = 24;
const LEGEND_CHARS: usize = 30;

/// A colour, as the report writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    pub fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }

    /// The outline of a bar or marker in this colour.
    fn darker(self) -> Rgb {
        let d = |c: u8| (f64::from(c) * 0.6) as u8;
        Rgb(d(self.0), d(self.1), d(self.2))
    }
}

/// How a series' bars are filled: a policy's colour solid, or the same colour hatched
/// for its second figure (worst beside best, minimum beside mean).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    Solid,
    Hatched,
}

impl Fill {
    fn word(self) -> &'static str {
        match self {
            Fill::Solid => "solid",
            Fill::Hatched => "hatched",
        }
    }
}

/// One bar series: a policy, in its colour, or one of a policy's figures.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub colour: Rgb,
    pub fill: Fill,
}

impl Series {
    /// A policy's series, in the policy's colour.
    pub fn new(name: &str) -> Series {
        Series::styled(name, colour(name), Fill::Solid)
    }

    pub fn styled(name: &str, colour: Rgb, fill: Fill) -> Series {
        Series {
            name: name.to_string(),
            colour,
            fill,
        }
    }
}

/// One group of bars on the x axis; `None` where a series has no value.
#[derive(Debug, Clone)]
pub struct Group {
    pub label: String,
    pub values: Vec<Option<f64>>,
    /// Drawn in this colour instead of the series' (a group per policy, coloured as
    /// the policy; the series then differ by fill and the legend names the groups).
    pub colour: Option<Rgb>,
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

/// Colours of the policies numasched reports (Tableau 10), fixed by name so a policy
/// looks the same in every report and every chart; other names get one from their hash.
pub fn colour(name: &str) -> Rgb {
    const NAMED: &[(&str, Rgb)] = &[
        ("linux", Rgb(0x79, 0x79, 0x79)),
        ("autonuma", Rgb(0xba, 0xb0, 0xac)),
        ("maxlocal", Rgb(0x4e, 0x79, 0xa7)),
        ("nmass", Rgb(0xf2, 0x8e, 0x2b)),
        ("nmass-regression", Rgb(0x9c, 0x75, 0x5f)),
        ("nmass-migrate", Rgb(0xb0, 0x7a, 0xa1)),
        ("membus", Rgb(0x76, 0xb7, 0xb2)),
        ("cmload", Rgb(0x59, 0xa1, 0x4f)),
        ("numad", Rgb(0xed, 0xc9, 0x48)),
        ("oracle", Rgb(0x33, 0x33, 0x33)),
        ("auto", Rgb(0xe1, 0x57, 0x59)),
        ("auto-migrate", Rgb(0xff, 0x9d, 0xa7)),
    ];
    if let Some((_, c)) = NAMED.iter().find(|(n, _)| *n == name) {
        return *c;
    }
    let h = fnv(name.bytes());
    Rgb(
        64 + (h & 0x7f) as u8,
        64 + ((h >> 8) & 0x7f) as u8,
        64 + ((h >> 16) & 0x7f) as u8,
    )
}

fn fnv(bytes: impl IntoIterator<Item = u8>) -> u32 {
    bytes.into_iter().fold(2166136261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16777619)
    })
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

/// Text made safe inside HTML and SVG alike (the report and its charts).
pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// About how wide `s` is set at `px` pixels (DejaVu Sans and its like; generous, so
/// what is laid out by it fits).
fn text_w(s: &str, px: f64) -> f64 {
    s.chars().count() as f64 * 0.64 * px
}

/// `s` cut to `n` characters, with an ellipsis where it was cut.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut t: String = s.chars().take(n - 1).collect();
    t.push('…');
    t
}

fn text(svg: &mut String, x: f64, y: f64, px: f64, attrs: &str, s: &str) {
    let _ = write!(
        svg,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{px}\"{attrs}>{}</text>",
        esc(s)
    );
}

/// The hatch patterns a chart uses, defined once in its `<defs>` under ids unique to the
/// chart (from its content), so charts on one page do not share ids.
struct Paint {
    prefix: String,
    hatched: Vec<Rgb>,
}

impl Paint {
    fn new(seed: u32) -> Paint {
        Paint {
            prefix: format!("h{seed:08x}"),
            hatched: Vec::new(),
        }
    }

    /// The fill and outline attributes of a shape in `c`, filled as `fill`.
    fn attrs(&mut self, c: Rgb, fill: Fill) -> String {
        match fill {
            Fill::Solid => format!("fill=\"{}\"", c.hex()),
            Fill::Hatched => {
                if !self.hatched.contains(&c) {
                    self.hatched.push(c);
                }
                format!(
                    "fill=\"url(#{}-{:02x}{:02x}{:02x})\" stroke=\"{}\" stroke-width=\"1\"",
                    self.prefix,
                    c.0,
                    c.1,
                    c.2,
                    c.hex()
                )
            }
        }
    }

    fn defs(&self) -> String {
        let mut out = String::new();
        if self.hatched.is_empty() {
            return out;
        }
        out.push_str("<defs>");
        for c in &self.hatched {
            let _ = write!(
                out,
                "<pattern id=\"{}-{:02x}{:02x}{:02x}\" width=\"6\" height=\"6\" \
                 patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">\
                 <rect width=\"6\" height=\"6\" fill=\"#fff\"/>\
                 <rect width=\"3\" height=\"6\" fill=\"{}\"/></pattern>",
                self.prefix,
                c.0,
                c.1,
                c.2,
                c.hex()
            );
        }
        out.push_str("</defs>");
        out
    }
}

/// What a chart's legend says: lines of explanation, then one entry per colour with
/// its swatches (one per fill the chart uses for it).
struct Legend {
    key: Vec<String>,
    entries: Vec<(Vec<(Rgb, Fill)>, String)>,
}

impl Legend {
    /// Groups in their own colours (one per policy): an entry per group, with a swatch
    /// per series' fill, and a line per fill saying which figure it is. Otherwise an
    /// entry per series.
    fn of(groups: &[Group], series: &[Series]) -> Legend {
        if groups.iter().any(|g| g.colour.is_some()) {
            let fallback = series.first().map_or(Rgb(0, 0, 0), |s| s.colour);
            let mut entries: Vec<(Vec<(Rgb, Fill)>, String)> = Vec::new();
            for g in groups {
                if entries.iter().any(|(_, l)| *l == g.label) {
                    continue;
                }
                let c = g.colour.unwrap_or(fallback);
                entries.push((
                    series.iter().map(|s| (c, s.fill)).collect(),
                    g.label.clone(),
                ));
            }
            let key = if series.len() > 1 {
                series
                    .iter()
                    .map(|s| format!("{}: {}", s.fill.word(), s.name))
                    .collect()
            } else {
                Vec::new()
            };
            return Legend { key, entries };
        }
        Legend {
            key: Vec::new(),
            entries: series
                .iter()
                .map(|s| (vec![(s.colour, s.fill)], s.name.clone()))
                .collect(),
        }
    }

    fn swatches(&self) -> usize {
        self.entries.iter().map(|(s, _)| s.len()).max().unwrap_or(1)
    }

    fn width(&self) -> f64 {
        let entry = self
            .entries
            .iter()
            .map(|(_, l)| text_w(&cut(l, LEGEND_CHARS), LEGEND_PX))
            .fold(0.0, f64::max)
            + 18.0 * self.swatches() as f64
            + 4.0;
        let key = self
            .key
            .iter()
            .map(|k| text_w(&cut(k, LEGEND_CHARS + 4), MIN_FONT_PX))
            .fold(0.0, f64::max);
        entry.max(key) + 8.0
    }

    fn height(&self) -> f64 {
        (self.key.len() + self.entries.len()) as f64 * 19.0 + 4.0
    }

    fn draw(&self, svg: &mut String, paint: &mut Paint, x: f64, y: f64) {
        let mut y = y;
        for k in &self.key {
            text(
                svg,
                x,
                y + 13.0,
                MIN_FONT_PX,
                " fill=\"#333\"",
                &cut(k, LEGEND_CHARS + 4),
            );
            y += 19.0;
        }
        let sw = self.swatches() as f64;
        for (swatches, label) in &self.entries {
            for (i, (c, fill)) in swatches.iter().enumerate() {
                let _ = write!(
                    svg,
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"13\" height=\"13\" {}/>",
                    x + 18.0 * i as f64,
                    y + 2.0,
                    paint.attrs(*c, *fill)
                );
            }
            text(
                svg,
                x + 18.0 * sw + 2.0,
                y + 13.0,
                LEGEND_PX,
                "",
                &cut(label, LEGEND_CHARS),
            );
            y += 19.0;
        }
    }
}

/// Ticks at 1, 2, 2.5 or 5 times a power of ten, about six over the range.
fn ticks(r: &Range<f64>) -> Vec<f64> {
    let span = r.end - r.start;
    if !(span > 0.0 && span.is_finite()) {
        return vec![r.start];
    }
    let raw = span / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut out = Vec::new();
    let mut i = (r.start / step).ceil();
    while i * step <= r.end + step * 1e-9 {
        let t = i * step;
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        i += 1.0;
    }
    out
}

/// A y axis on the page: values to pixels.
struct Scale {
    lo: f64,
    hi: f64,
    top: f64,
    bottom: f64,
}

impl Scale {
    fn y(&self, v: f64) -> f64 {
        let v = v.clamp(self.lo, self.hi);
        self.bottom - (v - self.lo) / (self.hi - self.lo) * (self.bottom - self.top)
    }
}

/// The room the y axis needs left of the plot: its title and its tick labels.
fn axis_room(axis: &Axis) -> f64 {
    let widest = ticks(&axis.range)
        .iter()
        .map(|t| text_w(&(axis.format)(*t), MIN_FONT_PX))
        .fold(0.0, f64::max);
    24.0 + widest + 8.0
}

/// Gridlines, tick labels, the axis line and its title (at `title_x`), for a plot from
/// `left` to `right` on `scale`.
fn draw_axis(
    svg: &mut String,
    axis: &Axis,
    scale: &Scale,
    (left, right): (f64, f64),
    title_x: f64,
) {
    for t in ticks(&axis.range) {
        let y = scale.y(t);
        let _ = write!(
            svg,
            "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{right:.1}\" y2=\"{y:.1}\" \
             stroke=\"#e2e2e2\"/>"
        );
        text(
            svg,
            left - 6.0,
            y + 4.0,
            MIN_FONT_PX,
            " text-anchor=\"end\"",
            &(axis.format)(t),
        );
    }
    let _ = write!(
        svg,
        "<line x1=\"{left:.1}\" y1=\"{:.1}\" x2=\"{left:.1}\" y2=\"{:.1}\" stroke=\"#444\"/>",
        scale.top, scale.bottom
    );
    let mid = (scale.top + scale.bottom) / 2.0;
    let _ = write!(
        svg,
        "<text transform=\"translate({title_x:.1},{mid:.1}) rotate(-90)\" text-anchor=\"middle\" \
         font-size=\"{TITLE_PX}\">{}</text>",
        esc(axis.title)
    );
}

/// The base line across the plot: black, so zero always shows.
fn draw_base(svg: &mut String, scale: &Scale, base: f64, left: f64, right: f64) {
    let y = scale.y(base);
    let _ = write!(
        svg,
        "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{right:.1}\" y2=\"{y:.1}\" \
         stroke=\"#000\"/>"
    );
}

/// Group labels under a row: level where each fits its slot, else turned 35° (and
/// cut to [`LABEL_CHARS`]); returns the room they take under the plot.
fn label_room(labels: &[&str], slot: f64) -> (bool, f64) {
    let widest = labels
        .iter()
        .map(|l| text_w(l, MIN_FONT_PX))
        .fold(0.0, f64::max);
    if widest <= slot - 6.0 {
        return (false, 24.0);
    }
    let w = labels
        .iter()
        .map(|l| text_w(&cut(l, LABEL_CHARS), MIN_FONT_PX))
        .fold(0.0, f64::max);
    (true, 14.0 + w * 0.574 + MIN_FONT_PX)
}

/// How far left of its anchor a turned label reaches.
fn turned_reach(label: &str) -> f64 {
    text_w(&cut(label, LABEL_CHARS), MIN_FONT_PX) * 0.82 + 4.0
}

fn draw_label(svg: &mut String, label: &str, x: f64, bottom: f64, turned: bool) {
    if turned {
        let _ = write!(
            svg,
            "<text transform=\"translate({x:.1},{:.1}) rotate(-35)\" text-anchor=\"end\" \
             font-size=\"{MIN_FONT_PX}\"><title>{}</title>{}</text>",
            bottom + 12.0,
            esc(label),
            esc(&cut(label, LABEL_CHARS))
        );
    } else {
        text(
            svg,
            x,
            bottom + 17.0,
            MIN_FONT_PX,
            " text-anchor=\"middle\"",
            label,
        );
    }
}

/// The `<svg>` element around `body`, `width` × `height`, with the hatches it uses.
fn wrap(body: &str, paint: &Paint, width: f64, height: f64) -> String {
    let (w, h) = (width.ceil(), height.ceil());
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\">{}\
         <rect width=\"{w}\" height=\"{h}\" fill=\"#fff\"/>{body}</svg>",
        paint.defs()
    )
}

/// How a grouped bar chart is laid out: the plot's left edge and width, the groups per
/// row and each group's slot.
struct Layout {
    left: f64,
    plot_w: f64,
    per_row: usize,
    slot: f64,
    turned: bool,
    label_h: f64,
    rows: usize,
}

impl Layout {
    fn of(groups: &[Group], series: usize, axis: &Axis, legend_w: f64) -> Layout {
        let n = groups.len().max(1);
        let k = series.max(1) as f64;
        let mut left = axis_room(axis);
        let room = |left: f64| WIDTH - left - 16.0 - legend_w - 4.0;
        let min_slot = k * MIN_BAR / INNER + 2.0;
        let per_row = ((room(left) / min_slot).floor() as usize).clamp(1, n);
        let rows = n.div_ceil(per_row);
        let per_row = n.div_ceil(rows);
        // Wide enough for bars of about 22 pixels, at least 480 pixels, at most the room.
        let comfortable = per_row as f64 * (k * 22.0 / INNER + 8.0);
        let mut plot_w = comfortable.clamp(480f64.min(room(left)), room(left));
        let labels: Vec<&str> = groups.iter().map(|g| g.label.as_str()).collect();
        let (turned, label_h) = label_room(&labels, plot_w / per_row as f64);
        if turned {
            // The first group's turned label must not reach past the chart's left edge.
            let reach = groups
                .iter()
                .step_by(per_row)
                .map(|g| turned_reach(&g.label))
                .fold(0.0, f64::max);
            let need = reach - plot_w / per_row as f64 / 2.0;
            if need > left {
                left = need;
                plot_w = plot_w.min(room(left));
            }
        }
        Layout {
            left,
            plot_w,
            per_row,
            slot: plot_w / per_row as f64,
            turned,
            label_h,
            rows,
        }
    }

    fn row_h(&self) -> f64 {
        PLOT_H + self.label_h + 10.0
    }

    fn right(&self) -> f64 {
        self.left + self.plot_w
    }
}

/// The chart as an `<svg>` element: `groups` along the x axis, a bar per series in
/// each, the legend beside it.
pub fn grouped_bars(groups: &[Group], series: &[Series], axis: &Axis) -> String {
    let legend = Legend::of(groups, series);
    let layout = Layout::of(groups, series.len(), axis, legend.width());
    let content = format!(
        "{:?}{:?}",
        series.iter().map(|s| &s.name).collect::<Vec<_>>(),
        groups
            .iter()
            .map(|g| (&g.label, &g.values))
            .collect::<Vec<_>>()
    );
    let mut paint = Paint::new(fnv(content.bytes()));
    let mut svg = String::new();
    for (r, row) in groups.chunks(layout.per_row).enumerate() {
        let top = TOP + r as f64 * layout.row_h();
        let scale = Scale {
            lo: axis.range.start,
            hi: axis.range.end,
            top,
            bottom: top + PLOT_H,
        };
        draw_axis(&mut svg, axis, &scale, (layout.left, layout.right()), 14.0);
        let mut markers = String::new();
        for (gi, g) in row.iter().enumerate() {
            let centre = layout.left + (gi as f64 + 0.5) * layout.slot;
            bars(
                &mut svg,
                &mut markers,
                &mut paint,
                g,
                series,
                axis,
                &scale,
                centre,
                layout.slot,
            );
            draw_label(&mut svg, &g.label, centre, scale.bottom, layout.turned);
        }
        draw_base(&mut svg, &scale, axis.base, layout.left, layout.right());
        svg.push_str(&markers);
    }
    let legend_x = layout.right() + 16.0;
    legend.draw(&mut svg, &mut paint, legend_x, TOP);
    let height = (TOP + layout.rows as f64 * layout.row_h()).max(TOP + legend.height() + 8.0);
    wrap(&svg, &paint, legend_x + legend.width() + 4.0, height)
}

/// One group's bars, centred on `centre`: each in a `<g>` with its hover text and a
/// transparent column over its whole height to hover on. A bar at the base goes to
/// `markers`, drawn over the base line.
#[allow(clippy::too_many_arguments)]
fn bars(
    svg: &mut String,
    markers: &mut String,
    paint: &mut Paint,
    g: &Group,
    series: &[Series],
    axis: &Axis,
    scale: &Scale,
    centre: f64,
    slot: f64,
) {
    let k = series.len().max(1) as f64;
    let step = (slot * INNER / k).min(MAX_BAR);
    let gap = (step * 0.14).max(1.0);
    let x0 = centre - step * k / 2.0;
    for (si, s) in series.iter().enumerate() {
        let Some(v) = g.values.get(si).copied().flatten() else {
            continue;
        };
        let x = x0 + si as f64 * step + gap / 2.0;
        let w = step - gap;
        let c = g.colour.unwrap_or(s.colour);
        let (y0, y1) = (scale.y(v.max(axis.base)), scale.y(v.min(axis.base)));
        let near_base = y1 - y0 < 3.0;
        let (y, h) = if near_base {
            (scale.y(axis.base) - MARKER_H / 2.0, MARKER_H)
        } else {
            (y0, y1 - y0)
        };
        let outline = if near_base {
            format!(" stroke=\"{}\" stroke-width=\"1\"", c.darker().hex())
        } else {
            String::new()
        };
        let target = if near_base { &mut *markers } else { &mut *svg };
        let _ = write!(
            target,
            "<g><title>{}, {}: {}</title>\
             <rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" {}{outline}/>\
             <rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{PLOT_H}\" \
             fill-opacity=\"0\"/></g>",
            esc(&s.name),
            esc(&g.label),
            esc(&(axis.format)(v)),
            paint.attrs(c, s.fill),
            scale.top
        );
    }
}

/// One policy's values over many cases, for [`spreads`]: its label, colour, and each
/// case's name and value.
#[derive(Debug, Clone)]
pub struct Spread {
    pub label: String,
    pub colour: Rgb,
    pub points: Vec<(String, f64)>,
}

/// Panels side by side, one per axis, each a column per policy: a bar to the mean over
/// the cases, a line from the lowest to the highest, a dot per case (hover for its name
/// and value); one legend beside them.
pub fn spreads(panels: &[(&Axis, &[Spread])]) -> String {
    let mut legend = Legend {
        key: vec![
            "bar: the mean over the cases".into(),
            "line: lowest to highest".into(),
            "dot: one case (hover)".into(),
        ],
        entries: Vec::new(),
    };
    for (_, spreads) in panels {
        for s in *spreads {
            if !legend.entries.iter().any(|(_, l)| *l == s.label) {
                legend
                    .entries
                    .push((vec![(s.colour, Fill::Solid)], s.label.clone()));
            }
        }
    }
    let legend_w = legend.width();
    let panel_w = (WIDTH - legend_w - 20.0) / panels.len().max(1) as f64;
    let mut paint = Paint::new(fnv(panels.iter().flat_map(|(a, _)| a.title.bytes())));
    let mut svg = String::new();
    let mut label_h: f64 = 24.0;
    for (pi, (axis, spreads)) in panels.iter().enumerate() {
        let left = pi as f64 * panel_w + axis_room(axis);
        let right = (pi + 1) as f64 * panel_w - 12.0;
        let slot = (right - left) / spreads.len().max(1) as f64;
        let labels: Vec<&str> = spreads.iter().map(|s| s.label.as_str()).collect();
        let (turned, h) = label_room(&labels, slot);
        label_h = label_h.max(h);
        let scale = Scale {
            lo: axis.range.start,
            hi: axis.range.end,
            top: TOP,
            bottom: TOP + SPREAD_H,
        };
        draw_axis(
            &mut svg,
            axis,
            &scale,
            (left, right),
            pi as f64 * panel_w + 14.0,
        );
        for (i, s) in spreads.iter().enumerate() {
            let centre = left + (i as f64 + 0.5) * slot;
            spread(&mut svg, &mut paint, s, axis, &scale, centre, slot);
            draw_label(&mut svg, &s.label, centre, scale.bottom, turned);
        }
        draw_base(&mut svg, &scale, axis.base, left, right);
    }
    let legend_x = panel_w * panels.len() as f64 + 8.0;
    legend.draw(&mut svg, &mut paint, legend_x, TOP);
    let height = (TOP + SPREAD_H + label_h + 10.0).max(TOP + legend.height() + 8.0);
    wrap(&svg, &paint, legend_x + legend_w + 4.0, height)
}

/// One policy's column of a [`spreads`] panel.
fn spread(
    svg: &mut String,
    paint: &mut Paint,
    s: &Spread,
    axis: &Axis,
    scale: &Scale,
    centre: f64,
    slot: f64,
) {
    if s.points.is_empty() {
        return;
    }
    let n = s.points.len() as f64;
    let mean = s.points.iter().map(|p| p.1).sum::<f64>() / n;
    let lo = s.points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let hi = s
        .points
        .iter()
        .map(|p| p.1)
        .fold(f64::NEG_INFINITY, f64::max);
    let w = (slot * 0.6).min(48.0);
    let x = centre - w / 2.0;
    let (y0, y1) = (scale.y(mean.max(axis.base)), scale.y(mean.min(axis.base)));
    let (y, h) = if y1 - y0 < 3.0 {
        (scale.y(axis.base) - MARKER_H / 2.0, MARKER_H)
    } else {
        (y0, y1 - y0)
    };
    let f = axis.format;
    let _ = write!(
        svg,
        "<g><title>{}: mean {} over {n} cases, lowest {}, highest {}</title>\
         <rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" {} \
         fill-opacity=\"0.35\" stroke=\"{}\"/>\
         <line x1=\"{x:.1}\" y1=\"{ym:.1}\" x2=\"{:.1}\" y2=\"{ym:.1}\" stroke=\"{}\" \
         stroke-width=\"3\"/>\
         <line x1=\"{centre:.1}\" y1=\"{:.1}\" x2=\"{centre:.1}\" y2=\"{:.1}\" \
         stroke=\"{}\" stroke-width=\"1.5\"/></g>",
        esc(&s.label),
        esc(&f(mean)),
        esc(&f(lo)),
        esc(&f(hi)),
        paint.attrs(s.colour, Fill::Solid),
        s.colour.darker().hex(),
        x + w,
        s.colour.hex(),
        scale.y(lo),
        scale.y(hi),
        s.colour.darker().hex(),
        ym = scale.y(mean),
    );
    for (i, (case, v)) in s.points.iter().enumerate() {
        // Spread across the bar in case order, so equal values stay apart.
        let dx = if n > 1.0 {
            (i as f64 / (n - 1.0) - 0.5) * w * 0.8
        } else {
            0.0
        };
        let _ = write!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{}\" stroke=\"#fff\" \
             stroke-width=\"0.8\"><title>{}, {}: {}</title></circle>",
            centre + dx,
            scale.y(*v),
            s.colour.hex(),
            esc(&s.label),
            esc(case),
            esc(&f(*v))
        );
    }
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
        // The zero bar is a marker across the base line, outlined, in auto's colour.
        let zero = &svg[svg.find("<title>auto, 1100").unwrap()..];
        let zero = &zero[..zero.find("</g>").unwrap()];
        assert!(
            zero.contains(&format!("height=\"{MARKER_H:.1}\"")),
            "{zero}"
        );
        assert!(zero.contains(&colour("auto").hex()), "{zero}");
        // The legend names each policy beside its colour.
        for s in &series {
            assert!(svg.contains(&format!(">{}</text>", s.name)), "{svg}");
        }
    }

    /// Every chart fits the width, however many groups, and no text is smaller than
    /// the least readable size.
    #[test]
    fn charts_fit_and_their_text_is_readable() {
        let series: Vec<Series> = (0..11)
            .map(|i| Series::new(&format!("policy{i}")))
            .collect();
        for n in [1, 8, 20, 60] {
            let groups: Vec<Group> = (0..n)
                .map(|i| {
                    Group::new(
                        &format!("libquantum-{i}"),
                        (0..11).map(|j| Some((i + j) as f64 - 5.0)).collect(),
                    )
                })
                .collect();
            let svg = grouped_bars(
                &groups,
                &series,
                &Axis {
                    title: "improvement over Linux, %",
                    range: span([-5.0, 70.0], 0.0, 1.0),
                    base: 0.0,
                    format: &|v| format!("{v:+.1}%"),
                },
            );
            let w: f64 = svg["<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"".len()..]
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(w <= WIDTH, "{n} groups: {w} px wide");
            for size in svg.split("font-size=\"").skip(1) {
                let px: f64 = size.split('"').next().unwrap().parse().unwrap();
                assert!(px >= 11.0, "{n} groups: a {px}-pixel text");
            }
            assert_eq!(
                svg.matches("<text").count(),
                svg.matches("font-size=").count()
            );
        }
    }

    #[test]
    fn a_second_figure_is_the_policy_colour_hatched() {
        let c = colour("auto");
        let groups = vec![Group {
            colour: Some(c),
            ..Group::new("auto", vec![Some(0.99), Some(0.9)])
        }];
        let series = [
            Series::styled("mean", colour("linux"), Fill::Solid),
            Series::styled("minimum", colour("linux"), Fill::Hatched),
        ];
        let svg = grouped_bars(
            &groups,
            &series,
            &Axis {
                title: "fraction of the oracle",
                range: span([1.0], 0.85, 0.05),
                base: 0.85,
                format: &|v| format!("{v:.2}"),
            },
        );
        assert!(!svg.contains(&colour("linux").hex()), "{svg}");
        assert!(svg.contains("<pattern"), "{svg}");
        assert!(svg.contains(">hatched: minimum</text>"), "{svg}");
    }

    #[test]
    fn spreads_draw_every_case() {
        let s = Spread {
            label: "auto".into(),
            colour: colour("auto"),
            points: vec![("r0".into(), 1.0), ("r1".into(), 0.0), ("r2".into(), 3.0)],
        };
        let axis = Axis {
            title: "improvement over Linux, %",
            range: span([0.0, 3.0], 0.0, 1.0),
            base: 0.0,
            format: &|v| format!("{v:+.1}%"),
        };
        let one = std::slice::from_ref(&s);
        let svg = spreads(&[(&axis, one), (&axis, one)]);
        assert_eq!(svg.matches("<circle").count(), 6);
        assert!(svg.contains("<title>auto, r1: +0.0%</title>"), "{svg}");
        assert!(svg.contains("mean +1.3% over 3 cases"), "{svg}");
    }
}
