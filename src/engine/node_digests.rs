//! What a pass derives from each node of the cluster state (its labels, taints and resources, and the requirements
//! pods are matched against), kept between passes for the nodes whose Node and NodeClaim did not change. With
//! thousands of NodeClaims in flight, deriving all of it afresh was about a third of every launching pass.
//!
//! A kept digest is keyed by the identity of the shared objects it was made from, and holds them: while it is kept,
//! no other object can take their place in memory, so a key that matches is the same object. A store's reads share
//! the objects that did not change; any change, a working copy of the same resourceVersion included, is a new
//! object and gets a new digest.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::{Node, Taint};
use rustc_hash::FxHashMap;

use crate::engine::api::NodeClaim;
use crate::engine::labels;
use crate::engine::objects::Objects;
use crate::engine::requirements::{Requirements, SharedLabels};
use crate::engine::resources::Resources;
use crate::engine::scheduling::ExistingNode;
use crate::engine::state::StateNode;

/// One node as a provisioning pass sees it, before the pods on it are counted.
#[derive(Debug)]
pub struct NodeDigest {
    pub name: String,
    pub labels: Arc<BTreeMap<String, String>>,
    pub taints: Vec<Taint>,
    /// The NodeClaim's startup taints.
    pub startup_taints: Vec<Taint>,
    /// Deleting, or taken by a disruption command: its pods will move.
    pub deleting: bool,
    /// A NodeClaim the cloud has not launched yet: its resources are those of its smallest option, which depend on
    /// the catalog and are worked out by the pass, not kept here.
    pub unlaunched: bool,
    pub initialized: bool,
    /// Karpenter-managed (has a NodeClaim).
    pub managed: bool,
    pub nodepool: Option<String>,
    pub capacity: Resources,
    pub allocatable: Resources,
    /// The labels as requirements, with the hostname.
    pub requirements: Arc<Requirements>,
}

impl NodeDigest {
    pub fn of(s: &StateNode<'_>) -> NodeDigest {
        Self::sharing(s, &mut SharedLabels::default())
    }

    /// [`NodeDigest::of`], its label requirements sharing entries with other nodes' through `shared`.
    pub fn sharing(s: &StateNode<'_>, shared: &mut SharedLabels) -> NodeDigest {
        let name = s.name();
        let labels = s.labels();
        let taints = match (s.node, s.nodeclaim) {
            (Some(n), _) => n.spec.as_ref().and_then(|sp| sp.taints.clone()).unwrap_or_default(),
            (None, Some(c)) => c.spec.taints.iter().chain(&c.spec.startup_taints).cloned().collect(),
            _ => Vec::new(),
        };
        let unlaunched = s.nodeclaim.is_some_and(|c| s.node.is_none() && c.provider_id().is_none());
        let requirements = Arc::new(ExistingNode::label_requirements_sharing(&name, &labels, shared));
        NodeDigest {
            nodepool: labels.get(labels::NODEPOOL).cloned(),
            labels: Arc::new(labels),
            taints,
            startup_taints: s.nodeclaim.map(|c| c.spec.startup_taints.clone()).unwrap_or_default(),
            deleting: s.is_deleting() || s.is_marked_for_deletion(),
            unlaunched,
            initialized: s.initialized(),
            managed: s.nodeclaim.is_some(),
            capacity: if unlaunched { Resources::default() } else { s.capacity() },
            allocatable: if unlaunched { Resources::default() } else { s.allocatable() },
            requirements,
            name,
        }
    }
}

/// The node digests a store keeps between its reads (see [`crate::engine::provisioning::Digests`]).
#[derive(Debug, Default)]
pub struct NodeDigests {
    inner: Mutex<FxHashMap<Key, Kept>>,
}

/// The addresses of the Node and the NodeClaim (0 for none).
type Key = (usize, usize);

#[derive(Debug)]
struct Kept {
    // Held so that their addresses stay theirs while the digest is kept.
    _node: Option<Arc<Node>>,
    _claim: Option<Arc<NodeClaim>>,
    digest: Arc<NodeDigest>,
}

/// Digests the nodes of one read, through the store's [`NodeDigests`] when the read shares its objects.
pub struct NodeDigester<'a> {
    cache: Option<Shared<'a>>,
    labels: SharedLabels,
}

struct Shared<'a> {
    kept: MutexGuard<'a, FxHashMap<Key, Kept>>,
    nodes: FxHashMap<usize, &'a Arc<Node>>,
    claims: FxHashMap<usize, &'a Arc<NodeClaim>>,
    /// The digests this read used: what is kept afterwards (nodes gone or changed are forgotten).
    used: FxHashMap<Key, Kept>,
}

fn addr<T>(x: &T) -> usize {
    std::ptr::from_ref(x) as usize
}

impl<'a> NodeDigester<'a> {
    /// A digester over `nodes` and `claims`, keeping digests in `kept` when both are shared objects.
    pub fn new(kept: Option<&'a NodeDigests>, nodes: Objects<'a, Node>, claims: Objects<'a, NodeClaim>) -> Self {
        let cache = match (kept, nodes, claims) {
            (Some(k), Objects::Shared(nodes), Objects::Shared(claims)) => {
                // A poisoned lock only means another pass panicked mid-update; start over rather than trust it.
                let kept = k.inner.lock().unwrap_or_else(|e| {
                    let mut g = e.into_inner();
                    g.clear();
                    g
                });
                Some(Shared {
                    kept,
                    nodes: nodes.iter().map(|n| (Arc::as_ptr(n) as usize, n)).collect(),
                    claims: claims.iter().map(|c| (Arc::as_ptr(c) as usize, c)).collect(),
                    used: FxHashMap::default(),
                })
            }
            _ => None,
        };
        NodeDigester { cache, labels: SharedLabels::default() }
    }

    /// The digest of `s`, kept from an earlier read when its objects are the same.
    pub fn get(&mut self, s: &StateNode<'a>) -> Arc<NodeDigest> {
        let Some(c) = &mut self.cache else { return Arc::new(NodeDigest::sharing(s, &mut self.labels)) };
        let node = s.node.and_then(|n| c.nodes.get(&addr(n)).copied());
        let claim = s.nodeclaim.and_then(|n| c.claims.get(&addr(n)).copied());
        // An object this read does not share (not one of its own) is digested afresh and not kept.
        if node.is_none() != s.node.is_none() || claim.is_none() != s.nodeclaim.is_none() {
            return Arc::new(NodeDigest::sharing(s, &mut self.labels));
        }
        let key = (node.map_or(0, |n| Arc::as_ptr(n) as usize), claim.map_or(0, |c| Arc::as_ptr(c) as usize));
        if let Some(k) = c.used.get(&key) {
            return k.digest.clone();
        }
        let kept = c.kept.remove(&key).unwrap_or_else(|| Kept {
            _node: node.cloned(),
            _claim: claim.cloned(),
            digest: Arc::new(NodeDigest::sharing(s, &mut self.labels)),
        });
        let digest = kept.digest.clone();
        c.used.insert(key, kept);
        digest
    }
}

impl Drop for NodeDigester<'_> {
    fn drop(&mut self) {
        if let Some(c) = &mut self.cache {
            *c.kept = std::mem::take(&mut c.used);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::state::Nodes;

    fn node(name: &str, zone: &str) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "resourceVersion": "7", "labels": {labels::ZONE: zone}},
                "spec": {"providerID": format!("aws:///{zone}/i-{name}")},
                "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}
            }))
            .expect("node"),
        )
    }

    #[test]
    fn a_digest_is_kept_for_the_same_objects_and_made_afresh_for_a_changed_copy() {
        let kept = NodeDigests::default();
        let nodes = vec![node("a", "us-east-1a")];
        let claims: Vec<Arc<NodeClaim>> = Vec::new();
        let first = {
            let state = Nodes::new(nodes.iter().map(|n| &**n), claims.iter().map(|c| &**c));
            let mut d = NodeDigester::new(Some(&kept), (&nodes[..]).into(), (&claims[..]).into());
            d.get(&state.iter().next().expect("one node").clone())
        };
        let again = {
            let state = Nodes::new(nodes.iter().map(|n| &**n), claims.iter().map(|c| &**c));
            let mut d = NodeDigester::new(Some(&kept), (&nodes[..]).into(), (&claims[..]).into());
            d.get(&state.iter().next().expect("one node").clone())
        };
        assert!(Arc::ptr_eq(&first, &again), "an unchanged node is not digested again");

        // A working copy of the same resourceVersion with another zone: a new object, so a new digest.
        let mut copy = nodes.clone();
        Arc::make_mut(&mut copy[0])
            .metadata
            .labels
            .get_or_insert_default()
            .insert(labels::ZONE.into(), "us-east-1b".into());
        let changed = {
            let state = Nodes::new(copy.iter().map(|n| &**n), claims.iter().map(|c| &**c));
            let mut d = NodeDigester::new(Some(&kept), (&copy[..]).into(), (&claims[..]).into());
            d.get(&state.iter().next().expect("one node").clone())
        };
        assert!(!Arc::ptr_eq(&first, &changed));
        assert_eq!(changed.labels.get(labels::ZONE).map(String::as_str), Some("us-east-1b"));
        assert_eq!(changed.requirements.get_ref(labels::ZONE).and_then(|r| r.any()), Some("us-east-1b"));
        assert_eq!(changed.requirements.get_ref(labels::HOSTNAME).and_then(|r| r.any()), Some("a"));
    }
}
