//! `karpenter.sh/v1` NodeClaim: one request for one node.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Condition, NodeClassReference, NodeSelectorRequirementWithMinValues};

#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(group = "karpenter.sh", version = "v1", kind = "NodeClaim", plural = "nodeclaims", status = "NodeClaimStatus")]
// Comparable objects let the simulator keep unchanged ones between snapshots.
#[kube(derive = "PartialEq")]
#[kube(category = "karpenter")]
// `kubectl get nodeclaims`, as with upstream's CRD (`-o wide` adds the priority-1 columns).
// One column per attribute: clippy takes their common keys (`type_ = "string"`) for duplicates.
#[allow(clippy::duplicated_attributes)]
#[kube(printcolumn(
    name = "Type",
    type_ = "string",
    json_path = r".metadata.labels.node\.kubernetes\.io/instance-type"
))]
#[kube(printcolumn(name = "Capacity", type_ = "string", json_path = r".metadata.labels.karpenter\.sh/capacity-type"))]
#[kube(printcolumn(name = "Zone", type_ = "string", json_path = r".metadata.labels.topology\.kubernetes\.io/zone"))]
#[kube(printcolumn(name = "Node", type_ = "string", json_path = ".status.nodeName"))]
#[kube(printcolumn(name = "Ready", type_ = "string", json_path = r#".status.conditions[?(@.type=="Ready")].status"#))]
#[kube(printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"))]
#[kube(printcolumn(name = "ImageID", type_ = "string", json_path = ".status.imageID", priority = 1))]
#[kube(printcolumn(name = "ID", type_ = "string", json_path = ".status.providerID", priority = 1))]
#[kube(printcolumn(
    name = "NodePool",
    type_ = "string",
    json_path = r".metadata.labels.karpenter\.sh/nodepool",
    priority = 1
))]
#[kube(printcolumn(name = "NodeClass", type_ = "string", json_path = ".spec.nodeClassRef.name", priority = 1))]
#[kube(printcolumn(
    name = "Drifted",
    type_ = "string",
    json_path = r#".status.conditions[?(@.type=="Drifted")].status"#,
    priority = 1
))]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    #[serde(default, skip_serializing_if = "ResourceRequirements::is_empty")]
    pub resources: ResourceRequirements,
    pub node_class_ref: NodeClassReference,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<String>,
    #[serde(default = "super::nodepool::default_expire_after")]
    pub expire_after: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
}

impl ResourceRequirements {
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, rename = "providerID", skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<String>,
}

/// The NodeClaim CRD as `deploy/` installs it: upstream's schema, defaults and CEL rules on the derived schema (see
/// [`super::crd`]). A NodeClaim's spec is immutable.
pub fn nodeclaim_crd() -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use super::crd::{self, RequirementsOf};
    use kube::CustomResourceExt;
    use serde_json::json;
    crd::finish(NodeClaim::crd(), |root| {
        let mut spec = root.at("spec");
        spec.required(&["nodeClassRef", "requirements"]).rule("self == oldSelf", "spec is immutable");
        spec.at("expireAfter")
            .default(json!(super::nodepool::default_expire_after()))
            .pattern(crd::NILLABLE_DURATION_PATTERN);
        spec.at("terminationGracePeriod").pattern(crd::DURATION_PATTERN);
        crd::node_class_ref(&mut spec.at("nodeClassRef"));
        crd::requirements(&mut spec.at("requirements"), RequirementsOf::NodeClaim);
        crd::quantity_map(&mut spec.at("resources.requests"));
        crd::taints(&mut spec.at("taints"));
        crd::taints(&mut spec.at("startupTaints"));

        let mut status = root.at("status");
        crd::conditions(&mut status.at("conditions"), false, true);
        crd::quantity_map(&mut status.at("capacity"));
        crd::quantity_map(&mut status.at("allocatable"));
        status.at("lastPodEventTime").format("date-time");
    })
}

/// The root condition: `True` when Launched, Registered and Initialized all are (what `kubectl get nodeclaims` shows as
/// READY).
pub const COND_READY: &str = "Ready";
pub const COND_LAUNCHED: &str = "Launched";
pub const COND_REGISTERED: &str = "Registered";
pub const COND_INITIALIZED: &str = "Initialized";
pub const COND_DRIFTED: &str = "Drifted";
pub const COND_CONSOLIDATABLE: &str = "Consolidatable";
pub const COND_DISRUPTION_REASON: &str = "DisruptionReason";
/// Karpenter v1.15: a reboot is under way (`True`), or how the last one ended (`False`).
pub const COND_REBOOTING: &str = "Rebooting";
pub const COND_INSTANCE_TERMINATING: &str = "InstanceTerminating";

impl NodeClaim {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)
    }

    pub fn is_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.status == "True")
    }

    pub fn provider_id(&self) -> Option<&str> {
        self.status.as_ref()?.provider_id.as_deref().filter(|s| !s.is_empty())
    }

    pub fn nodepool(&self) -> Option<&str> {
        self.metadata.labels.as_ref()?.get(crate::engine::labels::NODEPOOL).map(String::as_str)
    }
}
