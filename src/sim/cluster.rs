//! The simulated cluster: an object store for the kinds the engine reads, and the controllers a real cluster runs
//! besides Karpenter — a Deployment controller (replica pods with stable names), a DaemonSet controller (one pod
//! per eligible node) and a kube-scheduler stand-in that binds pending pods to nodes and marks the rest
//! `PodScheduled=False/Unschedulable`, which is what makes them provisionable.
//!
//! The kube-scheduler stand-in reuses the engine's scheduling simulation restricted to existing nodes: the same
//! code that decides Karpenter's placements checks resources, taints, selectors, affinity, topology spread and host
//! ports, so the two never disagree about whether a pod fits.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, PodCondition, PodStatus,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::engine::api::{EC2NodeClass, NodeClaim, NodePool};
use crate::engine::labels;
use crate::engine::provisioning::{Snapshot, StateNode, state_nodes};
use crate::engine::scheduling::pod::{self, PodData};
use crate::engine::scheduling::volumes::VolumeIndex;
use crate::engine::scheduling::{ExistingNode, Input, SchedulerOptions, solve};
use crate::sim::manifests::Manifests;

/// Namespaced key.
pub type Key = (String, String);

fn key_of(meta: &ObjectMeta) -> Key {
    (meta.namespace.clone().unwrap_or_else(|| "default".into()), meta.name.clone().unwrap_or_default())
}

/// Every object of the simulated cluster, in ordered maps so iteration (and so every decision) is deterministic.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    pub nodepools: BTreeMap<String, NodePool>,
    pub nodeclaims: BTreeMap<String, NodeClaim>,
    pub nodeclasses: BTreeMap<String, EC2NodeClass>,
    pub nodes: BTreeMap<String, Node>,
    pub pods: BTreeMap<Key, Pod>,
    pub deployments: BTreeMap<Key, Deployment>,
    pub daemonsets: BTreeMap<Key, DaemonSet>,
    pub pdbs: BTreeMap<Key, PodDisruptionBudget>,
    pub pvcs: BTreeMap<Key, PersistentVolumeClaim>,
    pub pvs: BTreeMap<String, PersistentVolume>,
    pub storage_classes: BTreeMap<String, StorageClass>,
    pub namespaces: BTreeMap<String, Namespace>,
    next_uid: u64,
    /// The seeded generator behind generated pod names.
    pub name_seed: u64,
}

fn unschedulable(p: &mut Pod) {
    let status = p.status.get_or_insert_with(PodStatus::default);
    let conds = status.conditions.get_or_insert_with(Vec::new);
    conds.retain(|c| c.type_ != "PodScheduled");
    conds.push(PodCondition {
        type_: "PodScheduled".into(),
        status: "False".into(),
        reason: Some("Unschedulable".into()),
        ..Default::default()
    });
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
    pub fn apply(&mut self, m: &Manifests) {
        for o in &m.nodepools {
            self.nodepools.insert(o.name().to_string(), o.clone());
        }
        for o in &m.nodeclaims {
            self.nodeclaims.insert(o.name().to_string(), o.clone());
        }
        for o in &m.nodeclasses {
            self.nodeclasses.insert(o.metadata.name.clone().unwrap_or_default(), o.clone());
        }
        for o in &m.nodes {
            self.nodes.insert(o.metadata.name.clone().unwrap_or_default(), o.clone());
        }
        for o in &m.pods {
            let mut p = o.clone();
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
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            nodepools: self.nodepools.values().cloned().collect(),
            nodeclaims: self.nodeclaims.values().cloned().collect(),
            nodes: self.nodes.values().cloned().collect(),
            pods: self.pods.values().cloned().collect(),
            daemonsets: self.daemonsets.values().cloned().collect(),
            pdbs: self.pdbs.values().cloned().collect(),
            pvcs: self.pvcs.values().cloned().collect(),
            pvs: self.pvs.values().cloned().collect(),
            storage_classes: self.storage_classes.values().cloned().collect(),
            namespaces: self.namespaces.values().cloned().collect(),
        }
    }

    /// The Deployment controller: each Deployment has exactly `replicas` live pods named `<name>-<ordinal>`
    /// (lowest free ordinals first; scale-down removes the highest). Returns the pods created and deleted.
    pub fn reconcile_deployments(&mut self) -> (Vec<Key>, Vec<Key>) {
        let mut created = Vec::new();
        let mut deleted = Vec::new();
        let deployments: Vec<(Key, Deployment)> =
            self.deployments.iter().map(|(k, d)| (k.clone(), d.clone())).collect();
        for ((ns, name), d) in deployments {
            let want = d.spec.replicas.unwrap_or(1).max(0) as usize;
            // Live replicas, oldest first (uids are issued in creation order).
            let mut owned: Vec<(bool, String, Key)> = self
                .pods
                .iter()
                .filter(|((pns, _), p)| {
                    *pns == ns
                        && p.metadata.deletion_timestamp.is_none()
                        && p.metadata
                            .owner_references
                            .iter()
                            .flatten()
                            .any(|o| o.kind == "ReplicaSet" && o.name == name)
                })
                .map(|(k, p)| {
                    let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
                    (bound, p.metadata.uid.clone().unwrap_or_default(), k.clone())
                })
                .collect();
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
                let mut p = Pod { metadata: meta, spec: d.spec.template.spec.clone(), status: None };
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
        (created, deleted)
    }

    /// The DaemonSet controller: one pod per Ready node the daemon's pod tolerates and selects, bound directly
    /// (as the real controller does, bypassing the scheduler). Returns the pods created.
    pub fn reconcile_daemonsets(&mut self) -> Vec<Key> {
        let mut created = Vec::new();
        let sets: Vec<(Key, DaemonSet)> = self.daemonsets.iter().map(|(k, d)| (k.clone(), d.clone())).collect();
        let nodes: Vec<Node> =
            self.nodes.values().filter(|n| n.metadata.deletion_timestamp.is_none()).cloned().collect();
        for ((ns, name), ds) in sets {
            let template_spec = ds.spec.template.spec.clone().unwrap_or_default();
            let probe = Pod {
                metadata: ds.spec.template.metadata.clone().unwrap_or_default(),
                spec: Some(template_spec.clone()),
                status: None,
            };
            let Ok(shape) = pod::pod_data(&probe, &[]) else { continue };
            for n in &nodes {
                let node_name = n.metadata.name.clone().unwrap_or_default();
                let pname = format!("{name}-{node_name}");
                let key = (ns.clone(), pname.clone());
                if self.pods.contains_key(&key) {
                    continue;
                }
                let taints = n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
                // Daemons tolerate the not-ready/unschedulable taints the controller adds tolerations for.
                let blocking: Vec<_> = taints
                    .iter()
                    .filter(|t| t.effect != "PreferNoSchedule" && !t.key.starts_with("node.kubernetes.io/"))
                    .cloned()
                    .collect();
                if crate::engine::scheduling::taints::first_untolerated(&blocking, &shape.tolerations, true).is_some() {
                    continue;
                }
                let node_reqs = crate::engine::requirements::Requirements::from_labels(
                    n.metadata.labels.clone().unwrap_or_default().iter(),
                );
                if node_reqs.compatible(&shape.strict_requirements(), None).is_err() {
                    continue;
                }
                let mut meta = ds.spec.template.metadata.clone().unwrap_or_default();
                meta.name = Some(pname);
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
                let mut p = Pod { metadata: meta, spec: Some(spec), status: None };
                self.stamp(&mut p.metadata);
                self.pods.insert(key.clone(), p);
                created.push(key);
            }
        }
        created
    }

    /// The kube-scheduler stand-in: binds pending pods to Ready, registered nodes where they fit (the engine's
    /// scheduling simulation restricted to existing nodes), and marks the rest unschedulable. Pods nominated to a
    /// node (status.nominatedNodeName) are considered like any other. Returns the (pod, node) bindings.
    pub fn schedule_pending(&mut self) -> Vec<(Key, String)> {
        let pending: BTreeSet<Key> = self
            .pods
            .iter()
            .filter(|(_, p)| {
                p.metadata.deletion_timestamp.is_none()
                    && p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_none_or(str::is_empty)
            })
            .map(|(k, _)| k.clone())
            .collect();
        if pending.is_empty() {
            return Vec::new();
        }
        let snap = self.snapshot();
        let view = snap.view();
        let namespaces: Vec<(String, BTreeMap<String, String>)> = snap
            .namespaces
            .iter()
            .map(|n| (n.metadata.name.clone().unwrap_or_default(), n.metadata.labels.clone().unwrap_or_default()))
            .collect();
        let states: Vec<StateNode<'_>> = state_nodes(&view);
        let mut existing = Vec::new();
        let mut node_labels = BTreeMap::new();
        for s in &states {
            let Some(n) = s.node else { continue };
            let name = s.name();
            let taints = n.spec.as_ref().and_then(|sp| sp.taints.clone()).unwrap_or_default();
            node_labels.insert(name.clone(), (s.labels(), taints.clone()));
            if !node_ready(n) || n.metadata.deletion_timestamp.is_some() {
                continue;
            }
            existing.push(ExistingNode {
                name,
                labels: s.labels(),
                taints,
                startup_taints: Vec::new(),
                allocatable: s.allocatable(),
                capacity: s.capacity(),
                // The real scheduler never ignores taints: present every node as initialized.
                initialized: true,
                managed: false,
                nodepool: None,
            });
        }
        let mut to_schedule: Vec<PodData> = Vec::new();
        let mut keys: Vec<Key> = Vec::new();
        let mut bound: Vec<(PodData, String)> = Vec::new();
        for (k, p) in &self.pods {
            let Ok(d) = pod::pod_data(p, &namespaces) else { continue };
            match p.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()) {
                Some(node) if p.metadata.deletion_timestamp.is_none() => bound.push((d, node)),
                Some(_) => {}
                None if pending.contains(k) => {
                    to_schedule.push(d);
                    keys.push(k.clone());
                }
                None => {}
            }
        }
        let daemonsets = Vec::new();
        let volumes = VolumeIndex::new(&snap.pvcs, &snap.pvs, &snap.storage_classes);
        let no_types = BTreeMap::new();
        let usage = BTreeMap::new();
        let input = Input {
            nodepools: &[],
            instance_types: &no_types,
            policy: &Default::default(),
            nodes: &existing,
            nodepool_usage: &usage,
            bound_pods: &bound,
            node_labels: &node_labels,
            daemonsets: &daemonsets,
            volumes: &volumes,
            options: SchedulerOptions { ignore_preferences: false, ..Default::default() },
        };
        let results = solve(&input, &to_schedule);
        let mut bindings = Vec::new();
        let mut placed: BTreeSet<usize> = BTreeSet::new();
        for placement in &results.existing {
            for &i in &placement.pods {
                placed.insert(i);
                bindings.push((keys[i].clone(), placement.node.clone()));
            }
        }
        for (key, node) in &bindings {
            if let Some(p) = self.pods.get_mut(key) {
                if let Some(spec) = p.spec.as_mut() {
                    spec.node_name = Some(node.clone());
                }
                let status = p.status.get_or_insert_with(PodStatus::default);
                status.nominated_node_name = None;
                let conds = status.conditions.get_or_insert_with(Vec::new);
                conds.retain(|c| c.type_ != "PodScheduled");
                conds.push(PodCondition { type_: "PodScheduled".into(), status: "True".into(), ..Default::default() });
            }
        }
        for (i, key) in keys.iter().enumerate() {
            if !placed.contains(&i)
                && let Some(p) = self.pods.get_mut(key)
            {
                unschedulable(p);
            }
        }
        bindings.sort();
        bindings
    }

    /// Pods bound to a node.
    pub fn pods_on(&self, node: &str) -> Vec<&Pod> {
        self.pods.values().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)).collect()
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
            c.apply(&Manifests::parse(MANIFESTS, "m.yaml").unwrap());
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
        c.apply(&Manifests::parse(MANIFESTS, "m.yaml").unwrap());
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
    }
}
