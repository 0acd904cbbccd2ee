//! `karpenter.sh/v1` NodePool, with the defaults the CRD applies.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Condition, NodeClassReference, NodeSelectorRequirementWithMinValues};

/// A NodePool: a template for NodeClaims plus limits and disruption rules.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(group = "karpenter.sh", version = "v1", kind = "NodePool", plural = "nodepools", status = "NodePoolStatus")]
// `kubectl scale nodepool` sets a static pool's replicas, as with upstream's CRD.
#[kube(scale(spec_replicas_path = ".spec.replicas", status_replicas_path = ".status.nodes"))]
// Comparable objects let the simulator keep unchanged ones between snapshots.
#[kube(derive = "PartialEq")]
#[kube(category = "karpenter")]
// `kubectl get nodepools`, as with upstream's CRD (`-o wide` adds the priority-1 columns).
// One column per attribute: clippy takes their common keys (`type_ = "string"`) for duplicates.
#[allow(clippy::duplicated_attributes)]
#[kube(printcolumn(name = "NodeClass", type_ = "string", json_path = ".spec.template.spec.nodeClassRef.name"))]
#[kube(printcolumn(name = "Nodes", type_ = "string", json_path = ".status.nodes"))]
#[kube(printcolumn(name = "Ready", type_ = "string", json_path = r#".status.conditions[?(@.type=="Ready")].status"#))]
#[kube(printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"))]
#[kube(printcolumn(name = "Weight", type_ = "integer", json_path = ".spec.weight", priority = 1))]
#[kube(printcolumn(name = "CPU", type_ = "string", json_path = ".status.resources.cpu", priority = 1))]
#[kube(printcolumn(name = "Memory", type_ = "string", json_path = ".status.resources.memory", priority = 1))]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    pub template: NodeClaimTemplate,
    #[serde(default)]
    pub disruption: Disruption,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// 1..=100; unset means 0 (lowest priority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Static NodePools (`replicas` set) are not provisioned dynamically.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    #[serde(default, skip_serializing_if = "TemplateMetadata::is_empty")]
    pub metadata: TemplateMetadata,
    pub spec: NodeClaimTemplateSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl TemplateMetadata {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    pub node_class_ref: NodeClassReference,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// Go duration or `Never`; the CRD default is 720h.
    #[serde(default = "default_expire_after")]
    pub expire_after: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<String>,
}

pub fn default_expire_after() -> String {
    "720h".to_string()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    #[serde(default = "default_consolidation_policy")]
    pub consolidation_policy: String,
    /// Go duration or `Never`; the default is 0s.
    #[serde(default = "default_consolidate_after")]
    pub consolidate_after: String,
    #[serde(default = "default_budgets")]
    pub budgets: Vec<Budget>,
}

impl Default for Disruption {
    fn default() -> Self {
        Disruption {
            consolidation_policy: default_consolidation_policy(),
            consolidate_after: default_consolidate_after(),
            budgets: default_budgets(),
        }
    }
}

pub const POLICY_WHEN_EMPTY: &str = "WhenEmpty";
pub const POLICY_WHEN_EMPTY_OR_UNDERUTILIZED: &str = "WhenEmptyOrUnderutilized";
pub const POLICY_BALANCED: &str = "Balanced";

fn default_consolidation_policy() -> String {
    POLICY_WHEN_EMPTY_OR_UNDERUTILIZED.to_string()
}
fn default_consolidate_after() -> String {
    "0s".to_string()
}
fn default_budgets() -> Vec<Budget> {
    vec![Budget { nodes: "10%".to_string(), schedule: None, duration: None, reasons: None }]
}

/// A disruption budget: how many nodes may be voluntarily disrupted at once, optionally only during a cron window
/// and only for some reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    #[serde(default = "default_budget_nodes")]
    pub nodes: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Vec<String>>,
}

fn default_budget_nodes() -> String {
    "10%".to_string()
}

pub const REASON_UNDERUTILIZED: &str = "Underutilized";
pub const REASON_EMPTY: &str = "Empty";
pub const REASON_DRIFTED: &str = "Drifted";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<i64>,
}

impl NodePool {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    pub fn weight(&self) -> i32 {
        self.spec.weight.unwrap_or(0)
    }

    /// Whether the NodePool's status says it is not Ready. Pools without a Ready condition (as written by hand or
    /// in a scenario) count as ready: nothing has judged them yet.
    pub fn is_not_ready(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "False")
    }

    pub fn is_deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}

/// The NodePool CRD as `deploy/` installs it: upstream's schema, defaults and CEL rules on the derived schema (see
/// [`super::crd`]), so the API server accepts, defaults and refuses what upstream's CRD does (`kubectl` included, not
/// only this tool's editor).
pub fn nodepool_crd() -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use super::crd::{self, RequirementsOf};
    use kube::CustomResourceExt;
    use serde_json::json;
    crd::finish(NodePool::crd(), |root| {
        let mut spec = root.at("spec");
        spec.required(&["template"])
            .rule(
                "has(self.replicas) == has(oldSelf.replicas)",
                "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning \
                 modes",
            )
            .rule(
                "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && \
                 'nodes' in self.limits))",
                "only 'limits.nodes' is supported on static NodePools",
            )
            .rule("!has(self.replicas) || !has(self.weight)", "'weight' is not supported on static NodePools");

        let mut disruption = spec.at("disruption");
        disruption.default(json!({"consolidateAfter": "0s"})).required(&["consolidateAfter"]);
        disruption.at("consolidateAfter").pattern(crd::NILLABLE_DURATION_PATTERN);
        disruption.at("consolidationPolicy").default(json!(POLICY_WHEN_EMPTY_OR_UNDERUTILIZED)).one_of(&[
            POLICY_WHEN_EMPTY,
            POLICY_WHEN_EMPTY_OR_UNDERUTILIZED,
            POLICY_BALANCED,
        ]);
        let mut budgets = disruption.at("budgets");
        budgets
            .default(json!([{"nodes": default_budget_nodes()}]))
            .max_items(50)
            .list_type("atomic")
            .rule("self.all(x, has(x.schedule) == has(x.duration))", "'schedule' must be set with 'duration'");
        let mut budget = budgets.at("[]");
        budget.required(&["nodes"]);
        budget.at("nodes").default(json!(default_budget_nodes())).pattern(r"^((100|[0-9]{1,2})%|[0-9]+)$");
        budget.at("duration").pattern(r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$");
        budget
            .at("schedule")
            .pattern(r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$");
        budget.at("reasons").max_items(50).list_type("set");
        budget.at("reasons[]").one_of(&[REASON_UNDERUTILIZED, REASON_EMPTY, REASON_DRIFTED]);

        crd::quantity_map(&mut spec.at("limits"));
        spec.at("replicas").min(0);
        spec.at("weight").min(1).max(100);

        let mut template = spec.at("template");
        template.required(&["spec"]);
        template.at("metadata.annotations").map_type("granular");
        crd::template_labels(&mut template.at("metadata.labels"));
        let mut claim = template.at("spec");
        claim.required(&["nodeClassRef", "requirements"]);
        claim.at("expireAfter").default(json!(default_expire_after())).pattern(crd::NILLABLE_DURATION_PATTERN);
        claim.at("terminationGracePeriod").pattern(crd::DURATION_PATTERN);
        let mut class_ref = claim.at("nodeClassRef");
        crd::node_class_ref(&mut class_ref);
        class_ref
            .rule("self.group == oldSelf.group", "nodeClassRef.group is immutable")
            .rule("self.kind == oldSelf.kind", "nodeClassRef.kind is immutable");
        crd::requirements(&mut claim.at("requirements"), RequirementsOf::NodePool);
        crd::taints(&mut claim.at("taints"));
        crd::taints(&mut claim.at("startupTaints"));

        let mut status = root.at("status");
        crd::conditions(&mut status.at("conditions"), true, true);
        crd::quantity_map(&mut status.at("resources"));
        status.at("nodes").default(json!(0));
        status.add_property("nodeClassObservedGeneration", json!({"type": "integer", "format": "int64"}));
    })
}
