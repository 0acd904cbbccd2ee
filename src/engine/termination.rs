//! Node termination and draining (engine.md §4): which pods to evict now, which to force-delete because the
//! NodeClaim's termination grace period is running out, and when the node counts as drained. Pure: the caller
//! records when the drain started and passes the deadline read from the NodeClaim annotation.

use k8s_openapi::api::core::v1::{Node, Taint};

use crate::engine::labels;
use crate::engine::lifecycle::{SECOND, duration_ms, time_ms};
use crate::engine::provisioning::Millis;
use crate::engine::scheduling::taints::tolerates;
use crate::engine::stored_pod::StoredPod;

/// `Drained=True` needs at least this long since the drain started (catches pods bound just before the taint).
pub const MIN_DRAIN_TIME: Millis = 5 * SECOND;
/// A pod deleted longer ago than this (past its deletionTimestamp) is stuck and no longer waited for.
pub const STUCK_TERMINATING: Millis = 60 * SECOND;
/// Kubernetes' default `terminationGracePeriodSeconds`.
pub const DEFAULT_POD_GRACE_SECONDS: i64 = 30;

/// `(namespace, name)`.
pub type PodKey = (String, String);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainPlan {
    /// Call the Eviction API for these now (one tier only).
    pub evict: Vec<PodKey>,
    /// DELETE these with this grace period in seconds, bypassing PDBs and do-not-disrupt.
    pub force_delete: Vec<(String, String, i64)>,
    /// In the tier being drained but protected by an active `karpenter.sh/do-not-disrupt`: they wait.
    pub blocked_by_do_not_disrupt: Vec<PodKey>,
    /// Pods still waiting eviction (all tiers, including terminating ones not yet gone).
    pub remaining: usize,
    /// Nothing remains and [`MIN_DRAIN_TIME`] has elapsed since the drain started.
    pub drained: bool,
}

/// The taint node termination (and disruption) puts on a node: `karpenter.sh/disrupted:NoSchedule`.
pub fn disrupted_taint() -> Taint {
    Taint { key: labels::TAINT_DISRUPTED.into(), value: None, effect: "NoSchedule".into(), time_added: None }
}

fn key(p: &StoredPod) -> PodKey {
    (p.metadata.namespace.clone().unwrap_or_default(), p.metadata.name.clone().unwrap_or_default())
}

fn deleted_at(p: &StoredPod) -> Option<Millis> {
    p.metadata.deletion_timestamp.as_ref().map(time_ms)
}

/// `priorityClassName` is `system-cluster-critical` or `system-node-critical`.
pub fn is_critical(p: &StoredPod) -> bool {
    matches!(p.spec().priority_class_name.as_deref(), Some("system-cluster-critical" | "system-node-critical"))
}

fn tolerates_disrupted(p: &StoredPod) -> bool {
    let taint = disrupted_taint();
    p.spec().tolerations.as_ref().is_some_and(|ts| ts.iter().any(|t| tolerates(t, &taint)))
}

/// Upstream `IsStuckTerminating`: deleted, and more than a minute past the deletion timestamp.
pub fn is_stuck_terminating(p: &StoredPod, now: Millis) -> bool {
    deleted_at(p).is_some_and(|d| now.saturating_sub(d) > STUCK_TERMINATING)
}

/// Pods the drain waits for: not terminal, not tolerating `karpenter.sh/disrupted:NoSchedule`, not stuck
/// terminating, not mirror (static) pods.
pub fn is_waiting_eviction(p: &StoredPod, now: Millis) -> bool {
    !p.is_terminal() && !tolerates_disrupted(p) && !is_stuck_terminating(p, now) && !p.owned_by("Node")
}

/// `karpenter.sh/do-not-disrupt` is active: `"true"`, or a positive Go duration still running since
/// `status.startTime` (a missing start time counts as active). `"false"` and zero durations are not; a value that is
/// none of these fails closed (active).
pub fn do_not_disrupt_active(p: &StoredPod, now: Millis) -> bool {
    let Some(v) = p.metadata.annotations.as_ref().and_then(|a| a.get(labels::ANNOTATION_DO_NOT_DISRUPT)) else {
        return false;
    };
    // A value that is neither `true` nor a duration is ignored, as upstream does since v1.12 (the controller says
    // so in a warning event on the pod; see `crate::controller`).
    if v == "true" {
        return true;
    }
    match duration_ms(v) {
        Some(d) if d > 0 => do_not_disrupt_expiry(p).is_none_or(|end| now < end),
        _ => false,
    }
}

/// When a timed `karpenter.sh/do-not-disrupt` (a positive duration counted from `status.startTime`) runs out.
pub fn do_not_disrupt_expiry(p: &StoredPod) -> Option<Millis> {
    let v = p.metadata.annotations.as_ref()?.get(labels::ANNOTATION_DO_NOT_DISRUPT)?;
    let d = duration_ms(v).filter(|d| *d > 0)?;
    let start = p.status.as_ref()?.start_time.as_ref()?;
    Some(time_ms(start).saturating_add(d))
}

/// A `karpenter.sh/do-not-disrupt` value that is neither `true`, `false` nor a duration.
pub fn do_not_disrupt_malformed(v: &str) -> bool {
    v != "true" && v != "false" && duration_ms(v).is_none()
}

fn grace_seconds(p: &StoredPod) -> i64 {
    p.spec().termination_grace_period_seconds.unwrap_or(DEFAULT_POD_GRACE_SECONDS)
}

/// Force deletion is due: `now > deadline − pod TGP`, or the pod is already terminating with a deletion time past
/// the deadline.
fn force_delete_due(p: &StoredPod, deadline: Millis, now: Millis) -> bool {
    let start = deadline.saturating_sub(grace_seconds(p).saturating_mul(SECOND));
    now > start || deleted_at(p).is_some_and(|d| d > deadline)
}

/// The drain step for `node` given the pods bound to it (pods naming another node are ignored).
/// `deadline` is the NodeClaim's termination timestamp; `drain_started` when this drain began (`None`: it begins
/// now, so the node cannot be drained yet).
///
/// Graceful pods are grouped in tiers — non-critical non-DaemonSet, non-critical DaemonSet, critical non-DaemonSet,
/// critical DaemonSet — and only the first non-empty tier is acted on. Terminating pods stay in their tier (they are
/// awaited, not evicted again); do-not-disrupt pods in the tier are reported as blocked. Output lists are sorted by
/// namespace/name.
pub fn drain_plan(
    node: &Node,
    pods: &[&StoredPod],
    deadline: Option<Millis>,
    drain_started: Option<Millis>,
    now: Millis,
) -> DrainPlan {
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    let mut plan = DrainPlan::default();
    let mut tiers: [Vec<&StoredPod>; 4] = Default::default();
    for p in pods.iter().copied() {
        let bound = p.node_name().unwrap_or("");
        if !bound.is_empty() && !node_name.is_empty() && bound != node_name {
            continue;
        }
        if !is_waiting_eviction(p, now) {
            continue;
        }
        plan.remaining += 1;
        if let Some(d) = deadline
            && force_delete_due(p, d, now)
        {
            let (ns, name) = key(p);
            let remaining_secs = d.saturating_sub(now).div_euclid(SECOND);
            plan.force_delete.push((ns, name, remaining_secs.max(1)));
            continue;
        }
        let tier = usize::from(is_critical(p)) * 2 + usize::from(p.owned_by("DaemonSet"));
        tiers[tier].push(p);
    }
    if let Some(tier) = tiers.iter().find(|t| !t.is_empty()) {
        for p in tier {
            if p.metadata.deletion_timestamp.is_some() {
                continue; // already terminating: wait for it
            }
            if do_not_disrupt_active(p, now) {
                plan.blocked_by_do_not_disrupt.push(key(p));
            } else {
                plan.evict.push(key(p));
            }
        }
    }
    plan.evict.sort();
    plan.force_delete.sort();
    plan.blocked_by_do_not_disrupt.sort();
    plan.drained = plan.remaining == 0 && drain_started.is_some_and(|s| now.saturating_sub(s) >= MIN_DRAIN_TIME);
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::lifecycle::{MINUTE, ms_time};
    use serde_json::json;

    const T0: Millis = 1_700_000_000_000;

    fn node() -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap()
    }

    fn pod(name: &str, extra: serde_json::Value) -> StoredPod {
        let mut v = json!({"metadata": {"name": name, "namespace": "default"},
                           "spec": {"nodeName": "n1", "containers": []},
                           "status": {"phase": "Running"}});
        if let (Some(a), serde_json::Value::Object(b)) = (v.as_object_mut(), extra) {
            for (k, val) in b {
                match (a.get_mut(&k), val) {
                    (Some(serde_json::Value::Object(x)), serde_json::Value::Object(y)) => x.extend(y),
                    (_, val) => {
                        a.insert(k, val);
                    }
                }
            }
        }
        serde_json::from_value(v).unwrap()
    }

    fn ds() -> serde_json::Value {
        json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u"}])
    }

    fn names(v: &[PodKey]) -> Vec<&str> {
        v.iter().map(|(_, n)| n.as_str()).collect()
    }

    #[test]
    fn tiers_case_20() {
        let app = pod("app", json!({}));
        let daemon =
            pod("daemon", json!({"metadata": {"name": "daemon", "namespace": "default", "ownerReferences": ds()}}));
        let crit = pod(
            "crit",
            json!({"spec": {"nodeName": "n1", "containers": [], "priorityClassName": "system-node-critical"}}),
        );
        let crit_ds = pod(
            "critds",
            json!({"metadata": {"name": "critds", "namespace": "default", "ownerReferences": ds()},
                   "spec": {"nodeName": "n1", "containers": [], "priorityClassName": "system-cluster-critical"}}),
        );
        let mirror = pod(
            "mirror",
            json!({"metadata": {"name": "mirror", "namespace": "default",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "n"}]}}),
        );
        let tolerant = pod(
            "tolerant",
            json!({"spec": {"nodeName": "n1", "containers": [],
            "tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]}}),
        );
        let done = pod("done", json!({"status": {"phase": "Succeeded"}}));
        let n = node();
        let mut all = vec![&crit_ds, &crit, &daemon, &app, &mirror, &tolerant, &done];
        let step = |pods: &[&StoredPod]| drain_plan(&n, pods, None, Some(T0), T0 + MINUTE);

        let p = step(&all);
        assert_eq!(names(&p.evict), ["app"]);
        assert_eq!(p.remaining, 4, "mirror, tolerating and terminal pods are not waited for");
        all.retain(|p| p.metadata.name.as_deref() != Some("app"));
        assert_eq!(names(&step(&all).evict), ["daemon"]);
        all.retain(|p| p.metadata.name.as_deref() != Some("daemon"));
        assert_eq!(names(&step(&all).evict), ["crit"]);
        all.retain(|p| p.metadata.name.as_deref() != Some("crit"));
        assert_eq!(names(&step(&all).evict), ["critds"]);
        all.retain(|p| p.metadata.name.as_deref() != Some("critds"));
        let last = step(&all);
        assert!(last.evict.is_empty() && last.remaining == 0 && last.drained);
    }

    #[test]
    fn terminating_pods_awaited_not_evicted_and_stuck_ones_ignored() {
        let n = node();
        let terminating = pod(
            "t",
            json!({"metadata": {"name": "t", "namespace": "default", "deletionTimestamp": "2023-11-14T22:13:20Z"}}),
        );
        let del = T0; // 2023-11-14T22:13:20Z
        let p = drain_plan(&n, &[&terminating], None, Some(T0), del + MINUTE);
        assert!(p.evict.is_empty());
        assert_eq!(p.remaining, 1);
        assert!(!p.drained);
        let p = drain_plan(&n, &[&terminating], None, Some(T0), del + MINUTE + 1);
        assert_eq!(p.remaining, 0, "stuck terminating (> 1 min past deletion) is not waited for");
    }

    #[test]
    fn min_drain_time() {
        let n = node();
        assert!(!drain_plan(&n, &[], None, Some(T0), T0 + 4_999).drained);
        assert!(drain_plan(&n, &[], None, Some(T0), T0 + 5_000).drained);
        assert!(!drain_plan(&n, &[], None, None, T0).drained, "a drain that starts now is not drained yet");
    }

    #[test]
    fn do_not_disrupt_waits_and_blocks_lower_tiers() {
        let n = node();
        let dnd = pod(
            "dnd",
            json!({"metadata": {"name": "dnd", "namespace": "default",
            "annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
        );
        let crit = pod(
            "crit",
            json!({"spec": {"nodeName": "n1", "containers": [], "priorityClassName": "system-node-critical"}}),
        );
        let p = drain_plan(&n, &[&dnd, &crit], None, Some(T0), T0);
        assert!(p.evict.is_empty());
        assert_eq!(names(&p.blocked_by_do_not_disrupt), ["dnd"]);
        assert_eq!(p.remaining, 2);
        // Past the deadline the pod is force-deleted despite do-not-disrupt.
        let p = drain_plan(&n, &[&dnd], Some(T0), Some(T0), T0 + 1);
        assert_eq!(p.force_delete, [("default".to_string(), "dnd".to_string(), 1)]);
        assert!(p.blocked_by_do_not_disrupt.is_empty());
    }

    #[test]
    fn do_not_disrupt_durations() {
        let start = "2023-11-14T22:13:20Z"; // T0
        let timed = pod(
            "p",
            json!({"metadata": {"name": "p", "namespace": "default",
            "annotations": {"karpenter.sh/do-not-disrupt": "5m"}}, "status": {"phase": "Running", "startTime": start}}),
        );
        assert!(do_not_disrupt_active(&timed, T0 + 5 * MINUTE - 1));
        assert!(!do_not_disrupt_active(&timed, T0 + 5 * MINUTE));
        let no_start = pod(
            "p",
            json!({"metadata": {"name": "p", "namespace": "default",
            "annotations": {"karpenter.sh/do-not-disrupt": "5m"}}}),
        );
        assert!(do_not_disrupt_active(&no_start, T0 + 100 * MINUTE));
        for (v, active) in [("false", false), ("0s", false), ("banana", false), ("true", true)] {
            let p = pod(
                "p",
                json!({"metadata": {"name": "p", "namespace": "default", "annotations": {"karpenter.sh/do-not-disrupt": v}}}),
            );
            // An unreadable value is ignored (upstream v1.12+).
            assert_eq!(do_not_disrupt_active(&p, T0), active, "{v}");
        }
    }

    #[test]
    fn force_delete_case_21() {
        // NodeClaim TGP 1h from T0; the pod asks for 10 minutes to shut down.
        let n = node();
        let deadline = T0 + 60 * MINUTE;
        let slow =
            pod("slow", json!({"spec": {"nodeName": "n1", "containers": [], "terminationGracePeriodSeconds": 600}}));
        let at = deadline - 10 * MINUTE;
        let p = drain_plan(&n, &[&slow], Some(deadline), Some(T0), at);
        assert!(p.force_delete.is_empty());
        assert_eq!(names(&p.evict), ["slow"], "not yet due: evicted through the API (PDBs apply)");
        let p = drain_plan(&n, &[&slow], Some(deadline), Some(T0), at + 1);
        assert_eq!(p.force_delete, [("default".to_string(), "slow".to_string(), 599)]);
        assert!(p.evict.is_empty());
        let p = drain_plan(&n, &[&slow], Some(deadline), Some(T0), deadline + 5 * MINUTE);
        assert_eq!(p.force_delete[0].2, 1, "grace never below 1 s");
        // Default pod grace (30 s) applies when unset; force-deletion ignores tiers.
        let crit = pod(
            "crit",
            json!({"spec": {"nodeName": "n1", "containers": [], "priorityClassName": "system-node-critical"}}),
        );
        let app = pod("app", json!({}));
        let p = drain_plan(&n, &[&crit, &app, &slow], Some(deadline), Some(T0), deadline - 29_000);
        assert_eq!(
            names(&p.force_delete.iter().map(|(a, b, _)| (a.clone(), b.clone())).collect::<Vec<_>>()),
            ["app", "crit", "slow"]
        );
    }

    #[test]
    fn pods_on_other_nodes_are_ignored() {
        let other = pod("o", json!({"spec": {"nodeName": "n2", "containers": []}}));
        assert_eq!(drain_plan(&node(), &[&other], None, Some(T0), T0 + MINUTE).remaining, 0);
        let _ = ms_time(T0);
    }

    #[test]
    fn disrupted_taint_shape() {
        let t = disrupted_taint();
        assert_eq!((t.key.as_str(), t.effect.as_str(), t.value), ("karpenter.sh/disrupted", "NoSchedule", None));
    }
}
