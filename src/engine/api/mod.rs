//! The Karpenter API objects as serde types: `karpenter.sh/v1` NodePool and NodeClaim, `karpenter.k8s.aws/v1`
//! EC2NodeClass. Reading is lenient (unknown fields ignored); [`validation`] is the strict check for operator input.

pub mod capacitybuffer;
pub mod common;
pub mod crd;
pub mod duration;
pub mod ec2nodeclass;
pub mod nodeclaim;
pub mod nodeoverlay;
pub mod nodepool;
pub mod scheduler_config;
pub mod strict;
pub mod validation;

pub use common::{Condition, NodeClassReference, NodeSelectorRequirementWithMinValues};
pub use ec2nodeclass::{EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus};
pub use nodepool::{Budget, Disruption, NodePool, NodePoolSpec, NodePoolStatus};
