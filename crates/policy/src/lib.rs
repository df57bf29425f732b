//! Placement policies: pure functions from a [`Snapshot`] to a [`Plan`].
//!
//! No policy reads a file, a clock or a global; that is what lets the daemon, `plan`, the
//! simulator and the tests run the very same code. The build holds this crate to it: it
//! depends on the model alone (`tests/it/layering.rs` checks the manifest), and the
//! `clippy.toml` beside it forbids files, clocks, the environment and processes. Each
//! policy module's doc names the algorithm and where it comes from.

#![forbid(unsafe_code)]

pub mod alloc;
pub mod auto;
pub mod autonuma;
pub mod cmload;
pub mod crowded;
pub mod granularity;
pub mod linux;
pub mod locality;
pub mod maxlocal;
pub mod membus;
pub mod nmass;
pub mod numad;
pub mod oracle;
pub mod rotation;
pub mod sticky;

pub use granularity::{Granular, Pin};
// What `Policy::plan` takes and returns, so that a caller of a policy needs no second
// import.
pub use numasched_model::{follow_memory, PageMove, Placement, Plan, Process, Snapshot};

/// A placement policy. Implementations hold only their parameters.
pub trait Policy: Send + Sync {
    fn name(&self) -> &str;
    fn plan(&self, snapshot: &Snapshot) -> Plan;
    /// Whether the plan depends on where processes run now (`current_cpus`). Policies
    /// that only nudge (numad, load balancing) do; the simulator then evaluates them
    /// from every starting placement the kernel could have left, not from one.
    fn uses_current_placement(&self) -> bool {
        false
    }
    /// Whether the policy is the kernel's own placement, which a live scheduler applies
    /// by changing nothing (`linux`): its plan is then what the simulator scores, and
    /// [`Granular`] turns it into "every CPU it is allowed" for everyone.
    fn leaves_to_kernel(&self) -> bool {
        false
    }
}

/// Every policy the daemon, `plan` and the simulator can run: the one list that
/// `--policy`, the config file and the error for an unknown name come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyKind {
    Auto,
    AutoMigrate,
    AutoNuma,
    Linux,
    MaxLocal,
    Nmass,
    NmassRegression,
    MemBus,
    CmLoad,
    Numad,
}

impl PolicyKind {
    pub const ALL: [PolicyKind; 10] = [
        PolicyKind::Auto,
        PolicyKind::AutoMigrate,
        PolicyKind::AutoNuma,
        PolicyKind::Linux,
        PolicyKind::MaxLocal,
        PolicyKind::Nmass,
        PolicyKind::NmassRegression,
        PolicyKind::MemBus,
        PolicyKind::CmLoad,
        PolicyKind::Numad,
    ];

    /// The name `--policy` takes and plans carry.
    pub const fn name(self) -> &'static str {
        match self {
            PolicyKind::Auto => "auto",
            PolicyKind::AutoMigrate => "auto-migrate",
            PolicyKind::AutoNuma => "autonuma",
            PolicyKind::Linux => "linux",
            PolicyKind::MaxLocal => "maxlocal",
            PolicyKind::Nmass => "nmass",
            PolicyKind::NmassRegression => "nmass-regression",
            PolicyKind::MemBus => "membus",
            PolicyKind::CmLoad => "cmload",
            PolicyKind::Numad => "numad",
        }
    }

    /// The policy with its default parameters.
    pub fn build(self) -> Box<dyn Policy> {
        match self {
            PolicyKind::Auto => Box::new(auto::Auto::default()),
            PolicyKind::AutoMigrate => Box::new(auto::Auto {
                params: auto::AutoParams {
                    migrate: true,
                    ..Default::default()
                },
            }),
            PolicyKind::AutoNuma => Box::new(autonuma::AutoNuma::default()),
            PolicyKind::Linux => Box::new(linux::Linux),
            PolicyKind::MaxLocal => Box::new(maxlocal::MaxLocal),
            PolicyKind::Nmass => Box::new(nmass::Nmass::default()),
            PolicyKind::NmassRegression => Box::new(nmass::Nmass {
                params: nmass::NmassParams {
                    regression_penalty: true,
                    ..Default::default()
                },
            }),
            PolicyKind::MemBus => Box::new(membus::MemBus::default()),
            PolicyKind::CmLoad => Box::new(cmload::CmLoad::default()),
            PolicyKind::Numad => Box::new(numad::Numad::default()),
        }
    }
}

impl std::str::FromStr for PolicyKind {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<PolicyKind, UnknownPolicy> {
        PolicyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownPolicy(s.to_string()))
    }
}

impl std::fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// In files and JSON, a policy is its name.
impl serde::Serialize for PolicyKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for PolicyKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PolicyKind, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Names accepted by `--policy`, in [`PolicyKind::ALL`]'s order.
pub const NAMES: [&str; PolicyKind::ALL.len()] = {
    let mut out = [""; PolicyKind::ALL.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = PolicyKind::ALL[i].name();
        i += 1;
    }
    out
};

/// Names of what only the simulator runs: the oracle (a search with the model as
/// objective; `plan` runs it on a saved snapshot) and Tudu et al.'s rotation, a
/// schedule over time slices rather than a placement ([`rotation`]).
pub const EVAL_ONLY: [&str; 2] = ["oracle", "membus-rr"];

#[derive(Debug, thiserror::Error)]
#[error("{}", unknown_text(.0))]
pub struct UnknownPolicy(pub String);

fn unknown_text(name: &str) -> String {
    if EVAL_ONLY.contains(&name) {
        format!(
            "policy '{name}' runs only in the simulator (`numasched eval`): it is no \
             placement the daemon could apply (the policies are {})",
            NAMES.join(", ")
        )
    } else {
        format!("unknown policy '{name}' (known: {})", NAMES.join(", "))
    }
}

/// Builds a policy by name with its default parameters.
pub fn by_name(name: &str) -> Result<Box<dyn Policy>, UnknownPolicy> {
    Ok(name.parse::<PolicyKind>()?.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_named_once_and_builds_a_policy_of_that_name() {
        for kind in PolicyKind::ALL {
            assert_eq!(kind.name().parse::<PolicyKind>().ok(), Some(kind));
            assert_eq!(kind.build().name(), kind.name());
            assert_eq!(kind.to_string(), kind.name());
        }
        let mut names = NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PolicyKind::ALL.len());
        let err = "bogus".parse::<PolicyKind>().unwrap_err().to_string();
        assert!(
            err.starts_with("unknown policy 'bogus' (known: auto, "),
            "{err}"
        );
    }
}
