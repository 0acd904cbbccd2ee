//! The async shell: the backends behind the dashboard (the live one over kube-rs, [`live_driver`], and the
//! simulated one that plays a scenario in accelerated real time, [`sim_driver`]), the pictures they build for it,
//! and the acting loop that hands the controller's effects to the executor ([`acting`], [`execute`]). It speaks
//! to the dashboard only through [`crate::protocol`].

pub mod acting;
pub mod comparer;
pub mod disruption_pause;
pub mod live_driver;
pub mod live_picture;
pub mod metrics;
pub mod node_pods;
pub mod passes;
pub mod picture;
pub mod sim_driver;
pub mod sim_picture;

/// Who is at the keyboard, for what records the operator (the pause annotation, the approvals metric): the user
/// running this process.
pub fn operator() -> String {
    ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".into())
}
