//! Provisioning: which pods need capacity, when a batch of them is complete, and the NodeClaims to create for
//! them — from a snapshot of upstream-shaped objects, with no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use rustc_hash::FxHashMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, Toleration};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::engine::api::common::NodeSelectorRequirementWithMinValues;
use crate::engine::api::nodeclaim::ResourceRequirements;
use crate::engine::api::{NodeClaim, NodeClaimSpec, NodePool};
use crate::engine::catalog::{InstanceType, VolumeLimits};
use crate::engine::explain::PodIgnored;
use crate::engine::labels::{self, LabelPolicy};
use crate::engine::node_digests::{NodeDigester, NodeDigests};
use crate::engine::objects::Objects;
use crate::engine::requirements::{Operator, Requirement};
use crate::engine::resources::Resources;
use crate::engine::scheduling::default_spread::DefaultSpread;
use crate::engine::scheduling::pod::{self, PodData};
use crate::engine::scheduling::selector::Selector;
use crate::engine::scheduling::volumes::{self, VolumeIndex};
use crate::engine::scheduling::{self, ExistingNode, Input, NewNodeClaim, Results, SchedulerOptions};
use crate::engine::stored_pod::StoredPod;

/// Milliseconds since the Unix epoch on the injected clock.
pub type Millis = i64;

/// Upstream's batching of pending pods: a batch closes when no new pod arrived for `idle`, or `max` after it
/// opened. Re-triggering a pod already in the batch does not extend it.
#[derive(Debug, Clone)]
pub struct Batcher {
    pub idle: Millis,
    pub max: Millis,
    opened: Option<Millis>,
    last_new: Millis,
    seen: BTreeSet<String>,
}

impl Batcher {
    pub fn new(idle: Millis, max: Millis) -> Self {
        Batcher { idle, max, opened: None, last_new: 0, seen: BTreeSet::new() }
    }

    /// A pod (by uid) or node wants capacity.
    pub fn trigger(&mut self, id: &str, now: Millis) {
        if self.seen.insert(id.to_string()) {
            self.last_new = now;
            self.opened.get_or_insert(now);
        }
    }

    pub fn is_open(&self) -> bool {
        self.opened.is_some()
    }

    /// When the batch will close if nothing new arrives.
    pub fn deadline(&self) -> Option<Millis> {
        self.opened.map(|o| (self.last_new + self.idle).min(o + self.max))
    }

    /// True once the batch is complete; the caller then provisions and calls [`Batcher::reset`].
    pub fn ready(&self, now: Millis) -> bool {
        self.deadline().is_some_and(|d| now >= d)
    }

    pub fn reset(&mut self) {
        self.opened = None;
        self.seen.clear();
    }
}

/// Upstream `IsProvisionable`: kube-scheduler marked the pod unschedulable, it isn't bound or preempting, and it
/// isn't a DaemonSet or static pod.
pub fn is_provisionable(p: &StoredPod) -> bool {
    let unschedulable = p.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
        cs.iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
    });
    unschedulable
        && p.bound_node().is_none()
        && p.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).is_none_or(str::is_empty)
        && !p.owned_by("DaemonSet")
        && !p.owned_by("Node")
}

/// Pods of a deleting node that must be re-homed: active (StatefulSet pods even while terminating), not daemon or
/// static, no do-not-disrupt, not covered by a fully blocking PDB.
pub fn is_currently_reschedulable(p: &StoredPod, pdbs: &[PodDisruptionBudget]) -> bool {
    let terminating = p.metadata.deletion_timestamp.is_some();
    if p.is_terminal() || (terminating && !p.owned_by("StatefulSet")) {
        return false;
    }
    if p.owned_by("DaemonSet") || p.owned_by("Node") {
        return false;
    }
    if p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::ANNOTATION_DO_NOT_DISRUPT))
        .is_some_and(|v| v == "true")
    {
        return false;
    }
    !pdbs.iter().any(|pdb| fully_blocks(pdb, p))
}

fn fully_blocks(pdb: &PodDisruptionBudget, p: &StoredPod) -> bool {
    if pdb.metadata.namespace != p.metadata.namespace {
        return false;
    }
    let Some(spec) = &pdb.spec else { return false };
    let selects = spec.selector.as_ref().is_some_and(|s| {
        Selector::from_label_selector(s).matches(p.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()))
    });
    if !selects {
        return false;
    }
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let zero = |v: &IntOrString| matches!(v, IntOrString::Int(0)) || matches!(v, IntOrString::String(s) if s == "0%");
    spec.max_unavailable.as_ref().is_some_and(zero)
        || spec.min_available.as_ref().is_some_and(|v| matches!(v, IntOrString::String(s) if s == "100%"))
}

/// What passes derive from a store's objects, kept between passes by a caller that reads the same store again and
/// again (the simulator, the watch cache): scheduling digests ([`PodData`]) of pods, and [`NodeDigests`] of nodes.
/// Digesting every pod of a 10,000-pod cluster for every pass cost a sixth of a busy simulation, while most pods had
/// not changed since the pass before. The caller gives each pod a version that changes whenever the pod does (see
/// [`ClusterSnapshot::digests`]); a digest is reused only for the same version and the same namespaces, so it is
/// always the one [`pod::pod_data`] would compute. Nodes are kept by the identity of their shared objects.
#[derive(Debug, Default)]
pub struct Digests {
    inner: Mutex<DigestCache>,
    pub nodes: NodeDigests,
}

#[derive(Debug, Default)]
struct DigestCache {
    /// The namespaces (name, labels) the digests were computed with (affinity namespace selectors read them).
    namespaces: Vec<(String, BTreeMap<String, String>)>,
    /// The [`DefaultSpread::key`] they were computed with, if any.
    default_spread: Option<u64>,
    by_version: FxHashMap<u64, Result<Arc<PodData>, pod::PodError>>,
    /// One copy of each distinct label set the kept digests carry (20,000 pods of a few workloads have a few sets).
    labels: rustc_hash::FxHashSet<Arc<BTreeMap<String, String>>>,
    /// One copy of each distinct toleration list, by a hash of it (`Toleration` has no `Hash` of its own).
    tolerations: FxHashMap<u64, Vec<Arc<[Toleration]>>>,
}

impl DigestCache {
    /// The kept copy of `d`'s label set and toleration list, in place of its own.
    fn share(&mut self, d: &mut PodData) {
        match self.labels.get(&*d.labels) {
            Some(same) => d.labels = same.clone(),
            None => {
                self.labels.insert(d.labels.clone());
            }
        }
        let kept = self.tolerations.entry(tolerations_hash(&d.tolerations)).or_default();
        match kept.iter().find(|t| **t == d.tolerations) {
            Some(same) => d.tolerations = same.clone(),
            None => kept.push(d.tolerations.clone()),
        }
    }

    /// Forgets label sets and toleration lists no kept digest carries any more.
    fn forget_unshared(&mut self) {
        self.labels.retain(|l| Arc::strong_count(l) > 1);
        self.tolerations.retain(|_, kept| {
            kept.retain(|t| Arc::strong_count(t) > 1);
            !kept.is_empty()
        });
    }
}

fn tolerations_hash(ts: &[Toleration]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    for t in ts {
        (&t.key, &t.operator, &t.value, &t.effect, t.toleration_seconds).hash(&mut h);
    }
    h.finish()
}

/// Digests the pods of one snapshot, through the caller's [`Digests`] when there is one.
struct Digester<'a> {
    namespaces: &'a [(String, BTreeMap<String, String>)],
    default_spread: Option<&'a DefaultSpread>,
    cache: Option<(&'a [u64], MutexGuard<'a, DigestCache>)>,
    /// The digests this snapshot used: what the cache keeps afterwards (pods gone or changed are forgotten).
    used: FxHashMap<u64, Result<Arc<PodData>, pod::PodError>>,
}

impl<'a> Digester<'a> {
    fn new(snap: &ClusterSnapshot<'a>, namespaces: &'a [(String, BTreeMap<String, String>)]) -> Self {
        let cache = snap.digests.filter(|(versions, _)| versions.len() == snap.pods.len()).map(|(versions, d)| {
            // A poisoned lock only means another pass panicked mid-update; start over rather than trust it.
            let mut inner = d.inner.lock().unwrap_or_else(|e| {
                let mut g = e.into_inner();
                g.by_version.clear();
                g
            });
            let spread = snap.default_spread.map(DefaultSpread::key);
            if inner.namespaces.as_slice() != namespaces || inner.default_spread != spread {
                inner.by_version.clear();
                inner.namespaces = namespaces.to_vec();
                inner.default_spread = spread;
            }
            (versions, inner)
        });
        Digester { namespaces, default_spread: snap.default_spread, cache, used: FxHashMap::default() }
    }

    /// The digest of `snap.pods[i]`.
    fn get(&mut self, i: usize, p: &StoredPod) -> Result<Arc<PodData>, pod::PodError> {
        let Some((versions, inner)) = &mut self.cache else {
            return pod::pod_data_with(p, self.namespaces, self.default_spread).map(Arc::new);
        };
        let v = versions[i];
        if let Some(d) = self.used.get(&v) {
            return d.clone();
        }
        let d = match inner.by_version.remove(&v) {
            Some(d) => d,
            None => pod::pod_data_with(p, self.namespaces, self.default_spread).map(|mut d| {
                inner.share(&mut d);
                Arc::new(d)
            }),
        };
        self.used.insert(v, d.clone());
        d
    }
}

impl Drop for Digester<'_> {
    fn drop(&mut self) {
        if let Some((_, inner)) = &mut self.cache {
            inner.by_version = std::mem::take(&mut self.used);
            inner.forget_unshared();
        }
    }
}

/// The digest of every pod of the snapshot, in `snap.pods` order, through the snapshot's [`Digests`] if any.
pub fn pod_digests(
    snap: &ClusterSnapshot<'_>,
    namespaces: &[(String, BTreeMap<String, String>)],
) -> Vec<Result<Arc<PodData>, pod::PodError>> {
    let mut digests = Digester::new(snap, namespaces);
    snap.pods.iter().enumerate().map(|(i, p)| digests.get(i, p)).collect()
}

/// The objects a provisioning pass reads. Everything is borrowed: building this is free. The kinds with many objects
/// (pods, nodes, NodeClaims) are [`Objects`], so a store can lend its shared copies.
#[derive(Clone, Copy)]
pub struct ClusterSnapshot<'a> {
    pub nodepools: &'a [NodePool],
    pub nodeclaims: Objects<'a, NodeClaim>,
    pub nodes: Objects<'a, Node>,
    pub pods: Objects<'a, StoredPod>,
    pub daemonsets: &'a [DaemonSet],
    pub pdbs: &'a [PodDisruptionBudget],
    pub pvcs: &'a [PersistentVolumeClaim],
    pub pvs: &'a [PersistentVolume],
    pub storage_classes: &'a [StorageClass],
    /// The nodes' CSI drivers and their attach limits (a CSINode is named after its node).
    pub csinodes: &'a [CSINode],
    pub namespaces: &'a [Namespace],
    /// Optional: a version per pod (parallel to `pods`, changing whenever the pod changes) and the digests kept
    /// for them between snapshots of the same store. `None` digests every pod afresh.
    pub digests: Option<(&'a [u64], &'a Digests)>,
    /// CapacityBuffers' virtual pods (see [`crate::engine::capacitybuffer`]): solved after the pending pods, like
    /// them. The controller adds them; a read of the cluster has none.
    pub virtual_pods: &'a [StoredPod],
    /// Default topology spread (Karpenter v1.15's `--scheduler-config`) with what it deduces selectors from; `None`
    /// when none is configured.
    pub default_spread: Option<&'a DefaultSpread>,
}

/// An owned snapshot: the vectors a [`ClusterSnapshot`] borrows.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub nodepools: Vec<NodePool>,
    pub nodeclaims: Vec<Arc<NodeClaim>>,
    pub nodes: Vec<Arc<Node>>,
    /// Shared: snapshots of a watch cache or a manifest set point at the same pods.
    pub pods: Vec<Arc<StoredPod>>,
    pub daemonsets: Vec<DaemonSet>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub pvs: Vec<PersistentVolume>,
    pub storage_classes: Vec<StorageClass>,
    pub csinodes: Vec<CSINode>,
    pub namespaces: Vec<Namespace>,
    pub default_spread: Option<Arc<DefaultSpread>>,
}

impl Snapshot {
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
            digests: None,
            virtual_pods: &[],
            default_spread: self.default_spread.as_deref(),
        }
    }
}

/// The elementwise smallest (capacity, allocatable) among the instance types a NodeClaim may launch as.
/// Where each node's CSI attach limits come from: its CSINode once it has one; before, under Karpenter v1.15, what
/// its instance type (or, not launched yet, the smallest of its options) declares.
struct AttachLimits<'a> {
    csinodes: BTreeMap<&'a str, Arc<VolumeLimits>>,
    /// Only NodePools whose types declare limits.
    catalogs: BTreeMap<&'a str, &'a [Arc<InstanceType>]>,
    none: Arc<VolumeLimits>,
}

impl<'a> AttachLimits<'a> {
    fn new(csinodes: &'a [CSINode], catalogs: &'a BTreeMap<String, Vec<Arc<InstanceType>>>) -> Self {
        AttachLimits {
            csinodes: csinodes
                .iter()
                .map(|c| (c.metadata.name.as_deref().unwrap_or(""), Arc::new(volumes::csinode_limits(c))))
                .collect(),
            catalogs: catalogs
                .iter()
                .filter(|(_, types)| types.iter().any(|t| !t.volume_limits.is_empty()))
                .map(|(k, v)| (k.as_str(), v.as_slice()))
                .collect(),
            none: Arc::default(),
        }
    }

    fn of(
        &self,
        node: &str,
        pool: Option<&str>,
        labels: &BTreeMap<String, String>,
        claim: Option<&NodeClaim>,
    ) -> Arc<VolumeLimits> {
        if let Some(l) = self.csinodes.get(node) {
            return l.clone();
        }
        let Some(types) = pool.and_then(|p| self.catalogs.get(p)) else { return self.none.clone() };
        let options: Vec<&str> = match labels.get(labels::INSTANCE_TYPE) {
            Some(t) => vec![t.as_str()],
            None => claim
                .and_then(|c| c.spec.requirements.iter().find(|r| r.key == labels::INSTANCE_TYPE && r.operator == "In"))
                .map(|r| r.values.iter().map(String::as_str).collect())
                .unwrap_or_default(),
        };
        let limits = volumes::options_limits(types.iter().filter(|t| options.contains(&t.name.as_str())).map(|t| &**t));
        if limits.is_empty() { self.none.clone() } else { Arc::new(limits) }
    }
}

fn smallest_option(c: &NodeClaim, types: Option<&Vec<Arc<InstanceType>>>) -> Option<(Resources, Resources)> {
    let options = c.spec.requirements.iter().find(|r| r.key == labels::INSTANCE_TYPE && r.operator == "In")?;
    let mut out: Option<(Resources, Resources)> = None;
    for t in types?.iter().filter(|t| options.values.contains(&t.name)) {
        let (cap, alloc) = (t.capacity.clone(), t.allocatable());
        out = Some(match out {
            None => (cap, alloc),
            Some((c0, a0)) => (min_each(&c0, &cap), min_each(&a0, &alloc)),
        });
    }
    out
}

fn min_each(a: &Resources, b: &Resources) -> Resources {
    let mut r = Resources::new(a.cpu.min(b.cpu), a.memory.min(b.memory), a.pods.min(b.pods));
    r.ephemeral_storage = a.ephemeral_storage.min(b.ephemeral_storage);
    for (k, v) in &a.extended {
        r.set_value(k, (*v).min(b.get(k)));
    }
    r
}

/// The result of a provisioning pass.
#[derive(Debug, Clone, Default)]
pub struct ProvisioningResult {
    /// The pods that were simulated (pending ∪ reschedulable pods of deleting nodes), indexed by `results`.
    pub pods: Vec<Arc<PodData>>,
    pub results: Results,
    /// Pending pods rejected before scheduling (restricted labels, bad specs), as (namespace/name, reason).
    pub rejected: Vec<(String, PodIgnored)>,
}

impl ProvisioningResult {
    /// The NodeClaim objects to create, ready for the API.
    pub fn nodeclaims(&self, nodepools: &[NodePool]) -> Vec<NodeClaim> {
        // A solve's thousands of claims share a handful of option lists (up to 600 names each): each list is made
        // into its sorted requirement once, not once per claim.
        // The claims share the list itself too: 20,000 claims would otherwise hold twelve million copies of names.
        let mut lists: FxHashMap<(Vec<*const InstanceType>, Option<u32>), TypeTerms> = FxHashMap::default();
        self.results
            .new_claims
            .iter()
            .map(|c| {
                let key = (c.instance_types.iter().map(Arc::as_ptr).collect(), c.instance_type_min_values);
                let types = lists.entry(key).or_insert_with(|| TypeTerms::of(c));
                to_nodeclaim_with(c, nodepools.iter().find(|p| p.name() == c.nodepool), types)
            })
            .collect()
    }

    /// Why each pod the pass could not place is still pending, keyed by (namespace, name): (NodePool, reason) per
    /// pool, or ("", reason) for a reason that applies to every pool.
    pub fn pending_reasons(&self) -> BTreeMap<(String, String), Vec<(String, String)>> {
        let mut out = BTreeMap::new();
        // A CapacityBuffer's virtual pods are not pods anyone waits for.
        for f in self.results.failures.iter().filter(|f| self.pods[f.pod].buffer.is_none()) {
            let p = &self.pods[f.pod];
            let reasons = f.reasons.iter().map(|(pool, r)| (pool.clone(), r.to_string())).collect();
            out.insert((p.namespace.clone(), p.name.clone()), reasons);
        }
        for (i, why) in &self.results.ignored {
            let p = &self.pods[*i];
            out.insert((p.namespace.clone(), p.name.clone()), vec![(String::new(), why.to_string())]);
        }
        for (key, why) in &self.rejected {
            if let Some((ns, name)) = key.split_once('/') {
                out.insert((ns.to_string(), name.to_string()), vec![(String::new(), why.to_string())]);
            }
        }
        out
    }

    /// How many real pods (not CapacityBuffer virtual pods) the solve placed.
    pub fn placed_pods(&self) -> usize {
        let real = |pods: &[usize]| pods.iter().filter(|&&i| self.pods[i].buffer.is_none()).count();
        self.results.new_claims.iter().map(|c| real(&c.pods)).sum::<usize>()
            + self.results.existing.iter().map(|p| real(&p.pods)).sum::<usize>()
    }

    /// (pod, reason per NodePool) for every pod that could not be placed.
    pub fn failures(&self) -> Vec<(&PodData, String)> {
        self.results
            .failures
            .iter()
            .filter(|f| self.pods[f.pod].buffer.is_none())
            .map(|f| (&*self.pods[f.pod], f.summary()))
            .collect()
    }
}

fn namespaces_of(snap: &ClusterSnapshot<'_>) -> Vec<(String, BTreeMap<String, String>)> {
    snap.namespaces
        .iter()
        .map(|n| (n.metadata.name.clone().unwrap_or_default(), n.metadata.labels.clone().unwrap_or_default()))
        .collect()
}

/// The representative pod of each DaemonSet: the newest existing pod (it carries webhook mutations) or one built
/// from the template, with the template's node affinity (the controller adds a hostname term to real pods).
pub fn daemonset_pods(snap: &ClusterSnapshot<'_>, namespaces: &[(String, BTreeMap<String, String>)]) -> Vec<PodData> {
    let mut out = Vec::new();
    for ds in snap.daemonsets {
        let name = ds.metadata.name.clone().unwrap_or_default();
        let ns = ds.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let template = ds.spec.template.clone();
        let newest = snap
            .pods
            .iter()
            .filter(|p| {
                p.metadata.namespace.as_deref() == Some(ns.as_str())
                    && p.metadata.owner_references.iter().flatten().any(|o| o.kind == "DaemonSet" && o.name == name)
            })
            .max_by_key(|p| (pod::created_seconds(p), p.metadata.name.clone()));
        let mut shape = match newest {
            Some(p) => p.clone(),
            // A stand-in that lives for this call: its spec stays out of the shared table.
            None => StoredPod::unshared(Pod {
                metadata: ObjectMeta {
                    name: Some(format!("{name}-template")),
                    namespace: Some(ns.clone()),
                    labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                    ..Default::default()
                },
                spec: template.spec.clone(),
                status: None,
            }),
        };
        let tpl_affinity = template.spec.as_ref().and_then(|s| s.affinity.clone());
        let node_affinity = tpl_affinity.and_then(|a| a.node_affinity);
        let aff = shape.spec_mut().affinity.get_or_insert_with(Default::default);
        aff.node_affinity = node_affinity;
        // A DaemonSet whose pods use DRA is left out of overhead, as upstream does (they are never placed).
        if let Ok(mut d) = pod::pod_data(&shape, namespaces)
            && !d.dra
        {
            d.daemonset = Some(name.clone());
            out.push(d);
        }
    }
    out
}

/// A snapshot digested into what the scheduler reads: the active nodes, pods bound to them, pods to place and the
/// per-NodePool usage. Provisioning solves it once; consolidation solves it many times with nodes removed.
pub struct ClusterState {
    pub namespaces: Vec<(String, BTreeMap<String, String>)>,
    /// Nodes pods may be placed on (not deleting); unlaunched NodeClaims at their smallest option.
    pub active: Vec<ExistingNode>,
    /// Names of nodes being deleted (or marked for deletion by a disruption).
    pub deleting: BTreeSet<String>,
    pub node_labels: crate::engine::scheduling::topology::NodeLabels,
    pub usage: BTreeMap<String, Resources>,
    /// Pods that need a place, in snapshot order: provisionable pending pods and reschedulable pods of deleting
    /// nodes. `provisionable[i]` tells which kind `to_schedule[i]` is.
    pub to_schedule: Vec<Arc<PodData>>,
    pub provisionable: Vec<bool>,
    /// Pods bound to nodes and staying there (not terminating, not being rescheduled), with their node. Shared
    /// with the caller's [`Digests`], when there is one.
    pub bound: Vec<(Arc<PodData>, String)>,
    pub rejected: Vec<(String, PodIgnored)>,
    pub daemonsets: Vec<PodData>,
    pub volumes: VolumeIndex,
}

impl ClusterState {
    pub fn new(
        snap: &ClusterSnapshot<'_>,
        catalogs: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        policy: &LabelPolicy,
    ) -> ClusterState {
        let namespaces = namespaces_of(snap);
        let state = crate::engine::state::Nodes::of(snap);
        let mut node_labels = BTreeMap::new();
        let mut active: Vec<ExistingNode> = Vec::new();
        let mut deleting: BTreeSet<String> = BTreeSet::new();
        let mut usage: BTreeMap<String, Resources> = BTreeMap::new();
        let mut digester = NodeDigester::new(snap.digests.map(|(_, d)| &d.nodes), snap.nodes, snap.nodeclaims);
        let limits = AttachLimits::new(snap.csinodes, catalogs);
        for s in &state {
            let d = digester.get(s);
            node_labels.insert(d.name.clone(), (d.labels.clone(), d.taints.clone()));
            if d.deleting {
                deleting.insert(d.name.clone());
                continue;
            }
            // A NodeClaim not launched yet will become one of its instance-type options: count it at the smallest
            // of them, so the pods it was made for (and what else surely fits) are not provisioned for twice.
            let (capacity, allocatable) = match s.nodeclaim.filter(|_| d.unlaunched) {
                Some(c) => match smallest_option(c, d.nodepool.as_deref().and_then(|p| catalogs.get(p))) {
                    Some(x) => x,
                    None => continue,
                },
                None => (d.capacity.clone(), d.allocatable.clone()),
            };
            if let Some(pool) = &d.nodepool {
                let u = usage.entry(pool.clone()).or_default();
                u.add(&capacity);
                let nodes = u.get("nodes");
                u.set_value("nodes", nodes + 1);
            }
            active.push(ExistingNode {
                name: d.name.clone(),
                labels: d.labels.clone(),
                taints: d.taints.clone(),
                startup_taints: d.startup_taints.clone(),
                allocatable,
                capacity,
                initialized: d.initialized,
                managed: d.managed,
                nodepool: d.nodepool.clone(),
                requirements: Some(d.requirements.clone()),
                volume_limits: limits.of(&d.name, d.nodepool.as_deref(), &d.labels, s.nodeclaim),
            });
        }
        drop(digester);

        let mut to_schedule: Vec<Arc<PodData>> = Vec::new();
        let mut provisionable = Vec::new();
        let mut rejected = Vec::new();
        let mut bound: Vec<(Arc<PodData>, String)> = Vec::new();
        let mut digests = Digester::new(snap, &namespaces);
        for (i, p) in snap.pods.iter().enumerate() {
            let node = p.bound_node().map(str::to_string);
            match node {
                Some(node) => {
                    if p.is_terminal() {
                        continue;
                    }
                    let Ok(d) = digests.get(i, p) else { continue };
                    if deleting.contains(&node) && is_currently_reschedulable(p, snap.pdbs) {
                        to_schedule.push(d);
                        provisionable.push(false);
                    } else if p.metadata.deletion_timestamp.is_none() {
                        bound.push((d, node));
                    }
                }
                None => {
                    if !is_provisionable(p) {
                        continue;
                    }
                    match digests.get(i, p) {
                        Ok(d) => {
                            if pod::opts_out_of_karpenter(&d) {
                                continue;
                            }
                            if let Some((key, why)) = pod::restricted_key(&d, policy) {
                                rejected.push((d.key(), PodIgnored::RestrictedLabel { key, why }));
                                continue;
                            }
                            to_schedule.push(d);
                            provisionable.push(true);
                        }
                        Err(pod::PodError::Invalid { field, message }) => {
                            let key = format!(
                                "{}/{}",
                                p.metadata.namespace.as_deref().unwrap_or("default"),
                                p.metadata.name.as_deref().unwrap_or("")
                            );
                            rejected.push((key, PodIgnored::Invalid { field, message }));
                        }
                    }
                }
            }
        }
        drop(digests);
        // Virtual pods come last: pending like the others, never more important (upstream appends them too).
        for p in snap.virtual_pods {
            if let Ok(d) = pod::pod_data(p, &namespaces) {
                to_schedule.push(Arc::new(d));
                provisionable.push(true);
            }
        }
        let daemonsets = daemonset_pods(snap, &namespaces);
        let volumes = VolumeIndex::new(snap.pvcs, snap.pvs, snap.storage_classes);
        ClusterState {
            namespaces,
            active,
            deleting,
            node_labels,
            usage,
            to_schedule,
            provisionable,
            bound,
            rejected,
            daemonsets,
            volumes,
        }
    }

    /// The scheduler's input over this state.
    pub fn input<'a>(
        &'a self,
        nodepools: &'a [NodePool],
        catalogs: &'a BTreeMap<String, Vec<Arc<InstanceType>>>,
        policy: &'a LabelPolicy,
        options: SchedulerOptions,
    ) -> Input<'a> {
        Input {
            nodepools,
            instance_types: catalogs,
            policy,
            nodes: &self.active,
            nodepool_usage: &self.usage,
            bound_pods: &self.bound,
            node_labels: &self.node_labels,
            daemonsets: &self.daemonsets,
            volumes: &self.volumes,
            options,
        }
    }
}

/// Runs one provisioning pass over the snapshot. `catalogs` holds the instance types per NodePool name.
pub fn provision(
    snap: &ClusterSnapshot<'_>,
    catalogs: &BTreeMap<String, Vec<Arc<InstanceType>>>,
    policy: &LabelPolicy,
    options: SchedulerOptions,
) -> ProvisioningResult {
    provision_keeping_state(snap, catalogs, policy, options).0
}

/// [`provision`], and the cluster state it solved over (its pods to schedule taken out, as they are the result's):
/// what a later [`PackingJob`] for the same pass reads.
pub fn provision_keeping_state(
    snap: &ClusterSnapshot<'_>,
    catalogs: &BTreeMap<String, Vec<Arc<InstanceType>>>,
    policy: &LabelPolicy,
    options: SchedulerOptions,
) -> (ProvisioningResult, ClusterState) {
    let mut state = ClusterState::new(snap, catalogs, policy);
    let to_schedule = std::mem::take(&mut state.to_schedule);
    let rejected = std::mem::take(&mut state.rejected);
    let input = state.input(snap.nodepools, catalogs, policy, options);
    let results = scheduling::solve(&input, &to_schedule);
    (ProvisioningResult { pods: to_schedule, results, rejected }, state)
}

/// The packing comparison of one provisioning pass ([`compare_packing_after`]), owning what it reads, so that it
/// runs after the pass's NodeClaims are out: on another thread, or later in a simulation. Pods never wait for it.
pub struct PackingJob {
    state: ClusterState,
    nodepools: Vec<NodePool>,
    catalogs: BTreeMap<String, Vec<Arc<InstanceType>>>,
    policy: LabelPolicy,
    packing: crate::engine::packing::Packing,
    done: Arc<ProvisioningResult>,
}

impl std::fmt::Debug for PackingJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackingJob").field("packing", &self.packing).field("pods", &self.done.pods.len()).finish()
    }
}

impl PackingJob {
    /// The job for pass `done`, solved with `packing` over `state` (from [`provision_keeping_state`]).
    pub fn new(
        state: ClusterState,
        nodepools: &[NodePool],
        catalogs: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        policy: &LabelPolicy,
        packing: crate::engine::packing::Packing,
        done: Arc<ProvisioningResult>,
    ) -> PackingJob {
        PackingJob {
            state,
            nodepools: nodepools.to_vec(),
            catalogs: catalogs.clone(),
            policy: policy.clone(),
            packing,
            done,
        }
    }

    /// The strategy the pass solved with.
    pub fn packing(&self) -> crate::engine::packing::Packing {
        self.packing
    }

    /// What [`compare_packing_after`] answers over the same snapshot.
    pub fn run(&self) -> PackingComparison {
        compare_over(&self.state, &self.nodepools, &self.catalogs, &self.policy, Some((self.packing, &self.done)))
    }
}

/// What one strategy's plan would launch: its NodeClaims' cheapest options summed, in USD per hour.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanPrice {
    pub per_hour: f64,
    pub nodes: usize,
}

impl PlanPrice {
    pub fn of(results: &Results) -> PlanPrice {
        PlanPrice {
            per_hour: results.new_claims.iter().filter_map(|c| c.cheapest_price()).sum(),
            nodes: results.new_claims.len(),
        }
    }
}

/// Both strategies over the same pods, and the LP lower bound no packing of them can beat.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PackingComparison {
    pub upstream: PlanPrice,
    pub cost: PlanPrice,
    /// `None` when there is nothing to launch or the LP has no optimum.
    pub bound: Option<f64>,
}

impl PackingComparison {
    pub fn of(&self, packing: crate::engine::packing::Packing) -> PlanPrice {
        match packing {
            crate::engine::packing::Packing::Upstream => self.upstream,
            crate::engine::packing::Packing::Cost => self.cost,
        }
    }

    /// "upstream packing: $145.90/h for 2 nodes; cost packing: $37.15/h for 367 nodes; LP lower bound $34.36/h".
    pub fn summary(&self) -> String {
        let plan = |name: &str, p: PlanPrice| {
            format!("{name} packing: ${:.2}/h for {} node{}", p.per_hour, p.nodes, if p.nodes == 1 { "" } else { "s" })
        };
        let mut s = format!("{}; {}", plan("upstream", self.upstream), plan("cost", self.cost));
        if let Some(b) = self.bound {
            s.push_str(&format!("; LP lower bound ${b:.2}/h"));
        }
        s
    }
}

/// Runs the provisioning pass with each strategy and the LP bound over the pods the cost plan launches for.
pub fn compare_packing(
    snap: &ClusterSnapshot<'_>,
    catalogs: &BTreeMap<String, Vec<Arc<InstanceType>>>,
    policy: &LabelPolicy,
) -> PackingComparison {
    compare(snap, catalogs, policy, None)
}

/// [`compare_packing`] after a provisioning pass over the same snapshot and catalogs: `done` is that pass's answer
/// with strategy `packing`, so only the other strategy is solved (and the LP bound worked out).
pub fn compare_packing_after(
    snap: &ClusterSnapshot<'_>,
    catalogs: &BTreeMap<String, Vec<Arc<InstanceType>>>,
    policy: &LabelPolicy,
    packing: crate::engine::packing::Packing,
    done: &ProvisioningResult,
) -> PackingComparison {
    compare(snap, catalogs, policy, Some((packing, done)))
}

fn compare(
    snap: &ClusterSnapshot<'_>,
    catalogs: &BTreeMap<String, Vec<Arc<InstanceType>>>,
    policy: &LabelPolicy,
    done: Option<(crate::engine::packing::Packing, &ProvisioningResult)>,
) -> PackingComparison {
    compare_over(&ClusterState::new(snap, catalogs, policy), snap.nodepools, catalogs, policy, done)
}

/// [`compare`] over a digested state: the pods are `done`'s when there is a pass, else the state's own.
fn compare_over(
    state: &ClusterState,
    nodepools: &[NodePool],
    catalogs: &BTreeMap<String, Vec<Arc<InstanceType>>>,
    policy: &LabelPolicy,
    done: Option<(crate::engine::packing::Packing, &ProvisioningResult)>,
) -> PackingComparison {
    use crate::engine::packing::Packing;
    // The pass already solved indexes its own pods: the other strategy solves over the same list.
    let pods = done.map_or(&state.to_schedule[..], |(_, r)| &r.pods[..]);
    let solve = |packing: Packing| match done {
        Some((p, r)) if p == packing => std::borrow::Cow::Borrowed(&r.results),
        _ => {
            let options = SchedulerOptions { packing, ..Default::default() };
            let input = state.input(nodepools, catalogs, policy, options);
            std::borrow::Cow::Owned(scheduling::solve(&input, pods))
        }
    };
    let (upstream, cost) = (solve(Packing::Upstream), solve(Packing::Cost));
    let input = state.input(nodepools, catalogs, policy, SchedulerOptions::default());
    let bound = if cost.new_claims.is_empty() { None } else { scheduling::cost::lower_bound(&input, pods, &cost) };
    PackingComparison { upstream: PlanPrice::of(&upstream), cost: PlanPrice::of(&cost), bound }
}

/// Builds the NodeClaim object for a scheduling decision (upstream `NodeClaimTemplate.ToNodeClaim`).
pub fn to_nodeclaim(c: &NewNodeClaim, pool: Option<&NodePool>) -> NodeClaim {
    to_nodeclaim_with(c, pool, &TypeTerms::of(c))
}

/// A NodeClaim's `node.kubernetes.io/instance-type In [options]`, as the object's terms.
struct TypeTerms {
    min_values: Option<i64>,
    terms: Vec<(Operator, Arc<[String]>)>,
}

impl TypeTerms {
    fn of(c: &NewNodeClaim) -> TypeTerms {
        let r = c.instance_type_requirement();
        TypeTerms { min_values: r.min_values.map(i64::from), terms: shared_terms(&r) }
    }
}

fn shared_terms(r: &Requirement) -> Vec<(Operator, Arc<[String]>)> {
    r.to_terms().into_iter().map(|(op, values)| (op, values.into())).collect()
}

/// [`to_nodeclaim`] with the claim's instance-type terms made already.
fn to_nodeclaim_with(c: &NewNodeClaim, pool: Option<&NodePool>, types: &TypeTerms) -> NodeClaim {
    let mut requirements: Vec<NodeSelectorRequirementWithMinValues> = Vec::new();
    let mut push = |key: &str, min_values: Option<i64>, terms: &[(Operator, Arc<[String]>)]| {
        for (op, values) in terms {
            requirements.push(NodeSelectorRequirementWithMinValues {
                key: key.to_string(),
                operator: op.as_str().to_string(),
                values: values.clone(),
                min_values,
            });
        }
    };
    // In key order (as the claim's requirements iterate), the instance-type requirement in its place, replacing
    // any the claim's own requirements hold.
    let mut typed = false;
    for (key, r) in c.requirements.iter().filter(|(k, _)| *k != labels::INSTANCE_TYPE) {
        if !typed && key > labels::INSTANCE_TYPE {
            push(labels::INSTANCE_TYPE, types.min_values, &types.terms);
            typed = true;
        }
        push(key, r.min_values.map(i64::from), &shared_terms(r));
    }
    if !typed {
        push(labels::INSTANCE_TYPE, types.min_values, &types.terms);
    }
    let owner = pool.map(|p| OwnerReference {
        api_version: "karpenter.sh/v1".into(),
        kind: "NodePool".into(),
        name: p.name().to_string(),
        uid: p.metadata.uid.clone().unwrap_or_default(),
        block_owner_deletion: Some(true),
        controller: None,
    });
    let requests = c.requests.to_quantity_map().into_iter().map(|(k, v)| (k, Quantity(v))).collect();
    let mut nc = NodeClaim::new(
        "",
        NodeClaimSpec {
            taints: c.taints.clone(),
            startup_taints: c.startup_taints.clone(),
            requirements,
            resources: ResourceRequirements { requests },
            node_class_ref: c.node_class_ref.clone(),
            termination_grace_period: c.termination_grace_period.clone(),
            expire_after: c.expire_after.clone(),
        },
    );
    nc.metadata = ObjectMeta {
        generate_name: Some(format!("{}-", c.nodepool)),
        labels: Some(c.labels.clone()),
        annotations: (!c.annotations.is_empty()).then(|| c.annotations.clone()),
        owner_references: owner.map(|o| vec![o]),
        finalizers: Some(vec![labels::TERMINATION_FINALIZER.to_string()]),
        ..Default::default()
    };
    nc
}
