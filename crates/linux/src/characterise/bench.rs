//! Runs a program under one fixed placement and times it: the kernel-touching half of
//! `profile measure`. The child gets its CPUs (`sched_setaffinity`) and its memory
//! policy (`set_mempolicy(MPOL_BIND)`) between fork and exec, so every page it ever
//! allocates is placed, as `numactl --physcpubind --membind` would; nothing of the
//! caller's own placement changes. While it runs, its `numa_maps` is read every
//! [`SAMPLE`] so the caller can show where its memory really was.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use numasched_model::topology::NodeId;

use crate::observe::counters::{CounterSample, CounterSource, PerfCounters};
use crate::observe::numa_maps;

/// How often a running child's memory is looked at.
pub const SAMPLE: Duration = Duration::from_millis(250);

/// Bytes of the child's stderr kept to show when it fails.
const STDERR_TAIL: usize = 2048;

/// `MPOL_BIND` from `<linux/mempolicy.h>`.
const MPOL_BIND: libc::c_int = 2;

/// Where a run goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub cpus: Vec<u32>,
    pub memory_node: NodeId,
}

/// What one run did.
#[derive(Debug, Clone)]
pub struct Run {
    pub seconds: f64,
    pub status: ExitStatus,
    /// The end of what it wrote on stderr.
    pub stderr_tail: String,
    /// Its resident bytes per node at the last look while it ran (empty if it ended
    /// before the first).
    pub node_bytes: BTreeMap<NodeId, u64>,
    /// Its instructions and LLC misses, all threads, where the machine has counters.
    pub counts: Option<CounterSample>,
}

fn mask(ids: &[u32]) -> Vec<libc::c_ulong> {
    let bits = libc::c_ulong::BITS as usize;
    let max = ids.iter().copied().max().unwrap_or(0) as usize;
    let mut words = vec![0 as libc::c_ulong; max / bits + 1];
    for &id in ids {
        words[id as usize / bits] |= 1 << (id as usize % bits);
    }
    words
}

/// Starts `argv` placed, with stdout discarded and stderr kept. A `helper` (the LLC
/// co-runner) is killed by the kernel if numasched dies first (`PR_SET_PDEATHSIG`):
/// nothing of a session outlives it.
pub fn spawn(argv: &[String], place: &Placement, helper: bool) -> std::io::Result<Child> {
    let Some((program, args)) = argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no command given",
        ));
    };
    let cpus = mask(&place.cpus);
    let mems = mask(&[place.memory_node]);
    // The kernel drops one from maxnode; one more than the mask's bits reads it whole.
    let maxnode = (mems.len() * libc::c_ulong::BITS as usize + 1) as libc::c_ulong;
    let mut cmd = Command::new(program);
    // A helper's stderr is not read: a pipe nobody drains would stall it.
    let stderr = if helper {
        Stdio::null()
    } else {
        Stdio::piped()
    };
    cmd.args(args).stdout(Stdio::null()).stderr(stderr);
    // SAFETY: between fork and exec only raw system calls on buffers allocated before
    // the fork run here: nothing allocates, locks or touches the parent's state.
    unsafe {
        cmd.pre_exec(move || {
            let len = cpus.len() * std::mem::size_of::<libc::c_ulong>();
            if libc::syscall(libc::SYS_sched_setaffinity, 0, len, cpus.as_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::syscall(libc::SYS_set_mempolicy, MPOL_BIND, mems.as_ptr(), maxnode) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if helper && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// Runs `argv` placed and waits for it, looking at its memory meanwhile.
pub fn run(argv: &[String], place: &Placement, proc_root: &Path) -> std::io::Result<Run> {
    let start = Instant::now();
    let mut child = spawn(argv, place, false)?;
    let pid = child.id();
    let maps = proc_root.join(pid.to_string()).join("numa_maps");
    // Counted from the moment spawn returns, just after exec: a thread the program
    // starts in its first microseconds could be missed, every later one is counted
    // (inherit). Where there are no counters (a VM) the counts are None.
    let mut counters = PerfCounters::new();
    let counting = counters.attach(pid, 0, &[pid]).is_ok();
    // Read on a thread: a child that fills the pipe would otherwise block forever.
    let stderr = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut tail: Vec<u8> = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = e.read(&mut buf) {
                if n == 0 {
                    break;
                }
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > 2 * STDERR_TAIL {
                    tail.drain(..tail.len() - STDERR_TAIL);
                }
            }
            let from = tail.len().saturating_sub(STDERR_TAIL);
            String::from_utf8_lossy(&tail[from..]).into_owned()
        })
    });
    // Waited for on a thread, so the end is timed when it comes, not at the next look.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = child.wait();
        let _ = tx.send((r, Instant::now()));
    });
    let mut node_bytes = BTreeMap::new();
    let (status, end) = loop {
        match rx.recv_timeout(SAMPLE) {
            Ok((r, end)) => break (r?, end),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(std::io::Error::other(
                    "the thread waiting for the command died",
                ));
            }
        }
        // The file may go, or read short, as the child exits: the last good look stays.
        if let Ok(text) = std::fs::read_to_string(&maps) {
            if let Ok(m) = numa_maps::parse(&text, &maps) {
                if !m.node_bytes.is_empty() {
                    node_bytes = m.node_bytes;
                }
            }
        }
    };
    let stderr_tail = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    // A counter keeps its final value once its task has exited.
    let counts = counting
        .then(|| counters.delta(pid).ok())
        .flatten()
        .filter(|c| c.instructions > 0);
    Ok(Run {
        seconds: end.duration_since(start).as_secs_f64(),
        status,
        stderr_tail,
        node_bytes,
        counts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn here() -> Placement {
        // CPU 0 and node 0 exist on every machine this runs on.
        Placement {
            cpus: vec![0],
            memory_node: 0,
        }
    }

    #[test]
    fn the_child_runs_on_its_cpus_and_fails_with_its_stderr() {
        let argv: Vec<String> = [
            "sh",
            "-c",
            "grep Cpus_allowed_list /proc/self/status >&2; exit 3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let r = run(&argv, &here(), Path::new("/proc")).unwrap();
        assert_eq!(r.status.code(), Some(3));
        assert!(
            r.stderr_tail.contains("Cpus_allowed_list:\t0\n"),
            "{}",
            r.stderr_tail
        );
    }

    #[test]
    fn a_missing_command_is_an_error_from_spawn() {
        let argv = vec!["/nonexistent/numasched-test".to_string()];
        let e = run(&argv, &here(), Path::new("/proc")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }
}
