//! How command-line flags take ids, shared by every command line that reads one: the
//! subcommands of `cli` and the test loads of `workload`, which neither should have to
//! borrow from the other.

/// A node id as flags take it: below the kernel's limit of 1024 nodes (MAX_NUMNODES).
pub fn node_id() -> clap::builder::RangedI64ValueParser<u32> {
    clap::builder::RangedI64ValueParser::new().range(0..1024)
}

/// A pid as flags take it: 1 up to the kernel's limit (PID_MAX_LIMIT, 2^22).
pub fn pid() -> clap::builder::RangedI64ValueParser<u32> {
    clap::builder::RangedI64ValueParser::new().range(1..=4_194_304)
}
