//! `autoscaling.x-k8s.io/v1beta1` CapacityBuffer (core v1.14, gate `CapacityBuffer`; the Cluster Autoscaler's type):
//! spare room the provisioner keeps for a pod shape, as virtual pods. Resolution and the virtual pods are
//! [`crate::engine::capacitybuffer`]'s; this is the object and what the API server checks of it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::Condition;
use super::validation::{FieldError, FieldPath, is_dns1123_subdomain};
use crate::engine::resources::parse_quantity;

/// The default (and only) strategy; copied to the status, never checked.
pub const ACTIVE_CAPACITY: &str = "buffer.x-k8s.io/active-capacity";

/// The CRD's CEL messages, verbatim.
pub const MSG_TEMPLATE_NEEDS_SIZE: &str = "If podTemplateRef is set, replicas or limits must also be set";
pub const MSG_ONE_REF: &str = "You must define either PodTemplateRef or ScalableRef, but not both";

/// What the API server says of a malformed quantity.
pub const MSG_QUANTITY: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// Condition types and reasons (upstream's constants).
pub const COND_READY_FOR_PROVISIONING: &str = "ReadyForProvisioning";
pub const COND_PROVISIONING: &str = "Provisioning";
pub const REASON_RESOLVED: &str = "Resolved";
pub const REASON_POD_TEMPLATE_NOT_FOUND: &str = "PodTemplateNotFound";
pub const REASON_SCALABLE_REF_NOT_FOUND: &str = "ScalableRefNotFound";
pub const REASON_RESOLUTION_FAILED: &str = "ResolutionFailed";
pub const REASON_FITS_EXISTING: &str = "FitsExistingCapacity";
pub const REASON_REQUIRES_NEW: &str = "RequiresNewCapacity";
pub const REASON_NOT_READY: &str = "NotReadyForProvisioning";
pub const REASON_BUFFER_EMPTY: &str = "BufferEmpty";

/// A CapacityBuffer: room for `replicas` copies of a pod shape, kept free by the provisioner.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "autoscaling.x-k8s.io",
    version = "v1beta1",
    kind = "CapacityBuffer",
    plural = "capacitybuffers",
    shortname = "cb",
    namespaced,
    status = "CapacityBufferStatus"
)]
#[kube(derive = "PartialEq")]
#[serde(rename_all = "camelCase")]
pub struct CapacityBufferSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_strategy: Option<String>,
    /// A PodTemplate in the buffer's namespace: the shape of one chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// A Deployment, StatefulSet or ReplicaSet whose pod template is the shape (and whose replicas `percentage`
    /// reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scalable_ref: Option<ScalableRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Of the scalable's replicas, rounded up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<i32>,
    /// Caps the chunks by their total requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalObjectRef {
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScalableRef {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    pub kind: String,
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityBufferStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_strategy: Option<String>,
}

impl CapacityBuffer {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace(), self.name())
    }

    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// Every way a CapacityBuffer breaks the CRD's schema or CEL rules; empty means the API server accepts it.
pub fn validate_capacitybuffer(cb: &CapacityBuffer) -> Vec<FieldError> {
    let object = format!("CapacityBuffer/{}", cb.name());
    let mut errs = Vec::new();
    let mut err = |path: FieldPath, value: String, message: &str| {
        errs.push(FieldError { object: object.clone(), path, value, message: message.to_string() });
    };
    let name_path = FieldPath::root().field("metadata").field("name");
    match cb.metadata.name.as_deref() {
        None | Some("") => err(name_path, String::new(), "name is required"),
        Some(n) if !is_dns1123_subdomain(n) => err(name_path, n.to_string(), "must be a lowercase RFC 1123 subdomain"),
        _ => {}
    }
    let spec = FieldPath::root().field("spec");
    let s = &cb.spec;
    if s.pod_template_ref.is_some() && s.replicas.is_none() && s.limits.is_none() {
        err(spec.clone(), String::new(), MSG_TEMPLATE_NEEDS_SIZE);
    }
    if s.pod_template_ref.is_some() && s.scalable_ref.is_some() {
        err(spec.clone(), String::new(), MSG_ONE_REF);
    }
    if let Some(r) = &s.pod_template_ref
        && r.name.is_empty()
    {
        err(spec.field("podTemplateRef").field("name"), String::new(), "should be at least 1 chars long");
    }
    if let Some(r) = &s.scalable_ref {
        for (field, v) in [("kind", &r.kind), ("name", &r.name)] {
            if v.is_empty() {
                err(spec.field("scalableRef").field(field), String::new(), "should be at least 1 chars long");
            }
        }
    }
    for (field, v) in [("replicas", s.replicas), ("percentage", s.percentage)] {
        if let Some(v) = v
            && v < 0
        {
            err(spec.field(field), v.to_string(), "should be greater than or equal to 0");
        }
    }
    for (k, q) in s.limits.iter().flatten() {
        if parse_quantity(&q.0).is_err() {
            err(spec.field("limits").field(k), q.0.clone(), MSG_QUANTITY);
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cb(yaml: &str) -> CapacityBuffer {
        serde_yaml::from_str(&format!(
            "apiVersion: autoscaling.x-k8s.io/v1beta1\nkind: CapacityBuffer\nmetadata: {{name: b, namespace: ns}}\n{yaml}"
        ))
        .unwrap()
    }

    fn messages(c: &CapacityBuffer) -> Vec<String> {
        validate_capacitybuffer(c).into_iter().map(|e| format!("{}: {}", e.path, e.message)).collect()
    }

    #[test]
    fn the_crds_rules_and_messages() {
        assert!(messages(&cb("spec: {podTemplateRef: {name: t}, replicas: 2}")).is_empty());
        assert!(
            messages(&cb("spec: {scalableRef: {apiGroup: apps, kind: Deployment, name: web}, percentage: 20}"))
                .is_empty()
        );
        assert_eq!(messages(&cb("spec: {podTemplateRef: {name: t}}")), [format!("spec: {MSG_TEMPLATE_NEEDS_SIZE}")]);
        assert_eq!(
            messages(&cb(
                "spec: {podTemplateRef: {name: t}, scalableRef: {kind: Deployment, name: w}, limits: {cpu: '4'}}"
            )),
            [format!("spec: {MSG_ONE_REF}")]
        );
        assert_eq!(
            messages(&cb("spec: {scalableRef: {kind: Deployment, name: w}, replicas: -1, limits: {cpu: lots}}")),
            [
                "spec.replicas: should be greater than or equal to 0".to_string(),
                format!("spec.limits.cpu: {MSG_QUANTITY}")
            ]
        );
    }
}
