//! What the live controller asks of the cluster and the cloud. Effects are plain data, decided by the pure
//! planner ([`super::Controller::plan`]) and carried out by the live executor (`controller::execute`); each one is
//! idempotent, so an effect repeated because the watch cache had not caught up yet does no harm.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, Taint};

use crate::engine::api::NodeClaim;
use crate::engine::api::nodeclaim::NodeClaimStatus;
use crate::engine::lifecycle::DeleteReason;

/// Why a NodeClaim is created.
#[derive(Debug, Clone, PartialEq)]
pub enum Purpose {
    /// For pending pods. `placeholder` is the solve's name for the claim until the API server names it (cost
    /// packing remembers which pods it was made for by it).
    Provisioning { pods: usize, placeholder: String },
    /// A replacement for disruption command `id`.
    Replacement { id: String },
    /// A static NodePool's replica (gate `StaticCapacity`).
    Static { nodepool: String },
}

/// The kind of object a [`Effect::Relabel`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelTarget {
    NodeClaim,
    Node,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    CreateNodeClaim {
        claim: Box<NodeClaim>,
        purpose: Purpose,
    },
    /// The cloud provider's Create for this claim; on success the claim's labels and status record the launch.
    Launch {
        claim: Box<NodeClaim>,
    },
    /// Replace the claim's status (conditions, node name) with this one.
    PatchClaimStatus {
        name: String,
        status: Box<NodeClaimStatus>,
    },
    /// Merge labels and annotations into the claim's metadata, remove the annotations `remove_annotations` names,
    /// and set its finalizers when given.
    PatchClaimMetadata {
        name: String,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
        remove_annotations: Vec<String>,
        finalizers: Option<Vec<String>>,
    },
    /// What must change on a node: labels and annotations merged in (keys this tool owns, so no guard is needed and
    /// another writer's change elsewhere on the node never makes it fail), and taints and finalizers replaced when
    /// given. Lists are replaced whole, so a write that carries one is guarded by the resourceVersion the decision
    /// was made on (`resource_version` is set exactly then): a concurrent change fails with 409 and the next tick
    /// decides again from the fresh node instead of overwriting it.
    SyncNode {
        name: String,
        resource_version: Option<String>,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
        taints: Option<Vec<Taint>>,
        finalizers: Option<Vec<String>>,
    },
    /// Labels set and removed by a merge patch on a NodeClaim or a Node (keys this tool owns, so no guard): an
    /// instance whose reservation ended is relabelled on-demand.
    Relabel {
        target: LabelTarget,
        name: String,
        set: BTreeMap<String, String>,
        remove: Vec<String>,
    },
    /// Cost packing: `status.nominatedNodeName` of a pending pod set to the registered Node of the claim a solve
    /// sized for it, so that kube-scheduler (PreferNominatedNode) tries that node first and holds the pod's room
    /// there against other pods. A merge patch of the pod's status; `uid`, when known, guards against a pod
    /// recreated under the same name (a StatefulSet's), which is another pod.
    Nominate {
        namespace: String,
        name: String,
        uid: Option<String>,
        node: String,
    },
    DeleteNodeClaim {
        name: String,
        reason: DeleteReason,
    },
    /// Remove the termination finalizer: the claim is finalized.
    FinalizeNodeClaim {
        claim: Box<NodeClaim>,
    },
    DeleteNode {
        name: String,
    },
    DeleteInstance {
        provider_id: String,
    },
    Evict {
        namespace: String,
        name: String,
    },
    /// Ask the cloud to reboot the claim's instance (repair's reboot); `op_id` names this one request.
    RebootInstance {
        claim: String,
        provider_id: String,
        op_id: String,
    },
    /// A Kubernetes Event on an object, for what operators look for with `kubectl describe`.
    Event {
        regarding: Box<ObjectReference>,
        warning: bool,
        reason: String,
        message: String,
    },
    /// Past the termination grace deadline: delete with this grace, bypassing PDBs.
    DeletePod {
        namespace: String,
        name: String,
        grace_seconds: u32,
    },
    /// A NodePool's status as upstream's NodePool controllers keep it (`resources`, `nodes`, conditions).
    PatchNodePoolStatus {
        name: String,
        status: Box<crate::engine::api::nodepool::NodePoolStatus>,
    },
    /// A NodeOverlay's status conditions (ValidationSucceeded, Ready) after an evaluation.
    PatchNodeOverlayStatus {
        name: String,
        status: Box<crate::engine::api::nodeoverlay::NodeOverlayStatus>,
    },
    /// A CapacityBuffer's status: its resolution (replicas, template, `ReadyForProvisioning`) and the provisioner's
    /// `Provisioning` condition.
    PatchCapacityBufferStatus {
        namespace: String,
        name: String,
        status: Box<crate::engine::api::capacitybuffer::CapacityBufferStatus>,
    },
    /// What the cloud resolved for an EC2NodeClass (subnets, security groups, AMIs, instance profile, conditions).
    UpdateNodeClassStatus {
        name: String,
        status: Box<crate::engine::api::EC2NodeClassStatus>,
    },
}

impl Effect {
    /// The object a write goes to, with the part written where two effects write one object independently
    /// (`NodeClaim/a` and `NodeClaim/a/status`): what a refused write is backed off by.
    pub fn object_key(&self) -> String {
        match self {
            Effect::CreateNodeClaim { claim, purpose } => match purpose {
                Purpose::Replacement { id } => format!("NodeClaim+replacement/{id}"),
                _ => format!("NodeClaim+{}", claim.metadata.generate_name.as_deref().unwrap_or(claim.name())),
            },
            Effect::Launch { claim } => format!("NodeClaim/{}/launch", claim.name()),
            Effect::PatchClaimStatus { name, .. } => format!("NodeClaim/{name}/status"),
            Effect::PatchClaimMetadata { name, .. }
            | Effect::Relabel { target: LabelTarget::NodeClaim, name, .. }
            | Effect::DeleteNodeClaim { name, .. } => format!("NodeClaim/{name}"),
            Effect::FinalizeNodeClaim { claim } => format!("NodeClaim/{}", claim.name()),
            Effect::SyncNode { name, .. } | Effect::Relabel { target: LabelTarget::Node, name, .. } => {
                format!("Node/{name}")
            }
            Effect::DeleteNode { name } => format!("Node/{name}"),
            Effect::Nominate { namespace, name, .. } => format!("Pod/{namespace}/{name}/status"),
            Effect::Evict { namespace, name } | Effect::DeletePod { namespace, name, .. } => {
                format!("Pod/{namespace}/{name}")
            }
            Effect::DeleteInstance { provider_id } => format!("Instance/{provider_id}"),
            Effect::RebootInstance { provider_id, .. } => format!("Instance/{provider_id}/reboot"),
            Effect::Event { regarding, reason, .. } => format!(
                "Event/{}/{}/{}",
                regarding.kind.as_deref().unwrap_or(""),
                regarding.name.as_deref().unwrap_or(""),
                reason
            ),
            Effect::PatchNodePoolStatus { name, .. } => format!("NodePool/{name}/status"),
            Effect::PatchNodeOverlayStatus { name, .. } => format!("NodeOverlay/{name}/status"),
            Effect::PatchCapacityBufferStatus { namespace, name, .. } => {
                format!("CapacityBuffer/{namespace}/{name}/status")
            }
            Effect::UpdateNodeClassStatus { name, .. } => format!("EC2NodeClass/{name}/status"),
        }
    }

    /// One line for logs and the events pane.
    pub fn describe(&self) -> String {
        match self {
            Effect::CreateNodeClaim { claim, purpose } => {
                let pool = claim.metadata.generate_name.as_deref().unwrap_or("").trim_end_matches('-');
                match purpose {
                    Purpose::Provisioning { pods, .. } => format!("create a NodeClaim in {pool} for {pods} pod(s)"),
                    Purpose::Replacement { id } => format!("create a replacement NodeClaim in {pool} for {id}"),
                    Purpose::Static { nodepool } => format!("create a NodeClaim for static NodePool {nodepool}"),
                }
            }
            Effect::Launch { claim } => format!("launch NodeClaim {}", claim.name()),
            Effect::PatchClaimStatus { name, .. } => format!("update the status of NodeClaim {name}"),
            Effect::PatchClaimMetadata { name, .. } => format!("update NodeClaim {name}"),
            Effect::SyncNode { name, .. } => format!("sync node {name}"),
            Effect::Relabel { target: LabelTarget::NodeClaim, name, set, .. } => {
                format!("relabel NodeClaim {name} ({})", pairs(set))
            }
            Effect::Relabel { target: LabelTarget::Node, name, set, .. } => {
                format!("relabel node {name} ({})", pairs(set))
            }
            Effect::Nominate { namespace, name, node, .. } => {
                format!("nominate node {node} for pod {namespace}/{name}")
            }
            Effect::DeleteNodeClaim { name, reason } => format!("delete NodeClaim {name} ({})", reason.as_str()),
            Effect::FinalizeNodeClaim { claim } => format!("finalize NodeClaim {}", claim.name()),
            Effect::DeleteNode { name } => format!("delete node {name}"),
            Effect::DeleteInstance { provider_id } => format!("terminate instance {provider_id}"),
            Effect::RebootInstance { claim, provider_id, .. } => {
                format!("reboot instance {provider_id} (NodeClaim {claim})")
            }
            Effect::Evict { namespace, name } => format!("evict pod {namespace}/{name}"),
            Effect::DeletePod { namespace, name, .. } => format!("delete pod {namespace}/{name}"),
            Effect::UpdateNodeClassStatus { name, .. } => format!("update the status of EC2NodeClass {name}"),
            Effect::PatchNodePoolStatus { name, .. } => format!("update the status of NodePool {name}"),
            Effect::PatchNodeOverlayStatus { name, .. } => format!("update the status of NodeOverlay {name}"),
            Effect::PatchCapacityBufferStatus { namespace, name, .. } => {
                format!("update the status of CapacityBuffer {namespace}/{name}")
            }
            Effect::Event { regarding, reason, .. } => {
                format!(
                    "event {reason} on {}/{}",
                    regarding.kind.as_deref().unwrap_or(""),
                    regarding.name.as_deref().unwrap_or("")
                )
            }
        }
    }
}

fn pairs(set: &BTreeMap<String, String>) -> String {
    set.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
}
