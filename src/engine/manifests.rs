//! Loading Kubernetes and Karpenter manifests from multi-document YAML, with errors that name the file, line and
//! column. Used by `plan --file` now and by the scenario loader.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimStatus,
    PersistentVolumeClaimVolumeSource, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
    TopologySpreadConstraint, Volume,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::Deserialize;
use thiserror::Error;

use crate::engine::api::nodeoverlay::NodeOverlay;
use crate::engine::api::validation::{FieldPath, PathSegment, validate_nodepool_written};
use crate::engine::api::{EC2NodeClass, NodeClaim, NodePool};
use crate::engine::provisioning::{ClusterSnapshot, Digests, Snapshot};
use crate::engine::scheduling::default_spread::{DefaultSpread, SpreadOwners};
use crate::engine::stored_pod::StoredPod;
use crate::engine::version::KarpenterVersion;

/// A manifest problem, located.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct ManifestError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Every object kind the engine reads. Pods, by far the most numerous, are shared (`Arc`): the live backend reads
/// its watch cache into one of these for every pass, and at tens of thousands of pods a copy would be the largest
/// thing in the process.
#[derive(Debug, Clone, Default)]
pub struct ClusterObjects {
    pub nodepools: Vec<NodePool>,
    pub nodeclaims: Vec<Arc<NodeClaim>>,
    pub nodeclasses: Vec<EC2NodeClass>,
    /// Price and capacity adjustments (`karpenter.sh/v1alpha1`); empty where the CRD isn't installed. Not part of
    /// the provisioning snapshots: the controller evaluates them itself ([`crate::engine::overlay`]).
    pub nodeoverlays: Vec<NodeOverlay>,
    /// CapacityBuffers (`autoscaling.x-k8s.io/v1beta1`) and the PodTemplates they may take their shape from;
    /// empty where the CRD isn't installed. Like overlays, not part of the provisioning snapshots: the controller
    /// resolves them itself ([`crate::engine::capacitybuffer`]).
    pub capacitybuffers: Vec<crate::engine::api::capacitybuffer::CapacityBuffer>,
    pub pod_templates: Vec<k8s_openapi::api::core::v1::PodTemplate>,
    /// Workloads as a live cluster has them, for buffers' `scalableRef`s only (a manifest file's Deployments are
    /// `deployments`, which are expanded into pods).
    pub workloads: Workloads,
    pub nodes: Vec<Arc<Node>>,
    pub pods: Vec<Arc<StoredPod>>,
    pub deployments: Vec<Deployment>,
    pub daemonsets: Vec<DaemonSet>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub pvs: Vec<PersistentVolume>,
    pub storage_classes: Vec<StorageClass>,
    /// CSINodes: their drivers' attach limits.
    pub csinodes: Vec<k8s_openapi::api::storage::v1::CSINode>,
    pub namespaces: Vec<Namespace>,
    /// Services: read only for default topology spread's selectors.
    pub services: Vec<k8s_openapi::api::core::v1::Service>,
    /// Default topology spread (Karpenter v1.15's `--scheduler-config`) with the Services and workload selectors it
    /// deduces selectors from: set by whoever reads the cluster with defaults configured; `None` without.
    pub default_spread: Option<Arc<crate::engine::scheduling::default_spread::DefaultSpread>>,
    /// How often each kind changed in the store this read came from (a watch cache counts what its watches
    /// bring); `None` for a read that doesn't count (a manifest file).
    pub changes: Option<Changes>,
    /// A version per pod of `pods` and the store's digests of them, for a read of a store that keeps them between
    /// reads (a watch cache): passes over the read digest only the pods that changed since the last one. `None`
    /// digests every pod afresh.
    pub pod_versions: Option<PodVersions>,
    /// What reading a manifest file left out or could not do as a cluster would, one sentence each: objects of
    /// kinds the planner does not read, CronJobs, suspended Jobs, PriorityClasses a pod names that are not in the
    /// file. Empty for a live cluster's read.
    pub notes: Vec<String>,
}

/// Changes a store has seen, per kind the controller's steps are keyed on (see
/// [`crate::controller::tick::Versions`]); every other kind is counted in `others`. Each count only grows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Changes {
    pub nodepools: u64,
    pub nodeclasses: u64,
    pub nodeoverlays: u64,
    pub nodeclaims: u64,
    pub nodes: u64,
    pub pods: u64,
    pub capacitybuffers: u64,
    pub pod_templates: u64,
    /// Deployments and StatefulSets.
    pub workloads: u64,
    pub others: u64,
}

/// What a store that is read again and again gives its reads so that pod digests outlive a pass: a version per pod
/// (parallel to [`ClusterObjects::pods`], changing whenever the pod does) and the store's [`Digests`].
#[derive(Debug, Clone)]
pub struct PodVersions {
    pub versions: Vec<u64>,
    pub digests: Arc<Digests>,
}

/// Deployments and StatefulSets read from a live cluster (see [`ClusterObjects::workloads`]).
#[derive(Debug, Clone, Default)]
pub struct Workloads {
    pub deployments: Vec<Deployment>,
    pub statefulsets: Vec<k8s_openapi::api::apps::v1::StatefulSet>,
    /// ReplicaSets and ReplicationControllers: only default topology spread reads them (their selectors).
    pub replicasets: Vec<ReplicaSet>,
    pub replication_controllers: Vec<k8s_openapi::api::core::v1::ReplicationController>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
}

fn located(file: &str, e: &serde_yaml::Error, doc_line: usize) -> ManifestError {
    let (line, column) = e.location().map_or((doc_line, 1), |l| (l.line(), l.column()));
    ManifestError { file: file.to_string(), line, column, message: e.to_string() }
}

/// The value at `path` in a parsed document, if it is written there.
fn value_at<'a>(v: &'a serde_yaml::Value, path: &FieldPath) -> Option<&'a serde_yaml::Value> {
    path.0.iter().try_fold(v, |v, seg| match seg {
        PathSegment::Field(k) | PathSegment::Key(k) => v.get(k.as_str()),
        PathSegment::Index(i) => v.get(*i),
    })
}

/// 1-based line on which each `---`-separated document starts.
fn document_lines(text: &str) -> Vec<usize> {
    let mut starts = vec![1];
    for (i, l) in text.lines().enumerate() {
        if l.starts_with("---") && i > 0 {
            starts.push(i + 2);
        }
    }
    starts
}

impl ClusterObjects {
    /// Parses every document of `text` (named `file` in errors). The whole load fails on the first bad document, so
    /// nothing is half-applied. Kinds the planner does not read are skipped (one note for all of them); workloads are
    /// expanded into the pods their controllers would create now, and pods get their priority from the file's
    /// PriorityClasses, both once every document is read, so the order of the documents does not matter.
    pub fn parse(text: &str, file: &str) -> Result<ClusterObjects, ManifestError> {
        Self::parse_for(text, file, KarpenterVersion::NEWEST)
    }

    /// [`ClusterObjects::parse`], refusing what Karpenter `version`'s API would refuse of a NodePool as written
    /// (see [`validate_nodepool_written`]).
    pub fn parse_for(text: &str, file: &str, version: KarpenterVersion) -> Result<ClusterObjects, ManifestError> {
        let mut out = ClusterObjects::default();
        let lines = document_lines(text);
        // The NodePools as written, by document: whether a field was written is lost once serde defaults it.
        let mut written_pools: BTreeMap<usize, serde_yaml::Value> = BTreeMap::new();
        let kinds: Vec<Option<TypeMeta>> = {
            let mut v = Vec::new();
            for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
                let value = serde_yaml::Value::deserialize(doc)
                    .map_err(|e| located(file, &e, lines.get(i).copied().unwrap_or(1)))?;
                if value.is_null() {
                    v.push(None);
                    continue;
                }
                let tm =
                    TypeMeta::deserialize(&value).map_err(|e| located(file, &e, lines.get(i).copied().unwrap_or(1)))?;
                if (tm.api_version.as_str(), tm.kind.as_str()) == ("karpenter.sh/v1", "NodePool") {
                    written_pools.insert(i, value);
                }
                v.push(Some(tm));
            }
            v
        };
        let mut pods: Vec<Pod> = Vec::new();
        let mut workloads: Vec<Workload> = Vec::new();
        let mut classes: Vec<PriorityClass> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        let mut skipped: Vec<(String, usize)> = Vec::new();
        for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let Some(Some(tm)) = kinds.get(i) else { continue };
            let line = lines.get(i).copied().unwrap_or(1);
            let err = |e: serde_yaml::Error| located(file, &e, line);
            let refuse = |message: String| ManifestError { file: file.to_string(), line, column: 1, message };
            match (tm.api_version.as_str(), tm.kind.as_str()) {
                ("karpenter.sh/v1", "NodePool") => {
                    let pool = NodePool::deserialize(doc).map_err(err)?;
                    let raw = written_pools.get(&i);
                    let written = |p: &FieldPath| raw.is_none_or(|v| value_at(v, p).is_some());
                    if let Some(e) = validate_nodepool_written(&pool, version, written).into_iter().next() {
                        return Err(refuse(format!("NodePool {}: {}: {}", pool.name(), e.path, e.message)));
                    }
                    out.nodepools.push(pool);
                }
                ("karpenter.sh/v1", "NodeClaim") => {
                    out.nodeclaims.push(Arc::new(NodeClaim::deserialize(doc).map_err(err)?))
                }
                ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
                    out.nodeclasses.push(EC2NodeClass::deserialize(doc).map_err(err)?)
                }
                ("karpenter.sh/v1alpha1", "NodeOverlay") => {
                    out.nodeoverlays.push(NodeOverlay::deserialize(doc).map_err(err)?)
                }
                ("autoscaling.x-k8s.io/v1beta1", "CapacityBuffer") => out
                    .capacitybuffers
                    .push(crate::engine::api::capacitybuffer::CapacityBuffer::deserialize(doc).map_err(err)?),
                ("v1", "PodTemplate") => {
                    out.pod_templates.push(k8s_openapi::api::core::v1::PodTemplate::deserialize(doc).map_err(err)?)
                }
                ("v1", "Node") => out.nodes.push(Arc::new(Node::deserialize(doc).map_err(err)?)),
                ("v1", "Pod") => pods.push(Pod::deserialize(doc).map_err(err)?),
                ("apps/v1", "Deployment") => {
                    let d = Deployment::deserialize(doc).map_err(err)?;
                    check_count("Deployment", "spec.replicas", d.spec.replicas.unwrap_or(1)).map_err(refuse)?;
                    out.deployments.push(d);
                }
                ("apps/v1", "DaemonSet") => out.daemonsets.push(DaemonSet::deserialize(doc).map_err(err)?),
                ("apps/v1", "ReplicaSet") => {
                    let rs = ReplicaSet::deserialize(doc).map_err(err)?;
                    named("ReplicaSet", &rs.metadata).map_err(refuse)?;
                    let replicas = rs.spec.replicas.unwrap_or(1);
                    check_count("ReplicaSet", "spec.replicas", replicas).map_err(refuse)?;
                    if replicas > 0 && rs.spec.template.is_none() {
                        return Err(refuse("ReplicaSet spec.template: required when spec.replicas is not 0".into()));
                    }
                    out.workloads.replicasets.push(rs.clone());
                    workloads.push(Workload::ReplicaSet(Box::new(rs)));
                }
                ("apps/v1", "StatefulSet") => {
                    let s = StatefulSet::deserialize(doc).map_err(err)?;
                    named("StatefulSet", &s.metadata).map_err(refuse)?;
                    check_count("StatefulSet", "spec.replicas", s.spec.replicas.unwrap_or(1)).map_err(refuse)?;
                    for (t, claim) in s.spec.volume_claim_templates.iter().flatten().enumerate() {
                        if claim.metadata.name.as_deref().unwrap_or_default().is_empty() {
                            return Err(refuse(format!(
                                "StatefulSet spec.volumeClaimTemplates[{t}].metadata.name: required"
                            )));
                        }
                    }
                    out.workloads.statefulsets.push(s.clone());
                    workloads.push(Workload::StatefulSet(Box::new(s)));
                }
                ("batch/v1", "Job") => {
                    let j = Job::deserialize(doc).map_err(err)?;
                    named("Job", &j.metadata).map_err(refuse)?;
                    let Some(spec) = &j.spec else { return Err(refuse("Job spec: required".into())) };
                    check_count("Job", "spec.parallelism", spec.parallelism.unwrap_or(1)).map_err(refuse)?;
                    workloads.push(Workload::Job(Box::new(j)));
                }
                ("batch/v1", "CronJob") => {
                    let c = CronJob::deserialize(doc).map_err(err)?;
                    notes.push(format!(
                        "{}: no pods until its schedule fires; not planned",
                        object("cronjob", &c.metadata)
                    ));
                }
                ("scheduling.k8s.io/v1", "PriorityClass") => {
                    let c = PriorityClass::deserialize(doc).map_err(err)?;
                    named("PriorityClass", &c.metadata).map_err(refuse)?;
                    classes.push(c);
                }
                ("policy/v1", "PodDisruptionBudget") => {
                    out.pdbs.push(PodDisruptionBudget::deserialize(doc).map_err(err)?)
                }
                ("v1", "PersistentVolumeClaim") => out.pvcs.push(PersistentVolumeClaim::deserialize(doc).map_err(err)?),
                ("v1", "PersistentVolume") => out.pvs.push(PersistentVolume::deserialize(doc).map_err(err)?),
                ("storage.k8s.io/v1", "StorageClass") => {
                    out.storage_classes.push(StorageClass::deserialize(doc).map_err(err)?)
                }
                ("v1", "Namespace") => out.namespaces.push(Namespace::deserialize(doc).map_err(err)?),
                ("storage.k8s.io/v1", "CSINode") => {
                    out.csinodes.push(k8s_openapi::api::storage::v1::CSINode::deserialize(doc).map_err(err)?)
                }
                ("v1", "Service") => {
                    out.services.push(k8s_openapi::api::core::v1::Service::deserialize(doc).map_err(err)?)
                }
                (api, kind) => skip(api, kind, &mut skipped).map_err(refuse)?,
            }
        }
        let priorities = Priorities::new(&classes, &mut notes);
        for p in &mut pods {
            let what = object("pod", &p.metadata);
            priorities.admit(p.spec.get_or_insert_with(Default::default), &what, &mut notes);
        }
        for d in &mut out.deployments {
            let what = object("deployment", &d.metadata);
            priorities.admit(d.spec.template.spec.get_or_insert_with(Default::default), &what, &mut notes);
        }
        for d in &mut out.daemonsets {
            let what = object("daemonset", &d.metadata);
            priorities.admit(d.spec.template.spec.get_or_insert_with(Default::default), &what, &mut notes);
        }
        for w in &mut workloads {
            let what = w.describe();
            if let Some(spec) = w.pod_spec_mut() {
                priorities.admit(spec, &what, &mut notes);
            }
        }
        out.pods.extend(pods.into_iter().map(|p| Arc::new(StoredPod::from(p))));
        out.expand(&workloads, &mut notes);
        if !skipped.is_empty() {
            skipped.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
            let total: usize = skipped.iter().map(|(_, n)| n).sum();
            let kinds: Vec<String> = skipped.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
            notes.push(format!(
                "skipped {total} object{} the planner does not read: {}",
                if total == 1 { "" } else { "s" },
                kinds.join(", ")
            ));
        }
        out.notes = notes;
        Ok(out)
    }

    /// The objects as they are, borrowed (no Deployment expansion, unlike [`ClusterObjects::snapshot`]): what a
    /// controller reads from a watch cache.
    pub fn view(&self) -> ClusterSnapshot<'_> {
        ClusterSnapshot {
            nodepools: &self.nodepools,
            nodeclaims: (&self.nodeclaims).into(),
            nodes: (&self.nodes).into(),
            pods: (&self.pods).into(),
            daemonsets: &self.daemonsets,
            pdbs: &self.pdbs,
            pvcs: &self.pvcs,
            pvs: &self.pvs,
            storage_classes: &self.storage_classes,
            csinodes: &self.csinodes,
            namespaces: &self.namespaces,
            digests: self.pod_digests(),
            virtual_pods: &[],
            default_spread: self.default_spread.as_deref(),
        }
    }

    /// The read as the engine reads it with `pods`, the read's [`ClusterObjects::pending_view`] (the unbound pods
    /// as kube-scheduler leaves them, marked unschedulable), for its pods: borrowed like the view, nothing copied,
    /// with the read's pod digests (the digester uses them only while they match the pods one for one).
    pub fn view_with<'a>(&'a self, pods: &'a [Arc<StoredPod>]) -> ClusterSnapshot<'a> {
        ClusterSnapshot { pods: crate::engine::objects::Objects::Shared(pods), ..self.view() }
    }

    /// The default topology spread `constraints` over this read: selectors deduced from its Services, ReplicaSets,
    /// StatefulSets and ReplicationControllers, and from its Deployments through the ReplicaSet each is expanded
    /// under ([`ClusterObjects::pending_view`] names it after the Deployment). `None` without constraints.
    pub fn default_spread_of(&self, constraints: &[TopologySpreadConstraint]) -> Option<DefaultSpread> {
        if constraints.is_empty() {
            return None;
        }
        let ns = |m: &ObjectMeta| m.namespace.clone().unwrap_or_else(|| "default".into());
        let name = |m: &ObjectMeta| m.name.clone().unwrap_or_default();
        let mut owners = SpreadOwners::default();
        for s in &self.services {
            owners.add_service(&ns(&s.metadata), s.spec.as_ref().and_then(|s| s.selector.as_ref()));
        }
        for rs in &self.workloads.replicasets {
            owners.add_replica_set(&ns(&rs.metadata), &name(&rs.metadata), &rs.spec.selector);
        }
        for d in &self.deployments {
            owners.add_replica_set(&ns(&d.metadata), &name(&d.metadata), &d.spec.selector);
        }
        for s in &self.workloads.statefulsets {
            owners.add_stateful_set(&ns(&s.metadata), &name(&s.metadata), &s.spec.selector);
        }
        for rc in &self.workloads.replication_controllers {
            let selector = rc.spec.as_ref().and_then(|s| s.selector.as_ref());
            owners.add_replication_controller(&ns(&rc.metadata), &name(&rc.metadata), selector);
        }
        DefaultSpread::new(constraints, owners)
    }

    /// Gives this read the default topology spread `constraints` (see [`ClusterObjects::default_spread_of`]).
    pub fn set_default_spread(&mut self, constraints: &[TopologySpreadConstraint]) {
        self.default_spread = self.default_spread_of(constraints).map(Arc::new);
    }

    /// The digests of [`ClusterObjects::pod_versions`], as a snapshot carries them.
    pub fn pod_digests(&self) -> Option<(&[u64], &Digests)> {
        self.pod_versions.as_ref().map(|v| (&v.versions[..], &*v.digests))
    }

    /// The objects as a provisioning snapshot, with pods as [`ClusterObjects::pending_view`] presents them.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            nodepools: self.nodepools.clone(),
            nodeclaims: self.nodeclaims.clone(),
            nodes: self.nodes.clone(),
            pods: self.pending_view(),
            daemonsets: self.daemonsets.clone(),
            pdbs: self.pdbs.clone(),
            pvcs: self.pvcs.clone(),
            pvs: self.pvs.clone(),
            storage_classes: self.storage_classes.clone(),
            csinodes: self.csinodes.clone(),
            namespaces: self.namespaces.clone(),
            default_spread: self.default_spread.clone(),
        }
    }

    /// Pods as a scheduler would see them before Karpenter acts: Deployment replicas expanded (`<name>-<i>`), and
    /// every unbound pod marked `PodScheduled=False/Unschedulable`, as kube-scheduler does when no node fits. Pods
    /// left as they are stay shared with `self`.
    pub fn pending_view(&self) -> Vec<Arc<StoredPod>> {
        let mut pods = self.pods.clone();
        for d in &self.deployments {
            let name = d.metadata.name.clone().unwrap_or_default();
            let ns = d.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            // Through the ReplicaSet the Deployment controller would make, named after the Deployment here.
            let owner = OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: name.clone(),
                uid: String::new(),
                controller: Some(true),
                block_owner_deletion: None,
            };
            let names = (0..d.spec.replicas.unwrap_or(1).max(0)).map(|i| format!("{name}-{i}"));
            let made = pods_from_template(&d.spec.template, &ns, &owner, names);
            pods.extend(made.into_iter().map(|p| Arc::new(StoredPod::from(p))));
        }
        for p in &mut pods {
            if p.metadata.namespace.is_none() {
                Arc::make_mut(p).metadata.namespace = Some("default".into());
            }
            let bound = p.bound_node().is_some();
            let marked = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "PodScheduled"));
            if !bound && !marked {
                let status = Arc::make_mut(p).status.get_or_insert_with(PodStatus::default);
                let conds = status.conditions.get_or_insert_with(Vec::new);
                if !conds.iter().any(|c| c.type_ == "PodScheduled") {
                    conds.push(PodCondition {
                        type_: "PodScheduled".into(),
                        status: "False".into(),
                        reason: Some("Unschedulable".into()),
                        ..Default::default()
                    });
                }
            }
        }
        pods
    }
}

/// The most pods one object may expand into: a typo'd `replicas: 1000000000` is refused instead of filling memory.
pub const MAX_PODS_PER_OBJECT: i32 = 100_000;

/// The PriorityClasses every cluster has, with the values the API server gives them.
pub const SYSTEM_PRIORITY_CLASSES: [(&str, i32); 2] =
    [("system-cluster-critical", 2_000_000_000), ("system-node-critical", 2_000_001_000)];

/// The objects the loader reads, by apiVersion and kind. A kind of these at another apiVersion is refused rather
/// than skipped: a `policy/v1beta1` PodDisruptionBudget left out would change the plan without a word.
const READ: &[(&str, &str)] = &[
    ("karpenter.sh/v1", "NodePool"),
    ("karpenter.sh/v1", "NodeClaim"),
    ("karpenter.k8s.aws/v1", "EC2NodeClass"),
    ("karpenter.sh/v1alpha1", "NodeOverlay"),
    ("autoscaling.x-k8s.io/v1beta1", "CapacityBuffer"),
    ("v1", "PodTemplate"),
    ("v1", "Node"),
    ("v1", "Pod"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("policy/v1", "PodDisruptionBudget"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "PersistentVolume"),
    ("storage.k8s.io/v1", "StorageClass"),
    ("v1", "Namespace"),
];

/// An object of a kind the loader does not read: counted for the note, or refused when leaving it out could only
/// be a mistake (no apiVersion or kind, a kind it reads at another version, another Karpenter object, a List).
fn skip(api: &str, kind: &str, skipped: &mut Vec<(String, usize)>) -> Result<(), String> {
    if api.is_empty() || kind.is_empty() {
        let missing = match (api.is_empty(), kind.is_empty()) {
            (true, true) => "apiVersion and kind",
            (true, false) => "apiVersion",
            _ => "kind",
        };
        return Err(format!("not a Kubernetes object: {missing} missing"));
    }
    if let Some((want, _)) = READ.iter().find(|(_, k)| *k == kind) {
        return Err(format!("unsupported object apiVersion {api:?} kind {kind:?}: {kind} is read as {want}"));
    }
    if api.starts_with("karpenter.sh/") || api.starts_with("karpenter.k8s.aws/") {
        return Err(format!("unsupported object apiVersion {api:?} kind {kind:?}: not a Karpenter v1 object"));
    }
    if kind.ends_with("List") {
        return Err(format!("{api} {kind}: its items are not read; give each object as its own document"));
    }
    match skipped.iter_mut().find(|(k, _)| k == kind) {
        Some((_, n)) => *n += 1,
        None => skipped.push((kind.to_string(), 1)),
    }
    Ok(())
}

fn check_count(kind: &str, field: &str, n: i32) -> Result<(), String> {
    if n > MAX_PODS_PER_OBJECT {
        return Err(format!(
            "{kind} {field}: {n} is more pods than plan expands for one object ({MAX_PODS_PER_OBJECT})"
        ));
    }
    Ok(())
}

fn named(kind: &str, meta: &ObjectMeta) -> Result<(), String> {
    if meta.name.as_deref().unwrap_or_default().is_empty() {
        return Err(format!("{kind} metadata.name: required"));
    }
    Ok(())
}

/// `kind/name` as kubectl writes it, with the namespace when it is not `default`.
fn object(kind: &str, meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() && ns != "default" => format!("{kind}/{name} (namespace {ns})"),
        _ => format!("{kind}/{name}"),
    }
}

/// The workloads expanded once every document is read.
enum Workload {
    Job(Box<Job>),
    StatefulSet(Box<StatefulSet>),
    ReplicaSet(Box<ReplicaSet>),
}

impl Workload {
    fn describe(&self) -> String {
        match self {
            Workload::Job(o) => object("job", &o.metadata),
            Workload::StatefulSet(o) => object("statefulset", &o.metadata),
            Workload::ReplicaSet(o) => object("replicaset", &o.metadata),
        }
    }

    fn pod_spec_mut(&mut self) -> Option<&mut PodSpec> {
        let template = match self {
            Workload::Job(o) => &mut o.spec.as_mut()?.template,
            Workload::StatefulSet(o) => &mut o.spec.template,
            Workload::ReplicaSet(o) => o.spec.template.as_mut()?,
        };
        Some(template.spec.get_or_insert_with(Default::default))
    }
}

/// The API server's Priority admission over the file's PriorityClasses and the two every cluster has.
struct Priorities<'a> {
    classes: BTreeMap<&'a str, &'a PriorityClass>,
    default: Option<&'a PriorityClass>,
}

impl<'a> Priorities<'a> {
    fn new(classes: &'a [PriorityClass], notes: &mut Vec<String>) -> Self {
        let by_name = classes.iter().map(|c| (c.metadata.name.as_deref().unwrap_or_default(), c)).collect();
        let defaults: Vec<&PriorityClass> = classes.iter().filter(|c| c.global_default == Some(true)).collect();
        // As upstream when a race let two in: the lowest value wins.
        let default = defaults.iter().copied().min_by_key(|c| c.value.unwrap_or(0));
        if let (true, Some(d)) = (defaults.len() > 1, default) {
            let names: Vec<&str> = defaults.iter().map(|c| c.metadata.name.as_deref().unwrap_or_default()).collect();
            notes.push(format!(
                "PriorityClasses {} all have globalDefault: true (a real API server refuses all but the first); \
                 pods without a priorityClassName get the lowest, {} ({})",
                names.join(", "),
                d.metadata.name.as_deref().unwrap_or_default(),
                d.value.unwrap_or(0)
            ));
        }
        Priorities { classes: by_name, default }
    }

    /// Sets `spec.priority` and `spec.preemptionPolicy` as admission would for a pod of `what`, or says in a note
    /// why a real API server would refuse it and leaves the spec as it is.
    fn admit(&self, spec: &mut PodSpec, what: &str, notes: &mut Vec<String>) {
        let refuse = if what.starts_with("pod/") { "the pod" } else { "its pods" };
        let named = spec.priority_class_name.clone().filter(|n| !n.is_empty());
        let (class, value, policy) = match &named {
            Some(n) => match self.classes.get(n.as_str()) {
                Some(c) => (n.clone(), c.value.unwrap_or(0), c.preemption_policy.clone()),
                None => match SYSTEM_PRIORITY_CLASSES.iter().find(|(s, _)| s == n) {
                    Some((_, v)) => (n.clone(), *v, None),
                    None => {
                        notes.push(format!(
                            "{what}: priorityClassName {n:?} names no PriorityClass in the file; a real API server \
                             would refuse {refuse} (planned with priority {})",
                            spec.priority.unwrap_or(0)
                        ));
                        return;
                    }
                },
            },
            // No class and no default: priority 0, which is what the engine reads from no priority at all.
            None => match self.default {
                Some(c) => {
                    (c.metadata.name.clone().unwrap_or_default(), c.value.unwrap_or(0), c.preemption_policy.clone())
                }
                None => return,
            },
        };
        let policy = policy.unwrap_or_else(|| "PreemptLowerPriority".into());
        if let Some(p) = spec.priority.filter(|p| *p != value) {
            notes.push(format!(
                "{what}: spec.priority {p} differs from the {value} of PriorityClass {class}; a real API server \
                 would refuse {refuse} (planned with priority {p})"
            ));
            return;
        }
        if let Some(p) = spec.preemption_policy.as_ref().filter(|p| **p != policy) {
            notes.push(format!(
                "{what}: spec.preemptionPolicy {p} differs from the {policy} of PriorityClass {class}; a real API \
                 server would refuse {refuse} (planned as written)"
            ));
            return;
        }
        spec.priority = Some(value);
        spec.preemption_policy = Some(policy);
        spec.priority_class_name = Some(class);
    }
}

/// The pods a controller makes from `template` in `ns`, one per name, each owned (as its controller) by `owner`:
/// the one path for Deployments (through their ReplicaSet), ReplicaSets, StatefulSets and Jobs.
fn pods_from_template(
    template: &PodTemplateSpec,
    ns: &str,
    owner: &OwnerReference,
    names: impl IntoIterator<Item = String>,
) -> Vec<Pod> {
    names
        .into_iter()
        .map(|name| {
            let mut meta = template.metadata.clone().unwrap_or_default();
            meta.uid = Some(format!("{ns}/{name}"));
            meta.name = Some(name);
            meta.namespace = Some(ns.to_string());
            meta.owner_references = Some(vec![owner.clone()]);
            Pod { metadata: meta, spec: template.spec.clone(), status: None }
        })
        .collect()
}

/// FNV-1a: a hash that is the same on every machine and build, so a file always expands to the same names.
fn stable_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// `n` distinct five-character suffixes from the alphabet the API server's `generateName` uses, derived from
/// `seed` instead of drawn at random.
fn suffixes(seed: &str, n: usize) -> Vec<String> {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(n);
    let mut attempt = 0u64;
    while out.len() < n {
        let mut h = stable_hash(&format!("{seed}/{attempt}"));
        attempt += 1;
        let s: String = (0..5)
            .map(|_| {
                let c = ALPHABET[(h % ALPHABET.len() as u64) as usize] as char;
                h /= ALPHABET.len() as u64;
                c
            })
            .collect();
        if seen.insert(s.clone()) {
            out.push(s);
        }
    }
    out
}

/// The object's own uid, or a stable made-up one in the UUID form (for the labels and owner references that carry
/// it).
fn uid_of(kind: &str, meta: &ObjectMeta) -> String {
    if let Some(uid) = meta.uid.clone().filter(|u| !u.is_empty()) {
        return uid;
    }
    let key =
        format!("{kind}/{}/{}", meta.namespace.as_deref().unwrap_or("default"), meta.name.as_deref().unwrap_or(""));
    let (a, b) = (stable_hash(&key), stable_hash(&format!("{key}/2")));
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

fn controlled_by(api_version: &str, kind: &str, meta: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: meta.name.clone().unwrap_or_default(),
        uid: uid_of(kind, meta),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn label(meta: &mut ObjectMeta, key: &str, value: impl Into<String>) {
    meta.labels.get_or_insert_with(Default::default).insert(key.into(), value.into());
}

impl ClusterObjects {
    /// Jobs, StatefulSets and ReplicaSets as the pods (and PVCs) their controllers would create now.
    fn expand(&mut self, workloads: &[Workload], notes: &mut Vec<String>) {
        let default_class = self
            .storage_classes
            .iter()
            .find(|c| {
                c.metadata.annotations.as_ref().is_some_and(|a| {
                    [DEFAULT_CLASS, BETA_DEFAULT_CLASS].iter().any(|k| a.get(*k).is_some_and(|v| v == "true"))
                })
            })
            .and_then(|c| c.metadata.name.clone());
        for w in workloads {
            let pods = match w {
                Workload::Job(j) => job_pods(j, notes),
                Workload::ReplicaSet(rs) => {
                    let owner = rs.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
                    let ns = rs.metadata.namespace.as_deref().unwrap_or("default");
                    let planned = owner.filter(|o| {
                        o.kind == "Deployment"
                            && self.deployments.iter().any(|d| {
                                d.metadata.name.as_deref() == Some(o.name.as_str())
                                    && d.metadata.namespace.as_deref().unwrap_or("default") == ns
                            })
                    });
                    if let Some(o) = planned {
                        notes.push(format!(
                            "{}: its deployment/{} is in the file and planned; not planned twice",
                            w.describe(),
                            o.name
                        ));
                        continue;
                    }
                    replicaset_pods(rs)
                }
                Workload::StatefulSet(s) => {
                    let (pods, claims) = statefulset_pods(s, default_class.as_deref());
                    for c in claims {
                        let key = |c: &PersistentVolumeClaim| {
                            (c.metadata.namespace.clone().unwrap_or_else(|| "default".into()), c.metadata.name.clone())
                        };
                        // A claim already in the file is the one the StatefulSet controller would use.
                        if !self.pvcs.iter().any(|p| key(p) == key(&c)) {
                            self.pvcs.push(c);
                        }
                    }
                    pods
                }
            };
            self.pods.extend(pods.into_iter().map(|p| Arc::new(StoredPod::from(p))));
        }
    }
}

const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
const BETA_DEFAULT_CLASS: &str = "storageclass.beta.kubernetes.io/is-default-class";

/// The pods a Job runs now: `parallelism` (default 1), at most `completions` when that is set, none while it is
/// suspended. Named and labelled as the Job controller and the API server name and label them.
fn job_pods(job: &Job, notes: &mut Vec<String>) -> Vec<Pod> {
    let Some(spec) = &job.spec else { return Vec::new() };
    if spec.suspend == Some(true) {
        notes.push(format!("{}: suspended; no pods until it is resumed", object("job", &job.metadata)));
        return Vec::new();
    }
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    let n = spec.completions.map_or(parallelism, |c| parallelism.min(c.max(0)));
    let name = job.metadata.name.clone().unwrap_or_default();
    let ns = job.metadata.namespace.as_deref().unwrap_or("default");
    let owner = controlled_by("batch/v1", "Job", &job.metadata);
    let mut template = spec.template.clone();
    let meta = template.metadata.get_or_insert_with(Default::default);
    // What the API server adds to the template of a Job without a manual selector.
    if spec.manual_selector != Some(true) {
        for (k, v) in [
            ("batch.kubernetes.io/controller-uid", owner.uid.as_str()),
            ("batch.kubernetes.io/job-name", name.as_str()),
            ("controller-uid", owner.uid.as_str()),
            ("job-name", name.as_str()),
        ] {
            label(meta, k, v);
        }
    }
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    let prefix = |i: usize| if indexed { format!("{name}-{i}-") } else { format!("{name}-") };
    let n = n as usize;
    let tails = suffixes(&format!("job/{ns}/{name}"), n);
    let names = tails.iter().enumerate().map(|(i, s)| format!("{}{s}", prefix(i)));
    let mut pods = pods_from_template(&template, ns, &owner, names);
    for (i, p) in pods.iter_mut().enumerate() {
        p.metadata.generate_name = Some(prefix(i));
        if indexed {
            const INDEX: &str = "batch.kubernetes.io/job-completion-index";
            label(&mut p.metadata, INDEX, i.to_string());
            p.metadata.annotations.get_or_insert_with(Default::default).insert(INDEX.into(), i.to_string());
            let spec = p.spec.get_or_insert_with(Default::default);
            if spec.hostname.as_deref().unwrap_or_default().is_empty() {
                spec.hostname = Some(format!("{name}-{i}"));
            }
        }
    }
    pods
}

/// A ReplicaSet's `replicas` pods (default 1), `<name>-<suffix>` as the ReplicaSet controller's `generateName`.
fn replicaset_pods(rs: &ReplicaSet) -> Vec<Pod> {
    let Some(template) = &rs.spec.template else { return Vec::new() };
    let name = rs.metadata.name.clone().unwrap_or_default();
    let ns = rs.metadata.namespace.as_deref().unwrap_or("default");
    let n = rs.spec.replicas.unwrap_or(1).max(0) as usize;
    let owner = controlled_by("apps/v1", "ReplicaSet", &rs.metadata);
    let names = suffixes(&format!("replicaset/{ns}/{name}"), n).into_iter().map(|s| format!("{name}-{s}"));
    let mut pods = pods_from_template(template, ns, &owner, names);
    for p in &mut pods {
        p.metadata.generate_name = Some(format!("{name}-"));
    }
    pods
}

/// A StatefulSet's pods `<name>-<ordinal>` (from `spec.ordinals.start`, `replicas` of them, default 1) and the
/// claims its `volumeClaimTemplates` make for them, `<template>-<name>-<ordinal>`, unbound (`Pending`): where they
/// may bind is their StorageClass's to say. A template without a class gets the file's default StorageClass, as the
/// API server's DefaultStorageClass admission gives it.
fn statefulset_pods(s: &StatefulSet, default_class: Option<&str>) -> (Vec<Pod>, Vec<PersistentVolumeClaim>) {
    let name = s.metadata.name.clone().unwrap_or_default();
    let ns = s.metadata.namespace.as_deref().unwrap_or("default");
    let start = i64::from(s.spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0).max(0));
    let replicas = i64::from(s.spec.replicas.unwrap_or(1).max(0));
    let owner = controlled_by("apps/v1", "StatefulSet", &s.metadata);
    let ordinals: Vec<i64> = (start..start + replicas).collect();
    let mut pods = pods_from_template(&s.spec.template, ns, &owner, ordinals.iter().map(|o| format!("{name}-{o}")));
    let templates = s.spec.volume_claim_templates.as_deref().unwrap_or_default();
    let mut claims = Vec::new();
    for (p, ordinal) in pods.iter_mut().zip(&ordinals) {
        let pod_name = p.metadata.name.clone().unwrap_or_default();
        label(&mut p.metadata, "statefulset.kubernetes.io/pod-name", pod_name.clone());
        label(&mut p.metadata, "apps.kubernetes.io/pod-index", ordinal.to_string());
        let spec = p.spec.get_or_insert_with(Default::default);
        spec.hostname = Some(pod_name);
        spec.subdomain = s.spec.service_name.clone().filter(|n| !n.is_empty());
        let mut volumes = Vec::new();
        for t in templates {
            let template_name = t.metadata.name.clone().unwrap_or_default();
            let claim_name = format!("{template_name}-{name}-{ordinal}");
            let mut claim = t.clone();
            claim.metadata.name = Some(claim_name.clone());
            claim.metadata.namespace = Some(ns.to_string());
            for (k, v) in s.spec.selector.match_labels.iter().flatten() {
                label(&mut claim.metadata, k, v.clone());
            }
            let claim_spec = claim.spec.get_or_insert_with(Default::default);
            if claim_spec.storage_class_name.is_none() {
                claim_spec.storage_class_name = default_class.map(str::to_string);
            }
            claim.status = Some(PersistentVolumeClaimStatus { phase: Some("Pending".into()), ..Default::default() });
            claims.push(claim);
            volumes.push(Volume {
                name: template_name,
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource { claim_name, read_only: None }),
                ..Default::default()
            });
        }
        // The claims' volumes first, then the template's own but those the claims replace (upstream's
        // updateStorage).
        let own = spec.volumes.take().unwrap_or_default();
        volumes
            .extend(own.into_iter().filter(|v| !templates.iter().any(|t| t.metadata.name.as_ref() == Some(&v.name))));
        spec.volumes = (!volumes.is_empty()).then_some(volumes);
    }
    (pods, claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_and_locates_errors() {
        let text = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: g, kind: k, name: n}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 3\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: c, image: x}]\n";
        let m = ClusterObjects::parse(text, "m.yaml").unwrap();
        assert_eq!(m.nodepools.len(), 1);
        assert_eq!(m.pending_view().len(), 3);

        let bad = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: 5\n";
        let e = ClusterObjects::parse(bad, "bad.yaml").unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("bad.yaml", 5), "{e}");

        // A kind the planner does not read is skipped with a note; one it reads, at another version, is refused.
        let unknown = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\napiVersion: v9\nkind: Thing\n";
        let m = ClusterObjects::parse(unknown, "u.yaml").unwrap();
        assert_eq!(m.notes, ["skipped 1 object the planner does not read: Thing ×1"]);
        let old = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\napiVersion: policy/v1beta1\n\
                   kind: PodDisruptionBudget\nmetadata: {name: p}\n";
        let e = ClusterObjects::parse(old, "u.yaml").unwrap_err();
        assert_eq!(e.line, 5, "{e}");
        assert!(e.message.contains("policy/v1"), "{e}");

        let syntax = "apiVersion: v1\nkind: [Pod\n";
        assert!(ClusterObjects::parse(syntax, "s.yaml").is_err());
    }

    #[test]
    fn loads_node_overlays_and_locates_their_errors() {
        let text = "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: spot-discount}\nspec:\n  \
                    requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]\n  \
                    priceAdjustment: \"-10%\"\n  weight: 10\n";
        let m = ClusterObjects::parse(text, "o.yaml").unwrap();
        assert_eq!(m.nodeoverlays.len(), 1);
        let o = &m.nodeoverlays[0];
        assert_eq!((o.name(), o.weight(), o.price_string()), ("spot-discount", 10, Some("-10%")));

        let bad = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: karpenter.sh/v1alpha1\n\
                   kind: NodeOverlay\nmetadata: {name: o}\nspec:\n  weight: heavy\n";
        let e = ClusterObjects::parse(bad, "bad.yaml").unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("bad.yaml", 9), "{e}");

        // Only the alpha version exists upstream.
        let v1 = "apiVersion: karpenter.sh/v1\nkind: NodeOverlay\nmetadata: {name: o}\n";
        assert!(ClusterObjects::parse(v1, "v1.yaml").unwrap_err().message.contains("NodeOverlay"));
    }
}

#[cfg(test)]
mod workload_tests {
    use super::*;

    const NODEPOOL: &str = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  \
                            template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, \
                            name: default}\n";

    fn job(name: &str, spec: &str) -> String {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: {name}, namespace: batch}}\nspec:\n{spec}  \
             template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      restartPolicy: Never\n      \
             containers:\n      - name: work\n        image: busybox:1.36\n        resources: {{requests: {{cpu: \
             500m, memory: 256Mi}}}}\n"
        )
    }

    #[test]
    fn jobs_run_parallelism_pods_at_most_completions() {
        for (spec, want) in [
            ("", 1),
            ("  parallelism: 3\n  completions: 5\n", 3),
            ("  parallelism: 5\n  completions: 2\n", 2),
            ("  completions: 4\n", 1),
            ("  parallelism: 4\n", 4),
            ("  parallelism: 0\n  completions: 3\n", 0),
            ("  parallelism: 3\n  suspend: true\n", 0),
        ] {
            let m = ClusterObjects::parse(&job("etl", spec), "j.yaml").unwrap();
            assert_eq!(m.pods.len(), want, "{spec:?}");
        }
        let m = ClusterObjects::parse(&job("etl", "  parallelism: 3\n  suspend: true\n"), "j.yaml").unwrap();
        assert_eq!(m.notes, ["job/etl (namespace batch): suspended; no pods until it is resumed"]);
    }

    #[test]
    fn job_pods_are_named_labelled_and_owned_as_the_job_controller_makes_them() {
        let text = job("etl", "  parallelism: 3\n  completions: 5\n");
        let m = ClusterObjects::parse(&text, "j.yaml").unwrap();
        let names: BTreeSet<String> = m.pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
        assert_eq!(names.len(), 3, "distinct: {names:?}");
        for p in &m.pods {
            let name = p.metadata.name.as_deref().unwrap();
            let suffix = name.strip_prefix("etl-").expect(name);
            assert_eq!(suffix.len(), 5, "{name}");
            assert!(suffix.bytes().all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)), "{name}");
            assert_eq!(p.metadata.generate_name.as_deref(), Some("etl-"));
            assert_eq!(p.metadata.namespace.as_deref(), Some("batch"));
            let labels = p.metadata.labels.as_ref().unwrap();
            assert_eq!(labels["app"], "etl");
            assert_eq!(labels["batch.kubernetes.io/job-name"], "etl");
            assert_eq!(labels["job-name"], "etl");
            let uid = &labels["batch.kubernetes.io/controller-uid"];
            assert_eq!(&labels["controller-uid"], uid);
            assert_eq!(uid.len(), 36, "UUID form: {uid}");
            let owners = p.metadata.owner_references.as_deref().unwrap();
            assert_eq!(owners.len(), 1);
            let o = &owners[0];
            assert_eq!((o.api_version.as_str(), o.kind.as_str(), o.name.as_str()), ("batch/v1", "Job", "etl"));
            assert_eq!((o.controller, o.block_owner_deletion, &o.uid), (Some(true), Some(true), uid));
            assert_eq!(p.spec().containers[0].name, "work");
        }
        // The same file gives the same names.
        let again: BTreeSet<String> = ClusterObjects::parse(&text, "j.yaml")
            .unwrap()
            .pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, again);
        // Pending to the planner, as any unbound pod.
        assert_eq!(m.pending_view().len(), 3);
    }

    #[test]
    fn indexed_jobs_carry_their_completion_index() {
        let m = ClusterObjects::parse(
            &job("shard", "  completionMode: Indexed\n  completions: 2\n  parallelism: 2\n"),
            "j",
        )
        .unwrap();
        assert_eq!(m.pods.len(), 2);
        for (i, p) in m.pods.iter().enumerate() {
            let name = p.metadata.name.as_deref().unwrap();
            assert!(name.starts_with(&format!("shard-{i}-")) && name.len() == "shard-0-".len() + 5, "{name}");
            let labels = p.metadata.labels.as_ref().unwrap();
            assert_eq!(labels["batch.kubernetes.io/job-completion-index"], i.to_string());
            assert_eq!(p.spec().hostname.as_deref(), Some(format!("shard-{i}").as_str()));
        }
    }

    const STATEFULSET: &str = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  \
        serviceName: db\n  replicas: 3\n  selector: {matchLabels: {app: db}}\n  template:\n    metadata: {labels: \
        {app: db}}\n    spec:\n      containers:\n      - name: postgres\n        image: postgres:16\n        \
        volumeMounts: [{name: data, mountPath: /var/lib/postgresql/data}]\n        resources: {requests: {cpu: \"1\", \
        memory: 2Gi}}\n      volumes: [{name: data, emptyDir: {}}, {name: scratch, emptyDir: {}}]\n  \
        volumeClaimTemplates:\n  - metadata: {name: data}\n    spec:\n      accessModes: [ReadWriteOnce]\n      \
        resources: {requests: {storage: 20Gi}}\n";

    const GP3: &str = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: gp3\n  annotations: \
        {storageclass.kubernetes.io/is-default-class: \"true\"}\nprovisioner: ebs.csi.aws.com\n\
        volumeBindingMode: WaitForFirstConsumer\n";

    #[test]
    fn statefulsets_become_ordinal_pods_with_their_claims() {
        let m = ClusterObjects::parse(&format!("{STATEFULSET}---\n{GP3}"), "s.yaml").unwrap();
        let names: Vec<&str> = m.pods.iter().map(|p| p.metadata.name.as_deref().unwrap()).collect();
        assert_eq!(names, ["db-0", "db-1", "db-2"]);
        let claims: Vec<&str> = m.pvcs.iter().map(|c| c.metadata.name.as_deref().unwrap()).collect();
        assert_eq!(claims, ["data-db-0", "data-db-1", "data-db-2"]);
        for (i, (p, c)) in m.pods.iter().zip(&m.pvcs).enumerate() {
            let labels = p.metadata.labels.as_ref().unwrap();
            assert_eq!(labels["statefulset.kubernetes.io/pod-name"], format!("db-{i}"));
            assert_eq!(labels["apps.kubernetes.io/pod-index"], i.to_string());
            let o = &p.metadata.owner_references.as_deref().unwrap()[0];
            assert_eq!((o.kind.as_str(), o.name.as_str(), o.controller), ("StatefulSet", "db", Some(true)));
            assert_eq!((p.spec().hostname.as_deref(), p.spec().subdomain.as_deref()), (Some(names[i]), Some("db")));
            // The claim's volume replaces the template's volume of the same name; the others stay.
            let volumes: Vec<(&str, Option<&str>)> = p
                .spec()
                .volumes
                .iter()
                .flatten()
                .map(|v| (v.name.as_str(), v.persistent_volume_claim.as_ref().map(|c| c.claim_name.as_str())))
                .collect();
            assert_eq!(volumes, [("data", Some(format!("data-db-{i}").as_str())), ("scratch", None)]);
            assert_eq!(c.metadata.namespace.as_deref(), Some("default"));
            assert_eq!(c.metadata.labels.as_ref().unwrap()["app"], "db");
            assert_eq!(c.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Pending"));
            assert_eq!(c.spec.as_ref().unwrap().volume_name, None);
            // The default StorageClass, as the API server's admission sets it.
            assert_eq!(c.spec.as_ref().unwrap().storage_class_name.as_deref(), Some("gp3"));
        }
        // A claim already in the file is the one used, not made again; ordinals may start elsewhere.
        let existing = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data-db-5}\nspec:\n  \
                        storageClassName: io2\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n";
        let text = format!(
            "{existing}---\n{}",
            STATEFULSET.replace("  replicas: 3\n", "  replicas: 2\n  ordinals: {start: 5}\n")
        );
        let m = ClusterObjects::parse(&text, "s.yaml").unwrap();
        let claims: Vec<(&str, Option<&str>)> = m
            .pvcs
            .iter()
            .map(|c| (c.metadata.name.as_deref().unwrap(), c.spec.as_ref().unwrap().storage_class_name.as_deref()))
            .collect();
        assert_eq!(claims, [("data-db-5", Some("io2")), ("data-db-6", None)]);
        let names: Vec<&str> = m.pods.iter().map(|p| p.metadata.name.as_deref().unwrap()).collect();
        assert_eq!(names, ["db-5", "db-6"]);
        assert_eq!(m.snapshot().pvcs.len(), 2);
    }

    #[test]
    fn replicasets_become_their_pods_unless_their_deployment_is_planned() {
        let rs = "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web-7d4b9c}\nspec:\n  replicas: 2\n  \
                  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      \
                  containers: [{name: nginx, image: nginx:1.27, resources: {requests: {cpu: 250m, memory: 128Mi}}}]\n";
        let m = ClusterObjects::parse(rs, "r.yaml").unwrap();
        assert_eq!(m.pods.len(), 2);
        for p in &m.pods {
            assert!(p.metadata.name.as_deref().unwrap().starts_with("web-7d4b9c-"));
            let o = &p.metadata.owner_references.as_deref().unwrap()[0];
            assert_eq!((o.kind.as_str(), o.name.as_str(), o.controller), ("ReplicaSet", "web-7d4b9c", Some(true)));
        }
        let owned = rs.replace(
            "metadata: {name: web-7d4b9c}",
            "metadata:\n  name: web-7d4b9c\n  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, \
             uid: u, controller: true}]",
        );
        let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 2\n  \
                          selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    \
                          spec:\n      containers: [{name: nginx, image: nginx:1.27}]\n";
        let m = ClusterObjects::parse(&format!("{owned}---\n{deployment}"), "r.yaml").unwrap();
        assert_eq!((m.pods.len(), m.pending_view().len()), (0, 2));
        assert_eq!(
            m.notes,
            ["replicaset/web-7d4b9c: its deployment/web is in the file and planned; not planned twice"]
        );
    }

    const CLASSES: &str = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: standard}\n\
        value: 1000\nglobalDefault: true\n---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: \
        batch-low}\nvalue: -10\npreemptionPolicy: Never\n";

    fn pod(name: &str, class: Option<&str>) -> String {
        let class = class.map(|c| format!("  priorityClassName: {c}\n")).unwrap_or_default();
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{class}  containers: [{{name: c, image: x}}]\n"
        )
    }

    /// A pod's priority, PriorityClass and preemption policy.
    type Admitted = (Option<i32>, Option<String>, Option<String>);

    #[test]
    fn pods_get_their_priority_as_admission_gives_it_whatever_the_order() {
        let pods = [
            pod("plain", None),
            pod("low", Some("batch-low")),
            pod("critical", Some("system-node-critical")),
            pod("cluster", Some("system-cluster-critical")),
            pod("typo", Some("hihg")),
        ]
        .join("---\n");
        let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 2\n  \
                          selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    \
                          spec:\n      priorityClassName: batch-low\n      containers: [{name: c, image: x}]\n";
        for text in [format!("{pods}---\n{deployment}---\n{CLASSES}"), format!("{CLASSES}---\n{deployment}---\n{pods}")]
        {
            let m = ClusterObjects::parse(&text, "p.yaml").unwrap();
            let got: BTreeMap<String, Admitted> = m
                .pending_view()
                .iter()
                .map(|p| {
                    let s = p.spec();
                    (
                        p.metadata.name.clone().unwrap(),
                        (s.priority, s.priority_class_name.clone(), s.preemption_policy.clone()),
                    )
                })
                .collect();
            let want = |p: Option<i32>, c: Option<&str>, pp: Option<&str>| (p, c.map(Into::into), pp.map(Into::into));
            assert_eq!(got["plain"], want(Some(1000), Some("standard"), Some("PreemptLowerPriority")));
            assert_eq!(got["low"], want(Some(-10), Some("batch-low"), Some("Never")));
            assert_eq!(
                got["critical"],
                want(Some(2_000_001_000), Some("system-node-critical"), Some("PreemptLowerPriority"))
            );
            assert_eq!(got["cluster"].0, Some(2_000_000_000));
            assert_eq!(got["typo"], want(None, Some("hihg"), None));
            assert_eq!(got["web-0"], want(Some(-10), Some("batch-low"), Some("Never")));
            assert_eq!(got["web-1"].0, Some(-10));
            assert_eq!(
                m.notes,
                ["pod/typo: priorityClassName \"hihg\" names no PriorityClass in the file; a real API server would \
                  refuse the pod (planned with priority 0)"]
            );
        }
        // Without a default, a pod without a class keeps no priority (0 to the engine), and says nothing.
        let m = ClusterObjects::parse(&pod("plain", None), "p.yaml").unwrap();
        assert_eq!((m.pods[0].spec().priority, m.notes.len()), (None, 0));
        // A pod whose written priority is not its class's would be refused.
        let text =
            format!("{CLASSES}---\n{}", pod("odd", Some("batch-low")).replace("spec:\n", "spec:\n  priority: 5\n"));
        let m = ClusterObjects::parse(&text, "p.yaml").unwrap();
        assert_eq!(m.pods[0].spec().priority, Some(5));
        assert!(m.notes[0].starts_with("pod/odd: spec.priority 5 differs from the -10 of PriorityClass batch-low"));
    }

    #[test]
    fn other_kinds_are_skipped_with_one_note_and_cronjobs_with_their_own() {
        let other = |api: &str, kind: &str, name: &str| {
            format!("apiVersion: {api}\nkind: {kind}\nmetadata: {{name: {name}}}\n")
        };
        let cron = "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: backup, namespace: ops}\nspec:\n  schedule: \
                    \"0 3 * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: \
                    OnFailure\n          containers: [{name: b, image: x}]\n";
        let text = [
            other("v1", "Secret", "a"),
            other("v1", "ConfigMap", "b"),
            other("v1", "Secret", "c"),
            other("cert-manager.io/v1", "Certificate", "d"),
            cron.to_string(),
            NODEPOOL.to_string(),
        ]
        .join("---\n");
        let m = ClusterObjects::parse(&text, "o.yaml").unwrap();
        assert_eq!(m.nodepools.len(), 1);
        assert_eq!(m.pods.len(), 0);
        assert_eq!(
            m.notes,
            [
                "cronjob/backup (namespace ops): no pods until its schedule fires; not planned",
                "skipped 4 objects the planner does not read: Secret ×2, ConfigMap ×1, Certificate ×1",
            ]
        );
    }

    #[test]
    fn what_cannot_be_read_is_still_an_error_where_it_is() {
        let cases = [
            // No apiVersion or kind.
            (format!("{NODEPOOL}---\nmetadata: {{name: x}}\n"), 9, "apiVersion and kind missing"),
            (format!("{NODEPOOL}---\nkind: Service\n"), 9, "apiVersion missing"),
            // A kind that is read, malformed.
            (format!("{NODEPOOL}---\n{}", job("etl", "  parallelism: many\n")), 13, "invalid"),
            (
                format!(
                    "{NODEPOOL}---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: p}}\nvalue: high\n"
                ),
                12,
                "invalid",
            ),
            // A kind that is read, at a version that is not.
            (
                format!("{NODEPOOL}---\napiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {{name: c}}\n"),
                9,
                "batch/v1",
            ),
            // Another Karpenter object, and a List whose items would go unread.
            (format!("{NODEPOOL}---\napiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\n"), 9, "Karpenter"),
            (format!("{NODEPOOL}---\napiVersion: v1\nkind: List\nitems: []\n"), 9, "items"),
            // More pods than one object may expand into, and objects without a name.
            (job("etl", "  parallelism: 2000000000\n"), 1, "more pods"),
            (STATEFULSET.replace("metadata: {name: db}", "metadata: {}"), 1, "metadata.name"),
            (STATEFULSET.replace("  - metadata: {name: data}", "  - metadata: {}"), 1, "volumeClaimTemplates[0]"),
        ];
        for (text, line, message) in cases {
            let e = ClusterObjects::parse(&text, "bad.yaml").unwrap_err();
            assert_eq!((e.file.as_str(), e.line), ("bad.yaml", line), "{e}\n{text}");
            assert!(e.message.contains(message), "{e}");
        }
    }
}
