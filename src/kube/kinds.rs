//! The object kinds the engine reads from a live cluster, and where they live in the API.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, PodTemplate, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::Resource;
use kube::core::ApiResource;

use crate::engine::api::capacitybuffer::CapacityBuffer;
use crate::engine::api::nodeoverlay::NodeOverlay;
use crate::engine::api::{EC2NodeClass, NodeClaim, NodePool};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Pod,
    Node,
    NodePool,
    NodeClaim,
    NodeClass,
    NodeOverlay,
    DaemonSet,
    Pdb,
    Pvc,
    Pv,
    StorageClass,
    /// The nodes' CSI attach limits.
    CSINode,
    Namespace,
    /// CapacityBuffers and what they take their shape from (gate `CapacityBuffer`).
    CapacityBuffer,
    PodTemplate,
    Deployment,
    StatefulSet,
    /// What default topology spread deduces pods' selectors from (`--scheduler-config`); watched only then.
    Service,
    ReplicaSet,
    ReplicationController,
}

impl Kind {
    pub const ALL: [Kind; 20] = [
        Kind::Pod,
        Kind::Node,
        Kind::NodePool,
        Kind::NodeClaim,
        Kind::NodeClass,
        Kind::NodeOverlay,
        Kind::DaemonSet,
        Kind::Pdb,
        Kind::Pvc,
        Kind::Pv,
        Kind::StorageClass,
        Kind::CSINode,
        Kind::Namespace,
        Kind::CapacityBuffer,
        Kind::PodTemplate,
        Kind::Deployment,
        Kind::StatefulSet,
        Kind::Service,
        Kind::ReplicaSet,
        Kind::ReplicationController,
    ];

    pub fn api_resource(self) -> ApiResource {
        match self {
            Kind::Pod => ApiResource::erase::<Pod>(&()),
            Kind::Node => ApiResource::erase::<Node>(&()),
            Kind::NodePool => ApiResource::erase::<NodePool>(&()),
            Kind::NodeClaim => ApiResource::erase::<NodeClaim>(&()),
            Kind::NodeClass => ApiResource::erase::<EC2NodeClass>(&()),
            Kind::NodeOverlay => ApiResource::erase::<NodeOverlay>(&()),
            Kind::DaemonSet => ApiResource::erase::<DaemonSet>(&()),
            Kind::Pdb => ApiResource::erase::<PodDisruptionBudget>(&()),
            Kind::Pvc => ApiResource::erase::<PersistentVolumeClaim>(&()),
            Kind::Pv => ApiResource::erase::<PersistentVolume>(&()),
            Kind::StorageClass => ApiResource::erase::<StorageClass>(&()),
            Kind::CSINode => ApiResource::erase::<CSINode>(&()),
            Kind::Namespace => ApiResource::erase::<Namespace>(&()),
            Kind::CapacityBuffer => ApiResource::erase::<CapacityBuffer>(&()),
            Kind::PodTemplate => ApiResource::erase::<PodTemplate>(&()),
            Kind::Deployment => ApiResource::erase::<Deployment>(&()),
            Kind::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
            Kind::Service => ApiResource::erase::<Service>(&()),
            Kind::ReplicaSet => ApiResource::erase::<ReplicaSet>(&()),
            Kind::ReplicationController => ApiResource::erase::<ReplicationController>(&()),
        }
    }

    /// `pods`, `nodeclaims.karpenter.sh`: how kubectl and RBAC name it.
    pub fn resource_name(self) -> String {
        let ar = self.api_resource();
        if ar.group.is_empty() { ar.plural } else { format!("{}.{}", ar.plural, ar.group) }
    }

    /// Whether the engine can work without it: a cluster without Karpenter's AWS CRD still has NodePools to show,
    /// upstream installs the NodeOverlay CRD only from v1.7 on (no CRD, no overlays), and CapacityBuffers need the
    /// autoscaling CRD and, to resolve, rights on workloads that an install may not grant.
    pub fn optional(self) -> bool {
        matches!(
            self,
            Kind::NodeClass
                | Kind::NodeOverlay
                | Kind::CapacityBuffer
                | Kind::PodTemplate
                | Kind::Deployment
                | Kind::StatefulSet
                | Kind::CSINode
        ) || self.for_default_spread()
    }

    /// Whether a missing right to list it is no fault: only CapacityBuffers and default topology spread read these,
    /// and without them there are no buffers to resolve and no selectors to deduce from them. Without CSINodes the
    /// nodes' attach limits are unknown, so unlimited, as for a node whose CSI driver has not reported yet (the
    /// rights check still makes such an instance read-only: it would not act on what it cannot see).
    pub fn forbidden_is_absent(self) -> bool {
        matches!(self, Kind::CapacityBuffer | Kind::PodTemplate | Kind::Deployment | Kind::StatefulSet | Kind::CSINode)
            || self.for_default_spread()
    }

    /// Whether only default topology spread reads it: watched only when it is configured.
    pub fn for_default_spread(self) -> bool {
        matches!(self, Kind::Service | Kind::ReplicaSet | Kind::ReplicationController)
    }

    pub fn namespaced(self) -> bool {
        matches!(
            self,
            Kind::Pod
                | Kind::DaemonSet
                | Kind::Pdb
                | Kind::Pvc
                | Kind::CapacityBuffer
                | Kind::PodTemplate
                | Kind::Deployment
                | Kind::StatefulSet
                | Kind::Service
                | Kind::ReplicaSet
                | Kind::ReplicationController
        )
    }
}

/// Karpenter's CRD group names, to tell "Karpenter isn't installed" from other missing kinds.
pub fn is_karpenter(kind: Kind) -> bool {
    matches!(kind, Kind::NodePool | Kind::NodeClaim) || NodePool::group(&()) == kind.api_resource().group
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_their_api_paths() {
        assert_eq!(Kind::Pod.resource_name(), "pods");
        assert_eq!(Kind::NodeClaim.resource_name(), "nodeclaims.karpenter.sh");
        assert_eq!(Kind::NodeClass.resource_name(), "ec2nodeclasses.karpenter.k8s.aws");
        assert_eq!(Kind::Pdb.resource_name(), "poddisruptionbudgets.policy");
        assert_eq!(Kind::NodeOverlay.resource_name(), "nodeoverlays.karpenter.sh");
        assert_eq!(Kind::NodeOverlay.api_resource().api_version, "karpenter.sh/v1alpha1");
        assert!(Kind::NodeOverlay.optional() && !Kind::NodeOverlay.namespaced());
        assert!(Kind::Pvc.namespaced() && !Kind::Pv.namespaced());
        assert!(is_karpenter(Kind::NodePool) && !is_karpenter(Kind::Node));
    }
}
