//! The CRDs `deploy/crds` installs, finished from the schemas the types derive.
//!
//! The derive gives the fields, their nesting, their JSON types and most `required` lists. A cluster runs one CRD per
//! kind, shared with upstream Karpenter, so what ours installs has to accept, refuse and default exactly what upstream
//! v1.14.1's does. What the Rust types cannot say (patterns, enums, bounds, list and map semantics, the CRD's own
//! defaults, CEL rules, and fields upstream declares that the engine does not read) is added here, per kind, in the
//! `*_crd()` function next to each type. `tests/crd_equivalence.rs` compares the result with upstream's published
//! CRDs, keyword by keyword.
//!
//! Two things the derive emits are serde's, not the CRD's, and are dropped before the edits: `default` (serde's
//! defaults make reading lenient; the CRD's defaults are set explicitly where upstream has them) and `nullable` (an
//! `Option` means "may be absent"; upstream's schemas never accept `null`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Map, Value, json};

/// The category every Karpenter kind is listed under (`kubectl get karpenter`).
pub const CATEGORY: &str = "karpenter";

/// A Kubernetes resource quantity (`resource.Quantity`'s published pattern).
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
/// A label key: an optional lowercase DNS-subdomain prefix and `/`, then a name.
pub const LABEL_KEY_PATTERN: &str =
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
/// A label value (empty allowed).
pub const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
/// A Go duration in whole seconds, minutes and hours, or `Never`.
pub const NILLABLE_DURATION_PATTERN: &str = r"^(([0-9]+(s|m|h))+|Never)$";
/// A Go duration in whole seconds, minutes and hours.
pub const DURATION_PATTERN: &str = r"^([0-9]+(s|m|h))+$";
/// A condition type (`metav1.Condition`).
const CONDITION_TYPE_PATTERN: &str =
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";
/// The requirement operators, in the order the CRDs list them.
pub const REQUIREMENT_OPERATORS: [&str; 8] = ["Gte", "Lte", "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
/// The taint effects a NodePool or NodeClaim may set.
pub const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A cursor on one node of a schema, with chainable setters. Paths are dotted property names; `name[]` steps into
/// the list's items and `name{}` into the map's values (`[]` or `{}` alone: the node's own).
pub struct Node<'a>(&'a mut Value);

impl Node<'_> {
    fn object(&mut self) -> &mut Map<String, Value> {
        self.0.as_object_mut().expect("a schema node is an object")
    }

    /// The node at `path` below this one; panics naming the path if the types do not have it.
    pub fn at(&mut self, path: &str) -> Node<'_> {
        let mut node: &mut Value = &mut *self.0;
        for segment in path.split('.').filter(|s| !s.is_empty()) {
            let name = segment.trim_end_matches(['[', ']', '{', '}']);
            if !name.is_empty() {
                node = node
                    .get_mut("properties")
                    .and_then(|p| p.get_mut(name))
                    .unwrap_or_else(|| panic!("the schema has no property {name:?} (path {path:?})"));
            }
            let mut steps = &segment[name.len()..];
            while !steps.is_empty() {
                let key = if steps.starts_with("[]") { "items" } else { "additionalProperties" };
                node = node.get_mut(key).unwrap_or_else(|| panic!("the schema has no {key} at {path:?}"));
                steps = &steps[2..];
            }
        }
        Node(node)
    }

    pub fn set(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.object().insert(key.to_string(), value.into());
        self
    }
    pub fn unset(&mut self, key: &str) -> &mut Self {
        self.object().remove(key);
        self
    }
    pub fn pattern(&mut self, pattern: &str) -> &mut Self {
        self.set("pattern", pattern)
    }
    pub fn one_of(&mut self, values: &[&str]) -> &mut Self {
        self.set("enum", values)
    }
    pub fn format(&mut self, format: &str) -> &mut Self {
        self.set("format", format)
    }
    pub fn min(&mut self, n: i64) -> &mut Self {
        self.set("minimum", n)
    }
    pub fn max(&mut self, n: i64) -> &mut Self {
        self.set("maximum", n)
    }
    pub fn min_length(&mut self, n: usize) -> &mut Self {
        self.set("minLength", n)
    }
    pub fn max_length(&mut self, n: usize) -> &mut Self {
        self.set("maxLength", n)
    }
    pub fn min_items(&mut self, n: usize) -> &mut Self {
        self.set("minItems", n)
    }
    pub fn max_items(&mut self, n: usize) -> &mut Self {
        self.set("maxItems", n)
    }
    pub fn max_properties(&mut self, n: usize) -> &mut Self {
        self.set("maxProperties", n)
    }
    pub fn default(&mut self, value: Value) -> &mut Self {
        self.set("default", value)
    }
    /// Replaces the `required` list.
    pub fn required(&mut self, fields: &[&str]) -> &mut Self {
        self.set("required", fields)
    }
    /// `x-kubernetes-list-type` (`atomic`, `set`).
    pub fn list_type(&mut self, list_type: &str) -> &mut Self {
        self.set("x-kubernetes-list-type", list_type)
    }
    /// A list merged by key (`x-kubernetes-list-type: map`).
    pub fn keyed_by(&mut self, keys: &[&str]) -> &mut Self {
        self.set("x-kubernetes-list-type", "map").set("x-kubernetes-list-map-keys", keys)
    }
    /// `x-kubernetes-map-type` (`atomic`, `granular`).
    pub fn map_type(&mut self, map_type: &str) -> &mut Self {
        self.set("x-kubernetes-map-type", map_type)
    }
    /// Appends a CEL rule (`x-kubernetes-validations`).
    pub fn rule(&mut self, rule: &str, message: &str) -> &mut Self {
        let rules = self.object().entry("x-kubernetes-validations").or_insert_with(|| Value::Array(Vec::new()));
        rules.as_array_mut().expect("rules are a list").push(json!({"rule": rule, "message": message}));
        self
    }
    /// Declares a property the Rust type does not have (a field upstream accepts that the engine does not read).
    pub fn add_property(&mut self, name: &str, schema: Value) -> &mut Self {
        let props = self.object().entry("properties").or_insert_with(|| Value::Object(Map::new()));
        props.as_object_mut().expect("properties are a map").insert(name.to_string(), schema);
        self
    }
    /// Drops a property the Rust type reads but upstream's CRD does not declare for this field.
    pub fn remove_property(&mut self, name: &str) -> &mut Self {
        let removed = self.0.get_mut("properties").and_then(|p| p.as_object_mut()).and_then(|p| p.remove(name));
        assert!(removed.is_some(), "no property {name:?} to remove");
        self
    }
    /// Replaces the node's whole schema.
    pub fn replace(&mut self, schema: Value) -> &mut Self {
        *self.0 = schema;
        self
    }
}

/// Finishes a derived CRD: `kind`List, the `karpenter` category, serde's `default`s and `nullable`s and the
/// derive's `title` dropped, `apiVersion`, `kind` and `metadata` declared, then the kind's own `edit`.
pub fn finish(mut crd: CustomResourceDefinition, edit: impl Fn(&mut Node)) -> CustomResourceDefinition {
    crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    for version in &mut crd.spec.versions {
        let props = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()).expect("a derived schema");
        let mut value = serde_json::to_value(&*props).expect("a schema serialises");
        drop_serde_keywords(&mut value);
        let mut root = Node(&mut value);
        root.add_property("apiVersion", json!({"type": "string"}))
            .add_property("kind", json!({"type": "string"}))
            .add_property("metadata", json!({"type": "object"}));
        edit(&mut root);
        *props = serde_json::from_value(value).expect("the finished schema is a JSONSchemaProps");
    }
    crd
}

/// Removes `default`, `nullable` and `title` from every schema node (not from property names or data).
fn drop_serde_keywords(node: &mut Value) {
    let Some(obj) = node.as_object_mut() else { return };
    for keyword in ["default", "nullable", "title"] {
        obj.remove(keyword);
    }
    if let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut) {
        props.values_mut().for_each(drop_serde_keywords);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = obj.get_mut(key) {
            drop_serde_keywords(child);
        }
    }
    for key in ["anyOf", "allOf", "oneOf"] {
        if let Some(list) = obj.get_mut(key).and_then(Value::as_array_mut) {
            list.iter_mut().for_each(drop_serde_keywords);
        }
    }
}

/// A resource quantity: an integer or a string in quantity syntax.
pub fn quantity() -> Value {
    json!({
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": true,
    })
}

/// Makes `node` (a map of quantities) a map of checked quantities.
pub fn quantity_map(node: &mut Node) {
    node.at("{}").replace(quantity());
}

/// `status.conditions` (`metav1.Condition`). `reason_required`: a reason is required and may not be empty (every kind
/// but NodeClaim); `keyed`: the list is merged by `type`.
pub fn conditions(node: &mut Node, reason_required: bool, keyed: bool) {
    if keyed {
        node.keyed_by(&["type"]);
    }
    let mut item = node.at("[]");
    item.at("lastTransitionTime").format("date-time");
    item.at("message").max_length(32768);
    item.at("observedGeneration").min(0);
    item.at("status").one_of(&["True", "False", "Unknown"]);
    item.at("type").max_length(316).pattern(CONDITION_TYPE_PATTERN);
    if reason_required {
        item.at("reason").max_length(1024).min_length(1).pattern(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$");
        item.required(&["lastTransitionTime", "message", "reason", "status", "type"]);
    } else {
        item.at("reason").max_length(1024).pattern(r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$");
        item.required(&["lastTransitionTime", "status", "type"]);
    }
}

/// A NodePool's or NodeClaim's `taints` or `startupTaints` (core `Taint`s, with Karpenter's checks).
pub fn taints(node: &mut Node) {
    node.list_type("atomic");
    let mut item = node.at("[]");
    item.at("effect").one_of(&TAINT_EFFECTS);
    item.at("key").min_length(1).pattern(LABEL_KEY_PATTERN);
    // Upstream checks a taint's value with the key's pattern.
    item.at("value").pattern(LABEL_KEY_PATTERN);
}

/// Which kind a list of requirements belongs to: the restricted labels and the rules differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequirementsOf {
    NodePool,
    NodeClaim,
    NodeOverlay,
}

/// The `karpenter.k8s.aws` labels every kind may select on.
const AWS_INSTANCE_LABELS: [&str; 22] = [
    "ec2nodeclass",
    "instance-encryption-in-transit-supported",
    "instance-category",
    "instance-hypervisor",
    "instance-family",
    "instance-generation",
    "instance-local-nvme",
    "instance-size",
    "instance-cpu",
    "instance-cpu-manufacturer",
    "instance-cpu-sustained-clock-speed-mhz",
    "instance-memory",
    "instance-ebs-bandwidth",
    "instance-network-bandwidth",
    "instance-gpu-name",
    "instance-gpu-manufacturer",
    "instance-gpu-count",
    "instance-gpu-memory",
    "instance-accelerator-name",
    "instance-accelerator-manufacturer",
    "instance-accelerator-count",
    "instance-capability-flex",
];

/// The `karpenter.k8s.aws/*` labels a kind's requirements (or a NodePool's template labels) may use, quoted and
/// comma-separated for a CEL list. NodePools and NodeClaims also take tenancy, capacity reservations and placement
/// groups; upstream's rule on template labels names `capacity-reservation-interruptible` twice, kept so the rule is
/// upstream's text.
fn aws_allowed_labels(of: RequirementsOf, template_labels: bool) -> String {
    let mut names: Vec<&str> = Vec::new();
    if of != RequirementsOf::NodeOverlay {
        names.extend([
            "instance-tenancy",
            "capacity-reservation-type",
            "capacity-reservation-id",
            "capacity-reservation-interruptible",
        ]);
        if template_labels {
            names.push("capacity-reservation-interruptible");
        }
    }
    names.extend(AWS_INSTANCE_LABELS);
    if of != RequirementsOf::NodeOverlay {
        names.extend(["placement-group-id", "placement-group-partition"]);
    }
    names.iter().map(|n| format!("\"karpenter.k8s.aws/{n}\"")).collect::<Vec<_>>().join(", ")
}

use super::nodeoverlay::{MSG_HOSTNAME, MSG_KARPENTER_DOMAIN};
const MSG_NODEPOOL_LABEL: &str = "label \"karpenter.sh/nodepool\" is restricted";
const MSG_AWS_DOMAIN: &str = "label domain \"karpenter.k8s.aws\" is restricted";

/// The rules on one label key (`self`), or with `all` on every key of a label map.
fn restricted_label_rules(node: &mut Node, of: RequirementsOf, all: bool) {
    let wrap = |cond: String| if all { format!("self.all(x, {})", cond.replace("self", "x")) } else { cond };
    node.rule(
        &wrap(format!(
            r#"self in ["{}", "{}"] || !self.find("^([^/]+)").endsWith("karpenter.sh")"#,
            crate::engine::labels::CAPACITY_TYPE,
            crate::engine::labels::NODEPOOL
        )),
        MSG_KARPENTER_DOMAIN,
    );
    if of == RequirementsOf::NodePool {
        node.rule(&wrap(format!(r#"self != "{}""#, crate::engine::labels::NODEPOOL)), MSG_NODEPOOL_LABEL);
    }
    node.rule(&wrap(format!(r#"self != "{}""#, crate::engine::labels::HOSTNAME)), MSG_HOSTNAME);
    node.rule(
        &wrap(format!(
            r#"self in [{}] || !self.find("^([^/]+)").endsWith("karpenter.k8s.aws")"#,
            aws_allowed_labels(of, all)
        )),
        MSG_AWS_DOMAIN,
    );
}

/// A NodePool template's `metadata.labels`.
pub fn template_labels(node: &mut Node) {
    node.map_type("atomic").max_properties(100);
    node.at("{}").max_length(63).pattern(LABEL_VALUE_PATTERN);
    restricted_label_rules(node, RequirementsOf::NodePool, true);
}

/// `requirements`: node selector requirements (with `minValues` but on NodeOverlays), their restricted keys and the
/// operators' rules.
pub fn requirements(node: &mut Node, of: RequirementsOf) {
    node.list_type("atomic").max_items(100);
    {
        let mut item = node.at("[]");
        let mut key = item.at("key");
        key.max_length(316).pattern(LABEL_KEY_PATTERN);
        restricted_label_rules(&mut key, of, false);
        item.at("operator").one_of(&REQUIREMENT_OPERATORS);
        // Upstream puts the label-value bounds on the list itself.
        item.at("values").list_type("atomic").max_length(63).pattern(LABEL_VALUE_PATTERN);
        if of != RequirementsOf::NodeOverlay {
            item.at("minValues").unset("format").min(1).max(50);
        }
    }
    let in_has_values = (
        "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
        "requirements with operator 'In' must have a value defined",
    );
    let bounds = "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') \
                  ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)";
    if of == RequirementsOf::NodeOverlay {
        use super::nodeoverlay::{MSG_BOUND_NEEDS_INTEGER, MSG_IN_NEEDS_VALUE, MSG_NOT_IN_NEEDS_VALUE};
        node.rule("self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)", MSG_NOT_IN_NEEDS_VALUE)
            .rule(in_has_values.0, MSG_IN_NEEDS_VALUE)
            .rule(bounds, MSG_BOUND_NEEDS_INTEGER);
    } else {
        node.rule(in_has_values.0, in_has_values.1)
            .rule(bounds, "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value")
            .rule(
                "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
                "requirements with 'minValues' must have at least that many values specified in the 'values' field",
            );
    }
}

/// A `nodeClassRef`: group, kind and name all required and non-empty.
pub fn node_class_ref(node: &mut Node) {
    node.required(&["group", "kind", "name"]);
    node.at("group").pattern("^[^/]*$").rule("self != ''", "group may not be empty");
    node.at("kind").rule("self != ''", "kind may not be empty");
    node.at("name").rule("self != ''", "name may not be empty");
}
