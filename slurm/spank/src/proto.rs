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

/// The string value of `key` in the daemon's one-line JSON reply (`None` when
/// absent, `null` or not a string). The reply is a flat object the daemon
/// writes with serde_json, so a scan for `"key":` cannot be fooled by text
/// inside a value: quotes there are escaped.
pub fn reply_field(reply: &str, key: &str) -> Option<String> {
    let tag = format!("{}:", json_string(key));
    let at = reply.find(&tag)? + tag.len();
    let mut chars = reply[at..].trim_start().chars();
    if chars.next()? != '"' {
        return None;
    }
    let mut out = String::new();
    loop {
        match chars.next()? {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    let code = u32::from_str_radix(&hex, 16).ok()?;
                    out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                }
                c => out.push(c),
            },
            c => out.push(c),
        }
    }
}

/// This host's name up to its first dot (`None` if it cannot be read).
pub fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().split('.').next().unwrap_or("").to_string())
        .filter(|h| !h.is_empty())
}

/// The line a step's end writes to the job's stderr: what the daemon said of
/// the step, with the node it ran on (a job over several nodes gets one line
/// from each). Control characters become spaces: it must stay one line.
pub fn report_line(node: Option<&str>, report: &str) -> String {
    let clean: String = report
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match node {
        Some(n) if !n.is_empty() => format!("numasched on {n}: {clean}\n"),
        _ => format!("numasched: {clean}\n"),
    }
}

/// Longest AdminComment written: the steps of a long job would otherwise
/// grow it without bound.
pub const COMMENT_MAX: usize = 1000;

/// The AdminComment for a job: what the daemon said of each of its steps on
/// this node, on one line, cut at [`COMMENT_MAX`] characters.
pub fn admin_comment(node: Option<&str>, steps: &str) -> String {
    let line = report_line(node, steps);
    let line = line.trim_end();
    match line.char_indices().nth(COMMENT_MAX) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_comment_is_one_bounded_line() {
        assert_eq!(
            admin_comment(Some("n1"), "step 3.0: a; step 3.batch: b"),
            "numasched on n1: step 3.0: a; step 3.batch: b"
        );
        let long = admin_comment(None, &"x".repeat(5000));
        assert_eq!(long.chars().count(), COMMENT_MAX + 3);
        assert!(!long.contains('\n'));
    }

    #[test]
    fn reply_fields_are_read_with_their_escapes() {
        let reply = r#"{"job_report":"step 7.0: a \"b\" \u00e9","ok":true,"report":"step 7.0: x","none":null}"#;
        assert_eq!(reply_field(reply, "report").as_deref(), Some("step 7.0: x"));
        assert_eq!(
            reply_field(reply, "job_report").as_deref(),
            Some("step 7.0: a \"b\" \u{e9}")
        );
        assert_eq!(reply_field(reply, "none"), None);
        assert_eq!(reply_field(reply, "ok"), None);
        assert_eq!(reply_field(reply, "missing"), None);
        assert_eq!(reply_field(r#"{"report":"cut"#, "report"), None);
    }

    #[test]
    fn the_report_line_is_one_line_with_its_node() {
        assert_eq!(
            report_line(Some("vm1"), "step 7.0: ok\nmore"),
            "numasched on vm1: step 7.0: ok more\n"
        );
        assert_eq!(report_line(None, "x"), "numasched: x\n");
    }

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
