//! Giving up, once start-up is done, every Linux capability the epochs do not use.
//!
//! The daemon runs as root, and a root process holds every capability: a bug in the
//! epoch loop, or a hostile client of the control socket or the metrics endpoint,
//! would act with all of them. After start-up it needs only the few in [`kept`], so
//! it keeps those and loses the rest for good: from the effective, permitted and
//! inheritable sets, the ambient set, and the bounding set, with `no_new_privs` so no
//! executable can bring any back. The systemd unit bounds the capabilities too
//! (`CapabilityBoundingSet=`), but the daemon may be started by hand, by another
//! supervisor or as a container's entry point, where nothing else does.
//!
//! Capabilities belong to threads, not to the process: [`drop_unneeded`] changes only
//! the calling thread's, and threads started afterwards inherit them. So it must run
//! while the process has a single thread: the daemon binds its listeners, and
//! `service::serve` drops, checks the journal can still be written, and only then
//! starts its threads.
//!
//! Nothing here is fatal: a daemon that is not root, or that lacks `CAP_SETPCAP`,
//! keeps what it has of [`kept`] and runs on; what it cannot do is logged.

use std::io;

use caps::{CapSet, Capability, CapsHashSet};
use tracing::{debug, info, warn};

/// `CAP_PERFMON`'s number; a kernel whose `cap_last_cap` is lower (before 5.8) does
/// not know it.
const PERFMON: u8 = 38;

/// The capabilities the daemon keeps after start-up.
///
/// - `CAP_SYS_NICE`: `sched_setaffinity`, `migrate_pages` and `move_pages` on other
///   users' processes, and putting their affinities back at exit.
/// - `CAP_SYS_PTRACE`: the kernel's ptrace access check, which guards reading another
///   process's `/proc/<pid>/numa_maps` and `sched` and `perf_event_open` on it; other
///   users' processes, and root's with capabilities this daemon no longer holds, pass
///   it only with this.
/// - `CAP_PERFMON`: hardware counters whatever `kernel.perf_event_paranoid` says.
///   A kernel that does not know `CAP_PERFMON` (before 5.8, `perfmon_known` false)
///   grants the same only to `CAP_SYS_ADMIN`, so there `CAP_SYS_ADMIN` is kept instead:
///   dropping it would silently cost the daemon its counters.
pub fn kept(perfmon_known: bool) -> [Capability; 3] {
    let counters = if perfmon_known {
        Capability::CAP_PERFMON
    } else {
        Capability::CAP_SYS_ADMIN
    };
    [
        Capability::CAP_SYS_PTRACE,
        Capability::CAP_SYS_NICE,
        counters,
    ]
}

/// Whether a kernel whose highest capability is `last_cap` knows `CAP_PERFMON`.
pub fn perfmon_known(last_cap: u8) -> bool {
    last_cap >= PERFMON
}

/// What [`drop_unneeded`] did, for the log.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The capabilities still held, by number.
    pub kept: Vec<Capability>,
    /// Steps not taken because the daemon lacks what they need (not root, no
    /// `CAP_SETPCAP`, an old kernel): expected, so logged at debug level.
    pub skipped: Vec<String>,
    /// Steps that were tried and failed: the daemon holds more than it should.
    pub failed: Vec<String>,
}

impl Outcome {
    pub fn log(&self) {
        for s in &self.skipped {
            debug!("capabilities: {s}");
        }
        for f in &self.failed {
            warn!("capabilities: {f}; the daemon keeps running with more than it needs");
        }
        let kept = if self.kept.is_empty() {
            "none".to_string()
        } else {
            names(&self.kept)
        };
        info!(capabilities = %kept, "capabilities dropped except those the epochs use");
    }
}

/// Drops every capability of the calling thread except [`kept`], and sets
/// `no_new_privs`. Call it while the process has one thread (see the module doc).
pub fn drop_unneeded() -> Outcome {
    let mut out = Outcome::default();
    let last = last_cap();
    let want = kept(perfmon_known(last));
    let held = match caps::read(None, CapSet::Permitted) {
        Ok(h) => h,
        Err(e) => {
            // Asking for all of `want` fails below if some are missing: a warning,
            // never a crash.
            out.failed
                .push(format!("cannot read the permitted set: {e}"));
            want.iter().copied().collect()
        }
    };
    let mut keep: Vec<Capability> = want.iter().copied().filter(|c| held.contains(c)).collect();
    keep.sort_by_key(|c| c.index());
    let missing: Vec<Capability> = want.iter().copied().filter(|c| !held.contains(c)).collect();
    if !missing.is_empty() {
        out.skipped
            .push(format!("not held, so not kept: {}", names(&missing)));
    }

    // First, while CAP_SETPCAP is still effective: it is what allows this.
    if caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP).unwrap_or(false) {
        let numbers: Vec<u8> = keep.iter().map(|c| c.index()).collect();
        for n in (0..=last).filter(|n| !numbers.contains(n)) {
            if let Err(e) = bounding_drop(n) {
                out.failed.push(format!(
                    "cannot drop capability {n} from the bounding set: {e}"
                ));
            }
        }
    } else {
        out.skipped
            .push("no CAP_SETPCAP: the bounding set is left as it is".into());
    }
    if let Err(e) = caps::clear(None, CapSet::Ambient) {
        if caps::runtime::ambient_set_supported().is_ok() {
            out.failed
                .push(format!("cannot clear the ambient set: {e}"));
        } else {
            out.skipped
                .push("no ambient set on this kernel (before 4.3): nothing to clear".into());
        }
    }
    if let Err(e) = caps::clear(None, CapSet::Inheritable) {
        out.failed
            .push(format!("cannot clear the inheritable set: {e}"));
    }
    // Effective before permitted: the effective set must stay within the permitted.
    let set: CapsHashSet = keep.iter().copied().collect();
    for (which, name) in [
        (CapSet::Effective, "effective"),
        (CapSet::Permitted, "permitted"),
    ] {
        if let Err(e) = caps::set(None, which, &set) {
            out.failed
                .push(format!("cannot reduce the {name} set: {e}"));
        }
    }
    if let Err(e) = nix::sys::prctl::set_no_new_privs() {
        out.failed.push(format!("cannot set no_new_privs: {e}"));
    }
    out.kept = match caps::read(None, CapSet::Permitted) {
        Ok(now) => {
            let mut v: Vec<Capability> = now.into_iter().collect();
            v.sort_by_key(|c| c.index());
            v
        }
        Err(_) => keep,
    };
    out
}

/// The kernel's highest capability number: `/proc/sys/kernel/cap_last_cap`, or, if
/// that cannot be read, the highest the bounding set answers for.
fn last_cap() -> u8 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            caps::runtime::thread_all_supported()
                .iter()
                .map(|c| c.index())
                .max()
                .unwrap_or(PERFMON)
        })
}

/// Drops capability `n` from the bounding set by number, not through `caps`: that
/// crate names only the capabilities it knows, and the bounding set must also lose
/// those a newer kernel adds.
fn bounding_drop(n: u8) -> io::Result<()> {
    // SAFETY: PR_CAPBSET_DROP takes a capability number and touches no memory of ours.
    let r = unsafe {
        libc::prctl(
            libc::PR_CAPBSET_DROP,
            libc::c_ulong::from(n),
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn names(caps: &[Capability]) -> String {
    caps.iter()
        .map(Capability::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(perfmon: bool) -> Vec<u8> {
        let mut v: Vec<u8> = kept(perfmon).iter().map(|c| c.index()).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn a_kernel_with_perfmon_keeps_nice_ptrace_and_perfmon() {
        assert_eq!(numbers(true), vec![19, 23, 38]);
        assert!(!kept(true).contains(&Capability::CAP_SYS_ADMIN));
    }

    #[test]
    fn a_kernel_without_perfmon_keeps_sys_admin_in_its_place() {
        assert_eq!(numbers(false), vec![19, 21, 23]);
        assert!(!kept(false).contains(&Capability::CAP_PERFMON));
    }

    #[test]
    fn perfmon_is_known_from_capability_38_on() {
        assert!(!perfmon_known(37));
        assert!(perfmon_known(38));
        assert!(perfmon_known(40));
        assert_eq!(numbers(perfmon_known(37)), vec![19, 21, 23]);
    }

    #[test]
    fn nothing_that_grants_more_is_ever_kept() {
        for perfmon in [true, false] {
            for c in [
                Capability::CAP_SETPCAP,
                Capability::CAP_SETUID,
                Capability::CAP_DAC_OVERRIDE,
                Capability::CAP_SYS_MODULE,
                Capability::CAP_KILL,
            ] {
                assert!(!kept(perfmon).contains(&c), "{c}");
            }
        }
    }
}
