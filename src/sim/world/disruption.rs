//! The world's disruption controller: runs the engine's disruption passes on the clock, passes commands through
//! the approval gate, validates them after the validation delay (auto mode) or at approval, starts them (taint
//! and mark the candidates, launch replacements) and drives the orchestration queue until the candidates are
//! deleted or the command fails and is rolled back.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::time::Instant;

use k8s_openapi::api::core::v1::NodeSpec;

use super::{Decision, MINUTE, SECOND, Settings, Timer, World};
use crate::engine::api::nodeclaim::COND_DISRUPTION_REASON;
use crate::engine::disruption::consolidation::Outlook;
use crate::engine::disruption::gate::{Gate, Mode};
use crate::engine::disruption::queue::{self, InFlight, Step};
use crate::engine::disruption::validation::validate;
use crate::engine::disruption::{Command, Context, DisruptionOptions, Method, explain_nodes, pass};
use crate::engine::drift;
use crate::engine::labels;
use crate::engine::lifecycle::{self, DeleteReason};
use crate::engine::provisioning::Millis;
use crate::engine::termination::disrupted_taint;

/// Upstream's disruption polling period.
const POLL: Millis = 10 * SECOND;
/// The consolidation state refreshes itself at least this often (upstream 5 min).
const STATE_REFRESH: Millis = 5 * MINUTE;
/// lastPodEventTime is written at most this often per node (upstream dedupe).
const POD_EVENT_DEDUPE: Millis = 10 * SECOND;

#[derive(Debug, Clone, PartialEq)]
pub enum DisruptionState {
    /// Auto mode: waiting out the validation delay.
    Validating,
    AwaitingApproval,
    /// Dry-run: shown, never started.
    DryRun,
    /// Started: replacements launching, or candidates draining.
    InProgress,
    Executed,
    Rejected,
    Invalidated(String),
    Failed(String),
}

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
    pub gate: Gate,
    options: DisruptionOptions,
    validation_delay: Millis,
    pub in_flight: Vec<InFlight>,
    /// Auto mode: the command being validated, and when.
    validating: Option<(String, Command, Millis)>,
    next_pass: Millis,
    /// The consolidation methods found nothing at this generation; valid until the recheck time, if any.
    consolidated: Option<(u64, Millis)>,
    /// Nodes nominated for pending pods, until when.
    pub nominated: BTreeMap<String, Millis>,
    /// Bound pods per node at the last pass, and when each node's claim last had its pod event time written.
    pods_per_node: BTreeMap<String, usize>,
    /// (pods, nodes) stamps `pods_per_node` was counted at, and when.
    pods_counted_at: Option<[u64; 2]>,
    pods_counted_time: Millis,
    last_pod_event: BTreeMap<String, Millis>,
    pub passes: Vec<PassTiming>,
    /// Per NodeClaim: when drift was last checked, against which NodePool spec, and when the instance-type
    /// check last ran.
    drift_checked: BTreeMap<String, (Millis, u64, Millis)>,
    /// After a pass that found nothing: the store's stamps then, and until when the same inputs give the same
    /// answer (consolidateAfter and nominations running out, budget windows, offerings coming back). Passes are
    /// skipped while both hold — the result could not differ.
    quiet: Option<([u64; 12], Millis)>,
    /// Drift detection: the (nodepools, nodeclaims, nodes) stamps it last ran at, and when a claim's 5-minute
    /// recheck is next due.
    drift_seen: Option<[u64; 3]>,
    drift_due: Millis,
}

impl Controller {
    pub fn new(s: &Settings) -> Self {
        Controller {
            gate: Gate::new(s.disruption_mode),
            options: DisruptionOptions { spot_to_spot: s.spot_to_spot, ..Default::default() },
            validation_delay: s.validation_delay,
            in_flight: Vec::new(),
            validating: None,
            next_pass: Millis::MIN,
            consolidated: None,
            nominated: BTreeMap::new(),
            pods_per_node: BTreeMap::new(),
            pods_counted_at: None,
            pods_counted_time: Millis::MIN,
            last_pod_event: BTreeMap::new(),
            passes: Vec::new(),
            drift_checked: BTreeMap::new(),
            quiet: None,
            drift_seen: None,
            drift_due: Millis::MIN,
        }
    }

    /// Nodes in started commands, under validation or in open proposals.
    fn busy(&self) -> BTreeSet<String> {
        let mut b = self.gate.busy_nodes();
        for f in &self.in_flight {
            b.extend(f.command.candidates.iter().map(|c| c.node.clone()));
        }
        if let Some((_, c, _)) = &self.validating {
            b.extend(c.candidates.iter().map(|c| c.node.clone()));
        }
        b
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
        if self.now < self.disruption.next_pass || self.disruption.validating.is_some() {
            return;
        }
        let unchanged =
            self.disruption.quiet.is_some_and(|(stamps, until)| self.now < until && stamps == self.cluster.stamps());
        if !unchanged {
            self.disruption_pass();
        }
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
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.state_generation().hash(&mut h);
        (self.now.div_euclid(STATE_REFRESH)).hash(&mut h);
        h.finish()
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
        let due = self
            .disruption
            .drift_checked
            .values()
            .map(|(at, _, _)| (at + drift::DRIFT_REQUEUE).max(self.now + 1))
            .min();
        self.disruption.drift_due = due.unwrap_or(Millis::MAX);
        if let Some(t) = due {
            self.at(t, Timer::Wake);
        }
    }

    /// Sets `Drifted` on NodeClaims that no longer match their NodePool (engine.md §6): rechecked every 5 minutes
    /// or as soon as the NodePool changes; the instance-type check at most every 30 minutes.
    fn detect_drift(&mut self) {
        let now = self.now;
        let catalogs = self.catalogs();
        let pool_hash = |p: &crate::engine::api::NodePool| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            serde_json::to_string(&p.spec).unwrap_or_default().hash(&mut h);
            h.finish()
        };
        let mut updates = Vec::new();
        let names: Vec<String> = self.cluster.nodeclaims.keys().cloned().collect();
        let node_by_pid: BTreeMap<&str, &k8s_openapi::api::core::v1::Node> = self
            .cluster
            .nodes
            .values()
            .filter_map(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()).map(|p| (p, &**n)))
            .collect();
        let mut pool_hashes: BTreeMap<&str, u64> = BTreeMap::new();
        // Claims being deleted are not checked again; forget them so they never look due.
        let nodeclaims = &self.cluster.nodeclaims;
        self.disruption
            .drift_checked
            .retain(|k, _| nodeclaims.get(k).is_some_and(|c| c.metadata.deletion_timestamp.is_none()));
        for name in names {
            let Some(claim) = self.cluster.nodeclaims.get(&name) else { continue };
            if claim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(pool) = claim.nodepool().and_then(|p| self.cluster.nodepools.get(p)) else { continue };
            let hash = *pool_hashes.entry(pool.name()).or_insert_with(|| pool_hash(pool));
            let last = self.disruption.drift_checked.get(&name).copied();
            if last.is_some_and(|(at, h, _)| h == hash && now - at < drift::DRIFT_REQUEUE) {
                continue;
            }
            let it_due = last.is_none_or(|(_, _, it)| now - it >= drift::INSTANCE_TYPE_CHECK_INTERVAL);
            let node_labels =
                claim.provider_id().and_then(|pid| node_by_pid.get(pid)).and_then(|n| n.metadata.labels.as_ref());
            let types = catalogs.get(pool.name()).map_or(&[][..], Vec::as_slice);
            let mut input = drift::DriftInput::new(claim, pool, types, now);
            input.node_labels = node_labels;
            input.check_instance_type = it_due;
            let found = drift::detect(&input);
            if let Some(u) = drift::condition_update(claim, found.as_ref()) {
                updates.push((name.clone(), u));
            }
            let it_at = if it_due { now } else { last.map_or(now, |l| l.2) };
            self.disruption.drift_checked.insert(name, (now, hash, it_at));
        }
        for (name, (status, reason, message)) in updates {
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
        let mut counts: rustc_hash::FxHashMap<&str, usize> = rustc_hash::FxHashMap::default();
        for p in self.cluster.pods.values() {
            if let Some(n) = p.node_name() {
                *counts.entry(n).or_insert(0) += 1;
            }
        }
        let now = self.now;
        let seen = &self.disruption.pods_per_node;
        let changed: Vec<String> = self
            .cluster
            .nodes
            .keys()
            .filter(|n| counts.get(n.as_str()).copied().unwrap_or(0) != seen.get(n.as_str()).copied().unwrap_or(0))
            .cloned()
            .collect();
        if !changed.is_empty() || counts.len() != seen.len() {
            self.disruption.pods_per_node = counts.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        }
        for node in changed {
            let recent = self.disruption.last_pod_event.get(&node).is_some_and(|t| now - t < POD_EVENT_DEDUPE);
            if recent {
                continue;
            }
            let pid = self.cluster.nodes.get(&node).and_then(|n| n.spec.as_ref()).and_then(|s| s.provider_id.clone());
            let claim = self
                .cluster
                .nodeclaims
                .iter()
                .find(|(_, c)| pid.is_some() && c.provider_id() == pid.as_deref())
                .map(|(k, _)| k.clone());
            if let Some(c) = claim.and_then(|k| self.cluster.nodeclaims.get_mut(&k)) {
                c.status.get_or_insert_with(Default::default).last_pod_event_time = Some(lifecycle::rfc3339(now));
                self.disruption.last_pod_event.insert(node, now);
            }
        }
        self.disruption.pods_counted_at = Some([self.cluster.pods.stamp(), self.cluster.nodes.stamp()]);
        self.disruption.pods_counted_time = self.now;
    }

    fn disruption_pass(&mut self) {
        let now = self.now;
        self.disruption.next_pass = now + POLL;
        self.disruption.nominated.retain(|_, until| *until > now);
        self.record_pod_events(true);
        self.withdraw_stale();
        if !self.cluster.nodeclaims.values().any(|c| c.metadata.deletion_timestamp.is_none()) {
            return;
        }
        let generation = self.generation();
        let consolidated = self.disruption.consolidated.is_some_and(|(g, recheck)| g == generation && now < recheck);
        let options = DisruptionOptions { consolidated, ..self.disruption.options.clone() };
        let (result, millis) = self.with_disruption_context(Some(options), |ctx| {
            let started = Instant::now();
            let result = pass(ctx);
            (result, started.elapsed().as_secs_f64() * 1000.0)
        });
        self.disruption.passes.push(PassTiming { at: now, candidates: result.candidates, millis });
        if result.consolidated && !consolidated {
            let recheck = result.recheck_at.unwrap_or(Millis::MAX);
            self.disruption.consolidated = Some((generation, recheck));
        }
        let Some(cmd) = result.command else {
            // Nothing to do, and nothing will change until the store does or a timed input moves.
            self.go_quiet(result.recheck_at);
            return;
        };
        let mode = self.disruption.gate.mode();
        let suppressed = mode != Mode::Auto && {
            let state = self.state_generation();
            self.disruption.gate.suppressed(&cmd, state)
        };
        if suppressed {
            // Only what is already proposed or was rejected: as good as nothing until the store changes (which
            // also lifts a rejection) or the gate does (`reject`, `approve`, `set_mode` clear this).
            self.go_quiet(result.recheck_at);
            return;
        }
        self.disruption.quiet = None;
        // A command: look again soon, like upstream's immediate requeue.
        self.disruption.next_pass = now + SECOND;
        self.at(now + SECOND, Timer::Wake);
        match mode {
            Mode::Auto => {
                let id = self.decision_id("d");
                self.record_disruption(&id, &cmd, DisruptionState::Validating);
                if cmd.method == Method::Drift {
                    self.start_command(id, cmd);
                } else {
                    let due = now + self.disruption.validation_delay;
                    self.disruption.validating = Some((id, cmd, due));
                    self.at(due, Timer::Wake);
                }
            }
            mode => {
                let id = self.decision_id("d");
                let state =
                    if mode == Mode::DryRun { DisruptionState::DryRun } else { DisruptionState::AwaitingApproval };
                self.record_disruption(&id, &cmd, state);
                self.disruption.gate.propose(id, cmd, now);
            }
        }
    }

    /// Skips passes while the store's stamps hold and no timed input has moved (see `quiet`).
    fn go_quiet(&mut self, recheck_at: Option<Millis>) {
        let until = self.quiet_until(recheck_at);
        self.disruption.quiet = Some((self.cluster.stamps(), until));
        if until < Millis::MAX {
            self.at(until, Timer::Wake);
        }
    }

    /// When a pass over an unchanged store could first answer differently.
    fn quiet_until(&self, recheck_at: Option<Millis>) -> Millis {
        let mut until = recheck_at.unwrap_or(Millis::MAX);
        // Offerings out of capacity come back.
        if let Some(t) = self.ice.values().min() {
            until = until.min(*t);
        }
        // Scheduled budgets change at most once a minute (cron resolution).
        let scheduled =
            self.cluster.nodepools.values().any(|p| p.spec.disruption.budgets.iter().any(|b| b.schedule.is_some()));
        if scheduled {
            until = until.min((self.now.div_euclid(MINUTE) + 1) * MINUTE);
        }
        // Pods' timed do-not-disrupt runs out.
        let expiries = self.cluster.pods.values().filter_map(|p| crate::engine::termination::do_not_disrupt_expiry(p));
        if let Some(end) = expiries.filter(|end| *end > self.now).min() {
            until = until.min(end);
        }
        // Drift has its own clock (`drift`): a changed condition changes the store.
        until
    }

    fn record_disruption(&mut self, id: &str, cmd: &Command, state: DisruptionState) {
        self.record.decisions.push(Decision::Disruption(DisruptionRecord {
            id: id.to_string(),
            at: self.now,
            method: cmd.method,
            candidates: cmd.node_names(),
            replacements: cmd.replacements.iter().map(|r| r.instance_types.clone()).collect(),
            savings_per_hour: cmd.savings_per_hour,
            state,
            summary: cmd.summary(),
        }));
    }

    fn set_state(&mut self, id: &str, state: DisruptionState) {
        for d in self.record.decisions.iter_mut().rev() {
            if let Decision::Disruption(r) = d
                && r.id == id
            {
                r.state = state;
                return;
            }
        }
    }

    /// The validation context without the command's own nodes counted as busy.
    fn validate_now(&mut self, cmd: &Command) -> Result<(), String> {
        let mut busy = self.disruption.busy();
        for c in &cmd.candidates {
            busy.remove(&c.node);
        }
        self.context_with(busy, None, |ctx| validate(ctx, cmd).map_err(|e| format!("{}: {e}", e.kind())))
    }

    fn finish_validation(&mut self) {
        let Some((_, _, due)) = &self.disruption.validating else { return };
        if self.now < *due {
            return;
        }
        let Some((id, cmd, _)) = self.disruption.validating.take() else { return };
        match self.validate_now(&cmd) {
            Ok(()) => self.start_command(id, cmd),
            Err(why) => self.set_state(&id, DisruptionState::Invalidated(why)),
        }
        self.disruption.next_pass = self.now;
    }

    /// Approves an open proposal: validated against the cluster as it is now, then started. `Ok(false)` when it
    /// no longer holds (recorded as invalidated with the reason).
    pub fn approve(&mut self, id: &str) -> Result<bool, String> {
        let now = self.now;
        let cmd = self.disruption.gate.approve(id, now)?;
        // Its nodes are no longer held by an open proposal: the next pass may find something else.
        self.disruption.quiet = None;
        match self.validate_now(&cmd) {
            Ok(()) => {
                self.start_command(id.to_string(), cmd);
                Ok(true)
            }
            Err(why) => {
                self.set_state(id, DisruptionState::Invalidated(why));
                Ok(false)
            }
        }
    }

    pub fn reject(&mut self, id: &str) -> Result<(), String> {
        let generation = self.state_generation();
        self.disruption.gate.reject(id, generation, self.now)?;
        self.set_state(id, DisruptionState::Rejected);
        // The proposal's nodes are free again: the next pass may find another command with them.
        self.disruption.quiet = None;
        Ok(())
    }

    /// Switches the disruption mode at run time (the dashboard's `:mode`). Open proposals are withdrawn, since
    /// they were made under the old mode's rules, and a pass runs at once under the new one.
    pub fn set_mode(&mut self, mode: Mode) {
        let open: Vec<String> = self.disruption.gate.awaiting().map(|p| p.id.clone()).collect();
        self.disruption.gate.set_mode(mode, self.now);
        for id in open {
            self.set_state(&id, DisruptionState::Invalidated(format!("disruption mode changed to {mode}")));
        }
        self.disruption.next_pass = self.now;
        self.disruption.quiet = None;
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
        let busy = self.disruption.busy();
        self.context_with(busy, options, f)
    }

    fn context_with<R>(
        &mut self,
        busy: BTreeSet<String>,
        options: Option<DisruptionOptions>,
        f: impl FnOnce(&Context<'_>) -> R,
    ) -> R {
        let catalogs = self.catalogs();
        let snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        let options = options.unwrap_or_else(|| self.disruption.options.clone());
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
        if self.disruption.gate.mode() == Mode::DryRun {
            return Vec::new();
        }
        self.disruption.gate.awaiting().map(|p| p.id.clone()).collect()
    }

    /// Proposals whose nodes are gone or going are withdrawn.
    fn withdraw_stale(&mut self) {
        let mut stale = Vec::new();
        for p in self.disruption.gate.awaiting() {
            for c in &p.command.candidates {
                let gone = match self.cluster.nodes.get(&c.node) {
                    None => Some(format!("node {} is gone", c.node)),
                    Some(n) if n.metadata.deletion_timestamp.is_some() => {
                        Some(format!("node {} is being deleted", c.node))
                    }
                    Some(_) => None,
                };
                if let Some(why) = gone {
                    stale.push((p.id.clone(), why));
                    break;
                }
            }
        }
        let now = self.now;
        for (id, why) in stale {
            self.disruption.gate.withdraw(&id, &why, now);
            self.set_state(&id, DisruptionState::Invalidated(why));
        }
    }

    /// Starts a command: mark the candidates (taint + `DisruptionReason`), launch the replacements, queue it.
    fn start_command(&mut self, id: String, cmd: Command) {
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
        let mut names = Vec::new();
        for r in &cmd.replacements {
            names.push(self.create_nodeclaim(r.nodeclaim.clone(), &r.nodepool, r.instance_types.clone()));
        }
        self.set_state(&id, DisruptionState::InProgress);
        self.disruption.in_flight.push(InFlight { id, command: cmd, replacements: names, started_at: now });
    }

    /// Drives started commands: delete candidates once replacements are initialized, or roll back.
    fn orchestrate(&mut self) {
        if self.disruption.in_flight.is_empty() {
            return;
        }
        let now = self.now;
        let n = self.disruption.in_flight.len();
        let flights = std::mem::take(&mut self.disruption.in_flight);
        for f in flights {
            match queue::step(&f, |c| self.cluster.nodeclaims.get(c).map(|c| &**c), now, n) {
                Step::Wait => {
                    self.at(now + SECOND, Timer::Wake);
                    self.disruption.in_flight.push(f);
                }
                Step::DeleteCandidates => {
                    for c in &f.command.candidates {
                        self.delete_nodeclaim(&c.nodeclaim, DeleteReason::Disrupted);
                    }
                    self.set_state(&f.id, DisruptionState::Executed);
                }
                Step::Fail(why) => {
                    for c in &f.command.candidates {
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
                    self.set_state(&f.id, DisruptionState::Failed(why));
                }
            }
        }
    }
}
