//! The watch cache: what the watchers have seen of each kind, typed, and whether each kind has finished its initial
//! list (engine.md §7 "Synced": nothing is decided before every kind is).
//!
//! Reading is lenient. Objects arrive as `DynamicObject`s and are parsed one by one, so one object the engine can't
//! read (a field from a newer CRD version, a malformed quantity in someone else's pod) is reported once and skipped
//! instead of failing the whole list. An object whose new version doesn't parse keeps its last good version; a pod
//! that never parsed makes its node look occupied by something unknown, so the node is never disrupted on the
//! strength of a partial picture.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::api::DynamicObject;
use kube::core::ApiResource;
use kube::runtime::watcher::Event;
use serde::de::DeserializeOwned;

use super::kinds::Kind;
use crate::engine::labels;
use crate::sim::manifests::Manifests;

/// One kind's objects by `namespace/name` (or `name`), plus the buffer of a relist in progress. Objects are shared
/// (`Arc`), so a read of the cache for an engine pass copies pointers, not pods.
#[derive(Debug, Clone)]
pub struct Typed<T> {
    pub items: BTreeMap<String, Arc<T>>,
    relist: Option<BTreeMap<String, Arc<T>>>,
    pub synced: bool,
}

impl<T> Default for Typed<T> {
    fn default() -> Self {
        Typed { items: BTreeMap::new(), relist: None, synced: false }
    }
}

impl<T: Clone> Typed<T> {
    fn values(&self) -> Vec<T> {
        self.items.values().map(|v| T::clone(v)).collect()
    }

    fn shared(&self) -> Vec<Arc<T>> {
        self.items.values().cloned().collect()
    }
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

#[derive(Debug, Clone, Default)]
pub struct Cache {
    pub pods: Typed<crate::engine::stored_pod::StoredPod>,
    pub nodes: Typed<k8s_openapi::api::core::v1::Node>,
    pub nodepools: Typed<crate::engine::api::NodePool>,
    pub nodeclaims: Typed<crate::engine::api::NodeClaim>,
    pub nodeclasses: Typed<crate::engine::api::EC2NodeClass>,
    pub daemonsets: Typed<k8s_openapi::api::apps::v1::DaemonSet>,
    pub pdbs: Typed<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
    pub pvcs: Typed<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    pub pvs: Typed<k8s_openapi::api::core::v1::PersistentVolume>,
    pub storage_classes: Typed<k8s_openapi::api::storage::v1::StorageClass>,
    pub namespaces: Typed<k8s_openapi::api::core::v1::Namespace>,
    pub states: BTreeMap<Kind, WatchState>,
    /// Objects skipped because they don't parse, by kind and key.
    problems: BTreeMap<(Kind, String), Problem>,
    /// Pods that never parsed, and the node each is bound to.
    unreadable_pods: BTreeMap<String, String>,
    /// Keys seen by the relist in progress, readable or not: what is still there once it is done.
    relist_seen: BTreeMap<Kind, BTreeSet<String>>,
}

fn key_of(obj: &DynamicObject) -> String {
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

/// Drops what nothing here reads from an object as it arrives, since the cache keeps every object for its whole life:
/// `managedFields` of every kind (on a busy cluster often the largest part of an object), and of pods the container
/// fields besides [`CONTAINER_FIELDS`] (environment, commands, probes, mounts, security contexts), the volumes of
/// other sources than [`VOLUME_SOURCES`] and the container statuses. Pods are most of a cluster's objects, and real
/// ones carry kilobytes of these. Dropping the other volumes also lets replicas share their spec (see
/// [`StoredPod`](crate::engine::stored_pod::StoredPod)): the service-account token volume every pod gets is named
/// per pod (`kube-api-access-x7k2p`).
fn trim(kind: &str, map: &mut serde_json::Map<String, serde_json::Value>) {
    if let Some(meta) = map.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.remove("managedFields");
    }
    if kind != "Pod" {
        return;
    }
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
    if let Some(status) = map.get_mut("status").and_then(|s| s.as_object_mut()) {
        for list in ["containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"] {
            status.remove(list);
        }
    }
}

/// The object as its typed form, with the type fields a list response leaves out put back (k8s-openapi checks
/// them), [`trim`]med.
fn parse<T: DeserializeOwned>(ar: &ApiResource, obj: &DynamicObject) -> Result<T, String> {
    let mut value = serde_json::to_value(obj).map_err(|e| e.to_string())?;
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), ar.api_version.clone().into());
        map.insert("kind".into(), ar.kind.clone().into());
        trim(&ar.kind, map);
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." { e.inner().to_string() } else { format!("{path}: {}", e.inner()) }
    })
}

enum Step<T> {
    Restart,
    Listed(String, Result<T, String>),
    Done,
    Applied(String, Result<T, String>),
    Deleted(String),
}

impl Cache {
    /// Takes one watcher event for `kind`. Returns a problem the first time an object fails to parse.
    pub fn apply(&mut self, kind: Kind, event: Event<DynamicObject>) -> Option<Problem> {
        let ar = kind.api_resource();
        macro_rules! typed {
            ($field:ident) => {{
                let step = match &event {
                    Event::Init => Step::Restart,
                    Event::InitApply(o) => Step::Listed(key_of(o), parse(&ar, o)),
                    Event::InitDone => Step::Done,
                    Event::Apply(o) => Step::Applied(key_of(o), parse(&ar, o)),
                    Event::Delete(o) => Step::Deleted(key_of(o)),
                };
                let (problem, done) = step_into(&mut self.$field, kind, step);
                (problem, done)
            }};
        }
        let (problem, done) = match kind {
            Kind::Pod => typed!(pods),
            Kind::Node => typed!(nodes),
            Kind::NodePool => typed!(nodepools),
            Kind::NodeClaim => typed!(nodeclaims),
            Kind::NodeClass => typed!(nodeclasses),
            Kind::DaemonSet => typed!(daemonsets),
            Kind::Pdb => typed!(pdbs),
            Kind::Pvc => typed!(pvcs),
            Kind::Pv => typed!(pvs),
            Kind::StorageClass => typed!(storage_classes),
            Kind::Namespace => typed!(namespaces),
        };
        match &event {
            Event::Init => {
                self.relist_seen.insert(kind, BTreeSet::new());
            }
            Event::InitApply(o) => {
                self.relist_seen.entry(kind).or_default().insert(key_of(o));
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
        // Bookkeeping of unreadable objects.
        let key = match &event {
            Event::InitApply(o) | Event::Apply(o) | Event::Delete(o) => key_of(o),
            _ => return None,
        };
        match (problem, &event) {
            (_, Event::Delete(_)) => {
                self.problems.remove(&(kind, key.clone()));
                self.unreadable_pods.remove(&key);
                None
            }
            (None, _) => {
                self.problems.remove(&(kind, key.clone()));
                self.unreadable_pods.remove(&key);
                None
            }
            (Some(message), Event::InitApply(o) | Event::Apply(o)) => {
                if kind == Kind::Pod && !self.pods.items.contains_key(&key) {
                    let node = o.data.pointer("/spec/nodeName").and_then(|v| v.as_str()).unwrap_or_default();
                    if !node.is_empty() {
                        self.unreadable_pods.insert(key.clone(), node.to_string());
                    }
                }
                let p = Problem { kind, key: key.clone(), message };
                let new = self.problems.get(&(kind, key.clone())) != Some(&p);
                self.problems.insert((kind, key), p.clone());
                new.then_some(p)
            }
            _ => None,
        }
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

    fn has_listed(&self, kind: Kind) -> bool {
        match kind {
            Kind::Pod => self.pods.synced,
            Kind::Node => self.nodes.synced,
            Kind::NodePool => self.nodepools.synced,
            Kind::NodeClaim => self.nodeclaims.synced,
            Kind::NodeClass => self.nodeclasses.synced,
            Kind::DaemonSet => self.daemonsets.synced,
            Kind::Pdb => self.pdbs.synced,
            Kind::Pvc => self.pvcs.synced,
            Kind::Pv => self.pvs.synced,
            Kind::StorageClass => self.storage_classes.synced,
            Kind::Namespace => self.namespaces.synced,
        }
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
    pub fn manifests(&self) -> Manifests {
        let unsafe_nodes: BTreeSet<&str> = self.unreadable_pods.values().map(String::as_str).collect();
        let mut nodes = self.nodes.values();
        for n in &mut nodes {
            if n.metadata.name.as_deref().is_some_and(|name| unsafe_nodes.contains(name)) {
                n.metadata
                    .annotations
                    .get_or_insert_default()
                    .insert(labels::ANNOTATION_DO_NOT_DISRUPT.to_string(), "true".to_string());
            }
        }
        Manifests {
            nodepools: self.nodepools.values(),
            nodeclaims: self.nodeclaims.values(),
            nodeclasses: self.nodeclasses.values(),
            nodes,
            pods: self.pods.shared(),
            deployments: Vec::new(),
            daemonsets: self.daemonsets.values(),
            pdbs: self.pdbs.values(),
            pvcs: self.pvcs.values(),
            pvs: self.pvs.values(),
            storage_classes: self.storage_classes.values(),
            namespaces: self.namespaces.values(),
        }
    }
}

/// Applies one step to a kind's map; returns the parse error, if any, and whether an initial list completed.
fn step_into<T: Clone>(t: &mut Typed<T>, _kind: Kind, step: Step<T>) -> (Option<String>, bool) {
    match step {
        Step::Restart => {
            t.relist = Some(BTreeMap::new());
            (None, false)
        }
        Step::Listed(key, parsed) => {
            let relist = t.relist.get_or_insert_default();
            match parsed {
                Ok(v) => {
                    relist.insert(key, Arc::new(v));
                    (None, false)
                }
                Err(e) => {
                    // Keep the last good version through a relist.
                    if let Some(old) = t.items.get(&key) {
                        relist.insert(key, old.clone());
                    }
                    (Some(e), false)
                }
            }
        }
        Step::Done => {
            t.items = t.relist.take().unwrap_or_default();
            t.synced = true;
            (None, true)
        }
        Step::Applied(key, parsed) => match parsed {
            Ok(v) => {
                t.items.insert(key, Arc::new(v));
                (None, false)
            }
            Err(e) => (Some(e), false),
        },
        Step::Deleted(key) => {
            t.items.remove(&key);
            (None, false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::stored_pod::StoredPod;
    use serde_json::json;

    fn dynamic(v: serde_json::Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    /// A pod requesting `cpu`; an object where a quantity belongs is what a newer or broken writer might
    /// produce, and doesn't parse.
    fn pod(name: &str, node: &str, cpu: serde_json::Value) -> DynamicObject {
        dynamic(json!({
            "metadata": {"name": name, "namespace": "default", "resourceVersion": "1"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
        }))
    }

    fn list<'a>(c: &mut Cache, kind: Kind, objs: impl IntoIterator<Item = &'a DynamicObject>) -> Vec<Problem> {
        let mut out = Vec::new();
        c.apply(kind, Event::Init);
        for o in objs {
            out.extend(c.apply(kind, Event::InitApply(o.clone())));
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
        assert_eq!(c.pods.items.keys().collect::<Vec<_>>(), ["default/b", "default/c"]);
        // After a 410 the watcher relists; until InitDone the old picture stands.
        c.apply(Kind::Pod, Event::Init);
        c.apply(Kind::Pod, Event::InitApply(pod("d", "n2", json!("1"))));
        assert_eq!(c.pods.items.len(), 2);
        c.apply(Kind::Pod, Event::InitDone);
        assert_eq!(c.pods.items.keys().collect::<Vec<_>>(), ["default/d"]);
    }

    #[test]
    fn an_unreadable_object_is_reported_once_skipped_and_guards_its_node() {
        let mut c = Cache::default();
        let bad = pod("bad", "n1", json!({"many": true}));
        let problems = list(&mut c, Kind::Pod, &[pod("ok", "n2", json!("1")), bad.clone()]);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, "default/bad");
        assert!(problems[0].message.contains("spec.containers[0].resources.requests.cpu"), "{}", problems[0]);
        assert_eq!(c.apply(Kind::Pod, Event::Apply(bad.clone())), None, "reported once");
        assert_eq!(c.pods.items.len(), 1);
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
        assert!(c.apply(Kind::Pod, Event::Apply(pod("a", "n1", json!([1])))).is_some());
        let p = &c.pods.items["default/a"];
        assert_eq!(p.node_name(), Some("n1"));
        // ...also through a relist.
        let problems = list(&mut c, Kind::Pod, &[pod("a", "n1", json!([1]))]);
        assert!(problems.is_empty(), "already reported");
        assert!(c.pods.items.contains_key("default/a"));
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
        assert_eq!(c.nodepools.items["default"].spec.template.spec.requirements.len(), 1);
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
            "status": {"phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
                "containerStatuses": [{"name": "app", "image": "web:1", "imageID": "", "ready": false,
                    "restartCount": 3}]}
        });
        let mut c = Cache::default();
        assert!(list(&mut c, Kind::Pod, &[dynamic(full.clone())]).is_empty());
        let kept = &c.pods.items["default/web-1"];
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
        assert_eq!(status.container_statuses, None);
        assert_eq!(status.conditions, untouched.status.as_ref().unwrap().conditions, "conditions stay");
        assert_eq!(kept.metadata.annotations, untouched.metadata.annotations);
        assert_eq!(kept.metadata.managed_fields, None);
        let volumes: Vec<&str> = kept.spec().volumes.iter().flatten().map(|v| v.name.as_str()).collect();
        assert_eq!(volumes, ["data", "scratch"], "claims and ephemeral volumes stay");
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
        let (a, b) = (&c.pods.items["default/a"], &c.pods.items["default/b"]);
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
        let kept = &c.pods.items["default/a"].metadata;
        assert_eq!(kept.managed_fields, None);
        assert_eq!(kept.labels.as_ref().map(|l| l["app"].as_str()), Some("web"), "the rest of the metadata stays");
    }
}
