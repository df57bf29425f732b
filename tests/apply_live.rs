//! The apply layer on this real machine, with real child processes: affinity set and
//! restored (read back from /proc), a foreign `taskset` pin left alone, a child that
//! exits mid-apply, and every thread of a multi-threaded child placed.
//!
//! Needs CPUs 0 and 1; on a machine with fewer, each test prints why and passes.
//! Every child is killed and reaped by a guard, even when an assertion fails.

use std::cell::RefCell;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use numasched::apply::{
    Action, Actuator, ActuatorConfig, Identity, Kernel, KernelError, LinuxKernel, Restored,
};
use numasched::policy::plan::{Placement, Plan};
use numasched::policy::snapshot::{Process, Snapshot};
use numasched::topology::{self, cpulist, CpuId, NodeId};

/// Kills and reaps its child when dropped.
struct Guard(Option<Child>);

impl Guard {
    fn spawn(cmd: &mut Command) -> Option<Guard> {
        match cmd.stdin(Stdio::null()).stdout(Stdio::null()).spawn() {
            Ok(c) => Some(Guard(Some(c))),
            Err(e) => {
                eprintln!("skipped: cannot start {cmd:?}: {e}");
                None
            }
        }
    }

    fn pid(&self) -> u32 {
        self.0.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether CPUs 0 and 1 are ours to use; prints why not.
fn two_cpus() -> bool {
    let me = std::process::id();
    match LinuxKernel::new().affinity(me, me) {
        Ok(cpus) if cpus.contains(&0) && cpus.contains(&1) => true,
        Ok(cpus) => {
            eprintln!(
                "skipped: needs CPUs 0 and 1, this process may use {}",
                cpulist::format(&cpus)
            );
            false
        }
        Err(e) => {
            eprintln!("skipped: cannot read own affinity: {e}");
            false
        }
    }
}

fn allowed_of(path: &str) -> Option<Vec<CpuId>> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with("Cpus_allowed_list:"))?;
    cpulist::parse(line.split_once(':')?.1).ok()
}

fn allowed(pid: u32) -> Vec<CpuId> {
    allowed_of(&format!("/proc/{pid}/status")).expect("child's status")
}

fn task_allowed(pid: u32, tid: u32) -> Vec<CpuId> {
    allowed_of(&format!("/proc/{pid}/task/{tid}/status")).expect("thread's status")
}

fn tids(pid: u32) -> Vec<u32> {
    LinuxKernel::new().threads(pid).unwrap_or_default()
}

/// Polls until `f` holds, for at most 5 s.
fn wait_for(mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A snapshot of the children as the scanner would describe them.
fn snapshot(pids: &[u32], allowed_cpus: Option<Vec<CpuId>>) -> Snapshot {
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
    }
}

fn plan(pid: u32, cpus: &[CpuId]) -> Plan {
    Plan::new(
        "test",
        vec![Placement {
            pid,
            cpus: cpus.to_vec(),
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
    if !two_cpus() {
        return;
    }
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
    if !two_cpus() {
        return;
    }
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
    if !two_cpus() {
        return;
    }
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
    for seen in [Some(vec![1]), None] {
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
    fn affinity(&self, pid: u32, tid: u32) -> Result<Vec<CpuId>, KernelError> {
        self.inner.affinity(pid, tid)
    }
    fn set_affinity(&self, pid: u32, tid: u32, cpus: &[CpuId]) -> Result<(), KernelError> {
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
}

#[test]
fn a_child_exiting_mid_apply_is_no_error() {
    if !two_cpus() {
        return;
    }
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
    if !two_cpus() {
        return;
    }
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
    let original: Vec<Vec<CpuId>> = threads.iter().map(|&t| task_allowed(pid, t)).collect();
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
