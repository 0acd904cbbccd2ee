//! `karpenter.sh/v1alpha1` NodeOverlay (core v1.7+, gate `NodeOverlay`): operator-written price and extended-capacity
//! adjustments for the instance types that match its requirements. Evaluation lives in [`crate::engine::overlay`].
//!
//! Two levels of checking, as upstream:
//! - [`validate_nodeoverlay`]: the CRD's OpenAPI schema and CEL rules, i.e. what the API server rejects. Messages are
//!   the CRD's own.
//! - [`runtime_validate`]: upstream's `RuntimeValidate`, which the API server accepts and the controller reports as
//!   `ValidationSucceeded=False` with reason `RuntimeValidation`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::Condition;
use super::validation::{FieldError, FieldPath, is_dns1123_subdomain, label_value_errors, qualified_name_errors};
use crate::engine::labels::{self, LabelPolicy};
use crate::engine::requirements::Operator;
use crate::engine::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, parse_quantity};

/// CRD `maxItems` of `spec.requirements`.
pub const MAX_OVERLAY_REQUIREMENTS: usize = 100;
/// CRD `maxLength` of a requirement key.
pub const MAX_KEY_LENGTH: usize = 316;
/// CRD bounds of `spec.weight` (unset means 0).
pub const MIN_WEIGHT: i32 = 1;
pub const MAX_WEIGHT: i32 = 10_000;

/// The CRD's messages, verbatim (core `pkg/apis/crds/karpenter.sh_nodeoverlays.yaml`, v1.14.1).
pub const MSG_NOT_IN_NEEDS_VALUE: &str = "requirements with operator 'NotIn' must have a value defined";
pub const MSG_IN_NEEDS_VALUE: &str = "requirements with operator 'In' must have a value defined";
pub const MSG_BOUND_NEEDS_INTEGER: &str =
    "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value";
pub const MSG_KARPENTER_DOMAIN: &str = "label domain \"karpenter.sh\" is restricted";
pub const MSG_HOSTNAME: &str = "label \"kubernetes.io/hostname\" is restricted";
pub const MSG_RESTRICTED_RESOURCE: &str = "invalid resource restricted";
pub const MSG_PRICE_AND_ADJUSTMENT: &str = "cannot set both 'price' and 'priceAdjustment'";
/// The CRD patterns, quoted in pattern errors as the API server does.
pub const PRICE_PATTERN: &str = r"^\d+(\.\d+)?$";
pub const PRICE_ADJUSTMENT_PATTERN: &str =
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$";
const KEY_PATTERN: &str = super::crd::LABEL_KEY_PATTERN;

/// Resources an overlay may not set: it only adds extended resources (and hugepages).
pub const RESTRICTED_CAPACITY: [&str; 4] = [CPU, MEMORY, EPHEMERAL_STORAGE, PODS];
/// The operators the CRD's enum allows.
pub const OPERATORS: [&str; 8] = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"];

/// A NodeOverlay: adjusts the price of matching offerings and/or adds capacity to matching instance types.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1alpha1",
    kind = "NodeOverlay",
    plural = "nodeoverlays",
    shortname = "overlays",
    status = "NodeOverlayStatus"
)]
#[kube(derive = "PartialEq")]
#[kube(category = "karpenter")]
// `kubectl get nodeoverlays`, as with upstream's CRD (`-o wide` adds the priority-1 column).
// One column per attribute: clippy takes their common keys (`type_ = "string"`) for duplicates.
#[allow(clippy::duplicated_attributes)]
#[kube(printcolumn(name = "Ready", type_ = "string", json_path = r#".status.conditions[?(@.type=="Ready")].status"#))]
#[kube(printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"))]
#[kube(printcolumn(name = "Weight", type_ = "integer", json_path = ".spec.weight", priority = 1))]
#[serde(rename_all = "camelCase")]
pub struct NodeOverlaySpec {
    /// Matched against `karpenter.sh/nodepool`, the NodePool's template labels and the instance type's labels; zone
    /// and capacity type then select offerings. The upstream type has no `minValues`, hence core's requirement type.
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirement>,
    /// An absolute price ($/h) replacing the offering's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<String>,
    /// A signed delta (`+1.2`, `-0.5`) or a signed percentage (`+10%`, `-15%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_adjustment: Option<String>,
    /// Extended resources (and hugepages) added to or replacing the instance type's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
    /// 1..=10000; unset means 0. Higher weights take precedence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeOverlayStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The NodeOverlay CRD as `deploy/` installs it: upstream's schema and CEL rules on the derived schema (see
/// [`super::crd`]); [`validate_nodeoverlay`] is the same check in this tool.
pub fn nodeoverlay_crd() -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition
{
    use super::crd::{self, RequirementsOf};
    use kube::CustomResourceExt;
    crd::finish(NodeOverlay::crd(), |root| {
        let mut spec = root.at("spec");
        spec.required(&["requirements"])
            .rule("!has(self.price) || !has(self.priceAdjustment)", MSG_PRICE_AND_ADJUSTMENT);
        crd::requirements(&mut spec.at("requirements"), RequirementsOf::NodeOverlay);
        spec.at("price").pattern(PRICE_PATTERN);
        spec.at("priceAdjustment").pattern(PRICE_ADJUSTMENT_PATTERN);
        spec.at("weight").min(MIN_WEIGHT.into()).max(MAX_WEIGHT.into());
        let mut capacity = spec.at("capacity");
        crd::quantity_map(&mut capacity);
        let restricted = RESTRICTED_CAPACITY.map(|r| format!("'{r}'")).join(", ");
        capacity.rule(&format!("self.all(x, !(x in [{restricted}]))"), MSG_RESTRICTED_RESOURCE);
        crd::conditions(&mut root.at("status.conditions"), true, true);
    })
}

impl NodeOverlay {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    /// The weight the controller orders by: unset is 0.
    pub fn weight(&self) -> i32 {
        self.spec.weight.unwrap_or(0)
    }

    /// The price string the store keeps: `price` if set, else `priceAdjustment` (upstream `lo.Ternary`).
    pub fn price_string(&self) -> Option<&str> {
        self.spec.price.as_deref().or(self.spec.price_adjustment.as_deref())
    }

    /// A condition of the status by type.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// CRD validation (API server)
// ---------------------------------------------------------------------------------------------------------------

struct Report {
    object: String,
    errs: Vec<FieldError>,
}

impl Report {
    fn err(&mut self, path: &FieldPath, value: impl Into<String>, message: impl Into<String>) {
        self.errs.push(FieldError {
            object: self.object.clone(),
            path: path.clone(),
            value: value.into(),
            message: message.into(),
        });
    }
}

/// `\d*\.?\d+`: optional integer digits, an optional dot, then at least one digit.
fn is_unsigned_decimal(s: &str) -> bool {
    let all_digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    match s.split_once('.') {
        Some((int, frac)) => all_digits(int) && !frac.is_empty() && all_digits(frac),
        None => !s.is_empty() && all_digits(s),
    }
}

/// `^\d+(\.\d+)?$`.
pub fn is_valid_price(s: &str) -> bool {
    !s.starts_with('.') && is_unsigned_decimal(s)
}

/// The `priceAdjustment` pattern: a signed decimal (`+1.2`, `-129`, `+.5`), a positive percentage (`+298%`), a
/// negative percentage above -100% with one or two integer digits (`-99.999%`), or exactly `-100%`.
pub fn is_valid_price_adjustment(s: &str) -> bool {
    if let Some(rest) = s.strip_prefix('+') {
        return is_unsigned_decimal(rest.strip_suffix('%').unwrap_or(rest));
    }
    let Some(rest) = s.strip_prefix('-') else { return false };
    match rest.strip_suffix('%') {
        None => is_unsigned_decimal(rest),
        Some("100") => true,
        Some(pct) => {
            let (int, frac) = pct.split_once('.').map_or((pct, None), |(i, f)| (i, Some(f)));
            (1..=2).contains(&int.len())
                && int.bytes().all(|b| b.is_ascii_digit())
                && frac.is_none_or(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
        }
    }
}

/// The CRD's key pattern: an optional lowercase DNS-subdomain prefix and `/`, then a name part (no length limits
/// besides the 316-byte total; the tighter `IsQualifiedName` check is runtime validation's).
fn key_matches_pattern(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        p.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.iter().all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
    });
    let n = name.as_bytes();
    let name_ok = !n.is_empty()
        && n[0].is_ascii_alphanumeric()
        && n[n.len() - 1].is_ascii_alphanumeric()
        && n.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    prefix_ok && name_ok
}

/// CEL `self in [capacity-type, nodepool] || !self.find("^([^/]+)").endsWith("karpenter.sh")`: everything before
/// the first `/` (the whole key if there is none) must not end with `karpenter.sh` — a plain suffix, so
/// `notkarpenter.sh/x` is restricted too.
fn karpenter_domain_restricted(key: &str) -> bool {
    if key == labels::CAPACITY_TYPE || key == labels::NODEPOOL {
        return false;
    }
    key.split('/').next().unwrap_or(key).ends_with("karpenter.sh")
}

/// Every way a NodeOverlay breaks the CRD's schema or CEL rules, each with its field path; empty means the API
/// server accepts it. CEL rules on a list or map are reported at the offending item (the API server reports them at
/// the list), so an editor can point at the line.
pub fn validate_nodeoverlay(overlay: &NodeOverlay) -> Vec<FieldError> {
    let mut r = Report { object: format!("NodeOverlay/{}", overlay.name()), errs: Vec::new() };
    let name_path = FieldPath::root().field("metadata").field("name");
    match overlay.metadata.name.as_deref() {
        None | Some("") => r.err(&name_path, "", "name is required"),
        Some(n) if !is_dns1123_subdomain(n) => r.err(&name_path, n, "must be a lowercase RFC 1123 subdomain"),
        _ => {}
    }
    let spec = FieldPath::root().field("spec");
    let s = &overlay.spec;

    let rp = spec.field("requirements");
    // The Go type is `omitempty` and `required`: an empty list is dropped on the way and then missing.
    if s.requirements.is_empty() {
        r.err(&rp, "", "Required value");
    }
    if s.requirements.len() > MAX_OVERLAY_REQUIREMENTS {
        r.err(&rp, s.requirements.len().to_string(), format!("must have at most {MAX_OVERLAY_REQUIREMENTS} items"));
    }
    for (i, req) in s.requirements.iter().enumerate() {
        validate_requirement(&mut r, &rp.index(i), req);
    }

    if let Some(p) = &s.price
        && !is_valid_price(p)
    {
        r.err(&spec.field("price"), p, format!("should match '{PRICE_PATTERN}'"));
    }
    if let Some(p) = &s.price_adjustment
        && !is_valid_price_adjustment(p)
    {
        r.err(&spec.field("priceAdjustment"), p, format!("should match '{PRICE_ADJUSTMENT_PATTERN}'"));
    }
    if s.price.is_some() && s.price_adjustment.is_some() {
        r.err(&spec, "", MSG_PRICE_AND_ADJUSTMENT);
    }
    if let Some(capacity) = &s.capacity {
        let cp = spec.field("capacity");
        for (k, q) in capacity {
            if RESTRICTED_CAPACITY.contains(&k.as_str()) {
                r.err(&cp.key(k), k, MSG_RESTRICTED_RESOURCE);
            }
            if let Err(e) = parse_quantity(&q.0) {
                r.err(&cp.key(k), &q.0, e.to_string());
            }
        }
    }
    if let Some(w) = s.weight {
        if w < MIN_WEIGHT {
            r.err(&spec.field("weight"), w.to_string(), format!("should be greater than or equal to {MIN_WEIGHT}"));
        } else if w > MAX_WEIGHT {
            r.err(&spec.field("weight"), w.to_string(), format!("should be less than or equal to {MAX_WEIGHT}"));
        }
    }
    r.errs
}

fn validate_requirement(r: &mut Report, path: &FieldPath, req: &NodeSelectorRequirement) {
    let key_path = path.field("key");
    let values_path = path.field("values");
    let key = req.key.as_str();
    if key.len() > MAX_KEY_LENGTH {
        r.err(&key_path, key, format!("may not be longer than {MAX_KEY_LENGTH}"));
    }
    if !key_matches_pattern(key) {
        r.err(&key_path, key, format!("should match '{KEY_PATTERN}'"));
    }
    if karpenter_domain_restricted(key) {
        r.err(&key_path, key, MSG_KARPENTER_DOMAIN);
    }
    if key == labels::HOSTNAME {
        r.err(&key_path, key, MSG_HOSTNAME);
    }
    let values = req.values.as_deref().unwrap_or_default();
    for (j, v) in values.iter().enumerate() {
        for e in label_value_errors(v) {
            r.err(&values_path.index(j), v, e);
        }
    }
    let joined = || format!("[{}]", values.join(", "));
    if !OPERATORS.contains(&req.operator.as_str()) {
        let supported = OPERATORS.map(|o| format!("{o:?}")).join(", ");
        r.err(&path.field("operator"), &req.operator, format!("Unsupported value: supported values: {supported}"));
        return;
    }
    match req.operator.as_str() {
        "In" if values.is_empty() => r.err(&values_path, joined(), MSG_IN_NEEDS_VALUE),
        "NotIn" if values.is_empty() => r.err(&values_path, joined(), MSG_NOT_IN_NEEDS_VALUE),
        // CEL `int(x.values[0]) >= 0`; a value `int()` can't read fails the rule as well.
        "Gt" | "Lt" | "Gte" | "Lte" if !matches!(values, [v] if v.parse::<i64>().is_ok_and(|n| n >= 0)) => {
            r.err(&values_path, joined(), MSG_BOUND_NEEDS_INTEGER);
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Runtime validation (controller)
// ---------------------------------------------------------------------------------------------------------------

/// Upstream `NodeOverlay.RuntimeValidate`: per requirement (key normalised) the operator, restricted labels, the
/// well-known values of `karpenter.sh/capacity-type`, the qualified-name and label-value syntax, `In` with values and
/// the single non-negative integer of the bound operators (upstream checks only `Gt`/`Lt` here; `Gte`/`Lte` are
/// included because the requirement algebra can't read them otherwise). Each requirement's problems are wrapped as
/// upstream does and all are joined with `"; "` (multierr). The restricted-label wording is this code base's
/// [`LabelPolicy::restricted`].
pub fn runtime_validate(overlay: &NodeOverlay, policy: &LabelPolicy) -> Result<(), String> {
    let mut all = Vec::new();
    for req in &overlay.spec.requirements {
        let errs = runtime_requirement_errors(req, policy);
        if !errs.is_empty() {
            all.push(format!("invalid value: {} in requirements, restricted", errs.join("; ")));
        }
    }
    if all.is_empty() { Ok(()) } else { Err(all.join("; ")) }
}

fn runtime_requirement_errors(req: &NodeSelectorRequirement, policy: &LabelPolicy) -> Vec<String> {
    let mut errs = Vec::new();
    let key = labels::normalize_key(&req.key);
    let values = req.values.as_deref().unwrap_or_default();
    let op = Operator::parse(&req.operator);
    if op.is_none() {
        errs.push(format!("key {key} has an unsupported operator {} not in {OPERATORS:?}", req.operator));
    }
    if let Some(why) = policy.restricted(key) {
        errs.push(why);
    }
    if key == labels::CAPACITY_TYPE && op == Some(Operator::In) {
        let (known, unknown): (Vec<&String>, Vec<&String>) =
            values.iter().partition(|v| labels::CAPACITY_TYPES.contains(&v.as_str()));
        if known.is_empty() {
            errs.push(format!(
                "no valid values found in {values:?} for {key}, expected one of: {:?}, got: {unknown:?}",
                labels::CAPACITY_TYPES
            ));
        }
    }
    for e in qualified_name_errors(key) {
        errs.push(format!("key {key} is not a qualified name, {e}"));
    }
    for v in values {
        for e in label_value_errors(v) {
            errs.push(format!("invalid value {v} for key {key}, {e}"));
        }
    }
    if op == Some(Operator::In) && values.is_empty() {
        errs.push(format!("key {key} with operator In must have a value defined"));
    }
    if let Some(op @ (Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte)) = op
        && !matches!(values, [v] if v.parse::<i64>().is_ok_and(|n| n >= 0))
    {
        errs.push(format!("key {key} with operator {op} must have a single positive integer value"));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn price_patterns() {
        for ok in ["0", "1", "1.03", "23", "0.5"] {
            assert!(is_valid_price(ok), "{ok}");
        }
        for bad in ["", "+1", "-1", ".5", "1.", "1.2.3", "1e3", "NaN", "1%"] {
            assert!(!is_valid_price(bad), "{bad}");
        }
    }

    #[test]
    fn price_adjustment_patterns() {
        for ok in ["+1.2", "-129", "+.5", "-0.5", "+298%", "+.5%", "-5%", "-99.99999999999%", "-100%", "-0%"] {
            assert!(is_valid_price_adjustment(ok), "{ok}");
        }
        for bad in ["", "1.2", "10%", "-100.1%", "-101%", "-100.0%", "-150%", "-.5%", "+", "-", "+1.", "++1", "+1%%"] {
            assert!(!is_valid_price_adjustment(bad), "{bad}");
        }
    }

    #[test]
    fn key_rules() {
        assert!(key_matches_pattern("example.com/Team_1"));
        assert!(key_matches_pattern("team"));
        assert!(!key_matches_pattern("Example.com/team"));
        assert!(!key_matches_pattern("/team"));
        assert!(!key_matches_pattern("a/b/c"));
        assert!(!karpenter_domain_restricted(labels::CAPACITY_TYPE));
        assert!(!karpenter_domain_restricted(labels::NODEPOOL));
        assert!(karpenter_domain_restricted("karpenter.sh/foo"));
        assert!(karpenter_domain_restricted("sub.karpenter.sh/foo"));
        assert!(karpenter_domain_restricted("notkarpenter.sh/foo"));
        assert!(!karpenter_domain_restricted("karpenter.k8s.aws/instance-family"));
    }
}
