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
use crate::engine::api::nodeclaim::{
    COND_INITIALIZED, COND_INSTANCE_TERMINATING, COND_LAUNCHED, COND_READY, COND_REGISTERED,
};
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
    /// A disruption command (emptiness, drift, consolidation) whose replacements are ready.
    Disrupted,
    /// The cloud said the instance is going away (spot interruption, scheduled change, stopping, terminated).
    Interrupted,
    /// Node auto repair: a condition matched a repair policy for longer than it tolerates.
    Unhealthy,
    /// Static scale-down: the pool has more NodeClaims than its replicas.
    Overprovisioned,
    /// Its capacity block ends within 40 minutes (forceful, before EC2 takes the instance back).
    CapacityBlockExpiring,
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
            DeleteReason::Disrupted => "disrupted",
            DeleteReason::Interrupted => "interrupted",
            DeleteReason::Unhealthy => "unhealthy",
            DeleteReason::Overprovisioned => "overprovisioned",
            DeleteReason::CapacityBlockExpiring => "capacity_block_expiring",
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
/// condition is new); reason and message are always updated, and always written (see [`set_condition_in`]).
pub fn set_condition(claim: &mut NodeClaim, type_: &str, status: &str, reason: &str, message: &str, now: Millis) {
    let conditions = &mut claim.status.get_or_insert_with(Default::default).conditions;
    set_condition_in(conditions, type_, status, reason, message, now);
    if READY_DEPENDENTS.contains(&type_) {
        let (status, reason, message) = root_ready(conditions);
        set_condition_in(conditions, COND_READY, status, reason, &message, now);
    }
}

/// The conditions the root `Ready` condition of a NodeClaim follows, as upstream's status conditions do.
pub const READY_DEPENDENTS: [&str; 3] = [COND_LAUNCHED, COND_REGISTERED, COND_INITIALIZED];

/// Upstream's root condition (operatorpkg `ConditionSet`): `True` once every dependent is, `False` as soon as one is
/// `False`, `Unknown` otherwise, the message naming the dependents that are not `True` (`Registered=Unknown, ...`).
/// A dependent not set yet counts as `Unknown`, as upstream initializes them.
fn root_ready(conditions: &[Condition]) -> (&'static str, &'static str, String) {
    let unhealthy: Vec<(&str, &str)> = READY_DEPENDENTS
        .iter()
        .map(|t| (*t, conditions.iter().find(|c| c.type_ == *t).map_or(STATUS_UNKNOWN, |c| c.status.as_str())))
        .filter(|(_, s)| *s != STATUS_TRUE)
        .collect();
    if unhealthy.is_empty() {
        return (STATUS_TRUE, COND_READY, String::new());
    }
    let message = unhealthy.iter().map(|(t, s)| format!("{t}={s}")).collect::<Vec<_>>().join(", ");
    if unhealthy.iter().any(|(_, s)| *s == STATUS_FALSE) {
        (STATUS_FALSE, "UnhealthyDependents", message)
    } else {
        (STATUS_UNKNOWN, "ReconcilingDependents", message)
    }
}

pub fn set_condition_in(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Millis,
) {
    // Upstream's CRDs (NodePool, EC2NodeClass, NodeOverlay, CapacityBuffer) require both: a reason matching
    // `^[A-Za-z]...` and a message, which may be empty. Without a reason of its own a condition takes its type, as
    // upstream's status conditions do.
    let reason = Some(if reason.is_empty() { type_ } else { reason }.to_string());
    let message = Some(message.to_string());
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
    /// No instance type the claim allows can hold its requests, whatever the capacity: launching it again can
    /// never succeed (the cloud's instance types and the scheduler's disagree).
    #[error("no compatible instance type: {0}")]
    NoCompatibleType(String),
    #[error("{0}")]
    Other(String),
}

fn quantity_map(r: &Resources) -> BTreeMap<String, KQuantity> {
    r.to_quantity_map().into_iter().map(|(k, v)| (k, KQuantity(v))).collect()
}

/// The instance types a claim allows (its `node.kubernetes.io/instance-type In` values), in order.
pub fn claim_instance_types(claim: &NodeClaim) -> Vec<String> {
    claim
        .spec
        .requirements
        .iter()
        .filter(|r| r.key == labels::INSTANCE_TYPE && r.operator == "In")
        .flat_map(|r| r.values.iter().cloned())
        .collect()
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
        // The claim ends; the controller keeps its instance types out of the NodePool's launches for a while
        // ([`crate::controller::Outcome::LaunchImpossible`]), so it is not created again at once.
        LaunchError::NoCompatibleType(_) => {
            vec![LifecycleAction::Delete { reason: DeleteReason::InsufficientCapacity }]
        }
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
            !nodes.iter().any(|n| pid.is_some() && crate::engine::state::node_provider_id(n) == pid && node_ready(n))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T0: Millis = 1_700_000_000_000;

    fn claim(v: serde_json::Value) -> NodeClaim {
        let mut base = json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c1", "creationTimestamp": rfc3339(T0), "finalizers": [labels::TERMINATION_FINALIZER],
                         "labels": {"karpenter.sh/nodepool": "default", "team": "a"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}
        });
        merge(&mut base, v);
        serde_json::from_value(base).unwrap()
    }

    fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
        match (a, b) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn node(v: serde_json::Value) -> Node {
        let mut base = json!({"metadata": {"name": "n1"}, "spec": {"providerID": "fake://i-1"}});
        merge(&mut base, v);
        serde_json::from_value(base).unwrap()
    }

    fn ready_node(v: serde_json::Value) -> Node {
        let mut n = node(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}],
                                           "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}}));
        let mut val = serde_json::to_value(&n).unwrap();
        merge(&mut val, v);
        n = serde_json::from_value(val).unwrap();
        n
    }

    fn cond(type_: &str, status: &str, at: Millis) -> serde_json::Value {
        json!({"type": type_, "status": status, "lastTransitionTime": rfc3339(at)})
    }

    #[test]
    fn the_root_ready_condition_follows_launched_registered_and_initialized() {
        let mut c = claim(json!({}));
        let ready = |c: &NodeClaim| {
            let r = c.condition(COND_READY).unwrap();
            (r.status.clone(), r.reason.clone().unwrap_or_default(), r.message.clone().unwrap_or_default())
        };
        set_condition(&mut c, COND_LAUNCHED, STATUS_TRUE, "Launched", "", T0);
        assert_eq!(
            ready(&c),
            ("Unknown".into(), "ReconcilingDependents".into(), "Registered=Unknown, Initialized=Unknown".into())
        );
        set_condition(&mut c, COND_REGISTERED, STATUS_FALSE, "MultipleNodesFound", "two", T0 + 1);
        assert_eq!(
            ready(&c),
            ("False".into(), "UnhealthyDependents".into(), "Registered=False, Initialized=Unknown".into())
        );
        set_condition(&mut c, COND_REGISTERED, STATUS_TRUE, "Registered", "", T0 + 2);
        set_condition(&mut c, crate::engine::api::nodeclaim::COND_DRIFTED, STATUS_TRUE, "NodePoolDrifted", "", T0 + 3);
        assert_eq!(ready(&c).0, "Unknown", "Drifted is not a dependent");
        set_condition(&mut c, COND_INITIALIZED, STATUS_TRUE, "Initialized", "", T0 + 4);
        assert_eq!(ready(&c), ("True".into(), "Ready".into(), String::new()));
        assert_eq!(c.condition(COND_READY).unwrap().last_transition_time, Some(rfc3339(T0 + 4)));
    }

    fn launched_claim(at: Millis) -> NodeClaim {
        claim(json!({"status": {"providerID": "fake://i-1", "conditions": [cond("Launched", "True", at)]}}))
    }

    fn registered_claim(extra: serde_json::Value) -> NodeClaim {
        let mut c = claim(json!({"status": {"providerID": "fake://i-1", "conditions": [
            cond("Launched", "True", T0), cond("Registered", "True", T0)]}}));
        let mut v = serde_json::to_value(&c).unwrap();
        merge(&mut v, extra);
        c = serde_json::from_value(v).unwrap();
        c
    }

    fn deletes(a: &[LifecycleAction], r: DeleteReason) -> bool {
        a.contains(&LifecycleAction::Delete { reason: r })
    }

    fn cond_set<'a>(a: &'a [LifecycleAction], t: &str) -> Option<(&'a str, &'a str, &'a str)> {
        a.iter().find_map(|x| match x {
            LifecycleAction::SetCondition { type_, status, reason, message } if type_ == t => {
                Some((status.as_str(), reason.as_str(), message.as_str()))
            }
            _ => None,
        })
    }

    #[test]
    fn rfc3339_round_trip_and_malformed() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(parse_rfc3339(&rfc3339(T0)), Some(T0));
        assert_eq!(parse_rfc3339(&rfc3339(T0 + 250)), Some(T0 + 250));
        assert_eq!(parse_rfc3339("2024-01-01T01:00:00+01:00"), parse_rfc3339("2024-01-01T00:00:00Z"));
        assert_eq!(parse_rfc3339("yesterday"), None);
        let _ = rfc3339(Millis::MAX);
        let _ = rfc3339(Millis::MIN);
    }

    #[test]
    fn finalizer_first_then_launch() {
        let mut c = claim(json!({}));
        c.metadata.finalizers = None;
        let a = reconcile(&c, &[], T0, &LifecycleSettings::default());
        assert_eq!(a[0], LifecycleAction::AddFinalizer);
        let launch = a.iter().position(|x| *x == LifecycleAction::Launch).unwrap();
        assert!(launch > 0);
        assert_eq!(a.last(), Some(&LifecycleAction::RequeueAt(T0 + 5 * MINUTE)));
        let c2 = claim(json!({}));
        assert!(!reconcile(&c2, &[], T0, &LifecycleSettings::default()).contains(&LifecycleAction::AddFinalizer));
    }

    #[test]
    fn launch_timeout_at_exactly_five_minutes() {
        let s = LifecycleSettings::default();
        let c = claim(json!({"status": {"conditions": [cond("Launched", "Unknown", T0)]}}));
        let before = reconcile(&c, &[], T0 + 5 * MINUTE - 1, &s);
        assert!(!deletes(&before, DeleteReason::LaunchTimeout));
        assert!(before.contains(&LifecycleAction::Launch));
        assert!(before.contains(&LifecycleAction::RequeueAt(T0 + 5 * MINUTE)));
        let at = reconcile(&c, &[], T0 + 5 * MINUTE, &s);
        assert!(deletes(&at, DeleteReason::LaunchTimeout));
        assert!(!at.contains(&LifecycleAction::Launch));
        // Without a Launched condition the creation timestamp is the start.
        let fresh = claim(json!({}));
        assert!(deletes(&reconcile(&fresh, &[], T0 + 5 * MINUTE, &s), DeleteReason::LaunchTimeout));
        // A malformed transition time disables the timeout instead of panicking.
        let bad = claim(
            json!({"status": {"conditions": [{"type": "Launched", "status": "Unknown", "lastTransitionTime": "x"}]}}),
        );
        assert!(!deletes(&reconcile(&bad, &[], T0 + 60 * MINUTE, &s), DeleteReason::LaunchTimeout));
    }

    #[test]
    fn registration_timeout_fifteen_minutes_after_launched() {
        let s = LifecycleSettings::default();
        let c = launched_claim(T0 + MINUTE);
        let before = reconcile(&c, &[], T0 + 16 * MINUTE - 1, &s);
        assert!(!deletes(&before, DeleteReason::RegistrationTimeout));
        assert_eq!(cond_set(&before, COND_REGISTERED).map(|c| (c.0, c.1)), Some(("Unknown", "NodeNotFound")));
        assert!(before.contains(&LifecycleAction::RequeueAt(T0 + 16 * MINUTE)));
        assert!(!before.contains(&LifecycleAction::Launch), "launched claims are not launched again");
        let at = reconcile(&c, &[], T0 + 16 * MINUTE, &s);
        assert!(deletes(&at, DeleteReason::RegistrationTimeout));
        // Launch timeout doesn't apply once launched.
        assert!(!deletes(&at, DeleteReason::LaunchTimeout));
    }

    #[test]
    fn multiple_nodes_registered_false() {
        let c = launched_claim(T0);
        let (a, b) = (node(json!({})), node(json!({"metadata": {"name": "n2"}})));
        let acts = reconcile(&c, &[&a, &b], T0 + MINUTE, &LifecycleSettings::default());
        let (status, reason, msg) = cond_set(&acts, COND_REGISTERED).unwrap();
        assert_eq!((status, reason), ("False", "MultipleNodesFound"));
        assert!(msg.contains("n1") && msg.contains("n2"));
        assert!(!acts.iter().any(|x| matches!(x, LifecycleAction::SyncNode { .. })));
    }

    #[test]
    fn registration_sync_contents() {
        let mut c = launched_claim(T0);
        c.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
        c.spec.taints = vec![Taint {
            key: "dedicated".into(),
            value: Some("x".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        }];
        c.spec.startup_taints =
            vec![Taint { key: "cni".into(), value: None, effect: "NoSchedule".into(), time_added: None }];
        let n = node(json!({"spec": {"taints": [
            {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
            {"key": "dedicated", "value": "other", "effect": "NoSchedule"}]}}));
        let acts = reconcile(&c, &[&n], T0 + MINUTE, &LifecycleSettings::default());
        let Some(LifecycleAction::SyncNode {
            node: synced,
            labels: l,
            annotations,
            taints_to_add,
            remove_unregistered_taint,
            finalizer,
        }) = acts.first()
        else {
            panic!("expected SyncNode first: {acts:?}")
        };
        assert_eq!(synced, "n1");
        assert_eq!(l.get("team").map(String::as_str), Some("a"));
        assert_eq!(annotations.get("a").map(String::as_str), Some("b"));
        // "dedicated:NoSchedule" already exists (same key+effect): only the startup taint is added.
        assert_eq!(taints_to_add.iter().map(|t| t.key.as_str()).collect::<Vec<_>>(), ["cni"]);
        assert!(*remove_unregistered_taint && *finalizer);
        assert!(acts.contains(&LifecycleAction::LabelNode {
            node: "n1".into(),
            key: labels::REGISTERED.into(),
            value: "true".into()
        }));
        assert_eq!(cond_set(&acts, COND_REGISTERED).map(|c| c.0), Some("True"));
        assert!(acts.contains(&LifecycleAction::SetNodeName("n1".into())));
        assert!(!acts.iter().any(|a| matches!(a, LifecycleAction::Delete { .. })));

        // do-not-sync-taints: nothing to add.
        let n2 = node(
            json!({"metadata": {"labels": {LABEL_DO_NOT_SYNC_TAINTS: "true"}, "finalizers": [labels::TERMINATION_FINALIZER]}}),
        );
        let acts = reconcile(&c, &[&n2], T0 + MINUTE, &LifecycleSettings::default());
        let Some(LifecycleAction::SyncNode { taints_to_add, remove_unregistered_taint, finalizer, .. }) = acts.first()
        else {
            panic!()
        };
        assert!(taints_to_add.is_empty() && !remove_unregistered_taint && !finalizer);
    }

    fn gpu_claim() -> NodeClaim {
        let mut c = registered_claim(json!({"spec": {"resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}}));
        c.spec.startup_taints =
            vec![Taint { key: "cni".into(), value: None, effect: "NoSchedule".into(), time_added: None }];
        c
    }

    fn init_reason(c: &NodeClaim, n: &Node) -> (String, String) {
        let acts = reconcile(c, &[n], T0 + MINUTE, &LifecycleSettings::default());
        assert!(
            !acts.iter().any(|a| matches!(a, LifecycleAction::LabelNode { key, .. } if key == labels::INITIALIZED))
        );
        let (s, r, m) = cond_set(&acts, COND_INITIALIZED).expect("an Initialized condition");
        assert_eq!(s, "Unknown");
        (r.to_string(), m.to_string())
    }

    #[test]
    fn initialization_case_19() {
        let c = gpu_claim();
        let good = ready_node(json!({"status": {"allocatable": {"nvidia.com/gpu": "1"}}}));
        let acts = reconcile(&c, &[&good], T0 + MINUTE, &LifecycleSettings::default());
        assert!(acts.contains(&LifecycleAction::LabelNode {
            node: "n1".into(),
            key: labels::INITIALIZED.into(),
            value: "true".into()
        }));
        assert_eq!(cond_set(&acts, COND_INITIALIZED).map(|c| c.0), Some("True"));

        // Each blocker alone keeps it uninitialized with its own reason.
        let not_ready = ready_node(json!({"status": {"allocatable": {"nvidia.com/gpu": "1"},
            "conditions": [{"type": "Ready", "status": "False"}]}}));
        assert_eq!(init_reason(&c, &not_ready), ("NodeNotReady".into(), "node not ready".into()));
        let startup = ready_node(json!({"status": {"allocatable": {"nvidia.com/gpu": "1"}},
            "spec": {"taints": [{"key": "cni", "effect": "NoSchedule"}]}}));
        assert_eq!(
            init_reason(&c, &startup),
            ("StartupTaintsExist".into(), "startup taint cni:NoSchedule still present".into())
        );
        let ephemeral = ready_node(json!({"status": {"allocatable": {"nvidia.com/gpu": "1"}},
            "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}}));
        assert_eq!(init_reason(&c, &ephemeral).0, "KnownEphemeralTaintsExist");
        let no_gpu = ready_node(json!({}));
        assert_eq!(
            init_reason(&c, &no_gpu),
            ("ResourceNotRegistered".into(), "resource nvidia.com/gpu not registered".into())
        );
        let zero_gpu = ready_node(json!({"status": {"allocatable": {"nvidia.com/gpu": "0"}}}));
        assert_eq!(init_reason(&c, &zero_gpu).0, "ResourceNotRegistered");
        let bad_gpu = ready_node(json!({"status": {"allocatable": {"nvidia.com/gpu": "lots"}}}));
        assert_eq!(init_reason(&c, &bad_gpu).0, "ResourceNotRegistered", "malformed allocatable counts as zero");
        // A zero request is not waited for.
        let mut zero_req = c.clone();
        zero_req.spec.resources.requests.insert("nvidia.com/gpu".into(), KQuantity("0".into()));
        assert_eq!(initialization_blocker(&zero_req, &no_gpu), None);
    }

    #[test]
    fn unchanged_condition_not_reemitted_and_transition_time_kept() {
        let mut c = gpu_claim();
        let n = ready_node(json!({}));
        let acts = reconcile(&c, &[&n], T0 + MINUTE, &LifecycleSettings::default());
        for a in &acts {
            apply(&mut c, a, T0 + MINUTE);
        }
        assert!(reconcile(&c, &[&n], T0 + 2 * MINUTE, &LifecycleSettings::default()).is_empty());
        // Reason changes keep the transition time while the status stays Unknown.
        set_condition(&mut c, COND_INITIALIZED, "Unknown", "NodeNotReady", "", T0 + 3 * MINUTE);
        let t = c.condition(COND_INITIALIZED).unwrap().last_transition_time.clone();
        assert_eq!(t, Some(rfc3339(T0 + MINUTE)));
        set_condition(&mut c, COND_INITIALIZED, "True", "Initialized", "", T0 + 4 * MINUTE);
        assert_eq!(c.condition(COND_INITIALIZED).unwrap().last_transition_time, Some(rfc3339(T0 + 4 * MINUTE)));
    }

    #[test]
    fn full_lifecycle_applies_in_order() {
        let s = LifecycleSettings::default();
        let mut c = claim(json!({}));
        for a in reconcile(&c, &[], T0, &s) {
            apply(&mut c, &a, T0);
        }
        let r = LaunchResult {
            provider_id: "fake://i-1".into(),
            instance_type: "m5.large".into(),
            zone: "z1".into(),
            capacity_type: "spot".into(),
            labels: [("team".to_string(), "provider".to_string()), ("kubernetes.io/arch".into(), "amd64".into())]
                .into(),
            capacity: Resources::new(2000, 8 << 30, 29),
            allocatable: Resources::new(1930, 7 << 30, 29),
            image_id: Some("ami-1".into()),
        };
        apply_launch(&mut c, &r, T0 + SECOND);
        let l = c.metadata.labels.clone().unwrap();
        assert_eq!(l["team"], "a", "the claim's own labels win");
        assert_eq!(l["kubernetes.io/arch"], "amd64");
        assert_eq!(l[labels::INSTANCE_TYPE], "m5.large");
        let st = c.status.clone().unwrap();
        assert_eq!(st.provider_id.as_deref(), Some("fake://i-1"));
        assert_eq!(st.image_id.as_deref(), Some("ami-1"));
        assert_eq!(st.allocatable["cpu"].0, "1930m");
        assert!(c.is_true(COND_LAUNCHED));
        // Registration timeout counts from the Launched=True transition.
        let acts = reconcile(&c, &[], T0 + SECOND + 15 * MINUTE - 1, &s);
        assert!(acts.contains(&LifecycleAction::RequeueAt(T0 + SECOND + 15 * MINUTE)));
    }

    #[test]
    fn launch_failures() {
        assert_eq!(
            launch_failed(&LaunchError::InsufficientCapacity("no spot".into()), T0),
            vec![LifecycleAction::Delete { reason: DeleteReason::InsufficientCapacity }]
        );
        assert_eq!(
            launch_failed(&LaunchError::NodeClassNotReady("x".into()), T0),
            vec![LifecycleAction::Delete { reason: DeleteReason::NodeClassNotReady }]
        );
        let long = "é".repeat(400);
        let a = launch_failed(&LaunchError::Other(long), T0);
        let (s, r, m) = cond_set(&a, COND_LAUNCHED).unwrap();
        assert_eq!((s, r, m.chars().count()), ("Unknown", "LaunchFailed", 300));
        assert!(a.contains(&LifecycleAction::RequeueAt(T0 + LAUNCH_RETRY)));
    }

    #[test]
    fn expiration_case_27() {
        let mut c = registered_claim(json!({"spec": {"expireAfter": "1h"}}));
        c.metadata.annotations = Some([(labels::ANNOTATION_DO_NOT_DISRUPT.to_string(), "true".to_string())].into());
        assert_eq!(expiration(&c, T0 + 60 * MINUTE - 1), vec![LifecycleAction::RequeueAt(T0 + 60 * MINUTE)]);
        assert_eq!(expiration(&c, T0 + 60 * MINUTE), vec![LifecycleAction::Delete { reason: DeleteReason::Expired }]);
        c.spec.expire_after = "Never".into();
        assert!(expiration(&c, T0 + 10_000 * MINUTE).is_empty());
        c.spec.expire_after = "soon".into();
        assert!(expiration(&c, T0 + 10_000 * MINUTE).is_empty(), "malformed expireAfter: no expiry");
        let default = claim(json!({}));
        assert_eq!(expires_at(&default), Some(T0 + 720 * 60 * MINUTE));
    }

    #[test]
    fn garbage_collection_rules() {
        let mk = |name: &str, pid: &str, registered: bool| {
            let mut c = claim(json!({"metadata": {"name": name}, "status": {"providerID": pid,
                "conditions": [cond("Launched", "True", T0), cond("Registered", if registered { "True" } else { "Unknown" }, T0)]}}));
            c.metadata.name = Some(name.into());
            c
        };
        let gone = mk("gone", "fake://gone", true);
        let alive = mk("alive", "fake://alive", true);
        let unregistered = mk("unreg", "fake://unreg", false);
        let kubelet_up = mk("up", "fake://up", true);
        let mut deleting = mk("deleting", "fake://del", true);
        deleting.metadata.deletion_timestamp = Some(ms_time(T0));
        let not_ready = mk("notready", "fake://nr", true);
        let nodes = vec![
            ready_node(json!({"metadata": {"name": "up"}, "spec": {"providerID": "fake://up"}})),
            node(json!({"metadata": {"name": "nr"}, "spec": {"providerID": "fake://nr"},
                "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})),
        ];
        let cloud: BTreeSet<String> = ["fake://alive".to_string()].into();
        let gc = garbage_collect(&[gone, alive, unregistered, kubelet_up, deleting, not_ready], &nodes, &cloud);
        assert_eq!(gc, ["gone", "notready"]);
    }

    #[test]
    fn finalization_steps() {
        let mut c = registered_claim(json!({"spec": {"terminationGracePeriod": "1h"}}));
        assert!(finalize(&c, &[], true, T0).is_empty(), "not deleting");
        c.metadata.deletion_timestamp = Some(ms_time(T0 + MINUTE));
        let n = ready_node(json!({}));
        let a = finalize(&c, &[&n], true, T0 + MINUTE);
        assert_eq!(
            a,
            vec![
                FinalizeAction::AnnotateTerminationTimestamp(rfc3339(T0 + 61 * MINUTE)),
                FinalizeAction::DeleteNode("n1".into()),
                FinalizeAction::RequeueAt(T0 + MINUTE + SECOND),
            ]
        );
        c.metadata.annotations =
            Some([(ANNOTATION_TERMINATION_TIMESTAMP.to_string(), rfc3339(T0 + 61 * MINUTE))].into());
        assert_eq!(annotated_deadline(&c), Some(T0 + 61 * MINUTE));
        let a = finalize(&c, &[], true, T0 + 2 * MINUTE);
        assert_eq!(a[0], FinalizeAction::DeleteInstance);
        assert!(
            matches!(&a[1], FinalizeAction::SetCondition { type_, status, .. } if type_ == COND_INSTANCE_TERMINATING && status == "True")
        );
        assert_eq!(a[2], FinalizeAction::RequeueAt(T0 + 2 * MINUTE + FINALIZE_REQUEUE));
        assert_eq!(finalize(&c, &[], false, T0 + 3 * MINUTE), vec![FinalizeAction::RemoveFinalizer]);
        // Never launched: nothing to delete in the cloud.
        let mut unlaunched = claim(json!({}));
        unlaunched.metadata.deletion_timestamp = Some(ms_time(T0));
        assert_eq!(finalize(&unlaunched, &[], true, T0), vec![FinalizeAction::RemoveFinalizer]);
        // Malformed grace period: no annotation, no panic.
        let mut bad = unlaunched.clone();
        bad.spec.termination_grace_period = Some("forever".into());
        assert_eq!(finalize(&bad, &[], false, T0), vec![FinalizeAction::RemoveFinalizer]);
    }

    #[test]
    fn deleting_claims_are_not_reconciled() {
        let mut c = launched_claim(T0);
        c.metadata.deletion_timestamp = Some(ms_time(T0));
        assert!(reconcile(&c, &[], T0 + 60 * MINUTE, &LifecycleSettings::default()).is_empty());
        assert!(expiration(&c, T0 + 100_000 * MINUTE).is_empty());
    }
}
