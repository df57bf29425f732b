//! The apply layer on this real machine, with real child processes: affinity set and
//! restored (read back from /proc), a foreign `taskset` pin left alone, a child that
//! exits mid-apply, and every thread of a multi-threaded child placed.
//!
//! Needs CPUs 0 and 1; on a machine with fewer, each test prints why and passes.
//! Every child is killed and reaped by a guard, even when an assertion fails.

use crate::common;

use std::cell::RefCell;
use std::process::Command;

use numasched::apply::{
    Action, Actuator, ActuatorConfig, Identity, Kernel, KernelError, LinuxKernel, Restored,
};
use numasched::model::plan::{Placement, Plan};
use numasched::model::snapshot::{Process, Snapshot};
use numasched::model::CpuSet;
use numasched::topology::{self, CpuId, NodeId};

use common::live::{allowed, allowed_of, two_cpus_alone, wait_for, Guard};

fn task_allowed(pid: u32, tid: u32) -> CpuSet {
    allowed_of(&format!("/proc/{pid}/task/{tid}/status")).expect("thread's status")
}

fn tids(pid: u32) -> Vec<u32> {
    LinuxKernel::new().threads(pid).unwrap_or_default()
}

/// A snapshot of the children as the scanner would describe them.
fn snapshot(pids: &[u32], allowed_cpus: Option<CpuSet>) -> Snapshot {
    let k = LinuxKernel::new();
    Snapshot {
        topology: topology::machine("1n:1l:2c:1t").expect("spec"),
        processes: pids
            .iter()
            .map(|&pid| {
                let mut p = Process::new(pid, "child");
                p.start_time = k.identity(pid).expect("child alive").start_time;
                p.allowed_cpus = allowed_cpus.clone();
                p
            })
            .collect(),
        others_pinned: Default::default(),
        others_taken: Default::default(),
        others_demand: Default::default(),
    }
}

fn plan(pid: u32, cpus: &[CpuId]) -> Plan {
    Plan::new(
        "test",
        vec![Placement {
            pid,
            cpus: cpus.into(),
            nodes: vec![0],
            reason: "live test".into(),
        }],
    )
}

fn actuator<K: Kernel>(k: K) -> Actuator<K> {
    Actuator::new(k, ActuatorConfig::default())
}

#[test]
fn sets_cpu0_then_restores_the_original() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let Some(child) = Guard::spawn(Command::new("sleep").arg("30")) else {
        return;
    };
    let pid = child.pid();
    let original = allowed(pid);
    let mut a = actuator(LinuxKernel::new());
    let r = a.apply(&plan(pid, &[0]), &snapshot(&[pid], None));
    assert_eq!(
        r.placement(pid).map(|l| l.action),
        Some(Action::Done),
        "{r}"
    );
    assert_eq!(allowed(pid), vec![0]);
    assert_eq!(
        a.restore(pid),
        Restored::Done {
            threads: 1,
            foreign: 0
        }
    );
    assert_eq!(allowed(pid), original);
    assert!(a.journal().is_empty());
}

#[test]
fn dry_run_leaves_a_real_child_alone() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let Some(child) = Guard::spawn(Command::new("sleep").arg("30")) else {
        return;
    };
    let pid = child.pid();
    let original = allowed(pid);
    let mut a = Actuator::new(
        LinuxKernel::new(),
        ActuatorConfig {
            dry_run: true,
            ..ActuatorConfig::default()
        },
    );
    let r = a.apply(&plan(pid, &[0]), &snapshot(&[pid], None));
    assert_eq!(
        r.placement(pid).map(|l| l.action),
        Some(Action::DryRun),
        "{r}"
    );
    assert_eq!(allowed(pid), original);
}

#[test]
fn a_taskset_pin_is_left_alone() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    if Command::new("taskset").arg("-V").output().is_err() {
        eprintln!("skipped: taskset (util-linux) is not installed");
        return;
    }
    let Some(child) = Guard::spawn(Command::new("taskset").args(["-c", "1", "sleep", "30"])) else {
        return;
    };
    let pid = child.pid();
    // taskset pins itself, then execs sleep in the same process.
    assert!(
        wait_for(|| allowed(pid) == vec![1]),
        "taskset never pinned the child"
    );
    let mut a = actuator(LinuxKernel::new());
    // Seen by the snapshot, and pinned only live (the snapshot knows nothing).
    for seen in [Some(CpuSet::from([1])), None] {
        let r = a.apply(&plan(pid, &[0]), &snapshot(&[pid], seen.clone()));
        let line = r.placement(pid).expect("a line for the child");
        assert_eq!(line.action, Action::Refused, "{seen:?}: {line}");
        assert_eq!(allowed(pid), vec![1]);
    }
    assert!(a.journal().is_empty());
}

/// The real kernel, except that the victim is killed and reaped right after its
/// threads are listed: every later call meets a process that is really gone.
struct KillAfterListing {
    inner: LinuxKernel,
    victim: RefCell<Guard>,
}

impl Kernel for KillAfterListing {
    fn threads(&self, pid: u32) -> Result<Vec<u32>, KernelError> {
        let t = self.inner.threads(pid);
        self.victim.borrow_mut().kill();
        t
    }
    fn identity(&self, pid: u32) -> Result<Identity, KernelError> {
        self.inner.identity(pid)
    }
    fn affinity(&self, pid: u32, tid: u32) -> Result<CpuSet, KernelError> {
        self.inner.affinity(pid, tid)
    }
    fn set_affinity(&self, pid: u32, tid: u32, cpus: &CpuSet) -> Result<(), KernelError> {
        self.inner.set_affinity(pid, tid, cpus)
    }
    fn migrate_pages(&self, pid: u32, from: &[NodeId], to: &[NodeId]) -> Result<u64, KernelError> {
        self.inner.migrate_pages(pid, from, to)
    }
    fn move_pages(
        &self,
        pid: u32,
        addrs: &[u64],
        nodes: &[NodeId],
    ) -> Result<Vec<i32>, KernelError> {
        self.inner.move_pages(pid, addrs, nodes)
    }
    fn regions(&self, pid: u32) -> Result<Vec<numasched::apply::kernel::Region>, KernelError> {
        self.inner.regions(pid)
    }
    fn mems_allowed(&self, pid: u32) -> Result<Vec<NodeId>, KernelError> {
        self.inner.mems_allowed(pid)
    }
    fn now(&self) -> f64 {
        self.inner.now()
    }
    fn children(&self, pid: u32) -> Result<Vec<u32>, KernelError> {
        self.inner.children(pid)
    }
}

/// The chunked mover on the real kernel: a child's regions and Mems_allowed read from
/// /proc, its pages walked with move_pages to node 0 (where they are on this one-node
/// machine: every chunk is a real syscall that finds its pages already there).
#[test]
fn a_chunked_move_walks_a_real_childs_regions() {
    let Some(child) = Guard::spawn(Command::new("sleep").arg("30")) else {
        return;
    };
    let pid = child.pid();
    let k = LinuxKernel::new();
    let regions = k.regions(pid).expect("maps and numa_maps");
    assert!(!regions.is_empty(), "a running process has resident memory");
    assert!(regions
        .iter()
        .all(|r| r.end > r.start && r.page_bytes >= 4096));
    assert_eq!(k.mems_allowed(pid).expect("status"), vec![0]);
    let mut a = Actuator::new(
        LinuxKernel::new(),
        ActuatorConfig {
            migrate_pages: true,
            ..ActuatorConfig::default()
        },
    );
    let mut p = plan(pid, &[]);
    p.page_moves.push(numasched::model::plan::PageMove {
        pid,
        from_node: 0,
        to_node: 0,
        bytes: 1 << 20,
        reason: "live test".into(),
    });
    let r = a.apply_at(&p, &snapshot(&[pid], None), 0.0);
    let line = &r.moves[0];
    assert!(
        matches!(line.action, Action::Done | Action::Deferred),
        "{line}"
    );
    let mut t = 1.0;
    while a.migrations().get(pid).is_some() && t < 50.0 {
        for l in a.continue_migrations(t) {
            assert!(matches!(l.action, Action::Done | Action::Deferred), "{l}");
        }
        t += 1.0;
    }
    assert!(a.migrations().is_empty(), "finished");
}

#[test]
fn a_child_exiting_mid_apply_is_no_error() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let Some(child) = Guard::spawn(Command::new("sleep").arg("30")) else {
        return;
    };
    let pid = child.pid();
    let snap = snapshot(&[pid], None);
    let mut a = actuator(KillAfterListing {
        inner: LinuxKernel::new(),
        victim: RefCell::new(child),
    });
    let r = a.apply(&plan(pid, &[0]), &snap);
    let line = r.placement(pid).expect("a line for the child");
    assert_eq!(line.action, Action::Gone, "{line}");
    assert_eq!(r.count(Action::Failed), 0, "{r}");
    // Already reaped: a second pass and a restore say "gone" too.
    let r = a.apply(&plan(pid, &[0]), &snap);
    assert!(
        matches!(
            r.placement(pid).map(|l| l.action),
            Some(Action::Gone | Action::Skipped)
        ),
        "{r}"
    );
    assert!(matches!(
        a.restore(pid),
        Restored::Gone | Restored::NotJournaled | Restored::Reused
    ));
    assert!(a.journal().is_empty());
}

#[test]
fn every_thread_of_a_multithreaded_child_is_placed_and_restored() {
    let Some(_alone) = two_cpus_alone() else {
        return;
    };
    let script = "import threading, time\n\
                  ts = [threading.Thread(target=time.sleep, args=(30,)) for _ in range(4)]\n\
                  [t.start() for t in ts]\n\
                  time.sleep(30)\n";
    let Some(child) = Guard::spawn(Command::new("python3").args(["-c", script])) else {
        return;
    };
    let pid = child.pid();
    if !wait_for(|| tids(pid).len() >= 5) {
        eprintln!(
            "skipped: python3 child has {} thread(s), expected 5",
            tids(pid).len()
        );
        return;
    }
    let threads = tids(pid);
    let original: Vec<CpuSet> = threads.iter().map(|&t| task_allowed(pid, t)).collect();
    let mut a = actuator(LinuxKernel::new());
    let r = a.apply(&plan(pid, &[1]), &snapshot(&[pid], None));
    assert_eq!(
        r.placement(pid).map(|l| l.action),
        Some(Action::Done),
        "{r}"
    );
    for &t in &threads {
        assert_eq!(task_allowed(pid, t), vec![1], "thread {t}");
    }
    let restored = a.restore(pid);
    assert!(
        matches!(restored, Restored::Done { threads: n, foreign: 0 } if n == threads.len()),
        "{restored:?}"
    );
    for (&t, orig) in threads.iter().zip(&original) {
        assert_eq!(&task_allowed(pid, t), orig, "thread {t}");
    }
}
