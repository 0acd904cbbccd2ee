//! The pods on one node, as the dashboard's drill-down shows them: requests, owner, the PDBs that cover each and
//! what they allow now, and whether `karpenter.sh/do-not-disrupt` holds it. Asked for one node at a time (a
//! picture carries only pod names: every pod's detail in every picture would cost megabytes at 20,000 pods).

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::engine::provisioning::Millis;
use crate::engine::stored_pod::StoredPod;
use crate::protocol::view::NodePodRow;

/// The pods bound to `node`, by namespace and name, read from the cluster's pods and PDBs (whichever store holds
/// them: the watch cache's read, or the simulated cluster).
pub fn on_node<'a>(
    pods: impl Iterator<Item = &'a StoredPod>,
    pdbs: impl Iterator<Item = &'a PodDisruptionBudget>,
    node: &str,
    now: Millis,
) -> Vec<NodePodRow> {
    let all: Vec<&StoredPod> = pods.collect();
    let here: Vec<&StoredPod> = all.iter().copied().filter(|p| p.node_name() == Some(node)).collect();
    // Each PDB that covers a pod here, with what it allows now: worked out once, over every pod it selects.
    let covering: Vec<(&PodDisruptionBudget, String)> = pdbs
        .filter(|b| here.iter().any(|p| crate::engine::pdb::selects(b, p)))
        .map(|b| {
            let name = b.metadata.name.clone().unwrap_or_default();
            (b, format!("{name} ({} allowed)", crate::engine::pdb::disruptions_allowed(b, &all)))
        })
        .collect();
    let mut rows: Vec<NodePodRow> = here
        .iter()
        .map(|p| {
            let requests = crate::engine::scheduling::pod::pod_requests(p).unwrap_or_default();
            let owner = p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map_or_else(|| "-".to_string(), |o| format!("{}/{}", o.kind, o.name));
            NodePodRow {
                namespace: p.metadata.namespace.clone().unwrap_or_default(),
                name: p.metadata.name.clone().unwrap_or_default(),
                phase: p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_else(|| "Unknown".into()),
                cpu_millis: requests.cpu,
                memory_bytes: requests.memory,
                owner,
                pdbs: covering
                    .iter()
                    .filter(|(b, _)| crate::engine::pdb::selects(b, p))
                    .map(|(_, shown)| shown.clone())
                    .collect(),
                do_not_disrupt: crate::engine::termination::do_not_disrupt_active(p, now),
            }
        })
        .collect();
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    rows
}
