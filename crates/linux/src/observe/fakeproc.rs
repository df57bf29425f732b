//! A fake procfs tree for tests and benchmarks, in the spirit of `below`'s: the
//! scanner is pointed at a directory that holds `uptime`, `stat` (per-CPU times) and
//! `<pid>/{stat,status,numa_maps,sched,task/<tid>/stat}` written from a
//! [`FakeProcess`], so scans of vanishing, pinned or malformed processes can be staged
//! exactly.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use numasched_model::topology::{CpuId, NodeId};

/// Clock ticks per second the fake files are written in (the kernel's USER_HZ).
pub const TICKS: u64 = 100;

#[derive(Debug, Clone, PartialEq)]
pub struct FakeThread {
    pub tid: u32,
    pub cpu: CpuId,
    pub cpu_ticks: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FakeProcess {
    pub pid: u32,
    pub comm: String,
    pub state: char,
    pub ppid: u32,
    pub flags: u32,
    /// utime; stime is written as 0.
    pub cpu_ticks: u64,
    /// cutime (its waited-for children's); cstime is written as 0.
    pub child_ticks: u64,
    pub start_time: u64,
    pub rss_pages: u64,
    pub threads: Vec<FakeThread>,
    pub cpus_allowed: String,
    pub mems_allowed: String,
    /// Written verbatim; see [`FakeProcess::pages`] for the common case.
    pub numa_maps: String,
    /// `None`: no sched file (a kernel without it).
    pub sched: Option<String>,
}

impl FakeProcess {
    /// A sleeping single-threaded process on CPU 0, no memory, allowed on CPUs 0-7
    /// and nodes 0-1 (as the kernel's default affinity lists possible CPUs, which on
    /// a test machine of four can be more than are online).
    pub fn new(pid: u32, comm: &str) -> FakeProcess {
        FakeProcess {
            pid,
            comm: comm.to_string(),
            state: 'S',
            ppid: 1,
            flags: 0x0040_0100,
            cpu_ticks: 0,
            child_ticks: 0,
            start_time: 1000,
            rss_pages: 0,
            threads: vec![FakeThread {
                tid: pid,
                cpu: 0,
                cpu_ticks: 0,
            }],
            cpus_allowed: "0-7".to_string(),
            mems_allowed: "0-1".to_string(),
            numa_maps: String::new(),
            sched: Some(String::new()),
        }
    }

    /// A kernel thread as kthreadd's children look (PF_KTHREAD set, parent 2).
    pub fn kernel_thread(pid: u32, comm: &str) -> FakeProcess {
        let mut p = FakeProcess::new(pid, comm);
        p.ppid = 2;
        p.flags = 0x0020_8040;
        p
    }

    /// Threads `pid, pid+1, ...` last seen on the given CPUs, CPU time split evenly.
    pub fn threads_on(mut self, cpus: &[CpuId]) -> FakeProcess {
        let n = cpus.len().max(1) as u64;
        self.threads = cpus
            .iter()
            .enumerate()
            .map(|(i, &cpu)| FakeThread {
                tid: self.pid + i as u32,
                cpu,
                cpu_ticks: self.cpu_ticks / n,
            })
            .collect();
        self
    }

    /// Anonymous heap pages (4 KiB) per node, one numa_maps line per node, plus a
    /// file mapping without resident pages; sets RSS to match.
    pub fn pages(mut self, per_node: &[(NodeId, u64)]) -> FakeProcess {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "55d0c0a00000 default file=/usr/bin/{} mapped=0 kernelpagesize_kB=4",
            self.comm
        );
        for (i, &(node, pages)) in per_node.iter().enumerate() {
            let _ = writeln!(
                s,
                "{:x} default heap anon={pages} dirty={pages} active=0 N{node}={pages} kernelpagesize_kB=4",
                0x7f00_0000_0000u64 + (i as u64) * 0x1000_0000
            );
        }
        self.rss_pages = per_node.iter().map(|(_, p)| p).sum();
        self.numa_maps = s;
        self
    }

    pub fn stat_line(&self) -> String {
        let processor = self.threads.first().map_or(0, |t| t.cpu);
        self.stat_for(
            self.pid,
            self.cpu_ticks,
            processor,
            self.threads.len().max(1),
        )
    }

    fn stat_for(&self, id: u32, ticks: u64, cpu: CpuId, threads: usize) -> String {
        // Children are the process's, not a thread's.
        let children = if id == self.pid { self.child_ticks } else { 0 };
        format!(
            "{id} ({}) {} {} {id} {id} 0 -1 {} 100 0 0 0 {ticks} 0 {children} 0 20 0 {threads} 0 {} \
             10485760 {} 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 {cpu} 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
            self.comm, self.state, self.ppid, self.flags, self.start_time, self.rss_pages
        )
    }

    pub fn status_text(&self) -> String {
        format!(
            "Name:\t{}\nUmask:\t0022\nState:\t{} (sleeping)\nTgid:\t{pid}\nNgid:\t0\nPid:\t{pid}\n\
             PPid:\t{}\nTracerPid:\t0\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nFDSize:\t64\nGroups:\t\n\
             VmRSS:\t{} kB\nThreads:\t{}\nCpus_allowed_list:\t{}\nMems_allowed_list:\t{}\n\
             voluntary_ctxt_switches:\t1\nnonvoluntary_ctxt_switches:\t0\n",
            self.comm,
            self.state,
            self.ppid,
            self.rss_pages * 4,
            self.threads.len().max(1),
            self.cpus_allowed,
            self.mems_allowed,
            pid = self.pid,
        )
    }
}

/// The directory standing in for `/proc`.
pub struct FakeProcfs {
    root: PathBuf,
}

impl FakeProcfs {
    /// Creates `root` (if needed) with an `uptime` of 100 s and two idle CPUs.
    pub fn new(root: &Path) -> io::Result<FakeProcfs> {
        fs::create_dir_all(root)?;
        let f = FakeProcfs {
            root: root.to_path_buf(),
        };
        f.set_uptime(100.0)?;
        f.set_cpu_times(&[(0, 0, 10_000), (1, 0, 10_000)])?;
        Ok(f)
    }

    /// Writes `stat`'s per-CPU lines: (CPU, busy ticks, idle ticks) since boot.
    pub fn set_cpu_times(&self, cpus: &[(CpuId, u64, u64)]) -> io::Result<()> {
        let with: Vec<_> = cpus.iter().map(|&(c, b, i)| (c, b, i, 0)).collect();
        self.set_cpu_times_with_irq(&with)
    }

    /// Writes `stat`'s per-CPU lines: (CPU, busy ticks, idle ticks, of the busy ticks
    /// those serving interrupts) since boot.
    pub fn set_cpu_times_with_irq(&self, cpus: &[(CpuId, u64, u64, u64)]) -> io::Result<()> {
        let (busy, idle) = cpus.iter().fold((0, 0), |(b, i), c| (b + c.1, i + c.2));
        let mut text = format!("cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\n");
        for (cpu, busy, idle, irq) in cpus {
            let user = busy.saturating_sub(*irq);
            let _ = writeln!(text, "cpu{cpu} {user} 0 0 {idle} 0 {irq} 0 0 0 0");
        }
        text.push_str("intr 0\nctxt 0\nbtime 0\nprocesses 1\n");
        fs::write(self.root.join("stat"), text)
    }

    /// A fake procfs already made (by [`FakeProcfs::new`]) at `root`.
    pub fn at(root: &Path) -> FakeProcfs {
        FakeProcfs {
            root: root.to_path_buf(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn set_uptime(&self, secs: f64) -> io::Result<()> {
        fs::write(self.root.join("uptime"), format!("{secs:.2} 0.00\n"))
    }

    /// Writes (or rewrites) a process and its threads.
    pub fn add(&self, p: &FakeProcess) -> io::Result<()> {
        self.update(p)?;
        fs::write(
            self.root.join(p.pid.to_string()).join("status"),
            p.status_text(),
        )
    }

    /// Rewrites what a process does (its stat, threads, memory, sched) but not its
    /// status, which holds what it may use: that is the fake kernel's to show once
    /// it is shown here (`FakeKernel::shown_in`).
    pub fn update(&self, p: &FakeProcess) -> io::Result<()> {
        let dir = self.root.join(p.pid.to_string());
        let _ = fs::remove_dir_all(dir.join("task"));
        fs::create_dir_all(&dir)?;
        fs::write(dir.join("stat"), p.stat_line())?;
        fs::write(dir.join("numa_maps"), &p.numa_maps)?;
        match &p.sched {
            Some(s) => fs::write(dir.join("sched"), s)?,
            None => {
                let _ = fs::remove_file(dir.join("sched"));
            }
        }
        for t in &p.threads {
            let tdir = dir.join("task").join(t.tid.to_string());
            fs::create_dir_all(&tdir)?;
            fs::write(tdir.join("stat"), p.stat_for(t.tid, t.cpu_ticks, t.cpu, 1))?;
        }
        Ok(())
    }

    /// The process exits: its directory disappears.
    pub fn remove(&self, pid: u32) -> io::Result<()> {
        fs::remove_dir_all(self.root.join(pid.to_string()))
    }

    /// Overwrites one file of a process (`"stat"`, `"task/7/stat"`, ...).
    pub fn write(&self, pid: u32, name: &str, content: &str) -> io::Result<()> {
        fs::write(self.root.join(pid.to_string()).join(name), content)
    }

    /// Deletes one file of a process, as if it exited between two reads.
    pub fn delete(&self, pid: u32, name: &str) -> io::Result<()> {
        fs::remove_file(self.root.join(pid.to_string()).join(name))
    }
}
