use super::*;
use numasched_model::topology::presets;
use numasched_model::Process;
use std::path::Path;

struct Fake {
    _dir: tempfile::TempDir,
    jobs: Jobs,
}

/// pid → (cgroup path or none, environment)
fn fake(procs: &[(u32, Option<&str>, &str)], cpusets: &[(&str, &str, &str)]) -> Fake {
    let dir = tempfile::tempdir().expect("tmp");
    let proc = dir.path().join("proc");
    let cg = dir.path().join("cg");
    for (pid, cgroup, env) in procs {
        let d = proc.join(pid.to_string());
        std::fs::create_dir_all(&d).expect("mkdir");
        let text = cgroup.map_or("3:cpuset:/\n".to_string(), |c| format!("3:cpuset:{c}\n"));
        std::fs::write(d.join("cgroup"), text).expect("write");
        std::fs::write(d.join("environ"), env.replace(' ', "\0")).expect("write");
    }
    // A step's cpuset, and its job's (Slurm writes both; one step per job here).
    for (path, cpus, mems) in cpusets {
        let d = cg.join("cpuset").join(path.trim_start_matches('/'));
        for d in [d.clone(), d.parent().expect("job").to_path_buf()] {
            std::fs::create_dir_all(&d).expect("mkdir");
            std::fs::write(d.join("cpuset.cpus"), cpus).expect("write");
            std::fs::write(d.join("cpuset.mems"), mems).expect("write");
        }
    }
    let jobs = Jobs::new(SlurmReader::new(&proc, Path::new(&cg)));
    Fake { _dir: dir, jobs }
}

/// [`fake`] with today's softer rule for outsiders ([`Outsiders::Soft`]).
fn fake_soft(procs: &[(u32, Option<&str>, &str)], cpusets: &[(&str, &str, &str)]) -> Fake {
    let f = fake(procs, cpusets);
    Fake {
        jobs: f.jobs.with_outsiders(Outsiders::Soft),
        _dir: f._dir,
    }
}

fn key(pid: u32) -> ProcessKey {
    ProcessKey { pid, start_time: 0 }
}

fn snapshot(pids: &[u32]) -> Snapshot {
    // 2 nodes × 4 CPUs.
    let topology = presets::get("nehalem-e5520").expect("preset");
    Snapshot {
        topology,
        processes: pids.iter().map(|&p| Process::new(p, "t")).collect(),
        others_pinned: Default::default(),
        others_taken: Default::default(),
        others_demand: Default::default(),
    }
}

const JOB1: &str = "/slurm_n/uid_0/job_1/step_0";
const JOB2: &str = "/slurm_n/uid_0/job_2/step_0";

#[test]
fn job_tasks_stay_inside_their_step_and_others_stay_off_jobs() {
    let f = fake(
        &[
            (10, Some(&format!("{JOB1}/task_0")), "PATH=/bin"),
            (11, Some(&format!("{JOB2}/task_0")), "NUMASCHED=manage"),
            (12, None, ""),
        ],
        &[(JOB1, "0-1", "0"), (JOB2, "4-5", "1")],
    );
    f.jobs.begin_pass();
    for p in [10, 11, 12] {
        f.jobs.mode(key(p), "t");
    }
    let mut s = snapshot(&[10, 11, 12]);
    let c = f.jobs.confine(&mut s);
    assert_eq!(s.processes[0].allowed_cpus, Some(vec![0, 1].into()));
    assert_eq!(s.processes[0].allowed_mems, Some(vec![0]));
    assert_eq!(s.processes[1].allowed_cpus, Some(vec![4, 5].into()));
    assert_eq!(s.processes[1].allowed_mems, Some(vec![1]));
    assert_eq!(
        s.processes[2].allowed_cpus,
        Some(vec![2, 3, 6, 7].into()),
        "outside every job: off the jobs' CPUs"
    );
    assert_eq!(
        c.step_of.get(&key(10)).map(ToString::to_string),
        Some("1.0".into())
    );
    assert_eq!(c.views.len(), 2);
    assert!(c.views.iter().all(|v| v.tasks == 1 && v.managed == 1));
    assert!(c.advise.is_empty());
}

#[test]
fn a_task_with_a_gpu_runs_on_its_node_where_its_threads_fit_there() {
    let f = fake(
        &[
            (30, Some(&format!("{JOB1}/task_0")), ""),
            (31, Some(&format!("{JOB1}/task_1")), ""),
            (32, Some(&format!("{JOB1}/task_2")), ""),
        ],
        &[(JOB1, "0-7", "0-1")],
    );
    let dir = f._dir.path();
    std::fs::write(
        dir.join("gres.conf"),
        "NodeName=n Name=gpu File=/dev/nsgpu0 Cores=4-7\n",
    )
    .expect("write");
    let conf = dir.join("slurm.conf");
    for (pid, gpu) in [(30, 0), (31, 0), (32, 3)] {
        let env = format!(
            "SLURM_STEP_GPUS={gpu}\0SLURM_CONF={}\0SLURMD_NODENAME=n\0",
            conf.display()
        );
        std::fs::write(dir.join(format!("proc/{pid}/environ")), env).expect("env");
    }
    f.jobs.begin_pass();
    for p in [30, 31, 32] {
        f.jobs.mode(key(p), "t");
    }
    let mut s = snapshot(&[30, 31, 32]);
    // Six busy threads do not fit on the GPU's node's four CPUs.
    s.processes[1].threads = 6;
    s.processes[1].cpu_demand = 6.0;
    let c = f.jobs.confine(&mut s);
    assert_eq!(
        s.processes[0].allowed_cpus,
        Some(vec![4, 5, 6, 7].into()),
        "on node 1, its GPU's"
    );
    assert_eq!(s.processes[1].allowed_cpus, None, "the whole step");
    assert_eq!(s.processes[2].allowed_cpus, None, "GPU 3 is nowhere");
    assert_eq!(c.views[0].gpu_nodes, vec![1]);
    assert!(c.views[0].to_string().ends_with(", GPUs on node 1"));
    let problems = f.jobs.take_problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("job 1.0:") && problems[0].contains("no GPU 3 for node n"),
        "{problems:?}"
    );
    f.jobs.confine(&mut snapshot(&[30, 31, 32]));
    assert!(f.jobs.take_problems().is_empty(), "said once");
}

/// A task given a NIC (gres/nic) and no GPU runs on the NIC's node; one given both
/// follows its GPU.
#[test]
fn a_task_with_a_nic_runs_on_its_node_and_a_gpu_comes_first() {
    let f = fake(
        &[
            (40, Some(&format!("{JOB1}/task_0")), ""),
            (41, Some(&format!("{JOB1}/task_1")), ""),
        ],
        &[(JOB1, "0-7", "0-1")],
    );
    let dir = f._dir.path();
    std::fs::write(
        dir.join("gres.conf"),
        "Name=gpu File=/dev/nsgpu0 Cores=0-3\nName=nic File=/dev/nsnic0 Cores=4-7\n",
    )
    .expect("write");
    let conf = dir.join("slurm.conf");
    for (pid, gpus) in [(40, ""), (41, "SLURM_STEP_GPUS=0\0")] {
        let env = format!("SLURM_STEP_NICS=0\0{gpus}SLURM_CONF={}\0", conf.display());
        std::fs::write(dir.join(format!("proc/{pid}/environ")), env).expect("env");
    }
    f.jobs.begin_pass();
    for p in [40, 41] {
        f.jobs.mode(key(p), "t");
    }
    let mut s = snapshot(&[40, 41]);
    let c = f.jobs.confine(&mut s);
    assert_eq!(
        s.processes[0].allowed_cpus,
        Some(vec![4, 5, 6, 7].into()),
        "on node 1, its NIC's"
    );
    assert_eq!(
        s.processes[1].allowed_cpus,
        Some(vec![0, 1, 2, 3].into()),
        "on node 0, its GPU's"
    );
    assert_eq!(c.views[0].nic_nodes, vec![1]);
    assert_eq!(c.views[0].gpu_nodes, vec![0]);
    assert!(
        c.views[0]
            .to_string()
            .ends_with(", GPUs on node 0, NICs on node 1"),
        "{}",
        c.views[0]
    );
    assert!(f.jobs.take_problems().is_empty());
}

#[test]
fn the_wish_is_read_from_the_environment_and_a_bad_one_leaves_the_job_alone() {
    let f = fake(
        &[
            (20, Some(&format!("{JOB1}/task_0")), "NUMASCHED=off"),
            (21, Some(&format!("{JOB2}/task_0")), "NUMASCHED=advise"),
            (22, Some(&format!("{JOB2}/task_1")), "NUMASCHED=yes please"),
            (23, None, "NUMASCHED=off"),
        ],
        &[(JOB1, "0-1", "0"), (JOB2, "4-5", "1")],
    );
    f.jobs.begin_pass();
    assert_eq!(f.jobs.mode(key(20), "t"), Some(JobMode::Off));
    assert_eq!(f.jobs.mode(key(21), "t"), Some(JobMode::Advise));
    assert_eq!(f.jobs.mode(key(22), "t"), Some(JobMode::Off));
    assert_eq!(
        f.jobs.mode(key(23), "t"),
        None,
        "outside Slurm the variable means nothing"
    );
    let problems = f.jobs.take_problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("22/environ") && problems[0].contains("2.0"));
    assert!(f.jobs.take_problems().is_empty(), "reported once");
    let mut s = snapshot(&[21]);
    let c = f.jobs.confine(&mut s);
    assert_eq!(c.advise, BTreeSet::from([21]));
}

#[test]
fn an_idle_jobs_cpus_are_taken_though_no_task_was_looked_at() {
    let f = fake(&[(50, None, "")], &[(JOB1, "0-1", "0")]);
    f.jobs.begin_pass();
    f.jobs.mode(key(50), "t");
    let mut s = snapshot(&[50]);
    f.jobs.confine(&mut s);
    assert_eq!(
        s.processes[0].allowed_cpus,
        Some(vec![2, 3, 4, 5, 6, 7].into())
    );
}

#[test]
fn slurms_step_daemon_is_never_managed_nor_counted_as_a_task() {
    let f = fake(
        &[
            (60, Some(JOB1), "NUMASCHED=manage"),
            (61, Some(JOB1), "PATH=/bin"),
        ],
        &[(JOB1, "0-1", "0")],
    );
    f.jobs.begin_pass();
    assert_eq!(f.jobs.mode(key(60), STEPD), Some(JobMode::Off));
    assert_eq!(f.jobs.mode(key(61), "solver"), Some(JobMode::Manage));
    let mut s = snapshot(&[61]);
    let c = f.jobs.confine(&mut s);
    assert_eq!(c.views.len(), 1);
    assert_eq!((c.views[0].tasks, c.views[0].mode), (1, JobMode::Manage));
    // A task seen between slurmstepd's fork and its exec is looked at again after.
    assert_eq!(f.jobs.mode(key(61), STEPD), Some(JobMode::Off));
    assert_eq!(f.jobs.mode(key(61), "solver"), Some(JobMode::Manage));
}

#[test]
fn a_task_met_before_its_environment_is_in_place_is_left_alone_and_read_again() {
    // An exec names the new program before its environment is readable: a
    // NUMASCHED=off task read then was managed for its whole life (VM bed, TCG).
    let f = fake(&[(65, Some(JOB1), "")], &[(JOB1, "0-1", "0")]);
    let environ = f._dir.path().join("proc/65/environ");
    f.jobs.begin_pass();
    assert_eq!(f.jobs.mode(key(65), "solver"), Some(JobMode::Off));
    std::fs::write(&environ, "SLURM_JOB_ID=1\0NUMASCHED=off\0").expect("env");
    f.jobs.begin_pass();
    assert_eq!(f.jobs.mode(key(65), "solver"), Some(JobMode::Off));
    // (An `off` task never reaches the snapshot: the scan filter drops it.)
    let c = f.jobs.confine(&mut snapshot(&[]));
    assert_eq!((c.views[0].mode, c.views[0].tasks), (JobMode::Off, 1));
    // Silent once there: the site's default, read once.
    let f = fake(&[(66, Some(JOB1), "")], &[(JOB1, "0-1", "0")]);
    f.jobs.begin_pass();
    assert_eq!(f.jobs.mode(key(66), "solver"), Some(JobMode::Off));
    std::fs::write(f._dir.path().join("proc/66/environ"), "PATH=/bin\0").expect("env");
    assert_eq!(f.jobs.mode(key(66), "solver"), Some(JobMode::Manage));
    std::fs::write(f._dir.path().join("proc/66/environ"), "NUMASCHED=off\0").expect("env");
    assert_eq!(
        f.jobs.mode(key(66), "solver"),
        Some(JobMode::Manage),
        "read once"
    );
}

#[test]
fn the_plugins_word_names_a_job_no_cgroup_tells_of_until_it_exits() {
    let f = fake(&[(70, None, ""), (71, None, "")], &[]);
    let event = |kind, pid| TaskEvent {
        event: kind,
        job: 9,
        step: "batch".into(),
        pid,
        mode: Some(JobMode::Advise),
        cpus: Some("4-5".into()),
    };
    f.jobs.begin_pass();
    assert_eq!(f.jobs.mode(key(70), "t"), None, "not told yet");
    f.jobs.told(event(TaskEventKind::Start, 70)).expect("start");
    assert_eq!(f.jobs.mode(key(70), "t"), Some(JobMode::Advise));
    let mut s = snapshot(&[70, 71]);
    f.jobs.mode(key(71), "t");
    let c = f.jobs.confine(&mut s);
    assert_eq!(c.views[0].step, "9.batch");
    assert_eq!(c.advise, BTreeSet::from([70]));
    assert_eq!(
        s.processes[0].allowed_cpus, None,
        "Slurm's core numbers are not taken for CPU ids"
    );
    f.jobs.told(event(TaskEventKind::Exit, 70)).expect("exit");
    assert_eq!(f.jobs.mode(key(70), "t"), None, "forgotten");
    let mut bad = event(TaskEventKind::Start, 72);
    bad.cpus = Some("4-x".into());
    assert!(f.jobs.told(bad).is_err());
    let mut bad = event(TaskEventKind::Start, 72);
    bad.step = "../0".into();
    assert!(f.jobs.told(bad).is_err());
}

/// The hard line (the default): a busy outsider is kept off the jobs' CPUs while
/// any CPU no job holds is left, however many CPUs it keeps busy, pass after pass.
#[test]
fn by_default_an_outsider_is_kept_off_the_jobs_cpus_whatever_its_demand() {
    let f = fake(
        &[(80, Some(&format!("{JOB1}/task_0")), ""), (81, None, "")],
        &[(JOB1, "0-6", "0-1")],
    );
    for _ in 0..=UNFIT_PASSES + 1 {
        f.jobs.begin_pass();
        f.jobs.mode(key(80), "t");
        f.jobs.mode(key(81), "t");
        let mut s = snapshot(&[81]);
        s.processes[0].cpu_demand = 2.0;
        s.processes[0].threads = 4;
        let c = f.jobs.confine(&mut s);
        assert!(c.park.is_empty(), "never left to the kernel");
        assert_eq!(s.processes[0].allowed_cpus, Some(vec![7].into()));
        assert!(!f.jobs.parked(key(81)));
        // Admitted whatever the threshold, as an outsider, unless idle.
        assert!(f.jobs.admits(key(81), 0.15));
        assert!(
            !f.jobs.admits(key(81), 0.0),
            "an idle outsider is not admitted"
        );
    }
    let soft = fake_soft(
        &[(80, Some(&format!("{JOB1}/task_0")), ""), (81, None, "")],
        &[(JOB1, "0-6", "0-1")],
    );
    soft.jobs.begin_pass();
    soft.jobs.mode(key(81), "t");
    soft.jobs.mode(key(80), "t");
    soft.jobs.confine(&mut snapshot(&[81]));
    assert!(
        !soft.jobs.admits(key(81), 0.2),
        "soft: the thresholds decide"
    );
    // No job on the node: nothing to fence.
    let none = fake(&[(81, None, "")], &[]);
    none.jobs.begin_pass();
    none.jobs.mode(key(81), "t");
    none.jobs.confine(&mut snapshot(&[81]));
    assert!(!none.jobs.admits(key(81), 0.2));
}

/// A job's task is admitted as soon as it runs more than an idle process, whatever
/// the admission threshold, unless its job opted out: at load 12 on two CPUs the
/// tasks ran 0.17 CPUs and were never placed.
#[test]
fn a_jobs_task_is_admitted_once_busy_unless_its_job_opted_out() {
    let f = fake(
        &[
            (10, Some(&format!("{JOB1}/task_0")), "NUMASCHED=manage"),
            (11, Some(&format!("{JOB2}/task_0")), "NUMASCHED=advise"),
            (12, Some(&format!("{JOB2}/task_1")), "NUMASCHED=off"),
            (13, Some(&format!("{JOB1}/task_1")), "PATH=/bin"),
        ],
        &[(JOB1, "0-1", "0"), (JOB2, "2-3", "0")],
    );
    f.jobs.begin_pass();
    for pid in [10, 11, 12, 13] {
        f.jobs.mode(key(pid), "t");
    }
    for pid in [10, 11, 13] {
        assert!(f.jobs.admits(key(pid), 0.15), "task {pid}");
        assert!(!f.jobs.admits(key(pid), 0.05), "idle task {pid}");
    }
    assert!(!f.jobs.admits(key(12), 0.9), "opted out");
    assert!(!f.jobs.admits(key(99), 0.9), "never looked up");
}

#[test]
fn an_outsider_the_free_cpus_cannot_hold_is_left_to_the_kernel() {
    // 81 keeps 3 CPUs busy, 82 two.
    fn s2(f: &Fake) -> Snapshot {
        for p in [80, 81, 82] {
            f.jobs.mode(key(p), "t");
        }
        let mut s = snapshot(&[81, 82]);
        s.processes[0].cpu_demand = 3.0;
        s.processes[0].threads = 3;
        s.processes[1].cpu_demand = 2.0;
        s.processes[1].threads = 2;
        s
    }
    // Jobs hold 6 of 8 CPUs; a 3-CPU outsider would be throttled on the other 2.
    let f = fake_soft(
        &[
            (80, Some(&format!("{JOB1}/task_0")), ""),
            (81, None, ""),
            (82, None, ""),
        ],
        &[(JOB1, "0-5", "0-1")],
    );
    f.jobs.begin_pass();
    let mut s = s2(&f);
    let c = f.jobs.confine(&mut s);
    assert!(c.park.is_empty(), "one pass does not decide");
    assert_eq!(s.processes[0].allowed_cpus, None, "meanwhile it shares");
    f.jobs.begin_pass();
    let mut s = s2(&f);
    let c = f.jobs.confine(&mut s);
    assert_eq!(c.park, vec![key(81)], "left to the kernel, as unmanaged");
    assert_eq!(s.processes.len(), 1);
    assert_eq!(s.processes[0].pid, 82);
    assert_eq!(
        s.processes[0].allowed_cpus,
        Some(vec![6, 7].into()),
        "fits: kept off"
    );
    assert!(f.jobs.parked(key(81)) && !f.jobs.parked(key(82)));
    // Still parked while the jobs hold the same CPUs, for a while; looked at again
    // when the jobs change or the while is over.
    f.jobs.confine(&mut snapshot(&[82]));
    assert!(f.jobs.parked(key(81)));
    for _ in 0..PARKED_PASSES {
        f.jobs.begin_pass();
    }
    assert!(!f.jobs.parked(key(81)), "a while is over");
    let mut s = s2(&f);
    let c = f.jobs.confine(&mut s);
    assert!(c.park.is_empty(), "one pass does not decide");
    assert!(
        s.processes.iter().all(|p| p.pid != 81),
        "not planned over the jobs' CPUs meanwhile"
    );
    let mut s = s2(&f);
    let c = f.jobs.confine(&mut s);
    assert_eq!(c.park, vec![key(81)], "parked again: it still does not fit");
    assert!(f.jobs.parked(key(81)));
    std::fs::remove_dir_all(f._dir.path().join("cg/cpuset/slurm_n/uid_0/job_1")).expect("rm");
    std::fs::remove_dir_all(f._dir.path().join("proc/80")).expect("rm");
    f.jobs.begin_pass();
    f.jobs.confine(&mut snapshot(&[82]));
    assert!(!f.jobs.parked(key(81)), "the job ended");
}

/// Parked while it kept 3 CPUs busy, looked at again after it calmed down: its
/// pass out of the plan measures it, and then it is kept off the jobs' CPUs.
#[test]
fn a_parked_outsider_that_calmed_down_is_kept_off_the_jobs_cpus_after_one_pass() {
    let f = fake_soft(
        &[(80, Some(&format!("{JOB1}/task_0")), ""), (81, None, "")],
        &[(JOB1, "0-5", "0-1")],
    );
    let s = |f: &Fake, demand: f64| {
        for p in [80, 81] {
            f.jobs.mode(key(p), "t");
        }
        let mut s = snapshot(&[81]);
        s.processes[0].cpu_demand = demand;
        s.processes[0].threads = 3;
        s
    };
    for _ in 0..UNFIT_PASSES {
        f.jobs.begin_pass();
        f.jobs.confine(&mut s(&f, 3.0));
    }
    assert!(f.jobs.parked(key(81)));
    for _ in 0..PARKED_PASSES {
        f.jobs.begin_pass();
    }
    // Sized for its threads until measured again: out of the plan, not parked.
    let mut snap = s(&f, 3.0);
    assert!(f.jobs.confine(&mut snap).park.is_empty());
    assert!(snap.processes.is_empty());
    f.jobs.begin_pass();
    let mut snap = s(&f, 0.8);
    assert!(f.jobs.confine(&mut snap).park.is_empty());
    assert_eq!(snap.processes[0].allowed_cpus, Some(vec![6, 7].into()));
}

#[test]
fn a_job_holding_every_cpu_leaves_outsiders_to_the_kernel() {
    let f = fake(
        &[(30, Some(&format!("{JOB1}/task_0")), ""), (31, None, "")],
        &[(JOB1, "0-7", "0-1")],
    );
    f.jobs.begin_pass();
    f.jobs.mode(key(30), "t");
    f.jobs.mode(key(31), "t");
    f.jobs.confine(&mut snapshot(&[30, 31]));
    let mut s = snapshot(&[30, 31]);
    let c = f.jobs.confine(&mut s);
    assert_eq!(s.processes[0].allowed_cpus, None, "the whole machine");
    assert_eq!(s.processes[0].allowed_mems, None);
    assert_eq!(
        c.park,
        vec![key(31)],
        "nowhere to keep it off: left to the kernel"
    );
    assert_eq!(s.processes.len(), 1);
}

#[test]
fn exited_tasks_go_at_once_and_unseen_ones_after_a_while() {
    let f = fake(
        &[
            (40, Some(&format!("{JOB1}/task_0")), ""),
            (41, Some(&format!("{JOB2}/task_0")), ""),
        ],
        &[(JOB1, "0-1", "0"), (JOB2, "2-3", "0")],
    );
    f.jobs.begin_pass();
    f.jobs.mode(key(40), "t");
    f.jobs.mode(key(41), "t");
    std::fs::remove_dir_all(f._dir.path().join("proc/40")).expect("rm");
    f.jobs.begin_pass();
    let steps = |f: &Fake| {
        let mut s = snapshot(&[12]);
        let v: Vec<String> = f
            .jobs
            .confine(&mut s)
            .views
            .into_iter()
            .map(|v| v.step)
            .collect();
        v
    };
    assert_eq!(
        steps(&f),
        vec!["2.0"],
        "40 exited: its step is gone at once"
    );
    // 41 lives on but is not looked at (idle): kept a while, then read again.
    for _ in 0..FORGET_AFTER - 2 {
        f.jobs.begin_pass();
    }
    assert_eq!(steps(&f), vec!["2.0"], "idle, still known");
    f.jobs.begin_pass();
    assert!(steps(&f).is_empty(), "unseen for FORGET_AFTER passes");
    let mut s = snapshot(&[12]);
    f.jobs.confine(&mut s);
    assert_eq!(
        s.processes[0].allowed_cpus,
        Some(vec![4, 5, 6, 7].into()),
        "the jobs' cgroups are still there: their CPUs are still taken"
    );
    for job in ["job_1", "job_2"] {
        std::fs::remove_dir_all(f._dir.path().join("cg/cpuset/slurm_n/uid_0").join(job))
            .expect("rm");
    }
    let mut s = snapshot(&[12]);
    f.jobs.confine(&mut s);
    assert_eq!(
        s.processes[0].allowed_cpus, None,
        "the jobs ended: free again"
    );
}
