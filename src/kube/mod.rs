//! The cluster port over kube-rs: connecting like kubectl ([`connect`]), watching what the engine reads into a
//! cache that tolerates objects it can't parse ([`watch`], [`cache`]).

pub mod cache;
pub mod connect;
pub mod kinds;
pub mod watch;
pub mod writer;
