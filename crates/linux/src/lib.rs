//! The Linux side of numasched: the stages that read and change the live machine.
//! [`observe`] reads /proc and the sensors into a snapshot, [`characterise`] turns
//! counters and what earlier runs taught into each process's character, and [`apply`]
//! carries a plan out (affinity, page migration, the journal that undoes it).
//!
//! A crate of its own above the model, beside the policies and the simulator, which
//! never see it. Its test doubles (a fake procfs tree, a programmable fake kernel)
//! are built only for tests or under the `testing` feature, never into the release
//! binary.

pub mod apply;
pub mod characterise;
pub mod observe;
