//! karpenter-tui: a terminal console with an embedded, Karpenter-compatible provisioning and disruption engine.
//!
//! Layers (see the README's architecture section):
//! - [`engine`]: pure, deterministic decisions (no I/O, no clock reads).
//! - [`sim`], [`kube`], [`aws`]: implementations of the cluster and cloud ports.
//! - [`runtime`]: the async shell that feeds events to the engine and executes its effects.
//! - [`ui`]: the Elm-shaped dashboard.

pub mod aws;
pub mod cli;
pub mod config;
pub mod engine;
pub mod kube;
pub mod runtime;
pub mod sim;
pub mod ui;
