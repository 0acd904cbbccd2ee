//! PodDisruptionBudget arithmetic for an Eviction API (what the disruption controller and the eviction subresource
//! compute upstream), from the PDB and the pods of its namespace.
//!
//! Simplifications, stated: the expected pod count is the number of pods the selector matches (upstream uses the
//! controllers' scale for `maxUnavailable` and percentages; the two agree when every controller's pods exist).
//! A pod is *healthy* when it is not being deleted, its phase is `Running` and it has condition `Ready=True`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use thiserror::Error;

use crate::engine::scheduling::selector::Selector;

/// The computed status of one PDB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PdbStatus {
    pub expected: i32,
    pub current_healthy: i32,
    pub desired_healthy: i32,
    pub disruptions_allowed: i32,
}

/// Why an eviction was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EvictionDenied {
    /// HTTP 429: evicting would violate the budget.
    #[error("Cannot evict pod as it would violate the pod's disruption budget {namespace}/{pdb}")]
    Budget { namespace: String, pdb: String },
    /// HTTP 500 upstream: the eviction subresource refuses pods covered by several budgets.
    #[error("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support ({})", .pdbs.join(", "))]
    MultiplePdbs { pdbs: Vec<String> },
}

impl EvictionDenied {
    /// The HTTP status the API server answers with.
    pub fn status_code(&self) -> u16 {
        match self {
            EvictionDenied::Budget { .. } => 429,
            EvictionDenied::MultiplePdbs { .. } => 500,
        }
    }
}

/// The PDB selects the pod: same namespace and the selector matches. A missing selector selects nothing; an empty
/// one selects every pod of the namespace (policy/v1).
pub fn selects(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    if pdb.metadata.namespace.as_deref().unwrap_or("") != pod.metadata.namespace.as_deref().unwrap_or("") {
        return false;
    }
    let Some(sel) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else { return false };
    let empty = BTreeMap::new();
    Selector::from_label_selector(sel).matches(pod.metadata.labels.as_ref().unwrap_or(&empty))
}

/// Healthy for budget purposes: not being deleted, phase `Running`, condition `Ready=True`.
pub fn is_healthy(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else { return false };
    pod.metadata.deletion_timestamp.is_none()
        && status.phase.as_deref() == Some("Running")
        && status.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Kubernetes `GetScaledValueFromIntOrPercent` with rounding up; `None` for a malformed percentage.
fn scaled_up(v: &IntOrString, total: i32) -> Option<i32> {
    match v {
        IntOrString::Int(i) => Some(*i),
        IntOrString::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.trim().parse().ok()?;
            let total = i64::from(total);
            // ceil(pct * total / 100) for non-negative values; negative percentages are not valid.
            if pct < 0 {
                return None;
            }
            i32::try_from((pct * total + 99) / 100).ok()
        }
    }
}

/// The budget's status over `pods` (any namespace; only selected pods count). A PDB with neither `minAvailable`
/// nor `maxUnavailable`, or with a malformed percentage, allows nothing (upstream either expects no pods or fails
/// to compute, and an uncomputed budget allows no disruption).
pub fn status(pdb: &PodDisruptionBudget, pods: &[&Pod]) -> PdbStatus {
    let selected: Vec<&Pod> = pods.iter().copied().filter(|p| selects(pdb, p)).collect();
    let expected = i32::try_from(selected.len()).unwrap_or(i32::MAX);
    let current_healthy = i32::try_from(selected.iter().filter(|p| is_healthy(p)).count()).unwrap_or(i32::MAX);
    let spec = pdb.spec.as_ref();
    let desired = if let Some(max_unavailable) = spec.and_then(|s| s.max_unavailable.as_ref()) {
        scaled_up(max_unavailable, expected).map(|m| expected.saturating_sub(m).max(0))
    } else if let Some(min_available) = spec.and_then(|s| s.min_available.as_ref()) {
        scaled_up(min_available, expected)
    } else {
        None
    };
    let Some(desired_healthy) = desired else {
        return PdbStatus { expected, current_healthy, desired_healthy: 0, disruptions_allowed: 0 };
    };
    let allowed = if expected <= 0 { 0 } else { current_healthy.saturating_sub(desired_healthy).max(0) };
    PdbStatus { expected, current_healthy, desired_healthy, disruptions_allowed: allowed }
}

/// `status.disruptionsAllowed` as the disruption controller would compute it.
pub fn disruptions_allowed(pdb: &PodDisruptionBudget, pods_in_namespace: &[&Pod]) -> i32 {
    status(pdb, pods_in_namespace).disruptions_allowed
}

fn pdb_name(pdb: &PodDisruptionBudget) -> String {
    pdb.metadata.name.clone().unwrap_or_default()
}

/// What the Eviction API answers for `pod`, given the namespace's PDBs and pods. Pods that are terminal, pending or
/// already being deleted are always evictable (upstream `canIgnorePDB`). More than one matching PDB is an error.
/// An unhealthy pod is let through when its PDB says `unhealthyPodEvictionPolicy: AlwaysAllow`, or under the
/// default `IfHealthyBudget` when the budget is currently met (currentHealthy ≥ desiredHealthy).
pub fn check_eviction(pod: &Pod, pdbs: &[PodDisruptionBudget], pods: &[&Pod]) -> Result<(), EvictionDenied> {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if pod.metadata.deletion_timestamp.is_some() || matches!(phase, Some("Succeeded" | "Failed" | "Pending")) {
        return Ok(());
    }
    let matching: Vec<&PodDisruptionBudget> = pdbs.iter().filter(|b| selects(b, pod)).collect();
    let pdb = match matching.as_slice() {
        [] => return Ok(()),
        [one] => *one,
        many => return Err(EvictionDenied::MultiplePdbs { pdbs: many.iter().map(|b| pdb_name(b)).collect() }),
    };
    let st = status(pdb, pods);
    if !is_healthy(pod) {
        let always = pdb.spec.as_ref().and_then(|s| s.unhealthy_pod_eviction_policy.as_deref()) == Some("AlwaysAllow");
        if always || st.current_healthy >= st.desired_healthy {
            return Ok(());
        }
    }
    if st.disruptions_allowed <= 0 {
        return Err(EvictionDenied::Budget {
            namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
            pdb: pdb_name(pdb),
        });
    }
    Ok(())
}

/// A PDB that blocks disruption of `pod` for candidate purposes (engine.md §5.2): it selects the pod and allows no
/// disruption — unless the pod is not Ready and the PDB says `AlwaysAllow`.
pub fn blocks(pdb: &PodDisruptionBudget, pod: &Pod, pods: &[&Pod]) -> bool {
    if !selects(pdb, pod) {
        return false;
    }
    let always = pdb.spec.as_ref().and_then(|s| s.unhealthy_pod_eviction_policy.as_deref()) == Some("AlwaysAllow");
    if always && !is_healthy(pod) {
        return false;
    }
    disruptions_allowed(pdb, pods) == 0
}
