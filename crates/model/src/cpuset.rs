//! A set of Linux CPU ids, the one shape every stage uses for "where a process may run".
//!
//! Observation reads sets from `/proc` and sysfs, policies compute them, the journal
//! stores them and the actuator hands them to `sched_setaffinity`. Spelled as `Vec<CpuId>`
//! each stage had to remember to sort and dedup before comparing, and two copies of a
//! `sorted` helper grew up for it. Here the invariant (ascending, no repeats) is the
//! type's: equality is set equality, and the kernel's list format is its `Display`.
//!
//! It is a sorted vector rather than a bitmask: the sets are small, the common
//! operations are iteration and comparison, and it reads as a slice of ids
//! (`Deref<Target = [CpuId]>`), so it serialises as the list it always was.

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::topology::{cpulist, CpuId};

/// Ascending CPU ids without repeats.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet(Vec<CpuId>);

impl CpuSet {
    /// The empty set.
    pub fn new() -> CpuSet {
        CpuSet(Vec::new())
    }

    /// Parses the kernel's list format (`0-3,8`), as `/proc/<pid>/status` and sysfs
    /// print it; the error names the offending part.
    pub fn parse(list: &str) -> Result<CpuSet, String> {
        cpulist::parse(list).map(CpuSet)
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: CpuId) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }

    /// Adds `cpu`; returns whether it was new.
    pub fn insert(&mut self, cpu: CpuId) -> bool {
        match self.0.binary_search(&cpu) {
            Ok(_) => false,
            Err(at) => {
                self.0.insert(at, cpu);
                true
            }
        }
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.iter().all(|&c| other.contains(c))
    }

    /// CPUs in both.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(
            self.0
                .iter()
                .copied()
                .filter(|&c| other.contains(c))
                .collect(),
        )
    }

    /// CPUs in either.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        self.0.iter().chain(other.0.iter()).copied().collect()
    }

    /// CPUs of `self` not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(
            self.0
                .iter()
                .copied()
                .filter(|&c| !other.contains(c))
                .collect(),
        )
    }

    /// The ids, ascending.
    pub fn as_slice(&self) -> &[CpuId] {
        &self.0
    }

    pub fn into_vec(self) -> Vec<CpuId> {
        self.0
    }
}

impl Deref for CpuSet {
    type Target = [CpuId];
    fn deref(&self) -> &[CpuId] {
        &self.0
    }
}

impl FromIterator<CpuId> for CpuSet {
    fn from_iter<I: IntoIterator<Item = CpuId>>(iter: I) -> CpuSet {
        let mut v: Vec<CpuId> = iter.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        CpuSet(v)
    }
}

impl<'a> FromIterator<&'a CpuId> for CpuSet {
    fn from_iter<I: IntoIterator<Item = &'a CpuId>>(iter: I) -> CpuSet {
        iter.into_iter().copied().collect()
    }
}

impl From<Vec<CpuId>> for CpuSet {
    fn from(v: Vec<CpuId>) -> CpuSet {
        v.into_iter().collect()
    }
}

impl From<&[CpuId]> for CpuSet {
    fn from(v: &[CpuId]) -> CpuSet {
        v.iter().collect()
    }
}

impl<const N: usize> From<[CpuId; N]> for CpuSet {
    fn from(v: [CpuId; N]) -> CpuSet {
        v.into_iter().collect()
    }
}

impl IntoIterator for CpuSet {
    type Item = CpuId;
    type IntoIter = std::vec::IntoIter<CpuId>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a CpuSet {
    type Item = &'a CpuId;
    type IntoIter = std::slice::Iter<'a, CpuId>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl PartialEq<[CpuId]> for CpuSet {
    fn eq(&self, other: &[CpuId]) -> bool {
        self.0 == other
    }
}

impl PartialEq<Vec<CpuId>> for CpuSet {
    fn eq(&self, other: &Vec<CpuId>) -> bool {
        &self.0 == other
    }
}

impl<const N: usize> PartialEq<[CpuId; N]> for CpuSet {
    fn eq(&self, other: &[CpuId; N]) -> bool {
        self.0 == other
    }
}

/// The kernel's list format, `0-3,8`; the empty set prints as nothing, as sysfs does.
/// Width and alignment apply (`{:<10}`), as tables need.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&cpulist::format(&self.0))
    }
}

/// As the list of ids, so that assertion messages and logs read as before.
impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl FromStr for CpuSet {
    type Err = String;
    fn from_str(s: &str) -> Result<CpuSet, String> {
        CpuSet::parse(s)
    }
}

/// A JSON list of ids, as snapshots, plans and the journal have always carried it.
impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// Any list of ids, in any order and with repeats (hand-written snapshots have both);
/// the set keeps each once, ascending.
impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CpuSet, D::Error> {
        Vec::<CpuId>::deserialize(d).map(CpuSet::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn kept_sorted_and_once() {
        let s = CpuSet::from(vec![3, 1, 3, 0]);
        assert_eq!(s, [0, 1, 3]);
        assert_eq!(s.to_string(), "0-1,3");
        assert_eq!(format!("[{s:<6}]"), "[0-1,3 ]");
        assert_eq!(format!("{s:?}"), "[0, 1, 3]");
        assert_eq!(CpuSet::parse("0-1,3\n").unwrap(), s);
        assert!(CpuSet::parse("3-1").unwrap_err().contains("backwards"));
        let mut t = CpuSet::new();
        assert!(t.insert(5));
        assert!(!t.insert(5));
        assert!(t.insert(2));
        assert_eq!(t, [2, 5]);
    }

    #[test]
    fn set_operations() {
        let a = CpuSet::from([0, 1, 2, 3]);
        let b = CpuSet::from([2, 3, 4]);
        assert_eq!(a.intersection(&b), [2, 3]);
        assert_eq!(a.union(&b), [0, 1, 2, 3, 4]);
        assert_eq!(a.difference(&b), [0, 1]);
        assert!(CpuSet::from([1, 2]).is_subset(&a));
        assert!(!b.is_subset(&a));
        assert!(CpuSet::new().is_subset(&a));
        assert!(a.contains(3) && !a.contains(4));
    }

    #[test]
    fn serialises_as_a_list_and_reads_any_order() {
        let s: CpuSet = serde_json::from_str("[4, 0, 4, 2]").unwrap();
        assert_eq!(serde_json::to_string(&s).unwrap(), "[0,2,4]");
        assert!(serde_json::from_str::<CpuSet>("[-1]").is_err());
    }

    proptest! {
        #[test]
        fn set_laws(a in proptest::collection::vec(0u32..64, 0..32),
                    b in proptest::collection::vec(0u32..64, 0..32)) {
            let (a, b) = (CpuSet::from(a), CpuSet::from(b));
            let both = a.intersection(&b);
            prop_assert!(both.is_subset(&a) && both.is_subset(&b));
            prop_assert!(a.is_subset(&a.union(&b)));
            prop_assert_eq!(a.difference(&b).union(&both), a.clone());
            prop_assert!(a.windows(2).all(|w| w[0] < w[1]));
            prop_assert_eq!(CpuSet::parse(&a.to_string()).unwrap(), a);
        }
    }
}
