//! The integration tests that act on real processes through the real kernel (affinity,
//! page moves, kill -9 recovery) and measure them, in a binary of their own: the rest of
//! the suite running beside them would be load on the very CPUs they time.

#[path = "../common/mod.rs"]
mod common;

mod apply_live;
mod daemon_live;
mod forks_live;
mod no_harm_live;
