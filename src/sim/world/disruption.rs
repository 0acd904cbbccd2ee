//! The world's side of disruption: it runs the controller's disruption state machine
//! ([`crate::controller::disruption::Orchestrator`]: passes, approval gate, validation, orchestration queue), its
//! drift checks and pod-event times on the virtual clock — only when what they read changed or a timed input is due
//! — and carries out what they ask on the store (taint and mark candidates, create replacements, delete or give back
//! candidates, write conditions). The decisions are the controller's; docs/architecture.md ("One controller") says
//! what is shared so far.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::time::Instant;

use k8s_openapi::api::core::v1::NodeSpec;

use super::{Decision, SECOND, Settings, Timer, World};
use crate::controller::disruption::{self, Act, Approval, Orchestrator, PassOutcome};
use crate::controller::drift::{DriftRead, DriftTracker};
use crate::controller::pod_events::PodEventTracker;
use crate::engine::api::nodeclaim::COND_DISRUPTION_REASON;
use crate::engine::disruption::consolidation::Outlook;
use crate::engine::disruption::gate::Mode;
use crate::engine::disruption::validation::validate;
use crate::engine::disruption::{Command, Context, DisruptionOptions, Method, explain_nodes, pass};
use crate::engine::labels;
use crate::engine::lifecycle::{self, DeleteReason};
use crate::engine::provisioning::Millis;
use crate::engine::termination::disrupted_taint;

pub use crate::controller::disruption::CommandState as DisruptionState;

/// A disruption decision as the report and the dashboard show it.
#[derive(Debug, Clone, PartialEq)]
pub struct DisruptionRecord {
    pub id: String,
    pub at: Millis,
    pub method: Method,
    pub candidates: Vec<String>,
    pub replacements: Vec<Vec<String>>,
    pub savings_per_hour: f64,
    pub state: DisruptionState,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PassTiming {
    pub at: Millis,
    pub candidates: usize,
    pub millis: f64,
}

pub struct Controller {
    /// The controller's disruption state machine (shared with the live controller).
    pub orchestrator: Orchestrator,
    /// Nodes nominated for pending pods, until when.
    pub nominated: BTreeMap<String, Millis>,
    /// Pod events per node (shared with the live controller); the world starts from no pods at all.
    pod_events: PodEventTracker,
    /// (pods, nodes) stamps pods were last counted per node at, and when.
    pods_counted_at: Option<[u64; 2]>,
    pods_counted_time: Millis,
    pub passes: Vec<PassTiming>,
    /// When each NodeClaim's drift was last checked (shared with the live controller).
    drift: DriftTracker,
    /// Drift detection: the (nodepools, nodeclaims, nodes) stamps it last ran at, and when a claim's 5-minute
    /// recheck is next due.
    drift_seen: Option<[u64; 3]>,
    drift_due: Millis,
}

impl Controller {
    pub fn new(s: &Settings) -> Self {
        let c = s.controller();
        let options =
            DisruptionOptions { spot_to_spot: c.spot_to_spot, multi_node_cap: c.multi_node_cap, ..Default::default() };
        Controller {
            orchestrator: Orchestrator::new(c.mode, options, c.validation_delay),
            nominated: BTreeMap::new(),
            pod_events: PodEventTracker::from_empty(),
            pods_counted_at: None,
            pods_counted_time: Millis::MIN,
            passes: Vec::new(),
            drift: DriftTracker::default(),
            drift_seen: None,
            drift_due: Millis::MIN,
        }
    }
}

impl World {
    /// One reconcile of the disruption controller.
    pub(super) fn disruption(&mut self) {
        // Pod events stamp their node's claim when they happen (to the second), not when a pass next looks
        // (consolidateAfter counts from them).
        self.record_pod_events(false);
        self.drift();
        self.orchestrate();
        self.finish_validation();
        if self.disruption.orchestrator.pass_due(self.now, self.quiet_key()) {
            self.disruption_pass();
        }
    }

    /// What a quiet period is keyed on: any write to the store ends it.
    fn quiet_key(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.cluster.stamps().hash(&mut h);
        h.finish()
    }

    /// A cheap summary of the cluster state disruption depends on: nodes, claims, pod bindings, NodePools, PDBs.
    pub fn state_generation(&mut self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.fingerprint().hash(&mut h);
        for (name, p) in &self.cluster.nodepools {
            name.hash(&mut h);
            serde_json::to_string(&p.spec).unwrap_or_default().hash(&mut h);
        }
        self.cluster.pdbs.len().hash(&mut h);
        h.finish()
    }

    /// The consolidation state: the cluster's generation, also moving every 5 minutes by itself (upstream).
    fn generation(&mut self) -> u64 {
        disruption::consolidation_generation(self.state_generation(), self.now)
    }

    /// Drift detection when what it reads changed or a claim's recheck is due — on its own clock, so that a
    /// cluster at rest costs no disruption passes.
    fn drift(&mut self) {
        let stamps = |c: &super::Cluster| [c.nodepools.stamp(), c.nodeclaims.stamp(), c.nodes.stamp()];
        if self.disruption.drift_seen == Some(stamps(&self.cluster)) && self.now < self.disruption.drift_due {
            return;
        }
        self.detect_drift();
        self.disruption.drift_seen = Some(stamps(&self.cluster));
        // Every claim was just checked or is not due yet, so this is in the future.
        let due = self.disruption.drift.next_due(self.now);
        self.disruption.drift_due = due.unwrap_or(Millis::MAX);
        if let Some(t) = due {
            self.at(t, Timer::Wake);
        }
    }

    /// Sets `Drifted` on NodeClaims that no longer match their NodePool (engine.md §6), as the controller's drift
    /// tracker says.
    fn detect_drift(&mut self) {
        let now = self.now;
        let catalogs = self.catalogs();
        let node_by_pid: BTreeMap<&str, &k8s_openapi::api::core::v1::Node> = self
            .cluster
            .nodes
            .values()
            .filter_map(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()).map(|p| (p, &**n)))
            .collect();
        let claims: Vec<&crate::engine::api::NodeClaim> = self.cluster.nodeclaims.values().map(|c| &**c).collect();
        let pools = &self.cluster.nodepools;
        let pool = |name: &str| pools.get(name).map(|p| &**p);
        let node_labels = |c: &crate::engine::api::NodeClaim| {
            c.provider_id().and_then(|pid| node_by_pid.get(pid)).and_then(|n| n.metadata.labels.as_ref())
        };
        let types = |name: &str| catalogs.get(name).map_or(&[][..], Vec::as_slice);
        let no_class_drift = BTreeMap::new();
        let read = DriftRead {
            claims: &claims,
            pool: &pool,
            node_labels: &node_labels,
            types: &types,
            class_drift: &no_class_drift,
        };
        let updates = self.disruption.drift.check(&read, now);
        for (name, status, reason, message) in updates {
            if let Some(c) = self.cluster.nodeclaims.get_mut(&name) {
                lifecycle::set_condition(
                    c,
                    crate::engine::api::nodeclaim::COND_DRIFTED,
                    status,
                    &reason,
                    &message,
                    now,
                );
            }
        }
    }

    /// Writes `status.lastPodEventTime` on claims whose node gained or lost pods (consolidateAfter reads it).
    /// Counting walks every pod, and pods change at nearly every step of a busy simulation: unless a pass is about
    /// to read the result (`now`), count at most once per simulated second — the resolution of the timestamp.
    fn record_pod_events(&mut self, now: bool) {
        let stamps = [self.cluster.pods.stamp(), self.cluster.nodes.stamp()];
        if self.disruption.pods_counted_at == Some(stamps)
            || (!now && self.now < self.disruption.pods_counted_time.saturating_add(SECOND))
        {
            if self.disruption.pods_counted_at != Some(stamps) {
                // Look again when the second is over, even if nothing else happens by then.
                self.at(self.disruption.pods_counted_time.saturating_add(SECOND), Timer::Wake);
            }
            return;
        }
        // Counted with borrowed names: this runs whenever pods change, over every pod.
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for p in self.cluster.pods.values() {
            if let Some(n) = p.node_name() {
                *counts.entry(n).or_insert(0) += 1;
            }
        }
        let now = self.now;
        let due: Vec<String> = self
            .disruption
            .pod_events
            .observe(&counts, self.cluster.nodes.keys().map(String::as_str), now)
            .into_iter()
            .map(str::to_string)
            .collect();
        for node in due {
            let pid = self.cluster.nodes.get(&node).and_then(|n| n.spec.as_ref()).and_then(|s| s.provider_id.clone());
            let claim = self
                .cluster
                .nodeclaims
                .iter()
                .find(|(_, c)| pid.is_some() && c.provider_id() == pid.as_deref())
                .map(|(k, _)| k.clone());
            if let Some(c) = claim.and_then(|k| self.cluster.nodeclaims.get_mut(&k)) {
                c.status.get_or_insert_with(Default::default).last_pod_event_time = Some(lifecycle::rfc3339(now));
                self.disruption.pod_events.written(&node, now);
            }
        }
        self.disruption.pods_counted_at = Some([self.cluster.pods.stamp(), self.cluster.nodes.stamp()]);
        self.disruption.pods_counted_time = self.now;
    }

    fn disruption_pass(&mut self) {
        let now = self.now;
        self.disruption.nominated.retain(|_, until| *until > now);
        self.record_pod_events(true);
        self.withdraw_stale();
        let generation = self.generation();
        let options = self.disruption.orchestrator.begin_pass(now, generation);
        if !self.cluster.nodeclaims.values().any(|c| c.metadata.deletion_timestamp.is_none()) {
            return;
        }
        let busy = self.disruption.orchestrator.busy();
        let (result, millis) = self.context_with(busy, Some(options), true, |ctx| {
            let started = Instant::now();
            let result = pass(ctx);
            (result, started.elapsed().as_secs_f64() * 1000.0)
        });
        self.disruption.passes.push(PassTiming { at: now, candidates: result.candidates, millis });
        let outcome = PassOutcome { result, generation, state: self.state_generation(), quiet_key: self.quiet_key() };
        // Offerings out of capacity come back: an unchanged store may answer differently then.
        let ice = self.ice.values().min().copied().unwrap_or(Millis::MAX);
        let (pools, pods) = (&self.cluster.nodepools, &self.cluster.pods);
        let next_decision = &mut self.next_decision;
        let acts = self.disruption.orchestrator.pass_done(
            outcome,
            now,
            || {
                *next_decision += 1;
                format!("d-{next_decision}")
            },
            |recheck| {
                disruption::quiet_until(now, recheck, pools.values().map(|p| &**p), pods.values().map(|p| &**p))
                    .min(ice)
            },
        );
        self.sync_disruption_records();
        self.schedule_disruption_wakes();
        self.carry_out(acts);
    }

    /// Wakes the world when the disruption controller next needs to look: a command found (upstream's immediate
    /// requeue), a validation due, a quiet period ending.
    fn schedule_disruption_wakes(&mut self) {
        let o = &self.disruption.orchestrator;
        let mut wakes = Vec::new();
        if o.next_pass_at() > self.now && o.quiet().is_none() {
            wakes.push(o.next_pass_at());
        }
        if let Some(due) = o.validation_due_at() {
            wakes.push(due);
        }
        if let Some((_, until)) = o.quiet()
            && until < Millis::MAX
        {
            wakes.push(until);
        }
        for t in wakes {
            self.at(t, Timer::Wake);
        }
    }

    /// New disruption commands become decisions in the record, in the order the controller made them.
    fn sync_disruption_records(&mut self) {
        let records = &self.disruption.orchestrator.records;
        for r in &records[self.disruption_records_seen.min(records.len())..] {
            self.record.decisions.push(Decision::Disruption(r.id.clone()));
        }
        self.disruption_records_seen = records.len();
    }

    /// A disruption decision as the report and the dashboard show it.
    pub fn disruption_record(&self, id: &str) -> Option<DisruptionRecord> {
        let r = self.disruption.orchestrator.record_of(id)?;
        let cmd = &r.command;
        Some(DisruptionRecord {
            id: r.id.clone(),
            at: r.at,
            method: cmd.method,
            candidates: cmd.node_names(),
            replacements: cmd.replacements.iter().map(|r| r.instance_types.clone()).collect(),
            savings_per_hour: cmd.savings_per_hour,
            state: r.state.clone(),
            summary: cmd.summary(),
        })
    }

    /// Carries out on the store what the disruption controller asks.
    fn carry_out(&mut self, acts: Vec<Act>) {
        for act in acts {
            match act {
                Act::Start { id, command } => self.start_command(&id, &command),
                Act::DeleteCandidates { command, .. } => {
                    for c in &command.candidates {
                        self.delete_nodeclaim(&c.nodeclaim, DeleteReason::Disrupted);
                    }
                }
                Act::RollBack { command, .. } => {
                    for c in &command.candidates {
                        if let Some(n) = self.cluster.nodes.get_mut(&c.node)
                            && let Some(t) = n.spec.as_mut().and_then(|s| s.taints.as_mut())
                        {
                            t.retain(|t| t.key != labels::TAINT_DISRUPTED);
                        }
                        if let Some(st) = self.cluster.nodeclaims.get_mut(&c.nodeclaim).and_then(|c| c.status.as_mut())
                        {
                            st.conditions.retain(|c| c.type_ != COND_DISRUPTION_REASON);
                        }
                    }
                }
            }
        }
    }

    /// The validation context without the command's own nodes counted as busy.
    fn validate_now(&mut self, cmd: &Command) -> Result<(), String> {
        let mut busy = self.disruption.orchestrator.busy();
        for c in &cmd.candidates {
            busy.remove(&c.node);
        }
        self.context_with(busy, None, false, |ctx| validate(ctx, cmd).map_err(|e| format!("{}: {e}", e.kind())))
    }

    fn finish_validation(&mut self) {
        let Some((id, cmd)) = self.disruption.orchestrator.due_validation(self.now) else { return };
        let verdict = self.validate_now(&cmd);
        let acts = self.disruption.orchestrator.validated(id, cmd, verdict, self.now);
        self.carry_out(acts);
    }

    /// Approves an open proposal: validated against the cluster as it is now, then started
    /// ([`Approval::Started`]) or recorded as invalidated with the reason ([`Approval::Invalidated`]). `Err` when
    /// there is no such open proposal (or in dry-run mode). The live controller answers the same way.
    pub fn approve(&mut self, id: &str) -> Result<Approval, String> {
        // A proposal that is not open is refused by the gate, whatever the verdict.
        let proposal = self.disruption.orchestrator.proposal(id).cloned();
        let verdict = proposal.map_or(Ok(()), |cmd| self.validate_now(&cmd));
        let (approval, acts) = self.disruption.orchestrator.approve(id, self.now, verdict)?;
        self.carry_out(acts);
        Ok(approval)
    }

    pub fn reject(&mut self, id: &str) -> Result<(), String> {
        let generation = self.state_generation();
        self.disruption.orchestrator.reject(id, generation, self.now)
    }

    /// Switches the disruption mode at run time (the dashboard's `:mode`). Open proposals are withdrawn, since
    /// they were made under the old mode's rules, and a pass runs at once under the new one.
    pub fn set_mode(&mut self, mode: Mode) {
        self.disruption.orchestrator.set_mode(mode, self.now);
    }

    /// Why each node is (not) being disrupted right now: the "why won't this node consolidate" view.
    pub fn explain(&mut self) -> BTreeMap<String, Outlook> {
        self.with_disruption_context(None, explain_nodes)
    }

    /// Runs `f` on the disruption context of the current state: what a pass, an explanation or a validation reads.
    /// `options` overrides the controller's own (the pass sets `consolidated`).
    pub fn with_disruption_context<R>(
        &mut self,
        options: Option<DisruptionOptions>,
        f: impl FnOnce(&Context<'_>) -> R,
    ) -> R {
        let busy = self.disruption.orchestrator.busy();
        self.context_with(busy, options, false, f)
    }

    fn context_with<R>(
        &mut self,
        busy: BTreeSet<String>,
        options: Option<DisruptionOptions>,
        assume_pending: bool,
        f: impl FnOnce(&Context<'_>) -> R,
    ) -> R {
        let catalogs = self.catalogs();
        let mut snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        let pending = if assume_pending { self.disruption.orchestrator.pending_commands() } else { Vec::new() };
        let assumed = disruption::assumed_nodeclaims(snap.nodeclaims, &pending, self.now);
        if let Some(claims) = &assumed {
            snap.nodeclaims = claims.into();
        }
        let options = options.unwrap_or_else(|| self.disruption.orchestrator.options().clone());
        let ctx = Context {
            snap,
            catalogs: &catalogs,
            policy: &self.catalog.label_policy,
            now: self.now,
            busy: &busy,
            nominated: &self.disruption.nominated,
            options: &options,
        };
        f(&ctx)
    }

    /// Ids of proposals waiting for an operator.
    pub fn awaiting_approval(&self) -> Vec<String> {
        self.disruption.orchestrator.awaiting_approval()
    }

    /// Proposals whose nodes are gone or going are withdrawn.
    fn withdraw_stale(&mut self) {
        let nodes = &self.cluster.nodes;
        self.disruption
            .orchestrator
            .withdraw_stale(self.now, |name| nodes.get(name).map(|n| n.metadata.deletion_timestamp.is_some()));
    }

    /// Starts a command: mark the candidates (taint + `DisruptionReason`), create the replacements.
    fn start_command(&mut self, id: &str, cmd: &Command) {
        let now = self.now;
        for c in &cmd.candidates {
            if let Some(n) = self.cluster.nodes.get_mut(&c.node) {
                let taints = n.spec.get_or_insert_with(NodeSpec::default).taints.get_or_insert_with(Vec::new);
                if !taints.iter().any(|t| t.key == labels::TAINT_DISRUPTED) {
                    taints.push(disrupted_taint());
                }
            }
            if let Some(claim) = self.cluster.nodeclaims.get_mut(&c.nodeclaim) {
                let reason = cmd.reason().as_str();
                lifecycle::set_condition(claim, COND_DISRUPTION_REASON, "True", reason, &cmd.summary(), now);
            }
        }
        for r in &cmd.replacements {
            let name = self.create_nodeclaim(r.nodeclaim.clone(), &r.nodepool, r.instance_types.clone());
            self.disruption.orchestrator.replacement_created(id, Some(name));
        }
    }

    /// Drives started commands: delete candidates once replacements are initialized, or roll back.
    fn orchestrate(&mut self) {
        if self.disruption.orchestrator.in_flight().is_empty() {
            return;
        }
        let now = self.now;
        let claims = &self.cluster.nodeclaims;
        let (acts, waiting) = self.disruption.orchestrator.orchestrate(now, |c| claims.get(c).map(|c| &**c));
        if waiting {
            self.at(now + SECOND, Timer::Wake);
        }
        self.carry_out(acts);
    }
}
