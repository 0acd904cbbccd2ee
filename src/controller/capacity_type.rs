//! Reserved instances whose reservation ended (upstream AWS's `capacityreservation.capacitytype`): EC2 keeps such
//! an instance running as on-demand, and the cloud's list says so. Its NodeClaim and Node are relabelled
//! `on-demand` and lose the reservation's id and type labels (`…-interruptible` stays, as upstream leaves it). There
//! is no promotion the other way. Whether the node then drifts is the NodePool's call: requirement drift compares
//! the pool's requirements with the claim's labels, so a reserved-only pool drifts it and a pool that allows
//! on-demand keeps it.

use std::collections::BTreeMap;

use crate::engine::catalog::aws::{CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_TYPE};
use crate::engine::labels;
use crate::engine::provisioning::ClusterSnapshot;

use super::Controller;
use super::cloud::CloudInstance;
use super::effect::{Effect, LabelTarget};

impl Controller {
    /// The relabels the cloud's list of instances calls for; taken with garbage collection's list.
    pub fn capacity_types(&self, m: &ClusterSnapshot<'_>, instances: &[CloudInstance]) -> Vec<Effect> {
        let demoted: BTreeMap<&str, ()> = instances
            .iter()
            .filter(|i| i.capacity_type.as_deref() == Some(labels::CAPACITY_ON_DEMAND))
            .map(|i| (i.provider_id.as_str(), ()))
            .collect();
        if demoted.is_empty() {
            return Vec::new();
        }
        let reserved = |l: Option<&BTreeMap<String, String>>| {
            l.and_then(|l| l.get(labels::CAPACITY_TYPE)).is_some_and(|t| t == labels::CAPACITY_RESERVED)
        };
        let mut out = Vec::new();
        for c in m.nodeclaims.iter() {
            let Some(pid) = c.provider_id() else { continue };
            if c.metadata.deletion_timestamp.is_some() || !demoted.contains_key(pid) || !self.ours(Some(pid)) {
                continue;
            }
            if reserved(c.metadata.labels.as_ref()) {
                out.push(demote(LabelTarget::NodeClaim, c.name()));
            }
            // A node is relabelled once registered (before that, registration copies the claim's labels), even
            // when its claim was relabelled earlier.
            for n in m.nodes.iter() {
                let l = n.metadata.labels.as_ref();
                if n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(pid)
                    && n.metadata.deletion_timestamp.is_none()
                    && l.and_then(|l| l.get(labels::REGISTERED)).is_some_and(|v| v == "true")
                    && reserved(l)
                {
                    out.push(demote(LabelTarget::Node, n.metadata.name.as_deref().unwrap_or_default()));
                }
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
