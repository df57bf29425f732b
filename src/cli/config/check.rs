//! `config check`: every problem of a config file, each with its file and line.
//!
//! `FileConfig::load` (what the daemon uses) stops at the first error, so fixing a file
//! would take one restart per mistake. Here, when the file is valid TOML but the load
//! fails, each top-level key is checked on its own by the same `FileConfig::parse`, and
//! every bad key is reported with the line it is on. A TOML *syntax* error still stops
//! at the first one: after it there are no keys to check.

use std::collections::BTreeMap;
use std::path::Path;

use toml::Spanned;

use crate::daemon::config::{ConfigError, FileConfig, Options};
use crate::daemon::paths;

/// The effective options of the file at `path`, or one line per problem: each key
/// refused, and each path the daemon would refuse at its start (journal, profile
/// store, socket), all at once and each with its line.
pub fn check(path: &Path) -> Result<Options, Vec<String>> {
    let first = match FileConfig::load(path) {
        Ok(file) => {
            let opts = file.into_options();
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let bad = path_problems(&opts, &text, path);
            return if bad.is_empty() { Ok(opts) } else { Err(bad) };
        }
        Err(e) => e,
    };
    let ConfigError::Parse { .. } = first else {
        return Err(vec![first.to_string()]);
    };
    let Ok(text) = std::fs::read_to_string(path) else {
        return Err(vec![first.to_string()]);
    };
    let mut problems = each_key(&text, path);
    if problems.is_empty() {
        // Syntax error, or a problem no single key shows: the daemon's own message.
        return Err(vec![first.to_string()]);
    }
    // The paths among the keys that are good on their own are checked as well: a
    // mistyped journal is not to come to light only once the rest is fixed.
    if let Some(opts) = good_keys(&text, path) {
        problems.extend(path_problems(&opts, &text, path));
    }
    Err(problems)
}

/// The paths of `opts` the daemon would refuse at start, each with the line of its key
/// in `text` (none when the file leaves the path at its default).
fn path_problems(opts: &Options, text: &str, path: &Path) -> Vec<String> {
    let socket = (!opts.no_socket).then_some(opts.socket.as_path());
    let lines = key_lines(text);
    paths::check(opts, socket)
        .into_iter()
        .map(|p| match lines.get(p.key) {
            Some(line) => format!("{}: line {line}: {p}", path.display()),
            None => format!("{}: {p}", path.display()),
        })
        .collect()
}

/// The line of each top-level key of `text`.
fn key_lines(text: &str) -> BTreeMap<String, usize> {
    toml::from_str::<BTreeMap<Spanned<String>, toml::Value>>(text)
        .map(|table| {
            table
                .into_keys()
                .map(|k| (k.get_ref().clone(), line_at(text, k.span().start)))
                .collect()
        })
        .unwrap_or_default()
}

/// The options of the keys of `text` that are good on their own, taken together.
fn good_keys(text: &str, path: &Path) -> Option<Options> {
    let table = toml::from_str::<toml::Table>(text).ok()?;
    let good: toml::Table = table
        .into_iter()
        .filter(|(k, v)| alone(k, v.clone(), path).is_ok())
        .collect();
    let text = toml::to_string(&good).ok()?;
    FileConfig::parse(&text, path)
        .ok()
        .map(FileConfig::into_options)
}

/// Checks each top-level key of `text` alone; empty if the text is not TOML at all.
fn each_key(text: &str, path: &Path) -> Vec<String> {
    let Ok(table) = toml::from_str::<BTreeMap<Spanned<String>, Spanned<toml::Value>>>(text) else {
        return Vec::new();
    };
    let mut keys: Vec<_> = table.into_iter().collect();
    keys.sort_by_key(|(k, _)| k.span().start);
    let mut problems = Vec::new();
    for (key, value) in keys {
        let key_line = line_at(text, key.span().start);
        let Err(e) = alone(key.get_ref(), value.get_ref().clone(), path) else {
            continue;
        };
        // In an array over several lines, the line of the first bad element.
        let (line, e) = bad_element(text, key.get_ref(), &value, path).unwrap_or((key_line, e));
        problems.push(format!(
            "{}: line {line}: {}: {}",
            path.display(),
            key.get_ref(),
            message(&e)
        ));
    }
    problems
}

/// 1-based line of byte `at` of `text`.
fn line_at(text: &str, at: usize) -> usize {
    1 + text[..at.min(text.len())].matches('\n').count()
}

/// `key = value` checked as a file of its own.
fn alone(key: &str, value: toml::Value, path: &Path) -> Result<(), ConfigError> {
    let mut one = toml::Table::new();
    one.insert(key.to_string(), value);
    match toml::to_string(&one) {
        Ok(text) => FileConfig::parse(&text, path).map(|_| ()),
        // Nothing toml wrote would be refused for its own form: no finding.
        Err(_) => Ok(()),
    }
}

/// The line and error of the first element of an array `value` that is refused on its
/// own; `None` for anything else. Element positions come from reading the array's text
/// again, with spans.
fn bad_element(
    text: &str,
    key: &str,
    value: &Spanned<toml::Value>,
    path: &Path,
) -> Option<(usize, ConfigError)> {
    const PREFIX: &str = "v = ";
    let span = value.span();
    let toml::Value::Array(_) = value.get_ref() else {
        return None;
    };
    let wrapped = format!("{PREFIX}{}", text.get(span.clone())?);
    let parsed: BTreeMap<String, Vec<Spanned<toml::Value>>> = toml::from_str(&wrapped).ok()?;
    parsed.get("v")?.iter().find_map(|element| {
        let e = alone(
            key,
            toml::Value::Array(vec![element.get_ref().clone()]),
            path,
        )
        .err()?;
        let at = (span.start + element.span().start).saturating_sub(PREFIX.len());
        Some((line_at(text, at), e))
    })
}

/// The message proper of a one-key document's error, without toml's position (which
/// is that of the one-key document, not of the file) and source excerpt.
fn message(e: &ConfigError) -> String {
    match e {
        ConfigError::Parse { what, .. } => crate::model::files::plain_types(
            what.lines()
                .map(str::trim)
                .rfind(|l| {
                    !l.is_empty()
                        && !l.starts_with('|')
                        && !l.starts_with('^')
                        && !l.starts_with("TOML parse error")
                })
                .unwrap_or(what),
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_text(text: &str) -> Result<Options, Vec<String>> {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("n.toml");
        std::fs::write(&file, text).expect("write");
        check(&file).map_err(|v| {
            let prefix = format!("{}: ", file.display());
            v.into_iter()
                .map(|l| {
                    assert!(l.starts_with(&prefix), "names the file: {l}");
                    assert!(!l.contains('\n'), "one line: {l}");
                    l[prefix.len()..].to_string()
                })
                .collect()
        })
    }

    #[test]
    fn a_valid_file_gives_its_options_over_the_defaults() {
        let o = check_text("policy = \"nmass\"\n# c\nmin_cpu = 1\n").expect("valid");
        assert_eq!(o.policy.name(), "nmass");
        assert_eq!(o.select.min_cpu, 1.0);
        assert_eq!(o.interval, Options::default().interval);
    }

    #[test]
    fn every_bad_key_is_reported_with_its_line() {
        let text = "policy = \"nmas\"\n\
                    min_cpu = 0.5\n\
                    \n\
                    exclude_com = [\"x\"]\n\
                    interval = \"-1s\"\n\
                    include_comm = [\n  \"ok*\",\n  \"[bad\",\n]\n\
                    log_format = \"json\"\n";
        let problems = check_text(text).expect_err("four problems");
        assert_eq!(problems.len(), 4, "{problems:#?}");
        let expect = [
            ("line 1: policy: ", "unknown policy 'nmas'"),
            ("line 4: exclude_com: ", "unknown field `exclude_com`"),
            ("line 5: interval: ", "invalid duration"),
            ("line 8: include_comm: ", "invalid pattern \"[bad\""),
        ];
        for (p, (start, needle)) in problems.iter().zip(expect) {
            assert!(p.starts_with(start), "{p}");
            assert!(p.contains(needle), "{p}");
            assert!(!p.contains("TOML parse error"), "{p}");
        }
    }

    #[test]
    fn a_bad_element_of_an_array_is_reported_on_its_own_line() {
        let text = "include_pid = [\n  12,\n\n  0,\n  -3,\n]\nexclude_pid = [0]\n";
        let problems = check_text(text).expect_err("two problems");
        assert_eq!(
            problems,
            [
                "line 4: include_pid: 0 is not a pid (1 to 4194304)",
                "line 7: exclude_pid: 0 is not a pid (1 to 4194304)",
            ],
        );
    }

    #[test]
    fn a_bad_path_is_reported_with_its_line_beside_other_bad_keys() {
        let text = "bogus = 1\njournal = \"/nonexistent-numasched/x/journal.json\"\n";
        let problems = check_text(text).expect_err("two problems");
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(problems[0].starts_with("line 1: bogus: "), "{problems:?}");
        assert!(
            problems[1].starts_with("line 2: journal: /nonexistent-numasched/x/journal.json"),
            "{problems:?}"
        );
        // Alone, the same line.
        let problems = check_text(&text["bogus = 1\n".len()..]).expect_err("one problem");
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(problems[0].starts_with("line 1: journal: "), "{problems:?}");
    }

    #[test]
    fn a_syntax_error_is_the_one_problem_reported() {
        let problems = check_text("policy = \"nmass\"\ninterval = \n").expect_err("syntax");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("line 2"), "{problems:?}");
    }

    #[test]
    fn a_missing_file_is_one_line() {
        let e = check(Path::new("/nonexistent/numasched.toml")).expect_err("missing");
        assert_eq!(e.len(), 1);
        assert!(e[0].starts_with("/nonexistent/numasched.toml: cannot read"));
    }
}
