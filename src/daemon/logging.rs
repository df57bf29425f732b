//! Structured logs on stderr through `tracing`: text for people, JSON lines for log
//! shippers. The level comes from `NUMASCHED_LOG` (an `EnvFilter` directive such as
//! `debug` or `numasched=debug`); without it, the command's own default: `info` for
//! the daemon, whose log is its record, `warn` for `run`, `plan` and `advise`, whose
//! user came for the command's output.

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
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
