//! Ending a run early on SIGTERM/SIGINT with a summary instead of dying mid-line: tests
//! and scheduler experiments stop workloads with a signal and still want the totals.
//!
//! The handler only stores to an atomic, which is async-signal-safe; the main loop polls.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handler for SIGTERM and SIGINT.
pub fn install() -> anyhow::Result<()> {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: zeroed sigaction is a valid starting value; the handler only touches an
        // atomic, which is async-signal-safe.
        let rc = unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            act.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
    }
    Ok(())
}

/// Whether a stop signal has arrived.
pub fn requested() -> bool {
    STOP.load(Ordering::SeqCst)
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
