//! Karpenter's controllers, written once for every backend (docs/architecture.md, "One controller"). The parts
//! are in the submodules — the disruption controller ([`disruption`]), drift checks ([`drift`]), pod-event times
//! ([`pod_events`]), provisioning triggers ([`provisioning`]), NodePool status ([`nodepool_status`]) — and are run
//! step by step by the schedule in [`tick`] (on the simulated world's virtual clock) and all at once by
//! [`Controller::plan`], the planner the live backends tick.
//!
//! [`Controller`] is level-triggered, as Kubernetes controllers are: every tick it reads the watch cache as it is,
//! decides with the engine's pure functions what should change, and returns [`Effect`]s for the executor. Nothing it
//! decides depends on having seen an earlier tick: a restarted process reads the same objects and carries on
//! (in-flight NodeClaims are simply there; drains resume; stale disrupted taints on nodes no command owns are
//! removed). What it does keep between ticks only avoids doing the same thing twice while the cache catches up
//! with its own writes (claims created but not yet seen, launches in progress) and holds the operator-facing state
//! of disruption commands (proposals, approvals, commands in flight). It reads no clock (time is an argument) and
//! does no I/O.

pub mod backoff;
pub mod buffers;
pub mod cache_host;
mod capacity_type;
mod claims;
pub mod cloud;
pub mod cluster_port;
pub mod disruption;
pub mod drift;
pub mod effect;
pub mod execute;
pub mod interruption;
pub mod nodepool_status;
mod nominations;
mod out;
pub mod overlays;
pub mod pod_events;
pub mod provisioning;
pub mod reboot;
pub mod repair;
pub mod repair_policy;
pub mod settings;
mod static_pools;
pub mod tick;
pub mod timing;

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;

use crate::engine::api::nodeclaim::{COND_DISRUPTION_REASON, COND_DRIFTED};
use crate::engine::api::{EC2NodeClass, NodeClaim};
use crate::engine::catalog::{Catalog, InstanceType};
use crate::engine::disruption::consolidation::{Outlook, explain_nodes, pass};
use crate::engine::disruption::gate::Mode;
use crate::engine::disruption::validation::validate;
use crate::engine::disruption::{Blocker, Command, Context, DisruptionOptions};
use crate::engine::labels;
use crate::engine::lifecycle::{self, DeleteReason, LifecycleSettings, set_condition};
use crate::engine::manifests::ClusterObjects;
use crate::engine::packing::Packing;
use crate::engine::provisioning::{ClusterSnapshot, Millis, PackingJob, ProvisioningResult, provision_keeping_state};
use crate::engine::scheduling::SchedulerOptions;
use crate::engine::state::{self, Nodes};
use crate::engine::termination::disrupted_taint;
use crate::engine::version::KarpenterVersion;

pub use effect::{Effect, Purpose};

/// Provider ids of KWOK's nodes (the default cloud of a live cluster).
pub const KWOK_PROVIDER_PREFIX: &str = "kwok://";

pub use disruption::{Act, Approval, CommandRecord, CommandState, Hold, Orchestrator, PassOutcome};
use drift::{DriftRead, DriftTracker};
use out::{Out, remove_taint};
use pod_events::PodEventTracker;
use provisioning::Provisioner;
pub use settings::Settings;
use timing::SECOND;
/// Claims created but not yet in the cache hold provisioning back at most this long.
const CREATE_SETTLE: Millis = 30 * SECOND;
/// A launch not yet visible in the cache is not repeated for this long.
const LAUNCH_SETTLE: Millis = 30 * SECOND;
/// An instance still listed after it was asked to terminate is asked again after this long.
pub(crate) const TERMINATE_AGAIN: Millis = 30 * SECOND;
/// The same Kubernetes Event is sent again at most this often.
const EVENT_REPEAT: Millis = 10 * 60 * SECOND;
/// Why nodes are not disrupted is published as Events this often (a full single-node pass over every node).
const EXPLAIN_EVERY: Millis = 5 * 60 * SECOND;

pub struct Controller {
    catalog: Arc<Catalog>,
    /// Upstream's feature gates: which v1.x controllers run.
    gates: settings::FeatureGates,
    /// How provisioning sizes new NodeClaims (switchable at run time: [`Controller::set_packing`]).
    packing: Packing,
    /// Whose decisions and validation it follows.
    version: KarpenterVersion,
    lifecycle: LifecycleSettings,
    /// When to solve: batching windows and the pending pods' requeue.
    provisioner: Provisioner,
    /// Claims this instance created, until the cache shows them.
    created: BTreeMap<String, Millis>,
    /// Creations sent but not answered yet (the name is only known afterwards).
    creating: usize,
    /// Claims whose launch was started, until the cache shows a provider id.
    launching: BTreeMap<String, Millis>,
    /// Instances asked to terminate, and when: the cloud is asked again only after [`TERMINATE_AGAIN`] while its
    /// list still shows them (an EC2 instance shuts down for a minute or so).
    terminating: BTreeMap<String, Millis>,
    /// When each node's drain began (re-learned after a restart: the drain starts again, which is harmless).
    drains: BTreeMap<String, Millis>,
    /// The disruption controller: passes, the approval gate, validation and the orchestration queue.
    disruption: Orchestrator,
    nominated: BTreeMap<String, Millis>,
    /// Names disruption commands when a run's host does not ([`Controller::plan`]).
    pub(crate) ids: tick::Ids,
    /// `lastPodEventTime` bookkeeping (a restart doesn't count as pod events).
    pod_events: PodEventTracker,
    /// When each claim's drift was last checked.
    drift: DriftTracker,
    /// Provider ids this cloud owns start with this; claims and nodes of another provider (an EKS cluster's EC2
    /// nodes, say) are never launched, drained, finalized or disrupted by it.
    provider_prefix: String,
    /// Interruption notices handled, oldest first (the dashboard's Interruptions pane).
    pub interruptions: Vec<InterruptionRecord>,
    /// Events sent, by (object, reason): the message and when, so the same event is not repeated every tick.
    events_sent: rustc_hash::FxHashMap<(String, String), (String, Millis)>,
    /// When `events_sent` was last pruned.
    events_pruned_at: Millis,
    /// Objects whose writes were refused, held until their retry is due.
    writes: backoff::WriteBackoff,
    /// (NodePool, instance type) the cloud could not launch a claim's requests on, until when: left out of the
    /// pool's provisioning so a launch that can never succeed is not tried again and again.
    unlaunchable: BTreeMap<(String, String), Millis>,
    /// Events decided outside a planning step (an executor's outcome), sent with the next plan.
    queued_events: Vec<Effect>,
    /// A cloud whose instance types depend on the NodeClass (AWS): the catalog of each resolved class. A NodePool
    /// whose class is not resolved yet gets no instance types until it is.
    class_catalogs: Option<BTreeMap<String, Arc<Catalog>>>,
    /// With one catalog for the whole cloud: the catalog as each EC2NodeClass sees it (AWS instance types only).
    derived: crate::engine::catalog::classes::ClassCatalogs,
    /// Provider ids of the cloud's live instances as last listed, for a cloud whose instances are not Nodes.
    live_instances: Option<BTreeSet<String>>,
    /// Per NodeClaim, why it no longer matches its node class, as the cloud judges it (fed into drift).
    class_drift: BTreeMap<String, String>,
    /// When the next `DisruptionBlocked`/`Unconsolidatable` round is due.
    next_explain: Millis,
    /// The earliest time the lifecycle controllers asked to run again at (see [`Controller::requeue_at`]).
    requeue: Option<Millis>,
    /// Registration failures the lifecycle step acted on, for the next NodePool status step (a backend that runs
    /// the steps one at a time; [`Controller::plan`] hands them over within its tick).
    registration_failures: BTreeMap<String, nodepool_status::RegistrationFailure>,
    /// The cloud's repair policies (node repair acts on them only with the `NodeRepair` gate on).
    repair_policies: Vec<cloud::RepairPolicy>,
    /// The same policies checked and compiled for v1.15's repair (`None`: the set is invalid, and logged so).
    repair_set: Option<repair_policy::Policies>,
    legacy_node_repair: bool,
    /// Reboots committed per NodeClaim (v1.15's repair escalates a third within a day to replacement).
    reboots: reboot::History,
    /// Reboots asked of the cloud and not answered yet, by NodeClaim, with when they were asked.
    reboots_sent: BTreeMap<String, Millis>,
    /// Reboots the cloud took: recorded as issued on the reboot controller's next pass.
    reboots_taken: BTreeSet<String>,
    /// Reboots the cloud refused, by NodeClaim: failed on the reboot controller's next pass.
    reboot_failures: BTreeMap<String, String>,
    /// Repairs carried out, oldest first.
    repairs: Vec<repair::RepairRecord>,
    /// The NodeOverlays' last evaluation (gate `NodeOverlay`).
    overlays: overlays::OverlayState,
    /// The CapacityBuffers as last resolved, their virtual pods and where they went (gate `CapacityBuffer`).
    buffers: buffers::BufferState,
    /// When the static pools' step wants to look again (its own slot: the lifecycle's is reset by each run).
    static_requeue: Option<Millis>,
    /// The latest provisioning solve that created NodeClaims, compared with the other packing strategy.
    last_packing: Option<provisioning::PackingPass>,
    /// The latest launching solve's comparison, until someone takes it to work it out.
    comparison: Option<provisioning::Comparison>,
    /// The latest provisioning solve, for the picture (it reads it rather than solving again).
    last_solve: Option<Arc<ProvisioningResult>>,
    /// Why each node is (not) being disrupted, from the latest explanatory round, for the picture.
    last_outlook: Option<Arc<BTreeMap<String, Outlook>>>,
    /// Cost packing: pod uid → the NodeClaim a solve placed it on, until the pod binds or the claim goes. The next
    /// solve puts each pod back there first (`SchedulerOptions::hints`), so claims packed tightly for their pods get
    /// them again instead of launching more.
    placements: Arc<BTreeMap<String, String>>,
    /// What the API server named the claims a solve called by placeholder (`None`: never created), not yet carried
    /// into `placements`: a launching pass creates thousands, and renaming each through every placement was most of
    /// a cost-packing run at 20,000 pods. Carried in one pass before the next solve; reads in between ask
    /// [`Controller::placement`], which applies them.
    renamed: BTreeMap<String, Option<String>>,
    /// Karpenter 1.15: the pods nominated to each NodeClaim this controller created and has not seen launch, told
    /// when its launch fails for want of capacity.
    nominated_pods: BTreeMap<String, Vec<ObjectReference>>,
}

/// An interruption notice as operators see it.
#[derive(Debug, Clone, PartialEq)]
pub struct InterruptionRecord {
    pub at: Millis,
    pub kind: interruption::Kind,
    pub instance_id: String,
    /// The node and NodeClaim it hit, when the instance is one of ours.
    pub node: Option<String>,
    pub nodeclaim: Option<String>,
    pub capacity_type: String,
    pub zone: String,
    /// Pods on the node when the notice came.
    pub pods: usize,
}

/// What the executor reports back.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Created {
        name: String,
        purpose: Purpose,
    },
    CreateFailed {
        purpose: Purpose,
        error: String,
    },
    Launched {
        claim: String,
    },
    /// The cloud can launch none of the claim's instance types with its requests (see
    /// [`crate::engine::lifecycle::LaunchError::NoCompatibleType`]); the claim was deleted.
    LaunchImpossible {
        claim: Box<NodeClaim>,
        message: String,
    },
    /// The cloud had no capacity for the claim; the claim was deleted.
    InsufficientCapacity {
        claim: String,
        message: String,
    },
    /// The cloud took the reboot of the claim's instance.
    Rebooted {
        claim: String,
    },
    /// The cloud could not reboot the claim's instance (repair's reboot fails, and the claim is replaced).
    RebootRefused {
        claim: String,
        message: String,
    },
}

impl Outcome {
    /// The outcome of a launch the cloud refused, when it is one the controller must remember.
    pub fn of_launch_error(claim: &NodeClaim, err: &lifecycle::LaunchError) -> Option<Outcome> {
        match err {
            lifecycle::LaunchError::NoCompatibleType(m) => {
                Some(Outcome::LaunchImpossible { claim: Box::new(claim.clone()), message: m.clone() })
            }
            lifecycle::LaunchError::InsufficientCapacity(_) => {
                Some(Outcome::InsufficientCapacity { claim: claim.name().to_string(), message: err.to_string() })
            }
            _ => None,
        }
    }
}

impl Controller {
    /// A controller with the default settings in disruption mode `mode`.
    pub fn new(catalog: Arc<Catalog>, mode: Mode, now: Millis) -> Controller {
        Controller::with_settings(catalog, Settings { mode, ..Settings::default() }, now)
    }

    pub fn with_settings(catalog: Arc<Catalog>, settings: Settings, now: Millis) -> Controller {
        // The gates the version has: v1.15's own change nothing under 1.14.
        let gates = settings.gates.for_version(settings.karpenter_version);
        Controller {
            catalog,
            gates,
            packing: settings.packing,
            version: settings.karpenter_version,
            lifecycle: LifecycleSettings::default(),
            provisioner: Provisioner::new(&settings),
            created: BTreeMap::new(),
            creating: 0,
            launching: BTreeMap::new(),
            terminating: BTreeMap::new(),
            drains: BTreeMap::new(),
            disruption: Orchestrator::new(
                settings.mode,
                DisruptionOptions {
                    spot_to_spot: gates.spot_to_spot_consolidation,
                    multi_node_cap: settings.multi_node_cap,
                    packing: settings.packing,
                    terminate_first_drift: gates.terminate_first_drift,
                    terminate_first_repair: gates.terminate_first_repair,
                    estimate_compatible_offerings: settings.karpenter_version.estimates_compatible_offerings(),
                    consolidated: false,
                },
                settings.validation_delay,
                settings.approve_repairs,
            ),
            nominated: BTreeMap::new(),
            ids: tick::Ids::default(),
            pod_events: PodEventTracker::default(),
            drift: DriftTracker::default(),
            events_sent: Default::default(),
            events_pruned_at: Millis::MIN,
            writes: backoff::WriteBackoff::default(),
            unlaunchable: BTreeMap::new(),
            queued_events: Vec::new(),
            interruptions: Vec::new(),
            provider_prefix: KWOK_PROVIDER_PREFIX.to_string(),
            class_catalogs: None,
            derived: crate::engine::catalog::classes::ClassCatalogs::default()
                .with_kubelet_expressions(gates.node_class_cel),
            live_instances: None,
            class_drift: BTreeMap::new(),
            next_explain: now + 60 * SECOND,
            requeue: None,
            registration_failures: BTreeMap::new(),
            repair_policies: Vec::new(),
            repair_set: None,
            legacy_node_repair: settings.legacy_node_repair,
            reboots: reboot::History::default(),
            reboots_sent: BTreeMap::new(),
            reboots_taken: BTreeSet::new(),
            reboot_failures: BTreeMap::new(),
            repairs: Vec::new(),
            overlays: overlays::OverlayState::default(),
            buffers: buffers::BufferState::default(),
            static_requeue: None,
            last_packing: None,
            comparison: None,
            last_solve: None,
            last_outlook: None,
            placements: Arc::default(),
            renamed: BTreeMap::new(),
            nominated_pods: BTreeMap::new(),
        }
    }

    /// The instance types to decide with from now on (a simulated cloud's, with the offerings it is out of).
    pub fn set_catalog(&mut self, catalog: Arc<Catalog>) {
        self.catalog = catalog;
    }

    /// Takes the instance types and offerings the cloud offers now (see [`cloud::CloudProvider::instance_types`]).
    /// A cloud that offers one catalog for all has it seen through each of the cluster's EC2NodeClasses
    /// (`classes`), as upstream computes instance types per class.
    pub fn sync_instance_types(&mut self, cloud: &mut dyn cloud::CloudProvider, classes: &[EC2NodeClass], now: Millis) {
        match cloud.instance_types(now) {
            Some(cloud::InstanceTypes::All(c)) => self.set_catalog(c),
            Some(cloud::InstanceTypes::PerClass(by_class)) => self.set_class_catalogs(by_class),
            None => {}
        }
        if self.class_catalogs.is_none() {
            self.derived.sync(&self.catalog, classes);
        }
    }

    /// Takes the cloud's verdicts on which claims drifted from their node class (see
    /// [`cloud::CloudProvider::drifted`]).
    pub fn sync_drift(&mut self, cloud: &mut dyn cloud::CloudProvider, m: &ClusterSnapshot<'_>, now: Millis) {
        if let Some(d) = cloud.drifted(&mut m.nodeclaims.iter(), now) {
            self.set_class_drift(d);
        }
    }

    /// The cloud's node-class drift verdicts by NodeClaim name.
    pub fn set_class_drift(&mut self, drift: BTreeMap<String, String>) {
        self.class_drift = drift;
    }

    /// The catalogs of a cloud whose instance types depend on the NodeClass (by NodeClass name).
    pub fn set_class_catalogs(&mut self, catalogs: BTreeMap<String, Arc<Catalog>>) {
        self.class_catalogs = Some(catalogs);
    }

    /// The cloud's live instances (provider ids), as last listed.
    pub fn set_live_instances(&mut self, ids: BTreeSet<String>) {
        self.live_instances = Some(ids);
    }

    /// A cloud other than KWOK: its provider ids start with `prefix` (`aws:///`).
    pub fn with_provider_prefix(mut self, prefix: &str) -> Controller {
        self.provider_prefix = prefix.to_string();
        self
    }

    /// Capacity blocks about to end (see [`cloud::CloudProvider::expiring_claims`]): their NodeClaims are deleted
    /// forcefully (the drain's deadline is now; budgets and do-not-disrupt do not hold it), as upstream's
    /// `capacityreservation.expiration` does.
    pub fn reservation_expiration(
        &mut self,
        cloud: &mut dyn cloud::CloudProvider,
        m: &ClusterSnapshot<'_>,
        now: Millis,
    ) -> Vec<Effect> {
        let expiring = cloud.expiring_claims(&mut m.nodeclaims.iter(), now);
        let mut out = Out::default();
        for name in expiring {
            let Some(claim) = m.nodeclaims.iter().find(|c| c.name() == name) else { continue };
            if claim.metadata.deletion_timestamp.is_some() || !self.ours(claim.provider_id()) {
                continue;
            }
            if let Some(e) = forceful_deadline(claim, now) {
                out.push(e);
            }
            out.push(Effect::DeleteNodeClaim { name, reason: DeleteReason::CapacityBlockExpiring });
        }
        out.finish(m)
    }

    /// An interruption notice from the cloud: the instances' NodeClaims are deleted (their finalizer cordons and
    /// drains the nodes) unless the notice is informational, and every notice is recorded and published as an
    /// Event. Instances that are not ours are ignored, as upstream does.
    pub fn interruption(&mut self, m: &ClusterSnapshot<'_>, msg: &interruption::Message, now: Millis) -> Vec<Effect> {
        let mut out = Out::default();
        let nodes = if msg.instance_ids.is_empty() { Nodes::default() } else { Nodes::of(m).with_pods(m.pods) };
        for id in &msg.instance_ids {
            let suffix = format!("/{id}");
            let Some(claim) = m
                .nodeclaims
                .iter()
                .find(|c| c.provider_id().is_some_and(|p| p.ends_with(&suffix)) && self.ours(c.provider_id()))
            else {
                continue;
            };
            // A polled notice repeats every minute while the instance stays listed; once its claim is going,
            // there is nothing new to record: only a failed status check still makes the drain forceful, if a
            // drain already under way (held by a PDB, say) isn't yet.
            if msg.kind.polled() && claim.metadata.deletion_timestamp.is_some() {
                if msg.kind.forceful()
                    && let Some(e) = forceful_deadline(claim, now)
                {
                    out.push(e);
                }
                continue;
            }
            let node = nodes.node_of(claim.name());
            let node_name = node.and_then(|n| n.metadata.name.clone());
            let labels_of = node
                .and_then(|n| n.metadata.labels.clone())
                .or_else(|| claim.metadata.labels.clone())
                .unwrap_or_default();
            let pods = node_name.as_deref().map_or(0, |n| nodes.pods_on(n).len());
            self.interruptions.push(InterruptionRecord {
                at: now,
                kind: msg.kind,
                instance_id: id.clone(),
                node: node_name.clone(),
                nodeclaim: Some(claim.name().to_string()),
                capacity_type: labels_of.get(labels::CAPACITY_TYPE).cloned().unwrap_or_default(),
                zone: labels_of.get(labels::ZONE).cloned().unwrap_or_default(),
                pods,
            });
            let regarding = ObjectReference {
                kind: Some(if node_name.is_some() { "Node" } else { "NodeClaim" }.into()),
                api_version: Some(if node_name.is_some() { "v1" } else { "karpenter.sh/v1" }.into()),
                name: Some(node_name.clone().unwrap_or_else(|| claim.name().to_string())),
                ..Default::default()
            };
            let message = format!("{} for instance {id} (event {})", msg.kind.reason(), msg.id);
            let warning = msg.kind.deletes_nodeclaim();
            self.event(regarding, warning, msg.kind.reason(), message, now, &mut out);
            // Forceful: the drain's deadline is now (one already past is kept), so pods go at once.
            if msg.kind.forceful()
                && let Some(e) = forceful_deadline(claim, now)
            {
                out.push(e);
            }
            if msg.kind.deletes_nodeclaim() && claim.metadata.deletion_timestamp.is_none() {
                out.push(Effect::DeleteNodeClaim { name: claim.name().to_string(), reason: DeleteReason::Interrupted });
            }
        }
        out.finish(m)
    }

    pub fn mode(&self) -> Mode {
        self.disruption.mode()
    }

    /// The feature gates it runs with.
    pub fn gates(&self) -> settings::FeatureGates {
        self.gates
    }

    /// The packing strategy its provisioning solves use.
    pub fn packing(&self) -> Packing {
        self.packing
    }

    /// The Karpenter version whose decisions and validation it follows.
    pub fn karpenter_version(&self) -> KarpenterVersion {
        self.version
    }

    /// The scheduler options of its provisioning solves: the defaults, with its packing strategy.
    pub fn scheduler_options(&self) -> SchedulerOptions {
        SchedulerOptions { packing: self.packing, hints: self.placements.clone(), ..SchedulerOptions::default() }
    }

    /// The latest provisioning solve that created NodeClaims: what each packing strategy would have launched for
    /// its pods, and the LP lower bound.
    pub fn last_packing(&self) -> Option<&provisioning::PackingPass> {
        self.last_packing.as_ref()
    }

    /// The latest provisioning solve: why the pods it saw were left pending, and what it launched for the rest.
    pub fn last_solve(&self) -> Option<&Arc<ProvisioningResult>> {
        self.last_solve.as_ref()
    }

    /// Why each node was (not) being disrupted at the latest explanatory round (`None` before the first).
    pub fn last_outlook(&self) -> Option<&Arc<BTreeMap<String, Outlook>>> {
        self.last_outlook.as_ref()
    }

    /// When this process committed the latest reboot of `claim` (v1.15's repair), if it did.
    pub fn reboot_requested_at(&self, claim: &str) -> Option<Millis> {
        self.reboots.last(claim)
    }

    /// Every disruption command so far, oldest first, with where it is.
    pub fn records(&self) -> &[CommandRecord] {
        &self.disruption.records
    }

    /// The disruption controller's state (records, proposals, commands in flight).
    pub fn orchestrator(&self) -> &Orchestrator {
        &self.disruption
    }

    /// The approval gate (open proposals, rejections, the operator log).
    pub fn gate(&self) -> &crate::engine::disruption::gate::Gate {
        self.disruption.gate()
    }

    /// Instance types per NodePool as decisions see them: the cloud's, with the NodeOverlays applied when the
    /// gate is on.
    fn catalogs(&self, m: &ClusterSnapshot<'_>) -> BTreeMap<String, Vec<Arc<InstanceType>>> {
        let mut raw = self.raw_catalogs(m.nodepools);
        if self.overlays_on() {
            for (pool, types) in raw.iter_mut() {
                if let Some(overlaid) = self.overlaid_types(pool) {
                    *types = overlaid;
                }
            }
        }
        raw
    }

    /// `catalogs` without the instance types the cloud could not launch a pool's claims on lately (see
    /// [`Controller::launch_impossible`]).
    fn launchable(
        &self,
        mut catalogs: BTreeMap<String, Vec<Arc<InstanceType>>>,
        now: Millis,
    ) -> BTreeMap<String, Vec<Arc<InstanceType>>> {
        if self.unlaunchable.is_empty() {
            return catalogs;
        }
        for (pool, types) in catalogs.iter_mut() {
            types.retain(|t| self.unlaunchable.get(&(pool.clone(), t.name.clone())).is_none_or(|until| *until <= now));
        }
        catalogs
    }

    /// The cloud could launch none of `claim`'s instance types with its requests: they stay out of its NodePool's
    /// provisioning for [`timing::UNLAUNCHABLE_FOR`] (or until the overlays are evaluated again), and a Warning
    /// Event on the claim says why, so the pods wait with a reason instead of a claim created and deleted every few
    /// seconds.
    fn launch_impossible(&mut self, claim: &NodeClaim, message: &str, now: Millis) {
        let Some(pool) = claim.nodepool() else { return };
        let types = lifecycle::claim_instance_types(claim);
        let until = now.saturating_add(timing::UNLAUNCHABLE_FOR);
        for t in &types {
            self.unlaunchable.insert((pool.to_string(), t.clone()), until);
        }
        let shown: Vec<&str> = types.iter().take(5).map(String::as_str).collect();
        let more = types.len().saturating_sub(shown.len());
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        let text = format!(
            "Launch impossible, NodeClaim deleted: {message}. NodePool {pool} launches no more claims on {}{more} \
             for {} minutes, or until its NodeOverlays change",
            shown.join(", "),
            timing::UNLAUNCHABLE_FOR / timing::MINUTE
        );
        tracing::warn!(nodeclaim = claim.name(), nodepool = pool, "{text}");
        let regarding = ObjectReference {
            kind: Some("NodeClaim".into()),
            api_version: Some("karpenter.sh/v1".into()),
            name: Some(claim.name().to_string()),
            uid: claim.metadata.uid.clone(),
            ..Default::default()
        };
        let mut out = Out::default();
        self.event(regarding, true, "LaunchImpossible", text, now, &mut out);
        self.queued_events.append(&mut out.effects);
    }

    /// Karpenter 1.15: remembers the pods the latest solve put on the new claim `placeholder`, now created as `name`.
    fn note_nominated(&mut self, name: &str, placeholder: &str) {
        if !self.version.tells_pods_of_failed_launches() {
            return;
        }
        let Some(solve) = &self.last_solve else { return };
        let Some(decided) = solve.results.new_claims.iter().find(|c| c.hostname == placeholder) else { return };
        let pods: Vec<ObjectReference> = decided
            .pods
            .iter()
            .map(|&i| &solve.pods[i])
            .filter(|p| p.buffer.is_none())
            .map(|p| pod_ref(&p.namespace, &p.name, &p.uid))
            .collect();
        if !pods.is_empty() {
            self.nominated_pods.insert(name.to_string(), pods);
        }
    }

    /// Karpenter 1.15: a Warning on every pod nominated to `claim`, whose launch failed for want of capacity.
    fn tell_nominated_pods(&mut self, claim: &str, error: &str, now: Millis) {
        let Some(pods) = self.nominated_pods.remove(claim) else { return };
        let message = format!("NodeClaim {claim}, nominated for this pod failed to launch: {error}");
        let mut out = Out::default();
        for pod in pods {
            self.event(pod, true, "InsufficientCapacityError", message.clone(), now, &mut out);
        }
        self.queued_events.append(&mut out.effects);
    }

    /// Instance types per NodePool as the cloud offers them (no overlays).
    fn raw_catalogs(&self, pools: &[crate::engine::api::NodePool]) -> BTreeMap<String, Vec<Arc<InstanceType>>> {
        pools
            .iter()
            .map(|p| {
                let types = match &self.class_catalogs {
                    None => self.derived.types_for(&self.catalog, p),
                    // Only pools of this cloud's class kind: a KWOKNodeClass that shares a name with an
                    // EC2NodeClass gets nothing to launch here.
                    Some(by_class) => {
                        let r = &p.spec.template.spec.node_class_ref;
                        let ours = self.manages(p);
                        by_class.get(&r.name).filter(|_| ours).map(|c| c.instance_types.clone()).unwrap_or_default()
                    }
                };
                (p.name().to_string(), types)
            })
            .collect()
    }

    /// Whether a NodePool is this cloud's, as upstream's `IsManaged`: with AWS, its class is an EC2NodeClass (an
    /// empty group or kind counts as one); the KWOK cloud takes every pool.
    fn manages(&self, pool: &crate::engine::api::NodePool) -> bool {
        let r = &pool.spec.template.spec.node_class_ref;
        self.class_catalogs.is_none()
            || ((r.kind.is_empty() || r.kind == "EC2NodeClass")
                && (r.group.is_empty() || r.group == "karpenter.k8s.aws"))
    }

    /// Whether a provider id (absent: not launched yet) belongs to this controller's cloud.
    fn ours(&self, provider_id: Option<&str>) -> bool {
        provider_id.is_none_or(|p| p.is_empty() || p.starts_with(&self.provider_prefix))
    }

    /// Nodes busy for disruption: those in commands, and those of another cloud.
    fn busy_in(&self, m: &ClusterSnapshot<'_>) -> BTreeSet<String> {
        let mut busy = self.busy();
        for n in &m.nodes {
            if !self.ours(state::node_provider_id(n)) {
                busy.extend(n.metadata.name.clone());
            }
        }
        busy
    }

    /// Nodes a command is working on or waiting for approval on.
    pub fn busy(&self) -> BTreeSet<String> {
        self.disruption.busy()
    }

    /// Drops what it kept to avoid doing things twice once the cache shows them done (or they timed out).
    fn forget_settled(&mut self, s: &ClusterSnapshot<'_>, now: Millis) {
        // Each claim's name, and whether its launch shows (a provider id).
        let claims: BTreeMap<&str, bool> = s.nodeclaims.iter().map(|c| (c.name(), c.provider_id().is_some())).collect();
        self.created.retain(|n, at| !claims.contains_key(n.as_str()) && now - *at < CREATE_SETTLE);
        self.launching.retain(|n, at| claims.get(n.as_str()) == Some(&false) && now - *at < LAUNCH_SETTLE);
        self.nominated.retain(|_, until| *until > now);
        let created = &self.created;
        self.nominated_pods.retain(|n, _| claims.get(n.as_str()) == Some(&false) || created.contains_key(n));
        let deleting: BTreeSet<&str> = s
            .nodeclaims
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_some())
            .filter_map(|c| c.provider_id())
            .collect();
        self.terminating.retain(|pid, _| deleting.contains(pid.as_str()));
    }

    /// What one run of the controller's schedule ([`tick`]) over this read of the cluster would write, gathered
    /// one write per object and not carried out: the cloud is only read ([`cloud::ReadOnlyCloud`]), so launches
    /// and instance lists are left to a run with a cloud.
    pub fn plan(&mut self, m: &ClusterObjects, now: Millis) -> Vec<Effect> {
        cache_host::run_once(self, &mut cloud::ReadOnlyCloud, m, now)
    }

    /// Drives started commands (see [`Orchestrator::orchestrate`]) on their own, for the step-by-step schedule
    /// ([`tick`]: each step's effects are carried out before the next step reads the cluster). When a waiting command is looked at again is [`Controller::next_wake`]'s.
    pub fn orchestrate_commands(&mut self, m: &ClusterSnapshot<'_>, now: Millis) -> Vec<Effect> {
        let mut out = Out::default();
        self.orchestrate(m, now, &mut out);
        out.finish(m)
    }

    /// Checks a command whose validation delay is over and starts it or lets it go (see
    /// [`Controller::orchestrate_commands`]).
    pub fn finish_validation(&mut self, m: &ClusterSnapshot<'_>, now: Millis) -> Vec<Effect> {
        let mut out = Out::default();
        self.validation(m, now, &mut out);
        out.finish(m)
    }

    /// Whether a disruption pass is due now over a cluster whose quiet key is `quiet_key` (see [`PassKeys`]).
    pub fn disruption_due(&mut self, now: Millis, quiet_key: u64) -> bool {
        self.disruption.pass_due(now, quiet_key)
    }

    /// A disruption pass if one is due (see [`Controller::orchestrate_commands`]): its effects, and how many
    /// candidates it looked at when it ran. `new_id` names new commands.
    pub fn disruption_pass(
        &mut self,
        m: &ClusterSnapshot<'_>,
        now: Millis,
        keys: PassKeys,
        new_id: &mut dyn FnMut() -> String,
    ) -> (Vec<Effect>, Option<usize>) {
        let mut out = Out::default();
        let ran = self.disruption(m, now, keys, new_id, &mut out);
        (out.finish(m), ran)
    }

    /// Pending pods as the pod watch sees them (upstream's provisioner trigger): a pod not seen for a while opens
    /// or extends the batch window. Says whether one did (the caller looks again after `POD_REQUEUE`).
    pub fn observe_pending<'a>(&mut self, uids: impl Iterator<Item = &'a str> + Clone, now: Millis) -> bool {
        // Virtual pods ask for capacity like pending pods (upstream triggers the provisioner per buffer).
        if self.buffers.pods.is_empty() {
            return self.provisioner.observe(uids, now);
        }
        let buffered = Arc::clone(&self.buffers.pods);
        let mut all: Vec<&str> = uids.collect();
        all.extend(buffered.iter().filter_map(|p| p.metadata.uid.as_deref()));
        self.provisioner.observe(all.iter().copied(), now)
    }

    /// Whether the batch window is over (a solve would run if there is something to place).
    pub fn provisioning_due(&self, now: Millis) -> bool {
        self.provisioner.due(now)
    }

    /// When the open batch window closes, if one is open.
    pub fn provisioning_deadline(&self) -> Option<Millis> {
        self.provisioner.deadline()
    }

    /// A provisioning solve if one is due (see [`Controller::orchestrate_commands`]): its effects (NodeClaims to
    /// create, `Nominated` and `FailedScheduling` events) and its full answer, for a backend that records it.
    pub fn provisioning_pass(
        &mut self,
        m: &ClusterSnapshot<'_>,
        now: Millis,
    ) -> (Vec<Effect>, Option<Arc<ProvisioningResult>>) {
        let mut out = Out::default();
        let result = self.solve(m, now, &mut out);
        (out.finish(m), result)
    }

    /// `status.lastPodEventTime` on its own (see [`Controller::orchestrate_commands`]).
    pub fn pod_event_times(&mut self, m: &ClusterSnapshot<'_>, now: Millis) -> Vec<Effect> {
        let mut out = Out::default();
        self.pod_events(m, now, &mut out);
        out.finish(m)
    }

    /// Drift checks on their own (see [`Controller::orchestrate_commands`]), and when a claim is next due for its
    /// periodic recheck.
    pub fn drift_check(&mut self, m: &ClusterSnapshot<'_>, now: Millis) -> (Vec<Effect>, Option<Millis>) {
        let mut out = Out::default();
        self.drift(m, now, &mut out);
        (out.finish(m), self.drift.next_due(now))
    }

    /// When this controller next needs to run if nothing in the cluster changes (a change is always a reason to
    /// run): a batch window closing, a pending pod's requeue, a lifecycle requeue (launch, registration and drain
    /// timeouts, expiry), a disruption pass, validation or quiet period ending, a command waiting for its
    /// replacements, a drift recheck, a nomination or a settle period running out, the next explanatory Events.
    /// Only moments after `now`: what is due at `now` was done by the run that just ended. The simulated world
    /// jumps its clock to it; the live loop sleeps until it.
    pub fn next_wake(&self, now: Millis) -> Option<Millis> {
        let settles = self.created.values().map(|t| t + CREATE_SETTLE);
        let launches = self.launching.values().map(|t| t + LAUNCH_SETTLE);
        let terminations = self.terminating.values().map(|t| t + TERMINATE_AGAIN);
        let nominations = self.nominated.values().copied();
        let orchestration = (!self.disruption.in_flight().is_empty()).then_some(now + SECOND);
        let explain = self.disruption.in_flight().is_empty().then_some(self.next_explain);
        [
            self.provisioner.deadline(),
            self.provisioner.next_requeue(),
            self.requeue,
            self.static_requeue,
            orchestration,
            explain,
            self.drift.next_due(now),
            self.writes.next_retry(),
        ]
        .into_iter()
        .flatten()
        .chain(self.disruption.pass_wakes())
        .chain(settles)
        .chain(launches)
        .chain(terminations)
        .chain(nominations)
        .filter(|t| *t > now)
        .min()
    }

    /// For a cluster known to have had no pods before the first look (a simulation starting from its initial
    /// objects): the pods found then count as pod events.
    pub fn starting_empty(mut self) -> Controller {
        self.pod_events = PodEventTracker::from_empty();
        self
    }

    /// Nodes nominated for pending pods, until when.
    pub fn nominated(&self) -> &BTreeMap<String, Millis> {
        &self.nominated
    }

    /// Nodes the provisioner placed pending pods on are left alone by disruption until `until`.
    pub fn nominate(&mut self, node: String, until: Millis) {
        self.nominated.insert(node, until);
    }

    /// The explanatory Events on their own (see [`Controller::orchestrate_commands`]): why nodes are not being
    /// disrupted (`DisruptionBlocked`, `Unconsolidatable`) and pods whose `do-not-disrupt` can't be read, every
    /// few minutes, as upstream publishes them.
    pub fn explanatory_events(&mut self, m: &ClusterSnapshot<'_>, now: Millis) -> Vec<Effect> {
        let mut out = Out::default();
        self.blocked_events(m, now, &mut out);
        out.finish(m)
    }

    /// When the next round of explanatory Events is due (while no command is in flight).
    pub fn explanatory_events_due(&self) -> Option<Millis> {
        self.disruption.in_flight().is_empty().then_some(self.next_explain)
    }

    /// NodePool status on its own (see [`Controller::orchestrate_commands`]): each NodePool's status as upstream
    /// keeps it, written when it changes. `classes` are the cluster's EC2NodeClasses (read only by a cloud with
    /// node classes).
    pub fn nodepool_status(&mut self, m: &ClusterSnapshot<'_>, classes: &[EC2NodeClass], now: Millis) -> Vec<Effect> {
        let mut out = Out::default();
        out.registration_failures = std::mem::take(&mut self.registration_failures);
        self.nodepool_statuses(m, classes, now, &mut out);
        out.finish(m)
    }

    /// Each NodePool's status as upstream keeps it (see [`nodepool_status`]), written when it changes.
    fn nodepool_statuses(&self, m: &ClusterSnapshot<'_>, classes: &[EC2NodeClass], now: Millis, out: &mut Out) {
        let nodes_by_id = nodepool_status::nodes_by_id(m);
        for pool in m.nodepools.iter().filter(|p| p.metadata.deletion_timestamp.is_none() && self.manages(p)) {
            let class = match &self.class_catalogs {
                None => nodepool_status::ClassReadiness::NotNeeded,
                Some(_) => nodepool_status::ClassReadiness::Class(
                    classes
                        .iter()
                        .find(|c| {
                            c.metadata.name.as_deref() == Some(pool.spec.template.spec.node_class_ref.name.as_str())
                        })
                        .map(|c| {
                            c.status
                                .as_ref()
                                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                                .cloned()
                                .unwrap_or(crate::engine::api::Condition {
                                    type_: "Ready".into(),
                                    status: lifecycle::STATUS_UNKNOWN.into(),
                                    reason: Some("AwaitingReconciliation".into()),
                                    message: Some("NodeClass is awaiting reconciliation".into()),
                                    last_transition_time: None,
                                    observed_generation: None,
                                })
                        }),
                ),
            };
            let failure = out.registration_failures.get(pool.name());
            let status =
                nodepool_status::desired(pool, m, &class, &self.catalog.label_policy, failure, &nodes_by_id, now);
            if pool.status.as_ref() != Some(&status) {
                out.push(Effect::PatchNodePoolStatus { name: pool.name().to_string(), status: Box::new(status) });
            }
        }
    }

    /// `DisruptionBlocked` (something protects the node: do-not-disrupt, a PDB, a budget, ...) and
    /// `Unconsolidatable` (consolidation found nothing better) Events on our nodes and their NodeClaims, as upstream
    /// publishes them, every few minutes and without repeats. Waits that end by themselves (consolidateAfter,
    /// nominations, commands in flight) are not events.
    fn blocked_events(&mut self, m: &ClusterSnapshot<'_>, now: Millis, out: &mut Out) {
        if now < self.next_explain || !self.disruption.in_flight().is_empty() {
            return;
        }
        self.next_explain = now + EXPLAIN_EVERY;
        self.invalid_do_not_disrupt_events(m, now, out);
        let nodes = Nodes::of(m);
        let outlooks = Arc::new(self.explain_nodes(m, now));
        self.last_outlook = Some(outlooks.clone());
        for (node, outlook) in outlooks.iter() {
            let Outlook::Blocked(blockers) = outlook else { continue };
            let Some(b) = blockers.first() else { continue };
            let reason = match b {
                Blocker::NodeDoNotDisrupt
                | Blocker::PodDoNotDisrupt { .. }
                | Blocker::PdbBlocks { .. }
                | Blocker::MultiplePdbs { .. }
                | Blocker::NotInitialized
                | Blocker::NodePoolMissing { .. }
                | Blocker::Budget { .. } => "DisruptionBlocked",
                Blocker::NoCheaperReplacement { .. }
                | Blocker::SpotToSpotDisabled
                | Blocker::SpotToSpotTooFewOptions { .. }
                | Blocker::PodsWouldNotFit { .. }
                | Blocker::WouldCreate { .. }
                | Blocker::MinValues { .. }
                | Blocker::UninitializedDestination { .. } => "Unconsolidatable",
                _ => continue,
            };
            let Some(joined) = nodes.by_node(node) else { continue };
            let Some(n) = joined.node else { continue };
            if !self.ours(state::node_provider_id(n)) {
                continue;
            }
            let message =
                if reason == "DisruptionBlocked" { format!("Cannot disrupt Node: {b}") } else { b.to_string() };
            let node_ref = ObjectReference {
                kind: Some("Node".into()),
                api_version: Some("v1".into()),
                name: Some(node.clone()),
                uid: n.metadata.uid.clone(),
                ..Default::default()
            };
            self.event(node_ref, false, reason, message.clone(), now, out);
            if let Some(c) = joined.nodeclaim {
                let claim_ref = ObjectReference {
                    kind: Some("NodeClaim".into()),
                    api_version: Some("karpenter.sh/v1".into()),
                    name: Some(c.name().to_string()),
                    uid: c.metadata.uid.clone(),
                    ..Default::default()
                };
                let message = message.replacen("Cannot disrupt Node", "Cannot disrupt NodeClaim", 1);
                self.event(claim_ref, false, reason, message, now, out);
            }
        }
    }

    /// A pod's `karpenter.sh/do-not-disrupt` that is neither `true` nor a duration is ignored (upstream v1.12+);
    /// its owner is told with a warning Event on the pod, since they meant something by it.
    fn invalid_do_not_disrupt_events(&mut self, m: &ClusterSnapshot<'_>, now: Millis, out: &mut Out) {
        let ours: BTreeSet<&str> = m
            .nodes
            .iter()
            .filter(|n| self.ours(state::node_provider_id(n)))
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        for p in m.pods.iter().filter(|p| p.node_name().is_some_and(|n| ours.contains(n))) {
            let Some(v) = p.metadata.annotations.as_ref().and_then(|a| a.get(labels::ANNOTATION_DO_NOT_DISRUPT)) else {
                continue;
            };
            if !crate::engine::termination::do_not_disrupt_malformed(v) {
                continue;
            }
            let message = format!(
                "Ignoring karpenter.sh/do-not-disrupt={v:?}: the value must be \"true\" or a duration such as \"30m\""
            );
            let ns = p.metadata.namespace.as_deref().unwrap_or("default");
            let name = p.metadata.name.as_deref().unwrap_or_default();
            let uid = p.metadata.uid.as_deref().unwrap_or_default();
            self.event(pod_ref(ns, name, uid), true, "InvalidDoNotDisrupt", message, now, out);
        }
    }

    /// A provisioning solve when its batch window is over: the pending pods and the pods of nodes being deleted
    /// (the solve finds no work when there are none). Claims this instance created and the cache doesn't show yet
    /// would be made again: the window stays open until they show.
    fn solve(&mut self, m: &ClusterSnapshot<'_>, now: Millis, out: &mut Out) -> Option<Arc<ProvisioningResult>> {
        // Launch outcomes are provisioning's: their events go out with its next step.
        out.effects.append(&mut self.queued_events);
        if !self.provisioner.due(now) {
            return None;
        }
        self.forget_settled(m, now);
        if !self.created.is_empty() || self.creating > 0 {
            return None;
        }
        self.provisioner.solved();
        let catalogs = self.launchable(self.catalogs(m), now);
        self.forget_placements(m);
        let pods = self.buffers.pods.clone();
        let m = &ClusterSnapshot { virtual_pods: &pods, ..*m };
        let (result, state) =
            provision_keeping_state(m, &catalogs, &self.catalog.label_policy, self.scheduler_options());
        let mut statuses = Vec::new();
        self.buffer_outcome(&result, now, &mut statuses);
        for e in statuses {
            out.push(e);
        }
        let node_names: std::collections::HashSet<&str> =
            m.nodes.iter().filter_map(|n| n.metadata.name.as_deref()).collect();
        for p in &result.results.existing {
            // Virtual pods never nominate a node, nor get events (they are not pods).
            if p.pods.iter().all(|&i| result.pods[i].buffer.is_some()) {
                continue;
            }
            self.nominated.insert(p.node.clone(), self.provisioner.nominated_until(now));
            // An in-flight claim has no Node yet: upstream names the claim then.
            let is_node = node_names.contains(p.node.as_str());
            let target = if is_node { format!("node/{}", p.node) } else { format!("nodeclaim/{}", p.node) };
            for &i in p.pods.iter().filter(|&&i| result.pods[i].buffer.is_none()) {
                let pod = &result.pods[i];
                // Nominated to a claim still launching: told too if its launch fails (1.15).
                if let Some(known) = self.nominated_pods.get_mut(&p.node)
                    && !known.iter().any(|r| r.uid.as_deref() == Some(pod.uid.as_str()))
                {
                    known.push(pod_ref(&pod.namespace, &pod.name, &pod.uid));
                }
                let message = format!("Pod should schedule on: {target}");
                self.event(pod_ref(&pod.namespace, &pod.name, &pod.uid), false, "Nominated", message, now, out);
            }
        }
        for f in result.results.failures.iter().filter(|f| result.pods[f.pod].buffer.is_none()) {
            let pod = &result.pods[f.pod];
            let message = format!("Failed to schedule pod, {}", f.summary());
            self.event(pod_ref(&pod.namespace, &pod.name, &pod.uid), true, "FailedScheduling", message, now, out);
        }
        let claims = result.nodeclaims(m.nodepools);
        self.remember_placements(&result);
        for (mut claim, decided) in claims.into_iter().zip(&result.results.new_claims) {
            self.annotate_overlays(&mut claim);
            self.creating += 1;
            out.push(Effect::CreateNodeClaim {
                claim: Box::new(claim),
                purpose: Purpose::Provisioning { pods: decided.pods.len(), placeholder: decided.hostname.clone() },
            });
        }
        let result = Arc::new(result);
        // What the other strategy would launch for the same pods (this solve's plan is reused): worked out by
        // whoever carries out the claims, after they are out (`take_comparison`).
        self.comparison = (!result.results.new_claims.is_empty()).then(|| provisioning::Comparison {
            at: now,
            pods: result.results.new_claims.iter().map(|c| c.pods.len()).sum(),
            job: PackingJob::new(
                state,
                m.nodepools,
                &catalogs,
                &self.catalog.label_policy,
                self.packing,
                result.clone(),
            ),
        });
        self.last_solve = Some(result.clone());
        Some(result)
    }

    /// The packing comparison of the latest launching solve, if it is still to be worked out: the caller runs it
    /// once the solve's NodeClaims are out, off the path pods wait on, and hands the answer to
    /// [`Controller::compared`]. A newer solve replaces one not taken.
    pub fn take_comparison(&mut self) -> Option<provisioning::Comparison> {
        self.comparison.take()
    }

    /// A comparison worked out (see [`Controller::take_comparison`]): shown unless a newer one already is.
    pub fn compared(&mut self, pass: provisioning::PackingPass) {
        if self.last_packing.is_none_or(|p| p.at <= pass.at) {
            self.last_packing = Some(pass);
        }
    }

    /// Cost packing: where this solve put each pod that is still to bind (an in-flight or new NodeClaim).
    fn remember_placements(&mut self, result: &ProvisioningResult) {
        if self.packing != Packing::Cost {
            return;
        }
        self.carry_renames();
        let mut map = (*self.placements).clone();
        for p in &result.results.existing {
            for &i in &p.pods {
                map.insert(result.pods[i].uid.clone(), p.node.clone());
            }
        }
        // New claims are known by the solve's placeholder until the API server names them (`outcome`).
        for decided in &result.results.new_claims {
            for &i in &decided.pods {
                map.insert(result.pods[i].uid.clone(), decided.hostname.clone());
            }
        }
        self.placements = Arc::new(map);
    }

    /// A claim the solve called `placeholder` was created as `name` (or not at all). Noted, and carried into the
    /// placements before the next solve ([`Controller::carry_renames`]).
    fn rename_placements(&mut self, placeholder: &str, name: Option<&str>) {
        if self.placements.is_empty() {
            return;
        }
        // The first answer for a placeholder stands, as when each was carried at once: a later one finds no
        // placement left under the placeholder.
        self.renamed.entry(placeholder.to_string()).or_insert_with(|| name.map(str::to_string));
    }

    /// Where the latest solve placed the pod with `uid`, with the renames not carried yet applied.
    fn placement(&self, uid: &str) -> Option<&str> {
        let at = self.placements.get(uid)?;
        match self.renamed.get(at) {
            Some(name) => name.as_deref(),
            None => Some(at),
        }
    }

    /// The noted renames, carried into the placements in one pass: pods placed on a claim that was never created
    /// are forgotten, the others follow their claim's name. Placeholders and API-server names never coincide
    /// (`hostname-placeholder-NNNN` against a NodePool name and a five-character suffix), so the order of the
    /// renames does not matter.
    fn carry_renames(&mut self) {
        if self.renamed.is_empty() {
            return;
        }
        let renamed = std::mem::take(&mut self.renamed);
        if !self.placements.values().any(|v| renamed.contains_key(v)) {
            return;
        }
        let map = Arc::make_mut(&mut self.placements);
        map.retain(|_, v| !matches!(renamed.get(v.as_str()), Some(None)));
        for v in map.values_mut() {
            if let Some(Some(name)) = renamed.get(v.as_str()) {
                v.clone_from(name);
            }
        }
    }

    /// Drops placements whose pod bound or went, or whose claim went; all of them under upstream packing.
    fn forget_placements(&mut self, m: &ClusterSnapshot<'_>) {
        self.carry_renames();
        if self.placements.is_empty() {
            return;
        }
        if self.packing != Packing::Cost {
            self.placements = Arc::default();
            return;
        }
        // A claim whose Node registered is that Node in the next solve: follow it there.
        let nodes: BTreeSet<&str> = m.nodes.iter().filter_map(|n| n.metadata.name.as_deref()).collect();
        let mut renamed: BTreeMap<&str, &str> = BTreeMap::new();
        for c in m.nodeclaims.iter() {
            let node = c.status.as_ref().and_then(|st| st.node_name.as_deref()).filter(|n| nodes.contains(n));
            renamed.insert(c.name(), node.unwrap_or(c.name()));
        }
        let targets: BTreeSet<&str> = renamed.values().copied().collect();
        let waiting: BTreeSet<&str> =
            m.pods.iter().filter(|p| p.bound_node().is_none()).filter_map(|p| p.metadata.uid.as_deref()).collect();
        let kept: BTreeMap<String, String> = self
            .placements
            .iter()
            .filter(|(pod, _)| waiting.contains(pod.as_str()))
            .filter_map(|(pod, at)| {
                let now = renamed
                    .get(at.as_str())
                    .copied()
                    .or_else(|| targets.contains(at.as_str()).then_some(at.as_str()))?;
                Some((pod.clone(), now.to_string()))
            })
            .collect();
        if kept != *self.placements {
            self.placements = Arc::new(kept);
        }
    }

    /// `status.lastPodEventTime` on claims whose node gained or lost pods (consolidateAfter counts from it), at
    /// most once per 10 s per node, as upstream.
    fn pod_events(&mut self, m: &ClusterSnapshot<'_>, now: Millis, out: &mut Out) {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for p in m.pods.iter() {
            if let Some(n) = p.node_name() {
                *counts.entry(n).or_insert(0) += 1;
            }
        }
        let due = self.pod_events.observe(&counts, m.nodes.iter().filter_map(|n| n.metadata.name.as_deref()), now);
        let nodes = Nodes::of(m);
        for name in due {
            // Only claims of this cloud: another provider's claim is its own controller's to keep.
            if let Some(c) = nodes.claim_of(name)
                && self.ours(c.provider_id())
            {
                out.claim(c).status.get_or_insert_with(Default::default).last_pod_event_time =
                    Some(lifecycle::rfc3339(now));
                self.pod_events.written(name, now);
            }
        }
    }

    /// `Drifted` on claims that no longer match their NodePool (engine.md §6): checked every 5 minutes, and at
    /// once when the NodePool's spec or the cloud's verdict on the node class changes.
    fn drift(&mut self, m: &ClusterSnapshot<'_>, now: Millis, out: &mut Out) {
        let catalogs = self.catalogs(m);
        let claims: Vec<&NodeClaim> = m.nodeclaims.iter().collect();
        let pool = |name: &str| m.nodepools.iter().find(|p| p.name() == name);
        let nodes = Nodes::of(m);
        let node_labels = |c: &NodeClaim| nodes.node_of(c.name()).and_then(|n| n.metadata.labels.as_ref());
        let node_version = |c: &NodeClaim| nodes.node_of(c.name()).and_then(|n| n.metadata.resource_version.as_deref());
        let types = |name: &str| catalogs.get(name).map_or(&[][..], Vec::as_slice);
        let read = DriftRead {
            claims: &claims,
            pool: &pool,
            node_labels: &node_labels,
            types: &types,
            class_drift: &self.class_drift,
            node_version: &node_version,
        };
        for (name, status, reason, message) in self.drift.check(&read, now) {
            if let Some(c) = m.nodeclaims.iter().find(|c| c.name() == name) {
                set_condition(out.claim(c), COND_DRIFTED, status, &reason, &message, now);
            }
        }
    }

    fn orchestrate(&mut self, m: &ClusterSnapshot<'_>, now: Millis, out: &mut Out) -> bool {
        if self.disruption.in_flight().is_empty() {
            return false;
        }
        let claims: BTreeMap<&str, &NodeClaim> = m.nodeclaims.iter().map(|c| (c.name(), c)).collect();
        let (acts, waiting) = self.disruption.orchestrate(now, |n| claims.get(n).copied());
        self.carry_out(m, acts, now, out);
        waiting
    }

    /// Does what the disruption controller asks (see [`disruption::Act`]).
    fn carry_out(&mut self, m: &ClusterSnapshot<'_>, acts: Vec<Act>, now: Millis, out: &mut Out) {
        for act in acts {
            match act {
                Act::Start { command, .. } if command.is_reboot() => self.commit_reboot(m, &command, now, out),
                Act::Start { id, command } => self.start(m, &id, &command, now, out),
                Act::DeleteCandidates { command, .. } => {
                    let repair = command.repair.as_ref();
                    for c in &command.candidates {
                        // A repair's drain ends when its policy says, counted from now, the replacement being up
                        // (an earlier deadline already set is kept).
                        if let Some(drain) = repair.and_then(|r| r.drain)
                            && let Some(claim) = m.nodeclaims.iter().find(|x| x.name() == c.nodeclaim)
                            && let Some(e) = drain_deadline(claim, now.saturating_add(drain))
                        {
                            out.push(e);
                        }
                        let reason = if repair.is_some() { DeleteReason::Unhealthy } else { DeleteReason::Disrupted };
                        out.push(Effect::DeleteNodeClaim { name: c.nodeclaim.clone(), reason });
                    }
                }
                Act::RollBack { command, .. } => self.roll_back(m, &command, out),
            }
        }
    }

    /// A `karpenter.sh/disrupted` taint on a node that no command of this instance holds and that is not being
    /// deleted is left over (a process stopped mid-command): removed, with the claim's DisruptionReason, as upstream
    /// does at start (engine.md §5.1). Nodes in commands of this process are never touched.
    pub fn stale_taints(&self, m: &ClusterSnapshot<'_>, deleted: &BTreeSet<String>) -> Vec<Effect> {
        let mut out = Out::default();
        let busy = self.busy_in(m);
        let nodes = Nodes::of(m);
        for n in &m.nodes {
            let name = n.metadata.name.as_deref().unwrap_or_default();
            let tainted = n
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.key == labels::TAINT_DISRUPTED));
            if !tainted || busy.contains(name) || n.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let claim = nodes.claim_of(name);
            // Being deleted, or about to be by this very run (a command that just finished).
            let deleting = |c: &NodeClaim| c.metadata.deletion_timestamp.is_some() || deleted.contains(c.name());
            if claim.is_some_and(deleting) {
                continue;
            }
            remove_taint(out.node(n), labels::TAINT_DISRUPTED);
            if let Some(c) = claim
                && let Some(status) = out.claim(c).status.as_mut()
            {
                status.conditions.retain(|x| x.type_ != COND_DISRUPTION_REASON);
            }
        }
        out.finish(m)
    }

    /// Gives a failed command's candidates back: no disrupted taint, no DisruptionReason.
    fn roll_back(&self, m: &ClusterSnapshot<'_>, cmd: &Command, out: &mut Out) {
        for c in &cmd.candidates {
            if let Some(n) = m.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(c.node.as_str())) {
                remove_taint(out.node(n), labels::TAINT_DISRUPTED);
            }
            if let Some(claim) = m.nodeclaims.iter().find(|x| x.name() == c.nodeclaim)
                && let Some(status) = out.claim(claim).status.as_mut()
            {
                status.conditions.retain(|c| c.type_ != COND_DISRUPTION_REASON);
            }
        }
    }

    fn with_context<R>(
        &self,
        m: &ClusterSnapshot<'_>,
        now: Millis,
        busy: &BTreeSet<String>,
        f: impl FnOnce(&Context<'_>) -> R,
    ) -> R {
        self.with_context_options(m, now, busy, self.disruption.options().clone(), false, f)
    }

    fn with_context_options<R>(
        &self,
        m: &ClusterSnapshot<'_>,
        now: Millis,
        busy: &BTreeSet<String>,
        options: DisruptionOptions,
        assume_pending: bool,
        f: impl FnOnce(&Context<'_>) -> R,
    ) -> R {
        let catalogs = self.catalogs(m);
        let pending = if assume_pending { self.disruption.pending_commands() } else { Vec::new() };
        let assumed = disruption::assumed_nodeclaims(m.nodeclaims, &pending, now);
        let mut view = *m;
        if let Some(claims) = &assumed {
            view.nodeclaims = claims.into();
        }
        // Disruption simulations place the buffers' virtual pods too: a node goes only if they still fit.
        view.virtual_pods = &self.buffers.pods;
        let repair = self.repair_inputs(&view, now);
        let ctx = Context {
            snap: view,
            catalogs: &catalogs,
            policy: &self.catalog.label_policy,
            now,
            busy,
            nominated: &self.nominated,
            buffer_nodes: &self.buffers.nodes,
            options: &options,
            repair: &repair,
        };
        f(&ctx)
    }

    /// Why each node is (not) being disrupted now.
    pub fn explain(&self, m: &ClusterObjects, now: Millis) -> BTreeMap<String, Outlook> {
        let pods = m.pending_view();
        self.explain_nodes(&m.view_with(&pods), now)
    }

    /// [`Controller::explain`] on a read of the cluster.
    pub fn explain_nodes(&self, m: &ClusterSnapshot<'_>, now: Millis) -> BTreeMap<String, Outlook> {
        self.with_context(m, now, &self.busy_in(m), explain_nodes)
    }

    /// A consolidation command waits out its validation delay, then is checked again before it starts.
    fn validation(&mut self, m: &ClusterSnapshot<'_>, now: Millis, out: &mut Out) {
        if let Some((id, cmd)) = self.disruption.due_validation(now) {
            let verdict = self.validate_now(m, now, &cmd);
            let acts = self.disruption.validated(id, cmd, verdict, now);
            self.carry_out(m, acts, now, out);
        }
    }

    /// A pass when one is due; how many candidates it looked at when it ran.
    fn disruption(
        &mut self,
        m: &ClusterSnapshot<'_>,
        now: Millis,
        keys: PassKeys,
        new_id: &mut dyn FnMut() -> String,
        out: &mut Out,
    ) -> Option<usize> {
        if !self.disruption.pass_due(now, keys.quiet_key) {
            return None;
        }
        self.disruption.withdraw_stale(now, |name| {
            m.nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(name))
                .map(|n| n.metadata.deletion_timestamp.is_some())
        });
        let consolidation_state = disruption::consolidation_generation(keys.state, now);
        let options = self.disruption.begin_pass(now, consolidation_state);
        if !m.nodeclaims.iter().any(|c| c.metadata.deletion_timestamp.is_none()) {
            return None;
        }
        let busy = self.busy_in(m);
        let mut result = self.with_context_options(m, now, &busy, options, true, pass);
        let candidates = result.candidates;
        let blocked = std::mem::take(&mut result.blocked);
        self.pass_blocked_events(m, &blocked, now, out);
        let acts = self.disruption.pass_done(
            PassOutcome { result, generation: consolidation_state, state: keys.state, quiet_key: keys.quiet_key },
            now,
            new_id,
            |recheck| disruption::quiet_until(now, recheck, m.nodepools.iter(), m.pods.iter()).min(keys.quiet_cap),
        );
        self.carry_out(m, acts, now, out);
        Some(candidates)
    }

    fn validate_now(&self, m: &ClusterSnapshot<'_>, now: Millis, cmd: &Command) -> Result<(), String> {
        let mut busy = self.busy_in(m);
        for c in &cmd.candidates {
            busy.remove(&c.node);
        }
        self.with_context(m, now, &busy, |ctx| validate(ctx, cmd).map_err(|e| format!("{}: {e}", e.kind())))
    }

    /// An event, unless the same one went out in the last 10 minutes.
    fn event(
        &mut self,
        regarding: ObjectReference,
        warning: bool,
        reason: &str,
        message: String,
        now: Millis,
        out: &mut Out,
    ) {
        self.event_every(regarding, warning, reason, message, now, EVENT_REPEAT, out);
    }

    /// An Event, not repeated with the same message within `repeat`.
    #[allow(clippy::too_many_arguments)]
    fn event_every(
        &mut self,
        regarding: ObjectReference,
        warning: bool,
        reason: &str,
        message: String,
        now: Millis,
        repeat: Millis,
        out: &mut Out,
    ) {
        let key = (
            format!(
                "{}/{}/{}",
                regarding.kind.as_deref().unwrap_or(""),
                regarding.namespace.as_deref().unwrap_or(""),
                regarding.name.as_deref().unwrap_or("")
            ),
            reason.to_string(),
        );
        if self.events_sent.get(&key).is_some_and(|(m, at)| *m == message && now - at < repeat) {
            return;
        }
        // Forgetting old ones walks the whole map: once per instant, not once per Event (a solve can name
        // thousands of pods). Kept as long as the longest repeat.
        if self.events_pruned_at != now {
            self.events_sent.retain(|_, (_, at)| now - *at < EVENT_REPEAT.max(repair::BLOCKED_EVENT_REPEAT));
            self.events_pruned_at = now;
        }
        self.events_sent.insert(key, (message.clone(), now));
        let message = fit_event_message(message);
        out.push(Effect::Event { regarding: Box::new(regarding), warning, reason: reason.to_string(), message });
    }

    /// Starts a command: taint the candidates and mark their claims, create the replacements.
    fn start(&mut self, m: &ClusterSnapshot<'_>, id: &str, cmd: &Command, now: Millis, out: &mut Out) {
        for c in &cmd.candidates {
            let node_ref = ObjectReference {
                kind: Some("Node".into()),
                api_version: Some("v1".into()),
                name: Some(c.node.clone()),
                ..Default::default()
            };
            self.event(node_ref, false, "DisruptionTerminating", format!("Disrupting Node: {}", cmd.brief()), now, out);
            if let Some(n) = m.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(c.node.as_str())) {
                let taints = out.node(n).spec.get_or_insert_with(Default::default).taints.get_or_insert_with(Vec::new);
                if !taints.iter().any(|t| t.key == labels::TAINT_DISRUPTED) {
                    taints.push(disrupted_taint());
                }
            }
            if let Some(claim) = m.nodeclaims.iter().find(|x| x.name() == c.nodeclaim) {
                set_condition(
                    out.claim(claim),
                    COND_DISRUPTION_REASON,
                    "True",
                    cmd.reason().as_str(),
                    &cmd.summary(),
                    now,
                );
            }
        }
        for r in &cmd.replacements {
            let mut claim = r.nodeclaim.clone();
            // A static pool's template claim picks no type: no overlay annotation, as upstream's template claims.
            if cmd.method != crate::engine::disruption::Method::StaticDrift {
                self.annotate_overlays(&mut claim);
            }
            out.push(Effect::CreateNodeClaim {
                claim: Box::new(claim),
                purpose: Purpose::Replacement { id: id.to_string() },
            });
        }
    }

    /// Takes in what the executor did.
    /// Splits `effects` into those to carry out now and the outcomes of those held back because their object's
    /// writes are backing off ([`backoff`]): a held creation is answered as failed, so its pods are planned again.
    pub fn hold_backed_off(&self, effects: Vec<Effect>, now: Millis) -> (Vec<Effect>, Vec<Outcome>) {
        if self.writes.is_empty() {
            return (effects, Vec::new());
        }
        let mut held = Vec::new();
        let go = effects
            .into_iter()
            .filter_map(|e| {
                if !self.writes.holds(&e.object_key(), now) {
                    return Some(e);
                }
                if let Effect::CreateNodeClaim { purpose, .. } = e {
                    held.push(Outcome::CreateFailed { purpose, error: "held: earlier creations were refused".into() });
                }
                None
            })
            .collect();
        (go, held)
    }

    /// A write to `key` was refused (not a conflict): the object backs off. Logged when the error is new, and
    /// again as its repeats pass each power of two from 8, with their count; returns the line for the operator
    /// when it is new.
    pub fn write_refused(&mut self, key: &str, effect: &str, error: &str, now: Millis) -> Option<String> {
        let verdict = self.writes.refused(key, effect, error, now);
        let r = self.writes.refusals().find(|(k, _)| *k == key).map(|(_, r)| r)?;
        let retry_in = (r.retry_at - now) as f64 / 1000.0;
        match verdict {
            backoff::Verdict::New => {
                tracing::warn!(%effect, failures = r.failures, "{error}; next try in {retry_in:.3}s");
                Some(format!("{effect}: {error}"))
            }
            backoff::Verdict::Repeat => {
                if r.failures >= 8 && r.failures.is_power_of_two() {
                    tracing::warn!(
                        %effect,
                        failures = r.failures,
                        "still refused ({} times in a row, this error {} times): {error}; next try in {retry_in:.0}s",
                        r.failures,
                        r.repeats + 1
                    );
                }
                None
            }
        }
    }

    /// A write to `key` went through: any backoff of it ends.
    pub fn write_succeeded(&mut self, key: &str) {
        if let Some(r) = self.writes.succeeded(key) {
            tracing::info!(effect = %r.effect, "went through after {} refusals in a row", r.failures);
        }
    }

    /// Objects whose writes are being refused, by object key (the dashboard's Events pane).
    pub fn refused_writes(&self) -> impl Iterator<Item = (&str, &backoff::Refusal)> {
        self.writes.refusals()
    }

    pub fn outcome(&mut self, o: Outcome, now: Millis) {
        match o {
            Outcome::Created { name, purpose } => {
                self.created.insert(name.clone(), now);
                if let Purpose::Provisioning { placeholder, .. } = &purpose {
                    self.rename_placements(placeholder, Some(&name));
                    self.note_nominated(&name, placeholder);
                }
                self.settle(&purpose, Some(name));
            }
            Outcome::CreateFailed { purpose, error } => {
                if let Purpose::Provisioning { placeholder, .. } = &purpose {
                    self.rename_placements(placeholder, None);
                }
                if let Purpose::Replacement { id } = &purpose {
                    tracing::warn!(command = %id, %error, "a replacement NodeClaim could not be created");
                }
                // Without all its replacements a command can't go on: its candidates are given back on the next
                // tick by the queue (a replacement that doesn't exist fails the command).
                self.settle(&purpose, None);
            }
            Outcome::Launched { claim } => {
                self.nominated_pods.remove(&claim);
                self.launching.insert(claim, now);
            }
            Outcome::LaunchImpossible { claim, message } => self.launch_impossible(&claim, &message, now),
            Outcome::InsufficientCapacity { claim, message } => self.tell_nominated_pods(&claim, &message, now),
            Outcome::Rebooted { claim } => self.reboot_answered(claim, Ok(())),
            Outcome::RebootRefused { claim, message } => self.reboot_answered(claim, Err(message)),
        }
    }

    fn settle(&mut self, purpose: &Purpose, name: Option<String>) {
        match purpose {
            Purpose::Provisioning { .. } | Purpose::Static { .. } => self.creating = self.creating.saturating_sub(1),
            Purpose::Replacement { id } => self.disruption.replacement_created(id, name),
        }
    }

    /// An operator approved proposal `id`: validated against the cluster as it is now, then started. `Err` when
    /// it can't be approved (no such open proposal, dry-run) or no longer holds.
    pub fn approve(&mut self, m: &ClusterObjects, id: &str, now: Millis) -> Result<(Vec<Effect>, String), String> {
        let pods = m.pending_view();
        let (effects, approval) = self.approve_proposal(&m.view_with(&pods), id, now)?;
        Ok((effects, approval.message(id)?))
    }

    /// [`Controller::approve`] on a read of the cluster: `Err` only when the gate refuses (no such open proposal,
    /// dry-run); a proposal that no longer holds is [`Approval::Invalidated`] (and recorded so).
    pub fn approve_proposal(
        &mut self,
        m: &ClusterSnapshot<'_>,
        id: &str,
        now: Millis,
    ) -> Result<(Vec<Effect>, Approval), String> {
        // A proposal that is not open is refused by the gate, whatever the verdict.
        let verdict = self.disruption.proposal(id).map_or(Ok(()), |cmd| self.validate_now(m, now, cmd));
        let (approval, acts) = self.disruption.approve(id, now, verdict)?;
        let mut out = Out::default();
        self.carry_out(m, acts, now, &mut out);
        Ok((out.finish(m), approval))
    }

    pub fn reject(&mut self, id: &str, state: u64, now: Millis) -> Result<String, String> {
        self.disruption.reject(id, state, now)?;
        Ok(format!("{id} rejected"))
    }

    /// Switches the disruption mode; open proposals were made under the old rules and are withdrawn.
    pub fn set_mode(&mut self, mode: Mode, now: Millis) {
        self.disruption.set_mode(mode, now);
    }

    /// Pauses (`Some`) or resumes (`None`) voluntary disruption: while paused, every command this controller
    /// computes is held as a proposal that cannot be approved.
    pub fn set_hold(&mut self, hold: Option<disruption::Hold>, now: Millis) -> Result<String, String> {
        let pausing = hold.is_some();
        self.disruption.set_hold(hold, now)?;
        Ok(if pausing { "voluntary disruption paused".into() } else { "voluntary disruption resumed".into() })
    }

    pub fn hold(&self) -> Option<&disruption::Hold> {
        self.disruption.hold()
    }

    /// Switches the packing strategy: the next provisioning solve sizes its NodeClaims this way, and disruption
    /// passes repack (cost) or not (upstream). Claims already created stay as they are.
    pub fn set_packing(&mut self, packing: Packing) {
        self.packing = packing;
        self.disruption.set_packing(packing);
    }
}

/// How a backend keys a disruption pass: the cluster state as rejections and the consolidated mark remember it,
/// what ends a quiet period, and the latest a quiet period may last (timed inputs the state leaves out).
#[derive(Debug, Clone, Copy)]
pub struct PassKeys {
    pub state: u64,
    pub quiet_key: u64,
    pub quiet_cap: Millis,
}

/// A forceful deletion's first step: the NodeClaim's drain deadline set to now, so the drain deletes pods at once
/// (node repair, failed status checks, expiring capacity blocks). A deadline already past is kept.
pub(crate) fn forceful_deadline(claim: &NodeClaim, now: Millis) -> Option<Effect> {
    drain_deadline(claim, now)
}

/// The NodeClaim's drain deadline set to `at`, unless one no later is already set.
pub(crate) fn drain_deadline(claim: &NodeClaim, at: Millis) -> Option<Effect> {
    if lifecycle::annotated_deadline(claim).is_some_and(|t| t <= at) {
        return None;
    }
    Some(Effect::PatchClaimMetadata {
        name: claim.name().to_string(),
        labels: BTreeMap::new(),
        annotations: [(lifecycle::ANNOTATION_TERMINATION_TIMESTAMP.to_string(), lifecycle::rfc3339(at))].into(),
        remove_annotations: Vec::new(),
        finalizers: None,
    })
}

fn pod_ref(namespace: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        api_version: Some("v1".into()),
        namespace: Some(namespace.to_string()),
        name: Some(name.to_string()),
        uid: (!uid.is_empty()).then(|| uid.to_string()),
        ..Default::default()
    }
}

/// The most an Event's message may hold: the API server refuses longer ones (422, "can have at most 1024
/// characters"), and the Event is lost.
pub const EVENT_MESSAGE_MAX: usize = 1024;

/// A message cut to [`EVENT_MESSAGE_MAX`] characters, saying how much was left out.
pub fn fit_event_message(message: String) -> String {
    let total = message.chars().count();
    if total <= EVENT_MESSAGE_MAX {
        return message;
    }
    // The suffix is at most 40 characters: keep room for it.
    let keep = EVENT_MESSAGE_MAX - 40;
    let head: String = message.chars().take(keep).collect();
    format!("{head}… ({} more characters)", total - keep)
}

/// The cluster state disruption decides on, as one number: nodes (deletion, taints, labels, readiness), NodeClaims
/// (deletion, finalizers, provider id, conditions), every pod's binding and termination, NodePool specs and PDBs.
/// Equal keys mean a pass would see the same cluster (a rejected proposal stays rejected, the consolidated mark
/// holds), and a simulated instant whose controllers leave it unchanged has settled; heartbeats and status writes
/// the passes don't read leave it alone. Objects are combined in any order (a watch cache's order is not stable),
/// and nothing is sorted or copied: this runs whenever the cluster changed.
pub fn state_key(snap: &ClusterSnapshot<'_>) -> u64 {
    use rustc_hash::FxHasher;
    // The sum of one hash per object: order-independent, and O(objects) with no allocation.
    fn each<T>(items: impl Iterator<Item = T>, f: impl Fn(&T, &mut FxHasher)) -> (usize, u64) {
        items.fold((0, 0u64), |(n, sum), item| {
            let mut h = FxHasher::default();
            f(&item, &mut h);
            (n + 1, sum.wrapping_add(h.finish()))
        })
    }
    let nodes = each(snap.nodes.iter(), |n, h| {
        (n.metadata.name.as_deref(), n.metadata.deletion_timestamp.is_some()).hash(h);
        for t in n.spec.as_ref().and_then(|s| s.taints.as_ref()).into_iter().flatten() {
            (&t.key, &t.effect).hash(h);
        }
        n.metadata.labels.hash(h);
        lifecycle::node_ready(n).hash(h);
    });
    let claims = each(snap.nodeclaims.iter(), |c, h| {
        (c.name(), c.metadata.deletion_timestamp.is_some(), c.provider_id()).hash(h);
        c.metadata.finalizers.as_ref().map_or(0, Vec::len).hash(h);
        for cond in c.status.as_ref().map(|s| &s.conditions).into_iter().flatten() {
            (&cond.type_, &cond.status).hash(h);
        }
    });
    let pods = each(snap.pods.iter(), |p, h| {
        let m = &p.metadata;
        (m.namespace.as_deref(), m.name.as_deref(), p.node_name(), m.deletion_timestamp.is_some()).hash(h);
    });
    // The API server counts a NodePool's spec changes in `metadata.generation`, and any change to an object in its
    // resourceVersion: hashing those costs nothing. Objects without them (a manifest file) are hashed in full.
    let pools = each(snap.nodepools.iter(), |p, h| {
        p.name().hash(h);
        match p.metadata.generation {
            Some(g) => g.hash(h),
            None => serde_json::to_string(&p.spec).unwrap_or_default().hash(h),
        }
    });
    let pdbs = each(snap.pdbs.iter(), |p, h| {
        (p.metadata.namespace.as_deref(), p.metadata.name.as_deref()).hash(h);
        match p.metadata.resource_version.as_deref() {
            Some(rv) => rv.hash(h),
            None => serde_json::to_string(p).unwrap_or_default().hash(h),
        }
    });
    let mut h = FxHasher::default();
    (nodes, claims, pods, pools, pdbs).hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: &str = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []\n---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: default}\nspec: {maxUnavailable: 1, selector: {matchLabels: {app: web}}}\n";

    #[test]
    fn the_state_key_follows_the_api_servers_counters_and_hashes_objects_without_them() {
        let plain = ClusterObjects::parse(POOL, "t.yaml").unwrap();
        let before = state_key(&plain.view());
        // Without counters (a manifest file), a spec change is seen in the hash of the spec.
        let mut edited = plain.clone();
        edited.nodepools[0].spec.weight = Some(5);
        assert_ne!(state_key(&edited.view()), before);
        let mut pdb = plain.clone();
        pdb.pdbs[0].spec.as_mut().unwrap().max_unavailable = None;
        assert_ne!(state_key(&pdb.view()), before);

        // As a real API server sends them: the counters say what changed.
        let mut served = plain.clone();
        served.nodepools[0].metadata.generation = Some(3);
        served.pdbs[0].metadata.resource_version = Some("100".into());
        let at = state_key(&served.view());
        let mut status_only = served.clone();
        status_only.nodepools[0].status = Some(Default::default());
        assert_eq!(state_key(&status_only.view()), at, "a status write leaves the NodePool's generation alone");
        let mut spec = served.clone();
        spec.nodepools[0].spec.weight = Some(5);
        spec.nodepools[0].metadata.generation = Some(4);
        assert_ne!(state_key(&spec.view()), at);
        let mut pdb = served.clone();
        pdb.pdbs[0].metadata.resource_version = Some("101".into());
        assert_ne!(state_key(&pdb.view()), at);
    }

    #[test]
    fn created_claims_carry_their_placements_and_uncreated_ones_drop_them() {
        let settings = Settings { packing: Packing::Cost, ..Settings::default() };
        let catalog = Arc::new(crate::engine::catalog::kwok::kwok_catalog("us-east-1"));
        let mut c = Controller::with_settings(catalog, settings, 0);
        let placed = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(p, at)| (p.to_string(), at.to_string())).collect()
        };
        c.placements = Arc::new(placed(&[
            ("p1", "hostname-placeholder-0001"),
            ("p2", "hostname-placeholder-0001"),
            ("p3", "hostname-placeholder-0002"),
            ("p4", "default-x1y2z"),
        ]));
        c.rename_placements("hostname-placeholder-0001", Some("default-abcde"));
        c.rename_placements("hostname-placeholder-0002", None);
        // A second answer for a placeholder already answered changes nothing, as the first took its pods.
        c.rename_placements("hostname-placeholder-0001", Some("default-zzzzz"));
        c.rename_placements("hostname-placeholder-0009", Some("default-nopod"));
        // Read before they are carried, placements already follow the renames.
        let read = |c: &Controller| ["p1", "p2", "p3", "p4"].map(|p| c.placement(p).map(str::to_string));
        let before = read(&c);
        c.carry_renames();
        assert_eq!(before, read(&c));
        let want = placed(&[("p1", "default-abcde"), ("p2", "default-abcde"), ("p4", "default-x1y2z")]);
        assert_eq!(*c.placements, want);
        assert!(c.renamed.is_empty(), "carried once");
    }
}
