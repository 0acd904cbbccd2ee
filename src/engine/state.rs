//! The cluster's nodes as Karpenter's cluster state has them (`pkg/controllers/state/cluster.go`): each NodeClaim
//! and the Node it registered, joined by the provider id both carry (a Node's `spec.providerID`, a NodeClaim's
//! `status.providerID`) into one [`StateNode`], found by either name. The join is made here once per read; every
//! pass and controller step that pairs Nodes with NodeClaims asks a [`Nodes`] rather than joining again.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use rustc_hash::FxHashMap;

use crate::engine::api::NodeClaim;
use crate::engine::api::nodeclaim::{
    COND_DISRUPTION_REASON, COND_INITIALIZED, COND_INSTANCE_TERMINATING, COND_REBOOTING,
};
use crate::engine::labels;
use crate::engine::provisioning::ClusterSnapshot;
use crate::engine::resources::{Resources, parse_quantity};
use crate::engine::stored_pod::StoredPod;

/// A Node's provider id, once its kubelet (or the cloud) set it (an empty one is none).
pub fn node_provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref()?.provider_id.as_deref().filter(|p| !p.is_empty())
}

/// The NodeClaim a Node belongs to, among `claims`: the one with the Node's provider id. A Node without one
/// belongs to none. For a single lookup outside a read (the simulated API server's); a pass asks [`Nodes`].
pub fn claim_of<'a>(node: &Node, claims: impl IntoIterator<Item = &'a NodeClaim>) -> Option<&'a NodeClaim> {
    let pid = node_provider_id(node)?;
    claims.into_iter().find(|c| c.provider_id() == Some(pid))
}

/// A node as the cluster state sees it: a Node, its NodeClaim, or both.
#[derive(Debug, Clone)]
pub struct StateNode<'a> {
    pub node: Option<&'a Node>,
    pub nodeclaim: Option<&'a NodeClaim>,
}

impl StateNode<'_> {
    /// The Node's name, or the NodeClaim's while no Node has registered.
    pub fn name(&self) -> String {
        self.name_ref().to_string()
    }

    fn name_ref(&self) -> &str {
        self.node
            .and_then(|n| n.metadata.name.as_deref())
            .or_else(|| self.nodeclaim.map(|c| c.name()))
            .unwrap_or_default()
    }

    pub fn is_deleting(&self) -> bool {
        self.node.is_some_and(|n| n.metadata.deletion_timestamp.is_some())
            || self
                .nodeclaim
                .is_some_and(|c| c.metadata.deletion_timestamp.is_some() || c.is_true(COND_INSTANCE_TERMINATING))
    }

    /// The node's labels once it registered; before, the NodeClaim's labels and the single-valued `In`
    /// requirements it will have as labels.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let registered = self.node.is_some_and(|n| {
            n.metadata.labels.as_ref().is_some_and(|l| l.get(labels::REGISTERED).is_some_and(|v| v == "true"))
        });
        match (self.node, self.nodeclaim) {
            (Some(n), None) => n.metadata.labels.clone().unwrap_or_default(),
            (Some(n), Some(_)) if registered => n.metadata.labels.clone().unwrap_or_default(),
            (_, Some(c)) => {
                let mut l = c.metadata.labels.clone().unwrap_or_default();
                for r in &c.spec.requirements {
                    if r.operator == "In" && r.values.len() == 1 {
                        l.entry(r.key.clone()).or_insert_with(|| r.values[0].clone());
                    }
                }
                l
            }
            (None, None) => BTreeMap::new(),
        }
    }

    /// A disruption command took this node (its NodeClaim has `DisruptionReason=True`): its pods will move, so the
    /// provisioner treats it as deleting (upstream keeps this mark in memory; the condition is its durable form).
    pub fn is_marked_for_deletion(&self) -> bool {
        // A reboot carries the reason too (it is repair's), but the node stays.
        self.nodeclaim.is_some_and(|c| c.is_true(COND_DISRUPTION_REASON) && !c.is_true(COND_REBOOTING))
    }

    pub fn initialized(&self) -> bool {
        match (self.node, self.nodeclaim) {
            (Some(n), Some(_)) => {
                n.metadata.labels.as_ref().is_some_and(|l| l.get(labels::INITIALIZED).is_some_and(|v| v == "true"))
            }
            (Some(_), None) => true,
            (None, Some(c)) => c.is_true(COND_INITIALIZED),
            (None, None) => false,
        }
    }

    fn resources(list: Option<&BTreeMap<String, Quantity>>) -> Resources {
        let mut r = Resources::default();
        for (k, q) in list.into_iter().flatten() {
            if let Ok(v) = parse_quantity(&q.0) {
                r.set(k, v);
            }
        }
        r
    }

    /// Allocatable, falling back to the NodeClaim's status for values the node doesn't report yet.
    pub fn allocatable(&self) -> Resources {
        let from_node = Self::resources(self.node.and_then(|n| n.status.as_ref()).and_then(|s| s.allocatable.as_ref()));
        let from_claim = Self::resources(self.nodeclaim.and_then(|c| c.status.as_ref()).map(|s| &s.allocatable));
        merge_zero(from_node, &from_claim)
    }

    pub fn capacity(&self) -> Resources {
        let from_node = Self::resources(self.node.and_then(|n| n.status.as_ref()).and_then(|s| s.capacity.as_ref()));
        let from_claim = Self::resources(self.nodeclaim.and_then(|c| c.status.as_ref()).map(|s| &s.capacity));
        merge_zero(from_node, &from_claim)
    }
}

fn merge_zero(mut a: Resources, b: &Resources) -> Resources {
    for (k, v) in b.entries() {
        if a.get(k) == 0 {
            a.set_value(k, v);
        }
    }
    a
}

/// Every node of a read, joined once: in provider-id order (a NodeClaim not launched yet sorts as
/// `nodeclaim://<name>`, a Node without a provider id as `node://<name>`), with lookups by Node and NodeClaim name,
/// and, when asked for ([`Nodes::with_pods`]), the pods bound to each node name.
/// Of two NodeClaims claiming the same provider id, the later in the read stands, as in upstream's map.
#[derive(Debug, Default)]
pub struct Nodes<'a> {
    list: Vec<StateNode<'a>>,
    by_node: FxHashMap<&'a str, usize>,
    by_claim: FxHashMap<&'a str, usize>,
    /// Pods by the node name they are bound to, in the read's order; a name no Node has yet keeps its pods too.
    pods: FxHashMap<&'a str, Vec<&'a StoredPod>>,
}

impl<'a> Nodes<'a> {
    pub fn new(
        nodes: impl IntoIterator<Item = &'a Node>,
        claims: impl IntoIterator<Item = &'a NodeClaim>,
    ) -> Nodes<'a> {
        let mut by_pid: BTreeMap<Cow<'a, str>, StateNode<'a>> = BTreeMap::new();
        for c in claims {
            let key = match c.provider_id() {
                Some(pid) => Cow::Borrowed(pid),
                None => Cow::Owned(format!("nodeclaim://{}", c.name())),
            };
            by_pid.insert(key, StateNode { node: None, nodeclaim: Some(c) });
        }
        for n in nodes {
            let key = match node_provider_id(n) {
                Some(pid) => Cow::Borrowed(pid),
                None => Cow::Owned(format!("node://{}", n.metadata.name.as_deref().unwrap_or(""))),
            };
            by_pid.entry(key).or_insert(StateNode { node: None, nodeclaim: None }).node = Some(n);
        }
        let list: Vec<StateNode<'a>> = by_pid.into_values().collect();
        let mut by_node = FxHashMap::default();
        let mut by_claim = FxHashMap::default();
        for (i, s) in list.iter().enumerate() {
            if let Some(name) = s.node.and_then(|n| n.metadata.name.as_deref()) {
                by_node.insert(name, i);
            }
            if let Some(c) = s.nodeclaim {
                by_claim.insert(c.name(), i);
            }
        }
        Nodes { list, by_node, by_claim, pods: FxHashMap::default() }
    }

    /// These nodes with the pods bound to each, from one pass over `pods`.
    pub fn with_pods(mut self, pods: impl IntoIterator<Item = &'a StoredPod>) -> Nodes<'a> {
        for p in pods {
            if let Some(n) = p.bound_node() {
                self.pods.entry(n).or_default().push(p);
            }
        }
        self
    }

    /// The pods bound to the node named `node` (none unless built [`Nodes::with_pods`]).
    pub fn pods_on(&self, node: &str) -> &[&'a StoredPod] {
        self.pods.get(node).map_or(&[], Vec::as_slice)
    }

    /// The nodes of a snapshot.
    pub fn of(snap: &ClusterSnapshot<'a>) -> Nodes<'a> {
        Nodes::new(snap.nodes, snap.nodeclaims)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, StateNode<'a>> {
        self.list.iter()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The state of the Node named `name`.
    pub fn by_node(&self, name: &str) -> Option<&StateNode<'a>> {
        self.by_node.get(name).map(|&i| &self.list[i])
    }

    /// The state of the NodeClaim named `name`.
    pub fn by_claim(&self, name: &str) -> Option<&StateNode<'a>> {
        self.by_claim.get(name).map(|&i| &self.list[i])
    }

    /// The NodeClaim the Node named `node` registered for.
    pub fn claim_of(&self, node: &str) -> Option<&'a NodeClaim> {
        self.by_node(node).and_then(|s| s.nodeclaim)
    }

    /// The Node the NodeClaim named `claim` registered; none before it launched and registered.
    pub fn node_of(&self, claim: &str) -> Option<&'a Node> {
        self.by_claim(claim).and_then(|s| s.node)
    }
}

impl<'s, 'a> IntoIterator for &'s Nodes<'a> {
    type Item = &'s StateNode<'a>;
    type IntoIter = std::slice::Iter<'s, StateNode<'a>>;
    fn into_iter(self) -> Self::IntoIter {
        self.list.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, pid: Option<&str>) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"providerID": pid},
        }))
        .unwrap()
    }

    fn claim(name: &str, pid: Option<&str>) -> NodeClaim {
        let mut c: NodeClaim = serde_yaml::from_str(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: {name}}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements: []\n"
        ))
        .unwrap();
        c.status = Some(crate::engine::api::NodeClaimStatus { provider_id: pid.map(Into::into), ..Default::default() });
        c
    }

    #[test]
    fn nodes_and_claims_pair_by_provider_id_only() {
        let claims = [claim("a", Some("aws:///us-east-1a/i-1")), claim("b", None), claim("c", Some("aws:///x/i-3"))];
        let n1 = node("ip-1", Some("aws:///us-east-1a/i-1"));
        let unregistered = node("ip-2", None);
        let stranger = node("ip-9", Some("aws:///x/i-9"));
        assert_eq!(claim_of(&n1, &claims).map(|c| c.name()), Some("a"));
        assert!(claim_of(&unregistered, &claims).is_none(), "no provider id, no claim (not the claim without one)");
        assert!(claim_of(&stranger, &claims).is_none());

        let nodes = [n1, unregistered, stranger];
        let state = Nodes::new(&nodes, &claims);
        // a+ip-1 joined; b, c unlaunched or unregistered; ip-2 and ip-9 without a claim.
        assert_eq!(state.len(), 5);
        assert_eq!(state.claim_of("ip-1").map(|c| c.name()), Some("a"));
        assert_eq!(state.node_of("a").and_then(|n| n.metadata.name.as_deref()), Some("ip-1"));
        assert!(state.node_of("b").is_none(), "no provider id, no node (not the node without one)");
        assert!(state.node_of("c").is_none());
        assert!(state.claim_of("ip-2").is_none() && state.claim_of("ip-9").is_none());
        assert_eq!(state.by_node("ip-2").map(StateNode::name).as_deref(), Some("ip-2"));
        assert_eq!(state.by_claim("b").map(StateNode::name).as_deref(), Some("b"), "named for its claim until a node");
        assert!(state.by_node("nope").is_none() && state.by_claim("nope").is_none());
        let order: Vec<String> = state.iter().map(StateNode::name).collect();
        assert_eq!(order, ["ip-1", "c", "ip-9", "ip-2", "b"], "provider-id order, then node://, then nodeclaim://");
    }

    #[test]
    fn of_two_claims_with_one_provider_id_the_later_stands() {
        let claims = [claim("old", Some("aws:///a/i-1")), claim("new", Some("aws:///a/i-1"))];
        let nodes = [node("ip-1", Some("aws:///a/i-1"))];
        let state = Nodes::new(&nodes, &claims);
        assert_eq!(state.len(), 1);
        assert_eq!(state.claim_of("ip-1").map(|c| c.name()), Some("new"));
        assert!(state.by_claim("old").is_none());
    }
}
