//! Drift detection (engine.md §6, upstream `nodeclaim/disruption/drift.go`), explained: not only *that* a NodeClaim
//! drifted from its NodePool but *what* changed, as sentences an operator can read ("label team: a → b").
//!
//! Checks run in upstream's order and the first hit wins:
//! 1. **Static** ([`DriftReason::NodePoolDrifted`], [`static_drift`]). When the NodePool and the NodeClaim both
//!    carry `karpenter.sh/nodepool-hash` and the same `karpenter.sh/nodepool-hash-version`, the hashes decide (and
//!    the field comparison below only explains a difference). Different hash versions mean no static drift (upstream
//!    re-stamps such claims instead of drifting a whole fleet on upgrade). Without hashes — every NodeClaim this
//!    engine creates, since we cannot reproduce upstream's hash bytes — the hashed fields are compared one by one:
//!    template labels and annotations, taints and startup taints (as sets), `nodeClassRef`, `expireAfter`,
//!    `terminationGracePeriod`. Missing and empty are the same, as in upstream's hash.
//! 2. **Requirements** ([`DriftReason::RequirementsDrifted`], [`requirements_drift`]): the NodePool's requirements
//!    must be compatible with the node's labels (upstream `Compatible` without allow-undefined): narrowing so the
//!    node falls outside drifts it, widening does not.
//! 3. **Instance type** ([`DriftReason::InstanceTypeNotFound`], [`instance_type_drift`]): for claims older than
//!    1 h, the instance type must still exist with an offering compatible with the node's zone and capacity type.
//! 4. **Node class** ([`DriftReason::NodeClassDrifted`]): the cloud provider's [`NodeClassDrift`] hook (image,
//!    subnets, security groups …).
//!
//! Everything is pure: no I/O, the time comes in as [`Millis`], and no input (malformed labels, empty strings,
//! unparsable durations, missing status) makes it panic. Output order is deterministic (sorted keys).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Taint;

use crate::engine::api::duration::NillableDuration;
use crate::engine::api::nodeclaim::{COND_DRIFTED, COND_LAUNCHED};
use crate::engine::api::{NodeClaim, NodeClassReference, NodePool};
use crate::engine::catalog::InstanceType;
use crate::engine::labels;
use crate::engine::lifecycle::{
    self, ANNOTATION_TERMINATION_TIMESTAMP, LifecycleAction, MINUTE, STATUS_FALSE, STATUS_TRUE,
};
use crate::engine::provisioning::Millis;
use crate::engine::requirements::{Operator, Requirement, Requirements};

/// Upstream requeues the drift check of every NodeClaim this often.
pub const DRIFT_REQUEUE: Millis = 5 * MINUTE;
/// The instance-type check only runs for NodeClaims older than this.
pub const INSTANCE_TYPE_CHECK_MIN_AGE: Millis = 60 * MINUTE;
/// Upstream caches a *successful* instance-type check per NodeClaim for this long (see [`DriftInput`]).
pub const INSTANCE_TYPE_CHECK_INTERVAL: Millis = 30 * MINUTE;
/// Condition reason when a Drifted condition is cleared because the claim no longer drifts.
pub const REASON_NOT_DRIFTED: &str = "NotDrifted";
/// Condition reason when a Drifted condition is cleared because the claim is not launched.
pub const REASON_NOT_LAUNCHED: &str = "NotLaunched";
/// How many changes a condition message lists before summarising the rest.
pub const MAX_MESSAGE_CHANGES: usize = 10;
/// Annotation values longer than this are shortened in change sentences.
const MAX_SHOWN_VALUE: usize = 60;

/// Why a NodeClaim drifted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DriftReason {
    /// The NodePool's template (hashed fields) changed.
    NodePoolDrifted,
    /// The NodePool's requirements no longer admit the node.
    RequirementsDrifted,
    /// The node's instance type (or a compatible offering of it) is gone from the provider's list.
    InstanceTypeNotFound,
    /// The cloud provider reports drift from the node class (image, subnets, security groups …).
    NodeClassDrifted,
}

impl DriftReason {
    /// The condition reason upstream writes. Core's three are its constants; for provider drift upstream writes
    /// whatever the provider returns, and we use the AWS provider's generic `NodeClassDrift` (the sentence from the
    /// hook says which field moved).
    pub fn as_str(self) -> &'static str {
        match self {
            DriftReason::NodePoolDrifted => "NodePoolDrifted",
            DriftReason::RequirementsDrifted => "RequirementsDrifted",
            DriftReason::InstanceTypeNotFound => "InstanceTypeNotFound",
            DriftReason::NodeClassDrifted => "NodeClassDrift",
        }
    }
}

impl fmt::Display for DriftReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A detected drift and what changed, one human sentence per change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    pub reason: DriftReason,
    /// Never empty for drifts this module returns.
    pub changes: Vec<String>,
}

impl Drift {
    /// The changes joined with `; ` (at most [`MAX_MESSAGE_CHANGES`], then "and N more"); the reason when there are
    /// none. Used as the Drifted condition's message.
    pub fn message(&self) -> String {
        if self.changes.is_empty() {
            return self.reason.as_str().to_string();
        }
        let mut out = self.changes.iter().take(MAX_MESSAGE_CHANGES).cloned().collect::<Vec<_>>().join("; ");
        if self.changes.len() > MAX_MESSAGE_CHANGES {
            out.push_str(&format!("; and {} more", self.changes.len() - MAX_MESSAGE_CHANGES));
        }
        out
    }
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message())
    }
}

/// The cloud provider's drift hook (upstream `CloudProvider.IsDrifted`): `Some(sentence)` when the instance no
/// longer matches its node class, e.g. "image ami-1 → ami-2".
pub trait NodeClassDrift {
    fn drifted(&self, claim: &NodeClaim) -> Option<String>;
}

/// A provider that never reports node-class drift.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoNodeClassDrift;

impl NodeClassDrift for NoNodeClassDrift {
    fn drifted(&self, _claim: &NodeClaim) -> Option<String> {
        None
    }
}

/// What [`detect`] looks at for one NodeClaim.
///
/// Upstream checks the instance type at most once per [`INSTANCE_TYPE_CHECK_INTERVAL`] per claim (it caches
/// successful checks, keyed by UID, so a transient gap in the provider's list is noticed quickly but the list is not
/// fetched on every reconcile). That cache is the caller's: set `check_instance_type` to false while a claim's last
/// successful check is younger than the interval.
#[derive(Clone, Copy)]
pub struct DriftInput<'a> {
    pub claim: &'a NodeClaim,
    /// The claim's NodePool (the caller matches `karpenter.sh/nodepool`).
    pub nodepool: &'a NodePool,
    /// The provider's instance types for this NodePool, including types whose offerings are all unavailable.
    pub instance_types: &'a [Arc<InstanceType>],
    pub now: Millis,
    pub node_class: &'a dyn NodeClassDrift,
    /// The registered Node's labels; preferred over the claim's where both have a key.
    pub node_labels: Option<&'a BTreeMap<String, String>>,
    /// Run the instance-type check (still only for claims older than [`INSTANCE_TYPE_CHECK_MIN_AGE`]).
    pub check_instance_type: bool,
}

impl<'a> DriftInput<'a> {
    /// An input with no node-class drift, no Node labels and the instance-type check enabled.
    pub fn new(
        claim: &'a NodeClaim,
        nodepool: &'a NodePool,
        instance_types: &'a [Arc<InstanceType>],
        now: Millis,
    ) -> Self {
        DriftInput {
            claim,
            nodepool,
            instance_types,
            now,
            node_class: &NoNodeClassDrift,
            node_labels: None,
            check_instance_type: true,
        }
    }
}

/// Whether the claim's `Launched` condition is True; drift is only judged for launched claims.
pub fn is_launched(claim: &NodeClaim) -> bool {
    claim.is_true(COND_LAUNCHED)
}

/// Runs the four checks in upstream's order; the first hit wins. `None` for claims that are not launched.
pub fn detect(input: &DriftInput<'_>) -> Option<Drift> {
    detect_with(input, template_drift(input))
}

/// The checks of [`detect`] that read only the NodePool, the claim, the Node's labels and the instance types'
/// requirement keys (no clock, no cloud): NodePool template drift, then requirements drift. A caller that knows
/// none of those changed may keep the answer.
pub fn template_drift(input: &DriftInput<'_>) -> Option<Drift> {
    if !is_launched(input.claim) {
        return None;
    }
    static_drift(input.nodepool, input.claim, input.instance_types)
        .or_else(|| requirements_drift(input.nodepool, input.claim, input.node_labels))
}

/// [`detect`] given what [`template_drift`] answered for the same input.
pub fn detect_with(input: &DriftInput<'_>, template: Option<Drift>) -> Option<Drift> {
    let claim = input.claim;
    if !is_launched(claim) {
        return None;
    }
    if template.is_some() {
        return template;
    }
    if input.check_instance_type
        && let Some(d) = instance_type_drift(claim, input.node_labels, input.instance_types, input.now)
    {
        return Some(d);
    }
    input.node_class.drifted(claim).map(|s| Drift { reason: DriftReason::NodeClassDrifted, changes: vec![s] })
}

/// The Drifted condition a claim should carry, as `(status, reason, message)` for [`lifecycle::set_condition`], or
/// `None` when it already does.
///
/// - launched and drifted → `True` with the drift's reason and [`Drift::message`];
/// - not launched, or launched and not drifted, while a non-False Drifted condition exists → cleared.
///
/// Upstream clears by removing the condition; the engine's action vocabulary only sets conditions
/// ([`LifecycleAction::SetCondition`]), so clearing records `False` with reason [`REASON_NOT_LAUNCHED`] or
/// [`REASON_NOT_DRIFTED`]. Everything downstream only asks whether Drifted is True, so the two are equivalent.
/// A claim that is not launched is cleared whatever `drift` says.
pub fn condition_update(claim: &NodeClaim, drift: Option<&Drift>) -> Option<(&'static str, String, String)> {
    let launched = is_launched(claim);
    let current = claim.condition(COND_DRIFTED);
    match drift.filter(|_| launched) {
        Some(d) => {
            let reason = d.reason.as_str().to_string();
            let message = d.message();
            let unchanged = current.is_some_and(|c| {
                c.status == STATUS_TRUE
                    && c.reason.as_deref().unwrap_or("") == reason
                    && c.message.as_deref().unwrap_or("") == message
            });
            (!unchanged).then_some((STATUS_TRUE, reason, message))
        }
        None => {
            let c = current?;
            if c.status == STATUS_FALSE {
                return None;
            }
            let (reason, message) = if launched {
                (REASON_NOT_DRIFTED, "the NodeClaim matches its NodePool and node class again")
            } else {
                (REASON_NOT_LAUNCHED, "the NodeClaim is not launched")
            };
            Some((STATUS_FALSE, reason.to_string(), message.to_string()))
        }
    }
}

/// [`condition_update`] as a lifecycle action, for callers that run actions.
pub fn condition_action(claim: &NodeClaim, drift: Option<&Drift>) -> Option<LifecycleAction> {
    condition_update(claim, drift).map(|(status, reason, message)| LifecycleAction::SetCondition {
        type_: COND_DRIFTED.to_string(),
        status: status.to_string(),
        reason,
        message,
    })
}

// ---------------------------------------------------------------------------------------------------------------
// 1. Static drift

/// NodePoolDrifted: by hash when both objects carry one of the same version, else by comparing the hashed fields.
/// `instance_types` only helps tell provider labels from template labels (see [`template_changes`]).
pub fn static_drift(pool: &NodePool, claim: &NodeClaim, instance_types: &[Arc<InstanceType>]) -> Option<Drift> {
    let annotation = |m: &Option<BTreeMap<String, String>>, k: &str| m.as_ref().and_then(|m| m.get(k)).cloned();
    let (pa, ca) = (&pool.metadata.annotations, &claim.metadata.annotations);
    let hashes = (
        annotation(pa, labels::ANNOTATION_NODEPOOL_HASH),
        annotation(pa, labels::ANNOTATION_NODEPOOL_HASH_VERSION),
        annotation(ca, labels::ANNOTATION_NODEPOOL_HASH),
        annotation(ca, labels::ANNOTATION_NODEPOOL_HASH_VERSION),
    );
    if let (Some(pool_hash), Some(pool_version), Some(claim_hash), Some(claim_version)) = hashes {
        if pool_version != claim_version || pool_hash == claim_hash {
            return None;
        }
        let mut changes = template_changes(pool, claim, instance_types);
        if changes.is_empty() {
            changes.push(format!("nodepool-hash {claim_hash} → {pool_hash}"));
        }
        return Some(Drift { reason: DriftReason::NodePoolDrifted, changes });
    }
    let changes = template_changes(pool, claim, instance_types);
    (!changes.is_empty()).then_some(Drift { reason: DriftReason::NodePoolDrifted, changes })
}

/// Bookkeeping annotations Karpenter itself writes on NodeClaims; never part of the template comparison.
const BOOKKEEPING_ANNOTATIONS: [&str; 4] = [
    labels::ANNOTATION_NODEPOOL_HASH,
    labels::ANNOTATION_NODEPOOL_HASH_VERSION,
    labels::ANNOTATION_MIN_VALUES_RELAXED,
    ANNOTATION_TERMINATION_TIMESTAMP,
];

/// Domains (and their subdomains) whose labels and annotations come from Kubernetes, Karpenter or the provider,
/// never from a NodePool template's extra keys.
const SYSTEM_DOMAINS: [&str; 4] = ["kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws"];

fn is_system_key(key: &str) -> bool {
    let d = labels::domain(key);
    SYSTEM_DOMAINS.iter().any(|s| d.strip_suffix(s).is_some_and(|p| p.is_empty() || p.ends_with('.')))
}

/// The differences between the NodePool's template and what the NodeClaim was made from, in the fields upstream
/// hashes, one sentence each (labels, annotations, taints, startup taints, nodeClassRef, expireAfter,
/// terminationGracePeriod, in that order).
///
/// A label the claim carries but the template does not counts as removed from the template only when it cannot
/// have come from elsewhere: not `karpenter.sh/nodepool` or the node-class label, not constrained by the NodePool's requirements (the
/// scheduler copies single-valued requirements onto claims), not in a Kubernetes/Karpenter/provider domain, not a
/// label any instance type defines (provider labels set at launch), and — for claims that record requirements —
/// pinned by the claim's own requirements as `key In [value]`, which is how template labels are recorded on every
/// NodeClaim (ours and upstream's). Annotations outside those domains and not bookkeeping count as removed when
/// the template no longer has them.
pub fn template_changes(pool: &NodePool, claim: &NodeClaim, instance_types: &[Arc<InstanceType>]) -> Vec<String> {
    let mut changes = Vec::new();
    let template = &pool.spec.template;
    let empty = BTreeMap::new();
    let claim_labels = claim.metadata.labels.as_ref().unwrap_or(&empty);
    let claim_annotations = claim.metadata.annotations.as_ref().unwrap_or(&empty);

    // Labels.
    let pool_requirement_keys: BTreeSet<&str> =
        template.spec.requirements.iter().map(|r| labels::normalize_key(&r.key)).collect();
    // Asked only for labels nothing cheaper explains (a catalog has over a thousand types).
    let provider_key = |key: &str| instance_types.iter().any(|t| t.requirements.get_ref(key).is_some());
    let pinned = |key: &str, value: &str| {
        claim.spec.requirements.iter().any(|r| {
            labels::normalize_key(&r.key) == labels::normalize_key(key)
                && r.operator == Operator::In.as_str()
                && r.values.iter().any(|v| v == value)
        })
    };
    let mut label_changes: BTreeMap<&str, String> = BTreeMap::new();
    for (k, want) in &template.metadata.labels {
        match claim_labels.get(k) {
            Some(have) if have == want => {}
            Some(have) => {
                label_changes.insert(k, format!("label {k}: {have} → {want}"));
            }
            None => {
                label_changes.insert(k, format!("label {k}={want} added"));
            }
        }
    }
    for (k, have) in claim_labels {
        if template.metadata.labels.contains_key(k)
            || k == labels::NODEPOOL
            || labels::node_class_key(&claim.spec.node_class_ref).as_deref() == Some(k.as_str())
            || pool_requirement_keys.contains(labels::normalize_key(k))
            || is_system_key(k)
            || provider_key(labels::normalize_key(k))
            || !(claim.spec.requirements.is_empty() || pinned(k, have))
        {
            continue;
        }
        label_changes.insert(k, format!("label {k}={have} removed"));
    }
    changes.extend(label_changes.into_values());

    // Annotations.
    let mut annotation_changes: BTreeMap<&str, String> = BTreeMap::new();
    for (k, want) in &template.metadata.annotations {
        if BOOKKEEPING_ANNOTATIONS.contains(&k.as_str()) {
            continue;
        }
        match claim_annotations.get(k) {
            Some(have) if have == want => {}
            Some(have) => {
                annotation_changes.insert(k, format!("annotation {k}: {} → {}", shown(have), shown(want)));
            }
            None => {
                annotation_changes.insert(k, format!("annotation {k}={} added", shown(want)));
            }
        }
    }
    for (k, have) in claim_annotations {
        if template.metadata.annotations.contains_key(k)
            || BOOKKEEPING_ANNOTATIONS.contains(&k.as_str())
            || is_system_key(k)
        {
            continue;
        }
        annotation_changes.insert(k, format!("annotation {k}={} removed", shown(have)));
    }
    changes.extend(annotation_changes.into_values());

    // Taints and startup taints, as sets.
    taint_changes(&mut changes, "taint", &template.spec.taints, &claim.spec.taints);
    taint_changes(&mut changes, "startup taint", &template.spec.startup_taints, &claim.spec.startup_taints);

    // nodeClassRef.
    if !same_node_class(&template.spec.node_class_ref, &claim.spec.node_class_ref) {
        changes.push(format!(
            "nodeClassRef: {} → {}",
            node_class_string(&claim.spec.node_class_ref),
            node_class_string(&template.spec.node_class_ref)
        ));
    }

    // expireAfter (the CRD defaults it to 720h on both objects; treat an empty string as that default).
    let default_expiry = crate::engine::api::nodepool::default_expire_after();
    let or_default = |s: &str| if s.trim().is_empty() { default_expiry.clone() } else { s.trim().to_string() };
    let (have, want) = (or_default(&claim.spec.expire_after), or_default(&template.spec.expire_after));
    if !same_duration(&have, &want) {
        changes.push(format!("expireAfter: {have} → {want}"));
    }

    // terminationGracePeriod (unset and empty are the same).
    let tgp = |s: &Option<String>| s.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
    match (tgp(&claim.spec.termination_grace_period), tgp(&template.spec.termination_grace_period)) {
        (None, None) => {}
        (Some(have), Some(want)) if same_duration(&have, &want) => {}
        (have, want) => changes.push(format!(
            "terminationGracePeriod: {} → {}",
            have.as_deref().unwrap_or("unset"),
            want.as_deref().unwrap_or("unset")
        )),
    }
    changes
}

/// A value for a change sentence, shortened when long (annotations may hold whole documents).
fn shown(v: &str) -> String {
    if v.chars().count() <= MAX_SHOWN_VALUE {
        return v.to_string();
    }
    let mut s: String = v.chars().take(MAX_SHOWN_VALUE).collect();
    s.push('…');
    s
}

/// Taint identity for drift: key, value (missing = empty) and effect; `timeAdded` is not part of the template.
fn taint_key(t: &Taint) -> (&str, &str, &str) {
    (t.key.as_str(), t.value.as_deref().unwrap_or(""), t.effect.as_str())
}

fn taint_string(&(key, value, effect): &(&str, &str, &str)) -> String {
    if value.is_empty() { format!("{key}:{effect}") } else { format!("{key}={value}:{effect}") }
}

fn taint_changes(out: &mut Vec<String>, what: &str, template: &[Taint], claim: &[Taint]) {
    let want: BTreeSet<(&str, &str, &str)> = template.iter().map(taint_key).collect();
    let have: BTreeSet<(&str, &str, &str)> = claim.iter().map(taint_key).collect();
    for t in want.difference(&have) {
        out.push(format!("{what} {} added", taint_string(t)));
    }
    for t in have.difference(&want) {
        out.push(format!("{what} {} removed", taint_string(t)));
    }
}

fn same_node_class(a: &NodeClassReference, b: &NodeClassReference) -> bool {
    a.group == b.group && a.kind == b.kind && a.name == b.name
}

/// `EC2NodeClass.karpenter.k8s.aws/default` (kubectl's `kind.group/name`).
fn node_class_string(r: &NodeClassReference) -> String {
    match (r.kind.is_empty(), r.group.is_empty()) {
        (true, _) => r.name.clone(),
        (false, true) => format!("{}/{}", r.kind, r.name),
        (false, false) => format!("{}.{}/{}", r.kind, r.group, r.name),
    }
}

/// Same duration (`720h` = `720h0m0s`, `Never` = `Never`); unparsable values compare as text.
fn same_duration(a: &str, b: &str) -> bool {
    match (NillableDuration::parse(a), NillableDuration::parse(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// 2. Requirements drift

/// The labels the node is judged by: the claim's single-valued `In` requirements (what a launched claim resolved
/// to when labels are missing), overlaid by the claim's labels, overlaid by the Node's labels when given. Keys are
/// normalised (deprecated aliases yield to the current key when both are present).
pub fn node_view(claim: &NodeClaim, node_labels: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    node_view_ref(claim, node_labels).into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// [`node_view`] borrowing its keys and values: every claim is checked every few minutes, and the checks only
/// look a few keys up.
fn node_view_ref<'a>(
    claim: &'a NodeClaim,
    node_labels: Option<&'a BTreeMap<String, String>>,
) -> BTreeMap<&'a str, &'a str> {
    let mut out = BTreeMap::new();
    for r in &claim.spec.requirements {
        if r.operator == Operator::In.as_str()
            && let [v] = &r.values[..]
        {
            out.insert(labels::normalize_key(&r.key), v.as_str());
        }
    }
    let layers = [claim.metadata.labels.as_ref(), node_labels];
    for m in layers.into_iter().flatten() {
        // Deprecated aliases first, so the current key wins when a node carries both.
        for canonical in [false, true] {
            for (k, v) in m {
                let norm = labels::normalize_key(k);
                if (norm == k.as_str()) == canonical {
                    out.insert(norm, v.as_str());
                }
            }
        }
    }
    out
}

/// The NodePool's `spec.template.spec.requirements` as a requirement set. Malformed entries (unknown operator, a
/// non-integer `Gt`) cannot come through validation; they are skipped rather than drifting a fleet.
pub fn pool_requirements(pool: &NodePool) -> Requirements {
    let mut out = Requirements::new();
    for r in &pool.spec.template.spec.requirements {
        let Some(op) = Operator::parse(&r.operator) else { continue };
        let Ok(req) = Requirement::new(op, &r.values) else { continue };
        out.add(&r.key, req);
    }
    out
}

/// RequirementsDrifted: every NodePool requirement must admit the node's label for its key (upstream
/// `NewLabelRequirements(labels).Compatible(poolRequirements)`, no allow-undefined). A requirement on a key the
/// node lacks is drift unless it is `NotIn`/`DoesNotExist`. One change per offending key, naming the node's value.
pub fn requirements_drift(
    pool: &NodePool,
    claim: &NodeClaim,
    node_labels: Option<&BTreeMap<String, String>>,
) -> Option<Drift> {
    let node = node_view_ref(claim, node_labels);
    let mut changes = Vec::new();
    for (key, req) in pool_requirements(pool).iter() {
        match node.get(key).copied() {
            None if req.operator().is_negative() => {}
            None => changes.push(format!("requirement {key} {req} is not met: the node has no {key} label")),
            Some(v) if req.has(v) => {}
            Some(v) if req.operator() == Operator::DoesNotExist => {
                changes.push(format!("requirement {key} DoesNotExist excludes the node's {key}={v}"))
            }
            Some(v) => changes.push(format!("requirement {key} no longer admits {v} (now {req})")),
        }
    }
    (!changes.is_empty()).then_some(Drift { reason: DriftReason::RequirementsDrifted, changes })
}

// ---------------------------------------------------------------------------------------------------------------
// 3. Instance type not found

/// InstanceTypeNotFound, for claims older than [`INSTANCE_TYPE_CHECK_MIN_AGE`] (claims without a creation time are
/// not judged): the node's instance type must be in `instance_types` with an offering, available or not, compatible
/// with the node's zone and capacity type. A reserved node also accepts on-demand offerings (a reservation can be
/// demoted to on-demand before the label catches up; if the NodePool no longer allows on-demand, requirements drift
/// catches it). A node without an instance-type label drifts, as upstream.
pub fn instance_type_drift(
    claim: &NodeClaim,
    node_labels: Option<&BTreeMap<String, String>>,
    instance_types: &[Arc<InstanceType>],
    now: Millis,
) -> Option<Drift> {
    let created = lifecycle::time_ms(claim.metadata.creation_timestamp.as_ref()?);
    if now.saturating_sub(created) <= INSTANCE_TYPE_CHECK_MIN_AGE {
        return None;
    }
    let drift = |s: String| Some(Drift { reason: DriftReason::InstanceTypeNotFound, changes: vec![s] });
    let node = node_view_ref(claim, node_labels);
    let Some(&name) = node.get(labels::INSTANCE_TYPE) else {
        return drift(format!("the node has no {} label", labels::INSTANCE_TYPE));
    };
    let Some(it) = instance_types.iter().find(|t| t.name == name) else {
        return drift(format!("instance type {name} is no longer offered"));
    };
    let mut reqs = Requirements::new();
    for key in [labels::ZONE, labels::CAPACITY_TYPE] {
        if let Some(v) = node.get(key) {
            reqs.add(key, Requirement::in_values([v.to_string()]));
        }
    }
    let capacity_type = node.get(labels::CAPACITY_TYPE).copied();
    if capacity_type == Some(labels::CAPACITY_RESERVED) {
        reqs.set(
            labels::CAPACITY_TYPE,
            Requirement::in_values([labels::CAPACITY_RESERVED, labels::CAPACITY_ON_DEMAND]),
        );
    }
    if it.offerings.iter().any(|o| o.compatible(&reqs)) {
        return None;
    }
    let zone = node.get(labels::ZONE).copied().unwrap_or("any zone");
    drift(format!(
        "instance type {name} is no longer offered in {zone} as {}",
        capacity_type.unwrap_or("any capacity type")
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine::catalog::Offering;
    use crate::engine::catalog::fake::fake_catalog;
    use crate::engine::lifecycle::{LaunchResult, apply_launch, ms_time, set_condition};
    use crate::engine::provisioning::{Snapshot, provision};
    use crate::engine::scheduling::SchedulerOptions;
    use k8s_openapi::api::core::v1::Pod;
    use proptest::prelude::*;

    const T0: Millis = 1_700_000_000_000;
    const HOUR: Millis = 60 * MINUTE;

    const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default, uid: pool-uid}
spec:
  template:
    metadata:
      labels: {team: a}
      annotations: {example.com/owner: platform}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1, test-zone-2]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
"#;

    pub(crate) fn pool() -> NodePool {
        serde_yaml::from_str(POOL).expect("valid nodepool")
    }

    /// The base pool with `edit` applied to its YAML value.
    fn pool_with(edit: impl FnOnce(&mut serde_yaml::Value)) -> NodePool {
        let mut v: serde_yaml::Value = serde_yaml::from_str(POOL).unwrap();
        edit(&mut v);
        serde_yaml::from_value(v).expect("valid nodepool")
    }

    fn tspec(v: &mut serde_yaml::Value) -> &mut serde_yaml::Value {
        &mut v["spec"]["template"]["spec"]
    }

    fn yaml(s: &str) -> serde_yaml::Value {
        serde_yaml::from_str(s).unwrap()
    }

    fn pending_pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p1", "namespace": "default", "uid": "uid-p1"},
            "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}],
                     "tolerations": [{"operator": "Exists"}]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        }))
        .unwrap()
    }

    /// A NodeClaim made the way production makes one: a provisioning pass over `pool` and a pending pod, then a
    /// launch of `small-instance-type` in test-zone-1 (on-demand) at `created`.
    pub(crate) fn launched_claim(pool: &NodePool, created: Millis) -> NodeClaim {
        let catalog = fake_catalog();
        let snap = Snapshot {
            nodepools: vec![pool.clone()],
            pods: vec![Arc::new(pending_pod().into())],
            ..Default::default()
        };
        let catalogs = BTreeMap::from([(pool.name().to_string(), catalog.instance_types.clone())]);
        let result = provision(&snap.view(), &catalogs, &catalog.label_policy, SchedulerOptions::default());
        let mut claim = result.nodeclaims(&snap.nodepools).into_iter().next().expect("one NodeClaim");
        claim.metadata.name = Some("default-abcde".into());
        claim.metadata.uid = Some("claim-uid".into());
        claim.metadata.creation_timestamp = Some(ms_time(created));
        let it = catalog.get("small-instance-type").expect("fake type");
        let lr = LaunchResult {
            provider_id: "fake://i-1".into(),
            instance_type: it.name.clone(),
            zone: "test-zone-1".into(),
            capacity_type: labels::CAPACITY_ON_DEMAND.into(),
            labels: it.requirements.single_valued_labels(),
            capacity: it.capacity.clone(),
            allocatable: it.allocatable(),
            image_id: None,
        };
        apply_launch(&mut claim, &lr, created);
        claim
    }

    pub(crate) fn types() -> Vec<Arc<InstanceType>> {
        fake_catalog().instance_types
    }

    fn run(claim: &NodeClaim, pool: &NodePool, its: &[Arc<InstanceType>], now: Millis) -> Option<Drift> {
        detect(&DriftInput::new(claim, pool, its, now))
    }

    fn static_changes(pool: &NodePool, claim: &NodeClaim) -> Vec<String> {
        let d = run(claim, pool, &types(), T0 + 2 * HOUR).expect("drift");
        assert_eq!(d.reason, DriftReason::NodePoolDrifted, "{d}");
        d.changes
    }

    fn with_hash(
        mut claim: NodeClaim,
        pool: &mut NodePool,
        claim_hash: (&str, &str),
        pool_hash: (&str, &str),
    ) -> NodeClaim {
        let set = |m: &mut Option<BTreeMap<String, String>>, (h, v): (&str, &str)| {
            let m = m.get_or_insert_with(BTreeMap::new);
            m.insert(labels::ANNOTATION_NODEPOOL_HASH.into(), h.into());
            m.insert(labels::ANNOTATION_NODEPOOL_HASH_VERSION.into(), v.into());
        };
        set(&mut claim.metadata.annotations, claim_hash);
        set(&mut pool.metadata.annotations, pool_hash);
        claim
    }

    #[test]
    fn production_claim_of_an_unchanged_pool_does_not_drift() {
        let p = pool();
        let claim = launched_claim(&p, T0);
        assert!(
            claim.spec.requirements.iter().any(|r| r.key == "team"),
            "template labels are recorded as requirements"
        );
        assert_eq!(run(&claim, &p, &types(), T0 + 2 * HOUR), None);
        assert_eq!(template_changes(&p, &claim, &[]), Vec::<String>::new(), "provider labels are not template labels");
    }

    #[test]
    fn label_change_is_named() {
        let claim = launched_claim(&pool(), T0);
        let edited = pool_with(|v| v["spec"]["template"]["metadata"]["labels"]["team"] = yaml("b"));
        assert_eq!(static_changes(&edited, &claim), vec!["label team: a → b"]);
    }

    #[test]
    fn label_added_and_removed() {
        let claim = launched_claim(&pool(), T0);
        let removed = pool_with(|v| v["spec"]["template"]["metadata"]["labels"] = yaml("{}"));
        assert_eq!(static_changes(&removed, &claim), vec!["label team=a removed"]);
        let added = pool_with(|v| v["spec"]["template"]["metadata"]["labels"]["tier"] = yaml("gold"));
        assert_eq!(static_changes(&added, &claim), vec!["label tier=gold added"]);
    }

    #[test]
    fn annotation_changes() {
        let claim = launched_claim(&pool(), T0);
        let edited = pool_with(|v| {
            v["spec"]["template"]["metadata"]["annotations"] = yaml("{example.com/owner: data, example.com/x: y}")
        });
        assert_eq!(
            static_changes(&edited, &claim),
            vec!["annotation example.com/owner: platform → data", "annotation example.com/x=y added"]
        );
        // Karpenter's own bookkeeping on the claim is not a template difference.
        let mut c = claim.clone();
        let a = c.metadata.annotations.get_or_insert_with(BTreeMap::new);
        a.insert(labels::ANNOTATION_MIN_VALUES_RELAXED.into(), "true".into());
        a.insert(ANNOTATION_TERMINATION_TIMESTAMP.into(), "2024-01-01T00:00:00Z".into());
        a.insert("karpenter.k8s.aws/ec2nodeclass-hash".into(), "123".into());
        assert_eq!(run(&c, &pool(), &types(), T0 + 2 * HOUR), None);
    }

    #[test]
    fn taint_added_removed_and_order_insensitive() {
        let tainted = pool_with(|v| {
            tspec(v)["taints"] = yaml("[{key: dedicated, value: gpu, effect: NoSchedule}, {key: b, effect: NoExecute}]")
        });
        let claim = launched_claim(&pool(), T0);
        assert_eq!(
            static_changes(&tainted, &claim),
            vec!["taint b:NoExecute added", "taint dedicated=gpu:NoSchedule added"]
        );
        let claim = launched_claim(&tainted, T0);
        let reordered = pool_with(|v| {
            tspec(v)["taints"] =
                yaml("[{key: b, value: '', effect: NoExecute}, {key: dedicated, value: gpu, effect: NoSchedule}]")
        });
        assert_eq!(run(&claim, &reordered, &types(), T0 + 2 * HOUR), None);
        assert_eq!(
            static_changes(&pool(), &claim),
            vec!["taint b:NoExecute removed", "taint dedicated=gpu:NoSchedule removed"]
        );
        let startup = pool_with(|v| tspec(v)["startupTaints"] = yaml("[{key: init, effect: NoSchedule}]"));
        assert_eq!(static_changes(&startup, &launched_claim(&pool(), T0)), vec!["startup taint init:NoSchedule added"]);
    }

    #[test]
    fn expire_after_and_termination_grace_period() {
        let claim = launched_claim(&pool(), T0);
        let edited = pool_with(|v| tspec(v)["expireAfter"] = yaml("24h"));
        assert_eq!(static_changes(&edited, &claim), vec!["expireAfter: 720h → 24h"]);
        let same = pool_with(|v| tspec(v)["expireAfter"] = yaml("720h0m0s"));
        assert_eq!(run(&claim, &same, &types(), T0 + 2 * HOUR), None, "equal durations, different spelling");
        let tgp = pool_with(|v| tspec(v)["terminationGracePeriod"] = yaml("1h"));
        assert_eq!(static_changes(&tgp, &claim), vec!["terminationGracePeriod: unset → 1h"]);
    }

    #[test]
    fn node_class_ref_change() {
        let claim = launched_claim(&pool(), T0);
        let edited = pool_with(|v| tspec(v)["nodeClassRef"]["name"] = yaml("gpu"));
        assert_eq!(
            static_changes(&edited, &claim),
            vec!["nodeClassRef: EC2NodeClass.karpenter.k8s.aws/default → EC2NodeClass.karpenter.k8s.aws/gpu"]
        );
    }

    #[test]
    fn equal_hashes_mean_no_static_drift_even_if_fields_differ() {
        let mut edited = pool_with(|v| v["spec"]["template"]["metadata"]["labels"]["team"] = yaml("b"));
        let claim = with_hash(launched_claim(&pool(), T0), &mut edited, ("111", "v3"), ("111", "v3"));
        assert_eq!(run(&claim, &edited, &types(), T0 + 2 * HOUR), None);
    }

    #[test]
    fn different_hashes_of_the_same_version_drift() {
        let mut edited = pool_with(|v| v["spec"]["template"]["metadata"]["labels"]["team"] = yaml("b"));
        let claim = with_hash(launched_claim(&pool(), T0), &mut edited, ("111", "v3"), ("222", "v3"));
        assert_eq!(static_changes(&edited, &claim), vec!["label team: a → b"], "the fields explain the hash");
        let mut same = pool();
        let claim = with_hash(launched_claim(&pool(), T0), &mut same, ("111", "v3"), ("222", "v3"));
        assert_eq!(static_changes(&same, &claim), vec!["nodepool-hash 111 → 222"]);
    }

    #[test]
    fn hash_version_mismatch_means_no_drift() {
        let mut edited = pool_with(|v| v["spec"]["template"]["metadata"]["labels"]["team"] = yaml("b"));
        let claim = with_hash(launched_claim(&pool(), T0), &mut edited, ("111", "v2"), ("222", "v3"));
        assert_eq!(run(&claim, &edited, &types(), T0 + 2 * HOUR), None);
    }

    #[test]
    fn narrowing_a_requirement_drifts_and_names_the_zone() {
        let claim = launched_claim(&pool(), T0);
        let narrowed = pool_with(|v| {
            tspec(v)["requirements"][0] =
                yaml("{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2]}")
        });
        let d = run(&claim, &narrowed, &types(), T0 + 2 * HOUR).expect("drift");
        assert_eq!(d.reason, DriftReason::RequirementsDrifted);
        assert_eq!(
            d.changes,
            vec!["requirement topology.kubernetes.io/zone no longer admits test-zone-1 (now In [test-zone-2])"]
        );
        let excluded = pool_with(|v| {
            tspec(v)["requirements"][0] =
                yaml("{key: topology.kubernetes.io/zone, operator: NotIn, values: [test-zone-1]}")
        });
        assert_eq!(run(&claim, &excluded, &types(), T0).map(|d| d.reason), Some(DriftReason::RequirementsDrifted));
    }

    #[test]
    fn widening_a_requirement_does_not_drift() {
        let claim = launched_claim(&pool(), T0);
        let widened = pool_with(|v| {
            tspec(v)["requirements"][0] = yaml(
                "{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1, test-zone-2, test-zone-3]}",
            );
            tspec(v)["requirements"][1] = yaml("{key: karpenter.sh/capacity-type, operator: Exists}");
        });
        assert_eq!(run(&claim, &widened, &types(), T0 + 2 * HOUR), None);
    }

    #[test]
    fn requirement_on_a_key_the_node_lacks() {
        let claim = launched_claim(&pool(), T0);
        let add = |r: &str| {
            let r = yaml(r);
            pool_with(move |v| tspec(v)["requirements"].as_sequence_mut().unwrap().push(r))
        };
        let d =
            run(&claim, &add("{key: example.com/gpu, operator: In, values: ['true']}"), &types(), T0).expect("drift");
        assert_eq!(d.reason, DriftReason::RequirementsDrifted);
        assert_eq!(
            d.changes,
            vec!["requirement example.com/gpu In [true] is not met: the node has no example.com/gpu label"]
        );
        assert_eq!(
            run(&claim, &add("{key: example.com/gpu, operator: Exists}"), &types(), T0).map(|d| d.reason),
            Some(DriftReason::RequirementsDrifted)
        );
        assert_eq!(run(&claim, &add("{key: example.com/gpu, operator: DoesNotExist}"), &types(), T0), None);
        assert_eq!(run(&claim, &add("{key: example.com/gpu, operator: NotIn, values: [x]}"), &types(), T0), None);
        let d = run(&claim, &add("{key: team, operator: DoesNotExist}"), &types(), T0).expect("drift");
        assert_eq!(d.changes, vec!["requirement team DoesNotExist excludes the node's team=a"]);
    }

    #[test]
    fn node_labels_are_preferred_and_requirements_fill_gaps() {
        let claim = launched_claim(&pool(), T0);
        let narrowed = pool_with(|v| {
            tspec(v)["requirements"][0] =
                yaml("{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}")
        });
        let node = BTreeMap::from([
            ("failure-domain.beta.kubernetes.io/zone".to_string(), "test-zone-1".to_string()),
            (labels::ZONE.to_string(), "test-zone-2".to_string()),
        ]);
        let mut input = DriftInput::new(&claim, &narrowed, &[], T0);
        input.node_labels = Some(&node);
        let d = detect(&input).expect("the Node's zone counts");
        assert!(d.changes[0].contains("no longer admits test-zone-2"), "{d}");
        // A launched claim without labels is judged by its single-valued requirements.
        let mut bare = claim.clone();
        bare.metadata.labels = None;
        let view = node_view(&bare, None);
        assert_eq!(view.get("team").map(String::as_str), Some("a"));
        assert_eq!(view.get(labels::NODEPOOL).map(String::as_str), Some("default"));
    }

    #[test]
    fn vanished_instance_type_drifts_only_old_claims() {
        let p = pool();
        let without_small: Vec<Arc<InstanceType>> =
            types().into_iter().filter(|t| t.name != "small-instance-type").collect();
        let old = launched_claim(&p, T0);
        let d = run(&old, &p, &without_small, T0 + 2 * HOUR).expect("drift");
        assert_eq!(d.reason, DriftReason::InstanceTypeNotFound);
        assert_eq!(d.changes, vec!["instance type small-instance-type is no longer offered"]);
        assert_eq!(run(&old, &p, &without_small, T0 + 30 * MINUTE), None, "younger than an hour");
        assert_eq!(run(&old, &p, &without_small, T0 + HOUR), None, "exactly an hour is not older");
        let mut cached = DriftInput::new(&old, &p, &without_small, T0 + 2 * HOUR);
        cached.check_instance_type = false;
        assert_eq!(detect(&cached), None, "the caller's 30-minute cache skips the check");
        let mut undated = old.clone();
        undated.metadata.creation_timestamp = None;
        assert_eq!(run(&undated, &p, &without_small, T0 + 2 * HOUR), None);
    }

    #[test]
    fn offerings_decide_and_availability_does_not() {
        let p = pool();
        let claim = launched_claim(&p, T0);
        let with_offerings = |offerings: Vec<Offering>| -> Vec<Arc<InstanceType>> {
            types()
                .into_iter()
                .map(|t| {
                    if t.name != "small-instance-type" {
                        return t;
                    }
                    let mut t = (*t).clone();
                    t.offerings = offerings.clone();
                    Arc::new(t)
                })
                .collect()
        };
        let o = |zone: &str, ct: &str, available: bool| Offering {
            zone: zone.into(),
            capacity_type: ct.into(),
            price: 1.0,
            available,
            reservation: None,
        };
        let unavailable = with_offerings(vec![o("test-zone-1", labels::CAPACITY_ON_DEMAND, false)]);
        assert_eq!(run(&claim, &p, &unavailable, T0 + 2 * HOUR), None);
        let elsewhere = with_offerings(vec![
            o("test-zone-2", labels::CAPACITY_ON_DEMAND, true),
            o("test-zone-1", labels::CAPACITY_SPOT, true),
        ]);
        let d = run(&claim, &p, &elsewhere, T0 + 2 * HOUR).expect("drift");
        assert_eq!(d.reason, DriftReason::InstanceTypeNotFound);
        assert_eq!(
            d.changes,
            vec!["instance type small-instance-type is no longer offered in test-zone-1 as on-demand"]
        );
        // A reserved node also accepts an on-demand offering.
        let mut reserved = claim.clone();
        reserved
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(labels::CAPACITY_TYPE.into(), labels::CAPACITY_RESERVED.into());
        let on_demand = with_offerings(vec![o("test-zone-1", labels::CAPACITY_ON_DEMAND, true)]);
        assert_eq!(instance_type_drift(&reserved, None, &on_demand, T0 + 2 * HOUR), None);
        let spot_only = with_offerings(vec![o("test-zone-1", labels::CAPACITY_SPOT, true)]);
        assert!(instance_type_drift(&reserved, None, &spot_only, T0 + 2 * HOUR).is_some());
    }

    struct AmiDrift;
    impl NodeClassDrift for AmiDrift {
        fn drifted(&self, _claim: &NodeClaim) -> Option<String> {
            Some("image ami-1 → ami-2".into())
        }
    }

    #[test]
    fn node_class_hook_is_reported_last() {
        let p = pool();
        let claim = launched_claim(&p, T0);
        let its = types();
        let mut input = DriftInput::new(&claim, &p, &its, T0 + 2 * HOUR);
        input.node_class = &AmiDrift;
        let d = detect(&input).expect("drift");
        assert_eq!(d, Drift { reason: DriftReason::NodeClassDrifted, changes: vec!["image ami-1 → ami-2".into()] });
        assert_eq!(d.reason.as_str(), "NodeClassDrift");
        let edited = pool_with(|v| tspec(v)["expireAfter"] = yaml("24h"));
        let mut input = DriftInput::new(&claim, &edited, &its, T0 + 2 * HOUR);
        input.node_class = &AmiDrift;
        assert_eq!(detect(&input).map(|d| d.reason), Some(DriftReason::NodePoolDrifted), "first hit wins");
    }

    #[test]
    fn unlaunched_claim_is_not_judged_and_its_condition_is_cleared() {
        let p = pool();
        let mut claim = launched_claim(&p, T0);
        let edited = pool_with(|v| tspec(v)["expireAfter"] = yaml("24h"));
        let drift = run(&claim, &edited, &types(), T0 + 2 * HOUR).expect("drift");
        set_condition(&mut claim, COND_DRIFTED, STATUS_TRUE, "NodePoolDrifted", &drift.message(), T0);
        set_condition(&mut claim, COND_LAUNCHED, "Unknown", "LaunchFailed", "", T0);
        assert_eq!(run(&claim, &edited, &types(), T0 + 2 * HOUR), None);
        let (status, reason, _) = condition_update(&claim, Some(&drift)).expect("cleared");
        assert_eq!((status, reason.as_str()), (STATUS_FALSE, REASON_NOT_LAUNCHED));
        set_condition(&mut claim, COND_DRIFTED, status, &reason, "", T0);
        assert_eq!(condition_update(&claim, None), None, "already cleared");
        let mut fresh = launched_claim(&p, T0);
        set_condition(&mut fresh, COND_LAUNCHED, STATUS_FALSE, "", "", T0);
        assert_eq!(condition_update(&fresh, None), None, "nothing to clear");
    }

    #[test]
    fn condition_is_set_once_and_cleared_when_drift_ends() {
        let mut claim = launched_claim(&pool(), T0);
        let edited = pool_with(|v| v["spec"]["template"]["metadata"]["labels"]["team"] = yaml("b"));
        assert_eq!(condition_update(&claim, None), None, "no condition, no drift: nothing to write");
        let drift = run(&claim, &edited, &types(), T0).expect("drift");
        let update = condition_update(&claim, Some(&drift)).expect("set");
        assert_eq!(update, (STATUS_TRUE, "NodePoolDrifted".to_string(), "label team: a → b".to_string()));
        let action = condition_action(&claim, Some(&drift)).expect("action");
        assert!(lifecycle::apply(&mut claim, &action, T0));
        assert!(claim.is_true(COND_DRIFTED));
        assert_eq!(condition_update(&claim, Some(&drift)), None, "idempotent");
        let (status, reason, _) = condition_update(&claim, None).expect("cleared");
        assert_eq!((status, reason.as_str()), (STATUS_FALSE, REASON_NOT_DRIFTED));
    }

    #[test]
    fn long_messages_are_summarised() {
        let d = Drift { reason: DriftReason::NodePoolDrifted, changes: (0..12).map(|i| format!("c{i}")).collect() };
        assert_eq!(d.message(), "c0; c1; c2; c3; c4; c5; c6; c7; c8; c9; and 2 more");
        assert_eq!(
            Drift { reason: DriftReason::RequirementsDrifted, changes: vec![] }.message(),
            "RequirementsDrifted"
        );
    }

    #[test]
    fn malformed_input_does_not_panic() {
        let weird = pool_with(|v| {
            tspec(v)["requirements"] = yaml(
                "[{key: '', operator: In, values: ['']}, {key: x, operator: Bogus}, {key: n, operator: Gt, values: [abc]}, {key: m, operator: Lt, values: []}]",
            );
            tspec(v)["expireAfter"] = yaml("'forever'");
            tspec(v)["terminationGracePeriod"] = yaml("''");
            v["metadata"]["annotations"] =
                yaml("{karpenter.sh/nodepool-hash: '', karpenter.sh/nodepool-hash-version: ''}");
        });
        let bare: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {},
            "spec": {"nodeClassRef": {"name": ""}, "expireAfter": ""}
        }))
        .unwrap();
        assert_eq!(detect(&DriftInput::new(&bare, &weird, &[], i64::MAX)), None, "not launched");
        let mut launched = bare.clone();
        set_condition(&mut launched, COND_LAUNCHED, STATUS_TRUE, "", "", 0);
        launched.metadata.creation_timestamp = Some(ms_time(i64::MIN));
        for now in [i64::MIN, 0, i64::MAX] {
            let _ = detect(&DriftInput::new(&launched, &weird, &[], now));
        }
    }

    fn base_claim() -> &'static NodeClaim {
        static CLAIM: std::sync::OnceLock<NodeClaim> = std::sync::OnceLock::new();
        CLAIM.get_or_init(|| launched_claim(&pool(), T0))
    }

    fn arb_map() -> impl Strategy<Value = BTreeMap<String, String>> {
        proptest::collection::btree_map("[a-z./-]{0,12}", "[a-z0-9-]{0,6}", 0..4)
    }

    proptest! {
        #[test]
        fn never_panics(
            labels_a in arb_map(), labels_b in arb_map(), annotations in arb_map(),
            reqs in proptest::collection::vec(("[a-z./]{0,8}", "In|NotIn|Exists|DoesNotExist|Gt|Lt|Gte|Lte|Nope|", proptest::collection::vec("[a-z0-9-]{0,4}", 0..3)), 0..4),
            expire in "[0-9a-zNv]{0,6}", now in any::<i64>(), created in any::<i64>(), hashed in any::<bool>(),
        ) {
            let mut p = pool();
            p.spec.template.metadata.labels = labels_a.clone();
            p.spec.template.metadata.annotations = annotations.clone();
            p.spec.template.spec.expire_after = expire;
            p.spec.template.spec.requirements = reqs
                .into_iter()
                .map(|(key, operator, values)| crate::engine::api::NodeSelectorRequirementWithMinValues { key, operator, values: values.into(), min_values: None })
                .collect();
            let mut claim = base_claim().clone();
            claim.metadata.labels = Some(labels_b.clone());
            claim.metadata.creation_timestamp = Some(ms_time(created));
            if hashed {
                claim = with_hash(claim, &mut p, ("a", "v3"), ("b", "v3"));
            }
            let its = types();
            let mut input = DriftInput::new(&claim, &p, &its, now);
            input.node_labels = Some(&labels_a);
            let d = detect(&input);
            if let Some(d) = &d {
                prop_assert!(!d.changes.is_empty());
            }
            let _ = condition_update(&claim, d.as_ref());
        }
    }
}
