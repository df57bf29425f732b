//! What the plugin says: the `--numasched` mode values, Slurm's step ids as
//! text, and the one-line `job-task` event the daemon's control socket reads.
//!
//! Kept free of any Slurm call so it can be unit-tested without slurmstepd.

use std::ffi::CStr;
use std::fmt;
use std::str::FromStr;

pub use crate::slurm::{SLURM_BATCH_SCRIPT, SLURM_EXTERN_CONT, SLURM_INTERACTIVE_STEP};

/// The value of `--numasched`: how much the daemon may do to this job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Leave the job's tasks alone.
    Off,
    /// Observe and recommend, never move anything.
    Advise,
    /// Place the tasks (affinity, optionally memory).
    Manage,
}

impl Mode {
    /// The spelling used on the command line, in `NUMASCHED=` and on the wire,
    /// so all three channels agree byte for byte.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Advise => "advise",
            Mode::Manage => "manage",
        }
    }

    /// The same spelling as a C string, for `spank_setenv`.
    pub fn as_cstr(self) -> &'static CStr {
        match self {
            Mode::Off => c"off",
            Mode::Advise => c"advise",
            Mode::Manage => c"manage",
        }
    }
}

/// Why a `--numasched` value was refused; its text is what the user sees
/// from srun/sbatch, so it names the option and the accepted values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadMode(pub String);

impl fmt::Display for BadMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid value '{}' for --numasched: expected off, advise or manage",
            self.0.escape_debug()
        )
    }
}

impl std::error::Error for BadMode {}

impl FromStr for Mode {
    type Err = BadMode;

    /// Exact, lower-case match only: the daemon compares the environment
    /// variable literally, so accepting `Manage` here would hand it a value
    /// it does not know.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(Mode::Off),
            "advise" => Ok(Mode::Advise),
            "manage" => Ok(Mode::Manage),
            other => Err(BadMode(other.to_owned())),
        }
    }
}

/// Which moment of a task's life an event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Sent from task_post_fork: the pid exists, is in the step's cgroup and
    /// has its affinity, but has NOT exec'd yet (it still looks like
    /// slurmstepd in /proc).
    Start,
    /// Sent from task_exit, after slurmstepd reaped the task.
    Exit,
}

impl Event {
    fn as_str(self) -> &'static str {
        match self {
            Event::Start => "start",
            Event::Exit => "exit",
        }
    }
}

/// Slurm's step id as the daemon wants it: the number for ordinary steps and
/// a name for the special ids, which as numbers would look like real steps
/// 4294967291.. to anyone reading a log.
pub fn step_text(step: u32) -> String {
    match step {
        SLURM_BATCH_SCRIPT => "batch".to_owned(),
        SLURM_EXTERN_CONT => "extern".to_owned(),
        SLURM_INTERACTIVE_STEP => "interactive".to_owned(),
        n => n.to_string(),
    }
}

/// Everything one `job-task` line carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEvent<'a> {
    pub event: Event,
    pub job: u32,
    pub step: u32,
    pub pid: i32,
    pub mode: Option<Mode>,
    pub cpus: Option<&'a str>,
}

impl TaskEvent<'_> {
    /// The exact line for the control socket, newline included:
    /// `job-task {"event":..,"job":..,"step":"..","pid":..,"mode":..,"cpus":..}`.
    ///
    /// Built by hand rather than with serde_json: six fixed fields do not
    /// justify another dependency in a library that slurmstepd loads.
    pub fn to_line(&self) -> String {
        format!(
            "job-task {{\"event\":\"{}\",\"job\":{},\"step\":{},\"pid\":{},\"mode\":{},\"cpus\":{}}}\n",
            self.event.as_str(),
            self.job,
            json_string(&step_text(self.step)),
            self.pid,
            self.mode
                .map_or_else(|| "null".to_owned(), |m| json_string(m.as_str())),
            self.cpus.map_or_else(|| "null".to_owned(), json_string),
        )
    }
}

/// A JSON string literal for `s`. Slurm's values are digits, commas and
/// dashes, but the line protocol breaks on a stray quote or newline, so
/// escape properly instead of trusting that.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_and_reject_others() {
        for m in [Mode::Off, Mode::Advise, Mode::Manage] {
            assert_eq!(m.as_str().parse::<Mode>(), Ok(m));
            assert_eq!(m.as_cstr().to_str(), Ok(m.as_str()));
        }
        for bad in ["", "Off", "manage ", "bogus", "on"] {
            let err = bad.parse::<Mode>().unwrap_err();
            assert!(err.to_string().contains("--numasched"), "{err}");
        }
    }

    #[test]
    fn special_steps_have_names() {
        assert_eq!(step_text(0), "0");
        assert_eq!(step_text(17), "17");
        assert_eq!(step_text(SLURM_BATCH_SCRIPT), "batch");
        assert_eq!(step_text(SLURM_EXTERN_CONT), "extern");
        assert_eq!(step_text(SLURM_INTERACTIVE_STEP), "interactive");
    }

    #[test]
    fn line_format_is_exact() {
        let ev = TaskEvent {
            event: Event::Start,
            job: 42,
            step: 0,
            pid: 1234,
            mode: Some(Mode::Off),
            cpus: Some("0-1"),
        };
        assert_eq!(
            ev.to_line(),
            "job-task {\"event\":\"start\",\"job\":42,\"step\":\"0\",\"pid\":1234,\"mode\":\"off\",\"cpus\":\"0-1\"}\n"
        );
        let ev = TaskEvent {
            event: Event::Exit,
            step: SLURM_BATCH_SCRIPT,
            mode: None,
            cpus: None,
            ..ev
        };
        assert_eq!(
            ev.to_line(),
            "job-task {\"event\":\"exit\",\"job\":42,\"step\":\"batch\",\"pid\":1234,\"mode\":null,\"cpus\":null}\n"
        );
    }

    #[test]
    fn json_escaping() {
        assert_eq!(json_string("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    }
}
