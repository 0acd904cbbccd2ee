//! The simulated world behind `simulate` and `demo`: the object store, the stand-ins for what a real cluster
//! and cloud do on their own, the scenario loader and the report.

pub mod cloud;
pub mod cluster;
pub mod replicas;
pub mod report;
pub mod run;
pub mod scenario;
pub mod watch;
pub mod world;
