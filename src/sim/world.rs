//! The simulated world on a virtual clock: the cluster ([`Cluster`]) and the cloud ([`SimCloud`]) driven by the
//! engine — provisioning passes on the batching windows, the NodeClaim lifecycle (launch, registration,
//! initialization, timeouts, expiration, finalization), node termination with draining through an Eviction API
//! that enforces PDBs, garbage collection and interruption notices — and the kubelet behaviour that moves objects
//! along (a launched instance registers a Node after `registrationLatency`, which becomes Ready after
//! `readyLatency`; bound pods run; deleted pods go after their grace period).
//!
//! Time only moves when [`World::run_until`] jumps to the next thing that can happen, so a simulated day takes as
//! long as the decisions in it, not as long as the day.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, PodCondition, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::controller::interruption::Kind as InterruptionKind;
use crate::controller::provisioning::Provisioner;
use crate::engine::api::nodeclaim::{COND_INITIALIZED, COND_LAUNCHED};
use crate::engine::api::{NodeClaim, NodePool};
use crate::engine::catalog::{Catalog, InstanceType};
use crate::engine::labels;
use crate::engine::lifecycle::{
    self, DeleteReason, FinalizeAction, LaunchError, LaunchResult, LifecycleAction, LifecycleSettings,
};
use crate::engine::provisioning::{Millis, is_provisionable, provision};
use crate::engine::scheduling::SchedulerOptions;
use crate::engine::stored_pod::StoredPod;
use crate::sim::cloud::{CloudError, SimCloud};
use crate::sim::cluster::{Cluster, Key};

mod disruption;

pub use self::disruption::{DisruptionRecord, DisruptionState, PassTiming};
use crate::engine::disruption::gate::Mode;

pub use crate::controller::timing::{ICE_TTL, MINUTE, POD_REQUEUE, SECOND};
pub const GC_PERIOD: Millis = 2 * MINUTE;
/// Default pod termination grace period.
const DEFAULT_POD_GRACE: Millis = 30 * SECOND;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub launch_latency: Millis,
    pub registration_latency: Millis,
    pub ready_latency: Millis,
    pub batch_idle: Millis,
    pub batch_max: Millis,
    pub disruption_mode: Mode,
    pub validation_delay: Millis,
    pub spot_to_spot: bool,
}

impl Settings {
    /// The controller's share of the settings (the rest are how the simulated cloud and kubelets behave).
    pub fn controller(&self) -> crate::controller::Settings {
        crate::controller::Settings {
            mode: self.disruption_mode,
            spot_to_spot: self.spot_to_spot,
            batch_idle: self.batch_idle,
            batch_max: self.batch_max,
            validation_delay: self.validation_delay,
            ..crate::controller::Settings::default()
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            launch_latency: 5 * SECOND,
            registration_latency: 30 * SECOND,
            ready_latency: 10 * SECOND,
            batch_idle: SECOND,
            batch_max: 10 * SECOND,
            disruption_mode: Mode::Auto,
            validation_delay: 15 * SECOND,
            spot_to_spot: false,
        }
    }
}

/// What happened, for reports and the dashboard. Times are absolute milliseconds.
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// Nodes in creation order.
    pub nodes: Vec<NodeRecord>,
    pub pods: BTreeMap<Key, PodRecord>,
    pub nodeclaims: Vec<NodeClaimRecord>,
    pub decisions: Vec<Decision>,
    pub solves: Vec<SolveTiming>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeRecord {
    pub name: String,
    pub provider_id: Option<String>,
    pub nodepool: Option<String>,
    pub nodeclaim: Option<String>,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price: f64,
    pub created_at: Millis,
    pub initialized_at: Option<Millis>,
    pub deleted_at: Option<Millis>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodRecord {
    pub node: Option<String>,
    pub created_at: Millis,
    pub bound_at: Option<Millis>,
    pub deleted_at: Option<Millis>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeClaimRecord {
    pub name: String,
    pub nodepool: String,
    pub created_at: Millis,
    pub deleted_at: Option<Millis>,
    pub instance_types: Vec<String>,
    pub requirements: Vec<(String, String, Vec<String>)>,
    /// (instance type, zone, capacity type) once launched.
    pub launched: Option<(String, String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Provision {
        id: String,
        at: Millis,
        nodeclaims: Vec<String>,
        pods: usize,
    },
    Delete {
        id: String,
        at: Millis,
        nodeclaim: String,
        reason: DeleteReason,
    },
    Interruption {
        id: String,
        at: Millis,
        node: String,
        kind: InterruptionKind,
        /// Pods bound to the node when the notice came (DaemonSet pods excluded: they go with the node).
        displaced: Vec<Key>,
    },
    /// A voluntary disruption command (emptiness, drift, consolidation), by id: [`World::disruption_record`]
    /// says what it is and where it got to.
    Disruption(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct SolveTiming {
    pub at: Millis,
    pub pods: usize,
    pub nodes: usize,
    pub millis: f64,
}

/// Something the world must do at a given time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// The cloud's create call returns (launch latency elapsed).
    LaunchDone { claim: String },
    /// The instance's kubelet registers its Node.
    Register { provider_id: String },
    /// The Node reports Ready.
    Ready { node: String },
    /// A deleted pod is gone.
    PodGone { key: Key },
    /// Reconcile again (lifecycle requeues, batch windows, drains).
    Wake,
}

/// The seeded generator behind every random choice in the world (names, spot prices come from the catalog).
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64: tiny, good enough, and the same everywhere.
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn suffix(&mut self, n: usize) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..n).map(|_| ALPHABET[(self.next() % ALPHABET.len() as u64) as usize] as char).collect()
    }
}

pub struct World {
    pub now: Millis,
    /// The disruption controller: approval gate, validation, orchestration queue.
    pub disruption: disruption::Controller,
    pub cluster: Cluster,
    pub cloud: SimCloud,
    pub record: Record,
    catalog: Catalog,
    settings: Settings,
    lifecycle: LifecycleSettings,
    options: SchedulerOptions,
    /// When to solve (shared with the live controller).
    provisioner: Provisioner,
    timers: BTreeSet<(Millis, u64, Timer)>,
    wakes: BTreeSet<Millis>,
    timer_seq: u64,
    /// Launches in flight: claim → the result the cloud will report.
    in_flight: BTreeMap<String, Result<crate::sim::cloud::Launched, CloudError>>,
    /// Offerings the engine learned are out of capacity, until when.
    ice: BTreeMap<(String, String, String), Millis>,
    /// When each node's drain started.
    drains: BTreeMap<String, Millis>,
    rng: Rng,
    /// Why each pod was pending after the last provisioning pass: (NodePool or "", reason).
    pub pending_reasons: BTreeMap<Key, Vec<(String, String)>>,
    next_decision: u64,
    /// How many of the disruption controller's records are in `record.decisions`.
    disruption_records_seen: usize,
    next_gc: Millis,
    caches: Caches,
}

/// Results derived from the cluster, kept while the stamps of their inputs are unchanged (see the docs of
/// [`crate::sim::cluster`]): most reconciles happen at instants where nothing changed.
#[derive(Debug, Default)]
struct Caches {
    /// (nodes, pods) stamps the kubelet last left behind.
    kubelet: Option<[u64; 2]>,
    /// (pods, nodes, nodeclaims) stamps and the fingerprint of that state.
    fingerprint: Option<([u64; 3], Fingerprint)>,
    /// The pods stamp and the uids of the provisionable pods then, in pod order.
    provisionable: Option<(u64, Vec<String>)>,
    /// The store as the engine last read it, kept so the next snapshot copies only what changed.
    snapshot: crate::sim::cluster::SnapshotMirror,
}

/// Pod counts (all, bound, terminating) and a hash of the node and NodeClaim lifecycle state (deletion, taints,
/// conditions, provider ids, finalizers): what one controller changes that another must react to at once.
type Fingerprint = (usize, usize, usize, u64);

fn q(r: &crate::engine::resources::Resources) -> BTreeMap<String, Quantity> {
    r.to_quantity_map().into_iter().map(|(k, v)| (k, Quantity(v))).collect()
}

fn taint(key: &str, effect: &str) -> Taint {
    Taint { key: key.into(), value: None, effect: effect.into(), time_added: None }
}

impl World {
    pub fn new(catalog: Catalog, settings: Settings, start: Millis, seed: u64) -> World {
        World {
            now: start,
            disruption: disruption::Controller::new(&settings),
            cloud: SimCloud::new(&catalog),
            cluster: Cluster::with_seed(seed ^ 0x706f_6473),
            record: Record::default(),
            provisioner: Provisioner::new(&settings.controller()),
            catalog,
            settings,
            lifecycle: LifecycleSettings::default(),
            options: SchedulerOptions::default(),
            timers: BTreeSet::new(),
            wakes: BTreeSet::new(),
            timer_seq: 0,
            in_flight: BTreeMap::new(),
            ice: BTreeMap::new(),
            drains: BTreeMap::new(),
            rng: Rng(seed ^ 0x6b61_7270_656e_7465),
            pending_reasons: BTreeMap::new(),
            next_decision: 0,
            disruption_records_seen: 0,
            next_gc: start + GC_PERIOD,
            caches: Caches::default(),
        }
    }

    fn at(&mut self, t: Millis, timer: Timer) {
        let t = t.max(self.now);
        if timer == Timer::Wake {
            // Requeues repeat every reconcile; one wake per instant is enough.
            self.wakes.insert(t);
            return;
        }
        self.timer_seq += 1;
        self.timers.insert((t, self.timer_seq, timer));
    }

    fn decision_id(&mut self, prefix: &str) -> String {
        self.next_decision += 1;
        format!("{prefix}-{}", self.next_decision)
    }

    /// The time of the next scheduled thing, if any.
    pub fn next_wake(&self) -> Option<Millis> {
        let t = self.timers.iter().next().map(|(t, _, _)| *t);
        let w = self.wakes.iter().next().copied();
        let b = self.provisioner.deadline();
        [t, w, b, Some(self.next_gc)].into_iter().flatten().min()
    }

    /// Advances to `until`, reconciling at every moment something can happen.
    pub fn run_until(&mut self, until: Millis) {
        self.reconcile();
        while let Some(t) = self.next_wake() {
            if t > until {
                break;
            }
            self.now = t;
            self.fire_timers();
            self.reconcile();
        }
        self.now = self.now.max(until);
    }

    fn fire_timers(&mut self) {
        let now = self.now;
        self.wakes.retain(|t| *t > now);
        while let Some(first) = self.timers.iter().next().cloned() {
            if first.0 > self.now {
                break;
            }
            self.timers.remove(&first);
            match first.2 {
                Timer::LaunchDone { claim } => self.launch_done(&claim),
                Timer::Register { provider_id } => self.register_node(&provider_id),
                Timer::Ready { node } => self.node_ready(&node),
                Timer::PodGone { key } => {
                    if self.cluster.pods.remove(&key).is_some()
                        && let Some(r) = self.record.pods.get_mut(&key)
                    {
                        r.deleted_at = Some(self.now);
                    }
                }
                Timer::Wake => {}
            }
        }
    }

    /// Runs every controller until nothing more changes at this instant.
    pub fn reconcile(&mut self) {
        for _ in 0..8 {
            let before = self.fingerprint();
            self.controllers();
            self.provisioning();
            self.nodeclaims();
            self.terminations();
            self.interruptions();
            self.disruption();
            if self.now >= self.next_gc {
                self.garbage_collect();
                self.next_gc = self.now + GC_PERIOD;
            }
            if self.fingerprint() == before {
                break;
            }
        }
    }

    /// A cheap summary of state that controllers change, to detect quiescence.
    fn fingerprint(&mut self) -> Fingerprint {
        let c = &self.cluster;
        let stamps = [c.pods.stamp(), c.nodes.stamp(), c.nodeclaims.stamp()];
        if let Some((at, fp)) = self.caches.fingerprint
            && at == stamps
        {
            return fp;
        }
        let bound = self.cluster.pods.values().filter(|p| p.node_name.is_some()).count();
        let deleting = self.cluster.pods.values().filter(|p| p.metadata.deletion_timestamp.is_some()).count();
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        for (name, n) in self.cluster.nodes.iter() {
            name.hash(&mut h);
            n.metadata.deletion_timestamp.is_some().hash(&mut h);
            for t in n.spec.as_ref().and_then(|s| s.taints.as_ref()).into_iter().flatten() {
                (&t.key, &t.effect).hash(&mut h);
            }
            n.metadata.labels.as_ref().map_or(0, BTreeMap::len).hash(&mut h);
            lifecycle::node_ready(n).hash(&mut h);
        }
        for (name, c) in self.cluster.nodeclaims.iter() {
            name.hash(&mut h);
            c.metadata.deletion_timestamp.is_some().hash(&mut h);
            c.metadata.finalizers.as_ref().map_or(0, Vec::len).hash(&mut h);
            c.provider_id().hash(&mut h);
            for cond in c.status.as_ref().map(|s| &s.conditions).into_iter().flatten() {
                (&cond.type_, &cond.status).hash(&mut h);
            }
        }
        let fp = (self.cluster.pods.len(), bound, deleting, h.finish());
        self.caches.fingerprint = Some((stamps, fp));
        fp
    }

    /// Copies a live node's current labels and taints into its record (the report shows a node as last seen).
    fn refresh_node_record(&mut self, name: &str) {
        let Some(n) = self.cluster.nodes.get(name) else { return };
        if let Some(r) = self.record.nodes.iter_mut().rev().find(|r| r.name == name) {
            r.labels = n.metadata.labels.clone().unwrap_or_default();
            r.taints = n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        }
    }

    /// Brings every live node's record up to date; call before reporting.
    pub fn refresh_node_records(&mut self) {
        let names: Vec<String> = self.cluster.nodes.keys().cloned().collect();
        for n in names {
            self.refresh_node_record(&n);
        }
    }

    /// Starts records for pods that appeared outside the controllers (scenario objects and `apply` events).
    pub fn track_new_pods(&mut self) {
        let now = self.now;
        for (k, p) in &self.cluster.pods {
            if self.record.pods.contains_key(k) {
                continue;
            }
            let node = p.node_name.clone();
            self.record.pods.insert(
                k.clone(),
                PodRecord { created_at: now, bound_at: node.as_ref().map(|_| now), node, deleted_at: None },
            );
        }
    }

    fn controllers(&mut self) {
        let (created, deleted) = self.cluster.reconcile_deployments();
        for k in created {
            self.record.pods.entry(k).or_insert(PodRecord { created_at: self.now, ..Default::default() });
        }
        for k in deleted {
            if let Some(r) = self.record.pods.get_mut(&k) {
                r.deleted_at = Some(self.now);
            }
        }
        for k in self.cluster.reconcile_daemonsets() {
            let node = self.cluster.pods.get(&k).and_then(|p| p.node_name.clone());
            self.record.pods.entry(k).or_insert(PodRecord {
                created_at: self.now,
                node: node.clone(),
                bound_at: node.map(|_| self.now),
                deleted_at: None,
            });
        }
        // Kubelet: pods bound to a Ready node run.
        if self.caches.kubelet != Some([self.cluster.nodes.stamp(), self.cluster.pods.stamp()]) {
            let ready: BTreeSet<&str> =
                self.cluster.nodes.iter().filter(|(_, n)| lifecycle::node_ready(n)).map(|(k, _)| k.as_str()).collect();
            let start: Vec<Key> = self
                .cluster
                .pods
                .iter()
                .filter(|(_, p)| {
                    // Cheap checks first: nearly every pod is already running, and the node lookup compares names.
                    let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                    !running
                        && p.metadata.deletion_timestamp.is_none()
                        && p.node_name().is_some_and(|n| ready.contains(n))
                })
                .map(|(k, _)| k.clone())
                .collect();
            let now = self.now;
            for k in start {
                if let Some(p) = self.cluster.pods.get_mut(&k) {
                    let status = p.status.get_or_insert_with(Default::default);
                    status.phase = Some("Running".into());
                    // As a kubelet does when it starts a pod (a timed do-not-disrupt counts from it).
                    status.start_time.get_or_insert_with(|| lifecycle::ms_time(now));
                    World::mark_pod_condition(p, "Ready", "True");
                }
            }
            self.caches.kubelet = Some([self.cluster.nodes.stamp(), self.cluster.pods.stamp()]);
        }
        for (key, node) in self.cluster.schedule_pending_with(&mut self.caches.snapshot) {
            if let Some(r) = self.record.pods.get_mut(&key) {
                r.node = Some(node);
                r.bound_at = Some(self.now);
            }
        }
    }

    /// Instance types per NodePool as the engine sees them: offerings recently out of capacity unavailable.
    fn catalogs(&mut self) -> BTreeMap<String, Vec<Arc<InstanceType>>> {
        let now = self.now;
        self.ice.retain(|_, until| *until > now);
        let types: Vec<Arc<InstanceType>> = if self.ice.is_empty() {
            self.catalog.instance_types.clone()
        } else {
            self.catalog
                .instance_types
                .iter()
                .map(|t| {
                    if !self.ice.keys().any(|(n, _, _)| *n == t.name) {
                        return t.clone();
                    }
                    let mut t2 = (**t).clone();
                    for o in &mut t2.offerings {
                        if self.ice.contains_key(&(t.name.clone(), o.zone.clone(), o.capacity_type.clone())) {
                            o.available = false;
                        }
                    }
                    Arc::new(t2)
                })
                .collect()
        };
        self.cluster.nodepools.keys().map(|k| (k.clone(), types.clone())).collect()
    }

    fn provisioning(&mut self) {
        let now = self.now;
        let stamp = self.cluster.pods.stamp();
        if self.caches.provisionable.as_ref().is_none_or(|(at, _)| *at != stamp) {
            let uids = self
                .cluster
                .pods
                .values()
                .filter(|p| is_provisionable(p))
                .map(|p| p.metadata.uid.clone().unwrap_or_default())
                .collect();
            self.caches.provisionable = Some((stamp, uids));
        }
        let uids = self.caches.provisionable.iter().flat_map(|(_, uids)| uids).map(String::as_str);
        if self.provisioner.observe(uids, now) {
            self.at(now + POD_REQUEUE, Timer::Wake);
        }
        if !self.provisioner.due(now) {
            return;
        }
        self.provisioner.solved();
        let catalogs = self.catalogs();
        let snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        let started = Instant::now();
        let result = provision(&snap, &catalogs, &self.catalog.label_policy, self.options.clone());
        let millis = started.elapsed().as_secs_f64() * 1000.0;
        let pools: Vec<NodePool> = self.cluster.nodepools.cloned_values();
        let objects = result.nodeclaims(&pools);
        let mut names = Vec::new();
        for (nc, decided) in objects.into_iter().zip(&result.results.new_claims) {
            let types: Vec<String> = decided.instance_types.iter().map(|t| t.name.clone()).collect();
            names.push(self.create_nodeclaim(nc, &decided.nodepool, types));
        }
        // Existing nodes the solve placed pods on are nominated: disruption leaves them alone for a while.
        let until = self.provisioner.nominated_until(self.now);
        for p in &result.results.existing {
            self.disruption.nominated.insert(p.node.clone(), until);
        }
        self.pending_reasons.clear();
        for f in &result.results.failures {
            let p = &result.pods[f.pod];
            let reasons = f.reasons.iter().map(|(pool, r)| (pool.clone(), r.to_string())).collect();
            self.pending_reasons.insert((p.namespace.clone(), p.name.clone()), reasons);
        }
        for (i, why) in &result.results.ignored {
            let p = &result.pods[*i];
            self.pending_reasons.insert((p.namespace.clone(), p.name.clone()), vec![(String::new(), why.to_string())]);
        }
        for (key, why) in &result.rejected {
            if let Some((ns, name)) = key.split_once('/') {
                self.pending_reasons.insert((ns.to_string(), name.to_string()), vec![(String::new(), why.to_string())]);
            }
        }
        let placed = result.results.scheduled_pods();
        self.record.solves.push(SolveTiming { at: self.now, pods: result.pods.len(), nodes: names.len(), millis });
        if !names.is_empty() {
            let id = self.decision_id("p");
            self.record.decisions.push(Decision::Provision { id, at: self.now, nodeclaims: names, pods: placed });
        }
    }

    /// Creates a NodeClaim the engine decided on, under a fresh `<nodepool>-xxxxx` name, and records it.
    fn create_nodeclaim(&mut self, mut nc: NodeClaim, nodepool: &str, instance_types: Vec<String>) -> String {
        let name = loop {
            let n = format!("{nodepool}-{}", self.rng.suffix(5));
            if !self.cluster.nodeclaims.contains_key(&n) {
                break n;
            }
        };
        nc.metadata.name = Some(name.clone());
        nc.metadata.uid = Some(self.cluster.uid());
        nc.metadata.creation_timestamp = Some(lifecycle::ms_time(self.now));
        self.record.nodeclaims.push(NodeClaimRecord {
            name: name.clone(),
            nodepool: nodepool.to_string(),
            created_at: self.now,
            deleted_at: None,
            instance_types,
            requirements: nc
                .spec
                .requirements
                .iter()
                .map(|r| (r.key.clone(), r.operator.clone(), r.values.clone()))
                .collect(),
            launched: None,
        });
        self.cluster.nodeclaims.insert(name.clone(), nc);
        name
    }

    /// Deletes a NodeClaim (finalization drains and terminates it) and records why.
    pub fn delete_nodeclaim(&mut self, name: &str, reason: DeleteReason) {
        let now = self.now;
        if self.cluster.nodeclaims.get(name).is_some_and(|c| c.metadata.deletion_timestamp.is_none())
            && let Some(c) = self.cluster.nodeclaims.get_mut(name)
        {
            c.metadata.deletion_timestamp = Some(lifecycle::ms_time(now));
            let id = self.decision_id("d");
            self.record.decisions.push(Decision::Delete { id, at: now, nodeclaim: name.to_string(), reason });
        }
    }

    fn nodeclaims(&mut self) {
        enum Plan {
            Finalize(Vec<FinalizeAction>),
            Reconcile(Vec<LifecycleAction>),
        }
        // Decide for every claim against the same state, then act.
        let mut plans: Vec<(String, Plan)> = Vec::new();
        {
            // Only looked up, never iterated (this runs at every reconcile).
            let mut by_provider: rustc_hash::FxHashMap<&str, Vec<&Node>> = rustc_hash::FxHashMap::default();
            for n in self.cluster.nodes.values() {
                if let Some(pid) = n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) {
                    by_provider.entry(pid).or_default().push(n);
                }
            }
            for (name, claim) in &self.cluster.nodeclaims {
                let nodes: &[&Node] =
                    claim.provider_id().and_then(|p| by_provider.get(p)).map_or(&[], |v| v.as_slice());
                if claim.metadata.deletion_timestamp.is_some() {
                    let exists = claim.provider_id().is_some_and(|p| self.cloud.get(p).is_some());
                    plans.push((name.clone(), Plan::Finalize(lifecycle::finalize(claim, nodes, exists, self.now))));
                } else {
                    let mut actions = lifecycle::reconcile(claim, nodes, self.now, &self.lifecycle);
                    actions.extend(lifecycle::expiration(claim, self.now));
                    plans.push((name.clone(), Plan::Reconcile(actions)));
                }
            }
        }
        for (name, plan) in plans {
            match plan {
                Plan::Finalize(actions) => self.finalize_actions(&name, actions),
                Plan::Reconcile(actions) => {
                    for a in actions {
                        self.lifecycle_action(&name, a);
                    }
                }
            }
        }
    }

    fn lifecycle_action(&mut self, name: &str, a: LifecycleAction) {
        let now = self.now;
        match &a {
            LifecycleAction::Launch => {
                if self.in_flight.contains_key(name) {
                    return;
                }
                let Some(claim) = self.cluster.nodeclaims.get(name).cloned() else { return };
                let result = self.cloud.create(&claim, now);
                self.in_flight.insert(name.to_string(), result);
                let t = now + self.settings.launch_latency;
                self.at(t, Timer::LaunchDone { claim: name.to_string() });
            }
            LifecycleAction::SyncNode {
                node,
                labels: l,
                annotations,
                taints_to_add,
                remove_unregistered_taint,
                finalizer,
            } => {
                if let Some(n) = self.cluster.nodes.get_mut(node) {
                    n.metadata.labels.get_or_insert_with(BTreeMap::new).extend(l.clone());
                    n.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(annotations.clone());
                    let spec = n.spec.get_or_insert_with(NodeSpec::default);
                    let taints = spec.taints.get_or_insert_with(Vec::new);
                    for t in taints_to_add {
                        if !taints.iter().any(|x| x.key == t.key && x.effect == t.effect) {
                            taints.push(t.clone());
                        }
                    }
                    if *remove_unregistered_taint {
                        taints.retain(|t| t.key != labels::TAINT_UNREGISTERED);
                    }
                    if *finalizer {
                        let f = n.metadata.finalizers.get_or_insert_with(Vec::new);
                        if !f.iter().any(|x| x == labels::TERMINATION_FINALIZER) {
                            f.push(labels::TERMINATION_FINALIZER.to_string());
                        }
                    }
                }
            }
            LifecycleAction::LabelNode { node, key, value } => {
                if let Some(n) = self.cluster.nodes.get_mut(node) {
                    n.metadata.labels.get_or_insert_with(BTreeMap::new).insert(key.clone(), value.clone());
                }
                if key == labels::INITIALIZED
                    && let Some(r) = self.record.nodes.iter_mut().find(|r| r.name == *node)
                {
                    r.initialized_at.get_or_insert(now);
                }
            }
            LifecycleAction::Delete { reason } => self.delete_nodeclaim(name, *reason),
            LifecycleAction::RequeueAt(t) => self.at(*t, Timer::Wake),
            _ => {
                if let Some(c) = self.cluster.nodeclaims.get_mut(name) {
                    lifecycle::apply(c, &a, now);
                }
            }
        }
    }

    fn launch_done(&mut self, name: &str) {
        let Some(result) = self.in_flight.remove(name) else { return };
        let now = self.now;
        match result {
            Ok(l) => {
                let Some(claim) = self.cluster.nodeclaims.get_mut(name) else {
                    // Deleted meanwhile: the instance leaks until GC'd by the cloud side; terminate it now.
                    let _ = self.cloud.terminate(&l.provider_id, now);
                    return;
                };
                let lr = LaunchResult {
                    provider_id: l.provider_id.clone(),
                    instance_type: l.instance_type.clone(),
                    zone: l.zone.clone(),
                    capacity_type: l.capacity_type.clone(),
                    labels: l.labels.clone(),
                    capacity: l.capacity.clone(),
                    allocatable: l.allocatable.clone(),
                    image_id: None,
                };
                lifecycle::apply_launch(claim, &lr, now);
                if let Some(r) = self.record.nodeclaims.iter_mut().rev().find(|r| r.name == name) {
                    r.launched = Some((l.instance_type.clone(), l.zone.clone(), l.capacity_type.clone()));
                }
                self.cloud.mark_running(&l.provider_id);
                let t = now + self.settings.registration_latency;
                self.at(t, Timer::Register { provider_id: l.provider_id });
            }
            Err(e) => {
                let err = match &e {
                    CloudError::InsufficientCapacity(m) => {
                        // Learn which offerings were out so the next solve avoids them.
                        if let Some(c) = self.cluster.nodeclaims.get(name) {
                            for key in self.cloud.exhausted_offerings_for(c) {
                                self.ice.insert(key, now + ICE_TTL);
                            }
                        }
                        LaunchError::InsufficientCapacity(m.clone())
                    }
                    CloudError::NoCompatibleType(m) => LaunchError::InsufficientCapacity(m.clone()),
                    CloudError::NotFound(m) => LaunchError::Other(m.clone()),
                };
                for a in lifecycle::launch_failed(&err, now) {
                    self.lifecycle_action(name, a);
                }
            }
        }
    }

    fn register_node(&mut self, provider_id: &str) {
        let now = self.now;
        let Some(inst) = self.cloud.get(provider_id).cloned() else { return };
        let Some(claim) = self.cluster.nodeclaims.get(&inst.nodeclaim).cloned() else { return };
        let node_name = loop {
            let n = format!(
                "ip-10-{}-{}-{}.ec2.internal",
                self.rng.next() % 256,
                self.rng.next() % 256,
                1 + self.rng.next() % 254
            );
            if !self.cluster.nodes.contains_key(&n) {
                break n;
            }
        };
        let mut node_labels = claim.metadata.labels.clone().unwrap_or_default();
        node_labels.extend(inst.launched.labels.clone());
        node_labels.insert(labels::HOSTNAME.to_string(), node_name.clone());
        let mut taints = vec![taint(labels::TAINT_UNREGISTERED, "NoExecute")];
        taints.push(taint("node.kubernetes.io/not-ready", "NoSchedule"));
        let node = Node {
            metadata: ObjectMeta {
                name: Some(node_name.clone()),
                labels: Some(node_labels.clone()),
                creation_timestamp: Some(lifecycle::ms_time(now)),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(provider_id.to_string()),
                taints: Some(taints.clone()),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                capacity: Some(q(&inst.launched.capacity)),
                allocatable: Some(q(&inst.launched.allocatable)),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "False".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        };
        self.cluster.nodes.insert(node_name.clone(), node);
        self.record.nodes.push(NodeRecord {
            name: node_name.clone(),
            provider_id: Some(provider_id.to_string()),
            nodepool: claim.nodepool().map(str::to_string),
            nodeclaim: Some(inst.nodeclaim.clone()),
            instance_type: inst.launched.instance_type.clone(),
            zone: inst.launched.zone.clone(),
            capacity_type: inst.launched.capacity_type.clone(),
            price: inst.launched.price,
            created_at: now,
            initialized_at: None,
            deleted_at: None,
            labels: node_labels,
            taints,
        });
        let t = now + self.settings.ready_latency;
        self.at(t, Timer::Ready { node: node_name });
    }

    fn node_ready(&mut self, node: &str) {
        if let Some(n) = self.cluster.nodes.get_mut(node) {
            if let Some(spec) = n.spec.as_mut()
                && let Some(t) = spec.taints.as_mut()
            {
                t.retain(|t| t.key != "node.kubernetes.io/not-ready");
            }
            if let Some(conds) = n.status.as_mut().and_then(|s| s.conditions.as_mut()) {
                for c in conds.iter_mut().filter(|c| c.type_ == "Ready") {
                    c.status = "True".into();
                }
            }
        }
    }

    fn finalize_actions(&mut self, name: &str, actions: Vec<FinalizeAction>) {
        let now = self.now;
        for a in actions {
            match a {
                FinalizeAction::AnnotateTerminationTimestamp(v) => {
                    if let Some(c) = self.cluster.nodeclaims.get_mut(name) {
                        c.metadata
                            .annotations
                            .get_or_insert_with(BTreeMap::new)
                            .insert(lifecycle::ANNOTATION_TERMINATION_TIMESTAMP.to_string(), v);
                    }
                }
                FinalizeAction::DeleteNode(n) => {
                    if let Some(node) = self.cluster.nodes.get_mut(&n)
                        && node.metadata.deletion_timestamp.is_none()
                    {
                        node.metadata.deletion_timestamp = Some(lifecycle::ms_time(now));
                    }
                }
                FinalizeAction::DeleteInstance => {
                    if let Some(pid) =
                        self.cluster.nodeclaims.get(name).and_then(|c| c.provider_id().map(str::to_string))
                    {
                        let _ = self.cloud.terminate(&pid, now);
                    }
                }
                FinalizeAction::SetCondition { type_, status, reason, message } => {
                    if let Some(c) = self.cluster.nodeclaims.get_mut(name) {
                        lifecycle::set_condition(c, &type_, &status, &reason, &message, now);
                    }
                }
                FinalizeAction::RemoveFinalizer => {
                    self.cluster.nodeclaims.remove(name);
                    self.in_flight.remove(name);
                    if let Some(r) = self.record.nodeclaims.iter_mut().rev().find(|r| r.name == name) {
                        r.deleted_at = Some(now);
                    }
                }
                FinalizeAction::RequeueAt(t) => self.at(t, Timer::Wake),
            }
        }
        // A claim that never launched has nothing to finalize beyond its finalizer.
        if let Some(c) = self.cluster.nodeclaims.get(name)
            && c.metadata.deletion_timestamp.is_some()
            && c.provider_id().is_none()
            && !c.is_true(COND_LAUNCHED)
        {
            self.cluster.nodeclaims.remove(name);
            if let Some(r) = self.record.nodeclaims.iter_mut().rev().find(|r| r.name == name) {
                r.deleted_at = Some(now);
            }
        }
    }

    /// Node termination: taint, drain in tiers through the Eviction API (PDBs enforced), then let the Node go.
    fn terminations(&mut self) {
        let now = self.now;
        let deleting: Vec<String> = self
            .cluster
            .nodes
            .iter()
            .filter(|(_, n)| n.metadata.deletion_timestamp.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        for name in deleting {
            let started = *self.drains.entry(name.clone()).or_insert(now);
            // Looked at before writing: every mutable access is a write the store's watchers see.
            let tainted = self.cluster.nodes.get(&name).is_some_and(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|ts| ts.iter().any(|t| t.key == labels::TAINT_DISRUPTED))
            });
            if !tainted && let Some(n) = self.cluster.nodes.get_mut(&name) {
                let taints = n.spec.get_or_insert_with(NodeSpec::default).taints.get_or_insert_with(Vec::new);
                taints.push(crate::engine::termination::disrupted_taint());
            }
            let Some(node) = self.cluster.nodes.get(&name).cloned() else { continue };
            let deadline = self
                .cluster
                .nodeclaims
                .values()
                .find(|c| c.provider_id() == node.spec.as_ref().and_then(|s| s.provider_id.as_deref()))
                .and_then(|c| lifecycle::annotated_deadline(c));
            let plan = crate::engine::termination::drain_plan(
                &node,
                &self.cluster.pods_on(&name),
                deadline,
                Some(started),
                now,
            );
            let pdbs: Vec<_> = self.cluster.pdbs.cloned_values();
            for (ns, pod) in plan.evict {
                let key = (ns, pod);
                // Each eviction sees the ones before it (PDBs count pods being deleted).
                let allowed = {
                    let Some(p) = self.cluster.pods.get(&key) else { continue };
                    let all: Vec<&StoredPod> = self.cluster.pods.values().map(|o| &**o).collect();
                    crate::engine::pdb::check_eviction(p, &pdbs, &all).is_ok()
                };
                if allowed {
                    self.delete_pod(&key, None);
                }
            }
            for (ns, pod, grace) in plan.force_delete {
                self.delete_pod(&(ns, pod), Some(grace.max(1) * SECOND));
            }
            if plan.drained {
                self.refresh_node_record(&name);
                self.cluster.nodes.remove(&name);
                self.drains.remove(&name);
                for p in self
                    .cluster
                    .pods_on(&name)
                    .into_iter()
                    .map(|p| {
                        (p.metadata.namespace.clone().unwrap_or_default(), p.metadata.name.clone().unwrap_or_default())
                    })
                    .collect::<Vec<_>>()
                {
                    self.cluster.pods.remove(&p);
                    if let Some(r) = self.record.pods.get_mut(&p) {
                        r.deleted_at = Some(now);
                    }
                }
                if let Some(r) = self.record.nodes.iter_mut().rev().find(|r| r.name == name) {
                    r.deleted_at = Some(now);
                }
            } else {
                self.at(now + SECOND, Timer::Wake);
            }
        }
    }

    /// Deletes a pod: it gets a deletion timestamp now and is gone after its grace period.
    pub fn delete_pod(&mut self, key: &Key, grace: Option<Millis>) {
        let now = self.now;
        if self.cluster.pods.get(key).is_none_or(|p| p.metadata.deletion_timestamp.is_some()) {
            return;
        }
        let Some(p) = self.cluster.pods.get_mut(key) else { return };
        p.metadata.deletion_timestamp = Some(lifecycle::ms_time(now));
        let g = grace.unwrap_or_else(|| {
            p.spec().termination_grace_period_seconds.map_or(DEFAULT_POD_GRACE, |s| s.max(0) * SECOND)
        });
        self.at(now + g, Timer::PodGone { key: key.clone() });
    }

    fn interruptions(&mut self) {
        let now = self.now;
        for i in self.cloud.drain_interruptions() {
            let Some(node) = self
                .cluster
                .nodes
                .values()
                .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(i.provider_id.as_str()))
                .and_then(|n| n.metadata.name.clone())
            else {
                continue;
            };
            let id = self.decision_id("d");
            let displaced = self
                .cluster
                .pods
                .iter()
                .filter(|(_, p)| p.node_name() == Some(node.as_str()))
                .filter(|(_, p)| {
                    !p.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.kind == "DaemonSet" && o.controller == Some(true))
                })
                .map(|(k, _)| k.clone())
                .collect();
            self.record.decisions.push(Decision::Interruption {
                id,
                at: now,
                node: node.clone(),
                kind: i.kind,
                displaced,
            });
            // What the controller does about the notice (the same rule as the live controller's).
            if !i.kind.deletes_nodeclaim() {
                continue;
            }
            if i.kind == InterruptionKind::SpotInterruption
                && let Some(inst) = self.cloud.get(&i.provider_id)
            {
                let l = inst.launched.clone();
                self.cloud.mark_unavailable(&l.instance_type, &l.zone, &l.capacity_type, now + ICE_TTL);
                self.ice.insert((l.instance_type, l.zone, l.capacity_type), now + ICE_TTL);
            }
            let claim = self
                .cluster
                .nodeclaims
                .values()
                .find(|c| c.provider_id() == Some(i.provider_id.as_str()))
                .map(|c| c.name().to_string());
            if let Some(c) = claim
                && let Some(nc) = self.cluster.nodeclaims.get_mut(&c)
                && nc.metadata.deletion_timestamp.is_none()
            {
                nc.metadata.deletion_timestamp = Some(lifecycle::ms_time(now));
            }
        }
    }

    fn garbage_collect(&mut self) {
        let ids = self.cloud.list();
        // Only registered claims whose instance is gone can be collected; the engine decides for those (usually
        // none, so the store is not copied every period).
        let claims: Vec<NodeClaim> = self
            .cluster
            .nodeclaims
            .values()
            .filter(|c| c.provider_id().is_none_or(|p| !ids.contains(p)))
            .map(|o| (**o).clone())
            .collect();
        if claims.is_empty() {
            return;
        }
        let nodes: Vec<Node> = self.cluster.nodes.cloned_values();
        for name in lifecycle::garbage_collect(&claims, &nodes, &ids) {
            self.delete_nodeclaim(&name, DeleteReason::GarbageCollected);
        }
    }

    /// Pods still unbound, and the initialized-node count (for tests and reports).
    pub fn pending_pods(&self) -> Vec<Key> {
        self.cluster.pods.iter().filter(|(_, p)| p.node_name().is_none()).map(|(k, _)| k.clone()).collect()
    }

    pub fn initialized_claims(&self) -> usize {
        self.cluster.nodeclaims.values().filter(|c| c.is_true(COND_INITIALIZED)).count()
    }

    /// The offering list of a claim's launched instance type, for cost.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    fn mark_pod_condition(p: &mut StoredPod, type_: &str, status: &str) {
        let condition = PodCondition { type_: type_.into(), status: status.into(), ..Default::default() };
        crate::sim::cluster::set_pod_condition(p, condition);
    }
}
