//! The live controller's planner in a closed loop: its effects are applied to an in-memory cluster with the API
//! server's semantics that matter here (generated names, finalizers turning deletes into deletion timestamps,
//! node objects as KWOK instances), while the simulated Deployment controller and scheduler play the rest of the
//! cluster. This is the same story the real-cluster suite tells against an API server: pending pods → NodeClaims
//! → nodes → pods bound; scale to zero → a proposal → approve → nodes removed; a NodePool edit → drift.

use std::collections::BTreeMap;
use std::sync::Arc;

use karpenter_tui::engine::api::nodeclaim::{COND_DRIFTED, COND_INITIALIZED, COND_REGISTERED};
use karpenter_tui::engine::catalog::Catalog;
use karpenter_tui::engine::catalog::kwok::kwok_catalog;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::engine::labels;
use karpenter_tui::engine::lifecycle::{apply_launch, ms_time};
use karpenter_tui::engine::provisioning::Millis;
use karpenter_tui::runtime::controller::kwok;
use karpenter_tui::runtime::controller::{CommandState, Controller, Effect, Outcome, generation};
use karpenter_tui::sim::cluster::Cluster;
use karpenter_tui::sim::manifests::Manifests;

const OBJECTS: &str = r#"
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
struct Harness {
    cluster: Cluster,
    catalog: Arc<Catalog>,
    controller: Controller,
    now: Millis,
    created: u64,
    rv: u64,
    /// (object name, reason, message) of every Event written.
    events: Vec<(String, String, String)>,
}

fn manifests(c: &Cluster) -> Manifests {
    Manifests {
        nodepools: c.nodepools.values().cloned().collect(),
        nodeclaims: c.nodeclaims.values().cloned().collect(),
        nodes: c.nodes.values().cloned().collect(),
        pods: c.pods.values().cloned().collect(),
        deployments: c.deployments.values().cloned().collect(),
        ..Default::default()
    }
}

impl Harness {
    fn new(mode: Mode) -> Harness {
        let mut cluster = Cluster::with_seed(7);
        cluster.apply(&Manifests::parse(OBJECTS, "objects.yaml").unwrap());
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
        }
    }

    fn bump(&mut self) -> Option<String> {
        self.rv += 1;
        Some(self.rv.to_string())
    }

    /// Deletion honours finalizers, as the API server does.
    fn delete_node(&mut self, name: &str) {
        let now = self.now;
        let Some(n) = self.cluster.nodes.get_mut(name) else { return };
        if n.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
            n.metadata.deletion_timestamp.get_or_insert(ms_time(now));
        } else {
            self.cluster.nodes.remove(name);
            // The pod garbage collector removes pods bound to a node that is gone.
            self.cluster.pods.retain(|_, p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(name));
        }
    }

    fn apply(&mut self, effects: Vec<Effect>) {
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
                    let (result, mut node) = kwok::launch(&self.catalog, &claim).unwrap();
                    node.metadata.creation_timestamp = Some(ms_time(now));
                    self.cluster.nodes.insert(node.metadata.name.clone().unwrap(), node);
                    let stored = self.cluster.nodeclaims.get_mut(claim.name()).unwrap();
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
                    let rv = self.bump();
                    let Some(n) = self.cluster.nodes.get_mut(&name) else { continue };
                    if n.metadata.resource_version.is_some() && n.metadata.resource_version != resource_version {
                        continue; // 409: decided on a stale copy
                    }
                    n.metadata.resource_version = rv;
                    n.metadata.labels.get_or_insert_with(BTreeMap::new).extend(l);
                    n.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(annotations);
                    n.spec.get_or_insert_with(Default::default).taints = Some(taints);
                    let deleting = n.metadata.deletion_timestamp.is_some();
                    n.metadata.finalizers = Some(finalizers.clone());
                    if deleting && finalizers.is_empty() {
                        self.delete_node(&name);
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
                    let node = provider_id.strip_prefix(kwok::PROVIDER_PREFIX).unwrap().to_string();
                    self.delete_node(&node);
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
    fn tick(&mut self) {
        self.now += 1_000;
        self.cluster.reconcile_deployments();
        self.cluster.schedule_pending();
        let m = manifests(&self.cluster);
        let effects = self.controller.plan(&m, self.now, generation(&m));
        self.apply(effects);
    }

    fn run_until(&mut self, what: &str, limit_secs: u32, cond: impl Fn(&Harness) -> bool) {
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

    fn all_bound(&self) -> bool {
        !self.cluster.pods.is_empty()
            && self.cluster.pods.values().all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
    }

    fn scale(&mut self, replicas: i32) {
        for d in self.cluster.deployments.values_mut() {
            d.spec.replicas = Some(replicas);
        }
    }
}

#[test]
fn pending_pods_get_nodeclaims_nodes_and_are_bound() {
    let mut h = Harness::new(Mode::Approve);
    h.run_until("all six pods bound", 120, Harness::all_bound);
    // 6 × 1 CPU on 4-CPU KWOK types: more than one node, and no more claims than nodes (no duplicates).
    assert!(h.cluster.nodeclaims.len() >= 2, "{:?}", h.cluster.nodeclaims.keys());
    assert_eq!(h.cluster.nodeclaims.len(), h.cluster.nodes.len());
    for c in h.cluster.nodeclaims.values() {
        assert!(c.is_true(COND_REGISTERED) && c.is_true(COND_INITIALIZED), "{} went through its lifecycle", c.name());
        assert!(c.name().starts_with("default-"));
    }
    for n in h.cluster.nodes.values() {
        let l = n.metadata.labels.as_ref().unwrap();
        assert_eq!(l.get(labels::NODEPOOL).map(String::as_str), Some("default"));
        assert_eq!(l.get(labels::INITIALIZED).map(String::as_str), Some("true"));
        let taints = n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        assert!(!taints.iter().any(|t| t.key == labels::TAINT_UNREGISTERED), "registration removed the taint");
        assert!(n.metadata.finalizers.iter().flatten().any(|f| f == labels::TERMINATION_FINALIZER));
    }
    // Settled: nothing more to create.
    let claims = h.cluster.nodeclaims.len();
    for _ in 0..30 {
        h.tick();
    }
    assert_eq!(h.cluster.nodeclaims.len(), claims);
}

#[test]
fn scale_to_zero_proposes_then_approval_removes_the_nodes() {
    let mut h = Harness::new(Mode::Approve);
    h.run_until("all pods bound", 120, Harness::all_bound);
    h.scale(0);
    h.run_until("an emptiness proposal", 120, |h| {
        h.controller.records.iter().any(|r| r.state == CommandState::AwaitingApproval)
    });
    // Waiting for approval changes nothing.
    let nodes = h.cluster.nodes.len();
    for _ in 0..20 {
        h.tick();
    }
    assert_eq!(h.cluster.nodes.len(), nodes, "nothing is disrupted without approval");
    let rec = h.controller.records.iter().find(|r| r.state == CommandState::AwaitingApproval).unwrap().clone();
    assert_eq!(rec.command.method.as_str(), "emptiness");
    let m = manifests(&h.cluster);
    let (effects, msg) = h.controller.approve(&m, &rec.id, h.now).unwrap();
    assert!(msg.contains("started"), "{msg}");
    assert!(effects.iter().any(
        |e| matches!(e, Effect::SyncNode { taints, .. } if taints.iter().any(|t| t.key == labels::TAINT_DISRUPTED))
    ));
    h.apply(effects);
    let candidates = rec.command.node_names();
    h.run_until("the candidates gone", 120, |h| candidates.iter().all(|c| !h.cluster.nodes.contains_key(c)));
    h.run_until("their claims finalized", 60, |h| h.cluster.nodeclaims.len() == h.cluster.nodes.len());
    assert!(h.controller.records.iter().any(|r| r.id == rec.id && r.state == CommandState::Executed));
    for c in &candidates {
        assert!(h.events.iter().any(|(o, r, _)| o == c && r == "DisruptionTerminating"), "an event says why {c} went");
    }
}

#[test]
fn pods_no_nodepool_can_take_get_one_failed_scheduling_event_not_one_per_tick() {
    let mut h = Harness::new(Mode::Approve);
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: default, uid: uid-huge}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "64"}}}]
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
"#;
    h.cluster.apply(&Manifests::parse(text, "huge.yaml").unwrap());
    h.run_until("the others bound", 120, |h| {
        h.cluster.pods.values().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()).count() == 6
    });
    for _ in 0..30 {
        h.tick();
    }
    let failed: Vec<_> = h.events.iter().filter(|(o, r, _)| o == "huge" && r == "FailedScheduling").collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].2.contains("Failed to schedule pod"), "{}", failed[0].2);
}

#[test]
fn editing_the_nodepool_drifts_its_claims_and_auto_mode_replaces_them() {
    let mut h = Harness::new(Mode::Auto);
    h.run_until("all pods bound", 120, Harness::all_bound);
    let before: Vec<String> = h.cluster.nodeclaims.keys().cloned().collect();
    // The edit: only 8-CPU types from now on.
    for p in h.cluster.nodepools.values_mut() {
        for r in &mut p.spec.template.spec.requirements {
            if r.key == "karpenter.kwok.sh/instance-cpu" {
                r.values = vec!["8".into()];
            }
        }
    }
    h.run_until("a claim drifted", 30, |h| h.cluster.nodeclaims.values().any(|c| c.is_true(COND_DRIFTED)));
    h.run_until("every old claim replaced", 900, |h| {
        before.iter().all(|c| !h.cluster.nodeclaims.contains_key(c)) && h.all_bound()
    });
    for n in h.cluster.nodes.values() {
        assert_eq!(
            n.metadata.labels.as_ref().unwrap().get("karpenter.kwok.sh/instance-cpu").map(String::as_str),
            Some("8")
        );
    }
}

#[test]
fn a_disrupted_taint_left_by_a_stopped_process_is_removed_and_nodes_in_commands_are_not() {
    let mut h = Harness::new(Mode::Approve);
    h.run_until("all pods bound", 120, Harness::all_bound);
    let victim = h.cluster.nodes.keys().next().unwrap().clone();
    let n = h.cluster.nodes.get_mut(&victim).unwrap();
    n.spec
        .get_or_insert_with(Default::default)
        .taints
        .get_or_insert_with(Vec::new)
        .push(karpenter_tui::engine::termination::disrupted_taint());
    h.tick();
    let taints = h.cluster.nodes[&victim].spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    assert!(!taints.iter().any(|t| t.key == labels::TAINT_DISRUPTED), "the stale taint is gone");

    // A node an approved command is draining keeps its taint.
    h.scale(0);
    h.run_until("a proposal", 120, |h| h.controller.records.iter().any(|r| r.state == CommandState::AwaitingApproval));
    let rec = h.controller.records.iter().find(|r| r.state == CommandState::AwaitingApproval).unwrap().clone();
    let m = manifests(&h.cluster);
    let (effects, _) = h.controller.approve(&m, &rec.id, h.now).unwrap();
    h.apply(effects);
    h.tick();
    let node = &rec.command.candidates[0].node;
    if let Some(n) = h.cluster.nodes.get(node) {
        let taints = n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        assert!(taints.iter().any(|t| t.key == labels::TAINT_DISRUPTED), "the command's node keeps its taint");
    }
}

#[test]
fn nodes_and_claims_of_another_cloud_are_never_touched() {
    let mut h = Harness::new(Mode::Auto);
    h.scale(0);
    let text = r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-ec2aa
  labels: {karpenter.sh/nodepool: default}
  finalizers: [karpenter.sh/termination]
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
status:
  providerID: aws:///us-east-1a/i-0123456789abcdef0
  conditions:
    - {type: Launched, status: "True", reason: Launched, message: "", lastTransitionTime: "2023-11-14T22:00:00Z"}
    - {type: Registered, status: "True", reason: Registered, message: "", lastTransitionTime: "2023-11-14T22:00:00Z"}
    - {type: Initialized, status: "True", reason: Initialized, message: "", lastTransitionTime: "2023-11-14T22:00:00Z"}
---
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-0-1.ec2.internal
  labels: {karpenter.sh/nodepool: default, karpenter.sh/registered: "true", karpenter.sh/initialized: "true"}
  finalizers: [karpenter.sh/termination]
spec:
  providerID: aws:///us-east-1a/i-0123456789abcdef0
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
"#;
    h.cluster.apply(&Manifests::parse(text, "ec2.yaml").unwrap());
    // Empty and old, in auto mode: a KWOK node like it would be consolidated; this one is left alone.
    for _ in 0..120 {
        h.tick();
    }
    assert!(h.cluster.nodeclaims["default-ec2aa"].metadata.deletion_timestamp.is_none());
    assert!(
        h.controller.records.is_empty(),
        "{:?}",
        h.controller.records.iter().map(|r| r.command.summary()).collect::<Vec<_>>()
    );
    // Even deleted by someone else, it is not drained or finalized by this cloud.
    h.cluster.nodes.get_mut("ip-10-0-0-1.ec2.internal").unwrap().metadata.deletion_timestamp = Some(ms_time(h.now));
    h.cluster.nodeclaims.get_mut("default-ec2aa").unwrap().metadata.deletion_timestamp = Some(ms_time(h.now));
    let m = manifests(&h.cluster);
    let effects = h.controller.plan(&m, h.now + 1_000, generation(&m));
    assert!(effects.is_empty(), "{:?}", effects.iter().map(Effect::describe).collect::<Vec<_>>());
}
