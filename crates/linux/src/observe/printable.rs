//! Text from /proc made safe for a terminal. A process chooses its own name (`comm`,
//! `prctl(PR_SET_NAME)`), so a name holding escape sequences would otherwise clear the
//! operator's screen or rewrite what `status` shows. Control characters (C0, DEL, C1)
//! become visible escapes such as `\x1b`; everything else, including non-ASCII
//! letters, is kept.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character written as `\xNN` (or `\u{NNNN}` above 0xff),
/// and backslashes doubled so that an escape cannot be forged; borrowed when nothing
/// needed escaping, which is nearly always.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let n = c as u32;
                let _ = if n <= 0xff {
                    write!(out, "\\x{n:02x}")
                } else {
                    write!(out, "\\u{{{n:04x}}}")
                };
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c == '\\' || c.is_control()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_borrowed_unchanged() {
        for name in ["bash", "kworker/0:1", "café", "my (odd) prog"] {
            assert!(matches!(printable(name), Cow::Borrowed(n) if n == name));
        }
    }

    #[test]
    fn escape_sequences_become_visible() {
        assert_eq!(printable("\u{1b}[2Jevil"), "\\x1b[2Jevil");
        assert_eq!(printable("a\tb\nc\u{7f}"), "a\\x09b\\x0ac\\x7f");
        assert_eq!(printable("\u{9b}31m"), "\\x9b31m", "C1 CSI");
    }

    #[test]
    fn a_backslash_cannot_forge_an_escape() {
        assert_eq!(printable("\\x1b\u{1b}"), "\\\\x1b\\x1b");
    }
}
