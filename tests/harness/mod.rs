//! An in-memory cluster the live controller's effects land in, with the API server's semantics that matter here
//! (generated names, finalizers turning deletes into deletion timestamps, resourceVersion conflicts, node objects
//! as KWOK instances), while the simulated Deployment controller and scheduler play the rest of the cluster.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use karpenter_tui::controller::cloud::{BoxFuture, CloudProvider, LaunchFailure, Launched, Retry, at_once};
use karpenter_tui::controller::cluster_port::{ClusterPort, Eviction, NodeWrite, WriteError, WriteResult};
use karpenter_tui::controller::effect::LabelTarget;
use karpenter_tui::controller::execute::{Report, execute};
use karpenter_tui::controller::{Controller, Effect, state_key as controller_state_key};
use karpenter_tui::engine::api::NodeClaim;
use karpenter_tui::engine::catalog::Catalog;
use karpenter_tui::engine::catalog::kwok::kwok_catalog;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::engine::labels;
use karpenter_tui::engine::lifecycle::ms_time;
use karpenter_tui::engine::manifests::ClusterObjects;
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
pub fn state_key(m: &ClusterObjects) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    controller_state_key(&m.view()).hash(&mut h);
    serde_json::to_string(&m.nodeclaims).unwrap().hash(&mut h);
    serde_json::to_string(&m.nodes).unwrap().hash(&mut h);
    serde_json::to_string(&m.nodepools).unwrap().hash(&mut h);
    h.finish()
}

pub fn manifests(c: &Cluster) -> ClusterObjects {
    ClusterObjects {
        nodepools: c.nodepools.values().map(|o| (**o).clone()).collect(),
        nodeclaims: c.nodeclaims.values().cloned().collect(),
        nodeclasses: c.nodeclasses.values().map(|o| (**o).clone()).collect(),
        nodes: c.nodes.values().cloned().collect(),
        pods: c.pods.values().cloned().collect(),
        // As the live watch cache: the engine would otherwise add the Deployments' pods to the ones that exist.
        deployments: Vec::new(),
        capacitybuffers: c.capacitybuffers.values().map(|o| (**o).clone()).collect(),
        pod_templates: c.pod_templates.values().map(|o| (**o).clone()).collect(),
        workloads: karpenter_tui::engine::manifests::Workloads {
            deployments: c.deployments.values().map(|o| (**o).clone()).collect(),
            statefulsets: Vec::new(),
            ..Default::default()
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
        cluster.apply(&ClusterObjects::parse(objects, "objects.yaml").unwrap());
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

    /// Carries out `effects` with the shipped executor, over this in-memory cluster and a KWOK-like cloud (an
    /// instance is its Node).
    pub fn apply(&mut self, effects: Vec<Effect>) {
        let mut cloud = HarnessCloud { catalog: self.catalog.clone(), nodes: Vec::new(), gone: Vec::new() };
        at_once(Box::pin(self.apply_via(effects, &mut cloud))).expect("the in-memory cluster answers at once");
        // The instances the cloud launched register their Nodes; the ones it terminated take theirs with them.
        for node in cloud.nodes {
            self.cluster.nodes.insert(node.metadata.name.clone().unwrap(), node);
        }
        for node in cloud.gone {
            self.delete_node(&node);
        }
    }

    /// Carries out `effects` with the shipped executor, over this in-memory cluster and `cloud`, and hands the
    /// outcomes to the controller as the live loop does.
    pub async fn apply_via(&mut self, effects: Vec<Effect>, cloud: &mut dyn CloudProvider) -> Report {
        let now = self.now;
        let mut api = Api {
            now,
            cluster: &mut self.cluster,
            created: &mut self.created,
            rv: &mut self.rv,
            events: &mut self.events,
        };
        let report = execute(effects, &mut api, cloud, now).await;
        for o in &report.outcomes {
            self.controller.outcome(o.clone(), now);
        }
        report
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
        let effects = self.controller.plan(&m, self.now);
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

/// A KWOK-like cloud: a launched instance is a Node named after its claim, handed back for the harness to store.
struct HarnessCloud {
    catalog: Arc<Catalog>,
    nodes: Vec<k8s_openapi::api::core::v1::Node>,
    gone: Vec<String>,
}

impl CloudProvider for HarnessCloud {
    fn name(&self) -> &'static str {
        "kwok"
    }

    fn create<'a>(
        &'a mut self,
        claims: &'a [NodeClaim],
        now: Millis,
    ) -> BoxFuture<'a, Vec<Result<Launched, LaunchFailure>>> {
        let mut out = Vec::new();
        for claim in claims {
            out.push(match kwok::launch(&self.catalog, claim, &Default::default()) {
                Ok((result, mut node)) => {
                    node.metadata.creation_timestamp = Some(ms_time(now));
                    self.nodes.push(node);
                    Ok(Launched { result, annotations: BTreeMap::new() })
                }
                Err(e) => Err(LaunchFailure::Cloud(e)),
            });
        }
        Box::pin(std::future::ready(out))
    }

    fn delete<'a>(&'a mut self, provider_id: &'a str, _now: Millis) -> BoxFuture<'a, Result<Option<String>, Retry>> {
        // A KWOK instance is its node; another cloud's instance just goes away.
        if let Some(node) = provider_id.strip_prefix(kwok::PROVIDER_PREFIX) {
            self.gone.push(node.to_string());
        }
        Box::pin(std::future::ready(Ok(None)))
    }

    fn set_overlays(&mut self, _store: Arc<karpenter_tui::controller::cloud::OverlayStore>) {}
}

/// The in-memory cluster as the controller's cluster port, with the API server's semantics that matter here.
struct Api<'h> {
    now: Millis,
    cluster: &'h mut Cluster,
    created: &'h mut u64,
    rv: &'h mut u64,
    events: &'h mut Vec<(String, String, String)>,
}

fn done<'a, T: Send + 'a>(r: Result<T, WriteError>) -> WriteResult<'a, T> {
    Box::pin(std::future::ready(r))
}

fn missing(what: String) -> WriteError {
    WriteError::Api { what, code: 404, reason: "NotFound".into(), message: "not found".into() }
}

impl Api<'_> {
    /// Deletion honours finalizers, as the API server does.
    fn delete_node_now(&mut self, name: &str) {
        let Some(n) = self.cluster.nodes.get_mut(name) else { return };
        if n.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
            n.metadata.deletion_timestamp.get_or_insert(ms_time(self.now));
        } else {
            self.cluster.nodes.remove(name);
            // The pod garbage collector removes pods bound to a node that is gone.
            self.cluster.pods.retain(|_, p| p.node_name() != Some(name));
        }
    }
}

impl ClusterPort for Api<'_> {
    fn create_nodeclaim<'a>(&'a mut self, claim: &'a NodeClaim) -> WriteResult<'a, NodeClaim> {
        let mut claim = claim.clone();
        *self.created += 1;
        *self.rv += 1;
        let name = format!("{}{:05}", claim.metadata.generate_name.clone().unwrap_or_default(), self.created);
        claim.metadata.name = Some(name.clone());
        claim.metadata.creation_timestamp = Some(ms_time(self.now));
        claim.metadata.resource_version = Some(self.rv.to_string());
        assert!(claim.metadata.finalizers.iter().flatten().any(|f| f == labels::TERMINATION_FINALIZER));
        self.cluster.nodeclaims.insert(name, claim.clone());
        done(Ok(claim))
    }

    fn update_nodeclaim_status<'a>(
        &'a mut self,
        name: &'a str,
        status: &'a karpenter_tui::engine::api::NodeClaimStatus,
    ) -> WriteResult<'a, ()> {
        done(match self.cluster.nodeclaims.get_mut(name) {
            Some(c) => {
                c.status = Some(status.clone());
                Ok(())
            }
            None => Err(missing(format!("update the status of NodeClaim {name}"))),
        })
    }

    fn patch_nodeclaim_metadata<'a>(
        &'a mut self,
        name: &'a str,
        l: &'a BTreeMap<String, String>,
        annotations: &'a BTreeMap<String, String>,
        remove_annotations: &'a [String],
        finalizers: Option<&'a [String]>,
    ) -> WriteResult<'a, ()> {
        done(match self.cluster.nodeclaims.get_mut(name) {
            Some(c) => {
                c.metadata.labels.get_or_insert_with(BTreeMap::new).extend(l.clone());
                let a = c.metadata.annotations.get_or_insert_with(BTreeMap::new);
                a.extend(annotations.clone());
                for k in remove_annotations {
                    a.remove(k);
                }
                if let Some(f) = finalizers {
                    c.metadata.finalizers = Some(f.to_vec());
                }
                Ok(())
            }
            None => Err(missing(format!("update NodeClaim {name}"))),
        })
    }

    fn sync_node<'a>(&'a mut self, w: NodeWrite<'a>) -> WriteResult<'a, ()> {
        // The store versions every write itself (sim::watch): a write decided on a stale copy is a conflict.
        let Some(current) = self.cluster.nodes.get(w.name).map(|n| n.metadata.resource_version.clone()) else {
            return done(Err(missing(format!("update node {}", w.name))));
        };
        if w.resource_version.is_some() && current.is_some() && current.as_deref() != w.resource_version {
            return done(Err(WriteError::conflict(format!("update node {}", w.name), "the object has been modified")));
        }
        let Some(n) = self.cluster.nodes.get_mut(w.name) else { return done(Ok(())) };
        n.metadata.labels.get_or_insert_with(BTreeMap::new).extend(w.labels.clone());
        n.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(w.annotations.clone());
        if let Some(taints) = w.taints {
            n.spec.get_or_insert_with(Default::default).taints = Some(taints.to_vec());
        }
        if let Some(finalizers) = w.finalizers {
            let deleting = n.metadata.deletion_timestamp.is_some();
            n.metadata.finalizers = Some(finalizers.to_vec());
            if deleting && finalizers.is_empty() {
                self.delete_node_now(w.name);
            }
        }
        done(Ok(()))
    }

    fn relabel<'a>(
        &'a mut self,
        target: LabelTarget,
        name: &'a str,
        set: &'a BTreeMap<String, String>,
        remove: &'a [String],
    ) -> WriteResult<'a, ()> {
        let meta = match target {
            LabelTarget::NodeClaim => self.cluster.nodeclaims.get_mut(name).map(|c| &mut c.metadata),
            LabelTarget::Node => self.cluster.nodes.get_mut(name).map(|n| &mut n.metadata),
        };
        if let Some(meta) = meta {
            let l = meta.labels.get_or_insert_with(BTreeMap::new);
            for k in remove {
                l.remove(k);
            }
            l.extend(set.clone());
        }
        done(Ok(()))
    }

    fn nominate_pod<'a>(
        &'a mut self,
        namespace: &'a str,
        name: &'a str,
        uid: Option<&'a str>,
        node: &'a str,
    ) -> WriteResult<'a, ()> {
        let key = (namespace.to_string(), name.to_string());
        let same = self.cluster.pods.get(&key).is_some_and(|p| uid.is_none() || p.metadata.uid.as_deref() == uid);
        if same && let Some(p) = self.cluster.pods.get_mut(&key) {
            p.status.get_or_insert_with(Default::default).nominated_node_name = Some(node.to_string());
        }
        done(Ok(()))
    }

    fn update_nodepool_status<'a>(
        &'a mut self,
        name: &'a str,
        status: &'a karpenter_tui::engine::api::nodepool::NodePoolStatus,
    ) -> WriteResult<'a, ()> {
        if let Some(p) = self.cluster.nodepools.get_mut(name) {
            p.status = Some(status.clone());
        }
        done(Ok(()))
    }

    fn patch_nodeoverlay_status<'a>(
        &'a mut self,
        name: &'a str,
        status: &'a karpenter_tui::engine::api::nodeoverlay::NodeOverlayStatus,
    ) -> WriteResult<'a, ()> {
        if let Some(o) = self.cluster.nodeoverlays.get_mut(name) {
            o.status = Some(status.clone());
        }
        done(Ok(()))
    }

    fn patch_capacitybuffer_status<'a>(
        &'a mut self,
        namespace: &'a str,
        name: &'a str,
        status: &'a karpenter_tui::engine::api::capacitybuffer::CapacityBufferStatus,
    ) -> WriteResult<'a, ()> {
        if let Some(b) = self.cluster.capacitybuffers.get_mut(&(namespace.to_string(), name.to_string())) {
            b.status = Some(status.clone());
        }
        done(Ok(()))
    }

    fn update_ec2nodeclass_status<'a>(
        &'a mut self,
        name: &'a str,
        status: &'a karpenter_tui::engine::api::ec2nodeclass::EC2NodeClassStatus,
    ) -> WriteResult<'a, ()> {
        if let Some(c) = self.cluster.nodeclasses.get_mut(name) {
            c.status = Some(status.clone());
        }
        done(Ok(()))
    }

    fn delete_nodeclaim<'a>(&'a mut self, name: &'a str) -> WriteResult<'a, ()> {
        if let Some(c) = self.cluster.nodeclaims.get_mut(name) {
            c.metadata.deletion_timestamp.get_or_insert(ms_time(self.now));
        }
        done(Ok(()))
    }

    fn remove_nodeclaim_finalizer<'a>(&'a mut self, claim: &'a NodeClaim, _finalizer: &'a str) -> WriteResult<'a, ()> {
        self.cluster.nodeclaims.remove(claim.name());
        done(Ok(()))
    }

    fn delete_node<'a>(&'a mut self, name: &'a str) -> WriteResult<'a, ()> {
        self.delete_node_now(name);
        done(Ok(()))
    }

    fn evict<'a>(&'a mut self, namespace: &'a str, name: &'a str) -> WriteResult<'a, Eviction> {
        let gone = self.cluster.pods.remove(&(namespace.to_string(), name.to_string())).is_none();
        done(Ok(if gone { Eviction::Gone } else { Eviction::Evicted }))
    }

    fn delete_pod<'a>(&'a mut self, namespace: &'a str, name: &'a str, _grace_seconds: u32) -> WriteResult<'a, ()> {
        self.cluster.pods.remove(&(namespace.to_string(), name.to_string()));
        done(Ok(()))
    }

    fn event<'a>(
        &'a mut self,
        regarding: k8s_openapi::api::core::v1::ObjectReference,
        _warning: bool,
        reason: &'a str,
        message: &'a str,
    ) -> WriteResult<'a, ()> {
        self.events.push((regarding.name.clone().unwrap_or_default(), reason.to_string(), message.to_string()));
        done(Ok(()))
    }
}
