//! The world's executor of the controller's [`Effect`]s: it does to the simulated store and cloud what
//! `runtime::execute` does through the API server and a real cloud, with the API server's semantics where they
//! matter (an object whose last finalizer goes is gone, an eviction a PDB forbids is refused, a deleted pod leaves
//! after its grace period).

use std::collections::BTreeMap;

use super::{Timer, World};
use crate::controller::cloud::{CloudProvider, LaunchFailure, Retry, at_once};
use crate::controller::effect::LabelTarget;
use crate::controller::{Effect, Outcome};
use crate::engine::labels;
use crate::engine::lifecycle;
use crate::engine::provisioning::Millis;
use crate::engine::stored_pod::StoredPod;
use crate::sim::cluster::Key;

const SECOND: Millis = 1000;

impl World {
    pub(super) fn apply_effects(&mut self, effects: Vec<Effect>) {
        for e in effects {
            self.apply_effect(e);
        }
    }

    /// Carries out one effect. Nothing here can fail the way an API call can: there is no other writer, so a write
    /// guarded by a resourceVersion always applies.
    pub(super) fn apply_effect(&mut self, e: Effect) {
        let now = self.now;
        match e {
            Effect::CreateNodeClaim { claim, purpose } => {
                let pool = claim.nodepool().unwrap_or_default().to_string();
                let types = claim
                    .spec
                    .requirements
                    .iter()
                    .find(|r| r.key == labels::INSTANCE_TYPE && r.operator == "In")
                    .map(|r| r.values.clone())
                    .unwrap_or_default();
                let name = self.create_nodeclaim(*claim, &pool, types);
                self.controller.outcome(Outcome::Created { name, purpose }, now);
            }
            Effect::Launch { claim } => {
                let name = claim.name().to_string();
                // The launch carries the tick's status (the claim's conditions as they stand before the call).
                if let Some(c) = self.cluster.nodeclaims.get(&name)
                    && c.status != claim.status
                    && let Some(c) = self.cluster.nodeclaims.get_mut(&name)
                {
                    c.status = claim.status.clone();
                }
                if self.in_flight.contains_key(&name) || !self.cluster.nodeclaims.contains_key(&name) {
                    return;
                }
                // The cloud answers at once; the launch's latency is the world's timer.
                let answer = at_once(CloudProvider::create(&mut self.cloud, std::slice::from_ref(&*claim), now));
                let result = answer.and_then(|mut r| r.pop()).unwrap_or_else(|| {
                    Err(LaunchFailure::Retry(Retry { message: "the cloud did not answer".into(), conflict: false }))
                });
                self.in_flight.insert(name.clone(), result);
                let t = now + self.settings.launch_latency;
                self.at(t, Timer::LaunchDone { claim: name });
            }
            Effect::PatchClaimStatus { name, status } => {
                if let Some(c) = self.cluster.nodeclaims.get_mut(&name) {
                    c.status = Some(*status);
                }
            }
            Effect::PatchClaimMetadata { name, labels: l, annotations, finalizers } => {
                if let Some(c) = self.cluster.nodeclaims.get_mut(&name) {
                    if !l.is_empty() {
                        c.metadata.labels.get_or_insert_with(BTreeMap::new).extend(l);
                    }
                    if !annotations.is_empty() {
                        c.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(annotations);
                    }
                    if let Some(f) = finalizers {
                        c.metadata.finalizers = Some(f);
                    }
                }
            }
            Effect::SyncNode { name, labels: l, annotations, taints, finalizers, .. } => {
                let initialized = l.get(labels::INITIALIZED).is_some_and(|v| v == "true");
                let Some(n) = self.cluster.nodes.get_mut(&name) else { return };
                n.metadata.labels.get_or_insert_with(BTreeMap::new).extend(l);
                if !annotations.is_empty() {
                    n.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(annotations);
                }
                if let Some(t) = taints {
                    n.spec.get_or_insert_with(Default::default).taints = Some(t);
                }
                if let Some(f) = finalizers {
                    n.metadata.finalizers = Some(f);
                }
                let gone =
                    n.metadata.deletion_timestamp.is_some() && n.metadata.finalizers.iter().flatten().count() == 0;
                if initialized && let Some(r) = self.record.nodes.iter_mut().rev().find(|r| r.name == name) {
                    r.initialized_at.get_or_insert(now);
                }
                if gone {
                    self.remove_node(&name);
                }
            }
            Effect::Relabel { target, name, set, remove } => {
                let meta = match target {
                    LabelTarget::NodeClaim => self.cluster.nodeclaims.get_mut(&name).map(|c| &mut c.metadata),
                    LabelTarget::Node => self.cluster.nodes.get_mut(&name).map(|n| &mut n.metadata),
                };
                if let Some(meta) = meta {
                    let l = meta.labels.get_or_insert_with(BTreeMap::new);
                    for k in &remove {
                        l.remove(k);
                    }
                    l.extend(set);
                }
            }
            Effect::Nominate { namespace, name, uid, node } => {
                // As the API server: a pod that is gone, or another pod under its name, is not written.
                let key = (namespace, name);
                let Some(p) = self.cluster.pods.get(&key) else { return };
                if uid.is_some() && p.metadata.uid != uid {
                    return;
                }
                if let Some(p) = self.cluster.pods.get_mut(&key) {
                    p.status.get_or_insert_with(Default::default).nominated_node_name = Some(node);
                }
            }
            Effect::DeleteNodeClaim { name, reason } => self.delete_nodeclaim(&name, reason),
            Effect::FinalizeNodeClaim { claim } => {
                // Ours is the only finalizer a simulated claim carries: without it the claim is gone.
                let name = claim.name();
                if self.cluster.nodeclaims.remove(name).is_some()
                    && let Some(r) = self.record.nodeclaims.iter_mut().rev().find(|r| r.name == name)
                {
                    r.deleted_at = Some(now);
                }
            }
            Effect::DeleteNode { name } => {
                let Some(n) = self.cluster.nodes.get(&name) else { return };
                if n.metadata.deletion_timestamp.is_some() {
                    return;
                }
                if n.metadata.finalizers.iter().flatten().count() == 0 {
                    self.remove_node(&name);
                } else if let Some(n) = self.cluster.nodes.get_mut(&name) {
                    n.metadata.deletion_timestamp = Some(lifecycle::ms_time(now));
                }
            }
            Effect::DeleteInstance { provider_id } => {
                // Terminating an instance already gone is done; the simulated cloud has no other answer.
                let _ = at_once(CloudProvider::delete(&mut self.cloud, &provider_id, now));
            }
            Effect::Evict { namespace, name } => {
                let key = (namespace, name);
                // The Eviction API: refused while a PDB would be violated (each eviction sees the ones before it,
                // since PDBs count pods being deleted).
                let allowed = {
                    let Some(p) = self.cluster.pods.get(&key) else { return };
                    let pdbs: Vec<_> = self.cluster.pdbs.cloned_values();
                    let all: Vec<&StoredPod> = self.cluster.pods.values().map(|o| &**o).collect();
                    crate::engine::pdb::check_eviction(p, &pdbs, &all).is_ok()
                };
                if allowed {
                    self.delete_pod(&key, None);
                }
            }
            Effect::DeletePod { namespace, name, grace_seconds } => {
                self.delete_pod(&(namespace, name), Some(Millis::from(grace_seconds) * SECOND));
            }
            Effect::PatchNodePoolStatus { name, status } => {
                let spec = self.nodepool_spec_stamp();
                if let Some(p) = self.cluster.nodepools.get_mut(&name) {
                    p.status = Some(*status);
                    // The status subresource: what readers of the spec see has not changed.
                    self.nodepool_spec_stamp = spec;
                    self.nodepool_status_stamp = Some(self.cluster.nodepools.stamp());
                }
            }
            Effect::PatchNodeOverlayStatus { name, status } => {
                if let Some(o) = self.cluster.nodeoverlays.get_mut(&name) {
                    o.status = Some(*status);
                }
            }
            Effect::PatchCapacityBufferStatus { namespace, name, status } => {
                if let Some(b) = self.cluster.capacitybuffers.get_mut(&(namespace, name)) {
                    b.status = Some(*status);
                }
            }
            Effect::UpdateNodeClassStatus { name, status } => {
                if let Some(c) = self.cluster.nodeclasses.get_mut(&name) {
                    c.status = Some(*status);
                }
            }
            // Kept for the dashboard, as `kubectl get events` would show them.
            Effect::Event { regarding, warning, reason, message } => {
                let kind = regarding.kind.as_deref().unwrap_or_default().to_lowercase();
                let name = regarding.name.as_deref().unwrap_or_default();
                let object = match regarding.namespace.as_deref() {
                    Some(ns) => format!("{kind}/{ns}/{name}"),
                    None => format!("{kind}/{name}"),
                };
                let events = &mut self.record.events;
                if events.len() == super::EVENTS_KEPT {
                    events.pop_front();
                }
                events.push_back(super::EventRecord { at: now, warning, reason, object, message });
            }
        }
    }

    /// A Node whose last finalizer went, or that had none: the API server removes it, and the pod garbage
    /// collector the pods still bound to it.
    pub(crate) fn remove_node(&mut self, name: &str) {
        let now = self.now;
        self.refresh_node_record(name);
        self.cluster.nodes.remove(name);
        let orphans: Vec<Key> =
            self.cluster.pods.iter().filter(|(_, p)| p.node_name() == Some(name)).map(|(k, _)| k.clone()).collect();
        for k in orphans {
            self.cluster.pods.remove(&k);
            if let Some(r) = self.record.pods.get_mut(&k) {
                r.deleted_at = Some(now);
            }
        }
        if let Some(r) = self.record.nodes.iter_mut().rev().find(|r| r.name == name) {
            r.deleted_at = Some(now);
        }
    }
}
