//! Shapes shared by the Karpenter CRDs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A node selector requirement with Karpenter's `minValues` extension.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    pub key: String,
    pub operator: String,
    // Shared: a provisioning pass writes one list of up to 600 instance-type names into thousands of NodeClaims.
    #[serde(default, skip_serializing_if = "<[String]>::is_empty")]
    pub values: std::sync::Arc<[String]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<i64>,
}

/// Reference to the cloud provider's node class (`EC2NodeClass` on AWS).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassReference {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

/// A status condition (the `metav1.Condition` shape Karpenter's objects use).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
