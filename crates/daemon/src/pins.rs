//! Telling numasched's own narrowing from someone else's pin.
//!
//! The scan reads any affinity narrower than the machine as a pin (`allowed_cpus`),
//! and policies plan inside pins. Once numasched has placed a process, its affinity *is*
//! narrower — by numasched's own doing — and a child forked after that inherits the
//! same narrow set. Read as pins, those would freeze every process where it was first
//! put. So before planning, a pin equal to what the journal says numasched applied (to
//! the process, or to the parent it inherited from) is replaced by the restriction that
//! was there before numasched: the journaled original affinity.

use numasched_linux::apply::{Entry, Journal};
use numasched_model::{CpuSet, Process, Snapshot};

/// Rewrites `allowed_cpus` of processes whose narrowing is numasched's own.
pub fn unpin_own(snapshot: &mut Snapshot, journal: &Journal) {
    let machine = snapshot.topology.all_cpus();
    for p in &mut snapshot.processes {
        let Some(allowed) = p.allowed_cpus.as_ref() else {
            continue;
        };
        let Some(original) = given(journal, p, allowed).map(|e| e.original.clone()) else {
            continue;
        };
        let inside = machine.intersection(&original);
        if inside.len() == machine.len() {
            p.allowed_cpus = None;
        } else if !inside.is_empty() {
            p.allowed_cpus = Some(inside);
        }
    }
}

/// The journal entry by which numasched gave `p` the set `cpus` it carries, if it did:
/// its own (the set last given), or its parent's (any set given lately, which a child
/// forked meanwhile still carries).
pub fn given<'j>(journal: &'j Journal, p: &Process, cpus: &CpuSet) -> Option<&'j Entry> {
    let own = journal
        .get(p.pid, p.start_time)
        .filter(|e| e.applied.as_ref() == Some(cpus));
    own.or_else(|| {
        p.parent
            .and_then(|pp| journal.entry(pp))
            .filter(|e| e.gave(cpus))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::{CpuSet, Process};

    fn snap() -> Snapshot {
        let mut a = Process::new(100, "placed");
        a.start_time = 7;
        a.allowed_cpus = Some(vec![2].into());
        let mut child = Process::new(101, "child");
        child.parent = Some(100);
        child.allowed_cpus = Some(vec![2].into());
        let mut pinned = Process::new(102, "tasksetted");
        pinned.parent = Some(100);
        pinned.allowed_cpus = Some(vec![3].into());
        let mut narrow = Process::new(103, "cpuset");
        narrow.start_time = 9;
        narrow.allowed_cpus = Some(vec![1].into());
        Snapshot {
            topology: numasched_model::topology::spec::parse("2n:1l:2c:1t").expect("spec"),
            processes: vec![a, child, pinned, narrow],
            others_pinned: Default::default(),
            others_taken: Default::default(),
            others_demand: Default::default(),
        }
    }

    #[test]
    fn own_narrowing_is_not_a_pin_but_foreign_pins_stay() {
        let mut j = Journal::new();
        j.begin(100, 7, &CpuSet::from([0, 1, 2, 3]));
        j.set_applied(100, 7, &CpuSet::from([2]));
        // 103 was already confined to CPUs 0-1 by a cpuset before numasched put it on 1.
        j.begin(103, 9, &CpuSet::from([0, 1]));
        j.set_applied(103, 9, &CpuSet::from([1]));
        let mut s = snap();
        unpin_own(&mut s, &j);
        assert_eq!(s.processes[0].allowed_cpus, None, "numasched's own");
        assert_eq!(
            s.processes[1].allowed_cpus, None,
            "inherited from its parent"
        );
        assert_eq!(
            s.processes[2].allowed_cpus,
            Some(vec![3].into()),
            "someone else's"
        );
        assert_eq!(
            s.processes[3].allowed_cpus,
            Some(vec![0, 1].into()),
            "the original pin"
        );
    }

    #[test]
    fn a_reused_pid_does_not_inherit_the_old_entry() {
        let mut j = Journal::new();
        j.begin(100, 1, &CpuSet::from([0, 1, 2, 3]));
        j.set_applied(100, 1, &CpuSet::from([2]));
        let mut s = snap(); // pid 100 now has start time 7
        s.processes.truncate(1);
        unpin_own(&mut s, &j);
        assert_eq!(s.processes[0].allowed_cpus, Some(vec![2].into()));
    }
}
