//! Node termination and draining (engine.md §4): which pods to evict now, which to force-delete because the
//! NodeClaim's termination grace period is running out, and when the node counts as drained. Pure: the caller
//! records when the drain started and passes the deadline read from the NodeClaim annotation.

use k8s_openapi::api::core::v1::{Node, Pod, Taint};

use crate::engine::labels;
use crate::engine::lifecycle::{SECOND, duration_ms, time_ms};
use crate::engine::provisioning::Millis;
use crate::engine::scheduling::taints::tolerates;

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

fn key(p: &Pod) -> PodKey {
    (p.metadata.namespace.clone().unwrap_or_default(), p.metadata.name.clone().unwrap_or_default())
}

fn owned_by(p: &Pod, kind: &str) -> bool {
    p.metadata.owner_references.iter().flatten().any(|o| o.kind == kind)
}

fn is_terminal(p: &Pod) -> bool {
    matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

fn deleted_at(p: &Pod) -> Option<Millis> {
    p.metadata.deletion_timestamp.as_ref().map(time_ms)
}

/// `priorityClassName` is `system-cluster-critical` or `system-node-critical`.
pub fn is_critical(p: &Pod) -> bool {
    matches!(
        p.spec.as_ref().and_then(|s| s.priority_class_name.as_deref()),
        Some("system-cluster-critical" | "system-node-critical")
    )
}

fn tolerates_disrupted(p: &Pod) -> bool {
    let taint = disrupted_taint();
    p.spec.as_ref().and_then(|s| s.tolerations.as_ref()).is_some_and(|ts| ts.iter().any(|t| tolerates(t, &taint)))
}

/// Upstream `IsStuckTerminating`: deleted, and more than a minute past the deletion timestamp.
pub fn is_stuck_terminating(p: &Pod, now: Millis) -> bool {
    deleted_at(p).is_some_and(|d| now.saturating_sub(d) > STUCK_TERMINATING)
}

/// Pods the drain waits for: not terminal, not tolerating `karpenter.sh/disrupted:NoSchedule`, not stuck
/// terminating, not mirror (static) pods.
pub fn is_waiting_eviction(p: &Pod, now: Millis) -> bool {
    !is_terminal(p) && !tolerates_disrupted(p) && !is_stuck_terminating(p, now) && !owned_by(p, "Node")
}

/// `karpenter.sh/do-not-disrupt` is active: `"true"`, or a positive Go duration still running since
/// `status.startTime` (a missing start time counts as active). Other values (invalid, zero) are ignored.
pub fn do_not_disrupt_active(p: &Pod, now: Millis) -> bool {
    let Some(v) = p.metadata.annotations.as_ref().and_then(|a| a.get(labels::ANNOTATION_DO_NOT_DISRUPT)) else {
        return false;
    };
    if v == "true" {
        return true;
    }
    match duration_ms(v) {
        Some(d) if d > 0 => match p.status.as_ref().and_then(|s| s.start_time.as_ref()) {
            Some(start) => now < time_ms(start).saturating_add(d),
            None => true,
        },
        _ => false,
    }
}

fn grace_seconds(p: &Pod) -> i64 {
    p.spec.as_ref().and_then(|s| s.termination_grace_period_seconds).unwrap_or(DEFAULT_POD_GRACE_SECONDS)
}

/// Force deletion is due: `now > deadline − pod TGP`, or the pod is already terminating with a deletion time past
/// the deadline.
fn force_delete_due(p: &Pod, deadline: Millis, now: Millis) -> bool {
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
    pods: &[&Pod],
    deadline: Option<Millis>,
    drain_started: Option<Millis>,
    now: Millis,
) -> DrainPlan {
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    let mut plan = DrainPlan::default();
    let mut tiers: [Vec<&Pod>; 4] = Default::default();
    for p in pods.iter().copied() {
        let bound = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("");
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
        let tier = usize::from(is_critical(p)) * 2 + usize::from(owned_by(p, "DaemonSet"));
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
