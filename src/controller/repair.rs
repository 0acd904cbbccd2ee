//! Node auto repair (gate `NodeRepair`), as upstream's `node.health` controller: a node whose conditions match one
//! of the cloud's repair policies for longer than the policy tolerates has its NodeClaim deleted forcefully — the
//! termination timestamp is set to now, so the drain deletes pods at once, and budgets, do-not-disrupt and the
//! approval gate are not asked (a repair is involuntary). Unless more than 20 % of the nodes in the NodePool (or in
//! the cluster, for a NodeClaim without one) are unhealthy: then nothing is repaired and `NodeRepairBlocked` says
//! why, since replacing a whole pool at once usually means the fault is elsewhere.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition, ObjectReference};

use super::cloud::RepairPolicy;
use super::out::Out;
use super::timing::MINUTE;
use super::{Controller, Effect};
use crate::engine::api::NodeClaim;
use crate::engine::labels;
use crate::engine::lifecycle::{self, DeleteReason};
use crate::engine::provisioning::{ClusterSnapshot, Millis};

/// At most this share of a NodePool's (or the cluster's) nodes may be unhealthy for repair to go on, rounded up.
pub const ALLOWED_UNHEALTHY_PERCENT: u64 = 20;
/// A blocked repair is looked at again after this long.
pub const BLOCKED_REQUEUE: Millis = 5 * MINUTE;
/// `NodeRepairBlocked` is published at most this often per object.
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

/// `ceil(20 % × total)`: how many unhealthy nodes a scope of `total` nodes tolerates.
pub fn unhealthy_threshold(total: usize) -> usize {
    (total as u64 * ALLOWED_UNHEALTHY_PERCENT).div_ceil(100) as usize
}

impl Controller {
    /// The cloud's repair policies (see [`super::cloud::CloudProvider::repair_policies`]).
    pub fn set_repair_policies(&mut self, policies: Vec<RepairPolicy>) {
        self.repair_policies = policies;
    }

    /// The policies node repair acts on: none unless the `NodeRepair` gate is on.
    pub fn active_repair_policies(&self) -> &[RepairPolicy] {
        if self.gates.node_repair { &self.repair_policies } else { &[] }
    }

    /// Every repair carried out so far, oldest first.
    pub fn repairs(&self) -> &[RepairRecord] {
        &self.repairs
    }

    /// One node.health pass over every node of ours with a NodeClaim: repairs those past their deadline, and asks
    /// to run again at the earliest deadline still ahead (or, when blocked by the 20 % rule, in 5 minutes).
    pub(super) fn repair(&mut self, s: &ClusterSnapshot<'_>, now: Millis, out: &mut Out) {
        if self.active_repair_policies().is_empty() {
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
            let pid = n.spec.as_ref().and_then(|s| s.provider_id.as_deref());
            let Some(claim) = pid.filter(|p| self.ours(Some(p))).and_then(|p| claims.get(p).copied()) else {
                continue;
            };
            let Some(u) = unhealthy(n, &policies) else { continue };
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
                self.event_every(node_ref, true, "NodeRepairBlocked", message.clone(), now, BLOCKED_EVENT_REPEAT, out);
                self.event_every(claim_ref, true, "NodeRepairBlocked", message.clone(), now, BLOCKED_EVENT_REPEAT, out);
                if let Some(p) = &pool {
                    let pool_ref = object_ref("NodePool", "karpenter.sh/v1", p, None);
                    self.event_every(pool_ref, true, "NodeRepairBlocked", message, now, BLOCKED_EVENT_REPEAT, out);
                }
                self.requeue(now + BLOCKED_REQUEUE);
                continue;
            }
            // Forceful: the drain's deadline is now (an annotation already in the past is kept).
            let stamped = lifecycle::annotated_deadline(claim).is_some_and(|t| t < now);
            if !stamped {
                out.push(Effect::PatchClaimMetadata {
                    name: claim.name().to_string(),
                    labels: BTreeMap::new(),
                    annotations: [(lifecycle::ANNOTATION_TERMINATION_TIMESTAMP.to_string(), lifecycle::rfc3339(now))]
                        .into(),
                    finalizers: None,
                });
            }
            if claim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            out.push(Effect::DeleteNodeClaim { name: claim.name().to_string(), reason: DeleteReason::Unhealthy });
            self.repairs.push(RepairRecord {
                at: now,
                node: node_name,
                nodeclaim: claim.name().to_string(),
                nodepool: pool,
                condition: u.condition,
                status: u.status,
            });
        }
    }
}

fn object_ref(kind: &str, api_version: &str, name: &str, uid: Option<String>) -> ObjectReference {
    ObjectReference {
        kind: Some(kind.into()),
        api_version: Some(api_version.into()),
        name: Some(name.into()),
        uid,
        ..Default::default()
    }
}
