//! `numasched status`: ask the running daemon what it is doing, over its control socket.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::daemon::config::DEFAULT_SOCKET;
use crate::daemon::socket::request_status;

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The daemon's control socket.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Print the status as JSON (the `DaemonStatus` contract).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: StatusArgs) -> anyhow::Result<()> {
    let status = request_status(&args.socket)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&status).context("encoding the status")?
        );
    } else {
        print!("{}", status.render());
    }
    Ok(())
}
