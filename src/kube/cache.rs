//! The watch cache: what the watchers have seen of each kind, typed, and whether each kind has finished its initial
//! list (engine.md §7 "Synced": nothing is decided before every kind is).
//!
//! Reading is lenient. Objects arrive as `RawObject`s and are parsed one by one, so one object the engine can't
//! read (a field from a newer CRD version, a malformed quantity in someone else's pod) is reported once and skipped
//! instead of failing the whole list. An object whose new version doesn't parse keeps its last good version; a pod
//! that never parsed makes its node look occupied by something unknown, so the node is never disrupted on the
//! strength of a partial picture.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::raw::RawObject;
use kube::core::ApiResource;
use kube::runtime::watcher::Event;
use serde::de::DeserializeOwned;

use super::kinds::Kind;
use crate::engine::labels;
use crate::engine::manifests::ClusterObjects;
use crate::engine::store::Store;

/// One kind's objects by `namespace/name` (or `name`): the client-side [`Store`] the simulated cluster's mirror keeps
/// too. Objects are shared (`Arc`), so a read of the cache for an engine pass copies pointers, not pods.
pub type Typed<T> = Store<String, T>;

fn cloned<T: Clone>(t: &Typed<T>) -> Vec<T> {
    t.values().iter().map(|v| T::clone(v)).collect()
}

/// How a kind's watch is doing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum WatchState {
    #[default]
    Listing,
    Synced,
    /// The API server doesn't serve it (404): a CRD not installed.
    Absent,
    /// Listing or watching failed; the watcher retries with backoff.
    Failing(String),
}

/// An object that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub kind: Kind,
    pub key: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} skipped: {}", self.kind.resource_name(), self.key, self.message)
    }
}

/// A kind whose initial list has not completed: how many objects it has brought so far, and why its last attempt
/// failed, if it did (it is retried with backoff).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub kind: Kind,
    pub count: usize,
    pub failing: Option<String>,
}

#[derive(Debug, Default)]
pub struct Cache {
    pub pods: Typed<crate::engine::stored_pod::StoredPod>,
    pub nodes: Typed<k8s_openapi::api::core::v1::Node>,
    pub nodepools: Typed<crate::engine::api::NodePool>,
    pub nodeclaims: Typed<crate::engine::api::NodeClaim>,
    pub nodeclasses: Typed<crate::engine::api::EC2NodeClass>,
    pub nodeoverlays: Typed<crate::engine::api::nodeoverlay::NodeOverlay>,
    pub daemonsets: Typed<k8s_openapi::api::apps::v1::DaemonSet>,
    pub pdbs: Typed<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
    pub pvcs: Typed<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    pub pvs: Typed<k8s_openapi::api::core::v1::PersistentVolume>,
    pub storage_classes: Typed<k8s_openapi::api::storage::v1::StorageClass>,
    pub csinodes: Typed<k8s_openapi::api::storage::v1::CSINode>,
    pub namespaces: Typed<k8s_openapi::api::core::v1::Namespace>,
    pub capacitybuffers: Typed<crate::engine::api::capacitybuffer::CapacityBuffer>,
    pub pod_templates: Typed<k8s_openapi::api::core::v1::PodTemplate>,
    pub deployments: Typed<k8s_openapi::api::apps::v1::Deployment>,
    pub statefulsets: Typed<k8s_openapi::api::apps::v1::StatefulSet>,
    pub services: Typed<k8s_openapi::api::core::v1::Service>,
    pub replicasets: Typed<k8s_openapi::api::apps::v1::ReplicaSet>,
    pub replication_controllers: Typed<k8s_openapi::api::core::v1::ReplicationController>,
    /// Default topology spread constraints (`--scheduler-config`); empty for none.
    default_constraints: Vec<k8s_openapi::api::core::v1::TopologySpreadConstraint>,
    /// The default spread as last built, with the workload change count it was built at.
    default_spread: Option<(u64, Arc<crate::engine::scheduling::default_spread::DefaultSpread>)>,
    pub states: BTreeMap<Kind, WatchState>,
    /// Objects skipped because they don't parse, by kind and key.
    problems: BTreeMap<(Kind, String), Problem>,
    /// Pods that never parsed, and the node each is bound to.
    unreadable_pods: BTreeMap<String, String>,
    /// Keys seen by the relist in progress, readable or not: what is still there once it is done.
    relist_seen: BTreeMap<Kind, BTreeSet<String>>,
    /// Changes seen per kind (what [`Applied::changed`] counts).
    changes: crate::engine::manifests::Changes,
    /// Scheduling digests of the pods, kept from one read to the next (see [`Cache::pod_versions`]).
    digests: Arc<crate::engine::provisioning::Digests>,
    /// Seconds from creation to Ready of the pods seen pending that became Ready since the last
    /// [`Cache::take_pod_startups`] (at most [`MAX_POD_STARTUPS`] are kept).
    pod_startups: Vec<f64>,
    /// Pods seen pending and not Ready since: whose startup is measured when they turn Ready.
    starting: BTreeSet<String>,
}

/// How many pod startup durations the cache keeps until someone takes them (the metrics do, at each scrape).
pub const MAX_POD_STARTUPS: usize = 4096;

fn key_of(obj: &RawObject) -> String {
    let name = obj.metadata.name.clone().unwrap_or_default();
    match &obj.metadata.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name,
    }
}

/// The container fields anything here reads (requests, host ports, sidecar restart policy) or shows.
const CONTAINER_FIELDS: [&str; 6] = ["name", "image", "resources", "ports", "restartPolicy", "resizePolicy"];

/// The kinds of pod volume anything here reads: claims (volume topology) and generic ephemeral volumes (claims made
/// for the pod).
const VOLUME_SOURCES: [&str; 2] = ["persistentVolumeClaim", "ephemeral"];

/// The pod status fields anything here reads: the phase (finished pods, PDB health), the conditions (unschedulable,
/// ready), the nominated node (pending pods) and the start time (termination order); the reason and message are
/// small and what `kubectl` shows beside the phase. Container statuses matter only while an in-place resize has
/// them differ from the spec (see [`trim_container_statuses`]).
const POD_STATUS_FIELDS: [&str; 8] = [
    "phase",
    "conditions",
    "nominatedNodeName",
    "startTime",
    "reason",
    "message",
    "containerStatuses",
    "initContainerStatuses",
];

/// The pod condition types anything here reads: scheduled (pending pods), ready (PDBs), and a resize the kubelet
/// put off (requests).
const POD_CONDITIONS: [&str; 3] = ["PodScheduled", "Ready", "PodResizePending"];

/// The node status fields anything here reads: capacity and allocatable (what fits, initialization) and the
/// conditions (Ready).
const NODE_STATUS_FIELDS: [&str; 3] = ["capacity", "allocatable", "conditions"];

/// What `kubectl apply` keeps of the last configuration it applied: the whole object again, as JSON text.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what nothing here reads from an object as it arrives, since the cache keeps every object for its whole life:
/// `managedFields` and kubectl's last-applied configuration of every kind (on a busy cluster often the largest part
/// of an object), and of pods the container fields besides [`CONTAINER_FIELDS`] (environment, commands, probes,
/// mounts, security contexts), the volumes of other sources than [`VOLUME_SOURCES`] and the status fields besides
/// [`POD_STATUS_FIELDS`] (container statuses, IPs); of nodes the status fields besides [`NODE_STATUS_FIELDS`]
/// (dozens of cached images, node info, addresses) and the heartbeat times of the conditions. Pods are most of a
/// cluster's objects, and real ones carry kilobytes of these. Dropping the other volumes also lets replicas share
/// their spec (see [`StoredPod`](crate::engine::stored_pod::StoredPod)): the service-account token volume every
/// pod gets is named per pod (`kube-api-access-x7k2p`). Without heartbeat times, a node whose kubelet only said it
/// is still there (every 10 seconds) is equal to the stored one, so it is no change (see [`Applied::changed`]).
fn trim(kind: &str, map: &mut serde_json::Map<String, serde_json::Value>) {
    if let Some(meta) = map.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.remove("managedFields");
        if let Some(annotations) = meta.get_mut("annotations").and_then(|a| a.as_object_mut()) {
            annotations.remove(LAST_APPLIED);
        }
    }
    match kind {
        "Pod" => trim_pod(map),
        "Node" => trim_node(map),
        // Default topology spread reads only their selectors: what else changes (replica counts, templates, ports)
        // is neither kept nor a change.
        "Service" | "ReplicaSet" | "ReplicationController" => {
            map.remove("status");
            if let Some(spec) = map.get_mut("spec").and_then(|s| s.as_object_mut()) {
                spec.retain(|k, _| k == "selector");
            }
        }
        _ => {}
    }
}

fn trim_pod(map: &mut serde_json::Map<String, serde_json::Value>) {
    if let Some(spec) = map.get_mut("spec").and_then(|s| s.as_object_mut()) {
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            for c in spec.get_mut(list).and_then(|l| l.as_array_mut()).into_iter().flatten() {
                if let Some(c) = c.as_object_mut() {
                    c.retain(|k, _| CONTAINER_FIELDS.contains(&k.as_str()));
                }
            }
        }
        if let Some(volumes) = spec.get_mut("volumes").and_then(|l| l.as_array_mut()) {
            volumes.retain(|v| v.as_object().is_some_and(|v| VOLUME_SOURCES.iter().any(|s| v.contains_key(*s))));
            if volumes.is_empty() {
                spec.remove("volumes");
            }
        }
    }
    let spec = map.get("spec").cloned().unwrap_or_default();
    if let Some(status) = map.get_mut("status").and_then(|s| s.as_object_mut()) {
        status.retain(|k, _| POD_STATUS_FIELDS.contains(&k.as_str()));
        trim_container_statuses(&spec, status);
        // Of a pod's conditions only these two are read (pending pods, healthy pods for PDBs); the kubelet's others
        // (Initialized, ContainersReady, PodReadyToStartContainers) are a third of a running pod's kept status.
        if let Some(conditions) = status.get_mut("conditions").and_then(|l| l.as_array_mut()) {
            conditions.retain(|c| c["type"].as_str().is_some_and(|t| POD_CONDITIONS.contains(&t)));
        }
    }
}

/// Keeps of a pod's container statuses only those that change its requests (see
/// [`pod_requests`](crate::engine::scheduling::pod::pod_requests)): where the resources the kubelet reports or has
/// allocated exceed the spec's, as while a resize down is under way, or every reported one while a resize is put
/// off (then the spec does not count). Of those, only the name and resources are kept; the other required fields
/// are emptied. Every running pod on a cluster with in-place resize carries such statuses, so keeping them all
/// would grow every pod for nothing.
fn trim_container_statuses(spec: &serde_json::Value, status: &mut serde_json::Map<String, serde_json::Value>) {
    let pending =
        status.get("conditions").and_then(|c| c.as_array()).into_iter().flatten().any(|c| {
            c["type"] == "PodResizePending" && matches!(c["reason"].as_str(), Some("Deferred" | "Infeasible"))
        });
    for (list, spec_list) in [("containerStatuses", "containers"), ("initContainerStatuses", "initContainers")] {
        let Some(entries) = status.get_mut(list).and_then(|l| l.as_array_mut()) else { continue };
        entries.retain_mut(|e| {
            let Some(e) = e.as_object_mut() else { return false };
            if e.get("resources").is_none_or(|r| r.is_null()) {
                return false;
            }
            let container = spec[spec_list]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c.get("name").is_some_and(|n| Some(n) == e.get("name")));
            let Some(container) = container else { return false };
            if !pending && !exceeds_spec(e, &container["resources"]) {
                return false;
            }
            e.retain(|k, _| ["name", "resources", "allocatedResources"].contains(&k.as_str()));
            for k in ["image", "imageID"] {
                e.insert(k.into(), "".into());
            }
            e.insert("ready".into(), false.into());
            e.insert("restartCount".into(), 0.into());
            true
        });
        if entries.is_empty() {
            status.remove(list);
        }
    }
}

/// Whether a container status reports or has allocated more of some resource than the spec requests (limits
/// standing in for absent requests). An unreadable quantity counts as more, so the scheduler sees it and says so.
fn exceeds_spec(status: &serde_json::Map<String, serde_json::Value>, spec: &serde_json::Value) -> bool {
    let amount = |q: &serde_json::Value| q.as_str().and_then(|q| crate::engine::resources::parse_quantity(q).ok());
    let spec_of =
        |name: &str| amount(&spec["requests"][name]).or_else(|| amount(&spec["limits"][name])).map_or(0, |q| q.milli());
    let reported = status.get("resources").and_then(|r| r.get("requests"));
    [reported, status.get("allocatedResources")]
        .into_iter()
        .flatten()
        .filter_map(|m| m.as_object())
        .flatten()
        .any(|(name, q)| amount(q).is_none_or(|q| q.milli() > spec_of(name)))
}

fn trim_node(map: &mut serde_json::Map<String, serde_json::Value>) {
    if let Some(status) = map.get_mut("status").and_then(|s| s.as_object_mut()) {
        // Of the node's system info only the boot id is read (a reboot is seen by its change).
        let boot_id = status.get_mut("nodeInfo").and_then(|i| i.as_object_mut()).and_then(|i| i.remove("bootID"));
        status.retain(|k, _| NODE_STATUS_FIELDS.contains(&k.as_str()));
        if let Some(b) = boot_id {
            status.insert("nodeInfo".into(), serde_json::json!({ "bootID": b }));
        }
        for c in status.get_mut("conditions").and_then(|l| l.as_array_mut()).into_iter().flatten() {
            if let Some(c) = c.as_object_mut() {
                c.remove("lastHeartbeatTime");
            }
        }
    }
}

/// The object as its typed form, with the type fields a list response leaves out put back (k8s-openapi checks
/// them), [`trim`]med. The object is taken apart rather than copied: at 20,000 pods listed a page at a time, a copy
/// of each as it is read is megabytes of garbage for the allocator to hold on to.
fn parse<T: DeserializeOwned>(ar: &ApiResource, obj: RawObject) -> Result<T, String> {
    let mut map = obj.into_map().map_err(|e| e.to_string())?;
    map.insert("apiVersion".into(), ar.api_version.clone().into());
    map.insert("kind".into(), ar.kind.clone().into());
    trim(&ar.kind, &mut map);
    serde_path_to_error::deserialize(serde_json::Value::Object(map)).map_err(|e| {
        let path = e.path().to_string();
        if path == "." { e.inner().to_string() } else { format!("{path}: {}", e.inner()) }
    })
}

/// What one watcher event did to the cache.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Applied {
    /// An object that could not be read, the first time it is reported.
    pub problem: Option<Problem>,
    /// Whether anything the engine or the dashboard reads changed: an object added, deleted or changed in what is
    /// kept of it (not only its resourceVersion, not only a node's heartbeat), an initial list completed, an object
    /// becoming unreadable or readable again. Objects read during a relist count when the relist completes.
    pub changed: bool,
}

/// Equality of what is kept of an object (see [`trim`]), resourceVersion included.
trait Same {
    fn same(&self, other: &Self) -> bool;
}

macro_rules! same_by_eq {
    ($($t:ty),*) => {$(
        impl Same for $t {
            fn same(&self, other: &Self) -> bool {
                self == other
            }
        }
    )*};
}

same_by_eq!(
    crate::engine::api::capacitybuffer::CapacityBuffer,
    k8s_openapi::api::core::v1::PodTemplate,
    k8s_openapi::api::apps::v1::Deployment,
    k8s_openapi::api::apps::v1::StatefulSet,
    k8s_openapi::api::apps::v1::ReplicaSet,
    k8s_openapi::api::core::v1::ReplicationController,
    k8s_openapi::api::core::v1::Service,
    crate::engine::stored_pod::StoredPod,
    k8s_openapi::api::core::v1::Node,
    crate::engine::api::NodePool,
    crate::engine::api::NodeClaim,
    crate::engine::api::nodeoverlay::NodeOverlay,
    k8s_openapi::api::apps::v1::DaemonSet,
    k8s_openapi::api::policy::v1::PodDisruptionBudget,
    k8s_openapi::api::core::v1::PersistentVolumeClaim,
    k8s_openapi::api::core::v1::PersistentVolume,
    k8s_openapi::api::storage::v1::StorageClass,
    k8s_openapi::api::storage::v1::CSINode,
    k8s_openapi::api::core::v1::Namespace
);

// The EC2NodeClass root type doesn't derive `PartialEq`; its parts do.
impl Same for crate::engine::api::EC2NodeClass {
    fn same(&self, other: &Self) -> bool {
        self.metadata == other.metadata && self.spec == other.spec && self.status == other.status
    }
}

/// Whether `new` differs from `old` in more than its resourceVersion.
fn differs<T: Same + kube::Resource>(old: &T, new: &mut T) -> bool {
    let rv = std::mem::replace(&mut new.meta_mut().resource_version, old.meta().resource_version.clone());
    let same = old.same(new);
    new.meta_mut().resource_version = rv;
    !same
}

enum Step<T> {
    Restart,
    Listed(String, Result<T, String>),
    Done,
    Applied(String, Result<T, String>),
    Deleted(String),
}

/// What a step did to a kind's map.
struct Stepped {
    /// The parse error, if any.
    error: Option<String>,
    /// An initial list completed.
    done: bool,
    /// The map changed in more than resourceVersions.
    changed: bool,
}

impl Cache {
    /// Takes one watcher event for `kind`: what it changed, and a problem the first time an object fails to parse.
    pub fn apply(&mut self, kind: Kind, event: Event<RawObject>) -> Applied {
        let unreadable = self.unreadable_pods.len();
        let applied = self.take(kind, event);
        if applied.changed {
            let c = &mut self.changes;
            let count = match kind {
                Kind::NodePool => &mut c.nodepools,
                Kind::NodeClass => &mut c.nodeclasses,
                Kind::NodeOverlay => &mut c.nodeoverlays,
                Kind::NodeClaim => &mut c.nodeclaims,
                Kind::Node => &mut c.nodes,
                Kind::Pod => &mut c.pods,
                Kind::CapacityBuffer => &mut c.capacitybuffers,
                Kind::PodTemplate => &mut c.pod_templates,
                Kind::Deployment
                | Kind::StatefulSet
                | Kind::Service
                | Kind::ReplicaSet
                | Kind::ReplicationController => &mut c.workloads,
                Kind::DaemonSet
                | Kind::Pdb
                | Kind::Pvc
                | Kind::Pv
                | Kind::StorageClass
                | Kind::CSINode
                | Kind::Namespace => &mut c.others,
            };
            *count += 1;
            // A node hosting a pod that can't be read is read as do-not-disrupt (see `manifests`).
            if kind == Kind::Pod && self.unreadable_pods.len() != unreadable {
                c.nodes += 1;
            }
        }
        applied
    }

    fn take(&mut self, kind: Kind, event: Event<RawObject>) -> Applied {
        let ar = kind.api_resource();
        // What the bookkeeping below needs of the object, before it is taken apart.
        let key = match &event {
            Event::InitApply(o) | Event::Apply(o) | Event::Delete(o) => Some(key_of(o)),
            Event::Init | Event::InitDone => None,
        };
        let node_of =
            |o: &RawObject| o.pointer("/spec/nodeName").and_then(|v| v.as_str()).unwrap_or_default().to_string();
        let pod_node = match &event {
            Event::InitApply(o) | Event::Apply(o) if kind == Kind::Pod => node_of(o),
            _ => String::new(),
        };
        // A relist starting, or one of its objects.
        let listing = matches!(event, Event::Init | Event::InitApply(_));
        macro_rules! typed {
            ($field:ident) => {{
                let step = match event {
                    Event::Init => Step::Restart,
                    Event::InitApply(o) => Step::Listed(key_of(&o), parse(&ar, o)),
                    Event::InitDone => Step::Done,
                    Event::Apply(o) => Step::Applied(key_of(&o), parse(&ar, o)),
                    Event::Delete(o) => Step::Deleted(key_of(&o)),
                };
                step_into(&mut self.$field, step)
            }};
        }
        let Stepped { error, done, changed } = match kind {
            Kind::Pod => typed!(pods),
            Kind::Node => typed!(nodes),
            Kind::NodePool => typed!(nodepools),
            Kind::NodeClaim => typed!(nodeclaims),
            Kind::NodeClass => typed!(nodeclasses),
            Kind::NodeOverlay => typed!(nodeoverlays),
            Kind::DaemonSet => typed!(daemonsets),
            Kind::Pdb => typed!(pdbs),
            Kind::Pvc => typed!(pvcs),
            Kind::Pv => typed!(pvs),
            Kind::StorageClass => typed!(storage_classes),
            Kind::CSINode => typed!(csinodes),
            Kind::Namespace => typed!(namespaces),
            Kind::CapacityBuffer => typed!(capacitybuffers),
            Kind::PodTemplate => typed!(pod_templates),
            Kind::Deployment => typed!(deployments),
            Kind::StatefulSet => typed!(statefulsets),
            Kind::Service => typed!(services),
            Kind::ReplicaSet => typed!(replicasets),
            Kind::ReplicationController => typed!(replication_controllers),
        };
        match (&key, listing) {
            (None, true) => {
                self.relist_seen.insert(kind, BTreeSet::new());
            }
            (Some(k), true) => {
                self.relist_seen.entry(kind).or_default().insert(k.clone());
            }
            _ => {}
        }
        if done {
            self.states.insert(kind, WatchState::Synced);
            let seen = self.relist_seen.remove(&kind).unwrap_or_default();
            self.problems.retain(|(k, key), _| *k != kind || seen.contains(key));
            if kind == Kind::Pod {
                self.unreadable_pods.retain(|k, _| seen.contains(k));
            }
        }
        if done && kind == Kind::Pod {
            // After a (re)list: the pods pending now are the ones to measure; those gone are forgotten.
            self.starting = self
                .pods
                .iter()
                .filter(|(_, p)| {
                    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending")
                        && startup_seconds(p).is_none()
                })
                .map(|(k, _)| k.clone())
                .collect();
        }
        let Some(key) = key else { return Applied { problem: None, changed } };
        if kind == Kind::Pod && error.is_none() && !listing {
            self.pod_started(&key);
        }
        // Bookkeeping of unreadable objects.
        match error {
            None => {
                let cleared = self.problems.remove(&(kind, key.clone())).is_some();
                let unguarded = self.unreadable_pods.remove(&key).is_some();
                Applied { problem: None, changed: changed || cleared || unguarded }
            }
            Some(message) => {
                let mut changed = changed;
                if kind == Kind::Pod && !self.pods.contains_key(&key) && !pod_node.is_empty() {
                    changed |= self.unreadable_pods.insert(key.clone(), pod_node).is_none();
                }
                let p = Problem { kind, key: key.clone(), message };
                let new = self.problems.get(&(kind, key.clone())) != Some(&p);
                self.problems.insert((kind, key), p.clone());
                Applied { problem: new.then_some(p), changed: changed || new }
            }
        }
    }

    /// Upstream's pod startup metric, as its pod metrics controller keeps it: a pod seen pending is remembered
    /// until it turns Ready (its startup is then measured) or ends or goes.
    fn pod_started(&mut self, key: &str) {
        let Some(p) = self.pods.get(key) else {
            self.starting.remove(key);
            return;
        };
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default();
        let started = startup_seconds(p);
        if let Some(seconds) = started
            && self.starting.remove(key)
            && self.pod_startups.len() < MAX_POD_STARTUPS
        {
            self.pod_startups.push(seconds);
        } else if started.is_none() && phase == "Pending" && !self.starting.contains(key) {
            self.starting.insert(key.to_string());
        } else if phase == "Succeeded" || phase == "Failed" {
            self.starting.remove(key);
        }
    }

    /// The pod startup durations (seconds from creation to Ready) seen since the last call.
    pub fn take_pod_startups(&mut self) -> Vec<f64> {
        std::mem::take(&mut self.pod_startups)
    }

    /// Records a failing list or watch. A 404 means the API server doesn't serve the kind.
    pub fn watch_failed(&mut self, kind: Kind, code: Option<u16>, message: String) {
        let state = if code == Some(404) { WatchState::Absent } else { WatchState::Failing(message) };
        self.states.insert(kind, state);
    }

    pub fn state(&self, kind: Kind) -> WatchState {
        self.states.get(&kind).cloned().unwrap_or_default()
    }

    /// Every kind has been listed (or is known not to exist where it may be missing): the engine may decide.
    pub fn synced(&self) -> bool {
        Kind::ALL.iter().all(|&k| match self.state(k) {
            WatchState::Synced => true,
            WatchState::Absent => k.optional(),
            // A kind whose watch broke after its initial list still has a full (if aging) picture.
            WatchState::Failing(_) => self.has_listed(k),
            WatchState::Listing => false,
        })
    }

    /// Some kind has completed a list.
    pub fn any_listed(&self) -> bool {
        Kind::ALL.into_iter().any(|k| self.has_listed(k))
    }

    fn has_listed(&self, kind: Kind) -> bool {
        self.listed(kind).0
    }

    /// Whether `kind` has completed a list, and how many of its objects are held: those of the list in progress
    /// while one runs (what the progress line counts), else those kept.
    fn listed(&self, kind: Kind) -> (bool, usize) {
        fn of<T>(t: &Typed<T>) -> (bool, usize) {
            (t.listed(), t.relisting().unwrap_or(t.len()))
        }
        match kind {
            Kind::Pod => of(&self.pods),
            Kind::Node => of(&self.nodes),
            Kind::NodePool => of(&self.nodepools),
            Kind::NodeClaim => of(&self.nodeclaims),
            Kind::NodeClass => of(&self.nodeclasses),
            Kind::NodeOverlay => of(&self.nodeoverlays),
            Kind::DaemonSet => of(&self.daemonsets),
            Kind::Pdb => of(&self.pdbs),
            Kind::Pvc => of(&self.pvcs),
            Kind::Pv => of(&self.pvs),
            Kind::StorageClass => of(&self.storage_classes),
            Kind::CSINode => of(&self.csinodes),
            Kind::Namespace => of(&self.namespaces),
            Kind::CapacityBuffer => of(&self.capacitybuffers),
            Kind::PodTemplate => of(&self.pod_templates),
            Kind::Deployment => of(&self.deployments),
            Kind::StatefulSet => of(&self.statefulsets),
            Kind::Service => of(&self.services),
            Kind::ReplicaSet => of(&self.replicasets),
            Kind::ReplicationController => of(&self.replication_controllers),
        }
    }

    /// How the initial lists are coming along, for the progress line shown while they run: each kind that still
    /// keeps the engine from deciding, with the objects its list has brought so far.
    pub fn listing(&self) -> Vec<Listing> {
        Kind::ALL
            .into_iter()
            .filter_map(|kind| {
                let (done, count) = self.listed(kind);
                let waiting = match self.state(kind) {
                    WatchState::Synced => false,
                    WatchState::Absent => !kind.optional(),
                    WatchState::Failing(_) => !done,
                    WatchState::Listing => true,
                };
                let failing = match self.state(kind) {
                    WatchState::Failing(m) => Some(m),
                    _ => None,
                };
                waiting.then_some(Listing { kind, count, failing })
            })
            .collect()
    }

    /// What is keeping the engine from deciding, for the header and `plan`'s error.
    pub fn not_synced(&self) -> Vec<String> {
        Kind::ALL
            .iter()
            .filter_map(|&k| match self.state(k) {
                WatchState::Synced => None,
                WatchState::Absent if k.optional() => None,
                WatchState::Absent => {
                    Some(format!("{}: not served by the API server (CRD not installed?)", k.resource_name()))
                }
                WatchState::Failing(_) if self.has_listed(k) => None,
                WatchState::Failing(m) => Some(format!("{}: {m}", k.resource_name())),
                WatchState::Listing => Some(format!("{}: still listing", k.resource_name())),
            })
            .collect()
    }

    /// Kinds whose watch is failing now, even if they listed before: their cached objects may be stale, so the
    /// engine must not act on them (a NodeClaim it created would not show up, and it would create another).
    pub fn failing(&self) -> Vec<String> {
        Kind::ALL
            .iter()
            .filter_map(|&k| match self.state(k) {
                WatchState::Failing(m) => Some(format!("{}: {m}", k.resource_name())),
                _ => None,
            })
            .collect()
    }

    /// Every kind that isn't usable has failed at least once (none is still quietly listing).
    pub fn all_missing_failed(&self) -> bool {
        let missing: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|&k| match self.state(k) {
                WatchState::Synced => false,
                WatchState::Absent => !k.optional(),
                WatchState::Failing(_) => !self.has_listed(k),
                WatchState::Listing => true,
            })
            .collect();
        !missing.is_empty() && missing.iter().all(|&k| self.state(k) != WatchState::Listing)
    }

    pub fn problems(&self) -> impl Iterator<Item = &Problem> {
        self.problems.values()
    }

    /// The engine's input: every object as last read. Nodes hosting a pod that could not be read are marked
    /// do-not-disrupt, since what runs on them is unknown.
    pub fn manifests(&mut self) -> ClusterObjects {
        self.settle();
        let unsafe_nodes: BTreeSet<&str> = self.unreadable_pods.values().map(String::as_str).collect();
        let mut nodes = self.nodes.values().to_vec();
        for n in &mut nodes {
            if n.metadata.name.as_deref().is_some_and(|name| unsafe_nodes.contains(name)) {
                // Copied only here: every other node is the cache's own, shared.
                Arc::make_mut(n)
                    .metadata
                    .annotations
                    .get_or_insert_default()
                    .insert(labels::ANNOTATION_DO_NOT_DISRUPT.to_string(), "true".to_string());
            }
        }
        let mut out = ClusterObjects {
            nodepools: cloned(&self.nodepools),
            nodeclaims: self.nodeclaims.values().to_vec(),
            nodeclasses: cloned(&self.nodeclasses),
            nodeoverlays: cloned(&self.nodeoverlays),
            capacitybuffers: cloned(&self.capacitybuffers),
            pod_templates: cloned(&self.pod_templates),
            workloads: crate::engine::manifests::Workloads {
                deployments: cloned(&self.deployments),
                statefulsets: cloned(&self.statefulsets),
                replicasets: cloned(&self.replicasets),
                replication_controllers: cloned(&self.replication_controllers),
            },
            nodes,
            pods: self.pods.values().to_vec(),
            deployments: Vec::new(),
            daemonsets: cloned(&self.daemonsets),
            pdbs: cloned(&self.pdbs),
            pvcs: cloned(&self.pvcs),
            pvs: cloned(&self.pvs),
            storage_classes: cloned(&self.storage_classes),
            csinodes: cloned(&self.csinodes),
            namespaces: cloned(&self.namespaces),
            services: cloned(&self.services),
            default_spread: None,
            changes: Some(self.changes),
            notes: Vec::new(),
            pod_versions: self.pod_versions(),
        };
        // Built again only when what it deduces from changed (and only its key changes what the digests keep).
        if !self.default_constraints.is_empty() {
            let at = self.changes.workloads;
            let spread = match &self.default_spread {
                Some((built, d)) if *built == at => Some(d.clone()),
                _ => out.default_spread_of(&self.default_constraints).map(Arc::new),
            };
            self.default_spread = spread.clone().map(|d| (at, d));
            out.default_spread = spread;
        }
        out
    }

    /// Gives every read the default topology spread `constraints` (Karpenter v1.15's `--scheduler-config`); the
    /// watches of Services, ReplicaSets and ReplicationControllers must run for it ([`super::watch::spawn`]).
    pub fn set_default_constraints(&mut self, constraints: &[k8s_openapi::api::core::v1::TopologySpreadConstraint]) {
        self.default_constraints = constraints.to_vec();
        self.default_spread = None;
    }

    /// Merges the writes of every kind since the last read (see [`Store::settle`]).
    fn settle(&mut self) {
        self.pods.settle();
        self.nodes.settle();
        self.nodepools.settle();
        self.nodeclaims.settle();
        self.nodeclasses.settle();
        self.nodeoverlays.settle();
        self.daemonsets.settle();
        self.pdbs.settle();
        self.pvcs.settle();
        self.pvs.settle();
        self.storage_classes.settle();
        self.csinodes.settle();
        self.namespaces.settle();
        self.capacitybuffers.settle();
        self.pod_templates.settle();
        self.deployments.settle();
        self.statefulsets.settle();
        self.services.settle();
        self.replicasets.settle();
        self.replication_controllers.settle();
    }

    /// The pods' versions, in the order [`Cache::manifests`] gives them: the store's, which move on every write of
    /// a pod and stay while it is not written, so a pod's digest lives as long as the pod is unchanged.
    fn pod_versions(&self) -> Option<crate::engine::manifests::PodVersions> {
        Some(crate::engine::manifests::PodVersions {
            versions: self.pods.versions().to_vec(),
            digests: self.digests.clone(),
        })
    }
}

/// Seconds from a pod's creation to its `Ready` condition turning true, when it is true.
fn startup_seconds(p: &crate::engine::stored_pod::StoredPod) -> Option<f64> {
    use crate::engine::lifecycle::time_ms;
    let ready = p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready" && c.status == "True")?;
    let (at, created) = (ready.last_transition_time.as_ref()?, p.metadata.creation_timestamp.as_ref()?);
    Some((time_ms(at) - time_ms(created)).max(0) as f64 / 1000.0)
}

/// Applies one step to a kind's map.
fn step_into<T: Same + kube::Resource>(t: &mut Typed<T>, step: Step<T>) -> Stepped {
    let quiet = |error: Option<String>| Stepped { error, done: false, changed: false };
    match step {
        Step::Restart => {
            t.begin_relist();
            quiet(None)
        }
        Step::Listed(key, parsed) => match parsed {
            Ok(v) => {
                t.relisted(key, Arc::new(v));
                quiet(None)
            }
            Err(e) => {
                // Keep the last good version through a relist.
                if let Some(old) = t.get(&key).cloned() {
                    t.relisted(key, old);
                }
                quiet(Some(e))
            }
        },
        Step::Done => {
            t.finish_relist(T::same);
            Stepped { error: None, done: true, changed: true }
        }
        Step::Applied(key, parsed) => match parsed {
            Ok(mut v) => {
                // The new version is stored even when only its resourceVersion moved: writers send it back as
                // the precondition of their patches.
                let changed = t.get(&key).is_none_or(|old| differs(&**old, &mut v));
                t.insert(key, Arc::new(v));
                Stepped { error: None, done: false, changed }
            }
            Err(e) => quiet(Some(e)),
        },
        Step::Deleted(key) => {
            t.remove(key.as_str());
            Stepped { error: None, done: false, changed: true }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::stored_pod::StoredPod;
    use serde_json::json;

    fn dynamic(v: serde_json::Value) -> RawObject {
        serde_json::from_value(v).unwrap()
    }

    /// A pod requesting `cpu`; an object where a quantity belongs is what a newer or broken writer might
    /// produce, and doesn't parse.
    fn pod(name: &str, node: &str, cpu: serde_json::Value) -> RawObject {
        dynamic(json!({
            "metadata": {"name": name, "namespace": "default", "resourceVersion": "1"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
        }))
    }

    fn list<'a>(c: &mut Cache, kind: Kind, objs: impl IntoIterator<Item = &'a RawObject>) -> Vec<Problem> {
        let mut out = Vec::new();
        c.apply(kind, Event::Init);
        for o in objs {
            out.extend(c.apply(kind, Event::InitApply(o.clone())).problem);
        }
        c.apply(kind, Event::InitDone);
        out
    }

    fn sync_all(c: &mut Cache) {
        for k in Kind::ALL {
            if !c.has_listed(k) {
                list(c, k, []);
            }
        }
    }

    #[test]
    fn nothing_is_synced_until_every_required_kind_has_listed() {
        let mut c = Cache::default();
        assert!(!c.synced());
        for k in Kind::ALL.into_iter().filter(|k| *k != Kind::Node) {
            list(&mut c, k, []);
        }
        assert!(!c.synced());
        assert!(c.not_synced().iter().any(|m| m.starts_with("nodes: still listing")), "{:?}", c.not_synced());
        c.watch_failed(Kind::Node, Some(404), "not found".into());
        assert!(!c.synced(), "nodes are not optional");
        list(&mut c, Kind::Node, []);
        assert!(c.synced());
        // The AWS NodeClass CRD may be missing: still synced.
        let mut c = Cache::default();
        sync_all(&mut c);
        c.states.insert(Kind::NodeClass, WatchState::Absent);
        assert!(c.synced());
    }

    #[test]
    fn a_failing_watch_after_the_first_list_stops_acting_until_it_lists_again() {
        let mut c = Cache::default();
        sync_all(&mut c);
        assert!(c.failing().is_empty());
        c.watch_failed(Kind::NodeClaim, None, "connection refused".into());
        assert_eq!(c.failing(), vec!["nodeclaims.karpenter.sh: connection refused".to_string()]);
        list(&mut c, Kind::NodeClaim, []);
        assert!(c.failing().is_empty(), "a relist recovers");
    }

    #[test]
    fn a_relist_replaces_the_kind_and_drops_what_is_gone() {
        let mut c = Cache::default();
        list(&mut c, Kind::Pod, &[pod("a", "n1", json!("1")), pod("b", "n1", json!("1"))]);
        c.apply(Kind::Pod, Event::Apply(pod("c", "n2", json!("1"))));
        c.apply(Kind::Pod, Event::Delete(pod("a", "n1", json!("1"))));
        assert_eq!(
            {
                c.pods.settle();
                c.pods.keys().to_vec()
            },
            ["default/b", "default/c"]
        );
        // After a 410 the watcher relists; until InitDone the old picture stands.
        c.apply(Kind::Pod, Event::Init);
        c.apply(Kind::Pod, Event::InitApply(pod("d", "n2", json!("1"))));
        assert_eq!(c.pods.len(), 2);
        c.apply(Kind::Pod, Event::InitDone);
        assert_eq!(
            {
                c.pods.settle();
                c.pods.keys().to_vec()
            },
            ["default/d"]
        );
    }

    #[test]
    fn an_unreadable_object_is_reported_once_skipped_and_guards_its_node() {
        let mut c = Cache::default();
        let bad = pod("bad", "n1", json!({"many": true}));
        let problems = list(&mut c, Kind::Pod, &[pod("ok", "n2", json!("1")), bad.clone()]);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, "default/bad");
        assert!(problems[0].message.contains("spec.containers[0].resources.requests.cpu"), "{}", problems[0]);
        assert_eq!(c.apply(Kind::Pod, Event::Apply(bad.clone())).problem, None, "reported once");
        assert_eq!(c.pods.len(), 1);
        let node = |name: &str| dynamic(json!({"metadata": {"name": name}}));
        list(&mut c, Kind::Node, &[node("n1"), node("n2")]);
        sync_all(&mut c);
        let m = c.manifests();
        let guarded: Vec<_> = m
            .nodes
            .iter()
            .filter(|n| {
                n.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(labels::ANNOTATION_DO_NOT_DISRUPT))
            })
            .map(|n| n.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(guarded, ["n1"]);
        // Fixed upstream: readable again, problem cleared, node no longer guarded.
        c.apply(Kind::Pod, Event::Apply(pod("bad", "n1", json!("2"))));
        assert_eq!(c.problems().count(), 0);
        assert!(c.manifests().nodes.iter().all(|n| n.metadata.annotations.is_none()));
    }

    #[test]
    fn a_bad_update_keeps_the_last_good_version() {
        let mut c = Cache::default();
        list(&mut c, Kind::Pod, &[pod("a", "n1", json!("1"))]);
        assert!(c.apply(Kind::Pod, Event::Apply(pod("a", "n1", json!([1])))).problem.is_some());
        let p = &c.pods.get("default/a").unwrap();
        assert_eq!(p.node_name(), Some("n1"));
        // ...also through a relist.
        let problems = list(&mut c, Kind::Pod, &[pod("a", "n1", json!([1]))]);
        assert!(problems.is_empty(), "already reported");
        assert!(c.pods.contains_key("default/a"));
    }

    #[test]
    fn karpenter_objects_parse_from_their_wire_form() {
        let mut c = Cache::default();
        let np = dynamic(json!({
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}}}
        }));
        assert!(list(&mut c, Kind::NodePool, &[np]).is_empty());
        assert_eq!(c.nodepools.get("default").unwrap().spec.template.spec.requirements.len(), 1);
    }

    #[test]
    fn pods_keep_what_the_engine_reads_and_nothing_else() {
        let full = json!({
            "metadata": {"name": "web-1", "namespace": "default", "resourceVersion": "7", "uid": "u1",
                "labels": {"app": "web"}, "annotations": {"karpenter.sh/do-not-disrupt": "true"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "r",
                    "controller": true}],
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
            "spec": {
                "nodeSelector": {"team": "a"},
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "kube-api-access-x7k2p", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}],
                "priority": 100,
                "overhead": {"cpu": "50m"},
                "initContainers": [
                    {"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                        "resources": {"requests": {"cpu": "100m"}}, "env": [{"name": "A", "value": "1"}]},
                    {"name": "migrate", "image": "m", "command": ["migrate"], "resources": {"requests": {"cpu": "2"}}}],
                "containers": [{"name": "app", "image": "web:1", "command": ["serve"], "args": ["--port=8080"],
                    "env": [{"name": "GREETING", "value": "hello"}],
                    "ports": [{"containerPort": 8080, "hostPort": 8080}],
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]},
            "status": {"phase": "Pending", "nominatedNodeName": "n2", "startTime": "2026-05-01T08:00:00Z",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "lastTransitionTime": "2026-05-01T08:00:00Z"},
                    {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-05-01T08:00:00Z"},
                    {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                     "lastTransitionTime": "2026-05-01T08:00:00Z"},
                    {"type": "ContainersReady", "status": "False", "lastTransitionTime": "2026-05-01T08:00:00Z"}],
                "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}], "podIP": "10.0.1.7", "podIPs": [{"ip": "10.0.1.7"}],
                "qosClass": "Burstable",
                "containerStatuses": [{"name": "app", "image": "web:1", "imageID": "", "ready": false,
                    "restartCount": 3}]}
        });
        let mut c = Cache::default();
        assert!(list(&mut c, Kind::Pod, &[dynamic(full.clone())]).is_empty());
        let kept = &c.pods.get("default/web-1").unwrap();
        let mut untouched = full;
        untouched["apiVersion"] = json!("v1");
        untouched["kind"] = json!("Pod");
        let untouched: StoredPod = serde_json::from_value(untouched).unwrap();
        let digest = |p| crate::engine::scheduling::pod::pod_data(p, &[]).unwrap();
        assert_eq!(digest(kept), digest(&untouched), "the scheduler sees the same pod");
        let app = &kept.spec().containers[0];
        assert_eq!((app.env.as_ref(), app.command.as_ref(), app.liveness_probe.as_ref()), (None, None, None));
        assert_eq!(app.image.as_deref(), Some("web:1"));
        let status = kept.status.as_ref().unwrap();
        let full_status = untouched.status.as_ref().unwrap();
        let expected = k8s_openapi::api::core::v1::PodStatus {
            phase: full_status.phase.clone(),
            conditions: full_status
                .conditions
                .clone()
                .map(|cs| cs.into_iter().filter(|c| c.type_ == "PodScheduled" || c.type_ == "Ready").collect()),
            nominated_node_name: full_status.nominated_node_name.clone(),
            start_time: full_status.start_time.clone(),
            ..Default::default()
        };
        assert_eq!(
            *status, expected,
            "phase, the read conditions, nominated node and start time stay; statuses and IPs go"
        );
        assert_eq!(kept.metadata.annotations, untouched.metadata.annotations);
        assert_eq!(kept.metadata.managed_fields, None);
        let volumes: Vec<&str> = kept.spec().volumes.iter().flatten().map(|v| v.name.as_str()).collect();
        assert_eq!(volumes, ["data", "scratch"], "claims and ephemeral volumes stay");
    }

    #[test]
    fn container_statuses_stay_only_while_a_resize_makes_them_count() {
        // As a 1.34 kubelet reports a running pod: every container status carries its resources.
        let running = |allocated_cpu: &str, pending: Option<&str>| {
            let mut conditions = vec![json!({"type": "Ready", "status": "True"})];
            if let Some(reason) = pending {
                conditions.push(json!({"type": "PodResizePending", "status": "True", "reason": reason}));
            }
            dynamic(json!({
                "metadata": {"name": "web-1", "namespace": "default", "resourceVersion": "3"},
                "spec": {"nodeName": "n1", "containers": [
                    {"name": "app", "image": "web:1", "resources": {"requests": {"cpu": "2", "memory": "512Mi"}}},
                    {"name": "log", "image": "fluent", "resources": {"requests": {"cpu": "100m"}}}]},
                "status": {"phase": "Running", "conditions": conditions, "containerStatuses": [
                    {"name": "app", "image": "web:1", "imageID": "sha256:abc", "ready": true, "restartCount": 0,
                     "containerID": "containerd://1", "started": true, "state": {"running": {"startedAt": "2026-05-01T08:00:00Z"}},
                     "allocatedResources": {"cpu": allocated_cpu, "memory": "512Mi"},
                     "resources": {"requests": {"cpu": allocated_cpu, "memory": "512Mi"}}},
                    {"name": "log", "image": "fluent", "imageID": "sha256:def", "ready": true, "restartCount": 0,
                     "allocatedResources": {"cpu": "100m"}, "resources": {"requests": {"cpu": "100m"}}}]}
            }))
        };
        let kept_statuses = |obj: RawObject| {
            let mut c = Cache::default();
            assert!(list(&mut c, Kind::Pod, &[obj]).is_empty());
            let p = c.pods.get("default/web-1").unwrap().clone();
            let names: Vec<String> =
                p.status.iter().flat_map(|s| s.container_statuses.iter().flatten()).map(|s| s.name.clone()).collect();
            (names, crate::engine::scheduling::pod::pod_requests(&p).unwrap().cpu)
        };
        // Settled: the statuses say what the spec says, and none is kept.
        assert_eq!(kept_statuses(running("2", None)), (vec![], 2100));
        // Resizing down from 6: the allocation counts, and only that container's status is kept.
        assert_eq!(kept_statuses(running("6", None)), (vec!["app".to_string()], 6100));
        // A resize up to 2 from 1 put off: what runs counts, not the spec.
        assert_eq!(kept_statuses(running("1", Some("Deferred"))), (vec!["app".to_string(), "log".to_string()], 1100));
    }

    #[test]
    fn replicas_share_one_spec_whatever_their_node_and_token_volume() {
        let replica = |name: &str, node: &str, token: &str| {
            dynamic(json!({
                "metadata": {"name": name, "namespace": "default", "labels": {"app": "shared-spec"}},
                "spec": {"nodeName": node,
                    "volumes": [{"name": token, "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}],
                    "containers": [{"name": "app", "image": "shared-spec:1",
                        "volumeMounts": [{"name": token, "mountPath": "/var/run/secrets"}],
                        "resources": {"requests": {"cpu": "1"}}}]}
            }))
        };
        let mut c = Cache::default();
        let objs = [replica("a", "n1", "kube-api-access-abcde"), replica("b", "n2", "kube-api-access-fghij")];
        assert!(list(&mut c, Kind::Pod, &objs).is_empty());
        let (a, b) = (&c.pods.get("default/a").unwrap(), &c.pods.get("default/b").unwrap());
        assert!(a.shares_spec_with(b));
        assert_eq!((a.node_name(), b.node_name()), (Some("n1"), Some("n2")));
    }

    #[test]
    fn managed_fields_are_not_kept() {
        let mut c = Cache::default();
        let mut p = pod("a", "n1", json!("1"));
        p.metadata.managed_fields = Some(vec![Default::default()]);
        p.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
        assert!(list(&mut c, Kind::Pod, &[p]).is_empty());
        let kept = &c.pods.get("default/a").unwrap().metadata;
        assert_eq!(kept.managed_fields, None);
        assert_eq!(kept.labels.as_ref().map(|l| l["app"].as_str()), Some("web"), "the rest of the metadata stays");
    }

    /// A node as kubelet, the cloud provider and Karpenter keep it: heartbeats, images, node info, managed fields.
    fn full_node(rv: &str, heartbeat: &str) -> serde_json::Value {
        json!({
            "metadata": {"name": "ip-10-0-0-1.ec2.internal", "resourceVersion": rv, "uid": "n1",
                "labels": {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.xlarge"},
                "annotations": {"karpenter.sh/do-not-disrupt": "true", "node.alpha.kubernetes.io/ttl": "0",
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"v1\",\"kind\":\"Node\"}"},
                "finalizers": ["karpenter.sh/termination"],
                "managedFields": [{"manager": "kubelet", "operation": "Update", "subresource": "status",
                    "time": heartbeat, "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]},
            "spec": {"providerID": "aws:///us-east-1a/i-0abc", "unschedulable": true,
                "taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
                "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "58"},
                "conditions": [
                    {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": heartbeat,
                        "lastTransitionTime": "2026-05-01T08:00:00Z", "reason": "KubeletHasSufficientMemory",
                        "message": "kubelet has sufficient memory available"},
                    {"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat,
                        "lastTransitionTime": "2026-05-01T08:00:07Z", "reason": "KubeletReady",
                        "message": "kubelet is posting ready status"}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "images": [{"names": ["registry/app@sha256:0123", "registry/app:v1"], "sizeBytes": 1000}],
                "nodeInfo": {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "containerd://2.0.5",
                    "kernelVersion": "6.12", "kubeProxyVersion": "", "kubeletVersion": "v1.36.0", "machineID": "m",
                    "operatingSystem": "linux", "osImage": "Amazon Linux 2023", "systemUUID": "ec2"},
                "volumesInUse": ["kubernetes.io/csi/ebs.csi.aws.com^vol-1"]}
        })
    }

    #[test]
    fn nodes_keep_what_the_engine_reads_and_nothing_else() {
        let full = full_node("7", "2026-05-01T10:00:00Z");
        let mut c = Cache::default();
        assert!(list(&mut c, Kind::Node, &[dynamic(full.clone())]).is_empty());
        let kept = &c.nodes.get("ip-10-0-0-1.ec2.internal").unwrap();
        let mut untouched = full;
        untouched["apiVersion"] = json!("v1");
        untouched["kind"] = json!("Node");
        let untouched: k8s_openapi::api::core::v1::Node = serde_json::from_value(untouched).unwrap();
        // Exactly these go: managed fields, kubectl's copy, the status fields nothing reads, heartbeat times.
        let mut expected = untouched.clone();
        expected.metadata.managed_fields = None;
        expected.metadata.annotations.as_mut().unwrap().remove(LAST_APPLIED);
        let status = expected.status.as_mut().unwrap();
        (status.addresses, status.daemon_endpoints, status.images) = (None, None, None);
        status.node_info =
            Some(k8s_openapi::api::core::v1::NodeSystemInfo { boot_id: "b".into(), ..Default::default() });
        status.volumes_in_use = None;
        for cond in status.conditions.iter_mut().flatten() {
            cond.last_heartbeat_time = None;
        }
        assert_eq!(***kept, expected);
        // What the engine reads is all there.
        assert!(crate::engine::lifecycle::node_ready(kept));
        assert_eq!(kept.metadata.labels, untouched.metadata.labels);
        assert_eq!(kept.metadata.annotations.as_ref().unwrap()[labels::ANNOTATION_DO_NOT_DISRUPT], "true");
        assert_eq!(kept.spec, untouched.spec, "provider ID, taints, unschedulable");
        let (k, u) = (kept.status.as_ref().unwrap(), untouched.status.as_ref().unwrap());
        assert_eq!((&k.capacity, &k.allocatable), (&u.capacity, &u.allocatable));
        let conditions = |s: &k8s_openapi::api::core::v1::NodeStatus| {
            s.conditions
                .iter()
                .flatten()
                .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone(), c.last_transition_time.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(conditions(k), conditions(u));
    }

    #[test]
    fn a_heartbeat_is_no_change_but_its_resource_version_is_kept() {
        let mut c = Cache::default();
        list(&mut c, Kind::Node, &[dynamic(full_node("7", "2026-05-01T10:00:00Z"))]);
        let stored_rv = |c: &Cache| c.nodes.get("ip-10-0-0-1.ec2.internal").unwrap().metadata.resource_version.clone();
        let beat = c.apply(Kind::Node, Event::Apply(dynamic(full_node("8", "2026-05-01T10:00:10Z"))));
        assert_eq!(beat, Applied { problem: None, changed: false });
        assert_eq!(stored_rv(&c).as_deref(), Some("8"), "writers guard their patches with the latest version");
        // Images pulled, a volume attached: nothing here reads them either.
        let mut images = full_node("9", "2026-05-01T10:00:20Z");
        images["status"]["images"] = json!([]);
        images["status"]["volumesInUse"] = json!([]);
        assert!(!c.apply(Kind::Node, Event::Apply(dynamic(images))).changed);
        assert_eq!(stored_rv(&c).as_deref(), Some("9"));
        let mut labelled = full_node("10", "2026-05-01T10:00:20Z");
        labelled["metadata"]["labels"]["team"] = json!("a");
        assert!(c.apply(Kind::Node, Event::Apply(dynamic(labelled.clone()))).changed, "a label is a change");
        let mut not_ready = labelled;
        not_ready["metadata"]["resourceVersion"] = json!("11");
        not_ready["status"]["conditions"][1]["status"] = json!("False");
        assert!(c.apply(Kind::Node, Event::Apply(dynamic(not_ready.clone()))).changed, "so is Ready");
        assert!(c.apply(Kind::Node, Event::Delete(dynamic(not_ready))).changed, "and a deletion");
    }

    #[test]
    fn what_a_watch_event_changed_is_reported() {
        let mut c = Cache::default();
        c.apply(Kind::Pod, Event::Init);
        assert!(!c.apply(Kind::Pod, Event::InitApply(pod("a", "n1", json!("1")))).changed, "counted when listed");
        assert!(c.apply(Kind::Pod, Event::InitDone).changed);
        let mut same = pod("a", "n1", json!("1"));
        same.metadata.resource_version = Some("2".into());
        assert!(!c.apply(Kind::Pod, Event::Apply(same)).changed, "only the resourceVersion moved");
        assert_eq!(c.pods.get("default/a").unwrap().metadata.resource_version.as_deref(), Some("2"));
        assert!(c.apply(Kind::Pod, Event::Apply(pod("a", "n2", json!("1")))).changed, "rebound");
        assert!(c.apply(Kind::Pod, Event::Apply(pod("b", "n2", json!("1")))).changed, "added");
        // Unreadable: a change the first time (its node is guarded), and again when readable.
        assert!(c.apply(Kind::Pod, Event::Apply(pod("bad", "n1", json!([1])))).changed);
        assert!(!c.apply(Kind::Pod, Event::Apply(pod("bad", "n1", json!([1])))).changed, "same problem");
        assert!(c.apply(Kind::Pod, Event::Apply(pod("bad", "n1", json!("1")))).changed);
    }
    /// Reads of the cache carry a version per pod and the cache's digests: a pass digests only the pods that
    /// changed since the last read (a new resourceVersion), and a pod no API server sent is never trusted to stay.
    #[test]
    fn reads_keep_the_digests_of_pods_that_did_not_change() {
        use crate::engine::provisioning::pod_digests;
        let pod = |name: &str, rv: &str, cpu: &str| {
            let mut p = pod(name, "n1", json!(cpu));
            p.metadata.uid = Some(format!("uid-{name}"));
            p.metadata.resource_version = Some(rv.into());
            p
        };
        let mut c = Cache::default();
        list(&mut c, Kind::Pod, &[pod("a", "1", "1"), pod("b", "2", "1")]);
        let digests = |c: &mut Cache| {
            let m = c.manifests();
            assert!(m.pod_digests().is_some(), "a watch cache's read carries its versions");
            pod_digests(&m.view(), &[]).into_iter().map(|d| d.unwrap()).collect::<Vec<_>>()
        };
        let before = digests(&mut c);
        c.apply(Kind::Pod, Event::Apply(pod("b", "3", "2")));
        let after = digests(&mut c);
        assert!(Arc::ptr_eq(&before[0], &after[0]), "a is digested once");
        assert!(!Arc::ptr_eq(&before[1], &after[1]));
        assert_eq!((before[1].requests.cpu, after[1].requests.cpu), (1000, 2000), "b's new version is read");
        // A version is the store's, not the resourceVersion: a write that keeps the resourceVersion (no API server
        // sends one, a stand-in might) is still a new version, and objects without one are digested too.
        c.apply(Kind::Pod, Event::Apply(pod("b", "3", "4")));
        let mut bare = pod("c", "4", "1");
        bare.metadata.resource_version = None;
        c.apply(Kind::Pod, Event::Apply(bare));
        let last = digests(&mut c);
        assert!(Arc::ptr_eq(&after[0], &last[0]), "a is still digested once");
        assert_eq!((last[1].requests.cpu, last[2].requests.cpu), (4000, 1000));
    }
}
