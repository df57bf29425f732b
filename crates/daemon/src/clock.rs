//! The wall clock, read in one place: the engine and the status take `unix` seconds as
//! an argument (tests pass their own), and the service, the assembly of a daemon and
//! `top` read it here.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch; 0 on a clock set before it.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
