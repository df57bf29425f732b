//! A shell-style pattern for process names and cgroup paths (`postgres*`,
//! `/system.slice/*`), compiled once, where it is read (flag or config file), and
//! matched from then on.
//!
//! Why `glob::Pattern` and not a regex-backed glob set: compiling it is one linear pass
//! over the pattern, and matching needs no automaton whose construction can blow up or
//! fail on a long pattern (a regex-backed set took seconds on 100,000 characters, and
//! panicked on a run of stars). `*` also matches `/`, so a cgroup glob
//! `/system.slice/*` reaches into nested groups.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest pattern accepted: `PATH_MAX`, the longest cgroup path the kernel hands out,
/// so no real selection is refused, and matching one against every process each epoch
/// stays cheap.
pub const MAX_GLOB_LEN: usize = 4096;

/// A compiled pattern; compares, prints and serialises as the text it was given.
#[derive(Debug, Clone)]
pub struct Glob(glob::Pattern);

/// Refused while its own value is read, so that a config file's error names the
/// line of the bad pattern, not the line its array starts on.
impl<'de> Deserialize<'de> for Glob {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Glob, D::Error> {
        struct Pattern;
        impl serde::de::Visitor<'_> for Pattern {
            type Value = Glob;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a pattern in quotes")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Glob, E> {
                Glob::parse(s).map_err(E::custom)
            }
        }
        d.deserialize_str(Pattern)
    }
}

impl Glob {
    /// Compiles `s`, or says in one line why it cannot be used.
    pub fn parse(s: &str) -> Result<Glob, String> {
        // It would match no process (no command or cgroup is empty): a rule that
        // selects nothing without a word is a mistake, most often an unset variable.
        if s.is_empty() {
            return Err("empty pattern: it matches no process".into());
        }
        if s.len() > MAX_GLOB_LEN {
            return Err(format!(
                "pattern of {} characters; at most {MAX_GLOB_LEN} are accepted",
                s.len()
            ));
        }
        glob::Pattern::new(s).map(Glob).map_err(|e| {
            let shown: String = s.chars().take(64).collect();
            let more = if shown.len() < s.len() { "…" } else { "" };
            format!(
                "invalid pattern {shown:?}{more}: {} (at character {})",
                e.msg, e.pos
            )
        })
    }

    pub fn matches(&self, text: &str) -> bool {
        self.0.matches(text)
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

/// True when any of `globs` matches `text`.
pub fn any_match(globs: &[Glob], text: &str) -> bool {
    globs.iter().any(|g| g.matches(text))
}

impl TryFrom<String> for Glob {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Glob::parse(&s)
    }
}

impl PartialEq for Glob {
    fn eq(&self, other: &Glob) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<&str> for Glob {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Glob {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn g(s: &str) -> Glob {
        Glob::parse(s).expect("valid pattern")
    }

    #[test]
    fn shell_patterns_match_names_and_cgroup_paths() {
        assert!(g("postgres*").matches("postgres"));
        assert!(g("postgres*").matches("postgres: walwriter"));
        assert!(!g("postgres*").matches("xpostgres"));
        assert!(g("nsd_?").matches("nsd_a"));
        assert!(!g("nsd_?").matches("nsd_ab"));
        assert!(g("worker[0-3]").matches("worker2"));
        assert!(!g("worker[!0-3]").matches("worker2"));
        assert!(g("/system.slice/*").matches("/system.slice/a.service/sub"));
        assert!(g("a[*]").matches("a*") && !g("a[*]").matches("ab"));
    }

    #[test]
    fn a_bad_pattern_says_what_and_where_in_one_line() {
        let err = Glob::parse("worker[0-").expect_err("unclosed class");
        assert!(
            err.contains("worker[0-") && err.contains("at character"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
        let err = Glob::parse("").expect_err("empty");
        assert!(err.contains("matches no process"), "{err}");
    }

    /// A pattern of the longest accepted length, of the shapes that made the regex-backed
    /// set slow or panic (runs of `*`, `?`, classes), compiles and matches at once; one
    /// longer is refused before any work. (Timing bound loose on purpose: the regex set
    /// took seconds here; linear work takes microseconds.)
    #[test]
    fn long_patterns_compile_in_one_pass_and_longer_ones_are_refused() {
        let text = format!("{}b", "a".repeat(4095));
        let t = Instant::now();
        for p in [
            "*a".repeat(MAX_GLOB_LEN / 2),
            "?".repeat(MAX_GLOB_LEN),
            "[a]*".repeat(MAX_GLOB_LEN / 4),
        ] {
            let glob = g(&p);
            let _ = glob.matches(&text);
        }
        assert!(t.elapsed().as_secs_f64() < 1.0, "{:?}", t.elapsed());
        let err = Glob::parse(&"a*".repeat(50_000)).expect_err("too long");
        assert!(err.contains("at most 4096"), "{err}");
    }

    #[test]
    fn serialises_as_its_text() {
        let json = serde_json::to_string(&g("postgres*")).expect("json");
        assert_eq!(json, "\"postgres*\"");
        let back: Glob = serde_json::from_str(&json).expect("back");
        assert_eq!(back, "postgres*");
        assert!(serde_json::from_str::<Glob>("\"a[\"").is_err());
    }
}
