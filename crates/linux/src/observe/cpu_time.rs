//! How busy each CPU was: the `cpuN` lines of `/proc/stat`, differenced between passes.
//!
//! The scan sees the processes it selects; this is how it sees the rest: how busy each
//! CPU was (the room `others` estimates per cache), and what of others' work cannot
//! leave a CPU (interrupts, and an unselected process whose affinity keeps it there).
//!
//! procfs's `KernelStats` numbers CPUs by their line's position, which is not the CPU
//! id once a CPU is offline (its line is left out), so the few fields needed are read
//! here with the id each line names.

use std::collections::BTreeMap;
use std::path::Path;

use numasched_model::topology::CpuId;
use numasched_model::CpuSet;

use super::error::ObserveError;

/// Clock ticks one CPU spent, from boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ticks {
    /// Running anything: user, nice, system, irq, softirq, steal excluded (another
    /// guest's time is not this CPU's work).
    pub busy: u64,
    /// Busy plus idle and iowait: the time the CPU was there.
    pub total: u64,
    /// Serving interrupts (irq and softirq): work bound to this CPU.
    pub irq: u64,
}

/// One reading of every online CPU.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuTimes(pub BTreeMap<CpuId, Ticks>);

impl CpuTimes {
    /// Reads `<proc_root>/stat`.
    pub fn read(proc_root: &Path) -> Result<CpuTimes, ObserveError> {
        let path = proc_root.join("stat");
        let text = std::fs::read_to_string(&path).map_err(|err| ObserveError::Io {
            path: path.clone(),
            err,
        })?;
        parse(&text, &path)
    }

    /// Clock ticks between `earlier` and this reading on the CPU that advanced least:
    /// below [`MIN_TICKS`] a share is too coarse to read.
    pub fn ticks_since(&self, earlier: &CpuTimes) -> u64 {
        self.0
            .iter()
            .filter_map(|(cpu, now)| Some(now.total.saturating_sub(earlier.0.get(cpu)?.total)))
            .min()
            .unwrap_or(0)
    }

    /// Each CPU's busy share between `earlier` and this reading (0 to 1: CPUs'
    /// worth). A CPU missing from either (it went offline or came online between), or
    /// whose counters did not advance, is left out.
    pub fn busy_since(&self, earlier: &CpuTimes) -> BTreeMap<CpuId, f64> {
        self.share_since(earlier, |t| t.busy)
    }

    /// Each CPU's share spent serving interrupts between `earlier` and this reading,
    /// as [`CpuTimes::busy_since`] reads the busy share.
    pub fn irq_since(&self, earlier: &CpuTimes) -> BTreeMap<CpuId, f64> {
        self.share_since(earlier, |t| t.irq)
    }

    /// Each CPU's ticks counted between `earlier` and this reading, as a share of the
    /// ticks `secs` of wall time hold at `tps` a second (0 to 1).
    ///
    /// Below 1 where a virtual CPU's host descheduled it while busy: those ticks are
    /// lost (no steal clock under QEMU's TCG; steal, left out of the total, under
    /// KVM), to the CPU's count and to the process it ran alike. A process's demand,
    /// per second of wall time, then reads low against its CPU's busy share: a CPU
    /// that ran one load all the time counted no idle tick and read wholly busy while
    /// the load read 0.6 of a CPU. Divided by this, they compare (see `scan::spans`).
    pub fn counted_since(&self, earlier: &CpuTimes, secs: f64, tps: f64) -> BTreeMap<CpuId, f64> {
        if !(secs > 0.0 && tps > 0.0) {
            return BTreeMap::new();
        }
        self.0
            .iter()
            .filter_map(|(cpu, now)| {
                let total = now.total.checked_sub(earlier.0.get(cpu)?.total)?;
                Some((*cpu, (total as f64 / tps / secs).min(1.0)))
            })
            .collect()
    }

    fn share_since(&self, earlier: &CpuTimes, of: impl Fn(&Ticks) -> u64) -> BTreeMap<CpuId, f64> {
        self.0
            .iter()
            .filter_map(|(cpu, now)| {
                let before = earlier.0.get(cpu)?;
                let total = now.total.checked_sub(before.total).filter(|t| *t > 0)?;
                let part = of(now).saturating_sub(of(before)).min(total);
                Some((*cpu, part as f64 / total as f64))
            })
            .collect()
    }
}

/// Ticks a reading must span to be differenced: at USER_HZ 100, a tenth of a second,
/// so one tick more or less moves a share by at most a tenth. (An epoch of 10 ms, the
/// shortest allowed, would read each CPU as all busy or all idle.)
pub const MIN_TICKS: u64 = 10;

/// Share of a CPU below which others' work there counts as nothing: left out of the map.
const NOTHING: f64 = 0.01;

/// Others' work on each CPU that the kernel cannot move off it: its interrupts
/// (`irq`, shares of a CPU), and of each unselected process (`others`: its CPUs' worth
/// over the epoch, the CPUs it may run on) what would not fit on the rest of its CPUs,
/// on every one of them. A `taskset -c 0` load counts whole on CPU 0; one thread free
/// to run on two CPUs counts nowhere, as the kernel moves it off a CPU a managed load
/// is pinned to; two busy threads confined to two CPUs fill both. Work free to move is
/// left out however busy it keeps a CPU: a hard pin beside it shares nothing it would
/// not share unmanaged, and counting it (busy time less the managed processes' demand)
/// read a free neighbour, which the pinned pair pushed to the other CPU, as pinned
/// there, and kept the managed load beside the pinned one at half a CPU (no_harm
/// bench). What this misses: a process whose threads pin themselves one by one while
/// its main thread stays free (only the main thread's affinity is read), and busy
/// kernel threads. CPUs left out have (almost) nothing that cannot move.
///
/// Not capped at one CPU: it is read against the other CPUs of the cache (see
/// `numasched_policy::crowded`), and on a loaded machine work confined to every CPU
/// fills each (two busy threads of a build on two CPUs count a whole CPU on both).
/// Capped, a `taskset -c 0` load beside them read the same as nothing, and a hard pin
/// went onto its CPU (the live test, at load 9).
pub fn others_pinned(
    irq: &BTreeMap<CpuId, f64>,
    others: impl IntoIterator<Item = (f64, CpuSet)>,
) -> BTreeMap<CpuId, f64> {
    let mut pinned = irq.clone();
    for (demand, cpus) in others {
        let stuck = (demand - (cpus.len() as f64 - 1.0)).clamp(0.0, 1.0);
        if stuck <= 0.0 {
            continue;
        }
        for &c in cpus.iter() {
            *pinned.entry(c).or_default() += stuck;
        }
    }
    pinned.retain(|_, b| *b >= NOTHING);
    pinned
}

/// Others' work on each CPU, free to move or not: each unselected process's CPUs'
/// worth (run or waited for) spread evenly over the CPUs it may run on. What the
/// kernel would balance, as a hard pin must count it (the snapshot's `others_demand`).
pub fn others_demand(others: impl IntoIterator<Item = (f64, CpuSet)>) -> BTreeMap<CpuId, f64> {
    let mut out: BTreeMap<CpuId, f64> = BTreeMap::new();
    for (demand, cpus) in others {
        if demand <= 0.0 || cpus.is_empty() {
            continue;
        }
        let each = demand / cpus.len() as f64;
        for &c in cpus.iter() {
            *out.entry(c).or_default() += each;
        }
    }
    out.retain(|_, d| *d >= NOTHING);
    out
}

/// The `cpuN user nice system idle iowait irq softirq [steal ...]` lines.
pub fn parse(text: &str, path: &Path) -> Result<CpuTimes, ObserveError> {
    let mut cpus = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let mut fields = line.split_whitespace();
        let Some(id) = fields
            .next()
            .and_then(|name| name.strip_prefix("cpu"))
            .filter(|id| !id.is_empty())
        else {
            continue;
        };
        let bad = |what: String| ObserveError::parse(path, Some(i + 1), what);
        let id: CpuId = id
            .parse()
            .map_err(|_| bad(format!("\"cpu{id}\" is not a CPU")))?;
        let ticks = fields
            .take(7)
            .map(|f| f.parse::<u64>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| bad(format!("cpu{id}'s times are not numbers")))?;
        let [user, nice, system, idle, iowait, irq, softirq] = ticks[..] else {
            return Err(bad(format!(
                "cpu{id} has {} times, 7 expected (user to softirq)",
                ticks.len()
            )));
        };
        let busy = user + nice + system + irq + softirq;
        cpus.insert(
            id,
            Ticks {
                busy,
                total: busy + idle + iowait,
                irq: irq + softirq,
            },
        );
    }
    if cpus.is_empty() {
        return Err(ObserveError::parse(path, None, "no cpuN line"));
    }
    Ok(CpuTimes(cpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  300 0 100 1600 0 0 0 0 0 0\n\
                        cpu0 200 0 50 750 0 0 0 0 0 0\n\
                        cpu2 100 0 50 850 0 0 0 0 0 0\n\
                        intr 12 0\nctxt 99\nbtime 1\n";

    #[test]
    fn cpus_are_named_by_their_line_not_its_position() {
        let t = parse(STAT, Path::new("stat")).expect("parse");
        assert_eq!(t.0.keys().copied().collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(
            t.0[&0],
            Ticks {
                busy: 250,
                total: 1000,
                irq: 0,
            }
        );
    }

    #[test]
    fn busy_share_is_the_difference_between_readings() {
        let before = parse(STAT, Path::new("stat")).expect("parse");
        let after = parse(
            "cpu0 290 0 60 750 0 0 0 0\ncpu2 100 0 50 950 0 0 0 0\ncpu3 1 0 0 1 0 0 0 0\n",
            Path::new("stat"),
        )
        .expect("parse");
        let busy = after.busy_since(&before);
        assert_eq!(busy.len(), 2, "cpu3 has no earlier reading: {busy:?}");
        assert!((busy[&0] - 1.0).abs() < 1e-9, "{busy:?}");
        assert!(busy[&2].abs() < 1e-9, "{busy:?}");
        assert!(before
            .busy_since(&after)
            .values()
            .all(|b| *b == 0.0 || b.is_finite()));
    }

    /// A virtual CPU descheduled by its host while busy counts 60 ticks in a second,
    /// all busy: wholly busy, and 0.6 of the ticks the second held.
    #[test]
    fn a_cpu_that_lost_ticks_reads_busy_and_counted_short() {
        let before = parse("cpu0 0 0 0 0 0 0 0 0\n", Path::new("stat")).expect("parse");
        let after = parse("cpu0 60 0 0 0 0 0 0 0\n", Path::new("stat")).expect("parse");
        assert!((after.busy_since(&before)[&0] - 1.0).abs() < 1e-9);
        let counted = after.counted_since(&before, 1.0, 100.0);
        assert!((counted[&0] - 0.6).abs() < 1e-9, "{counted:?}");
        // Never more than the span, whatever the clocks say.
        assert!((after.counted_since(&before, 0.5, 100.0)[&0] - 1.0).abs() < 1e-9);
        assert!(after.counted_since(&before, 0.0, 100.0).is_empty());
    }

    #[test]
    fn only_others_work_that_cannot_leave_its_cpu_counts() {
        let irq = BTreeMap::from([(3, 0.05), (2, 0.001)]);
        let pinned = (1.0, CpuSet::from(vec![0]));
        let free_to_move = (0.9, CpuSet::from(vec![0, 1]));
        let two_threads_on_two = (2.0, CpuSet::from(vec![1, 2]));
        let others = others_pinned(&irq, [pinned, free_to_move, two_threads_on_two]);
        assert_eq!(
            others.keys().copied().collect::<Vec<_>>(),
            vec![0, 1, 2, 3],
            "{others:?}"
        );
        assert!(
            (others[&0] - 1.0).abs() < 1e-9,
            "the free one is not counted"
        );
        assert!((others[&1] - 1.0).abs() < 1e-9 && (others[&2] - 1.001).abs() < 1e-9);
        assert!(
            (others[&3] - 0.05).abs() < 1e-9,
            "interrupts are bound to their CPU"
        );
        // A thread and a half on two CPUs: half of each cannot leave.
        let half = others_pinned(&BTreeMap::new(), [(1.5, CpuSet::from(vec![0, 1]))]);
        assert!((half[&0] - 0.5).abs() < 1e-9 && (half[&1] - 0.5).abs() < 1e-9);
        // Each process counts at most one CPU's worth on each CPU, and together they
        // count beyond it: a pinned load beside work confined to every CPU stands out.
        let full = others_pinned(&BTreeMap::from([(0, 0.5)]), [(1.5, CpuSet::from(vec![0]))]);
        assert_eq!(full[&0], 1.5);
        let loaded = others_pinned(
            &BTreeMap::new(),
            [
                (1.0, CpuSet::from(vec![0])),
                (2.0, CpuSet::from(vec![0, 1])),
            ],
        );
        assert_eq!((loaded[&0], loaded[&1]), (2.0, 1.0));
        assert!(others_pinned(&BTreeMap::new(), []).is_empty());
        assert!(others_pinned(&BTreeMap::new(), [(1.0, CpuSet::from(vec![0, 1]))]).is_empty());
    }

    #[test]
    fn a_malformed_line_is_an_error_naming_the_file_and_line() {
        for (text, what) in [
            (
                "cpu  1 2 3 4 5 6 7\ncpux 1 2 3 4 5 6 7\n",
                "\"cpux\" is not a CPU",
            ),
            ("cpu0 1 2 three 4 5 6 7\n", "not numbers"),
            ("cpu0 1 2 3 4\n", "4 times, 7 expected"),
            ("intr 1\n", "no cpuN line"),
        ] {
            let e = parse(text, Path::new("/proc/stat")).expect_err(text);
            let msg = e.to_string();
            assert!(msg.contains("/proc/stat") && msg.contains(what), "{msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
    }
}
