//! `numasched man [--out DIR]`: man pages generated from the clap definition, so they
//! list exactly the flags the binary takes.
//!
//! With `--out`, writes `numasched.1` and one page per subcommand (`numasched-daemon.1`,
//! `numasched-config-check.1`, ...) and prints their paths; without it, prints
//! `numasched.1` on stdout (`numasched man | man -l -`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Command, CommandFactory};
use clap_mangen::Man;

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page into this directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub fn run(args: ManArgs) -> anyhow::Result<()> {
    match args.out {
        Some(dir) => {
            for page in write_all(&dir)? {
                println!("{}", page.display());
            }
        }
        None => print!("{}", String::from_utf8_lossy(&root_page()?)),
    }
    Ok(())
}

/// The root command, built so that subcommands carry their full names
/// (`numasched-daemon`), which become their pages' titles and file names.
fn built() -> Command {
    let mut cmd = super::Cli::command().disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// Every page names the package and version as its source, subcommands included
/// (clap_mangen would use the subcommand's own name and no version).
fn page(cmd: Command) -> Man {
    Man::new(cmd).source(format!("numasched {}", env!("CARGO_PKG_VERSION")))
}

/// `numasched.1` as roff.
pub fn root_page() -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    page(built())
        .render(&mut out)
        .context("rendering the man page")?;
    Ok(out)
}

/// Writes the root page and one per (nested, visible) subcommand; returns the paths.
pub fn write_all(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    let mut todo = vec![built()];
    while let Some(cmd) = todo.pop() {
        todo.extend(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
        let page = page(cmd)
            .generate_to(dir)
            .with_context(|| format!("writing a man page into {}", dir.display()))?;
        written.push(page);
    }
    written.sort();
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_page_is_titled_and_lists_the_subcommands() {
        let page = String::from_utf8(root_page().expect("render")).expect("utf8");
        assert!(page.contains(".TH numasched 1"), "{page}");
        assert!(page.contains("daemon"), "{page}");
        assert!(page.contains("completions"), "{page}");
    }

    #[test]
    fn every_subcommand_gets_its_own_page() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pages = write_all(dir.path()).expect("write");
        let names: Vec<String> = pages
            .iter()
            .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        for want in [
            "numasched.1",
            "numasched-daemon.1",
            "numasched-config.1",
            "numasched-config-check.1",
            "numasched-man.1",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
        }
        let daemon = std::fs::read_to_string(dir.path().join("numasched-daemon.1")).expect("read");
        assert!(
            daemon.contains(".TH numasched-daemon 1  \"numasched "),
            "{daemon}"
        );
        assert!(daemon.contains("migrate\\-pages"), "{daemon}");
        assert!(!names.iter().any(|n| n.contains("help")), "{names:?}");
    }
}
