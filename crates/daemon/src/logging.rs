//! Structured logs on stderr through `tracing`: text for people, JSON lines for log
//! shippers. The level comes from `NUMASCHED_LOG` (an `EnvFilter` directive such as
//! `debug` or `numasched=debug`); without it, the command's own default: `info` for
//! the daemon, whose log is its record, `warn` for `run`, `plan` and `advise`, whose
//! user came for the command's output. Colour only on a terminal, and never with
//! `NO_COLOR` set.

use std::ffi::OsStr;

use tracing_subscriber::EnvFilter;

use super::config::LogFormat;

/// Installs the subscriber once; later calls (tests) are no-ops. `default` is the
/// level when `NUMASCHED_LOG` is not set.
pub fn init(format: LogFormat, default: &str) {
    let filter =
        EnvFilter::try_from_env("NUMASCHED_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        // A line that cannot be written is dropped. Told of on stderr, the very stream
        // that failed, eprintln! panics (`daemon 2>&1 | head` once the reader is gone).
        .log_internal_errors(false)
        .with_ansi(colour(std::io::IsTerminal::is_terminal(&std::io::stderr())));
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Whether output to a stream, a terminal or not, is coloured: only on a terminal, and
/// not when `NO_COLOR` is set to anything but the empty string (https://no-color.org).
pub fn colour(is_terminal: bool) -> bool {
    wants_colour(is_terminal, std::env::var_os("NO_COLOR").as_deref())
}

/// [`colour`] with the environment given.
fn wants_colour(is_terminal: bool, no_color: Option<&OsStr>) -> bool {
    is_terminal && no_color.is_none_or(OsStr::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_and_never_with_no_color() {
        assert!(wants_colour(true, None));
        assert!(wants_colour(true, Some(OsStr::new(""))), "empty is unset");
        assert!(!wants_colour(true, Some(OsStr::new("1"))));
        assert!(!wants_colour(true, Some(OsStr::new("false"))), "any value");
        assert!(!wants_colour(false, None));
    }
}
