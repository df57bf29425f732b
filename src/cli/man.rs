//! `numasched man [--out DIR]`: man pages generated from the clap definition, so they
//! list exactly the flags the binary takes.
//!
//! With `--out`, writes `numasched.1` and one page per subcommand (`numasched-daemon.1`,
//! `numasched-config-check.1`, ...) and prints their paths; without it, shows
//! `numasched.1` through `man -l -` when stdout is a terminal, and prints its roff
//! otherwise (`numasched man | man -l -`).
//!
//! clap knows the flags; what it cannot know (exit status, environment, files,
//! signals, examples) is written here, once, and appended to the root page and to the
//! pages of `daemon` and `run`, whose users need it most.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

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
        None if std::io::stdout().is_terminal() => show(&root_page()?)?,
        None => std::io::stdout()
            .write_all(&root_page()?)
            .context("writing the man page")?,
    }
    Ok(())
}

/// Pipes the page through `man -l -`, as a reader at a terminal expects; without
/// `man`, prints the roff and says how to read it.
fn show(page: &[u8]) -> anyhow::Result<()> {
    let child = std::process::Command::new("man")
        .args(["-l", "-"])
        .stdin(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        std::io::stdout()
            .write_all(page)
            .context("writing the man page")?;
        eprintln!("numasched: `man` not found; the page above is roff (numasched man --out DIR)");
        return Ok(());
    };
    if let Some(mut stdin) = child.stdin.take() {
        // The reader may quit before reading it all: not an error.
        let _ = stdin.write_all(page);
    }
    child.wait().context("waiting for man")?;
    Ok(())
}

/// Sections clap cannot derive, in roff, for a page of `name` (`numasched`,
/// `numasched-daemon`, ...); empty for pages that need none.
fn extra_sections(name: &str) -> String {
    let for_root = name == "numasched";
    if !(for_root || name == "numasched-daemon" || name == "numasched-run") {
        return String::new();
    }
    let mut s = String::new();
    s.push_str(".SH \"EXIT STATUS\"\n");
    s.push_str(
        "0 on success; 1 when the command fails (one line on stderr names what and where); \
2 for a bad flag or value. \\fBrun\\fR exits with its command's status, 128+N when a \
signal N ended it. \\fBconfig check\\fR exits 1 when the file has problems.\n",
    );
    s.push_str(
        ".SH ENVIRONMENT\n.TP\n\\fBNUMASCHED_LOG\\fR\nLog level or tracing filter \
(e.g. debug, numasched=debug). Default: info for the daemon, warn for run, plan and advise.\n",
    );
    s.push_str(".SH FILES\n");
    for (file, what) in [
        (
            "/etc/numasched/numasched.toml",
            "configuration (numasched config default prints one)",
        ),
        (
            "/var/lib/numasched/profiles.db",
            "profile store; profiles.db.bak is its last healthy copy",
        ),
        (
            "/var/lib/numasched/journal.json",
            "original affinities, restored after a crash",
        ),
        (
            "/run/numasched/numasched.sock",
            "control socket of numasched status and top",
        ),
    ] {
        s.push_str(&format!(".TP\n\\fB{file}\\fR\n{what}\n"));
    }
    s.push_str(
        ".SH SIGNALS\nSIGTERM and SIGINT restore every affinity numasched changed and \
exit 0. After SIGKILL or a crash, the next start restores what the journal holds before \
anything else. The daemon logs SIGHUP and goes on: it does not reload its configuration \
(restart it). \\fBrun\\fR passes SIGTERM, SIGINT and SIGHUP on to its command.\n",
    );
    s.push_str(".SH EXAMPLES\n");
    for (cmd, what) in [
        ("numasched plan", "what would happen now; changes nothing"),
        (
            "numasched daemon --dry-run",
            "plan every epoch, change nothing",
        ),
        (
            "numasched run --migrate-pages -- ./job --threads 8",
            "manage one job, exit with its status",
        ),
        ("numasched status", "what the daemon does and why"),
        (
            "numasched eval --suite nmass --out DIR",
            "every policy on the simulated N-MASS workloads",
        ),
    ] {
        s.push_str(&format!(".TP\n\\fB{cmd}\\fR\n{what}\n"));
    }
    s
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
    render(built())
}

/// One page: clap's sections, then [`extra_sections`].
fn render(cmd: Command) -> anyhow::Result<Vec<u8>> {
    let man = page(cmd);
    let file = man.get_filename();
    let name = file.strip_suffix(".1").unwrap_or(&file);
    let mut out = Vec::new();
    man.render(&mut out).context("rendering the man page")?;
    out.extend_from_slice(extra_sections(name).as_bytes());
    Ok(out)
}

/// Writes the root page and one per (nested, visible) subcommand; returns the paths.
pub fn write_all(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    let mut todo = vec![built()];
    while let Some(cmd) = todo.pop() {
        todo.extend(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
        let path = dir.join(page(cmd.clone()).get_filename());
        std::fs::write(&path, render(cmd)?)
            .with_context(|| format!("{}: cannot write", path.display()))?;
        written.push(path);
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

    #[test]
    fn daemon_run_and_root_pages_say_what_clap_cannot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pages = write_all(dir.path()).expect("write");
        for name in ["numasched.1", "numasched-daemon.1", "numasched-run.1"] {
            let path = pages
                .iter()
                .find(|p| p.file_name().is_some_and(|f| f == name))
                .expect("page written");
            let text = std::fs::read_to_string(path).expect("read");
            for section in ["EXIT STATUS", "ENVIRONMENT", "FILES", "SIGNALS", "EXAMPLES"] {
                assert!(
                    text.contains(&format!(".SH {section}"))
                        || text.contains(&format!(".SH \"{section}\"")),
                    "{name}: {section}"
                );
            }
        }
    }
}
