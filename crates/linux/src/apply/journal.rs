//! What numasched changed, so it can be put back.
//!
//! Before the first change to a process, the actuator records the original affinity of
//! each of its threads here. Entries are keyed by pid and carry the start time: only
//! one live process can hold a pid at a time, and one with a different start time is a
//! different process that must never receive the old one's affinity. The journal is
//! plain data (serde), so the daemon can persist it and undo after a crash; the kernel
//! calls that undo it live in [`undo`](super::undo).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use numasched_model::CpuSet;

/// What was changed on one process. Unknown keys are refused: a journal written by
/// another version may hold what undoing needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// With the pid, the identity of the process the entry belongs to.
    pub start_time: u64,
    /// The affinity the process had before the first change (its first thread's),
    /// given back to threads that appeared after numasched changed the process: they
    /// inherited numasched's setting, not the original.
    pub original: CpuSet,
    /// Original affinity per thread id.
    pub threads: BTreeMap<u32, CpuSet>,
    /// The CPU set numasched last gave the process, to tell its own pin from one that
    /// someone else set afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<CpuSet>,
    /// The sets numasched gave the process before `applied` (the last
    /// [`EARLIER_KEPT`], oldest first): a child forked under one of them carries it
    /// after the parent was given another, and is numasched's doing all the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<CpuSet>,
    /// The set a pass is about to give it, in the journal written before that pass
    /// (the intents): a crash in the pass leaves this set or `applied`, and both are
    /// numasched's. The journal written after the pass has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<CpuSet>,
    /// Journaled because it inherited its parent's set by forking, not because a plan
    /// placed it: it goes back when its parent does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopted: bool,
    /// Threads pinned by someone else (the application) when numasched found them:
    /// never changed, never restored, even once their set happens to equal numasched's.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub foreign: std::collections::BTreeSet<u32>,
    /// Its session, read once while it lived: what a child it leaves to init is
    /// recognised by ([`orphans`](super::orphans)), after a restart too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u32>,
}

/// How many of a process's earlier sets its entry keeps (see [`Entry::earlier`]).
pub const EARLIER_KEPT: usize = 4;

impl Entry {
    /// Whether numasched gave the process `cpus`, now or before: what a child that
    /// forked meanwhile carries.
    pub fn gave(&self, cpus: &CpuSet) -> bool {
        self.given().any(|c| c == cpus)
    }

    /// Every set numasched gave the process and a child may carry: the one applied
    /// now and the earlier ones kept.
    pub fn given(&self) -> impl Iterator<Item = &CpuSet> {
        self.applied.iter().chain(&self.earlier)
    }

    /// What thread `tid` should be given back.
    pub fn original_of(&self, tid: u32) -> &CpuSet {
        self.threads.get(&tid).unwrap_or(&self.original)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Journal {
    entries: BTreeMap<u32, Entry>,
}

impl Journal {
    pub fn new() -> Journal {
        Journal::default()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn pids(&self) -> Vec<u32> {
        self.entries.keys().copied().collect()
    }

    /// The entry of `pid`, whatever its start time.
    pub fn entry(&self, pid: u32) -> Option<&Entry> {
        self.entries.get(&pid)
    }

    /// The entry of exactly this process: `None` for another holder of the pid.
    pub fn get(&self, pid: u32, start_time: u64) -> Option<&Entry> {
        self.entries
            .get(&pid)
            .filter(|e| e.start_time == start_time)
    }

    /// Starts remembering a process whose first thread's affinity is `original`. An
    /// entry left by an earlier holder of the pid is dropped (that process is gone);
    /// an entry for this very process is kept as it is.
    pub fn begin(&mut self, pid: u32, start_time: u64, original: &CpuSet) -> &mut Entry {
        if self
            .entries
            .get(&pid)
            .is_some_and(|e| e.start_time != start_time)
        {
            self.entries.remove(&pid);
        }
        self.entries.entry(pid).or_insert_with(|| Entry {
            start_time,
            original: original.clone(),
            threads: BTreeMap::new(),
            applied: None,
            earlier: Vec::new(),
            pending: None,
            adopted: false,
            foreign: Default::default(),
            session: None,
        })
    }

    /// Records a thread's original affinity unless one is recorded already: the first
    /// record is the original, later ones would be numasched's own setting.
    pub fn remember_thread(&mut self, pid: u32, start_time: u64, tid: u32, original: &CpuSet) {
        if let Some(e) = self
            .entries
            .get_mut(&pid)
            .filter(|e| e.start_time == start_time)
        {
            e.threads.entry(tid).or_insert_with(|| original.clone());
        }
    }

    pub fn set_applied(&mut self, pid: u32, start_time: u64, cpus: &CpuSet) {
        if let Some(e) = self
            .entries
            .get_mut(&pid)
            .filter(|e| e.start_time == start_time)
        {
            if let Some(before) = e.applied.replace(cpus.clone()) {
                if &before != cpus {
                    e.earlier.retain(|c| c != &before && c != cpus);
                    e.earlier.push(before);
                    let over = e.earlier.len().saturating_sub(EARLIER_KEPT);
                    e.earlier.drain(..over);
                }
            }
        }
    }

    /// Names the set a pass is about to give a journaled process (see
    /// [`Entry::pending`]); nothing where it keeps the one applied.
    pub fn set_pending(&mut self, pid: u32, start_time: u64, cpus: &CpuSet) {
        if let Some(e) = self
            .entries
            .get_mut(&pid)
            .filter(|e| e.start_time == start_time)
        {
            e.pending = (e.applied.as_ref() != Some(cpus)).then(|| cpus.clone());
        }
    }

    /// Records the session of the process (see [`Entry::session`]).
    pub fn set_session(&mut self, pid: u32, start_time: u64, session: u32) {
        if let Some(e) = self
            .entries
            .get_mut(&pid)
            .filter(|e| e.start_time == start_time)
        {
            e.session = Some(session);
        }
    }

    /// Marks an entry as inherited (`true`) or placed by a plan (`false`).
    pub fn set_adopted(&mut self, pid: u32, start_time: u64, adopted: bool) {
        if let Some(e) = self
            .entries
            .get_mut(&pid)
            .filter(|e| e.start_time == start_time)
        {
            e.adopted = adopted;
        }
    }

    /// Drops the records of threads not in `alive` (they exited), so that a process
    /// whose threads come and go does not grow its entry for ever.
    pub fn retain_threads(&mut self, pid: u32, start_time: u64, alive: &[u32]) {
        if let Some(e) = self
            .entries
            .get_mut(&pid)
            .filter(|e| e.start_time == start_time)
        {
            e.threads.retain(|t, _| alive.contains(t));
            e.foreign.retain(|t| alive.contains(t));
        }
    }

    /// Marks a thread as someone else's.
    pub fn mark_foreign(&mut self, pid: u32, start_time: u64, tid: u32) {
        if let Some(e) = self
            .entries
            .get_mut(&pid)
            .filter(|e| e.start_time == start_time)
        {
            e.foreign.insert(tid);
        }
    }

    /// Forgets one thread (restored, or exited).
    pub fn forget_thread(&mut self, pid: u32, tid: u32) {
        if let Some(e) = self.entries.get_mut(&pid) {
            e.threads.remove(&tid);
        }
    }

    /// Forgets a process without restoring it.
    pub fn forget(&mut self, pid: u32) -> Option<Entry> {
        self.entries.remove(&pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_record_wins_and_pid_reuse_starts_over() {
        let mut j = Journal::new();
        j.begin(10, 100, &CpuSet::from([0, 1]));
        j.remember_thread(10, 100, 10, &CpuSet::from([0, 1]));
        j.remember_thread(10, 100, 10, &CpuSet::from([0])); // numasched's own setting: ignored
        j.remember_thread(10, 999, 11, &CpuSet::from([1])); // another process: ignored
        let e = j.get(10, 100).unwrap();
        assert_eq!(e.original_of(10), &[0, 1]);
        assert_eq!(e.original_of(12), &[0, 1]);
        assert!(!e.threads.contains_key(&11));
        assert!(j.get(10, 999).is_none());

        j.begin(10, 200, &CpuSet::from([1]));
        assert!(j.get(10, 100).is_none());
        assert_eq!(j.get(10, 200).unwrap().original, vec![1]);
        assert_eq!(j.len(), 1);
    }

    #[test]
    fn round_trips_through_json() {
        let mut j = Journal::new();
        j.begin(10, 100, &CpuSet::from([0, 1]));
        j.remember_thread(10, 100, 11, &CpuSet::from([1]));
        j.set_applied(10, 100, &CpuSet::from([0]));
        let text = serde_json::to_string(&j).unwrap();
        let back: Journal = serde_json::from_str(&text).unwrap();
        assert_eq!(j, back);
    }
}
