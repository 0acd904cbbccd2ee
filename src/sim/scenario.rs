//! Scenario files for `karpenter-tui simulate` (docs/spec: scenario.md): a strict, I/O-free loader.
//!
//! Every error names the file, the 1-based line and column, and the field path (`events[3].scale.replicas`). The
//! text is deserialised once with serde (paths tracked by `serde_path_to_error`, skipped keys reported by
//! `serde_ignored`), then checked field by field; positions come from a [`YamlIndex`] of the same text. Embedded
//! Kubernetes manifests (`objects:`, `apply:`) are typed in a second pass with the same machinery.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod, Taint};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

use crate::engine::disruption::gate::Mode;
use crate::engine::packing::Packing;
use crate::engine::provisioning::Millis;
use crate::engine::version::KarpenterVersion;
use thiserror::Error;

use crate::engine::api::duration::parse_go_duration;
use crate::engine::api::strict::{Pos, YamlIndex, ignored_path};
use crate::engine::api::validation::{FieldPath, PathSegment, do_not_repair_ignored, validate_nodepool_written};
use crate::engine::api::{EC2NodeClass, NodePool};
use crate::engine::catalog::aws::{aws_regions, aws_zones};
use crate::engine::catalog::inline::{InlineInstanceType, inline_instance_types};
use crate::engine::labels::{self, CAPACITY_TYPES};
use crate::engine::manifests::ClusterObjects;

/// `start` when the scenario doesn't set one.
pub const DEFAULT_START: &str = "2026-01-01T00:00:00Z";
/// `region` when the scenario doesn't set one.
pub const DEFAULT_REGION: &str = "us-east-1";

/// An invalid scenario, located: renders as `file:line:column: field: message` (`file:line:column: message` when
/// the problem isn't tied to a field, e.g. a YAML syntax error).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{file}:{line}:{column}: {}{message}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct ScenarioError {
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based.
    pub column: usize,
    /// Field path in Kubernetes notation (`events[3].scale.replicas`); empty for syntax errors.
    pub path: String,
    pub message: String,
}

/// A parsed, checked scenario. Durations are offsets from t=0; the runner turns them into simulated seconds.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    /// Default 0.
    pub seed: u64,
    /// Default `us-east-1`.
    pub region: String,
    /// Simulated duration of the run.
    pub until: Duration,
    /// Wall-clock time of t=0 (default 2026-01-01T00:00:00Z).
    pub start: DateTime<Utc>,
    pub catalog: CatalogSpec,
    pub settings: Settings,
    /// Objects that exist at t=0. Never holds Nodes or NodeClaims: existing capacity is `nodes`.
    pub objects: ClusterObjects,
    pub nodes: Vec<NodeSpec>,
    /// In file order; the runner applies them by `at`, ties in file order.
    pub events: Vec<Event>,
    file: String,
    /// Instance type and zone names that can only be checked against the built catalog.
    refs: Vec<Reference>,
}

#[derive(Debug, Clone)]
struct Reference {
    path: String,
    pos: Pos,
    value: String,
    zone: bool,
}

/// What the simulated cloud offers.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogSpec {
    pub source: CatalogSource,
    /// `None`: the source's default (aws: the region's first three zones).
    pub zones: Option<Vec<String>>,
    /// The catalog for `inline`, added to it otherwise. Already checked (quantities, offerings, unique names).
    pub instance_types: Vec<InlineInstanceType>,
    /// Capacity reservations of the catalog's types (`catalog.capacityReservations`): each a `reserved` offering
    /// of its type and zone, priced as upstream prices them (on-demand ÷ 10,000,000).
    pub capacity_reservations: Vec<CapacityReservationSpec>,
}

/// `catalog.capacityReservations[]`: `{id, instanceType, zone, count, type, interruptible, endsAt}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapacityReservationSpec {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub count: i64,
    /// `default` (an ODCR, the default) or `capacity-block`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub interruptible: bool,
    /// When it ends, from t=0 (a Go duration, checked).
    #[serde(default)]
    pub ends_at: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CatalogSource {
    /// The embedded AWS catalog.
    #[default]
    Aws,
    /// The synthetic KWOK types.
    Kwok,
    /// Only `catalog.instanceTypes`.
    Inline,
}

/// How disruption commands are carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DisruptionMode {
    /// Executed as the engine decides.
    #[default]
    Auto,
    /// Wait for an `approve` (or `reject`) event.
    Approve,
    /// Decided and reported, never executed.
    DryRun,
}

/// A scenario's `settings` (all optional in the file): the world's timings and the controller's settings.
pub use crate::sim::world::Settings;

/// A node that exists at t=0 (the `nodes:` shorthand).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    /// `None`: the world generates one.
    pub name: Option<String>,
    pub instance_type: String,
    pub zone: String,
    /// Default `on-demand`.
    pub capacity_type: String,
    /// `None`: an unmanaged node. Otherwise a NodePool of `objects`.
    pub node_pool: Option<String>,
    /// The node was created at t = -age (default 0).
    pub age: Duration,
    /// Default true.
    pub initialized: bool,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
}

/// One timeline entry.
#[derive(Debug, Clone)]
pub struct Event {
    /// Offset from t=0; never after `until`.
    pub at: Duration,
    pub action: Action,
}

/// What an event does (exactly one per event).
#[derive(Debug, Clone)]
pub enum Action {
    /// Create or replace these objects.
    Apply(Box<ClusterObjects>),
    Scale(Scale),
    /// `scale: {kind: NodePool, name, replicas}`: a static NodePool's `spec.replicas`, as `kubectl scale` sets it
    /// through the scale subresource.
    ScaleNodePool {
        name: String,
        replicas: i64,
    },
    Delete(Vec<ObjectRef>),
    /// A JSON merge patch of one object.
    Patch(Patch),
    Interrupt(Interrupt),
    /// A Node condition set, as a kubelet or a monitoring agent would.
    Condition(NodeConditionChange),
    /// Insufficient capacity on/off for one offering.
    Capacity(CapacityChange),
    Approve(Selection),
    Reject(Selection),
}

/// Kinds a `delete` or `patch` may name: the object kinds plus the Nodes and NodeClaims the world creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
pub enum ObjectKind {
    Pod,
    Deployment,
    DaemonSet,
    PodDisruptionBudget,
    PersistentVolumeClaim,
    PersistentVolume,
    StorageClass,
    Namespace,
    NodePool,
    #[serde(rename = "EC2NodeClass")]
    Ec2NodeClass,
    Node,
    NodeClaim,
    NodeOverlay,
    CapacityBuffer,
    PodTemplate,
    Service,
}

impl ObjectKind {
    /// Whether objects of this kind live in a namespace.
    pub fn is_namespaced(self) -> bool {
        matches!(
            self,
            ObjectKind::Pod
                | ObjectKind::Deployment
                | ObjectKind::DaemonSet
                | ObjectKind::PodDisruptionBudget
                | ObjectKind::PersistentVolumeClaim
                | ObjectKind::CapacityBuffer
                | ObjectKind::PodTemplate
                | ObjectKind::Service
        )
    }
}

/// A reference to one object. `namespace` is `Some` (default `default`) exactly for namespaced kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    pub kind: ObjectKind,
    pub namespace: Option<String>,
    pub name: String,
}

/// `scale:`. Only `Deployment` is accepted (the only scalable kind among the scenario's objects).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scale {
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
}

/// `patch:`: the target and the merge patch (every key besides kind/namespace/name, e.g. `metadata`, `spec`).
#[derive(Debug, Clone, PartialEq)]
pub struct Patch {
    pub target: ObjectRef,
    pub patch: serde_json::Value,
}

pub use crate::controller::interruption::Kind as InterruptionKind;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interrupt {
    pub node: String,
    pub kind: InterruptionKind,
}

/// `condition: {node, type, status, reason}`: the node's condition of this type gets this status; its
/// lastTransitionTime becomes the event's time when the status changes (and stays when it doesn't, as a kubelet
/// keeps it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConditionChange {
    pub node: String,
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: Option<String>,
}

/// Marks one offering available or not (insufficient capacity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityChange {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub available: bool,
}

/// `approve:`/`reject:` targets: every waiting decision, or these decision ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    All,
    Ids(Vec<String>),
}

impl Scenario {
    /// The file name errors are reported against.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Checks the instance type and zone names written in `nodes` and `capacity` events (and `catalog.zones`)
    /// against the built catalog: `known_instance_types` answers for a name, `zones` are the catalog's zones.
    pub fn check_references(
        &self,
        known_instance_types: &dyn Fn(&str) -> bool,
        zones: &[String],
    ) -> Result<(), ScenarioError> {
        for r in &self.refs {
            let ok = if r.zone { zones.contains(&r.value) } else { known_instance_types(&r.value) };
            if !ok {
                let message = if r.zone {
                    format!("unknown zone {:?} (the catalog offers {})", r.value, zones.join(", "))
                } else {
                    format!("unknown instance type {:?}", r.value)
                };
                return Err(ScenarioError {
                    file: self.file.clone(),
                    line: r.pos.line,
                    column: r.pos.column,
                    path: r.path.clone(),
                    message,
                });
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The file as written. Container renames only make serde's "expected struct ..." messages readable.

#[derive(Deserialize)]
#[serde(rename = "scenario", rename_all = "camelCase")]
struct RawScenario {
    name: String,
    #[serde(default)]
    seed: u64,
    #[serde(default)]
    region: Option<String>,
    until: GoDuration,
    #[serde(default)]
    start: Option<String>,
    #[serde(default)]
    catalog: Option<RawCatalog>,
    #[serde(default)]
    settings: Option<RawSettings>,
    #[serde(default)]
    objects: Option<Vec<serde_yaml::Value>>,
    #[serde(default)]
    nodes: Option<Vec<RawNode>>,
    #[serde(default)]
    events: Option<Vec<RawEvent>>,
}

#[derive(Deserialize)]
#[serde(rename = "catalog", rename_all = "camelCase")]
struct RawCatalog {
    #[serde(default)]
    source: Option<CatalogSource>,
    #[serde(default)]
    zones: Option<Vec<String>>,
    #[serde(default)]
    instance_types: Option<Vec<InlineInstanceType>>,
    #[serde(default)]
    capacity_reservations: Option<Vec<CapacityReservationSpec>>,
}

#[derive(Deserialize)]
#[serde(rename = "settings", rename_all = "camelCase")]
struct RawSettings {
    #[serde(default)]
    disruption: Option<DisruptionMode>,
    #[serde(default)]
    launch_latency: Option<GoDuration>,
    #[serde(default)]
    registration_latency: Option<GoDuration>,
    #[serde(default)]
    ready_latency: Option<GoDuration>,
    #[serde(default)]
    batch_idle: Option<GoDuration>,
    #[serde(default)]
    batch_max: Option<GoDuration>,
    #[serde(default)]
    validation_delay: Option<GoDuration>,
    #[serde(default)]
    spot_to_spot_consolidation: Option<bool>,
    #[serde(default)]
    feature_gates: Option<BTreeMap<String, bool>>,
    #[serde(default)]
    packing: Option<String>,
    #[serde(default)]
    karpenter_version: Option<KarpenterVersion>,
    #[serde(default)]
    scheduler_config: Option<crate::engine::api::scheduler_config::SchedulerConfig>,
}

#[derive(Deserialize)]
#[serde(rename = "node", rename_all = "camelCase")]
struct RawNode {
    #[serde(default)]
    name: Option<String>,
    instance_type: String,
    zone: String,
    #[serde(default)]
    capacity_type: Option<String>,
    #[serde(default)]
    node_pool: Option<String>,
    #[serde(default)]
    age: Option<GoDuration>,
    #[serde(default)]
    initialized: Option<bool>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    taints: Option<Vec<Taint>>,
}

#[derive(Deserialize)]
#[serde(rename = "event", rename_all = "camelCase")]
struct RawEvent {
    at: GoDuration,
    #[serde(default)]
    apply: Option<Vec<serde_yaml::Value>>,
    #[serde(default)]
    scale: Option<RawScale>,
    #[serde(default)]
    delete: Option<Vec<RawRef>>,
    #[serde(default)]
    patch: Option<serde_yaml::Mapping>,
    #[serde(default)]
    interrupt: Option<RawInterrupt>,
    #[serde(default)]
    condition: Option<RawCondition>,
    #[serde(default)]
    capacity: Option<RawCapacity>,
    #[serde(default)]
    approve: Option<Selection>,
    #[serde(default)]
    reject: Option<Selection>,
}

#[derive(Deserialize)]
#[serde(rename = "scale")]
struct RawScale {
    kind: String,
    #[serde(default)]
    namespace: Option<String>,
    name: String,
    replicas: i64,
}

#[derive(Deserialize)]
#[serde(rename = "object reference")]
struct RawRef {
    kind: ObjectKind,
    #[serde(default)]
    namespace: Option<String>,
    name: String,
}

#[derive(Deserialize)]
#[serde(rename = "interrupt")]
struct RawInterrupt {
    node: String,
    kind: InterruptionKind,
}

#[derive(Deserialize)]
#[serde(rename = "condition")]
struct RawCondition {
    node: String,
    #[serde(rename = "type")]
    type_: String,
    status: String,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename = "capacity", rename_all = "camelCase")]
struct RawCapacity {
    instance_type: String,
    zone: String,
    capacity_type: String,
    available: bool,
}

/// A Go-style duration string (`90s`, `1h30m`); a bare `0` is allowed as in Go.
#[derive(Debug, Clone, Copy)]
struct GoDuration(Duration);

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = GoDuration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as 90s, 5m or 1h30m")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<GoDuration, E> {
                parse_go_duration(s).map(GoDuration).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<GoDuration, E> {
                if n == 0 {
                    return Ok(GoDuration(Duration::ZERO));
                }
                Err(E::custom(format!("duration {n} has no unit: write e.g. {n}s or {n}m")))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<GoDuration, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::custom(format!("invalid duration {n}: negative"))),
                }
            }
            fn visit_f64<E: de::Error>(self, x: f64) -> Result<GoDuration, E> {
                Err(E::custom(format!("duration {x} has no unit: write e.g. {x}s")))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Selection {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Selection;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`all` or a list of decision ids")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Selection, E> {
                if s == "all" {
                    Ok(Selection::All)
                } else {
                    Err(E::custom(format!("expected `all` or a list of decision ids, got {s:?}")))
                }
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Selection, A::Error> {
                let mut ids = Vec::new();
                while let Some(id) = seq.next_element::<String>()? {
                    ids.push(id);
                }
                Ok(Selection::Ids(ids))
            }
        }
        d.deserialize_any(V)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Parsing

/// Strict serde deserialisation that reports the first problem as (path, message): an unknown field (serde skipped
/// it) or a serde error (wrong type, missing field, bad enum value, bad duration, ...).
fn deserialize_tracked<'de, D, T>(de: D) -> Result<T, (FieldPath, String)>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let mut unknown: Vec<FieldPath> = Vec::new();
    let mut on_ignored = |p: serde_ignored::Path<'_>| unknown.push(ignored_path(&p));
    let result: Result<T, _> = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(de, &mut on_ignored));
    // The callback runs as keys are met and an error stops the walk, so a recorded unknown key comes first.
    if let Some(path) = unknown.into_iter().next() {
        let name = last_name(&path);
        return Err((path, format!("unknown field {name:?}")));
    }
    match result {
        Ok(v) => Ok(v),
        Err(e) => {
            let mut path = tracked_path(e.path());
            let mut message = strip_location(&e.inner().to_string());
            // serde names the offending field only in the message; put it in the path so it's located exactly.
            if let Some(field) = backticked(&message, "unknown field `") {
                // serde_path_to_error may already have recorded the key it was reading.
                if last_name(&path) != field {
                    path = path.field(&field);
                }
                message = format!("unknown field {field:?}");
            } else if let Some(field) = backticked(&message, "missing field `") {
                path = path.field(&field);
                message = "required field is missing".to_string();
            }
            Err((path, message))
        }
    }
}

fn backticked(message: &str, prefix: &str) -> Option<String> {
    let rest = message.strip_prefix(prefix)?;
    rest.split('`').next().map(str::to_string)
}

fn last_name(path: &FieldPath) -> String {
    path.0.last().map_or(String::new(), |s| match s {
        PathSegment::Field(k) | PathSegment::Key(k) => k.clone(),
        PathSegment::Index(i) => i.to_string(),
    })
}

/// serde_yaml writes `path: message at line L column C`; the path and position are reported separately (and
/// located by our own path), so only the message is kept.
fn strip_location(message: &str) -> String {
    let mut m = match message.rfind(" at line ") {
        Some(i) => &message[..i],
        None => message,
    };
    // Its path has no spaces; serde's own messages always have one before their first ": ".
    if let Some((prefix, rest)) = m.split_once(": ")
        && !prefix.contains(char::is_whitespace)
    {
        m = rest;
    }
    m.to_string()
}

fn tracked_path(p: &serde_path_to_error::Path) -> FieldPath {
    let mut out = FieldPath::root();
    for seg in p.iter() {
        match seg {
            serde_path_to_error::Segment::Seq { index } => out = out.index(*index),
            serde_path_to_error::Segment::Map { key } => out = out.field(key),
            serde_path_to_error::Segment::Enum { .. } | serde_path_to_error::Segment::Unknown => {}
        }
    }
    out
}

struct Ctx<'a> {
    file: &'a str,
    index: YamlIndex,
    /// The version in force (`simulate --karpenter-version`, else `settings.karpenterVersion`, else the newest):
    /// objects are checked against its API.
    version: KarpenterVersion,
}

impl Ctx<'_> {
    fn err(&self, path: &FieldPath, message: impl Into<String>) -> ScenarioError {
        let pos = self.index.locate_nearest(path);
        ScenarioError {
            file: self.file.to_string(),
            line: pos.line,
            column: pos.column,
            path: path.to_string(),
            message: message.into(),
        }
    }

    fn reference(&self, path: &FieldPath, value: &str, zone: bool) -> Reference {
        Reference { path: path.to_string(), pos: self.index.locate_nearest(path), value: value.to_string(), zone }
    }
}

/// Parses and checks a scenario; `file` only labels errors. Instance type and zone names need the catalog: call
/// [`Scenario::check_references`] once it is built.
pub fn parse_scenario(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
    parse_scenario_as(text, file, None)
}

/// [`parse_scenario`], deciding as Karpenter `version` over the scenario's `settings.karpenterVersion` when one is
/// given: its objects are checked against that version's API too.
pub fn parse_scenario_as(text: &str, file: &str, version: Option<KarpenterVersion>) -> Result<Scenario, ScenarioError> {
    let index = YamlIndex::parse(text).map_err(|e| ScenarioError {
        file: file.to_string(),
        line: e.line,
        column: e.column,
        path: String::new(),
        message: format!("YAML syntax error: {}", e.message),
    })?;
    let cx = Ctx { file, index, version: version.unwrap_or(KarpenterVersion::NEWEST) };
    if text.trim().is_empty() {
        return Err(cx.err(&FieldPath::root(), "empty scenario: `name` and `until` are required"));
    }
    // One document only: serde_yaml rejects a stream of several rather than silently ignoring the rest.
    let raw: RawScenario =
        deserialize_tracked(serde_yaml::Deserializer::from_str(text)).map_err(|(p, m)| cx.err(&p, m))?;
    let chosen = raw.settings.as_ref().and_then(|s| s.karpenter_version);
    let cx = Ctx { version: version.or(chosen).unwrap_or(KarpenterVersion::NEWEST), ..cx };
    build(&cx, raw)
}

fn field(name: &str) -> FieldPath {
    FieldPath::root().field(name)
}

fn build(cx: &Ctx<'_>, raw: RawScenario) -> Result<Scenario, ScenarioError> {
    if raw.name.trim().is_empty() {
        return Err(cx.err(&field("name"), "must not be empty"));
    }
    if raw.until.0.is_zero() {
        return Err(cx.err(&field("until"), "must be longer than 0s"));
    }
    let start_text = raw.start.as_deref().unwrap_or(DEFAULT_START);
    let start = parse_start(start_text).map_err(|m| cx.err(&field("start"), m))?;

    let raw_catalog = raw.catalog.unwrap_or(RawCatalog {
        source: None,
        zones: None,
        instance_types: None,
        capacity_reservations: None,
    });
    let source = raw_catalog.source.unwrap_or_default();
    let region = raw.region.unwrap_or_else(|| DEFAULT_REGION.to_string());
    if region.trim().is_empty() {
        return Err(cx.err(&field("region"), "must not be empty"));
    }
    let catalog = build_catalog(cx, raw_catalog, source, &region)?;
    let mut refs = Vec::new();
    if let Some(zones) = &catalog.zones {
        for (i, z) in zones.iter().enumerate() {
            refs.push(cx.reference(&field("catalog").field("zones").index(i), z, true));
        }
    }

    let mut settings = build_settings(cx, raw.settings)?;
    // The simulated cloud plays AWS's provider for the aws catalog and KWOK's for the others.
    settings.repair_policies = match catalog.source {
        CatalogSource::Aws => crate::controller::cloud::aws_repair_policies(),
        CatalogSource::Kwok | CatalogSource::Inline => crate::controller::cloud::kwok_repair_policies(),
    };

    let mut objects = ClusterObjects::default();
    let mut bound_pods: Vec<(FieldPath, String)> = Vec::new();
    for (i, value) in raw.objects.unwrap_or_default().into_iter().enumerate() {
        let path = field("objects").index(i);
        let node_name = add_object(cx, &mut objects, value, &path)?;
        if let Some(n) = node_name {
            bound_pods.push((path.field("spec").field("nodeName"), n));
        }
    }
    check_duplicates(cx, &objects)?;

    let nodes = build_nodes(cx, raw.nodes.unwrap_or_default(), &objects, &mut refs)?;
    let node_names: BTreeSet<&str> = nodes.iter().filter_map(|n| n.name.as_deref()).collect();
    for (path, name) in &bound_pods {
        if !node_names.contains(name.as_str()) {
            return Err(cx.err(path, format!("no node named {name:?} in `nodes`")));
        }
    }

    let mut events = Vec::new();
    for (i, ev) in raw.events.unwrap_or_default().into_iter().enumerate() {
        events.push(build_event(cx, ev, i, raw.until.0, &mut refs)?);
    }
    check_scale_targets(cx, &objects, &events)?;

    Ok(Scenario {
        name: raw.name,
        seed: raw.seed,
        region,
        until: raw.until.0,
        start,
        catalog,
        settings,
        objects,
        nodes,
        events,
        file: cx.file.to_string(),
        refs,
    })
}

fn parse_start(s: &str) -> Result<DateTime<Utc>, String> {
    let t = DateTime::parse_from_rfc3339(s)
        .map_err(|e| format!("expected an RFC 3339 time in UTC like {DEFAULT_START}, got {s:?}: {e}"))?;
    if t.offset().local_minus_utc() != 0 {
        return Err(format!("must be in UTC (end with Z), got {s:?}"));
    }
    Ok(t.with_timezone(&Utc))
}

fn build_catalog(
    cx: &Ctx<'_>,
    raw: RawCatalog,
    source: CatalogSource,
    region: &str,
) -> Result<CatalogSpec, ScenarioError> {
    let cat = field("catalog");
    if source == CatalogSource::Aws {
        let regions = aws_regions().map_err(|e| cx.err(&field("region"), e.to_string()))?;
        if !regions.iter().any(|r| r == region) {
            return Err(cx.err(&field("region"), format!("unknown AWS region {region:?}")));
        }
    }
    if let Some(zones) = &raw.zones {
        if zones.is_empty() {
            return Err(cx.err(&cat.field("zones"), "must list at least one zone (or be left out)"));
        }
        let mut seen = BTreeSet::new();
        for (i, z) in zones.iter().enumerate() {
            if !seen.insert(z.as_str()) {
                return Err(cx.err(&cat.field("zones").index(i), format!("duplicate zone {z:?}")));
            }
        }
        // AWS zones are known without building the catalog; other sources are checked by check_references.
        if source == CatalogSource::Aws {
            let known = aws_zones(region).map_err(|e| cx.err(&field("region"), e.to_string()))?;
            if let Some((i, z)) = zones.iter().enumerate().find(|(_, z)| !known.contains(z)) {
                return Err(cx.err(
                    &cat.field("zones").index(i),
                    format!("{region} has no zone {z:?} (it has {})", known.join(", ")),
                ));
            }
        }
    }
    let types = raw.instance_types.unwrap_or_default();
    if source == CatalogSource::Inline && types.is_empty() {
        let at = if cx.index.locate(&cat.field("instanceTypes")).is_some() { cat.field("instanceTypes") } else { cat };
        return Err(cx.err(&at, "source: inline needs at least one entry in catalog.instanceTypes"));
    }
    inline_instance_types(&types, Some(region)).map_err(|e| {
        let path = FieldPath::parse(&format!("catalog.{}", e.path));
        cx.err(&path, e.message)
    })?;
    let reservations = raw.capacity_reservations.unwrap_or_default();
    let mut ids = BTreeSet::new();
    for (i, r) in reservations.iter().enumerate() {
        let at = |f: &str| cat.field("capacityReservations").index(i).field(f);
        let valid =
            r.id.strip_prefix("cr-")
                .is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()));
        if !valid {
            return Err(cx.err(&at("id"), format!("must match ^cr-[0-9a-z]+$, got {:?}", r.id)));
        }
        if !ids.insert(r.id.as_str()) {
            return Err(cx.err(&at("id"), format!("duplicate capacity reservation {}", r.id)));
        }
        if r.count < 0 {
            return Err(cx.err(&at("count"), format!("must not be negative, got {}", r.count)));
        }
        if let Some(k) = &r.kind
            && k != "default"
            && k != "capacity-block"
        {
            return Err(cx.err(&at("type"), format!("must be default or capacity-block, got {k:?}")));
        }
        if let Some(d) = &r.ends_at
            && crate::engine::lifecycle::duration_ms(d).is_none()
        {
            return Err(cx.err(&at("endsAt"), format!("must be a duration such as 3h, got {d:?}")));
        }
    }
    Ok(CatalogSpec { source, zones: raw.zones, instance_types: types, capacity_reservations: reservations })
}

fn build_settings(cx: &Ctx<'_>, raw: Option<RawSettings>) -> Result<Settings, ScenarioError> {
    let mut d = Settings::default();
    d.controller.karpenter_version = cx.version;
    let Some(r) = raw else { return Ok(d) };
    let mut gates = d.controller.gates;
    if let Some(on) = r.spot_to_spot_consolidation {
        gates.spot_to_spot_consolidation = on;
    }
    for (name, on) in r.feature_gates.iter().flatten() {
        gates
            .set(name, *on)
            .map_err(|e| cx.err(&field("settings").field("featureGates").field(name), e.to_string()))?;
    }
    let packing = match &r.packing {
        None => d.controller.packing,
        Some(text) => text.parse::<Packing>().map_err(|e| cx.err(&field("settings").field("packing"), e))?,
    };
    let or = |v: Option<GoDuration>, default: Millis| v.map_or(default, |g| millis(g.0));
    let mode = match r.disruption {
        None => d.controller.mode,
        Some(DisruptionMode::Auto) => Mode::Auto,
        Some(DisruptionMode::Approve) => Mode::Approve,
        Some(DisruptionMode::DryRun) => Mode::DryRun,
    };
    let scheduler_config = r.scheduler_config.unwrap_or_default();
    let at = field("settings").field("schedulerConfig");
    if let Some(e) =
        crate::engine::api::scheduler_config::validate_scheduler_config(&scheduler_config).into_iter().next()
    {
        let path = FieldPath(at.0.iter().cloned().chain(e.path.0).collect());
        return Err(cx.err(&path, e.message));
    }
    if !scheduler_config.is_empty() && !cx.version.has_default_spread() {
        return Err(cx.err(
            &at,
            format!(
                "default topology spread (--scheduler-config) is new in Karpenter 1.15; this scenario decides as {}",
                cx.version.as_str()
            ),
        ));
    }
    Ok(Settings {
        launch_latency: or(r.launch_latency, d.launch_latency),
        registration_latency: or(r.registration_latency, d.registration_latency),
        ready_latency: or(r.ready_latency, d.ready_latency),
        controller: crate::controller::Settings {
            mode,
            gates,
            packing,
            batch_idle: or(r.batch_idle, d.controller.batch_idle),
            batch_max: or(r.batch_max, d.controller.batch_max),
            validation_delay: or(r.validation_delay, d.controller.validation_delay),
            scheduler_config,
            ..d.controller.clone()
        },
        repair_policies: d.repair_policies,
    })
}

/// A duration as the world's milliseconds.
fn millis(d: Duration) -> Millis {
    d.as_millis().min(i64::MAX as u128) as Millis
}

#[derive(Deserialize)]
struct TypeMeta {
    #[serde(default, rename = "apiVersion")]
    api_version: Option<serde_yaml::Value>,
    #[serde(default)]
    kind: Option<serde_yaml::Value>,
}

const OBJECT_KINDS: &str = "karpenter.sh/v1 NodePool, karpenter.k8s.aws/v1 EC2NodeClass, karpenter.sh/v1alpha1 NodeOverlay, \
     autoscaling.x-k8s.io/v1beta1 CapacityBuffer, v1 PodTemplate, v1 Pod, apps/v1 Deployment, \
     apps/v1 DaemonSet, policy/v1 PodDisruptionBudget, v1 PersistentVolumeClaim, v1 PersistentVolume, \
     storage.k8s.io/v1 StorageClass, v1 Namespace, v1 Service";

/// Types one manifest into `out`; returns a bound Pod's `spec.nodeName` so it can be checked against `nodes`.
fn add_object(
    cx: &Ctx<'_>,
    out: &mut ClusterObjects,
    value: serde_yaml::Value,
    path: &FieldPath,
) -> Result<Option<String>, ScenarioError> {
    if !value.is_mapping() {
        return Err(cx.err(path, "expected a Kubernetes manifest (a mapping with apiVersion and kind)"));
    }
    let tm: TypeMeta = serde_yaml::from_value(value.clone()).map_err(|e| cx.err(path, e.to_string()))?;
    let text = |v: &Option<serde_yaml::Value>| v.as_ref().and_then(|v| v.as_str().map(str::to_string));
    let (Some(api), Some(kind)) = (text(&tm.api_version), text(&tm.kind)) else {
        let missing = if text(&tm.api_version).is_none() { "apiVersion" } else { "kind" };
        return Err(cx.err(&path.field(missing), format!("required: a string (one of {OBJECT_KINDS})")));
    };
    fn typed<T: DeserializeOwned>(cx: &Ctx<'_>, v: serde_yaml::Value, path: &FieldPath) -> Result<T, ScenarioError> {
        deserialize_tracked(v).map_err(|(p, m)| {
            let mut full = path.clone();
            full.0.extend(p.0);
            cx.err(&full, m)
        })
    }
    // Kube-derived types don't keep apiVersion/kind, so serde_ignored would call them unknown: take them out.
    let mut body = value;
    let derived = matches!(
        (api.as_str(), kind.as_str()),
        ("karpenter.sh/v1", "NodePool")
            | ("karpenter.k8s.aws/v1", "EC2NodeClass")
            | ("karpenter.sh/v1alpha1", "NodeOverlay")
            | ("autoscaling.x-k8s.io/v1beta1", "CapacityBuffer")
    );
    if derived && let Some(m) = body.as_mapping_mut() {
        m.remove("apiVersion");
        m.remove("kind");
    }
    let mut node_name = None;
    match (api.as_str(), kind.as_str()) {
        ("karpenter.sh/v1", "NodePool") => {
            let pool = typed::<NodePool>(cx, body, path)?;
            // What the version's API server would refuse (the rest of validation is the controller's, as
            // upstream's: a pool that fails it is not Ready).
            let written = |p: &FieldPath| {
                let mut full = path.clone();
                full.0.extend(p.0.iter().cloned());
                cx.index.locate(&full).is_some()
            };
            if let Some(e) = validate_nodepool_written(&pool, cx.version, written).into_iter().next() {
                return Err(cx.err(&FieldPath::parse(&format!("{path}.{}", e.path)), e.message));
            }
            out.nodepools.push(pool);
        }
        ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
            let nc = typed::<EC2NodeClass>(cx, body, path)?;
            // What v1.14's CRD refuses and v1.15's takes: a maxPods expression, and kubelet fields it does not declare.
            if let Some(k) = nc.spec.kubelet.as_ref().filter(|_| cx.version < KarpenterVersion::V1_15) {
                let at = |field: &str| FieldPath::parse(&format!("{path}.spec.kubelet.{field}"));
                if let Some(crate::engine::api::ec2nodeclass::MaxPods::Expression(e)) = &k.max_pods {
                    return Err(cx.err(
                        &at("maxPods"),
                        format!("Invalid value: {e:?}: must be an integer (Karpenter 1.14; 1.15 takes an expression)"),
                    ));
                }
                if let Some(field) = k.other.keys().next() {
                    return Err(cx.err(
                        &at(field),
                        format!(
                            "unknown field {field:?} (Karpenter 1.14's kubelet declares a fixed set; 1.15 takes any)"
                        ),
                    ));
                }
            }
            out.nodeclasses.push(nc);
        }
        ("karpenter.sh/v1alpha1", "NodeOverlay") => {
            let o: crate::engine::api::nodeoverlay::NodeOverlay = typed(cx, body, path)?;
            // The CRD's rules, as the API server would refuse the object.
            if let Some(e) = crate::engine::api::nodeoverlay::validate_nodeoverlay(&o).into_iter().next() {
                return Err(cx.err(&FieldPath::parse(&format!("{path}.{}", e.path)), e.message));
            }
            out.nodeoverlays.push(o);
        }
        ("autoscaling.x-k8s.io/v1beta1", "CapacityBuffer") => {
            let o: crate::engine::api::capacitybuffer::CapacityBuffer = typed(cx, body, path)?;
            if let Some(e) = crate::engine::api::capacitybuffer::validate_capacitybuffer(&o).into_iter().next() {
                return Err(cx.err(&FieldPath::parse(&format!("{path}.{}", e.path)), e.message));
            }
            out.capacitybuffers.push(o);
        }
        ("v1", "PodTemplate") => out.pod_templates.push(typed(cx, body, path)?),
        ("v1", "Pod") => {
            let pod: Pod = typed(cx, body, path)?;
            node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
            // Not shared: the scenario is dropped once its world is built, and the world's pods intern their own.
            out.pods.push(std::sync::Arc::new(crate::engine::stored_pod::StoredPod::unshared(pod)));
        }
        ("apps/v1", "Deployment") => out.deployments.push(typed::<Deployment>(cx, body, path)?),
        ("apps/v1", "DaemonSet") => out.daemonsets.push(typed::<DaemonSet>(cx, body, path)?),
        ("policy/v1", "PodDisruptionBudget") => out.pdbs.push(typed::<PodDisruptionBudget>(cx, body, path)?),
        ("v1", "PersistentVolumeClaim") => out.pvcs.push(typed::<PersistentVolumeClaim>(cx, body, path)?),
        ("v1", "PersistentVolume") => out.pvs.push(typed::<PersistentVolume>(cx, body, path)?),
        ("storage.k8s.io/v1", "StorageClass") => out.storage_classes.push(typed::<StorageClass>(cx, body, path)?),
        ("v1", "Namespace") => out.namespaces.push(typed::<Namespace>(cx, body, path)?),
        ("v1", "Service") => out.services.push(typed::<k8s_openapi::api::core::v1::Service>(cx, body, path)?),
        (api, kind) => {
            return Err(cx.err(
                &path.field("kind"),
                format!(
                    "unsupported object {api} {kind}: expected one of {OBJECT_KINDS} (existing nodes go in `nodes`)"
                ),
            ));
        }
    }
    Ok(node_name)
}

/// Two objects of the same kind and name at t=0 would silently replace each other.
fn check_duplicates(cx: &Ctx<'_>, m: &ClusterObjects) -> Result<(), ScenarioError> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    let mut seen: BTreeSet<(&str, String, String)> = BTreeSet::new();
    let mut check = |kind: &'static str, meta: &ObjectMeta| -> Result<(), ScenarioError> {
        let ns = meta.namespace.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        if name.is_empty() {
            return Err(cx.err(&field("objects"), format!("a {kind} has no metadata.name")));
        }
        if !seen.insert((kind, ns.clone(), name.clone())) {
            return Err(cx.err(&field("objects"), format!("duplicate {kind} {ns}/{name}")));
        }
        Ok(())
    };
    for o in &m.nodepools {
        check("NodePool", &o.metadata)?;
    }
    for o in &m.nodeclasses {
        check("EC2NodeClass", &o.metadata)?;
    }
    for o in &m.pods {
        check("Pod", &o.metadata)?;
    }
    for o in &m.deployments {
        check("Deployment", &o.metadata)?;
    }
    for o in &m.daemonsets {
        check("DaemonSet", &o.metadata)?;
    }
    for o in &m.pdbs {
        check("PodDisruptionBudget", &o.metadata)?;
    }
    for o in &m.pvcs {
        check("PersistentVolumeClaim", &o.metadata)?;
    }
    for o in &m.pvs {
        check("PersistentVolume", &o.metadata)?;
    }
    for o in &m.storage_classes {
        check("StorageClass", &o.metadata)?;
    }
    for o in &m.namespaces {
        check("Namespace", &o.metadata)?;
    }
    for o in &m.capacitybuffers {
        check("CapacityBuffer", &o.metadata)?;
    }
    for o in &m.pod_templates {
        check("PodTemplate", &o.metadata)?;
    }
    for o in &m.services {
        check("Service", &o.metadata)?;
    }
    Ok(())
}

fn capacity_type(cx: &Ctx<'_>, path: &FieldPath, ct: &str) -> Result<(), ScenarioError> {
    if CAPACITY_TYPES.contains(&ct) {
        Ok(())
    } else {
        Err(cx.err(path, format!("must be on-demand, spot or reserved, got {ct:?}")))
    }
}

fn build_nodes(
    cx: &Ctx<'_>,
    raw: Vec<RawNode>,
    objects: &ClusterObjects,
    refs: &mut Vec<Reference>,
) -> Result<Vec<NodeSpec>, ScenarioError> {
    let pools: BTreeSet<&str> = objects.nodepools.iter().filter_map(|p| p.metadata.name.as_deref()).collect();
    let mut names = BTreeSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, n) in raw.into_iter().enumerate() {
        let path = field("nodes").index(i);
        if let Some(name) = &n.name {
            if name.trim().is_empty() {
                return Err(cx.err(&path.field("name"), "must not be empty (or be left out)"));
            }
            if !names.insert(name.clone()) {
                return Err(cx.err(&path.field("name"), format!("duplicate node name {name:?}")));
            }
        }
        let ct = n.capacity_type.unwrap_or_else(|| "on-demand".to_string());
        capacity_type(cx, &path.field("capacityType"), &ct)?;
        if let Some(pool) = &n.node_pool
            && !pools.contains(pool.as_str())
        {
            return Err(cx.err(&path.field("nodePool"), format!("no NodePool {pool:?} in `objects`")));
        }
        if n.annotations.as_ref().is_some_and(|a| a.contains_key(labels::ANNOTATION_DO_NOT_REPAIR))
            && let Some(why) = do_not_repair_ignored(cx.version)
        {
            return Err(cx.err(&path.field("annotations").key(labels::ANNOTATION_DO_NOT_REPAIR), why));
        }
        refs.push(cx.reference(&path.field("instanceType"), &n.instance_type, false));
        refs.push(cx.reference(&path.field("zone"), &n.zone, true));
        out.push(NodeSpec {
            name: n.name,
            instance_type: n.instance_type,
            zone: n.zone,
            capacity_type: ct,
            node_pool: n.node_pool,
            age: n.age.map_or(Duration::ZERO, |g| g.0),
            initialized: n.initialized.unwrap_or(true),
            labels: n.labels.unwrap_or_default(),
            annotations: n.annotations.unwrap_or_default(),
            taints: n.taints.unwrap_or_default(),
        });
    }
    Ok(out)
}

fn object_ref(
    cx: &Ctx<'_>,
    path: &FieldPath,
    kind: ObjectKind,
    namespace: Option<String>,
    name: String,
) -> Result<ObjectRef, ScenarioError> {
    if name.trim().is_empty() {
        return Err(cx.err(&path.field("name"), "must not be empty"));
    }
    let namespace = match (kind.is_namespaced(), namespace) {
        (true, ns) => Some(ns.unwrap_or_else(|| "default".to_string())),
        (false, None) => None,
        (false, Some(_)) => {
            return Err(cx.err(&path.field("namespace"), format!("{kind:?} objects are cluster-scoped")));
        }
    };
    Ok(ObjectRef { kind, namespace, name })
}

const ACTIONS: &str = "apply, scale, delete, patch, interrupt, condition, capacity, approve, reject";

fn build_event(
    cx: &Ctx<'_>,
    ev: RawEvent,
    i: usize,
    until: Duration,
    refs: &mut Vec<Reference>,
) -> Result<Event, ScenarioError> {
    let path = field("events").index(i);
    if ev.at.0 > until {
        return Err(cx.err(&path.field("at"), "is after `until`: the event would never happen"));
    }
    let given: Vec<&str> = [
        ("apply", ev.apply.is_some()),
        ("scale", ev.scale.is_some()),
        ("delete", ev.delete.is_some()),
        ("patch", ev.patch.is_some()),
        ("interrupt", ev.interrupt.is_some()),
        ("condition", ev.condition.is_some()),
        ("capacity", ev.capacity.is_some()),
        ("approve", ev.approve.is_some()),
        ("reject", ev.reject.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, set)| set.then_some(k))
    .collect();
    match given.as_slice() {
        [] => return Err(cx.err(&path, format!("an event needs exactly one action: {ACTIONS}"))),
        [_] => {}
        [_, second, ..] => {
            return Err(
                cx.err(&path.field(second), format!("an event has exactly one action, found {}", given.join(" and ")))
            );
        }
    }
    let action = if let Some(list) = ev.apply {
        let mut m = ClusterObjects::default();
        let at = path.field("apply");
        if list.is_empty() {
            return Err(cx.err(&at, "must list at least one manifest"));
        }
        for (j, v) in list.into_iter().enumerate() {
            add_object(cx, &mut m, v, &at.index(j))?;
        }
        Action::Apply(Box::new(m))
    } else if let Some(s) = ev.scale {
        let at = path.field("scale");
        if s.kind != "Deployment" && s.kind != "NodePool" {
            return Err(cx.err(&at.field("kind"), format!("Deployment or NodePool can be scaled, got {:?}", s.kind)));
        }
        if s.replicas < 0 {
            return Err(cx.err(&at.field("replicas"), format!("must not be negative, got {}", s.replicas)));
        }
        if s.kind == "NodePool" {
            if s.namespace.is_some() {
                return Err(cx.err(&at.field("namespace"), "a NodePool is cluster-scoped: no namespace"));
            }
            let r = object_ref(cx, &at, ObjectKind::NodePool, None, s.name)?;
            Action::ScaleNodePool { name: r.name, replicas: s.replicas }
        } else {
            let replicas = i32::try_from(s.replicas)
                .map_err(|_| cx.err(&at.field("replicas"), format!("too large for a Deployment: {}", s.replicas)))?;
            let r = object_ref(cx, &at, ObjectKind::Deployment, s.namespace, s.name)?;
            Action::Scale(Scale { namespace: r.namespace.unwrap_or_default(), name: r.name, replicas })
        }
    } else if let Some(list) = ev.delete {
        let at = path.field("delete");
        if list.is_empty() {
            return Err(cx.err(&at, "must list at least one object"));
        }
        let mut out = Vec::with_capacity(list.len());
        for (j, r) in list.into_iter().enumerate() {
            out.push(object_ref(cx, &at.index(j), r.kind, r.namespace, r.name)?);
        }
        Action::Delete(out)
    } else if let Some(m) = ev.patch {
        Action::Patch(build_patch(cx, m, &path.field("patch"))?)
    } else if let Some(it) = ev.interrupt {
        if it.node.trim().is_empty() {
            return Err(cx.err(&path.field("interrupt").field("node"), "must not be empty"));
        }
        Action::Interrupt(Interrupt { node: it.node, kind: it.kind })
    } else if let Some(c) = ev.condition {
        let at = path.field("condition");
        if c.node.trim().is_empty() {
            return Err(cx.err(&at.field("node"), "must not be empty"));
        }
        if c.type_.trim().is_empty() {
            return Err(cx.err(&at.field("type"), "must not be empty (a node condition type such as Ready)"));
        }
        if !matches!(c.status.as_str(), "True" | "False" | "Unknown") {
            return Err(
                cx.err(&at.field("status"), format!("must be \"True\", \"False\" or \"Unknown\", got {:?}", c.status))
            );
        }
        Action::Condition(NodeConditionChange { node: c.node, type_: c.type_, status: c.status, reason: c.reason })
    } else if let Some(c) = ev.capacity {
        let at = path.field("capacity");
        capacity_type(cx, &at.field("capacityType"), &c.capacity_type)?;
        refs.push(cx.reference(&at.field("instanceType"), &c.instance_type, false));
        refs.push(cx.reference(&at.field("zone"), &c.zone, true));
        Action::Capacity(CapacityChange {
            instance_type: c.instance_type,
            zone: c.zone,
            capacity_type: c.capacity_type,
            available: c.available,
        })
    } else if let Some(s) = ev.approve {
        Action::Approve(selection(cx, s, &path.field("approve"))?)
    } else if let Some(s) = ev.reject {
        Action::Reject(selection(cx, s, &path.field("reject"))?)
    } else {
        // Unreachable: exactly one action was counted above; report rather than panic.
        return Err(cx.err(&path, format!("an event needs exactly one action: {ACTIONS}")));
    };
    Ok(Event { at: ev.at.0, action })
}

fn selection(cx: &Ctx<'_>, s: Selection, path: &FieldPath) -> Result<Selection, ScenarioError> {
    if let Selection::Ids(ids) = &s {
        if ids.is_empty() {
            return Err(cx.err(path, "an empty list selects nothing: use `all` or list decision ids"));
        }
        if let Some(j) = ids.iter().position(|id| id.trim().is_empty()) {
            return Err(cx.err(&path.index(j), "decision ids must not be empty"));
        }
    }
    Ok(s)
}

fn build_patch(cx: &Ctx<'_>, mut m: serde_yaml::Mapping, path: &FieldPath) -> Result<Patch, ScenarioError> {
    let mut take = |key: &str| -> Result<Option<String>, ScenarioError> {
        match m.remove(key) {
            None => Ok(None),
            Some(serde_yaml::Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(cx.err(&path.field(key), "expected a string")),
        }
    };
    let kind = take("kind")?.ok_or_else(|| cx.err(&path.field("kind"), "required field is missing"))?;
    let namespace = take("namespace")?;
    let name = take("name")?.ok_or_else(|| cx.err(&path.field("name"), "required field is missing"))?;
    let kind: ObjectKind = serde_yaml::from_value(serde_yaml::Value::String(kind.clone()))
        .map_err(|_| cx.err(&path.field("kind"), format!("unknown kind {kind:?}")))?;
    let target = object_ref(cx, path, kind, namespace, name)?;
    if m.is_empty() {
        return Err(cx.err(path, "nothing to patch: add e.g. metadata or spec next to kind and name"));
    }
    if let Some(k) = m.keys().find(|k| !k.is_string()) {
        return Err(cx.err(path, format!("patch keys must be strings, got {k:?}")));
    }
    let patch = serde_json::to_value(&m).map_err(|e| cx.err(path, format!("not a valid merge patch: {e}")))?;
    Ok(Patch { target, patch })
}

/// A `scale` must name a Deployment the scenario creates (at t=0 or in any `apply`), or it can only be a typo.
fn check_scale_targets(cx: &Ctx<'_>, objects: &ClusterObjects, events: &[Event]) -> Result<(), ScenarioError> {
    let key = |d: &Deployment| {
        (d.metadata.namespace.clone().unwrap_or_else(|| "default".into()), d.metadata.name.clone().unwrap_or_default())
    };
    let mut known: BTreeSet<(String, String)> = objects.deployments.iter().map(key).collect();
    for e in events {
        if let Action::Apply(m) = &e.action {
            known.extend(m.deployments.iter().map(key));
        }
    }
    // A NodePool is scaled through its scale subresource, which maps to spec.replicas: only a static pool has
    // one to set (the CRD refuses turning a dynamic pool static).
    let mut static_pools: BTreeMap<String, bool> =
        objects.nodepools.iter().map(|p| (p.name().to_string(), p.spec.replicas.is_some())).collect();
    for (i, e) in events.iter().enumerate() {
        match &e.action {
            Action::Apply(m) => {
                static_pools.extend(m.nodepools.iter().map(|p| (p.name().to_string(), p.spec.replicas.is_some())));
            }
            Action::Scale(s) if !known.contains(&(s.namespace.clone(), s.name.clone())) => {
                let path = field("events").index(i).field("scale").field("name");
                return Err(
                    cx.err(&path, format!("no Deployment {}/{} in `objects` or any `apply`", s.namespace, s.name))
                );
            }
            Action::ScaleNodePool { name, .. } => {
                let path = field("events").index(i).field("scale").field("name");
                match static_pools.get(name) {
                    None => return Err(cx.err(&path, format!("no NodePool {name} in `objects` or an earlier `apply`"))),
                    Some(false) => {
                        return Err(cx.err(
                            &path,
                            format!(
                                "NodePool {name} is dynamic (no spec.replicas): Cannot transition NodePool between \
                                 static (replicas set) and dynamic (replicas unset) provisioning modes"
                            ),
                        ));
                    }
                    Some(true) => {}
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two lines every test scenario starts with, so the lines under test start at line 3.
    const HEAD: &str = "name: t\nuntil: 1h\n";

    fn ok(body: &str) -> Scenario {
        parse_scenario(&format!("{HEAD}{body}"), "s.yaml").unwrap_or_else(|e| panic!("{e}"))
    }

    /// (line, column, path) of the error, and the message for extra checks.
    fn fails(body: &str) -> ((usize, usize, String), String) {
        match parse_scenario(&format!("{HEAD}{body}"), "s.yaml") {
            Ok(_) => panic!("expected an error for:\n{body}"),
            Err(e) => ((e.line, e.column, e.path.clone()), e.message),
        }
    }

    fn loc(line: usize, column: usize, path: &str) -> (usize, usize, String) {
        (line, column, path.to_string())
    }

    const POOL: &str = "objects:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      template:
        spec:
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: inflate}
    spec:
      selector: {matchLabels: {app: inflate}}
      template:
        metadata: {labels: {app: inflate}}
        spec:
          containers: [{name: c, image: pause}]
";

    #[test]
    fn defaults() {
        let s = ok("");
        assert_eq!(s.name, "t");
        assert_eq!(s.seed, 0);
        assert_eq!(s.region, "us-east-1");
        assert_eq!(s.until, Duration::from_secs(3600));
        assert_eq!(s.start.to_rfc3339(), "2026-01-01T00:00:00+00:00");
        assert_eq!(
            s.catalog,
            CatalogSpec {
                source: CatalogSource::Aws,
                zones: None,
                instance_types: vec![],
                capacity_reservations: vec![]
            }
        );
        let st = s.settings.clone();
        assert_eq!(st.controller.mode, Mode::Auto);
        assert_eq!(st.launch_latency, 5_000);
        assert_eq!(st.registration_latency, 30_000);
        assert_eq!(st.ready_latency, 10_000);
        assert_eq!(st.controller.batch_idle, 1_000);
        assert_eq!(st.controller.batch_max, 10_000);
        assert_eq!(st.controller.validation_delay, 15_000);
        assert_eq!(st, Settings::default());
        assert!(s.objects.nodepools.is_empty() && s.nodes.is_empty() && s.events.is_empty());
        assert_eq!(s.file(), "s.yaml");
    }

    #[test]
    fn explicit_values() {
        let s = ok("seed: 42\nregion: us-west-2\nstart: 2026-01-05T10:00:00Z\n\
             catalog: {source: kwok, zones: [a]}\n\
             settings: {disruption: dry-run, launchLatency: 1m30s, registrationLatency: 0, readyLatency: 1h30m, \
             batchIdle: 500ms, batchMax: 2s, validationDelay: 1s}\n");
        assert_eq!(s.seed, 42);
        assert_eq!(s.region, "us-west-2");
        assert_eq!(s.start.to_rfc3339(), "2026-01-05T10:00:00+00:00");
        assert_eq!(s.catalog.source, CatalogSource::Kwok);
        assert_eq!(s.catalog.zones, Some(vec!["a".to_string()]));
        assert_eq!(s.settings.controller.mode, Mode::DryRun);
        assert_eq!(s.settings.launch_latency, 90_000);
        assert_eq!(s.settings.registration_latency, 0);
        assert_eq!(s.settings.ready_latency, 5_400_000);
        assert_eq!(s.settings.controller.batch_idle, 500);
        assert_eq!(ok("settings: {disruption: approve}\n").settings.controller.mode, Mode::Approve);
    }

    #[test]
    fn node_defaults_and_fields() {
        let s = ok(&format!(
            "{POOL}nodes:\n  - {{instanceType: m5.large, zone: us-east-1a}}\n  - name: n2\n    instanceType: \
             c5.large\n    zone: us-east-1b\n    capacityType: spot\n    nodePool: default\n    age: 1h\n    \
             initialized: false\n    labels: {{a: b}}\n    annotations: {{c: d}}\n    taints: [{{key: k, effect: \
             NoSchedule}}]\n"
        ));
        let n = &s.nodes[0];
        assert_eq!(n.name, None);
        assert_eq!(n.capacity_type, "on-demand");
        assert_eq!(n.node_pool, None);
        assert_eq!(n.age, Duration::ZERO);
        assert!(n.initialized);
        let n = &s.nodes[1];
        assert_eq!(n.name.as_deref(), Some("n2"));
        assert_eq!((n.capacity_type.as_str(), n.node_pool.as_deref()), ("spot", Some("default")));
        assert_eq!(n.age, Duration::from_secs(3600));
        assert!(!n.initialized);
        assert_eq!(n.labels.get("a").map(String::as_str), Some("b"));
        assert_eq!(n.annotations.get("c").map(String::as_str), Some("d"));
        assert_eq!(n.taints[0].key, "k");
    }

    #[test]
    fn every_event_kind() {
        let s = ok(&format!(
            "{POOL}events:
  - at: 30s
    apply:
      - {{apiVersion: v1, kind: Namespace, metadata: {{name: x}}}}
  - at: 1m
    scale: {{kind: Deployment, name: inflate, replicas: 10}}
  - at: 2m
    delete: [{{kind: Pod, namespace: web, name: web-0}}, {{kind: Node, name: n}}]
  - at: 3m
    patch: {{kind: Node, name: node-1, metadata: {{annotations: {{karpenter.sh/do-not-disrupt: \"true\"}}}}}}
  - at: 4m
    interrupt: {{node: node-1, kind: instance-stopping}}
  - at: 5m
    capacity: {{instanceType: m5.large, zone: us-east-1a, capacityType: spot, available: false}}
  - at: 6m
    approve: all
  - at: 7m
    reject: [d-1, d-2]
"
        ));
        let kinds: Vec<String> = s.events.iter().map(|e| format!("{:?}", e.action).chars().take(5).collect()).collect();
        assert_eq!(kinds, ["Apply", "Scale", "Delet", "Patch", "Inter", "Capac", "Appro", "Rejec"]);
        assert_eq!(s.events[0].at, Duration::from_secs(30));
        match &s.events[0].action {
            Action::Apply(m) => assert_eq!(m.namespaces.len(), 1),
            a => panic!("{a:?}"),
        }
        match &s.events[1].action {
            Action::Scale(sc) => {
                assert_eq!((sc.namespace.as_str(), sc.name.as_str(), sc.replicas), ("default", "inflate", 10))
            }
            a => panic!("{a:?}"),
        }
        match &s.events[2].action {
            Action::Delete(refs) => {
                assert_eq!(
                    refs[0],
                    ObjectRef { kind: ObjectKind::Pod, namespace: Some("web".into()), name: "web-0".into() }
                );
                assert_eq!(refs[1], ObjectRef { kind: ObjectKind::Node, namespace: None, name: "n".into() });
            }
            a => panic!("{a:?}"),
        }
        match &s.events[3].action {
            Action::Patch(p) => {
                assert_eq!(p.target.kind, ObjectKind::Node);
                assert_eq!(
                    p.patch,
                    serde_json::json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}})
                );
            }
            a => panic!("{a:?}"),
        }
        match &s.events[4].action {
            Action::Interrupt(i) => assert_eq!(i.kind, InterruptionKind::InstanceStopping),
            a => panic!("{a:?}"),
        }
        match &s.events[5].action {
            Action::Capacity(c) => assert!(!c.available),
            a => panic!("{a:?}"),
        }
        assert!(matches!(&s.events[6].action, Action::Approve(Selection::All)));
        assert!(matches!(&s.events[7].action, Action::Reject(Selection::Ids(ids)) if ids == &["d-1", "d-2"]));
        for (k, want) in [
            ("spot-interruption", InterruptionKind::SpotInterruption),
            ("rebalance-recommendation", InterruptionKind::RebalanceRecommendation),
            ("scheduled-change", InterruptionKind::ScheduledChange),
            ("instance-terminated", InterruptionKind::InstanceTerminated),
            ("capacity-reservation-interrupted", InterruptionKind::CapacityReservationInterruption),
            ("instance-status", InterruptionKind::InstanceStatus),
            ("system-status", InterruptionKind::SystemStatus),
            ("event-status", InterruptionKind::EventStatus),
        ] {
            let s = ok(&format!("events:\n  - at: 1s\n    interrupt: {{node: n, kind: {k}}}\n"));
            assert!(matches!(&s.events[0].action, Action::Interrupt(i) if i.kind == want), "{k}");
        }
    }

    #[test]
    fn display_format() {
        let e = parse_scenario("name: t\nuntil: 1h\nseed: x\n", "dir/s.yaml").unwrap_err();
        assert!(e.to_string().starts_with("dir/s.yaml:3:1: seed: "), "{e}");
        let e = parse_scenario("name: [t\n", "s.yaml").unwrap_err();
        assert!(e.path.is_empty());
        assert!(e.to_string().starts_with("s.yaml:"), "{e}");
        assert!(!e.to_string().contains(": : "), "{e}");
    }

    #[test]
    fn syntax_and_shape_errors() {
        let e = parse_scenario("name: t\nuntil: [1h\n", "s.yaml").unwrap_err();
        assert_eq!((e.line, e.path.as_str()), (3, ""), "{e}");
        assert!(e.message.contains("syntax"), "{e}");
        let e = parse_scenario("", "s.yaml").unwrap_err();
        assert_eq!((e.line, e.column), (1, 1));
        let e = parse_scenario("- a\n", "s.yaml").unwrap_err();
        assert_eq!((e.line, e.column, e.path.as_str()), (1, 1, ""), "{e}");
        let e = parse_scenario("name: t\n", "s.yaml").unwrap_err();
        assert_eq!((e.line, e.column, e.path.as_str()), (1, 1, "until"), "{e}");
        let e = parse_scenario("until: 1h\nname: \"\"\n", "s.yaml").unwrap_err();
        assert_eq!((e.line, e.column, e.path.as_str()), (2, 1, "name"), "{e}");
        let e = parse_scenario("name: t\nuntil: 1h\n---\nname: u\n", "s.yaml").unwrap_err();
        assert!(e.message.contains("more than one document"), "{e}");
    }

    #[test]
    fn unknown_fields_are_located() {
        assert_eq!(fails("bogus: 1\n").0, loc(3, 1, "bogus"));
        assert_eq!(fails("settings:\n  batchIdle: 1s\n  batchMin: 1s\n").0, loc(5, 3, "settings.batchMin"));
        assert_eq!(fails("catalog: {source: aws, extra: 1}\n").0, loc(3, 24, "catalog.extra"));
        assert_eq!(fails("nodes:\n  - instanceType: a\n    zone: b\n    color: red\n").0, loc(6, 5, "nodes[0].color"));
        assert_eq!(fails("events:\n  - at: 1s\n    approve: all\n    why: x\n").0, loc(6, 5, "events[0].why"));
        assert_eq!(
            fails("events:\n  - at: 1s\n    scale: {kind: Deployment, name: a, replicas: 1, size: 2}\n").0,
            loc(5, 53, "events[0].scale.size")
        );
        // Inline types deny unknown fields themselves; the path still ends at the field.
        let (l, m) = fails(
            "catalog:\n  source: inline\n  instanceTypes:\n    - name: a\n      cpu: 1\n      memory: 1Gi\n      \
             colour: blue\n      offerings: [{zone: z, capacityType: spot, price: 1}]\n",
        );
        assert_eq!(l, loc(9, 7, "catalog.instanceTypes[0].colour"));
        assert!(m.contains("unknown field"), "{m}");
        // Inside an embedded manifest.
        assert_eq!(
            fails("objects:\n  - apiVersion: v1\n    kind: Pod\n    metadata: {name: p}\n    spec:\n      containers: []\n      nodeSelectr: {a: b}\n").0,
            loc(9, 7, "objects[0].spec.nodeSelectr")
        );
    }

    #[test]
    fn wrong_types_are_located() {
        let (l, m) = fails("seed: abc\n");
        assert_eq!(l, loc(3, 1, "seed"));
        assert!(m.contains("invalid type"), "{m}");
        assert!(!m.contains("at line"), "location belongs in the prefix only: {m}");
        assert_eq!(fails("nodes: {a: 1}\n").0, loc(3, 1, "nodes"));
        assert_eq!(fails("nodes:\n  - {instanceType: a, zone: b, initialized: maybe}\n").0.2, "nodes[0].initialized");
        assert_eq!(
            fails("objects:\n  - apiVersion: apps/v1\n    kind: Deployment\n    metadata: {name: d}\n    spec:\n      replicas: many\n      selector: {}\n      template: {}\n").0,
            loc(8, 7, "objects[0].spec.replicas")
        );
        let (l, m) = fails("events:\n  - at: 1s\n    scale: {kind: Deployment, name: a}\n");
        assert_eq!(l, loc(5, 5, "events[0].scale.replicas"));
        assert_eq!(m, "required field is missing");
    }

    #[test]
    fn durations() {
        let (l, m) = fails("settings:\n  launchLatency: 5x\n");
        assert_eq!(l, loc(4, 3, "settings.launchLatency"));
        assert!(m.contains("invalid duration"), "{m}");
        let (l, m) = fails("nodes:\n  - {instanceType: a, zone: b, age: 90}\n");
        assert_eq!(l.2, "nodes[0].age");
        assert!(m.contains("no unit"), "{m}");
        let e = parse_scenario("name: t\nuntil: -1h\n", "s.yaml").unwrap_err();
        assert_eq!((e.line, e.column, e.path.as_str()), (2, 1, "until"), "{e}");
        let e = parse_scenario("name: t\nuntil: 0s\n", "s.yaml").unwrap_err();
        assert_eq!((e.line, e.path.as_str()), (2, "until"), "{e}");
        assert_eq!(ok("settings: {batchMax: 1.5s}\n").settings.controller.batch_max, 1500);
    }

    #[test]
    fn start_time() {
        assert_eq!(fails("start: yesterday\n").0, loc(3, 1, "start"));
        let (l, m) = fails("start: 2026-01-05T10:00:00+02:00\n");
        assert_eq!(l, loc(3, 1, "start"));
        assert!(m.contains("UTC"), "{m}");
    }

    #[test]
    fn catalog_errors() {
        let (l, m) = fails("catalog:\n  source: gcp\n");
        assert_eq!(l, loc(4, 3, "catalog.source"));
        assert!(m.contains("aws") && m.contains("kwok") && m.contains("inline"), "{m}");
        assert_eq!(fails("region: mars-1\n").0, loc(3, 1, "region"));
        assert_eq!(fails("catalog:\n  zones: [us-east-1a, us-east-1q]\n").0, loc(4, 23, "catalog.zones[1]"));
        assert_eq!(fails("catalog:\n  zones: []\n").0, loc(4, 3, "catalog.zones"));
        assert_eq!(fails("catalog:\n  source: inline\n").0, loc(3, 1, "catalog"));
        let (l, m) = fails(
            "catalog:\n  source: inline\n  instanceTypes:\n    - name: a\n      cpu: 1\n      memory: 4Gx\n      \
             offerings: [{zone: z, capacityType: spot, price: 1}]\n",
        );
        assert_eq!(l, loc(8, 7, "catalog.instanceTypes[0].memory"));
        assert!(m.contains("4Gx"), "{m}");
        // Region names aren't checked for non-AWS sources (kwok and inline regions are arbitrary).
        assert_eq!(ok("region: fake-region\ncatalog: {source: kwok}\n").region, "fake-region");
    }

    #[test]
    fn settings_errors() {
        let (l, m) = fails("settings:\n  disruption: manual\n");
        assert_eq!(l, loc(4, 3, "settings.disruption"));
        assert!(m.contains("dry-run"), "{m}");
        let (l, m) = fails("settings:\n  featureGates:\n    NodeRepair: true\n    NodeRepiar: true\n");
        assert_eq!(l, loc(6, 5, "settings.featureGates.NodeRepiar"));
        assert!(m.contains("unknown feature gate \"NodeRepiar\"") && m.contains("StaticCapacity"), "{m}");
    }

    #[test]
    fn packing_defaults_to_upstream_and_is_set_by_name() {
        assert_eq!(ok("").settings.controller.packing, Packing::Upstream);
        assert_eq!(ok("settings: {}\n").settings.controller.packing, Packing::Upstream);
        assert_eq!(ok("settings:\n  packing: upstream\n").settings.controller.packing, Packing::Upstream);
        assert_eq!(ok("settings:\n  packing: cost\n").settings.controller.packing, Packing::Cost);
        let s = ok("settings: {disruption: approve, packing: cost}\n").settings;
        assert_eq!((s.controller.mode, s.controller.packing), (Mode::Approve, Packing::Cost));
    }

    #[test]
    fn an_unknown_packing_strategy_names_its_place() {
        let (l, m) = fails("settings:\n  disruption: auto\n  packing: cheapest\n");
        assert_eq!(l, loc(5, 3, "settings.packing"));
        assert!(m.contains("unknown packing strategy \"cheapest\"") && m.contains("upstream or cost"), "{m}");
        let (l, _) = fails("settings: {packing: Cost}\n");
        assert_eq!(l.2, "settings.packing", "names are case-sensitive, as the other settings' values");
        let (l, _) = fails("settings:\n  packing: [cost]\n");
        assert_eq!((l.0, l.2.as_str()), (4, "settings.packing"));
    }

    #[test]
    fn feature_gates_default_as_upstream_and_are_set_by_name() {
        let g = ok("settings: {}\n").settings.controller.gates;
        assert_eq!(g, crate::controller::settings::FeatureGates::default());
        let g = ok(
            "settings:\n  spotToSpotConsolidation: true\n  featureGates: {NodeRepair: true, ReservedCapacity: false}\n",
        )
        .settings
        .controller
        .gates;
        assert!(g.node_repair && !g.reserved_capacity && g.spot_to_spot_consolidation && !g.static_capacity);
    }

    #[test]
    fn event_errors() {
        let (l, m) = fails("events:\n  - at: 1s\n");
        assert_eq!(l, loc(4, 5, "events[0]"));
        assert!(m.contains("exactly one action"), "{m}");
        let (l, m) = fails("events:\n  - at: 1s\n    approve: all\n    reject: all\n");
        assert_eq!(l, loc(6, 5, "events[0].reject"));
        assert!(m.contains("approve and reject"), "{m}");
        assert_eq!(fails("events:\n  - approve: all\n").0, loc(4, 5, "events[0].at"));
        assert_eq!(fails("events:\n  - at: 2h\n    approve: all\n").0, loc(4, 5, "events[0].at"));
        let (l, m) = fails("events:\n  - at: 1s\n    interrupt: {node: n, kind: meteor}\n");
        assert_eq!(l, loc(5, 26, "events[0].interrupt.kind"));
        assert!(m.contains("spot-interruption"), "{m}");
        assert_eq!(
            fails("events:\n  - at: 1s\n    capacity: {instanceType: a, zone: b, capacityType: spot}\n").0,
            loc(5, 5, "events[0].capacity.available")
        );
        assert_eq!(
            fails(
                "events:\n  - at: 1s\n    capacity: {instanceType: a, zone: b, capacityType: cheap, available: true}\n"
            )
            .0,
            loc(5, 42, "events[0].capacity.capacityType")
        );
        let (l, m) = fails("events:\n  - at: 1s\n    approve: some\n");
        assert_eq!(l, loc(5, 5, "events[0].approve"));
        assert!(m.contains("all"), "{m}");
        assert_eq!(fails("events:\n  - at: 1s\n    reject: []\n").0, loc(5, 5, "events[0].reject"));
        assert_eq!(fails("events:\n  - at: 1s\n    reject: [d-1, \"\"]\n").0, loc(5, 19, "events[0].reject[1]"));
        assert_eq!(fails("events:\n  - at: 1s\n    apply: []\n").0, loc(5, 5, "events[0].apply"));
        assert_eq!(
            fails("events:\n  - at: 1s\n    apply:\n      - {apiVersion: v1, kind: Secret, metadata: {name: s}}\n").0,
            loc(6, 26, "events[0].apply[0].kind")
        );
    }

    #[test]
    fn scale_delete_patch_errors() {
        let ev = |action: &str| format!("{POOL}events:\n  - at: 1s\n    {action}\n");
        // POOL is 17 lines, so the action is on line 3 + 17 + 2 = 22.
        let (l, m) = fails(&ev("scale: {kind: StatefulSet, name: inflate, replicas: 1}"));
        assert_eq!(l, loc(22, 13, "events[0].scale.kind"));
        assert!(m.contains("Deployment"), "{m}");
        assert_eq!(
            fails(&ev("scale: {kind: Deployment, name: inflate, replicas: -1}")).0,
            loc(22, 46, "events[0].scale.replicas")
        );
        assert_eq!(
            fails(&ev("scale: {kind: Deployment, name: nope, replicas: 1}")).0,
            loc(22, 31, "events[0].scale.name")
        );
        assert_eq!(
            fails(&ev("scale: {kind: Deployment, namespace: other, name: inflate, replicas: 1}")).0.2,
            "events[0].scale.name"
        );
        let (l, m) = fails(&ev("delete: [{kind: Gadget, name: x}]"));
        assert_eq!(l, loc(22, 15, "events[0].delete[0].kind"));
        assert!(m.contains("NodePool"), "{m}");
        assert_eq!(
            fails(&ev("delete: [{kind: Node, namespace: a, name: x}]")).0,
            loc(22, 27, "events[0].delete[0].namespace")
        );
        assert_eq!(fails(&ev("delete: [{kind: Pod, name: \"\"}]")).0, loc(22, 26, "events[0].delete[0].name"));
        assert_eq!(fails(&ev("patch: {kind: Node, metadata: {}}")).0, loc(22, 5, "events[0].patch.name"));
        assert_eq!(fails(&ev("patch: {kind: Widget, name: a, spec: {}}")).0, loc(22, 13, "events[0].patch.kind"));
        assert_eq!(fails(&ev("patch: {kind: Node, name: a}")).0, loc(22, 5, "events[0].patch"));
        assert_eq!(fails(&ev("patch: {kind: Node, name: 5, spec: {}}")).0, loc(22, 25, "events[0].patch.name"));
    }

    #[test]
    fn object_errors() {
        let (l, m) = fails("objects:\n  - apiVersion: v1\n    kind: Node\n    metadata: {name: n}\n");
        assert_eq!(l, loc(5, 5, "objects[0].kind"));
        assert!(m.contains("nodes"), "{m}");
        assert_eq!(fails("objects:\n  - kind: Pod\n    metadata: {name: n}\n").0, loc(4, 5, "objects[0].apiVersion"));
        assert_eq!(fails("objects:\n  - 5\n").0, loc(4, 5, "objects[0]"));
        let (l, m) = fails(&format!(
            "{POOL}  - {{apiVersion: v1, kind: Namespace, metadata: {{name: inflate}}}}\n  - {{apiVersion: karpenter.sh/v1, kind: NodePool, metadata: {{name: default}}, spec: {{template: {{spec: {{nodeClassRef: {{group: g, kind: k, name: n}}}}}}}}}}\n"
        ));
        assert_eq!(l, loc(3, 1, "objects"));
        assert!(m.contains("duplicate NodePool"), "{m}");
        let (l, m) = fails(
            "objects:\n  - apiVersion: v1\n    kind: Pod\n    metadata: {name: p}\n    spec:\n      nodeName: ghost\n      containers: []\n",
        );
        assert_eq!(l, loc(8, 7, "objects[0].spec.nodeName"));
        assert!(m.contains("ghost"), "{m}");
        let s = ok(
            "objects:\n  - apiVersion: v1\n    kind: Pod\n    metadata: {name: p}\n    spec:\n      nodeName: n1\n      containers: []\nnodes:\n  - {name: n1, instanceType: a, zone: b}\n",
        );
        assert_eq!(s.objects.pods.len(), 1);
    }

    #[test]
    fn node_errors() {
        let (l, m) = fails("nodes:\n  - {instanceType: a, zone: b, nodePool: missing}\n");
        assert_eq!(l, loc(4, 32, "nodes[0].nodePool"));
        assert!(m.contains("missing"), "{m}");
        assert_eq!(
            fails("nodes:\n  - {name: a, instanceType: a, zone: b}\n  - {name: a, instanceType: a, zone: b}\n").0,
            loc(5, 6, "nodes[1].name")
        );
        assert_eq!(
            fails("nodes:\n  - {instanceType: a, zone: b, capacityType: cheap}\n").0,
            loc(4, 32, "nodes[0].capacityType")
        );
        assert_eq!(fails("nodes:\n  - {zone: b}\n").0, loc(4, 5, "nodes[0].instanceType"));
    }

    #[test]
    fn references_are_checked_against_the_catalog() {
        let s = ok(
            "catalog: {source: kwok, zones: [z1]}\nnodes:\n  - instanceType: big\n    zone: z1\nevents:\n  - at: 1s\n    capacity: {instanceType: big, zone: z2, capacityType: spot, available: false}\n",
        );
        let zones = vec!["z1".to_string(), "z2".to_string()];
        assert_eq!(s.check_references(&|n| n == "big", &zones), Ok(()));
        let e = s.check_references(&|_| false, &zones).unwrap_err();
        assert_eq!((e.line, e.column, e.path.as_str()), (5, 5, "nodes[0].instanceType"), "{e}");
        assert!(e.to_string().starts_with("s.yaml:5:5: nodes[0].instanceType: unknown instance type \"big\""), "{e}");
        let e = s.check_references(&|_| true, &zones[..1]).unwrap_err();
        assert_eq!((e.line, e.column, e.path.as_str()), (9, 35, "events[0].capacity.zone"), "{e}");
        let e = s.check_references(&|_| true, &["z2".to_string()]).unwrap_err();
        assert_eq!(e.path, "catalog.zones[0]");
    }

    mod never_panics {
        use super::super::parse_scenario;
        use proptest::prelude::*;

        const SEED: &str = include_str!("../../scenarios/kwok-inline.yaml");

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

            #[test]
            fn random_text(text in "\\PC{0,200}") {
                let _ = parse_scenario(&text, "r.yaml");
            }

            #[test]
            fn yamlish_text(text in "[a-zA-Z:{}\\[\\] ,\\-\n'\"0-9.&*!|>#]{0,300}") {
                let _ = parse_scenario(&text, "r.yaml");
            }

            #[test]
            fn mutated_scenario(cuts in proptest::collection::vec((0usize..8000, 0usize..40, "[a-z0-9:\\- \n{}\\[\\]]{0,6}"), 1..6)) {
                let mut text = SEED.to_string();
                for (at, len, insert) in cuts {
                    let mut start = at.min(text.len());
                    while !text.is_char_boundary(start) { start -= 1; }
                    let mut end = (start + len).min(text.len());
                    while !text.is_char_boundary(end) { end -= 1; }
                    text.replace_range(start..end, &insert);
                }
                if let Ok(s) = parse_scenario(&text, "m.yaml") {
                    let _ = s.check_references(&|_| false, &[]);
                }
            }
        }
    }
}
