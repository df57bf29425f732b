//! What the simulator runs: a program's profile, where its memory is and where its
//! threads are. Below both the solver (`model`) and the machine's resource network
//! (`network`), which each read it and neither should have to name the other for it.

use numasched_model::profile::Profile;

/// One program as the simulator runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct SimProcess {
    pub profile: Profile,
    /// Where its memory is: (node index, fraction). Fractions are normalised; invalid
    /// entries are ignored; with none, memory is where each thread runs (first touch).
    pub memory: Vec<(usize, f64)>,
    /// One CPU index (position in `Topology::cpus()`) per thread. A CPU listed by k
    /// threads is time-shared k ways. Indices past the machine are ignored.
    pub cpus: Vec<usize>,
    /// The share of a CPU each of its threads gets, where it is not what `cpus` says
    /// (one over the threads listing that CPU): the expected share of threads the load
    /// balancer deals at random ([`crate::timeshare`]). `None` almost everywhere.
    pub run_share: Option<f64>,
}
