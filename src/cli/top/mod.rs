//! `numasched top`: a live terminal view of what numasched sees, refreshed every
//! `--interval`: per node (CPUs, load, memory, LLC pressure) and per process (memory
//! per node, local fraction, MPKI, NUMA penalty and where it came from, current and
//! planned CPUs). Attached to the running daemon through its control socket, or, with
//! `--standalone` or when no daemon answers, observing the machine itself like live
//! `plan` (dry, writes nothing).
//!
//! [`view`] is the pure part (rows, cells, the frame); this module is the terminal
//! loop and its hygiene: the terminal is restored on every exit, errors and panics
//! included. [`source`] is where each refresh's status comes from.

mod input;
pub mod source;
pub mod view;

use std::io::{IsTerminal, Stdout};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::Terminal;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use super::manage::SelectArgs;
use crate::daemon::config::{parse_duration, parse_policy, DEFAULT_SOCKET};
use crate::daemon::status::DaemonStatus;
use input::{Input, Ready};
use source::Source;
use view::{Key, Outcome, Screen, UiState};

#[derive(Debug, Args)]
pub struct TopArgs {
    /// The daemon's control socket.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Observe this machine here instead of asking the daemon (also the fallback when
    /// no daemon answers at --socket). Dry: changes and writes nothing.
    #[arg(long)]
    pub standalone: bool,
    /// Refresh period, e.g. 1s, 500ms.
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    pub interval: Duration,
    /// Policy planned with when standalone [default: auto].
    #[arg(long, value_name = "P", value_parser = parse_policy)]
    pub policy: Option<String>,
    /// Which processes to show when standalone (as for `plan`).
    #[command(flatten)]
    pub select: SelectArgs,
}

/// The shortest refresh period, so `--interval 0` does not spin.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The longest wait for a key, so a signal ends the loop promptly.
const SLICE: Duration = Duration::from_millis(200);

pub fn run(args: TopArgs) -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "top needs a terminal and stdout is not one; for a one-shot report use `numasched status` (or `numasched status --json`)"
        );
    }
    let (mut source, first) = Source::open(&args)?;
    let interval = args.interval.max(MIN_INTERVAL);
    let mut tui = Tui::enter()?;
    let mut ui = UiState::default();
    let mut status: Option<DaemonStatus> = None;
    let mut error: Option<String> = None;
    match first {
        Ok(s) => status = Some(s),
        Err(e) => error = Some(e),
    }
    // SIGTERM, SIGHUP (the terminal went away) and SIGINT end the loop like `q`, so
    // the terminal is restored on those exits too.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGTERM, SIGHUP, SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let input = Input::open();
    let mut next = Instant::now() + interval;
    let mut dirty = true;
    while !stop.load(Ordering::SeqCst) {
        if dirty {
            let mode = source.mode(status.as_ref());
            let screen = Screen {
                status: status.as_ref(),
                mode: &mode,
                error: error.as_deref(),
            };
            tui.terminal.draw(|f| view::render(f, &screen, &mut ui))?;
            dirty = false;
        }
        let wait = next.saturating_duration_since(Instant::now()).min(SLICE);
        // A hang-up also signals (SIGHUP cuts the wait short): crossterm must not be
        // asked then, as it would spin on the dead terminal.
        if input.wait(wait) == Ready::Gone || stop.load(Ordering::SeqCst) {
            break;
        }
        // What crossterm holds, event by event: keys, and resizes (which reach it by
        // SIGWINCH, not through the terminal's input).
        while event::poll(Duration::ZERO)? {
            match handle(event::read()?, &mut ui) {
                Handled::Quit => return Ok(()),
                Handled::Redraw => dirty = true,
                Handled::Nothing => {}
            }
        }
        if Instant::now() >= next {
            if !ui.paused {
                match source.fetch() {
                    Ok(s) => {
                        status = Some(s);
                        error = None;
                    }
                    Err(e) => error = Some(format!("{e:#}")),
                }
                dirty = true;
            }
            next = Instant::now() + interval;
        }
    }
    Ok(())
}

/// What an event asks of the loop.
enum Handled {
    Quit,
    Redraw,
    Nothing,
}

fn handle(e: Event, ui: &mut UiState) -> Handled {
    match e {
        Event::Key(k) if k.kind == KeyEventKind::Press => {
            if is_interrupt(&k) {
                return Handled::Quit;
            }
            if let Some(key) = key_of(k) {
                if ui.handle(key) == Outcome::Quit {
                    return Handled::Quit;
                }
            }
            Handled::Redraw
        }
        Event::Resize(..) => Handled::Redraw,
        _ => Handled::Nothing,
    }
}

fn is_interrupt(k: &KeyEvent) -> bool {
    k.modifiers.contains(KeyModifiers::CONTROL) && matches!(k.code, KeyCode::Char('c' | 'd'))
}

fn key_of(k: KeyEvent) -> Option<Key> {
    if k.modifiers.contains(KeyModifiers::CONTROL) {
        return None;
    }
    Some(match k.code {
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        _ => return None,
    })
}

/// Whether the terminal is in `top`'s mode, so it is restored exactly once.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Leaves the alternate screen, shows the cursor and ends raw mode; safe to call from
/// the panic hook and from `Drop`, and more than once.
fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(
            std::io::stdout(),
            terminal::LeaveAlternateScreen,
            cursor::Show
        );
    }
}

/// The terminal in raw mode on the alternate screen; dropping it (returning, an
/// error, unwinding) restores the terminal, and a panic hook restores it before the
/// panic message is printed so the message stays readable.
struct Tui {
    terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Tui {
    fn enter() -> anyhow::Result<Tui> {
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        ACTIVE.store(true, Ordering::SeqCst);
        // From here on any early return restores what was already changed.
        let guard = Restore;
        terminal::enable_raw_mode()?;
        execute!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        )?;
        let mut t = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
        t.clear()?;
        std::mem::forget(guard);
        Ok(Tui { terminal: t })
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        restore();
    }
}

struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        restore();
    }
}
