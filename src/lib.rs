//! karpenter-tui: a terminal console with an embedded, Karpenter-compatible provisioning and disruption engine.
//!
//! Layers, each importing only those above it in this list (see docs/architecture.md):
//! - [`engine`]: pure, deterministic decisions (no I/O, no clock reads), and its input type.
//! - [`controller`]: Karpenter's controllers as a level-triggered planner that returns effects.
//! - [`sim`], [`kube`], [`aws`]: the simulated world, and the cluster and cloud ports over kube-rs and the AWS SDK.
//! - [`shell`]: the async application shell that feeds reads to the controller and executes its effects.
//! - [`protocol`]: what the dashboard and a backend say to each other (shared by `shell` and `ui`).
//! - [`ui`], [`cli`]: the Elm-shaped dashboard, and the command line that wires everything.
//! - [`memory`], [`config`]: process-level helpers any layer may use.

pub mod aws;
pub mod cli;
pub mod config;
pub mod controller;
pub mod engine;
pub mod kube;
pub mod memory;
pub mod protocol;
pub mod shell;
pub mod sim;
pub mod ui;
