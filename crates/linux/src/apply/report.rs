//! What one apply pass did, one line per decision, so an operator can audit it and
//! the daemon can log it. One process's failure is one line, never the end of the pass.

use std::fmt;

use numasched_model::topology::NodeId;
use numasched_model::CpuSet;

/// What happened to one placement or page move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Changed as planned.
    Done,
    /// Already as planned; nothing changed.
    Unchanged,
    /// Dry run: would have changed (nothing was).
    DryRun,
    /// The plan leaves the process where it is.
    LeftAlone,
    /// Not ours to touch (protected pid, pid reused, kernel thread, not in the
    /// snapshot, migration disabled, placement not applied).
    Skipped,
    /// Would break someone else's pin; the process keeps it.
    Refused,
    /// Someone else pinned it after numasched did: numasched let go of it (its own
    /// set put back where it still stands) and keeps their choice. Not a refusal: it
    /// is how an operator takes a process back by hand.
    Yielded,
    /// Rate limit reached; tried again on a later pass.
    Deferred,
    /// The process exited before or during the pass: normal.
    Gone,
    /// The kernel refused; the rest of the pass went on.
    Failed,
}

impl Action {
    /// The word used in reports, logs and `status`.
    pub fn word(self) -> &'static str {
        match self {
            Action::Done => "done",
            Action::Unchanged => "unchanged",
            Action::DryRun => "dry-run",
            Action::LeftAlone => "left alone",
            Action::Skipped => "skipped",
            Action::Refused => "refused",
            Action::Yielded => "yielded",
            Action::Deferred => "deferred",
            Action::Gone => "gone",
            Action::Failed => "FAILED",
        }
    }
}

/// What a line is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Affinity {
        cpus: CpuSet,
    },
    Pages {
        from: NodeId,
        to: NodeId,
        bytes: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub pid: u32,
    pub subject: Subject,
    pub action: Action,
    /// Why, in a few words.
    pub detail: String,
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.subject {
            Subject::Affinity { cpus } if cpus.is_empty() => {
                write!(f, "pid {} affinity: ", self.pid)?
            }
            Subject::Affinity { cpus } => write!(f, "pid {} affinity {cpus}: ", self.pid)?,
            Subject::Pages { from, to, bytes } => write!(
                f,
                "pid {} pages {from}->{to} ({:.1} MB): ",
                self.pid,
                *bytes as f64 / 1e6
            )?,
        }
        write!(f, "{}: {}", self.action.word(), self.detail)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyReport {
    pub dry_run: bool,
    /// One per placement of the plan, in plan order.
    pub placements: Vec<Line>,
    /// One per page move of the plan, in plan order.
    pub moves: Vec<Line>,
}

impl ApplyReport {
    /// The placement line of `pid`, if the plan had one.
    pub fn placement(&self, pid: u32) -> Option<&Line> {
        self.placements.iter().find(|l| l.pid == pid)
    }

    /// Every line with this action.
    pub fn count(&self, action: Action) -> usize {
        self.placements
            .iter()
            .chain(&self.moves)
            .filter(|l| l.action == action)
            .count()
    }
}

impl fmt::Display for ApplyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in self.placements.iter().chain(&self.moves) {
            writeln!(f, "{line}")?;
        }
        Ok(())
    }
}
