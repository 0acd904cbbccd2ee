//! The NodeClaim lifecycle (launch, registration, initialization, liveness, expiration), NodeClaim finalization
//! and node termination (taint, drain, let go), as upstream's `nodeclaim/lifecycle`, `nodeclaim/termination` and
//! `node/termination` controllers. The simulated world runs exactly this through [`Controller::lifecycle`], and the
//! live planner runs it every tick as part of [`Controller::plan`].

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;

use super::cloud::CloudInstance;
use super::out::{Out, has_taint};
use super::timing::{LEAK_AGE, SECOND};
use super::{Controller, Effect, TERMINATE_AGAIN, nodepool_status};
use crate::engine::api::NodeClaim;
use crate::engine::api::nodeclaim::{COND_INITIALIZED, COND_LAUNCHED, COND_REGISTERED};
use crate::engine::labels;
use crate::engine::lifecycle::{self, DeleteReason, FinalizeAction, LifecycleAction, set_condition};
use crate::engine::provisioning::{ClusterSnapshot, Millis};
use crate::engine::state;
use crate::engine::stored_pod::StoredPod;
use crate::engine::termination::{disrupted_taint, drain_plan};

/// Claims, nodes and instances meet by the instance's own id: a provider id's last segment.
fn instance_key(provider_id: &str) -> &str {
    provider_id.rsplit('/').next().unwrap_or_default()
}

impl Controller {
    /// The lifecycle, finalization and termination part of a tick on its own (the schedule's lifecycle step,
    /// [`super::tick`]). It reads the NodeClaims, the
    /// Nodes, and the pods bound to nodes being deleted. After it, [`Controller::requeue_at`] says when
    /// these controllers next need to run even if nothing changes.
    pub fn lifecycle(&mut self, s: &ClusterSnapshot<'_>, now: Millis) -> Vec<Effect> {
        let mut out = Out::default();
        self.forget_settled(s, now);
        self.requeue = None;
        self.nodeclaims(s, now, &mut out);
        self.repair(s, now, &mut out);
        self.reboots(s, now, &mut out);
        self.terminations(s, now, &mut out);
        // Registration failures acted on here are reported in the NodePools' status by the next status step.
        self.registration_failures.append(&mut out.registration_failures);
        out.finish(s)
    }

    /// Garbage collection against the cloud's list of this cluster's instances, taken after `m` was read (as
    /// upstream lists): registered NodeClaims whose instance is gone and whose Node is not Ready are deleted
    /// (upstream core), and instances no NodeClaim holds, launched over [`LEAK_AGE`] ago, are terminated with
    /// their Nodes (the AWS provider's; a crash between a launch and recording it leaves one).
    pub fn garbage_collect(&self, m: &ClusterSnapshot<'_>, instances: &[CloudInstance], now: Millis) -> Vec<Effect> {
        let ids: BTreeSet<String> = instances.iter().map(|i| i.provider_id.clone()).collect();
        // Usually none: the claims and nodes are copied only when there are candidates.
        let candidates: Vec<NodeClaim> = m
            .nodeclaims
            .iter()
            .filter(|c| self.ours(c.provider_id()) && c.provider_id().is_none_or(|p| !ids.contains(p)))
            .cloned()
            .collect();
        let mut effects: Vec<Effect> = if candidates.is_empty() {
            Vec::new()
        } else {
            let nodes: Vec<Node> = m.nodes.iter().cloned().collect();
            lifecycle::garbage_collect(&candidates, &nodes, &ids)
                .into_iter()
                .map(|name| Effect::DeleteNodeClaim { name, reason: DeleteReason::GarbageCollected })
                .collect()
        };
        let held: BTreeSet<&str> = m.nodeclaims.iter().filter_map(|c| c.provider_id()).map(instance_key).collect();
        for i in instances {
            let old = i.launched_at.is_some_and(|t| now - t > LEAK_AGE);
            if i.terminating || !old || held.contains(instance_key(&i.provider_id)) {
                continue;
            }
            effects.push(Effect::DeleteInstance { provider_id: i.provider_id.clone() });
            for n in m.nodes.iter() {
                let pid = n.spec.as_ref().and_then(|s| s.provider_id.as_deref());
                if pid.is_some_and(|p| instance_key(p) == instance_key(&i.provider_id)) {
                    effects.push(Effect::DeleteNode { name: n.metadata.name.clone().unwrap_or_default() });
                }
            }
        }
        effects
    }

    /// The earliest time the lifecycle controllers asked to run again at (a timeout, an expiry, a drain that
    /// waits on pods), as of the last [`Controller::lifecycle`] or [`Controller::plan`].
    pub fn requeue_at(&self) -> Option<Millis> {
        self.requeue
    }

    pub(super) fn requeue(&mut self, at: Millis) {
        self.requeue = Some(self.requeue.map_or(at, |t| t.min(at)));
    }

    pub(super) fn nodeclaims(&mut self, s: &ClusterSnapshot<'_>, now: Millis, out: &mut Out) {
        // Looked up once per claim: a map, not a scan of every node.
        let mut by_provider: BTreeMap<&str, Vec<&Node>> = BTreeMap::new();
        for n in s.nodes.iter() {
            if let Some(pid) = state::node_provider_id(n) {
                by_provider.entry(pid).or_default().push(n);
            }
        }
        for claim in s.nodeclaims.iter() {
            if !self.ours(claim.provider_id()) {
                continue;
            }
            let nodes: Vec<&Node> =
                claim.provider_id().and_then(|pid| by_provider.get(pid)).cloned().unwrap_or_default();
            if claim.metadata.deletion_timestamp.is_some() {
                self.finalize(claim, &nodes, now, out);
                continue;
            }
            let mut actions = lifecycle::reconcile(claim, &nodes, now, &self.lifecycle);
            actions.extend(lifecycle::expiration(claim, now));
            for a in actions {
                match a {
                    LifecycleAction::AddFinalizer => {
                        let mut f = claim.metadata.finalizers.clone().unwrap_or_default();
                        if !f.iter().any(|x| x == labels::TERMINATION_FINALIZER) {
                            f.push(labels::TERMINATION_FINALIZER.to_string());
                        }
                        out.push(Effect::PatchClaimMetadata {
                            name: claim.name().to_string(),
                            labels: BTreeMap::new(),
                            annotations: BTreeMap::new(),
                            remove_annotations: Vec::new(),
                            finalizers: Some(f),
                        });
                    }
                    LifecycleAction::Launch => {
                        if !self.launching.contains_key(claim.name()) && !claim.is_true(COND_LAUNCHED) {
                            self.launching.insert(claim.name().to_string(), now);
                            out.push(Effect::Launch { claim: Box::new(claim.clone()) });
                        }
                    }
                    LifecycleAction::SyncNode {
                        node,
                        labels: l,
                        annotations,
                        taints_to_add,
                        remove_unregistered_taint,
                        finalizer,
                    } => {
                        if let Some(n) = nodes.iter().find(|n| n.metadata.name.as_deref() == Some(node.as_str())) {
                            let w = out.node(n);
                            w.metadata.labels.get_or_insert_with(BTreeMap::new).extend(l);
                            w.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(annotations);
                            let taints =
                                w.spec.get_or_insert_with(Default::default).taints.get_or_insert_with(Vec::new);
                            for t in taints_to_add {
                                if !taints.iter().any(|x| x.key == t.key && x.effect == t.effect) {
                                    taints.push(t);
                                }
                            }
                            if remove_unregistered_taint {
                                taints.retain(|t| t.key != labels::TAINT_UNREGISTERED);
                            }
                            let finalizers = w.metadata.finalizers.get_or_insert_with(Vec::new);
                            if finalizer && !finalizers.iter().any(|f| f == labels::TERMINATION_FINALIZER) {
                                finalizers.push(labels::TERMINATION_FINALIZER.to_string());
                            }
                        }
                    }
                    LifecycleAction::LabelNode { node, key, value } => {
                        if let Some(n) = nodes.iter().find(|n| n.metadata.name.as_deref() == Some(node.as_str())) {
                            out.node(n).metadata.labels.get_or_insert_with(BTreeMap::new).insert(key, value);
                        }
                    }
                    // Registered and Initialized stand for what was done to the node: they are written only once
                    // the cache shows the node as registration left it, never in the tick that sends the node's
                    // update (which another writer may make fail with a conflict). Until then the next tick plans
                    // registration again from the fresh node.
                    LifecycleAction::SetCondition { ref type_, ref status, .. }
                        if (type_ == COND_REGISTERED || type_ == COND_INITIALIZED)
                            && status == "True"
                            && nodes.iter().any(|n| out.node_changed(n)) => {}
                    LifecycleAction::SetNodeName(_) if nodes.iter().any(|n| out.node_changed(n)) => {}
                    LifecycleAction::Delete { reason } => {
                        if matches!(reason, DeleteReason::LaunchTimeout | DeleteReason::RegistrationTimeout)
                            && let Some(pool) = claim.nodepool()
                        {
                            out.registration_failures
                                .insert(pool.to_string(), nodepool_status::RegistrationFailure::of(claim));
                        }
                        out.push(Effect::DeleteNodeClaim { name: claim.name().to_string(), reason });
                    }
                    LifecycleAction::RequeueAt(t) => self.requeue(t),
                    other => {
                        lifecycle::apply(out.claim(claim), &other, now);
                    }
                }
            }
        }
    }

    fn finalize(&mut self, claim: &NodeClaim, nodes: &[&Node], now: Millis, out: &mut Out) {
        let has_finalizer = claim.metadata.finalizers.iter().flatten().any(|f| f == labels::TERMINATION_FINALIZER);
        if !has_finalizer {
            return;
        }
        // Never launched: nothing to tear down.
        if claim.provider_id().is_none() && !claim.is_true(COND_LAUNCHED) {
            out.push(Effect::FinalizeNodeClaim { claim: Box::new(claim.clone()) });
            return;
        }
        // The instance exists while a node carries its provider id (KWOK) or the cloud lists it; a node going
        // away is waited for by `finalize` itself.
        let exists = match (&self.live_instances, claim.provider_id()) {
            (Some(live), Some(pid)) => live.contains(pid) || !nodes.is_empty(),
            _ => !nodes.is_empty(),
        };
        for a in lifecycle::finalize(claim, nodes, exists, now) {
            match a {
                FinalizeAction::AnnotateTerminationTimestamp(v) => out.push(Effect::PatchClaimMetadata {
                    name: claim.name().to_string(),
                    labels: BTreeMap::new(),
                    annotations: [(lifecycle::ANNOTATION_TERMINATION_TIMESTAMP.to_string(), v)].into(),
                    remove_annotations: Vec::new(),
                    finalizers: None,
                }),
                FinalizeAction::DeleteNode(n) => {
                    if nodes.iter().any(|x| {
                        x.metadata.name.as_deref() == Some(n.as_str()) && x.metadata.deletion_timestamp.is_none()
                    }) {
                        out.push(Effect::DeleteNode { name: n });
                    }
                }
                FinalizeAction::DeleteInstance => {
                    if let Some(pid) = claim.provider_id()
                        && self.terminating.get(pid).is_none_or(|at| now - at >= TERMINATE_AGAIN)
                    {
                        self.terminating.insert(pid.to_string(), now);
                        out.push(Effect::DeleteInstance { provider_id: pid.to_string() });
                    }
                }
                FinalizeAction::SetCondition { type_, status, reason, message } => {
                    set_condition(out.claim(claim), &type_, &status, &reason, &message, now);
                }
                FinalizeAction::RemoveFinalizer => {
                    out.push(Effect::FinalizeNodeClaim { claim: Box::new(claim.clone()) })
                }
                FinalizeAction::RequeueAt(t) => self.requeue(t),
            }
        }
    }

    /// Node termination for nodes carrying our finalizer: taint, drain in tiers through the Eviction API, then let
    /// the node go by removing the finalizer.
    pub(super) fn terminations(&mut self, s: &ClusterSnapshot<'_>, now: Millis, out: &mut Out) {
        let deleting: BTreeSet<String> = s
            .nodes
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some())
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        self.drains.retain(|n, _| deleting.contains(n));
        // Each draining node's pods, from one pass over the pods (several nodes drain at once after a multi-node
        // consolidation, and a scan of every pod for each was most of the tick at 100,000 pods).
        let mut pods_on: BTreeMap<&str, Vec<&StoredPod>> = BTreeMap::new();
        if !deleting.is_empty() {
            for p in s.pods.iter() {
                if let Some(n) = p.node_name().filter(|n| deleting.contains(*n)) {
                    pods_on.entry(n).or_default().push(p);
                }
            }
        }
        // Joined only while a node drains: this runs every tick.
        let nodes = if deleting.is_empty() { state::Nodes::default() } else { state::Nodes::of(s) };
        for node in s.nodes.iter().filter(|n| n.metadata.deletion_timestamp.is_some()) {
            let finalizers = node.metadata.finalizers.clone().unwrap_or_default();
            let ours = self.ours(state::node_provider_id(node));
            if !ours || !finalizers.iter().any(|f| f == labels::TERMINATION_FINALIZER) {
                continue;
            }
            let name = node.metadata.name.clone().unwrap_or_default();
            let started = *self.drains.entry(name.clone()).or_insert(now);
            // Pods are evicted only from a node the cache shows tainted, so they can't land on it again; the taint
            // is added first, and a conflicting write is planned again on the next tick.
            if !has_taint(node, labels::TAINT_DISRUPTED) {
                out.node(node)
                    .spec
                    .get_or_insert_with(Default::default)
                    .taints
                    .get_or_insert_with(Vec::new)
                    .push(disrupted_taint());
                continue;
            }
            let deadline = nodes.claim_of(&name).and_then(lifecycle::annotated_deadline);
            let pods = pods_on.get(name.as_str()).map_or(&[][..], Vec::as_slice);
            let plan = drain_plan(node, pods, deadline, Some(started), now);
            for (namespace, pod) in plan.evict {
                out.push(Effect::Evict { namespace, name: pod });
            }
            for (namespace, pod, grace) in plan.force_delete {
                out.push(Effect::DeletePod {
                    namespace,
                    name: pod,
                    grace_seconds: u32::try_from(grace.max(1)).unwrap_or(1),
                });
            }
            if plan.drained {
                let rest: Vec<String> = finalizers.into_iter().filter(|f| f != labels::TERMINATION_FINALIZER).collect();
                out.node(node).metadata.finalizers = Some(rest);
            } else {
                // Pods are going; look again in a second (a live tick comes sooner anyway).
                self.requeue(now + SECOND);
            }
        }
    }
}
