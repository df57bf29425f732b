//! Observe: the first stage of the live pipeline. It reads what the machine
//! says about its processes and turns it into the [`Snapshot`](numasched_model::Snapshot)
//! policies consume; it never changes anything.
//!
//! Small modules with one job each:
//!
//! - [`sensors`]: which sensors this machine has, detected once at start-up and
//!   reported in one line. Missing sensors are normal.
//! - [`proc`]: one process from procfs (stat, status, threads, numa_maps, sched),
//!   all read through one directory handle so pid reuse cannot mix two processes;
//!   "process gone" is an answer, not an error. [`numa_maps`], [`status`] and
//!   [`sched`] are the file parsers, [`error`] the path-carrying error type.
//! - [`scan`]: a pass over all processes into a snapshot, with the previous pass kept
//!   for CPU rates.
//! - [`cache`]: what the scanner remembers of each process between passes, and when
//!   a costly file must be read again; a steady-state pass reads little but stat,
//!   and an idle process's stat seldom.
//! - [`schedstat`]: run-queue delay per process, the sign of a CPU set that is too
//!   small.
//! - [`cpu_time`]: how busy each CPU was (`/proc/stat`), so the work of processes the
//!   scan does not select still counts against the CPUs it occupies.
//! - [`pids`]: the procfs root's pids, listed again only when the set can have changed.
//! - [`proc_events`]: the kernel's process events connector (fork, exec, exit as they
//!   happen), where the daemon may subscribe.
//! - [`counters`]: per-process hardware counter deltas behind a trait, for MPKI.
//! - `fakeproc`: a fake procfs tree for tests and benchmarks (the `testing` feature).
//! - [`resctrl`]: memory bandwidth per resctrl monitoring group (MBM), and per process.
//! - [`slurm`]: a process's Slurm job step (its cgroup), the step's allocation (its
//!   cpuset) and the job's wish (`NUMASCHED=` in its environment).
//!
//! Which sensor feeds which snapshot field:
//!
//! | snapshot field            | source                                                     |
//! |---------------------------|------------------------------------------------------------|
//! | `pid`, `start_time`, `program`, `parent` | `/proc/<pid>/stat`                          |
//! | `threads`                 | entries of `/proc/<pid>/task` (stat's count if unread)      |
//! | `cpu_demand`              | stat utime+stime, delta between passes over `/proc/uptime`  |
//! | `current_cpus`            | last CPU (`processor`) of each `task/<tid>/stat`            |
//! | `allowed_cpus`            | status `Cpus_allowed_list`, when narrower than the machine  |
//! | `memory_bytes`            | numa_maps `N<node>=` pages × `kernelpagesize_kB`            |
//! | `mpki`                    | hardware counters ([`counters`]), when the CPU exposes them |
//! | `numa_penalty`            | not observed: profile store, or regression on MPKI          |
//! | `bandwidth_gbps`          | resctrl MBM ([`resctrl`]), groups holding one process only  |
//! | `others_pinned` (snapshot)| `/proc/stat` irq and softirq per CPU between passes, and    |
//! |                           | unselected busy processes' demand and `Cpus_allowed_list`  |
//! | `others_demand` (snapshot)| unselected busy processes' run + wait, over their CPUs     |
//!
//! NUMA hinting faults (`/proc/<pid>/sched`) are read into
//! [`ProcInfo::numa_faults`](proc::ProcInfo::numa_faults): a sample of the nodes a
//! process touches, for the characterisation stage; the snapshot has no field for
//! them yet. The scanner leaves `mpki` empty: attaching counters is the daemon's
//! decision, made per managed process.

pub mod cache;
pub mod counters;
pub mod cpu_time;
pub mod error;
#[cfg(any(test, feature = "testing"))]
pub mod fakeproc;
pub mod gres;
pub mod numa_maps;
pub mod others;
pub mod pids;
pub mod printable;
pub mod proc;
pub mod proc_events;
pub mod resctrl;
pub mod scan;
pub mod scan_config;
pub mod sched;
pub mod schedstat;
pub mod sensors;
pub mod slurm;
pub mod status;

pub use cache::Changed;
pub use counters::{CounterError, CounterSample, CounterSource, PerfCounters};
pub use error::ObserveError;
pub use numa_maps::NumaMaps;
pub use proc::{read_process, Affinity, Memory, ProcDir, ProcInfo, ReadOptions, Stat};
pub use scan::{with_info_mut, Candidate, DemandBasis, Filter, Observation, Scanner};
pub use scan_config::ScanConfig;
pub use sensors::{Sensor, Sensors};
