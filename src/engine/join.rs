//! How Nodes and NodeClaims belong together: by the provider id both carry (a Node's `spec.providerID`, a
//! NodeClaim's `status.providerID`), as upstream's cluster state joins them. Written once here; every pass and
//! controller step that pairs the two asks these.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use crate::engine::api::NodeClaim;

/// A Node's provider id, once its kubelet (or the cloud) set it (an empty one is none).
pub fn node_provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref()?.provider_id.as_deref().filter(|p| !p.is_empty())
}

/// The NodeClaim a Node belongs to, among `claims`: the one with the Node's provider id. A Node without one
/// belongs to none.
pub fn claim_of<'a>(node: &Node, claims: impl IntoIterator<Item = &'a NodeClaim>) -> Option<&'a NodeClaim> {
    let pid = node_provider_id(node)?;
    claims.into_iter().find(|c| c.provider_id() == Some(pid))
}

/// The Node a NodeClaim registered, among `nodes`: the one with the claim's provider id. A claim not launched yet
/// has none.
pub fn node_of_claim<'a>(claim: &NodeClaim, nodes: impl IntoIterator<Item = &'a Node>) -> Option<&'a Node> {
    let pid = claim.provider_id()?;
    nodes.into_iter().find(|n| node_provider_id(n) == Some(pid))
}

/// Nodes by provider id, for joining many claims at once.
pub fn nodes_by_provider<'a>(nodes: impl Iterator<Item = &'a Node>) -> BTreeMap<&'a str, &'a Node> {
    nodes.filter_map(|n| Some((node_provider_id(n)?, n))).collect()
}

/// The Node a claim registered, from [`nodes_by_provider`].
pub fn node_of<'a>(claim: &NodeClaim, nodes: &BTreeMap<&str, &'a Node>) -> Option<&'a Node> {
    claim.provider_id().and_then(|p| nodes.get(p).copied())
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
        let nodes = [n1.clone(), unregistered, stranger];
        let by = nodes_by_provider(nodes.iter());
        assert_eq!(by.len(), 2);
        assert_eq!(node_of(&claims[0], &by).and_then(|n| n.metadata.name.as_deref()), Some("ip-1"));
        assert!(node_of(&claims[1], &by).is_none());
        assert!(node_of(&claims[2], &by).is_none());
        assert_eq!(node_of_claim(&claims[0], &nodes).and_then(|n| n.metadata.name.as_deref()), Some("ip-1"));
        assert!(node_of_claim(&claims[1], &nodes).is_none(), "no provider id, no node (not the node without one)");
    }
}
