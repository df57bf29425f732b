//! Which Slurm job step a process belongs to, what that step was allocated, and what
//! the job asked of numasched.
//!
//! Slurm's `proctrack/cgroup` puts every task in a cgroup named after its job and step:
//! `/slurm_<node>/uid_<u>/job_<j>/step_<s>/…` on cgroup v1,
//! `/system.slice/slurmstepd.scope/job_<j>/step_<s>/…` on v2. With `ConstrainCores`
//! the step's cpuset is the allocation: the CPUs and memory nodes Slurm gave it, which
//! numasched must stay inside (the kernel refuses an affinity outside it anyway) and
//! which no other job's task may be moved onto. The job's wish comes from the task's
//! environment (`NUMASCHED=off|advise|manage`), which `srun`/`sbatch` carry from the
//! submitting shell and the SPANK option sets.
//!
//! Only reads, each bounded; a file that vanished (the step ended) is `None`, never an
//! error worth a line.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use numasched_model::topology::{cpulist, NodeId};
use numasched_model::CpuSet;

/// The environment variable a job sets to say how numasched treats it.
pub const MODE_VARIABLE: &str = "NUMASCHED";

/// Largest environment read: the kernel caps a process's arguments plus environment at
/// a quarter of its stack limit; a variable past this is not looked for.
const MAX_ENVIRON_BYTES: u64 = 1 << 20;

/// A job step: `12.0`, `12.batch`, `12.extern`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobStep {
    pub job: u64,
    pub step: String,
}

impl fmt::Display for JobStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.job, self.step)
    }
}

/// How a job wants numasched to treat its tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobMode {
    /// Left alone: never placed, restored if it was.
    Off,
    /// Planned and shown, never applied.
    Advise,
    /// Placed inside its allocation like any managed process.
    #[default]
    Manage,
}

impl JobMode {
    pub fn name(self) -> &'static str {
        match self {
            JobMode::Off => "off",
            JobMode::Advise => "advise",
            JobMode::Manage => "manage",
        }
    }
}

/// Characters of a bad `NUMASCHED=` value a warning shows.
const MAX_SHOWN: usize = 40;

impl std::str::FromStr for JobMode {
    type Err = String;
    fn from_str(s: &str) -> Result<JobMode, String> {
        match s.trim() {
            "off" => Ok(JobMode::Off),
            "advise" => Ok(JobMode::Advise),
            "manage" => Ok(JobMode::Manage),
            // A job's environment is anyone's text: quoted, and cut, so a warning
            // stays one short line whatever the variable holds (3,164 characters
            // once, issue 41).
            other => {
                let mut cut = other.len().min(MAX_SHOWN);
                while !other.is_char_boundary(cut) {
                    cut -= 1;
                }
                let more = if cut < other.len() { "…" } else { "" };
                Err(format!(
                    "{:?}{more} is not off, advise or manage",
                    &other[..cut]
                ))
            }
        }
    }
}

/// Where a process sits in Slurm's cgroup tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub step: JobStep,
    /// The cgroup of the job (`…/job_<j>`), relative to its hierarchy's root.
    pub job_cgroup: String,
    /// The cgroup of the step (`…/job_<j>/step_<s>`).
    pub step_cgroup: String,
    /// Whether the path came from a cgroup v1 cpuset hierarchy (else the v2 one).
    pub v1: bool,
}

/// Finds the job step in `/proc/<pid>/cgroup`'s text. The cpuset hierarchy's line is
/// preferred on v1 (it is the one that holds the allocation), the unified `0::` line
/// otherwise.
pub fn membership(cgroup_text: &str) -> Option<Membership> {
    let path_of = |l: &str| l.splitn(3, ':').nth(2).map(str::to_string);
    let cpuset = cgroup_text.lines().find(|l| {
        l.split(':')
            .nth(1)
            .is_some_and(|c| c.split(',').any(|c| c == "cpuset"))
    });
    let (path, v1) = match cpuset.and_then(path_of) {
        Some(p) => (p, true),
        None => (
            cgroup_text
                .lines()
                .find(|l| l.starts_with("0::"))
                .and_then(path_of)?,
            false,
        ),
    };
    let parts: Vec<&str> = path.split('/').collect();
    let at = parts.iter().position(|c| {
        c.strip_prefix("job_")
            .is_some_and(|j| !j.is_empty() && j.bytes().all(|b| b.is_ascii_digit()))
    })?;
    let job: u64 = parts[at].strip_prefix("job_")?.parse().ok()?;
    let step = parts.get(at + 1)?.strip_prefix("step_")?;
    if step.is_empty() {
        return None;
    }
    Some(Membership {
        step: JobStep {
            job,
            step: step.to_string(),
        },
        job_cgroup: parts[..=at].join("/"),
        step_cgroup: parts[..=at + 1].join("/"),
        v1,
    })
}

/// The systemd scope Slurm's cgroup/v2 puts its step daemons and jobs in.
const STEPD_SCOPE: &str = "slurmstepd.scope";

/// CPUs and memory nodes a cgroup was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub cpus: CpuSet,
    pub mems: Vec<NodeId>,
}

fn read_cpuset(dir: &Path, cpus: &str, mems: &str) -> Option<Allocation> {
    let read = |name: &str| -> Option<Vec<u32>> {
        let text =
            numasched_model::files::read_text(&dir.join(name), 64 << 10, "cpuset file").ok()?;
        cpulist::parse(text.trim()).ok().filter(|v| !v.is_empty())
    };
    Some(Allocation {
        cpus: read(cpus)?.into(),
        mems: read(mems).unwrap_or_default(),
    })
}

/// Whether the cgroup at `dir` is known to hold no task, its descendants included.
/// v2 says so itself (`cgroup.events`: `populated 0`); on v1 every `tasks` file under
/// it must be empty. A file missing or unreadable says nothing: the cgroup may hold
/// tasks, and its CPUs stay taken.
fn holds_no_task(dir: &Path, v1: bool) -> bool {
    if !v1 {
        return numasched_model::files::read_text(
            &dir.join("cgroup.events"),
            4 << 10,
            "cgroup events",
        )
        .is_ok_and(|t| t.lines().any(|l| l.trim() == "populated 0"));
    }
    // Slurm's v1 tree is job/step/task: three levels are all there is to look at.
    fn all_empty(dir: &Path, depth: u32) -> bool {
        // Opened without blocking and only if regular: a FIFO planted as `tasks`
        // held the first epoch in open(2), SIGTERM unheard (issue 41). A list too long
        // for the limit is not empty.
        let empty = numasched_model::files::read_text(&dir.join("tasks"), 4 << 10, "cgroup tasks")
            .is_ok_and(|t| t.is_empty());
        if !empty || depth == 0 {
            return empty;
        }
        let Ok(rd) = std::fs::read_dir(dir) else {
            return false;
        };
        rd.filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .all(|p| all_empty(&p, depth - 1))
    }
    all_empty(dir, 3)
}

/// Reads the Slurm side of processes under a procfs root and a cgroup root (normally
/// `/proc` and `/sys/fs/cgroup`; tests point both at a directory).
#[derive(Debug, Clone)]
pub struct SlurmReader {
    proc_root: PathBuf,
    cgroup_root: PathBuf,
}

impl SlurmReader {
    pub fn new(proc_root: &Path, cgroup_root: &Path) -> SlurmReader {
        SlurmReader {
            proc_root: proc_root.to_path_buf(),
            cgroup_root: cgroup_root.to_path_buf(),
        }
    }

    /// Whether `pid` is still there.
    pub fn exists(&self, pid: u32) -> bool {
        self.proc_root.join(pid.to_string()).exists()
    }

    /// The job step of `pid`; `None` for a process outside Slurm's tree or one that
    /// exited.
    pub fn membership(&self, pid: u32) -> Option<Membership> {
        let path = self.proc_root.join(pid.to_string()).join("cgroup");
        let text = numasched_model::files::read_text(&path, 64 << 10, "cgroup file").ok()?;
        membership(&text)
    }

    /// What `cgroup` (a path from [`Membership`]) was allocated: its effective cpuset.
    /// `None` when the cgroup is gone or has no cpuset (Slurm without `ConstrainCores`).
    pub fn allocation(&self, cgroup: &str, v1: bool) -> Option<Allocation> {
        let rel = cgroup.trim_start_matches('/');
        let (dir, cpus, mems) = if v1 {
            (
                self.cgroup_root.join("cpuset").join(rel),
                "cpuset.cpus",
                "cpuset.mems",
            )
        } else {
            (
                self.cgroup_root.join(rel),
                "cpuset.cpus.effective",
                "cpuset.mems.effective",
            )
        };
        read_cpuset(&dir, cpus, mems)
    }

    /// The allocations of every job on the node, found by walking Slurm's cgroup
    /// trees (`cpuset/slurm*/uid_*/job_*` on v1, `system.slice/[<node>_]slurmstepd.scope/job_*`
    /// on v2), so a job counts even while none of its tasks was looked at. A job
    /// cgroup that holds no task (left behind by a slurmstepd killed before it cleaned
    /// up, or a job between steps) does not: its CPUs would otherwise be kept from
    /// everyone else for as long as the directory stays.
    pub fn jobs_allocated(&self) -> Vec<Allocation> {
        let children = |dir: &Path, prefix: &str| -> Vec<PathBuf> {
            let Ok(rd) = std::fs::read_dir(dir) else {
                return Vec::new();
            };
            let mut v: Vec<PathBuf> = rd
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            v.sort();
            v
        };
        let mut out = Vec::new();
        for slurm in children(&self.cgroup_root.join("cpuset"), "slurm") {
            for uid in children(&slurm, "uid_") {
                for job in children(&uid, "job_") {
                    if !holds_no_task(&job, true) {
                        out.extend(read_cpuset(&job, "cpuset.cpus", "cpuset.mems"));
                    }
                }
            }
        }
        // `slurmstepd.scope`, or `<node>_slurmstepd.scope` where Slurm was built for
        // several slurmd per host (Debian's is: its 22.05 made `nsvm_slurmstepd.scope`).
        let scopes = children(&self.cgroup_root.join("system.slice"), "")
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n == STEPD_SCOPE || n.ends_with(&format!("_{STEPD_SCOPE}")))
            });
        for job in scopes
            .flat_map(|scope| children(&scope, "job_"))
            .filter(|j| !holds_no_task(j, false))
        {
            out.extend(read_cpuset(
                &job,
                "cpuset.cpus.effective",
                "cpuset.mems.effective",
            ));
        }
        out
    }

    /// What the task's environment says of its job: its wish (`NUMASCHED=`; `Err`
    /// names a value that is no mode), and its GPUs and NICs.
    pub fn task_env(&self, pid: u32) -> Result<TaskEnv, String> {
        let path = self.proc_root.join(pid.to_string()).join("environ");
        let unread = TaskEnv {
            wish: Wish::Unread,
            gpus: Vec::new(),
            nics: Vec::new(),
            slurm_conf: None,
            node_name: None,
        };
        let Ok(file) = std::fs::File::open(&path) else {
            return Ok(unread);
        };
        let mut bytes = Vec::new();
        if file
            .take(MAX_ENVIRON_BYTES)
            .read_to_end(&mut bytes)
            .is_err()
            || bytes.is_empty()
        {
            return Ok(unread);
        }
        let var = |name: &str| -> Option<String> {
            let prefix = format!("{name}=");
            bytes
                .split(|b| *b == 0)
                .find_map(|v| v.strip_prefix(prefix.as_bytes()))
                .map(|v| String::from_utf8_lossy(v).into_owned())
        };
        // The step's devices where the step has its own, else the job's.
        let given = |step: &str, job: &str| {
            var(step)
                .or_else(|| var(job))
                .map(|v| device_indices(&v))
                .unwrap_or_default()
        };
        let gpus = given("SLURM_STEP_GPUS", "SLURM_JOB_GPUS");
        let nics = given("SLURM_STEP_NICS", "SLURM_JOB_NICS");
        let slurm_conf = var("SLURM_CONF").map(PathBuf::from);
        let node_name = var("SLURMD_NODENAME");
        let wish = match var(MODE_VARIABLE) {
            None => Wish::Silent,
            Some(value) => value
                .parse()
                .map(Wish::Said)
                .map_err(|e| format!("{}: {MODE_VARIABLE}={e}", path.display()))?,
        };
        Ok(TaskEnv {
            wish,
            gpus,
            nics,
            slurm_conf,
            node_name,
        })
    }
}

/// Device numbers of a `SLURM_*_GPUS` or `SLURM_*_NICS` value: `0,2-3` as GPUs are
/// given, or names ending in the number, as Slurm 22.05's gres/nic gives NICs
/// (`mlx4_0,mlx4_1`). An item that is neither is skipped.
fn device_indices(v: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for item in v.trim().split(',') {
        if let Ok(list) = cpulist::parse(item) {
            out.extend(list);
            continue;
        }
        out.extend(super::gres::trailing_number(item));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// What a task's environment says of its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEnv {
    pub wish: Wish,
    /// The node's GPUs the task was given, as indices in gres.conf's order.
    pub gpus: Vec<u32>,
    /// Its NICs (Slurm's gres/nic), as the numbers their device files end in.
    pub nics: Vec<u32>,
    /// Slurm's configuration file (gres.conf is beside it).
    pub slurm_conf: Option<PathBuf>,
    /// The Slurm node the task runs on (gres.conf's `NodeName=` names it).
    pub node_name: Option<String>,
}

impl TaskEnv {
    /// gres.conf as this task's Slurm reads it: beside its `SLURM_CONF`, else Slurm's
    /// default place.
    pub fn gres_conf(&self) -> PathBuf {
        self.slurm_conf
            .as_deref()
            .and_then(Path::parent)
            .unwrap_or(Path::new("/etc/slurm"))
            .join("gres.conf")
    }
}

/// What a task's environment says of its job's wish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wish {
    /// `NUMASCHED=` names this mode.
    Said(JobMode),
    /// The environment is there and does not say.
    Silent,
    /// There is no environment to read yet, or any more. An exec shows the new
    /// program's name before its environment is in place (the kernel sets the stack's
    /// bounds last), so a task met in that window reads as empty; so does one that
    /// exited. Not the same as silent: the wish may be there a moment later.
    Unread,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_step_in_v1_and_v2_paths() {
        let v1 = "9:name=systemd:/\n3:cpuset:/slurm_node1/uid_0/job_12/step_0/task_1\n\
                  0::/\n";
        let m = membership(v1).expect("v1");
        assert_eq!(m.step.to_string(), "12.0");
        assert!(m.v1);
        assert_eq!(m.job_cgroup, "/slurm_node1/uid_0/job_12");
        assert_eq!(m.step_cgroup, "/slurm_node1/uid_0/job_12/step_0");

        let v2 = "0::/system.slice/slurmstepd.scope/job_7/step_batch/user/task_0\n";
        let m = membership(v2).expect("v2");
        assert_eq!(m.step.to_string(), "7.batch");
        assert!(!m.v1);
        assert_eq!(
            m.step_cgroup,
            "/system.slice/slurmstepd.scope/job_7/step_batch"
        );
    }

    #[test]
    fn paths_that_only_look_like_jobs_are_not_jobs() {
        for text in [
            "3:cpuset:/\n0::/\n",
            "3:cpuset:/slurm_n/uid_0/job_12\n",
            "3:cpuset:/slurm_n/uid_0/job_/step_0\n",
            "3:cpuset:/slurm_n/uid_0/job_x1/step_0\n",
            "3:cpuset:/slurm_n/uid_0/job_1/notastep\n",
            "0::/user.slice/job_12/step_\n",
            "",
        ] {
            assert_eq!(membership(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_job_cgroup_left_with_no_task_takes_no_cpus() {
        let d = tempfile::tempdir().expect("tmp");
        let cg = d.path().join("cg");
        let r = SlurmReader::new(&d.path().join("proc"), &cg);
        let cpus = |r: &SlurmReader| -> Vec<CpuSet> {
            r.jobs_allocated().into_iter().map(|a| a.cpus).collect()
        };
        let put = |dir: &Path, name: &str, text: &str| {
            std::fs::create_dir_all(dir).expect("mkdir");
            std::fs::write(dir.join(name), text).expect("write");
        };
        // v1: job 3 holds a task in a step, job 4 holds none anywhere, job 5 has no
        // tasks files to tell (a fake tree, or a kernel that hides them): it counts.
        let v1 = cg.join("cpuset/slurm_n/uid_0");
        for (job, cpus) in [(3, "0-1"), (4, "2-3"), (5, "4")] {
            put(&v1.join(format!("job_{job}")), "cpuset.cpus", cpus);
        }
        for job in [3, 4] {
            let j = v1.join(format!("job_{job}"));
            put(&j, "tasks", "");
            put(&j.join("step_0"), "tasks", "");
            put(&j.join("step_0/task_0"), "tasks", "");
        }
        put(&v1.join("job_3/step_0/task_0"), "tasks", "4242\n");
        assert_eq!(cpus(&r), vec![CpuSet::from(vec![0, 1]), vec![4].into()]);
        // A step whose tasks file is gone says nothing: job 4 counts again.
        std::fs::remove_file(v1.join("job_4/step_0/tasks")).expect("rm");
        assert_eq!(cpus(&r).len(), 3);
        std::fs::remove_dir_all(cg.join("cpuset")).expect("rm");
        // v2: the kernel says whether anything is left under the job.
        let v2 = cg.join("system.slice/slurmstepd.scope");
        for (job, cpus, populated) in [(7, "0", "1"), (8, "1", "0")] {
            let j = v2.join(format!("job_{job}"));
            put(&j, "cpuset.cpus.effective", cpus);
            put(
                &j,
                "cgroup.events",
                &format!("populated {populated}\nfrozen 0\n"),
            );
        }
        put(&v2.join("job_9"), "cpuset.cpus.effective", "2");
        assert_eq!(cpus(&r), vec![CpuSet::from(vec![0]), vec![2].into()]);
        // A Slurm built for several slurmd per host names the scope after the node.
        let node = cg.join("system.slice/nsvm_slurmstepd.scope/job_11");
        put(&node, "cpuset.cpus.effective", "3");
        put(&node, "cgroup.events", "populated 1\n");
        put(
            &cg.join("system.slice/other.scope/job_12"),
            "cpuset.cpus.effective",
            "1",
        );
        assert_eq!(
            cpus(&r),
            vec![CpuSet::from(vec![3]), vec![0].into(), vec![2].into()]
        );
    }

    #[test]
    fn a_long_bad_mode_is_cut_in_its_warning() {
        let e = "x".repeat(3000).parse::<JobMode>().unwrap_err();
        assert!(e.len() < 100, "{e}");
        assert!(
            e.contains("…") && e.contains("is not off, advise or manage"),
            "{e}"
        );
        let e = "please".parse::<JobMode>().unwrap_err();
        assert_eq!(e, "\"please\" is not off, advise or manage");
    }

    /// Issue 41: a FIFO planted as a v1 `tasks` file held the epoch in open(2), where
    /// SIGTERM went unheard. Now it reads as not empty (it is no tasks file), at once.
    #[test]
    fn a_fifo_as_a_tasks_file_does_not_block() {
        let d = tempfile::tempdir().expect("tmp");
        let step = d.path().join("job_5/step_0");
        std::fs::create_dir_all(&step).expect("mkdir");
        std::fs::write(d.path().join("job_5/tasks"), "").expect("write");
        nix::unistd::mkfifo(
            &step.join("tasks"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .expect("mkfifo");
        assert!(!holds_no_task(&d.path().join("job_5"), true));
    }

    #[test]
    fn reads_allocation_and_mode_under_redirected_roots() {
        let d = tempfile::tempdir().expect("tmp");
        let proc = d.path().join("proc");
        let cg = d.path().join("cg");
        let step = cg.join("cpuset/slurm_n/uid_0/job_3/step_0");
        std::fs::create_dir_all(&step).expect("mkdir");
        std::fs::write(step.join("cpuset.cpus"), "2-3\n").expect("write");
        std::fs::write(step.join("cpuset.mems"), "1\n").expect("write");
        std::fs::create_dir_all(proc.join("40")).expect("mkdir");
        std::fs::write(
            proc.join("40/cgroup"),
            "3:cpuset:/slurm_n/uid_0/job_3/step_0/task_0\n",
        )
        .expect("write");
        std::fs::write(proc.join("40/environ"), b"A=1\0NUMASCHED=advise\0B=2\0").expect("env");
        let r = SlurmReader::new(&proc, &cg);
        let m = r.membership(40).expect("member");
        assert_eq!(
            r.allocation(&m.step_cgroup, m.v1),
            Some(Allocation {
                cpus: vec![2, 3].into(),
                mems: vec![1]
            })
        );
        assert_eq!(r.allocation("/slurm_n/uid_0/job_9/step_0", true), None);
        let wish = |pid| r.task_env(pid).map(|e| e.wish);
        assert_eq!(wish(40), Ok(Wish::Said(JobMode::Advise)));
        assert_eq!(wish(41), Ok(Wish::Unread), "exited");
        std::fs::write(proc.join("40/environ"), b"NUMASCHED=please\0").expect("env");
        let e = wish(40).expect_err("bad value");
        assert!(e.contains("40/environ") && e.contains("please"), "{e}");
        std::fs::write(proc.join("40/environ"), b"XNUMASCHED=off\0").expect("env");
        assert_eq!(wish(40), Ok(Wish::Silent), "another variable's suffix");
        std::fs::write(proc.join("40/environ"), b"").expect("env");
        assert_eq!(wish(40), Ok(Wish::Unread), "mid-exec: no environment yet");
        // Its GPUs: the step's where it has them, else the job's; and Slurm's config.
        std::fs::write(
            proc.join("40/environ"),
            b"SLURM_JOB_GPUS=0,1\0SLURM_STEP_GPUS=1\0SLURM_CONF=/etc/slurm/slurm.conf\0",
        )
        .expect("env");
        let env = r.task_env(40).expect("env");
        assert_eq!(env.gpus, vec![1]);
        assert_eq!(env.slurm_conf, Some(PathBuf::from("/etc/slurm/slurm.conf")));
        std::fs::write(proc.join("40/environ"), b"SLURM_JOB_GPUS=0-2\0").expect("env");
        assert_eq!(r.task_env(40).expect("env").gpus, vec![0, 1, 2]);
        std::fs::write(
            proc.join("40/environ"),
            b"SLURM_JOB_NICS=0,1\0SLURM_STEP_NICS=1\0OMPI_MCA_btl_openib_if_include=mlx4_1\0",
        )
        .expect("env");
        let env = r.task_env(40).expect("env");
        assert_eq!((env.gpus, env.nics), (vec![], vec![1]));
        // Slurm 22.05's gres/nic names them.
        std::fs::write(proc.join("40/environ"), b"SLURM_STEP_NICS=mlx4_0,mlx4_2\0").expect("env");
        assert_eq!(r.task_env(40).expect("env").nics, vec![0, 2]);
        assert_eq!(device_indices("0,2-3,x,"), vec![0, 2, 3]);
    }
}
