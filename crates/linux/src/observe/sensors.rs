//! Which sensors this machine offers, found once at start-up: the daemon
//! says which it uses and keeps working with any subset. A sensor that is missing is a
//! fact about the machine, not an error, so detection never fails.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::counters::{CounterError, PerfCounters};
use super::numa_maps;
use super::proc::ReadOptions;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sensor {
    pub available: bool,
    /// What was found, or why it is unusable and what would enable it.
    pub detail: String,
}

impl Sensor {
    pub fn yes(detail: impl Into<String>) -> Sensor {
        Sensor {
            available: true,
            detail: detail.into(),
        }
    }
    pub fn no(detail: impl Into<String>) -> Sensor {
        Sensor {
            available: false,
            detail: detail.into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sensors {
    /// Instructions, cycles, LLC misses per process → MPKI.
    pub hardware_counters: Sensor,
    /// Per-group memory bandwidth and LLC occupancy.
    pub resctrl: Sensor,
    /// Monitoring events resctrl offers (`mbm_total_bytes`, `mbm_local_bytes`,
    /// `llc_occupancy`); empty without resctrl monitoring.
    #[serde(default)]
    pub resctrl_events: Vec<String>,
    /// Which nodes a process touches, sampled by automatic NUMA balancing.
    pub numa_hinting_faults: Sensor,
    /// `kernel.numa_balancing` (0 off, 1 on, 2 tiering only, 3 both); `None` if the
    /// kernel has no NUMA balancing.
    pub numa_balancing: Option<u32>,
    /// Resident pages per node per process.
    pub numa_maps: Sensor,
    /// Forks and exits as they happen (see [`super::proc_events`]); `None` where no
    /// subscription was tried (`plan`), which polls anyway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proc_connector: Option<Sensor>,
}

/// Where detection looks; tests point these at fake trees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    pub proc: PathBuf,
    pub sys: PathBuf,
    /// A process whose numa_maps is tried (the daemon itself on a live system).
    pub probe_pid: u32,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            proc: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
            probe_pid: std::process::id(),
        }
    }
}

impl Sensors {
    /// Detects everything on the live system, trying `perf_event_open` on itself.
    pub fn detect() -> Sensors {
        let roots = Roots::default();
        let counters = PerfCounters::probe();
        Sensors::detect_with(&roots, counters)
    }

    /// Detects from the given trees; `counters` is the outcome of a counter probe.
    pub fn detect_with(roots: &Roots, counters: Result<(), CounterError>) -> Sensors {
        let hardware_counters = match counters {
            Ok(()) => Sensor::yes("perf_event_open: instructions, cycles, LLC misses"),
            Err(CounterError::Unsupported(_)) => {
                Sensor::no("not supported by this CPU or hypervisor (no PMU events)")
            }
            Err(e @ CounterError::PermissionDenied(_)) => {
                let paranoid = read_trimmed(&roots.proc.join("sys/kernel/perf_event_paranoid"));
                Sensor::no(format!(
                    "{e}; perf_event_paranoid={}",
                    paranoid.as_deref().unwrap_or("?")
                ))
            }
            Err(e) => Sensor::no(e.to_string()),
        };
        let (resctrl, resctrl_events) = resctrl(&roots.sys);
        let (numa_hinting_faults, numa_balancing) = numa_balancing(&roots.proc);
        Sensors {
            hardware_counters,
            resctrl,
            resctrl_events,
            numa_hinting_faults,
            numa_balancing,
            numa_maps: numa_maps_sensor(&roots.proc, roots.probe_pid),
            proc_connector: None,
        }
    }

    /// One line for the log: `sensors: hardware counters no (...), resctrl no (...), ...`.
    pub fn summary(&self) -> String {
        let one = |name: &str, s: &Sensor| {
            format!(
                "{name} {} ({})",
                if s.available { "yes" } else { "no" },
                s.detail
            )
        };
        let mut line = format!(
            "sensors: {}; {}; {}; {}",
            one("hardware counters", &self.hardware_counters),
            one("resctrl", &self.resctrl),
            one("NUMA hinting faults", &self.numa_hinting_faults),
            one("numa_maps", &self.numa_maps),
        );
        if let Some(c) = &self.proc_connector {
            line.push_str("; ");
            line.push_str(&one("proc connector", c));
        }
        line
    }

    /// What a scan should read: `sched` only when NUMA balancing makes its fault
    /// counts mean something (they are all zero otherwise), numa_maps only if readable.
    pub fn read_options(&self) -> ReadOptions {
        ReadOptions {
            numa_maps: self.numa_maps.available,
            sched: self.numa_hinting_faults.available,
            ..ReadOptions::default()
        }
    }

    fn named(&self) -> [(&'static str, &Sensor); 4] {
        [
            ("hardware_counters", &self.hardware_counters),
            ("resctrl", &self.resctrl),
            ("numa_hinting_faults", &self.numa_hinting_faults),
            ("numa_maps", &self.numa_maps),
        ]
    }

    /// Names of the sensors in use, for status output.
    pub fn in_use(&self) -> Vec<&'static str> {
        self.named()
            .into_iter()
            .filter(|(_, s)| s.available)
            .map(|(n, _)| n)
            .collect()
    }

    /// The sensors this machine lacks, each with why, for `plan` and the daemon's
    /// start-up message.
    pub fn missing(&self) -> Vec<(&'static str, String)> {
        self.named()
            .into_iter()
            .filter(|(_, s)| !s.available)
            .map(|(n, s)| (n, s.detail.clone()))
            .collect()
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn resctrl(sys: &Path) -> (Sensor, Vec<String>) {
    let root = sys.join("fs/resctrl");
    if !root.is_dir() {
        return (
            Sensor::no("kernel without resctrl (no /sys/fs/resctrl)"),
            Vec::new(),
        );
    }
    // The mount point exists whenever the kernel supports resctrl; `info` appears only
    // once it is mounted.
    if !root.join("info").is_dir() {
        return (
            Sensor::no("not mounted (mount -t resctrl resctrl /sys/fs/resctrl)"),
            Vec::new(),
        );
    }
    let domains = std::fs::read_dir(root.join("mon_data"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("mon_L3_"))
                .count()
        })
        .unwrap_or(0);
    if domains == 0 {
        return (
            Sensor::no("mounted, but the CPU offers no L3 monitoring (no mon_data/mon_L3_*)"),
            Vec::new(),
        );
    }
    let events: Vec<String> = read_trimmed(&root.join("info/L3_MON/mon_features"))
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let shown = if events.is_empty() {
        "events unknown".to_string()
    } else {
        events.join(", ")
    };
    (
        Sensor::yes(format!("{domains} L3 monitoring domain(s): {shown}")),
        events,
    )
}

fn numa_balancing(proc: &Path) -> (Sensor, Option<u32>) {
    let path = proc.join("sys/kernel/numa_balancing");
    let Some(text) = read_trimmed(&path) else {
        return (
            Sensor::no("kernel without NUMA balancing (no kernel.numa_balancing)"),
            None,
        );
    };
    let Ok(v) = text.parse::<u32>() else {
        return (
            Sensor::no(format!("kernel.numa_balancing={text:?} is not understood")),
            None,
        );
    };
    let s = match v {
        0 => Sensor::no(
            "numa_balancing=0: hinting faults stay at zero (sysctl kernel.numa_balancing=1)",
        ),
        // Bit 0 is "normal" balancing, which samples every node; bit 1 (tiering) alone
        // only samples slow-tier memory.
        v if v & 1 == 1 => Sensor::yes(format!("numa_balancing={v}")),
        v => Sensor::no(format!(
            "numa_balancing={v}: memory tiering only, faults on DRAM nodes are not sampled"
        )),
    };
    (s, Some(v))
}

fn numa_maps_sensor(proc: &Path, pid: u32) -> Sensor {
    let path = proc.join(pid.to_string()).join("numa_maps");
    match std::fs::read_to_string(&path) {
        Ok(text) => match numa_maps::parse(&text, &path) {
            Ok(m) => {
                let root = nix::unistd::geteuid().is_root();
                let scope = if root {
                    "all processes"
                } else {
                    "own processes only (others need root or CAP_SYS_PTRACE)"
                };
                Sensor::yes(format!("readable, {} mappings here; {scope}", m.mappings))
            }
            Err(e) => Sensor::no(format!("unreadable format: {e}")),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Sensor::no(format!(
            "{}: absent (kernel without CONFIG_NUMA?)",
            path.display()
        )),
        Err(e) => Sensor::no(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn roots(dir: &Path) -> Roots {
        Roots {
            proc: dir.join("proc"),
            sys: dir.join("sys"),
            probe_pid: 42,
        }
    }

    fn unsupported() -> Result<(), CounterError> {
        Err(CounterError::Unsupported(
            std::io::Error::from_raw_os_error(libc::ENOENT),
        ))
    }

    #[test]
    fn nothing_there_means_nothing_available_and_no_error() {
        let d = tempfile::tempdir().unwrap();
        let s = Sensors::detect_with(&roots(d.path()), unsupported());
        assert!(s.in_use().is_empty(), "{s:?}");
        assert_eq!(s.numa_balancing, None);
        let line = s.summary();
        assert!(
            line.starts_with("sensors: hardware counters no (not supported"),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }

    #[test]
    fn everything_there_is_found() {
        let d = tempfile::tempdir().unwrap();
        let r = roots(d.path());
        fs::create_dir_all(r.proc.join("sys/kernel")).unwrap();
        fs::write(r.proc.join("sys/kernel/numa_balancing"), "1\n").unwrap();
        fs::create_dir_all(r.proc.join("42")).unwrap();
        fs::write(
            r.proc.join("42/numa_maps"),
            "1000 default anon=1 N0=1 kernelpagesize_kB=4\n",
        )
        .unwrap();
        let rc = r.sys.join("fs/resctrl");
        fs::create_dir_all(rc.join("info/L3_MON")).unwrap();
        fs::create_dir_all(rc.join("mon_data/mon_L3_00")).unwrap();
        fs::create_dir_all(rc.join("mon_data/mon_L3_01")).unwrap();
        fs::write(
            rc.join("info/L3_MON/mon_features"),
            "llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n",
        )
        .unwrap();
        let s = Sensors::detect_with(&r, Ok(()));
        assert_eq!(
            s.in_use(),
            vec![
                "hardware_counters",
                "resctrl",
                "numa_hinting_faults",
                "numa_maps"
            ]
        );
        assert_eq!(s.resctrl_events.len(), 3);
        assert!(s.resctrl.detail.starts_with("2 L3"), "{}", s.resctrl.detail);
        assert_eq!(s.numa_balancing, Some(1));
        let json = serde_json::to_string(&s).unwrap();
        let back: Sensors = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn half_there_says_what_is_missing() {
        let d = tempfile::tempdir().unwrap();
        let r = roots(d.path());
        fs::create_dir_all(r.sys.join("fs/resctrl")).unwrap();
        fs::create_dir_all(r.proc.join("sys/kernel")).unwrap();
        fs::write(r.proc.join("sys/kernel/numa_balancing"), "0\n").unwrap();
        let s = Sensors::detect_with(&r, unsupported());
        assert!(
            s.resctrl.detail.contains("not mounted"),
            "{}",
            s.resctrl.detail
        );
        assert!(!s.numa_hinting_faults.available);
        assert_eq!(s.numa_balancing, Some(0));
        let read = s.read_options();
        assert!(!read.sched && !read.numa_maps && read.status && read.threads);
        fs::write(r.proc.join("sys/kernel/numa_balancing"), "2\n").unwrap();
        let s = Sensors::detect_with(&r, unsupported());
        assert!(s.numa_hinting_faults.detail.contains("tiering"));
    }

    #[test]
    fn live_detection_does_not_fail() {
        // What is available depends on the machine; only the shape is asserted.
        let s = Sensors::detect();
        let line = s.summary();
        assert!(
            line.starts_with("sensors: ") && !line.contains('\n'),
            "{line}"
        );
        println!("{line}");
    }
}
