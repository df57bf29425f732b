//! A programmable in-memory kernel for tests: processes with threads and affinities,
//! an optional cpuset per process, per-node memory, and faults that fire before a
//! chosen call (an error, the process exiting, its pid being reused, a thread
//! appearing or exiting), so every interleaving the real machine can produce can be
//! staged exactly. Every mutating call is logged, so a test can prove that nothing
//! was changed.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::kernel::{ErrorKind, Identity, Kernel, KernelError, Op};
use crate::topology::{CpuId, NodeId};

#[derive(Debug, Clone, PartialEq)]
pub struct FakeProc {
    pub start_time: u64,
    pub kernel_thread: bool,
    /// Affinity per thread id.
    pub threads: BTreeMap<u32, Vec<CpuId>>,
    /// A cpuset: `set_affinity` keeps only these CPUs, EINVAL if none is left.
    pub cpuset: Option<Vec<CpuId>>,
    /// Resident bytes per node.
    pub memory: BTreeMap<NodeId, u64>,
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
        cpus: Vec<CpuId>,
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
    online: Vec<CpuId>,
    procs: BTreeMap<u32, FakeProc>,
    triggers: Vec<Trigger>,
    calls: Vec<Call>,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct FakeKernel {
    state: RefCell<State>,
}

impl FakeKernel {
    /// A machine with these online CPUs and no processes.
    pub fn new(online: &[CpuId]) -> FakeKernel {
        FakeKernel {
            state: RefCell::new(State {
                online: online.to_vec(),
                ..State::default()
            }),
        }
    }

    /// Adds a process whose threads `pid, pid+1, ...` (`threads` of them) may run on
    /// `affinity`.
    pub fn add(&self, pid: u32, start_time: u64, threads: u32, affinity: &[CpuId]) {
        let threads = (0..threads.max(1))
            .map(|i| (pid + i, affinity.to_vec()))
            .collect();
        self.state.borrow_mut().procs.insert(
            pid,
            FakeProc {
                start_time,
                kernel_thread: false,
                threads,
                cpuset: None,
                memory: BTreeMap::new(),
            },
        );
    }

    /// Direct access to a process, to set a cpuset, memory, or to inspect it.
    pub fn with_proc<R>(&self, pid: u32, f: impl FnOnce(&mut FakeProc) -> R) -> Option<R> {
        self.state.borrow_mut().procs.get_mut(&pid).map(f)
    }

    pub fn affinity_of(&self, pid: u32, tid: u32) -> Option<Vec<CpuId>> {
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
                        FakeProc {
                            start_time,
                            kernel_thread: false,
                            threads: BTreeMap::from([(pid, online)]),
                            cpuset: None,
                            memory: BTreeMap::new(),
                        },
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
        let st = self.state.borrow();
        let p = st
            .procs
            .get(&pid)
            .ok_or_else(|| Self::gone(Op::Identity, pid, None))?;
        Ok(Identity {
            start_time: p.start_time,
            kernel_thread: p.kernel_thread,
        })
    }

    fn affinity(&self, pid: u32, tid: u32) -> Result<Vec<CpuId>, KernelError> {
        self.before(Op::GetAffinity, pid, Some(tid))?;
        self.affinity_of(pid, tid)
            .ok_or_else(|| Self::gone(Op::GetAffinity, pid, Some(tid)))
    }

    fn set_affinity(&self, pid: u32, tid: u32, cpus: &[CpuId]) -> Result<(), KernelError> {
        self.before(Op::SetAffinity, pid, Some(tid))?;
        let mut st = self.state.borrow_mut();
        st.calls.push(Call::SetAffinity {
            pid,
            tid,
            cpus: cpus.to_vec(),
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
        let mut v: Vec<CpuId> = cpus
            .iter()
            .copied()
            .filter(|c| online.contains(c))
            .filter(|c| cpuset.as_ref().is_none_or(|s| s.contains(c)))
            .collect();
        v.sort_unstable();
        v.dedup();
        if v.is_empty() {
            return Err(fail(ErrorKind::Invalid));
        }
        *slot = v;
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
        if !st.procs.contains_key(&pid) {
            return Err(Self::gone(Op::MovePages, pid, None));
        }
        Ok(nodes.iter().map(|&n| n as i32).collect())
    }
}
