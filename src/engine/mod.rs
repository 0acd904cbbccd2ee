//! The engine: a pure, deterministic library. Given a snapshot of cluster state, the catalog and the time, it
//! returns decisions and explanations. It never touches the network, never reads the wall clock, never sleeps.

pub mod api;
pub mod capacitybuffer;
pub mod catalog;
pub mod disruption;
pub mod drift;
pub mod explain;
pub mod labels;
pub mod lifecycle;
pub mod manifests;
pub mod node_digests;
pub mod objects;
pub mod overlay;
pub mod packing;
pub mod pdb;
pub mod provisioning;
pub mod requirements;
pub mod resources;
pub mod scheduling;
pub mod state;
pub mod static_capacity;
pub mod store;
pub mod stored_pod;
pub mod termination;
pub mod version;
pub mod whatif;
