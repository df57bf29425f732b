//! What numasched did for each Slurm job step on this node, kept so it can be told
//! back to Slurm when the step ends: the SPANK plugin writes it to the job's stderr
//! and, where the site asks, into the job's AdminComment (docs/slurm.md).
//!
//! A user who asked for `--numasched=manage` has no other way to learn whether their
//! job was placed at all, and an administrator reading `scontrol show job` none to
//! learn it afterwards: the daemon's status only shows what runs now. So each epoch
//! the engine notes, per task of a step, the set numasched applied (if any), how much
//! of its memory was on the nodes it ran on, and the pages it moved; the last note of
//! each task is what the report says.

use std::collections::{BTreeMap, HashMap, VecDeque};

use numasched_linux::observe::slurm::{JobMode, JobStep};
use numasched_model::plural::count;
use numasched_model::topology::{NodeId, Topology};
use numasched_model::{CpuSet, ProcessKey};

/// Steps remembered at most: more than a node runs in the time an operator looks,
/// and a bound, so steps whose end was never told cannot grow the daemon.
const STEPS_KEPT: usize = 4096;

/// One task as one epoch saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSeen {
    pub key: ProcessKey,
    pub step: JobStep,
    pub mode: JobMode,
    /// The set numasched applied and keeps in force, if it does.
    pub placed: Option<CpuSet>,
    /// Memory per node, and the CPUs it may run on now.
    pub memory: BTreeMap<NodeId, u64>,
    pub cpus: CpuSet,
    /// Bytes of its pages moved so far, per (from, to) node pair.
    pub moved: BTreeMap<(NodeId, NodeId), u64>,
}

#[derive(Debug, Clone, Default)]
struct TaskRecord {
    /// The set numasched applied, and its nodes.
    placed: Option<(CpuSet, Vec<NodeId>)>,
    /// Bytes of memory, and of those the bytes on nodes it could run on.
    bytes: u64,
    local_bytes: u64,
    moved: BTreeMap<(NodeId, NodeId), u64>,
}

#[derive(Debug, Clone)]
struct StepRecord {
    mode: JobMode,
    tasks: HashMap<ProcessKey, TaskRecord>,
    /// The most tasks the scan saw at once, managed or not (an `off` step's tasks are
    /// never in a snapshot, so never in `tasks`).
    seen: usize,
}

/// The records of the steps seen, oldest first for eviction.
#[derive(Debug, Default)]
pub struct StepReports {
    steps: HashMap<JobStep, StepRecord>,
    order: VecDeque<JobStep>,
}

impl StepReports {
    fn record(&mut self, step: &JobStep, mode: JobMode) -> &mut StepRecord {
        if !self.steps.contains_key(step) {
            if self.order.len() >= STEPS_KEPT {
                if let Some(old) = self.order.pop_front() {
                    self.steps.remove(&old);
                }
            }
            self.order.push_back(step.clone());
        }
        let rec = self
            .steps
            .entry(step.clone())
            .or_insert_with(|| StepRecord {
                mode,
                tasks: HashMap::new(),
                seen: 0,
            });
        rec.mode = mode;
        rec
    }

    /// Notes the steps one scan saw: each with its mode and its tasks counted,
    /// managed or not.
    pub fn note_steps(&mut self, steps: impl IntoIterator<Item = (JobStep, JobMode, usize)>) {
        for (step, mode, tasks) in steps {
            let rec = self.record(&step, mode);
            rec.seen = rec.seen.max(tasks);
        }
    }

    /// Notes what one epoch saw of the tasks of jobs. A task keeps what it was given
    /// last: one placed earlier and released since (its job switched to `off`) says so
    /// through its mode, not through a set it no longer has.
    pub fn note(&mut self, topo: &Topology, seen: Vec<TaskSeen>) {
        for t in seen {
            let rec = self.record(&t.step, t.mode);
            let nodes = nodes_of(topo, &t.cpus);
            let task = rec.tasks.entry(t.key).or_default();
            task.placed = t.placed.map(|set| {
                let on = nodes_of(topo, &set);
                (set, on)
            });
            task.bytes = t.memory.values().sum();
            task.local_bytes = t
                .memory
                .iter()
                .filter(|(n, _)| nodes.contains(n))
                .map(|(_, b)| *b)
                .sum();
            for (pair, b) in t.moved {
                let kept = task.moved.entry(pair).or_insert(0);
                *kept = (*kept).max(b);
            }
        }
    }

    /// One line on what numasched did for `step` on this node, `None` for a step it
    /// never saw (every task ended within an epoch, or the daemon started after it).
    pub fn report(&self, step: &JobStep) -> Option<String> {
        let rec = self.steps.get(step)?;
        Some(format!("step {step}: {}", describe(rec)))
    }

    /// [`Self::report`] of every step of `job` seen on this node, in step order,
    /// joined: what the job's AdminComment carries.
    pub fn job_report(&self, job: u64) -> Option<String> {
        let mut steps: Vec<&JobStep> = self.steps.keys().filter(|s| s.job == job).collect();
        if steps.is_empty() {
            return None;
        }
        steps.sort_by(|a, b| a.step.cmp(&b.step));
        Some(
            steps
                .into_iter()
                .filter_map(|s| self.report(s))
                .collect::<Vec<_>>()
                .join("; "),
        )
    }
}

/// The nodes of `cpus`' CPUs, ascending.
fn nodes_of(topo: &Topology, cpus: &CpuSet) -> Vec<NodeId> {
    let mut n: Vec<NodeId> = cpus
        .iter()
        .filter_map(|&c| topo.cpu(c))
        .map(|c| topo.nodes()[c.node].id)
        .collect();
    n.sort_unstable();
    n.dedup();
    n
}

fn describe(rec: &StepRecord) -> String {
    let n = rec.seen.max(rec.tasks.len());
    let tasks = count(n, "task");
    if rec.mode == JobMode::Off {
        return format!("--numasched=off, {tasks} left alone");
    }
    let bytes: u64 = rec.tasks.values().map(|t| t.bytes).sum();
    let local: u64 = rec.tasks.values().map(|t| t.local_bytes).sum();
    let memory = if bytes == 0 {
        "no memory seen".to_string()
    } else {
        format!(
            "{:.0}% of {} MiB of memory local",
            100.0 * local as f64 / bytes as f64,
            bytes >> 20
        )
    };
    let moved: u64 = rec.tasks.values().flat_map(|t| t.moved.values()).sum();
    let moved = if moved == 0 {
        "no pages moved".to_string()
    } else {
        format!("{} MiB of pages moved", moved >> 20)
    };
    if rec.mode == JobMode::Advise {
        return format!("advise, {tasks} seen and nothing applied; {memory}");
    }
    let placed: Vec<&(CpuSet, Vec<NodeId>)> = rec
        .tasks
        .values()
        .filter_map(|t| t.placed.as_ref())
        .collect();
    if placed.is_empty() {
        return format!(
            "{tasks} managed and left where the kernel ran them (no placement gained \
             enough); {memory}; {moved}"
        );
    }
    let mut cpus = CpuSet::new();
    let mut nodes: Vec<NodeId> = Vec::new();
    for (set, on) in &placed {
        for &c in set.iter() {
            cpus.insert(c);
        }
        nodes.extend(on);
    }
    nodes.sort_unstable();
    nodes.dedup();
    let on = match nodes.as_slice() {
        [one] => format!("node {one}"),
        many => format!(
            "nodes {}",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    format!(
        "{} of {tasks} placed by numasched on CPUs {cpus} ({on}); {memory}; {moved}",
        placed.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::topology;

    fn topo() -> Topology {
        topology::spec::parse("2n:1l:2c:1t").expect("spec")
    }

    fn step(job: u64, s: &str) -> JobStep {
        JobStep {
            job,
            step: s.to_string(),
        }
    }

    fn seen(pid: u32, st: JobStep, mode: JobMode, placed: Option<&[u32]>) -> TaskSeen {
        TaskSeen {
            key: ProcessKey { pid, start_time: 1 },
            step: st,
            mode,
            placed: placed.map(|c| c.iter().copied().collect()),
            // 3 GiB on node 1, 1 GiB on node 0; runs on node 1 (CPUs 2-3).
            memory: BTreeMap::from([(0, 1 << 30), (1, 3 << 30)]),
            cpus: [2u32, 3].into_iter().collect(),
            moved: BTreeMap::new(),
        }
    }

    #[test]
    fn a_placed_step_says_where_how_local_and_what_moved() {
        let t = topo();
        let mut r = StepReports::default();
        let s = step(12, "0");
        r.note(&t, vec![seen(10, s.clone(), JobMode::Manage, Some(&[2]))]);
        let mut second = seen(11, s.clone(), JobMode::Manage, Some(&[3]));
        second.moved.insert((0, 1), 64 << 20);
        r.note(&t, vec![second.clone()]);
        // A later, smaller count of the same move (a read before the last) keeps the most.
        second.moved.insert((0, 1), 32 << 20);
        r.note(&t, vec![second]);
        assert_eq!(
            r.report(&s).expect("seen"),
            "step 12.0: 2 of 2 tasks placed by numasched on CPUs 2-3 (node 1); \
             75% of 8192 MiB of memory local; 64 MiB of pages moved"
        );
    }

    #[test]
    fn off_advise_and_unplaced_steps_say_so() {
        let t = topo();
        let mut r = StepReports::default();
        r.note(&t, vec![seen(10, step(1, "0"), JobMode::Off, None)]);
        r.note(&t, vec![seen(11, step(2, "0"), JobMode::Advise, None)]);
        r.note(&t, vec![seen(12, step(3, "batch"), JobMode::Manage, None)]);
        assert_eq!(
            r.report(&step(1, "0")).expect("seen"),
            "step 1.0: --numasched=off, 1 task left alone"
        );
        assert!(r
            .report(&step(2, "0"))
            .expect("seen")
            .contains("advise, 1 task seen and nothing applied; 75% of"));
        assert!(r
            .report(&step(3, "batch"))
            .expect("seen")
            .contains("1 task managed and left where the kernel ran them"));
        assert_eq!(r.report(&step(4, "0")), None);
    }

    #[test]
    fn the_job_report_joins_its_steps_and_old_steps_are_forgotten() {
        let t = topo();
        let mut r = StepReports::default();
        r.note(&t, vec![seen(10, step(7, "batch"), JobMode::Manage, None)]);
        r.note(
            &t,
            vec![seen(11, step(7, "0"), JobMode::Manage, Some(&[2]))],
        );
        let job = r.job_report(7).expect("seen");
        assert!(job.starts_with("step 7.0: 1 of 1 task placed"), "{job}");
        assert!(job.contains("; step 7.batch: 1 task managed"), "{job}");
        for j in 0..STEPS_KEPT as u64 {
            r.note(
                &t,
                vec![seen(20, step(100 + j, "0"), JobMode::Manage, None)],
            );
        }
        assert_eq!(r.job_report(7), None);
        assert_eq!(r.steps.len(), STEPS_KEPT);
    }
}
