//! The object kinds the engine reads from a live cluster, and where they live in the API.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Resource;
use kube::core::ApiResource;

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
    Namespace,
}

impl Kind {
    pub const ALL: [Kind; 12] = [
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
        Kind::Namespace,
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
            Kind::Namespace => ApiResource::erase::<Namespace>(&()),
        }
    }

    /// `pods`, `nodeclaims.karpenter.sh`: how kubectl and RBAC name it.
    pub fn resource_name(self) -> String {
        let ar = self.api_resource();
        if ar.group.is_empty() { ar.plural } else { format!("{}.{}", ar.plural, ar.group) }
    }

    /// Whether the engine can work without it: a cluster without Karpenter's AWS CRD still has NodePools to show,
    /// and upstream installs the NodeOverlay CRD only from v1.7 on (no CRD, no overlays).
    pub fn optional(self) -> bool {
        matches!(self, Kind::NodeClass | Kind::NodeOverlay)
    }

    pub fn namespaced(self) -> bool {
        matches!(self, Kind::Pod | Kind::DaemonSet | Kind::Pdb | Kind::Pvc)
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
