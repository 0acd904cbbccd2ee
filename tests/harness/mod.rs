//! An in-memory cluster the live controller's effects land in, with the API server's semantics that matter here
//! (generated names, finalizers turning deletes into deletion timestamps, resourceVersion conflicts, node objects
//! as KWOK instances), while the simulated Deployment controller and scheduler play the rest of the cluster.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use karpenter_tui::controller::{Controller, Effect, Outcome, generation};
use karpenter_tui::engine::catalog::Catalog;
use karpenter_tui::engine::catalog::kwok::kwok_catalog;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::engine::labels;
use karpenter_tui::engine::lifecycle::{apply_launch, ms_time};
use karpenter_tui::engine::manifests::Manifests;
use karpenter_tui::engine::provisioning::Millis;
use karpenter_tui::kube::kwok;
use karpenter_tui::sim::cluster::Cluster;

pub const OBJECTS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.kwok.sh/instance-cpu, operator: In, values: ["4"]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate, namespace: default}
spec:
  replicas: 6
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: c, image: pause, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"#;

/// The in-memory cluster the effects land in.
pub struct Harness {
    pub cluster: Cluster,
    pub catalog: Arc<Catalog>,
    pub controller: Controller,
    pub now: Millis,
    created: u64,
    rv: u64,
    /// (object name, reason, message) of every Event written.
    pub events: Vec<(String, String, String)>,
    /// Run the controller as the live loop does: only when the cluster changed since its last run or its
    /// `next_wake` is due (otherwise: every tick).
    pub lazy: bool,
    /// How many times the controller ran.
    pub runs: usize,
    /// The cluster as the last run read it, and that run's next wake.
    seen: Option<u64>,
    wake: Millis,
}

/// Anything a watch would report as a change: the objects the controller reads, in full.
pub fn state_key(m: &Manifests) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    generation(m).hash(&mut h);
    serde_json::to_string(&m.nodeclaims).unwrap().hash(&mut h);
    serde_json::to_string(&m.nodes).unwrap().hash(&mut h);
    serde_json::to_string(&m.nodepools).unwrap().hash(&mut h);
    h.finish()
}

pub fn manifests(c: &Cluster) -> Manifests {
    Manifests {
        nodepools: c.nodepools.values().map(|o| (**o).clone()).collect(),
        nodeclaims: c.nodeclaims.values().map(|o| (**o).clone()).collect(),
        nodeclasses: c.nodeclasses.values().map(|o| (**o).clone()).collect(),
        nodes: c.nodes.values().map(|o| (**o).clone()).collect(),
        pods: c.pods.values().cloned().collect(),
        // As the live watch cache: the engine would otherwise add the Deployments' pods to the ones that exist.
        deployments: Vec::new(),
        capacitybuffers: c.capacitybuffers.values().map(|o| (**o).clone()).collect(),
        pod_templates: c.pod_templates.values().map(|o| (**o).clone()).collect(),
        workloads: karpenter_tui::engine::manifests::Workloads {
            deployments: c.deployments.values().map(|o| (**o).clone()).collect(),
            statefulsets: Vec::new(),
        },
        ..Default::default()
    }
}

impl Harness {
    pub fn new(mode: Mode) -> Harness {
        Harness::with_objects(mode, OBJECTS)
    }

    pub fn with_objects(mode: Mode, objects: &str) -> Harness {
        let mut cluster = Cluster::with_seed(7);
        cluster.apply(&Manifests::parse(objects, "objects.yaml").unwrap());
        let catalog = Arc::new(kwok_catalog("us-east-1"));
        let now = 1_700_000_000_000;
        Harness {
            cluster,
            controller: Controller::new(catalog.clone(), mode, now),
            catalog,
            now,
            created: 0,
            rv: 0,
            events: Vec::new(),
            lazy: false,
            runs: 0,
            seen: None,
            wake: Millis::MIN,
        }
    }

    pub fn bump(&mut self) -> Option<String> {
        self.rv += 1;
        Some(self.rv.to_string())
    }

    /// Deletion honours finalizers, as the API server does.
    pub fn delete_node(&mut self, name: &str) {
        let now = self.now;
        let Some(n) = self.cluster.nodes.get_mut(name) else { return };
        if n.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
            n.metadata.deletion_timestamp.get_or_insert(ms_time(now));
        } else {
            self.cluster.nodes.remove(name);
            // The pod garbage collector removes pods bound to a node that is gone.
            self.cluster.pods.retain(|_, p| p.node_name() != Some(name));
        }
    }

    pub fn apply(&mut self, effects: Vec<Effect>) {
        let now = self.now;
        for e in effects {
            match e {
                Effect::CreateNodeClaim { mut claim, purpose } => {
                    self.created += 1;
                    let name = format!("{}{:05}", claim.metadata.generate_name.clone().unwrap(), self.created);
                    claim.metadata.name = Some(name.clone());
                    claim.metadata.creation_timestamp = Some(ms_time(now));
                    claim.metadata.resource_version = self.bump();
                    assert!(claim.metadata.finalizers.iter().flatten().any(|f| f == labels::TERMINATION_FINALIZER));
                    self.cluster.nodeclaims.insert(name.clone(), *claim);
                    self.controller.outcome(Outcome::Created { name, purpose }, now);
                }
                Effect::Launch { claim } => {
                    let (result, mut node) = kwok::launch(&self.catalog, &claim, &Default::default()).unwrap();
                    node.metadata.creation_timestamp = Some(ms_time(now));
                    self.cluster.nodes.insert(node.metadata.name.clone().unwrap(), node);
                    // The launch records the claim's status as the effect carries it (this tick's conditions).
                    let stored = self.cluster.nodeclaims.get_mut(claim.name()).unwrap();
                    stored.status = claim.status.clone();
                    apply_launch(stored, &result, now);
                    self.controller.outcome(Outcome::Launched { claim: claim.name().to_string() }, now);
                }
                Effect::PatchClaimStatus { name, status } => {
                    if let Some(c) = self.cluster.nodeclaims.get_mut(&name) {
                        c.status = Some(*status);
                    }
                }
                Effect::PatchClaimMetadata { name, labels: l, annotations, finalizers } => {
                    if let Some(c) = self.cluster.nodeclaims.get_mut(&name) {
                        c.metadata.labels.get_or_insert_with(BTreeMap::new).extend(l);
                        c.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(annotations);
                        if let Some(f) = finalizers {
                            c.metadata.finalizers = Some(f);
                        }
                    }
                }
                Effect::SyncNode { name, resource_version, labels: l, annotations, taints, finalizers } => {
                    // The store versions every write itself (sim::watch): compare before writing.
                    let Some(current) = self.cluster.nodes.get(&name).map(|n| n.metadata.resource_version.clone())
                    else {
                        continue;
                    };
                    if resource_version.is_some() && current.is_some() && current != resource_version {
                        continue; // 409: decided on a stale copy
                    }
                    let Some(n) = self.cluster.nodes.get_mut(&name) else { continue };
                    n.metadata.labels.get_or_insert_with(BTreeMap::new).extend(l);
                    n.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(annotations);
                    if let Some(taints) = taints {
                        n.spec.get_or_insert_with(Default::default).taints = Some(taints);
                    }
                    if let Some(finalizers) = finalizers {
                        let deleting = n.metadata.deletion_timestamp.is_some();
                        n.metadata.finalizers = Some(finalizers.clone());
                        if deleting && finalizers.is_empty() {
                            self.delete_node(&name);
                        }
                    }
                }
                Effect::PatchNodePoolStatus { name, status } => {
                    if let Some(p) = self.cluster.nodepools.get_mut(&name) {
                        p.status = Some(*status);
                    }
                }
                Effect::Relabel { target, name, set, remove } => {
                    let meta = match target {
                        karpenter_tui::controller::effect::LabelTarget::NodeClaim => {
                            self.cluster.nodeclaims.get_mut(&name).map(|c| &mut c.metadata)
                        }
                        karpenter_tui::controller::effect::LabelTarget::Node => {
                            self.cluster.nodes.get_mut(&name).map(|n| &mut n.metadata)
                        }
                    };
                    if let Some(meta) = meta {
                        let l = meta.labels.get_or_insert_with(BTreeMap::new);
                        for k in &remove {
                            l.remove(k);
                        }
                        l.extend(set);
                    }
                }
                Effect::Nominate { namespace, name, uid, node } => {
                    let key = (namespace, name);
                    let same = self.cluster.pods.get(&key).is_some_and(|p| uid.is_none() || p.metadata.uid == uid);
                    if same && let Some(p) = self.cluster.pods.get_mut(&key) {
                        p.status.get_or_insert_with(Default::default).nominated_node_name = Some(node);
                    }
                }
                Effect::DeleteNodeClaim { name, .. } => {
                    if let Some(c) = self.cluster.nodeclaims.get_mut(&name) {
                        c.metadata.deletion_timestamp.get_or_insert(ms_time(now));
                    }
                }
                Effect::FinalizeNodeClaim { claim } => {
                    self.cluster.nodeclaims.remove(claim.name());
                }
                Effect::DeleteNode { name } => self.delete_node(&name),
                Effect::DeleteInstance { provider_id } => {
                    // A KWOK instance is its node; another cloud's instance just goes away.
                    if let Some(node) = provider_id.strip_prefix(kwok::PROVIDER_PREFIX) {
                        let node = node.to_string();
                        self.delete_node(&node);
                    }
                }
                Effect::UpdateNodeClassStatus { name, status } => {
                    if let Some(c) = self.cluster.nodeclasses.get_mut(&name) {
                        c.status = Some(*status);
                    }
                }
                Effect::PatchNodeOverlayStatus { name, status } => {
                    if let Some(o) = self.cluster.nodeoverlays.get_mut(&name) {
                        o.status = Some(*status);
                    }
                }
                Effect::PatchCapacityBufferStatus { namespace, name, status } => {
                    if let Some(b) = self.cluster.capacitybuffers.get_mut(&(namespace, name)) {
                        b.status = Some(*status);
                    }
                }
                Effect::Evict { namespace, name } | Effect::DeletePod { namespace, name, .. } => {
                    self.cluster.pods.remove(&(namespace, name));
                }
                Effect::Event { regarding, reason, message, .. } => {
                    self.events.push((regarding.name.clone().unwrap_or_default(), reason, message));
                }
            }
        }
    }

    /// One second of the cluster and one controller tick.
    pub fn tick(&mut self) {
        self.now += 1_000;
        self.cluster.reconcile_deployments();
        self.cluster.schedule_pending();
        let m = manifests(&self.cluster);
        let key = state_key(&m);
        if self.lazy && self.seen == Some(key) && self.now < self.wake {
            return;
        }
        self.runs += 1;
        let effects = self.controller.plan(&m, self.now, generation(&m));
        self.apply(effects);
        // Its own writes are changes too: the next tick runs again if it wrote anything.
        self.seen = Some(key);
        self.wake = self.controller.next_wake(self.now).unwrap_or(Millis::MAX);
    }

    /// When the last run said it next needs to run.
    pub fn wake(&self) -> Millis {
        self.wake
    }

    /// An operator's command reached the controller: the next tick runs it whatever the clock says.
    pub fn poke(&mut self) {
        self.seen = None;
    }

    pub fn run_until(&mut self, what: &str, limit_secs: u32, cond: impl Fn(&Harness) -> bool) {
        for _ in 0..limit_secs {
            if cond(self) {
                return;
            }
            self.tick();
        }
        panic!(
            "{what}: not within {limit_secs}s; nodes {:?}, claims {:?}",
            self.cluster.nodes.keys().collect::<Vec<_>>(),
            self.cluster.nodeclaims.keys().collect::<Vec<_>>()
        );
    }

    pub fn all_bound(&self) -> bool {
        !self.cluster.pods.is_empty() && self.cluster.pods.values().all(|p| p.node_name.is_some())
    }

    pub fn scale(&mut self, replicas: i32) {
        for d in self.cluster.deployments.values_mut() {
            d.spec.replicas = Some(replicas);
        }
    }
}
