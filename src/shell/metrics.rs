//! Prometheus metrics for `controller` and the live dashboard (`--metrics-addr`): upstream Karpenter's names and
//! labels where the concept is the same, and this tool's own under `karpenter_tui_`. Recorded here, at the shell:
//! from the effects the executor carried out ([`Recorder::carried`]), from the controller's state after each run
//! ([`Recorder::after_run`]), from the cloud port's calls ([`MeteredCloud`]) and, at each scrape, from the watch
//! cache ([`Metrics::render`]). Nothing here is read by the engine or the controller, so their decisions and the
//! simulator's reports are what they were without metrics. Every record is a few atomic operations or a short walk
//! over what a run did: no copy of the cluster, nothing per pod per run.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::controller::cloud::{
    BoxFuture, CloudInstance, CloudProvider, InstanceTypes, LaunchFailure, Launched, Notice, OverlayStore,
    RepairPolicy, Retry,
};
use crate::controller::disruption::CommandState;
use crate::controller::effect::Purpose;
use crate::controller::{Controller, Effect};
use crate::engine::api::NodeClaim;
use crate::engine::catalog::Catalog;
use crate::engine::disruption::consolidation::Outlook;
use crate::engine::disruption::gate::{GateEvent, Mode};
use crate::engine::disruption::{Command, Method, Reason};
use crate::engine::labels;
use crate::engine::lifecycle::{DeleteReason, LaunchError};
use crate::engine::manifests::ClusterObjects;
use crate::engine::provisioning::Millis;
use crate::engine::version::KarpenterVersion;
use crate::kube::cache::Cache;

/// The `Content-Type` of what [`Metrics::render`] returns: Prometheus' text exposition format 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

type FloatGauge = Gauge<f64, AtomicU64>;
type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CreatedLabels {
    reason: String,
    nodepool: String,
    min_values_relaxed: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TerminatedLabels {
    nodepool: String,
    capacity_type: String,
    zone: String,
}

/// `karpenter_nodeclaims_disrupted_total`'s labels, and `karpenter_pods_disruption_initiated_total`'s.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct DisruptedLabels {
    reason: String,
    nodepool: String,
    capacity_type: String,
    /// v1.15's two more (#3297): `consolidation_policy` (the NodePool's, snake_case, for consolidation only) and
    /// `termination_mode`; `None` under v1.14, whose series have neither.
    since_1_15: Option<(String, String)>,
}

impl EncodeLabelSet for DisruptedLabels {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeLabel;
        for (k, v) in [("reason", &self.reason), ("nodepool", &self.nodepool), ("capacity_type", &self.capacity_type)] {
            (k, v.as_str()).encode(encoder.encode_label())?;
        }
        if let Some((policy, mode)) = &self.since_1_15 {
            ("consolidation_policy", policy.as_str()).encode(encoder.encode_label())?;
            ("termination_mode", mode.as_str()).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    decision: String,
    reason: String,
    consolidation_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CloudLabels {
    controller: String,
    method: String,
    provider: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CloudErrorLabels {
    controller: String,
    method: String,
    provider: String,
    error: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolResourceLabels {
    nodepool: String,
    resource_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperatorLabels {
    operator: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    controller: String,
}

impl ControllerLabels {
    fn provisioner() -> ControllerLabels {
        ControllerLabels { controller: "provisioner".into() }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PlanLabels {
    plan: String,
}

/// Upstream's `DurationBuckets` (controller-runtime's, with the long tail of singleton controllers).
const DURATION_BUCKETS: [f64; 45] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5,
    1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    150.0, 300.0, 450.0, 600.0,
];

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// Pods take seconds to minutes to start.
/// v1.15's reboot buckets: 10 s doubling to 1,280 s.
fn reboot_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(10.0, 2.0, 8))
}

fn startup_histogram() -> Histogram {
    Histogram::new([1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 1200.0])
}

/// Every metric, registered once; shared by the loop that records and the listener that serves them.
pub struct Metrics {
    registry: Registry,
    /// Held while a labelled gauge is rebuilt (cleared, then set) and while the metrics are encoded, so a scrape
    /// never sees one half-rebuilt.
    gauges: Mutex<()>,
    /// Who approves and rejects through this instance (the `operator` label).
    operator: String,
    nodeclaims_created: Family<CreatedLabels, Counter>,
    nodeclaims_terminated: Family<TerminatedLabels, Counter>,
    nodeclaims_disrupted: Family<DisruptedLabels, Counter>,
    pods_disruption_initiated: Family<DisruptedLabels, Counter>,
    reboots: Family<ResultLabels, Counter>,
    reboot_duration: HistogramFamily<ResultLabels>,
    reboot_recovery: Histogram,
    decisions: Family<DecisionLabels, Counter>,
    eligible_nodes: Family<ReasonLabels, Gauge>,
    pod_startup: Histogram,
    cloud_duration: HistogramFamily<CloudLabels>,
    cloud_errors: Family<CloudErrorLabels, Counter>,
    nodepool_usage: Family<PoolResourceLabels, FloatGauge>,
    nodepool_limit: Family<PoolResourceLabels, FloatGauge>,
    scheduling_duration: HistogramFamily<ControllerLabels>,
    queue_depth: Family<ControllerLabels, Gauge>,
    synced: Gauge,
    node_count: Gauge,
    proposals: Gauge,
    proposal_savings: FloatGauge,
    approvals: Family<OperatorLabels, Counter>,
    rejections: Family<OperatorLabels, Counter>,
    packing: Family<PlanLabels, FloatGauge>,
}

impl Metrics {
    /// Every metric, at zero. `operator` labels the approvals and rejections made through this instance.
    pub fn new(operator: &str) -> Metrics {
        let mut m = Metrics {
            registry: Registry::default(),
            gauges: Mutex::new(()),
            operator: operator.to_string(),
            nodeclaims_created: Family::default(),
            nodeclaims_terminated: Family::default(),
            nodeclaims_disrupted: Family::default(),
            pods_disruption_initiated: Family::default(),
            reboots: Family::default(),
            reboot_duration: Family::new_with_constructor(reboot_histogram as fn() -> Histogram),
            reboot_recovery: reboot_histogram(),
            decisions: Family::default(),
            eligible_nodes: Family::default(),
            pod_startup: startup_histogram(),
            cloud_duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            cloud_errors: Family::default(),
            nodepool_usage: Family::default(),
            nodepool_limit: Family::default(),
            scheduling_duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            queue_depth: Family::default(),
            synced: Gauge::default(),
            node_count: Gauge::default(),
            proposals: Gauge::default(),
            proposal_savings: FloatGauge::default(),
            approvals: Family::default(),
            rejections: Family::default(),
            packing: Family::default(),
        };
        // Upstream's reasons are there from the start, at zero until the first explanatory round counts them.
        for r in [Reason::Empty, Reason::Underutilized, Reason::Drifted] {
            m.eligible_nodes.get_or_create(&ReasonLabels { reason: reason_label(r) }).set(0);
        }
        // Counters get `_total` from the encoder.
        let r = &mut m.registry;
        r.register(
            "karpenter_nodeclaims_created",
            "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created, the \
             owning nodepool, and if min values was relaxed for this nodeclaim",
            m.nodeclaims_created.clone(),
        );
        r.register(
            "karpenter_nodeclaims_terminated",
            "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool, capacity type, \
             and zone",
            m.nodeclaims_terminated.clone(),
        );
        r.register(
            "karpenter_nodeclaims_disrupted",
            "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted, \
             the owning nodepool and capacity type",
            m.nodeclaims_disrupted.clone(),
        );
        r.register(
            "karpenter_pods_disruption_initiated",
            "Number of reschedulable pods on nodeclaims whose disruption was initiated. Labeled by reason, the \
             owning nodepool, capacity type, consolidation policy and termination mode",
            m.pods_disruption_initiated.clone(),
        );
        r.register("karpenter_nodes_reboots", "Number of node reboots completed. Labeled by result", m.reboots.clone());
        r.register(
            "karpenter_nodes_reboot_duration_seconds",
            "The time from a reboot's request until its result. Labeled by result",
            m.reboot_duration.clone(),
        );
        r.register(
            "karpenter_nodes_reboot_recovery_duration_seconds",
            "The time from a reboot's issue until the node was back and Ready",
            m.reboot_recovery.clone(),
        );
        r.register(
            "karpenter_voluntary_disruption_decisions",
            "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation \
             type",
            m.decisions.clone(),
        );
        r.register(
            "karpenter_voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason",
            m.eligible_nodes.clone(),
        );
        r.register(
            "karpenter_pods_startup_duration_seconds",
            "The time from pod creation until the pod is ready, for pods seen pending",
            m.pod_startup.clone(),
        );
        r.register(
            "karpenter_cloudprovider_duration_seconds",
            "Duration of cloud provider method calls. Labeled by the controller, method name and provider",
            m.cloud_duration.clone(),
        );
        r.register(
            "karpenter_cloudprovider_errors",
            "Total number of errors returned from CloudProvider calls. Labeled by the controller, method name, \
             provider and error",
            m.cloud_errors.clone(),
        );
        r.register(
            "karpenter_nodepools_usage",
            "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool and resource \
             type",
            m.nodepool_usage.clone(),
        );
        r.register(
            "karpenter_nodepools_limit",
            "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by \
             nodepool and resource type",
            m.nodepool_limit.clone(),
        );
        r.register(
            "karpenter_provisioner_scheduling_duration_seconds",
            "Duration of scheduling simulations used for deprovisioning and provisioning in seconds. Labeled by the \
             controller",
            m.scheduling_duration.clone(),
        );
        r.register(
            "karpenter_provisioner_scheduling_queue_depth",
            "The number of pods currently waiting to be scheduled. Labeled by the controller",
            m.queue_depth.clone(),
        );
        r.register(
            "karpenter_cluster_state_synced",
            "Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims and nodes that are \
             stored in the APIServer have the same representation as Karpenter's cluster state",
            m.synced.clone(),
        );
        r.register(
            "karpenter_cluster_state_node_count",
            "Current count of nodes in cluster state",
            m.node_count.clone(),
        );
        r.register(
            "karpenter_tui_proposals_awaiting_approval",
            "Voluntary disruption proposals waiting for an operator's approval",
            m.proposals.clone(),
        );
        r.register(
            "karpenter_tui_proposals_savings_per_hour",
            "Projected savings of the proposals waiting for approval, in dollars per hour",
            m.proposal_savings.clone(),
        );
        r.register(
            "karpenter_tui_approvals",
            "Disruption proposals approved through this instance. Labeled by operator",
            m.approvals.clone(),
        );
        r.register(
            "karpenter_tui_rejections",
            "Disruption proposals rejected through this instance. Labeled by operator",
            m.rejections.clone(),
        );
        r.register(
            "karpenter_tui_packing_cost_per_hour",
            "The latest launching solve's pods priced under each plan, in dollars per hour: upstream packing, cost \
             packing, and the LP lower bound",
            m.packing.clone(),
        );
        m
    }

    /// The metrics in Prometheus' text exposition format, after reading what the watch cache says now (whether
    /// it is in sync, the node count, NodePool usage and limits, the pods that started since the last scrape).
    pub fn render(&self, cache: Option<&Mutex<Cache>>) -> String {
        let _gauges = self.gauges.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cache) = cache
            && let Ok(mut c) = cache.lock()
        {
            self.synced.set(i64::from(c.synced()));
            self.node_count.set(c.nodes.len() as i64);
            self.nodepool_usage.clear();
            self.nodepool_limit.clear();
            c.nodepools.settle();
            for pool in c.nodepools.values() {
                let name = pool.metadata.name.clone().unwrap_or_default();
                let resources = pool.status.as_ref().map(|s| &s.resources);
                for (resource, q) in resources.into_iter().flatten() {
                    self.pool_gauge(&self.nodepool_usage, &name, resource, &q.0);
                }
                for (resource, q) in pool.spec.limits.iter().flatten() {
                    self.pool_gauge(&self.nodepool_limit, &name, resource, &q.0);
                }
            }
            let started = c.take_pod_startups();
            drop(c);
            for s in started {
                self.pod_startup.observe(s);
            }
        }
        let mut out = String::new();
        // Writing to a String fails only if an encoder does, which the registered types never do.
        if prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    fn pool_gauge(&self, family: &Family<PoolResourceLabels, FloatGauge>, pool: &str, resource: &str, q: &str) {
        // A quantity that does not parse is left out rather than shown as zero.
        if let Ok(v) = crate::engine::resources::parse_quantity(q) {
            let labels = PoolResourceLabels { nodepool: pool.to_string(), resource_type: resource.to_string() };
            family.get_or_create(&labels).set(v.milli() as f64 / 1000.0);
        }
    }

    fn cloud_call(&self, provider: &str, method: &str, started: Instant, errors: &[&str]) {
        let controller = controller_of(method);
        let labels = CloudLabels { controller: controller.into(), method: method.into(), provider: provider.into() };
        self.cloud_duration.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
        for e in errors {
            let labels = CloudErrorLabels {
                controller: controller.into(),
                method: method.into(),
                provider: provider.into(),
                error: (*e).into(),
            };
            self.cloud_errors.get_or_create(&labels).inc();
        }
    }
}

/// The upstream controller that makes each cloud provider call (upstream reads it from the call's context; here
/// every method has one caller).
fn controller_of(method: &str) -> &'static str {
    match method {
        "Create" => "nodeclaim.lifecycle",
        "Delete" => "nodeclaim.termination",
        "List" => "nodeclaim.garbagecollection",
        "GetInstanceTypes" => "provisioner",
        "Reboot" => "nodeclaim.reboot",
        _ => "nodeclaim.disruption",
    }
}

/// What a carried-out effect counts for.
pub enum Counted {
    Created(CreatedLabels),
    Terminated(TerminatedLabels),
    /// With the reschedulable pods on its node, for v1.15's pod counter (`None` under v1.14).
    Disrupted(DisruptedLabels, Option<u64>),
    /// A reboot's result (`succeeded`, `provider_error`, ...), with the seconds since it was requested (when this
    /// process requested it) and, for one that succeeded, since it was issued.
    Rebooted {
        result: String,
        since_requested: Option<f64>,
        since_issued: Option<f64>,
    },
}

impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Counted::Created(l) => write!(f, "created {l:?}"),
            Counted::Terminated(l) => write!(f, "terminated {l:?}"),
            Counted::Disrupted(l, pods) => write!(f, "disrupted {l:?} ({pods:?} pods)"),
            Counted::Rebooted { result, .. } => write!(f, "rebooted ({result})"),
        }
    }
}

fn label(c: &NodeClaim, key: &str) -> String {
    c.metadata.labels.as_ref().and_then(|l| l.get(key)).cloned().unwrap_or_default()
}

/// A status write that ends a reboot (`Rebooting` from True to False): its result and how long it took.
fn rebooted(name: &str, status: &crate::engine::api::nodeclaim::NodeClaimStatus, look: &Lookup<'_>) -> Option<Counted> {
    use crate::controller::reboot::{COND_REBOOTING, REASON_ISSUED, REASON_SUCCEEDED};
    let new = status.conditions.iter().find(|c| c.type_ == COND_REBOOTING && c.status == "False")?;
    let old = look.m?.nodeclaims.iter().find(|c| c.name() == name)?.condition(COND_REBOOTING)?;
    if old.status != "True" {
        return None;
    }
    let at = |c: &crate::engine::api::common::Condition| {
        c.last_transition_time.as_deref().and_then(crate::engine::lifecycle::parse_rfc3339)
    };
    let done = at(new)?;
    let result = if new.reason.as_deref() == Some(REASON_SUCCEEDED) {
        "succeeded".to_string()
    } else {
        // The failure's message starts with its result (`provider_error: ...`).
        new.message.as_deref().and_then(|m| m.split(':').next()).unwrap_or("provider_error").to_string()
    };
    let seconds = |from: Millis| (done - from).max(0) as f64 / 1000.0;
    let since_issued =
        (result == "succeeded" && old.reason.as_deref() == Some(REASON_ISSUED)).then(|| at(old).map(seconds)).flatten();
    Some(Counted::Rebooted {
        result,
        since_requested: look.controller.reboot_requested_at(name).map(seconds),
        since_issued,
    })
}

/// `WhenEmptyOrUnderutilized` → `when_empty_or_underutilized`, as upstream labels a policy.
fn snake_case(s: &str) -> String {
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}

/// Upstream's `termination_mode` from a NodeClaim's termination grace period: none → `graceful`, zero or less →
/// `forceful`, more → `eventual`.
fn termination_mode(c: &NodeClaim) -> &'static str {
    match c.spec.termination_grace_period.as_deref() {
        None => "graceful",
        Some(tgp) => match crate::engine::lifecycle::duration_ms(tgp) {
            Some(ms) if ms > 0 => "eventual",
            _ => "forceful",
        },
    }
}

/// The pods that will have to go elsewhere when the claim's node goes: active, neither DaemonSet nor mirror pods.
fn reschedulable_on(m: &ClusterObjects, claim: &NodeClaim) -> u64 {
    let Some(node) = claim.status.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty()) else {
        return 0;
    };
    m.pods
        .iter()
        .filter(|p| p.bound_node() == Some(node) && !p.is_terminal())
        .filter(|p| !p.owned_by("DaemonSet") && !p.owned_by("Node"))
        .count() as u64
}

/// Upstream's lower-case disruption reasons (`underutilized`, `empty`, `drifted`, ...).
fn reason_label(r: Reason) -> String {
    r.as_str().to_ascii_lowercase()
}

/// Upstream's `consolidation_type`: `empty`, `single`, `multi` for consolidation, empty for drift.
fn consolidation_type(m: Method) -> &'static str {
    match m {
        Method::Emptiness => "empty",
        Method::SingleNode => "single",
        Method::MultiNode | Method::Repack => "multi",
        _ => "",
    }
}

/// Upstream's `decision`: a command with replacements replaces, one without deletes.
fn decision(c: &Command) -> &'static str {
    if c.replacements.is_empty() { "delete" } else { "replace" }
}

/// What the executor's local bookkeeping needs from the controller and the cluster to label an effect: looked up
/// only for the few effects that count.
pub struct Lookup<'a> {
    pub controller: &'a Controller,
    pub m: Option<&'a ClusterObjects>,
}

/// What `e` counts for if it goes through.
pub fn counted(e: &Effect, look: &Lookup<'_>) -> Option<Counted> {
    match e {
        Effect::CreateNodeClaim { claim, purpose } => {
            let reason = match purpose {
                Purpose::Provisioning { .. } => "provisioned".to_string(),
                Purpose::Static { .. } => "static".to_string(),
                Purpose::Replacement { id } => look
                    .controller
                    .records()
                    .iter()
                    .rev()
                    .find(|r| r.id == *id)
                    .map_or_else(|| "disruption".to_string(), |r| reason_label(r.command.reason())),
            };
            let relaxed = claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(labels::ANNOTATION_MIN_VALUES_RELAXED))
                .cloned()
                .unwrap_or_else(|| "false".into());
            Some(Counted::Created(CreatedLabels {
                reason,
                nodepool: claim.nodepool().unwrap_or_default().to_string(),
                min_values_relaxed: relaxed,
            }))
        }
        Effect::PatchClaimStatus { name, status } => rebooted(name, status, look),
        Effect::FinalizeNodeClaim { claim } => Some(Counted::Terminated(TerminatedLabels {
            nodepool: claim.nodepool().unwrap_or_default().to_string(),
            capacity_type: label(claim, labels::CAPACITY_TYPE),
            zone: label(claim, labels::ZONE),
        })),
        Effect::DeleteNodeClaim { name, reason } => {
            let claim = look.m.and_then(|m| m.nodeclaims.iter().find(|c| c.name() == name));
            // A disruption command's claim says why in its DisruptionReason condition.
            let why = match reason {
                DeleteReason::Disrupted => claim
                    .and_then(|c| c.status.as_ref())
                    .and_then(|s| {
                        s.conditions.iter().find(|c| c.type_ == crate::engine::api::nodeclaim::COND_DISRUPTION_REASON)
                    })
                    .and_then(|c| c.reason.as_deref())
                    .map_or_else(|| reason.as_str().to_string(), str::to_ascii_lowercase),
                other => other.as_str().to_string(),
            };
            let nodepool = claim.and_then(|c| c.nodepool()).unwrap_or_default().to_string();
            let v115 = look.controller.karpenter_version() >= KarpenterVersion::V1_15;
            let since_1_15 = v115.then(|| {
                let consolidation = matches!(why.as_str(), "underutilized" | "empty");
                let policy = look
                    .m
                    .filter(|_| consolidation)
                    .and_then(|m| m.nodepools.iter().find(|p| p.name() == nodepool))
                    .map(|p| snake_case(&p.spec.disruption.consolidation_policy))
                    .unwrap_or_default();
                (policy, claim.map_or("graceful", |c| termination_mode(c)).to_string())
            });
            // Interruptions are the cloud's doing, not a disruption Karpenter initiates.
            let pods = (v115 && *reason != DeleteReason::Interrupted)
                .then(|| claim.and_then(|c| look.m.map(|m| reschedulable_on(m, c))).unwrap_or(0));
            Some(Counted::Disrupted(
                DisruptedLabels {
                    reason: why,
                    nodepool,
                    capacity_type: claim.map(|c| label(c, labels::CAPACITY_TYPE)).unwrap_or_default(),
                    since_1_15,
                },
                pods,
            ))
        }
        _ => None,
    }
}

/// The metrics with what recording them remembers between runs (how far the controller's records and the gate's
/// log have been read): one per acting loop.
pub struct Recorder {
    pub metrics: Arc<Metrics>,
    /// How many of the controller's disruption records were looked at.
    records_seen: usize,
    /// Records not started yet that may still be (validating, awaiting approval): counted when they start.
    undecided: Vec<usize>,
    /// How much of the gate's log was read.
    gate_seen: usize,
    /// The explanatory round the eligible-node gauges were counted from.
    outlook: Option<Arc<BTreeMap<String, Outlook>>>,
    /// The comparison the packing gauges show, by when it was solved.
    packing_at: Option<Millis>,
}

impl Recorder {
    pub fn new(metrics: Arc<Metrics>) -> Recorder {
        Recorder { metrics, records_seen: 0, undecided: Vec::new(), gate_seen: 0, outlook: None, packing_at: None }
    }

    /// Counts the effects of one batch that went through: `counted` as [`counted`] gave them before the batch,
    /// by the effect's index; `failed` the indices of those that did not.
    pub fn carried(&self, counted: Vec<(usize, Counted)>, failed: &[usize]) {
        let m = &self.metrics;
        for (i, c) in counted {
            if failed.contains(&i) {
                continue;
            }
            match c {
                Counted::Created(l) => {
                    m.nodeclaims_created.get_or_create(&l).inc();
                }
                Counted::Terminated(l) => {
                    m.nodeclaims_terminated.get_or_create(&l).inc();
                }
                Counted::Rebooted { result, since_requested, since_issued } => {
                    let l = ResultLabels { result };
                    m.reboots.get_or_create(&l).inc();
                    if let Some(s) = since_requested {
                        m.reboot_duration.get_or_create(&l).observe(s);
                    }
                    if let Some(s) = since_issued {
                        m.reboot_recovery.observe(s);
                    }
                }
                Counted::Disrupted(l, pods) => {
                    if let Some(n) = pods {
                        m.pods_disruption_initiated.get_or_create(&l).inc_by(n);
                    }
                    m.nodeclaims_disrupted.get_or_create(&l).inc();
                }
            }
        }
    }

    /// What the controller's state says after a run (or an operator's request): disruption decisions made and
    /// started, approvals and rejections, the proposals waiting, the nodes eligible for disruption, the latest
    /// packing comparison; with the run's solve times (milliseconds) and how many pods asked for capacity.
    pub fn after_run(&mut self, controller: &Controller, solves: &[f64], queue_depth: Option<usize>) {
        let m = self.metrics.clone();
        for ms in solves {
            m.scheduling_duration.get_or_create(&ControllerLabels::provisioner()).observe(ms / 1000.0);
        }
        if let Some(d) = queue_depth {
            m.queue_depth.get_or_create(&ControllerLabels::provisioner()).set(d as i64);
        }
        self.decisions(controller);
        let events = controller.gate().events();
        for (_, e) in events.iter().skip(self.gate_seen) {
            let labels = OperatorLabels { operator: m.operator.clone() };
            match e {
                GateEvent::Approved { .. } => m.approvals.get_or_create(&labels).inc(),
                GateEvent::Rejected { .. } => m.rejections.get_or_create(&labels).inc(),
                _ => 0,
            };
        }
        self.gate_seen = events.len();
        let gate = controller.gate();
        let (mut open, mut savings) = (0i64, 0.0);
        if gate.mode() != Mode::DryRun {
            for p in gate.awaiting() {
                open += 1;
                savings += p.command.savings_per_hour;
            }
        }
        m.proposals.set(open);
        m.proposal_savings.set(savings);
        if let Some(pass) = controller.last_packing()
            && self.packing_at != Some(pass.at)
        {
            self.packing_at = Some(pass.at);
            let _gauges = m.gauges.lock().unwrap_or_else(|p| p.into_inner());
            m.packing.clear();
            let c = &pass.comparison;
            let plans =
                [("upstream", Some(c.upstream.per_hour)), ("cost", Some(c.cost.per_hour)), ("lp_bound", c.bound)];
            for (plan, v) in plans {
                if let Some(v) = v {
                    m.packing.get_or_create(&PlanLabels { plan: plan.into() }).set(v);
                }
            }
        }
        if let Some(outlook) = controller.last_outlook()
            && !self.outlook.as_ref().is_some_and(|o| Arc::ptr_eq(o, outlook))
        {
            self.outlook = Some(outlook.clone());
            let mut by_reason: BTreeMap<String, i64> = [Reason::Empty, Reason::Underutilized, Reason::Drifted]
                .into_iter()
                .map(|r| (reason_label(r), 0))
                .collect();
            for o in outlook.values() {
                if let Outlook::Disruptable(cmd) = o {
                    *by_reason.entry(reason_label(cmd.reason())).or_default() += 1;
                }
            }
            let _gauges = m.gauges.lock().unwrap_or_else(|p| p.into_inner());
            m.eligible_nodes.clear();
            for (reason, n) in by_reason {
                m.eligible_nodes.get_or_create(&ReasonLabels { reason }).set(n);
            }
        }
    }

    /// Voluntary disruption decisions, counted as upstream counts them: when a command is carried out (started),
    /// not when it is proposed or validated.
    fn decisions(&mut self, controller: &Controller) {
        let records = controller.records();
        self.undecided.extend(self.records_seen..records.len());
        self.records_seen = records.len();
        let m = &self.metrics;
        self.undecided.retain(|&i| {
            let Some(r) = records.get(i) else { return false };
            match &r.state {
                CommandState::Validating | CommandState::AwaitingApproval => true,
                CommandState::InProgress | CommandState::Executed | CommandState::Failed(_) => {
                    let c = &r.command;
                    let labels = DecisionLabels {
                        decision: decision(c).into(),
                        reason: reason_label(c.reason()),
                        consolidation_type: consolidation_type(c.method).into(),
                    };
                    m.decisions.get_or_create(&labels).inc();
                    false
                }
                CommandState::DryRun | CommandState::Rejected | CommandState::Invalidated(_) => false,
            }
        });
    }
}

/// The cloud port with every call timed and its errors counted, as upstream's metrics decorator wraps its
/// cloud provider.
pub struct MeteredCloud {
    inner: Box<dyn CloudProvider>,
    metrics: Arc<Metrics>,
}

impl MeteredCloud {
    pub fn new(inner: Box<dyn CloudProvider>, metrics: Arc<Metrics>) -> MeteredCloud {
        MeteredCloud { inner, metrics }
    }
}

/// Upstream's `error` label: the well-known cloud provider errors by name, anything else empty.
fn launch_error_label(f: &LaunchFailure) -> &'static str {
    match f {
        LaunchFailure::Cloud(LaunchError::InsufficientCapacity(_)) => "InsufficientCapacityError",
        _ => "",
    }
}

impl CloudProvider for MeteredCloud {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn create<'a>(
        &'a mut self,
        claims: &'a [NodeClaim],
        now: Millis,
    ) -> BoxFuture<'a, Vec<Result<Launched, LaunchFailure>>> {
        Box::pin(async move {
            let started = Instant::now();
            let provider = self.inner.name();
            let results = self.inner.create(claims, now).await;
            let errors: Vec<&str> = results.iter().filter_map(|r| r.as_ref().err().map(launch_error_label)).collect();
            self.metrics.cloud_call(provider, "Create", started, &errors);
            results
        })
    }

    fn delete<'a>(&'a mut self, provider_id: &'a str, now: Millis) -> BoxFuture<'a, Result<Option<String>, Retry>> {
        Box::pin(async move {
            let started = Instant::now();
            let provider = self.inner.name();
            let result = self.inner.delete(provider_id, now).await;
            let errors: &[&str] = if result.is_err() { &[""] } else { &[] };
            self.metrics.cloud_call(provider, "Delete", started, errors);
            result
        })
    }

    fn reboot<'a>(&'a mut self, provider_id: &'a str, op_id: &'a str, now: Millis) -> BoxFuture<'a, Result<(), Retry>> {
        Box::pin(async move {
            let started = Instant::now();
            let provider = self.inner.name();
            let result = self.inner.reboot(provider_id, op_id, now).await;
            let errors: &[&str] = if result.is_err() { &[""] } else { &[] };
            self.metrics.cloud_call(provider, "Reboot", started, errors);
            result
        })
    }

    fn list<'a>(&'a mut self, now: Millis) -> BoxFuture<'a, Result<Option<Vec<CloudInstance>>, Retry>> {
        Box::pin(async move {
            let started = Instant::now();
            let provider = self.inner.name();
            let result = self.inner.list(now).await;
            // A cloud that does not list (KWOK) made no call.
            if !matches!(result, Ok(None)) {
                let errors: &[&str] = if result.is_err() { &[""] } else { &[] };
                self.metrics.cloud_call(provider, "List", started, errors);
            }
            result
        })
    }

    fn instance_types(&mut self, now: Millis) -> Option<InstanceTypes> {
        let started = Instant::now();
        let types = self.inner.instance_types(now);
        if types.is_some() {
            self.metrics.cloud_call(self.inner.name(), "GetInstanceTypes", started, &[]);
        }
        types
    }

    fn drifted(
        &mut self,
        claims: &mut dyn Iterator<Item = &NodeClaim>,
        now: Millis,
    ) -> Option<BTreeMap<String, String>> {
        let started = Instant::now();
        let drifted = self.inner.drifted(claims, now);
        if drifted.is_some() {
            self.metrics.cloud_call(self.inner.name(), "IsDrifted", started, &[]);
        }
        drifted
    }

    fn interruptions(&mut self, claims: &mut dyn Iterator<Item = &NodeClaim>, now: Millis) -> Vec<Notice> {
        self.inner.interruptions(claims, now)
    }

    fn expiring_claims(&mut self, claims: &mut dyn Iterator<Item = &NodeClaim>, now: Millis) -> Vec<String> {
        self.inner.expiring_claims(claims, now)
    }

    fn set_overlays(&mut self, store: Arc<OverlayStore>) {
        self.inner.set_overlays(store);
    }

    fn set_type_price_overlays(&mut self, prices: &BTreeMap<String, f64>) {
        self.inner.set_type_price_overlays(prices);
    }

    fn set_node_classes(&mut self, classes: &[crate::engine::api::EC2NodeClass]) {
        self.inner.set_node_classes(classes);
    }

    fn repair_policies(&self) -> Vec<RepairPolicy> {
        self.inner.repair_policies()
    }

    fn lists(&self) -> bool {
        self.inner.lists()
    }

    fn live_catalog(&self, now: Millis) -> Option<Catalog> {
        self.inner.live_catalog(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_without_labels_are_there_before_anything_is_recorded_and_labelled_ones_once_they_are() {
        let text = Metrics::new("alice").render(None);
        for name in [
            "karpenter_cluster_state_synced",
            "karpenter_cluster_state_node_count",
            "karpenter_pods_startup_duration_seconds",
            "karpenter_tui_proposals_awaiting_approval",
            "karpenter_voluntary_disruption_eligible_nodes",
        ] {
            assert!(text.contains(&format!("# TYPE {name} ")), "{name} has no TYPE line:\n{text}");
            assert!(text.contains(&format!("# HELP {name} ")), "{name} has no HELP line:\n{text}");
        }
        assert!(text.contains("karpenter_voluntary_disruption_eligible_nodes{reason=\"underutilized\"} 0"), "{text}");
        // A family with no series yet is left out, as Prometheus' Go client leaves it out.
        assert!(!text.contains("karpenter_nodeclaims_created_total"), "{text}");
    }

    #[test]
    fn cloud_calls_are_timed_and_their_errors_counted_by_upstreams_names() {
        let metrics = Metrics::new("");
        metrics.cloud_call("kwok", "Create", Instant::now(), &["InsufficientCapacityError", ""]);
        metrics.cloud_call("kwok", "Delete", Instant::now(), &[]);
        let text = metrics.render(None);
        let create = "controller=\"nodeclaim.lifecycle\",method=\"Create\",provider=\"kwok\"";
        assert!(text.contains(&format!("karpenter_cloudprovider_duration_seconds_count{{{create}}} 1")), "{text}");
        assert!(
            text.contains(&format!(
                "karpenter_cloudprovider_errors_total{{{create},error=\"InsufficientCapacityError\"}} 1"
            )),
            "{text}"
        );
        assert!(text.contains(&format!("karpenter_cloudprovider_errors_total{{{create},error=\"\"}} 1")), "{text}");
        assert!(text.contains("method=\"Delete\""), "{text}");
    }

    #[test]
    fn disrupted_series_carry_v1_15s_labels_only_under_1_15() {
        let metrics = Arc::new(Metrics::new(""));
        let rec = Recorder::new(metrics.clone());
        let l = |since: Option<(&str, &str)>| DisruptedLabels {
            reason: "underutilized".into(),
            nodepool: "default".into(),
            capacity_type: "spot".into(),
            since_1_15: since.map(|(p, m)| (p.to_string(), m.to_string())),
        };
        rec.carried(
            vec![
                (0, Counted::Disrupted(l(None), None)),
                (1, Counted::Disrupted(l(Some(("balanced", "eventual"))), Some(7))),
            ],
            &[],
        );
        let text = metrics.render(None);
        let base = r#"reason="underutilized",nodepool="default",capacity_type="spot""#;
        assert!(text.contains(&format!("karpenter_nodeclaims_disrupted_total{{{base}}} 1")), "{text}");
        let v115 = format!(r#"{base},consolidation_policy="balanced",termination_mode="eventual""#);
        assert!(text.contains(&format!("karpenter_nodeclaims_disrupted_total{{{v115}}} 1")), "{text}");
        assert!(text.contains(&format!("karpenter_pods_disruption_initiated_total{{{v115}}} 7")), "{text}");
        // The v1.14 disruption counts no pods.
        assert!(!text.contains(&format!("karpenter_pods_disruption_initiated_total{{{base}}}")), "{text}");
    }

    #[test]
    fn a_status_write_ending_a_reboot_counts_its_result_and_how_long_it_was_out() {
        use crate::engine::api::nodeclaim::NodeClaimStatus;
        let claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c1"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": []},
            "status": {"conditions": [{"type": "Rebooting", "status": "True", "reason": "RebootIssued",
                                       "message": "", "lastTransitionTime": "2026-12-07T10:00:00Z"}]}}))
        .unwrap();
        let m = ClusterObjects { nodeclaims: vec![Arc::new(claim)], ..Default::default() };
        let controller = Controller::new(Arc::new(crate::engine::catalog::fake::fake_catalog()), Mode::Auto, 0);
        let look = Lookup { controller: &controller, m: Some(&m) };
        let ended = |reason: &str, message: &str| {
            let status: NodeClaimStatus = serde_json::from_value(serde_json::json!({"conditions": [
                {"type": "Rebooting", "status": "False", "reason": reason, "message": message,
                 "lastTransitionTime": "2026-12-07T10:01:30Z"}]}))
            .unwrap();
            counted(&Effect::PatchClaimStatus { name: "c1".into(), status: Box::new(status) }, &look)
        };
        match ended("RebootSucceeded", "") {
            Some(Counted::Rebooted { result, since_requested, since_issued }) => {
                assert_eq!(result, "succeeded");
                assert_eq!(since_issued, Some(90.0));
                // Requested by another process: no duration from the request.
                assert_eq!(since_requested, None);
            }
            other => panic!("{other:?}"),
        }
        match ended("RebootFailed", "recovery_timeout: the node did not come back") {
            Some(Counted::Rebooted { result, since_issued, .. }) => {
                assert_eq!(result, "recovery_timeout");
                assert_eq!(since_issued, None);
            }
            other => panic!("{other:?}"),
        }
        let metrics = Arc::new(Metrics::new(""));
        let rec = Recorder::new(metrics.clone());
        rec.carried(vec![(0, ended("RebootSucceeded", "").unwrap())], &[]);
        let text = metrics.render(None);
        assert!(text.contains("karpenter_nodes_reboots_total{result=\"succeeded\"} 1"), "{text}");
        assert!(text.contains("karpenter_nodes_reboot_recovery_duration_seconds_bucket{le=\"160\"} 1"), "{text}");
        assert!(text.contains("karpenter_nodes_reboot_recovery_duration_seconds_bucket{le=\"80\"} 0"), "{text}");
    }

    #[test]
    fn labels_follow_upstreams_values() {
        assert_eq!(snake_case("WhenEmptyOrUnderutilized"), "when_empty_or_underutilized");
        assert_eq!(snake_case("Balanced"), "balanced");
        let claim = |tgp: Option<&str>| {
            let spec = crate::engine::api::NodeClaimSpec {
                termination_grace_period: tgp.map(str::to_string),
                ..Default::default()
            };
            NodeClaim::new("c", spec)
        };
        assert_eq!(termination_mode(&claim(None)), "graceful");
        assert_eq!(termination_mode(&claim(Some("0s"))), "forceful");
        assert_eq!(termination_mode(&claim(Some("48h"))), "eventual");
        assert_eq!(reason_label(Reason::Underutilized), "underutilized");
        assert_eq!(consolidation_type(Method::MultiNode), "multi");
        assert_eq!(consolidation_type(Method::Emptiness), "empty");
        assert_eq!(consolidation_type(Method::Drift), "");
        assert_eq!(controller_of("List"), "nodeclaim.garbagecollection");
    }

    #[test]
    fn a_created_claim_counts_once_and_a_failed_one_not_at_all() {
        let metrics = Arc::new(Metrics::new(""));
        let rec = Recorder::new(metrics.clone());
        let created = |pool: &str| {
            Counted::Created(CreatedLabels {
                reason: "provisioned".into(),
                nodepool: pool.into(),
                min_values_relaxed: "false".into(),
            })
        };
        rec.carried(vec![(0, created("a")), (1, created("b"))], &[1]);
        let text = metrics.render(None);
        assert!(
            text.contains(
                "karpenter_nodeclaims_created_total{reason=\"provisioned\",nodepool=\"a\",min_values_relaxed=\"false\"} 1"
            ),
            "{text}"
        );
        assert!(!text.contains("nodepool=\"b\""), "{text}");
    }
}
