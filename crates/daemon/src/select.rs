//! Which processes the daemon manages, decided from what the scan knows after `stat`
//! (name, pid, parent, CPU rate, RSS), before the costly reads.
//!
//! Two kinds of rule, treated differently on purpose:
//! - **Identity** (command-name globs, pids, cgroups, or for `run` the command's process
//!   tree) is checked every epoch: a process that stops matching (it exec'd something
//!   else, moved cgroup) stops being managed at once.
//! - **Thresholds** (minimum CPU, minimum RSS) only gate admission. A managed process
//!   that goes quiet keeps being observed, and the daemon releases it only after it
//!   stayed below them for a while; otherwise a process hovering at the threshold would
//!   be placed and restored every other second.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::config::Selection;
use super::glob::{any_match, Glob};
use super::jobs::Jobs;
use numasched_linux::observe::slurm::JobMode;
use numasched_linux::observe::{Candidate, Filter};
use numasched_model::ProcessKey;

/// The set of managed processes, shared between the daemon and the scan filter.
pub type Managed = Arc<Mutex<HashSet<ProcessKey>>>;

/// A compiled [`Selection`].
#[derive(Debug, Clone)]
pub struct Selector {
    include_comm: Option<Vec<Glob>>,
    exclude_comm: Vec<Glob>,
    include_pid: HashSet<u32>,
    exclude_pid: HashSet<u32>,
    include_cgroup: Option<Vec<Glob>>,
    exclude_cgroup: Vec<Glob>,
    min_cpu: f64,
    min_rss: u64,
    proc_root: PathBuf,
}

/// What the thresholds say about a process (identity rules already passed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not ours by identity.
    Out,
    /// Ours by identity and busy enough.
    Admit,
    /// Ours by identity, below a threshold: kept only if already managed.
    Quiet,
}

impl Selector {
    pub fn new(sel: &Selection, proc_root: &Path) -> Selector {
        let optional = |v: &[Glob]| (!v.is_empty()).then(|| v.to_vec());
        Selector {
            include_comm: optional(&sel.include_comm),
            exclude_comm: sel.exclude_comm.clone(),
            include_pid: sel.include_pid.iter().copied().collect(),
            exclude_pid: sel.exclude_pid.iter().copied().collect(),
            include_cgroup: optional(&sel.include_cgroup),
            exclude_cgroup: sel.exclude_cgroup.clone(),
            min_cpu: sel.min_cpu,
            min_rss: sel.min_rss,
            proc_root: proc_root.to_path_buf(),
        }
    }

    fn has_include_rules(&self) -> bool {
        self.include_comm.is_some() || !self.include_pid.is_empty() || self.include_cgroup.is_some()
    }

    fn needs_cgroup(&self) -> bool {
        self.include_cgroup.is_some() || !self.exclude_cgroup.is_empty()
    }

    /// Identity rules only. `in_tree` is `Some` in `run` mode: the command's process
    /// tree then replaces the include rules.
    pub fn identity(&self, c: &Candidate<'_>, in_tree: Option<bool>) -> bool {
        let pid = c.stat.pid;
        let comm = c.stat.comm.as_str();
        if self.exclude_pid.contains(&pid) || any_match(&self.exclude_comm, comm) {
            return false;
        }
        if c.stat.is_realtime() {
            return false;
        }
        let cgroup = if self.needs_cgroup() {
            cgroup_of(&self.proc_root, pid)
        } else {
            None
        };
        if let Some(cg) = &cgroup {
            if any_match(&self.exclude_cgroup, cg) {
                return false;
            }
        }
        if let Some(t) = in_tree {
            return t;
        }
        if !self.has_include_rules() {
            return true;
        }
        self.include_pid.contains(&pid)
            || self
                .include_comm
                .as_ref()
                .is_some_and(|g| any_match(g, comm))
            || matches!((&self.include_cgroup, &cgroup), (Some(g), Some(cg)) if any_match(g, cg))
    }

    /// Whether the process is busy enough to be admitted.
    pub fn busy(&self, c: &Candidate<'_>) -> bool {
        c.cpu_demand >= self.min_cpu && c.rss_bytes >= self.min_rss
    }

    pub fn verdict(&self, c: &Candidate<'_>, in_tree: Option<bool>) -> Verdict {
        if !self.identity(c, in_tree) {
            Verdict::Out
        } else if in_tree.is_some() || self.busy(c) {
            // A command started with `run` is managed whatever its load: the user
            // named it.
            Verdict::Admit
        } else {
            Verdict::Quiet
        }
    }
}

/// The cgroup v2 path of a process (`0::/path` in `/proc/<pid>/cgroup`), or the first
/// hierarchy's path on a v1-only system; `None` if unreadable (it exited).
pub fn cgroup_of(proc_root: &Path, pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("cgroup")).ok()?;
    let path_of = |l: &str| l.splitn(3, ':').nth(2).map(str::to_string);
    text.lines()
        .find(|l| l.starts_with("0::"))
        .and_then(path_of)
        .or_else(|| text.lines().next().and_then(path_of))
}

/// The process tree of a command started by `run`: its root and every descendant seen
/// so far. A child is recognised by its parent being a member; pids are visited in
/// ascending order, so a child whose pid wrapped below its parent's joins one pass later.
#[derive(Debug, Default)]
pub struct Tree {
    pub root: u32,
    members: HashSet<u32>,
}

impl Tree {
    pub fn new(root: u32) -> Tree {
        Tree {
            root,
            members: HashSet::from([root]),
        }
    }

    /// Whether `pid` (child of `ppid`) belongs, adding it if so.
    pub fn admit(&mut self, pid: u32, ppid: u32) -> bool {
        if self.members.contains(&pid) || self.members.contains(&ppid) {
            self.members.insert(pid);
            true
        } else {
            false
        }
    }

    /// Keeps only members still alive (a reused pid must not inherit membership).
    pub fn retain(&mut self, alive: &HashSet<u32>) {
        let root = self.root;
        self.members.retain(|p| *p == root || alive.contains(p));
    }
}

/// The scan filter: identity every pass, thresholds for newcomers only, and before
/// either a Slurm job's opt-out and outsiders left to the kernel beside the jobs (see
/// [`super::jobs`]).
pub fn filter(
    selector: Selector,
    managed: Managed,
    tree: Option<Arc<Mutex<Tree>>>,
    jobs: Option<Arc<Jobs>>,
) -> Filter {
    Box::new(move |c: &Candidate<'_>| {
        let key = ProcessKey {
            pid: c.stat.pid,
            start_time: c.stat.start_time,
        };
        if let Some(j) = &jobs {
            if j.mode(key, &c.stat.comm) == Some(JobMode::Off) || j.parked(key) {
                return false;
            }
        }
        let in_tree = tree.as_ref().map(|t| {
            t.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .admit(c.stat.pid, c.stat.ppid)
        });
        match selector.verdict(c, in_tree) {
            Verdict::Out => false,
            Verdict::Admit => true,
            Verdict::Quiet => {
                managed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains(&key)
                    || jobs.as_ref().is_some_and(|j| j.admits(key, c.cpu_demand))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_linux::observe::Stat;

    fn globs(v: &[&str]) -> Vec<Glob> {
        v.iter().map(|p| Glob::parse(p).expect("glob")).collect()
    }

    fn stat(pid: u32, ppid: u32, comm: &str) -> Stat {
        let line = format!(
            "{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194304 0 0 0 0 5 5 0 0 20 0 1 0 100 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0"
        );
        numasched_linux::observe::proc::parse_stat(line.as_bytes(), Path::new("/proc/x/stat"))
            .expect("valid stat line")
    }

    /// Issue 17: real-time tasks are placed by whoever made them real-time; even
    /// when named by an include rule (or run under `run`), they are left alone.
    #[test]
    fn real_time_tasks_are_never_selected() {
        let sel = selector(|s| s.include_comm = globs(&["rt*"]));
        for policy in [1, 2, 6] {
            let mut s = stat(10, 1, "rtjob");
            s.policy = policy;
            assert!(s.is_realtime());
            assert_eq!(sel.verdict(&cand(&s, 1.0, 1 << 30), None), Verdict::Out);
            assert_eq!(
                sel.verdict(&cand(&s, 1.0, 1 << 30), Some(true)),
                Verdict::Out
            );
        }
        let s = stat(10, 1, "rtjob");
        assert_eq!(sel.verdict(&cand(&s, 1.0, 1 << 30), None), Verdict::Admit);
    }

    fn cand(s: &Stat, cpu: f64, rss: u64) -> Candidate<'_> {
        Candidate {
            stat: s,
            cpu_demand: cpu,
            rss_bytes: rss,
        }
    }

    fn selector(f: impl FnOnce(&mut Selection)) -> Selector {
        let mut s = Selection {
            min_cpu: 0.5,
            min_rss: 1000,
            ..Selection::default()
        };
        f(&mut s);
        Selector::new(&s, Path::new("/nonexistent"))
    }

    #[test]
    fn no_include_rule_means_everyone_busy_enough() {
        let sel = selector(|_| {});
        let s = stat(10, 1, "mcf");
        assert_eq!(sel.verdict(&cand(&s, 1.0, 5000), None), Verdict::Admit);
        assert_eq!(sel.verdict(&cand(&s, 0.1, 5000), None), Verdict::Quiet);
        assert_eq!(sel.verdict(&cand(&s, 1.0, 10), None), Verdict::Quiet);
    }

    #[test]
    fn exclusions_beat_inclusions() {
        let sel = selector(|s| {
            s.include_comm = globs(&["post*"]);
            s.include_pid = vec![20];
            s.exclude_pid = vec![21];
            s.exclude_comm = globs(&["postmaster"]);
        });
        let busy = |pid, comm: &str| sel.verdict(&cand(&stat(pid, 1, comm), 2.0, 1 << 20), None);
        assert_eq!(busy(30, "postgres"), Verdict::Admit);
        assert_eq!(busy(31, "postmaster"), Verdict::Out);
        assert_eq!(busy(20, "anything"), Verdict::Admit);
        assert_eq!(busy(21, "postgres"), Verdict::Out);
        assert_eq!(busy(32, "java"), Verdict::Out);
    }

    #[test]
    fn cgroup_rules_read_the_v2_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |pid: u32, text: &str| {
            let d = dir.path().join(pid.to_string());
            std::fs::create_dir_all(&d).expect("mkdir");
            std::fs::write(d.join("cgroup"), text).expect("write");
        };
        write(40, "0::/batch.slice/job-1.scope\n");
        write(41, "12:cpuset:/legacy\n0::/system.slice/sshd.service\n");
        write(42, "3:memory:/v1only\n");
        let mut s = Selection {
            include_cgroup: globs(&["/batch.slice/*", "/v1only"]),
            exclude_cgroup: globs(&["/system.slice/*"]),
            ..Selection::default()
        };
        s.min_cpu = 0.0;
        let sel = Selector::new(&s, dir.path());
        let v = |pid| sel.verdict(&cand(&stat(pid, 1, "x"), 1.0, 1), None);
        assert_eq!(v(40), Verdict::Admit);
        assert_eq!(v(41), Verdict::Out);
        assert_eq!(v(42), Verdict::Admit);
        assert_eq!(v(43), Verdict::Out, "no cgroup file: not included");
    }

    #[test]
    fn quiet_processes_stay_only_if_already_managed() {
        let managed: Managed = Arc::default();
        let f = filter(selector(|_| {}), managed.clone(), None, None);
        let s = stat(50, 1, "idle");
        assert!(!f(&cand(&s, 0.0, 1 << 20)));
        managed.lock().expect("lock").insert(ProcessKey {
            pid: 50,
            start_time: s.start_time,
        });
        assert!(f(&cand(&s, 0.0, 1 << 20)));
    }

    #[test]
    fn run_mode_follows_the_tree_whatever_the_load() {
        let tree = Arc::new(Mutex::new(Tree::new(100)));
        let f = filter(
            selector(|s| s.exclude_comm = globs(&["skipme"])),
            Arc::default(),
            Some(tree.clone()),
            None,
        );
        assert!(f(&cand(&stat(100, 1, "sh"), 0.0, 0)));
        assert!(f(&cand(&stat(101, 100, "child"), 0.0, 0)));
        assert!(f(&cand(&stat(102, 101, "grandchild"), 0.0, 0)));
        assert!(!f(&cand(&stat(103, 1, "stranger"), 5.0, 1 << 30)));
        assert!(!f(&cand(&stat(104, 100, "skipme"), 1.0, 0)));
        // A dead member's pid reused by a stranger does not stay in the tree.
        tree.lock()
            .expect("lock")
            .retain(&HashSet::from([100, 101]));
        assert!(!f(&cand(&stat(102, 7, "reused"), 1.0, 0)));
    }
}
