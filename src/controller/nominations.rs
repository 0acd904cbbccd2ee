//! Cost packing's nominations (docs/packing.md, "Binding follows the plan"): a solve sizes each NodeClaim tightly
//! for the pods it planned onto it, but kube-scheduler binds pods its own way once the Nodes register (first fit,
//! or spread), so pods would no longer fit where planned and get new claims. Each such pod's
//! `status.nominatedNodeName` names the Node of its claim: with PreferNominatedNode (GA in Kubernetes 1.24)
//! kube-scheduler tries that node first, and its nominator counts the pods nominated to a node as using its room
//! when it places other pods. Upstream Karpenter does not write the field, so upstream packing never does.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::out::Out;
use super::{Controller, Effect};
use crate::engine::packing::Packing;
use crate::engine::provisioning::ClusterSnapshot;

impl Controller {
    /// Cost packing's nominations on their own (see [`Controller::orchestrate_commands`] and
    /// [`Effect::Nominate`]).
    pub fn nominations(&self, m: &ClusterSnapshot<'_>) -> Vec<Effect> {
        let mut out = Out::default();
        self.nominate_pods(m, &mut out);
        out.finish(m)
    }

    /// Cost packing: each pending pod a solve placed on a claim whose Node has registered is nominated to that
    /// Node, so kube-scheduler binds it where the claim was sized for it instead of first fit or spread (pods that
    /// no longer fit the plan would get new claims). Only to a Node that exists and is not being deleted, and once:
    /// a pod already nominated there is left alone. Nothing under upstream packing (upstream doesn't write it).
    pub(super) fn nominate_pods(&self, m: &ClusterSnapshot<'_>, out: &mut Out) {
        if self.packing != Packing::Cost || self.placements.is_empty() {
            return;
        }
        let live = |meta: &ObjectMeta| meta.deletion_timestamp.is_none();
        let nodes: BTreeSet<&str> =
            m.nodes.iter().filter(|n| live(&n.metadata)).filter_map(|n| n.metadata.name.as_deref()).collect();
        // A claim's Node once it registered (a claim without one, or being deleted, has none to nominate).
        let claims: BTreeMap<&str, Option<&str>> = m
            .nodeclaims
            .iter()
            .map(|c| {
                let node = c.status.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| nodes.contains(n));
                (c.name(), node.filter(|_| live(&c.metadata)))
            })
            .collect();
        for p in m.pods.iter().filter(|p| p.bound_node().is_none() && live(&p.metadata)) {
            let Some(at) = p.metadata.uid.as_deref().and_then(|uid| self.placement(uid)) else { continue };
            // A placement names a claim, or the Node a registered claim became (`forget_placements`).
            let node = match claims.get(at) {
                Some(node) => *node,
                None => nodes.get(at).copied(),
            };
            let (Some(node), Some(name)) = (node, p.metadata.name.clone()) else { continue };
            if p.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()) == Some(node) {
                continue;
            }
            out.push(Effect::Nominate {
                namespace: p.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
                name,
                uid: p.metadata.uid.clone(),
                node: node.to_string(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::controller::Settings;
    use crate::engine::catalog::kwok::kwok_catalog;
    use crate::engine::manifests::ClusterObjects;

    const CLUSTER: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-a}
spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}
status: {nodeName: node-a}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-b}
spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-c}
spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}
status: {nodeName: node-c}
---
apiVersion: v1
kind: Node
metadata: {name: node-a}
"#;

    /// A pod with uid `u-<name>`: pending unless bound to `node`, nominated to `nominated`.
    fn pod(name: &str, node: Option<&str>, nominated: Option<&str>, deleting: bool) -> String {
        let mut meta = format!("{{name: {name}, namespace: team, uid: u-{name}");
        if deleting {
            meta.push_str(", deletionTimestamp: '2026-01-01T00:00:00Z'");
        }
        meta.push('}');
        let spec = match node {
            Some(n) => format!("{{nodeName: {n}, containers: [{{name: c, image: x}}]}}"),
            None => "{containers: [{name: c, image: x}]}".to_string(),
        };
        let status = match nominated {
            Some(n) => format!("{{phase: Pending, nominatedNodeName: {n}}}"),
            None => "{phase: Pending}".to_string(),
        };
        format!("---\napiVersion: v1\nkind: Pod\nmetadata: {meta}\nspec: {spec}\nstatus: {status}\n")
    }

    fn cluster() -> ClusterObjects {
        let pods = [
            pod("planned", None, None, false),
            pod("already", None, Some("node-a"), false),
            pod("elsewhere", None, Some("node-x"), false),
            pod("bound", Some("node-a"), None, false),
            pod("deleting", None, None, true),
            pod("unregistered", None, None, false),
            pod("node-gone", None, None, false),
            pod("on-node", None, None, false),
            pod("unplanned", None, None, false),
        ];
        ClusterObjects::parse(&format!("{CLUSTER}{}", pods.concat()), "test.yaml").unwrap()
    }

    fn controller(packing: Packing) -> Controller {
        let settings = Settings { packing, ..Settings::default() };
        let mut c = Controller::with_settings(Arc::new(kwok_catalog("us-east-1")), settings, 0);
        let placements: BTreeMap<String, String> = [
            ("planned", "default-a"),
            ("already", "default-a"),
            ("elsewhere", "default-a"),
            ("bound", "default-a"),
            ("deleting", "default-a"),
            ("unregistered", "default-b"),
            ("node-gone", "default-c"),
            // A placement already followed to the claim's Node (`forget_placements`).
            ("on-node", "node-a"),
        ]
        .into_iter()
        .map(|(p, at)| (format!("u-{p}"), at.to_string()))
        .collect();
        c.placements = Arc::new(placements);
        c
    }

    fn nominated(effects: &[Effect]) -> Vec<(String, String)> {
        effects
            .iter()
            .map(|e| match e {
                Effect::Nominate { namespace, name, uid, node } => {
                    assert_eq!(uid.as_deref(), Some(format!("u-{name}").as_str()), "the pod's uid guards the write");
                    (format!("{namespace}/{name}"), node.clone())
                }
                other => panic!("only nominations: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn pending_pods_are_nominated_once_to_the_registered_node_of_their_claim() {
        let mut m = cluster();
        let c = controller(Packing::Cost);
        let pods = m.pods.clone();
        let got = nominated(&c.nominations(&m.view_with(&pods)));
        let want: Vec<(String, String)> = ["team/elsewhere", "team/on-node", "team/planned"]
            .iter()
            .map(|p| (p.to_string(), "node-a".to_string()))
            .collect();
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(sorted, want, "not: already nominated there, bound, deleting, unregistered, Node gone, unplanned");
        // Once written, nothing more to write.
        for p in &mut m.pods {
            let key = format!("team/{}", p.metadata.name.as_deref().unwrap_or_default());
            if got.iter().any(|(k, _)| *k == key) {
                Arc::make_mut(p).status.get_or_insert_with(Default::default).nominated_node_name =
                    Some("node-a".into());
            }
        }
        let pods = m.pods.clone();
        assert!(c.nominations(&m.view_with(&pods)).is_empty());
    }

    #[test]
    fn a_node_being_deleted_or_a_claim_being_deleted_gets_no_nomination() {
        let mut m = cluster();
        let c = controller(Packing::Cost);
        Arc::make_mut(&mut m.nodes[0]).metadata.deletion_timestamp = m.pods[4].metadata.deletion_timestamp.clone();
        let pods = m.pods.clone();
        assert!(c.nominations(&m.view_with(&pods)).is_empty(), "the Node is going");
        let mut m = cluster();
        Arc::make_mut(&mut m.nodeclaims[0]).metadata.deletion_timestamp = m.pods[4].metadata.deletion_timestamp.clone();
        let pods = m.pods.clone();
        let got = nominated(&c.nominations(&m.view_with(&pods)));
        assert_eq!(got, vec![("team/on-node".to_string(), "node-a".to_string())], "only the placement on the Node");
    }

    #[test]
    fn upstream_packing_nominates_nothing() {
        let m = cluster();
        let c = controller(Packing::Upstream);
        let pods = m.pods.clone();
        assert!(c.nominations(&m.view_with(&pods)).is_empty());
        let mut c = c;
        assert!(c.plan(&m, 0).iter().all(|e| !matches!(e, Effect::Nominate { .. })));
    }
}
