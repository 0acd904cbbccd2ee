//! A NodePool's status as upstream's NodePool controllers keep it, so `kubectl get nodepools` shows NODES and READY:
//! `status.resources` (the capacity of the pool's nodes, with `nodes`), `status.nodes`, and the conditions
//! `ValidationSucceeded` (the pool passes validation), `NodeClassReady` (its node class exists and is Ready),
//! `NodeRegistrationHealthy` (its last launch registered, or failed to), and the root `Ready`, which follows
//! `ValidationSucceeded` and `NodeClassReady` as upstream's does. Pure: the status from the objects and the time.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::engine::api::nodeclaim::{COND_LAUNCHED, COND_REGISTERED};
use crate::engine::api::nodepool::NodePoolStatus;
use crate::engine::api::validation::validate_nodepool;
use crate::engine::api::{Condition, NodeClaim, NodePool};
use crate::engine::labels::LabelPolicy;
use crate::engine::lifecycle::{STATUS_FALSE, STATUS_TRUE, STATUS_UNKNOWN, parse_rfc3339, set_condition_in};
use crate::engine::provisioning::ClusterSnapshot;
use crate::engine::provisioning::Millis;
use crate::engine::resources::{Resources, format_resource};

pub const COND_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
pub const COND_NODECLASS_READY: &str = "NodeClassReady";
pub const COND_NODE_REGISTRATION_HEALTHY: &str = "NodeRegistrationHealthy";
pub const COND_READY: &str = "Ready";

/// How the cloud judges a NodePool's node class.
#[derive(Debug, Clone, PartialEq)]
pub enum ClassReadiness {
    /// A cloud that needs no node class (KWOK): always ready.
    NotNeeded,
    /// The class's own `Ready` condition, `None` when the class does not exist.
    Class(Option<Condition>),
}

/// A launch or registration timeout this controller just acted on, for `NodeRegistrationHealthy`.
#[derive(Debug, Clone, PartialEq)]
pub struct RegistrationFailure {
    pub reason: String,
    pub message: String,
}

impl RegistrationFailure {
    /// Upstream's wording: a launched claim that never registered, or the launch's own failure.
    pub fn of(claim: &NodeClaim) -> RegistrationFailure {
        match claim.condition(COND_LAUNCHED) {
            Some(c) if c.status == STATUS_TRUE => {
                RegistrationFailure { reason: "RegistrationFailed".into(), message: "Failed to register node".into() }
            }
            c => RegistrationFailure {
                reason: c.and_then(|c| c.reason.clone()).unwrap_or_else(|| "LaunchFailed".into()),
                message: c.and_then(|c| c.message.clone()).unwrap_or_default(),
            },
        }
    }
}

/// Nodes by provider id, built once for every pool of a tick.
pub type NodesById<'a> = BTreeMap<&'a str, &'a Node>;

pub fn nodes_by_id<'a>(m: &ClusterSnapshot<'a>) -> NodesById<'a> {
    m.nodes.iter().filter_map(|n| Some((n.spec.as_ref()?.provider_id.as_deref()?, n))).collect()
}

/// The pool's claims that count: its own, not being deleted.
fn claims_of<'a>(pool: &'a NodePool, m: &'a ClusterSnapshot<'a>) -> impl Iterator<Item = &'a NodeClaim> + 'a {
    m.nodeclaims.iter().filter(move |c| c.nodepool() == Some(pool.name()) && c.metadata.deletion_timestamp.is_none())
}

/// The capacity of the pool's nodes: each node's own capacity once it has registered, its claim's until then, plus
/// `nodes`. Upstream always lists cpu, memory, pods, ephemeral-storage and nodes, zero or not.
fn resources(
    pool: &NodePool,
    m: &ClusterSnapshot<'_>,
    nodes_by_id: &NodesById<'_>,
) -> (BTreeMap<String, Quantity>, i64) {
    let mut total = Resources::default();
    let mut nodes = 0i64;
    for c in claims_of(pool, m) {
        let node = c.provider_id().and_then(|pid| nodes_by_id.get(pid));
        let node_capacity = node.and_then(|n| n.status.as_ref()).and_then(|s| s.capacity.as_ref());
        let parsed = match node_capacity {
            Some(cap) => Resources::from_quantities(cap.iter().map(|(k, q)| (k.as_str(), q.0.as_str()))),
            None => Resources::from_quantities(
                c.status.iter().flat_map(|s| s.capacity.iter()).map(|(k, q)| (k.as_str(), q.0.as_str())),
            ),
        };
        // A capacity that doesn't parse counts the node but none of its resources.
        total.add(&parsed.unwrap_or_default());
        nodes += 1;
    }
    let mut out: BTreeMap<String, Quantity> = ["cpu", "memory", "pods", "ephemeral-storage"]
        .into_iter()
        .map(|k| (k.to_string(), Quantity(format_resource(k, total.get(k)))))
        .collect();
    for (k, v) in &total.extended {
        out.insert(k.clone(), Quantity(format_resource(k, *v)));
    }
    out.insert("nodes".into(), Quantity(nodes.to_string()));
    (out, nodes)
}

/// The status the pool should have now, starting from the one it has (transition times are kept while a
/// condition's status holds). `failure` is a registration failure this controller acted on in this tick.
pub fn desired(
    pool: &NodePool,
    m: &ClusterSnapshot<'_>,
    class: &ClassReadiness,
    policy: &LabelPolicy,
    failure: Option<&RegistrationFailure>,
    nodes_by_id: &NodesById<'_>,
    now: Millis,
) -> NodePoolStatus {
    let mut status = pool.status.clone().unwrap_or_default();
    let (resources, nodes) = resources(pool, m, nodes_by_id);
    status.resources = resources;
    status.nodes = Some(nodes);
    let conditions = &mut status.conditions;

    let errors = validate_nodepool(pool, policy);
    match errors.first() {
        None => {
            set_condition_in(conditions, COND_VALIDATION_SUCCEEDED, STATUS_TRUE, COND_VALIDATION_SUCCEEDED, "", now)
        }
        Some(e) => {
            let more = errors.len() - 1;
            let e = format!("{}: {}", e.path, e.message);
            let message = if more > 0 { format!("{e} (and {more} more)") } else { e };
            set_condition_in(
                conditions,
                COND_VALIDATION_SUCCEEDED,
                STATUS_FALSE,
                "NodePoolValidationFailed",
                &message,
                now,
            )
        }
    }

    let class_name = &pool.spec.template.spec.node_class_ref.name;
    let (s, reason, message) = match class {
        ClassReadiness::NotNeeded => (STATUS_TRUE, COND_NODECLASS_READY.to_string(), String::new()),
        ClassReadiness::Class(None) => {
            (STATUS_FALSE, "NodeClassNotFound".into(), format!("NodeClass {class_name} not found on cluster"))
        }
        ClassReadiness::Class(Some(c)) if c.status == STATUS_TRUE => {
            (STATUS_TRUE, COND_NODECLASS_READY.to_string(), String::new())
        }
        ClassReadiness::Class(Some(c)) => {
            let why = c.message.clone().filter(|m| !m.is_empty()).unwrap_or_else(|| "NodeClass is not ready".into());
            let status = if c.status == STATUS_FALSE { STATUS_FALSE } else { STATUS_UNKNOWN };
            (status, "NodeClassNotReady".into(), why)
        }
    };
    set_condition_in(conditions, COND_NODECLASS_READY, s, &reason, &message, now);

    // NodeRegistrationHealthy: False on a failure acted on now; True once a claim of the pool registers after the
    // condition last changed (or when it was never set); otherwise as it is.
    let health = conditions.iter().find(|c| c.type_ == COND_NODE_REGISTRATION_HEALTHY).cloned();
    let since = health.as_ref().and_then(|c| c.last_transition_time.as_deref()).and_then(parse_rfc3339);
    let registered_since = claims_of(pool, m).any(|c| {
        c.condition(COND_REGISTERED).is_some_and(|r| {
            r.status == STATUS_TRUE
                && since.is_none_or(|at| r.last_transition_time.as_deref().and_then(parse_rfc3339) > Some(at))
        })
    });
    if let Some(f) = failure {
        set_condition_in(conditions, COND_NODE_REGISTRATION_HEALTHY, STATUS_FALSE, &f.reason, &f.message, now);
    } else if registered_since && health.as_ref().is_none_or(|h| h.status != STATUS_TRUE) {
        let r = COND_NODE_REGISTRATION_HEALTHY;
        set_condition_in(conditions, r, STATUS_TRUE, r, "", now);
    }

    // Root Ready: ValidationSucceeded and NodeClassReady (registration health is informational, as upstream).
    let get = |t: &str| conditions.iter().find(|c| c.type_ == t).map_or(STATUS_UNKNOWN, |c| c.status.as_str());
    let deps = [COND_VALIDATION_SUCCEEDED, COND_NODECLASS_READY];
    let unhealthy: Vec<String> =
        deps.iter().filter(|t| get(t) != STATUS_TRUE).map(|t| format!("{t}={}", get(t))).collect();
    let (s, reason) = if unhealthy.is_empty() {
        (STATUS_TRUE, COND_READY)
    } else if deps.iter().any(|t| get(t) == STATUS_FALSE) {
        (STATUS_FALSE, "UnhealthyDependents")
    } else {
        (STATUS_UNKNOWN, "ReconcilingDependents")
    };
    let message = unhealthy.join(", ");
    set_condition_in(conditions, COND_READY, s, reason, &message, now);
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(text: &str) -> crate::engine::manifests::ClusterObjects {
        crate::engine::manifests::ClusterObjects::parse(text, "objects.yaml").unwrap()
    }

    const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
"#;

    const CLAIM: &str = r#"
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-a, labels: {karpenter.sh/nodepool: default}}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements: []
status:
  providerID: aws:///us-east-1a/i-1
  capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  conditions:
    - {type: Launched, status: "True", reason: Launched, lastTransitionTime: "2026-01-01T00:00:00Z"}
    - {type: Registered, status: "True", reason: Registered, lastTransitionTime: "2026-01-01T00:01:00Z"}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-b, labels: {karpenter.sh/nodepool: default}}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements: []
status:
  capacity: {cpu: "2", memory: 8Gi, pods: "58"}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
spec: {providerID: "aws:///us-east-1a/i-1"}
status: {capacity: {cpu: "4", memory: 15Gi, pods: "110", ephemeral-storage: 20Gi}}
"#;

    fn cond<'a>(s: &'a NodePoolStatus, t: &str) -> (&'a str, &'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == t).unwrap();
        (c.status.as_str(), c.reason.as_deref().unwrap_or(""), c.message.as_deref().unwrap_or(""))
    }

    #[test]
    fn resources_count_the_nodes_and_their_capacity_and_ready_follows_the_class() {
        let m = objects(&format!("{POOL}{CLAIM}"));
        let pool = &m.nodepools[0];
        let policy = crate::engine::catalog::kwok::kwok_catalog("us-east-1").label_policy;
        let s = desired(
            pool,
            &m.view(),
            &ClassReadiness::NotNeeded,
            &policy,
            None,
            &nodes_by_id(&m.view()),
            1_767_225_600_000,
        );
        assert_eq!(s.nodes, Some(2));
        let q = |k: &str| s.resources.get(k).map(|q| q.0.as_str());
        // The registered claim's node counts with the node's capacity, the other with its claim's.
        assert_eq!((q("cpu"), q("memory"), q("pods"), q("nodes")), (Some("6"), Some("23Gi"), Some("168"), Some("2")));
        assert_eq!(q("ephemeral-storage"), Some("20Gi"));
        assert_eq!(cond(&s, "ValidationSucceeded").0, "True");
        assert_eq!(cond(&s, "NodeClassReady").0, "True");
        assert_eq!(cond(&s, "Ready"), ("True", "Ready", ""));
        assert_eq!(cond(&s, "NodeRegistrationHealthy").0, "True", "a claim registered");

        let missing = desired(
            pool,
            &m.view(),
            &ClassReadiness::Class(None),
            &policy,
            None,
            &nodes_by_id(&m.view()),
            1_767_225_600_000,
        );
        assert_eq!(
            cond(&missing, "NodeClassReady"),
            ("False", "NodeClassNotFound", "NodeClass default not found on cluster")
        );
        assert_eq!(cond(&missing, "Ready"), ("False", "UnhealthyDependents", "NodeClassReady=False"));
    }

    #[test]
    fn a_registration_failure_makes_registration_unhealthy_until_a_later_registration() {
        let m = objects(&format!("{POOL}{CLAIM}"));
        let mut pool = m.nodepools[0].clone();
        let policy = crate::engine::catalog::kwok::kwok_catalog("us-east-1").label_policy;
        let failure = RegistrationFailure::of(&m.nodeclaims[0]);
        assert_eq!(failure.reason, "RegistrationFailed");
        let later = 1_767_225_600_000 + 3_600_000; // after the claim registered
        let s = desired(
            &pool,
            &m.view(),
            &ClassReadiness::NotNeeded,
            &policy,
            Some(&failure),
            &nodes_by_id(&m.view()),
            later,
        );
        assert_eq!(cond(&s, "NodeRegistrationHealthy"), ("False", "RegistrationFailed", "Failed to register node"));
        assert_eq!(cond(&s, "Ready").0, "True", "registration health doesn't gate Ready");
        pool.status = Some(s);
        // The registration that happened before the failure doesn't heal it.
        let s = desired(
            &pool,
            &m.view(),
            &ClassReadiness::NotNeeded,
            &policy,
            None,
            &nodes_by_id(&m.view()),
            later + 1_000,
        );
        assert_eq!(cond(&s, "NodeRegistrationHealthy").0, "False");
    }
}
