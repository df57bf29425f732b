//! Which address ranges of a process page migration may move, from `/proc/<pid>/maps`
//! (where each mapping starts and ends) joined with `numa_maps` (its memory policy and
//! pages per node, keyed by the same start address).
//!
//! Left out: mappings under an explicit memory policy (`bind`, `interleave`, ...: the
//! owner put those pages where they are on purpose) and hugetlbfs mappings (their pages
//! move whole or not at all, and the pool may have no page free on the target).

use std::collections::HashMap;

use crate::observe::numa_maps;
use numasched_model::topology::NodeId;
use serde::{Deserialize, Serialize};

/// Bytes per base page when `numa_maps` does not say.
const BASE_PAGE: u64 = 4096;

/// The movable regions, in address order. Lines either file cannot parse are skipped:
/// a mapping that appeared or vanished between the two reads is not worth an error.
/// A mapping of a process whose pages page migration may move: private to the
/// process's memory policy (`default`, not bound), not hugetlbfs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Resident pages per node.
    pub node_pages: Vec<(NodeId, u64)>,
    /// Bytes per page of this mapping.
    pub page_bytes: u64,
}

pub fn join(maps: &str, numa: &str) -> Vec<Region> {
    let mut ranges: HashMap<u64, u64> = HashMap::new();
    for line in maps.lines() {
        let Some(range) = line.split_ascii_whitespace().next() else {
            continue;
        };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        if let (Ok(start), Ok(end)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
            if end > start {
                ranges.insert(start, end);
            }
        }
    }
    let mut out = Vec::new();
    for line in numa.lines() {
        let Ok(m) = numa_maps::parse_line(line) else {
            continue;
        };
        let Some(&end) = ranges.get(&m.address) else {
            continue;
        };
        if m.policy.mode != "default" || m.huge || m.node_pages.iter().all(|(_, p)| *p == 0) {
            continue;
        }
        out.push(Region {
            start: m.address,
            end,
            node_pages: m.node_pages.clone(),
            page_bytes: if m.page_kb == 0 {
                BASE_PAGE
            } else {
                m.page_kb * 1024
            },
        });
    }
    out.sort_by_key(|r| r.start);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d4a0000000-55d4a0021000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0010000000 rw-p 00000000 00:00 0
7f2000000000-7f2000200000 rw-p 00000000 00:00 0
7f3000000000-7f3000400000 rw-s 00000000 00:0e 1234                       /dev/hugepages/x
";
    const NUMA: &str = "\
55d4a0000000 default heap anon=33 dirty=33 N0=33 kernelpagesize_kB=4
7f0000000000 default anon=65536 dirty=65536 N0=1000 N1=64536 kernelpagesize_kB=4
7f2000000000 bind:1 anon=512 dirty=512 N1=512 kernelpagesize_kB=4
7f3000000000 default file=/dev/hugepages/x huge dirty=2 N0=2 kernelpagesize_kB=2048
7f9999999000 default anon=1 N0=1 kernelpagesize_kB=4
";

    #[test]
    fn keeps_default_policy_mappings_with_pages_and_their_extent() {
        let r = join(MAPS, NUMA);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r[0].start, 0x55d4a0000000);
        assert_eq!(r[0].end, 0x55d4a0021000);
        assert_eq!(r[1].node_pages, vec![(0, 1000), (1, 64536)]);
        assert_eq!(r[1].page_bytes, 4096);
    }

    #[test]
    fn garbage_lines_are_skipped_not_fatal() {
        assert!(join("nonsense\n1-0 x\n", "zz default N0=1\n").is_empty());
    }
}
