//! Apply: the last stage of the pipeline and the only code that changes the system.
//! Kept thin, and behind the [`Kernel`] trait so that every decision
//! can be tested against a fake kernel with faults injected between any two calls.
//!
//! Safety rules, and where each is enforced:
//!
//! - **Never touch** pid 0, 1, 2 (kthreadd), numasched itself, configured exclusions,
//!   or kernel threads ([`actuator`]).
//! - **Identity is pid + start time.** The start time is re-read right before acting
//!   and must match the snapshot's; the journal is keyed the same way, so nothing is
//!   ever set or "restored" on a process that merely inherited a pid ([`actuator`],
//!   [`undo`]). ESRCH/ENOENT mean "exited" and are reported as such, never as failures.
//! - **Foreign pins are kept.** A plan outside a pin someone else set (the snapshot's
//!   `allowed_cpus`, the live affinity before numasched's first change, the original
//!   affinity after it) is refused; a process re-pinned by someone else after
//!   numasched placed it is dropped from management and left as it is.
//! - **Remember before changing.** Each thread's original affinity goes into the
//!   [`journal`] before the first change; [`undo`] puts it back on request, on
//!   shutdown, or when a process stops being managed. The journal is serde data so
//!   it can be persisted for crash recovery. A child that inherited numasched's set
//!   goes back with its parent, and at once when its parent exits and leaves it to
//!   init ([`orphans`]).
//! - **Every thread.** Affinity is per thread in Linux: every thread is set, threads
//!   created during the pass are caught by re-listing, later ones inherit the set and
//!   are re-checked on the next pass.
//! - **Dry run** computes and reports what would change, and calls nothing that
//!   changes anything (not even the journal).
//! - **Rate-limited migration.** Page moves only when enabled, spending from a
//!   [`bucket`] driven by a clock value the caller passes in.
//! - **One failure is one line.** The [`report`] has a line per placement and per
//!   page move; no single process can abort a pass.
//!
//! Modules: [`kernel`] (the trait, typed errors, the Linux implementation), `fake`
//! (the programmable fake; tests only), [`journal`], [`undo`], [`orphans`] (children
//! a placed parent left to init), [`bucket`], [`actuator`],
//! [`report`], [`migrate`] (page moves in bounded chunks over epochs), [`mover`]
//! (`move_pages` on a thread of its own, so no call holds the epoch loop) and
//! [`regions`] (what of a process may move).

pub mod actuator;
pub mod bucket;
#[cfg(any(test, feature = "testing"))]
pub mod fake;
pub mod journal;
pub mod kernel;
pub mod kernel_error;
pub mod migrate;
pub mod mover;
pub mod orphans;
pub mod regions;
pub mod report;
pub mod undo;

pub use actuator::{Actuator, ActuatorConfig, Followed};
pub use bucket::TokenBucket;
#[cfg(any(test, feature = "testing"))]
pub use fake::{Call, FakeKernel, Fault};
pub use journal::{Entry, Journal};
pub use kernel::{ErrorKind, Identity, Kernel, KernelError, LinuxKernel, Op};
pub use report::{Action, ApplyReport, Line, Subject};
pub use undo::Restored;
