//! CapacityBuffers (gate `CapacityBuffer`), as upstream's `capacitybuffer` controller and the provisioner's buffer
//! handling: each buffer is resolved and its status written when it changes; a resolved buffer's virtual pods join
//! every provisioning solve and every disruption simulation as pending pods; after a solve each buffer's
//! `Provisioning` condition says where its pods went, and the nodes holding them are not empty to emptiness.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Controller, Effect};
use crate::engine::api::capacitybuffer::{COND_PROVISIONING, CapacityBuffer, CapacityBufferStatus};
use crate::engine::capacitybuffer::{self as engine, Placed, Sources};
use crate::engine::lifecycle::set_condition_in;
use crate::engine::provisioning::{Millis, ProvisioningResult};
use crate::engine::stored_pod::StoredPod;

/// The buffers as last resolved, their virtual pods, and where the last solve put them.
#[derive(Default)]
pub(super) struct BufferState {
    /// Each buffer with the status the controller holds for it (written, or being written).
    pub(super) buffers: Vec<CapacityBuffer>,
    /// Every resolved buffer's virtual pods, in buffer order. Shared with the dashboard.
    pub(super) pods: Arc<Vec<StoredPod>>,
    /// Existing node → how many virtual pods the last solve put there (upstream's `bufferPodCounts`).
    pub(super) nodes: BTreeMap<String, usize>,
}

/// A buffer as the dashboard shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferRow {
    pub namespace: String,
    pub name: String,
    /// Virtual pods wanted (status.replicas).
    pub replicas: i32,
    /// One virtual pod's requests, rendered.
    pub requests: String,
    /// `ReadyForProvisioning` and `Provisioning` as (status, reason).
    pub ready: (String, String),
    pub provisioning: (String, String),
    pub message: String,
}

impl Controller {
    /// Resolves every CapacityBuffer (upstream's buffer controller) and returns the status writes that differ
    /// from what the objects carry; the virtual pods of the resolved ones are kept for the next solves. With the
    /// gate off there are none.
    pub fn sync_buffers(&mut self, buffers: &[CapacityBuffer], src: Sources<'_>, now: Millis) -> Vec<Effect> {
        if !self.gates.capacity_buffer {
            if !self.buffers.buffers.is_empty() || !self.buffers.pods.is_empty() || !self.buffers.nodes.is_empty() {
                self.buffers = BufferState::default();
            }
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut held = Vec::with_capacity(buffers.len());
        let mut pods = Vec::new();
        for cb in buffers {
            let (mut status, resolved) = engine::reconcile(cb, &src, now);
            // The provisioner's condition stays as the last solve left it (it is rewritten after each solve).
            // Only the same object's (not one re-created under its name).
            let same = |b: &&CapacityBuffer| b.key() == cb.key() && b.metadata.uid == cb.metadata.uid;
            if let Some(p) = self.buffers.buffers.iter().find(same).and_then(|b| b.condition(COND_PROVISIONING)) {
                match status.conditions.iter_mut().find(|c| c.type_ == COND_PROVISIONING) {
                    Some(c) => *c = p.clone(),
                    None => status.conditions.push(p.clone()),
                }
            }
            if cb.status.as_ref() != Some(&status) {
                out.push(status_write(cb, &status));
            }
            let mut held_cb = cb.clone();
            held_cb.status = Some(status);
            if let Some(r) = resolved.filter(|r| r.replicas > 0) {
                pods.extend(engine::virtual_pods(&held_cb, &r));
            }
            held.push(held_cb);
        }
        if *self.buffers.pods != pods {
            // Where the old virtual pods went no longer says where these go: the next solve (their uids trigger
            // one) says it again, and with none left no node holds any.
            self.buffers.nodes.clear();
            self.buffers.pods = Arc::new(pods);
            // What consolidation concluded counted on those pods.
            self.disruption.mark_unconsolidated();
        }
        self.buffers.buffers = held;
        out
    }

    /// The virtual pods solves place now.
    pub fn virtual_pods(&self) -> &[StoredPod] {
        &self.buffers.pods
    }

    /// Existing nodes holding virtual pods since the last solve, and how many.
    pub fn buffer_nodes(&self) -> &BTreeMap<String, usize> {
        &self.buffers.nodes
    }

    /// After a solve: each buffer's `Provisioning` condition from where its virtual pods went, written when it
    /// changed, and the nodes holding them.
    pub(super) fn buffer_outcome(&mut self, result: &ProvisioningResult, now: Millis, out: &mut Vec<Effect>) {
        if self.buffers.buffers.is_empty() {
            if !self.buffers.nodes.is_empty() {
                self.buffers.nodes.clear();
                self.disruption.mark_unconsolidated();
            }
            return;
        }
        let mut placed: BTreeMap<&str, Placed> = BTreeMap::new();
        let mut nodes: BTreeMap<String, usize> = BTreeMap::new();
        for p in &result.results.existing {
            for &i in &p.pods {
                if let Some(b) = &result.pods[i].buffer {
                    placed.entry(b).or_default().existing += 1;
                    *nodes.entry(p.node.clone()).or_default() += 1;
                }
            }
        }
        for c in &result.results.new_claims {
            for &i in &c.pods {
                if let Some(b) = &result.pods[i].buffer {
                    placed.entry(b).or_default().new_capacity += 1;
                }
            }
        }
        for f in &result.results.failures {
            if let Some(b) = &result.pods[f.pod].buffer {
                placed.entry(b).or_default().failed += 1;
            }
        }
        for cb in &mut self.buffers.buffers {
            let key = cb.key();
            let Some((status, reason, message)) = engine::provisioning_condition(cb, placed.get(key.as_str()).copied())
            else {
                continue;
            };
            let mut new = cb.status.clone().unwrap_or_default();
            set_condition_in(&mut new.conditions, COND_PROVISIONING, status, reason, &message, now);
            if let Some(c) = new.conditions.iter_mut().find(|c| c.type_ == COND_PROVISIONING) {
                c.observed_generation = cb.metadata.generation;
            }
            if cb.status.as_ref() != Some(&new) {
                out.push(status_write(cb, &new));
                cb.status = Some(new);
            }
        }
        if self.buffers.nodes != nodes {
            self.buffers.nodes = nodes;
            self.disruption.mark_unconsolidated();
        }
    }

    /// The buffers for the dashboard's Pending pane, in namespace/name order.
    pub fn buffer_rows(&self) -> Vec<BufferRow> {
        let mut rows: Vec<BufferRow> = self
            .buffers
            .buffers
            .iter()
            .map(|cb| {
                let cond = |t: &str| {
                    cb.condition(t).map_or((String::new(), String::new()), |c| {
                        (c.status.clone(), c.reason.clone().unwrap_or_default())
                    })
                };
                // The condition that holds it back says why: resolution first, then provisioning.
                let ready = cb.condition(crate::engine::api::capacitybuffer::COND_READY_FOR_PROVISIONING);
                let message = match ready {
                    Some(r) if r.status == "True" => cb.condition(COND_PROVISIONING).and_then(|c| c.message.clone()),
                    other => other.and_then(|c| c.message.clone()),
                }
                .unwrap_or_default();
                let requests = self
                    .buffers
                    .pods
                    .iter()
                    .find(|p| engine::buffer_of(p).as_deref() == Some(cb.key().as_str()))
                    .and_then(|p| crate::engine::scheduling::pod::pod_requests(p).ok())
                    .map(|r| {
                        r.entries()
                            .into_iter()
                            .filter(|(k, _)| *k != "pods")
                            .map(|(k, v)| format!("{k} {}", crate::engine::resources::format_resource(k, v)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                BufferRow {
                    namespace: cb.namespace().to_string(),
                    name: cb.name().to_string(),
                    replicas: cb.status.as_ref().and_then(|s| s.replicas).unwrap_or(0),
                    requests,
                    ready: cond(crate::engine::api::capacitybuffer::COND_READY_FOR_PROVISIONING),
                    provisioning: cond(COND_PROVISIONING),
                    message,
                }
            })
            .collect();
        rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        rows
    }
}

fn status_write(cb: &CapacityBuffer, status: &CapacityBufferStatus) -> Effect {
    Effect::PatchCapacityBufferStatus {
        namespace: cb.namespace().to_string(),
        name: cb.name().to_string(),
        status: Box::new(status.clone()),
    }
}
