//! The pods on one node, as the dashboard's drill-down shows them: requests, owner, the PDBs that cover each and
//! what they allow now, and whether `karpenter.sh/do-not-disrupt` holds it. Asked for one node at a time (a
//! picture carries only pod names: every pod's detail in every picture would cost megabytes at 20,000 pods).

use crate::engine::provisioning::{ClusterSnapshot, Millis};
use crate::protocol::view::NodePodRow;

/// The pods bound to `node`, by namespace and name.
pub fn on_node(view: &ClusterSnapshot<'_>, node: &str, now: Millis) -> Vec<NodePodRow> {
    let all: Vec<&crate::engine::stored_pod::StoredPod> = view.pods.iter().collect();
    let mut rows: Vec<NodePodRow> = all
        .iter()
        .filter(|p| p.node_name() == Some(node))
        .map(|p| {
            let requests = crate::engine::scheduling::pod::pod_requests(p).unwrap_or_default();
            let owner = p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map_or_else(|| "-".to_string(), |o| format!("{}/{}", o.kind, o.name));
            let pdbs = view
                .pdbs
                .iter()
                .filter(|b| crate::engine::pdb::selects(b, p))
                .map(|b| {
                    let name = b.metadata.name.clone().unwrap_or_default();
                    format!("{name} ({} allowed)", crate::engine::pdb::disruptions_allowed(b, &all))
                })
                .collect();
            NodePodRow {
                namespace: p.metadata.namespace.clone().unwrap_or_default(),
                name: p.metadata.name.clone().unwrap_or_default(),
                phase: p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_else(|| "Unknown".into()),
                cpu_millis: requests.cpu,
                memory_bytes: requests.memory,
                owner,
                pdbs,
                do_not_disrupt: crate::engine::termination::do_not_disrupt_active(p, now),
            }
        })
        .collect();
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    rows
}
