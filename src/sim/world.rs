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

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, PodCondition, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::controller::interruption::Kind as InterruptionKind;
use crate::engine::api::nodeclaim::COND_INITIALIZED;
use crate::engine::catalog::{Catalog, InstanceType};
use crate::engine::labels;
use crate::engine::lifecycle::{self, DeleteReason};
use crate::engine::provisioning::Millis;
use crate::engine::stored_pod::StoredPod;
use crate::sim::cloud::SimCloud;
use crate::sim::cluster::{Cluster, Key};

mod api_server;
mod execute;
mod host;
mod records;

pub use self::records::DisruptionRecord;
pub use crate::controller::tick::PassTiming;

pub use crate::controller::timing::{ICE_TTL, MINUTE, POD_REQUEUE, SECOND};
pub const GC_PERIOD: Millis = 2 * MINUTE;

/// The simulated world's settings (a scenario's `settings`): how long the simulated cloud and kubelets take, and the
/// controller's own settings, the one [`crate::controller::Settings`] every backend fills.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Launch request -> instance running (default 5 s).
    pub launch_latency: Millis,
    /// Instance running -> Node registered (default 30 s).
    pub registration_latency: Millis,
    /// Node registered -> Ready (default 10 s).
    pub ready_latency: Millis,
    /// Mode, feature gates, packing, batch windows, validation delay.
    pub controller: crate::controller::Settings,
    /// The simulated cloud's repair policies (AWS's for the aws catalog, KWOK's for kwok and inline ones).
    pub repair_policies: Vec<crate::controller::cloud::RepairPolicy>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            launch_latency: 5 * SECOND,
            registration_latency: 30 * SECOND,
            ready_latency: 10 * SECOND,
            controller: crate::controller::Settings::default(),
            repair_policies: crate::controller::cloud::aws_repair_policies(),
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
    /// Per provisioning solve that created NodeClaims, oldest first: what each packing strategy would have launched
    /// for its pods, and the LP lower bound.
    pub packing: Vec<crate::controller::provisioning::PackingPass>,
    /// How long working out each of `packing` took (after its solve, which does not wait for it).
    pub comparisons: Vec<ComparisonTiming>,
    /// The Kubernetes Events the controller wrote, newest last, the last [`EVENTS_KEPT`] of them (the dashboard's
    /// Events pane; the report has none).
    pub events: std::collections::VecDeque<EventRecord>,
}

/// How many of the controller's Events the world keeps.
pub const EVENTS_KEPT: usize = 500;

/// A Kubernetes Event as the controller wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub at: Millis,
    pub warning: bool,
    pub reason: String,
    /// `kind/name` of the object it is about (`node/ip-…`, `pod/default/web-0`).
    pub object: String,
    pub message: String,
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
    pub instance_types: Arc<[String]>,
    pub requirements: Vec<(String, String, Arc<[String]>)>,
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
        /// A static NodePool's replicas (no pods asked for them).
        is_static: bool,
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

/// One packing comparison: when its solve ran, over how many pods, and how long it took.
#[derive(Debug, Clone)]
pub struct ComparisonTiming {
    pub at: Millis,
    pub pods: usize,
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

/// A simulated kubelet's boot id: `boot-1` when the node registers, one more with every reboot. (Counted, not drawn
/// from the world's generator, so a reboot leaves every later generated name as it was.)
pub(crate) fn next_boot_id(current: Option<&str>) -> String {
    let n = current.and_then(|b| b.strip_prefix("boot-")).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
    format!("boot-{}", n + 1)
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

/// What the world must do and when: timers in the order they were set, and the instants to reconcile at.
#[derive(Debug, Default)]
struct Timers {
    queue: BTreeSet<(Millis, u64, Timer)>,
    wakes: BTreeSet<Millis>,
    seq: u64,
}

impl Timers {
    fn at(&mut self, now: Millis, t: Millis, timer: Timer) {
        let t = t.max(now);
        if timer == Timer::Wake {
            // Requeues repeat every reconcile; one wake per instant is enough.
            self.wakes.insert(t);
            return;
        }
        self.seq += 1;
        self.queue.insert((t, self.seq, timer));
    }
}

pub struct World {
    pub now: Millis,
    pub cluster: Cluster,
    pub cloud: SimCloud,
    pub record: Record,
    catalog: Catalog,
    settings: Settings,
    timers: Timers,
    /// Launches in flight: claim → the result the cloud will report.
    in_flight: BTreeMap<String, Result<crate::controller::cloud::Launched, crate::controller::cloud::LaunchFailure>>,
    /// The one controller, as the live loop runs it; the world calls its steps on the virtual clock and carries out
    /// their effects.
    controller: crate::controller::Controller,
    /// The controller's schedule: which of its steps run when, and what each read last.
    tick: crate::controller::tick::Tick,
    /// Whether the controller's explanatory Events (why nodes are not disrupted) are published: `demo` shows them
    /// in its Events pane; `simulate` leaves them out (a full explanation of every node every 5 minutes costs more
    /// than the rest of a large scenario, and the report has no Events).
    pub explain_events: bool,
    /// The NodePools' stamp as of their last spec write (a status write is not a change to what the controllers
    /// read from them), and as of the last status write.
    nodepool_spec_stamp: u64,
    nodepool_status_stamp: Option<u64>,
    rng: Rng,
    /// Why each pod was pending after the last provisioning pass: (NodePool or "", reason).
    pub pending_reasons: BTreeMap<Key, Vec<(String, String)>>,
    /// Numbers the decisions in the record.
    ids: crate::controller::tick::Ids,
    caches: Caches,
}

/// Results derived from the cluster, kept while the stamps of their inputs are unchanged (see the docs of
/// [`crate::sim::cluster`]): most reconciles happen at instants where nothing changed.
#[derive(Debug, Default)]
struct Caches {
    /// (nodes, pods) stamps the kubelet last left behind.
    kubelet: Option<[u64; 2]>,
    /// (pods, nodes, nodeclaims, NodePool specs, PDBs) stamps and the state key then.
    state_key: Option<([u64; 5], u64)>,
    /// The pods stamp and the uids of the provisionable pods then, in pod order.
    provisionable: Option<(u64, Arc<Vec<String>>)>,
    /// The store as the engine last read it, kept so the next snapshot copies only what changed.
    snapshot: crate::sim::cluster::SnapshotMirror,
}

fn q(r: &crate::engine::resources::Resources) -> BTreeMap<String, Quantity> {
    r.to_quantity_map().into_iter().map(|(k, v)| (k, Quantity(v))).collect()
}

/// A node's CSINode as the kubelet writes it once the drivers' node plugins register: owned by the Node, one entry
/// per driver with what it can attach.
pub(crate) fn csinode(
    node: &str,
    limits: &crate::engine::catalog::VolumeLimits,
) -> k8s_openapi::api::storage::v1::CSINode {
    use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, VolumeNodeResources};
    CSINode {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            owner_references: Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.to_string(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: CSINodeSpec {
            drivers: limits
                .iter()
                .map(|(driver, count)| CSINodeDriver {
                    name: driver.clone(),
                    node_id: node.to_string(),
                    allocatable: Some(VolumeNodeResources { count: Some(i32::try_from(*count).unwrap_or(i32::MAX)) }),
                    topology_keys: None,
                })
                .collect(),
        },
        status: None,
    }
}

fn taint(key: &str, effect: &str) -> Taint {
    Taint { key: key.into(), value: None, effect: effect.into(), time_added: None }
}

impl World {
    /// The one controller, as the world runs it: what the dashboard and the report read of its state (proposals
    /// and commands, the packing comparison, buffers, overlays, repairs).
    pub fn controller(&self) -> &crate::controller::Controller {
        &self.controller
    }

    /// A static NodePool's replicas set, as `kubectl scale` does through the scale subresource (refused for a
    /// dynamic pool, as the CRD refuses turning it static).
    pub fn scale_nodepool(&mut self, name: &str, replicas: i64) -> Result<String, String> {
        if replicas < 0 {
            return Err(format!("replicas must be non-negative, got {replicas}"));
        }
        let pool = self.cluster.nodepools.get(name).ok_or_else(|| format!("NodePool {name} does not exist"))?;
        if pool.spec.replicas.is_none() {
            return Err(format!(
                "NodePool {name} is dynamic: Cannot transition NodePool between static (replicas set) and dynamic \
                 (replicas unset) provisioning modes"
            ));
        }
        let mut pool = (**pool).clone();
        pool.spec.replicas = Some(replicas);
        pool.metadata.generation = Some(pool.metadata.generation.unwrap_or(1) + 1);
        self.cluster.nodepools.insert(name.to_string(), pool);
        Ok(format!("NodePool {name} scaled to {replicas} replicas"))
    }

    /// The world's settings (the controller's share included).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn new(catalog: Catalog, settings: Settings, start: Millis, seed: u64) -> World {
        let gates = settings.controller.gates.for_version(settings.controller.karpenter_version);
        let declared = settings.controller.karpenter_version.counts_declared_volume_limits();
        let cloud = SimCloud::new(&catalog)
            .with_repair_policies(settings.repair_policies.clone())
            .with_kubelet_expressions(gates.node_class_cel)
            .with_declared_volume_limits(declared);
        let engine_catalog = if declared { catalog.clone() } else { catalog.without_volume_limits() };
        let mut controller =
            crate::controller::Controller::with_settings(Arc::new(engine_catalog), settings.controller.clone(), start)
                .with_provider_prefix(crate::sim::cloud::PROVIDER_PREFIX)
                .starting_empty();
        controller.set_repair_policies(crate::controller::cloud::CloudProvider::repair_policies(&cloud));
        let mut cluster = Cluster::with_seed(seed ^ 0x706f_6473);
        if settings.controller.karpenter_version.has_default_spread() {
            cluster.default_constraints = settings.controller.scheduler_config.default_constraints().to_vec();
        }
        World {
            now: start,
            cloud,
            cluster,
            record: Record::default(),
            catalog,
            settings,
            timers: Timers::default(),
            in_flight: BTreeMap::new(),
            controller,
            tick: crate::controller::tick::Tick::new(start + GC_PERIOD, GC_PERIOD),
            explain_events: false,
            nodepool_spec_stamp: 0,
            nodepool_status_stamp: None,
            rng: Rng(seed ^ 0x6b61_7270_656e_7465),
            pending_reasons: BTreeMap::new(),
            ids: Default::default(),
            caches: Caches::default(),
        }
    }

    fn at(&mut self, t: Millis, timer: Timer) {
        self.timers.at(self.now, t, timer);
    }

    /// The time of the next scheduled thing, if any.
    pub fn next_wake(&self) -> Option<Millis> {
        let t = self.timers.queue.iter().next().map(|(t, _, _)| *t);
        let w = self.timers.wakes.iter().next().copied();
        // A window that closed at or before now was looked at by this instant's reconcile; if it is still open
        // (the controller waits for claims it created), waking at the same instant again would change nothing.
        let c = self.controller.next_wake(self.now);
        let r = self.cloud.next_reservation_change(self.now);
        [t, w, c, r, Some(self.tick.next_gc())].into_iter().flatten().min()
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
        self.timers.wakes.retain(|t| *t > now);
        while let Some(first) = self.timers.queue.iter().next().cloned() {
            if first.0 > self.now {
                break;
            }
            self.timers.queue.remove(&first);
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
            let before = self.state_key();
            self.controllers();
            // The controller's steps, as its schedule runs them (the schedule is handed the world it runs on).
            let mut tick = std::mem::take(&mut self.tick);
            if crate::controller::tick::immediate(tick.run(self)).is_none() {
                tracing::error!("the controller's run waited on the simulated world, which answers at once");
            }
            self.tick = tick;
            if self.state_key() == before {
                break;
            }
        }
    }

    /// The controller's key of the cluster state ([`crate::controller::state_key`]): what rejected proposals and
    /// the consolidated mark remember, and what tells that an instant has settled. Kept while the stamps of what
    /// it reads are unchanged.
    pub fn state_key(&mut self) -> u64 {
        let c = &self.cluster;
        let stamps =
            [c.pods.stamp(), c.nodes.stamp(), c.nodeclaims.stamp(), self.nodepool_spec_stamp(), c.pdbs.stamp()];
        if let Some((at, key)) = self.caches.state_key
            && at == stamps
        {
            return key;
        }
        let snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        let key = crate::controller::state_key(&snap);
        self.caches.state_key = Some((stamps, key));
        key
    }

    /// Copies a live node's current labels and taints into its record (the report shows a node as last seen).
    fn refresh_node_record(&mut self, name: &str) {
        self.api().refresh_node_record(name);
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

    /// The catalog as the controller sees it (the cloud's, with the offerings it learned are out of capacity).
    fn engine_catalog(&mut self) -> Arc<Catalog> {
        self.cloud.catalog_at(self.now)
    }

    /// Instance types per NodePool as the engine sees them (see [`World::engine_catalog`]).
    fn catalogs(&mut self) -> BTreeMap<String, Vec<Arc<InstanceType>>> {
        let types = self.engine_catalog().instance_types.clone();
        self.cluster.nodepools.keys().map(|k| (k.clone(), types.clone())).collect()
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
                // As a kubelet reports it: every condition carries its transition time (node repair reads it).
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "False".into(),
                    reason: Some("KubeletNotReady".into()),
                    last_transition_time: Some(lifecycle::ms_time(now)),
                    last_heartbeat_time: Some(lifecycle::ms_time(now)),
                    ..Default::default()
                }]),
                node_info: Some(NodeSystemInfo { boot_id: next_boot_id(None), ..Default::default() }),
                ..Default::default()
            }),
        };
        self.cluster.nodes.insert(node_name.clone(), node);
        // The type's CSI drivers report what they can attach (a node plugin registering with the kubelet).
        if let Some(limits) = self.cloud.volume_limits(&inst.launched.instance_type) {
            let csinode = csinode(&node_name, limits);
            self.cluster.csinodes.insert(node_name.clone(), csinode);
        }
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
        let now = self.now;
        if let Some(n) = self.cluster.nodes.get_mut(node) {
            if let Some(spec) = n.spec.as_mut()
                && let Some(t) = spec.taints.as_mut()
            {
                t.retain(|t| t.key != "node.kubernetes.io/not-ready");
            }
            if let Some(conds) = n.status.as_mut().and_then(|s| s.conditions.as_mut()) {
                for c in conds.iter_mut().filter(|c| c.type_ == "Ready" && c.status != "True") {
                    c.status = "True".into();
                    c.reason = Some("KubeletReady".into());
                    c.last_transition_time = Some(lifecycle::ms_time(now));
                    c.last_heartbeat_time = Some(lifecycle::ms_time(now));
                }
            }
        }
    }

    /// An instance rebooted: its kubelet stops reporting (Ready goes False) and comes back with a new boot id after
    /// the registration and readiness latencies. Its pods stay bound, as on a real reboot.
    fn reboot_node(&mut self, provider_id: &str) {
        let now = self.now;
        let Some(name) = self
            .cluster
            .nodes
            .iter()
            .find(|(_, n)| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id))
            .map(|(name, _)| name.clone())
        else {
            return;
        };
        let Some(n) = self.cluster.nodes.get_mut(&name) else { return };
        let status = n.status.get_or_insert_with(Default::default);
        let boot = next_boot_id(status.node_info.as_ref().map(|i| i.boot_id.as_str()));
        status.node_info = Some(NodeSystemInfo { boot_id: boot, ..Default::default() });
        for c in status.conditions.iter_mut().flatten().filter(|c| c.type_ == "Ready") {
            c.status = "False".into();
            c.reason = Some("KubeletNotReady".into());
            c.message = Some("the node is rebooting".into());
            c.last_transition_time = Some(lifecycle::ms_time(now));
            c.last_heartbeat_time = Some(lifecycle::ms_time(now));
        }
        let t = now + self.settings.registration_latency + self.settings.ready_latency;
        self.at(t, Timer::Ready { node: name });
    }

    /// Deletes a pod: it gets a deletion timestamp now and is gone after its grace period.
    pub fn delete_pod(&mut self, key: &Key, grace: Option<Millis>) {
        self.api().delete_pod(key, grace);
    }

    /// The NodePools' stamp, leaving out writes of their status: what the controllers that read NodePools see
    /// change.
    pub(crate) fn nodepool_spec_stamp(&self) -> u64 {
        let stamp = self.cluster.nodepools.stamp();
        if Some(stamp) == self.nodepool_status_stamp { self.nodepool_spec_stamp } else { stamp }
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
