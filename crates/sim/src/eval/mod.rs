//! The evaluation harness: suites of workloads × allocation maps × policies, run on the
//! performance model, reported as tables, JSON, CSV and an HTML page of charts.

pub mod charts;
pub mod from_model;
pub mod html;
pub mod measured;
pub mod report;
pub mod runner;
pub mod slices;
pub mod suites;
pub mod workloads;

pub use runner::{Case, Row, Runner, TimeModel};
