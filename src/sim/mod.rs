//! The simulated world behind `simulate` and `demo` (arrives with the simulation issue), and the manifest loader
//! they share with `plan --file`.

pub mod cloud;
pub mod cluster;
pub mod dashboard;
pub mod manifests;
pub mod replicas;
pub mod report;
pub mod run;
pub mod scenario;
pub mod watch;
pub mod world;
