//! `auto`: numasched's own policy and the default.
//!
//! Today it is N-MASS with the generalisations documented in [`super::nmass`]
//! (page-weighted, distance-scaled remote cost; every LLC domain a cache; groups and
//! pins). It exists as its own name so the project can improve on the published
//! algorithm without changing what `nmass` means.

use crate::policy::nmass::Nmass;
use crate::policy::plan::Plan;
use crate::policy::snapshot::Snapshot;
use crate::policy::Policy;

#[derive(Debug, Clone, Default)]
pub struct Auto {
    inner: Nmass,
}

impl Policy for Auto {
    fn name(&self) -> &str {
        "auto"
    }
    fn plan(&self, snapshot: &Snapshot) -> Plan {
        let mut plan = self.inner.plan(snapshot);
        plan.policy = self.name().to_string();
        plan
    }
}
