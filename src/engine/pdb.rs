//! PodDisruptionBudget arithmetic for an Eviction API (what the disruption controller and the eviction subresource
//! compute upstream), from the PDB and the pods of its namespace.
//!
//! Simplifications, stated: the expected pod count is the number of pods the selector matches (upstream uses the
//! controllers' scale for `maxUnavailable` and percentages; the two agree when every controller's pods exist).
//! A pod is *healthy* when it is not being deleted, its phase is `Running` and it has condition `Ready=True`.

use std::collections::BTreeMap;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use thiserror::Error;

use crate::engine::scheduling::selector::Selector;
use crate::engine::stored_pod::StoredPod;

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
pub fn selects(pdb: &PodDisruptionBudget, pod: &StoredPod) -> bool {
    if pdb.metadata.namespace.as_deref().unwrap_or("") != pod.metadata.namespace.as_deref().unwrap_or("") {
        return false;
    }
    let Some(sel) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else { return false };
    let empty = BTreeMap::new();
    Selector::from_label_selector(sel).matches(pod.metadata.labels.as_ref().unwrap_or(&empty))
}

/// Healthy for budget purposes: not being deleted, phase `Running`, condition `Ready=True`.
pub fn is_healthy(pod: &StoredPod) -> bool {
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
            // Saturating: an absurd percentage must not overflow (and then fails the i32 conversion instead).
            i32::try_from(pct.saturating_mul(total).saturating_add(99) / 100).ok()
        }
    }
}

/// The budget's status over `pods` (any namespace; only selected pods count). A PDB with neither `minAvailable`
/// nor `maxUnavailable`, or with a malformed percentage, allows nothing (upstream either expects no pods or fails
/// to compute, and an uncomputed budget allows no disruption).
pub fn status(pdb: &PodDisruptionBudget, pods: &[&StoredPod]) -> PdbStatus {
    let selected: Vec<&StoredPod> = pods.iter().copied().filter(|p| selects(pdb, p)).collect();
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
pub fn disruptions_allowed(pdb: &PodDisruptionBudget, pods_in_namespace: &[&StoredPod]) -> i32 {
    status(pdb, pods_in_namespace).disruptions_allowed
}

fn pdb_name(pdb: &PodDisruptionBudget) -> String {
    pdb.metadata.name.clone().unwrap_or_default()
}

/// What the Eviction API answers for `pod`, given the namespace's PDBs and pods. Pods that are terminal, pending or
/// already being deleted are always evictable (upstream `canIgnorePDB`). More than one matching PDB is an error.
/// An unhealthy pod is let through when its PDB says `unhealthyPodEvictionPolicy: AlwaysAllow`, or under the
/// default `IfHealthyBudget` when the budget is currently met (currentHealthy ≥ desiredHealthy).
pub fn check_eviction(
    pod: &StoredPod,
    pdbs: &[PodDisruptionBudget],
    pods: &[&StoredPod],
) -> Result<(), EvictionDenied> {
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
pub fn blocks(pdb: &PodDisruptionBudget, pod: &StoredPod, pods: &[&StoredPod]) -> bool {
    if !selects(pdb, pod) {
        return false;
    }
    let always = pdb.spec.as_ref().and_then(|s| s.unhealthy_pod_eviction_policy.as_deref()) == Some("AlwaysAllow");
    if always && !is_healthy(pod) {
        return false;
    }
    disruptions_allowed(pdb, pods) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pdb(name: &str, spec: serde_json::Value) -> PodDisruptionBudget {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})).unwrap()
    }

    fn pod(name: &str, ready: bool) -> StoredPod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap()
    }

    fn pods(healthy: usize, unhealthy: usize) -> Vec<StoredPod> {
        (0..healthy)
            .map(|i| pod(&format!("h{i}"), true))
            .chain((0..unhealthy).map(|i| pod(&format!("u{i}"), false)))
            .collect()
    }

    fn sel() -> serde_json::Value {
        json!({"matchLabels": {"app": "web"}})
    }

    fn allowed(spec: serde_json::Value, healthy: usize, unhealthy: usize) -> i32 {
        let ps = pods(healthy, unhealthy);
        let refs: Vec<&StoredPod> = ps.iter().collect();
        disruptions_allowed(&pdb("b", spec), &refs)
    }

    #[test]
    fn integer_budgets() {
        assert_eq!(allowed(json!({"selector": sel(), "minAvailable": 2}), 3, 0), 1);
        assert_eq!(allowed(json!({"selector": sel(), "minAvailable": 3}), 3, 0), 0);
        assert_eq!(allowed(json!({"selector": sel(), "minAvailable": 2}), 2, 1), 0, "unhealthy pods don't count");
        assert_eq!(allowed(json!({"selector": sel(), "maxUnavailable": 1}), 3, 0), 1);
        assert_eq!(allowed(json!({"selector": sel(), "maxUnavailable": 1}), 2, 1), 0, "one is already unavailable");
        assert_eq!(allowed(json!({"selector": sel(), "maxUnavailable": 0}), 3, 0), 0);
        assert_eq!(allowed(json!({"selector": sel(), "maxUnavailable": 5}), 0, 0), 0, "no expected pods");
    }

    #[test]
    fn percent_rounding_up() {
        // minAvailable 50% of 3 = ceil(1.5) = 2 → 1 allowed.
        assert_eq!(allowed(json!({"selector": sel(), "minAvailable": "50%"}), 3, 0), 1);
        // minAvailable 34% of 3 = ceil(1.02) = 2.
        assert_eq!(allowed(json!({"selector": sel(), "minAvailable": "34%"}), 3, 0), 1);
        // maxUnavailable 50% of 3 = ceil(1.5) = 2 → desired 1 → 2 allowed.
        assert_eq!(allowed(json!({"selector": sel(), "maxUnavailable": "50%"}), 3, 0), 2);
        // maxUnavailable 10% of 3 = ceil(0.3) = 1.
        assert_eq!(allowed(json!({"selector": sel(), "maxUnavailable": "10%"}), 3, 0), 1);
        assert_eq!(allowed(json!({"selector": sel(), "maxUnavailable": "0%"}), 3, 0), 0);
        assert_eq!(allowed(json!({"selector": sel(), "minAvailable": "100%"}), 3, 0), 0);
        assert_eq!(allowed(json!({"selector": sel(), "minAvailable": "lots%"}), 3, 0), 0, "malformed: fail closed");
        assert_eq!(allowed(json!({"selector": sel()}), 3, 0), 0, "neither field: nothing allowed");
        assert_eq!(allowed(json!({"selector": sel(), "minAvailable": "9223372036854775807%"}), 3, 0), 0, "no overflow");
    }

    #[test]
    fn selectors() {
        let ps = pods(2, 0);
        let refs: Vec<&StoredPod> = ps.iter().collect();
        assert_eq!(status(&pdb("b", json!({"maxUnavailable": 1})), &refs).expected, 0, "no selector selects nothing");
        assert_eq!(
            status(&pdb("b", json!({"selector": {}, "maxUnavailable": 1})), &refs).expected,
            2,
            "empty selects all"
        );
        let other_ns: PodDisruptionBudget = serde_json::from_value(
            json!({"metadata": {"name": "b", "namespace": "other"}, "spec": {"selector": {}, "maxUnavailable": 1}}),
        )
        .unwrap();
        assert_eq!(status(&other_ns, &refs).expected, 0);
    }

    #[test]
    fn eviction_case_21_denied_at_zero() {
        let ps = pods(2, 0);
        let refs: Vec<&StoredPod> = ps.iter().collect();
        let b = pdb("web", json!({"selector": sel(), "maxUnavailable": 0}));
        let err = check_eviction(&ps[0], std::slice::from_ref(&b), &refs).unwrap_err();
        assert_eq!(err.status_code(), 429);
        assert!(err.to_string().contains("default/web"));
        let ok = pdb("web", json!({"selector": sel(), "maxUnavailable": 1}));
        assert_eq!(check_eviction(&ps[0], std::slice::from_ref(&ok), &refs), Ok(()));
        let two = check_eviction(&ps[0], &[ok, pdb("web2", json!({"selector": sel(), "maxUnavailable": 1}))], &refs);
        assert!(matches!(two, Err(EvictionDenied::MultiplePdbs { ref pdbs }) if pdbs == &["web", "web2"]));
        assert_eq!(check_eviction(&ps[0], &[], &refs), Ok(()));
    }

    #[test]
    fn unhealthy_pod_eviction_policy() {
        let ps = pods(2, 1);
        let refs: Vec<&StoredPod> = ps.iter().collect();
        let sick = &ps[2];
        // minAvailable 3 with 2 healthy: budget not met, IfHealthyBudget refuses the unhealthy pod.
        let strict = pdb("b", json!({"selector": sel(), "minAvailable": 3}));
        assert!(check_eviction(sick, std::slice::from_ref(&strict), &refs).is_err());
        let always =
            pdb("b", json!({"selector": sel(), "minAvailable": 3, "unhealthyPodEvictionPolicy": "AlwaysAllow"}));
        assert_eq!(check_eviction(sick, std::slice::from_ref(&always), &refs), Ok(()));
        assert!(check_eviction(&ps[0], std::slice::from_ref(&always), &refs).is_err(), "healthy pods still protected");
        // IfHealthyBudget lets an unhealthy pod go while the budget is met.
        let met = pdb("b", json!({"selector": sel(), "minAvailable": 2}));
        assert_eq!(check_eviction(sick, std::slice::from_ref(&met), &refs), Ok(()));
        assert!(!blocks(&always, sick, &refs));
        assert!(blocks(&always, &ps[0], &refs));
    }

    #[test]
    fn terminal_and_pending_pods_ignore_budgets() {
        let ps = pods(1, 0);
        let refs: Vec<&StoredPod> = ps.iter().collect();
        let b = pdb("b", json!({"selector": sel(), "maxUnavailable": 0}));
        let mut done = ps[0].clone();
        done.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert_eq!(check_eviction(&done, std::slice::from_ref(&b), &refs), Ok(()));
        let mut pending = ps[0].clone();
        pending.status.as_mut().unwrap().phase = Some("Pending".into());
        assert_eq!(check_eviction(&pending, std::slice::from_ref(&b), &refs), Ok(()));
    }
}
