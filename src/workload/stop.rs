//! Ending a run early on SIGTERM/SIGINT with a summary instead of dying mid-line: tests
//! and scheduler experiments stop workloads with a signal and still want the totals.
//!
//! The handler only stores to an atomic, which is async-signal-safe; the main loop polls.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

fn flag() -> &'static Arc<AtomicBool> {
    STOP.get_or_init(Arc::default)
}

/// Installs the handler for SIGTERM and SIGINT: it only sets a flag (signal-hook's
/// handler is async-signal-safe).
pub fn install() -> anyhow::Result<()> {
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(flag()))?;
    }
    Ok(())
}

/// Whether a stop signal has arrived.
pub fn requested() -> bool {
    flag().load(Ordering::SeqCst)
}

/// Sleeps `d` in short steps; false as soon as `halt` is set (the run is over).
pub fn pause(d: std::time::Duration, halt: &AtomicBool) -> bool {
    let until = std::time::Instant::now() + d;
    loop {
        if halt.load(Ordering::Relaxed) {
            return false;
        }
        let now = std::time::Instant::now();
        if now >= until {
            return true;
        }
        std::thread::sleep((until - now).min(std::time::Duration::from_millis(20)));
    }
}
