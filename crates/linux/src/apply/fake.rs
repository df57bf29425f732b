//! A programmable in-memory kernel for tests: processes with threads and affinities,
//! an optional cpuset per process, per-node memory, and faults that fire before a
//! chosen call (an error, the process exiting, its pid being reused, a thread
//! appearing or exiting), so every interleaving the real machine can produce can be
//! staged exactly. Every mutating call is logged, so a test can prove that nothing
//! was changed.
//!
//! Shown in a fake procfs ([`FakeKernel::shown_in`]), it is one fake machine with the
//! observe side: an affinity it sets is the `Cpus_allowed_list` the next scan reads, as
//! on Linux, so a test of the whole loop does not write both by hand (and cannot let
//! them disagree by mistake).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use super::kernel::{ErrorKind, Identity, Kernel, KernelError, Moving, Op, Region};
use crate::observe::fakeproc::{FakeProcess, FakeProcfs};
use numasched_model::topology::{CpuId, NodeId};
use numasched_model::CpuSet;

/// A process as the fake kernel holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelProcess {
    pub start_time: u64,
    pub kernel_thread: bool,
    /// Affinity per thread id.
    pub threads: BTreeMap<u32, CpuSet>,
    /// A cpuset: `set_affinity` keeps only these CPUs, EINVAL if none is left.
    pub cpuset: Option<CpuSet>,
    /// Resident bytes per node.
    pub memory: BTreeMap<NodeId, u64>,
    /// Pages by address, for `move_pages` and `regions` (see [`FakeKernel::pages`]).
    pub pages: BTreeMap<u64, NodeId>,
    /// `Mems_allowed`; `None` = every node.
    pub mems: Option<Vec<NodeId>>,
    /// Processes it forked (or inherited as a reaper).
    pub children: Vec<u32>,
    /// Its session id: its own pid for one added with [`FakeKernel::add`], its
    /// parent's for one forked.
    pub session: u32,
}

impl KernelProcess {
    /// A user process with these threads, no cpuset, no memory and no children yet.
    fn running(start_time: u64, threads: BTreeMap<u32, CpuSet>) -> KernelProcess {
        KernelProcess {
            start_time,
            kernel_thread: false,
            threads,
            cpuset: None,
            memory: BTreeMap::new(),
            pages: BTreeMap::new(),
            mems: None,
            children: Vec::new(),
            session: 0,
        }
    }
}

/// What happens when a fault fires.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// The call fails with this error (the state is unchanged).
    Fail(ErrorKind),
    /// The process exits just before the call.
    Exit,
    /// The process exits and a new one takes its pid, with this start time.
    Reuse { start_time: u64 },
    /// A new thread appears (inheriting the main thread's affinity) before the call.
    SpawnThread { tid: u32 },
    /// A thread exits before the call.
    EndThread { tid: u32 },
}

#[derive(Debug, Clone)]
struct Trigger {
    op: Op,
    pid: u32,
    /// Matching calls to let pass first.
    skip: usize,
    fault: Fault,
    /// Fires on every matching call instead of once.
    always: bool,
}

/// One mutating call, as the fake saw it (whether or not it succeeded).
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    SetAffinity {
        pid: u32,
        tid: u32,
        cpus: CpuSet,
    },
    MigratePages {
        pid: u32,
        from: Vec<NodeId>,
        to: Vec<NodeId>,
    },
    MovePages {
        pid: u32,
        pages: usize,
    },
}

#[derive(Debug, Default)]
struct State {
    online: CpuSet,
    procs: BTreeMap<u32, KernelProcess>,
    triggers: Vec<Trigger>,
    calls: Vec<Call>,
    /// What [`Kernel::now`] says.
    clock: f64,
    /// Seconds per page moved, added to the clock.
    move_cost: f64,
    /// Seconds each read of a process's identity or `Mems_allowed` adds to the clock
    /// (a /proc read in a guest whose vCPU the host just descheduled).
    read_cost: f64,
    /// A `move_pages` call still "running": its answer, when it finishes on the fake
    /// clock, and how long it takes.
    moving: Option<(Result<Vec<i32>, KernelError>, f64, f64)>,
}

/// Bytes per page of the fake's memory.
pub const FAKE_PAGE: u64 = 4096;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct FakeKernel {
    state: RefCell<State>,
    /// The fake procfs root this kernel's affinities show in, if any.
    shown_in: Option<PathBuf>,
}

impl FakeKernel {
    /// A machine with these online CPUs and no processes.
    pub fn new(online: &[CpuId]) -> FakeKernel {
        FakeKernel {
            state: RefCell::new(State {
                online: online.into(),
                ..State::default()
            }),
            shown_in: None,
        }
    }

    /// The same kernel, whose every affinity change shows in the fake procfs at
    /// `proc_root` (`<pid>/status`, and `<pid>/task/<tid>/status` where it exists).
    pub fn shown_in(mut self, proc_root: &Path) -> FakeKernel {
        self.shown_in = Some(proc_root.to_path_buf());
        self
    }

    /// Starts `p` on both sides of the machine: its files in the fake procfs this
    /// kernel is shown in, and its threads here with the affinity its status gives.
    pub fn spawn(&self, p: &FakeProcess) -> io::Result<()> {
        let root = self.shown_in.as_deref().ok_or_else(|| {
            io::Error::other("spawn needs a kernel shown in a fake procfs (shown_in)")
        })?;
        FakeProcfs::at(root).add(p)?;
        let affinity = CpuSet::parse(&p.cpus_allowed).map_err(io::Error::other)?;
        let threads = p
            .threads
            .iter()
            .map(|t| (t.tid, affinity.clone()))
            .collect();
        self.state
            .borrow_mut()
            .procs
            .insert(p.pid, KernelProcess::running(p.start_time, threads));
        Ok(())
    }

    /// Rewrites the `Cpus_allowed_list` line of the status files showing `tid`.
    fn show(&self, pid: u32, tid: u32, cpus: &CpuSet) {
        let Some(root) = &self.shown_in else {
            return;
        };
        let dir = root.join(pid.to_string());
        let mut files = vec![dir.join("task").join(tid.to_string()).join("status")];
        if tid == pid {
            files.push(dir.join("status"));
        }
        for f in files {
            // A process without such a file (exited, or a thread the fake procfs
            // does not list) shows nothing, as on Linux.
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            let shown: String = text
                .lines()
                .map(|l| {
                    if l.starts_with("Cpus_allowed_list:") {
                        format!("Cpus_allowed_list:\t{cpus}\n")
                    } else {
                        format!("{l}\n")
                    }
                })
                .collect();
            let _ = std::fs::write(&f, shown);
        }
    }

    /// Adds a process whose threads `pid, pid+1, ...` (`threads` of them) may run on
    /// `affinity`.
    pub fn add(&self, pid: u32, start_time: u64, threads: u32, affinity: &[CpuId]) {
        let threads = (0..threads.max(1))
            .map(|i| (pid + i, CpuSet::from(affinity)))
            .collect();
        self.state
            .borrow_mut()
            .procs
            .insert(pid, KernelProcess::running(start_time, threads));
        self.with_proc(pid, |p| p.session = pid);
    }

    /// `parent` forks `child` (start time `start_time`): one thread with the affinity
    /// of the parent's first thread, as fork gives it.
    pub fn fork(&self, parent: u32, child: u32, start_time: u64) {
        let affinity = self
            .with_proc(parent, |p| p.threads.values().next().cloned())
            .flatten()
            .unwrap_or_default();
        let session = self.with_proc(parent, |p| p.session).unwrap_or(child);
        self.add(child, start_time, 1, &affinity);
        self.with_proc(child, |p| p.session = session);
        self.with_proc(parent, |p| p.children.push(child));
    }

    /// `pid` exits: its children are handed to pid 1 (if the fake has one), as the
    /// kernel hands orphans to init.
    pub fn exit(&self, pid: u32) {
        let kids = self
            .state
            .borrow_mut()
            .procs
            .remove(&pid)
            .map(|p| p.children)
            .unwrap_or_default();
        self.with_proc(1, |init| init.children.extend(kids));
    }

    /// Gives `pid` `count` pages of [`FAKE_PAGE`] bytes on `node`, in one region
    /// after its existing pages, and counts them in its `memory`.
    pub fn pages(&self, pid: u32, node: NodeId, count: u64) {
        self.with_proc(pid, |p| {
            let base = p
                .pages
                .keys()
                .next_back()
                .map_or(0x7f00_0000_0000, |a| a + 16 * FAKE_PAGE);
            for i in 0..count {
                p.pages.insert(base + i * FAKE_PAGE, node);
            }
            *p.memory.entry(node).or_insert(0) += count * FAKE_PAGE;
        });
    }

    /// Seconds each page given to `move_pages` costs on the fake clock.
    pub fn set_move_cost(&self, seconds_per_page: f64) {
        self.state.borrow_mut().move_cost = seconds_per_page;
    }

    /// Seconds each identity or `Mems_allowed` read costs on the fake clock.
    pub fn set_read_cost(&self, seconds: f64) {
        self.state.borrow_mut().read_cost = seconds;
    }

    /// Moves the fake clock on.
    pub fn tick(&self, seconds: f64) {
        self.state.borrow_mut().clock += seconds;
    }

    /// Direct access to a process, to set a cpuset, memory, or to inspect it.
    pub fn with_proc<R>(&self, pid: u32, f: impl FnOnce(&mut KernelProcess) -> R) -> Option<R> {
        self.state.borrow_mut().procs.get_mut(&pid).map(f)
    }

    pub fn affinity_of(&self, pid: u32, tid: u32) -> Option<CpuSet> {
        self.state
            .borrow()
            .procs
            .get(&pid)
            .and_then(|p| p.threads.get(&tid).cloned())
    }

    pub fn remove(&self, pid: u32) {
        self.state.borrow_mut().procs.remove(&pid);
    }

    /// `fault` fires once, before the next call of `op` on `pid`.
    pub fn inject(&self, op: Op, pid: u32, fault: Fault) {
        self.inject_after(op, pid, 0, fault);
    }

    /// `fault` fires once, before the matching call that follows `skip` others.
    pub fn inject_after(&self, op: Op, pid: u32, skip: usize, fault: Fault) {
        self.state.borrow_mut().triggers.push(Trigger {
            op,
            pid,
            skip,
            fault,
            always: false,
        });
    }

    /// `fault` fires before every call of `op` on `pid`.
    pub fn inject_always(&self, op: Op, pid: u32, fault: Fault) {
        self.state.borrow_mut().triggers.push(Trigger {
            op,
            pid,
            skip: 0,
            fault,
            always: true,
        });
    }

    /// Mutating calls so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state.borrow().calls.clone()
    }

    fn charge_read(&self) {
        let mut st = self.state.borrow_mut();
        st.clock += st.read_cost;
    }

    /// Fires the faults due before `op` on `pid`; returns the error to fail with.
    fn before(&self, op: Op, pid: u32, tid: Option<u32>) -> Result<(), KernelError> {
        let mut st = self.state.borrow_mut();
        let mut due = Vec::new();
        st.triggers.retain_mut(|t| {
            if t.op != op || t.pid != pid {
                return true;
            }
            if t.skip > 0 {
                t.skip -= 1;
                return true;
            }
            due.push(t.fault.clone());
            t.always
        });
        let mut result = Ok(());
        for fault in due {
            match fault {
                Fault::Fail(kind) => result = Err(KernelError::new(op, pid, tid, kind)),
                Fault::Exit => {
                    st.procs.remove(&pid);
                }
                Fault::Reuse { start_time } => {
                    let online = st.online.clone();
                    st.procs.insert(
                        pid,
                        KernelProcess::running(start_time, BTreeMap::from([(pid, online)])),
                    );
                }
                Fault::SpawnThread { tid } => {
                    if let Some(p) = st.procs.get_mut(&pid) {
                        let inherited = p
                            .threads
                            .get(&pid)
                            .or_else(|| p.threads.values().next())
                            .cloned()
                            .unwrap_or_default();
                        p.threads.insert(tid, inherited);
                    }
                }
                Fault::EndThread { tid } => {
                    if let Some(p) = st.procs.get_mut(&pid) {
                        p.threads.remove(&tid);
                    }
                }
            }
        }
        result
    }

    fn gone(op: Op, pid: u32, tid: Option<u32>) -> KernelError {
        KernelError::new(op, pid, tid, ErrorKind::Gone)
    }
}

impl Kernel for FakeKernel {
    fn threads(&self, pid: u32) -> Result<Vec<u32>, KernelError> {
        self.before(Op::ListThreads, pid, None)?;
        let st = self.state.borrow();
        let p = st
            .procs
            .get(&pid)
            .ok_or_else(|| Self::gone(Op::ListThreads, pid, None))?;
        Ok(p.threads.keys().copied().collect())
    }

    fn identity(&self, pid: u32) -> Result<Identity, KernelError> {
        self.before(Op::Identity, pid, None)?;
        self.charge_read();
        let st = self.state.borrow();
        let p = st
            .procs
            .get(&pid)
            .ok_or_else(|| Self::gone(Op::Identity, pid, None))?;
        Ok(Identity {
            start_time: p.start_time,
            kernel_thread: p.kernel_thread,
            session: p.session,
        })
    }

    fn affinity(&self, pid: u32, tid: u32) -> Result<CpuSet, KernelError> {
        self.before(Op::GetAffinity, pid, Some(tid))?;
        self.affinity_of(pid, tid)
            .ok_or_else(|| Self::gone(Op::GetAffinity, pid, Some(tid)))
    }

    fn set_affinity(&self, pid: u32, tid: u32, cpus: &CpuSet) -> Result<(), KernelError> {
        self.before(Op::SetAffinity, pid, Some(tid))?;
        let mut st = self.state.borrow_mut();
        st.calls.push(Call::SetAffinity {
            pid,
            tid,
            cpus: cpus.clone(),
        });
        let online = st.online.clone();
        let fail = |kind| KernelError::new(Op::SetAffinity, pid, Some(tid), kind);
        let p = st
            .procs
            .get_mut(&pid)
            .ok_or_else(|| fail(ErrorKind::Gone))?;
        let cpuset = p.cpuset.clone();
        let slot = p
            .threads
            .get_mut(&tid)
            .ok_or_else(|| fail(ErrorKind::Gone))?;
        let v: CpuSet = cpus
            .iter()
            .copied()
            .filter(|&c| online.contains(c))
            .filter(|&c| cpuset.as_ref().is_none_or(|s| s.contains(c)))
            .collect();
        if v.is_empty() {
            return Err(fail(ErrorKind::Invalid));
        }
        *slot = v.clone();
        drop(st);
        self.show(pid, tid, &v);
        Ok(())
    }

    fn migrate_pages(&self, pid: u32, from: &[NodeId], to: &[NodeId]) -> Result<u64, KernelError> {
        self.before(Op::MigratePages, pid, None)?;
        let mut st = self.state.borrow_mut();
        st.calls.push(Call::MigratePages {
            pid,
            from: from.to_vec(),
            to: to.to_vec(),
        });
        let p = st
            .procs
            .get_mut(&pid)
            .ok_or_else(|| Self::gone(Op::MigratePages, pid, None))?;
        let Some(&dest) = to.first() else {
            return Err(KernelError::new(
                Op::MigratePages,
                pid,
                None,
                ErrorKind::Invalid,
            ));
        };
        let moved: u64 = from
            .iter()
            .filter(|n| **n != dest)
            .filter_map(|n| p.memory.remove(n))
            .sum();
        *p.memory.entry(dest).or_insert(0) += moved;
        Ok(0)
    }

    fn move_pages(
        &self,
        pid: u32,
        addrs: &[u64],
        nodes: &[NodeId],
    ) -> Result<Vec<i32>, KernelError> {
        self.before(Op::MovePages, pid, None)?;
        let mut st = self.state.borrow_mut();
        st.calls.push(Call::MovePages {
            pid,
            pages: addrs.len(),
        });
        st.clock += st.move_cost * addrs.len() as f64;
        let p = st
            .procs
            .get_mut(&pid)
            .ok_or_else(|| Self::gone(Op::MovePages, pid, None))?;
        let mut status = Vec::with_capacity(addrs.len());
        for (a, &to) in addrs.iter().zip(nodes) {
            match p.pages.get_mut(a) {
                Some(node) => {
                    if *node != to {
                        let from = std::mem::replace(node, to);
                        if let Some(b) = p.memory.get_mut(&from) {
                            *b = b.saturating_sub(FAKE_PAGE);
                        }
                        *p.memory.entry(to).or_insert(0) += FAKE_PAGE;
                    }
                    status.push(to as i32);
                }
                None => status.push(-libc::ENOENT),
            }
        }
        Ok(status)
    }

    fn regions(&self, pid: u32) -> Result<Vec<Region>, KernelError> {
        self.before(Op::ReadRegions, pid, None)?;
        let st = self.state.borrow();
        let p = st
            .procs
            .get(&pid)
            .ok_or_else(|| Self::gone(Op::ReadRegions, pid, None))?;
        let mut out: Vec<Region> = Vec::new();
        for (&addr, &node) in &p.pages {
            match out.last_mut() {
                Some(r) if r.end == addr => {
                    r.end += FAKE_PAGE;
                    match r.node_pages.iter_mut().find(|(n, _)| *n == node) {
                        Some((_, c)) => *c += 1,
                        None => r.node_pages.push((node, 1)),
                    }
                }
                _ => out.push(Region {
                    start: addr,
                    end: addr + FAKE_PAGE,
                    node_pages: vec![(node, 1)],
                    page_bytes: FAKE_PAGE,
                }),
            }
        }
        Ok(out)
    }

    fn cpuset_cpus(&self, pid: u32) -> Result<Option<CpuSet>, KernelError> {
        let st = self.state.borrow();
        let p = st
            .procs
            .get(&pid)
            .ok_or_else(|| Self::gone(Op::ReadCpuset, pid, None))?;
        Ok(p.cpuset.clone())
    }

    fn mems_allowed(&self, pid: u32) -> Result<Vec<NodeId>, KernelError> {
        self.before(Op::ReadMems, pid, None)?;
        self.charge_read();
        let st = self.state.borrow();
        let p = st
            .procs
            .get(&pid)
            .ok_or_else(|| Self::gone(Op::ReadMems, pid, None))?;
        Ok(p.mems.clone().unwrap_or_else(|| (0..64).collect()))
    }

    /// A call takes `move_cost` per page on the fake clock, as on a mover thread: the
    /// caller's clock stops at `until` if the call is not done by then, and the answer
    /// waits for [`moving`](Kernel::moving) at a later time.
    fn start_move_pages(
        &self,
        pid: u32,
        addrs: Vec<u64>,
        nodes: Vec<NodeId>,
        until: f64,
    ) -> Moving {
        if self.state.borrow().moving.is_some() {
            return Moving::Running;
        }
        let before = self.now();
        let r = self.move_pages(pid, &addrs, &nodes);
        let mut st = self.state.borrow_mut();
        let finish = st.clock;
        let took = finish - before;
        if finish <= until {
            return Moving::Done(r, took);
        }
        st.clock = before.max(until);
        st.moving = Some((r, finish, took));
        Moving::Running
    }

    fn moving(&self, until: f64) -> Moving {
        let mut st = self.state.borrow_mut();
        match st.moving.take() {
            Some((r, finish, took)) if finish <= until => {
                st.clock = st.clock.max(finish);
                Moving::Done(r, took)
            }
            Some(call) => {
                st.clock = st.clock.max(until);
                st.moving = Some(call);
                Moving::Running
            }
            None => Moving::Done(Err(Self::gone(Op::MovePages, 0, None)), 0.0),
        }
    }

    fn now(&self) -> f64 {
        self.state.borrow().clock
    }

    fn children(&self, pid: u32) -> Result<Vec<u32>, KernelError> {
        let st = self.state.borrow();
        let p = st
            .procs
            .get(&pid)
            .ok_or_else(|| Self::gone(Op::ListChildren, pid, None))?;
        Ok(p.children
            .iter()
            .copied()
            .filter(|c| st.procs.contains_key(c))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::status;

    #[test]
    fn an_affinity_set_is_what_the_fake_procfs_shows() {
        let dir = tempfile::tempdir().unwrap();
        let procfs = FakeProcfs::new(dir.path()).unwrap();
        let k = FakeKernel::new(&[0, 1, 2, 3]).shown_in(procfs.root());
        let mut p = FakeProcess::new(100, "mcf");
        p.cpus_allowed = "0-3".into();
        k.spawn(&p).unwrap();
        let shown = || {
            let path = dir.path().join("100/status");
            let text = std::fs::read_to_string(&path).unwrap();
            status::parse(&text, &path).unwrap().cpus_allowed
        };
        assert_eq!(shown(), Some(CpuSet::from([0, 1, 2, 3])));
        k.set_affinity(100, 100, &CpuSet::from([2, 3])).unwrap();
        assert_eq!(shown(), Some(CpuSet::from([2, 3])));
        assert_eq!(k.affinity_of(100, 100), Some(CpuSet::from([2, 3])));
        // A refused change shows nothing new.
        assert!(k.set_affinity(100, 100, &CpuSet::from([7])).is_err());
        assert_eq!(shown(), Some(CpuSet::from([2, 3])));
    }
}
