//! What one tick of the controller writes, gathered so that each object gets one write.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use super::{Effect, nodepool_status};
use crate::engine::api::NodeClaim;
use crate::engine::provisioning::ClusterSnapshot;

/// The effects of one tick, with every status change to a NodeClaim gathered into one write per claim (a merge
/// patch replaces the conditions list whole, so two patches from the same cached copy would undo each other), and
/// every change to a node into one update per node (two updates guarded by the same resourceVersion would make the
/// second fail).
#[derive(Default)]
pub(super) struct Out {
    pub(super) effects: Vec<Effect>,
    claims: BTreeMap<String, NodeClaim>,
    nodes: BTreeMap<String, Node>,
    /// Launch or registration timeouts acted on in this tick, by NodePool.
    pub(super) registration_failures: BTreeMap<String, nodepool_status::RegistrationFailure>,
}

impl Out {
    pub(super) fn push(&mut self, e: Effect) {
        self.effects.push(e);
    }

    /// The tick's working copy of a claim.
    pub(super) fn claim(&mut self, c: &NodeClaim) -> &mut NodeClaim {
        self.claims.entry(c.name().to_string()).or_insert_with(|| c.clone())
    }

    /// The tick's working copy of a node.
    pub(super) fn node(&mut self, n: &Node) -> &mut Node {
        self.nodes.entry(n.metadata.name.clone().unwrap_or_default()).or_insert_with(|| n.clone())
    }

    /// Whether this tick changes the node (as the cache has it).
    pub(super) fn node_changed(&self, n: &Node) -> bool {
        self.nodes.get(n.metadata.name.as_deref().unwrap_or_default()).is_some_and(|w| node_update(n, w).is_some())
    }

    /// Node updates go first: a node is tainted before replacements are created for it or its pods are evicted.
    pub(super) fn finish(self, m: &ClusterSnapshot<'_>) -> Vec<Effect> {
        let mut effects: Vec<Effect> = Vec::with_capacity(self.effects.len() + self.nodes.len() + self.claims.len());
        // Looked up by name once per written object: a launching tick writes thousands of claims' statuses, and a
        // scan of every claim for each was a fifth of a 20,000-pod run.
        let nodes: rustc_hash::FxHashMap<&str, &Node> = if self.nodes.is_empty() {
            Default::default()
        } else {
            m.nodes.iter().filter_map(|n| Some((n.metadata.name.as_deref()?, n))).collect()
        };
        for (name, w) in &self.nodes {
            if let Some(before) = nodes.get(name.as_str())
                && let Some(e) = node_update(before, w)
            {
                effects.push(e);
            }
        }
        let mut claims = self.claims;
        for mut e in self.effects {
            // A launch writes the claim's status itself once the instance exists: it carries this tick's status, so
            // a separate status write can't replace the conditions the launch records with stale ones.
            if let Effect::Launch { claim } = &mut e
                && let Some(w) = claims.remove(claim.name())
            {
                claim.status = w.status;
            }
            effects.push(e);
        }
        let before: rustc_hash::FxHashMap<&str, &NodeClaim> =
            if claims.is_empty() { Default::default() } else { m.nodeclaims.iter().map(|c| (c.name(), c)).collect() };
        for (name, c) in claims {
            let before = before.get(name.as_str()).and_then(|x| x.status.as_ref());
            if let Some(status) = c.status
                && before != Some(&status)
            {
                effects.push(Effect::PatchClaimStatus { name, status: Box::new(status) });
            }
        }
        effects
    }
}

pub(super) fn has_taint(n: &Node, key: &str) -> bool {
    n.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| t.iter().any(|t| t.key == key))
}

pub(super) fn remove_taint(n: &mut Node, key: &str) {
    if let Some(t) = n.spec.as_mut().and_then(|s| s.taints.as_mut()) {
        t.retain(|t| t.key != key);
    }
}

/// The update that turns `before` into `after`: the labels and annotations that differ, and taints and finalizers
/// only when they change (then guarded by `before`'s resourceVersion). `None` when nothing changes.
pub(super) fn node_update(before: &Node, after: &Node) -> Option<Effect> {
    let changed = |b: Option<&BTreeMap<String, String>>, a: Option<&BTreeMap<String, String>>| {
        a.into_iter()
            .flatten()
            .filter(|(k, v)| b.and_then(|b| b.get(*k)) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<String, String>>()
    };
    let labels = changed(before.metadata.labels.as_ref(), after.metadata.labels.as_ref());
    let annotations = changed(before.metadata.annotations.as_ref(), after.metadata.annotations.as_ref());
    let taints_of = |n: &Node| n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    let taints = Some(taints_of(after)).filter(|t| *t != taints_of(before));
    let finalizers_of = |n: &Node| n.metadata.finalizers.clone().unwrap_or_default();
    let finalizers = Some(finalizers_of(after)).filter(|f| *f != finalizers_of(before));
    if labels.is_empty() && annotations.is_empty() && taints.is_none() && finalizers.is_none() {
        return None;
    }
    let guarded = taints.is_some() || finalizers.is_some();
    Some(Effect::SyncNode {
        name: before.metadata.name.clone().unwrap_or_default(),
        resource_version: before.metadata.resource_version.clone().filter(|_| guarded),
        labels,
        annotations,
        taints,
        finalizers,
    })
}
