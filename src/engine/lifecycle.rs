//! NodeClaim lifecycle (engine.md §3): launch, registration, initialization, liveness, expiration, garbage
//! collection and finalization, as pure functions from upstream-shaped objects and a time to a list of actions.
//!
//! The runtime (simulated world or live cluster) executes the actions **in order** and stops at the first that
//! fails; the engine is then called again on the next event or at the requested `RequeueAt`. Claim-side actions can
//! be applied with [`apply`], which keeps condition transition times the way Kubernetes does.
//!
//! Malformed input never panics: unparsable timestamps, durations and quantities are treated as absent (a missing
//! timestamp disables the timeout that would be measured from it; a malformed `expireAfter` means no expiry; a
//! malformed allocatable quantity counts as zero).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::engine::api::Condition;
use crate::engine::api::NodeClaim;
use crate::engine::api::duration::{NillableDuration, parse_go_duration};
use crate::engine::api::nodeclaim::{COND_INITIALIZED, COND_INSTANCE_TERMINATING, COND_LAUNCHED, COND_REGISTERED};
use crate::engine::labels;
use crate::engine::provisioning::Millis;
use crate::engine::resources::{Resources, parse_quantity};
use crate::engine::scheduling::taints::{is_known_ephemeral, taint_string};

pub const SECOND: Millis = 1_000;
pub const MINUTE: Millis = 60 * SECOND;

/// Node label that stops Karpenter from copying NodeClaim taints onto the Node at registration.
pub const LABEL_DO_NOT_SYNC_TAINTS: &str = "karpenter.sh/do-not-sync-taints";
/// NodeClaim annotation holding `deletionTimestamp + terminationGracePeriod` (RFC 3339): the drain deadline.
pub const ANNOTATION_TERMINATION_TIMESTAMP: &str = "karpenter.sh/nodeclaim-termination-timestamp";
/// Upstream truncates provider error messages in the Launched condition to this many characters.
pub const MAX_LAUNCH_MESSAGE: usize = 300;
/// Retry delay after a non-fatal launch failure (upstream's rate limiter starts at 1 s).
pub const LAUNCH_RETRY: Millis = SECOND;
/// How often finalization re-checks while nodes or the instance are going away (upstream: 5 s for the instance).
pub const FINALIZE_REQUEUE: Millis = 5 * SECOND;

pub const STATUS_TRUE: &str = "True";
pub const STATUS_FALSE: &str = "False";
pub const STATUS_UNKNOWN: &str = "Unknown";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifecycleSettings {
    /// Launched must become True within this long of the Launched condition's transition.
    pub launch_timeout: Millis,
    /// Registered must become True within this long of Launched becoming True.
    pub registration_timeout: Millis,
}

impl Default for LifecycleSettings {
    fn default() -> Self {
        LifecycleSettings { launch_timeout: 5 * MINUTE, registration_timeout: 15 * MINUTE }
    }
}

/// Why the engine deletes a NodeClaim (upstream metric reasons in snake_case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeleteReason {
    LaunchTimeout,
    RegistrationTimeout,
    InsufficientCapacity,
    NodeClassNotReady,
    Expired,
    GarbageCollected,
}

impl DeleteReason {
    /// The upstream metric / event reason.
    pub fn as_str(self) -> &'static str {
        match self {
            DeleteReason::LaunchTimeout => "launch_timeout",
            DeleteReason::RegistrationTimeout => "registration_timeout",
            DeleteReason::InsufficientCapacity => "insufficient_capacity",
            DeleteReason::NodeClassNotReady => "nodeclass_not_ready",
            DeleteReason::Expired => "expired",
            DeleteReason::GarbageCollected => "garbage_collected",
        }
    }
}

/// One step the runtime performs for a NodeClaim.
#[derive(Debug, Clone, PartialEq)]
pub enum LifecycleAction {
    /// Add `karpenter.sh/termination` to the NodeClaim (always before anything is launched).
    AddFinalizer,
    /// Call the cloud provider's Create; then [`apply_launch`] or [`launch_failed`].
    Launch,
    /// Set a NodeClaim status condition (see [`set_condition`] for transition-time rules).
    SetCondition { type_: String, status: String, reason: String, message: String },
    /// Registration sync onto the Node: merge `labels` and `annotations`, add `taints_to_add`, remove the
    /// `karpenter.sh/unregistered` taint if asked, add the termination finalizer if `finalizer`.
    SyncNode {
        node: String,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
        taints_to_add: Vec<Taint>,
        remove_unregistered_taint: bool,
        finalizer: bool,
    },
    /// Set one label on the Node.
    LabelNode { node: String, key: String, value: String },
    /// Set `status.nodeName`.
    SetNodeName(String),
    /// Delete the NodeClaim (finalization follows).
    Delete { reason: DeleteReason },
    /// Reconcile again at this time (even if nothing changes).
    RequeueAt(Millis),
}

fn cond_action(type_: &str, status: &str, reason: &str, message: impl Into<String>) -> LifecycleAction {
    LifecycleAction::SetCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.into(),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Time

/// RFC 3339 in UTC (`2024-05-01T12:00:00Z`); sub-second digits only when `ms` has them. Out-of-range values are
/// clamped to the representable range rather than panicking.
pub fn rfc3339(ms: Millis) -> String {
    let t = Timestamp::from_millisecond(ms).unwrap_or(if ms < 0 { Timestamp::MIN } else { Timestamp::MAX });
    t.to_string()
}

/// Parses an RFC 3339 timestamp (any offset) to milliseconds; `None` when malformed.
pub fn parse_rfc3339(s: &str) -> Option<Millis> {
    s.trim().parse::<Timestamp>().ok().map(|t| t.as_millisecond())
}

/// A Kubernetes `Time` in milliseconds.
pub fn time_ms(t: &Time) -> Millis {
    t.0.as_millisecond()
}

/// A Kubernetes `Time` from milliseconds (clamped like [`rfc3339`]).
pub fn ms_time(ms: Millis) -> Time {
    Time(Timestamp::from_millisecond(ms).unwrap_or(if ms < 0 { Timestamp::MIN } else { Timestamp::MAX }))
}

/// A Go duration in milliseconds; `None` when malformed.
pub fn duration_ms(s: &str) -> Option<Millis> {
    parse_go_duration(s).ok().map(|d| Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX))
}

fn transition_ms(c: &Condition) -> Option<Millis> {
    c.last_transition_time.as_deref().and_then(parse_rfc3339)
}

// ---------------------------------------------------------------------------------------------------------------
// Applying claim-side actions

/// Sets a condition the Kubernetes way: `lastTransitionTime` changes only when the status changes (or the
/// condition is new); reason and message are always updated.
pub fn set_condition(claim: &mut NodeClaim, type_: &str, status: &str, reason: &str, message: &str, now: Millis) {
    let conditions = &mut claim.status.get_or_insert_with(Default::default).conditions;
    let reason = (!reason.is_empty()).then(|| reason.to_string());
    let message = (!message.is_empty()).then(|| message.to_string());
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status || c.last_transition_time.is_none() {
                c.last_transition_time = Some(rfc3339(now));
            }
            c.status = status.to_string();
            c.reason = reason;
            c.message = message;
        }
        None => conditions.push(Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            last_transition_time: Some(rfc3339(now)),
            reason,
            message,
            observed_generation: None,
        }),
    }
}

/// Applies the actions that change only the NodeClaim (finalizer, conditions, node name); returns false for
/// actions that need the outside world (Launch, node changes, Delete, RequeueAt), which it leaves alone.
pub fn apply(claim: &mut NodeClaim, action: &LifecycleAction, now: Millis) -> bool {
    match action {
        LifecycleAction::AddFinalizer => {
            let f = claim.metadata.finalizers.get_or_insert_with(Vec::new);
            if !f.iter().any(|x| x == labels::TERMINATION_FINALIZER) {
                f.push(labels::TERMINATION_FINALIZER.to_string());
            }
            true
        }
        LifecycleAction::SetCondition { type_, status, reason, message } => {
            set_condition(claim, type_, status, reason, message, now);
            true
        }
        LifecycleAction::SetNodeName(n) => {
            claim.status.get_or_insert_with(Default::default).node_name = Some(n.clone());
            true
        }
        _ => false,
    }
}

/// The condition would change (status, reason or message), so an action is worth emitting.
fn differs(claim: &NodeClaim, type_: &str, status: &str, reason: &str, message: &str) -> bool {
    claim.condition(type_).is_none_or(|c| {
        c.status != status
            || c.reason.as_deref().unwrap_or("") != reason
            || c.message.as_deref().unwrap_or("") != message
    })
}

fn push_cond(out: &mut Vec<LifecycleAction>, claim: &NodeClaim, type_: &str, status: &str, reason: &str, msg: &str) {
    if differs(claim, type_, status, reason, msg) {
        out.push(cond_action(type_, status, reason, msg));
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Reconcile

fn has_finalizer(meta_finalizers: Option<&Vec<String>>) -> bool {
    meta_finalizers.is_some_and(|f| f.iter().any(|x| x == labels::TERMINATION_FINALIZER))
}

fn node_name(n: &Node) -> String {
    n.metadata.name.clone().unwrap_or_default()
}

fn node_taints(n: &Node) -> &[Taint] {
    n.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[])
}

/// Upstream `MatchTaint`: same key and effect (the value is not compared).
fn same_taint(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.effect == b.effect
}

/// Node condition `Ready` is `True`.
pub fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == STATUS_TRUE))
}

/// One reconcile of a live (not deleting) NodeClaim. `nodes` are the Nodes whose `spec.providerID` equals the
/// claim's `status.providerID` (empty before launch).
///
/// Order: finalizer, launch, registration, initialization, liveness — all in one pass, like upstream; the
/// finalizer action comes first so a runtime that stops at the first failure never launches without it.
///
/// Timeouts (liveness, only while not registered): the launch timeout is measured from the `Launched` condition's
/// transition time (falling back to `creationTimestamp` when the condition is absent); the registration timeout
/// is measured from the transition of `Launched` to `True` (upstream measures from the `Registered` condition's
/// transition, which in practice is the same moment; ours matches engine.md §10 case 18). A timeout fires when
/// `now >= start + timeout` and otherwise a `RequeueAt` is emitted for that exact instant.
///
/// Initialization is judged only when the claim was already `Registered=True` on input: the Node passed in has
/// not yet received this pass's registration sync, so the next reconcile decides.
pub fn reconcile(claim: &NodeClaim, nodes: &[&Node], now: Millis, s: &LifecycleSettings) -> Vec<LifecycleAction> {
    let mut out = Vec::new();
    if claim.metadata.deletion_timestamp.is_some() {
        return out; // finalization's job
    }
    if !has_finalizer(claim.metadata.finalizers.as_ref()) {
        out.push(LifecycleAction::AddFinalizer);
    }

    // Launch.
    let launched = claim.condition(COND_LAUNCHED);
    if launched.is_none_or(|c| c.status != STATUS_TRUE) {
        let since = match launched {
            Some(c) => transition_ms(c),
            None => claim.metadata.creation_timestamp.as_ref().map(time_ms),
        };
        if let Some(since) = since {
            let deadline = since.saturating_add(s.launch_timeout);
            if now >= deadline {
                out.push(LifecycleAction::Delete { reason: DeleteReason::LaunchTimeout });
                return out;
            }
            out.push(LifecycleAction::RequeueAt(deadline));
        }
        if launched.is_none() {
            out.push(cond_action(COND_LAUNCHED, STATUS_UNKNOWN, "Launching", ""));
        }
        // Upstream only calls Create while Launched is Unknown; a False Launched waits for the timeout.
        if launched.is_none_or(|c| c.status == STATUS_UNKNOWN) {
            out.push(LifecycleAction::Launch);
        }
        push_cond(&mut out, claim, COND_REGISTERED, STATUS_UNKNOWN, "NotLaunched", "");
        // Requeue goes last so the action list reads in execution order.
        out.sort_by_key(|a| matches!(a, LifecycleAction::RequeueAt(_)));
        return out;
    }
    let launched_at = launched.and_then(transition_ms);

    // Registration.
    if !claim.is_true(COND_REGISTERED) {
        match nodes {
            [node] => {
                register(&mut out, claim, node);
                return out;
            }
            [] => push_cond(&mut out, claim, COND_REGISTERED, STATUS_UNKNOWN, "NodeNotFound", "Node not registered"),
            many => {
                let names: Vec<String> = many.iter().map(|n| node_name(n)).collect();
                let msg = format!("expected a single node, found {} ({})", names.len(), names.join(", "));
                push_cond(&mut out, claim, COND_REGISTERED, STATUS_FALSE, "MultipleNodesFound", &msg);
            }
        }
        // Liveness: registration timeout.
        if let Some(at) = launched_at {
            let deadline = at.saturating_add(s.registration_timeout);
            if now >= deadline {
                out.push(LifecycleAction::Delete { reason: DeleteReason::RegistrationTimeout });
            } else {
                out.push(LifecycleAction::RequeueAt(deadline));
            }
        }
        return out;
    }

    // Initialization.
    if claim.is_true(COND_INITIALIZED) {
        return out;
    }
    match nodes {
        [node] => initialize(&mut out, claim, node),
        [] => push_cond(&mut out, claim, COND_INITIALIZED, STATUS_UNKNOWN, "NodeNotFound", "node not found"),
        _ => push_cond(&mut out, claim, COND_INITIALIZED, STATUS_UNKNOWN, "MultipleNodesFound", "several nodes"),
    }
    out
}

fn register(out: &mut Vec<LifecycleAction>, claim: &NodeClaim, node: &Node) {
    let name = node_name(node);
    let node_labels = node.metadata.labels.clone().unwrap_or_default();
    let sync_taints = node_labels.get(LABEL_DO_NOT_SYNC_TAINTS).is_none_or(|v| v != "true");
    let existing = node_taints(node);
    let mut taints_to_add: Vec<Taint> = Vec::new();
    if sync_taints {
        for t in claim.spec.taints.iter().chain(&claim.spec.startup_taints) {
            if !existing.iter().chain(&taints_to_add).any(|e| same_taint(e, t)) {
                taints_to_add.push(t.clone());
            }
        }
    }
    out.push(LifecycleAction::SyncNode {
        node: name.clone(),
        labels: claim.metadata.labels.clone().unwrap_or_default(),
        annotations: claim.metadata.annotations.clone().unwrap_or_default(),
        taints_to_add,
        remove_unregistered_taint: existing.iter().any(|t| t.key == labels::TAINT_UNREGISTERED),
        finalizer: !has_finalizer(node.metadata.finalizers.as_ref()),
    });
    out.push(LifecycleAction::LabelNode { node: name.clone(), key: labels::REGISTERED.into(), value: "true".into() });
    out.push(cond_action(COND_REGISTERED, STATUS_TRUE, "Registered", ""));
    out.push(LifecycleAction::SetNodeName(name));
}

/// Why a registered node is not yet initialized: `(reason, message)`, or `None` when it is.
pub fn initialization_blocker(claim: &NodeClaim, node: &Node) -> Option<(&'static str, String)> {
    if !node_ready(node) {
        return Some(("NodeNotReady", "node not ready".into()));
    }
    let taints = node_taints(node);
    if let Some(t) = claim.spec.startup_taints.iter().find(|st| taints.iter().any(|t| same_taint(t, st))) {
        return Some(("StartupTaintsExist", format!("startup taint {} still present", taint_string(t))));
    }
    if let Some(t) = taints.iter().find(|t| is_known_ephemeral(t)) {
        return Some(("KnownEphemeralTaintsExist", format!("known ephemeral taint {} still present", taint_string(t))));
    }
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    for (name, q) in &claim.spec.resources.requests {
        // A malformed request is treated as absent; a malformed allocatable as zero (not registered).
        let Ok(req) = parse_quantity(&q.0) else { continue };
        if req.milli() == 0 {
            continue;
        }
        let alloc = allocatable.and_then(|a| a.get(name)).and_then(|q| parse_quantity(&q.0).ok());
        if alloc.is_none_or(|a| a.milli() == 0) {
            return Some(("ResourceNotRegistered", format!("resource {name} not registered")));
        }
    }
    None
}

fn initialize(out: &mut Vec<LifecycleAction>, claim: &NodeClaim, node: &Node) {
    match initialization_blocker(claim, node) {
        Some((reason, msg)) => push_cond(out, claim, COND_INITIALIZED, STATUS_UNKNOWN, reason, &msg),
        None => {
            out.push(LifecycleAction::LabelNode {
                node: node_name(node),
                key: labels::INITIALIZED.into(),
                value: "true".into(),
            });
            out.push(cond_action(COND_INITIALIZED, STATUS_TRUE, "Initialized", ""));
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Launch results

/// What the cloud provider's Create returned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchResult {
    pub provider_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    /// Further provider labels (arch, os, provider-specific keys, ...).
    pub labels: BTreeMap<String, String>,
    pub capacity: Resources,
    pub allocatable: Resources,
    pub image_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    #[error("insufficient capacity: {0}")]
    InsufficientCapacity(String),
    #[error("node class not ready: {0}")]
    NodeClassNotReady(String),
    #[error("{0}")]
    Other(String),
}

fn quantity_map(r: &Resources) -> BTreeMap<String, KQuantity> {
    r.to_quantity_map().into_iter().map(|(k, v)| (k, KQuantity(v))).collect()
}

/// Records a successful launch: provider labels (instance type, zone, capacity type and `r.labels`) merged under the
/// claim's own labels (the claim wins), providerID, imageID, capacity, allocatable, `Launched=True`.
pub fn apply_launch(claim: &mut NodeClaim, r: &LaunchResult, now: Millis) {
    let mut merged = r.labels.clone();
    for (k, v) in
        [(labels::INSTANCE_TYPE, &r.instance_type), (labels::ZONE, &r.zone), (labels::CAPACITY_TYPE, &r.capacity_type)]
    {
        if !v.is_empty() {
            merged.insert(k.to_string(), v.clone());
        }
    }
    merged.extend(claim.metadata.labels.take().unwrap_or_default());
    claim.metadata.labels = Some(merged);
    let status = claim.status.get_or_insert_with(Default::default);
    status.provider_id = Some(r.provider_id.clone());
    if r.image_id.is_some() {
        status.image_id = r.image_id.clone();
    }
    status.capacity = quantity_map(&r.capacity);
    status.allocatable = quantity_map(&r.allocatable);
    set_condition(claim, COND_LAUNCHED, STATUS_TRUE, "Launched", "", now);
}

/// What to do after Create failed: insufficient capacity and a not-ready node class delete the claim (the pods stay
/// pending and the provisioner re-simulates); anything else records `Launched=Unknown/LaunchFailed` with the
/// message truncated to 300 characters and retries.
pub fn launch_failed(e: &LaunchError, now: Millis) -> Vec<LifecycleAction> {
    match e {
        LaunchError::InsufficientCapacity(_) => {
            vec![LifecycleAction::Delete { reason: DeleteReason::InsufficientCapacity }]
        }
        LaunchError::NodeClassNotReady(_) => vec![LifecycleAction::Delete { reason: DeleteReason::NodeClassNotReady }],
        LaunchError::Other(m) => vec![
            cond_action(
                COND_LAUNCHED,
                STATUS_UNKNOWN,
                "LaunchFailed",
                m.chars().take(MAX_LAUNCH_MESSAGE).collect::<String>(),
            ),
            LifecycleAction::RequeueAt(now.saturating_add(LAUNCH_RETRY)),
        ],
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Expiration

/// When the claim expires: `creationTimestamp + expireAfter`. `None` for `Never`, a malformed `expireAfter`, or a
/// missing creation time.
pub fn expires_at(claim: &NodeClaim) -> Option<Millis> {
    let created = time_ms(claim.metadata.creation_timestamp.as_ref()?);
    let d = NillableDuration::parse(&claim.spec.expire_after).ok()?.duration()?;
    Some(created.saturating_add(Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)))
}

/// Forceful expiration: `[Delete{Expired}]` once `now >= expiry` (no budgets, do-not-disrupt irrelevant — the drain
/// still honours PDBs until the grace period), else `[RequeueAt(expiry)]`, else nothing. Deleting claims: nothing.
pub fn expiration(claim: &NodeClaim, now: Millis) -> Vec<LifecycleAction> {
    if claim.metadata.deletion_timestamp.is_some() {
        return Vec::new();
    }
    match expires_at(claim) {
        Some(at) if now >= at => vec![LifecycleAction::Delete { reason: DeleteReason::Expired }],
        Some(at) => vec![LifecycleAction::RequeueAt(at)],
        None => Vec::new(),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Garbage collection

/// Names of NodeClaims to delete because their instance is gone: `Registered=True`, not deleting, providerID not in
/// the cloud provider's list (a missing providerID counts as not listed, as upstream) — unless a Node with that
/// providerID still reports `Ready=True`. Unregistered claims are left to the liveness timeouts. Only call this with a
/// list that succeeded: an empty `cloud_provider_ids` means "no instances exist".
pub fn garbage_collect(claims: &[NodeClaim], nodes: &[Node], cloud_provider_ids: &BTreeSet<String>) -> Vec<String> {
    claims
        .iter()
        .filter(|c| c.is_true(COND_REGISTERED) && c.metadata.deletion_timestamp.is_none())
        .filter(|c| c.provider_id().is_none_or(|p| !cloud_provider_ids.contains(p)))
        .filter(|c| {
            let pid = c.provider_id();
            // Safer than upstream (which skips only on exactly one Node): any Ready node with the providerID protects.
            !nodes.iter().any(|n| {
                pid.is_some() && n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == pid && node_ready(n)
            })
        })
        .map(|c| c.name().to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------------------------------
// Finalization

/// One step of NodeClaim finalization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinalizeAction {
    /// Set [`ANNOTATION_TERMINATION_TIMESTAMP`] on the NodeClaim to this RFC 3339 value.
    AnnotateTerminationTimestamp(String),
    /// Delete this Node (node termination drains it, §4).
    DeleteNode(String),
    /// Call the cloud provider's Delete for the claim's providerID.
    DeleteInstance,
    /// `InstanceTerminating=True`.
    SetCondition {
        type_: String,
        status: String,
        reason: String,
        message: String,
    },
    /// Remove `karpenter.sh/termination` from the NodeClaim: finalization is complete.
    RemoveFinalizer,
    RequeueAt(Millis),
}

/// The drain deadline of a deleting claim: `deletionTimestamp + spec.terminationGracePeriod`. `None` without a
/// deletion time or grace period, or when the grace period is malformed.
pub fn termination_deadline(claim: &NodeClaim) -> Option<Millis> {
    let deleted = time_ms(claim.metadata.deletion_timestamp.as_ref()?);
    let tgp = duration_ms(claim.spec.termination_grace_period.as_deref()?)?;
    Some(deleted.saturating_add(tgp))
}

/// The deadline as recorded in the claim's annotation (what node termination reads); `None` when absent/malformed.
pub fn annotated_deadline(claim: &NodeClaim) -> Option<Millis> {
    claim.metadata.annotations.as_ref()?.get(ANNOTATION_TERMINATION_TIMESTAMP).and_then(|v| parse_rfc3339(v))
}

/// Finalization of a deleting NodeClaim that still holds the termination finalizer (otherwise: nothing).
/// `nodes` are the Nodes with the claim's providerID; `instance_exists` is the provider's Get (false on NotFound).
///
/// 1. Annotate the termination timestamp if a grace period is set and it is missing.
/// 2. Nodes present → delete those not yet deleting and wait (requeue); node termination drains them.
/// 3. Launched instance still exists → delete it, `InstanceTerminating=True`, requeue every 5 s.
/// 4. Otherwise remove the finalizer.
pub fn finalize(claim: &NodeClaim, nodes: &[&Node], instance_exists: bool, now: Millis) -> Vec<FinalizeAction> {
    let mut out = Vec::new();
    if claim.metadata.deletion_timestamp.is_none() || !has_finalizer(claim.metadata.finalizers.as_ref()) {
        return out;
    }
    if let Some(deadline) = termination_deadline(claim)
        && annotated_deadline(claim).is_none()
    {
        out.push(FinalizeAction::AnnotateTerminationTimestamp(rfc3339(deadline)));
    }
    if !nodes.is_empty() {
        for n in nodes.iter().filter(|n| n.metadata.deletion_timestamp.is_none()) {
            out.push(FinalizeAction::DeleteNode(node_name(n)));
        }
        out.push(FinalizeAction::RequeueAt(now.saturating_add(SECOND)));
        return out;
    }
    if claim.provider_id().is_some() && instance_exists {
        out.push(FinalizeAction::DeleteInstance);
        if !claim.is_true(COND_INSTANCE_TERMINATING) {
            out.push(FinalizeAction::SetCondition {
                type_: COND_INSTANCE_TERMINATING.into(),
                status: STATUS_TRUE.into(),
                reason: "InstanceTerminating".into(),
                message: String::new(),
            });
        }
        out.push(FinalizeAction::RequeueAt(now.saturating_add(FINALIZE_REQUEUE)));
        return out;
    }
    out.push(FinalizeAction::RemoveFinalizer);
    out
}
