//! The simulated cluster: an object store for the kinds the engine reads, and the controllers a real cluster runs
//! besides Karpenter — a Deployment controller (replica pods with stable names), a DaemonSet controller (one pod
//! per eligible node) and a kube-scheduler stand-in that binds pending pods to nodes and marks the rest
//! `PodScheduled=False/Unschedulable`, which is what makes them provisionable.
//!
//! The kube-scheduler stand-in reuses the engine's scheduling simulation restricted to existing nodes: the same
//! code that decides Karpenter's placements checks resources, taints, selectors, affinity, topology spread and host
//! ports, so the two never disagree about whether a pod fits.
//!
//! ## Watches and change stamps
//! Each store map is a [`Watched`] kind (src/sim/watch.rs): reads go to the `BTreeMap` it wraps, and every write
//! gets the next store-wide resourceVersion and an event in the kind's log. The snapshot mirror the engine reads
//! follows those events instead of comparing maps ([`Mirror`]). Every write also gives the kind a fresh stamp, so
//! equal stamps mean an unchanged kind, and no code can write to the store without it being noticed: code elsewhere
//! (scenario events, the disruption controller) needs no care beyond not calling `get_mut` for mere reads, which
//! is only a spurious event and a missed skip, never a wrong result.
//!
//! The controllers here remember the stamps of their inputs as they left them (`Synced`) and return at once when
//! those are unchanged, because each is idempotent: run again on the state it produced, it does nothing. The
//! kube-scheduler stand-in is the exception (binding some pods can let others fit), so it skips only after a pass
//! that bound nothing; its `Unschedulable` marks do not feed back into a solve (the engine's pod shapes ignore pod
//! status), so that pass, run again, would bind nothing again. Skipping therefore never changes an outcome, only how
//! often the same outcome is recomputed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, PodCondition, PodStatus, Service,
    TopologySpreadConstraint,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::engine::api::{EC2NodeClass, NodeClaim, NodePool};
use crate::engine::labels;
use crate::engine::manifests::ClusterObjects;
use crate::engine::provisioning::{ClusterSnapshot, Digests, Snapshot, pod_digests};
use crate::engine::requirements::{Requirement, SharedLabels};
use crate::engine::scheduling::default_spread::{DefaultSpread, SpreadOwners};
use crate::engine::scheduling::pod::{self, PodData};
use crate::engine::scheduling::volumes::{self, VolumeIndex};
use crate::engine::scheduling::{ExistingNode, Input, SchedulerOptions, solve};
use crate::engine::state::Nodes;
use crate::engine::store::Store;
use crate::engine::stored_pod::StoredPod;
use crate::sim::replicas::Replicas;
use crate::sim::watch::{EventType, Versions, Watched};

/// Namespaced key.
pub type Key = (String, String);

fn key_of(meta: &ObjectMeta) -> Key {
    (meta.namespace.clone().unwrap_or_else(|| "default".into()), meta.name.clone().unwrap_or_default())
}

/// One kind of the simulated store as its watcher sees it: a [`Store`] (the client-side store the live watch cache
/// keeps too), brought up to date from the kind's watch events by [`Mirror::sync`]. A mirror that has never synced,
/// or has fallen behind the kind's event log (410 Gone), relists, keeping every object that is the same. Either way
/// the store equals the map, and objects not written keep their versions (and so their digests).
#[derive(Debug)]
struct Mirror<K, V> {
    /// The kind's resourceVersion the store is current to (None: never listed).
    seen: Option<u64>,
    store: Store<K, V>,
}

impl<K, V> Default for Mirror<K, V> {
    fn default() -> Self {
        Mirror { seen: None, store: Store::default() }
    }
}

impl<K: Ord + Clone, V: Clone + PartialEq + kube::Resource> Mirror<K, V> {
    fn sync(&mut self, kind: &Watched<K, V>) {
        let current = kind.resource_version();
        if self.seen == Some(current) {
            return;
        }
        match self.seen.map(|seen| kind.events_since(seen)) {
            Some(Ok(events)) => {
                for e in events {
                    match e.type_ {
                        EventType::Deleted => self.store.remove(e.key),
                        EventType::Added | EventType::Modified => self.store.insert(e.key.clone(), e.object.clone()),
                    };
                }
            }
            // Never listed, or too far behind: list again.
            _ => {
                self.store.replace_sorted(kind.iter(), K::clone, V::eq);
            }
        }
        self.store.settle();
        self.seen = Some(current);
    }

    /// [`Mirror::sync`], keeping a plain copy too ([`Store::plain`]).
    fn sync_plain(&mut self, kind: &Watched<K, V>) {
        self.sync(kind);
        self.store.settle_plain();
    }
}

/// The store's maps as [`Mirror`]s: what [`Cluster::snapshot_into`] keeps between passes.
#[derive(Debug, Default)]
pub struct SnapshotMirror {
    nodepools: Mirror<String, NodePool>,
    nodeclaims: Mirror<String, NodeClaim>,
    nodes: Mirror<String, Node>,
    pods: Mirror<Key, StoredPod>,
    daemonsets: Mirror<Key, DaemonSet>,
    pdbs: Mirror<Key, PodDisruptionBudget>,
    pvcs: Mirror<Key, PersistentVolumeClaim>,
    pvs: Mirror<String, PersistentVolume>,
    storage_classes: Mirror<String, StorageClass>,
    csinodes: Mirror<String, CSINode>,
    namespaces: Mirror<String, Namespace>,
    /// Pod digests by the pod mirror's versions.
    digests: Digests,
    /// The default topology spread as last built, by the (services, deployments) stamps it was built at.
    default_spread: Option<([u64; 2], Option<Arc<DefaultSpread>>)>,
}

/// Every object of the simulated cluster, in ordered maps so iteration (and so every decision) is deterministic.
#[derive(Debug)]
pub struct Cluster {
    pub nodepools: Watched<String, NodePool>,
    pub nodeclaims: Watched<String, NodeClaim>,
    pub nodeclasses: Watched<String, EC2NodeClass>,
    pub nodes: Watched<String, Node>,
    pub pods: Watched<Key, StoredPod>,
    pub deployments: Watched<Key, Deployment>,
    pub daemonsets: Watched<Key, DaemonSet>,
    pub pdbs: Watched<Key, PodDisruptionBudget>,
    pub pvcs: Watched<Key, PersistentVolumeClaim>,
    pub pvs: Watched<String, PersistentVolume>,
    pub storage_classes: Watched<String, StorageClass>,
    /// CSINodes, named after their nodes: what the simulated CSI drivers report they can attach.
    pub csinodes: Watched<String, CSINode>,
    pub namespaces: Watched<String, Namespace>,
    /// Services: only default topology spread reads them (their selectors), as kube-scheduler's does.
    pub services: Watched<Key, Service>,
    /// Default topology spread constraints (Karpenter v1.15's `--scheduler-config`), given to pods that declare
    /// none by Karpenter's scheduler and the kube-scheduler stand-in alike; empty for none.
    pub default_constraints: Vec<TopologySpreadConstraint>,
    pub nodeoverlays: Watched<String, crate::engine::api::nodeoverlay::NodeOverlay>,
    pub capacitybuffers: Watched<Key, crate::engine::api::capacitybuffer::CapacityBuffer>,
    pub pod_templates: Watched<Key, k8s_openapi::api::core::v1::PodTemplate>,
    next_uid: u64,
    /// The seeded generator behind generated pod names.
    pub name_seed: u64,
    synced: Synced,
    /// Live pods per ReplicaSet owner, from the pods' events.
    replicas: Replicas,
    /// The store-wide resourceVersion every kind above shares.
    versions: Versions,
}

impl Default for Cluster {
    fn default() -> Self {
        let v = Versions::default();
        Cluster {
            nodepools: Watched::new(v.clone()),
            nodeclaims: Watched::new(v.clone()),
            nodeclasses: Watched::new(v.clone()),
            nodes: Watched::new(v.clone()),
            pods: Watched::new(v.clone()),
            deployments: Watched::new(v.clone()),
            daemonsets: Watched::new(v.clone()),
            pdbs: Watched::new(v.clone()),
            pvcs: Watched::new(v.clone()),
            pvs: Watched::new(v.clone()),
            storage_classes: Watched::new(v.clone()),
            csinodes: Watched::new(v.clone()),
            namespaces: Watched::new(v.clone()),
            services: Watched::new(v.clone()),
            default_constraints: Vec::new(),
            nodeoverlays: Watched::new(v.clone()),
            capacitybuffers: Watched::new(v.clone()),
            pod_templates: Watched::new(v.clone()),
            next_uid: 0,
            name_seed: 0,
            synced: Synced::default(),
            replicas: Replicas::default(),
            versions: v,
        }
    }
}

/// The input stamps each controller left behind on its last pass (module docs).
#[derive(Debug, Clone, Default)]
struct Synced {
    /// (deployments, pods).
    deployments: Option<[u64; 2]>,
    /// (daemonsets, nodes, pods).
    daemonsets: Option<[u64; 3]>,
    /// [`Cluster::scheduler_stamps`] after a scheduling pass that bound nothing.
    scheduler: Option<[u64; 9]>,
}

fn unschedulable_condition() -> PodCondition {
    PodCondition {
        type_: "PodScheduled".into(),
        status: "False".into(),
        reason: Some("Unschedulable".into()),
        ..Default::default()
    }
}

/// Sets a pod condition, replacing any of its type.
pub(crate) fn set_pod_condition(p: &mut StoredPod, condition: PodCondition) {
    let conds = p.status.get_or_insert_with(PodStatus::default).conditions.get_or_insert_with(Vec::new);
    conds.retain(|c| c.type_ != condition.type_);
    // Most pods carry one or two conditions: no room for four (a pod costs enough already at 20,000).
    conds.reserve_exact(1);
    conds.push(condition);
}

fn unschedulable(p: &mut StoredPod) {
    set_pod_condition(p, unschedulable_condition());
}

/// Whether [`unschedulable`] would leave the pod as it is (so there is no need to borrow it mutably).
fn is_marked_unschedulable(p: &StoredPod) -> bool {
    let conds = p.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or(&[]);
    conds.last() == Some(&unschedulable_condition()) && conds.iter().filter(|c| c.type_ == "PodScheduled").count() == 1
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl Cluster {
    /// An empty cluster whose generated names derive from `seed`.
    pub fn with_seed(seed: u64) -> Cluster {
        Cluster { name_seed: seed, ..Default::default() }
    }

    /// Five characters from the seeded generator, in the alphabet Kubernetes uses for generated names.
    fn name_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..5)
            .map(|_| {
                // splitmix64
                self.name_seed = self.name_seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = self.name_seed;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                ALPHABET[(z % ALPHABET.len() as u64) as usize] as char
            })
            .collect()
    }

    /// A uid that is stable for a given sequence of creations.
    pub fn uid(&mut self) -> String {
        self.next_uid += 1;
        format!("00000000-0000-4000-8000-{:012x}", self.next_uid)
    }

    fn stamp(&mut self, meta: &mut ObjectMeta) {
        if meta.uid.is_none() {
            meta.uid = Some(self.uid());
        }
        if meta.namespace.is_none() {
            meta.namespace = Some("default".into());
        }
    }

    /// Creates or replaces every object of the manifests (Deployments are expanded by the controller, not here).
    pub fn apply(&mut self, m: &ClusterObjects) {
        for o in &m.nodepools {
            self.nodepools.insert(o.name().to_string(), o.clone());
        }
        for o in &m.nodeoverlays {
            let mut o = o.clone();
            // A changed spec is a new generation, as the API server counts them.
            let generation = self.nodeoverlays.get(o.name()).map_or(0, |old| {
                let g = old.metadata.generation.unwrap_or(1);
                if old.spec == o.spec { g - 1 } else { g }
            });
            o.metadata.generation = Some(generation + 1);
            if o.status.is_none() {
                o.status = self.nodeoverlays.get(o.name()).and_then(|old| old.status.clone());
            }
            self.nodeoverlays.insert(o.name().to_string(), o);
        }
        for o in &m.capacitybuffers {
            let mut o = o.clone();
            self.stamp(&mut o.metadata);
            let key = key_of(&o.metadata);
            // A changed spec is a new generation; the status is the controller's and stays.
            let old = self.capacitybuffers.get(&key);
            let generation = old.map_or(0, |old| {
                let g = old.metadata.generation.unwrap_or(1);
                if old.spec == o.spec { g - 1 } else { g }
            });
            o.metadata.generation = Some(generation + 1);
            if o.status.is_none() {
                o.status = old.and_then(|old| old.status.clone());
            }
            self.capacitybuffers.insert(key, o);
        }
        for o in &m.pod_templates {
            let mut o = o.clone();
            self.stamp(&mut o.metadata);
            let key = key_of(&o.metadata);
            let generation = self.pod_templates.get(&key).map_or(0, |old| {
                let g = old.metadata.generation.unwrap_or(1);
                if old.template == o.template { g - 1 } else { g }
            });
            o.metadata.generation = Some(generation + 1);
            self.pod_templates.insert(key, o);
        }
        for o in &m.nodeclaims {
            self.nodeclaims.insert(o.name().to_string(), NodeClaim::clone(o));
        }
        for o in &m.nodeclasses {
            self.nodeclasses.insert(o.metadata.name.clone().unwrap_or_default(), o.clone());
        }
        for o in &m.nodes {
            self.nodes.insert(o.metadata.name.clone().unwrap_or_default(), Node::clone(o));
        }
        for o in &m.pods {
            // The world's own copy, spec shared among the world's pods (see `StoredPod::unshared`).
            let mut p = o.interned();
            self.stamp(&mut p.metadata);
            self.pods.insert(key_of(&p.metadata), p);
        }
        for o in &m.deployments {
            let mut d = o.clone();
            self.stamp(&mut d.metadata);
            self.deployments.insert(key_of(&d.metadata), d);
        }
        for o in &m.daemonsets {
            let mut d = o.clone();
            self.stamp(&mut d.metadata);
            self.daemonsets.insert(key_of(&d.metadata), d);
        }
        // Namespaced objects written without a namespace live in `default`, as kubectl would put them.
        for o in &m.pdbs {
            let mut o = o.clone();
            o.metadata.namespace.get_or_insert_with(|| "default".into());
            self.pdbs.insert(key_of(&o.metadata), o);
        }
        for o in &m.pvcs {
            let mut o = o.clone();
            o.metadata.namespace.get_or_insert_with(|| "default".into());
            self.pvcs.insert(key_of(&o.metadata), o);
        }
        for o in &m.pvs {
            self.pvs.insert(o.metadata.name.clone().unwrap_or_default(), o.clone());
        }
        for o in &m.storage_classes {
            self.storage_classes.insert(o.metadata.name.clone().unwrap_or_default(), o.clone());
        }
        for o in &m.namespaces {
            self.namespaces.insert(o.metadata.name.clone().unwrap_or_default(), o.clone());
        }
        for o in &m.services {
            let mut o = o.clone();
            o.metadata.namespace.get_or_insert_with(|| "default".into());
            self.services.insert(key_of(&o.metadata), o);
        }
    }

    /// The default topology spread over the cluster as it is: the configured constraints, with Services and the
    /// Deployments' stand-in ReplicaSets (named after their Deployment, see [`Cluster::reconcile_deployments`]) to
    /// deduce selectors from. `None` when none is configured.
    pub fn default_spread(&self) -> Option<DefaultSpread> {
        if self.default_constraints.is_empty() {
            return None;
        }
        let mut owners = SpreadOwners::default();
        for ((ns, _), svc) in &self.services {
            owners.add_service(ns, svc.spec.as_ref().and_then(|s| s.selector.as_ref()));
        }
        for ((ns, name), d) in &self.deployments {
            owners.add_replica_set(ns, name, &d.spec.selector);
        }
        DefaultSpread::new(&self.default_constraints, owners)
    }

    /// The store-wide resourceVersion of the last write.
    pub fn resource_version(&self) -> u64 {
        self.versions.current()
    }

    /// The stamps of every map of the store: equal stamps mean no object changed in between (even if a whole map
    /// was replaced, since stamps are unique).
    pub fn stamps(&self) -> [u64; 14] {
        [
            self.nodepools.stamp(),
            self.nodeclaims.stamp(),
            self.nodeclasses.stamp(),
            self.nodes.stamp(),
            self.pods.stamp(),
            self.deployments.stamp(),
            self.daemonsets.stamp(),
            self.pdbs.stamp(),
            self.pvcs.stamp(),
            self.pvs.stamp(),
            self.storage_classes.stamp(),
            self.csinodes.stamp(),
            self.namespaces.stamp(),
            self.services.stamp(),
        ]
    }

    /// The stamps of what the scheduler stand-in reads: pods, nodes (and the NodeClaims their labels and room are
    /// joined with), namespaces and volumes. A pass that bound nothing binds nothing again while they stand, so
    /// writes to NodePools, Deployments or PDBs (status writes, mostly) don't make it look again, as they don't
    /// wake kube-scheduler.
    fn scheduler_stamps(&self) -> [u64; 9] {
        [
            self.pods.stamp(),
            self.nodes.stamp(),
            self.nodeclaims.stamp(),
            self.namespaces.stamp(),
            self.pvcs.stamp(),
            self.pvs.stamp(),
            self.storage_classes.stamp(),
            self.csinodes.stamp(),
            self.services.stamp(),
        ]
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            nodepools: self.nodepools.cloned_values(),
            nodeclaims: self.nodeclaims.shared_values(),
            nodes: self.nodes.shared_values(),
            pods: self.pods.values().cloned().collect(),
            daemonsets: self.daemonsets.cloned_values(),
            pdbs: self.pdbs.cloned_values(),
            pvcs: self.pvcs.cloned_values(),
            pvs: self.pvs.cloned_values(),
            storage_classes: self.storage_classes.cloned_values(),
            csinodes: self.csinodes.cloned_values(),
            namespaces: self.namespaces.cloned_values(),
            default_spread: self.default_spread().map(Arc::new),
        }
    }

    /// A snapshot of the store kept in `mirror` between uses: only maps whose stamp moved are looked at again, and
    /// of those only changed objects are copied (see [`Mirror`]). The view equals [`Cluster::snapshot`]'s.
    pub fn snapshot_into<'m>(&self, mirror: &'m mut SnapshotMirror) -> ClusterSnapshot<'m> {
        let m = mirror;
        m.nodepools.sync_plain(&self.nodepools);
        m.nodeclaims.sync(&self.nodeclaims);
        m.nodes.sync(&self.nodes);
        m.pods.sync(&self.pods);
        m.daemonsets.sync_plain(&self.daemonsets);
        m.pdbs.sync_plain(&self.pdbs);
        m.pvcs.sync_plain(&self.pvcs);
        m.pvs.sync_plain(&self.pvs);
        m.storage_classes.sync_plain(&self.storage_classes);
        m.csinodes.sync_plain(&self.csinodes);
        m.namespaces.sync_plain(&self.namespaces);
        let spread_at = [self.services.stamp(), self.deployments.stamp()];
        if m.default_spread.as_ref().is_none_or(|(at, _)| *at != spread_at) {
            m.default_spread = Some((spread_at, self.default_spread().map(Arc::new)));
        }
        ClusterSnapshot {
            nodepools: m.nodepools.store.plain(),
            nodeclaims: m.nodeclaims.store.values().into(),
            nodes: m.nodes.store.values().into(),
            pods: m.pods.store.values().into(),
            daemonsets: m.daemonsets.store.plain(),
            pdbs: m.pdbs.store.plain(),
            pvcs: m.pvcs.store.plain(),
            pvs: m.pvs.store.plain(),
            storage_classes: m.storage_classes.store.plain(),
            csinodes: m.csinodes.store.plain(),
            namespaces: m.namespaces.store.plain(),
            digests: Some((m.pods.store.versions(), &m.digests)),
            virtual_pods: &[],
            default_spread: m.default_spread.as_ref().and_then(|(_, d)| d.as_deref()),
        }
    }

    /// The Deployment controller: each Deployment has exactly `replicas` live pods named `<name>-<ordinal>`
    /// (lowest free ordinals first; scale-down removes the highest). Returns the pods created and deleted.
    pub fn reconcile_deployments(&mut self) -> (Vec<Key>, Vec<Key>) {
        let mut created = Vec::new();
        let mut deleted = Vec::new();
        if self.synced.deployments == Some([self.deployments.stamp(), self.pods.stamp()]) {
            return (created, deleted);
        }
        if self.deployments_balanced() {
            self.synced.deployments = Some([self.deployments.stamp(), self.pods.stamp()]);
            return (created, deleted);
        }
        // The live replicas of each Deployment to fix, by its (namespace, ReplicaSet name): from the replica index
        // when every live pod has one owner, else from one pass over the pods.
        let mut replicas: BTreeMap<Key, Vec<(bool, String, Key)>> = BTreeMap::new();
        let entry =
            |p: &StoredPod, k: &Key| (p.node_name.is_some(), p.metadata.uid.clone().unwrap_or_default(), k.clone());
        let todo: Vec<Key> = match self.replicas.unbalanced(&self.deployments) {
            Some(keys) => keys
                .into_iter()
                .map(|d| {
                    let pods = self.replicas.members(d).iter();
                    replicas.insert(d.clone(), pods.filter_map(|k| self.pods.get(k).map(|p| entry(p, k))).collect());
                    d.clone()
                })
                .collect(),
            None => {
                for (k, p) in &self.pods {
                    for owner in crate::sim::replicas::replicaset_owners(p) {
                        let deployment = (k.0.clone(), owner.to_string());
                        if self.deployments.contains_key(&deployment) {
                            replicas.entry(deployment).or_default().push(entry(p, k));
                        }
                    }
                }
                self.deployments.keys().cloned().collect()
            }
        };
        for key in todo {
            let Some(d) = self.deployments.get(&key).cloned() else { continue };
            let (ns, name) = key;
            let want = crate::sim::replicas::wanted(&d);
            // Live replicas, oldest first (uids are issued in creation order). A pod another Deployment of this
            // pass already scaled away is gone.
            let mut owned = replicas.remove(&(ns.clone(), name.clone())).unwrap_or_default();
            owned.retain(|(_, _, k)| self.pods.contains_key(k));
            owned.sort_by(|a, b| a.1.cmp(&b.1));
            let mut have = owned.len();
            while have < want {
                // ReplicaSet-style names: `<deployment>-<random>` from the world's seeded generator.
                let pname = loop {
                    let candidate = format!("{name}-{}", self.name_suffix());
                    if !self.pods.contains_key(&(ns.clone(), candidate.clone())) {
                        break candidate;
                    }
                };
                let mut meta = d.spec.template.metadata.clone().unwrap_or_default();
                meta.name = Some(pname.clone());
                meta.namespace = Some(ns.clone());
                meta.uid = None;
                meta.owner_references = Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: name.clone(),
                    uid: d.metadata.uid.clone().unwrap_or_default(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]);
                let mut p = StoredPod::from(Pod { metadata: meta, spec: d.spec.template.spec.clone(), status: None });
                self.stamp(&mut p.metadata);
                let key = (ns.clone(), pname);
                self.pods.insert(key.clone(), p);
                created.push(key);
                have += 1;
            }
            // Scale down like a ReplicaSet: unscheduled pods first, then the newest.
            let excess = have.saturating_sub(want);
            owned.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
            for (_, _, key) in owned.into_iter().take(excess) {
                self.pods.remove(&key);
                deleted.push(key);
            }
        }
        self.synced.deployments = Some([self.deployments.stamp(), self.pods.stamp()]);
        (created, deleted)
    }

    /// Whether every Deployment has exactly its replicas live and no live pod is owned by two of them: then
    /// [`Cluster::reconcile_deployments`] has nothing to do. Pods change all the time (bindings, status) while
    /// the replica counts rarely do: the counts follow the pods' watch events ([`Replicas`]).
    fn deployments_balanced(&mut self) -> bool {
        self.replicas.sync(&self.pods);
        self.replicas.balanced(&self.deployments)
    }

    /// The DaemonSet controller: one pod per Ready node the daemon's pod tolerates and selects, bound directly
    /// (as the real controller does, bypassing the scheduler). Returns the pods created.
    pub fn reconcile_daemonsets(&mut self) -> Vec<Key> {
        let mut created = Vec::new();
        if self.synced.daemonsets == Some([self.daemonsets.stamp(), self.nodes.stamp(), self.pods.stamp()]) {
            return created;
        }
        let sets: Vec<(Key, Arc<DaemonSet>)> = self.daemonsets.iter().map(|(k, d)| (k.clone(), d.clone())).collect();
        for ((ns, name), ds) in sets {
            let template_spec = ds.spec.template.spec.clone().unwrap_or_default();
            let probe = StoredPod::unshared(Pod {
                metadata: ds.spec.template.metadata.clone().unwrap_or_default(),
                spec: Some(template_spec.clone()),
                status: None,
            });
            let Ok(shape) = pod::pod_data(&probe, &[]) else { continue };
            // The nodes that need this daemon, in name order (their pod names differ, so creating one pod cannot
            // change whether another is needed).
            let mut missing: Vec<(String, Key)> = Vec::new();
            for n in self.nodes.values().filter(|n| n.metadata.deletion_timestamp.is_none()) {
                let node_name = n.metadata.name.clone().unwrap_or_default();
                let key = (ns.clone(), format!("{name}-{node_name}"));
                if self.pods.contains_key(&key) {
                    continue;
                }
                let taints = n.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
                // Daemons tolerate the not-ready/unschedulable taints the controller adds tolerations for.
                let blocking: Vec<_> = taints
                    .iter()
                    .filter(|t| t.effect != "PreferNoSchedule" && !t.key.starts_with("node.kubernetes.io/"))
                    .cloned()
                    .collect();
                if crate::engine::scheduling::taints::first_untolerated(&blocking, &shape.tolerations, true).is_some() {
                    continue;
                }
                let node_reqs =
                    crate::engine::requirements::Requirements::from_labels(n.metadata.labels.iter().flatten());
                if !node_reqs.admits(&shape.strict_requirements(), None) {
                    continue;
                }
                missing.push((node_name, key));
            }
            for (node_name, key) in missing {
                let mut meta = ds.spec.template.metadata.clone().unwrap_or_default();
                meta.name = Some(key.1.clone());
                meta.namespace = Some(ns.clone());
                meta.uid = None;
                meta.owner_references = Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "DaemonSet".into(),
                    name: name.clone(),
                    uid: ds.metadata.uid.clone().unwrap_or_default(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]);
                let mut spec = template_spec.clone();
                spec.node_name = Some(node_name);
                let mut p = StoredPod::from(Pod { metadata: meta, spec: Some(spec), status: None });
                self.stamp(&mut p.metadata);
                self.pods.insert(key.clone(), p);
                created.push(key);
            }
        }
        self.synced.daemonsets = Some([self.daemonsets.stamp(), self.nodes.stamp(), self.pods.stamp()]);
        created
    }

    /// The kube-scheduler stand-in: binds pending pods to Ready, registered nodes where they fit (the engine's
    /// scheduling simulation restricted to existing nodes, first fit), and marks the rest unschedulable. Pods
    /// nominated to a node (status.nominatedNodeName) are bound there first, as kube-scheduler's
    /// PreferNominatedNode tries that node first and its nominator counts them as using the node's room against
    /// pods not nominated to it (priorities are not compared: the stand-in has no preemption). A nominated pod
    /// that no longer fits its Ready node goes the normal way; if no node takes it, its nomination is cleared, as
    /// kube-scheduler clears it after an attempt that failed (so Karpenter provisions for it again). A pod
    /// nominated to a node that is not Ready yet keeps its nomination while it waits for it. Returns the (pod,
    /// node) bindings.
    pub fn schedule_pending(&mut self) -> Vec<(Key, String)> {
        self.schedule_pending_with(&mut SnapshotMirror::default())
    }

    /// [`Cluster::schedule_pending`] reading the store through a kept snapshot (its objects and pod digests are
    /// reused when unchanged).
    pub fn schedule_pending_with(&mut self, mirror: &mut SnapshotMirror) -> Vec<(Key, String)> {
        if self.synced.scheduler == Some(self.scheduler_stamps()) {
            return Vec::new();
        }
        let pending: BTreeSet<Key> = self
            .pods
            .iter()
            .filter(|(_, p)| p.metadata.deletion_timestamp.is_none() && p.bound_node().is_none())
            .map(|(k, _)| k.clone())
            .collect();
        if pending.is_empty() {
            self.synced.scheduler = Some(self.scheduler_stamps());
            return Vec::new();
        }
        let view = self.snapshot_into(mirror);
        let namespaces: Vec<(String, BTreeMap<String, String>)> = view
            .namespaces
            .iter()
            .map(|n| (n.metadata.name.clone().unwrap_or_default(), n.metadata.labels.clone().unwrap_or_default()))
            .collect();
        let states = Nodes::of(&view);
        let mut existing = Vec::new();
        let mut node_labels = BTreeMap::new();
        let mut shared = SharedLabels::default();
        for s in &states {
            let Some(n) = s.node else { continue };
            let name = s.name();
            let taints = n.spec.as_ref().and_then(|sp| sp.taints.clone()).unwrap_or_default();
            let labels = Arc::new(s.labels());
            node_labels.insert(name.clone(), (labels.clone(), taints.clone()));
            if !node_ready(n) || n.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let requirements = Arc::new(ExistingNode::label_requirements_sharing(&name, &labels, &mut shared));
            let volume_limits =
                Arc::new(self.csinodes.get(&name).map(|c| volumes::csinode_limits(c)).unwrap_or_default());
            existing.push(ExistingNode {
                name,
                labels,
                taints,
                startup_taints: Vec::new(),
                allocatable: s.allocatable(),
                capacity: s.capacity(),
                // The real scheduler never ignores taints: present every node as initialized.
                initialized: true,
                managed: false,
                nodepool: None,
                requirements: Some(requirements),
                // kube-scheduler counts attach limits from CSINodes alone.
                volume_limits,
            });
        }
        let mut to_schedule: Vec<Arc<PodData>> = Vec::new();
        let mut keys: Vec<Key> = Vec::new();
        // Per pod to schedule, the node it is nominated to, if any.
        let mut nominated: Vec<Option<String>> = Vec::new();
        let mut bound: Vec<(Arc<PodData>, String)> = Vec::new();
        // The snapshot's pods are the store's, in the same (key) order.
        for ((k, p), d) in self.pods.iter().zip(pod_digests(&view, &namespaces)) {
            let Ok(d) = d else { continue };
            match p.bound_node().map(str::to_string) {
                Some(node) if p.metadata.deletion_timestamp.is_none() => bound.push((d, node)),
                Some(_) => {}
                None if pending.contains(k) => {
                    to_schedule.push(d);
                    keys.push(k.clone());
                    let n = p.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).filter(|n| !n.is_empty());
                    nominated.push(n.map(str::to_string));
                }
                None => {}
            }
        }
        let exists: BTreeSet<&str> = view
            .nodes
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_none())
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        let ready: BTreeSet<&str> = existing.iter().map(|n| n.name.as_str()).collect();
        let daemonsets = Vec::new();
        let volumes = VolumeIndex::new(view.pvcs, view.pvs, view.storage_classes);
        let no_types = BTreeMap::new();
        let usage = BTreeMap::new();
        let pass = |bound: &[(Arc<PodData>, String)], pods: &[Arc<PodData>]| {
            let input = Input {
                nodepools: &[],
                instance_types: &no_types,
                policy: &Default::default(),
                nodes: &existing,
                nodepool_usage: &usage,
                bound_pods: bound,
                node_labels: &node_labels,
                daemonsets: &daemonsets,
                volumes: &volumes,
                options: SchedulerOptions { ignore_preferences: false, ..Default::default() },
            };
            solve(&input, pods).existing
        };
        let mut bindings = Vec::new();
        let mut placed: BTreeSet<usize> = BTreeSet::new();
        // First the pods nominated to a Ready node, each held to its node (a hostname selector), so their room is
        // theirs before any other pod is placed.
        let first: Vec<usize> =
            (0..keys.len()).filter(|&i| nominated[i].as_deref().is_some_and(|n| ready.contains(n))).collect();
        if !first.is_empty() {
            let pinned: Vec<Arc<PodData>> = first
                .iter()
                .map(|&i| {
                    let mut d = PodData::clone(&to_schedule[i]);
                    let node = nominated[i].clone().unwrap_or_default();
                    d.node_selector.add(labels::HOSTNAME, Requirement::in_values([node]));
                    Arc::new(d)
                })
                .collect();
            for placement in pass(&bound, &pinned) {
                for &j in &placement.pods {
                    let i = first[j];
                    placed.insert(i);
                    bound.push((to_schedule[i].clone(), placement.node.clone()));
                    bindings.push((keys[i].clone(), placement.node.clone()));
                }
            }
        }
        let rest: Vec<usize> = (0..keys.len()).filter(|i| !placed.contains(i)).collect();
        let others: Vec<Arc<PodData>> = if placed.is_empty() {
            std::mem::take(&mut to_schedule)
        } else {
            rest.iter().map(|&i| to_schedule[i].clone()).collect()
        };
        for placement in pass(&bound, &others) {
            for &j in &placement.pods {
                placed.insert(rest[j]);
                bindings.push((keys[rest[j]].clone(), placement.node.clone()));
            }
        }
        // Nominations no attempt can honour any more: the node is gone, or it is Ready and didn't take the pod.
        let stale: Vec<usize> = (0..keys.len())
            .filter(|i| !placed.contains(i))
            .filter(|&i| nominated[i].as_deref().is_some_and(|n| ready.contains(n) || !exists.contains(n)))
            .collect();
        for i in stale {
            if let Some(p) = self.pods.get_mut(&keys[i]) {
                p.status.get_or_insert_with(PodStatus::default).nominated_node_name = None;
            }
        }
        for (key, node) in &bindings {
            if let Some(p) = self.pods.get_mut(key) {
                p.node_name = Some(node.clone());
                p.status.get_or_insert_with(PodStatus::default).nominated_node_name = None;
                set_pod_condition(
                    p,
                    PodCondition { type_: "PodScheduled".into(), status: "True".into(), ..Default::default() },
                );
            }
        }
        for (i, key) in keys.iter().enumerate() {
            if !placed.contains(&i)
                && self.pods.get(key).is_some_and(|p| !is_marked_unschedulable(p))
                && let Some(p) = self.pods.get_mut(key)
            {
                unschedulable(p);
            }
        }
        self.synced.scheduler = bindings.is_empty().then(|| self.scheduler_stamps());
        bindings.sort();
        bindings
    }

    /// Pods bound to a node.
    pub fn pods_on(&self, node: &str) -> Vec<&StoredPod> {
        self.pods.values().filter(|p| p.node_name() == Some(node)).map(|p| &**p).collect()
    }

    /// Whether a node is Karpenter-managed and registered.
    pub fn is_registered(&self, node: &str) -> bool {
        self.nodes
            .get(node)
            .and_then(|n| n.metadata.labels.as_ref())
            .is_some_and(|l| l.get(labels::REGISTERED).is_some_and(|v| v == "true"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, Taint};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    const MANIFESTS: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 3\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: c, image: x, resources: {requests: {cpu: '1'}}}]\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent, namespace: kube-system}\nspec:\n  selector: {matchLabels: {app: agent}}\n  template:\n    metadata: {labels: {app: agent}}\n    spec:\n      containers: [{name: a, image: x, resources: {requests: {cpu: 100m}}}]\n";

    fn node(name: &str, cpu: &str, ready: bool, taints: Vec<Taint>) -> Node {
        let res: BTreeMap<String, Quantity> = [
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity("8Gi".into())),
            ("pods".to_string(), Quantity("110".into())),
        ]
        .into();
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([(labels::HOSTNAME.to_string(), name.to_string())].into()),
                ..Default::default()
            },
            spec: Some(NodeSpec { taints: Some(taints), ..Default::default() }),
            status: Some(NodeStatus {
                capacity: Some(res.clone()),
                allocatable: Some(res),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn deployments_scale_with_stable_names() {
        let build = || {
            let mut c = Cluster { name_seed: 7, ..Default::default() };
            c.apply(&ClusterObjects::parse(MANIFESTS, "m.yaml").unwrap());
            c
        };
        let mut c = build();
        let (created, _) = c.reconcile_deployments();
        assert_eq!(created.len(), 3);
        assert!(created.iter().all(|(ns, n)| ns == "default" && n.starts_with("web-") && n.len() == 9));
        // Same seed, same names.
        assert_eq!(build().reconcile_deployments().0, created);
        c.deployments.values_mut().for_each(|d| d.spec.replicas = Some(1));
        let (_, deleted) = c.reconcile_deployments();
        assert_eq!(deleted, vec![created[2].clone(), created[1].clone()], "newest first");
        c.deployments.values_mut().for_each(|d| d.spec.replicas = Some(2));
        let (again, _) = c.reconcile_deployments();
        assert_eq!(again.len(), 1);
        assert!(!created[1..].contains(&again[0]), "a new name, not a reused one");
    }

    #[test]
    fn scheduler_binds_what_fits_and_marks_the_rest() {
        let mut c = Cluster::default();
        c.apply(&ClusterObjects::parse(MANIFESTS, "m.yaml").unwrap());
        c.reconcile_deployments();
        c.nodes.insert("n1".into(), node("n1", "2", true, vec![]));
        c.nodes.insert("n2".into(), node("n2", "8", false, vec![]));
        c.nodes.insert(
            "n3".into(),
            node(
                "n3",
                "8",
                true,
                vec![Taint { key: "dedicated".into(), value: None, effect: "NoSchedule".into(), time_added: None }],
            ),
        );
        let daemons = c.reconcile_daemonsets();
        // The agent tolerates nothing: n3's taint keeps it off; n1 and n2 get one each.
        assert_eq!(daemons.len(), 2);
        let bindings = c.schedule_pending();
        // n1 has 2 CPU with 100m taken by the daemon: one 1-CPU web pod fits; n2 is not Ready, n3 tainted.
        assert_eq!(bindings.len(), 1, "{bindings:?}");
        assert_eq!(bindings[0].1, "n1");
        let unschedulable = c.pods.values().filter(|p| crate::engine::provisioning::is_provisionable(p)).count();
        assert_eq!(unschedulable, 2);
        // Nothing changed: the pass that bound nothing is not repeated, and marking again changes nothing.
        let stamps = c.stamps();
        assert!(c.schedule_pending().is_empty());
        assert_eq!(c.stamps(), stamps);
        // A direct edit of the store (here a new node) is seen by the next pass.
        c.nodes.insert("n4".into(), node("n4", "8", true, vec![]));
        assert_eq!(c.schedule_pending().len(), 2);
    }

    #[test]
    fn kept_digests_share_one_label_map_per_distinct_set() {
        let mut c = Cluster::default();
        c.apply(&ClusterObjects::parse(MANIFESTS, "m.yaml").unwrap());
        c.reconcile_deployments();
        let mut mirror = SnapshotMirror::default();
        let digests = |c: &Cluster, m: &mut SnapshotMirror| {
            let view = c.snapshot_into(m);
            pod_digests(&view, &[]).into_iter().map(|d| d.unwrap()).collect::<Vec<_>>()
        };
        let d = digests(&c, &mut mirror);
        assert_eq!(d.len(), 3, "the Deployment's three replicas");
        assert!(d.iter().all(|x| *x.labels == *d[0].labels));
        assert!(d.iter().all(|x| Arc::ptr_eq(&x.labels, &d[0].labels)), "one map for the three");
        assert!(d.iter().all(|x| Arc::ptr_eq(&x.tolerations, &d[0].tolerations)), "and one toleration list");
        // A replica relabelled gets its own map; the others keep sharing theirs.
        let first = c.pods.keys().next().cloned().unwrap();
        c.pods.get_mut(&first).unwrap().metadata.labels.get_or_insert_default().insert("canary".into(), "1".into());
        let e = digests(&c, &mut mirror);
        assert_eq!(e[0].labels.get("canary").map(String::as_str), Some("1"));
        assert!(!Arc::ptr_eq(&e[0].labels, &e[1].labels));
        assert!(Arc::ptr_eq(&e[1].labels, &e[2].labels) && Arc::ptr_eq(&e[1].labels, &d[1].labels));
    }

    /// The mirror the engine reads follows the store's events (and relists when behind) and always equals a
    /// fresh snapshot; objects not written keep their mirror version (their digests are reused).
    #[test]
    fn the_snapshot_mirror_follows_the_watch_and_relists_when_behind() {
        let mut c = Cluster::default();
        c.apply(&ClusterObjects::parse(MANIFESTS, "m.yaml").unwrap());
        c.reconcile_deployments();
        c.nodes.insert("n1".into(), node("n1", "8", true, vec![]));
        let mut mirror = SnapshotMirror::default();
        let same = |c: &Cluster, m: &mut SnapshotMirror| {
            let fresh = c.snapshot();
            let view = c.snapshot_into(m);
            assert!(view.pods.iter().eq(fresh.pods.iter().map(|p| &**p)));
            assert!(view.nodes.iter().eq(fresh.nodes.iter().map(|n| &**n)));
        };
        same(&c, &mut mirror);
        let versions = mirror.pods.store.versions().to_vec();
        let seen = mirror.pods.seen;
        assert_eq!(seen, Some(c.pods.resource_version()));
        // A binding (Modified) is copied in place; the other pods keep their versions.
        c.schedule_pending();
        same(&c, &mut mirror);
        assert_eq!(mirror.pods.store.versions().len(), versions.len());
        let changed = mirror.pods.store.versions().iter().zip(&versions).filter(|(a, b)| a != b).count();
        assert_eq!(changed, 3, "the three bound pods only");
        // Pods come and go (Added/Deleted): merged.
        let versions = mirror.pods.store.versions().to_vec();
        let first = c.pods.keys().next().cloned().unwrap();
        c.pods.remove(&first);
        c.reconcile_deployments();
        same(&c, &mut mirror);
        assert_eq!(mirror.pods.store.versions().iter().filter(|v| versions.contains(v)).count(), 2);
        // More writes than the log keeps: the mirror is behind (410) and relists, keeping equal objects.
        let versions = mirror.pods.store.versions().to_vec();
        // (The log keeps LOG_CAPACITY events: one more write pushes out the last one the mirror saw.)
        for _ in 0..=crate::sim::watch::LOG_CAPACITY {
            c.nodes.get_mut("n1");
        }
        assert!(c.nodes.events_since(mirror.nodes.seen.unwrap()).is_err());
        same(&c, &mut mirror);
        assert_eq!(mirror.pods.store.versions(), versions, "pods were not written");
        // Every object carries the store-wide resourceVersion of its last write.
        let node_rv = c.nodes["n1"].metadata.resource_version.clone();
        assert_eq!(node_rv, Some(c.resource_version().to_string()));
    }
}
