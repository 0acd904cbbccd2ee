//! Reserved instances whose reservation ended (upstream AWS's `capacityreservation.capacitytype`): EC2 keeps such
//! an instance running as on-demand, and the cloud's list says so. Its NodeClaim and Node are relabelled
//! `on-demand` and lose the reservation's id and type labels (`…-interruptible` stays, as upstream leaves it). There
//! is no promotion the other way. Whether the node then drifts is the NodePool's call: requirement drift compares
//! the pool's requirements with the claim's labels, so a reserved-only pool drifts it and a pool that allows
//! on-demand keeps it.

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::catalog::aws::{CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_TYPE};
use crate::engine::labels;
use crate::engine::provisioning::ClusterSnapshot;

use super::Controller;
use super::cloud::CloudInstance;
use super::effect::{Effect, LabelTarget};

impl Controller {
    /// The relabels the cloud's list of instances calls for; taken with garbage collection's list.
    /// Nothing with the gate `ReservedCapacity` off: the controller is not run then, as upstream registers it only
    /// with the gate on.
    pub fn capacity_types(&self, m: &ClusterSnapshot<'_>, instances: &[CloudInstance]) -> Vec<Effect> {
        let reserved = |l: Option<&BTreeMap<String, String>>| {
            l.and_then(|l| l.get(labels::CAPACITY_TYPE)).is_some_and(|t| t == labels::CAPACITY_RESERVED)
        };
        // Usually nothing is reserved at all: no index is built then.
        if !self.gates().reserved_capacity
            || !(m.nodeclaims.iter().any(|c| reserved(c.metadata.labels.as_ref()))
                || m.nodes.iter().any(|n| reserved(n.metadata.labels.as_ref())))
        {
            return Vec::new();
        }
        let reserved_nodes: BTreeMap<&str, &k8s_openapi::api::core::v1::Node> = m
            .nodes
            .iter()
            .filter(|n| reserved(n.metadata.labels.as_ref()))
            .filter_map(|n| Some((n.spec.as_ref()?.provider_id.as_deref()?, n)))
            .collect();
        let demoted: BTreeSet<&str> = instances
            .iter()
            .filter(|i| i.capacity_type.as_deref() == Some(labels::CAPACITY_ON_DEMAND))
            .map(|i| i.provider_id.as_str())
            .collect();
        let mut out = Vec::new();
        for c in m.nodeclaims.iter() {
            let Some(pid) = c.provider_id() else { continue };
            if c.metadata.deletion_timestamp.is_some() || !demoted.contains(pid) || !self.ours(Some(pid)) {
                continue;
            }
            if reserved(c.metadata.labels.as_ref()) {
                out.push(demote(LabelTarget::NodeClaim, c.name()));
            }
            // A node is relabelled once registered (before that, registration copies the claim's labels), even
            // when its claim was relabelled earlier.
            if let Some(n) = reserved_nodes.get(pid)
                && n.metadata.deletion_timestamp.is_none()
                && n.metadata.labels.as_ref().and_then(|l| l.get(labels::REGISTERED)).is_some_and(|v| v == "true")
            {
                out.push(demote(LabelTarget::Node, n.metadata.name.as_deref().unwrap_or_default()));
            }
        }
        out
    }
}

fn demote(target: LabelTarget, name: &str) -> Effect {
    Effect::Relabel {
        target,
        name: name.to_string(),
        set: [(labels::CAPACITY_TYPE.to_string(), labels::CAPACITY_ON_DEMAND.to_string())].into(),
        remove: vec![CAPACITY_RESERVATION_ID.to_string(), CAPACITY_RESERVATION_TYPE.to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::settings::Settings;
    use crate::engine::api::NodeClaim;
    use crate::engine::manifests::ClusterObjects;

    fn labelled(registered: bool) -> BTreeMap<String, String> {
        let mut l: BTreeMap<String, String> = [
            (labels::CAPACITY_TYPE, labels::CAPACITY_RESERVED),
            (CAPACITY_RESERVATION_ID, "cr-1"),
            (CAPACITY_RESERVATION_TYPE, "default"),
            (crate::engine::catalog::aws::CAPACITY_RESERVATION_INTERRUPTIBLE, "false"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        if registered {
            l.insert(labels::REGISTERED.into(), "true".into());
        }
        l
    }

    fn cluster(node_registered: bool) -> ClusterObjects {
        let mut m = ClusterObjects::default();
        let mut c = NodeClaim::new("c1", Default::default());
        c.metadata.labels = Some(labelled(false));
        c.status = Some(crate::engine::api::nodeclaim::NodeClaimStatus {
            provider_id: Some("aws:///z1/i-1".into()),
            ..Default::default()
        });
        m.nodeclaims.push(c.into());
        let mut n = k8s_openapi::api::core::v1::Node::default();
        n.metadata.name = Some("n1".into());
        n.metadata.labels = Some(labelled(node_registered));
        n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            provider_id: Some("aws:///z1/i-1".into()),
            ..Default::default()
        });
        m.nodes.push(n.into());
        m
    }

    fn listed(capacity_type: &str) -> Vec<CloudInstance> {
        vec![CloudInstance {
            provider_id: "aws:///z1/i-1".into(),
            launched_at: None,
            terminating: false,
            capacity_type: Some(capacity_type.into()),
        }]
    }

    fn controller(gate: bool) -> Controller {
        let settings = Settings {
            gates: crate::controller::settings::FeatureGates { reserved_capacity: gate, ..Default::default() },
            ..Default::default()
        };
        let catalog = std::sync::Arc::new(crate::engine::catalog::kwok::kwok_catalog("us-east-1"));
        Controller::with_settings(catalog, settings, 0).with_provider_prefix("aws:///")
    }

    fn targets(effects: &[Effect]) -> Vec<(LabelTarget, String)> {
        effects
            .iter()
            .map(|e| match e {
                Effect::Relabel { target, name, set, remove } => {
                    assert_eq!(set.get(labels::CAPACITY_TYPE).map(String::as_str), Some("on-demand"));
                    assert_eq!(remove, &[CAPACITY_RESERVATION_ID.to_string(), CAPACITY_RESERVATION_TYPE.to_string()]);
                    (*target, name.clone())
                }
                other => panic!("not a relabel: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn only_instances_the_cloud_calls_on_demand_are_relabelled_and_only_with_the_gate_on() {
        let m = cluster(true);
        let c = controller(true);
        assert!(c.capacity_types(&m.view(), &listed("reserved")).is_empty(), "still in its reservation");
        assert_eq!(
            targets(&c.capacity_types(&m.view(), &listed("on-demand"))),
            [(LabelTarget::NodeClaim, "c1".to_string()), (LabelTarget::Node, "n1".to_string())]
        );
        // An unregistered node is left to registration, which copies the claim's labels.
        let m = cluster(false);
        assert_eq!(
            targets(&c.capacity_types(&m.view(), &listed("on-demand"))),
            [(LabelTarget::NodeClaim, "c1".into())]
        );
        // Gate off: upstream runs no such controller.
        assert!(controller(false).capacity_types(&cluster(true).view(), &listed("on-demand")).is_empty());
    }
}
