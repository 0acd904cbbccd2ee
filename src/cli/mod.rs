//! Command implementations behind `main.rs` (which only parses arguments and wires).

pub mod args;
pub mod catalog;
pub mod controller;
pub mod demo;
pub mod generated;
pub mod live;
pub mod live_dashboard;
pub mod logging;
pub mod plan;
pub mod simulate;
