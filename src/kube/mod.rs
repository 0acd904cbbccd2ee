//! The cluster port over kube-rs: connecting like kubectl ([`connect`]), watching what the engine reads into a
//! cache that tolerates objects it can't parse ([`watch`], [`cache`]), every write in one place with read-only
//! enforced there ([`writer`]), and acting safely next to others: rights checked at start ([`access`]), a Lease
//! so only one instance acts ([`leader`]), and upstream Karpenter detected so we don't fight it ([`upstream`]).

pub mod access;
pub mod cache;
pub mod connect;
pub mod kinds;
pub mod kwok;
pub mod leader;
pub mod raw;
pub mod upstream;
pub mod watch;
pub mod writer;
