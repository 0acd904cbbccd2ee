//! The world's side of disruption: it runs the controller's disruption steps ([`crate::controller::Controller`]'s
//! orchestration, validation, passes, approvals — the same code the live planner runs) on the virtual clock, each
//! on the store as the previous step left it, and carries out their effects like any other. Drift checks and
//! pod-event times run here on their own clock (only when what they read changed or a timed input is due) with the
//! controller's trackers. What remains the world's own is when to look and what to record for the report.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::time::Instant;

use super::{Decision, SECOND, Timer, World};
use crate::controller::PassKeys;
use crate::controller::disruption::Approval;
use crate::engine::disruption::consolidation::Outlook;
use crate::engine::disruption::gate::Mode;
use crate::engine::disruption::{Context, DisruptionOptions, Method};
use crate::engine::provisioning::Millis;

use crate::controller::disruption::CommandState;

/// A disruption decision as the report and the dashboard show it.
#[derive(Debug, Clone, PartialEq)]
pub struct DisruptionRecord {
    pub id: String,
    pub at: Millis,
    pub method: Method,
    pub candidates: Vec<String>,
    pub replacements: Vec<Vec<String>>,
    pub savings_per_hour: f64,
    pub state: CommandState,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PassTiming {
    pub at: Millis,
    pub candidates: usize,
    pub millis: f64,
}

/// The world's bookkeeping around the controller's disruption steps.
pub struct Controller {
    /// (pods, nodes) stamps pods were last counted per node at, and when.
    pods_counted_at: Option<[u64; 2]>,
    pods_counted_time: Millis,
    pub passes: Vec<PassTiming>,
    /// Drift detection: the (nodepools, nodeclaims, nodes) stamps it last ran at, and when a claim's 5-minute
    /// recheck is next due.
    drift_seen: Option<[u64; 3]>,
    drift_due: Millis,
}

impl Controller {
    pub fn new() -> Self {
        Controller {
            pods_counted_at: None,
            pods_counted_time: Millis::MIN,
            passes: Vec::new(),
            drift_seen: None,
            drift_due: Millis::MIN,
        }
    }
}

impl World {
    /// One reconcile of the disruption controller.
    pub(super) fn disruption(&mut self) {
        self.sync_catalog();
        // Pod events stamp their node's claim when they happen (to the second), not when a pass next looks
        // (consolidateAfter counts from them).
        self.record_pod_events(false);
        self.drift();
        self.orchestrate();
        self.finish_validation();
        let key = self.quiet_key();
        let due = self.controller.disruption_due(self.now, key);
        if due {
            self.disruption_pass();
        }
    }

    /// What a quiet period is keyed on: any write to the store ends it.
    fn quiet_key(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let mut stamps = self.cluster.stamps();
        // NodePool status writes are not changes a pass could answer differently to.
        stamps[0] = self.nodepool_spec_stamp();
        stamps.hash(&mut h);
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

    /// Drift detection when what it reads changed or a claim's recheck is due — on its own clock, so that a
    /// cluster at rest costs no disruption passes.
    fn drift(&mut self) {
        let stamps = |w: &World| [w.nodepool_spec_stamp(), w.cluster.nodeclaims.stamp(), w.cluster.nodes.stamp()];
        if self.disruption.drift_seen == Some(stamps(self)) && self.now < self.disruption.drift_due {
            return;
        }
        let snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        let (effects, due) = self.controller.drift_check(&snap, self.now);
        self.apply_effects(effects);
        // Its own writes are not a reason to look again.
        self.disruption.drift_seen = Some(stamps(self));
        // Every claim was just checked or is not due yet, so this is in the future.
        self.disruption.drift_due = due.unwrap_or(Millis::MAX);
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
        let snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        let effects = self.controller.pod_event_times(&snap, self.now);
        self.apply_effects(effects);
        self.disruption.pods_counted_at = Some([self.cluster.pods.stamp(), self.cluster.nodes.stamp()]);
        self.disruption.pods_counted_time = self.now;
    }

    fn disruption_pass(&mut self) {
        let now = self.now;
        self.record_pod_events(true);
        let keys = PassKeys {
            state: self.state_generation(),
            quiet_key: self.quiet_key(),
            // Offerings out of capacity come back: an unchanged store may answer differently then.
            quiet_cap: self.cloud.soonest_return().unwrap_or(Millis::MAX),
        };
        let next_decision = &mut self.next_decision;
        let mut new_id = || {
            *next_decision += 1;
            format!("d-{next_decision}")
        };
        let snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        let started = Instant::now();
        let (effects, ran) = self.controller.disruption_pass(&snap, now, keys, &mut new_id);
        if let Some(candidates) = ran {
            let millis = started.elapsed().as_secs_f64() * 1000.0;
            self.disruption.passes.push(PassTiming { at: now, candidates, millis });
        }
        self.sync_disruption_records();
        self.apply_effects(effects);
    }

    /// New disruption commands become decisions in the record, in the order the controller made them.
    fn sync_disruption_records(&mut self) {
        let records = &self.controller.orchestrator().records;
        for r in &records[self.disruption_records_seen.min(records.len())..] {
            self.record.decisions.push(Decision::Disruption(r.id.clone()));
        }
        self.disruption_records_seen = records.len();
    }

    /// A disruption decision as the report and the dashboard show it.
    pub fn disruption_record(&self, id: &str) -> Option<DisruptionRecord> {
        let r = self.controller.orchestrator().record_of(id)?;
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

    /// Approves an open proposal: validated against the cluster as it is now, then started
    /// ([`Approval::Started`]) or recorded as invalidated with the reason ([`Approval::Invalidated`]). `Err` when
    /// there is no such open proposal (or in dry-run mode). The live controller answers the same way.
    pub fn approve(&mut self, id: &str) -> Result<Approval, String> {
        self.sync_catalog();
        let snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        let (effects, approval) = self.controller.approve_proposal(&snap, id, self.now)?;
        self.apply_effects(effects);
        Ok(approval)
    }

    pub fn reject(&mut self, id: &str) -> Result<(), String> {
        let generation = self.state_generation();
        self.controller.reject(id, generation, self.now).map(|_| ())
    }

    /// Switches the disruption mode at run time (the dashboard's `:mode`). Open proposals are withdrawn, since
    /// they were made under the old mode's rules, and a pass runs at once under the new one.
    pub fn set_mode(&mut self, mode: Mode) {
        self.controller.set_mode(mode, self.now);
    }

    /// Switches the packing strategy at run time (the dashboard's `:packing`): the next provisioning solve uses it.
    pub fn set_packing(&mut self, packing: crate::engine::packing::Packing) {
        self.settings.controller.packing = packing;
        self.controller.set_packing(packing);
    }

    /// Why each node is (not) being disrupted right now: the "why won't this node consolidate" view.
    pub fn explain(&mut self) -> BTreeMap<String, Outlook> {
        self.sync_catalog();
        let snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        self.controller.explain_nodes(&snap, self.now)
    }

    /// Runs `f` on the disruption context of the current state, as a pass would see it (`options` overrides the
    /// controller's own): for benchmarks of the engine's passes.
    pub fn with_disruption_context<R>(
        &mut self,
        options: Option<DisruptionOptions>,
        f: impl FnOnce(&Context<'_>) -> R,
    ) -> R {
        let catalogs = self.catalogs();
        let busy = self.controller.busy();
        let snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        let options = options.unwrap_or_else(|| self.controller.orchestrator().options().clone());
        let ctx = Context {
            snap,
            catalogs: &catalogs,
            policy: &self.catalog.label_policy,
            now: self.now,
            busy: &busy,
            nominated: self.controller.nominated(),
            buffer_nodes: self.controller.buffer_nodes(),
            options: &options,
        };
        f(&ctx)
    }

    /// Checks a command whose validation delay is over, and starts it or lets it go.
    fn finish_validation(&mut self) {
        if self.controller.orchestrator().validation_due_at().is_none_or(|t| t > self.now) {
            return;
        }
        let snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        let effects = self.controller.finish_validation(&snap, self.now);
        self.apply_effects(effects);
    }

    /// Drives started commands: delete candidates once replacements are initialized, or roll back.
    fn orchestrate(&mut self) {
        if self.controller.orchestrator().in_flight().is_empty() {
            return;
        }
        let now = self.now;
        let snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        let effects = self.controller.orchestrate_commands(&snap, now);
        self.apply_effects(effects);
    }
}
