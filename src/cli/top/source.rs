//! Where `top` gets a [`DaemonStatus`] each refresh: the running daemon over its control
//! socket, or this process observing the machine itself, exactly as live `plan` does
//! (a dry pipeline that writes nothing) but with one engine kept across refreshes so
//! CPU rates are per interval.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

use super::TopArgs;
use crate::daemon::assemble::{self, Built, Use};
use crate::daemon::clock::unix_now;
use crate::daemon::config::parse_policy;
use crate::daemon::socket::{request_status, SocketError};
use crate::daemon::status::DaemonStatus;

pub enum Source {
    Daemon {
        socket: PathBuf,
    },
    Standalone {
        built: Box<Built>,
        /// Why standalone: `--standalone`, or the daemon could not be reached.
        why: String,
        interval_s: f64,
        started: Instant,
        started_unix: i64,
    },
}

impl Source {
    /// Attaches to the daemon if it answers (or says why it cannot yet), otherwise
    /// observes the machine here. Returns the first status, or the daemon's error.
    pub fn open(args: &TopArgs) -> anyhow::Result<(Source, Result<DaemonStatus, String>)> {
        if args.standalone {
            return standalone(args, "--standalone".into());
        }
        match request_status(&args.socket) {
            Ok(s) => Ok((
                Source::Daemon {
                    socket: args.socket.clone(),
                },
                Ok(s),
            )),
            Err(SocketError::Unreachable { .. }) => standalone(
                args,
                format!("no daemon reachable at {}", args.socket.display()),
            ),
            // A daemon is there but cannot answer yet (e.g. before its first epoch).
            Err(e) => Ok((
                Source::Daemon {
                    socket: args.socket.clone(),
                },
                Err(e.to_string()),
            )),
        }
    }

    /// For the header.
    pub fn mode(&self, status: Option<&DaemonStatus>) -> String {
        match self {
            Source::Daemon { socket } => match status {
                Some(s) => format!("attached to daemon pid {} at {}", s.pid, socket.display()),
                None => format!("attached to {}", socket.display()),
            },
            Source::Standalone { why, .. } => {
                format!("standalone, observing this machine ({why})")
            }
        }
    }

    pub fn fetch(&mut self) -> anyhow::Result<DaemonStatus> {
        match self {
            Source::Daemon { socket } => Ok(request_status(socket)?),
            Source::Standalone {
                built,
                interval_s,
                started,
                started_unix,
                ..
            } => {
                let t0 = Instant::now();
                built
                    .engine
                    .epoch(started.elapsed().as_secs_f64(), unix_now())
                    .context("observing the processes")?;
                Ok(status_of(built, *interval_s, *started_unix, t0))
            }
        }
    }
}

fn standalone(
    args: &TopArgs,
    why: String,
) -> anyhow::Result<(Source, Result<DaemonStatus, String>)> {
    let mut opts = args.select.options()?;
    if let Some(p) = &args.policy {
        opts.policy = parse_policy(p).map_err(anyhow::Error::msg)?;
    }
    opts.dry_run = true;
    // No logging set up: the screen is the terminal, and what the pipeline would
    // log shows in the header (errors) instead.
    let built = assemble::assemble(&opts, &args.select.roots(), None, Use::PlanOnly)?;
    let mut source = Source::Standalone {
        built: Box::new(built),
        why,
        interval_s: args.interval.as_secs_f64(),
        started: Instant::now(),
        started_unix: unix_now(),
    };
    let first = source.fetch().map_err(|e| format!("{e:#}"));
    Ok((source, first))
}

/// The daemon's status, built the way the daemon publishes it.
fn status_of(built: &Built, interval_s: f64, started_unix: i64, t0: Instant) -> DaemonStatus {
    // A standalone view plans and never applies: a dry run, no migration.
    built.status(interval_s, true, false, started_unix, t0.elapsed())
}
