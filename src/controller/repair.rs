//! Node auto repair (gate `NodeRepair`), as upstream's `node.health` controller: a node whose conditions match one
//! of the cloud's repair policies for longer than the policy tolerates has its NodeClaim deleted forcefully — the
//! termination timestamp is set to now, so the drain deletes pods at once, and budgets, do-not-disrupt and the
//! approval gate are not asked (a repair is involuntary). Unless more than 20 % of the nodes in the NodePool (or in
//! the cluster, for a NodeClaim without one) are unhealthy: then nothing is repaired and `NodeDisruptionBlocked` says
//! why, since replacing a whole pool at once usually means the fault is elsewhere.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition, ObjectReference};

use super::cloud::{RepairAction, RepairPolicy};
use super::out::Out;
use super::reboot;
use super::repair_policy::Policies;
use super::timing::MINUTE;
use super::{Controller, Effect};
use crate::engine::api::NodeClaim;
use crate::engine::disruption::repair::{BlockReason, DisruptionBlocked, Due, RepairInputs, says_do_not_repair};
use crate::engine::labels;
use crate::engine::lifecycle::{self, DeleteReason};
use crate::engine::provisioning::{ClusterSnapshot, Millis};
use crate::engine::state;
use crate::engine::version::KarpenterVersion;

pub use crate::engine::disruption::repair::{ALLOWED_UNHEALTHY_PERCENT, unhealthy_threshold};
/// A blocked repair is looked at again after this long.
pub const BLOCKED_REQUEUE: Millis = 5 * MINUTE;
/// Repairs remembered for the dashboard and the report, at most.
const MAX_REPAIR_RECORDS: usize = 500;
/// `NodeDisruptionBlocked` is published at most this often per object.
pub const BLOCKED_EVENT_REPEAT: Millis = 15 * MINUTE;

/// A node a repair policy matches: which condition, since when, and when it is repaired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    pub condition: String,
    pub status: String,
    pub reason: Option<String>,
    /// The condition's lastTransitionTime (a condition without one counts as having held forever, as upstream's
    /// zero time does).
    pub since: Millis,
    /// `since` + the policy's toleration: the earliest over every policy the node matches.
    pub deadline: Millis,
}

/// A repair carried out, for the report and the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairRecord {
    pub at: Millis,
    pub node: String,
    pub nodeclaim: String,
    pub nodepool: Option<String>,
    pub condition: String,
    pub status: String,
}

fn condition<'a>(n: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// Whether any policy matches the node now, however long it has held (upstream counts such nodes toward the 20 %).
fn matches_any(n: &Node, policies: &[RepairPolicy]) -> bool {
    policies.iter().any(|p| condition(n, p.condition_type).is_some_and(|c| c.status == p.condition_status))
}

/// The policy match with the earliest deadline, if any policy matches the node.
pub fn unhealthy(n: &Node, policies: &[RepairPolicy]) -> Option<Unhealthy> {
    policies
        .iter()
        .filter_map(|p| {
            let c = condition(n, p.condition_type).filter(|c| c.status == p.condition_status)?;
            let since = c.last_transition_time.as_ref().map_or(Millis::MIN / 2, lifecycle::time_ms);
            Some(Unhealthy {
                condition: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                since,
                deadline: since.saturating_add(p.toleration),
            })
        })
        .min_by_key(|u| u.deadline)
}

/// What a single disruption pass outside the controller (`plan`, the observing dashboard) gives v1.15's repair: the
/// nodes due by the cloud's `policies` (those behind a gate that is off left out), with no reboot history. Empty
/// unless repair is voluntary (`NodeRepair` under 1.15; `legacy` is `--legacy-node-repair`).
pub fn one_pass_repair_inputs(
    policies: Vec<RepairPolicy>,
    gates: crate::controller::settings::FeatureGates,
    version: KarpenterVersion,
    legacy: bool,
    s: &ClusterSnapshot<'_>,
    now: Millis,
) -> RepairInputs {
    if !gates.node_repair || version < KarpenterVersion::V1_15 || legacy {
        return RepairInputs::default();
    }
    let policies: Vec<RepairPolicy> =
        policies.into_iter().filter(|p| p.gate.is_none_or(|g| gates.get(g) == Some(true))).collect();
    match Policies::new(policies) {
        Ok(set) => repair_inputs_with(&set, s, now, |_| false),
        Err(_) => RepairInputs::default(),
    }
}

/// The repair method's inputs from a policy set: the nodes due, each pool's health, when the next match is due.
/// `escalated` says whether a reboot of the claim would be its third within a day (then it is replaced).
fn repair_inputs_with(
    set: &Policies,
    s: &ClusterSnapshot<'_>,
    now: Millis,
    escalated: impl Fn(&NodeClaim) -> bool,
) -> RepairInputs {
    let mut inputs = RepairInputs::default();
    let joined = state::Nodes::of(s);
    for n in s.nodes.iter() {
        let watched = set.watches(n);
        if let Some(pool) = n.metadata.labels.as_ref().and_then(|l| l.get(labels::NODEPOOL)) {
            let e = inputs.health.entry(pool.clone()).or_default();
            e.0 += 1;
            e.1 += usize::from(watched);
        }
        if !watched {
            continue;
        }
        let name = n.metadata.name.as_deref().unwrap_or_default();
        let claim = joined.claim_of(name);
        // A node rebooting is the reboot's until it ends.
        if claim.is_some_and(reboot::in_progress) {
            continue;
        }
        // After a reboot, tolerations count from when it finished.
        let not_before = claim.and_then(reboot::finished_at);
        let matches = set.matches(n);
        if let Some(at) = set.next_eligible(&matches, not_before, now) {
            inputs.next_due = Some(inputs.next_due.map_or(at, |t| t.min(at)));
        }
        let Some(r) = set.resolve(&matches, not_before, now) else { continue };
        let escalated = claim.is_some_and(&escalated);
        let due = Due {
            condition: r.condition,
            score: r.score,
            eligible_since: r.eligible_since,
            policy_grace: r.drain_bound,
            reboot: r.action == RepairAction::Reboot && !escalated,
        };
        inputs.due.insert(n.metadata.name.clone().unwrap_or_default(), due);
    }
    inputs
}

impl Controller {
    /// The cloud's repair policies (see [`super::cloud::CloudProvider::repair_policies`]).
    pub fn set_repair_policies(&mut self, mut policies: Vec<RepairPolicy>) {
        // A policy behind a gate that is off does not exist (AWS's reboots without `RebootForRepair`).
        let gates = self.gates;
        policies.retain(|p| p.gate.is_none_or(|g| gates.get(g) == Some(true)));
        self.repair_set = match Policies::new(policies.clone()) {
            Ok(set) => Some(set),
            Err(e) => {
                // Upstream refuses to start with such a set; here v1.15's repair stays off and says why.
                tracing::error!(error = %e, "the cloud's repair policies are invalid: node repair is off");
                None
            }
        };
        self.repair_policies = policies;
    }

    /// Whether repair is v1.15's voluntary method (gate `NodeRepair`, version 1.15, not `--legacy-node-repair`)
    /// rather than v1.14's forceful one.
    pub fn voluntary_repair(&self) -> bool {
        self.gates.node_repair && self.version >= KarpenterVersion::V1_15 && !self.legacy_node_repair
    }

    /// What the disruption pass's repair method reads: the nodes due for repair by the cloud's policies, each
    /// pool's health, and when the next match becomes due. Empty unless repair is voluntary.
    pub(super) fn repair_inputs(&self, s: &ClusterSnapshot<'_>, now: Millis) -> RepairInputs {
        let Some(set) = self.repair_set.as_ref().filter(|_| self.voluntary_repair()) else {
            return RepairInputs::default();
        };
        // The third fault within a day is not rebooted away again: the node is replaced.
        repair_inputs_with(set, s, now, |c| self.reboots.recent(c.name(), now) >= reboot::MAX_REBOOTS_PER_DAY)
    }

    /// The Events for nodes the repair method held back: on the Node and the NodeClaim, and for the breaker on the
    /// NodePool too.
    pub(super) fn pass_blocked_events(
        &mut self,
        s: &ClusterSnapshot<'_>,
        blocked: &[DisruptionBlocked],
        now: Millis,
        out: &mut Out,
    ) {
        for b in blocked {
            let (reason, message) = (b.why.event_reason(), b.why.message());
            let warning = matches!(b.why, BlockReason::Breaker { .. });
            let node_uid = s
                .nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(&b.node))
                .and_then(|n| n.metadata.uid.clone());
            let claim_uid = s.nodeclaims.iter().find(|c| c.name() == b.nodeclaim).and_then(|c| c.metadata.uid.clone());
            let node_ref = object_ref("Node", "v1", &b.node, node_uid);
            let claim_ref = object_ref("NodeClaim", "karpenter.sh/v1", &b.nodeclaim, claim_uid);
            self.event(node_ref, warning, reason, message.clone(), now, out);
            self.event(claim_ref, warning, reason, message.clone(), now, out);
            if let Some(p) = &b.nodepool {
                self.event(object_ref("NodePool", "karpenter.sh/v1", p, None), warning, reason, message, now, out);
            }
        }
    }

    /// The policies node repair acts on: none unless the `NodeRepair` gate is on.
    pub fn active_repair_policies(&self) -> &[RepairPolicy] {
        if self.gates.node_repair { &self.repair_policies } else { &[] }
    }

    /// Every repair carried out so far, oldest first.
    pub fn repairs(&self) -> &[RepairRecord] {
        &self.repairs
    }

    /// Deletes an unhealthy node's NodeClaim forcefully: the drain's deadline is now (an annotation already in the
    /// past is kept), and the repair is recorded.
    fn repair_claim(
        &mut self,
        claim: &NodeClaim,
        node_name: String,
        pool: Option<String>,
        u: Unhealthy,
        now: Millis,
        out: &mut Out,
    ) {
        if let Some(e) = super::forceful_deadline(claim, now) {
            out.push(e);
        }
        if claim.metadata.deletion_timestamp.is_some() {
            return;
        }
        out.push(Effect::DeleteNodeClaim { name: claim.name().to_string(), reason: DeleteReason::Unhealthy });
        // A delete asked again while the cache lags is the same repair; a long-running controller keeps the last
        // few hundred.
        if self.repairs.iter().rev().any(|r| r.nodeclaim == claim.name()) {
            return;
        }
        if self.repairs.len() >= MAX_REPAIR_RECORDS {
            self.repairs.remove(0);
        }
        self.repairs.push(RepairRecord {
            at: now,
            node: node_name,
            nodeclaim: claim.name().to_string(),
            nodepool: pool,
            condition: u.condition,
            status: u.status,
        });
    }

    /// An operator's "repair now" (the dashboard's Nodes pane): the node must be one node repair would repair once
    /// its toleration runs out; it is repaired at once, as that would do, without waiting for the rest of the
    /// toleration or the 20 % rule (the operator has looked at it).
    pub fn repair_now(
        &mut self,
        s: &ClusterSnapshot<'_>,
        node: &str,
        now: Millis,
    ) -> Result<(Vec<Effect>, String), String> {
        if self.active_repair_policies().is_empty() {
            return Err("node repair is off (feature gate NodeRepair, or a cloud without repair policies)".into());
        }
        let n = s
            .nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(node))
            .ok_or_else(|| format!("node {node} does not exist"))?;
        let claim = state::Nodes::of(s)
            .claim_of(node)
            .filter(|c| self.ours(c.provider_id()))
            .ok_or_else(|| format!("node {node} has no NodeClaim of this cloud: it is not ours to repair"))?;
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!("NodeClaim {} is already being deleted", claim.name()));
        }
        let u = unhealthy(n, &self.repair_policies)
            .ok_or_else(|| format!("node {node} matches no repair policy: it is healthy as far as repair goes"))?;
        let pool = claim.metadata.labels.as_ref().and_then(|l| l.get(labels::NODEPOOL)).cloned();
        let message = format!(
            "repairing {node}: {}={} since {}, NodeClaim {} deleted with a termination time of now",
            u.condition,
            u.status,
            lifecycle::rfc3339(u.since.max(0)),
            claim.name()
        );
        let mut out = Out::default();
        self.repair_claim(claim, node.to_string(), pool, u, now, &mut out);
        Ok((out.finish(s), message))
    }

    /// One node.health pass over every node of ours with a NodeClaim: repairs those past their deadline, and asks
    /// to run again at the earliest deadline still ahead (or, when blocked by the 20 % rule, in 5 minutes).
    pub(super) fn repair(&mut self, s: &ClusterSnapshot<'_>, now: Millis, out: &mut Out) {
        if self.active_repair_policies().is_empty() || self.voluntary_repair() {
            return;
        }
        let policies = self.repair_policies.clone();
        let claims: BTreeMap<&str, &NodeClaim> =
            s.nodeclaims.iter().filter_map(|c| Some((c.provider_id()?, c))).collect();
        // The 20 % rule's counts, per NodePool label value and for the whole cluster, over every Node.
        let mut totals: BTreeMap<Option<&str>, (usize, usize)> = BTreeMap::new();
        for n in s.nodes.iter() {
            let bad = matches_any(n, &policies);
            let pool = n.metadata.labels.as_ref().and_then(|l| l.get(labels::NODEPOOL)).map(String::as_str);
            for key in [pool.map(Some), Some(None)].into_iter().flatten() {
                let e = totals.entry(key).or_default();
                e.0 += 1;
                e.1 += usize::from(bad);
            }
        }
        for n in s.nodes.iter() {
            let pid = state::node_provider_id(n);
            let Some(claim) = pid.filter(|p| self.ours(Some(p))).and_then(|p| claims.get(p).copied()) else {
                continue;
            };
            let Some(u) = unhealthy(n, &policies) else { continue };
            // v1.15's legacy controller leaves a rebooting node to its reboot, and reads the veto too.
            if reboot::in_progress(claim) {
                continue;
            }
            if self.version.reads_do_not_repair()
                && (says_do_not_repair(n.metadata.annotations.as_ref())
                    || says_do_not_repair(claim.metadata.annotations.as_ref()))
            {
                continue;
            }
            if u.deadline > now {
                self.requeue(u.deadline);
                continue;
            }
            let node_name = n.metadata.name.clone().unwrap_or_default();
            let pool = claim.metadata.labels.as_ref().and_then(|l| l.get(labels::NODEPOOL)).cloned();
            let (total, bad) = totals.get(&pool.as_deref()).copied().unwrap_or((0, 0));
            if bad > unhealthy_threshold(total) {
                let message = match &pool {
                    Some(_) => format!("more than {ALLOWED_UNHEALTHY_PERCENT}% nodes are unhealthy in the nodepool"),
                    // Upstream's wording, typo included: operators grep for it.
                    None => format!("more then {ALLOWED_UNHEALTHY_PERCENT}% nodes are unhealthy in the cluster"),
                };
                let node_ref = object_ref("Node", "v1", &node_name, n.metadata.uid.clone());
                let claim_ref = object_ref("NodeClaim", "karpenter.sh/v1", claim.name(), claim.metadata.uid.clone());
                self.event_every(
                    node_ref,
                    true,
                    "NodeDisruptionBlocked",
                    message.clone(),
                    now,
                    BLOCKED_EVENT_REPEAT,
                    out,
                );
                self.event_every(
                    claim_ref,
                    true,
                    "NodeDisruptionBlocked",
                    message.clone(),
                    now,
                    BLOCKED_EVENT_REPEAT,
                    out,
                );
                if let Some(p) = &pool {
                    let pool_ref = object_ref("NodePool", "karpenter.sh/v1", p, None);
                    self.event_every(pool_ref, true, "NodeDisruptionBlocked", message, now, BLOCKED_EVENT_REPEAT, out);
                }
                self.requeue(now + BLOCKED_REQUEUE);
                continue;
            }
            self.repair_claim(claim, node_name, pool, u, now, out);
        }
    }
}

pub(super) fn object_ref(kind: &str, api_version: &str, name: &str, uid: Option<String>) -> ObjectReference {
    ObjectReference {
        kind: Some(kind.into()),
        api_version: Some(api_version.into()),
        name: Some(name.into()),
        uid,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    //! Upstream's `controllers/node/health/suite_test.go` cases, at the controller's level (the scenario-level ones
    //! are in tests/node_repair.rs).
    use std::sync::Arc;

    use super::*;
    use crate::controller::Settings;
    use crate::controller::cloud::{RepairPolicy, kwok_repair_policies};
    use crate::engine::catalog::fake::fake_catalog;
    use crate::engine::disruption::gate::Mode;
    use crate::engine::provisioning::Snapshot;

    const T0: Millis = 1_767_225_600_000;

    fn node(name: &str, pool: Option<&str>, ready: &str, since: Millis) -> Node {
        let mut labels = serde_json::Map::new();
        if let Some(p) = pool {
            labels.insert(labels::NODEPOOL.into(), p.into());
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "uid": format!("uid-{name}"), "labels": labels,
                         "finalizers": [labels::TERMINATION_FINALIZER]},
            "spec": {"providerID": format!("kwok://{name}")},
            "status": {"conditions": [
                {"type": "Ready", "status": ready, "reason": "KubeletNotReady",
                 "lastTransitionTime": lifecycle::rfc3339(since), "lastHeartbeatTime": lifecycle::rfc3339(since)}]}
        }))
        .expect("node")
    }

    fn claim(name: &str, pool: Option<&str>) -> NodeClaim {
        let mut labels = serde_json::Map::new();
        if let Some(p) = pool {
            labels.insert(labels::NODEPOOL.into(), p.into());
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": format!("{name}-claim"), "labels": labels, "finalizers": [labels::TERMINATION_FINALIZER]},
            "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                     "requirements": []},
            "status": {"providerID": format!("kwok://{name}"), "nodeName": name}
        }))
        .expect("claim")
    }

    /// `unhealthy` of `n` nodes are NotReady since T0, the rest Ready; all in `pool`.
    fn cluster(n: usize, unhealthy: usize, pool: Option<&str>) -> Snapshot {
        let mut s = Snapshot::default();
        for i in 0..n {
            let name = format!("node-{i}");
            let ready = if i < unhealthy { "False" } else { "True" };
            s.nodes.push(node(&name, pool, ready, T0).into());
            s.nodeclaims.push(claim(&name, pool).into());
        }
        s
    }

    fn controller(repair: bool, policies: Vec<RepairPolicy>) -> Controller {
        // v1.14's forceful repair; v1.15's voluntary one is tested in `tests/node_repair_v115.rs`.
        let mut settings =
            Settings { mode: Mode::Approve, karpenter_version: KarpenterVersion::V1_14, ..Settings::default() };
        settings.gates.node_repair = repair;
        let mut c = Controller::with_settings(Arc::new(fake_catalog()), settings, T0);
        c.set_repair_policies(policies);
        c
    }

    fn deleted(effects: &[Effect]) -> Vec<String> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::DeleteNodeClaim { name, reason: DeleteReason::Unhealthy } => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn deletes_nodes_unhealthy_by_the_cloud_providers_policy_once_tolerated() {
        // › "should delete nodes that are unhealthy by the cloud provider"
        let s = cluster(5, 1, Some("default"));
        let mut c = controller(true, kwok_repair_policies());
        let early = c.lifecycle(&s.view(), T0 + 9 * MINUTE);
        assert!(deleted(&early).is_empty(), "still within the 10 minute toleration");
        assert_eq!(c.requeue_at(), Some(T0 + 10 * MINUTE), "requeued exactly at the deadline");
        let now = T0 + 10 * MINUTE;
        let effects = c.lifecycle(&s.view(), now);
        assert_eq!(deleted(&effects), vec!["node-0-claim".to_string()]);
        let stamped = effects.iter().any(|e| {
            matches!(e, Effect::PatchClaimMetadata { name, annotations, .. }
                if name == "node-0-claim"
                    && annotations.get(lifecycle::ANNOTATION_TERMINATION_TIMESTAMP) == Some(&lifecycle::rfc3339(now)))
        });
        assert!(stamped, "the termination timestamp is now, so the drain is forceful: {effects:?}");
        assert_eq!(c.repairs().len(), 1);
        assert_eq!((c.repairs()[0].node.as_str(), c.repairs()[0].condition.as_str()), ("node-0", "Ready"));
    }

    #[test]
    fn keeps_a_node_whose_condition_status_does_not_match() {
        // › "should not delete node when health status does not match cloud provider passed in value"
        let mut s = cluster(5, 0, Some("default"));
        s.nodes[0] = node("node-0", Some("default"), "True", T0).into();
        let only_false = vec![RepairPolicy::fallback("Ready", "False", MINUTE)];
        let mut c = controller(true, only_false);
        assert!(deleted(&c.lifecycle(&s.view(), T0 + 60 * MINUTE)).is_empty());
        s.nodes[0] = node("node-0", Some("default"), "Unknown", T0).into();
        assert!(deleted(&c.lifecycle(&s.view(), T0 + 60 * MINUTE)).is_empty(), "Unknown is not False");
    }

    #[test]
    fn requeues_for_the_condition_closest_to_its_toleration() {
        // › "should return the requeue interval for the condition closest to its terminationDuration"
        let mut s = cluster(5, 0, Some("default"));
        let mut n = node("node-0", Some("default"), "False", T0);
        n.status.as_mut().and_then(|st| st.conditions.as_mut()).expect("conditions").push(NodeCondition {
            type_: "StorageReady".into(),
            status: "False".into(),
            last_transition_time: Some(lifecycle::ms_time(T0)),
            ..Default::default()
        });
        s.nodes[0] = n.into();
        let policies = vec![
            RepairPolicy::fallback("Ready", "False", 60 * MINUTE),
            RepairPolicy::fallback("StorageReady", "False", 30 * MINUTE),
        ];
        let mut c = controller(true, policies);
        let now = T0 + 27 * MINUTE;
        assert!(deleted(&c.lifecycle(&s.view(), now)).is_empty());
        assert_eq!(c.requeue_at().map(|t| t - now), Some(3 * MINUTE));
        let effects = c.lifecycle(&s.view(), T0 + 30 * MINUTE);
        assert_eq!(deleted(&effects).len(), 1);
        assert_eq!(c.repairs()[0].condition, "StorageReady");
    }

    #[test]
    fn more_than_20_percent_unhealthy_in_a_nodepool_blocks_repair() {
        // › "should ignore unhealthy nodes if more then 20% of the nodes are unhealthy in a nodepool"
        let s = cluster(10, 3, Some("default"));
        let mut c = controller(true, kwok_repair_policies());
        let now = T0 + 60 * MINUTE;
        let effects = c.lifecycle(&s.view(), now);
        assert!(deleted(&effects).is_empty());
        assert_eq!(c.requeue_at(), Some(now + BLOCKED_REQUEUE));
        let blocked: Vec<&str> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::Event { reason, message, regarding, .. } if reason == "NodeDisruptionBlocked" => {
                    assert_eq!(message, "more than 20% nodes are unhealthy in the nodepool");
                    regarding.kind.as_deref()
                }
                _ => None,
            })
            .collect();
        assert!(blocked.contains(&"Node") && blocked.contains(&"NodeClaim") && blocked.contains(&"NodePool"));
        // Published again only after 15 minutes.
        let again = c.lifecycle(&s.view(), now + 5 * MINUTE);
        assert!(!again.iter().any(|e| matches!(e, Effect::Event { reason, regarding, .. }
            if reason == "NodeDisruptionBlocked" && regarding.kind.as_deref() == Some("NodePool"))));
    }

    #[test]
    fn the_20_percent_rounds_up_for_small_pools() {
        // › "should consider round up when there is a low number of nodes for a nodepool"
        let s = cluster(3, 1, Some("default"));
        let mut c = controller(true, kwok_repair_policies());
        assert_eq!(deleted(&c.lifecycle(&s.view(), T0 + 60 * MINUTE)).len(), 1);
        assert_eq!((unhealthy_threshold(3), unhealthy_threshold(10), unhealthy_threshold(0)), (1, 2, 0));
    }

    #[test]
    fn a_nodeclaim_without_a_nodepool_is_judged_against_the_cluster() {
        let s = cluster(4, 2, None);
        let mut c = controller(true, kwok_repair_policies());
        let effects = c.lifecycle(&s.view(), T0 + 60 * MINUTE);
        assert!(deleted(&effects).is_empty());
        assert!(effects.iter().any(|e| matches!(e, Effect::Event { message, .. }
            if message == "more then 20% nodes are unhealthy in the cluster")));
    }

    #[test]
    fn nothing_is_repaired_with_the_gate_off_or_without_policies() {
        let s = cluster(5, 1, Some("default"));
        let mut off = controller(false, kwok_repair_policies());
        assert!(deleted(&off.lifecycle(&s.view(), T0 + 60 * MINUTE)).is_empty());
        let mut none = controller(true, Vec::new());
        assert!(deleted(&none.lifecycle(&s.view(), T0 + 60 * MINUTE)).is_empty());
    }

    #[test]
    fn a_repair_is_not_held_for_approval() {
        // The approve mode holds voluntary disruption only: a repair is involuntary.
        let s = cluster(5, 1, Some("default"));
        let mut c = controller(true, kwok_repair_policies());
        assert_eq!(c.mode(), Mode::Approve);
        let effects = c.lifecycle(&s.view(), T0 + 10 * MINUTE);
        assert_eq!(deleted(&effects).len(), 1);
        assert!(c.gate().proposals().is_empty());
    }
}
