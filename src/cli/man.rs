//! `numasched man [COMMAND...] [--out DIR]`: man pages generated from the clap
//! definition, so they list exactly the flags the binary takes.
//!
//! With `--out`, writes `numasched.1` and one page per subcommand (`numasched-daemon.1`,
//! `numasched-config-check.1`, ...) and prints their paths; without it, shows
//! `numasched.1` through `man -l -` when stdout is a terminal, and prints its roff
//! otherwise (`numasched man | man -l -`). With a COMMAND (`numasched man eval`,
//! `numasched man profile set`), the same for that subcommand's page alone.
//!
//! clap knows the flags; what it cannot know (exit status, environment, files,
//! signals, examples) is written here, in one table with a row per command
//! ([`PAGES`]), and appended to every page.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::Context;
use clap::{Args, Command};
use clap_mangen::Man;

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page into this directory (created if missing); with COMMAND, its
    /// page only.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The subcommand whose page to show instead of numasched(1): `eval`,
    /// `profile set`, ...
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(args: ManArgs) -> anyhow::Result<()> {
    let cmd = if args.command.is_empty() {
        None
    } else {
        Some(subcommand(&args.command)?)
    };
    match (args.out, cmd) {
        (Some(dir), None) => {
            for page in write_all(&dir)? {
                println!("{}", page.display());
            }
        }
        (Some(dir), Some(cmd)) => {
            create(&dir)?;
            println!("{}", write_page(&dir, cmd)?.display());
        }
        (None, cmd) => {
            let page = match cmd {
                Some(cmd) => render(cmd)?,
                None => root_page()?,
            };
            if std::io::stdout().is_terminal() {
                show(&page)?;
            } else {
                std::io::stdout()
                    .write_all(&page)
                    .context("writing the man page")?;
            }
        }
    }
    Ok(())
}

/// The subcommand `path` names (`["profile", "set"]`), built as [`write_all`] builds
/// it, so its page is the one `--out` writes.
fn subcommand(path: &[String]) -> anyhow::Result<Command> {
    let mut cmd = built();
    for (i, name) in path.iter().enumerate() {
        let visible: Vec<&str> = cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name())
            .collect();
        let parent = match i {
            0 => "numasched".to_string(),
            _ => format!("numasched {}", path[..i].join(" ")),
        };
        if visible.is_empty() {
            anyhow::bail!("{parent} has no subcommands: no page for '{name}'");
        }
        match cmd.find_subcommand(name).filter(|s| !s.is_hide_set()) {
            Some(sub) => cmd = sub.clone(),
            None => anyhow::bail!(
                "{parent} has no subcommand '{name}' (pages: {})",
                visible.join(", ")
            ),
        }
    }
    Ok(cmd)
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

/// A file a page names under FILES: its path and what it is.
type File = (&'static str, &'static str);

const CONFIG: File = (
    "/etc/numasched/numasched.toml",
    "configuration, read when --config is not given (numasched config default prints one)",
);
const STORE: File = (
    "/var/lib/numasched/profiles.db",
    "profile store (--db); profiles.db.bak is its last healthy copy",
);
const JOURNAL: File = (
    "/var/lib/numasched/journal.json",
    "original affinities (--journal), restored after a crash",
);
const SOCKET: File = (
    "/run/numasched/numasched.sock",
    "control socket (--socket) of numasched status and top",
);
const SYSFS: File = (
    "/sys/devices/system/node, /sys/devices/system/cpu",
    "the machine's nodes, CPUs and caches",
);
const EVAL_OUT: File = (
    "DIR/results.json, results.csv, table.txt, report.html",
    "what --out DIR receives: the results, the per-case table and the charts",
);

/// What clap cannot know about one page, in one row of [`PAGES`]. A subcommand
/// without a row of its own (`numasched-profile-set`) takes its parent's.
struct Facts {
    /// The page's name: `numasched`, `numasched-daemon`, ...
    page: &'static str,
    /// What EXIT STATUS adds to the rule every command follows ("" for nothing).
    exit: &'static str,
    /// FILES, when the command reads or writes any of its own.
    files: &'static [File],
    /// SIGNALS, for the commands that handle them ("" for none).
    signals: &'static str,
    /// EXAMPLES: a command line and what it does.
    examples: &'static [(&'static str, &'static str)],
}

/// The exit status every command shares.
const EXIT: &str = "0 on success; 1 when the command fails (one line on stderr names what \
and where); 2 for a bad flag or value.";

/// Every command's row; the root page has them all.
const PAGES: &[Facts] = &[
    // The root page gathers the other rows' exit notes, files and signals.
    Facts {
        page: "numasched",
        exit: "",
        files: &[],
        signals: "",
        examples: &[
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
        ],
    },
    Facts {
        page: "numasched-daemon",
        exit: "",
        files: &[CONFIG, STORE, JOURNAL, SOCKET],
        signals: "SIGTERM and SIGINT restore every affinity numasched changed and exit 0. \
After SIGKILL or a crash, the next start restores what the journal holds before anything \
else. The daemon logs SIGHUP and goes on: it does not reload its configuration (restart \
it).",
        examples: &[
            (
                "numasched daemon --dry-run",
                "plan every epoch, change nothing",
            ),
            (
                "numasched daemon --include-comm 'mcf*' --migrate-pages",
                "manage the mcf processes, their memory too",
            ),
        ],
    },
    Facts {
        page: "numasched-run",
        exit: "\\fBrun\\fR exits with its command's status, 128+N when a signal N ended it.",
        files: &[CONFIG, STORE, JOURNAL],
        signals: "\\fBrun\\fR passes SIGTERM, SIGINT and SIGHUP on to its command, and \
restores what it changed once the command has exited.",
        examples: &[
            (
                "numasched run --migrate-pages -- ./job --threads 8",
                "manage one job, exit with its status",
            ),
            ("numasched run -v -- make -j8", "say what is placed where"),
        ],
    },
    Facts {
        page: "numasched-status",
        exit: "\\fBstatus\\fR exits 1 when no daemon answers at the socket.",
        files: &[SOCKET],
        signals: "",
        examples: &[
            ("numasched status", "what the daemon does and why"),
            ("numasched status --json", "the same as JSON"),
        ],
    },
    Facts {
        page: "numasched-top",
        exit: "",
        files: &[SOCKET, STORE],
        signals: "\\fBtop\\fR ends on SIGTERM, SIGINT and SIGHUP as on q, the terminal \
restored.",
        examples: &[
            (
                "numasched top",
                "attached to the daemon, refreshed every second",
            ),
            (
                "numasched top --standalone",
                "observe the machine itself, change nothing",
            ),
        ],
    },
    Facts {
        page: "numasched-plan",
        exit: "",
        files: &[CONFIG, STORE],
        signals: "",
        examples: &[
            ("numasched plan", "what would happen now; changes nothing"),
            (
                "numasched plan --snapshot snap.json --policy oracle",
                "replay a saved snapshot against the model's best placement",
            ),
        ],
    },
    Facts {
        page: "numasched-advise",
        exit: "\\fBadvise\\fR exits 1 when no node can take the job.",
        files: &[CONFIG, STORE],
        signals: "",
        examples: &[
            (
                "numasched advise --cpus 4 --mem 8G",
                "the nodes and CPUs a job of 4 CPUs and 8 GiB should go to now, and why",
            ),
            (
                "numasched advise --cpus 4 --json",
                "the same with per-node detail, as JSON",
            ),
        ],
    },
    Facts {
        page: "numasched-topo",
        exit: "",
        files: &[SYSFS],
        signals: "",
        examples: &[
            ("numasched topo", "this machine as the policies see it"),
            (
                "numasched topo --machine 2n:1l:4c:2t",
                "a machine from a spec string",
            ),
        ],
    },
    Facts {
        page: "numasched-sim",
        exit: "",
        files: &[],
        signals: "",
        examples: &[
            (
                "numasched sim --machine nehalem-e5520 --programs mcf,lbm --homes 0,0 \
--policy auto",
                "how fast mcf and lbm would run, both with memory on node 0",
            ),
            (
                "numasched sim --machine this --programs mcf,lbm --homes 0,0 --policy auto",
                "the same on this machine, as numasched topo reads it",
            ),
        ],
    },
    Facts {
        page: "numasched-eval",
        exit: "",
        files: &[EVAL_OUT],
        signals: "",
        examples: &[
            (
                "numasched eval --suite nmass --out DIR",
                "every policy on the simulated N-MASS workloads",
            ),
            (
                "numasched eval --suite membus --verbose",
                "with the per-case table",
            ),
            (
                "numasched eval --workloads mixes.toml --machine this --out DIR",
                "your own mixes (a TOML file; see docs/workloads-example.toml) on this machine",
            ),
        ],
    },
    Facts {
        page: "numasched-profile",
        exit: "",
        files: &[STORE],
        signals: "",
        examples: &[
            (
                "numasched profile set mcf --mpki 30 --numa-penalty 1.4",
                "characterise mcf by name where there are no counters",
            ),
            (
                "numasched profile builtin --load",
                "give the store the simulator's built-in profiles",
            ),
            (
                "numasched profile export p.toml",
                "the store as a profile file",
            ),
        ],
    },
    Facts {
        page: "numasched-workload",
        exit: "",
        files: &[],
        signals: "\\fBworkload\\fR ends early on SIGTERM and SIGINT, with its summary.",
        examples: &[
            (
                "numasched workload stream --threads 2 --seconds 30",
                "a memory-bandwidth load",
            ),
            ("numasched workload cpu --duty 1:1", "a bursty compute load"),
        ],
    },
    Facts {
        page: "numasched-config",
        exit: "\\fBconfig check\\fR exits 1 when the file has problems.",
        files: &[CONFIG],
        signals: "",
        examples: &[
            (
                "numasched config check /etc/numasched/numasched.toml",
                "the effective options, or each problem with its line",
            ),
            (
                "numasched config default > numasched.toml",
                "an example with every default",
            ),
        ],
    },
    Facts {
        page: "numasched-completions",
        exit: "",
        files: &[],
        signals: "",
        examples: &[(
            "numasched completions bash > /usr/share/bash-completion/completions/numasched",
            "install bash completion",
        )],
    },
    Facts {
        page: "numasched-man",
        exit: "",
        files: &[],
        signals: "",
        examples: &[
            ("numasched man", "read numasched(1)"),
            ("numasched man eval", "read numasched-eval(1)"),
            (
                "numasched man --out /usr/local/share/man/man1",
                "install every page",
            ),
        ],
    },
];

/// The row of page `name`, or of the nearest parent that has one.
fn facts(name: &str) -> &'static Facts {
    let mut at = name;
    loop {
        if let Some(f) = PAGES.iter().find(|f| f.page == at) {
            return f;
        }
        match at.rsplit_once('-') {
            Some((parent, _)) => at = parent,
            None => return &PAGES[0],
        }
    }
}

/// Sections clap cannot derive, in roff, for the page `name` (`numasched`,
/// `numasched-daemon`, ...), from its row of [`PAGES`]; the root page's from them all.
fn extra_sections(name: &str) -> String {
    let f = facts(name);
    let rows: Vec<&Facts> = if f.page == "numasched" {
        PAGES.iter().collect()
    } else {
        vec![f]
    };
    let join = |part: fn(&Facts) -> &'static str| {
        let parts: Vec<&str> = rows
            .iter()
            .map(|r| part(r))
            .filter(|p| !p.is_empty())
            .collect();
        parts.join(" ")
    };
    let mut files: Vec<File> = Vec::new();
    for file in rows.iter().flat_map(|r| r.files) {
        if !files.contains(file) {
            files.push(*file);
        }
    }
    let mut s = format!(".SH \"EXIT STATUS\"\n{EXIT} {}\n", join(|r| r.exit));
    s.push_str(
        ".SH ENVIRONMENT\n.TP\n\\fBNUMASCHED_LOG\\fR\nLog level or tracing filter \
(e.g. debug, numasched=debug). Default: info for the daemon, warn for run, plan and advise.\n\
.TP\n\\fBNO_COLOR\\fR\nSet to anything but the empty string: no colour, in logs on a \
terminal or in eval's summary (https://no-color.org).\n",
    );
    let entries = |title: &str, list: &[(&str, &str)]| {
        let mut out = format!(".SH {title}\n");
        for (head, what) in list {
            out.push_str(&format!(".TP\n\\fB{head}\\fR\n{what}\n"));
        }
        out
    };
    if !files.is_empty() {
        s.push_str(&entries("FILES", &files));
    }
    let signals = join(|r| r.signals);
    if !signals.is_empty() {
        s.push_str(&format!(".SH SIGNALS\n{signals}\n"));
    }
    s.push_str(&entries("EXAMPLES", f.examples));
    s
}

/// The root command, built so that subcommands carry their full names
/// (`numasched-daemon`), which become their pages' titles and file names.
fn built() -> Command {
    let mut cmd = super::command().disable_help_subcommand(true);
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
    create(dir)?;
    let mut written = Vec::new();
    let mut todo = vec![built()];
    while let Some(cmd) = todo.pop() {
        todo.extend(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
        written.push(write_page(dir, cmd)?);
    }
    written.sort();
    Ok(written)
}

fn create(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!("--out: {}: exists and is not a directory", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("--out: creating {}", dir.display()))
}

/// Writes the page of `cmd` into `dir` under its own file name; returns the path.
fn write_page(dir: &Path, cmd: Command) -> anyhow::Result<PathBuf> {
    let path = dir.join(page(cmd.clone()).get_filename());
    std::fs::write(&path, render(cmd)?)
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(path)
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

    /// `numasched man eval` (and any other subcommand, nested ones too) shows the page
    /// `--out` writes for it; a name that is not a subcommand is one line listing those
    /// that are.
    #[test]
    fn a_subcommand_page_is_shown_by_name() {
        use clap::Parser;
        let cli = super::super::Cli::try_parse_from(["numasched", "man", "profile", "set"])
            .expect("man takes a subcommand");
        let super::super::Command::Man(args) = cli.command else {
            panic!("not man: {cli:?}");
        };
        assert_eq!(args.command, ["profile", "set"]);

        let dir = tempfile::tempdir().expect("tempdir");
        let pages = write_all(dir.path()).expect("write");
        let names = |c: &Command| -> Vec<String> {
            c.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| s.get_name().to_string())
                .collect()
        };
        let mut todo: Vec<Vec<String>> = names(&built()).into_iter().map(|n| vec![n]).collect();
        let mut shown = 0;
        while let Some(path) = todo.pop() {
            let cmd = subcommand(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            let file = format!("numasched-{}.1", path.join("-"));
            assert!(pages.iter().any(|p| p.ends_with(&file)), "{file}");
            let written = std::fs::read(dir.path().join(&file)).expect("read");
            assert_eq!(render(cmd.clone()).expect("render"), written, "{file}");
            todo.extend(names(&cmd).into_iter().map(|n| {
                let mut p = path.clone();
                p.push(n);
                p
            }));
            shown += 1;
        }
        assert!(shown >= PAGES.len() - 1, "{shown}");
        let eval = String::from_utf8(render(subcommand(&["eval".into()]).unwrap()).unwrap())
            .expect("utf8");
        assert!(eval.contains(".TH numasched-eval 1"), "{eval}");
        assert!(eval.contains("workloads"), "{eval}");

        for (path, needle) in [
            (
                vec!["bogus"],
                "numasched has no subcommand 'bogus' (pages: daemon, ",
            ),
            (
                vec!["profile", "bogus"],
                "numasched profile has no subcommand 'bogus'",
            ),
            (vec!["eval", "x"], "numasched eval has no subcommands"),
        ] {
            let path: Vec<String> = path.into_iter().map(String::from).collect();
            let e = subcommand(&path).expect_err(needle).to_string();
            assert!(e.contains(needle), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn every_row_is_a_page_and_the_root_page_gathers_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pages = write_all(dir.path()).expect("write");
        for row in PAGES {
            assert!(
                pages.iter().any(|p| p.ends_with(format!("{}.1", row.page))),
                "no page {}",
                row.page
            );
        }
        // A nested page takes its parent's row; the root page has every file and signal.
        assert_eq!(facts("numasched-profile-set").page, "numasched-profile");
        let root = extra_sections("numasched");
        for file in PAGES.iter().flat_map(|r| r.files) {
            assert_eq!(root.matches(file.0).count(), 1, "{}: {root}", file.0);
        }
        assert!(root.contains("passes SIGTERM") && root.contains("does not reload"));
        assert!(root.contains("config check\\fR exits 1"), "{root}");
    }
}
