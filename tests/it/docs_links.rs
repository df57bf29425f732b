//! The documentation's links: every relative link in README.md and in the book under
//! docs/ names a file or directory that exists, and every `#fragment` names a heading of
//! the page it points at (slugified as GitHub does). Also keeps the README short.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The README is the newcomer's first ten minutes; the rest belongs in docs/.
const README_MAX_LINES: usize = 200;

/// One link found in a Markdown file.
struct Link {
    line: usize,
    target: String,
}

#[test]
fn readme_and_docs_links_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    collect_markdown(&root.join("docs"), &mut files);
    assert!(files.len() > 1, "no Markdown files found under docs/");

    let mut anchors: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = read(file);
        for link in links(&text) {
            checked += 1;
            if let Err(why) = check(file, &link.target, &mut anchors) {
                let shown = file.strip_prefix(root).unwrap_or(file).display();
                broken.push(format!("{shown}:{} → {} ({why})", link.line, link.target));
            }
        }
    }
    assert!(checked > 0, "no links found at all: the scanner is broken");
    assert!(
        broken.is_empty(),
        "{} broken link(s) of {checked}:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn readme_is_at_most_200_lines() {
    let readme = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move the detail into a page under docs/"
    );
}

/// The scanner itself, on the forms the documentation uses.
#[test]
fn scanner_finds_links_and_slugs_headings() {
    let text = "# Title\n\
                See [a](a.md), ![img](pics/x.png \"t\") and [b](<b c.md#Part-two>).\n\
                `[not](code.md)` and ``[nor](this.md)``\n\
                ```sh\n[inside](fence.md)\n# not a heading\n```\n\
                [ref]: docs/ref.md\n\
                ## Part two: the `nmass` suite's CPU (1 s)\n\
                ## Part two: the `nmass` suite's CPU (1 s)\n";
    let found: Vec<(usize, String)> = links(text)
        .into_iter()
        .map(|l| (l.line, l.target))
        .collect();
    assert_eq!(
        found,
        vec![
            (2, "a.md".to_string()),
            (2, "pics/x.png".to_string()),
            (2, "b c.md#Part-two".to_string()),
            (8, "docs/ref.md".to_string()),
        ]
    );
    assert_eq!(
        headings(text),
        vec![
            "title",
            "part-two-the-nmass-suites-cpu-1-s",
            "part-two-the-nmass-suites-cpu-1-s-1",
        ]
    );
    assert_eq!(slug("Doing no harm, measured"), "doing-no-harm-measured");
    assert_eq!(slug("1.3 LLC sharing"), "13-llc-sharing");
    assert_eq!(slug("snake_case and-dash"), "snake_case-and-dash");
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn collect_markdown(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a readable directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_markdown(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "md") {
            out.push(path);
        }
    }
}

/// Checks one target found in `file`: the path exists relative to the file's directory,
/// and a fragment names a heading of the Markdown file it points at.
fn check(
    file: &Path,
    target: &str,
    anchors: &mut HashMap<PathBuf, Vec<String>>,
) -> Result<(), String> {
    let lower = target.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Ok(());
    }
    if lower.starts_with("mailto:") {
        return Ok(());
    }
    if target.contains("://") {
        return Err("a scheme other than http(s) or mailto".to_string());
    }
    let (path, fragment) = match target.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (target, None),
    };
    let resolved = if path.is_empty() {
        file.to_path_buf()
    } else if path.starts_with('/') {
        return Err("an absolute path; links must be relative to the file".to_string());
    } else {
        file.parent()
            .expect("a file has a directory")
            .join(percent_decode(path))
    };
    if !resolved.exists() {
        return Err("no such file or directory".to_string());
    }
    let Some(fragment) = fragment else {
        return Ok(());
    };
    if resolved.extension().is_none_or(|ext| ext != "md") {
        return Ok(());
    }
    let known = anchors
        .entry(resolved.clone())
        .or_insert_with(|| headings(&read(&resolved)));
    let wanted = percent_decode(fragment);
    if known.contains(&wanted) {
        Ok(())
    } else {
        Err(format!("no heading slugifies to #{wanted}"))
    }
}

/// Every link target in `text` with its 1-based line: inline links and images
/// `[text](target "title")`, and reference definitions `[label]: target`. Fenced code
/// blocks and inline code spans are not Markdown and are skipped.
fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    for (index, line) in prose_lines(text) {
        let line_no = index + 1;
        let prose = strip_code_spans(line);
        if let Some(target) = reference_definition(&prose) {
            found.push(Link {
                line: line_no,
                target,
            });
            continue;
        }
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            match inline_target(after) {
                Some((target, used)) => {
                    if !target.is_empty() {
                        found.push(Link {
                            line: line_no,
                            target,
                        });
                    }
                    rest = &after[used..];
                }
                None => rest = after,
            }
        }
    }
    found
}

/// The lines outside fenced code blocks, with their 0-based index.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |c| trimmed.chars().take_while(|x| *x == c).count());
        match fence {
            Some((c, len)) => {
                if marker == Some(c) && run >= len && trimmed[run..].trim().is_empty() {
                    fence = None;
                }
            }
            None => {
                if indent <= 3 && run >= 3 {
                    fence = marker.map(|c| (c, run));
                } else {
                    out.push((index, line));
                }
            }
        }
    }
    out
}

/// `line` with every inline code span (a run of backticks up to the next run of the
/// same length) removed.
fn strip_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let open = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + open;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let run = chars[j..].iter().take_while(|c| **c == '`').count();
                if run == open {
                    close = Some(j + run);
                    break;
                }
                j += run;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => i = end,
            None => {
                // An unmatched run is literal text.
                out.extend(&chars[i..i + open]);
                i += open;
            }
        }
    }
    out
}

/// `[label]: target` at the start of a line (up to three spaces in).
fn reference_definition(line: &str) -> Option<String> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 || !trimmed.starts_with('[') {
        return None;
    }
    let close = trimmed.find("]:")?;
    if trimmed[1..close].contains(']') || close == 1 {
        return None;
    }
    let rest = trimmed[close + 2..].trim();
    let target = rest.split_whitespace().next()?;
    Some(
        target
            .trim_start_matches('<')
            .trim_end_matches('>')
            .to_string(),
    )
}

/// The target of an inline link whose `](` ends just before `after`, and how many bytes
/// of `after` the link used; `None` if this is not a link after all.
fn inline_target(after: &str) -> Option<(String, usize)> {
    if let Some(angled) = after.strip_prefix('<') {
        let end = angled.find('>')?;
        let used = 1 + end + 1 + angled[end + 1..].find(')')? + 1;
        return Some((angled[..end].to_string(), used));
    }
    // Up to the `)` that closes the link: parentheses inside the target are balanced.
    let mut depth = 0usize;
    let mut end = None;
    for (i, c) in after.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                end = Some(i);
                break;
            }
            ')' => depth -= 1,
            _ => {}
        }
    }
    let end = end?;
    let inside = after[..end].trim();
    // A title (`"..."`) may follow the destination after whitespace.
    let target = inside.split_whitespace().next().unwrap_or("");
    if target.contains(['[', ']']) {
        return None;
    }
    Some((target.to_string(), end + 1))
}

/// The anchors GitHub gives the headings of `text`, in order; a repeated slug gets
/// `-1`, `-2`, ... as on GitHub. ATX (`## ...`) and setext (underlined) headings
/// outside fenced code.
fn headings(text: &str) -> Vec<String> {
    let lines = prose_lines(text);
    let mut titles = Vec::new();
    for (k, (index, line)) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() <= 3 {
            let hashes = trimmed.chars().take_while(|c| *c == '#').count();
            if (1..=6).contains(&hashes) {
                let rest = &trimmed[hashes..];
                if rest.is_empty() || rest.starts_with([' ', '\t']) {
                    let title = rest.trim().trim_end_matches('#').trim_end();
                    titles.push(title.to_string());
                    continue;
                }
            }
        }
        // Setext: a non-blank paragraph line directly above a line of `=` or `-`.
        let underline = trimmed.trim_end();
        let is_underline = !underline.is_empty()
            && (underline.chars().all(|c| c == '=') || underline.chars().all(|c| c == '-'));
        if is_underline && k > 0 {
            let (above_index, above) = lines[k - 1];
            let above = above.trim();
            let paragraph = !above.is_empty()
                && !above.starts_with(['#', '|', '-', '*', '>'])
                && !above.starts_with(|c: char| c.is_ascii_digit());
            if above_index + 1 == *index && paragraph {
                titles.push(above.to_string());
            }
        }
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    titles
        .iter()
        .map(|title| {
            let base = slug(&link_text_only(title));
            let count = seen.entry(base.clone()).or_insert(0);
            let anchor = if *count == 0 {
                base.clone()
            } else {
                format!("{base}-{count}")
            };
            *count += 1;
            anchor
        })
        .collect()
}

/// A heading's text with `[text](target)` links reduced to their text, as rendered.
fn link_text_only(title: &str) -> String {
    let mut out = String::new();
    let mut rest = title;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match inline_target(after) {
            Some((_, used)) => {
                out.push_str(&rest[..at]);
                rest = &after[used..];
            }
            None => {
                out.push_str(&rest[..at + 2]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.replace('[', "")
}

/// GitHub's heading anchor: lower case, punctuation other than `-` and `_` dropped,
/// spaces to `-`.
fn slug(title: &str) -> String {
    title
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| {
            if c == ' ' {
                Some('-')
            } else if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c)
            } else {
                None
            }
        })
        .collect()
}

/// `%XX` escapes decoded (a link to `a%20b.md` names `a b.md`).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
