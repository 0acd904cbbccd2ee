//! The acting controller's schedule, step by step: each of the controller's steps runs on the cluster as the
//! previous step's writes left it (as upstream's controllers each read the shared cache), and is skipped while
//! nothing it reads changed and none of its requeues is due. What a step read is known by the versions its host
//! reports ([`Versions`]); the host is whatever holds the cluster and the cloud — the simulated world on its virtual
//! clock implements [`Host`] over its store and its EC2.
//!
//! The host keeps what a real cluster and cloud do (clock, kubelets, kube-scheduler, workload controllers,
//! instances) and what it records; which of the controller's steps run, in what order, on what, and when they look
//! again are decided here.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::PodTemplate;

use super::cloud::{CloudProvider, Notice, at_once};
use super::disruption::Approval;
use super::execute::Report;
use super::{Controller, Effect, Outcome, PassKeys, Purpose};
use crate::engine::api::capacitybuffer::CapacityBuffer;
use crate::engine::api::nodeoverlay::NodeOverlay;
use crate::engine::api::{EC2NodeClass, NodePool};
use crate::engine::disruption::consolidation::Outlook;
use crate::engine::packing::Packing;
use crate::engine::provisioning::{ClusterSnapshot, Millis, ProvisioningResult};

/// How far apart `status.lastPodEventTime` is counted when no pass is about to read it: the timestamp's resolution.
const POD_EVENT_RESOLUTION: Millis = super::timing::SECOND;

/// Counters the host keeps per kind of object it stores, each changing whenever an object of that kind changes
/// (a watch cache's per-kind resource versions; the simulated store's stamps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Versions {
    /// NodePools, changing with their specs only: their status is the controller's own output.
    pub nodepool_specs: u64,
    pub nodeclaims: u64,
    pub nodes: u64,
    pub pods: u64,
    pub capacitybuffers: u64,
    pub pod_templates: u64,
    pub deployments: u64,
    /// The cloud's instances: changes with every instance created or terminated.
    pub cloud: u64,
    /// Any write to the store at all, NodePool status writes excepted: what ends a disruption quiet period.
    pub quiet: u64,
}

/// What a step is handed to read: the controller, the cloud port and the cluster as it is now.
pub struct Parts<'a, 's> {
    pub controller: &'a mut Controller,
    pub cloud: &'a mut dyn CloudProvider,
    pub snap: &'a ClusterSnapshot<'s>,
    /// Names new disruption commands (the host numbers them with its other decisions).
    pub ids: &'a mut Ids,
}

/// A counter of the host's decisions, for their ids (`p-1`, `d-2`, …).
#[derive(Debug, Clone, Default)]
pub struct Ids(u64);

impl Ids {
    pub fn next(&mut self, prefix: &str) -> String {
        self.0 += 1;
        format!("{prefix}-{}", self.0)
    }
}

/// What the host may want to record of a step (the simulated world's report does).
pub enum Note<'a> {
    /// A provisioning solve: its answer, the NodeClaims created for its new claims in order (`None` where the
    /// create failed), and how long the solve took.
    Solved { result: &'a Arc<ProvisioningResult>, created: Vec<Option<String>>, millis: f64 },
    /// Static NodePools' scale-up created these NodeClaims.
    StaticCreated(Vec<String>),
    /// An interruption notice, before the controller answers it.
    Interruption(&'a super::interruption::Message),
    /// The controller has looked at the capacity reservations about to end (the cloud may now take back those
    /// that did).
    ReservationsChecked,
    /// Disruption commands the controller made, by id, in the order it made them.
    Commands(Vec<String>),
}

/// Whoever holds the cluster and the cloud the controller acts on.
pub trait Host {
    fn now(&self) -> Millis;
    fn versions(&self) -> Versions;
    fn controller_mut(&mut self) -> &mut Controller;
    /// Runs `f` on the controller, the cloud port and the cluster as it is now.
    fn read<R>(&mut self, f: impl FnOnce(Parts<'_, '_>) -> R) -> R;
    /// Runs `f` on the controller and the cloud port (no read of the cluster).
    fn with_cloud<R>(&mut self, f: impl FnOnce(&mut Controller, &mut dyn CloudProvider) -> R) -> R;
    /// Carries out one effect through the executor over the host's ports, and hands the outcomes to the
    /// controller.
    fn apply(&mut self, effect: Effect) -> Report;
    /// Asks to be run again at `t` even if nothing changes by then.
    fn wake_at(&mut self, t: Millis);
    fn note(&mut self, note: Note<'_>);
    /// The kinds a snapshot leaves out, which some steps read.
    fn node_classes(&self) -> Vec<EC2NodeClass>;
    fn node_overlays(&self) -> Vec<NodeOverlay>;
    fn nodepools(&self) -> Vec<NodePool>;
    fn buffer_sources(&self) -> (Vec<CapacityBuffer>, Vec<PodTemplate>, Vec<Deployment>);
    /// The uids of the pods that ask for capacity, in pod order.
    fn provisionable(&mut self) -> Arc<Vec<String>>;
    /// Identifies the state disruption decides on (a rejected proposal is not offered again until it changes).
    fn state_key(&mut self) -> u64;
    /// When an offering the cloud ran out of comes back, if one will.
    fn capacity_returns(&self) -> Option<Millis>;
    /// Whether the cloud has capacity reservations at all.
    fn has_reservations(&self) -> bool;
    /// Interruption notices waiting in the cloud's queue.
    fn notices(&mut self) -> Vec<Notice>;
    /// Whether the controller's explanatory Events (why nodes are not disrupted) are published.
    fn explain_events(&self) -> bool;
    /// Whether some Node is being deleted (its drain then reads pods), and whether some NodeClaim is (its
    /// finalization then asks which instances the cloud still has).
    fn deleting(&self) -> (bool, bool);
}

/// What each step read when it last ran, and when it must look again regardless.
#[derive(Debug, Clone, Default)]
pub struct Tick {
    lifecycle: Option<[u64; 4]>,
    nodepool_status: Option<[u64; 3]>,
    statics: Option<[u64; 5]>,
    buffers: Option<[u64; 3]>,
    drift: Option<[u64; 3]>,
    drift_due: Millis,
    pods_counted: Option<[u64; 2]>,
    pods_counted_at: Millis,
    /// When garbage collection next lists the cloud's instances, and how often it does.
    next_gc: Millis,
    gc_every: Millis,
    /// How many of the controller's disruption records the host has been told about.
    records_seen: usize,
    /// Every disruption pass that ran: when, over how many candidates, how long it took.
    pub passes: Vec<PassTiming>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PassTiming {
    pub at: Millis,
    pub candidates: usize,
    pub millis: f64,
}

impl Tick {
    /// A schedule whose garbage collection runs every `gc_every`, first at `first_gc`.
    pub fn new(first_gc: Millis, gc_every: Millis) -> Tick {
        Tick { drift_due: Millis::MIN, pods_counted_at: Millis::MIN, next_gc: first_gc, gc_every, ..Tick::default() }
    }

    /// When garbage collection is next due.
    pub fn next_gc(&self) -> Millis {
        self.next_gc
    }

    /// One run of every step, in order.
    pub fn run(&mut self, host: &mut impl Host) {
        self.buffers(host);
        self.provisioning(host);
        self.lifecycle(host);
        self.nominations(host);
        self.nodepool_status(host);
        self.static_capacity(host);
        self.interruptions(host);
        self.reservations(host);
        self.disruption(host);
        self.explanatory_events(host);
        let now = host.now();
        if now >= self.next_gc {
            self.garbage_collect(host);
            self.next_gc = now + self.gc_every;
        }
    }

    /// New disruption commands, in the order the controller made them (for the host's record), since last asked.
    fn new_records(&mut self, controller: &Controller) -> Vec<String> {
        let records = &controller.orchestrator().records;
        let new = records[self.records_seen.min(records.len())..].iter().map(|r| r.id.clone()).collect();
        self.records_seen = records.len();
        new
    }

    fn apply_all(host: &mut impl Host, effects: Vec<Effect>) {
        for e in effects {
            host.apply(e);
        }
    }

    /// Hands the controller what the cloud offers now, and the overlays over it.
    fn sync_catalog(host: &mut impl Host) {
        let now = host.now();
        let classes = host.node_classes();
        host.with_cloud(|controller, cloud| {
            cloud.set_node_classes(&classes);
            controller.sync_instance_types(cloud, &classes, now);
        });
        // The overlays apply to the catalog just taken (the controller evaluates them again only when they, the
        // NodePools or the catalog changed).
        if host.controller_mut().gates().node_overlay {
            let (overlays, pools) = (host.node_overlays(), host.nodepools());
            let effects = host.controller_mut().sync_overlays(&overlays, &pools, now);
            Self::apply_all(host, effects);
            host.with_cloud(|controller, cloud| cloud.set_overlays(Arc::new(controller.overlay_store())));
        }
    }

    /// CapacityBuffer resolution (gate `CapacityBuffer`), whenever a buffer or what it may take its shape from
    /// changed.
    fn buffers(&mut self, host: &mut impl Host) {
        if !host.controller_mut().gates().capacity_buffer {
            return;
        }
        let stamps = |v: Versions| [v.capacitybuffers, v.pod_templates, v.deployments];
        if self.buffers == Some(stamps(host.versions())) {
            return;
        }
        let (buffers, templates, deployments) = host.buffer_sources();
        let src = crate::engine::capacitybuffer::Sources {
            pod_templates: &templates,
            deployments: &deployments,
            ..Default::default()
        };
        let now = host.now();
        let effects = host.controller_mut().sync_buffers(&buffers, src, now);
        Self::apply_all(host, effects);
        // The writes just made are the controller's own: they need no second look.
        self.buffers = Some(stamps(host.versions()));
    }

    /// Provisioning: the pending pods are fed to the batcher (as the pod watch does) and, when its window is over,
    /// solved on the cluster; the claims it asks for are created and the solve is noted.
    fn provisioning(&mut self, host: &mut impl Host) {
        let now = host.now();
        let uids = host.provisionable();
        host.controller_mut().observe_pending(uids.iter().map(String::as_str), now);
        if !host.controller_mut().provisioning_due(now) {
            return;
        }
        Self::sync_catalog(host);
        let started = Instant::now();
        let (effects, result) = host.read(|p| p.controller.provisioning_pass(p.snap, now));
        let millis = started.elapsed().as_secs_f64() * 1000.0;
        let Some(result) = result else {
            Self::apply_all(host, effects);
            return;
        };
        let mut created = Vec::new();
        for e in effects {
            let create = matches!(e, Effect::CreateNodeClaim { .. });
            let report = host.apply(e);
            if create {
                created.push(created_name(&report));
            }
        }
        host.note(Note::Solved { result: &result, created, millis });
    }

    /// Lifecycle, finalization and termination, skipped while nothing they read changed and none of their
    /// requeues is due.
    fn lifecycle(&mut self, host: &mut impl Host) {
        let v = host.versions();
        let (draining, claims_deleting) = host.deleting();
        let seen = [v.nodes, v.nodeclaims, if draining { v.pods } else { 0 }, v.cloud];
        let now = host.now();
        let due = host.controller_mut().requeue_at().is_some_and(|t| t <= now);
        if self.lifecycle == Some(seen) && !due {
            return;
        }
        let effects = host.read(|p| {
            if claims_deleting {
                let live = at_once(p.cloud.list(now)).and_then(Result::ok).flatten().unwrap_or_default();
                p.controller.set_live_instances(live.into_iter().map(|i| i.provider_id).collect());
            }
            p.controller.lifecycle(p.snap, now)
        });
        // A requeue stands once asked for, as controller-runtime's `RequeueAfter` does (a later reconcile does not
        // take it back); everything else the controller waits for is read from its `next_wake` when it is due.
        if let Some(t) = host.controller_mut().requeue_at() {
            host.wake_at(t);
        }
        Self::apply_all(host, effects);
        // What was read, not what the effects left: a controller reacts to its own writes too.
        self.lifecycle = Some(seen);
    }

    /// Cost packing: the pods the controller planned onto claims whose Nodes registered are nominated there.
    fn nominations(&mut self, host: &mut impl Host) {
        if host.controller_mut().packing() != Packing::Cost {
            return;
        }
        let effects = host.read(|p| p.controller.nominations(p.snap));
        Self::apply_all(host, effects);
    }

    /// NodePool status (resources, node count, conditions), when the nodes, the claims or the NodePools' specs
    /// changed, as upstream's NodePool status controllers react to them.
    fn nodepool_status(&mut self, host: &mut impl Host) {
        let v = host.versions();
        let seen = [v.nodes, v.nodeclaims, v.nodepool_specs];
        if self.nodepool_status == Some(seen) {
            return;
        }
        let now = host.now();
        let classes = host.node_classes();
        let effects = host.read(|p| p.controller.nodepool_status(p.snap, &classes, now));
        Self::apply_all(host, effects);
        self.nodepool_status = Some(seen);
    }

    /// Static NodePools (gate `StaticCapacity`): their scale-ups are noted as such.
    fn static_capacity(&mut self, host: &mut impl Host) {
        if !host.controller_mut().gates().static_capacity {
            return;
        }
        let v = host.versions();
        let c = host.controller_mut();
        let commands = c.busy().len() as u64 + c.orchestrator().in_flight().len() as u64;
        let seen = [v.nodes, v.nodeclaims, v.nodepool_specs, v.pods, commands];
        let now = host.now();
        let due = host.controller_mut().static_requeue_at().is_some_and(|t| t <= now);
        if self.statics == Some(seen) && !due && self.nodepool_status.is_some() {
            return;
        }
        let effects = host.read(|p| p.controller.static_capacity(p.snap, now));
        if let Some(t) = host.controller_mut().static_requeue_at().filter(|t| *t > now) {
            host.wake_at(t);
        }
        let mut created = Vec::new();
        for e in effects {
            let create = matches!(e, Effect::CreateNodeClaim { purpose: Purpose::Static { .. }, .. });
            let report = host.apply(e);
            if create {
                created.extend(created_name(&report));
            }
        }
        if !created.is_empty() {
            host.note(Note::StaticCreated(created));
        }
        // The status of the pools the step just changed is read on the next pass: what was read is what counts.
        self.statics = Some(seen);
    }

    /// Interruption notices: each is noted, then answered by the controller.
    fn interruptions(&mut self, host: &mut impl Host) {
        let now = host.now();
        for n in host.notices() {
            host.note(Note::Interruption(&n.message));
            let effects = host.read(|p| p.controller.interruption(p.snap, &n.message, now));
            Self::apply_all(host, effects);
            (n.answer)(Ok(()));
        }
    }

    /// Capacity blocks about to end: their claims go.
    fn reservations(&mut self, host: &mut impl Host) {
        if !host.has_reservations() {
            return;
        }
        let now = host.now();
        let effects = host.read(|p| p.controller.reservation_expiration(p.cloud, p.snap, now));
        Self::apply_all(host, effects);
        host.note(Note::ReservationsChecked);
    }

    /// The disruption controller: pod-event times, drift, started commands, validation, then a pass if one is due.
    fn disruption(&mut self, host: &mut impl Host) {
        Self::sync_catalog(host);
        // Pod events stamp their node's claim when they happen (to the second), not when a pass next looks
        // (consolidateAfter counts from them).
        self.pod_events(host, false);
        self.drift(host);
        Self::orchestrate(host);
        Self::finish_validation(host);
        let now = host.now();
        let quiet = host.versions().quiet;
        if host.controller_mut().disruption_due(now, quiet) {
            self.disruption_pass(host);
        }
    }

    /// Drift detection when what it reads changed or a claim's recheck is due, so that a cluster at rest costs no
    /// disruption passes.
    fn drift(&mut self, host: &mut impl Host) {
        let stamps = |v: Versions| [v.nodepool_specs, v.nodeclaims, v.nodes];
        let now = host.now();
        if self.drift == Some(stamps(host.versions())) && now < self.drift_due {
            return;
        }
        let (effects, due) = host.read(|p| p.controller.drift_check(p.snap, now));
        Self::apply_all(host, effects);
        // Its own writes are not a reason to look again.
        self.drift = Some(stamps(host.versions()));
        // Every claim was just checked or is not due yet, so this is in the future.
        self.drift_due = due.unwrap_or(Millis::MAX);
    }

    /// `status.lastPodEventTime` on claims whose node gained or lost pods (consolidateAfter reads it). Counting
    /// walks every pod, and pods change at nearly every step of a busy cluster: unless a pass is about to read
    /// the result (`now`), count at most once per [`POD_EVENT_RESOLUTION`].
    fn pod_events(&mut self, host: &mut impl Host, now: bool) {
        let v = host.versions();
        let stamps = [v.pods, v.nodes];
        let at = host.now();
        let next = self.pods_counted_at.saturating_add(POD_EVENT_RESOLUTION);
        if self.pods_counted == Some(stamps) || (!now && at < next) {
            if self.pods_counted != Some(stamps) {
                // Look again when the second is over, even if nothing else happens by then.
                host.wake_at(next);
            }
            return;
        }
        let effects = host.read(|p| p.controller.pod_event_times(p.snap, at));
        Self::apply_all(host, effects);
        let v = host.versions();
        self.pods_counted = Some([v.pods, v.nodes]);
        self.pods_counted_at = at;
    }

    /// Started commands: candidates go once their replacements are initialized, or the command rolls back.
    fn orchestrate(host: &mut impl Host) {
        if host.controller_mut().orchestrator().in_flight().is_empty() {
            return;
        }
        let now = host.now();
        let effects = host.read(|p| p.controller.orchestrate_commands(p.snap, now));
        Self::apply_all(host, effects);
    }

    /// A command whose validation delay is over is checked, and started or let go.
    fn finish_validation(host: &mut impl Host) {
        let now = host.now();
        if host.controller_mut().orchestrator().validation_due_at().is_none_or(|t| t > now) {
            return;
        }
        let effects = host.read(|p| p.controller.finish_validation(p.snap, now));
        Self::apply_all(host, effects);
    }

    fn disruption_pass(&mut self, host: &mut impl Host) {
        let now = host.now();
        self.pod_events(host, true);
        let keys = PassKeys {
            state: host.state_key(),
            quiet_key: host.versions().quiet,
            // Offerings out of capacity come back: an unchanged store may answer differently then.
            quiet_cap: host.capacity_returns().unwrap_or(Millis::MAX),
        };
        let started = Instant::now();
        let (effects, ran) = host.read(|Parts { controller, snap, ids, .. }| {
            controller.disruption_pass(snap, now, keys, &mut || ids.next("d"))
        });
        if let Some(candidates) = ran {
            let millis = started.elapsed().as_secs_f64() * 1000.0;
            self.passes.push(PassTiming { at: now, candidates, millis });
        }
        let records = self.new_records(host.controller_mut());
        if !records.is_empty() {
            host.note(Note::Commands(records));
        }
        Self::apply_all(host, effects);
    }

    /// The controller's explanatory Events, when due and the host publishes them.
    fn explanatory_events(&mut self, host: &mut impl Host) {
        let now = host.now();
        if !host.explain_events() || host.controller_mut().explanatory_events_due().is_none_or(|t| t > now) {
            return;
        }
        let effects = host.read(|p| p.controller.explanatory_events(p.snap, now));
        Self::apply_all(host, effects);
    }

    /// Garbage collection of claims whose instance is gone, and the relabelling of instances whose reservation
    /// ended, on the same list of the cloud's instances.
    fn garbage_collect(&mut self, host: &mut impl Host) {
        let now = host.now();
        let effects = host.read(|p| {
            let Some(Ok(Some(list))) = at_once(p.cloud.list(now)) else { return Vec::new() };
            let mut effects = p.controller.garbage_collect(p.snap, &list, now);
            effects.extend(p.controller.capacity_types(p.snap, &list));
            effects
        });
        Self::apply_all(host, effects);
    }
}

/// The name of the NodeClaim a create made, if it went through.
fn created_name(report: &Report) -> Option<String> {
    report.outcomes.iter().find_map(|o| match o {
        Outcome::Created { name, .. } => Some(name.clone()),
        _ => None,
    })
}

/// An operator's approval of an open proposal: validated against the cluster as it is now, then started
/// ([`Approval::Started`]) or recorded as invalidated with the reason ([`Approval::Invalidated`]). `Err` when there
/// is no such open proposal (or in dry-run mode).
pub fn approve(host: &mut impl Host, id: &str) -> Result<Approval, String> {
    Tick::sync_catalog(host);
    let now = host.now();
    let (effects, approval) = host.read(|p| p.controller.approve_proposal(p.snap, id, now))?;
    Tick::apply_all(host, effects);
    Ok(approval)
}

/// An operator's rejection of an open proposal: not offered again until the state it was made on changes.
pub fn reject(host: &mut impl Host, id: &str) -> Result<(), String> {
    let (state, now) = (host.state_key(), host.now());
    host.controller_mut().reject(id, state, now).map(|_| ())
}

/// An operator's "repair now" on `node` (see [`Controller::repair_now`]), carried out at once.
pub fn repair_now(host: &mut impl Host, node: &str) -> Result<String, String> {
    let now = host.now();
    let (effects, message) = host.read(|p| p.controller.repair_now(p.snap, node, now))?;
    Tick::apply_all(host, effects);
    Ok(message)
}

/// Why each node is (not) being disrupted right now: the "why won't this node consolidate" view.
pub fn explain(host: &mut impl Host) -> std::collections::BTreeMap<String, Outlook> {
    Tick::sync_catalog(host);
    let now = host.now();
    host.read(|p| p.controller.explain_nodes(p.snap, now))
}
