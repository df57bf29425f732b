//! The pure half of `numasched top`: which rows, in which order, how each cell reads,
//! and the widget tree for one frame, from a [`DaemonStatus`] and the UI state. No terminal
//! here, so everything is tested by rendering into ratatui's `TestBackend`.

use numasched_model::plural::count;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use crate::daemon::status::NodeView;
use crate::daemon::status::{DaemonStatus, ProcessView};
use crate::topology::{cpulist, CpuId};

/// The column the process table is sorted by; `s` cycles through them in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Cpu,
    Pid,
    Mpki,
    Local,
    Memory,
}

impl SortKey {
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Cpu => SortKey::Pid,
            SortKey::Pid => SortKey::Mpki,
            SortKey::Mpki => SortKey::Local,
            SortKey::Local => SortKey::Memory,
            SortKey::Memory => SortKey::Cpu,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SortKey::Cpu => "cpu",
            SortKey::Pid => "pid",
            SortKey::Mpki => "mpki",
            SortKey::Local => "local",
            SortKey::Memory => "memory",
        }
    }

    /// The natural order puts what deserves attention first: the busiest, the most
    /// cache-hungry, the least local, the largest; pids ascend.
    fn descending(self) -> bool {
        !matches!(self, SortKey::Pid | SortKey::Local)
    }
}

/// A key, as far as `top` cares (the terminal loop maps crossterm's events to these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Enter,
    Esc,
    Backspace,
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    Quit,
}

/// Everything the user changed with keys.
#[derive(Debug, Clone, PartialEq)]
pub struct UiState {
    pub sort: SortKey,
    pub reverse: bool,
    /// The filter applied to command names (case-insensitive substring), if any.
    pub filter: String,
    /// The filter being typed after `/`, until Enter or Esc.
    pub editing: Option<String>,
    pub paused: bool,
    /// Rows scrolled off the top of the process table.
    pub scroll: usize,
    /// The row whose reason is shown whole under the table (the table scrolls to keep
    /// it in view).
    pub selected: usize,
}

impl Default for UiState {
    fn default() -> Self {
        UiState {
            sort: SortKey::Cpu,
            reverse: false,
            filter: String::new(),
            editing: None,
            paused: false,
            scroll: 0,
            selected: 0,
        }
    }
}

const PAGE: usize = 10;

impl UiState {
    pub fn handle(&mut self, key: Key) -> Outcome {
        if let Some(text) = &mut self.editing {
            match key {
                Key::Char(c) => text.push(c),
                Key::Backspace => {
                    text.pop();
                }
                Key::Enter => {
                    self.filter = text.trim().to_string();
                    self.editing = None;
                    self.back_to_first_row();
                }
                Key::Esc => {
                    self.filter.clear();
                    self.editing = None;
                    self.back_to_first_row();
                }
                _ => {}
            }
            return Outcome::Continue;
        }
        match key {
            // Esc takes back an applied filter first, as it does one being typed: a
            // second Esc meant to clear it must not end the session.
            Key::Esc if !self.filter.is_empty() => {
                self.filter.clear();
                self.back_to_first_row();
            }
            Key::Char('q') | Key::Esc => return Outcome::Quit,
            Key::Char('s') => {
                self.sort = self.sort.next();
                self.back_to_first_row();
            }
            Key::Char('r') => self.reverse = !self.reverse,
            Key::Char('/') => self.editing = Some(String::new()),
            Key::Char('p') => self.paused = !self.paused,
            Key::Up => self.selected = self.selected.saturating_sub(1),
            Key::Down => self.selected = self.selected.saturating_add(1),
            Key::PageUp => self.selected = self.selected.saturating_sub(PAGE),
            Key::PageDown => self.selected = self.selected.saturating_add(PAGE),
            Key::Home => self.back_to_first_row(),
            Key::End => self.selected = usize::MAX,
            _ => {}
        }
        Outcome::Continue
    }

    fn back_to_first_row(&mut self) {
        self.scroll = 0;
        self.selected = 0;
    }

    /// Whether the order is descending after `r`.
    pub fn descending(&self) -> bool {
        self.sort.descending() != self.reverse
    }
}

/// The processes to show, filtered and sorted (ties by pid).
pub fn rows<'a>(procs: &'a [ProcessView], ui: &UiState) -> Vec<&'a ProcessView> {
    let needle = ui.filter.to_lowercase();
    let mut out: Vec<&ProcessView> = procs
        .iter()
        .filter(|p| needle.is_empty() || p.program.to_lowercase().contains(&needle))
        .collect();
    // Unknown values sort after every known one in the natural order.
    let key = |p: &ProcessView| -> f64 {
        let missing = if ui.sort.descending() {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
        match ui.sort {
            SortKey::Cpu => p.cpu_demand,
            SortKey::Pid => f64::from(p.pid),
            SortKey::Mpki => p.mpki.unwrap_or(missing),
            SortKey::Local => p.local_fraction.unwrap_or(missing),
            SortKey::Memory => p.memory_bytes.values().sum::<u64>() as f64,
        }
    };
    let desc = ui.descending();
    out.sort_by(|a, b| {
        let o = key(a).total_cmp(&key(b));
        let o = if desc { o.reverse() } else { o };
        o.then(a.pid.cmp(&b.pid))
    });
    out
}

/// Bytes in binary units, short: `1.2G`, `30M`, `512K`, `0`.
pub fn bytes(b: u64) -> String {
    const K: f64 = 1024.0;
    let f = b as f64;
    if f >= K * K * K {
        format!("{:.1}G", f / (K * K * K))
    } else if f >= K * K {
        format!("{:.0}M", f / (K * K))
    } else if f >= K {
        format!("{:.0}K", f / K)
    } else {
        format!("{b}")
    }
}

/// Memory per node, `0:1.2G 1:30M`; nodes holding nothing are left out.
pub fn per_node(p: &ProcessView) -> String {
    let parts: Vec<String> = p
        .memory_bytes
        .iter()
        .filter(|(_, b)| **b > 0)
        .map(|(n, b)| format!("{n}:{}", bytes(*b)))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" ")
    }
}

pub fn cpus(v: &[CpuId]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        cpulist::format(v)
    }
}

pub fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.prec$}"))
}

/// The cells of one process row, in [`PROCESS_HEADER`] order.
pub fn process_cells(p: &ProcessView) -> [String; 12] {
    [
        p.pid.to_string(),
        p.program.clone(),
        p.threads.to_string(),
        format!("{:.2}", p.cpu_demand),
        per_node(p),
        opt(p.local_fraction, 2),
        opt(p.mpki, 1),
        opt(p.numa_penalty, 2),
        p.source.name().into(),
        cpus(&p.current_cpus),
        cpus(&p.planned_cpus),
        match &p.job {
            Some(j) => format!("[job {j}] {}", p.reason),
            None => p.reason.clone(),
        },
    ]
}

pub const PROCESS_HEADER: [&str; 12] = [
    "pid",
    "command",
    "thr",
    "cpu",
    "memory/node",
    "local",
    "mpki",
    "np",
    "from",
    "ran on",
    "planned",
    "reason",
];

const PROCESS_WIDTHS: [Constraint; 12] = [
    Constraint::Length(8),
    Constraint::Length(16),
    Constraint::Length(4),
    Constraint::Length(5),
    Constraint::Length(18),
    Constraint::Length(5),
    Constraint::Length(6),
    Constraint::Length(5),
    Constraint::Length(10),
    Constraint::Length(10),
    Constraint::Length(10),
    Constraint::Fill(1),
];

/// The cells of one node row, in [`NODE_HEADER`] order.
pub fn node_cells(n: &NodeView) -> [String; 6] {
    let used = n.memory_used_bytes.map_or("-".into(), bytes);
    [
        n.node.to_string(),
        cpus(&n.cpus),
        format!("{:.2}", n.load),
        format!("{used} / {}", bytes(n.memory_total_bytes)),
        bytes(n.managed_memory_bytes),
        format!("{:.1}", n.llc_pressure),
    ]
}

pub const NODE_HEADER: [&str; 6] = [
    "node",
    "cpus",
    "load",
    "memory used / total",
    "managed",
    "LLC pressure",
];

const NODE_WIDTHS: [Constraint; 6] = [
    Constraint::Length(5),
    Constraint::Length(16),
    Constraint::Length(7),
    Constraint::Length(20),
    Constraint::Length(9),
    Constraint::Length(12),
];

/// What the frame shows besides the status: where it came from and the last error.
#[derive(Debug, Clone, Copy)]
pub struct Screen<'a> {
    pub status: Option<&'a DaemonStatus>,
    /// `attached to ...` or `standalone (...)`.
    pub mode: &'a str,
    pub error: Option<&'a str>,
}

fn header_lines(screen: &Screen<'_>) -> Vec<Line<'static>> {
    let mut first = format!("numasched top: {}", screen.mode);
    let mut second = String::new();
    if let Some(s) = screen.status {
        first.push_str(&format!(
            "; policy {}{}, every {}s; {}, {}",
            s.policy,
            if s.dry_run { " (dry run)" } else { "" },
            s.interval_s,
            count(s.nodes, "node"),
            count(s.cpus, "CPU")
        ));
        let sensors = if s.sensors_in_use.is_empty() {
            "none".to_string()
        } else {
            s.sensors_in_use.join(", ")
        };
        second = format!(
            "epoch {}, re-plans {}, last epoch {:.1} ms, errors {}; sensors: {}; store: {}",
            s.epochs,
            s.replans,
            s.last_epoch_ms,
            s.errors_total,
            sensors,
            s.store.as_deref().unwrap_or("none")
        );
        if !s.jobs.is_empty() {
            let steps: Vec<String> = s.jobs.iter().map(ToString::to_string).collect();
            second.push_str(&format!("; slurm: {}", steps.join(", ")));
        }
    }
    if let Some(e) = screen.error {
        second = format!("error: {e}");
    }
    vec![
        Line::from(first).style(Style::new().add_modifier(Modifier::BOLD)),
        Line::from(second),
    ]
}

fn footer_line(ui: &UiState) -> Line<'static> {
    if let Some(text) = &ui.editing {
        return Line::from(format!(
            "filter command: {text}_   (Enter apply, Esc clear)"
        ));
    }
    let mut s = format!(
        "q quit  s sort  r reverse  / filter  p pause  arrows select | sort: {} ({})",
        ui.sort.name(),
        if ui.descending() { "desc" } else { "asc" }
    );
    if !ui.filter.is_empty() {
        s.push_str(&format!(" | filter: {} (Esc clears)", ui.filter));
    }
    if ui.paused {
        s.push_str(" | PAUSED");
    }
    Line::from(s)
}

fn bold_row<const N: usize>(cells: [&'static str; N], widths: &[u16]) -> Row<'static> {
    Row::new(clipped(cells.map(String::from), widths))
        .style(Style::new().add_modifier(Modifier::BOLD))
}

/// The width ratatui's [`Table`] gives each column inside a bordered `area` (its
/// defaults: one space between columns, laid out from the left, no selection column).
fn column_widths(constraints: &[Constraint], area: Rect) -> Vec<u16> {
    let inner = Rect::new(0, 0, area.width.saturating_sub(2), 1);
    Layout::horizontal(constraints.iter().copied())
        .flex(Flex::Start)
        .spacing(1)
        .split(inner)
        .iter()
        .map(|r| r.width)
        .collect()
}

/// Cells wider than their column end in '…': in a narrow window a cut value must not
/// read as a whole one (a node's "8.1G / 18.1G" cut to "8.1G / " reads, beside the
/// managed column's "75M", as "8.1G / 75M").
fn clipped<const N: usize>(cells: [String; N], widths: &[u16]) -> [String; N] {
    let mut i = 0;
    cells.map(|cell| {
        let width = widths.get(i).map_or(usize::MAX, |w| usize::from(*w));
        i += 1;
        if cell.chars().count() <= width {
            cell
        } else {
            let mut cut: String = cell.chars().take(width.saturating_sub(1)).collect();
            if width > 0 {
                cut.push('…');
            }
            cut
        }
    })
}

/// Draws one frame. Clamps `ui.scroll` to the rows there are.
pub fn render(frame: &mut Frame<'_>, screen: &Screen<'_>, ui: &mut UiState) {
    let nodes: &[NodeView] = screen.status.map_or(&[], |s| &s.nodes_view);
    let procs: &[ProcessView] = screen.status.map_or(&[], |s| &s.processes);
    let node_height = nodes.len().max(1) as u16 + 3;
    // The reason pane only where the table keeps a row (borders, header, one row).
    let left = frame.area().height.saturating_sub(2 + node_height + 1);
    let why_height = if left >= WHY_HEIGHT + 4 {
        WHY_HEIGHT
    } else {
        0
    };
    let [head, node_area, proc_area, why_area, foot] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(node_height),
        Constraint::Fill(1),
        Constraint::Length(why_height),
        Constraint::Length(1),
    ])
    .areas(frame.area());

    frame.render_widget(Paragraph::new(header_lines(screen)), head);

    let node_widths = column_widths(&NODE_WIDTHS, node_area);
    let node_rows: Vec<Row> = nodes
        .iter()
        .map(|n| Row::new(clipped(node_cells(n), &node_widths)))
        .collect();
    frame.render_widget(
        Table::new(node_rows, NODE_WIDTHS)
            .header(bold_row(NODE_HEADER, &node_widths))
            .block(Block::bordered().title(" nodes (managed processes) ")),
        node_area,
    );

    let shown = rows(procs, ui);
    let visible = proc_area.height.saturating_sub(3) as usize;
    ui.selected = ui.selected.min(shown.len().saturating_sub(1));
    if ui.selected < ui.scroll {
        ui.scroll = ui.selected;
    } else if visible > 0 && ui.selected >= ui.scroll + visible {
        ui.scroll = ui.selected + 1 - visible;
    }
    ui.scroll = ui.scroll.min(shown.len().saturating_sub(visible.max(1)));
    let title = format!(
        " processes: {} of {} shown{} ",
        shown.len(),
        procs.len(),
        if shown.len() <= visible {
            String::new()
        } else if visible == 0 {
            ", none fit: the window is too low".to_string()
        } else {
            format!(
                ", rows {}-{}",
                ui.scroll + 1,
                (ui.scroll + visible).min(shown.len())
            )
        }
    );
    let proc_widths = column_widths(&PROCESS_WIDTHS, proc_area);
    let proc_rows: Vec<Row> = shown
        .iter()
        .enumerate()
        .skip(ui.scroll)
        .map(|(i, p)| {
            let row = Row::new(clipped(process_cells(p), &proc_widths));
            if i == ui.selected && why_height > 0 {
                row.style(Style::new().add_modifier(Modifier::REVERSED))
            } else {
                row
            }
        })
        .collect();
    frame.render_widget(
        Table::new(proc_rows, PROCESS_WIDTHS)
            .header(bold_row(PROCESS_HEADER, &proc_widths))
            .block(Block::bordered().title(title)),
        proc_area,
    );

    // The reason column is what is left of the width, a few words at 120 columns:
    // the selected row's reason whole, wrapped, so ↑/↓ read any process's in full.
    let why = shown.get(ui.selected).map_or_else(Vec::new, |p| {
        vec![Line::from(format!(
            "{} {}: {}",
            p.pid,
            p.program,
            process_cells(p)[11]
        ))]
    });
    frame.render_widget(
        Paragraph::new(why).wrap(Wrap { trim: true }).block(
            Block::new()
                .borders(Borders::TOP)
                .title(" why (selected row; ↑/↓) "),
        ),
        why_area,
    );
    frame.render_widget(Paragraph::new(footer_line(ui)), foot);
}

/// Lines under the process table for the selected row's reason (a rule, two lines).
const WHY_HEIGHT: u16 = 3;

/// The frame as plain text lines (for tests and captures).
pub fn buffer_lines(buf: &ratatui::buffer::Buffer) -> Vec<String> {
    let Rect { width, height, .. } = buf.area;
    (0..height)
        .map(|y| {
            (0..width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::character::PenaltySource;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    /// Built from JSON (the `status --json` contract), so fields added later with
    /// defaults do not break these tests.
    fn proc(
        pid: u32,
        program: &str,
        cpu: f64,
        mpki: Option<f64>,
        local: Option<f64>,
    ) -> ProcessView {
        serde_json::from_value(serde_json::json!({
            "pid": pid,
            "start_time": 0,
            "program": program,
            "threads": 2,
            "cpu_demand": cpu,
            "memory_bytes": {"0": 1_288_490_189u64, "1": 30u64 << 20},
            "memory_from": "numa_maps",
            "local_fraction": local,
            "mpki": mpki,
            "numa_penalty": 1.15,
            "source": PenaltySource::Profile,
            "bandwidth_gbps": null,
            "current_cpus": [0, 1],
            "planned_cpus": [2, 3],
            "reason": "home node 0",
            "allowed_cpus": null,
        }))
        .expect("process view")
    }

    fn status() -> DaemonStatus {
        let topo = crate::topology::spec::parse("2n:1l:2c:1t").expect("spec");
        let processes = vec![
            proc(100, "mcf", 1.0, Some(30.0), Some(0.5)),
            proc(42, "postgres", 0.5, None, Some(0.9)),
            proc(7, "lbm", 2.0, Some(10.0), None),
        ];
        let mut nodes_view = crate::daemon::nodes::node_views(&topo, &processes);
        nodes_view[0].memory_used_bytes = Some(3 << 30);
        let sensor = |available: bool| serde_json::json!({"available": available, "detail": "-"});
        let mut s: DaemonStatus = serde_json::from_value(serde_json::json!({
            "version": "0.1.0",
            "pid": 1234,
            "started_unix": 0,
            "now_unix": 10,
            "policy": "auto",
            "interval_s": 1.0,
            "dry_run": true,
            "migrate_pages": false,
            "sensors": {
                "hardware_counters": sensor(false),
                "resctrl": sensor(false),
                "numa_hinting_faults": sensor(false),
                "numa_balancing": null,
                "numa_maps": sensor(true),
            },
            "sensors_in_use": ["numa_maps"],
            "store": null,
            "nodes": 2,
            "cpus": 4,
            "epochs": 3,
            "replans": 1,
            "last_epoch_ms": 2.5,
            "errors_total": 0,
            "processes": [],
            "uncharacterised": [],
            "decisions": [],
        }))
        .expect("status");
        s.nodes_view = nodes_view;
        s.processes = processes.into();
        s
    }

    fn pids(v: &[&ProcessView]) -> Vec<u32> {
        v.iter().map(|p| p.pid).collect()
    }

    #[test]
    fn sorts_by_each_column_and_reverses() {
        let s = status();
        let mut ui = UiState::default();
        assert_eq!(
            pids(&rows(&s.processes, &ui)),
            [7, 100, 42],
            "cpu, busiest first"
        );
        ui.handle(Key::Char('s'));
        assert_eq!(ui.sort, SortKey::Pid);
        assert_eq!(pids(&rows(&s.processes, &ui)), [7, 42, 100]);
        ui.handle(Key::Char('s'));
        assert_eq!(
            pids(&rows(&s.processes, &ui)),
            [100, 7, 42],
            "mpki, unknown last"
        );
        ui.handle(Key::Char('s'));
        assert_eq!(
            pids(&rows(&s.processes, &ui)),
            [100, 42, 7],
            "least local first"
        );
        ui.handle(Key::Char('r'));
        assert_eq!(pids(&rows(&s.processes, &ui)), [7, 42, 100]);
        ui.handle(Key::Char('r'));
        ui.handle(Key::Char('s'));
        assert_eq!(ui.sort, SortKey::Memory);
        assert_eq!(
            pids(&rows(&s.processes, &ui)),
            [7, 42, 100],
            "equal: by pid"
        );
        ui.handle(Key::Char('s'));
        assert_eq!(ui.sort, SortKey::Cpu, "cycles back");
    }

    #[test]
    fn filter_is_typed_applied_and_cleared() {
        let s = status();
        let mut ui = UiState::default();
        ui.handle(Key::Char('/'));
        for c in "PostG".chars() {
            assert_eq!(
                ui.handle(Key::Char(c)),
                Outcome::Continue,
                "q types, not quits"
            );
        }
        assert!(ui.filter.is_empty(), "not applied before Enter");
        ui.handle(Key::Enter);
        assert_eq!(ui.filter, "PostG");
        assert_eq!(pids(&rows(&s.processes, &ui)), [42], "case-insensitive");
        ui.handle(Key::Char('/'));
        ui.handle(Key::Char('x'));
        ui.handle(Key::Backspace);
        ui.handle(Key::Esc);
        assert!(ui.filter.is_empty() && ui.editing.is_none(), "Esc clears");
        assert_eq!(rows(&s.processes, &ui).len(), 3);
        assert_eq!(ui.handle(Key::Char('p')), Outcome::Continue);
        assert!(ui.paused);
        // An applied filter: Esc clears it, the next one quits.
        ui.handle(Key::Char('/'));
        ui.handle(Key::Char('x'));
        ui.handle(Key::Enter);
        assert_eq!(ui.handle(Key::Esc), Outcome::Continue);
        assert!(ui.filter.is_empty(), "Esc clears an applied filter");
        assert_eq!(ui.handle(Key::Esc), Outcome::Quit);
        assert_eq!(ui.handle(Key::Char('q')), Outcome::Quit);
    }

    #[test]
    fn cells_read_as_documented() {
        assert_eq!(bytes(0), "0");
        assert_eq!(bytes(512 << 10), "512K");
        assert_eq!(bytes(30 << 20), "30M");
        assert_eq!(bytes(1_288_490_189), "1.2G");
        let p = proc(1, "x", 1.0, Some(12.34), Some(0.876));
        let c = process_cells(&p);
        assert_eq!(c[4], "0:1.2G 1:30M");
        assert_eq!(c[5], "0.88");
        assert_eq!(c[6], "12.3");
        assert_eq!(c[7], "1.15");
        assert_eq!(c[8], "profile");
        assert_eq!(c[9], "0-1");
        assert_eq!(c[10], "2-3");
        let mut empty = p.clone();
        empty.memory_bytes.clear();
        empty.planned_cpus.clear();
        assert_eq!(per_node(&empty), "-");
        assert_eq!(process_cells(&empty)[10], "-");
    }

    fn draw(screen: &Screen<'_>, ui: &mut UiState, w: u16, h: u16) -> Vec<String> {
        let mut t = Terminal::new(TestBackend::new(w, h)).expect("terminal");
        t.draw(|f| render(f, screen, ui)).expect("draw");
        buffer_lines(t.backend().buffer())
    }

    /// At 120 columns the reason column holds a few words; the pane under the table
    /// shows the selected row's whole reason, and ↓ selects the next row.
    #[test]
    fn a_reason_cut_in_its_column_is_whole_under_the_table() {
        let mut s = status();
        let long = "home node 0 full (2 CPUs of others' work), nearest node with room is 1 \
                    (np 1.40, 1st of 3 by penalty)";
        for p in std::sync::Arc::make_mut(&mut s.processes) {
            p.reason = format!("{long} [{}]", p.pid);
        }
        let screen = Screen {
            status: Some(&s),
            mode: "standalone (--standalone)",
            error: None,
        };
        let mut ui = UiState::default();
        let text = draw(&screen, &mut ui, 120, 24);
        let all = text.join(" ");
        let joined = all.split_whitespace().collect::<Vec<_>>().join(" ");
        // Sorted by CPU, lbm (pid 7) is first.
        assert!(
            joined.contains(&format!("7 lbm: {long} [7]")),
            "{}",
            text.join("\n")
        );
        ui.handle(Key::Down);
        let text = draw(&screen, &mut ui, 120, 24);
        let joined = text
            .join(" ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            joined.contains(&format!("100 mcf: {long} [100]")),
            "{}",
            text.join("\n")
        );
    }

    #[test]
    fn a_frame_shows_nodes_processes_and_the_state() {
        let s = status();
        let screen = Screen {
            status: Some(&s),
            mode: "standalone (--standalone)",
            error: None,
        };
        let mut ui = UiState::default();
        let text = draw(&screen, &mut ui, 160, 20);
        let all = text.join("\n");
        assert!(text[0].contains("standalone (--standalone)"), "{all}");
        assert!(text[0].contains("policy auto (dry run)"), "{all}");
        assert!(all.contains("LLC pressure"), "{all}");
        let node0 = text
            .iter()
            .find(|l| l.contains("│0 ") && l.contains("0-1"))
            .unwrap_or_else(|| panic!("node 0 row:\n{all}"));
        assert!(node0.contains("3.0G / "), "{node0}");
        assert!(
            text.iter().any(|l| l.contains("│1 ") && l.contains("2-3")),
            "{all}"
        );
        let mcf = text
            .iter()
            .find(|l| l.contains("mcf"))
            .unwrap_or_else(|| panic!("mcf row:\n{all}"));
        for cell in [
            "100",
            "0:1.2G 1:30M",
            "0.50",
            "30.0",
            "1.15",
            "profile",
            "home node 0",
        ] {
            assert!(mcf.contains(cell), "{cell} in {mcf}");
        }
        assert!(all.contains("processes: 3 of 3 shown"), "{all}");
        assert!(text[19].contains("sort: cpu (desc)"), "{all}");

        ui.filter = "lbm".into();
        ui.paused = true;
        let text = draw(&screen, &mut ui, 160, 20);
        let all = text.join("\n");
        assert!(all.contains("processes: 1 of 3 shown"), "{all}");
        assert!(!all.contains("mcf"), "{all}");
        assert!(
            text[19].contains("filter: lbm") && text[19].contains("PAUSED"),
            "{all}"
        );

        ui.editing = Some("po".into());
        let text = draw(&screen, &mut ui, 160, 20);
        assert!(text[19].contains("filter command: po_"), "{}", text[19]);
    }

    #[test]
    fn a_narrow_window_marks_the_cells_it_cuts() {
        let s = status();
        let screen = Screen {
            status: Some(&s),
            mode: "attached",
            error: None,
        };
        let text = draw(&screen, &mut UiState::default(), 40, 12);
        let all = text.join("\n");
        let node0 = text
            .iter()
            .find(|l| l.contains("│0 "))
            .unwrap_or_else(|| panic!("node 0 row:\n{all}"));
        // Cut, the memory cell ends in '…' rather than in "/ " before the managed
        // column's bytes.
        assert!(node0.contains("3.0G") && node0.contains('…'), "{all}");
        assert!(!node0.contains("/  "), "{all}");
        let lbm = text
            .iter()
            .find(|l| l.contains("lbm"))
            .unwrap_or_else(|| panic!("lbm row:\n{all}"));
        assert!(lbm.contains('…'), "{all}");
        // Wide enough, nothing is marked.
        let wide = draw(&screen, &mut UiState::default(), 200, 12).join("\n");
        assert!(!wide.contains('…'), "{wide}");
    }

    #[test]
    fn scrolling_is_clamped_and_no_status_still_draws() {
        let s = status();
        let screen = Screen {
            status: Some(&s),
            mode: "attached",
            error: None,
        };
        let mut ui = UiState::default();
        ui.handle(Key::End);
        let _ = draw(&screen, &mut ui, 120, 30);
        assert_eq!(ui.scroll, 0, "everything fits");
        ui.handle(Key::End);
        let _ = draw(&screen, &mut ui, 120, 12);
        // 12 rows: 2 header, 5 nodes, 1 footer leave 4 for the table: 1 visible row.
        assert_eq!(ui.scroll, 2);
        ui.handle(Key::Up);
        let text = draw(&screen, &mut ui, 120, 12);
        assert!(
            text.join("\n").contains("3 of 3 shown, rows 2-2"),
            "{text:?}"
        );

        // 10 rows leave the table its borders and header only.
        let text = draw(&screen, &mut ui, 120, 10);
        assert!(
            text.join("\n")
                .contains("3 of 3 shown, none fit: the window is too low"),
            "{text:?}"
        );

        let empty = Screen {
            status: None,
            mode: "attached to /x.sock",
            error: Some("starting: no epoch has run yet"),
        };
        let text = draw(&empty, &mut UiState::default(), 80, 10);
        assert!(text[1].contains("error: starting"), "{text:?}");
    }
}
