//! Memory bandwidth from resctrl monitoring (MBM), per monitoring group.
//!
//! Intel RDT / AMD PQoS give each group of tasks a hardware monitoring id (RMID); the
//! CPU counts the bytes that group moves between L3 and memory (`mbm_total_bytes`,
//! `mbm_local_bytes`: cumulative counters) and the L3 it occupies (`llc_occupancy`: a
//! current value), per L3 domain. Linux shows them under
//! `/sys/fs/resctrl/<group>/mon_data/mon_L3_XX/`; remote bandwidth is total − local.
//! Source: Linux `Documentation/arch/x86/resctrl.rst`.
//!
//! The hardware counts per group, not per process: a group is whatever set of tasks
//! someone wrote into its `tasks` file. So the readings here are per group
//! ([`Resctrl::sample`]), and [`bandwidth_by_process`] turns a group's bandwidth into
//! a process's only when every task in the group belongs to that one process; a group
//! mixing processes gives no fair split without per-task counters, so it is left out.
//! The root (default) group holds every task not placed elsewhere and is never
//! reported.
//!
//! Group layout (resctrl.rst, "Resource alloc and monitor groups"): control groups are
//! top-level directories with a `tasks` file (not `info`, `mon_data`, `mon_groups`);
//! monitoring groups are `<root or control group>/mon_groups/<name>/`. A control
//! group's counters and `tasks` include its monitoring groups' tasks.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::error::{classify, IoOutcome, ObserveError};

/// Top-level entries of the mount that are never control groups.
const NOT_GROUPS: [&str; 3] = ["info", "mon_data", "mon_groups"];

/// The cumulative counters (and occupancy) of one group, summed over its L3 domains.
/// `None` when any domain could not give the value: a partial sum would look like a
/// counter going backwards, or jumping, the next time that domain answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Totals {
    total: Option<u64>,
    local: Option<u64>,
    llc: Option<u64>,
}

/// One group's reading from one [`Resctrl::sample`].
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSample {
    /// The group's directory (a control group, or `.../mon_groups/<name>`).
    pub path: PathBuf,
    /// Thread ids listed in the group's `tasks` file, in the kernel's order.
    pub tids: Vec<u32>,
    /// Bytes per second between L3 and all memory since the previous sample.
    pub total_bytes_per_s: Option<f64>,
    /// Bytes per second between L3 and the local node's memory.
    pub local_bytes_per_s: Option<f64>,
    /// L3 occupied by the group now, summed over domains.
    pub llc_occupancy_bytes: Option<u64>,
}

/// A process's memory bandwidth, from the resctrl groups that hold only its threads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessBandwidth {
    /// Total bandwidth in GB/s (10^9 bytes per second).
    pub gbps: f64,
    /// (total − local) / total; `None` without a local reading or with no traffic.
    pub remote_fraction: Option<f64>,
}

/// Reader of a resctrl mount. It keeps each group's previous counters, because the
/// counters are cumulative and only their difference over time is a bandwidth.
#[derive(Debug)]
pub struct Resctrl {
    root: PathBuf,
    prev: HashMap<PathBuf, (Totals, f64)>,
}

impl Resctrl {
    /// `root` is the mount point (normally `/sys/fs/resctrl`). Construct it only when
    /// the resctrl sensor was detected: a missing root is then an error, not "no data".
    pub fn new(root: &Path) -> Resctrl {
        Resctrl {
            root: root.to_path_buf(),
            prev: HashMap::new(),
        }
    }

    /// Reads every control and monitoring group except the root group, sorted by path.
    ///
    /// `now_s` is a monotonic time in seconds supplied by the caller, so that this
    /// reads no clock and tests are deterministic. A rate is the change of a counter
    /// (summed over all `mon_L3_*` domains) since this group's previous sample divided
    /// by the time between them. It is `None` on a group's first sample, when either
    /// sample lacked the counter (`Unavailable`, `Error`, unreadable or non-numeric
    /// text), when time did not advance, and when the counter went backwards: a reset
    /// (the group was removed and recreated under the same name, or its RMID was
    /// reassigned) or an overflow, after which the difference means nothing.
    ///
    /// The root group is skipped: it holds every task that is not in another group, so
    /// its bandwidth belongs to no one process. A group removed mid-scan (its `tasks`
    /// or `mon_data` gone, ENOENT) is skipped silently; any other failure to list the
    /// mount or a `mon_groups` directory, or to read a group's `tasks`, is an error
    /// naming the path.
    pub fn sample(&mut self, now_s: f64) -> Result<Vec<GroupSample>, ObserveError> {
        let mut dirs = Vec::new();
        let top = list_dirs(&self.root)?
            .ok_or_else(|| io_error(&self.root, io::ErrorKind::NotFound.into()))?;
        // Monitoring groups of the root group are attributable even though the root is not.
        dirs.extend(mon_groups(&self.root)?);
        for dir in top {
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
            if name.is_some_and(|n| NOT_GROUPS.contains(&n.as_str())) {
                continue;
            }
            dirs.extend(mon_groups(&dir)?);
            dirs.push(dir);
        }
        dirs.sort();

        let mut out = Vec::with_capacity(dirs.len());
        let mut seen = HashMap::with_capacity(dirs.len());
        for dir in dirs {
            // A directory without `tasks` (a non-group, or a group being removed) is skipped.
            let Some(tids) = read_tasks(&dir.join("tasks"))? else {
                continue;
            };
            let Some(now) = read_totals(&dir.join("mon_data"))? else {
                continue;
            };
            let before = self.prev.get(&dir);
            let rate_of = |pick: fn(&Totals) -> Option<u64>| {
                let (then, then_s) = before?;
                rate(pick(then)?, pick(&now)?, now_s - then_s)
            };
            out.push(GroupSample {
                tids,
                total_bytes_per_s: rate_of(|t| t.total),
                local_bytes_per_s: rate_of(|t| t.local),
                llc_occupancy_bytes: now.llc,
                path: dir.clone(),
            });
            seen.insert(dir, (now, now_s));
        }
        // Forget groups that are gone, so a recreated group starts afresh.
        self.prev = seen;
        Ok(out)
    }
}

/// Bytes per second from two readings of a cumulative counter; `None` if it went
/// backwards (reset or overflow) or time did not advance.
fn rate(then: u64, now: u64, dt_s: f64) -> Option<f64> {
    if now < then || dt_s.is_nan() || dt_s <= 0.0 {
        return None;
    }
    Some((now - then) as f64 / dt_s)
}

/// Bandwidth per process (tgid), from the groups whose threads all belong to it.
///
/// `tgid_of` maps a thread id to its process; a thread it cannot place (it exited
/// since the `tasks` file was read) makes its group unattributable, as does a group
/// with threads of two processes, or an empty one: the counters are per group, and
/// without per-task counters there is no fair way to split them. A process's threads
/// in several disjoint groups are summed; a monitoring group inside a control group
/// that is itself attributed is not added again, since the control group's counters
/// already include it. Groups without a total rate are left out. The result covers
/// only the threads placed in such groups, not those left in the root group.
pub fn bandwidth_by_process(
    samples: &[GroupSample],
    tgid_of: impl Fn(u32) -> Option<u32>,
) -> HashMap<u32, ProcessBandwidth> {
    let owner: HashMap<&Path, u32> = samples
        .iter()
        .filter_map(|s| Some((s.path.as_path(), sole_process(&s.tids, &tgid_of)?)))
        .collect();
    // (total bytes/s, local bytes/s if every contributing group had it)
    let mut sums: HashMap<u32, (f64, Option<f64>)> = HashMap::new();
    for s in samples {
        let (Some(&tgid), Some(total)) = (owner.get(s.path.as_path()), s.total_bytes_per_s) else {
            continue;
        };
        if parent_group(&s.path).is_some_and(|p| owner.get(p) == Some(&tgid)) {
            continue;
        }
        let e = sums.entry(tgid).or_insert((0.0, Some(0.0)));
        e.0 += total;
        e.1 = e.1.zip(s.local_bytes_per_s).map(|(a, b)| a + b);
    }
    sums.into_iter()
        .map(|(tgid, (total, local))| {
            let remote_fraction = local
                .filter(|_| total > 0.0)
                // Local can exceed total by a hair: the two counters are not read at
                // the same instant.
                .map(|local| ((total - local) / total).clamp(0.0, 1.0));
            (
                tgid,
                ProcessBandwidth {
                    gbps: total / 1e9,
                    remote_fraction,
                },
            )
        })
        .collect()
}

/// The one process all `tids` belong to; `None` for none, several, or an unknown tid.
fn sole_process(tids: &[u32], tgid_of: &impl Fn(u32) -> Option<u32>) -> Option<u32> {
    let (first, rest) = tids.split_first()?;
    let tgid = tgid_of(*first)?;
    rest.iter()
        .all(|&t| tgid_of(t) == Some(tgid))
        .then_some(tgid)
}

/// The control group (or root) containing a monitoring group `<parent>/mon_groups/<name>`.
fn parent_group(path: &Path) -> Option<&Path> {
    let mon_groups = path.parent()?;
    (mon_groups.file_name()? == "mon_groups")
        .then(|| mon_groups.parent())
        .flatten()
}

/// The monitoring groups under `group`; none if it has no `mon_groups` (or vanished).
fn mon_groups(group: &Path) -> Result<Vec<PathBuf>, ObserveError> {
    Ok(list_dirs(&group.join("mon_groups"))?.unwrap_or_default())
}

/// Subdirectories of `dir`; `Ok(None)` if `dir` does not exist.
fn list_dirs(dir: &Path) -> Result<Option<Vec<PathBuf>>, ObserveError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => return gone_or(dir, e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, e))?;
        // A type we cannot learn is an entry vanishing under us: not a group to read.
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.push(entry.path());
        }
    }
    Ok(Some(out))
}

/// The thread ids of a `tasks` file; `Ok(None)` if the file (its group) is gone.
fn read_tasks(path: &Path) -> Result<Option<Vec<u32>>, ObserveError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return gone_or(path, e),
    };
    let mut tids = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        // A tid we cannot read would make "all threads in one process" unprovable.
        let tid = line
            .parse()
            .map_err(|_| ObserveError::parse(path, Some(i + 1), format!("not a tid: {line:?}")))?;
        tids.push(tid);
    }
    Ok(Some(tids))
}

/// A group's counters summed over its `mon_L3_*` domains; `Ok(None)` if `mon_data`
/// is gone (the group was removed). No domains at all gives all-`None` totals.
fn read_totals(mon_data: &Path) -> Result<Option<Totals>, ObserveError> {
    let Some(mut domains) = list_dirs(mon_data)? else {
        return Ok(None);
    };
    domains.retain(|d| {
        d.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("mon_L3_"))
    });
    if domains.is_empty() {
        return Ok(Some(Totals::default()));
    }
    let sum = |event: &str| {
        domains.iter().try_fold(0u64, |acc, d| {
            acc.checked_add(read_counter(&d.join(event))?)
        })
    };
    Ok(Some(Totals {
        total: sum("mbm_total_bytes"),
        local: sum("mbm_local_bytes"),
        llc: sum("llc_occupancy"),
    }))
}

/// One counter file; `None` for `Unavailable`, `Error`, any non-numeric text, or a
/// file that cannot be read (an event this CPU does not count has no file at all).
fn read_counter(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `Ok(None)` for ENOENT (the thing vanished mid-scan), the path-carrying error otherwise.
fn gone_or<T>(path: &Path, err: io::Error) -> Result<Option<T>, ObserveError> {
    match classify(path, err) {
        IoOutcome::Gone => Ok(None),
        IoOutcome::Failed(e) => Err(e),
    }
}

fn io_error(path: &Path, err: io::Error) -> ObserveError {
    match classify(path, err) {
        IoOutcome::Failed(e) => e,
        IoOutcome::Gone => ObserveError::Io {
            path: path.to_path_buf(),
            err: io::ErrorKind::NotFound.into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a group at `root/rel` with `tids` and one `mon_L3_NN` per domain; each
    /// domain is (mbm_total_bytes, mbm_local_bytes, llc_occupancy) as file text.
    fn group(root: &Path, rel: &str, tids: &[u32], domains: &[(&str, &str, &str)]) -> PathBuf {
        let dir = root.join(rel);
        fs::create_dir_all(&dir).unwrap();
        let tasks: String = tids.iter().map(|t| format!("{t}\n")).collect();
        fs::write(dir.join("tasks"), tasks).unwrap();
        counters(&dir, domains);
        dir
    }

    fn counters(dir: &Path, domains: &[(&str, &str, &str)]) {
        for (i, (total, local, llc)) in domains.iter().enumerate() {
            let d = dir.join(format!("mon_data/mon_L3_{i:02}"));
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("mbm_total_bytes"), format!("{total}\n")).unwrap();
            fs::write(d.join("mbm_local_bytes"), format!("{local}\n")).unwrap();
            fs::write(d.join("llc_occupancy"), format!("{llc}\n")).unwrap();
        }
    }

    /// A mounted-looking tree: `info`, and a root group with tasks and counters.
    fn mount() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("info/L3_MON")).unwrap();
        group(d.path(), "", &[1, 2, 3], &[("999", "999", "4096")]);
        d
    }

    fn find<'a>(samples: &'a [GroupSample], path: &Path) -> &'a GroupSample {
        samples
            .iter()
            .find(|s| s.path == path)
            .unwrap_or_else(|| panic!("no sample for {}: {samples:?}", path.display()))
    }

    #[test]
    fn rate_is_summed_over_two_l3_domains() {
        let m = mount();
        let g = group(
            m.path(),
            "g1",
            &[100, 101],
            &[("1000", "500", "10"), ("2000", "500", "20")],
        );
        let mut r = Resctrl::new(m.path());
        r.sample(10.0).unwrap();
        counters(&g, &[("3000", "1500", "30"), ("6000", "1500", "40")]);
        let s = r.sample(12.0).unwrap();
        let g1 = find(&s, &g);
        // total: (3000+6000) - (1000+2000) = 6000 over 2 s; local: 3000-1000 = 2000.
        assert_eq!(g1.total_bytes_per_s, Some(3000.0));
        assert_eq!(g1.local_bytes_per_s, Some(1000.0));
        assert_eq!(g1.llc_occupancy_bytes, Some(70));
        assert_eq!(g1.tids, vec![100, 101]);
    }

    #[test]
    fn first_sample_has_no_rate() {
        let m = mount();
        let g = group(m.path(), "g1", &[100], &[("1000", "500", "10")]);
        let s = Resctrl::new(m.path()).sample(1.0).unwrap();
        let g1 = find(&s, &g);
        assert_eq!(g1.total_bytes_per_s, None);
        assert_eq!(g1.local_bytes_per_s, None);
        assert_eq!(g1.llc_occupancy_bytes, Some(10));
    }

    #[test]
    fn unavailable_error_or_garbage_counter_is_none() {
        let m = mount();
        let g = group(
            m.path(),
            "g1",
            &[100],
            &[("1000", "500", "10"), ("1000", "500", "10")],
        );
        let mut r = Resctrl::new(m.path());
        r.sample(0.0).unwrap();
        counters(
            &g,
            &[("2000", "900", "Error"), ("2000", "Unavailable", "x1")],
        );
        let s = r.sample(1.0).unwrap();
        let g1 = find(&s, &g);
        assert_eq!(g1.total_bytes_per_s, Some(2000.0));
        assert_eq!(g1.local_bytes_per_s, None, "one domain Unavailable");
        assert_eq!(g1.llc_occupancy_bytes, None, "Error and non-numeric text");
        // Back to numbers: no rate yet, the previous local sum was unknown.
        counters(&g, &[("3000", "1000", "5"), ("3000", "1000", "5")]);
        let s = r.sample(2.0).unwrap();
        assert_eq!(find(&s, &g).local_bytes_per_s, None);
        assert_eq!(find(&s, &g).total_bytes_per_s, Some(2000.0));
        assert_eq!(find(&s, &g).llc_occupancy_bytes, Some(10));
    }

    #[test]
    fn counter_going_backwards_is_none() {
        let m = mount();
        let g = group(m.path(), "g1", &[100], &[("5000", "100", "0")]);
        let mut r = Resctrl::new(m.path());
        r.sample(0.0).unwrap();
        counters(&g, &[("4000", "300", "0")]);
        let s = r.sample(1.0).unwrap();
        assert_eq!(find(&s, &g).total_bytes_per_s, None);
        assert_eq!(find(&s, &g).local_bytes_per_s, Some(200.0));
    }

    #[test]
    fn time_not_advancing_gives_no_rate() {
        let m = mount();
        let g = group(m.path(), "g1", &[100], &[("5000", "100", "0")]);
        let mut r = Resctrl::new(m.path());
        r.sample(3.0).unwrap();
        counters(&g, &[("6000", "300", "0")]);
        assert_eq!(find(&r.sample(3.0).unwrap(), &g).total_bytes_per_s, None);
    }

    #[test]
    fn root_group_is_skipped() {
        let m = mount();
        let g = group(m.path(), "g1", &[100], &[("1", "1", "1")]);
        let mut r = Resctrl::new(m.path());
        r.sample(0.0).unwrap();
        let s = r.sample(1.0).unwrap();
        let paths: Vec<&Path> = s.iter().map(|s| s.path.as_path()).collect();
        assert_eq!(
            paths,
            vec![g.as_path()],
            "root, info, mon_data are not groups"
        );
    }

    #[test]
    fn mon_groups_under_ctrl_group_and_root_are_found() {
        let m = mount();
        let ctrl = group(m.path(), "ctrl", &[100, 200], &[("0", "0", "0")]);
        let mon = group(m.path(), "ctrl/mon_groups/m1", &[200], &[("0", "0", "0")]);
        let under_root = group(m.path(), "mon_groups/r1", &[300], &[("0", "0", "0")]);
        let s = Resctrl::new(m.path()).sample(0.0).unwrap();
        assert_eq!(s.len(), 3, "{s:?}");
        assert_eq!(find(&s, &ctrl).tids, vec![100, 200]);
        assert_eq!(find(&s, &mon).tids, vec![200]);
        assert_eq!(find(&s, &under_root).tids, vec![300]);
    }

    #[test]
    fn vanished_group_is_skipped() {
        let m = mount();
        let keep = group(m.path(), "keep", &[100], &[("0", "0", "0")]);
        // Removed mid-scan: listed, but its tasks file is already gone.
        let half = group(m.path(), "half", &[200], &[("0", "0", "0")]);
        fs::remove_file(half.join("tasks")).unwrap();
        // Removed between two samples: gone from the next one, and forgotten.
        let gone = group(m.path(), "gone", &[300], &[("10", "0", "0")]);
        let mut r = Resctrl::new(m.path());
        let s = r.sample(0.0).unwrap();
        assert_eq!(s.len(), 2, "{s:?}");
        fs::remove_dir_all(&gone).unwrap();
        let s = r.sample(1.0).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].path, keep);
        assert!(
            !r.prev.contains_key(&gone),
            "a recreated group must start afresh"
        );
        // Recreated with a fresh counter: a first sample again, not a backwards one.
        group(m.path(), "gone", &[300], &[("20", "0", "0")]);
        assert_eq!(find(&r.sample(2.0).unwrap(), &gone).total_bytes_per_s, None);
    }

    #[test]
    fn missing_root_is_an_error_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("resctrl");
        let err = Resctrl::new(&root).sample(0.0).unwrap_err();
        assert_eq!(err.path(), root);
    }

    #[test]
    fn unreadable_tasks_is_an_error_naming_it() {
        let m = mount();
        let g = m.path().join("g1");
        // A directory where the file should be: EISDIR, not "gone".
        fs::create_dir_all(g.join("tasks")).unwrap();
        let err = Resctrl::new(m.path()).sample(0.0).unwrap_err();
        assert_eq!(err.path(), g.join("tasks"));
    }

    #[test]
    fn garbage_in_tasks_is_a_parse_error_with_line() {
        let m = mount();
        let g = group(m.path(), "g1", &[100], &[("0", "0", "0")]);
        fs::write(g.join("tasks"), "100\nabc\n").unwrap();
        let err = Resctrl::new(m.path()).sample(0.0).unwrap_err();
        assert!(
            matches!(&err, ObserveError::Parse { line: Some(2), .. }),
            "{err}"
        );
        assert_eq!(err.path(), g.join("tasks"));
    }

    fn sample(path: &str, tids: &[u32], total: Option<f64>, local: Option<f64>) -> GroupSample {
        GroupSample {
            path: PathBuf::from(path),
            tids: tids.to_vec(),
            total_bytes_per_s: total,
            local_bytes_per_s: local,
            llc_occupancy_bytes: None,
        }
    }

    /// Threads 1000..1999 belong to process 1000, 2000..2999 to 2000; others unknown.
    fn tgid(tid: u32) -> Option<u32> {
        matches!(tid, 1000..=2999).then_some(tid / 1000 * 1000)
    }

    #[test]
    fn one_process_group_is_attributed_two_process_group_left_out() {
        let s = [
            sample("/r/solo", &[1000, 1001], Some(4e9), Some(1e9)),
            sample("/r/mixed", &[1002, 2000], Some(8e9), Some(8e9)),
        ];
        let by = bandwidth_by_process(&s, tgid);
        assert_eq!(by.len(), 1, "{by:?}");
        let p = by[&1000];
        assert_eq!(p.gbps, 4.0);
        // (4e9 - 1e9) / 4e9
        assert_eq!(p.remote_fraction, Some(0.75));
        assert!(!by.contains_key(&2000));
    }

    #[test]
    fn unknown_thread_empty_group_or_no_rate_is_left_out() {
        let s = [
            sample("/r/exited", &[1000, 5], Some(1e9), Some(0.0)),
            sample("/r/empty", &[], Some(1e9), Some(0.0)),
            sample("/r/first", &[2000], None, None),
        ];
        assert!(bandwidth_by_process(&s, tgid).is_empty());
    }

    #[test]
    fn disjoint_groups_sum_and_nested_mon_group_is_not_counted_twice() {
        let s = [
            // Control group of process 1000 and a monitoring group inside it.
            sample("/r/c", &[1000, 1001], Some(3e9), Some(3e9)),
            sample("/r/c/mon_groups/m", &[1001], Some(1e9), Some(1e9)),
            // Another group of process 1000's threads, under the root.
            sample("/r/mon_groups/x", &[1002], Some(1e9), None),
            // Process 2000 alone in a monitoring group of a mixed control group.
            sample("/r/mixed", &[1003, 2000], Some(9e9), Some(9e9)),
            sample("/r/mixed/mon_groups/y", &[2000], Some(2e9), Some(1e9)),
        ];
        let by = bandwidth_by_process(&s, tgid);
        assert_eq!(by[&1000].gbps, 4.0);
        assert_eq!(
            by[&1000].remote_fraction, None,
            "one part has no local reading"
        );
        assert_eq!(by[&2000].gbps, 2.0);
        assert_eq!(by[&2000].remote_fraction, Some(0.5));
    }

    #[test]
    fn remote_fraction_is_clamped_and_undefined_without_traffic() {
        let s = [
            sample("/r/a", &[1000], Some(1e9), Some(1.1e9)),
            sample("/r/b", &[2000], Some(0.0), Some(0.0)),
        ];
        let by = bandwidth_by_process(&s, tgid);
        assert_eq!(by[&1000].remote_fraction, Some(0.0));
        assert_eq!(by[&2000].gbps, 0.0);
        assert_eq!(by[&2000].remote_fraction, None);
    }
}
