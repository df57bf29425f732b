//! `/proc/<pid>/numa_maps`: where a process's resident pages are, per node.
//!
//! The procfs crate has no parser for it. One line per mapping, as printed by
//! `show_numa_map()` in fs/proc/task_mmu.c:
//!
//! ```text
//! 7fa0bd703000 default file=/tmp/a\040b.dat dirty=6 active=0 N0=6 kernelpagesize_kB=4
//! 557a2e2d0000 bind:0-1 heap anon=386 dirty=386 N0=200 N2=186 kernelpagesize_kB=4
//! ```
//!
//! The address and the memory policy come first (two modes print as two words:
//! `weighted interleave`, `prefer (many)`); `file=<path>` (or `heap`/`stack`)
//! follows directly, then `huge` for hugetlb mappings, then counters and `N<node>=pages`,
//! and `kernelpagesize_kB` last. The kernel escapes blanks, `=` and newlines in the path
//! as octal (`\040`), so on a real kernel the line splits cleanly on whitespace; an
//! unescaped path (older or foreign producers) is still taken whole, up to the first
//! token that is a known counter. Unknown tokens are ignored, so a new kernel field
//! does not cost us the file.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::ObserveError;
use numasched_model::topology::NodeId;

/// Page size assumed when a line carries no `kernelpagesize_kB` (older kernels).
const DEFAULT_PAGE_KB: u64 = 4;

/// The whole file folded into what placement needs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaMaps {
    /// Resident bytes per node; nodes without pages are absent.
    pub node_bytes: BTreeMap<NodeId, u64>,
    /// Resident bytes per memory-policy mode (`default`, `bind`, `interleave`,
    /// `prefer`, `local`, ...). Pages under an explicit policy were put there on purpose
    /// and must not be migrated behind the owner's back.
    pub policy_bytes: BTreeMap<String, u64>,
    /// Resident bytes the kernel's NUMA balancing does not scan: under an explicit
    /// policy without its `balancing` flag ([`Policy::scanned_by_balancing`]).
    pub unscanned_bytes: u64,
    /// Resident bytes of anonymous memory (heap, stack, private writes): what
    /// migration can move and what remote access costs most.
    pub anon_bytes: u64,
    /// Resident bytes in hugetlbfs mappings.
    pub huge_bytes: u64,
    pub mappings: usize,
    /// The last line had no newline: it may have been cut and undercount.
    pub truncated: bool,
}

impl NumaMaps {
    pub fn total_bytes(&self) -> u64 {
        self.node_bytes
            .values()
            .fold(0, |a, b| a.saturating_add(*b))
    }

    /// Bytes under a policy other than `default`.
    pub fn explicit_policy_bytes(&self) -> u64 {
        self.policy_bytes
            .iter()
            .filter(|(mode, _)| mode.as_str() != "default")
            .fold(0, |a, (_, b)| a.saturating_add(*b))
    }
}

/// A memory policy as `mpol_to_str()` prints it: `mode[=flags][:nodes]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy<'a> {
    pub mode: &'a str,
    pub flags: Option<&'a str>,
    /// The node list as printed (`0-1,4`); empty when the mode takes none.
    pub nodes: &'a str,
}

impl<'a> Policy<'a> {
    /// Whether the kernel's NUMA balancing scans memory under this policy: the default
    /// one, and a bind made with `MPOL_F_NUMA_BALANCING` (printed `bind=balancing`,
    /// `bind=static|balancing`). Every other explicit policy lacks `MPOL_F_MOF`, and
    /// `task_numa_work` skips its mappings.
    pub fn scanned_by_balancing(&self) -> bool {
        self.mode == "default"
            || self
                .flags
                .is_some_and(|f| f.split('|').any(|flag| flag == "balancing"))
    }

    fn parse(s: &'a str) -> Policy<'a> {
        let (head, nodes) = s.split_once(':').unwrap_or((s, ""));
        let (mode, flags) = match head.split_once('=') {
            Some((m, f)) => (m, Some(f)),
            None => (head, None),
        };
        Policy { mode, flags, nodes }
    }
}

/// One line of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping<'a> {
    pub address: u64,
    pub policy: Policy<'a>,
    /// The mapped file with the kernel's octal escapes undone.
    pub file: Option<String>,
    pub heap: bool,
    pub stack: bool,
    pub huge: bool,
    pub anon_pages: u64,
    pub dirty_pages: u64,
    /// Pages per node, in the order printed (ascending node id on real kernels).
    pub node_pages: Vec<(NodeId, u64)>,
    pub page_kb: u64,
}

impl Mapping<'_> {
    pub fn bytes(&self) -> u64 {
        self.node_pages
            .iter()
            .fold(0u64, |a, (_, p)| a.saturating_add(self.pages_to_bytes(*p)))
    }

    fn pages_to_bytes(&self, pages: u64) -> u64 {
        pages.saturating_mul(self.page_kb).saturating_mul(1024)
    }
}

/// Counters the kernel prints after the path; seeing one ends an unescaped path.
fn is_known_field(token: &str) -> bool {
    const KEYS: &[&str] = &[
        "anon=",
        "dirty=",
        "mapped=",
        "mapmax=",
        "swapcache=",
        "active=",
        "writeback=",
        "kernelpagesize_kB=",
    ];
    matches!(token, "huge" | "heap" | "stack")
        || KEYS.iter().any(|k| token.starts_with(k))
        || node_field(token).is_some()
}

/// `N<digits>=<value>` → (node, value text).
fn node_field(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix('N')?;
    let (id, value) = rest.split_once('=')?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then_some((id, value))
}

fn number(key: &str, value: &str) -> Result<u64, String> {
    value
        .parse::<u64>()
        .map_err(|_| format!("{key}={value:?} is not a page count"))
}

/// Undoes `seq_path`'s octal escapes (`\040` → ' '); anything else passes through.
fn unescape(raw: &str) -> String {
    if !raw.contains('\\') {
        return raw.to_string();
    }
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c));
        if b[i] == b'\\' && octal {
            let digit = |k: usize| u32::from(b[i + k] - b'0');
            let v = digit(1) * 64 + digit(2) * 8 + digit(3);
            if let Ok(byte) = u8::try_from(v) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses one line. Errors name the token; the caller adds path and line number.
pub fn parse_line(line: &str) -> Result<Mapping<'_>, String> {
    let mut tokens = line.split_ascii_whitespace().peekable();
    let addr = tokens.next().ok_or("empty line")?;
    let address =
        u64::from_str_radix(addr, 16).map_err(|_| format!("address {addr:?} is not hex"))?;
    let mut policy_text = tokens.next().ok_or("no memory policy")?;
    // Two modes are printed with a blank (mm/mempolicy.c `policy_modes`):
    // "weighted interleave" and "prefer (many)"; take both words as one policy.
    let second = match policy_text {
        "weighted" => tokens.peek().filter(|t| t.starts_with("interleave")),
        "prefer" => tokens.peek().filter(|t| t.starts_with("(many)")),
        _ => None,
    };
    if let Some(second) = second.copied() {
        let start = policy_text.as_ptr() as usize - line.as_ptr() as usize;
        let end = second.as_ptr() as usize - line.as_ptr() as usize + second.len();
        policy_text = line.get(start..end).unwrap_or(policy_text);
        tokens.next();
    }
    let policy = Policy::parse(policy_text);
    let mut m = Mapping {
        address,
        policy,
        file: None,
        heap: false,
        stack: false,
        huge: false,
        anon_pages: 0,
        dirty_pages: 0,
        node_pages: Vec::new(),
        page_kb: DEFAULT_PAGE_KB,
    };
    while let Some(tok) = tokens.next() {
        if let Some(first) = tok.strip_prefix("file=") {
            let mut path = first.to_string();
            while let Some(next) = tokens.peek() {
                if is_known_field(next) {
                    break;
                }
                path.push(' ');
                path.push_str(next);
                tokens.next();
            }
            m.file = Some(unescape(&path));
            continue;
        }
        match tok {
            "heap" => m.heap = true,
            "stack" => m.stack = true,
            "huge" => m.huge = true,
            _ => {
                let Some((key, value)) = tok.split_once('=') else {
                    continue; // a flag we do not know
                };
                if let Some((id, v)) = node_field(tok) {
                    let node = id
                        .parse::<NodeId>()
                        .map_err(|_| format!("node id in {tok:?} is out of range"))?;
                    m.node_pages.push((node, number(key, v)?));
                    continue;
                }
                match key {
                    "anon" => m.anon_pages = number(key, value)?,
                    "dirty" => m.dirty_pages = number(key, value)?,
                    "kernelpagesize_kB" => {
                        m.page_kb = number(key, value)?;
                        if m.page_kb == 0 {
                            return Err("kernelpagesize_kB=0".into());
                        }
                    }
                    _ => {} // mapped=, mapmax=, active=, ... and anything newer
                }
            }
        }
    }
    Ok(m)
}

/// Folds a whole file. `path` only labels errors. A malformed line fails the file (the
/// totals would be wrong), except an unterminated last line, which a reader racing the
/// process can see cut short: it is dropped and `truncated` is set.
pub fn parse(text: &str, path: &Path) -> Result<NumaMaps, ObserveError> {
    let mut out = NumaMaps::default();
    let unterminated = !text.is_empty() && !text.ends_with('\n');
    let count = text.lines().count();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let last = i + 1 == count;
        let m = match parse_line(line) {
            Ok(m) => m,
            Err(_) if last && unterminated => {
                out.truncated = true;
                break;
            }
            Err(what) => return Err(ObserveError::parse(path, Some(i + 1), what)),
        };
        if last && unterminated {
            out.truncated = true;
        }
        out.mappings += 1;
        let mut line_bytes = 0u64;
        for &(node, pages) in &m.node_pages {
            let b = m.pages_to_bytes(pages);
            line_bytes = line_bytes.saturating_add(b);
            let e = out.node_bytes.entry(node).or_insert(0);
            *e = e.saturating_add(b);
        }
        if line_bytes > 0 {
            let e = out
                .policy_bytes
                .entry(m.policy.mode.to_string())
                .or_insert(0);
            *e = e.saturating_add(line_bytes);
            if !m.policy.scanned_by_balancing() {
                out.unscanned_bytes = out.unscanned_bytes.saturating_add(line_bytes);
            }
        }
        out.anon_bytes = out
            .anon_bytes
            .saturating_add(m.pages_to_bytes(m.anon_pages));
        if m.huge {
            out.huge_bytes = out.huge_bytes.saturating_add(line_bytes);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const REAL: &str = "\
564381f3b000 default file=/usr/bin/head mapped=2 N0=2 kernelpagesize_kB=4
564381f46000 default file=/usr/bin/head anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
557a2e2d0000 default heap anon=386 dirty=386 active=0 N0=386 kernelpagesize_kB=4
7fa0bd703000 default file=/tmp/a\\040b\\075c.dat dirty=6 active=0 N0=6 kernelpagesize_kB=4
7fa0bd800000 bind:0-1 anon=512 dirty=512 N0=256 N1=256 kernelpagesize_kB=4
7fa0c0000000 interleave=static:0,2 file=/dev/hugepages/x huge dirty=3 N0=1 N2=2 kernelpagesize_kB=2048
7fa0c1000000 prefer:1 anon=10 dirty=10 mapmax=3 swapcache=1 writeback=2 N1=10 kernelpagesize_kB=4
7ffcbdbe5000 default stack anon=9 dirty=9 active=1 N0=9 kernelpagesize_kB=4
7ffcbdbf0000 default
7ffcbdbf8000 local file=/usr/lib/x86_64-linux-gnu/libc.so.6
";

    #[test]
    fn sums_pages_per_node_in_bytes() {
        let m = parse(REAL, Path::new("numa_maps")).unwrap();
        assert_eq!(m.mappings, 10);
        assert!(!m.truncated);
        let kb = 1024u64;
        let n0 = (2 + 1 + 386 + 6 + 256 + 9) * 4 * kb + 2048 * kb;
        assert_eq!(m.node_bytes[&0], n0);
        assert_eq!(m.node_bytes[&1], (256 + 10) * 4 * kb);
        assert_eq!(m.node_bytes[&2], 2 * 2048 * kb);
        assert_eq!(m.huge_bytes, 3 * 2048 * kb);
        assert_eq!(m.anon_bytes, (1 + 386 + 512 + 10 + 9) * 4 * kb);
        assert_eq!(m.policy_bytes["bind"], 512 * 4 * kb);
        assert_eq!(m.policy_bytes["interleave"], 3 * 2048 * kb);
        assert_eq!(m.policy_bytes["prefer"], 10 * 4 * kb);
        assert!(!m.policy_bytes.contains_key("local"), "no resident pages");
        assert_eq!(m.explicit_policy_bytes(), (522 * 4 + 3 * 2048) * kb);
        assert_eq!(m.unscanned_bytes, m.explicit_policy_bytes());
        assert_eq!(m.total_bytes(), m.node_bytes.values().sum::<u64>());
    }

    /// The kernel's NUMA balancing scans the default policy and a bind made with
    /// `MPOL_F_NUMA_BALANCING`, nothing else (`vma_policy_mof`).
    #[test]
    fn memory_the_kernels_balancing_leaves_alone() {
        let text = "\
7fa0bd800000 bind:0-1 anon=4 N0=4 kernelpagesize_kB=4
7fa0bd900000 bind=balancing:0-1 anon=8 N1=8 kernelpagesize_kB=4
7fa0bda00000 bind=static|balancing:1 anon=16 N1=16 kernelpagesize_kB=4
7fa0bdb00000 default anon=32 N0=32 kernelpagesize_kB=4
7fa0bdc00000 local anon=64 N0=64 kernelpagesize_kB=4
";
        let m = parse(text, Path::new("numa_maps")).unwrap();
        assert_eq!(m.unscanned_bytes, (4 + 64) * 4 * 1024);
        assert!(Policy::parse("bind=static|balancing:1").scanned_by_balancing());
        assert!(!Policy::parse("prefer=relative:1").scanned_by_balancing());
    }

    #[test]
    fn reads_policy_and_path() {
        let line = "7fa0bd703000 interleave=relative:0-3 file=/tmp/a\\040b\\075c.dat N3=1";
        let m = parse_line(line).unwrap();
        assert_eq!(m.address, 0x7fa0bd703000);
        assert_eq!(m.policy.mode, "interleave");
        assert_eq!(m.policy.flags, Some("relative"));
        assert_eq!(m.policy.nodes, "0-3");
        assert_eq!(m.file.as_deref(), Some("/tmp/a b=c.dat"));
        assert_eq!(m.node_pages, vec![(3, 1)]);
        assert_eq!(m.page_kb, 4, "default page size");
        assert_eq!(m.bytes(), 4096);
    }

    #[test]
    fn two_word_policies() {
        let m = parse_line("1000 weighted interleave=static:0-1 anon=1 N0=1").unwrap();
        assert_eq!(m.policy.mode, "weighted interleave");
        assert_eq!(m.policy.flags, Some("static"));
        assert_eq!(m.policy.nodes, "0-1");
        let m = parse_line("1000 prefer (many):1,3 heap N1=1").unwrap();
        assert_eq!(m.policy.mode, "prefer (many)");
        assert_eq!(m.policy.nodes, "1,3");
        assert!(m.heap);
        let m = parse_line("1000 prefer:1 N1=1").unwrap();
        assert_eq!(m.policy.mode, "prefer");
        let m = parse_line("1000 weighted").unwrap();
        assert_eq!(m.policy.mode, "weighted");
    }

    #[test]
    fn unescaped_path_with_blanks_is_taken_whole() {
        let m = parse_line("1000 default file=/srv/my data/x y.db heap anon=2 N0=2").unwrap();
        assert_eq!(m.file.as_deref(), Some("/srv/my data/x y.db"));
        assert!(m.heap);
        assert_eq!(m.anon_pages, 2);
        let m = parse_line("1000 default file=/a b").unwrap();
        assert_eq!(m.file.as_deref(), Some("/a b"));
    }

    #[test]
    fn sparse_node_ids_and_unknown_tokens() {
        let t = "1000 default anon=3 future_flag shiny=7 N0=1 N7=2 kernelpagesize_kB=4 extra\n";
        let m = parse(t, Path::new("x")).unwrap();
        assert_eq!(m.node_bytes.keys().copied().collect::<Vec<_>>(), vec![0, 7]);
        assert_eq!(m.node_bytes[&7], 8192);
    }

    #[test]
    fn cut_last_line_is_dropped_not_fatal() {
        let t = "1000 default N0=1 kernelpagesize_kB=4\n2000 default N0=5 kernelpagesize_k";
        let m = parse(t, Path::new("x")).unwrap();
        assert!(m.truncated);
        assert_eq!(
            m.node_bytes[&0],
            4096 + 5 * 4096,
            "the cut line's pages still count"
        );
        let t = "1000 default N0=1 kernelpagesize_kB=4\n2000 default N0=x";
        let m = parse(t, Path::new("x")).unwrap();
        assert!(m.truncated);
        assert_eq!(m.mappings, 1);
        assert_eq!(m.node_bytes[&0], 4096);
    }

    #[test]
    fn malformed_lines_name_path_and_line() {
        let t = "1000 default N0=1\nzzz default N0=1\n";
        let e = parse(t, Path::new("/proc/7/numa_maps"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/proc/7/numa_maps:2: "), "{e}");
        assert!(e.contains("zzz"), "{e}");
        for bad in [
            "1000 default N0=-1\n",
            "1000 default anon=1x\n",
            "1000 default N99999999999=1\n",
            "1000 default N0=1 kernelpagesize_kB=0\n",
            "1000\n",
        ] {
            let e = parse(bad, Path::new("p")).unwrap_err().to_string();
            assert!(e.starts_with("p:1: "), "{bad:?}: {e}");
        }
    }

    #[test]
    fn empty_file_is_no_memory() {
        assert_eq!(parse("", Path::new("x")).unwrap(), NumaMaps::default());
        assert_eq!(parse("\n\n", Path::new("x")).unwrap(), NumaMaps::default());
    }

    #[test]
    fn huge_counts_saturate() {
        let t = format!(
            "1000 default N0={} kernelpagesize_kB={}\n",
            u64::MAX,
            u64::MAX
        );
        let m = parse(&t, Path::new("x")).unwrap();
        assert_eq!(m.node_bytes[&0], u64::MAX);
    }

    proptest! {
        #[test]
        fn random_text_never_panics(s in "\\PC*") {
            let _ = parse(&s, Path::new("x"));
        }

        #[test]
        fn random_tokens_never_panic(
            lines in proptest::collection::vec(
                proptest::collection::vec(
                    "[0-9a-f]{1,12}|default|bind:0-1|file=[ -~]{0,12}|heap|huge|N[0-9]{1,3}=[0-9]{1,20}|\
                     kernelpagesize_kB=[0-9]{1,6}|anon=[0-9]{1,5}|\\\\[0-9]{1,3}|[=:N]",
                    0..10),
                0..8),
            newline in any::<bool>(),
        ) {
            let mut s = lines.iter().map(|l| l.join(" ")).collect::<Vec<_>>().join("\n");
            if newline { s.push('\n'); }
            let _ = parse(&s, Path::new("x"));
        }
    }
}
