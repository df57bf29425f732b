//! How a process uses the memory system, measured on the live machine: counters
//! ([`live`]) and what earlier runs and users taught ([`store`]). What they produce, a
//! `Character`, is model vocabulary (`numasched_model::character`): the policies that
//! read it and the simulator share it without naming this stage.

pub mod bench;
pub mod live;
pub mod store;
