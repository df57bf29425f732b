//! Slurm jobs: numasched as a companion of the engine that owns the node.
//!
//! Slurm gives each job step a set of CPUs and memory nodes (its cgroup's cpuset) and
//! expects it to stay there; other jobs' CPUs are not its to use, and a task moved
//! outside its step is refused by the kernel (EINVAL). These rules follow, applied to
//! each epoch's snapshot before planning, so every policy obeys them without knowing
//! about Slurm:
//! - a job's task may only be planned inside its step's allocation (CPUs and memory);
//! - a process outside every job is kept off the CPUs allocated to jobs, so numasched
//!   never crowds a job with work Slurm did not put there. By default
//!   ([`Outsiders::Hard`]) it is kept off them whatever its demand while any CPU no
//!   job holds is left: the line Slurm's core specialisation draws, and the one an HPC
//!   site expects (a measured demand is what let a busy outsider onto a job's CPU on
//!   a loaded node). With [`Outsiders::Soft`] only where the CPUs left can hold all
//!   its busy threads; one they cannot hold is released and left to the kernel until
//!   the jobs change or a few epochs have passed (then it sits out one pass unplanned,
//!   to be measured): pinned anywhere, it would crowd a job (the policy does not see
//!   the load of job tasks numasched does not manage), and squeezed onto the free CPUs
//!   it would run slower than unmanaged. Where jobs hold every CPU it may use, it is
//!   left to the kernel either way. Under the hard line an outsider is admitted once
//!   it runs more than an idle process ([`Jobs::admits`]): on a loaded node a busy
//!   one's share falls under the admission threshold;
//! - a task given GPUs (or NICs) runs on their NUMA nodes where its step's CPUs there
//!   hold all its threads ([`crate::job_gres`]);
//! - the job decides how it is treated (`NUMASCHED=off|advise|manage`, see
//!   [`numasched_linux::observe::slurm`]): `off` is never managed (and is restored at once if it
//!   was), `advise` is planned and shown but never applied.
//!
//! A process's job and wish are read once per process (its cgroup and environment do
//! not change while it lives in a job), once its environment is there to read: a task
//! met mid-exec, or one run with an empty environment, is left alone unless the plugin
//! told its wish. Allocations are read every epoch, because Slurm may resize a job.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use numasched_linux::observe::slurm::{Allocation, JobMode, JobStep, SlurmReader, Wish};
use numasched_model::topology::{NodeId, Topology};
use numasched_model::CpuSet;
use numasched_model::{ProcessKey, Snapshot};
use numasched_policy::granularity::IDLE_DEMAND;

pub use crate::config::Outsiders;
use crate::job_gres::{GresAsk, GresFiles, GresKind};
use crate::step_reports::{StepReports, TaskSeen};

/// Scan passes after which a process not looked up is forgotten: longer than the scan
/// leaves an idle process unread.
const FORGET_AFTER: u64 = 64;

/// What is known of one process in a job.
#[derive(Debug, Clone)]
struct Member {
    step: JobStep,
    /// The step's cgroup and whether it is a v1 cpuset one; `None` when only the SPANK
    /// plugin told of the task (Slurm tracking it without cgroups).
    cgroup: Option<(String, bool)>,
    mode: JobMode,
    /// Slurm's own step daemon, which lives in the step's cgroup: never managed, not
    /// a task.
    stepd: bool,
    /// The node's GPUs the task was given, or its NICs (its environment says).
    devices: Option<GresAsk>,
    /// Whether the wish was read from the task's environment (or needs none). A task
    /// met mid-exec, its environment not yet in place, is left alone (or taken at the
    /// plugin's word) and looked at again: taken for silent, an opted-out job would
    /// be managed for good.
    settled: bool,
}

/// Passes an outsider stays left to the kernel before it is looked at again: its
/// demand, which decided it, may have been a start-up burst.
const PARKED_PASSES: u64 = 10;

/// Passes in a row an outsider must not fit beside the jobs before it is left to the
/// kernel: a process first seen young is sized for all its threads until one epoch
/// is measured, which alone must not decide.
const UNFIT_PASSES: u32 = 2;

/// The command name of Slurm's step daemon.
const STEPD: &str = "slurmstepd";

/// What the SPANK plugin said of a task at its start (see [`Jobs::told`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskEvent {
    /// `start` or `exit`.
    pub event: TaskEventKind,
    pub job: u64,
    pub step: String,
    pub pid: u32,
    /// The job's `--numasched=` option, if given.
    #[serde(default)]
    pub mode: Option<JobMode>,
    /// The job's cores on this node as Slurm numbers them (`S_JOB_ALLOC_CORES`), if
    /// the plugin knows them. Checked, not used: Slurm's abstract core numbers are not
    /// CPU ids on SMT or oddly numbered machines, and the step's cpuset, which is, is
    /// read instead.
    #[serde(default)]
    pub cpus: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskEventKind {
    Start,
    Exit,
}

/// A task the plugin told of, until its exit.
#[derive(Debug, Clone)]
struct Told {
    step: JobStep,
    mode: Option<JobMode>,
}

/// Tasks the plugin told of at most: more than any node runs at once, so a flood of
/// messages (tasks whose exit was never sent) cannot grow the daemon without bound.
const TOLD_KEPT: usize = 65_536;

#[derive(Debug, Default)]
struct Known {
    /// Tasks the SPANK plugin told of, by pid.
    told: HashMap<u32, Told>,
    /// Per process seen by the scan: its job (or `None` outside Slurm), the pass it
    /// was last looked up in, and its command name then.
    members: HashMap<ProcessKey, (Option<Member>, u64, String)>,
    /// Scan passes begun.
    pass: u64,
    /// Problems not yet reported (a wish that is no mode), each once.
    problems: Vec<String>,
    /// Why a job's GPUs or NICs could not be placed, as already reported.
    gres_said: HashSet<String>,
    /// Outsiders the CPUs no job holds cannot hold, left to the kernel (with the pass
    /// they were left in) while the jobs' CPUs stay `parked_beside`, for at most
    /// [`PARKED_PASSES`].
    parked: HashMap<ProcessKey, u64>,
    /// Outsiders that did not fit beside the jobs in the last pass(es), and how many
    /// passes in a row: one pass is not enough to park (see [`UNFIT_PASSES`]).
    unfit: HashMap<ProcessKey, u32>,
    /// Outsiders parked before and not seen to fit since. Looked at again, one that
    /// still seems not to fit sits out its pass of grace (see [`UNFIT_PASSES`]) out
    /// of the plan, as it is: planned, it would be planned over the whole machine,
    /// the jobs' CPUs included. Its demand is measured meanwhile.
    parked_before: HashSet<ProcessKey>,
    parked_beside: CpuSet,
}

/// The job table shared by the scan filter (which drops `off` jobs) and the engine
/// (which confines the rest).
#[derive(Debug)]
pub struct Jobs {
    reader: SlurmReader,
    known: Mutex<Known>,
    outsiders: Outsiders,
    /// What was done for each step, for the plugin to tell Slurm at its end.
    reports: Mutex<StepReports>,
}

/// A job step as `status`, `top` and the metrics show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    /// `12.0`, `12.batch`.
    pub step: String,
    pub job: u64,
    pub mode: JobMode,
    /// The step's allocation (its cpuset); empty when Slurm does not constrain cores.
    pub cpus: CpuSet,
    pub mems: Vec<NodeId>,
    /// Processes of the step the scan saw, and of those the ones numasched manages.
    pub tasks: usize,
    pub managed: usize,
    /// The nodes of the step's GPUs, where its tasks run first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_nodes: Vec<NodeId>,
    /// The nodes of its NICs, where a step without GPUs runs first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nic_nodes: Vec<NodeId>,
}

impl std::fmt::Display for JobView {
    /// `12.0 manage 2/2 on 0-1`: step, mode, managed of the tasks seen, allocation.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {}/{}",
            self.step,
            self.mode.name(),
            self.managed,
            self.tasks
        )?;
        if !self.cpus.is_empty() {
            write!(f, " on {}", self.cpus)?;
        }
        for (what, on) in [("GPUs", &self.gpu_nodes), ("NICs", &self.nic_nodes)] {
            if !on.is_empty() {
                let nodes: Vec<String> = on.iter().map(ToString::to_string).collect();
                write!(f, ", {what} on node {}", nodes.join(","))?;
            }
        }
        Ok(())
    }
}

/// What confining one snapshot found, for the engine's views and report.
#[derive(Debug, Default)]
pub struct Confined {
    /// The job step of each process in a job.
    pub step_of: HashMap<ProcessKey, JobStep>,
    /// Processes of `advise` jobs: planned, not applied.
    pub advise: BTreeSet<u32>,
    /// Outsiders that cannot be kept off the jobs' CPUs: taken out of the snapshot,
    /// to be released (restored) and left to the kernel as if unmanaged.
    pub park: Vec<ProcessKey>,
    pub views: Vec<JobView>,
}

/// What becomes of an outsider the free CPUs cannot hold this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Released and left to the kernel (see [`Confined::park`]).
    Park,
    /// Out of this pass's plan, left as it is (see [`Known::parked_before`]).
    SitOut,
    /// Planned as it is: one pass does not decide.
    Grace,
}

/// One pass's count of the outsiders the free CPUs could not hold (see
/// [`UNFIT_PASSES`] and [`Known::parked_before`]).
struct Unfit {
    last: HashMap<ProcessKey, u32>,
    now: HashMap<ProcessKey, u32>,
    parked_before: HashSet<ProcessKey>,
}

impl Unfit {
    fn take(k: &mut Known) -> Unfit {
        Unfit {
            last: std::mem::take(&mut k.unfit),
            now: HashMap::new(),
            parked_before: std::mem::take(&mut k.parked_before),
        }
    }

    fn fits(&mut self, key: ProcessKey) {
        self.parked_before.remove(&key);
    }

    /// What becomes of `key`, which the free CPUs cannot hold this pass.
    fn verdict(&mut self, key: ProcessKey) -> Verdict {
        let n = self.last.remove(&key).unwrap_or(0) + 1;
        if n >= UNFIT_PASSES {
            return Verdict::Park;
        }
        self.now.insert(key, n);
        if self.parked_before.contains(&key) {
            Verdict::SitOut
        } else {
            Verdict::Grace
        }
    }

    fn keep(mut self, k: &mut Known, parked: &[ProcessKey]) {
        self.parked_before.extend(parked.iter().copied());
        k.unfit = self.now;
        k.parked_before = self.parked_before;
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Jobs {
    pub fn new(reader: SlurmReader) -> Jobs {
        Jobs {
            reader,
            known: Mutex::new(Known::default()),
            outsiders: Outsiders::default(),
            reports: Mutex::new(StepReports::default()),
        }
    }

    /// The same, keeping outsiders off the jobs' CPUs by `rule`.
    pub fn with_outsiders(self, rule: Outsiders) -> Jobs {
        Jobs {
            outsiders: rule,
            ..self
        }
    }

    /// Starts a scan pass, forgetting processes of jobs that exited, and others the
    /// scan has not asked about for [`FORGET_AFTER`] passes. (An idle process is not
    /// looked at every pass; one forgotten too early is only read again.)
    pub fn begin_pass(&self) {
        let mut k = lock(&self.known);
        k.pass += 1;
        let pass = k.pass;
        // A job's process that exited goes at once: it must not keep its step in the
        // views (the scan, which would forget it, does not look at every process).
        let reader = &self.reader;
        k.members.retain(|key, (m, seen, _)| {
            *seen + FORGET_AFTER > pass && (m.is_none() || reader.exists(key.pid))
        });
        k.parked.retain(|_, at| *at + PARKED_PASSES > pass);
        let Known {
            members,
            parked_before,
            ..
        } = &mut *k;
        parked_before.retain(|key| members.contains_key(key));
    }

    /// The wish of `pid`'s job (`off` for Slurm's own step daemon); `None` outside
    /// Slurm. Called by the scan filter for candidates, so it also records which
    /// processes exist.
    pub fn mode(&self, key: ProcessKey, comm: &str) -> Option<JobMode> {
        let mut k = lock(&self.known);
        let pass = k.pass;
        // A task is forked by slurmstepd and only then execs the job's program: seen
        // before the exec it is named slurmstepd and has slurmstepd's environment, so
        // a new name means a new look.
        if let Some((m, seen, was)) = k.members.get_mut(&key) {
            if was == comm && m.as_ref().is_none_or(|m| m.settled) {
                *seen = pass;
                return m.as_ref().map(|m| m.mode);
            }
        }
        let told = k.told.get(&key.pid).cloned();
        let membership = self.reader.membership(key.pid);
        let step = membership
            .as_ref()
            .map(|m| m.step.clone())
            .or_else(|| told.as_ref().map(|t| t.step.clone()));
        let member = step.map(|step| {
            let cgroup = membership.map(|m| (m.step_cgroup, m.v1));
            if comm == STEPD {
                return Member {
                    step,
                    cgroup,
                    mode: JobMode::Off,
                    stepd: true,
                    devices: None,
                    settled: true,
                };
            }
            // The environment is what the task runs with; the plugin's word is the
            // same option, used when the environment says nothing.
            let told = told.and_then(|t| t.mode);
            let env = self.reader.task_env(key.pid);
            let devices = env.as_ref().ok().and_then(GresAsk::of);
            let (mode, settled) = match env.map(|e| e.wish) {
                Ok(Wish::Said(m)) => (m, true),
                Ok(Wish::Silent) => (told.unwrap_or_default(), true),
                Ok(Wish::Unread) => (told.unwrap_or(JobMode::Off), false),
                Err(e) => {
                    // Not understood: do no harm, leave the job alone.
                    k.problems
                        .push(format!("{e}; job {step} is left alone (not managed)"));
                    (JobMode::Off, true)
                }
            };
            Member {
                step,
                cgroup,
                mode,
                stepd: false,
                devices,
                settled,
            }
        });
        let mode = member.as_ref().map(|m| m.mode);
        k.members.insert(key, (member, pass, comm.to_string()));
        mode
    }

    /// What the SPANK plugin says of a task: at its start its job step and wish (known
    /// before the task execs, and where no cgroup names the job), at its exit that it
    /// is gone.
    pub fn told(&self, e: TaskEvent) -> Result<(), String> {
        if e.step.is_empty() || e.step.contains(['/', '.']) {
            return Err(format!("{:?} is not a job step", e.step));
        }
        if let Some(list) = &e.cpus {
            numasched_model::topology::cpulist::parse(list)
                .map_err(|err| format!("cpus {list:?}: {err}"))?;
        }
        let mut k = lock(&self.known);
        // Read again at the next look: what was cached came before this word.
        k.members.retain(|key, _| key.pid != e.pid);
        match e.event {
            TaskEventKind::Exit => {
                k.told.remove(&e.pid);
            }
            TaskEventKind::Start => {
                if k.told.len() >= TOLD_KEPT && !k.told.contains_key(&e.pid) {
                    return Err(format!("already {TOLD_KEPT} tasks told of; not kept"));
                }
                k.told.insert(
                    e.pid,
                    Told {
                        step: JobStep {
                            job: e.job,
                            step: e.step,
                        },
                        mode: e.mode,
                    },
                );
            }
        }
        Ok(())
    }

    /// Keeps task `p` (of member `m`) on its GPUs' (or NICs') nodes where the CPUs it
    /// may use there hold all its threads ([`crate::job_gres`]); says once why, where
    /// its devices are is not known. `seen` collects each step's device nodes
    /// for its view.
    fn near_its_devices(
        &self,
        topo: &Topology,
        p: &mut numasched_model::Process,
        m: &Member,
        gres: &mut GresFiles,
        seen: &mut BTreeMap<(JobStep, GresKind), Vec<NodeId>>,
    ) {
        let Some(ask) = &m.devices else {
            return;
        };
        match gres.nodes(topo, ask) {
            Ok(nodes) => {
                let allowed = p.allowed_cpus.clone().unwrap_or_else(|| topo.all_cpus());
                let near: CpuSet = allowed
                    .iter()
                    .copied()
                    .filter(|&c| {
                        topo.cpu(c)
                            .is_some_and(|cpu| nodes.contains(&topo.nodes()[cpu.node].id))
                    })
                    .collect();
                if !near.is_empty() && near.len() >= p.slots() && near.len() < allowed.len() {
                    p.allowed_cpus = Some(near);
                }
                seen.entry((m.step.clone(), ask.kind)).or_insert(nodes);
            }
            Err(why) => {
                let mut k = lock(&self.known);
                if k.gres_said.insert(why.clone()) {
                    k.problems.push(format!(
                        "job {}: {why}; its tasks are placed as if it had no {}",
                        m.step,
                        ask.kind.label()
                    ));
                }
            }
        }
    }

    /// Notes what an epoch saw of the jobs' tasks (see [`crate::step_reports`]).
    pub fn note_tasks(
        &self,
        topo: &numasched_model::topology::Topology,
        views: &[JobView],
        seen: Vec<TaskSeen>,
    ) {
        if views.is_empty() && seen.is_empty() {
            return;
        }
        let mut r = lock(&self.reports);
        r.note_steps(views.iter().filter_map(|v| {
            let (_, step) = v.step.split_once('.')?;
            let step = JobStep {
                job: v.job,
                step: step.to_string(),
            };
            Some((step, v.mode, v.tasks))
        }));
        r.note(topo, seen);
    }

    /// What numasched did for `step` on this node, and for every step of its job
    /// here: the lines a task's exit is answered with.
    pub fn reports(&self, step: &JobStep) -> (Option<String>, Option<String>) {
        let r = lock(&self.reports);
        (r.report(step), r.job_report(step.job))
    }

    /// Whether `key`, looked up by [`Jobs::mode`], is admitted as soon as it runs more
    /// than an idle process does (`cpu_demand`, CPUs' worth), whatever the admission
    /// threshold: a task of a job that asked for placement (the job named it, as `run`
    /// names its command), and an outsider the hard line keeps off the jobs' CPUs
    /// (outside every job while jobs hold CPUs here). At load 12 on two CPUs busy tasks
    /// and outsiders ran 0.17 CPUs, under `--min-cpu`: the tasks were never placed and
    /// the outsider never kept off a job's CPU.
    pub fn admits(&self, key: ProcessKey, cpu_demand: f64) -> bool {
        if cpu_demand < IDLE_DEMAND {
            return false;
        }
        let k = lock(&self.known);
        match k.members.get(&key) {
            Some((Some(task), _, _)) => task.mode != JobMode::Off,
            Some((None, _, _)) => self.outsiders == Outsiders::Hard && !k.parked_beside.is_empty(),
            None => false,
        }
    }

    /// Whether an outsider that keeps `slots` CPUs busy is kept on `free`, the CPUs
    /// it may use that no job holds (see the module doc).
    fn keeps_off(&self, free: &CpuSet, slots: usize) -> bool {
        match self.outsiders {
            Outsiders::Hard => !free.is_empty(),
            Outsiders::Soft => free.len() >= slots,
        }
    }

    /// Whether `key` is an outsider left to the kernel beside the jobs (see
    /// [`Confined::park`]); the scan filter keeps it out until the jobs change.
    pub fn parked(&self, key: ProcessKey) -> bool {
        let k = lock(&self.known);
        k.parked
            .get(&key)
            .is_some_and(|at| *at + PARKED_PASSES > k.pass)
    }

    /// Problems found since the last call (each reported once).
    pub fn take_problems(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.known).problems)
    }

    /// Applies the rules of the module to the snapshot (see the module doc).
    pub fn confine(&self, snapshot: &mut Snapshot) -> Confined {
        let members: HashMap<ProcessKey, Member> = lock(&self.known)
            .members
            .iter()
            .filter_map(|(k, (m, _, _))| Some((*k, m.clone()?)))
            .collect();
        // Every step of every job the scan saw, managed or not.
        let mut steps: BTreeMap<JobStep, (Option<Allocation>, JobMode, usize)> = BTreeMap::new();
        for m in members.values() {
            let e = steps.entry(m.step.clone()).or_insert_with(|| {
                let alloc = match &m.cgroup {
                    Some((cgroup, v1)) => self.reader.allocation(cgroup, *v1),
                    None => None,
                };
                (alloc, m.mode, 0)
            });
            if !m.stepd {
                e.1 = m.mode;
                e.2 += 1;
            }
        }
        // Every job's CPUs are taken, including jobs whose tasks the scan has not
        // looked at lately.
        let taken: CpuSet = steps
            .values()
            .filter_map(|(a, _, _)| a.as_ref())
            .chain(self.reader.jobs_allocated().iter())
            .flat_map(|a| a.cpus.iter().copied())
            .collect();
        let mut out = Confined::default();
        {
            // Jobs began or ended: what was left to the kernel is looked at again.
            let mut k = lock(&self.known);
            if k.parked_beside != taken {
                k.parked.clear();
                k.parked_beside = taken.clone();
            }
        }
        if steps.is_empty() && taken.is_empty() {
            return out; // no Slurm job on this machine: nothing to confine
        }
        let machine = snapshot.topology.all_cpus();
        let mut managed: BTreeMap<JobStep, usize> = BTreeMap::new();
        let mut unfit = Unfit::take(&mut lock(&self.known));
        let mut gres = GresFiles::default();
        let mut device_nodes: BTreeMap<(JobStep, GresKind), Vec<NodeId>> = BTreeMap::new();
        // Parked and sitting their grace pass out alike: left to the kernel, out of the plan.
        let mut left_out = HashSet::new();
        for p in &mut snapshot.processes {
            let allowed = p.allowed_cpus.clone().unwrap_or_else(|| machine.clone());
            let Some(m) = members.get(&p.key()) else {
                // Outside every job: off the jobs' CPUs while any is left (hard), or
                // if what is left holds it (soft: a busy outsider squeezed onto fewer
                // CPUs than it keeps busy would run slower than unmanaged; then it
                // shares, as it would without numasched).
                let free = allowed.difference(&taken);
                if free.len() < allowed.len() {
                    if self.keeps_off(&free, p.slots()) {
                        p.allowed_cpus = Some(free);
                        unfit.fits(p.key());
                    } else {
                        match unfit.verdict(p.key()) {
                            Verdict::Park => {
                                out.park.push(p.key());
                                left_out.insert(p.key());
                            }
                            Verdict::SitOut => {
                                left_out.insert(p.key());
                            }
                            Verdict::Grace => {}
                        }
                    }
                }
                continue;
            };
            let step = &m.step;
            *managed.entry(step.clone()).or_default() += 1;
            out.step_of.insert(p.key(), step.clone());
            if m.mode == JobMode::Advise {
                out.advise.insert(p.pid);
            }
            if let Some(Some(alloc)) = steps.get(step).map(|s| &s.0) {
                inside_step(&snapshot.topology, p, &allowed, alloc);
            }
            self.near_its_devices(&snapshot.topology, p, m, &mut gres, &mut device_nodes);
        }
        {
            let mut k = lock(&self.known);
            unfit.keep(&mut k, &out.park);
            let pass = k.pass;
            k.parked.extend(out.park.iter().map(|key| (*key, pass)));
        }
        if !left_out.is_empty() {
            snapshot.processes.retain(|p| !left_out.contains(&p.key()));
        }
        // A step whose only process seen is its step daemon has nothing to show.
        out.views = steps
            .into_iter()
            .filter(|(_, (_, _, tasks))| *tasks > 0)
            .map(|(step, (alloc, mode, tasks))| {
                let (cpus, mems) = alloc.map(|a| (a.cpus, a.mems)).unwrap_or_default();
                JobView {
                    job: step.job,
                    managed: managed.get(&step).copied().unwrap_or(0),
                    gpu_nodes: device_nodes
                        .remove(&(step.clone(), GresKind::Gpu))
                        .unwrap_or_default(),
                    nic_nodes: device_nodes
                        .remove(&(step.clone(), GresKind::Nic))
                        .unwrap_or_default(),
                    step: step.to_string(),
                    mode,
                    cpus,
                    mems,
                    tasks,
                }
            })
            .collect();
        out
    }
}

/// Keeps task `p`, which may use `allowed`, inside its step's allocation: its CPUs
/// and, where the step narrows them, its memory nodes.
fn inside_step(
    topo: &Topology,
    p: &mut numasched_model::Process,
    allowed: &CpuSet,
    alloc: &numasched_linux::observe::slurm::Allocation,
) {
    let inside = allowed.intersection(&alloc.cpus);
    // Empty: the allocation and the affinity disagree (the step is being torn down);
    // the affinity, which the kernel enforces, stands.
    if !inside.is_empty() && inside.len() < topo.num_cpus() {
        p.allowed_cpus = Some(inside);
    }
    if !alloc.mems.is_empty() {
        let nodes: Vec<NodeId> = topo
            .nodes()
            .iter()
            .map(|n| n.id)
            .filter(|n| alloc.mems.contains(n))
            .filter(|n| p.allowed_mems.as_ref().is_none_or(|a| a.contains(n)))
            .collect();
        if !nodes.is_empty() && nodes.len() < topo.nodes().len() {
            p.allowed_mems = Some(nodes);
        }
    }
}

#[cfg(test)]
mod tests;
