//! The acting controller's schedule, step by step: each of the controller's steps runs on the cluster as the
//! previous step's writes left it (as upstream's controllers each read the shared cache), and is skipped while
//! nothing it reads changed and none of its requeues is due. What a step read is known by the versions its host
//! reports ([`Versions`]); the host is whatever holds the cluster and the cloud — the simulated world on its virtual
//! clock implements [`Host`] over its store and its EC2.
//!
//! The host keeps what a real cluster and cloud do (clock, kubelets, kube-scheduler, workload controllers,
//! instances) and what it records; which of the controller's steps run, in what order, on what, and when they look
//! again are decided here.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::PodTemplate;

use super::cloud::{BoxFuture, CloudInstance, CloudProvider, Notice};
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
    /// Carries out effects, in order, through the executor over the host's ports, and hands the outcomes to the
    /// controller. A host whose cache shows its own writes only later (a watch cache) may gather them and carry
    /// them out at [`Host::flush`], answering with an empty report here.
    fn apply(&mut self, effects: Vec<Effect>) -> BoxFuture<'_, Report>;
    /// Carries out whatever [`Host::apply`] gathered; the end of every run.
    fn flush(&mut self) -> BoxFuture<'_, Report>;
    /// The cloud's instances of this cluster as it lists them now (`None` where it can't, or doesn't list).
    fn list_instances(&mut self, now: Millis) -> BoxFuture<'_, Option<Vec<CloudInstance>>>;
    /// [`Host::list_instances`], or a list taken lately enough for finalization to read.
    fn recent_instances(&mut self, now: Millis) -> BoxFuture<'_, Option<Vec<CloudInstance>>> {
        self.list_instances(now)
    }
    /// Asks to be run again at `t` even if nothing changes by then.
    fn wake_at(&mut self, t: Millis);
    fn note(&mut self, note: Note<'_>);
    /// Works out a launching solve's packing comparison (after its claims are out) and hands the answer to the
    /// controller ([`Controller::compared`]): at once, or on another thread for a host whose loop must not wait.
    /// `launched`: whether any of the solve's claims was created.
    fn compare_packing(&mut self, comparison: crate::controller::provisioning::Comparison, launched: bool);
    /// The kinds a snapshot leaves out, which some steps read.
    fn node_classes(&self) -> Vec<EC2NodeClass>;
    fn node_overlays(&self) -> Vec<NodeOverlay>;
    fn nodepools(&self) -> Vec<NodePool>;
    fn buffer_sources(&self) -> BufferSources;
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

/// What CapacityBuffers may take their shape from, as the host stores it.
#[derive(Debug, Clone, Default)]
pub struct BufferSources {
    pub buffers: Vec<CapacityBuffer>,
    pub pod_templates: Vec<PodTemplate>,
    pub deployments: Vec<Deployment>,
    pub statefulsets: Vec<StatefulSet>,
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
    /// The nodes' version when left-over disruption taints were last looked for.
    taints_seen: Option<u64>,
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

    /// One run of every step, in order, then the host's [`Host::flush`]. Interruption notices are answered once
    /// what they ask for was carried out (one whose writes failed is left unanswered, so it comes back).
    pub async fn run(&mut self, host: &mut impl Host) -> Report {
        self.buffers(host).await;
        self.provisioning(host).await;
        self.lifecycle(host).await;
        self.nominations(host).await;
        self.nodepool_status(host).await;
        self.static_capacity(host).await;
        let answers = self.interruptions(host).await;
        self.reservations(host).await;
        self.disruption(host).await;
        self.explanatory_events(host).await;
        let now = host.now();
        if now >= self.next_gc {
            self.garbage_collect(host).await;
            self.next_gc = now + self.gc_every;
        }
        let report = host.flush().await;
        for (answer, mut applied, keys) in answers {
            applied.failed.extend(report.failed.iter().filter(|f| keys.contains(&f.key)).cloned());
            let refused: Vec<&str> =
                applied.failed.iter().filter(|f| !f.conflict).map(|f| f.message.as_str()).collect();
            answer(if refused.is_empty() { Ok(()) } else { Err(refused.join("; ")) });
        }
        report
    }

    /// New disruption commands, in the order the controller made them (for the host's record), since last asked.
    fn new_records(&mut self, controller: &Controller) -> Vec<String> {
        let records = &controller.orchestrator().records;
        let new = records[self.records_seen.min(records.len())..].iter().map(|r| r.id.clone()).collect();
        self.records_seen = records.len();
        new
    }

    async fn apply_all(host: &mut impl Host, effects: Vec<Effect>) -> Report {
        if effects.is_empty() {
            return Report::default();
        }
        host.apply(effects).await
    }

    /// Hands the controller what the cloud offers now, and the overlays over it.
    async fn sync_catalog(host: &mut impl Host) {
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
            Self::apply_all(host, effects).await;
            let prices = crate::engine::overlay::instance_type_prices(&overlays);
            host.with_cloud(|controller, cloud| {
                cloud.set_overlays(Arc::new(controller.overlay_store()));
                cloud.set_type_price_overlays(&prices);
            });
        }
    }

    /// CapacityBuffer resolution (gate `CapacityBuffer`), whenever a buffer or what it may take its shape from
    /// changed.
    async fn buffers(&mut self, host: &mut impl Host) {
        if !host.controller_mut().gates().capacity_buffer {
            return;
        }
        let stamps = |v: Versions| [v.capacitybuffers, v.pod_templates, v.deployments];
        if self.buffers == Some(stamps(host.versions())) {
            return;
        }
        let s = host.buffer_sources();
        let src = crate::engine::capacitybuffer::Sources {
            pod_templates: &s.pod_templates,
            deployments: &s.deployments,
            statefulsets: &s.statefulsets,
            replicasets: &[],
        };
        let now = host.now();
        let effects = host.controller_mut().sync_buffers(&s.buffers, src, now);
        Self::apply_all(host, effects).await;
        // The writes just made are the controller's own: they need no second look.
        self.buffers = Some(stamps(host.versions()));
    }

    /// Provisioning: the pending pods are fed to the batcher (as the pod watch does) and, when its window is over,
    /// solved on the cluster; the claims it asks for are created and the solve is noted.
    async fn provisioning(&mut self, host: &mut impl Host) {
        let now = host.now();
        let uids = host.provisionable();
        host.controller_mut().observe_pending(uids.iter().map(String::as_str), now);
        if !host.controller_mut().provisioning_due(now) {
            return;
        }
        Self::sync_catalog(host).await;
        let started = Instant::now();
        let (effects, result) = host.read(|p| p.controller.provisioning_pass(p.snap, now));
        let millis = started.elapsed().as_secs_f64() * 1000.0;
        let Some(result) = result else {
            Self::apply_all(host, effects).await;
            return;
        };
        // One create at a time, so that each claim's name is known (a launch is a later step's, and is batched).
        let mut created = Vec::new();
        for e in effects {
            let create = matches!(e, Effect::CreateNodeClaim { .. });
            let report = host.apply(vec![e]).await;
            if create {
                created.push(created_name(&report));
            }
        }
        let launched = created.iter().any(Option::is_some);
        host.note(Note::Solved { result: &result, created, millis });
        // The claims are out: only now is the packing comparison worked out, by the host's means.
        if let Some(c) = host.controller_mut().take_comparison() {
            host.compare_packing(c, launched);
        }
    }

    /// Lifecycle, finalization and termination, skipped while nothing they read changed and none of their
    /// requeues is due.
    async fn lifecycle(&mut self, host: &mut impl Host) {
        let v = host.versions();
        let (draining, claims_deleting) = host.deleting();
        let seen = [v.nodes, v.nodeclaims, if draining { v.pods } else { 0 }, v.cloud];
        let now = host.now();
        let due = host.controller_mut().requeue_at().is_some_and(|t| t <= now);
        if self.lifecycle == Some(seen) && !due {
            return;
        }
        if claims_deleting && let Some(live) = host.recent_instances(now).await {
            host.controller_mut().set_live_instances(live.into_iter().map(|i| i.provider_id).collect());
        }
        let effects = host.read(|p| p.controller.lifecycle(p.snap, now));
        // A requeue stands once asked for, as controller-runtime's `RequeueAfter` does (a later reconcile does not
        // take it back); everything else the controller waits for is read from its `next_wake` when it is due.
        if let Some(t) = host.controller_mut().requeue_at() {
            host.wake_at(t);
        }
        Self::apply_all(host, effects).await;
        // What was read, not what the effects left: a controller reacts to its own writes too.
        self.lifecycle = Some(seen);
    }

    /// Cost packing: the pods the controller planned onto claims whose Nodes registered are nominated there.
    async fn nominations(&mut self, host: &mut impl Host) {
        if host.controller_mut().packing() != Packing::Cost {
            return;
        }
        let effects = host.read(|p| p.controller.nominations(p.snap));
        Self::apply_all(host, effects).await;
    }

    /// NodePool status (resources, node count, conditions), when the nodes, the claims or the NodePools' specs
    /// changed, as upstream's NodePool status controllers react to them.
    async fn nodepool_status(&mut self, host: &mut impl Host) {
        let v = host.versions();
        let seen = [v.nodes, v.nodeclaims, v.nodepool_specs];
        if self.nodepool_status == Some(seen) {
            return;
        }
        let now = host.now();
        let classes = host.node_classes();
        let effects = host.read(|p| p.controller.nodepool_status(p.snap, &classes, now));
        Self::apply_all(host, effects).await;
        self.nodepool_status = Some(seen);
    }

    /// Static NodePools (gate `StaticCapacity`): their scale-ups are noted as such.
    async fn static_capacity(&mut self, host: &mut impl Host) {
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
            let report = host.apply(vec![e]).await;
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

    /// Interruption notices: each is noted, then answered by the controller. Each comes back with what its
    /// answer waits for: the report of its effects so far, and their objects (see [`Tick::run`]).
    async fn interruptions(&mut self, host: &mut impl Host) -> Vec<Answer> {
        let now = host.now();
        let mut answers = Vec::new();
        for n in host.notices() {
            host.note(Note::Interruption(&n.message));
            let effects = host.read(|p| p.controller.interruption(p.snap, &n.message, now));
            let keys = effects.iter().map(Effect::object_key).collect();
            let report = Self::apply_all(host, effects).await;
            answers.push((n.answer, report, keys));
        }
        answers
    }

    /// Capacity blocks about to end: their claims go.
    async fn reservations(&mut self, host: &mut impl Host) {
        if !host.has_reservations() {
            return;
        }
        let now = host.now();
        let effects = host.read(|p| p.controller.reservation_expiration(p.cloud, p.snap, now));
        Self::apply_all(host, effects).await;
        host.note(Note::ReservationsChecked);
    }

    /// The disruption controller: pod-event times, drift, started commands, validation, then a pass if one is due.
    async fn disruption(&mut self, host: &mut impl Host) {
        Self::sync_catalog(host).await;
        // Pod events stamp their node's claim when they happen (to the second), not when a pass next looks
        // (consolidateAfter counts from them).
        self.pod_events(host, false).await;
        self.drift(host).await;
        let deleted = Self::orchestrate(host).await;
        self.stale_taints(host, deleted).await;
        Self::finish_validation(host).await;
        let now = host.now();
        let quiet = host.versions().quiet;
        if host.controller_mut().disruption_due(now, quiet) {
            self.disruption_pass(host).await;
        }
    }

    /// Drift detection when what it reads changed or a claim's recheck is due, so that a cluster at rest costs no
    /// disruption passes. The cloud's node-class drift verdicts are taken first.
    async fn drift(&mut self, host: &mut impl Host) {
        let stamps = |v: Versions| [v.nodepool_specs, v.nodeclaims, v.nodes];
        let now = host.now();
        if self.drift == Some(stamps(host.versions())) && now < self.drift_due {
            return;
        }
        let (effects, due) = host.read(|p| {
            p.controller.sync_drift(p.cloud, p.snap, now);
            p.controller.drift_check(p.snap, now)
        });
        Self::apply_all(host, effects).await;
        // Its own writes are not a reason to look again.
        self.drift = Some(stamps(host.versions()));
        // Every claim was just checked or is not due yet, so this is in the future.
        self.drift_due = due.unwrap_or(Millis::MAX);
    }

    /// `status.lastPodEventTime` on claims whose node gained or lost pods (consolidateAfter reads it). Counting
    /// walks every pod, and pods change at nearly every step of a busy cluster: unless a pass is about to read
    /// the result (`now`), count at most once per [`POD_EVENT_RESOLUTION`].
    async fn pod_events(&mut self, host: &mut impl Host, now: bool) {
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
        Self::apply_all(host, effects).await;
        let v = host.versions();
        self.pods_counted = Some([v.pods, v.nodes]);
        self.pods_counted_at = at;
    }

    /// Started commands: candidates go once their replacements are initialized, or the command rolls back. Says
    /// which NodeClaims it deleted.
    async fn orchestrate(host: &mut impl Host) -> BTreeSet<String> {
        if host.controller_mut().orchestrator().in_flight().is_empty() {
            return BTreeSet::new();
        }
        let now = host.now();
        let effects = host.read(|p| p.controller.orchestrate_commands(p.snap, now));
        let deleted = effects
            .iter()
            .filter_map(|e| match e {
                Effect::DeleteNodeClaim { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect();
        Self::apply_all(host, effects).await;
        deleted
    }

    /// `karpenter.sh/disrupted` taints no command holds (left by a process stopped mid-command) are removed,
    /// whenever the nodes changed; `deleted` are the claims the commands just finished with.
    async fn stale_taints(&mut self, host: &mut impl Host, deleted: BTreeSet<String>) {
        let nodes = host.versions().nodes;
        if self.taints_seen == Some(nodes) && deleted.is_empty() {
            return;
        }
        let effects = host.read(|p| p.controller.stale_taints(p.snap, &deleted));
        Self::apply_all(host, effects).await;
        self.taints_seen = Some(nodes);
    }

    /// A command whose validation delay is over is checked, and started or let go.
    async fn finish_validation(host: &mut impl Host) {
        let now = host.now();
        if host.controller_mut().orchestrator().validation_due_at().is_none_or(|t| t > now) {
            return;
        }
        let effects = host.read(|p| p.controller.finish_validation(p.snap, now));
        Self::apply_all(host, effects).await;
    }

    async fn disruption_pass(&mut self, host: &mut impl Host) {
        let now = host.now();
        self.pod_events(host, true).await;
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
        Self::apply_all(host, effects).await;
    }

    /// The controller's explanatory Events, when due and the host publishes them.
    async fn explanatory_events(&mut self, host: &mut impl Host) {
        let now = host.now();
        if !host.explain_events() || host.controller_mut().explanatory_events_due().is_none_or(|t| t > now) {
            return;
        }
        let effects = host.read(|p| p.controller.explanatory_events(p.snap, now));
        Self::apply_all(host, effects).await;
    }

    /// Garbage collection of claims whose instance is gone, and the relabelling of instances whose reservation
    /// ended, on the same list of the cloud's instances (taken after the cluster was read, as upstream lists).
    async fn garbage_collect(&mut self, host: &mut impl Host) {
        let now = host.now();
        let Some(list) = host.list_instances(now).await else { return };
        let effects = host.read(|p| {
            let mut effects = p.controller.garbage_collect(p.snap, &list, now);
            effects.extend(p.controller.capacity_types(p.snap, &list));
            effects
        });
        host.controller_mut().set_live_instances(list.into_iter().map(|i| i.provider_id).collect());
        Self::apply_all(host, effects).await;
    }
}

/// An interruption notice's answer, waiting for the run to end: what its effects' report said so far, and the
/// objects they write.
type Answer = (Box<dyn FnOnce(Result<(), String>) + Send>, Report, BTreeSet<String>);

/// Runs `f` (a run or an operator action) on a host that answers every call at once, as the simulated world does;
/// `None` if it had to wait, which such a host never does.
pub fn immediate<F: std::future::Future>(f: F) -> Option<F::Output> {
    futures_util::FutureExt::now_or_never(f)
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
/// is no such open proposal (or in dry-run mode). What starting it wrote comes back with it.
pub async fn approve(host: &mut impl Host, id: &str) -> Result<(Approval, Report), String> {
    Tick::sync_catalog(host).await;
    let now = host.now();
    let (effects, approval) = host.read(|p| p.controller.approve_proposal(p.snap, id, now))?;
    let mut report = Tick::apply_all(host, effects).await;
    report.absorb(host.flush().await);
    Ok((approval, report))
}

/// An operator's rejection of an open proposal: not offered again until the state it was made on changes.
pub fn reject(host: &mut impl Host, id: &str) -> Result<String, String> {
    let (state, now) = (host.state_key(), host.now());
    host.controller_mut().reject(id, state, now)
}

/// An operator's "repair now" on `node` (see [`Controller::repair_now`]), carried out at once.
pub async fn repair_now(host: &mut impl Host, node: &str) -> Result<(String, Report), String> {
    let now = host.now();
    let (effects, message) = host.read(|p| p.controller.repair_now(p.snap, node, now))?;
    let mut report = Tick::apply_all(host, effects).await;
    report.absorb(host.flush().await);
    Ok((message, report))
}

/// Why each node is (not) being disrupted right now: the "why won't this node consolidate" view.
pub async fn explain(host: &mut impl Host) -> std::collections::BTreeMap<String, Outlook> {
    Tick::sync_catalog(host).await;
    let now = host.now();
    host.read(|p| p.controller.explain_nodes(p.snap, now))
}
