//! `numasched config`: check a config file before the daemon meets it, and print a
//! complete example generated from the defaults themselves.
//!
//! Why here and not only in the daemon: a bad `/etc/numasched/numasched.toml` makes the
//! daemon refuse to start, and an operator editing it wants to know before restarting
//! the unit. Why generated: a hand-written example drifts from `Options::default()` the
//! first time someone changes a default; this one cannot (see [`example`]).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use crate::daemon::config::{Options, DEFAULT_CONFIG};

pub mod check;
pub mod example;

#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Check a config file; print the effective options (exit 0) or one line per
    /// problem, with file and line (exit 1).
    Check {
        /// The file to check.
        #[arg(value_name = "FILE", default_value = DEFAULT_CONFIG)]
        file: PathBuf,
    },
    /// Print a complete, commented config with every key at its default.
    Default,
}

/// Returns the exit code: 1 when the checked file has problems.
pub fn run(args: ConfigArgs) -> anyhow::Result<i32> {
    match args.command {
        // The default file is optional: the daemon runs without it, so its absence is
        // no problem, and the options are the defaults.
        ConfigCommand::Check { file } if file == Path::new(DEFAULT_CONFIG) && !file.exists() => {
            println!(
                "# {}: absent; the daemon runs with the defaults:",
                file.display()
            );
            print!("{}", example::render(&Options::default(), false));
            Ok(0)
        }
        // Paths the daemon would refuse at start are the file's problems too.
        ConfigCommand::Check { file } => match check::check(&file) {
            Ok(opts) => {
                println!(
                    "# {}: valid. Effective options (defaults filled in):",
                    file.display()
                );
                print!("{}", example::render(&opts, false));
                // Valid, so not problems, but said where the operator looks.
                for doubt in opts.timing_doubts() {
                    eprintln!("{}: warning: {doubt}", file.display());
                }
                Ok(0)
            }
            Err(problems) => {
                for p in problems {
                    eprintln!("{p}");
                }
                Ok(1)
            }
        },
        ConfigCommand::Default => {
            print!("{}", example::default_config());
            Ok(0)
        }
    }
}
