//! Static NodePools (`spec.replicas`, feature gate `StaticCapacity`), as upstream's `static.provisioning`,
//! `static.deprovisioning` and `StaticDrift`: the counts they share, the node-limit reservation, the NodeClaim a
//! static pool launches, and the order static scale-down takes nodes in. Pure: the controller decides with these.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::engine::api::common::NodeSelectorRequirementWithMinValues;
use crate::engine::api::nodeclaim::ResourceRequirements;
use crate::engine::api::{NodeClaim, NodeClaimSpec, NodePool};
use crate::engine::disruption::candidates::eviction_cost;
use crate::engine::labels;
use crate::engine::lifecycle::{duration_ms, time_ms};
use crate::engine::provisioning::Millis;
use crate::engine::resources::parse_quantity;
use crate::engine::state::Nodes;
use crate::engine::stored_pod::StoredPod;
use crate::engine::termination::do_not_disrupt_active;

/// Whether the pool is static (has `spec.replicas`).
pub fn is_static(pool: &NodePool) -> bool {
    pool.spec.replicas.is_some()
}

/// `spec.limits.nodes`, if set and readable.
pub fn node_limit(pool: &NodePool) -> Option<i64> {
    let q = pool.spec.limits.as_ref()?.get("nodes")?;
    parse_quantity(&q.0).ok().map(|v| v.value())
}

/// A static pool's NodeClaims as upstream's per-pool state counts them: `active` (created, launched or not, and
/// not going), `deleting` (deleted or their Node is), `pending` (candidates of a disruption command in flight:
/// replaced by a static drift). The three are disjoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolCount {
    pub active: i64,
    pub deleting: i64,
    pub pending: i64,
}

/// The pool's claims counted; `busy` are the nodes of disruption commands in flight or proposed.
pub fn count<'a>(
    pool: &str,
    claims: impl Iterator<Item = &'a NodeClaim>,
    nodes: &Nodes<'_>,
    busy: &BTreeSet<String>,
) -> PoolCount {
    let mut c = PoolCount::default();
    for claim in claims.filter(|c| c.nodepool() == Some(pool)) {
        let node = nodes.node_of(claim.name());
        if claim.metadata.deletion_timestamp.is_some() || node.is_some_and(|n| n.metadata.deletion_timestamp.is_some())
        {
            c.deleting += 1;
        } else if node.and_then(|n| n.metadata.name.as_deref()).is_some_and(|n| busy.contains(n)) {
            c.pending += 1;
        } else {
            c.active += 1;
        }
    }
    c
}

/// Upstream's `ReserveNodeCount`: of `want` new NodeClaims, how many `limits.nodes` allows, counting every claim
/// the pool has (active, deleting and pending alike) against it. Never negative.
pub fn grant(limit: Option<i64>, c: &PoolCount, want: i64) -> i64 {
    // A negative limit (a manifest can say so) allows nothing; saturating so no input can overflow.
    let room = limit
        .map_or(i64::MAX, |l| l.max(0).saturating_sub(c.active).saturating_sub(c.deleting).saturating_sub(c.pending));
    want.min(room).max(0)
}

/// How many of `drifted` claims static drift may replace now (upstream `StaticDrift`): none while the pool is
/// over-scaled (scale-down finishes first) or its `Drifted` budget is 0; otherwise up to the budget, each needing
/// a unit of `limits.nodes` for its replacement.
pub fn drift_allowance(c: &PoolCount, replicas: i64, budget: i64, drifted: i64, limit: Option<i64>) -> i64 {
    if budget <= 0 || c.active + c.pending > replicas {
        return 0;
    }
    grant(limit, c, budget.min(drifted))
}

/// The NodeClaim a static pool launches (upstream `NewNodeClaimTemplate(np)`): the template's requirements,
/// labels, taints and class, with no instance-type choice, no overlay annotation and no requests — the cloud
/// picks the type.
pub fn static_nodeclaim(pool: &NodePool) -> NodeClaim {
    let t = &pool.spec.template;
    let mut labels_map = t.metadata.labels.clone();
    labels_map.insert(labels::NODEPOOL.to_string(), pool.name().to_string());
    if let Some(key) = labels::node_class_key(&t.spec.node_class_ref) {
        labels_map.insert(key, t.spec.node_class_ref.name.clone());
    }
    let mut requirements = t.spec.requirements.clone();
    for (k, v) in &labels_map {
        if !requirements.iter().any(|r| &r.key == k) {
            requirements.push(NodeSelectorRequirementWithMinValues {
                key: k.clone(),
                operator: "In".into(),
                values: [v.clone()].into(),
                min_values: None,
            });
        }
    }
    let mut annotations = t.metadata.annotations.clone();
    for key in [labels::ANNOTATION_NODEPOOL_HASH, labels::ANNOTATION_NODEPOOL_HASH_VERSION] {
        if let Some(v) = pool.metadata.annotations.as_ref().and_then(|a| a.get(key)) {
            annotations.insert(key.to_string(), v.clone());
        }
    }
    let mut nc = NodeClaim::new(
        "",
        NodeClaimSpec {
            taints: t.spec.taints.clone(),
            startup_taints: t.spec.startup_taints.clone(),
            requirements,
            resources: ResourceRequirements::default(),
            node_class_ref: t.spec.node_class_ref.clone(),
            termination_grace_period: t.spec.termination_grace_period.clone(),
            expire_after: t.spec.expire_after.clone(),
        },
    );
    nc.metadata = ObjectMeta {
        generate_name: Some(format!("{}-", pool.name())),
        labels: Some(labels_map),
        annotations: (!annotations.is_empty()).then_some(annotations),
        owner_references: Some(vec![OwnerReference {
            api_version: "karpenter.sh/v1".into(),
            kind: "NodePool".into(),
            name: pool.name().to_string(),
            uid: pool.metadata.uid.clone().unwrap_or_default(),
            block_owner_deletion: Some(true),
            controller: None,
        }]),
        finalizers: Some(vec![labels::TERMINATION_FINALIZER.to_string()]),
        ..Default::default()
    };
    nc
}

fn is_daemonset_pod(p: &StoredPod) -> bool {
    p.metadata.owner_references.iter().flatten().any(|o| o.kind == "DaemonSet" && o.controller == Some(true))
}

/// The share of its life a claim has left (upstream `LifetimeRemaining`): 1 without an expiry.
fn lifetime_remaining(claim: &NodeClaim, now: Millis) -> f64 {
    let Some(total) = duration_ms(&claim.spec.expire_after).filter(|t| *t > 0) else { return 1.0 };
    let created = claim.metadata.creation_timestamp.as_ref().map_or(now, time_ms);
    ((total - (now - created)) as f64 / total as f64).clamp(0.0, 1.0)
}

/// Which `excess` NodeClaims static scale-down deletes, in order (upstream `static.deprovisioning`, v1.14):
/// claims that never got an instance first; then empty nodes (no pods, or only DaemonSet pods and none of them
/// with an active do-not-disrupt); then the rest by rescheduling cost × lifetime remaining, with nodes holding an
/// active do-not-disrupt pod last. Names break ties, so the order is deterministic. Claims already going and
/// candidates of commands in flight (`busy` nodes) are not taken.
pub fn scale_down_order<'a>(
    pool: &NodePool,
    claims: impl Iterator<Item = &'a NodeClaim>,
    nodes: &Nodes<'_>,
    busy: &BTreeSet<String>,
    excess: usize,
    now: Millis,
) -> Vec<String> {
    let mut unresolved = Vec::new();
    let mut empty = Vec::new();
    let mut rest: Vec<(bool, f64, String)> = Vec::new();
    for claim in claims.filter(|c| c.nodepool() == Some(pool.name()) && c.metadata.deletion_timestamp.is_none()) {
        let name = claim.name().to_string();
        if claim.provider_id().is_none_or(str::is_empty) {
            unresolved.push(name);
            continue;
        }
        let node = nodes.node_of(claim.name());
        if node.is_some_and(|n| n.metadata.deletion_timestamp.is_some()) {
            continue;
        }
        let node_name = node.and_then(|n| n.metadata.name.as_deref());
        if node_name.is_some_and(|n| busy.contains(n)) {
            continue;
        }
        let pods: &[&StoredPod] = node_name.map_or(&[], |n| nodes.pods_on(n));
        let protected = pods.iter().any(|p| do_not_disrupt_active(p, now));
        if pods.iter().all(|p| is_daemonset_pod(p)) && !protected {
            empty.push(name);
            continue;
        }
        let cost: f64 = pods.iter().filter(|p| !is_daemonset_pod(p)).map(|p| eviction_cost(p)).sum();
        rest.push((protected, cost * lifetime_remaining(claim, now), name));
    }
    unresolved.sort();
    empty.sort();
    rest.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then_with(|| a.2.cmp(&b.2)));
    unresolved.into_iter().chain(empty).chain(rest.into_iter().map(|r| r.2)).take(excess).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::lifecycle::rfc3339;

    const T0: Millis = 1_767_225_600_000;

    fn pool(replicas: i64, nodes_limit: Option<&str>) -> NodePool {
        let limits = nodes_limit.map(|n| serde_json::json!({"nodes": n}));
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "fixed", "uid": "u-fixed"},
            "spec": {"replicas": replicas, "limits": limits,
                     "template": {"metadata": {"labels": {"team": "infra"}},
                                  "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                                           "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}}
        }))
        .expect("pool")
    }

    fn claim(name: &str, launched: bool, deleting: bool) -> NodeClaim {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "fixed"},
                         "creationTimestamp": rfc3339(T0),
                         "deletionTimestamp": if deleting { Some(rfc3339(T0)) } else { None }},
            "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                     "requirements": [], "expireAfter": "720h"},
            "status": {"providerID": if launched { Some(format!("kwok://{name}")) } else { None }}
        }))
        .expect("claim")
    }

    fn node(name: &str) -> k8s_openapi::api::core::v1::Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "spec": {"providerID": format!("kwok://{name}")}
        }))
        .expect("node")
    }

    fn pod(name: &str, node: &str, daemonset: bool, do_not_disrupt: bool) -> StoredPod {
        let owner = if daemonset {
            serde_json::json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "d", "controller": true}])
        } else {
            serde_json::json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": true}])
        };
        let annotations = if do_not_disrupt {
            serde_json::json!({"karpenter.sh/do-not-disrupt": "true"})
        } else {
            serde_json::json!({})
        };
        let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "ownerReferences": owner, "annotations": annotations},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running"}
        }))
        .expect("pod");
        StoredPod::from(p)
    }

    #[test]
    fn counts_are_disjoint_and_the_node_limit_grants_what_is_left() {
        let claims =
            [claim("a", true, false), claim("b", true, true), claim("c", false, false), claim("d", true, false)];
        let nodes_list = [node("a"), node("b"), node("d")];
        let nodes = Nodes::new(&nodes_list, &claims);
        let busy: BTreeSet<String> = ["d".to_string()].into();
        let c = count("fixed", claims.iter(), &nodes, &busy);
        assert_eq!(c, PoolCount { active: 2, deleting: 1, pending: 1 });
        // › "should not create additional nodeclaims when node limits are reached": replicas 3, nodes 1, one claim.
        let one = PoolCount { active: 1, deleting: 0, pending: 0 };
        assert_eq!(grant(Some(1), &one, 2), 0);
        assert_eq!(grant(Some(2), &one, 2), 1);
        assert_eq!(grant(None, &one, 2), 2);
        // Deleting and pending claims count against the limit too.
        assert_eq!(grant(Some(4), &c, 5), 0);
        // Extreme limits from a manifest neither overflow nor grant anything when negative.
        assert_eq!(grant(Some(i64::MIN), &one, 2), 0);
        assert_eq!(grant(Some(i64::MAX), &one, i64::MAX), i64::MAX - 1);
    }

    #[test]
    fn static_drift_waits_while_over_scaled_and_needs_limits() {
        // › "should wait until nodes are deprovisioned when we are overscaled"
        let over = PoolCount { active: 3, deleting: 0, pending: 0 };
        assert_eq!(drift_allowance(&over, 2, 1, 3, None), 0);
        // › "should not drift nodes when we cannot acquire limits": replicas 5, nodes 5, five drifted.
        let full = PoolCount { active: 5, deleting: 0, pending: 0 };
        assert_eq!(drift_allowance(&full, 5, 5, 5, Some(5)), 0);
        // › "should drift nodes when we can acquire limits": replicas 5, nodes 5, two claims, both drifted.
        let two = PoolCount { active: 2, deleting: 0, pending: 0 };
        assert_eq!(drift_allowance(&two, 5, 5, 2, Some(5)), 2);
        assert_eq!(drift_allowance(&two, 5, 0, 2, Some(5)), 0, "a zero Drifted budget");
    }

    #[test]
    fn scale_down_takes_unlaunched_claims_then_empty_nodes_then_the_cheapest_to_move() {
        // › "should prioritize nodeclaims that have unresolved providerID", › "should prioritize empty nodes (with
        // only daemonset pods) for termination"
        let p = pool(1, None);
        let claims = [
            claim("busy", true, false),
            claim("guarded", true, false),
            claim("daemons-only", true, false),
            claim("unlaunched", false, false),
            claim("two-pods", true, false),
        ];
        let nodes_list = [node("busy"), node("guarded"), node("daemons-only"), node("two-pods")];
        let pods = [
            pod("w1", "busy", false, false),
            pod("w2", "two-pods", false, false),
            pod("w3", "two-pods", false, false),
            pod("g", "guarded", false, true),
            pod("ds", "daemons-only", true, false),
        ];
        let nodes = Nodes::new(&nodes_list, &claims).with_pods(&pods);
        let order = scale_down_order(&p, claims.iter(), &nodes, &BTreeSet::new(), 5, T0 + 60_000);
        assert_eq!(order, ["unlaunched", "daemons-only", "busy", "two-pods", "guarded"]);
        let first_two = scale_down_order(&p, claims.iter(), &nodes, &BTreeSet::new(), 2, T0 + 60_000);
        assert_eq!(first_two, ["unlaunched", "daemons-only"]);
    }

    #[test]
    fn the_static_claim_is_the_template_with_no_type_choice() {
        let c = static_nodeclaim(&pool(2, Some("3")));
        assert_eq!(c.metadata.generate_name.as_deref(), Some("fixed-"));
        let labels = c.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("team").map(String::as_str), Some("infra"));
        assert_eq!(labels.get(labels::NODEPOOL).map(String::as_str), Some("fixed"));
        assert!(c.spec.requirements.iter().any(|r| r.key == "kubernetes.io/arch"));
        assert!(c.spec.requirements.iter().any(|r| r.key == labels::NODEPOOL && r.values[..] == ["fixed"]));
        assert!(!c.spec.requirements.iter().any(|r| r.key == labels::INSTANCE_TYPE));
        assert!(c.spec.resources.requests.is_empty());
        assert_eq!(c.metadata.finalizers.as_deref(), Some(&[labels::TERMINATION_FINALIZER.to_string()][..]));
    }
}
