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

/// A CPU id as flags that take one CPU per item read it: below the kernel's limit of
/// 8192 CPUs (NR_CPUS). A range, which the rest of numasched reads as a CPU list, is
/// refused by name rather than as a bad digit.
pub fn cpu_id(s: &str) -> Result<u32, String> {
    let is_num = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    match s.parse::<u32>() {
        Ok(c) if c < 8192 => Ok(c),
        Ok(c) => Err(format!("{c} is not in 0..8192")),
        Err(_)
            if s.split_once('-')
                .is_some_and(|(a, b)| is_num(a) && is_num(b)) =>
        {
            Err("a single CPU number, not a range".into())
        }
        Err(_) => Err("not a CPU number".into()),
    }
}
