//! The kernel's CPU/node list format (`0-3,8-11`), used by sysfs, `/proc/<pid>/status`
//! and the command line alike.

/// Most ids a list may name, counting repeats: far above any real machine.
const MAX_IDS: u64 = (1 << 16) + 1;

/// Parses a kernel list such as `0-3,8-11` or `5`. An empty (or all-blank) string is the
/// empty set, as sysfs prints for memory-only nodes.
pub fn parse(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.trim().split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a, part)?, num(b, part)?),
            None => {
                let v = num(part, part)?;
                (v, v)
            }
        };
        if lo > hi {
            return Err(format!("range '{}' runs backwards", part.escape_debug()));
        }
        // Capped in total, not only per range: overlapping maximal ranges would
        // otherwise make a 4 KiB file cost hundreds of megabytes before the dedup.
        if out.len() as u64 + u64::from(hi - lo) + 1 > MAX_IDS {
            return Err(format!(
                "range '{}' is implausibly large",
                part.escape_debug()
            ));
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn num(s: &str, part: &str) -> Result<u32, String> {
    s.trim()
        .parse::<u32>()
        .map_err(|_| format!("'{}' is not a number or range", part.escape_debug()))
}

/// Formats a set the way the kernel does: ascending, with runs collapsed.
pub fn format(ids: &[u32]) -> String {
    let mut v = ids.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_kernel_lists() {
        assert_eq!(parse("0-3,8-11").unwrap(), vec![0, 1, 2, 3, 8, 9, 10, 11]);
        assert_eq!(parse("5\n").unwrap(), vec![5]);
        assert_eq!(parse("").unwrap(), Vec::<u32>::new());
        assert!(parse("3-1").is_err());
        assert!(parse("a").is_err());
        assert!(parse("0-").is_err());
    }

    proptest! {
        #[test]
        fn format_then_parse_is_identity(mut v in proptest::collection::vec(0u32..512, 0..64)) {
            v.sort_unstable();
            v.dedup();
            prop_assert_eq!(parse(&format(&v)).unwrap(), v);
        }

        #[test]
        fn parse_never_panics(s in ".{0,40}") {
            let _ = parse(&s);
        }
    }
}
